//! `labperf record --local`: runs the agent on this machine, then reports.

use super::ReportOpts;
use anyhow::{bail, Context, Result};
use std::io::IsTerminal;
use std::path::PathBuf;
use std::process::Command;

/// Options that shape a recording, shared with remote recording.
#[derive(Debug, Clone, clap::Args)]
pub struct RecordOpts {
    /// Event to sample (repeatable): cycles, cpu-clock, rHEX, pmu/event/, or a group {a,b}.
    /// Without a hardware PMU, hardware events fall back to cpu-clock.
    #[arg(short, long = "event")]
    pub events: Vec<String>,
    /// Sample every N events (ns for cpu-clock).
    #[arg(short = 'c', long, conflicts_with = "freq")]
    pub period: Option<u64>,
    /// Sample about HZ times per second.
    #[arg(short = 'F', long)]
    pub freq: Option<u64>,
    /// Where to write the record file.
    #[arg(short, long, default_value = "labperf.lpr")]
    pub output: PathBuf,
    /// With --metrics (per-function metrics by strobing: a short counting window after
    /// each long period -c, default 1000000): the window in cycles.
    #[arg(long, default_value_t = 300)]
    pub window: u64,
    /// With --metrics: jitter the window start.
    #[arg(long)]
    pub jitter: bool,
    /// With --metrics: auto (kernel alternating periods when verified, else decimate), kernel, decimate or fixed.
    #[arg(long, default_value = "auto")]
    pub strobe: String,
    /// With --topdown: TopDown level 1, or 2 (Sapphire Rapids and later).
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u8).range(1..=2))]
    pub level: u8,
    /// C agent (Alpha): take the samples from ring-buffer bytes saved on the target (a
    /// path there) instead of perf_event_open, which emulators such as qemu-user lack.
    /// The workload still runs; the file's header says it was replayed.
    #[arg(long, value_name = "TARGET_FILE")]
    pub replay_ring: Option<String>,
}

/// Record a workload with the agent, then print its profile.
#[derive(Debug, clap::Args)]
#[command(
    after_help = "EXAMPLES:\n  labperf record --local -- ./target/release/labperf-bench --duration 2\n  labperf record --local -e cpu-clock -c 100000 -o run.lpr -- make -j2\n  labperf record --local --no-report -- ./my-prog --flag 'an argument'"
)]
pub struct Args {
    /// Run the agent on this machine (the default without --host).
    #[arg(long, conflicts_with = "host")]
    pub local: bool,
    /// Lab machines to record on: [user@]host[:port] or ~/.ssh/config names, comma-separated.
    #[arg(long, value_delimiter = ',')]
    pub host: Vec<String>,
    #[command(flatten)]
    pub ssh: RemoteOpts,
    #[command(flatten)]
    pub rec: RecordOpts,
    /// Only record; do not print the report.
    #[arg(long)]
    pub no_report: bool,
    #[command(flatten)]
    pub report: ReportOpts,
    /// The workload and its arguments, passed on exactly as given.
    #[arg(last = true, required = true, value_name = "CMD")]
    pub command: Vec<String>,
}

/// How to reach lab machines over SSH (shared by the verbs that take --host).
#[derive(Debug, Clone, clap::Args)]
pub struct RemoteOpts {
    /// known_hosts file to check host keys against [default: ~/.ssh/known_hosts].
    #[arg(long, value_name = "FILE")]
    pub known_hosts: Option<PathBuf>,
    /// Record the key of a host seen for the first time (OpenSSH's accept-new); a changed key is always refused.
    #[arg(long)]
    pub accept_new_host_key: bool,
    /// Private key to try after the ssh-agent's (repeatable).
    #[arg(long, value_name = "FILE")]
    pub identity: Vec<PathBuf>,
    /// ssh config file [default: ~/.ssh/config].
    #[arg(long, value_name = "FILE")]
    pub ssh_config: Option<PathBuf>,
    /// Directory on the lab machine for agents and runs (relative to the login directory).
    #[arg(long, default_value = ".cache/labperf")]
    pub remote_dir: String,
    /// Seconds to wait for a TCP connection.
    #[arg(long, default_value_t = 10)]
    pub connect_timeout: u64,
    /// Use this architecture's agent instead of the one `uname -m` names: for a machine
    /// that runs foreign binaries through binfmt_misc (qemu-alpha, say).
    #[arg(long, value_name = "ARCH")]
    pub arch: Option<String>,
    /// Hosts file naming lab machines [default: ~/.config/labperf/hosts.toml].
    #[arg(long, value_name = "FILE")]
    pub hosts_file: Option<PathBuf>,
}

