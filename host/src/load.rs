//! Reading a record file through the streaming decoder, with progress and clear errors.

use crate::progress::Progress;
use labperf_common::{
    Damage, Decoder, Event, FrameEvent, FrameRef, Header, HeaderExt, Light, Losses, Mmap2, Record,
    RecordReader, Shared, Trailer,
};
use std::collections::HashMap;
use std::fs::File;
use std::hash::{BuildHasherDefault, Hasher};
use std::io::Read;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;

#[derive(Debug, thiserror::Error)]
pub enum LoadError {
    #[error("cannot open the record file {path}")]
    Open {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("cannot read the record file {path}")]
    Read {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("{path} is not a labperf record file (it does not start with the LABPERF magic and holds no labperf frames).{hint}")]
    NotLabperf { path: PathBuf, hint: &'static str },
    #[error("{path} is not a regular file (a device, FIFO or directory): labperf reads record and binary files only")]
    NotRegular { path: PathBuf },
    #[error("{path} is {size} bytes, over the {max}-byte limit")]
    TooLarge { path: PathBuf, size: u64, max: u64 },
    #[error("reading {path} was interrupted")]
    Stopped { path: PathBuf },
    #[error("{path} is not a TopDown recording (its header has no slots or topdown-total-slots event): record one with `labperf stat --topdown` or `labperf record --topdown`.")]
    NotTopDown { path: PathBuf },
}

/// The non-record parts of a file, gathered while records are streamed to a callback.
#[derive(Debug, Default)]
pub struct FileInfo {
    pub wire_version: Option<u16>,
    pub header: Option<Header>,
    pub header_ext: Option<HeaderExt>,
    pub trailer: Option<Trailer>,
    pub damage: Vec<Damage>,
    pub losses: Losses,
    pub bytes: u64,
    pub records: u64,
    /// Samples in the file.
    pub samples: u64,
    /// Records the kernel says it lost (the sum of the LOST records).
    pub kernel_lost: u64,
}

/// A recording to read: a file (read when needed), or bytes already in memory (tests,
/// fuzzing); its name is what messages say.
#[derive(Clone)]
pub struct Source {
    pub name: PathBuf,
    bytes: Option<Shared>,
}

impl Source {
    pub fn path(p: &Path) -> Source {
        Source {
            name: p.into(),
            bytes: None,
        }
    }

    pub fn bytes(name: &str, b: Shared) -> Source {
        Source {
            name: name.into(),
            bytes: Some(b),
        }
    }

    /// The file this source reads, when it is one (not bytes already in memory).
    pub fn file(&self) -> Option<&Path> {
        self.bytes.is_none().then_some(self.name.as_path())
    }

