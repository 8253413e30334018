//! `stat`: counts events over the workload, an attached process or thread (`-p`/`-t`) or
//! CPUs (`-a`/`-C`), optionally every -I ms; prints a line per counter and interval, and
//! the totals (labelled `total`; left to labperf with `--no-summary`, which prints perf's
//! layout from the file), and records them.
//!
//! Kernel mode: an event without `:u`/`:k` counts it too when perf would, that is unless
//! `perf_event_paranoid` is above 1 and the agent lacks CAP_PERFMON and CAP_SYS_ADMIN
//! (`sys::kernel_allowed`); when it may not, the file's header notes that kernel mode
//! was left out (a sleep's context switches happen in the kernel: they count 0 then).
//! `record` keeps sampling user mode only unless `:k` or `-a`. The C agent's `stat`
//! (`agents/alpha/agent.c`) follows this one: its options, attrs, file and lines.

use crate::prelude::*;

use crate::events;
use crate::opts::Opts;
use crate::out::Out;
use crate::perf::{self, AttrPlan, Fd};
use crate::record::{header, Target};
use crate::rt::Instant;
use crate::status::Fail;
use crate::sys;
use crate::workload::{self, SIGNALLED};
use core::sync::atomic::Ordering;
use core::time::Duration;
use labperf_common::topdown::seconds;
use labperf_common::*;

const DEFAULT: &[&str] = &[
    "task-clock",
    "context-switches",
    "cpu-migrations",
    "page-faults",
    "cycles",
    "instructions",
];

struct Counter {
    name: String,
    fds: Vec<Fd>,
    prev: Count,
}

/// Sums value/enabled/running over the counter's fds (one per thread).
fn read(c: &Counter, event: u32) -> Count {
    let mut t = Count {
        event,
        ..Default::default()
    };
    for fd in &c.fds {
        let mut b = [0u64; 3];
        if fd.read_u64s(&mut b) == 3 {
            t.value += b[0];
            t.time_enabled += b[1];
            t.time_running += b[2];
        }
    }
    t
}

/// The counting attr of one event.
pub fn plan_for(spec: events::EventSpec, spawned: bool, inherit: bool) -> AttrPlan {
    AttrPlan {
        read_format: perf::FORMAT_TOTAL_TIME_ENABLED | perf::FORMAT_TOTAL_TIME_RUNNING,
        // Enabled at exec, or by `run` once every counter is open.
        disabled: true,
        enable_on_exec: spawned,
        inherit,
        ..AttrPlan::new(spec)
    }
}

/// The events plain `stat` counts: perf's defaults, whose clock is cpu-clock on CPUs
/// (`-a`/`-C`), as perf's is, and task-clock otherwise.
pub fn names(o: &Opts) -> Vec<String> {
    if o.events.is_empty() {
        let cpus = o.cpus.is_some();
        DEFAULT
            .iter()
            .map(|&s| {
                if cpus && s == "task-clock" {
                    "cpu-clock"
                } else {
                    s
                }
                .to_string()
            })
            .collect()
    } else {
        o.events.clone()
    }
}

