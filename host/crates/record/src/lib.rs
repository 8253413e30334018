//! labperf-record: the host's lowest layers, which every other host crate builds on.
//!
//! It owns, lowest first: the base modules (`text`: escaping untrusted text and the words
//! around numbers; `progress`; `interrupt`: Ctrl-C counted; `fxhash`), [`files`] (files on
//! this machine: mapped, written by `-o`, private scratch, the binary cache, what a file is)
//! and [`record`] (a record file read: header, streamed records, counts, side band, events,
//! filters). It may use only `labperf-common` and outside crates, no other host crate; inside
//! it, `record` may use `files` and the base, `files` only the base (`tests/tests/tidy.rs`).

pub mod files;
pub mod fxhash;
pub mod interrupt;
pub mod progress;
pub mod record;
pub mod text;
