//! `labperf info FILE`: the header, the events as opened, totals and losses, and how far
//! its call stacks reach.

use anyhow::{Context, Result};
use labperf::record::load::FileInfo;
use labperf::text::{plural, show};
use labperf_common::{EventDesc, Header, Record, Trailer};
use std::path::Path;

/// Print a file's header, totals and losses.
#[derive(Debug, clap::Args)]
#[command(
    mut_arg(
        "strict",
        super::opts::help(
            "Exit with status 3 when the file is damaged (what is intact still prints)"
        )
    ),
    after_help = "EXAMPLES:\n  labperf info labperf.lpr"
)]
pub struct Args {
    #[command(flatten)]
    pub file: super::opts::FileArg,
    #[command(flatten)]
    pub strict: super::opts::StrictOpt,
    /// Where the binaries its call stacks name are found (for the `stacks:` line).
    #[command(flatten)]
    pub symbols: super::opts::SymbolOpts,
}

pub fn run(a: &Args) -> Result<()> {
    let (mut samples, mut lost, mut mmaps, mut other) = (0u64, 0u64, 0u64, 0u64);
    // perf's perf.data is imported in memory first, as `report` reads it.
    let src = super::import::source(&a.file.file)?;
    let info = labperf::record::load::stream(&src, |r| match r {
        Record::Sample(_) => samples += 1,
        Record::Lost(l) => lost = lost.saturating_add(l.lost),
        Record::Mmap2(_) => mmaps += 1,
        _ => other += 1,
    })
    .with_context(|| format!("cannot read {}", a.file.file.display()))?;
    match src.file() {
        Some(_) => println!(
            "file:            {} ({} bytes)",
            a.file.file.display(),
            info.bytes
        ),
        None => println!(
            "file:            {} ({} bytes; perf's perf.data, imported for this command: {} bytes as a labperf recording)",
            a.file.file.display(),
            std::fs::metadata(&a.file.file).map_or(0, |m| m.len()),
            info.bytes
        ),
    }
    println!(
        "wire version:    {}",
        info.wire_version
            .map(|v| v.to_string())
            .unwrap_or_else(|| "unknown (prelude damaged)".into())
    );
    match &info.header {
        None => println!("header:          missing or damaged"),
        Some(h) => print_header(h, &info, &a.file.file),
    }
    println!(
        "records:         {} ({}, {}, {other} other)",
        info.records,
        plural(samples, "sample", "samples"),
        plural(mmaps, "mmap", "mmaps")
    );
    let alpha = info
        .header
        .as_ref()
        .is_some_and(|h| h.arch == labperf_common::Arch::Alpha);
    let command = info.header.as_ref().map_or(&[][..], |h| &h.command[..]);
    let imported = info
        .header
        .as_ref()
        .is_some_and(|h| h.agent_version.ends_with("(labperf import)"));
    print_trailer(info.trailer.as_ref(), alpha, command, imported);
    println!("kernel lost:     {}", plural(lost, "record", "records"));
    // What the samples cover of the CPU time the kernel accounted, as every report says it.
    if let Some(acc) = labperf::record::account::of(&info) {
        println!("CPU time:        {}", show(&acc.line));
        for w in &acc.warnings {
            println!("  - {}", show(w));
        }
    }
    // How far the call stacks reach, as every report says it.
    if let Ok(Some(q)) = labperf::symbolize::measure::measure(&src, &a.symbols.search()) {
        println!("stacks:          {}", show(&q.line()));
        for w in q.warnings() {
            println!("  - {}", show(&w));
        }
    }
    println!(
        "damage:          {}",
        labperf_common::decode::describe_losses(&info.losses)
    );
    for d in &info.damage {
        println!("  - {d}");
    }
    if a.strict.strict && info.damaged() {
        super::report::strict_exit();
    }
    Ok(())
}

/// The header's lines: the agent, the target, where the file was fetched from, the
/// command, its recipe and view, the clock, each event as opened, the notes.
fn print_header(h: &Header, info: &FileInfo, file: &Path) {
    println!("agent:           {}", show(&h.agent_version));
    println!(
        "target:          {} ({}), kernel {}",
        show(h.arch.name()),
        match h.endian {
            labperf_common::Endian::Little => "little-endian",
            labperf_common::Endian::Big => "big-endian",
        },
        show(&h.kernel_release)
    );
    println!(
        "cpu:             {}",
        show(&labperf::record::cpu::cpu_name(&h.cpu))
    );
    println!("hostname:        {}", show(&h.hostname));
    // Where labperf fetched it from: the binary cache's index, not the file.
    match labperf::files::cache::origin(&labperf::files::cache::binaries(), file) {
        labperf::files::cache::Origin::Fetched(m) => println!(
            "fetched from:    {} (host key {}, {})",
            show(&m.name),
            m.fingerprint(),
            show(&m.arch)
        ),
        labperf::files::cache::Origin::Conflict => {
            println!("fetched from:    two lab machines with different host keys (the same bytes)")
        }
        labperf::files::cache::Origin::Unknown => {}
    }
    println!("command:         {}", show(&h.command.join(" ")));
    println!("mode:            {}", show(&h.mode));
    let recipe = labperf_common::recipe_of(h, info.header_ext.as_ref());
    println!(
        "recipe:          {}{} (report view: {})",
        recipe_words(&recipe),
        if info.header_ext.as_ref().is_some_and(|x| x.recipe.is_some()) {
            ""
        } else {
            ", from the mode and events (no header extension)"
        },
        labperf::views::view::View::of(&recipe).name()
    );
    if let Some(x) = &info.header_ext {
        if x.replayed {
            println!("replayed:        yes (re-encoded from saved ring-buffer bytes)");
        }
        if let Some(v) = &x.vdso {
            println!("vdso:            {} bytes recorded", v.len());
        }
    }
    // The realtime clock when the recording started; 0 where the agent did not read it.
    if h.start_realtime_ns > 0 {
        println!(
            "started:         {}",
            labperf::text::utc_date(h.start_realtime_ns)
        );
    }
    println!(
        "clock:           {} (the samples' times; the recording started at {:.6} s of it)",
        clock_name(h.clock_id),
        h.start_time_ns as f64 / 1e9
    );
    for (i, e) in h.events.iter().enumerate() {
        print_event(i, e);
    }
    for n in &h.notes {
        println!("note:            {}", show(n));
    }
}

