//! `labperf stat`: counting mode with the agent, here or on lab machines (`--host`).

use super::lab;
use super::opts::{
    help, EventsOpt, FormatOpt, HostOpt, LevelOpt, OutputOpt, RemoteOpts, TopdownOpt,
};
use anyhow::{bail, Context, Result};
use labperf::text::{show, show_text};
use std::ffi::OsString;
use std::path::{Path, PathBuf};

/// Count events over a workload (perf stat style), optionally every -I ms.
#[derive(Debug, clap::Args)]
#[command(
    mut_arg("host", help("Lab machines to count on (comma-separated); without it, this machine")),
    mut_arg("events", help("Event to count (repeatable); the agent's default set without it")),
    mut_arg("topdown", help("Intel TopDown: {slots,topdown-*} per thread (Ice Lake and later), or the older per-core events system-wide (needs root); the ratios as perf computes them")),
    mut_arg("level", |a| help("With --topdown: level 1, or 2 (Sapphire Rapids and later)")(a).requires("topdown")),
    mut_arg("format", help("With --topdown: the table printed at the end (the agent prints live lines meanwhile)")),
    mut_arg("output", help("Also save the counts in this record file (like perf stat, nothing is written without it); a device or FIFO is written straight through (and --topdown prints no table)")),
    after_help = "EXAMPLES:\n  labperf stat -- ./my-prog\n  labperf stat -I 500 -e cycles -e instructions --host lab1 -- ./my-prog arg\n  labperf stat --topdown -I 1000 -- ./labperf-bench --duration 5\n  labperf stat --topdown --level 2 --per-thread --format csv -- ./my-prog"
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
    #[arg(last = true, required = true, value_name = "CMD")]
    pub command: Vec<OsString>,
}

fn agent_args(a: &Args) -> Vec<String> {
    let mut v = Vec::new();
    for e in &a.event.events {
        v.extend(["-e".to_string(), e.clone()]);
    }
    if let Some(i) = a.interval {
        v.extend(["-I".to_string(), i.to_string()]);
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
    temporary: bool,
}

impl Out {
    fn new(a: &Args, needed: bool) -> Option<Out> {
        match (&a.output.output, needed) {
            (Some(p), _) => Some(Out {
                path: p.clone(),
                temporary: false,
            }),
            (None, true) => Some(Out {
                path: std::env::temp_dir().join(format!(
                    "labperf-stat-{}-{}.lpr",
                    std::process::id(),
                    std::time::SystemTime::now()
                        .duration_since(std::time::UNIX_EPOCH)
                        .map(|d| d.as_nanos())
                        .unwrap_or(0)
                )),
                temporary: true,
            }),
            (None, false) => None,
        }
    }
}

impl Drop for Out {
    fn drop(&mut self) {
        if self.temporary {
            let _ = std::fs::remove_file(&self.path);
        }
    }
}

pub fn run(a: &Args) -> Result<()> {
    // A device or a FIFO gets the counts straight through and is not read back.
    let readable = match &a.output.output {
        Some(p) => lab::record_output(p)?,
        None => true,
    };
    if a.hosts.host.is_empty() {
        let agent = super::agents::find_agent()?;
        let out = Out::new(a, a.td.topdown);
        let f = super::local::run(
            &agent,
            "stat",
            out.as_ref().map(|o| o.path.as_path()),
            &agent_args(a),
            false,
            &a.command,
        )?;
        if f.interrupted {
            eprintln!("note: interrupted: the counts end there");
        }
        // The workload's own status; its counts are still worth printing.
        if let Some(o) = out.as_ref().filter(|_| readable) {
            print_topdown(a, &o.path)?;
        }
        drop(out);
        super::record::pass_on(f.status);
        return Ok(());
    }
    let out = Out::new(a, true).expect("a file is needed to fetch the counts");
    let job = lab::Job {
        verb: "stat",
        agent_args: agent_args(a),
        command: &a.command,
        output: &out.path,
        binaries: false,
        push: &[],
    };
    let hosts = lab::expand(&a.hosts.host, &a.ssh, false)?;
    let results = lab::run(&hosts, &a.ssh, &job);
    let mut failed = lab::summary(&results);
    // Aborted (a second interrupt): nothing is reported.
    if labperf::interrupt::aborting() {
        bail!("interrupted twice: aborted");
    }
    // From here on an interrupt ends labperf at once, as it ends `labperf report`.
    labperf::interrupt::restore_default();
    let mut worst = 0;
    for (_, r) in &results {
        let Ok(d) = r else { continue };
        if !out.temporary {
            eprintln!(
                "[{}] counts recorded in {}",
                show(&d.name),
                d.file.display()
            );
        }
        if d.readable {
            if let Err(e) = print_topdown(a, &d.file) {
                eprintln!(
                    "[{}] error: {}",
                    show(&d.name),
                    show_text(&format!("{e:#}"))
                );
                failed += 1;
            }
        }
        if out.temporary {
            let _ = std::fs::remove_file(&d.file);
        }
        if d.interrupted {
            eprintln!(
                "[{}] note: interrupted: the counts end there",
                show(&d.name)
            );
        }
        if d.status != 0 {
            worst = d.status;
        }
    }
    if failed > 0 {
        bail!(
            "{failed} of {} failed",
            labperf::text::plural(hosts.len() as u64, "host", "hosts")
        );
    }
    drop(out);
    super::record::pass_on(worst);
    Ok(())
}
