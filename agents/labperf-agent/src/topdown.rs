//! Intel TopDown: detection from sysfs, the `stat --topdown` counting loop (per thread
//! from SLOTS + PERF_METRICS on Ice Lake and later, per core system-wide before), its
//! live lines, and the `record --topdown` group. The kernel is reached through
//! [`Kernel`], so tests replay scripted group reads.

use crate::prelude::*;

use crate::events::{self, EventSpec};
use crate::perf::FORMAT_TOTAL_TIME_RUNNING as RUN;
use crate::perf::{self, AttrPlan, FORMAT_GROUP, FORMAT_TOTAL_TIME_ENABLED as EN};
use labperf_common::topdown as td;
use perf_event_open_sys::bindings::perf_event_attr;

pub use crate::sys::sysfs_root;

fn read_trim(p: &str) -> Option<String> {
    Some(crate::rt::read_to_string(p).ok()?.trim().to_string())
}

pub use td::Kind;

/// What `--topdown` opens on this machine.
#[derive(Debug, Clone)]
pub struct Recipe {
    pub pmu: String,
    pub kind: Kind,
    pub level: u8,
    /// Group order: `slots` then the metrics (Metrics), or [`td::LEGACY_EVENTS`] (Legacy).
    pub events: Vec<EventSpec>,
    /// The sysfs `.scale` of each event (1 when absent).
    pub scales: Vec<u64>,
    pub notes: Vec<String>,
}

impl Recipe {
    /// Where each TopDown event sits among the counts.
    pub fn layout(&self) -> td::Layout {
        td::Layout::new(
            self.kind,
            self.level,
            self.events.iter().map(|e| e.name.as_str()),
        )
    }
}

/// Reads which TopDown events the core PMU offers (`cpu`, or `cpu_core` on hybrid parts).
pub fn detect(sysfs: &str, level: u8) -> Result<Recipe, String> {
    let devices = format!("{sysfs}/bus/event_source/devices");
    let hybrid = crate::rt::is_dir(&format!("{devices}/cpu_core/events"));
    let pmu = if hybrid { "cpu_core" } else { "cpu" };
    let evdir = format!("{devices}/{pmu}/events");
    let has = |n: &str| crate::rt::is_file(&format!("{evdir}/{n}"));
    let spec = |n: &str| -> Result<EventSpec, String> {
        let mut s = events::parse_in(&devices, &format!("{pmu}/{n}/"))?;
        s.name = n.into();
        Ok(s)
    };
    let mut notes = Vec::new();
    if hybrid {
        notes.push("hybrid CPU: TopDown comes from the cpu_core PMU (P-cores); time on E-cores (cpu_atom) is not in it".into());
    }
    if has(td::SLOTS.0) {
        let mut ev = vec![spec(td::SLOTS.0)?];
        for (n, _) in td::LEVEL1_EVENTS {
            if has(n) {
                ev.push(spec(n)?);
            } else {
                notes.push(format!("{pmu} has no {n}: its column stays empty"));
            }
        }
        if ev.len() < 3 {
            return Err(format!(
                "{evdir} has fewer than two TopDown metric events: perf's ratios need at least two"
            ));
        }
        if level == 2 {
            if let Some((n, _)) = td::LEVEL2_EVENTS.iter().find(|(n, _)| !has(n)) {
                return Err(format!(
                    "--level 2 needs Sapphire Rapids or later: {evdir} has no {n}; use --level 1"
                ));
            }
            for (n, _) in td::LEVEL2_EVENTS {
                ev.push(spec(n)?);
            }
        }
        let scales = vec![1; ev.len()];
        return Ok(Recipe {
            pmu: pmu.into(),
            kind: Kind::Metrics,
            level,
            events: ev,
            scales,
            notes,
        });
    }
    if has(td::LEGACY_EVENTS[0]) {
        if level == 2 {
            return Err("--level 2 needs Sapphire Rapids or later; this CPU has only the pre-Ice Lake TopDown events".into());
        }
        let mut ev = Vec::new();
        let mut scales = Vec::new();
        for n in td::LEGACY_EVENTS {
            let mut s =
                spec(n).map_err(|e| format!("pre-Ice Lake TopDown needs all five events: {e}"))?;
            // System-wide, per core: kernel time is part of the core's slots.
            s.kernel = true;
            s.user = true;
            ev.push(s);
            let sc = read_trim(&format!("{evdir}/{n}.scale"));
            scales.push(sc.and_then(|v| v.parse().ok()).unwrap_or(1));
        }
        return Ok(Recipe {
            pmu: pmu.into(),
            kind: Kind::Legacy,
            level: 1,
            events: ev,
            scales,
            notes,
        });
    }
    Err(format!("this machine has no TopDown events: {evdir} has neither slots (Ice Lake and later) nor topdown-total-slots (Sandy Bridge to Cascade Lake). TopDown needs an Intel CPU whose PMU the kernel drives (a VM without PMU passthrough has none)"))
}

