//! The recorded CPU time by the kernel's own accounting (the trailer's USAGE item): the workload's rusage, an attached process's or thread's `/proc` times, the recorded CPUs' `/proc/stat`.
//!
//! The host sets these beside the time the samples cover, so that a hole of any size
//! (kernel mode not sampled, samples lost, a child not followed) is said, not hidden.

use crate::prelude::*;
use labperf_common::{Usage, UsageScope};

/// Where the recording's CPU time is read, and the first reading.
pub enum Meter {
    /// The workload the agent spawned: `getrusage(RUSAGE_CHILDREN)` once it was reaped (the
    /// agent has no other child).
    Workload,
    /// An attached process (`thread`: false) or thread: its `stat` file, the reading at the
    /// attach and the last one taken while it was there (none: no account, rather than a
    /// wrong one).
    Proc {
        path: String,
        thread: bool,
        first: Option<ProcTimes>,
        last: Option<ProcTimes>,
        read_at: u64,
    },
    /// The recorded CPUs: their `/proc/stat` lines at the start.
    Cpus { cpus: Vec<u32>, first: CpuTimes },
}

/// A process's or thread's CPU times and faults in clock ticks (with its waited-for
/// children's, which its own `stat` adds in `cutime`, `cstime`, `cminflt`, `cmajflt`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ProcTimes {
    pub user: u64,
    pub system: u64,
    pub minor: u64,
    pub major: u64,
}

/// The recorded CPUs' busy and idle ticks.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct CpuTimes {
    pub user: u64,
    pub system: u64,
    pub idle: u64,
}

/// How often an attached process's `stat` is read again (it may end, and be reaped by its
/// parent, at any moment: its last reading stands for its end).
const REREAD_NS: u64 = 100_000_000;

impl Meter {
    /// The meter of a spawned workload.
    pub fn workload() -> Meter {
        Meter::Workload
    }

    /// The meter of attached process `pid`, or of its thread `tid`.
    pub fn attached(pid: i32, tid: Option<i32>) -> Meter {
        let path = match tid {
            Some(t) => format!("/proc/{pid}/task/{t}/stat"),
            None => format!("/proc/{pid}/stat"),
        };
        let first = read_proc(&path, tid.is_some());
        Meter::Proc {
            path,
            thread: tid.is_some(),
            first,
            last: None,
            read_at: crate::rt::clock_ns(libc::CLOCK_MONOTONIC),
        }
    }

    /// The meter of CPUs `cpus` (all online CPUs when empty).
    pub fn cpus(cpus: &[u32]) -> Meter {
        let stat = crate::rt::read_lossy("/proc/stat").unwrap_or_default();
        let cpus = if cpus.is_empty() {
            cpu_lines(&stat).map(|(c, _)| c).collect()
        } else {
            cpus.to_vec()
        };
        let first = cpu_times(&stat, &cpus);
        Meter::Cpus { cpus, first }
    }

    /// Reads an attached process's times again when the last reading is old enough.
    pub fn tick(&mut self) {
        if let Meter::Proc {
            path,
            thread,
            last,
            read_at,
            ..
        } = self
        {
            let now = crate::rt::clock_ns(libc::CLOCK_MONOTONIC);
            if now.saturating_sub(*read_at) >= REREAD_NS {
                *read_at = now;
                if let Some(t) = read_proc(path, *thread) {
                    *last = Some(t);
                }
            }
        }
    }

    /// The CPU time from the start to now (the workload reaped, the recording over).
    pub fn finish(mut self) -> Option<Usage> {
        let tick = clock_tick_ns();
        match &mut self {
            Meter::Workload => {
                // SAFETY: rusage is plain data; getrusage fills it.
                let mut ru: libc::rusage = unsafe { core::mem::zeroed() };
                // SAFETY: valid pointer.
                if unsafe { libc::getrusage(libc::RUSAGE_CHILDREN, &mut ru) } != 0 {
                    return None;
                }
                let tv = |t: libc::timeval| {
                    (t.tv_sec as u64)
                        .saturating_mul(1_000_000_000)
                        .saturating_add(t.tv_usec as u64 * 1000)
                };
                Some(Usage {
                    scope: UsageScope::Workload,
                    user_ns: tv(ru.ru_utime),
                    system_ns: tv(ru.ru_stime),
                    minor_faults: ru.ru_minflt as u64,
                    major_faults: ru.ru_majflt as u64,
                    resolution_ns: 1000,
                })
            }
            Meter::Proc {
                path,
                thread,
                first,
                last,
                ..
            } => {
                if let Some(t) = read_proc(path, *thread) {
                    *last = Some(t);
                }
                let (a, b) = (first.as_ref()?, last.as_ref()?);
                Some(Usage {
                    scope: if *thread {
                        UsageScope::Thread
                    } else {
                        UsageScope::Process
                    },
                    user_ns: b.user.saturating_sub(a.user).saturating_mul(tick),
                    system_ns: b.system.saturating_sub(a.system).saturating_mul(tick),
                    minor_faults: b.minor.saturating_sub(a.minor),
                    major_faults: b.major.saturating_sub(a.major),
                    resolution_ns: tick,
                })
            }
            Meter::Cpus { cpus, first } => {
                let stat = crate::rt::read_lossy("/proc/stat").ok()?;
                let now = cpu_times(&stat, cpus);
                Some(Usage {
                    scope: UsageScope::Cpus {
                        cpus: cpus.len() as u32,
                        idle_ns: now.idle.saturating_sub(first.idle).saturating_mul(tick),
                    },
                    user_ns: now.user.saturating_sub(first.user).saturating_mul(tick),
                    system_ns: now.system.saturating_sub(first.system).saturating_mul(tick),
                    minor_faults: 0,
                    major_faults: 0,
                    resolution_ns: tick,
                })
            }
        }
    }
}