    /// The whole input, shared (the file memory-mapped).
    pub fn data(&self) -> Result<Shared, LoadError> {
        match &self.bytes {
            Some(b) => Ok(b.clone()),
            None => map_file(&self.name),
        }
    }
}

impl From<&Path> for Source {
    fn from(p: &Path) -> Source {
        Source::path(p)
    }
}

/// Streams every record of `src` to `f`, in file order.
pub fn stream(src: &Source, mut f: impl FnMut(&Record)) -> Result<FileInfo, LoadError> {
    let path = &src.name;
    let info = read(src, |dec, info| {
        while let Some(e) = dec.poll() {
            info.take(e, &mut f);
        }
    })?;
    check_labperf(path, &info)?;
    Ok(info)
}

/// Like [`stream`], but gives up ([`LoadError::Stopped`]) as soon as `stop` says so: it
/// is asked before each MiB read.
pub fn stream_until(
    src: &Source,
    stop: &dyn Fn() -> bool,
    mut f: impl FnMut(&Record),
) -> Result<FileInfo, LoadError> {
    let path = &src.name;
    let info = read_until(src, stop, |dec, info| {
        while let Some(e) = dec.poll() {
            info.take(e, &mut f);
        }
    })?;
    check_labperf(path, &info)?;
    Ok(info)
}

/// Like [`stream`], and `f` also sees the header and its extension once they have been
/// read (they precede every record in an intact file).
pub fn stream_with_header(
    src: &Source,
    mut f: impl FnMut(Option<&Header>, Option<&HeaderExt>, &Record),
) -> Result<FileInfo, LoadError> {
    let path = &src.name;
    let info = read(src, |dec, info| {
        while let Some(e) = dec.poll() {
            match e {
                Event::Record(r) => {
                    info.records += 1;
                    info.count(&r);
                    f(info.header.as_ref(), info.header_ext.as_ref(), &r)
                }
                other => info.take(other, &mut |_| {}),
            }
        }
    })?;
    check_labperf(path, &info)?;
    Ok(info)
}

/// What a file says it is: its header and header extension, read from its start only
/// (they precede every record in an intact file). `None` where they are lost.
pub struct Peek {
    pub header: Option<Header>,
    pub header_ext: Option<HeaderExt>,
}

/// Reads the start of `src` until the first record: enough to know what the file is.
/// At most 64 MiB are read (a header is far smaller; damage before it is skipped).
pub fn peek(src: &Source) -> Result<Peek, LoadError> {
    const MAX: u64 = 64 << 20;
    let path = &src.name;
    let mut file: Box<dyn Read + '_> = match &src.bytes {
        Some(b) => {
            let v: &[u8] = (**b).as_ref();
            Box::new(v)
        }
        None => Box::new(open_regular(path, u64::MAX)?.0.take(MAX)),
    };
    let mut dec = Decoder::new();
    let mut p = Peek {
        header: None,
        header_ext: None,
    };
    let mut buf = vec![0u8; 64 << 10];
    let (mut done, mut read) = (false, 0u64);
    let mut labperf = false;
    while !done {
        let n = file.read(&mut buf).map_err(|source| LoadError::Read {
            path: path.into(),
            source,
        })?;
        read += n as u64;
        if n == 0 || read > MAX {
            dec.finish();
            done = true;
        } else {
            dec.push(&buf[..n]);
        }
        while let Some(e) = dec.poll() {
            match e {
                Event::Version(_) => labperf = true,
                Event::Header(h) => {
                    labperf = true;
                    p.header = Some(*h)
                }
                Event::HeaderExt(x) => p.header_ext = Some(*x),
                Event::Record(_) | Event::Trailer(_) => {
                    labperf = true;
                    done = true;
                }
                Event::Damage(_) => {}
            }
            if done {
                break;
            }
        }
    }
    if !labperf {
        return Err(not_labperf(path));
    }
    Ok(p)
}

/// Per-(pid, ip, event) sample counts and periods, with the FxHash of the report's hot
/// loop. The event is the sample's index in the header's list, those at or above the
/// list's length counted as one ([`crate::events::Names::cap`]).
pub type IpCounts = HashMap<(u32, u64, u32), (u64, u64), BuildHasherDefault<FxHasher>>;

/// What [`sample_counts`] gathers.
pub struct Counts {
    pub by_ip: IpCounts,
    /// The side band symbols need, in file order: forks, and the mappings samples land in.
    pub others: Vec<Side>,
    /// Each process's name (its main thread's last `COMM`, in file order); a process
    /// without one has its parent's (see [`Counts::comm`]).
    pub comms: HashMap<u32, String>,
    pub info: FileInfo,
}

impl Counts {
    /// The name of process `pid`: its own `COMM`, else the nearest forking ancestor's
    /// (a child keeps its parent's name until it execs), else `:PID` as perf shows it.
    pub fn comm(&self, pid: u32, parents: &HashMap<u32, u32>) -> String {
        let mut p = pid;
        for _ in 0..64 {
            if let Some(c) = self.comms.get(&p) {
                return c.clone();
            }
            match parents.get(&p) {
                Some(&pp) if pp != p => p = pp,
                _ => break,
            }
        }
        format!(":{pid}")
    }
}

/// A side-band record kept by [`sample_counts`] (smaller than a [`Record`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Side {
    Map(Mmap2),
    Fork { pid: u32, ppid: u32 },
    Kernel(labperf_common::KernelSymbols),
}

impl Side {
    /// As a record, for [`crate::symbols::Symbolizer::observe`].
    pub fn record(self) -> Record {
        match self {
            Side::Map(m) => Record::Mmap2(m),
            Side::Fork { pid, ppid } => Record::Fork(labperf_common::Task {
                pid,
                ppid,
                tid: pid,
                ptid: ppid,
                time: 0,
            }),
            Side::Kernel(k) => Record::KernelSymbols(k),
        }
    }
}

