//! `labperf stat`: counting mode with the agent, here or on lab machines (`--host`), of a
//! command (`-r N` times), a process or thread (`-p`/`-t`) or CPUs (`-a`/`-C`); the summary
//! printed in perf's layout by `views::stat` from the counts the agent records (it is
//! run with `--no-summary` and a record file, temporary without `-o`).

use super::lab;
use super::opts::{
    help, EventsOpt, FormatOpt, HostOpt, LevelOpt, OutputOpt, RemoteOpts, TopdownOpt,
};
use anyhow::{bail, Context, Result};
use labperf::text::{show, show_text};
use labperf::views::stat;
use std::ffi::OsString;
use std::path::{Path, PathBuf};

/// Count events over a workload (perf stat style), optionally every -I ms.
#[derive(Debug, clap::Args)]
#[command(
    mut_arg("host", help("Lab machines to count on (comma-separated); without it, this machine")),
    mut_arg("events", help("Events to count: a comma list (-e task-clock,page-faults) or -e repeated, groups {a,b} counted together (each member's count kept); the agent's default set without it")),
    mut_arg("topdown", help("Intel TopDown: {slots,topdown-*} per thread (Ice Lake and later), or the older per-core events system-wide (needs root); the ratios as perf computes them")),
    mut_arg("level", |a| help("With --topdown: level 1, or 2 (Sapphire Rapids and later)")(a).requires("topdown")),
    mut_arg("format", help("With --topdown: the table printed at the end (the agent prints live lines meanwhile)")),
    mut_arg("output", help("Also save the counts in this record file (like perf stat, nothing is written without it); a device or FIFO is written straight through (and --topdown prints no table)")),
    after_help = "EXAMPLES:\n  labperf stat -- ./my-prog\n  labperf stat -r 5 -e task-clock -e page-faults -- ./my-prog   # mean +- variation\n  labperf stat -p 1234 --duration 10   # a running process (-t TID: one thread)\n  labperf stat -a --duration 2   # every CPU (-C 0,2-3: some), root or CAP_PERFMON\n  labperf stat -I 500 -e cycles -e instructions --host lab1 -- ./my-prog arg\n  labperf stat --topdown -I 1000 -- ./labperf-bench --duration 5\n  labperf stat --topdown --level 2 --per-thread --format csv -- ./my-prog"
)]
pub struct Args {
    #[command(flatten)]
    pub hosts: HostOpt,
    #[command(flatten)]
    pub ssh: RemoteOpts,
    #[command(flatten)]
    pub event: EventsOpt,
    /// Print and record the counts every MS milliseconds.
    #[arg(short = 'I', long, value_name = "MS")]
    pub interval: Option<u64>,
    /// Run the command N times and print each count's mean with its variation ("+- x%":
    /// the standard error of the mean, as perf's -r).
    #[arg(short = 'r', long, value_name = "N", default_value_t = 1,
        value_parser = clap::value_parser!(u32).range(1..))]
    pub repeat: u32,
    /// Count a running process (all its threads) until it exits, Ctrl-C or --duration.
    #[arg(short = 'p', long, value_name = "PID", conflicts_with_all = ["tid", "all_cpus", "cpu"])]
    pub pid: Option<u32>,
    /// Count one thread of a running process, as -p.
    #[arg(short = 't', long, value_name = "TID", conflicts_with_all = ["all_cpus", "cpu"])]
    pub tid: Option<u32>,
    /// Count every task on every CPU, for --duration or while CMD runs. Needs root,
    /// CAP_PERFMON or perf_event_paranoid <= 0. (Events without :u/:k count kernel mode
    /// too wherever perf would: paranoid <= 1, or CAP_PERFMON.)
    #[arg(short = 'a', long)]
    pub all_cpus: bool,
    /// As -a, on these CPUs only: 0,2-3.
    #[arg(
        short = 'C',
        long = "cpu",
        value_name = "LIST",
        conflicts_with = "all_cpus"
    )]
    pub cpu: Option<String>,
    /// With -a/-C/-p/-t: count SECS seconds.
    #[arg(long, value_name = "SECS")]
    pub duration: Option<f64>,
    #[command(flatten)]
    pub td: TopdownOpt,
    #[command(flatten)]
    pub td_level: LevelOpt,
    /// With --topdown: one line per thread.
    #[arg(long, requires = "topdown")]
    pub per_thread: bool,
    #[command(flatten)]
    pub format: FormatOpt,
    #[command(flatten)]
    pub output: OutputOpt,
    /// The workload and its arguments, passed on exactly as given (byte for byte).
    #[arg(last = true, required_unless_present_any = ["pid", "tid", "all_cpus", "cpu"],
        conflicts_with_all = ["pid", "tid"], value_name = "CMD")]
    pub command: Vec<OsString>,
}