/// The attrs of `stat --topdown`: one group led by SLOTS with PERF_FORMAT_GROUP (Metrics),
/// or five separate per-CPU counters (Legacy).
pub fn stat_plans(r: &Recipe, spawned: bool, inherit: bool) -> Vec<(AttrPlan, Option<usize>)> {
    r.events
        .iter()
        .enumerate()
        .map(|(i, s)| {
            let lead = r.kind == Kind::Legacy || i == 0;
            let p = AttrPlan {
                read_format: EN
                    | RUN
                    | if r.kind == Kind::Metrics {
                        FORMAT_GROUP
                    } else {
                        0
                    },
                disabled: lead && spawned && r.kind == Kind::Metrics,
                enable_on_exec: lead && spawned && r.kind == Kind::Metrics,
                inherit: inherit && r.kind == Kind::Metrics,
                ..AttrPlan::new(s.clone())
            };
            (p, if lead { None } else { Some(0) })
        })
        .collect()
}

/// The `record --topdown` events: `{slots, SAMPLER, topdown-*}`: SLOTS leads but cannot
/// sample, so the second event samples and reads the group.
pub fn record_specs(r: &Recipe, sampler: EventSpec) -> Result<Vec<EventSpec>, String> {
    if r.kind == Kind::Legacy {
        return Err("record --topdown needs Ice Lake or later (SLOTS and PERF_METRICS): this CPU has only the pre-Ice Lake TopDown events, which count per core and cannot be read in samples; use stat --topdown".into());
    }
    let mut sampler = sampler;
    if r.pmu == "cpu_core" && sampler.type_ == events::PERF_TYPE_HARDWARE {
        // Hybrid: a generic hardware event names its PMU in config bits 32-63.
        sampler.config |= u64::from(r.events[0].type_) << 32;
    }
    let mut v = r.events.clone();
    v.insert(1, sampler);
    Ok(v)
}

/// The kernel calls counting needs; [`Real`] makes them, tests script them.
pub trait Kernel {
    fn open(&mut self, a: &mut perf_event_attr, pid: i32, cpu: i32, group: i32)
        -> Result<i32, i32>;
    fn read(&mut self, fd: i32, buf: &mut [u64]) -> usize;
    fn enable(&mut self, fd: i32);
}

/// The running kernel.
#[derive(Default)]
pub struct Real(Vec<perf::Fd>);

impl Kernel for Real {
    fn open(
        &mut self,
        a: &mut perf_event_attr,
        pid: i32,
        cpu: i32,
        group: i32,
    ) -> Result<i32, i32> {
        let fd = perf::open(a, pid, cpu, group).map_err(|e| e.errno)?;
        let n = fd.0;
        self.0.push(fd);
        Ok(n)
    }
    fn read(&mut self, fd: i32, buf: &mut [u64]) -> usize {
        perf::read_raw(fd, buf)
    }
    fn enable(&mut self, fd: i32) {
        perf::enable_raw(fd);
    }
}

/// One thread's group (Metrics) or one CPU's counters (Legacy).
pub struct Group {
    pub tid: Option<i32>,
    fds: Vec<i32>,
    prev: Vec<u64>,
}

/// The open counters of `stat --topdown`.
pub struct Counting {
    pub recipe: Recipe,
    pub groups: Vec<Group>,
}

/// Opens the counters: per thread in `tids` (Metrics), or per CPU system-wide (Legacy).
pub fn open(
    k: &mut dyn Kernel,
    recipe: Recipe,
    tids: &[i32],
    cpus: &[i32],
    spawned: bool,
    inherit: bool,
) -> Result<Counting, String> {
    let plans = stat_plans(&recipe, spawned, inherit);
    let mut groups = Vec::new();
    let targets: Vec<(i32, i32)> = match recipe.kind {
        Kind::Metrics => tids.iter().map(|&t| (t, -1)).collect(),
        Kind::Legacy => cpus.iter().map(|&c| (-1, c)).collect(),
    };
    for (pid, cpu) in targets {
        let mut fds = Vec::new();
        for (p, leader) in &plans {
            let mut a = p.to_kernel();
            let g = leader.map_or(-1, |l| fds[l]);
            match k.open(&mut a, pid, cpu, g) {
                Ok(fd) => fds.push(fd),
                Err(e) => {
                    let mut m = perf::explain(&p.spec.name, p, e);
                    if recipe.kind == Kind::Legacy && (e == libc::EACCES || e == libc::EPERM) {
                        m = ROOT_NEEDED.into();
                    }
                    return Err(m);
                }
            }
        }
        groups.push(Group {
            tid: (recipe.kind == Kind::Metrics).then_some(pid),
            prev: vec![0; fds.len()],
            fds,
        });
    }
    Ok(Counting { recipe, groups })
}

impl Counting {
    /// Enables the counters of an attached process (a spawned one starts them at exec).
    pub fn enable(&self, k: &mut dyn Kernel) {
        for g in &self.groups {
            g.fds.iter().for_each(|&f| k.enable(f));
        }
    }

