//! The workload's executable of one recording: the program its process became after its last `exec`, found from the samples' times where the records' order cannot tell.
//!
//! The agent writes each CPU's ring in turn, so records of different CPUs are not in time
//! order in a file, and `COMM`/`MMAP2` records carry no time. A process started through a
//! wrapper that execs the real program (`env prog`, a shell script's `exec`, a pyenv shim)
//! execs twice, and the kernel may move it to another CPU at the second `exec` (exec
//! balancing): the program's `COMM` and `MMAP2` can then come before the wrapper's in the
//! file, and an `exec`'s own `COMM` and `MMAP2` can be in two rings when the process is
//! moved in between. So each `exec` of the workload's process gives an image: the file the
//! process mapped that is named as the `COMM` (the kernel names the process after the file
//! it execs, cut to 15 bytes), else the first file it maps after the `COMM` in the file
//! (a script's interpreter, a link's target), else a file whose name begins with the
//! `COMM`'s (`python3` runs `python3.11`); the image that ran last is the one holding the
//! addresses of the process's latest samples, which carry their time.

use labperf_common::{Record, Sample};

/// At most this many of the process's latest samples are kept to place in an image.
const LATEST: usize = 16;
/// At most this many addresses of a sample (its ip, then its user return addresses).
const ADDRS: usize = 8;
/// At most this many images (`exec`s of one process) are told apart; more are one too many
/// wrappers to matter, and the bound keeps memory fixed.
const IMAGES: usize = 64;
/// At most this many executable mappings of files are kept (of the process, and of any
/// process before the first `exec` says which one is the workload's).
const MAPPINGS: usize = 4096;
/// `PROT_EXEC`.
const PROT_EXEC: u32 = 4;

/// One `exec`'s image: the process's name it gave, the first file the process mapped
/// after it in the file, and (in [`Executable::finish`]) its file.
#[derive(Debug, Default)]
struct Image {
    comm: String,
    after: Option<String>,
    path: Option<String>,
}

/// An executable mapping of a file: process, file, start, end.
type Mapping = (u32, String, u64, u64);

/// Finds the workload's executable as the records of one recording go by ([`Executable::record`]),
/// in bounded memory.
#[derive(Debug, Default)]
pub struct Executable {
    /// The process of the recording's first `exec`.
    pid: Option<u32>,
    /// Its images in file order.
    images: Vec<Image>,
    /// Executable mappings of files: the process's, and before its first `exec` any
    /// process's.
    mapped: Vec<Mapping>,
    /// Its latest samples (before its first `exec`, any process's): process, time,
    /// addresses, how many.
    latest: Vec<(u32, u64, [u64; ADDRS], usize)>,
    /// The first file mapped at all (an attached process's executable).
    first_file: Option<String>,
}

impl Executable {
    /// Takes in one record.
    pub fn record(&mut self, r: &Record) {
        match r {
            Record::Comm(c) if c.exec && self.pid.is_none_or(|p| p == c.pid) => {
                if self.pid.is_none() {
                    self.pid = Some(c.pid);
                    self.mapped.retain(|m| m.0 == c.pid);
                    self.latest.retain(|l| l.0 == c.pid);
                }
                if self.images.len() < IMAGES {
                    self.images.push(Image {
                        comm: c.comm.clone(),
                        ..Image::default()
                    });
                }
            }
            Record::Mmap2(m) => {
                if m.path.is_empty() || m.path.starts_with('[') || m.path.starts_with("//anon") {
                    return;
                }
                if self.first_file.is_none() {
                    self.first_file = Some(m.path.clone());
                }
                if self.pid.is_some_and(|p| p != m.pid) {
                    return;
                }
                if m.prot & PROT_EXEC != 0 && self.mapped.len() < MAPPINGS {
                    let end = m.addr.saturating_add(m.len);
                    self.mapped.push((m.pid, m.path.clone(), m.addr, end));
                }
                if let Some(last) = self.images.last_mut() {
                    if last.after.is_none() {
                        last.after = Some(m.path.clone());
                    }
                }
            }
            Record::Sample(s) if self.pid.is_none_or(|p| p == s.pid) => self.sample(s),
            _ => {}
        }
    }