fn agent_args(a: &Args) -> Vec<String> {
    let mut v = Vec::new();
    v.extend(super::event_names::agent_args(&a.event.events));
    if let Some(i) = a.interval {
        v.extend(["-I".to_string(), i.to_string()]);
    }
    if let Some(p) = a.pid {
        v.extend(["--pid".to_string(), p.to_string()]);
    }
    if let Some(t) = a.tid {
        v.extend(["--tid".to_string(), t.to_string()]);
    }
    if a.all_cpus {
        v.push("-a".into());
    }
    if let Some(c) = &a.cpu {
        v.extend(["-C".to_string(), c.clone()]);
    }
    if let Some(d) = a.duration {
        v.extend(["--duration".to_string(), d.to_string()]);
    }
    if a.td.topdown {
        v.extend([
            "--topdown".to_string(),
            "--level".into(),
            a.td_level.level.to_string(),
        ]);
        if a.per_thread {
            v.push("--per-thread".into());
        }
    }
    v
}

/// With --topdown, the table (or CSV, JSON) of the recorded intervals.
fn print_topdown(a: &Args, file: &Path) -> Result<()> {
    if a.td.topdown {
        let r = labperf::views::topdown::build(
            &file.into(),
            labperf::symbolize::symbols::Search::new(Vec::new()),
            None,
        )
        .with_context(|| format!("cannot read the TopDown counts in {}", file.display()))?;
        for w in &r.info.warnings() {
            eprintln!("{}", labperf::text::show_text(w));
        }
        print!(
            "{}",
            r.table().render(a.format.get(), 0, super::report::colour())
        );
    }
    Ok(())
}

/// Where the counts go: `-o`, or (--topdown, which prints its table from the file, and
/// --host, which fetches it) a temporary file removed afterwards.
struct Out {
    path: PathBuf,
    /// The private directory a temporary file is in, removed with it.
    temporary: Option<labperf::files::private::PrivateDir>,
}

impl Out {
    fn new(a: &Args, needed: bool) -> Result<Option<Out>> {
        Ok(match (&a.output.output, needed) {
            (Some(p), _) => Some(Out {
                path: p.clone(),
                temporary: None,
            }),
            (None, true) => {
                // In a directory of this run's own (0700): no other user reads the counts
                // or plants a link or FIFO at their name.
                let dir = labperf::files::private::PrivateDir::new().context(
                    "cannot make a private directory for the counts in the temporary directory: check TMPDIR",
                )?;
                Some(Out {
                    path: dir.join("stat.lpr"),
                    temporary: Some(dir),
                })
            }
            (None, false) => None,
        })
    }
}

/// The option rules the agent would otherwise refuse with its own words.
fn check(a: &Args) -> Result<()> {
    let machine = a.all_cpus || a.cpu.is_some();
    let attach = a.pid.is_some() || a.tid.is_some();
    if a.repeat > 1 {
        if a.command.is_empty() {
            bail!("-r N runs a command N times: give it after --");
        }
        if a.output.output.is_some() || a.td.topdown {
            bail!("-r N averages N runs, which one file (-o) or --topdown table does not hold: drop -r, or -o/--topdown");
        }
    }
    if a.duration.is_some() && !machine && !attach {
        bail!("--duration goes with -a, -C, -p or -t; a command's counts end with the command");
    }
    if machine && a.command.is_empty() && a.duration.is_none() {
        bail!("-a/-C count until a command ends or for --duration SECS: give one of them");
    }
    if a.td.topdown && (machine || a.tid.is_some()) {
        bail!("--topdown picks its own CPUs and threads: drop -a/-C/-t");
    }
    Ok(())
}

/// What perf's heading names: the process, thread or CPUs, else the command.
fn target(a: &Args) -> stat::Target {
    if let Some(p) = a.pid {
        stat::Target::Pid(p.to_string())
    } else if let Some(t) = a.tid {
        stat::Target::Tid(t.to_string())
    } else if a.all_cpus {
        stat::Target::System
    } else if let Some(c) = &a.cpu {
        stat::Target::Cpus(c.clone())
    } else {
        stat::Target::Command(
            a.command
                .iter()
                .map(|c| c.to_string_lossy().into_owned())
                .collect(),
        )
    }
}