/// Waits for the workload (or attached process) to end, forwarding a signal once, and
/// calls `tick(elapsed, done)` every interval and once more, with `done`, at the end.
///
/// It blocks as `perf stat` does in wait4, so that counting does not preempt what it
/// counts: in `ppoll` on the process's pidfd (readable when it exits) until the next
/// interval or the `--duration`'s end, with SIGINT and SIGTERM let in only there (no
/// signal is missed between the check and the wait). A run without `-I` wakes when the
/// workload ends. Without a pidfd (a thread of `-t`, a kernel before 5.3) it looks every
/// 1 ms, as it always did (the elapsed time stays exact). The pidfd stays open until the
/// agent exits.
fn run_loop(
    target: &Target,
    every: Option<Duration>,
    until: Option<Duration>,
    mut tick: impl FnMut(Duration, bool) -> Result<(), Fail>,
) -> Result<ExitStatus, Fail> {
    let pid = target.pid();
    let t0 = Instant::now();
    let mut next = every.map(|d| t0 + d);
    let mut exit = ExitStatus::default();
    let mut forwarded = false;
    let exited = match target {
        Target::Spawned(_) | Target::System(Some(_)) => sys::pidfd(pid),
        Target::Attached(p, None) => sys::pidfd(*p),
        _ => None,
    };
    // SIGINT and SIGTERM blocked but in the wait, which lets in what was open before; they
    // stay blocked after it (their handler only notes them, for this loop).
    let open = sys::block_signals();
    loop {
        let deadline = [next, until.map(|u| t0 + u)].into_iter().flatten().min();
        let mut wait = deadline.map(|d| d.saturating_duration_since(Instant::now()));
        if exited.is_none() && !matches!(target, Target::System(None)) {
            wait = Some(wait.map_or(MS, |w| w.min(MS)));
        }
        sys::wait_readable(exited, wait, &open);
        let done = until.is_some_and(|u| t0.elapsed() >= u)
            || match target {
                Target::Spawned(_) | Target::System(Some(_)) => {
                    workload::wait(pid, false).map(|s| exit = s).is_some()
                }
                Target::System(None) => false,
                Target::Attached(p, t) => !workload::attached_alive(t.unwrap_or(*p)),
            };
        let sig = SIGNALLED.load(Ordering::SeqCst);
        if sig != 0 && !forwarded {
            forwarded = true;
            match target {
                // SAFETY: signalling our own child.
                Target::Spawned(_) | Target::System(Some(_)) => unsafe {
                    libc::kill(pid, sig);
                },
                Target::Attached(..) | Target::System(None) => {
                    tick(t0.elapsed(), true)?;
                    return Ok(exit);
                }
            }
        }
        if let (Some(n), Some(d)) = (next, every) {
            if Instant::now() >= n && !done {
                next = Some(n + d);
                tick(t0.elapsed(), false)?;
            }
        }
        if done {
            tick(t0.elapsed(), true)?;
            return Ok(exit);
        }
    }
}

const MS: Duration = Duration::from_millis(1);

pub fn run(o: &Opts) -> Result<i32, Fail> {
    if o.topdown {
        if o.cpus.is_some() || o.tid.is_some() {
            return Err("--topdown picks its own CPUs and threads".into());
        }
        return run_topdown(o);
    }
    workload::install_signal_handlers();
    let mut target = Target::new(o)?;
    let (mut counters, descs, notes) = match open_counters(o, &target) {
        Ok(opened) => opened,
        Err(e) => {
            target.abort();
            return Err(e);
        }
    };
    let start = crate::rt::clock_ns(libc::CLOCK_MONOTONIC);
    let mut out = create(o, descs, Recipe::Stat, false, notes, start)?;
    let meter = target.meter(o);
    // The elapsed time starts before the counters are enabled and the workload's exec, as
    // perf's (`go` waits for it): no counter's span then starts before it, so a CPU's
    // clock never reads more than the elapsed time (`-a`: "CPUs utilized" at most the
    // CPUs, however long the enables below take on a busy machine).
    let t0 = Instant::now();
    // A spawned workload's counters start at its exec; the others (opened disabled) now,
    // so that the elapsed time starts with them (`-a -- CMD`: before CMD runs).
    if !matches!(target, Target::Spawned(_)) {
        counters.iter().flat_map(|c| &c.fds).for_each(Fd::enable);
    }
    if let Target::Spawned(w) | Target::System(Some(w)) = &mut target {
        w.go().map_err(Fail::exec)?
    }
    let every = o.interval_ms.map(Duration::from_millis);
    let until = o.duration_ms.map(Duration::from_millis);
    let exit = run_loop(&target, every, until, |t, done| {
        if every.is_none() && done {
            return Ok(());
        }
        interval(&mut counters, t, &mut out)
    })?;
    let totals: Vec<Count> = counters
        .iter()
        .enumerate()
        .map(|(i, c)| read(c, i as u32))
        .collect();
    if !o.no_summary {
        for (c, t) in counters.iter().zip(&totals) {
            line("total", t, &c.name);
        }
        eprintln!(
            "{:>12} seconds time elapsed",
            seconds(t0.elapsed().as_nanos() as u64)
        );
    }
    finish(out, totals, t0, &exit, start, meter)
}

/// The counters opened, their descriptions for the file's header, and the notices of the
/// events left out.
type Counters = (Vec<Counter>, Vec<EventDesc>, Vec<String>);