/// The side band of the frames `side_frames` (read again, in file order): every fork, and
/// the mappings that some sample lands in (`sampled`: its pid and address). A mapping no
/// sample of its process (or of a process forked from it) lands in never resolves an
/// address, and the addresses it would hide from an earlier mapping have no samples either:
/// leaving it out changes nothing, and keeps memory in proportion to the samples, not to
/// the mappings a file lists.
fn side_band(
    data: &Shared,
    frames: &[FrameRef],
    side_frames: &[usize],
    forks: &[(u32, u32)],
    sampled: impl Iterator<Item = (u32, u64)> + Clone,
) -> Vec<Side> {
    let parents: HashMap<u32, u32> = forks.iter().copied().collect();
    let mut ips: HashMap<u32, Vec<u64>> = HashMap::new();
    for (pid, ip) in sampled.clone() {
        // The sample's process and its ancestors (whose mappings it inherited).
        let mut p = pid;
        for _ in 0..64 {
            ips.entry(p).or_default().push(ip);
            match parents.get(&p) {
                Some(&pp) if pp != p => p = pp,
                _ => break,
            }
        }
    }
    for v in ips.values_mut() {
        v.sort_unstable();
        v.dedup();
    }
    let hit = |m: &Mmap2| {
        ips.get(&m.pid).is_some_and(|v| {
            let i = v.partition_point(|&ip| ip < m.addr);
            v.get(i).is_some_and(|&ip| ip - m.addr < m.len)
        })
    };
    let mut kernel_ips: Vec<u64> = sampled.map(|k| k.1).filter(|ip| ip >> 63 == 1).collect();
    kernel_ips.sort_unstable();
    kernel_ips.dedup();
    let mut out = Vec::new();
    for &i in side_frames {
        let Some(mut rr) = frames.get(i).and_then(|&f| RecordReader::of_frame(data, f)) else {
            continue;
        };
        // Samples cut to their head: their callchains are not needed here.
        let _ = rr.for_each_light(|r| {
            let Light::Record(r) = r else { return };
            match *r {
                Record::Mmap2(m) if hit(&m) => out.push(Side::Map(m)),
                Record::Fork(t) if t.pid != t.ppid => out.push(Side::Fork {
                    pid: t.pid,
                    ppid: t.ppid,
                }),
                // Only the functions some sample lands in, as for mappings.
                Record::KernelSymbols(mut k) => {
                    keep_sampled(&mut k, &kernel_ips);
                    if !k.syms.is_empty() || k.hidden.is_some() {
                        out.push(Side::Kernel(k));
                    }
                }
                _ => {}
            }
        });
    }
    out
}

/// The side band symbols need to name the addresses `sampled` (pid and address) of `src`,
/// in file order (see [`side_band`]): its records frames read again, samples cut to their
/// head. `forks` are its forks' (pid, ppid).
pub fn side_band_of(
    src: &Source,
    forks: &[(u32, u32)],
    sampled: &[(u32, u64)],
) -> Result<Vec<Side>, LoadError> {
    let data = src.data()?;
    let mut dec = Decoder::whole(data.clone());
    let mut frames: Vec<FrameRef> = Vec::new();
    while let Some(e) = dec.poll_frame() {
        if let FrameEvent::Records(rr) = e {
            if let Some(f) = rr.frame().filter(|f| f.len > 0) {
                frames.push(f);
            }
        }
    }
    let all: Vec<usize> = (0..frames.len()).collect();
    Ok(side_band(
        &data,
        &frames,
        &all,
        forks,
        sampled.iter().copied(),
    ))
}

/// Keeps the kernel functions of `k` that hold one of `addrs` (sorted): what a file lists
/// beyond its samples' functions costs no memory.
pub fn keep_sampled(k: &mut labperf_common::KernelSymbols, addrs: &[u64]) {
    k.syms.retain(|s| {
        let i = addrs.partition_point(|&a| a < s.start);
        addrs.get(i).is_some_and(|&a| a < s.end || s.end <= s.start)
    });
}