    /// Each group's counts since the last call. A Metrics group is read once, with
    /// PERF_FORMAT_GROUP: the kernel folds PERF_METRICS into the counts and clears it on
    /// every read, so a second read would see a fresh measurement period.
    pub fn deltas(&mut self, k: &mut dyn Kernel) -> Vec<(Option<i32>, Vec<u64>)> {
        let n = self.recipe.events.len();
        let mut out = Vec::new();
        for g in &mut self.groups {
            let mut now = vec![0u64; n];
            match self.recipe.kind {
                Kind::Metrics => {
                    let mut b = vec![0u64; 3 + n];
                    if k.read(g.fds[0], &mut b) == 3 + n && b[0] as usize == n {
                        now.copy_from_slice(&b[3..]);
                    } else {
                        now.copy_from_slice(&g.prev);
                    }
                }
                Kind::Legacy => {
                    for (i, &fd) in g.fds.iter().enumerate() {
                        let mut b = [0u64; 3];
                        now[i] = if k.read(fd, &mut b) == 3 {
                            // Scaled for multiplexing, then by the event's sysfs scale.
                            ((u128::from(b[0]) * u128::from(b[1]))
                                .checked_div(u128::from(b[2]))
                                .unwrap_or(0) as u64)
                                .saturating_mul(self.recipe.scales[i])
                        } else {
                            g.prev[i]
                        };
                    }
                }
            }
            let d = now
                .iter()
                .zip(&g.prev)
                .map(|(a, b)| a.wrapping_sub(*b))
                .collect();
            g.prev = now;
            out.push((g.tid, d));
        }
        out
    }
}

/// The cells of one line (see [`td::cells`]).
pub fn cells(r: &Recipe, v: &[u64]) -> Vec<String> {
    td::cells(r.layout().parts(v).as_ref(), titles(r).len())
}

/// The column titles of a line.
pub fn titles(r: &Recipe) -> Vec<&'static str> {
    r.layout().titles()
}

/// The live table's header (see [`td::header_line`]).
pub fn header_line(r: &Recipe, first: &str, per_thread: bool) -> String {
    td::header_line(first, per_thread, &titles(r))
}

/// One live line: the interval's end, the thread when per thread, the cells.
pub fn line(time_ns: u64, tid: Option<i32>, cells: &[String]) -> String {
    let tid = tid.map(|t| t.to_string());
    td::table_line(&td::seconds(time_ns), tid.as_deref(), cells)
}

/// Scripted group reads in place of the kernel's (`LABPERF_TOPDOWN_REPLAY`): a text file
/// with one read per line, the words a `read` of a group returns (nr, time_enabled,
/// time_running, values...), taken in order; once they run out reads fail (no change).
pub struct Replay {
    reads: alloc::collections::VecDeque<Vec<u64>>,
    fds: i32,
}

impl Replay {
    pub fn from_file(path: &str) -> Result<Replay, String> {
        let text = crate::rt::read_to_string(path)
            .map_err(|e| format!("cannot read the TopDown replay {path}: {e}"))?;
        let mut reads = alloc::collections::VecDeque::new();
        for (i, l) in text.lines().enumerate() {
            let words: Result<Vec<u64>, _> = l.split_whitespace().map(str::parse).collect();
            match words {
                Ok(w) if !w.is_empty() => reads.push_back(w),
                Ok(_) => {}
                Err(_) => return Err(format!("{path} line {}: expected numbers", i + 1)),
            }
        }
        Ok(Replay { reads, fds: 1000 })
    }
}

impl Kernel for Replay {
    fn open(&mut self, _: &mut perf_event_attr, _: i32, _: i32, _: i32) -> Result<i32, i32> {
        self.fds += 1;
        Ok(self.fds)
    }
    fn read(&mut self, _: i32, buf: &mut [u64]) -> usize {
        match self.reads.pop_front() {
            Some(v) if v.len() <= buf.len() => {
                buf[..v.len()].copy_from_slice(&v);
                v.len()
            }
            _ => 0,
        }
    }
    fn enable(&mut self, _: i32) {}
}

/// Why pre-Ice Lake TopDown needs root.
pub const ROOT_NEEDED: &str = "pre-Ice Lake TopDown events count per core, so they are opened system-wide on every CPU, which needs root or kernel.perf_event_paranoid <= 0: run as root, or `sudo sysctl kernel.perf_event_paranoid=0`";

/// The nmi_watchdog takes a generic counter: perf's warning when it is on (pre-Ice Lake).
pub fn nmi_watchdog_warning(sysfs_proc: &str) -> Option<&'static str> {
    (read_trim(&format!("{sysfs_proc}/sys/kernel/nmi_watchdog")).as_deref() == Some("1")).then_some(
        "nmi_watchdog enabled with topdown. May give wrong results.\nDisable with echo 0 > /proc/sys/kernel/nmi_watchdog",
    )
}

/// The `record --topdown` sampler is the group's second event.
pub const SAMPLER_INDEX: usize = 1;

#[cfg(test)]
mod tests;
