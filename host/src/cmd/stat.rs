//! `labperf stat`: counting mode with the agent, here or on lab machines (`--host`).

use super::record::{find_agent, RemoteOpts};
use super::remote::{connect, Connected};
use anyhow::{bail, Context, Result};
use labperf::deploy;
use std::path::PathBuf;
use std::process::Command;

/// Count events over a workload (perf stat style), optionally every -I ms.
#[derive(Debug, clap::Args)]
#[command(
    after_help = "EXAMPLES:\n  labperf stat -- ./my-prog\n  labperf stat -I 500 -e cycles -e instructions --host lab1 -- ./my-prog arg\n  labperf stat --topdown -I 1000 -- ./labperf-bench --duration 5\n  labperf stat --topdown --level 2 --per-thread --format csv -- ./my-prog"
)]
pub struct Args {
    /// Lab machines to count on (comma-separated); without it, this machine.
    #[arg(long, value_delimiter = ',')]
    pub host: Vec<String>,
    #[command(flatten)]
    pub ssh: RemoteOpts,
    /// Event to count (repeatable); the agent's default set without it.
    #[arg(short, long = "event")]
    pub events: Vec<String>,
    /// Print and record the counts every MS milliseconds.
    #[arg(short = 'I', long, value_name = "MS")]
    pub interval: Option<u64>,
    /// Intel TopDown: {slots,topdown-*} per thread (Ice Lake and later), or the older
    /// per-core events system-wide (needs root); the ratios as perf computes them.
    #[arg(long)]
    pub topdown: bool,
    /// With --topdown: level 1, or 2 (Sapphire Rapids and later).
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u8).range(1..=2), requires = "topdown")]
    pub level: u8,
    /// With --topdown: one line per thread.
    #[arg(long, requires = "topdown")]
    pub per_thread: bool,
    /// With --topdown: the table printed at the end (the agent prints live lines meanwhile).
    #[arg(long, value_enum, default_value = "table")]
    pub format: labperf::report::Format,
    /// Record file of the counts.
    #[arg(short, long, default_value = "labperf-stat.lpr")]
    pub output: PathBuf,
    /// The workload and its arguments, passed on exactly as given.
    #[arg(last = true, required = true, value_name = "CMD")]
    pub command: Vec<String>,
}

fn agent_args(a: &Args) -> Vec<String> {
    let mut v = Vec::new();
    for e in &a.events {
        v.extend(["-e".to_string(), e.clone()]);
    }
    if let Some(i) = a.interval {
        v.extend(["-I".to_string(), i.to_string()]);
    }
    if a.topdown {
        v.extend([
            "--topdown".to_string(),
            "--level".into(),
            a.level.to_string(),
        ]);
        if a.per_thread {
            v.push("--per-thread".into());
        }
    }
    v
}

/// With --topdown, the table (or CSV, JSON) of the recorded intervals.
fn print_topdown(a: &Args, file: &std::path::Path) -> Result<()> {
    if a.topdown {
        let r = labperf::topdown::build(file, Vec::new())
            .with_context(|| format!("cannot read the TopDown counts in {}", file.display()))?;
        print!("{}", r.render(a.format, 0, super::report::colour()));
    }
    Ok(())
}

pub fn run(a: &Args) -> Result<()> {
    if a.host.is_empty() {
        let agent = find_agent()?;
        let st = Command::new(&agent)
            .arg("stat")
            .arg("-o")
            .arg(&a.output)
            .args(agent_args(a))
            .arg("--")
            .args(&a.command)
            .status()
            .with_context(|| format!("cannot start the agent {}", agent.display()))?;
        return match st.code() {
            Some(0) => print_topdown(a, &a.output),
            Some(125) => bail!("the agent could not count (its message is above)"),
            Some(c) => {
                // The workload's own status; its counts are still worth printing.
                if a.output.exists() {
                    print_topdown(a, &a.output)?;
                }
                std::process::exit(c)
            }
            None => bail!("the agent was killed"),
        };
    }
    let mut failed = 0;
    for h in &a.host {
        let r = (|| -> Result<PathBuf> {
            let Connected { remote, remote_dir } = connect(h, &a.ssh)?;
            let arch = super::remote::target_arch(&remote, &a.ssh)?;
            let (agent, _) =
                deploy::ensure_agent(&remote, &super::record::agent_for(&arch)?, &remote_dir)?;
            let (file, status) = deploy::run_agent(
                &remote,
                &agent,
                &remote_dir,
                "stat",
                &agent_args(a),
                &a.command,
                |b| eprint!("{}", String::from_utf8_lossy(b)),
            )?;
            if status == 125 || status == 137 {
                bail!("the agent on {h} could not count (exit {status}; its message is above)");
            }
            let out = if a.host.len() == 1 {
                a.output.clone()
            } else {
                a.output.with_file_name(format!(
                    "{}-{}.lpr",
                    a.output
                        .file_stem()
                        .map(|s| s.to_string_lossy().into_owned())
                        .unwrap_or_default(),
                    h.replace(['/', ':', '@'], "_")
                ))
            };
            deploy::fetch_record(&remote, &file, &out)?;
            Ok(out)
        })();
        match r {
            Ok(p) => {
                eprintln!("[{h}] counts recorded in {}", p.display());
                if let Err(e) = print_topdown(a, &p) {
                    eprintln!("[{h}] error: {e:#}");
                    failed += 1;
                }
            }
            Err(e) => {
                eprintln!("[{h}] error: {e:#}");
                failed += 1;
            }
        }
    }
    if failed > 0 {
        bail!("{failed} of {} host(s) failed", a.host.len());
    }
    Ok(())
}
