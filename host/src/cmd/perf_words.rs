//! perf's verbs and options that labperf's command line refuses, each with what labperf
//! has instead (or that it has none yet): said in place of clap's error, which would
//! suggest a look-alike option (`--symbol-filter` → `--symfs`) or `-- -g`.

use clap::error::{ContextKind, ContextValue, ErrorKind};

/// perf's verbs that labperf has not, and what to use instead.
const VERBS: &[(&str, &str)] = &[
    (
        "top",
        "labperf has no `top` yet: record a while, then report (`labperf record -a --duration 5 -o box.lpr`, then `labperf report box.lpr --by comm,dso`; a lab machine's: `--host H`)",
    ),
    (
        "sched",
        "labperf has no `sched`: `labperf record --off-cpu` records where and how long threads wait off the CPU (sched_switch's use), `labperf report --off-cpu` shows it",
    ),
    (
        "lock",
        "labperf has no `lock`: `labperf record --off-cpu` records the time threads wait (on locks too) with its call stacks, `labperf report --off-cpu` shows it",
    ),
    (
        "trace",
        "labperf has no `trace` (it records no tracepoints): `labperf record --off-cpu` covers sched_switch's use, the time threads wait",
    ),
    (
        "evlist",
        "labperf has no `evlist`: `labperf info FILE` lists a recording's events",
    ),
    (
        "mem",
        "labperf has no `mem`: on an Alpha EV67+ lab machine `labperf record --host H --mem` samples loads and stores with their data addresses; elsewhere not there yet",
    ),
    (
        "c2c",
        "labperf has no `c2c` (cache-line sharing) yet",
    ),
    (
        "timechart",
        "labperf has no `timechart`: `labperf report FILE --format html -o page.html` draws the recording's samples over time",
    ),
    (
        "version",
        "labperf has no `version` verb: `labperf --version`",
    ),
];

/// perf's options of a verb that labperf's same verb refuses: (verbs, spellings, what
/// labperf has, said after "`VERB OPTION` ").
const OPTIONS: &[(&[&str], &[&str], &str)] = &[
    (
        &["annotate"],
        &["--tui", "--gtk"],
        "(an interactive browser) is not there: `labperf annotate` prints the text of perf's `--stdio`",
    ),
    (
        &["annotate"],
        &["--percent-type"],
        "is not there: each percent is of the function's period, perf's default `local-period` (`-n`: the samples)",
    ),
    (
        &["report"],
        &["--symbol-filter"],
        "(perf's match of part of a name) is `--symbols NAMES` here, whole names as the report shows them",
    ),
    (
        &["report"],
        &["--header"],
        "(the recording's header above the report) is `--header-only` (`labperf info FILE`) here: the machine, command, events and counts",
    ),
    (
        &["report"],
        &["-g"],
        "(perf report's call graph) is `--call-graph caller` (or `callee`) here; `--children` alone gives the Children and Self table",
    ),
    (
        &["report"],
        &["-F", "--fields"],
        "(perf report's columns) is `--by KEYS` (`-s`) here: `--by comm,dso`",
    ),
    (
        &["report"],
        &["--tui", "--gtk"],
        "(an interactive browser) is not there: `--format html -o page.html` writes one page with the tables and the flame graph",
    ),
    (
        &["report"],
        &["-k", "--vmlinux"],
        "is `--symfs DIR` here: binaries and kernels are found as DIR/<build-id>/elf or DIR/<path>",
    ),
    (
        &["record"],
        &["--all-user"],
        "is the :u modifier here: `-e cpu-clock:u`",
    ),
    (
        &["record"],
        &["--all-kernel"],
        "is the :k modifier here: `-e cpu-clock:k`",
    ),
    (
        &["record"],
        &["-b", "--branch-any", "-j", "--branch-filter"],
        "(branch stacks) is not there yet: labperf records none",
    ),
    (
        &["record"],
        &["-d", "--data"],
        "(sample data addresses) is not there yet, but on an Alpha EV67+ lab machine: `--host H --mem`",
    ),
    (
        &["record"],
        &["-z", "--compression-level"],
        "is not there yet: labperf does not compress its record files",
    ),
    (
        &["record"],
        &["--switch-output"],
        "is not there yet: one recording is one file",
    ),
    (&["record"], &["-D", "--delay"], "is not there yet"),
    (
        &["record"],
        &["-u", "--uid"],
        "is not there yet: `-a` records every task, and `labperf report FILE --by comm,pid` tells them apart",
    ),
    (
        &["record"],
        &["-G", "--cgroup"],
        "is not there yet: `-p PID` records one process, `-a` every task",
    ),
    (
        &["record"],
        &["--user-regs", "--intr-regs"],
        "is not there yet: samples keep no registers (but `--call-graph dwarf`'s, to unwind)",
    ),
    (
        &["stat"],
        &["-x", "--field-separator"],
        "(perf stat's separated fields) is `--format csv` here",
    ),
    (
        &["stat"],
        &["-A", "--no-aggr", "--per-core", "--per-socket", "--per-die"],
        "(counts per CPU, core, socket or die) is not there yet: `labperf stat` counts the whole workload",
    ),
    (
        &["stat"],
        &["-d", "--detailed"],
        "is not there yet: name each event with -e (`labperf list` lists them)",
    ),
];

