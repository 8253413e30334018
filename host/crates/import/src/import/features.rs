//! perf.data's features as `linux-perf-data` reads them, checked: the byte order, the
//! features labperf reads and the check of each one's contents (every count bounded by its
//! section's bytes), and perf's names of features and record types; shared by a file's
//! checks (`checked.rs`), a stream's (`records.rs`) and the import (`mod.rs`).

/// The smallest `perf_event_attr` (PERF_ATTR_SIZE_VER0).
pub const ATTR_MIN: u64 = 64;
/// PERF_ATTR_SIZE_VER0 to VER6: the sizes below VER7 (128) that the parser reads whole.
pub const ATTR_VERSIONS: [u32; 7] = [64, 72, 80, 96, 104, 112, 120];

/// The features labperf reads (`HEADER_*` in perf's header.h): every other one is removed
/// from the header the parser sees, so the parser never reads its section.
pub const BUILD_ID: u32 = 2;
pub const HOSTNAME: u32 = 3;
pub const OSRELEASE: u32 = 4;
pub const VERSION: u32 = 5;
pub const ARCH: u32 = 6;
pub const CPUDESC: u32 = 8;
pub const CMDLINE: u32 = 11;
pub const EVENT_DESC: u32 = 12;
pub const KEPT: [u32; 8] = [
    BUILD_ID, HOSTNAME, OSRELEASE, VERSION, ARCH, CPUDESC, CMDLINE, EVENT_DESC,
];

/// perf's name of feature `f` (`HEADER_*` in perf's header.h, without the prefix).
pub fn feature_name(f: u32) -> Option<&'static str> {
    const NAMES: [&str; 32] = [
        "RESERVED",
        "TRACING_DATA",
        "BUILD_ID",
        "HOSTNAME",
        "OSRELEASE",
        "VERSION",
        "ARCH",
        "NRCPUS",
        "CPUDESC",
        "CPUID",
        "TOTAL_MEM",
        "CMDLINE",
        "EVENT_DESC",
        "CPU_TOPOLOGY",
        "NUMA_TOPOLOGY",
        "BRANCH_STACK",
        "PMU_MAPPINGS",
        "GROUP_DESC",
        "AUXTRACE",
        "STAT",
        "CACHE",
        "SAMPLE_TIME",
        "SAMPLE_TOPOLOGY",
        "CLOCKID",
        "DIR_FORMAT",
        "BPF_PROG_INFO",
        "BPF_BTF",
        "COMPRESSED",
        "CPU_PMU_CAPS",
        "CLOCK_DATA",
        "HYBRID_TOPOLOGY",
        "PMU_CAPS",
    ];
    NAMES.get(f as usize).copied()
}

/// Reads a u32/u64 of the file's byte order at `at` in `b`, if `b` holds it.
#[derive(Clone, Copy)]
pub struct Endian {
    pub le: bool,
}

impl Endian {
    pub fn u32(self, b: &[u8], at: usize) -> Option<u32> {
        let w: [u8; 4] = b.get(at..at.checked_add(4)?)?.try_into().ok()?;
        Some(if self.le {
            u32::from_le_bytes(w)
        } else {
            u32::from_be_bytes(w)
        })
    }
    pub fn u64(self, b: &[u8], at: usize) -> Option<u64> {
        let w: [u8; 8] = b.get(at..at.checked_add(8)?)?.try_into().ok()?;
        Some(if self.le {
            u64::from_le_bytes(w)
        } else {
            u64::from_be_bytes(w)
        })
    }
    pub fn put_u64(self, b: &mut [u8], at: usize, v: u64) {
        let w = if self.le {
            v.to_le_bytes()
        } else {
            v.to_be_bytes()
        };
        b[at..at + 8].copy_from_slice(&w);
    }
}

/// A `perf_header_string` (u32 length, then that many bytes, NUL-padded) at `at` in `b`, as
/// the parser reads it (UTF-8 up to the first NUL); returns the offset after it.
pub fn header_string(e: Endian, b: &[u8], at: usize, what: &str) -> Result<usize, String> {
    let len = e
        .u32(b, at)
        .ok_or_else(|| format!("{what}: its length is cut off"))? as usize;
    let s = b.get(at + 4..).and_then(|r| r.get(..len)).ok_or_else(|| {
        format!(
            "{what}: {len} bytes claimed, {} left",
            b.len().saturating_sub(at + 4)
        )
    })?;
    let text = &s[..s.iter().position(|&c| c == 0).unwrap_or(s.len())];
    std::str::from_utf8(text).map_err(|_| format!("{what}: not UTF-8"))?;
    Ok(at + 4 + len)
}

/// A `perf_header_string_list` (u32 count, then the strings) filling at most `b`.
pub fn string_list(e: Endian, b: &[u8]) -> Result<(), String> {
    let nr = e.u32(b, 0).ok_or("its count is cut off")?;
    // Each string takes at least its 4-byte length: the parser reserves `nr` entries.
    if u64::from(nr) * 4 > b.len() as u64 - 4 {
        return Err(format!(
            "{nr} strings claimed in {} bytes",
            b.len() as u64 - 4
        ));
    }
    let mut at = 4;
    for i in 0..nr {
        at = header_string(e, b, at, &format!("string {i}"))?;
    }
    Ok(())
}

