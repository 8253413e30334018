//! `record`: opens sampling events on the workload, drains the ring buffers, writes the record file.

use crate::prelude::*;

use crate::convert::{Conv, Layout};
use crate::events::{self, EventSpec};
use crate::offcpu::{self, Pairer};
use crate::opts::Opts;
use crate::out::Out;
use crate::perf::{self, AttrPlan, Fd, Ring};
use crate::rt::Instant;
use crate::status::Fail;
use crate::usage::Meter;
use crate::workload::{self, Workload, SIGNALLED};
use crate::{strobe, sys};
use core::sync::atomic::Ordering;
use core::time::Duration;
use labperf_common::*;

/// Builds the file header common to record and stat.
pub fn header(
    o: &Opts,
    events: Vec<EventDesc>,
    mode: &str,
    notes: Vec<String>,
    start: u64,
) -> Header {
    let u = sys::uname();
    Header {
        agent_version: crate::opts::VERSION.into(),
        arch: sys::arch(),
        endian: sys::endian(),
        kernel_release: u.release,
        cpu: crate::arch::cpu_id(),
        hostname: u.nodename,
        command: match (o.pid, o.tid, &o.cpus) {
            (Some(p), _, _) => vec!["--pid".into(), p.to_string()],
            (_, Some(t), _) => vec!["--tid".into(), t.to_string()],
            (None, None, Some(c)) => {
                let mut v = match c.is_empty() {
                    true => vec!["-a".to_string()],
                    false => vec!["-C".into(), sys::cpu_list_text(c)],
                };
                if let Some(ms) = o.duration_ms {
                    v.extend([
                        "--duration".into(),
                        format!("{}.{:03}", ms / 1000, ms % 1000),
                    ]);
                }
                v.extend(o.command_text());
                v
            }
            (None, None, None) => o.command_text(),
        },
        clock_id: libc::CLOCK_MONOTONIC,
        start_time_ns: start,
        start_realtime_ns: crate::rt::clock_ns(libc::CLOCK_REALTIME),
        events,
        mode: mode.into(),
        notes,
    }
}

/// The workload: spawned by us, or attached; or every task on some CPUs (`-a`/`-C`), for
/// `--duration` or while a command we spawned runs.
pub enum Target {
    Spawned(Workload),
    /// The process (its thread group id), and the one thread of `--tid`.
    Attached(i32, Option<i32>),
    System(Option<Workload>),
}

impl Target {
    /// Where the target's CPU time is read for the trailer (from now on).
    pub fn meter(&self, o: &Opts) -> Meter {
        match self {
            Target::Spawned(_) => Meter::workload(),
            Target::Attached(p, t) => Meter::attached(*p, *t),
            Target::System(_) => {
                let cpus: Vec<u32> = (o.cpus.iter().flatten())
                    .filter_map(|&c| u32::try_from(c).ok())
                    .collect();
                Meter::cpus(&cpus)
            }
        }
    }

    pub fn new(o: &Opts) -> Result<Target, String> {
        if o.cpus.is_some() {
            sys::may_record_cpus()?;
            return Ok(Target::System(match o.command.is_empty() {
                true => None,
                false => Some(Workload::spawn(&o.command)?),
            }));
        }
        match o.pid.or(o.tid) {
            Some(p) => {
                // SAFETY: signal 0 only checks existence.
                if unsafe { libc::kill(p, 0) } != 0 && sys::errno() == libc::ESRCH {
                    return Err(format!("no process or thread {p}"));
                }
                // A thread's process: its maps and the pid its samples carry.
                let tgid = crate::rt::read_lossy(format!("/proc/{p}/status"))
                    .ok()
                    .and_then(|s| {
                        s.lines()
                            .find_map(|l| l.strip_prefix("Tgid:")?.trim().parse().ok())
                    })
                    .unwrap_or(p);
                Ok(Target::Attached(tgid, o.tid))
            }
            None => Ok(Target::Spawned(Workload::spawn(&o.command)?)),
        }
    }
    pub fn pid(&self) -> i32 {
        match self {
            Target::Spawned(w) | Target::System(Some(w)) => w.pid,
            Target::Attached(p, _) => *p,
            Target::System(None) => 0,
        }
    }
    /// Threads to open events on: the child (followed by inherit), or every thread of the attached process.
    pub fn tids(&self) -> Vec<i32> {
        match self {
            Target::Spawned(w) => vec![w.pid],
            Target::System(_) => vec![-1],
            Target::Attached(_, Some(t)) => vec![*t],
            Target::Attached(p, None) => {
                let mut v: Vec<i32> = crate::rt::read_dir(format!("/proc/{p}/task"))
                    .unwrap_or_default()
                    .iter()
                    .filter_map(|e| e.parse().ok())
                    .collect();
                if v.is_empty() {
                    v.push(*p);
                }
                v
            }
        }
    }
    pub fn abort(self) {
        if let Target::Spawned(w) | Target::System(Some(w)) = self {
            w.abort();
        }
    }
}

/// What was opened: fds per CPU and how to read samples back.
pub struct Opened {
    pub descs: Vec<EventDesc>,
    pub fds: Vec<Fd>,
    pub rings: Vec<(Fd, Ring)>,
    /// (perf event id, index into the header's events): few enough for a linear search.
    pub id_to_event: Vec<(u64, u32)>,
    pub sample_type: u64,
    pub read_format: u64,
    pub notes: Vec<String>,
    /// The strobing of a --metrics recording.
    pub strobe: Option<(strobe::Mode, strobe::Strobe)>,
}

fn notice(notes: &mut Vec<String>, s: String) {
    eprintln!("labperf-agent: notice: {s}");
    notes.push(s);
}

/// Default sampling period for an event when neither --period nor --freq is given.
fn default_period(spec: &EventSpec) -> (u64, bool) {
    if spec.type_ == events::PERF_TYPE_SOFTWARE && spec.config <= 1 {
        (250_000, false) // 4 kHz of cpu-clock / task-clock (ns).
    } else {
        (4000, true)
    }
}

/// The strobed metrics group. On Arm PMUv3 the kernel maps these to CPU_CYCLES,
/// INST_RETIRED, BR_MIS_PRED, L1D_CACHE and L1D_CACHE_REFILL.
pub const METRICS_GROUP: &str = "{cycles,instructions,branch-misses,cache-references,cache-misses}";

