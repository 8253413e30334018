//! labperf: the host CLI. Parses the command line and dispatches to `cmd/<verb>.rs`.

// `labperf import` turns a panic in the perf.data parser into an error (catch_unwind),
// which only an unwinding build can do: Cargo.toml's release profile unwinds, the agents'
// profile aborts.
#[cfg(not(panic = "unwind"))]
compile_error!("labperf must be built with panic = \"unwind\" (see Cargo.toml's profiles)");

mod cmd;

use clap::{Parser, Subcommand};

/// Profile programs on this machine or on lab machines, and report per function.
#[derive(Debug, Parser)]
#[command(
    name = "labperf",
    version,
    after_help = "EXAMPLES:\n  labperf record --local -- ./target/release/labperf-bench --duration 2\n  labperf report labperf.lpr --by dso\n  labperf export labperf.lpr --format svg -o flame.svg\n  labperf info labperf.lpr\n  labperf dump labperf.lpr | head\n  labperf list                      # the events -e takes here\n\nExit status: 0 success, 1 error, 2 usage error, 3 a damaged file with --strict; `record`\nand `stat` pass on a failing workload's status."
)]
struct Cli {
    #[command(subcommand)]
    cmd: Cmd,
    /// Print no report warnings or notes and no progress of a local recording (errors
    /// still print; the agent's and the workload's own lines are theirs).
    #[arg(short, long, global = true, conflicts_with = "verbose")]
    quiet: bool,
    /// Say more: the agent command each run starts.
    #[arg(short, long, global = true)]
    verbose: bool,
}

#[derive(Debug, Subcommand)]
enum Cmd {
    Record(Box<cmd::record::Args>),
    Report(cmd::report::Args),
    Dump(cmd::dump::Args),
    Export(cmd::export::Args),
    Diff(cmd::diff::Args),
    Import(cmd::import::Args),
    Info(cmd::info::Args),
    Agents(cmd::agents::Args),
    Probe(cmd::probe::Args),
    Deploy(cmd::deploy::Args),
    Stat(cmd::stat::Args),
    Hosts(cmd::hosts::Args),
    List(cmd::list::Args),
}

/// With LABPERF_PEAK_MEMORY set, says at exit how much memory labperf's own process
/// used at most (VmHWM: its own address space only, not a parent's before exec).
extern "C" fn peak_memory() {
    if let Ok(s) = std::fs::read_to_string("/proc/self/status") {
        if let Some(l) = s.lines().find(|l| l.starts_with("VmHWM:")) {
            eprintln!("labperf: peak memory {}", l["VmHWM:".len()..].trim());
        }
    }
}

fn main() {
    if std::env::var_os("LABPERF_PEAK_MEMORY").is_some() {
        // SAFETY: registering a plain extern "C" function to run at exit.
        unsafe { libc::atexit(peak_memory) };
    }
    let cli = Cli::parse();
    cmd::set_verbosity(cli.quiet, cli.verbose);
    let r = match &cli.cmd {
        Cmd::Record(a) => cmd::record::run(a),
        Cmd::Report(a) => cmd::report::run(a),
        Cmd::Dump(a) => cmd::dump::run(a),
        Cmd::Export(a) => cmd::export::run(a),
        Cmd::Diff(a) => cmd::diff::run(a),
        Cmd::Import(a) => cmd::import::run(a),
        Cmd::Info(a) => cmd::info::run(a),
        Cmd::Agents(a) => cmd::agents::run(a),
        Cmd::Probe(a) => cmd::probe::run(a),
        Cmd::Deploy(a) => cmd::deploy::run(a),
        Cmd::Stat(a) => cmd::stat::run(a),
        Cmd::Hosts(a) => cmd::hosts::run(a),
        Cmd::List(a) => cmd::list::run(a),
    };
    if let Err(e) = r {
        eprintln!(
            "labperf: error: {}",
            labperf::text::show_text(&format!("{e:#}"))
        );
        std::process::exit(1);
    }
}
