//! The fast path of `report`: a record file's samples counted per (pid, tid, ip, event) on several threads (records frames decode independently), with the side band and process names symbols need.

use crate::fxhash::FxHasher;
use crate::progress::Progress;
use crate::record::load::{check_labperf, FileInfo, LoadError, Source};
use crate::record::sideband::{side_band, Side};
use labperf_common::{Damage, Decoder, FrameEvent, FrameRef, Light, Record, RecordReader, Shared};
use std::collections::HashMap;
use std::hash::BuildHasherDefault;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};

/// Per-(pid, tid, ip, event) sample counts and periods, with the FxHash of the report's hot
/// loop. The tid is 0 unless the counts are per thread (`--by tid`). The event is the
/// sample's index in the header's list, those at or above the list's length counted as one
/// ([`crate::record::events::Names::cap`]).
pub type IpCounts = HashMap<(u32, u32, u64, u32), (u64, u64), BuildHasherDefault<FxHasher>>;

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
    /// `--event MEMBER` of a group recording: the member's counts read in its leader's
    /// samples ([`crate::record::group::GroupReads`]), each thread's in file order (a pass
    /// of their own), added as the member's samples; nothing for another recording.
    pub fn add_group_reads(
        &mut self,
        src: &Source,
        event: Option<&crate::record::events::Select>,
        per_thread: bool,
        window: Option<&crate::record::filter::Window>,
    ) -> Result<(), LoadError> {
        let group = crate::record::group::GroupReads::of(
            self.info.header.as_ref(),
            self.info.header_ext.as_ref(),
            event,
        );
        let Some(mut g) = group else {
            return Ok(());
        };
        let per_event = &self.info.per_event;
        g.leave_sampling(|m| per_event.get(m as usize).map_or(0, |t| t.samples));
        let cap = crate::record::events::Names::of(self.info.header.as_ref()).cap();
        let (by_ip, info) = (&mut self.by_ip, &mut self.info);
        crate::record::load::stream(src, |r| {
            let labperf_common::Record::Sample(s) = r else {
                return;
            };
            for x in g.samples(s) {
                let ev = x.event.min(cap);
                info.tally(ev, x.pid, x.ip, 1, x.period);
                if window.is_none_or(|w| w.keeps(x.time)) {
                    let tid = if per_thread { x.tid } else { 0 };
                    let e = by_ip.entry((x.pid, tid, x.ip, ev)).or_default();
                    e.0 += 1;
                    e.1 = e.1.saturating_add(x.period);
                }
            }
        })?;
        Ok(())
    }

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

/// Reads `path` and counts its samples per (pid, ip, event), and per thread with
/// `per_thread`, decoding records frames on up to `threads` threads (frames decode
/// independently). The fast path of `report`. With `window` (`--time`), only the samples
/// in it are counted; the file's account ([`FileInfo::per_event`]) still has them all.
pub fn sample_counts(
    src: &Source,
    threads: usize,
    per_thread: bool,
    window: Option<&crate::record::filter::Window>,
) -> Result<Counts, LoadError> {
    let path = &src.name;
    let data = src.data()?;
    let (frames, mut info) = list_frames(&data);
    // Event indexes past the header's list are counted as one.
    let cap = crate::record::events::Names::of(info.header.as_ref()).cap();
    let counter = Counter {
        data: &data,
        frames: &frames,
        cap,
        per_thread,
        window,
        total: info.bytes,
        next: AtomicUsize::new(0),
        done: AtomicU64::new(0),
    };
    let parts = counter.run(threads);
    let mut m = Merged::of(parts, &mut info);
    for (&(pid, _, ip, ev), &(n, period)) in &m.by_ip {
        info.tally(ev, pid, ip, n, period);
    }
    for (&(pid, ip, ev), &(n, period)) in &m.outside {
        info.tally(ev, pid, ip, n, period);
    }
    info.damage.sort_by_key(|d| d.offset);
    m.side_frames.sort_unstable();
    // Each (pid, ip) once per event it was sampled for: the same mappings.
    let others = side_band(
        &data,
        &frames,
        &m.side_frames,
        &m.forks,
        m.by_ip.keys().map(|&(pid, _, ip, _)| (pid, ip)),
    );
    check_labperf(path, &info)?;
    // Frames in file order (a frame's own records are in order already): the last name wins.
    m.comms.sort_by_key(|c| c.0);
    let comms = m.comms.into_iter().map(|(_, p, c)| (p, c)).collect();
    Ok(Counts {
        by_ip: m.by_ip,
        others,
        comms,
        info,
    })
}

