//! Frame headers: building them and parsing them back with CRC checks.

use crate::crc::crc32;
use crate::wire::{FRAME_HEADER_LEN, FRAME_SYNC, MAX_PAYLOAD};
use alloc::vec::Vec;

/// A parsed frame header.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FrameHeader {
    pub kind: u8,
    pub seq: u32,
    pub first_record: u64,
    pub nrecords: u32,
    pub payload_len: u32,
    pub payload_crc: u32,
}

/// Why the bytes at hand are not a frame.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FrameError {
    /// More bytes are needed: the frame (header or payload) runs past the input.
    UnexpectedEof {
        /// The frame header, when it was complete and intact.
        header: Option<FrameHeader>,
    },
    /// No sync word here, or the header checksum failed, or the length is impossible.
    BadHeader,
    /// The header is intact but the payload checksum failed.
    BadPayload(FrameHeader),
}

/// Builds a whole frame (header + payload).
pub fn build(kind: u8, seq: u32, first_record: u64, nrecords: u32, payload: &[u8]) -> Vec<u8> {
    let mut f = Vec::with_capacity(FRAME_HEADER_LEN + payload.len());
    f.extend_from_slice(&FRAME_SYNC);
    f.push(kind);
    f.push(0);
    f.extend_from_slice(&[0, 0]);
    f.extend_from_slice(&seq.to_le_bytes());
    f.extend_from_slice(&first_record.to_le_bytes());
    f.extend_from_slice(&nrecords.to_le_bytes());
    f.extend_from_slice(&(payload.len() as u32).to_le_bytes());
    f.extend_from_slice(&crc32(payload).to_le_bytes());
    let hc = crc32(&f[..32]);
    f.extend_from_slice(&hc.to_le_bytes());
    f.extend_from_slice(payload);
    f
}

fn le32(b: &[u8], at: usize) -> u32 {
    u32::from_le_bytes([b[at], b[at + 1], b[at + 2], b[at + 3]])
}

/// Parses the frame header at the start of `buf`.
pub fn parse_header(buf: &[u8]) -> Result<FrameHeader, FrameError> {
    let n = buf.len().min(4);
    if buf[..n] != FRAME_SYNC[..n] {
        return Err(FrameError::BadHeader);
    }
    if buf.len() < FRAME_HEADER_LEN {
        return Err(FrameError::UnexpectedEof { header: None });
    }
    if crc32(&buf[..32]) != le32(buf, 32) {
        return Err(FrameError::BadHeader);
    }
    let h = FrameHeader {
        kind: buf[4],
        seq: le32(buf, 8),
        first_record: u64::from(le32(buf, 12)) | (u64::from(le32(buf, 16)) << 32),
        nrecords: le32(buf, 20),
        payload_len: le32(buf, 24),
        payload_crc: le32(buf, 28),
    };
    if h.payload_len > MAX_PAYLOAD {
        return Err(FrameError::BadHeader);
    }
    Ok(h)
}

/// Parses a whole frame at the start of `buf`: its header, its payload, and the
/// number of bytes it spans.
pub fn parse(buf: &[u8]) -> Result<(FrameHeader, &[u8], usize), FrameError> {
    let h = parse_header(buf)?;
    let end = FRAME_HEADER_LEN + h.payload_len as usize;
    if buf.len() < end {
        return Err(FrameError::UnexpectedEof { header: Some(h) });
    }
    let payload = &buf[FRAME_HEADER_LEN..end];
    if crc32(payload) != h.payload_crc {
        return Err(FrameError::BadPayload(h));
    }
    Ok((h, payload, end))
}
