//! The labperf record format: its specification, encoder, streaming decoder and decode helpers.
//!
//! `no_std` + `alloc`, no I/O: the agents write the bytes this crate produces,
//! the host feeds file bytes to [`Decoder`]. This page is the normative
//! specification of the format; the freestanding C agent is written from it.
//!
//! # File layout (wire version 2)
//!
//! All fixed-width integers are **little-endian**, whatever the target's byte order.
//!
//! ```text
//! prelude   12 bytes   magic "LABPERF\0" (8) | wire_version u16 | reserved u16 = 0
//! frame     header frame (kind 1, seq 0): postcard(Header)
//! frame     header-extension frame (kind 4, seq 1): tagged items, see below (version 2 on)
//! frame*    records frames (kind 2, seq 2, 3, ...): a run of records, see below
//! frame     trailer frame (kind 3, last seq): postcard(Trailer) then the trailer extension's
//!           items (see below), written on a clean finish only
//! ```
//!
//! Version 1 files have no header-extension frame (their records frames start at seq 1).
//!
//! ## Frames
//!
//! Every frame is a 36-byte frame header followed by `payload_len` payload bytes:
//!
//! | offset | size | field |
//! |---|---|---|
//! | 0 | 4 | sync `F5 4C 50 46` ([`FRAME_SYNC`]) |
//! | 4 | 1 | kind: 1 header, 2 records, 3 trailer, 4 header extension; other kinds are skipped by readers |
//! | 5 | 1 | flags, 0 |
//! | 6 | 2 | reserved, 0 |
//! | 8 | 4 | seq: 0 for the header frame, then +1 per frame |
//! | 12 | 8 | first_record: records in all earlier records frames |
//! | 20 | 4 | nrecords: records in this frame (THREAD definitions not counted) |
//! | 24 | 4 | payload_len, at most [`MAX_PAYLOAD`] |
//! | 28 | 4 | payload_crc: CRC-32 ([`crc::crc32`], zlib's) of the payload |
//! | 32 | 4 | header_crc: CRC-32 of bytes 0..32 of this frame header |
//!
//! A reader that meets a frame whose header CRC fails scans forward for the next
//! sync word and resumes there; a frame whose header is intact but whose payload
//! CRC fails is skipped whole, and its `nrecords` are reported lost. Gaps in `seq`
//! and `first_record` tell exactly how many frames and records were lost between
//! two intact frames. The agent closes a records frame at least every second and
//! whenever it reaches 64 KiB, so a killed agent loses at most its last second.
//!
//! ## Postcard
//!
//! Header, trailer and the bodies of long records use [postcard] 1.x: unsigned
//! integers as LEB128 varints, signed ones zigzag-mapped then varint, `u8` and
//! `bool` as one byte, `Option` as a 0/1 byte then the value, strings and `Vec`s
//! as a varint length then the elements, enums as a varint variant index then the
//! fields, structs as their fields in declaration order. The types are those of
//! the [`model`] module, in their declaration order.
//!
//! ## The header extension (frame kind 4)
//!
//! The [`Header`] is a postcard struct and cannot grow; what the header gains after
//! version 1 travels in this frame, right after it. Its payload is a run of items, each
//! `varint tag | varint length | body`; a reader skips the items whose tag it does not
//! know, so items can be appended forever. Tags ([`ext_item`]):
//!
//! * `1` RECIPE: postcard([`Recipe`]), what kind of recording this is (the typed form
//!   of `Header::mode`, which stays for older readers);
//! * `2` REPLAYED: empty body; the samples were re-encoded from saved ring-buffer bytes.
//! * `3` VDSO: the raw bytes of the recording machine's vDSO image (an ELF of at most
//!   [`MAX_VDSO`] bytes, the one the kernel maps into every process of the agent's ABI),
//!   so samples in `[vdso]` can be named on another machine.
//!
//! [`HeaderExt`] is the decoded form. A file without the frame (version 1) has no recipe:
//! [`Recipe::from_legacy_mode`] derives it from the mode string and the events.
//!
//! ## The trailer extension
//!
//! The [`Trailer`] cannot grow either: what it gains travels after its postcard body, in
//! the same frame payload, as items `varint tag | varint length | body` (as the header
//! extension's; readers skip tags they do not know, and an older reader, which decodes the
//! postcard body alone, never sees them). Tags ([`trailer_item`]):
//!
//! * `1` USAGE: postcard([`Usage`]), the CPU time of what was recorded by the kernel's own
//!   accounting (the workload's rusage once it was reaped, an attached process's or
//!   thread's `/proc` times, or the recorded CPUs' `/proc/stat` busy time), which reports
//!   set beside the time their samples cover.
//!
//! [`TrailerExt`] is the decoded form.
//!
//! ## Records (frame kind 2)
//!
//! Each records frame is decoded on its own: at its start the delta state is
//! reset to zero (`ip`, `time`, `period`, `cpu`, `event`, `addr`, all previous
//! group values) and its thread table is empty. A record is a tag byte, then:
//!
//! * `0x00` SAMPLE: a flags byte, `zz(ip - prev_ip)`, `zz(time - prev_time)`,
//!   then, in flag-bit order, only the fields whose flag is set (others repeat the
//!   previous sample's value):
//!   * bit 0 THREAD: varint index into the frame's thread table;
//!   * bit 1 EVENT: varint index into `Header::events`;
//!   * bit 2 CPU: varint cpu;
//!   * bit 3 PERIOD: `zz(period - prev_period)`;
//!   * bit 4 VALUES: varint `n`, then `n` × `zz(value[i] - prev_value[i])`
//!     (`prev_value[i]` is 0 where the previous sample had fewer values);
//!     a sample without this flag has **no** values (this one field does not repeat);
//!   * bit 5 CALLCHAIN: varint `n`, then `n` × `zz(entry - ip)`;
//!   * bit 6 EXTRA: varint sub-flags, then: bit 0 raw (varint length, bytes),
//!     bit 1 data_src (varint), bit 2 addr (`zz(addr - prev_addr)`);
//!   * bit 7: reserved, 0.
//!
//!   `zz` is zigzag of the two's-complement wrapping difference; the first sample
//!   of a frame must set THREAD.
//!
//!   A sample with a user stack (`--call-graph dwarf`) is followed at once by a
//!   `0x18` USTACK record, `varint length | body`, which belongs to it (it is not
//!   counted in `nrecords`; an older reader skips it as an unknown long record). Body:
//!   varint `n` (≤ [`MAX_USER_REGS`]) then `n` × `zz(reg[i] - prev_reg[i])`;
//!   `zz(sp - prev_sp)`; varint `len` (≤ [`MAX_USER_STACK`]); then the `len / 8` stack
//!   words as runs, each `varint same | varint literal | literal × 8 bytes`, where `same`
//!   words repeat the bytes at the same addresses in this thread's previous user stack
//!   (which must hold them) and `same + literal > 0`; then the `len % 8` tail bytes.
//!   `prev_*` are those of the thread's previous USTACK in the frame (0 and empty when
//!   none); a frame remembers [`MAX_STACK_THREADS`] threads, forgetting the one whose
//!   stack it has held longest when a new one comes. A frame rebuilds at most
//!   [`stack_budget`] bytes of stack (8 MiB, and 256 per payload byte plus 64 KiB).
//! * `0x01` THREAD: varint pid, varint tid; appends to the frame's thread table
//!   (first entry is index 0). Not counted in `nrecords`.
//! * `0x02..=0x0F`: reserved, fixed-layout; a reader that meets one cannot
//!   continue the frame.
//! * `0x10..`: varint body length, then a postcard body: `0x10` [`Mmap2`],
//!   `0x11` [`Comm`], `0x12` FORK [`Task`], `0x13` EXIT [`Task`], `0x14` [`Lost`],
//!   `0x15` [`Throttle`], `0x16` [`Interval`], `0x17` KSYMS [`KernelSymbols`] (after
//!   the last sample: the kernel functions the samples' kernel addresses fall in, at
//!   most [`MAX_KSYMS`] a record). Readers skip unknown tags from
//!   `0x10` on by their length, so new long records can be appended.
//!
//! ## Named events
//!
//! An event whose name in `Header::events` is `offcpu-time` (perf's name for the same
//! thing) holds time off the CPU (`record --off-cpu`): each of its samples is a thread
//! leaving the CPU, at `time`, its `ip` and callchain the user code it left in (ip 0 when
//! the recording had no right to its stack), and its `period` the nanoseconds until the
//! thread ran again (or the recording ended). The format is the ordinary SAMPLE's: an
//! older reader reports it as an event like any other.
//!
//! # Versioning
//!
//! The format only grows: new frame kinds, new long-record tags, new trailing
//! fields in new tags, new header-extension items. [`WIRE_VERSION`] names the newest
//! version this crate writes; every version ever written is a named constant and stays
//! decodable (golden files in `tests/data/`).
//!
//! | version | adds |
//! |---|---|
//! | 1 | the first published layout |
//! | 2 | the header-extension frame (kind 4) with the RECIPE and REPLAYED items |
//!
//! Within version 2, additions that older readers skip by their length (no new version):
//! the header extension's VDSO item, the KSYMS long record (`0x17`), the USTACK record
//! (`0x18`) after a sample, and the trailer extension with its USAGE item.
//!
//! # Limits a reader enforces
//!
//! A frame payload is at most [`MAX_PAYLOAD`] bytes; a sample carries at most
//! [`MAX_VALUES`] group values and [`MAX_CALLCHAIN`] callchain entries, a KSYMS record
//! at most [`MAX_KSYMS`] symbols. Larger counts
//! are malformed (a writer never produces them), which bounds a decoder's memory by a
//! small multiple of its input.

#![no_std]
#![forbid(unsafe_code)]

extern crate alloc;
#[cfg(test)]
extern crate std;

// Dependencies run one way (a tidy test checks): `wire` (the constants), `crc`, `varint` and
// `topdown` use no other module; `error` uses `varint`; `model` `topdown`; `frame` `crc` and
// `wire`; `ustack` `error`, `model`, `varint`, `wire`; `delta` `ustack`; `encode` and
// `decode` the ones they need of all these; `kallsyms` `model` and `wire`. The root only
// declares and re-exports.
pub mod crc;
pub mod decode;
mod delta;
pub mod encode;
mod error;
pub mod evlist;
pub mod frame;
pub mod kallsyms;
pub mod model;
pub mod profileme;
pub mod topdown;
mod ustack;
pub mod varint;
mod wire;

pub use decode::{
    decode_all, Damage, DamageReason, DecodeError, Decoded, Decoder, Event, FrameEvent, FrameRef,
    Light, Losses, RecordReader, SampleHead, Shared,
};
pub use encode::Encoder;
pub use model::*;
pub use wire::*;