/// The verb of the command line (its first word that is not an option: labperf's own
/// options before it are -q and -v).
fn verb(args: &[String]) -> Option<&str> {
    args.iter()
        .skip(1)
        .map(String::as_str)
        .find(|a| !a.starts_with('-'))
}

/// What labperf has for the perf verb or option that clap refused in `e`, given the whole
/// command line `args`; `None` when it is not one of perf's that the tables know.
pub fn explain(e: &clap::Error, args: &[String]) -> Option<String> {
    let word = |k: ContextKind| match e.get(k) {
        Some(ContextValue::String(s)) => Some(s.clone()),
        _ => None,
    };
    match e.kind() {
        ErrorKind::InvalidSubcommand => {
            let w = word(ContextKind::InvalidSubcommand)?;
            let (_, text) = VERBS.iter().find(|(v, _)| *v == w)?;
            Some(text.to_string())
        }
        ErrorKind::UnknownArgument => {
            let w = word(ContextKind::InvalidArg)?;
            let v = verb(args)?;
            // `--time=10%` is `--time`.
            let bare = w.split_once('=').map_or(w.as_str(), |(o, _)| o);
            let (_, _, text) = OPTIONS
                .iter()
                .find(|(verbs, opts, _)| verbs.contains(&v) && opts.contains(&bare))?;
            Some(format!("`{v} {bare}` {text}"))
        }
        _ => None,
    };
    match e.kind() {
        ErrorKind::InvalidSubcommand => {
            let w = word(ContextKind::InvalidSubcommand)?;
            let (_, text) = VERBS.iter().find(|(v, _)| *v == w)?;
            Some(text.to_string())
        }
        ErrorKind::UnknownArgument => {
            let w = word(ContextKind::InvalidArg)?;
            let v = verb(args)?;
            // `--time=10%` is `--time`; a perf spelling with its value (`--call-graph=graph`)
            // is matched whole first.
            let bare = w.split_once('=').map_or(w.as_str(), |(o, _)| o);
            let (_, _, text) = OPTIONS
                .iter()
                .filter(|(verbs, _, _)| verbs.contains(&v))
                .find(|(_, opts, _)| opts.contains(&w.as_str()))
                .or_else(|| {
                    OPTIONS
                        .iter()
                        .filter(|(verbs, _, _)| verbs.contains(&v))
                        .find(|(_, opts, _)| opts.contains(&bare))
                })?;
            Some(format!("`{v} {bare}` {text}"))
        }
        _ => None,
    }
}