/// One run's totals from its file; the workload's times only for a command counted
/// alone (perf prints user and sys for it only).
fn read_run(a: &Args, file: &Path, times: Option<(u64, u64)>) -> Result<stat::Run> {
    let run = stat::read(&file.into())
        .with_context(|| format!("cannot read the counts in {}", file.display()))?;
    let mut run = run.with_context(|| {
        format!(
            "{} holds no totals: the agent stopped before the end of the run",
            file.display()
        )
    })?;
    let alone = !(a.all_cpus || a.cpu.is_some() || a.pid.is_some() || a.tid.is_some());
    run.times = times.filter(|_| alone);
    Ok(run)
}

pub fn run(a: &Args) -> Result<()> {
    check(a)?;
    // A device or a FIFO gets the counts straight through and is not read back.
    let readable = match &a.output.output {
        Some(p) => lab::record_output(p)?,
        None => true,
    };
    // labperf prints perf's summary from the file; the agent prints it for --topdown and
    // for a device or FIFO, which cannot be read back.
    let summary = readable && !a.td.topdown;
    let mut args = agent_args(a);
    if summary {
        args.push("--no-summary".into());
    }
    let style = stat::Style {
        big_num: stat::big_num_from_env(),
        intervals: a.interval.is_some(),
    };
    if a.hosts.host.is_empty() {
        let agent = super::agents::find_agent()?;
        let mut runs = Vec::new();
        let mut status = 0;
        for _ in 0..a.repeat {
            let out = Out::new(a, a.td.topdown || summary)?;
            let f = super::local::run(
                &agent,
                "stat",
                out.as_ref().map(|o| o.path.as_path()),
                &args,
                false,
                &a.command,
            )?;
            status = f.status;
            // The workload's own status; its counts are still worth printing.
            if let Some(o) = out.as_ref().filter(|_| readable) {
                if summary {
                    runs.push(read_run(a, &o.path, f.times)?);
                } else {
                    print_topdown(a, &o.path)?;
                }
            }
            if f.interrupted {
                eprintln!("note: interrupted: the counts end there");
                break;
            }
        }
        if !runs.is_empty() {
            eprint!("{}", stat::summary(&runs, &target(a), style));
        }
        super::record::pass_on(status);
        return Ok(());
    }
    remote(a, &args, summary, style)
}

/// `stat --host`: the runs on each lab machine, then each machine's summary.
fn remote(a: &Args, args: &[String], summary: bool, style: stat::Style) -> Result<()> {
    let hosts = lab::expand(&a.hosts.host, &a.ssh, false)?;
    let mut per_host: Vec<(String, Vec<stat::Run>)> = Vec::new();
    let (mut failed, mut worst) = (0, 0);
    for _ in 0..a.repeat {
        let out = Out::new(a, true)?.expect("a file is needed to fetch the counts");
        let job = lab::Job {
            verb: "stat",
            agent_args: args.to_vec(),
            command: &a.command,
            output: &out.path,
            binaries: false,
            push: &[],
        };
        let results = lab::run(&hosts, &a.ssh, &job);
        failed = lab::summary(&results);
        // Aborted (a second interrupt): nothing is reported.
        if labperf::interrupt::aborting() {
            bail!("interrupted twice: aborted");
        }
        let mut interrupted = false;
        for (_, r) in &results {
            let Ok(d) = r else { continue };
            if out.temporary.is_none() {
                eprintln!(
                    "[{}] counts recorded in {}",
                    show(&d.name),
                    d.file.display()
                );
            }
            let read = match (d.readable, summary) {
                (false, _) => Ok(()),
                (true, true) => read_run(a, &d.file, None).map(|run| {
                    match per_host.iter_mut().find(|(n, _)| *n == d.name) {
                        Some((_, runs)) => runs.push(run),
                        None => per_host.push((d.name.clone(), vec![run])),
                    }
                }),
                (true, false) => print_topdown(a, &d.file),
            };
            if let Err(e) = read {
                eprintln!(
                    "[{}] error: {}",
                    show(&d.name),
                    show_text(&format!("{e:#}"))
                );
                failed += 1;
            }
            if out.temporary.is_some() {
                let _ = std::fs::remove_file(&d.file);
            }
            if d.interrupted {
                interrupted = true;
                eprintln!(
                    "[{}] note: interrupted: the counts end there",
                    show(&d.name)
                );
            }
            if d.status != 0 {
                worst = d.status;
            }
        }
        if interrupted || failed > 0 {
            break;
        }
    }
    // From here on an interrupt ends labperf at once, as it ends `labperf report`.
    labperf::interrupt::restore_default();
    for (name, runs) in &per_host {
        eprint!(
            "\n[{}]{}",
            show(name),
            stat::summary(runs, &target(a), style)
        );
    }
    if failed > 0 {
        bail!(
            "{failed} of {} failed",
            labperf::text::plural(hosts.len() as u64, "host", "hosts")
        );
    }
    super::record::pass_on(worst);
    Ok(())
}