/// Opens a counter of each event on every thread of the target: the counters, their
/// descriptions for the file's header, and notices of default or hardware events this
/// machine lacks (left out). Fails when an event cannot be opened or none can.
fn open_counters(o: &Opts, target: &Target) -> Result<Counters, Fail> {
    let spawned = matches!(target, Target::Spawned(_));
    let names = names(o);
    let mut counters = Vec::new();
    let mut descs = Vec::new();
    let mut notes = Vec::new();
    let kernel = sys::kernel_allowed();
    if !kernel {
        notice(
            &mut notes,
            "kernel mode not counted (perf_event_paranoid > 1, no CAP_PERFMON)".into(),
        );
    }
    let cpus = match &o.cpus {
        Some(c) if c.is_empty() => sys::online_cpus(),
        Some(c) => c.clone(),
        None => vec![-1],
    };
    // CPU-wide events see every task already: nothing to inherit.
    let inherit = !o.no_inherit && o.cpus.is_none();
    let tids = target.tids();
    for n in &names {
        // A group `{a,b}` is counted together: its members open into the leader's group on
        // each thread and CPU (the kernel schedules them as one, so each count covers the
        // same time), and each member keeps its own counter, line and total.
        let (members, grouped) = labperf_common::evlist::members(n)?;
        let mut leader: Option<(usize, Vec<i32>)> = None;
        for (i, m) in members.iter().enumerate() {
            let member = grouped && i > 0;
            let mut spec = events::parse(m)?;
            // Kernel mode too, by perf's rule, unless the name says :u or :k.
            spec.kernel |= kernel && !spec.modes;
            let mut plan = plan_for(spec, spawned, inherit);
            if member {
                // A member counts whenever its leader does.
                plan.disabled = false;
                plan.enable_on_exec = false;
                if leader.is_none() {
                    let s = format!("'{m}' is not counted: its group's leader was left out");
                    eprintln!("labperf-agent: notice: {s}");
                    notes.push(s);
                    continue;
                }
            }
            let group = leader
                .as_ref()
                .filter(|_| member)
                .map(|(_, f)| f.as_slice());
            match open_each(&plan, &tids, &cpus, group) {
                Ok(fds) => {
                    if grouped && i == 0 {
                        leader = Some((counters.len(), fds.iter().map(|f| f.0).collect()));
                    }
                    descs.push(EventDesc {
                        name: m.clone(),
                        attr: perf::portable(&plan.to_kernel()),
                        leader: leader.as_ref().filter(|_| member).map(|(l, _)| *l as u32),
                    });
                    counters.push(Counter {
                        name: m.clone(),
                        fds,
                        prev: Count::default(),
                    });
                }
                Err(e @ (libc::ENOENT | libc::EOPNOTSUPP | libc::ENODEV))
                    if o.events.is_empty() || plan.spec.is_hardware() =>
                {
                    let s = format!(
                        "'{m}' is not supported here ({}): left out",
                        crate::record::no_hardware_event(e)
                    );
                    // A default event this machine lacks is left out quietly (the file's notes
                    // keep it); one the user named is said.
                    if !o.events.is_empty() {
                        eprintln!("labperf-agent: notice: {s}");
                    }
                    notes.push(s);
                }
                Err(e) => return Err(perf::explain(m, &plan, e).into()),
            }
        }
    }
    if counters.is_empty() {
        return Err(
            "none of the events could be opened; run `labperf list` to see what this machine has"
                .into(),
        );
    }
    Ok((counters, descs, notes))
}

fn notice(notes: &mut Vec<String>, s: String) {
    eprintln!("labperf-agent: notice: {s}");
    notes.push(s);
}

/// One event's counter on each thread (-1: every task) and CPU (-1: any) given, in the
/// group of the leader's fd opened on the same thread and CPU (`group`, in the same order)
/// when it is a group's member; the errno of the first that cannot be opened.
fn open_each(
    plan: &AttrPlan,
    tids: &[i32],
    cpus: &[i32],
    group: Option<&[i32]>,
) -> Result<Vec<Fd>, i32> {
    let mut fds = Vec::new();
    for &tid in tids {
        for &cpu in cpus {
            let mut a = plan.to_kernel();
            let g = group.map_or(-1, |g| g[fds.len()]);
            fds.push(perf::open(&mut a, tid, cpu, g).map_err(|e| e.errno)?);
        }
    }
    Ok(fds)
}

/// With `-o`: the record file of a `stat`, its header naming the counted events.
fn create(
    o: &Opts,
    descs: Vec<EventDesc>,
    recipe: Recipe,
    replayed: bool,
    notes: Vec<String>,
    start: u64,
) -> Result<Option<Out>, Fail> {
    let Some(p) = &o.output else { return Ok(None) };
    Ok(Some(Out::create(
        p,
        &header(o, descs, &recipe.mode_string(), notes, start),
        &HeaderExt {
            recipe: Some(recipe),
            replayed,
            ..Default::default()
        },
        o.flush_ms,
    )?))
}

