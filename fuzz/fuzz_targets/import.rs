//! Fuzz target: `labperf import` of perf.data never panics, never allocates more than the
//! file justifies, and what it writes decodes without damage. The corpus is real perf.data
//! files (`cargo xtask fuzz` records them with perf); the mutator knows their layout
//! (header, attrs, feature table and feature contents, the records of the data section)
//! and writes interesting values into their length and count fields, inserts, removes and
//! retypes records and sets or clears feature bits with every offset fixed up, so the
//! parser sees files that get past its first checks; half the mutations are libFuzzer's own.
#![no_main]

use labperf_common::decode_all;
use libfuzzer_sys::{fuzz_mutator, fuzz_target};
use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicUsize, Ordering::Relaxed};

/// Counts live heap bytes; while armed, an allocation past the limit aborts (a crash
/// libFuzzer reports with the input) before any memory is touched.
struct Capped;
static LIVE: AtomicUsize = AtomicUsize::new(0);
static PEAK: AtomicUsize = AtomicUsize::new(0);
static LIMIT: AtomicUsize = AtomicUsize::new(usize::MAX);

fn grow(n: usize) {
    let now = LIVE.fetch_add(n, Relaxed) + n;
    if now > LIMIT.load(Relaxed) {
        LIMIT.store(usize::MAX, Relaxed);
        eprintln!(
            "import: {n} bytes asked for with {now} live heap bytes, over the limit for this \
             input, at:\n{}",
            std::backtrace::Backtrace::force_capture()
        );
        std::process::abort();
    }
    PEAK.fetch_max(now, Relaxed);
}

unsafe impl GlobalAlloc for Capped {
    unsafe fn alloc(&self, l: Layout) -> *mut u8 {
        grow(l.size());
        System.alloc(l)
    }
    unsafe fn alloc_zeroed(&self, l: Layout) -> *mut u8 {
        grow(l.size());
        System.alloc_zeroed(l)
    }
    unsafe fn dealloc(&self, p: *mut u8, l: Layout) {
        LIVE.fetch_sub(l.size(), Relaxed);
        System.dealloc(p, l)
    }
    unsafe fn realloc(&self, p: *mut u8, l: Layout, new: usize) -> *mut u8 {
        if new > l.size() {
            grow(new - l.size());
        } else {
            LIVE.fetch_sub(l.size() - new, Relaxed);
        }
        System.realloc(p, l, new)
    }
}

#[global_allocator]
static A: Capped = Capped;

/// The most heap an import of `len` bytes may hold beyond what was live before it: the
/// parser holds the records of one round (FINISHED_ROUND to FINISHED_ROUND; a file without
/// them, all of its records), about 20 bytes per byte of 8-byte records (the worst case;
/// measured with `labperf import` on an 8 MB file of them: 160 MB), the output grows to a
/// few times its records, plus fixed buffers (the encoder's 64 KiB frames).
fn limit(len: usize) -> usize {
    48 * len + (4 << 20)
}

/// The most heap an import used so far (printed when it grows, with the input's size).
static WORST: AtomicUsize = AtomicUsize::new(0);

fuzz_target!(|data: &[u8]| {
    let mut out = Vec::with_capacity(1 << 16);
    let base = LIVE.load(Relaxed);
    PEAK.store(base, Relaxed);
    LIMIT.store(base + limit(data.len()), Relaxed);
    let r = labperf::import::import_to(std::io::Cursor::new(data), &mut out);
    LIMIT.store(usize::MAX, Relaxed);
    let used = PEAK.load(Relaxed) - base;
    if used > WORST.fetch_max(used, Relaxed) {
        eprintln!(
            "import: {used} heap bytes for a {}-byte input ({:.1} per byte)",
            data.len(),
            used as f64 / data.len().max(1) as f64
        );
    }
    if let Ok(got) = r {
        // What labperf wrote is a whole, undamaged record file holding every record it
        // counted.
        let d = decode_all(&out);
        assert!(d.damage.is_empty(), "{:?}", d.damage);
        assert!(d.losses.is_clean(), "{:?}", d.losses);
        assert!(d.trailer.is_some());
        assert_eq!(d.records.len() as u64, got.records);
    }
});

