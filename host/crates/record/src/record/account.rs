//! The account of a recording's CPU time: what its samples cover beside the kernel's own accounting of what was recorded (the trailer's USAGE item), and why they fall short.
//!
//! Every report, `info` and the HTML page say it, so that a hole of any size (kernel mode
//! not sampled, samples lost or throttled, children not followed, threads' last periods)
//! is seen: "samples cover 1.74 s (user 0.04 s, kernel 1.70 s) of the workload's 1.75 s
//! CPU time (user 0.05 s, system 1.70 s)". A gap over [`GAP_PCT`] of the CPU time is a
//! warning with its causes.

use super::load::{EventTime, FileInfo};
use labperf_common::{Attr, Header, Usage, UsageScope};
use serde_json::{json, Value};

/// The largest gap between the CPU time and what the samples cover that is not a warning,
/// in percent of the CPU time.
pub const GAP_PCT: f64 = 2.0;

/// A recording's account: its heading line, warnings (gaps and their causes), and the
/// same figures for JSON.
#[derive(Debug, Clone, PartialEq)]
pub struct Account {
    pub line: String,
    pub warnings: Vec<String>,
    pub json: Value,
}

/// `exclude_user` and `exclude_kernel`, bits 4 and 5 of an attr's flags.
const EXCLUDE_USER: u64 = 1 << 4;
const EXCLUDE_KERNEL: u64 = 1 << 5;
/// `inherit`, bit 1.
const INHERIT: u64 = 1 << 1;

/// Whether an event's periods are CPU time in ns: the software clocks cpu-clock (0) and
/// task-clock (1).
fn is_clock(a: &Attr) -> bool {
    a.type_ == 1 && a.config <= 1
}

/// A duration for people: `1.75 s`, `22.5 ms`, `310 µs`.
pub fn secs(ns: u64) -> String {
    let s = ns as f64 / 1e9;
    if ns == 0 {
        "0 s".into()
    } else if s >= 0.1 {
        format!("{s:.2} s")
    } else if s >= 0.01 {
        format!("{:.1} ms", s * 1e3)
    } else if s >= 0.0001 {
        format!("{:.2} ms", s * 1e3)
    } else {
        format!("{:.0} µs", s * 1e6)
    }
}

/// Whose CPU time the usage is, for the line: "the workload's", "the 2 CPUs'".
fn whose(u: &Usage) -> String {
    match u.scope {
        UsageScope::Workload => "the workload's".into(),
        UsageScope::Process => "the process's".into(),
        UsageScope::Thread => "the thread's".into(),
        UsageScope::Cpus { cpus, .. } => {
            if cpus == 1 {
                "the CPU's".to_string()
            } else {
                format!("the {cpus} CPUs'")
            }
        }
    }
}

/// The account of `info`'s recording, or `None` for a recording that neither samples a
/// clock nor carries a usage (a counting run of an older agent, an imported perf.data of
/// hardware events).
pub fn of(info: &FileInfo) -> Option<Account> {
    let h = info.header.as_ref()?;
    // Counting runs (`stat`) cover everything they count: no samples to account for.
    if h.mode.starts_with("stat") {
        return None;
    }
    let usage = info.trailer_ext.as_ref().and_then(|x| x.usage.as_ref());
    let clock = h
        .events
        .iter()
        .enumerate()
        .filter(|(_, e)| is_clock(&e.attr))
        .map(|(i, e)| (i, e, info.per_event.get(i).copied().unwrap_or_default()))
        .max_by_key(|(i, _, t)| (t.samples, std::cmp::Reverse(*i)));
    let mut a = Account {
        line: String::new(),
        warnings: Vec::new(),
        json: json!({}),
    };
    match (usage, clock) {
        (None, None) => return None,
        (None, Some((_, e, t))) => {
            let covered = t.period - t.idle_period;
            a.line = format!(
                "samples of '{}' cover {} of CPU time ({}); the recording has no CPU-time account to check them against (an agent older than this labperf, or a perf.data)",
                e.name,
                secs(covered),
                modes(&t)
            );
            a.json = json!({ "event": e.name, "covered_ns": covered,
                "covered_kernel_ns": t.kernel_period });
            if e.attr.flags & EXCLUDE_KERNEL != 0 {
                a.warnings.push(format!(
                    "note: kernel mode was not sampled by '{}': the time spent in the kernel is not in these samples",
                    e.name
                ));
            }
        }
        (Some(u), None) => counted_only(&mut a, h, info, u),
        (Some(u), Some((_, e, t))) => clocked(&mut a, h, info, u, &e.name, &e.attr, &t),
    }
    Some(a)
}