/// Reads `path` and counts its samples per (pid, ip, event), decoding records frames on
/// up to `threads` threads (frames decode independently). The fast path of `report`.
pub fn sample_counts(src: &Source, threads: usize) -> Result<Counts, LoadError> {
    let path = &src.name;
    let data = src.data()?;
    let total = (*data).as_ref().len() as u64;
    let mut dec = Decoder::whole(data.clone());
    let mut info = FileInfo {
        bytes: total,
        ..Default::default()
    };
    // The frames as 24-byte references (less than the smallest frame), read on the workers.
    let mut frames: Vec<FrameRef> = Vec::new();
    while let Some(e) = dec.poll_frame() {
        match e {
            FrameEvent::Event(e) => info.take(e, &mut |_| {}),
            FrameEvent::Records(rr) => {
                if let Some(f) = rr.frame().filter(|f| f.len > 0) {
                    frames.push(f);
                }
            }
        }
    }
    info.losses = dec.losses().clone();
    // Event indexes past the header's list are counted as one.
    let cap = crate::events::Names::of(info.header.as_ref()).cap();
    let done = AtomicU64::new(0);
    struct Part {
        by_ip: IpCounter,
        /// The frames holding mappings or forks, read again once the samples are known.
        side_frames: Vec<usize>,
        /// (pid, ppid) of each fork.
        forks: Vec<(u32, u32)>,
        /// (frame, pid, name) of each process's COMM.
        comms: Vec<(usize, u32, String)>,
        samples: u64,
        lost: u64,
        damage: Vec<Damage>,
        unknown: u64,
        records: u64,
    }
    // Threads take frames one at a time from a shared index, so a thread that
    // starts late (an idle CPU waking up) never holds the others back.
    let next = AtomicUsize::new(0);
    let work = |mut progress: Option<&mut Progress>| {
        let mut p = Part {
            by_ip: IpCounter::new(),
            side_frames: Vec::new(),
            forks: Vec::new(),
            comms: Vec::new(),
            samples: 0,
            lost: 0,
            damage: Vec::new(),
            unknown: 0,
            records: 0,
        };
        loop {
            let i = next.fetch_add(1, Ordering::Relaxed);
            let Some(&frame) = frames.get(i) else { break };
            let Some(mut rr) = RecordReader::of_frame(&data, frame) else {
                continue;
            };
            let mut side = false;
            let (by_ip, forks, comms) = (&mut p.by_ip, &mut p.forks, &mut p.comms);
            let (samples, lost) = (&mut p.samples, &mut p.lost);
            let err = rr.for_each_light(|r| match r {
                Light::Sample(s) => {
                    *samples += 1;
                    by_ip.add(s.pid, s.ip, s.event.min(cap), s.period)
                }
                Light::Record(r) => match *r {
                    Record::Lost(l) => *lost = lost.saturating_add(l.lost),
                    Record::Mmap2(_) | Record::KernelSymbols(_) => side = true,
                    Record::Fork(t) if t.pid != t.ppid => {
                        side = true;
                        forks.push((t.pid, t.ppid));
                    }
                    Record::Comm(c) if c.pid == c.tid => comms.push((i, c.pid, c.comm)),
                    _ => {}
                },
            });
            if let Some(e) = err {
                p.damage.push(rr.damage(e));
            }
            if side {
                p.side_frames.push(i);
            }
            p.unknown += rr.unknown;
            p.records += rr.decoded;
            let n = done.fetch_add(rr.len() as u64, Ordering::Relaxed);
            if let Some(pr) = progress.as_mut() {
                pr.update(n, total);
            }
        }
        p
    };
    let threads = threads.clamp(1, 16).min(frames.len() / 4 + 1);
    let mut progress = Progress::new("decoding");
    let parts: Vec<Part> = std::thread::scope(|sc| {
        let handles: Vec<_> = (1..threads).map(|_| sc.spawn(|| work(None))).collect();
        let mut parts = vec![work(Some(&mut progress))];
        parts.extend(
            handles
                .into_iter()
                .map(|h| h.join().expect("a decoding thread panicked")),
        );
        parts
    });
    let mut by_ip = IpCounts::default();
    let (mut side_frames, mut forks, mut comms) = (Vec::new(), Vec::new(), Vec::new());
    for p in parts {
        comms.extend(p.comms);
        let part = p.by_ip.finish();
        if by_ip.is_empty() {
            by_ip = part;
        } else {
            for (k, v) in part {
                let e = by_ip.entry(k).or_default();
                e.0 += v.0;
                e.1 = e.1.saturating_add(v.1);
            }
        }
        side_frames.extend(p.side_frames);
        forks.extend(p.forks);
        info.samples += p.samples;
        info.kernel_lost = info.kernel_lost.saturating_add(p.lost);
        for d in &p.damage {
            info.losses.add(d);
        }
        info.damage.extend(p.damage);
        info.losses.unknown_records += p.unknown;
        info.records += p.records;
    }
    info.damage.sort_by_key(|d| d.offset);
    side_frames.sort_unstable();
    // Each (pid, ip) once per event it was sampled for: the same mappings.
    let others = side_band(
        &data,
        &frames,
        &side_frames,
        &forks,
        by_ip.keys().map(|&(pid, ip, _)| (pid, ip)),
    );
    check_labperf(path, &info)?;
    // Frames in file order (a frame's own records are in order already): the last name wins.
    comms.sort_by_key(|c| c.0);
    let comms = comms.into_iter().map(|(_, p, c)| (p, c)).collect();
    Ok(Counts {
        by_ip,
        others,
        comms,
        info,
    })
}