    /// Keeps `s` if it is among the process's [`LATEST`] latest samples.
    fn sample(&mut self, s: &Sample) {
        if self.latest.len() == LATEST {
            let (i, &(_, t, _, _)) = self
                .latest
                .iter()
                .enumerate()
                .min_by_key(|(_, l)| l.1)
                .expect("LATEST > 0");
            if t >= s.time {
                return;
            }
            self.latest.swap_remove(i);
        }
        // Kernel addresses (the top bit set) are in no image.
        let mut addrs = [0; ADDRS];
        let mut n = 0;
        for a in std::iter::once(s.ip)
            .chain(s.callchain.iter().copied())
            .filter(|a| a >> 63 == 0)
            .take(ADDRS)
        {
            addrs[n] = a;
            n += 1;
        }
        self.latest.push((s.pid, s.time, addrs, n));
    }

    /// The executable: the image holding the latest sample that one image alone holds,
    /// else the last image in file order, else the first file mapped.
    pub fn finish(mut self) -> Option<String> {
        for i in &mut self.images {
            let base = |m: &&Mapping| m.1.rsplit('/').next().unwrap_or(&m.1).to_string();
            // The kernel cuts a name to 15 bytes.
            let named = |m: &&Mapping| {
                let b = base(m);
                b == i.comm || (i.comm.len() == 15 && b.starts_with(i.comm.as_str()))
            };
            let begins = |m: &&Mapping| !i.comm.is_empty() && base(m).starts_with(i.comm.as_str());
            i.path = (self.mapped.iter().find(named).map(|m| m.1.clone()))
                .or_else(|| i.after.clone())
                .or_else(|| self.mapped.iter().find(begins).map(|m| m.1.clone()));
        }
        let pid = self.pid;
        self.latest.retain(|l| Some(l.0) == pid);
        self.latest.sort_unstable_by_key(|l| std::cmp::Reverse(l.1));
        let holds = |i: &Image, a: u64| {
            self.mapped
                .iter()
                .any(|m| Some(&m.1) == i.path.as_ref() && m.2 <= a && a < m.3)
        };
        for (_, _, addrs, n) in &self.latest {
            for &a in &addrs[..*n] {
                let mut holding = self.images.iter().filter(|i| holds(i, a));
                if let (Some(one), None) = (holding.next(), holding.next()) {
                    return one.path.clone();
                }
            }
        }
        match self.images.iter().rev().find_map(|i| i.path.clone()) {
            Some(p) => Some(p),
            None => self.first_file,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use labperf_common::{Comm, Mmap2};

    fn comm(pid: u32, name: &str) -> Record {
        Record::Comm(Comm {
            pid,
            tid: pid,
            comm: name.into(),
            exec: true,
        })
    }

    fn mmap(pid: u32, path: &str, addr: u64, prot: u32) -> Record {
        Record::Mmap2(Mmap2 {
            pid,
            tid: pid,
            addr,
            len: 0x1000,
            prot,
            path: path.into(),
            ..Mmap2::default()
        })
    }

    fn sample(pid: u32, time: u64, ip: u64) -> Record {
        Record::Sample(Sample {
            pid,
            tid: pid,
            ip,
            time,
            ..Sample::default()
        })
    }

    fn executable(records: &[Record]) -> Option<String> {
        let mut e = Executable::default();
        for r in records {
            e.record(r);
        }
        e.finish()
    }

    #[test]
    fn the_program_a_wrapper_execs_is_the_executable_in_either_ring_order() {
        let wrapper = [
            comm(7, "env"),
            mmap(7, "/usr/bin/env", 0x5000, 5),
            mmap(7, "/usr/lib/libc.so.6", 0x9000, 5),
            sample(7, 100, 0x5010),
        ];
        let program = [
            comm(7, "deep"),
            mmap(7, "/tmp/deep", 0x6000, 5),
            mmap(7, "/usr/lib/libc.so.6", 0xa000, 5),
            sample(7, 200, 0x6010),
            sample(7, 300, 0xa010),
        ];
        // As the kernel wrote them, and as a CPU's ring drained before another's leaves
        // them when exec balancing moved the process to that CPU at its second exec.
        let in_order: Vec<Record> = wrapper.iter().chain(&program).cloned().collect();
        let drained: Vec<Record> = program.iter().chain(&wrapper).cloned().collect();
        assert_eq!(executable(&in_order).as_deref(), Some("/tmp/deep"));
        assert_eq!(executable(&drained).as_deref(), Some("/tmp/deep"));
    }

    #[test]
    fn a_program_whose_mappings_were_drained_before_its_exec_s_comm_is_the_executable() {
        // The process moved to another CPU between the program's COMM and its MMAP2s, and
        // that CPU's ring was drained first: the program's mappings come before every COMM.
        let r = [
            mmap(7, "/tmp/deep", 0x6000, 5),
            mmap(7, "/usr/lib/libc.so.6", 0xa000, 5),
            sample(7, 200, 0x6010),
            comm(7, "env"),
            mmap(7, "/usr/bin/env", 0x5000, 5),
            sample(7, 100, 0x5010),
            comm(7, "deep"),
        ];
        assert_eq!(executable(&r).as_deref(), Some("/tmp/deep"));
    }

    #[test]
    fn comms_in_one_ring_and_mappings_in_another_still_give_the_program() {
        // Both COMMs drained before both execs' mappings: each exec's first mapping after
        // it in the file is the wrong one.
        let r = [
            comm(7, "env"),
            comm(7, "deep"),
            mmap(7, "/usr/bin/env", 0x5000, 5),
            sample(7, 100, 0x5010),
            mmap(7, "/tmp/deep", 0x6000, 5),
            sample(7, 200, 0x6010),
        ];
        assert_eq!(executable(&r).as_deref(), Some("/tmp/deep"));
        // A script: its interpreter is the first file mapped after its COMM.
        let r = [
            comm(7, "run.sh"),
            mmap(7, "/usr/bin/bash", 0x5000, 5),
            sample(7, 100, 0x5010),
        ];
        assert_eq!(executable(&r).as_deref(), Some("/usr/bin/bash"));
        // `python3`, a link to python3.11, mapped before its COMM in the file.
        let r = [
            mmap(7, "/usr/bin/python3.11", 0x5000, 5),
            sample(7, 100, 0x5010),
            comm(7, "python3"),
        ];
        assert_eq!(executable(&r).as_deref(), Some("/usr/bin/python3.11"));
    }

    #[test]
    fn without_a_sample_in_one_image_alone_the_last_exec_in_the_file_wins() {
        // Both images non-PIE at the same address: no sample tells them apart.
        let r = [
            comm(7, "env"),
            mmap(7, "/usr/bin/env", 0x400000, 5),
            comm(7, "prog"),
            mmap(7, "/opt/prog", 0x400000, 5),
            sample(7, 200, 0x400010),
        ];
        assert_eq!(executable(&r).as_deref(), Some("/opt/prog"));
        // An attached process: no exec, its first file.
        let r = [mmap(9, "/usr/bin/sleep", 0x5000, 5), sample(9, 1, 0x5010)];
        assert_eq!(executable(&r).as_deref(), Some("/usr/bin/sleep"));
    }

    #[test]
    fn memory_stays_bounded_by_the_latest_samples_and_the_images() {
        let mut e = Executable::default();
        for k in 0..1000u64 {
            e.record(&comm(7, "w"));
            e.record(&mmap(7, &format!("/w{k}"), 0x1000 * k, 5));
        }
        for t in 0..100_000u64 {
            e.record(&sample(7, t, 0x1000 * (t % 1000) + 8));
        }
        assert_eq!(e.images.len(), IMAGES);
        assert_eq!(e.mapped.len(), 1000);
        assert_eq!(e.latest.len(), LATEST);
        assert!(e.latest.iter().all(|l| l.1 >= 100_000 - LATEST as u64));
        // The latest sample (t 99,999, at /w999's address) is in no image kept: the last
        // image kept (/w63) is the answer.
        assert_eq!(e.finish().as_deref(), Some("/w63"));
    }
}