/// Report columns that stay empty without an event of the metrics group.
fn metrics_columns(event: &str) -> &'static str {
    match event {
        "branch-misses" => "BM/KI and %BM",
        "cache-references" => "%CM and %L1DA",
        "cache-misses" => "CM/KI, %CM and %L1DM",
        _ => "",
    }
}

/// The strobe settings of a --metrics recording, with the chosen mode.
pub fn strobe_of(o: &Opts) -> Result<Option<strobe::Strobe>, String> {
    if !o.metrics {
        return Ok(None);
    }
    let s = strobe::Strobe {
        period: o.period.unwrap_or(1_000_000),
        window: o.window,
        jitter: o.jitter,
    };
    strobe::validate(&s, o.freq.is_some())
}

/// Opens the sampler alone on the agent itself and reports the PERIOD of each sample:
/// how a kernel alternating-period ABI is verified before it is trusted.
struct SelfProbe {
    pages: usize,
}

impl strobe::ProbeSys for SelfProbe {
    fn sample_periods(&mut self, plan: &AttrPlan) -> Result<Vec<u64>, i32> {
        let mut p = plan.clone();
        p.sample_type = perf::SAMPLE_PERIOD;
        p.read_format = 0;
        p.inherit = false;
        p.sideband = false;
        p.enable_on_exec = false;
        p.disabled = true;
        p.watermark = 0;
        let mut a = p.to_kernel();
        let fd = perf::open(&mut a, 0, -1, -1).map_err(|e| e.errno)?;
        let mut ring = Ring::new(&fd, self.pages).map_err(|_| libc::ENOMEM)?;
        fd.enable();
        let t = Instant::now();
        let mut x = 1u64;
        while t.elapsed() < Duration::from_millis(40) {
            for _ in 0..10_000 {
                x = core::hint::black_box(x.wrapping_mul(6364136223846793005).wrapping_add(1));
            }
        }
        fd.disable();
        let mut periods = Vec::new();
        ring.drain(|rec| {
            if rec.len() >= 16
                && u32::from_ne_bytes([rec[0], rec[1], rec[2], rec[3]])
                    == crate::convert::PERF_RECORD_SAMPLE
            {
                periods.push(u64::from_ne_bytes(rec[8..16].try_into().unwrap_or([0; 8])));
            }
        });
        Ok(periods)
    }
}

/// `labperf-agent strobe-probe`: which strobing mode `record --metrics` would use here.
pub fn strobe_probe(o: &Opts) -> Result<i32, String> {
    let st = strobe::Strobe {
        period: o.period.unwrap_or(1_000_000),
        window: o.window,
        jitter: o.jitter,
    };
    let spec = events::parse("cycles")?;
    let base = AttrPlan {
        period: st.window,
        sample_type: perf::SAMPLE_PERIOD,
        ..AttrPlan::new(spec)
    };
    let mut probe = SelfProbe { pages: 8 };
    if let Err(e) = strobe::ProbeSys::sample_periods(&mut probe, &base) {
        println!(
            "strobing: unavailable: the cycles event does not sample here ({})",
            crate::rt::Error::from_raw_os_error(e)
        );
        return Ok(1);
    }
    let mut notes = Vec::new();
    let m = strobe::choose(
        &mut probe,
        &base,
        &st,
        events::strobe_term_shift(&base.spec),
        &mut notes,
    );
    println!("strobing: {}", m.name());
    for n in notes {
        println!("  {n}");
    }
    if !matches!(m, strobe::Mode::Decimate | strobe::Mode::Fixed) {
        // What the verification saw, sampled again with the chosen mode.
        let mut plan = base.clone();
        strobe::apply(
            m,
            &st,
            &mut plan,
            events::strobe_term_shift(&base.spec).unwrap_or(0),
        );
        if let Ok(p) = strobe::ProbeSys::sample_periods(&mut probe, &plan) {
            println!("  {}", strobe::describe(&p, &st));
        }
    }
    Ok(0)
}

/// The events `record` opens: (spec, index of its group leader).
pub fn asked_specs(o: &Opts) -> Result<Vec<(EventSpec, Option<usize>)>, String> {
    if o.topdown {
        if o.metrics {
            return Err("--topdown and --metrics exclude each other: give one".into());
        }
        let r = crate::topdown::detect(&crate::topdown::sysfs_root(), o.level)?;
        let sampler = events::parse(o.events.first().map_or("cycles", String::as_str))?;
        if o.events.len() > 1 {
            return Err(
                "--topdown takes one sampling event (-e cycles, instructions or ref-cycles)".into(),
            );
        }
        let v = crate::topdown::record_specs(&r, sampler)?;
        return Ok(v
            .into_iter()
            .enumerate()
            .map(|(i, s)| (s, (i > 0).then_some(0)))
            .collect());
    }
    let asked = if o.metrics {
        if !o.events.is_empty() {
            return Err("--metrics chooses its own events: drop -e".into());
        }
        vec![METRICS_GROUP.to_string()]
    } else if o.events.is_empty() {
        vec!["cycles".to_string()]
    } else {
        o.events.clone()
    };
    let mut specs: Vec<(EventSpec, Option<usize>)> = Vec::new();
    for a in &asked {
        let (list, g) = events::parse_list(a)?;
        let leader = specs.len();
        for (i, mut s) in list.into_iter().enumerate() {
            // perf's rule: kernel mode too unless the event says :u or :k, wherever the
            // kernel allows it (root, CAP_PERFMON or perf_event_paranoid <= 1; the whole
            // machine needs that anyway). Where it does not, the host's account of the
            // workload's CPU time says how much the samples leave unseen. Strobed metrics
            // count the workload's own code: each window's sampling interrupt would count
            // its own cycles into the next (on the Arm lab machine the windows fell from
            // 8,000 to 438, throttled), so --metrics keeps user mode, said in the file.
            let all_modes = o.cpus.is_some() || (sys::kernel_allowed() && !o.metrics);
            s.kernel |= all_modes && !s.modes;
            specs.push((s, if g && i > 0 { Some(leader) } else { None }));
        }
    }
    if o.off_cpu {
        // Sampled at every switch, in kernel mode where allowed (the only mode in which a
        // switch is seen); without it the event gives no sample and the switch records
        // stand in (offcpu.rs).
        let mut s = events::parse("context-switches")?;
        s.name = crate::offcpu::EVENT_NAME.into();
        s.kernel = sys::kernel_allowed() || o.cpus.is_some();
        specs.push((s, None));
    }
    Ok(specs)
}