/// "user 0.04 s, kernel 1.70 s": a clock event's covered time by mode.
fn modes(t: &EventTime) -> String {
    let covered = t.period - t.idle_period;
    format!(
        "user {}, kernel {}",
        secs(covered.saturating_sub(t.kernel_period)),
        secs(t.kernel_period.min(covered))
    )
}

/// The usage's own words: "1.75 s CPU time (user 0.05 s, system 1.70 s)".
fn usage_words(u: &Usage) -> String {
    let total = u.user_ns.saturating_add(u.system_ns);
    let idle = match u.scope {
        UsageScope::Cpus { idle_ns, .. } => format!("; idle {}", secs(idle_ns)),
        _ => String::new(),
    };
    let what = match u.scope {
        UsageScope::Cpus { .. } => "busy time",
        _ => "CPU time",
    };
    format!(
        "{} {what} (user {}, system {}{idle})",
        secs(total),
        secs(u.user_ns),
        secs(u.system_ns)
    )
}

fn usage_json(u: &Usage) -> Value {
    let (scope, cpus, idle) = match u.scope {
        UsageScope::Workload => ("workload", None, None),
        UsageScope::Process => ("process", None, None),
        UsageScope::Thread => ("thread", None, None),
        UsageScope::Cpus { cpus, idle_ns } => ("cpus", Some(cpus), Some(idle_ns)),
    };
    json!({ "scope": scope, "user_ns": u.user_ns, "system_ns": u.system_ns,
        "cpus": cpus, "idle_ns": idle, "minor_faults": u.minor_faults,
        "major_faults": u.major_faults, "resolution_ns": u.resolution_ns })
}

/// A recording whose events count something other than time (cycles, page faults): the
/// CPU time is said, and the share of it that an excluded mode leaves out.
fn counted_only(a: &mut Account, h: &Header, info: &FileInfo, u: &Usage) {
    a.line = format!("{} {}", cap(&whose(u)), usage_words(u));
    a.json = json!({ "usage": usage_json(u) });
    let total = u.user_ns.saturating_add(u.system_ns);
    let sampling = h.events.iter().filter(|e| e.leader.is_none());
    for e in sampling {
        let f = e.attr.flags;
        let (mode, unseen) = if f & EXCLUDE_KERNEL != 0 {
            ("kernel", u.system_ns)
        } else if f & EXCLUDE_USER != 0 {
            ("user", u.user_ns)
        } else {
            continue;
        };
        if pct(unseen, total) > GAP_PCT {
            a.warnings.push(format!(
                "warning: {mode} mode was not sampled by '{}': {} of {} CPU time ({:.1}%) is not in its samples{}",
                e.name,
                secs(unseen),
                whose(u),
                pct(unseen, total),
                why_not(h, mode)
            ));
        }
    }
    let _ = info;
}

/// A recording that samples a clock: what its samples cover beside the usage, and the
/// causes of a gap.
fn clocked(
    a: &mut Account,
    h: &Header,
    info: &FileInfo,
    u: &Usage,
    name: &str,
    attr: &Attr,
    t: &EventTime,
) {
    let total = u.user_ns.saturating_add(u.system_ns);
    let covered = t.period - t.idle_period;
    // With several events, which one's samples are counted.
    let which = if h.events.len() > 1 {
        format!(" of '{name}'")
    } else {
        String::new()
    };
    a.line = format!(
        "samples{which} cover {} ({}) of {} {}",
        secs(covered),
        modes(t),
        whose(u),
        usage_words(u)
    );
    let gap = total as f64 - covered as f64;
    let gap_pct = if total > 0 {
        100.0 * gap / total as f64
    } else {
        0.0
    };
    // The samples the kernel lost, at the mean period: time the account knows of but no
    // sample shows.
    let lost_ns = info
        .kernel_lost
        .saturating_mul(t.period.checked_div(t.samples).unwrap_or(0));
    a.json = json!({ "event": name, "covered_ns": covered,
        "covered_kernel_ns": t.kernel_period.min(covered), "usage": usage_json(u),
        "gap_pct": (gap_pct * 100.0).round() / 100.0,
        "lost_samples": info.kernel_lost, "lost_ns": lost_ns });
    // Below the usage's resolution (a clock tick per reading for /proc) nothing is said.
    let resolution = 2.0 * u.resolution_ns as f64;
    if gap_pct.abs() <= GAP_PCT || gap.abs() <= resolution {
        return;
    }
    let mut causes = causes(h, info, u, attr, t, gap);
    if causes.is_empty() {
        causes.push("no cause labperf can tell".into());
    }
    let (word, of) = if gap > 0.0 {
        ("miss", format!("{:.1}%", gap_pct))
    } else {
        ("exceed", format!("{:.1}%", -gap_pct))
    };
    a.warnings.push(format!(
        "warning: the samples of '{name}' {word} {} CPU time by {} ({of}): {}",
        whose(u),
        secs(gap.abs() as u64),
        causes.join("; ")
    ));
}