/// ns per clock tick (`sysconf(_SC_CLK_TCK)`, USER_HZ: 100 on Linux).
fn clock_tick_ns() -> u64 {
    // SAFETY: sysconf has no preconditions.
    let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
    1_000_000_000 / if hz > 0 { hz as u64 } else { 100 }
}

/// A `stat` file's times and faults, with the waited-for children's for a process.
fn read_proc(path: &str, thread: bool) -> Option<ProcTimes> {
    parse_proc_stat(&crate::rt::read_lossy(path).ok()?, thread)
}

/// `/proc/PID/stat`: the fields after the command name (which may hold spaces and
/// parentheses: the last `)` ends it). Fields 10-17 (1-based): minflt, cminflt, majflt,
/// cmajflt, utime, stime, cutime, cstime.
pub fn parse_proc_stat(s: &str, thread: bool) -> Option<ProcTimes> {
    let rest = &s[s.rfind(')')? + 1..];
    let f: Vec<u64> = rest
        .split_ascii_whitespace()
        .skip(1) // the state letter, field 3
        .take(15)
        .map(|v| v.parse().unwrap_or(0))
        .collect();
    // f[0] is field 4 (ppid): field n is f[n - 4].
    let g = |n: usize| f.get(n - 4).copied();
    let children = u64::from(!thread);
    Some(ProcTimes {
        user: g(14)? + children * g(16)?,
        system: g(15)? + children * g(17)?,
        minor: g(10)? + children * g(11)?,
        major: g(12)? + children * g(13)?,
    })
}

/// The `cpuN` lines of `/proc/stat`: the CPU and its ticks.
fn cpu_lines(stat: &str) -> impl Iterator<Item = (u32, Vec<u64>)> + '_ {
    stat.lines().filter_map(|l| {
        let mut w = l.split_ascii_whitespace();
        let cpu: u32 = w.next()?.strip_prefix("cpu")?.parse().ok()?;
        Some((cpu, w.map(|v| v.parse().unwrap_or(0)).collect()))
    })
}

/// The busy (user and nice; system, irq and softirq) and idle (idle and iowait) ticks of
/// `cpus`. Guest time is in user already; steal is another machine's.
pub fn cpu_times(stat: &str, cpus: &[u32]) -> CpuTimes {
    let mut t = CpuTimes::default();
    for (cpu, v) in cpu_lines(stat) {
        if !cpus.contains(&cpu) {
            continue;
        }
        let g = |i: usize| v.get(i).copied().unwrap_or(0);
        t.user += g(0) + g(1);
        t.system += g(2) + g(5) + g(6);
        t.idle += g(3) + g(4);
    }
    t
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_stat_line_with_parentheses_in_the_name_is_read_past_them() {
        // Fields: pid (comm) state ppid pgrp session tty tpgid flags minflt cminflt majflt
        // cmajflt utime stime cutime cstime ...
        let s = "4242 (a) b (c)) R 1 4242 4242 0 -1 4194304 100 50 3 2 700 200 40 10 20 0 1 0 5";
        assert_eq!(
            parse_proc_stat(s, false),
            Some(ProcTimes {
                user: 740,
                system: 210,
                minor: 150,
                major: 5
            })
        );
        assert_eq!(
            parse_proc_stat(s, true),
            Some(ProcTimes {
                user: 700,
                system: 200,
                minor: 100,
                major: 3
            })
        );
        assert_eq!(parse_proc_stat("4242 (cut", false), None);
    }

    #[test]
    fn cpu_times_add_the_busy_and_idle_columns_of_the_cpus_asked() {
        let stat = "cpu  10 10 10 10 10 10 10 0 0 0\n\
                    cpu0 1 2 3 4 5 6 7 8 0 0\n\
                    cpu1 10 20 30 40 50 60 70 80 0 0\n\
                    intr 5\n";
        assert_eq!(
            cpu_times(stat, &[1]),
            CpuTimes {
                user: 30,
                system: 160,
                idle: 90
            }
        );
        assert_eq!(
            cpu_times(stat, &[0, 1]),
            CpuTimes {
                user: 33,
                system: 176,
                idle: 99
            }
        );
    }
}