/// The attrs `record` asks for, before strobing: the sampler of each group (its leader,
/// or with --topdown the second event, as SLOTS leads but cannot sample) gets the period.
pub fn base_plans(
    o: &Opts,
    specs: &[(EventSpec, Option<usize>)],
    spawned: bool,
    inherit: bool,
    build_id: bool,
) -> (Vec<AttrPlan>, u64, u64) {
    // Strobing measures each window with the sampler's own count: read it in every
    // sample even when it is alone (every other event of the group unavailable here).
    let grouped = specs.iter().any(|(_, l)| l.is_some()) || o.metrics;
    // --topdown: the sampler is not the leader, so samples name their event.
    let samplers = if o.topdown {
        2
    } else {
        specs.iter().filter(|(_, l)| l.is_none()).count()
    };
    let mut sample_type = perf::SAMPLE_IP
        | perf::SAMPLE_TID
        | perf::SAMPLE_TIME
        | perf::SAMPLE_PERIOD
        | perf::SAMPLE_CPU;
    let mut read_format = 0;
    if samplers > 1 {
        sample_type |= perf::SAMPLE_IDENTIFIER;
    }
    if grouped {
        sample_type |= perf::SAMPLE_READ;
        read_format = perf::FORMAT_GROUP | perf::FORMAT_ID;
    }
    if o.call_graph {
        sample_type |= perf::SAMPLE_CALLCHAIN;
    }
    if o.dwarf.is_some() {
        sample_type |= perf::SAMPLE_REGS_USER | perf::SAMPLE_STACK_USER;
    }
    let plans = specs
        .iter()
        .enumerate()
        .map(|(i, (s, leader))| {
            let (dp, dfreq) = default_period(s);
            let samples = if o.topdown {
                i == crate::topdown::SAMPLER_INDEX
            } else {
                leader.is_none()
            };
            let off_cpu = s.name == crate::offcpu::EVENT_NAME;
            let (period, freq) = match (samples, o.period, o.freq) {
                (false, _, _) => (0, false),
                (true, _, _) if off_cpu => (1, false),
                (true, Some(p), _) => (p, false),
                (true, None, Some(f)) => (f, true),
                (true, None, None) => (dp, dfreq),
            };
            AttrPlan {
                spec: s.clone(),
                period,
                freq,
                sample_type,
                read_format,
                disabled: leader.is_none() && spawned,
                enable_on_exec: leader.is_none() && spawned,
                inherit,
                sideband: i == 0,
                build_id,
                watermark: if i == 0 {
                    (o.mmap_pages as u32 * 4096) / 4
                } else {
                    0
                },
                regs_user: crate::arch::DWARF_REGS,
                stack_user: o.dwarf.unwrap_or(0),
                ext: perf::AttrExt {
                    at136: None,
                    flag_bits: off_cpu_bits(o, i, off_cpu),
                },
            }
        })
        .collect();
    (plans, sample_type, read_format)
}

/// `--off-cpu`'s attr bits: the side-band event reports context switches (with the
/// thread and time of each, `sample_id_all`); `offcpu-time`'s callchain is the user's.
fn off_cpu_bits(o: &Opts, i: usize, off_cpu: bool) -> u64 {
    use crate::offcpu::{ATTR_CONTEXT_SWITCH, ATTR_EXCLUDE_CALLCHAIN_KERNEL, ATTR_SAMPLE_ID_ALL};
    match (o.off_cpu, i, off_cpu) {
        (false, _, _) => 0,
        (true, 0, _) => ATTR_CONTEXT_SWITCH | ATTR_SAMPLE_ID_ALL,
        (true, _, true) => ATTR_EXCLUDE_CALLCHAIN_KERNEL,
        _ => 0,
    }
}