/// The agent's target triple for a `uname -m` architecture.
pub fn triple_for(arch: &str) -> Option<&'static str> {
    match arch {
        "x86_64" => Some("x86_64-unknown-linux-musl"),
        "aarch64" | "arm64" => Some("aarch64-unknown-linux-musl"),
        "alpha" => Some("alpha-unknown-linux-gnu"),
        _ => None,
    }
}

/// Where the agents are: `<prefix>/lib/labperf/agents` of an installed `cargo xtask dist`
/// tree, or the `target/agents` of a build.
pub fn agents_dir() -> Option<PathBuf> {
    let exe = std::env::current_exe().ok()?;
    let bin = exe.parent()?;
    let mut candidates = vec![bin.join("../lib/labperf/agents")];
    candidates.extend(bin.ancestors().take(4).map(|d| d.join("agents")));
    candidates.into_iter().find(|d| d.is_dir())
}

/// The agent for architecture `arch`: $LABPERF_AGENT (for this machine's), or from [`agents_dir`].
pub fn agent_for(arch: &str) -> Result<PathBuf> {
    if arch == std::env::consts::ARCH {
        if let Some(p) = std::env::var_os("LABPERF_AGENT") {
            return Ok(p.into());
        }
    }
    let triple = triple_for(arch).with_context(|| {
        format!(
            "labperf has no agent for the {arch} architecture (it has x86_64, aarch64 and alpha)"
        )
    })?;
    let p = agents_dir()
        .map(|d| d.join(triple).join("labperf-agent"))
        .filter(|p| p.is_file());
    p.with_context(|| format!("cannot find the {triple} agent under lib/labperf/agents or target/agents: build it with `cargo xtask build-agents --target {arch}`, or set LABPERF_AGENT=/path/to/labperf-agent"))
}

/// The agent for this machine.
pub fn find_agent() -> Result<PathBuf> {
    agent_for(std::env::consts::ARCH)
}

/// The agent options of a recording, as the agent's command line takes them.
fn agent_args(r: &RecordOpts, rep: &ReportOpts) -> Vec<String> {
    let metrics = rep.metrics;
    let mut v = Vec::new();
    if metrics {
        v.extend([
            "--metrics".to_string(),
            "--window".into(),
            r.window.to_string(),
            "--strobe".into(),
            r.strobe.clone(),
        ]);
        if r.jitter {
            v.push("--jitter".into());
        }
    }
    if rep.profileme {
        v.push("--profileme".into());
    }
    if rep.topdown {
        v.extend([
            "--topdown".to_string(),
            "--level".into(),
            r.level.to_string(),
        ]);
    }
    if rep.mem {
        v.push("--mem".into());
    }
    if let Some(f) = &r.replay_ring {
        v.extend(["--replay-ring".to_string(), f.clone()]);
    }
    for e in &r.events {
        v.extend(["-e".to_string(), e.clone()]);
    }
    if let Some(p) = r.period {
        v.extend(["-c".to_string(), p.to_string()]);
    }
    if let Some(f) = r.freq {
        v.extend(["-F".to_string(), f.to_string()]);
    }
    v
}

pub fn run(a: &Args) -> Result<()> {
    if !a.host.is_empty() {
        return super::remote::record(a, &agent_args(&a.rec, &a.report));
    }
    if a.report.profileme || a.report.mem || a.rec.replay_ring.is_some() {
        bail!("--profileme, --mem and --replay-ring are for the Alpha (C) agent: record on an Alpha EV67 or later lab machine with --host HOST");
    }
    let agent = find_agent()?;
    let mut cmd = Command::new(&agent);
    cmd.arg("record")
        .arg("-o")
        .arg(&a.rec.output)
        .args(agent_args(&a.rec, &a.report));
    if std::io::stderr().is_terminal() {
        cmd.arg("--progress");
    }
    cmd.arg("--").args(&a.command);
    let status = cmd.status().with_context(|| {
        format!(
            "cannot start the agent {}: check that it is executable",
            agent.display()
        )
    })?;
    match status.code() {
        Some(125) => {
            bail!("the agent could not record (its message is above); nothing was profiled")
        }
        Some(127) => bail!(
            "the workload '{}' could not be started (see above): check the command and PATH",
            a.command[0]
        ),
        _ => {}
    }
    if !a.rec.output.exists() {
        bail!(
            "the agent finished but wrote no {}: see its messages above",
            a.rec.output.display()
        );
    }
    if !a.no_report {
        super::report::print(&a.rec.output, &a.report)?;
    }
    if let Some(c) = status.code().filter(|&c| c != 0) {
        eprintln!("note: the workload exited with status {c}");
        std::process::exit(c);
    }
    Ok(())
}
