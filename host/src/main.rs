//! labperf: the host CLI. Parses the command line and dispatches to `cmd/<verb>.rs`.

// `labperf import` turns a panic in the perf.data parser into an error (catch_unwind),
// which only an unwinding build can do: Cargo.toml's release profile unwinds, the agents'
// profile aborts.
#[cfg(not(panic = "unwind"))]
compile_error!("labperf must be built with panic = \"unwind\" (see Cargo.toml's profiles)");

// The static release (`--features static`, musl): musl's allocator is slow on the host's
// many small allocations (`export --format svg` took 35 % more CPU than with glibc's).
#[cfg(feature = "static")]
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

mod cmd;

use clap::{CommandFactory, Parser, Subcommand};

/// Profile programs on this machine or on lab machines, and report per function.
#[derive(Debug, Parser)]
#[command(
    name = "labperf",
    version,
    after_help = "EXAMPLES:\n  labperf record --local -- ./target/release/labperf-bench --duration 2\n  labperf report labperf.lpr --by dso\n  labperf export labperf.lpr --format svg -o flame.svg\n  labperf info labperf.lpr\n  labperf dump labperf.lpr | head\n  labperf script labperf.lpr | head   # each sample, as perf script prints it\n  labperf list                      # the events -e takes here\n  labperf completions bash > ~/.local/share/bash-completion/completions/labperf\n  labperf man ~/.local/share/man/man1   # then: man labperf-record\n\nExit status: 0 success, 1 error, 2 usage error, 3 a damaged file with --strict; `record`\nand `stat` pass on a failing workload's status; output into a closed pipe (`| head`) ends\nlabperf quietly by SIGPIPE, as coreutils and perf end (the shell's 141)."
)]
struct Cli {
    #[command(subcommand)]
    cmd: Cmd,
    /// Print no warnings or notes of report, export or diff, no "written to" lines and no
    /// progress of a local recording (errors still print; the agent's and the workload's
    /// own lines are theirs).
    #[arg(
        short,
        long,
        global = true,
        conflicts_with = "verbose",
        help_heading = "Global options"
    )]
    quiet: bool,
    /// Say more: the agent command each run starts, and C++ functions with their whole
    /// signature (as perf's -v; `--full-names`).
    #[arg(short, long, global = true, help_heading = "Global options")]
    verbose: bool,
}

#[derive(Debug, Subcommand)]
enum Cmd {
    Record(Box<cmd::record::Args>),
    Report(cmd::report::Args),
    Annotate(cmd::annotate::Args),
    Dump(cmd::dump::Args),
    Export(cmd::export::Args),
    Script(cmd::script::Args),
    Diff(cmd::diff::Args),
    Import(cmd::import::Args),
    Info(cmd::info::Args),
    Agents(cmd::agents::Args),
    Probe(cmd::probe::Args),
    Deploy(cmd::deploy::Args),
    Stat(cmd::stat::Args),
    Hosts(cmd::hosts::Args),
    List(cmd::list::Args),
    Completions(cmd::completions::Args),
    Man(cmd::man::Args),
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

/// The reader of standard output went away (`labperf report … | head`): end as coreutils
/// and perf end, by SIGPIPE (the shell's status 141), saying nothing. labperf ignores
/// SIGPIPE while it runs (as Rust programs do: SSH sockets and the agent's pipes must not
/// kill it), so a write to a closed pipe comes back as EPIPE, here.
fn end_by_sigpipe() -> ! {
    // SAFETY: restoring the default action of SIGPIPE, then raising it in this process.
    unsafe {
        libc::signal(libc::SIGPIPE, libc::SIG_DFL);
        libc::raise(libc::SIGPIPE);
    }
    std::process::exit(128 + libc::SIGPIPE)
}

/// Whether `e` (or what caused it) is a write to a closed pipe.
fn broken_pipe(e: &anyhow::Error) -> bool {
    use labperf::files::output::OutputError;
    let pipe = |io: &std::io::Error| io.kind() == std::io::ErrorKind::BrokenPipe;
    e.chain().any(|c| {
        c.downcast_ref::<std::io::Error>().is_some_and(pipe)
            // A writer's OS error is in its message, not its source (said once).
            || matches!(c.downcast_ref::<OutputError>(), Some(OutputError::Io { err, .. }) if pipe(err))
    })
}

/// `print!` panics on a closed standard output: that panic ends labperf as
/// [`end_by_sigpipe`] does; every other panic is reported as before.
fn quiet_on_closed_stdout() {
    let epipe = std::io::Error::from_raw_os_error(libc::EPIPE).to_string();
    let default = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        let p = info.payload();
        let msg = p
            .downcast_ref::<String>()
            .map(String::as_str)
            .or_else(|| p.downcast_ref::<&str>().copied())
            .unwrap_or("");
        if msg.starts_with("failed printing to stdout") && msg.contains(&epipe) {
            end_by_sigpipe();
        }
        default(info)
    }));
}

/// The command line, or exit: a perf verb or option that labperf refuses is said with what
/// labperf has instead (`cmd::perf_words`), any other error as clap says it (status 2).
fn parse() -> Cli {
    match Cli::try_parse() {
        Ok(cli) => cli,
        Err(e) => {
            let args: Vec<String> = std::env::args_os()
                .map(|a| a.to_string_lossy().into_owned())
                .collect();
            match cmd::perf_words::explain(&e, &args) {
                Some(text) => {
                    eprintln!("labperf: error: {text}");
                    std::process::exit(2);
                }
                None => e.exit(),
            }
        }
    }
}

fn main() {
    quiet_on_closed_stdout();
    if std::env::var_os("LABPERF_PEAK_MEMORY").is_some() {
        // SAFETY: registering a plain extern "C" function to run at exit.
        unsafe { libc::atexit(peak_memory) };
    }
    let cli = parse();
    cmd::set_verbosity(cli.quiet, cli.verbose);
    let r = match &cli.cmd {
        Cmd::Record(a) => cmd::record::run(a),
        // perf's --header-only: what `labperf info` prints of each file.
        Cmd::Report(a) if a.header_only => a.files().and_then(|files| {
            files.into_iter().try_for_each(|file| {
                cmd::info::run(&cmd::info::Args {
                    file: cmd::opts::FileArg { file },
                    strict: a.opts.strict,
                    symbols: a.opts.symbols.clone(),
                })
            })
        }),
        Cmd::Report(a) => cmd::report::run(a),
        Cmd::Annotate(a) => cmd::annotate::run(a),
        Cmd::Dump(a) => cmd::dump::run(a),
        Cmd::Export(a) => cmd::export::run(a),
        Cmd::Script(a) => cmd::script::run(a),
        Cmd::Diff(a) => cmd::diff::run(a),
        Cmd::Import(a) => cmd::import::run(a),
        Cmd::Info(a) => cmd::info::run(a),
        Cmd::Agents(a) => cmd::agents::run(a),
        Cmd::Probe(a) => cmd::probe::run(a),
        Cmd::Deploy(a) => cmd::deploy::run(a),
        Cmd::Stat(a) => cmd::stat::run(a),
        Cmd::Hosts(a) => cmd::hosts::run(a),
        Cmd::List(a) => cmd::list::run(a),
        Cmd::Completions(a) => cmd::completions::run(a, Cli::command()),
        Cmd::Man(a) => cmd::man::run(a, Cli::command()),
    };
    if let Err(e) = r {
        if broken_pipe(&e) {
            end_by_sigpipe();
        }
        eprintln!(
            "labperf: error: {}",
            labperf::text::show_text(&format!("{e:#}"))
        );
        std::process::exit(1);
    }
}