/// A small xorshift generator seeded by libFuzzer.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
    fn below(&mut self, n: usize) -> usize {
        if n == 0 {
            0
        } else {
            (self.next() % n as u64) as usize
        }
    }
}

/// A perf.data file's layout, as far as the mutator needs it (little-endian files; the
/// byte mutator reaches the rest).
struct PerfLayout {
    attr_size: u64,
    attrs: (u64, u64),
    data: (u64, u64),
    /// Feature bits set, in order, and each one's {offset, size} entry's file offset.
    features: Vec<(u32, usize)>,
    /// Records of the data section: file offset, size.
    records: Vec<(usize, usize)>,
}

fn u64_at(b: &[u8], at: usize) -> Option<u64> {
    Some(u64::from_le_bytes(b.get(at..at + 8)?.try_into().ok()?))
}

fn put(b: &mut [u8], at: usize, width: usize, v: u64) {
    if let Some(s) = b.get_mut(at..at + width) {
        s.copy_from_slice(&v.to_le_bytes()[..width]);
    }
}

fn layout(b: &[u8]) -> Option<PerfLayout> {
    if b.get(..8)? != b"PERFILE2" {
        return None;
    }
    let attr_size = u64_at(b, 16)?;
    let attrs = (u64_at(b, 24)?, u64_at(b, 32)?);
    let data = (u64_at(b, 40)?, u64_at(b, 48)?);
    let table = data.0.checked_add(data.1)? as usize;
    let mut features = Vec::new();
    for f in 0..256u32 {
        let w = u64_at(b, 72 + 8 * (f as usize / 64))?;
        if w & (1 << (f % 64)) != 0 {
            features.push((f, table + 16 * features.len()));
        }
    }
    let mut records = Vec::new();
    let (mut at, end) = (data.0 as usize, table.min(b.len()));
    // A data section that starts past the file (a header the fuzzer changed) has none.
    while end >= 8 && at <= end - 8 && records.len() < 100_000 {
        let size = u16::from_le_bytes([b[at + 6], b[at + 7]]) as usize;
        if size < 8 || size > end - at {
            break;
        }
        records.push((at, size));
        at += size;
    }
    Some(PerfLayout {
        attr_size,
        attrs,
        data,
        features,
        records,
    })
}

/// Values that probe bounds: small, boundary, huge, and near the file's own size.
fn interesting(r: &mut Rng, old: u64, len: u64) -> u64 {
    match r.below(12) {
        0 => 0,
        1 => 1,
        2 => [0x7f, 0xff, 0x100, 0x7fff, 0xffff, 0x1_0000][r.below(6)],
        3 => [0x7fff_ffff, 0xffff_ffff, 0x1_0000_0000][r.below(3)],
        4 => [u64::MAX, u64::MAX - 511, u64::MAX - 4095, i64::MAX as u64][r.below(4)],
        5 => len.wrapping_add(r.below(33) as u64).wrapping_sub(16),
        6 => old.wrapping_add(r.below(17) as u64).wrapping_sub(8),
        7 => old ^ (1 << r.below(64)),
        8 => old.wrapping_mul(2 + r.below(1000) as u64),
        9 => 1 << r.below(64),
        10 => r.below(4097) as u64,
        _ => r.next(),
    }
}

/// Inserts `bytes` at `at` in the data section, fixing the data size and every offset past
/// it (the feature table moves with the data's end; feature and attr sections after it).
fn insert(b: &mut Vec<u8>, l: &PerfLayout, at: usize, bytes: &[u8]) {
    if at > b.len() {
        return;
    }
    b.splice(at..at, bytes.iter().copied());
    shift(b, l, at, bytes.len() as i64);
}