/// One event as it was opened: its name, group and perf_event_attr.
fn print_event(i: usize, e: &EventDesc) {
    let a = &e.attr;
    println!(
        "event {i}:         {}{} type={} config={:#x} config1={:#x} config2={:#x} {}={} sample_type={:#x} read_format={:#x} size={} flags=[{}]",
        show(&e.name),
        e.leader.map(|l| format!(" (group of event {l})")).unwrap_or_default(),
        a.type_,
        a.config,
        a.config1,
        a.config2,
        if a.is_freq() { "freq" } else { "period" },
        a.sample_period_or_freq,
        a.sample_type,
        a.read_format,
        a.size,
        a.flag_names().join(",")
    );
}

/// The trailer's totals, the agent's cost, the duration and the workload's exit (or that
/// the trailer is missing); `command` is the header's (`--pid N`, `--tid N`, `-a`, `-C
/// LIST`: a recording of something the agent did not start, which has no exit of its own).
fn print_trailer(trailer: Option<&Trailer>, alpha: bool, command: &[String], imported: bool) {
    match trailer {
        None => println!("trailer:         missing: the agent did not finish cleanly (killed?); records up to its last flush are above"),
        Some(t) => {
            println!("totals:          {}, {} lost, {} throttled, {} dropped by the agent", plural(t.samples, "sample", "samples"), t.lost, t.throttled, t.dropped);
            if imported {
                println!("agent cost:      unknown (a perf.data import: perf's own cost is not in its file)");
            } else {
                println!("agent cost:      {:.3} s CPU, {} KiB peak RSS", t.agent_cpu_ns as f64 / 1e9, t.agent_peak_rss_kib);
            }
            println!("duration:        {:.3} s", t.duration_ns as f64 / 1e9);
            println!("workload exit:   {}", match (t.exit.code, t.exit.signal) {
                (Some(c), _) => format!("exited with status {c}"),
                (None, Some(s)) => match labperf::text::signal_name(s).filter(|_| !alpha) {
                    Some(name) => format!("killed by {name}"),
                    None => format!("killed by signal {s}"),
                },
                _ => no_exit(command),
            });
        }
    }
}

/// Why a recording has no workload exit, from its header's command: it attached to a
/// process or thread labperf did not start (`record -p/-t`), or recorded the whole machine
/// (or some CPUs) without a command.
fn no_exit(command: &[String]) -> String {
    let first = command.first().map(String::as_str);
    let arg = command.get(1).map(|a| show(a)).unwrap_or_default();
    match first {
        Some("--pid") => {
            format!("none: attached to process {arg}, which labperf did not start (record -p)")
        }
        Some("--tid") => {
            format!("none: attached to thread {arg}, which labperf did not start (record -t)")
        }
        Some("-a") => "none: the whole machine, without a command (record -a)".into(),
        Some("-C") => format!("none: CPUs {arg}, without a command (record -C)"),
        _ => "unknown".into(),
    }
}

/// A recording's recipe in words (`Sample { group_read: false }` is "sampling").
fn recipe_words(r: &labperf_common::Recipe) -> String {
    use labperf_common::Recipe;
    match r {
        Recipe::Sample { group_read: false } => "sampling".into(),
        Recipe::Sample { group_read: true } => {
            "sampling, each sample reading its event group".into()
        }
        Recipe::Strobe {
            mode,
            period,
            window,
            jitter,
        } => format!(
            "strobed sampling ({}): a {window}-cycle window every {period}{}",
            mode.name(),
            if *jitter { ", jittered" } else { "" }
        ),
        Recipe::Stat => "counting (stat)".into(),
        Recipe::StatTopdown { level, legacy, pmu } => format!(
            "counting TopDown level {level} on {} ({})",
            show(pmu),
            if *legacy {
                "its events"
            } else {
                "PERF_METRICS"
            }
        ),
        Recipe::RecordTopdown { level } => format!("sampling with TopDown level {level}"),
        Recipe::ProfileMe => "ProfileMe sampling".into(),
        Recipe::Mem => "memory access sampling (ProfileMe)".into(),
    }
}

/// The name of the clock samples were timed by (`perf_event_attr.clockid`).
fn clock_name(id: i32) -> String {
    match id {
        0 => "CLOCK_REALTIME".into(),
        1 => "CLOCK_MONOTONIC".into(),
        4 => "CLOCK_MONOTONIC_RAW".into(),
        7 => "CLOCK_BOOTTIME".into(),
        11 => "CLOCK_TAI".into(),
        n => format!("clock id {n}"),
    }
}