/// `stat -I`: each counter's change since the previous interval, printed and recorded.
fn interval(counters: &mut [Counter], t: Duration, out: &mut Option<Out>) -> Result<(), Fail> {
    let mut counts = Vec::new();
    for (i, c) in counters.iter_mut().enumerate() {
        let now = read(c, i as u32);
        let delta = Count {
            event: i as u32,
            value: now.value.wrapping_sub(c.prev.value),
            time_enabled: now.time_enabled.wrapping_sub(c.prev.time_enabled),
            time_running: now.time_running.wrapping_sub(c.prev.time_running),
        };
        line(&seconds(t.as_nanos() as u64), &delta, &c.name);
        c.prev = now;
        counts.push(delta);
    }
    if let Some(out) = out {
        out.push(&Record::Interval(Interval {
            time: t.as_nanos() as u64,
            tid: None,
            delta: true,
            counts,
        }))?;
        out.tick()?;
    }
    Ok(())
}

/// One counter's line, `label` its interval's end or `total`, the count scaled for
/// multiplexing (perf's layout, with the running share, is labperf's: `--no-summary`).
fn line(label: &str, c: &Count, name: &str) {
    eprintln!("{label:>12} {:>18} {name}", c.scaled());
}

/// `stat --topdown`: the TopDown group read once per interval, as perf's ratios.
fn run_topdown(o: &Opts) -> Result<i32, Fail> {
    use crate::topdown::{self, Kind};
    let (recipe, replay, mut k, notes) = topdown_setup(o)?;
    workload::install_signal_handlers();
    let mut target = Target::new(o)?;
    let spawned = matches!(target, Target::Spawned(_));
    let plans = topdown::stat_plans(&recipe, spawned, !o.no_inherit);
    let mut c = match topdown::open(
        k.as_mut(),
        recipe,
        &target.tids(),
        &sys::online_cpus(),
        spawned,
        !o.no_inherit,
    ) {
        Ok(c) => c,
        Err(e) => {
            target.abort();
            return Err(e.into());
        }
    };
    let mut notes = notes;
    if replay {
        notes.push("simulated: the group reads were replayed from LABPERF_TOPDOWN_REPLAY, not read from a PMU".into());
    }
    let descs = plans
        .iter()
        .map(|(p, l)| EventDesc {
            name: p.spec.name.clone(),
            attr: perf::portable(&p.to_kernel()),
            leader: l.map(|l| l as u32),
        })
        .collect();
    let r = c.recipe.clone();
    let recipe = Recipe::StatTopdown {
        level: r.level,
        legacy: r.kind == Kind::Legacy,
        pmu: r.pmu.clone(),
    };
    let start = crate::rt::clock_ns(libc::CLOCK_MONOTONIC);
    let out = create(o, descs, recipe, replay, notes, start)?;
    let meter = target.meter(o);
    if o.interval_ms.is_none() {
        eprintln!("{}", labperf_common::topdown::LONG_RUN_WARNING);
    }
    let per_thread = o.per_thread && r.kind == Kind::Metrics;
    eprintln!("{}", topdown::header_line(&r, "time", per_thread));
    match &mut target {
        Target::Spawned(w) | Target::System(Some(w)) => w.go().map_err(Fail::exec)?,
        _ => c.enable(k.as_mut()),
    }
    let every = o.interval_ms.map(Duration::from_millis);
    let t0 = Instant::now();
    let mut lines = TopdownLines {
        totals: vec![0u64; r.events.len()],
        r,
        per_thread,
        out,
    };
    let exit = run_loop(&target, every, None, |t, done| {
        let d = c.deltas(k.as_mut());
        lines.interval(t.as_nanos() as u64, &d, !done || every.is_some())
    })?;
    let TopdownLines { r, out, totals, .. } = lines;
    eprintln!(
        "\n Performance counter stats for '{}':\n\n{}\n{}\n",
        o.command_text().join(" "),
        topdown::header_line(&r, "total", false),
        labperf_common::topdown::table_line("total", None, &topdown::cells(&r, &totals))
    );
    finish(out, counts_of(&totals), t0, &exit, start, meter)
}

/// The TopDown recipe, whether the reads are replayed, their source, the header's notes.
type TopdownSetup = (
    crate::topdown::Recipe,
    bool,
    Box<dyn crate::topdown::Kernel>,
    Vec<String>,
);