fn open_all(o: &Opts, target: &Target) -> Result<Opened, String> {
    let mut notes = Vec::new();
    let mut specs = asked_specs(o)?;
    if specs
        .iter()
        .any(|(s, _)| s.name == offcpu::EVENT_NAME && !s.kernel)
    {
        notice(&mut notes, "--off-cpu: a thread's switches are seen in kernel mode only, which needs perf_event_paranoid <= 1 or CAP_PERFMON: each thread's time off the CPU is recorded without the stack it blocked in".into());
    }
    // Why a mode is not sampled, for the host's account of the CPU time (not printed: the
    // report says how much CPU time it leaves unseen).
    if specs.iter().any(|(s, _)| !s.kernel && !s.modes) {
        let (paranoid, _) = sys::paranoid_and_caps();
        notes.push(if o.metrics && sys::kernel_allowed() {
            "kernel mode not sampled: --metrics strobes the workload's user code (a window's sampling interrupt would count its own cycles into the next)".to_string()
        } else {
            format!("kernel mode not sampled: perf_event_paranoid is {paranoid} and the agent has neither CAP_PERFMON nor CAP_SYS_ADMIN; run as root, or `sysctl kernel.perf_event_paranoid=1`")
        });
    } else if specs.iter().any(|(s, _)| !s.kernel && s.modes) {
        notes.push("kernel mode not sampled: the event asked for user mode only (:u)".into());
    }
    if specs.iter().any(|(s, _)| !s.user) {
        notes.push("user mode not sampled: the event asked for kernel mode only (:k)".into());
    }
    let grouped = specs.iter().any(|(_, l)| l.is_some()) || o.metrics;
    let spawned = matches!(target, Target::Spawned(_));
    let cpus = match &o.cpus {
        Some(c) if !c.is_empty() => c.clone(),
        _ => sys::online_cpus(),
    };
    let tids = target.tids();
    // CPU-wide events see every task already: nothing to inherit.
    let mut inherit = !o.no_inherit && o.cpus.is_none();
    let mut build_id = true;
    let mut strobe_mode: Option<(strobe::Mode, strobe::Strobe)> = None;
    loop {
        let (plans, sample_type, read_format) = base_plans(o, &specs, spawned, inherit, build_id);
        let mut plans = plans;
        if let Some(st) = strobe_of(o)? {
            // Chosen once: the loop comes back here after a fallback.
            let chosen = strobe_mode.map(|(m, _)| m);
            let mode = match (chosen, o.strobe.as_str()) {
                (Some(m), _) => m,
                (None, "decimate") => strobe::Mode::Decimate,
                (None, "fixed") => strobe::Mode::Fixed,
                (None, forced) => {
                    let driver = events::strobe_term_shift(&plans[0].spec);
                    let mut tried = Vec::new();
                    let m = strobe::choose(
                        &mut SelfProbe { pages: 8 },
                        &plans[0],
                        &st,
                        driver,
                        &mut tried,
                    );
                    if forced == "kernel" && m == strobe::Mode::Decimate {
                        return Err(format!("--strobe kernel: no kernel alternating-period ABI works here ({}). Use --strobe auto or decimate.", tried.join("; ")));
                    }
                    for t in tried {
                        notes.push(t);
                    }
                    m
                }
            };
            let shift = events::strobe_term_shift(&plans[0].spec).unwrap_or(0);
            strobe::apply(mode, &st, &mut plans[0], shift);
            strobe_mode = Some((mode, st));
        }
        match open_plans(o, &plans, &specs, &cpus, &tids) {
            Ok(mut op) => {
                op.strobe = strobe_mode;
                op.sample_type = sample_type;
                op.read_format = read_format;
                let mut all = notes;
                all.append(&mut op.notes);
                op.notes = all;
                return Ok(op);
            }
            Err(Retry::WithoutInherit) if inherit && grouped => {
                inherit = false;
                notice(&mut notes, "this kernel refuses inherit with PERF_SAMPLE_READ: only the workload's main thread is followed".into());
            }
            Err(Retry::WithoutBuildId) if build_id => {
                build_id = false;
                notice(&mut notes, "this kernel cannot put build-ids in mmap records: the host will match binaries by path".into());
            }
            Err(Retry::Fallback(i, why)) if o.topdown => {
                return Err(format!("'{}' cannot be opened here ({why}): TopDown needs the CPU's PMU; run `labperf list cpu`", specs[i].0.name));
            }
            Err(Retry::Fallback(i, why)) => {
                let (s, leader) = &specs[i];
                if leader.is_some() {
                    let cols = if o.metrics { format!(" ({})", metrics_columns(&s.name)) } else { String::new() };
                    notice(&mut notes, format!("'{}' is not available here ({why}): dropped from the group; its report columns{cols} will be empty", s.name));
                    specs.remove(i);
                } else if o.events.is_empty() && !o.metrics {
                    // The default event, not one the user named: replaced silently, as perf
                    // does (the file's notes say it; `labperf info` shows them).
                    notes.push(format!("the default event 'cycles' is not available here ({why}): cpu-clock sampled instead"));
                    let mut cc = events::parse("cpu-clock")?;
                    cc.user = s.user;
                    cc.kernel = s.kernel;
                    specs[i].0 = cc;
                } else {
                    notice(&mut notes, format!("'{}' is not available here ({why}): sampling cpu-clock instead", s.name));
                    let mut cc = events::parse("cpu-clock")?;
                    cc.user = s.user;
                    cc.kernel = s.kernel;
                    specs[i].0 = cc;
                }
            }
            Err(Retry::Fatal(e)) => return Err(e),
            Err(Retry::WithoutInherit) => return Err("the kernel refused the event group with PERF_SAMPLE_READ (EINVAL), even without inherit".into()),
            Err(Retry::WithoutBuildId) => return Err("the kernel refused the side-band records (EINVAL), even without build-ids".into()),
        }
    }
}

enum Retry {
    WithoutInherit,
    WithoutBuildId,
    Fallback(usize, String),
    Fatal(String),
}

fn open_plans(
    o: &Opts,
    plans: &[AttrPlan],
    specs: &[(EventSpec, Option<usize>)],
    cpus: &[i32],
    tids: &[i32],
) -> Result<Opened, Retry> {
    let mut fds = Vec::new();
    let mut rings: Vec<(Fd, Ring)> = Vec::new();
    let mut id_to_event = Vec::new();
    let mut descs = Vec::new();
    for (i, p) in plans.iter().enumerate() {
        let a = p.to_kernel();
        descs.push(EventDesc {
            name: p.spec.name.clone(),
            attr: perf::portable(&a),
            leader: specs[i].1.map(|l| l as u32),
        });
    }
    for &cpu in cpus {
        for &tid in tids {
            let mut ring_fd: Option<usize> = None;
            let mut leader_fd = -1;
            for (i, p) in plans.iter().enumerate() {
                let mut a = p.to_kernel();
                let group = if specs[i].1.is_some() { leader_fd } else { -1 };
                let fd = match perf::open(&mut a, tid, cpu, group) {
                    Ok(fd) => fd,
                    Err(e) => {
                        let hw = p.spec.is_hardware();
                        return Err(match e.errno {
                            libc::ENOENT | libc::EOPNOTSUPP | libc::ENODEV if hw => {
                                Retry::Fallback(i, no_hardware_event(e.errno).into())
                            }
                            libc::EINVAL if p.inherit && p.sample_type & perf::SAMPLE_READ != 0 => {
                                Retry::WithoutInherit
                            }
                            libc::EINVAL if p.build_id && p.sideband => Retry::WithoutBuildId,
                            n => Retry::Fatal(perf::explain(&p.spec.name, p, n)),
                        });
                    }
                };
                id_to_event.push((fd.id(), i as u32));
                if specs[i].1.is_none() {
                    leader_fd = fd.0;
                }
                // Samplers write to the ring: leaders, and the --topdown group's second event.
                if specs[i].1.is_none() || (o.topdown && i == crate::topdown::SAMPLER_INDEX) {
                    match ring_fd {
                        None => {
                            let ring = Ring::new(&fd, o.mmap_pages).map_err(Retry::Fatal)?;
                            rings.push((fd, ring));
                            ring_fd = Some(rings.len() - 1);
                            continue;
                        }
                        Some(r) => fd.set_output(&rings[r].0).map_err(|e| {
                            Retry::Fatal(format!(
                                "cannot share the ring buffer between events: {}",
                                crate::rt::Error::from_raw_os_error(e)
                            ))
                        })?,
                    }
                }
                fds.push(fd);
            }
        }
    }
    Ok(Opened {
        descs,
        fds,
        rings,
        id_to_event,
        sample_type: 0,
        read_format: 0,
        notes: Vec::new(),
        strobe: None,
    })
}