/// The records frames of `data` as 24-byte references (less than the smallest frame),
/// read on the workers, and what the file says outside them (header, trailer, damage).
fn list_frames(data: &Shared) -> (Vec<FrameRef>, FileInfo) {
    let total = (**data).as_ref().len() as u64;
    let mut dec = Decoder::whole(data.clone());
    let mut info = FileInfo {
        bytes: total,
        ..Default::default()
    };
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
    (frames, info)
}

/// What one thread counted of the frames it took.
struct Part {
    by_ip: IpCounter,
    /// The samples outside `--time`'s window, for the file's account only: per (idle
    /// (pid 0 or 1), kernel half (ip 0 or 1 << 63), event).
    outside: HashMap<(u32, u64, u32), (u64, u64)>,
    /// The frames holding mappings or forks, read again once the samples are known.
    side_frames: Vec<usize>,
    /// (pid, ppid) of each fork.
    forks: Vec<(u32, u32)>,
    /// (frame, pid, name) of each process's COMM.
    comms: Vec<(usize, u32, String)>,
    samples: u64,
    lost: u64,
    exits: u64,
    damage: Vec<Damage>,
    unknown: u64,
    records: u64,
}

impl Part {
    fn new() -> Part {
        Part {
            by_ip: IpCounter::new(),
            outside: HashMap::new(),
            side_frames: Vec::new(),
            forks: Vec::new(),
            comms: Vec::new(),
            samples: 0,
            lost: 0,
            exits: 0,
            damage: Vec::new(),
            unknown: 0,
            records: 0,
        }
    }

    /// Counts the records of frame `i` (samples cut to their head); returns the frame's
    /// length in bytes.
    fn count(
        &mut self,
        mut rr: RecordReader,
        i: usize,
        (cap, per_thread, window): (u32, bool, Option<&crate::record::filter::Window>),
    ) -> u64 {
        let mut side = false;
        let (by_ip, forks, comms) = (&mut self.by_ip, &mut self.forks, &mut self.comms);
        let (samples, lost, exits) = (&mut self.samples, &mut self.lost, &mut self.exits);
        let outside = &mut self.outside;
        let err = rr.for_each_light(|r| match r {
            Light::Sample(s) => {
                *samples += 1;
                if window.is_some_and(|w| !w.keeps(s.time)) {
                    let k = (u32::from(s.pid != 0), s.ip & (1 << 63), s.event.min(cap));
                    let e = outside.entry(k).or_default();
                    e.0 += 1;
                    e.1 = e.1.saturating_add(s.period);
                    return;
                }
                let tid = if per_thread { s.tid } else { 0 };
                by_ip.add(s.pid, tid, s.ip, s.event.min(cap), s.period)
            }
            Light::Record(r) => match *r {
                Record::Lost(l) => *lost = lost.saturating_add(l.lost),
                Record::Mmap2(_) | Record::KernelSymbols(_) => side = true,
                Record::Fork(t) if t.pid != t.ppid => {
                    side = true;
                    forks.push((t.pid, t.ppid));
                }
                Record::Comm(c) if c.pid == c.tid => comms.push((i, c.pid, c.comm)),
                Record::Exit(_) => *exits += 1,
                _ => {}
            },
        });
        if let Some(e) = err {
            self.damage.push(rr.damage(e));
        }
        if side {
            self.side_frames.push(i);
        }
        self.unknown += rr.unknown;
        self.records += rr.decoded;
        rr.len() as u64
    }
}

/// The frames of one file shared among counting threads.
struct Counter<'a> {
    data: &'a Shared,
    frames: &'a [FrameRef],
    cap: u32,
    /// Counts per thread (`--by tid`).
    per_thread: bool,
    /// `--time`: only the samples in it.
    window: Option<&'a crate::record::filter::Window>,
    total: u64,
    /// The next frame to take: threads take frames one at a time from this shared index,
    /// so a thread that starts late (an idle CPU waking up) never holds the others back.
    next: AtomicUsize,
    /// Bytes counted, for the progress line.
    done: AtomicU64,
}