/// What `stat --topdown` needs before it opens anything: the TopDown recipe this machine
/// has, whether the group reads are replayed (`LABPERF_TOPDOWN_REPLAY`: scripted reads
/// instead of the kernel's, for tests on machines without TopDown; the file says so), the
/// reads' source, and the header's notes (printed here). The older events per core need
/// root or `perf_event_paranoid` <= 0.
fn topdown_setup(o: &Opts) -> Result<TopdownSetup, Fail> {
    use crate::topdown::{self, Kind, Real};
    let recipe = topdown::detect(&topdown::sysfs_root(), o.level)?;
    let replay = crate::rt::var_os("LABPERF_TOPDOWN_REPLAY");
    let k: Box<dyn topdown::Kernel> = match &replay {
        Some(f) => Box::new(topdown::Replay::from_file(&f.to_string_lossy())?),
        None => Box::new(Real::default()),
    };
    let mut notes = recipe.notes.clone();
    if recipe.kind == Kind::Legacy {
        // Root, or rather its CAP_SYS_ADMIN (or CAP_PERFMON), as for -a.
        let (paranoid, caps) = sys::paranoid_and_caps();
        if paranoid > 0 && !caps && replay.is_none() {
            return Err(format!("{} (it is {paranoid})", topdown::ROOT_NEEDED).into());
        }
        if let Some(w) = topdown::nmi_watchdog_warning("/proc") {
            eprintln!("labperf-agent: warning: {w}");
            notes.push(w.replace('\n', " "));
        }
    }
    for n in &recipe.notes {
        eprintln!("labperf-agent: notice: {n}");
    }
    Ok((recipe, replay.is_some(), k, notes))
}

/// `stat --topdown`'s lines and interval records, and the whole run's totals.
struct TopdownLines {
    r: crate::topdown::Recipe,
    /// One line and record per thread (`--per-thread`, TopDown metrics only).
    per_thread: bool,
    out: Option<Out>,
    totals: Vec<u64>,
}

impl TopdownLines {
    /// One interval's group deltas per thread, `d`, at `t` ns: the lines printed (the
    /// sum's only when `line`, unless per thread) and recorded, and added to the totals.
    fn interval(&mut self, t: u64, d: &[(Option<i32>, Vec<u64>)], line: bool) -> Result<(), Fail> {
        use crate::topdown;
        let r = &self.r;
        let mut sum = vec![0u64; r.events.len()];
        for (tid, v) in d {
            for (s, x) in sum.iter_mut().zip(v) {
                *s = s.wrapping_add(*x);
            }
            if self.per_thread {
                eprintln!("{}", topdown::line(t, *tid, &topdown::cells(r, v)));
                if let Some(out) = &mut self.out {
                    out.push(&Record::Interval(Interval {
                        time: t,
                        tid: tid.map(|t| t as u32),
                        delta: true,
                        counts: counts_of(v),
                    }))?;
                }
            }
        }
        for (a, x) in self.totals.iter_mut().zip(&sum) {
            *a = a.wrapping_add(*x);
        }
        if !self.per_thread && line {
            eprintln!("{}", topdown::line(t, None, &topdown::cells(r, &sum)));
        }
        if let Some(out) = &mut self.out {
            if !self.per_thread {
                out.push(&Record::Interval(Interval {
                    time: t,
                    tid: None,
                    delta: true,
                    counts: counts_of(&sum),
                }))?;
            }
            out.tick()?;
        }
        Ok(())
    }
}

/// Records the whole run's totals and the trailer, then gives the workload's exit code.
fn finish(
    out: Option<Out>,
    totals: Vec<Count>,
    t0: Instant,
    exit: &ExitStatus,
    start: u64,
    meter: crate::usage::Meter,
) -> Result<i32, Fail> {
    if let Some(mut out) = out {
        out.push(&Record::Interval(Interval {
            time: t0.elapsed().as_nanos() as u64,
            tid: None,
            delta: false,
            counts: totals,
        }))?;
        let (cpu_ns, rss) = sys::self_usage();
        let ext = TrailerExt {
            usage: meter.finish(),
            ..Default::default()
        };
        out.finish(
            &Trailer {
                agent_cpu_ns: cpu_ns,
                agent_peak_rss_kib: rss,
                exit: exit.clone(),
                duration_ns: crate::rt::clock_ns(libc::CLOCK_MONOTONIC).saturating_sub(start),
                ..Default::default()
            },
            &ext,
        )?;
    }
    Ok(workload::exit_code(exit))
}

fn counts_of(v: &[u64]) -> Vec<Count> {
    v.iter()
        .enumerate()
        .map(|(i, &value)| Count {
            event: i as u32,
            value,
            ..Default::default()
        })
        .collect()
}