/// Synthesizes comm and mmap2 records of the tasks running before the recording from
/// /proc: the attached process, or with `-a`/`-C` every process (kernel threads and
/// processes that end meanwhile have no maps: their comm is enough; pid 0 is `swapper`,
/// as perf names the idle task).
fn synthesize_all(target: &Target, out: &mut Out) -> Result<(), Fail> {
    let pids: Vec<i32> = match target {
        Target::Attached(p, _) => return synthesize(*p, out, true),
        _ => crate::rt::read_dir("/proc")
            .unwrap_or_default()
            .iter()
            .filter_map(|e| e.parse().ok())
            .collect(),
    };
    out.push(&Record::Comm(Comm {
        comm: "swapper".into(),
        ..Default::default()
    }))?;
    for p in pids {
        synthesize(p, out, false)?;
    }
    Ok(())
}

fn synthesize(pid: i32, out: &mut Out, need_maps: bool) -> Result<(), Fail> {
    let comm = |out: &mut Out, tid: i32, text: &str| {
        out.push(&Record::Comm(Comm {
            pid: pid as u32,
            tid: tid as u32,
            comm: text.trim().into(),
            exec: false,
        }))
    };
    let text = crate::rt::read_lossy(format!("/proc/{pid}/comm")).unwrap_or_default();
    comm(out, pid, &text)?;
    // Its other threads by their own names, as perf synthesizes them (a thread that
    // ends meanwhile is left out).
    let mut tids: Vec<i32> = crate::rt::read_dir(format!("/proc/{pid}/task"))
        .unwrap_or_default()
        .iter()
        .filter_map(|t| t.parse().ok())
        .filter(|&t| t != pid)
        .collect();
    tids.sort_unstable();
    for tid in tids {
        if let Ok(text) = crate::rt::read_lossy(format!("/proc/{pid}/task/{tid}/comm")) {
            comm(out, tid, &text)?;
        }
    }
    let maps = match crate::rt::read_lossy(format!("/proc/{pid}/maps")) {
        Ok(m) => m,
        Err(_) if !need_maps => return Ok(()),
        Err(e) => return Err(format!("cannot read /proc/{pid}/maps: {e}").into()),
    };
    for line in maps.lines() {
        let f: Vec<&str> = line.split_whitespace().collect();
        if f.len() < 6 || !f[1].contains('x') {
            continue;
        }
        let (a, b) = f[0].split_once('-').unwrap_or(("0", "0"));
        let (start, end) = (
            u64::from_str_radix(a, 16).unwrap_or(0),
            u64::from_str_radix(b, 16).unwrap_or(0),
        );
        out.push(&Record::Mmap2(Mmap2 {
            pid: pid as u32,
            tid: pid as u32,
            addr: start,
            len: end - start,
            pgoff: u64::from_str_radix(f[2], 16).unwrap_or(0),
            prot: 5,
            flags: 2,
            build_id: None,
            path: f[5..].join(" "),
        }))?;
    }
    Ok(())
}

/// Converted records on their way to the file: the kernel-record converter, the strobing
/// decimator when there is one, and the writer. `record` and `replay` share it.
pub struct Sink {
    pub conv: Conv,
    dec: Option<strobe::Decimator>,
    /// `--off-cpu`: switch-outs paired with switch-ins.
    pub offcpu: Option<Pairer>,
    pub out: Out,
}

impl Sink {
    pub fn new(layout: Layout, strobe: Option<(strobe::Mode, strobe::Strobe)>, out: Out) -> Sink {
        Sink {
            conv: Conv::new(layout),
            dec: match strobe {
                Some((strobe::Mode::Decimate, st)) => Some(strobe::Decimator::new(st)),
                _ => None,
            },
            offcpu: None,
            out,
        }
    }

    /// Takes one kernel record.
    pub fn take(&mut self, rec: &[u8]) -> Result<(), Fail> {
        if let Some(p) = self.offcpu.as_mut() {
            if let Some(w) = offcpu::switch_of(rec, self.conv.layout.sample_type) {
                p.switch(w);
                return Ok(());
            }
        }
        let r = match (self.conv.convert(rec), self.offcpu.as_mut()) {
            (Some(Record::Sample(s)), Some(p)) if s.event == p.event => {
                // A switch, not yet a sample: counted once paired (what the pairer leaves
                // out, a thread's last switch, is no decimation).
                self.conv.samples -= 1;
                p.out(s);
                return Ok(());
            }
            (r, p) => {
                if let (Some(Record::Exit(t)), Some(p)) = (&r, p) {
                    p.exit(t.tid, t.time);
                }
                r
            }
        };
        match (r, self.dec.as_mut()) {
            (Some(Record::Sample(s)), Some(d)) => {
                for kept in d.push(s) {
                    self.out.push(&Record::Sample(kept))?;
                }
                Ok(())
            }
            (Some(r), d) => {
                if let (Record::Throttle(_), Some(d)) = (&r, d) {
                    d.break_windows();
                }
                self.out.push(&r)?;
                self.conv.recycle(r);
                Ok(())
            }
            (None, _) => Ok(()),
        }
    }

    /// Writes `--off-cpu`'s paired samples.
    fn offcpu_samples(&mut self, done: Vec<Sample>) -> Result<(), Fail> {
        if let (Some(p), false) = (self.offcpu.as_ref(), done.is_empty()) {
            self.conv.sampled |= 1u64.checked_shl(p.event).unwrap_or(0);
            self.conv.samples += done.len() as u64;
        }
        for s in done {
            self.out.push(&Record::Sample(s))?;
        }
        Ok(())
    }

    /// Every ring was drained after `round`: `--off-cpu`'s switches before it are paired.
    pub fn round(&mut self, round: u64) -> Result<(), Fail> {
        match self.offcpu.as_mut().map(|p| p.settle(round)) {
            Some(done) => self.offcpu_samples(done),
            None => Ok(()),
        }
    }

    /// Writes the trailer (samples: those written; dropped: those the decimator left
    /// out, so samples + dropped = the samples the kernel gave) and renames the file
    /// into place; returns the file's size.
    pub fn finish(
        mut self,
        exit: &ExitStatus,
        start: u64,
        usage: Option<labperf_common::Usage>,
    ) -> Result<(u64, Trailer), Fail> {
        let end = crate::rt::clock_ns(libc::CLOCK_MONOTONIC);
        if let Some(p) = self.offcpu.as_mut() {
            let done = p.finish(end);
            self.offcpu_samples(done)?;
        }
        let (cpu_ns, rss) = sys::self_usage();
        let trailer = Trailer {
            samples: self.out.samples,
            dropped: self.conv.samples.saturating_sub(self.out.samples),
            lost: self.conv.lost,
            throttled: self.conv.throttled,
            agent_cpu_ns: cpu_ns,
            agent_peak_rss_kib: rss,
            exit: exit.clone(),
            duration_ns: end.saturating_sub(start),
            ..Default::default()
        };
        let ext = labperf_common::TrailerExt {
            usage,
            ..Default::default()
        };
        let bytes = self.out.finish(&trailer, &ext)?;
        Ok((bytes, trailer))
    }
}