/// Counts samples per (pid, ip, event): a direct-mapped cache in front of the hash map,
/// since most samples hit a few hot addresses.
struct IpCounter {
    /// (pid, ip, event, samples, period).
    slots: Vec<(u32, u64, u32, u64, u64)>,
    map: IpCounts,
}

impl IpCounter {
    const SLOTS: usize = 1024;

    fn new() -> Self {
        IpCounter {
            slots: vec![(0, 0, 0, 0, 0); Self::SLOTS],
            map: IpCounts::default(),
        }
    }

    #[inline]
    fn add(&mut self, pid: u32, ip: u64, event: u32, period: u64) {
        let i = (ip ^ (ip >> 12) ^ u64::from(pid) ^ u64::from(event)) as usize & (Self::SLOTS - 1);
        let s = &mut self.slots[i];
        if s.3 > 0 && s.1 == ip && s.0 == pid && s.2 == event {
            s.3 += 1;
            s.4 = s.4.saturating_add(period);
            return;
        }
        if s.3 > 0 {
            let e = self.map.entry((s.0, s.1, s.2)).or_default();
            e.0 += s.3;
            e.1 = e.1.saturating_add(s.4);
        }
        *s = (pid, ip, event, 1, period);
    }

    fn finish(mut self) -> IpCounts {
        for (pid, ip, event, n, period) in self.slots {
            if n > 0 {
                let e = self.map.entry((pid, ip, event)).or_default();
                e.0 += n;
                e.1 = e.1.saturating_add(period);
            }
        }
        self.map
    }
}

/// A read-only, pre-faulted memory map of a whole file.
struct Mmap {
    ptr: *const u8,
    len: usize,
}

// SAFETY: the mapping is read-only and private; it is only unmapped on drop.
unsafe impl Send for Mmap {}
// SAFETY: as above.
unsafe impl Sync for Mmap {}

impl AsRef<[u8]> for Mmap {
    fn as_ref(&self) -> &[u8] {
        // SAFETY: ptr..ptr+len is mapped for the life of self.
        unsafe { std::slice::from_raw_parts(self.ptr, self.len) }
    }
}

impl Drop for Mmap {
    fn drop(&mut self) {
        // SAFETY: unmapping our own mapping.
        unsafe { libc::munmap(self.ptr as *mut libc::c_void, self.len) };
    }
}

/// Opens `path` for reading only if it is a regular file of at most `max` bytes: never
/// blocks on a FIFO (opened non-blocking) and never reads a device. Returns the file, its
/// size and its (device, inode).
pub fn open_regular(path: &Path, max: u64) -> Result<(File, u64, (u64, u64)), LoadError> {
    use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
    let file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK)
        .open(path)
        .map_err(|source| LoadError::Open {
            path: path.into(),
            source,
        })?;
    let m = file.metadata().map_err(|source| LoadError::Read {
        path: path.into(),
        source,
    })?;
    if !m.is_file() {
        return Err(LoadError::NotRegular { path: path.into() });
    }
    if m.len() > max {
        return Err(LoadError::TooLarge {
            path: path.into(),
            size: m.len(),
            max,
        });
    }
    Ok((file, m.len(), (m.dev(), m.ino())))
}