/// What explains a gap of `gap` ns (negative: the samples cover more).
fn causes(
    h: &Header,
    info: &FileInfo,
    u: &Usage,
    attr: &Attr,
    t: &EventTime,
    gap: f64,
) -> Vec<String> {
    let mut c = Vec::new();
    let mean = t.period.checked_div(t.samples).unwrap_or(0);
    if gap > 0.0 {
        if attr.flags & EXCLUDE_KERNEL != 0 && u.system_ns > 0 {
            c.push(format!(
                "kernel mode was not sampled, and the kernel accounts {} of system time{}",
                secs(u.system_ns),
                why_not(h, "kernel")
            ));
        }
        if attr.flags & EXCLUDE_USER != 0 && u.user_ns > 0 {
            c.push(format!(
                "user mode was not sampled, and the kernel accounts {} of user time{}",
                secs(u.user_ns),
                why_not(h, "user")
            ));
        }
        if info.kernel_lost > 0 {
            c.push(format!(
                "the kernel lost {} samples (about {}: its ring buffer filled; use more --mmap-pages or a longer period)",
                info.kernel_lost,
                secs(info.kernel_lost.saturating_mul(mean))
            ));
        }
        let throttled = info.trailer.as_ref().map_or(0, |t| t.throttled);
        if throttled > 0 {
            c.push(format!(
                "the kernel throttled sampling {throttled} times (kernel.perf_event_max_sample_rate)"
            ));
        }
        if attr.flags & INHERIT == 0 && matches!(u.scope, UsageScope::Workload) {
            c.push(
                "the events did not follow the workload's children (inherit off: the agent's --no-inherit), whose time is the workload's"
                    .into(),
            );
        }
        if info.damaged() {
            c.push("the file is damaged: samples were lost with it".into());
        }
        // Each thread's last period is never sampled (its timer had not fired when it
        // ended): about half a period a thread, a period at most.
        let tail = info.exits.saturating_mul(mean);
        if info.exits > 0 && tail as f64 >= gap / 4.0 {
            c.push(format!(
                "{} ended while recorded, each with up to one period ({}) never sampled: up to {}",
                crate::text::plural(info.exits, "thread", "threads"),
                secs(mean),
                secs(tail)
            ));
        }
        // Sampling is a count: its error is about one period, and the square root of the
        // samples' count of them.
        let noise = ((t.samples as f64).sqrt() + 1.0) * mean as f64;
        if noise >= gap / 2.0 {
            c.push(format!(
                "a short run: {} of {} each leave about ±{} to chance",
                crate::text::plural(t.samples, "sample", "samples"),
                secs(mean),
                secs(noise as u64)
            ));
        }
    } else {
        match u.scope {
            UsageScope::Workload => c.push(
                "processes the workload started but did not wait for (daemons, orphans) were sampled, but the workload's rusage holds only the children it waited for".into(),
            ),
            UsageScope::Process | UsageScope::Thread => c.push(format!(
                "the process's last reading came before its end, or its clock ticks ({}) are coarse",
                secs(u.resolution_ns)
            )),
            UsageScope::Cpus { .. } => c.push(format!(
                "/proc/stat counts in clock ticks ({}), read a moment apart from the events",
                secs(u.resolution_ns)
            )),
        }
    }
    c
}

/// Why a mode was not sampled, from the agent's note: `: perf_event_paranoid is 2 and
/// ...`, or ` (the event's :u)` when the event asked for it.
fn why_not(h: &Header, mode: &str) -> String {
    let prefix = format!("{mode} mode not sampled: ");
    let modifier = if mode == "kernel" { ":u" } else { ":k" };
    let said = h.events.iter().any(|e| e.name.ends_with(modifier));
    match h.notes.iter().find_map(|n| n.strip_prefix(&prefix)) {
        Some(why) => format!(": {why}"),
        None if said => format!(" (the event said {modifier})"),
        None if mode == "kernel" => " (an agent older than this labperf left it out, or had no right to it: that needs root, CAP_PERFMON or perf_event_paranoid <= 1)".into(),
        None => String::new(),
    }
}

fn pct(part: u64, whole: u64) -> f64 {
    if whole == 0 {
        0.0
    } else {
        100.0 * part as f64 / whole as f64
    }
}

/// `the workload's` → `The workload's`.
fn cap(s: &str) -> String {
    let mut c = s.chars();
    c.next()
        .map(|f| f.to_uppercase().chain(c).collect())
        .unwrap_or_default()
}