/// The recipe of a `record` with these options and strobing.
pub fn recipe(
    o: &Opts,
    strobe: Option<(strobe::Mode, strobe::Strobe)>,
    read_format: u64,
) -> Recipe {
    match strobe {
        Some((mode, st)) => Recipe::Strobe {
            mode,
            period: st.period,
            window: st.window,
            jitter: st.jitter,
        },
        None if o.topdown => Recipe::RecordTopdown { level: o.level },
        None => Recipe::Sample {
            group_read: read_format & perf::FORMAT_GROUP != 0,
        },
    }
}

/// Why a hardware event cannot be opened, in words (not "No such file or directory").
pub fn no_hardware_event(errno: i32) -> &'static str {
    match errno {
        libc::ENOENT => "no such event on this machine's PMU",
        libc::ENODEV => "no such PMU on this machine",
        _ => "this machine's PMU cannot sample it",
    }
}

/// `n` and its noun, plural unless `n` is 1 ("1 sample", "2 samples").
pub fn plural(n: u64, one: &str, many: &str) -> String {
    format!("{n} {}", if n == 1 { one } else { many })
}

/// An event that opened but never sampled (its own samples; not a group's members, whose
/// values ride on the leader's) is said, as the C agent says it, rather than a silent 0.
/// Its reason is said by labperf report: the x86_64 agent is 56 bytes under its budget.
/// (`--discard` keeps no sample on purpose: nothing is said.)
fn unsampled(opened: &Opened, sampled: u64, discard: bool) {
    if opened.read_format & perf::FORMAT_GROUP == 0 && opened.strobe.is_none() && !discard {
        for (i, d) in opened.descs.iter().enumerate() {
            if i < 64 && sampled >> i & 1 == 0 {
                eprintln!(
                    "labperf-agent: warning: event '{}' opened but produced no sample",
                    d.name
                );
            }
        }
    }
}

/// Says what was written, and what the kernel lost.
fn wrote(t: &Trailer, bytes: u64, path: &str) {
    eprintln!(
        "labperf-agent: wrote {} ({}) to {path}{}{}",
        plural(t.samples, "sample", "samples"),
        plural(bytes, "byte", "bytes"),
        if t.dropped > 0 {
            format!(" ({} more left out by decimation)", t.dropped)
        } else {
            String::new()
        },
        if t.lost > 0 {
            format!(
                "; the kernel lost {} (use a larger --mmap-pages or a longer --period)",
                plural(t.lost, "record", "records")
            )
        } else {
            String::new()
        }
    );
}

/// perf's rule for `-F` above `kernel.perf_event_max_sample_rate`: the kernel would refuse
/// it, so it is lowered to the limit, with a notice that says how to raise the limit.
pub fn clamp_freq(o: &Opts, max: Option<u64>) -> (Opts, Option<String>) {
    let mut o = o.clone();
    match (o.freq, max) {
        (Some(f), Some(m)) if f > m && m > 0 => {
            o.freq = Some(m);
            let n = format!("maximum frequency rate ({m} Hz) exceeded, throttling from {f} Hz to {m} Hz; the limit is kernel.perf_event_max_sample_rate (`sudo sysctl kernel.perf_event_max_sample_rate={f}`)");
            (o, Some(n))
        }
        _ => (o, None),
    }
}

/// Drains every ring into the sink; the first record the file cannot take stops it. With
/// `discard` (`--discard`) the records are dropped as they are read.
fn drain_all(rings: &mut [(Fd, Ring)], sink: &mut Sink, discard: bool) -> Result<(), Fail> {
    let round = crate::rt::clock_ns(libc::CLOCK_MONOTONIC);
    for (_, ring) in rings.iter_mut() {
        if discard {
            ring.drain(|_| {});
            continue;
        }
        let mut err = Ok(());
        ring.drain(|rec| {
            if err.is_ok() {
                err = sink.take(rec);
            }
        });
        err?;
    }
    sink.round(round)
}

/// Waits up to 100 ms for a ring to fill past its watermark or the workload to exit
/// (`exited`: its pidfd).
fn poll(ring_fds: &[i32], exited: Option<i32>) {
    let mut pfds: Vec<libc::pollfd> = ring_fds
        .iter()
        .chain(&exited)
        .map(|&fd| libc::pollfd {
            fd,
            events: libc::POLLIN,
            revents: 0,
        })
        .collect();
    // SAFETY: valid pollfd array.
    unsafe { libc::poll(pfds.as_mut_ptr(), pfds.len() as libc::nfds_t, 100) };
}

/// `--progress`: the seconds since `t0`, and what was written and lost.
fn progress(t0: Instant, sink: &Sink) {
    eprintln!(
        "labperf-agent: {} s, {} samples, {} KiB written, {} lost",
        t0.elapsed().as_secs(),
        sink.out.samples,
        sink.out.bytes / 1024,
        sink.conv.lost
    );
}

/// Whether the recording's target is done, `sig` (the last SIGINT/SIGTERM, 0: none)
/// considered: a command we started ended (`exit` says how; a signal is forwarded to it
/// once, then SIGKILL after 3 s), the attached process ended or a signal came, or a signal
/// came to a whole-machine recording without a command.
fn ended(
    target: &Target,
    pid: i32,
    sig: i32,
    forwarded: &mut Option<Instant>,
    exit: &mut ExitStatus,
) -> bool {
    match target {
        Target::System(None) => sig != 0,
        Target::Spawned(_) | Target::System(Some(_)) => {
            if let Some(st) = workload::wait(pid, false) {
                *exit = st;
                return true;
            }
            if sig != 0 {
                match forwarded {
                    None => {
                        // SAFETY: signalling our own child.
                        unsafe { libc::kill(pid, sig) };
                        *forwarded = Some(Instant::now());
                    }
                    Some(t) if t.elapsed() > Duration::from_secs(3) => {
                        // SAFETY: as above.
                        unsafe { libc::kill(pid, libc::SIGKILL) };
                    }
                    _ => {}
                }
            }
            false
        }
        Target::Attached(p, t) => sig != 0 || !crate::workload::attached_alive(t.unwrap_or(*p)),
    }
}