impl Counter<'_> {
    /// Counts every frame on up to `threads` threads (this one shows progress).
    fn run(&self, threads: usize) -> Vec<Part> {
        let threads = threads.clamp(1, 16).min(self.frames.len() / 4 + 1);
        let mut progress = Progress::new("decoding");
        std::thread::scope(|sc| {
            let handles: Vec<_> = (1..threads).map(|_| sc.spawn(|| self.work(None))).collect();
            let mut parts = vec![self.work(Some(&mut progress))];
            parts.extend(
                handles
                    .into_iter()
                    .map(|h| h.join().expect("a decoding thread panicked")),
            );
            parts
        })
    }

    /// One thread's work: frames taken one at a time until none is left.
    fn work(&self, mut progress: Option<&mut Progress>) -> Part {
        let mut p = Part::new();
        loop {
            let i = self.next.fetch_add(1, Ordering::Relaxed);
            let Some(&frame) = self.frames.get(i) else {
                break;
            };
            let Some(rr) = RecordReader::of_frame(self.data, frame) else {
                continue;
            };
            let len = p.count(rr, i, (self.cap, self.per_thread, self.window));
            let n = self.done.fetch_add(len, Ordering::Relaxed);
            if let Some(pr) = progress.as_mut() {
                pr.update(n, self.total);
            }
        }
        p
    }
}

/// The threads' parts joined: counts added, side frames, forks and names gathered (in no
/// order yet), the rest added to the file's [`FileInfo`].
struct Merged {
    by_ip: IpCounts,
    outside: HashMap<(u32, u64, u32), (u64, u64)>,
    side_frames: Vec<usize>,
    forks: Vec<(u32, u32)>,
    comms: Vec<(usize, u32, String)>,
}

impl Merged {
    fn of(parts: Vec<Part>, info: &mut FileInfo) -> Merged {
        let mut m = Merged {
            by_ip: IpCounts::default(),
            outside: HashMap::new(),
            side_frames: Vec::new(),
            forks: Vec::new(),
            comms: Vec::new(),
        };
        for p in parts {
            m.comms.extend(p.comms);
            for (k, v) in p.outside {
                let e = m.outside.entry(k).or_default();
                e.0 += v.0;
                e.1 = e.1.saturating_add(v.1);
            }
            let part = p.by_ip.finish();
            if m.by_ip.is_empty() {
                m.by_ip = part;
            } else {
                for (k, v) in part {
                    let e = m.by_ip.entry(k).or_default();
                    e.0 += v.0;
                    e.1 = e.1.saturating_add(v.1);
                }
            }
            m.side_frames.extend(p.side_frames);
            m.forks.extend(p.forks);
            info.samples += p.samples;
            info.kernel_lost = info.kernel_lost.saturating_add(p.lost);
            info.exits += p.exits;
            for d in &p.damage {
                info.losses.add(d);
            }
            info.damage.extend(p.damage);
            info.losses.unknown_records += p.unknown;
            info.records += p.records;
        }
        m
    }
}

/// Counts samples per (pid, tid, ip, event): a direct-mapped cache in front of the hash
/// map, since most samples hit a few hot addresses.
struct IpCounter {
    /// (pid, tid, ip, event, samples, period).
    slots: Vec<(u32, u32, u64, u32, u64, u64)>,
    map: IpCounts,
}

impl IpCounter {
    const SLOTS: usize = 1024;

    fn new() -> Self {
        IpCounter {
            slots: vec![(0, 0, 0, 0, 0, 0); Self::SLOTS],
            map: IpCounts::default(),
        }
    }

    #[inline]
    fn add(&mut self, pid: u32, tid: u32, ip: u64, event: u32, period: u64) {
        let i = (ip ^ (ip >> 12) ^ u64::from(pid) ^ u64::from(tid) ^ u64::from(event)) as usize
            & (Self::SLOTS - 1);
        let s = &mut self.slots[i];
        if s.4 > 0 && s.2 == ip && s.0 == pid && s.1 == tid && s.3 == event {
            s.4 += 1;
            s.5 = s.5.saturating_add(period);
            return;
        }
        if s.4 > 0 {
            let e = self.map.entry((s.0, s.1, s.2, s.3)).or_default();
            e.0 += s.4;
            e.1 = e.1.saturating_add(s.5);
        }
        *s = (pid, tid, ip, event, 1, period);
    }

    fn finish(mut self) -> IpCounts {
        for (pid, tid, ip, event, n, period) in self.slots {
            if n > 0 {
                let e = self.map.entry((pid, tid, ip, event)).or_default();
                e.0 += n;
                e.1 = e.1.saturating_add(period);
            }
        }
        self.map
    }
}
