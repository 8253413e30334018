//! The side band symbols need, kept small: forks, and only the mappings and kernel functions (KSYMS) some sample lands in, read again once the samples are known.

use crate::record::load::{LoadError, Source};
use labperf_common::{Decoder, FrameEvent, FrameRef, Light, Mmap2, Record, RecordReader, Shared};
use std::collections::HashMap;

/// A side-band record kept by [`crate::record::counts::sample_counts`] (smaller than a [`Record`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Side {
    Map(Mmap2),
    Fork { pid: u32, ppid: u32 },
    Kernel(labperf_common::KernelSymbols),
}

impl Side {
    /// As a record, for the symbolizer's `observe`.
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
pub(crate) fn side_band(
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
        // Samples cut to their head, their user stacks skipped: not needed here.
        let _ = rr.for_each_side_band(|r| {
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