/// Creates the record file, its header saying what was opened (and the header extension:
/// the recipe, the vDSO's image).
fn create(o: &Opts, opened: &Opened, start: u64, path: &str) -> Result<Out, Fail> {
    let recipe = recipe(o, opened.strobe, opened.read_format);
    let hdr = header(
        o,
        opened.descs.clone(),
        &recipe.mode_string(),
        opened.notes.clone(),
        start,
    );
    let ext = HeaderExt {
        recipe: Some(recipe),
        vdso: sys::vdso_image(),
        ..Default::default()
    };
    Out::create(path, &hdr, &ext, o.flush_ms)
}

/// `--off-cpu`'s pairer, when `offcpu-time` was opened: with stacks when it samples in
/// kernel mode (a switch is seen there only).
fn off_cpu_pairer(opened: &Opened) -> Option<Pairer> {
    let i = opened
        .descs
        .iter()
        .position(|d| d.name == offcpu::EVENT_NAME)?;
    let kernel = opened.descs[i].attr.flags & (1 << 5) == 0; // exclude_kernel
    Some(Pairer::new(i as u32, kernel))
}

/// `record`: opens the events on the target, writes what they sample until it is done,
/// then the trailer; the workload's exit status.
pub fn run(o: &Opts) -> Result<i32, Fail> {
    workload::install_signal_handlers();
    let max_rate = crate::rt::read_to_string("/proc/sys/kernel/perf_event_max_sample_rate")
        .ok()
        .and_then(|v| v.trim().parse().ok());
    let (o, rate_note) = clamp_freq(o, max_rate);
    let o = &o;
    if let Some(n) = &rate_note {
        eprintln!("labperf-agent: notice: {n}");
    }
    let target = Target::new(o)?;
    let mut opened = match open_all(o, &target) {
        Ok(op) => op,
        Err(e) => {
            target.abort();
            return Err(e.into());
        }
    };
    opened.notes.extend(rate_note);
    let start = crate::rt::clock_ns(libc::CLOCK_MONOTONIC);
    let path = o.output.clone().unwrap_or_else(|| "labperf.lpr".into());
    let out = match create(o, &opened, start, &path) {
        Ok(out) => out,
        Err(e) => {
            target.abort();
            return Err(e);
        }
    };
    let layout = Layout {
        sample_type: opened.sample_type,
        read_format: opened.read_format,
        id_to_event: opened.id_to_event.clone(),
    };
    let mut sink = Sink::new(layout, opened.strobe, out);
    sink.offcpu = off_cpu_pairer(&opened);
    let mut target = target;
    // Read before the events are enabled, as after they are disabled: the CPU time's span
    // holds the samples' (an attached process's or the CPUs' time; a workload's is whole).
    let mut meter = target.meter(o);
    if !matches!(target, Target::Spawned(_)) {
        synthesize_all(&target, &mut sink.out)?;
        for fd in opened.rings.iter().map(|(f, _)| f).chain(&opened.fds) {
            fd.enable();
        }
    }
    if let Target::Spawned(w) | Target::System(Some(w)) = &mut target {
        if let Err(e) = w.go() {
            sink.out.abandon();
            return Err(Fail::exec(e));
        }
    }
    let pid = target.pid();
    let mut rings = core::mem::take(&mut opened.rings);
    let mut exit = ExitStatus::default();
    let mut pending_err: Option<Fail> = None;
    let ring_fds: Vec<i32> = rings.iter().map(|(fd, _)| fd.0).collect();
    let t0 = Instant::now();
    let mut last_progress = Instant::now();
    let mut forwarded: Option<Instant> = None;
    let exited = match &target {
        Target::Spawned(_) | Target::System(Some(_)) => sys::pidfd(pid),
        _ => None,
    };
    loop {
        poll(&ring_fds, exited);
        if let Err(e) = drain_all(&mut rings, &mut sink, o.discard).and_then(|_| sink.out.tick()) {
            pending_err = Some(e);
            break;
        }
        if o.progress && last_progress.elapsed() >= Duration::from_secs(1) {
            last_progress = Instant::now();
            progress(t0, &sink);
        }
        let sig = SIGNALLED.load(Ordering::SeqCst);
        if o.duration_ms
            .is_some_and(|ms| t0.elapsed() >= Duration::from_millis(ms))
        {
            break;
        }
        meter.tick();
        if ended(&target, pid, sig, &mut forwarded, &mut exit) {
            break;
        }
    }
    for fd in rings.iter().map(|(f, _)| f).chain(&opened.fds) {
        fd.disable();
    }
    if let Err(e) = drain_all(&mut rings, &mut sink, o.discard) {
        pending_err.get_or_insert(e);
    }
    // --duration ended first: the command is stopped with the recording, which is what
    // was asked (exit 0; the trailer keeps how the command ended).
    let stopped = matches!(target, Target::System(Some(_))) && exit == ExitStatus::default();
    if stopped {
        // SAFETY: signalling our own child.
        unsafe { libc::kill(pid, libc::SIGTERM) };
        exit = workload::wait(pid, true).unwrap_or_default();
    }
    if let Some(e) = pending_err {
        if let Target::Spawned(_) | Target::System(Some(_)) = target {
            // The file cannot be written: stop the workload rather than run it unobserved.
            // SAFETY: signalling our own child.
            unsafe { libc::kill(pid, libc::SIGTERM) };
            let _ = workload::wait(pid, true);
        }
        return Err(e);
    }
    let sampled = sink.conv.sampled;
    let (bytes, trailer) = sink.finish(&exit, start, meter.finish())?;
    if !o.quiet {
        wrote(&trailer, bytes, &path);
    }
    unsampled(&opened, sampled, o.discard);
    Ok(if stopped {
        0
    } else {
        workload::exit_code(&exit)
    })
}