/// The whole regular file `path` (see [`open_regular`]) as shared input: a populated
/// memory map (no copy), or its bytes where it cannot be mapped; and its (device, inode).
pub fn map_regular_id(path: &Path, max: u64) -> Result<(Shared, (u64, u64)), LoadError> {
    use std::os::fd::AsRawFd;
    let (file, len, id) = open_regular(path, max)?;
    let len = usize::try_from(len).map_err(|_| LoadError::TooLarge {
        path: path.into(),
        size: len,
        max,
    })?;
    if len > 0 {
        // SAFETY: mapping a regular file we opened, read-only and private.
        let p = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ,
                libc::MAP_PRIVATE | libc::MAP_POPULATE,
                file.as_raw_fd(),
                0,
            )
        };
        if p != libc::MAP_FAILED {
            return Ok((
                Arc::new(Mmap {
                    ptr: p as *const u8,
                    len,
                }),
                id,
            ));
        }
    }
    let mut bytes = Vec::new();
    file.take(len as u64)
        .read_to_end(&mut bytes)
        .map_err(|source| LoadError::Read {
            path: path.into(),
            source,
        })?;
    Ok((Arc::new(bytes), id))
}

/// [`map_regular_id`] without the id.
pub fn map_regular(path: &Path, max: u64) -> Result<Shared, LoadError> {
    map_regular_id(path, max).map(|(d, _)| d)
}

/// A record file as shared input (see [`map_regular`]; record files have no size limit:
/// they are mapped, not copied).
/// The error for a file that holds no labperf frames, with the remedy when it is perf's.
fn not_labperf(path: &Path) -> LoadError {
    use std::io::Read;
    let mut magic = [0u8; 8];
    let perf = std::fs::metadata(path).is_ok_and(|m| m.is_file())
        && std::fs::File::open(path)
            .and_then(|mut f| f.read_exact(&mut magic))
            .is_ok()
        && (&magic == b"PERFILE2" || &magic == b"2ELIFREP");
    LoadError::NotLabperf {
        path: path.into(),
        hint: if perf {
            " It is perf's perf.data: `labperf import FILE -o FILE.lpr` makes a labperf \
             recording of it."
        } else {
            ""
        },
    }
}

pub fn map_file(path: &Path) -> Result<Shared, LoadError> {
    map_regular(path, u64::MAX)
}

fn check_labperf(path: &Path, info: &FileInfo) -> Result<(), LoadError> {
    if info.wire_version.is_none()
        && info.header.is_none()
        && info.records == 0
        && info.trailer.is_none()
    {
        return Err(not_labperf(path));
    }
    Ok(())
}

/// A multiplicative hasher for (pid, ip) keys: SipHash costs more than decoding a sample.
#[derive(Default, Clone, Copy)]
pub struct FxHasher(u64);

impl Hasher for FxHasher {
    fn write(&mut self, bytes: &[u8]) {
        // Eight bytes a step (a stack's addresses are hashed as their bytes).
        let mut c = bytes.chunks_exact(8);
        for w in &mut c {
            self.write_u64(u64::from_le_bytes(w.try_into().expect("8 bytes")));
        }
        for &b in c.remainder() {
            self.write_u64(u64::from(b));
        }
    }
    fn write_u32(&mut self, i: u32) {
        self.write_u64(u64::from(i));
    }
    fn write_u64(&mut self, i: u64) {
        self.0 = (self.0.rotate_left(5) ^ i).wrapping_mul(0x517c_c1b7_2722_0a95);
    }
    fn finish(&self) -> u64 {
        self.0
    }
}

/// Reads `src` in 1 MiB pieces into a decoder; `drain` takes out what is decodable.
fn read(
    src: &Source,
    drain: impl FnMut(&mut Decoder, &mut FileInfo),
) -> Result<FileInfo, LoadError> {
    read_until(src, &|| false, drain)
}

