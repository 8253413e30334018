//! [`DecodeError`]: why bytes could not be decoded (the decoder and the user-stack coding share it).

use crate::varint::VarintError;
use core::fmt;

/// Why bytes could not be decoded. `UnexpectedEof` means "feed more bytes"
/// (or, at the real end of input, that the file was truncated); `Malformed`
/// means the bytes are wrong and no amount of further input will fix them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DecodeError {
    UnexpectedEof,
    Malformed(&'static str),
}

impl fmt::Display for DecodeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            DecodeError::UnexpectedEof => f.write_str("the input ended in the middle of an item"),
            DecodeError::Malformed(why) => write!(f, "malformed: {why}"),
        }
    }
}

impl From<VarintError> for DecodeError {
    fn from(e: VarintError) -> Self {
        match e {
            VarintError::Eof => DecodeError::UnexpectedEof,
            VarintError::Overflow => DecodeError::Malformed("varint longer than 64 bits"),
        }
    }
}