/// `replay RINGFILE`: the kernel records saved in a ring dump (as the C agent's
/// `--dump-ring` writes them), converted and written as `record` would, without a perf fd.
/// The events and options say what `record` would have opened; `--sample-type` and
/// `--read-format` give the ring's layout when it came from elsewhere.
pub fn replay(o: &Opts, ring: &str) -> Result<i32, Fail> {
    let dump =
        crate::rt::read(ring).map_err(|e| format!("cannot read the ring dump '{ring}': {e}"))?;
    let specs = asked_specs(o)?;
    let (mut plans, mut sample_type, mut read_format) = base_plans(o, &specs, true, true, true);
    let strobe = strobe_of(o)?.map(|st| {
        let mode = match o.strobe.as_str() {
            "fixed" => strobe::Mode::Fixed,
            _ => strobe::Mode::Decimate,
        };
        strobe::apply(mode, &st, &mut plans[0], 0);
        (mode, st)
    });
    if let Some(st) = o.sample_type {
        sample_type = st;
    }
    if let Some(rf) = o.read_format {
        read_format = rf;
    }
    let descs = plans
        .iter()
        .zip(&specs)
        .map(|(p, (_, leader))| {
            let mut a = perf::portable(&p.to_kernel());
            a.sample_type = sample_type;
            a.read_format = if p.read_format != 0 || leader.is_none() {
                read_format
            } else {
                0
            };
            EventDesc {
                name: p.spec.name.clone(),
                attr: a,
                leader: leader.map(|l| l as u32),
            }
        })
        .collect();
    let start = crate::rt::clock_ns(libc::CLOCK_MONOTONIC);
    let path = o.output.clone().unwrap_or_else(|| "labperf.lpr".into());
    let recipe = recipe(o, strobe, read_format);
    let hdr = header(
        o,
        descs,
        &recipe.mode_string(),
        vec!["re-encoded from saved ring-buffer bytes".into()],
        start,
    );
    let ext = HeaderExt {
        recipe: Some(recipe),
        replayed: true,
        ..Default::default()
    };
    let out = Out::create(&path, &hdr, &ext, o.flush_ms)?;
    let layout = Layout {
        sample_type,
        read_format,
        id_to_event: Vec::new(),
    };
    let mut sink = Sink::new(layout, strobe, out);
    for rec in crate::convert::dump_records(&dump) {
        sink.take(rec?)?;
    }
    let (bytes, trailer) = sink.finish(&ExitStatus::default(), start, None)?;
    if !o.quiet {
        wrote(&trailer, bytes, &path);
    }
    Ok(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A kernel PERF_RECORD_SAMPLE for IP|TID|TIME|PERIOD|READ (group of `values`, FORMAT_ID).
    fn kernel_sample(tid: u32, ip: u64, time: u64, period: u64, values: &[u64]) -> Vec<u8> {
        let mut b = Vec::new();
        b.extend_from_slice(&ip.to_ne_bytes());
        b.extend_from_slice(&tid.to_ne_bytes());
        b.extend_from_slice(&tid.to_ne_bytes());
        b.extend_from_slice(&time.to_ne_bytes());
        b.extend_from_slice(&period.to_ne_bytes());
        b.extend_from_slice(&(values.len() as u64).to_ne_bytes());
        for (i, v) in values.iter().enumerate() {
            b.extend_from_slice(&v.to_ne_bytes());
            b.extend_from_slice(&(100 + i as u64).to_ne_bytes()); // FORMAT_ID
        }
        let mut r = Vec::new();
        r.extend_from_slice(&crate::convert::PERF_RECORD_SAMPLE.to_ne_bytes());
        r.extend_from_slice(&0u16.to_ne_bytes());
        r.extend_from_slice(&((8 + b.len()) as u16).to_ne_bytes());
        r.extend_from_slice(&b);
        r
    }

    fn header_for_test() -> Header {
        Header {
            agent_version: "test".into(),
            arch: Arch::X86_64,
            endian: Endian::Little,
            kernel_release: "6".into(),
            cpu: CpuId::Unknown {
                cpuinfo: String::new(),
            },
            hostname: "h".into(),
            command: vec![],
            clock_id: 1,
            start_time_ns: 0,
            start_realtime_ns: 0,
            events: vec![],
            mode: "x".into(),
            notes: vec![],
        }
    }

    #[test]
    fn a_frequency_over_the_kernels_limit_is_lowered_with_a_notice() {
        let o = Opts {
            freq: Some(100_000),
            ..Default::default()
        };
        let (c, note) = clamp_freq(&o, Some(25_000));
        assert_eq!(c.freq, Some(25_000));
        assert!(note
            .unwrap()
            .contains("throttling from 100000 Hz to 25000 Hz"));
        assert_eq!(clamp_freq(&o, Some(200_000)).0.freq, Some(100_000));
        assert_eq!(clamp_freq(&o, None).1, None);
    }

    #[test]
    fn the_trailer_counts_the_samples_the_file_holds() {
        let dir = std::env::temp_dir().join(format!("labperf-sink-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let layout = Layout {
            sample_type: perf::SAMPLE_IP
                | perf::SAMPLE_TID
                | perf::SAMPLE_TIME
                | perf::SAMPLE_PERIOD
                | perf::SAMPLE_READ,
            read_format: perf::FORMAT_GROUP | perf::FORMAT_ID,
            id_to_event: vec![],
        };
        let st = strobe::Strobe {
            period: 3000,
            window: 300,
            jitter: false,
        };
        for (mode, written) in [(strobe::Mode::Decimate, 20u64), (strobe::Mode::Fixed, 100)] {
            let path = dir.join(format!("{}.lpr", mode.name()));
            let path = path.to_str().unwrap();
            let out = Out::create(path, &header_for_test(), &HeaderExt::default(), 1000).unwrap();
            let mut sink = Sink::new(layout.clone(), Some((mode, st)), out);
            for i in 1..=100u64 {
                sink.take(&kernel_sample(
                    7,
                    0x1000 + i,
                    i * 300,
                    300,
                    &[i * 300, i * 150],
                ))
                .unwrap();
            }
            let (_, t) = sink.finish(&ExitStatus::default(), 0, None).unwrap();
            let d = decode_all(&std::fs::read(path).unwrap());
            let in_file = d
                .records
                .iter()
                .filter(|r| matches!(r, Record::Sample(_)))
                .count() as u64;
            assert_eq!(
                (d.trailer.unwrap().samples, t.samples, in_file, t.dropped),
                (written, written, written, 100 - written),
                "{mode:?}"
            );
            assert!(!std::path::Path::new(&format!("{path}.part")).exists());
        }
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