fn read_until(
    src: &Source,
    stop: &dyn Fn() -> bool,
    mut drain: impl FnMut(&mut Decoder, &mut FileInfo),
) -> Result<FileInfo, LoadError> {
    let path = &src.name;
    let (mut file, total): (Box<dyn Read + '_>, u64) = match &src.bytes {
        Some(b) => {
            let v: &[u8] = (**b).as_ref();
            (Box::new(v), v.len() as u64)
        }
        None => {
            let (file, total, _) = open_regular(path, u64::MAX)?;
            // Read no further than the size the file had when opened, even if it grows.
            (Box::new(file.take(total)), total)
        }
    };
    let mut dec = Decoder::new();
    let mut info = FileInfo {
        bytes: total,
        ..Default::default()
    };
    let mut buf = vec![0u8; (total as usize).clamp(4096, 1 << 20)];
    let mut done = 0u64;
    let mut progress = Progress::new("reading");
    loop {
        if stop() {
            return Err(LoadError::Stopped { path: path.into() });
        }
        let n = file.read(&mut buf).map_err(|source| LoadError::Read {
            path: path.into(),
            source,
        })?;
        if n == 0 {
            break;
        }
        done += n as u64;
        progress.update(done, total);
        dec.push(&buf[..n]);
        drain(&mut dec, &mut info);
    }
    dec.finish();
    drain(&mut dec, &mut info);
    info.losses = dec.losses().clone();
    if info.wire_version.is_none()
        && info.header.is_none()
        && info.records == 0
        && info.trailer.is_none()
    {
        return Err(not_labperf(path));
    }
    Ok(info)
}

impl FileInfo {
    fn take(&mut self, e: Event, f: &mut impl FnMut(&Record)) {
        match e {
            Event::Version(v) => self.wire_version = Some(v),
            Event::Header(h) => self.header = Some(*h),
            Event::HeaderExt(x) => self.header_ext = Some(*x),
            Event::Record(r) => {
                self.records += 1;
                self.count(&r);
                f(&r)
            }
            Event::Trailer(t) => self.trailer = Some(*t),
            Event::Damage(d) => self.damage.push(d),
        }
    }

    fn count(&mut self, r: &Record) {
        match r {
            Record::Sample(_) => self.samples += 1,
            Record::Lost(l) => self.kernel_lost = self.kernel_lost.saturating_add(l.lost),
            _ => {}
        }
    }

    /// What a reader should know before trusting a report of this file: damage, and
    /// samples the kernel lost (with their share of all the samples it produced).
    pub fn warnings(&self) -> Vec<String> {
        let mut w: Vec<String> = self.damage_warning().into_iter().collect();
        if self.kernel_lost > 0 {
            let all = self.samples.saturating_add(self.kernel_lost);
            w.push(format!(
                "warning: the kernel lost {} samples, {:.1}% of the {all} it produced (its ring buffer filled): the shares below leave them out; record with a longer period or more --mmap-pages",
                self.kernel_lost,
                100.0 * self.kernel_lost as f64 / all as f64
            ));
        }
        w
    }

    /// Whether anything of the file was lost or could not be decoded.
    pub fn damaged(&self) -> bool {
        !self.losses.is_clean()
    }

    /// One-paragraph warning about damage, or `None` when the file is intact.
    pub fn damage_warning(&self) -> Option<String> {
        if self.losses.is_clean() {
            return None;
        }
        let mut s = format!(
            "warning: the file is damaged: {}.",
            labperf_common::decode::describe_losses(&self.losses)
        );
        for d in self.damage.iter().take(5) {
            s.push_str(&format!("\n  - {d}"));
        }
        if self.damage.len() > 5 {
            s.push_str(&format!("\n  - ... and {} more", self.damage.len() - 5));
        }
        s.push_str("\n  Everything intact was decoded; `labperf info` lists all damage.");
        Some(s)
    }
}

/// The recording machine's CPU in one line (`labperf info`, the HTML report's header).
pub fn cpu_name(cpu: &labperf_common::CpuId) -> String {
    use labperf_common::CpuId;
    match cpu {
        CpuId::X86 {
            vendor,
            family,
            model,
            stepping,
            model_name,
        } => format!(
            "{vendor} family {family:#x} model {model:#x} stepping {stepping} ({model_name})"
        ),
        CpuId::Arm {
            midr,
            implementer,
            part,
            variant,
            revision,
        } => format!(
            "MIDR {} implementer {implementer:#x} part {part:#x} r{variant}p{revision}",
            midr.map_or_else(|| "unknown".into(), |m| format!("{m:#x}"))
        ),
        CpuId::Alpha { model } => format!("Alpha {model}"),
        CpuId::Unknown { cpuinfo } => cpuinfo.lines().next().unwrap_or("unknown").to_string(),
    }
}