fn remove(b: &mut Vec<u8>, l: &PerfLayout, at: usize, n: usize) {
    if at + n > b.len() {
        return;
    }
    b.drain(at..at + n);
    shift(b, l, at, -(n as i64));
}

fn shift(b: &mut [u8], l: &PerfLayout, at: usize, by: i64) {
    let moved = |o: u64| {
        if o as usize >= at {
            o.wrapping_add(by as u64)
        } else {
            o
        }
    };
    put(b, 48, 8, l.data.1.wrapping_add(by as u64));
    put(b, 24, 8, moved(l.attrs.0));
    for &(_, e) in &l.features {
        let e = if e >= at {
            e.wrapping_add(by as usize)
        } else {
            e
        };
        if let Some(o) = u64_at(b, e) {
            put(b, e, 8, moved(o));
        }
    }
}

/// perf's record types (and labperf's interest in them): the values a record's type is
/// set to.
const TYPES: [u32; 22] = [
    1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 68, 70, 79,
];

/// One structure-aware mutation of `b` (a perf.data file); false when it has no layout.
fn mutate(b: &mut Vec<u8>, r: &mut Rng) -> bool {
    let Some(l) = layout(b) else {
        return false;
    };
    let len = b.len() as u64;
    match r.below(10) {
        // A header field: sizes, sections, feature bits.
        0 => {
            let at = [8, 16, 24, 32, 40, 48, 56, 64, 72, 80][r.below(10)];
            let old = u64_at(b, at).unwrap_or(0);
            put(b, at, 8, interesting(r, old, len));
        }
        // A feature's {offset, size}, or a count/length at the start of its section or
        // anywhere in it (string lengths, EVENT_DESC's nr, attr size, nr_ids).
        1 | 2 => {
            if l.features.is_empty() {
                return false;
            }
            let (_, e) = l.features[r.below(l.features.len())];
            let (off, size) = (u64_at(b, e).unwrap_or(0), u64_at(b, e + 8).unwrap_or(0));
            if r.below(3) == 0 {
                let at = e + 8 * r.below(2);
                let old = u64_at(b, at).unwrap_or(0);
                put(b, at, 8, interesting(r, old, len));
            } else if size >= 4 && off.saturating_add(size) <= len {
                let at = off as usize + 4 * r.below(size as usize / 4);
                let old = u64::from(u32::from_le_bytes(b[at..at + 4].try_into().unwrap()));
                put(b, at, 4, interesting(r, old, len));
            }
        }
        // A field of an attr: type, size, config, period, sample_type, read_format, flags,
        // or its ids section.
        3 => {
            let n = (l.attrs.1 / l.attr_size.max(1)) as usize;
            if n == 0 || l.attr_size < 64 {
                return false;
            }
            let base = l.attrs.0 as usize + l.attr_size as usize * r.below(n);
            let (at, w) = [(0, 4), (4, 4), (8, 8), (16, 8), (24, 8), (32, 8), (40, 8)][r.below(7)];
            let (at, w) = if r.below(4) == 0 {
                (l.attr_size as usize - 16 + 8 * r.below(2), 8)
            } else {
                (at, w)
            };
            let old = b.get(base + at..base + at + w).map_or(0, |s| {
                let mut v = [0u8; 8];
                v[..w].copy_from_slice(s);
                u64::from_le_bytes(v)
            });
            put(b, base + at, w, interesting(r, old, len));
        }
        // A record's header: its type, misc bits (build-id mmaps, cpu modes) or size.
        4 => {
            if l.records.is_empty() {
                return false;
            }
            let (at, _) = l.records[r.below(l.records.len())];
            match r.below(3) {
                0 => put(b, at, 4, u64::from(TYPES[r.below(TYPES.len())])),
                1 => {
                    let misc = u16::from_le_bytes([b[at + 4], b[at + 5]]) ^ (1 << r.below(16));
                    put(b, at + 4, 2, u64::from(misc));
                }
                _ => {
                    let old = u64::from(u16::from_le_bytes([b[at + 6], b[at + 7]]));
                    put(b, at + 6, 2, interesting(r, old, len) & 0xffff);
                }
            }
        }
        // A word of a record's body: callchain counts, sizes, pids, addresses, lengths.
        5 | 6 => {
            if l.records.is_empty() {
                return false;
            }
            let (at, size) = l.records[r.below(l.records.len())];
            if size <= 8 {
                return false;
            }
            let w = [1, 2, 4, 8][r.below(4)];
            let off = at + 8 + r.below((size - 8) / w) * w;
            let old = b.get(off..off + w).map_or(0, |s| {
                let mut v = [0u8; 8];
                v[..w].copy_from_slice(s);
                u64::from_le_bytes(v)
            });
            put(b, off, w, interesting(r, old, len));
        }
        // A record copied elsewhere in the data section, or removed.
        7 => {
            if l.records.is_empty() {
                return false;
            }
            let (from, size) = l.records[r.below(l.records.len())];
            let to = l.records[r.below(l.records.len())].0;
            if r.below(3) == 0 {
                if from + size <= b.len() {
                    remove(b, &l, from, size);
                }
            } else if let Some(rec) = b.get(from..from + size).map(<[u8]>::to_vec) {
                insert(b, &l, to, &rec);
            }
        }
        // A record's body grown by zero or copied bytes (long callchains, paths, names).
        8 => {
            if l.records.is_empty() {
                return false;
            }
            let (at, size) = l.records[r.below(l.records.len())];
            let add = [8, 64, 1024, 32768][r.below(4)].min(0xffff - size);
            let fill = vec![[0u8, 0xff, 0x41][r.below(3)]; add];
            insert(b, &l, at + size, &fill);
            put(b, at + 6, 2, (size + add) as u64);
        }
        // A feature bit set or cleared, its table entry added or removed with it.
        _ => {
            let f = [
                2u32, 3, 4, 5, 6, 7, 8, 11, 12, 13, 14, 16, 17, 21, 23, 29, 31, 129,
            ][r.below(18)];
            let word = 72 + 8 * (f as usize / 64);
            let bits = u64_at(b, word).unwrap_or(0);
            let idx = l.features.iter().filter(|(g, _)| *g < f).count();
            let entry = (l.data.0 + l.data.1) as usize + 16 * idx;
            if entry > b.len() {
                return false;
            }
            if bits & (1 << (f % 64)) != 0 {
                if entry + 16 > b.len() {
                    return false;
                }
                b.drain(entry..entry + 16);
                put(b, word, 8, bits & !(1 << (f % 64)));
            } else {
                // A section of the file's own bytes: its tail, or a piece of a feature.
                let off = r.below(b.len()) as u64;
                let size = r.below((b.len() as u64 - off) as usize + 1) as u64;
                let mut e = off.to_le_bytes().to_vec();
                e.extend(size.to_le_bytes());
                b.splice(entry..entry, e);
                put(b, word, 8, bits | (1 << (f % 64)));
            }
            // Sections after the table moved by 16 bytes.
            let by: i64 = if bits & (1 << (f % 64)) != 0 { -16 } else { 16 };
            if let Some(l2) = layout(b) {
                for &(_, e) in &l2.features {
                    if let Some(o) = u64_at(b, e) {
                        if o as usize >= entry {
                            put(b, e, 8, o.wrapping_add(by as u64));
                        }
                    }
                }
            }
        }
    }
    true
}

fuzz_mutator!(|data: &mut [u8], size: usize, max_size: usize, seed: u32| {
    let mut r = Rng(u64::from(seed) | 1 << 40);
    if r.below(2) == 0 {
        let mut b = data[..size].to_vec();
        let n = 1 + r.below(3);
        let mut done = false;
        for _ in 0..n {
            done |= mutate(&mut b, &mut r);
        }
        if done && b.len() <= max_size {
            data[..b.len()].copy_from_slice(&b);
            return b.len();
        }
    }
    libfuzzer_sys::fuzzer_mutate(data, size, max_size)
});
