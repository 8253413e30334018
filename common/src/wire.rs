//! The format's constants: magic, wire versions, frame kinds, record tags, sample flags,
//! header-extension items and the limits a reader enforces (the crate root re-exports them).

/// First 8 bytes of every record file.
pub const MAGIC: [u8; 8] = *b"LABPERF\0";
/// Wire version 1: the first published layout.
pub const WIRE_VERSION_1: u16 = 1;
/// Wire version 2: adds the header-extension frame (kind 4).
pub const WIRE_VERSION_2: u16 = 2;
/// The wire version this crate writes.
pub const WIRE_VERSION: u16 = WIRE_VERSION_2;
/// Size of the prelude (magic, wire version, reserved).
pub const PRELUDE_LEN: usize = 12;
/// Sync word that starts every frame.
pub const FRAME_SYNC: [u8; 4] = [0xF5, b'L', b'P', b'F'];
/// Size of a frame header.
pub const FRAME_HEADER_LEN: usize = 36;
/// Largest payload a frame may carry.
pub const MAX_PAYLOAD: u32 = 16 << 20;
/// Frame kind: the file header.
pub const FRAME_HEADER: u8 = 1;
/// Frame kind: records.
pub const FRAME_RECORDS: u8 = 2;
/// Frame kind: the trailer.
pub const FRAME_TRAILER: u8 = 3;
/// Frame kind: the header extension (wire version 2 on).
pub const FRAME_HEADER_EXT: u8 = 4;
/// Most group values one sample may carry.
pub const MAX_VALUES: usize = 256;
/// Most callchain entries one sample may carry.
pub const MAX_CALLCHAIN: usize = 4096;
/// Most kernel symbols one KSYMS record may carry.
pub const MAX_KSYMS: usize = 4096;
/// Most bytes of user stack one sample may carry (the kernel's limit is 65528).
pub const MAX_USER_STACK: usize = 65536;
/// Most user registers one sample may carry.
pub const MAX_USER_REGS: usize = 64;
/// Most threads whose previous user stack a records frame remembers (the oldest is
/// forgotten first).
pub const MAX_STACK_THREADS: usize = 64;
/// Most user-stack bytes one records frame may rebuild: 8 MiB, and at most
/// [`MAX_STACK_PER_BYTE`] per payload byte plus [`MAX_USER_STACK`] (decoding time stays
/// in proportion to the file).
pub const MAX_STACK_FRAME: u64 = 8 << 20;
pub const MAX_STACK_PER_BYTE: u64 = 256;
/// A writer closes its records frame once it rebuilds this many user-stack bytes, or
/// [`STACK_FLUSH_PER_BYTE`] per payload byte (each well inside what a reader allows).
pub const STACK_FRAME_FLUSH: u64 = 4 << 20;
pub const STACK_FLUSH_PER_BYTE: u64 = 128;

/// The most user-stack bytes a records frame of `payload_len` bytes may rebuild.
pub fn stack_budget(payload_len: usize) -> u64 {
    MAX_STACK_FRAME.min(
        MAX_STACK_PER_BYTE
            .saturating_mul(payload_len as u64)
            .saturating_add(MAX_USER_STACK as u64),
    )
}

/// Header-extension item tags.
pub mod ext_item {
    pub const RECIPE: u64 = 1;
    pub const REPLAYED: u64 = 2;
    pub const VDSO: u64 = 3;
}

/// Trailer-extension item tags (the items after the trailer's postcard body).
pub mod trailer_item {
    pub const USAGE: u64 = 1;
}

/// Largest vDSO image a header extension carries (kernels map 1 to 4 pages).
pub const MAX_VDSO: usize = 64 << 10;

/// Record tags.
pub mod tag {
    pub const SAMPLE: u8 = 0x00;
    pub const THREAD: u8 = 0x01;
    /// First tag of the length-prefixed (skippable) records.
    pub const FIRST_LONG: u8 = 0x10;
    pub const MMAP2: u8 = 0x10;
    pub const COMM: u8 = 0x11;
    pub const FORK: u8 = 0x12;
    pub const EXIT: u8 = 0x13;
    pub const LOST: u8 = 0x14;
    pub const THROTTLE: u8 = 0x15;
    pub const INTERVAL: u8 = 0x16;
    pub const KSYMS: u8 = 0x17;
    /// A user stack, right after its SAMPLE (part of it: not counted in `nrecords`).
    pub const USTACK: u8 = 0x18;
}

/// SAMPLE flag bits.
pub mod sample_flag {
    pub const THREAD: u8 = 1 << 0;
    pub const EVENT: u8 = 1 << 1;
    pub const CPU: u8 = 1 << 2;
    pub const PERIOD: u8 = 1 << 3;
    pub const VALUES: u8 = 1 << 4;
    pub const CALLCHAIN: u8 = 1 << 5;
    pub const EXTRA: u8 = 1 << 6;
    /// EXTRA sub-flags.
    pub const EXTRA_RAW: u64 = 1 << 0;
    pub const EXTRA_DATA_SRC: u64 = 1 << 1;
    pub const EXTRA_ADDR: u64 = 1 << 2;
}

/// The 12-byte prelude for `version`.
pub fn prelude(version: u16) -> [u8; PRELUDE_LEN] {
    let mut p = [0u8; PRELUDE_LEN];
    p[..8].copy_from_slice(&MAGIC);
    p[8..10].copy_from_slice(&version.to_le_bytes());
    p
}