/// EVENT_DESC as the parser reads it: `u32 nr, u32 attr_size`, then per event the attr
/// (`attr_size` bytes), `u32 nr_ids`, a `perf_header_string` name and `nr_ids` u64 ids.
/// The parser reserves `nr` descriptions and `nr_ids` ids before reading them, and a name's
/// length in bytes: each must be there.
pub fn event_desc(e: Endian, b: &[u8]) -> Result<(), String> {
    let (nr, attr_size) = match (e.u32(b, 0), e.u32(b, 4)) {
        (Some(n), Some(s)) => (u64::from(n), u64::from(s)),
        _ => return Err("its counts are cut off".into()),
    };
    let left = b.len() as u64 - 8;
    if attr_size < ATTR_MIN {
        return Err(format!(
            "attr size {attr_size} is below perf's smallest, 64"
        ));
    }
    // An event takes its attr, nr_ids and its name's length at least.
    if nr.saturating_mul(attr_size + 8) > left {
        return Err(format!(
            "{nr} events of at least {} bytes claimed in {left} bytes",
            attr_size + 8
        ));
    }
    let mut at = 8usize;
    for i in 0..nr {
        // The parser reads an attr's fields up to the largest PERF_ATTR_SIZE_VER* its own
        // size reaches (all of it past VER7), then skips `attr_size - size`: a size between
        // two versions would leave it short of the attr's end, reading counts from the
        // wrong bytes. perf writes VER sizes.
        let size = e.u32(b, at + 4).unwrap_or(0);
        if !(ATTR_MIN as u32..=attr_size as u32).contains(&size)
            || (size < 128 && !ATTR_VERSIONS.contains(&size))
        {
            return Err(format!(
                "event {i}: its attr's size {size} is not a perf_event_attr's ({ATTR_MIN} to \
                 {attr_size}, a PERF_ATTR_SIZE_VER* below 128)"
            ));
        }
        at += attr_size as usize;
        let ids = e
            .u32(b, at)
            .ok_or_else(|| format!("event {i}: cut off in its attr"))?;
        at = header_string(e, b, at + 4, &format!("event {i}'s name"))?;
        let need = u64::from(ids) * 8;
        if need > (b.len() - at.min(b.len())) as u64 {
            return Err(format!(
                "event {i}: {ids} ids claimed, {} bytes left",
                b.len().saturating_sub(at)
            ));
        }
        at += need as usize;
    }
    Ok(())
}

/// Checks one kept feature's contents (`b`, its whole section) as the parser will read them.
pub fn check_feature(f: u32, e: Endian, b: &[u8]) -> Result<(), String> {
    match f {
        // Records of at most 64 KiB each; the parser stops at the first that does not fit.
        BUILD_ID => Ok(()),
        HOSTNAME | OSRELEASE | VERSION | ARCH | CPUDESC => {
            header_string(e, b, 0, "the string").map(|_| ())
        }
        CMDLINE => string_list(e, b),
        _ => event_desc(e, b),
    }
}

/// Reads into `buf` until it is full or the input ends; returns the bytes read.
pub fn read_up_to(r: &mut impl std::io::Read, buf: &mut [u8]) -> std::io::Result<usize> {
    let mut got = 0;
    while got < buf.len() {
        match r.read(&mut buf[got..]) {
            Ok(0) => break,
            Ok(n) => got += n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(got)
}

/// perf's name of record type `kind` (`PERF_RECORD_*` without the prefix).
pub fn record_kind(kind: u32) -> &'static str {
    const KERNEL: [&str; 22] = [
        "?",
        "MMAP",
        "LOST",
        "COMM",
        "EXIT",
        "THROTTLE",
        "UNTHROTTLE",
        "FORK",
        "READ",
        "SAMPLE",
        "MMAP2",
        "AUX",
        "ITRACE_START",
        "LOST_SAMPLES",
        "SWITCH",
        "SWITCH_CPU_WIDE",
        "NAMESPACES",
        "KSYMBOL",
        "BPF_EVENT",
        "CGROUP",
        "TEXT_POKE",
        "AUX_OUTPUT_HW_ID",
    ];
    const USER: [&str; 20] = [
        "HEADER_ATTR",
        "HEADER_EVENT_TYPE",
        "HEADER_TRACING_DATA",
        "HEADER_BUILD_ID",
        "FINISHED_ROUND",
        "ID_INDEX",
        "AUXTRACE_INFO",
        "AUXTRACE",
        "AUXTRACE_ERROR",
        "THREAD_MAP",
        "CPU_MAP",
        "STAT_CONFIG",
        "STAT",
        "STAT_ROUND",
        "EVENT_UPDATE",
        "TIME_CONV",
        "HEADER_FEATURE",
        "COMPRESSED",
        "FINISHED_INIT",
        "COMPRESSED2",
    ];
    match kind {
        1..=21 => KERNEL[kind as usize],
        64..=83 => USER[kind as usize - 64],
        _ => "of an unknown type",
    }
}
