//! `labperf record`: runs the agent on this machine or on lab machines, then reports.

use super::lab;
use super::opts::{HostOpt, RecordOpts, RemoteOpts, ReportOpts, SpecialOpts};
use anyhow::{bail, Result};
use labperf::text::{show, show_text};
use std::ffi::OsString;
use std::io::IsTerminal;
use std::path::PathBuf;

/// Record a workload with the agent, then print its profile.
#[derive(Debug, clap::Args)]
#[command(
    help_template = "{about-with-newline}\n  labperf record ./my-prog              # run it here, sampled; then where its time went\n  labperf record -g ./my-prog ARGS...   # with call stacks; then: labperf report --children\n\n{usage-heading} {usage}\n\n{all-args}{after-help}",
    after_help = "EXAMPLES:\n  labperf record ./my-prog                      # writes labperf.lpr; `labperf report` reads it again\n  labperf record -F 999 ./my-prog --its-flag   # no `--` needed: what follows the program is its own\n  labperf record -p 1234 --duration 5 -o p.lpr   # a process already running (-t TID: one thread)\n  labperf record --local -e cpu-clock -c 100000 -o run.lpr -- make -j2\n  labperf record --local --no-report -- ./my-prog --flag 'an argument'\n  labperf record -- ./target/release/labperf-bench --duration 2\n  labperf record --local -g -- ./labperf-bench --calls   # call stacks; then: labperf report --children\n  labperf record -a --duration 5 -o box.lpr   # the whole machine (root); then: labperf report box.lpr --by comm\n  labperf record --host arm1 -C 0-1 -e cycles --duration 10\n  labperf record --host arm1 --metrics --no-report -o m.lpr -- ./my-prog   # then: labperf report m.lpr\n  labperf record --host alpha1 --profileme -o pm.lpr -- ./my-prog\n  labperf record --host arm1,arm2,x86a -o run.lpr -- ./my-prog   # one file per host, then all merged\n  labperf record --host arm1 --push target/aarch64-unknown-linux-musl/release/my-prog -- my-prog --flag\n\nThe report printed after recording (and `labperf report FILE` later) is the view the\nrecording's kind names: per function, metrics, TopDown, ProfileMe or mem; after -g, the\nChildren table with the caller tree under each row, as perf report's. It is printed on\nstandard output when that is a terminal, else on standard error: a redirected standard\noutput holds only the workload's own bytes (`labperf record -- ./prog > out`)."
)]
pub struct Args {
    /// The workload and its arguments, passed on exactly as given (byte for byte): after
    /// `--`, or as the first word that is no option (what follows it is the workload's,
    /// as perf takes it: `labperf record ./prog -x` passes -x to prog).
    #[arg(
        trailing_var_arg = true,
        required_unless_present_any = ["duration", "pid", "tid"],
        value_name = "CMD"
    )]
    pub command: Vec<OsString>,
    #[command(flatten)]
    pub rec: RecordOpts,
    /// Only record; do not print the report.
    #[arg(long)]
    pub no_report: bool,
    #[command(flatten, next_help_heading = "Output: the report after recording")]
    pub report: ReportOpts,
    /// Run the agent on this machine (the default without --host).
    #[arg(long, conflicts_with = "host", help_heading = "Lab machines")]
    pub local: bool,
    #[command(flatten, next_help_heading = "Lab machines")]
    pub hosts: HostOpt,
    #[command(flatten, next_help_heading = "Lab machines")]
    pub ssh: RemoteOpts,
    /// Put FILE (or DIR and everything under it) on each lab machine first, by content hash
    /// under the remote directory (skipped when already there); a command naming it (its
    /// name or the path given) runs the pushed copy, and the report reads the local copy's
    /// symbols. An ELF file for another architecture than the host's is refused before
    /// anything runs. Repeatable.
    #[arg(
        long,
        value_name = "FILE|DIR",
        requires = "host",
        help_heading = "Lab machines"
    )]
    pub push: Vec<PathBuf>,
    #[command(flatten)]
    pub special: SpecialOpts,
}

/// The agent options of a recording, as the agent's command line takes them.
/// `-F max` is this machine's limit (a lab machine's is refused before: see `run`).
fn agent_args(r: &RecordOpts, s: &SpecialOpts) -> Result<Vec<String>> {
    let metrics = s.metrics;
    let mut v = Vec::new();
    // -q: the agent's "wrote N samples" line goes unsaid too.
    if super::quiet() {
        v.push("-q".to_string());
    }
    if metrics {
        v.extend([
            "--metrics".to_string(),
            "--window".into(),
            s.window.to_string(),
            "--strobe".into(),
            s.strobe.clone(),
        ]);
        if s.jitter {
            v.push("--jitter".into());
        }
    }
    if s.profileme {
        v.push("--profileme".into());
    }
    if s.td.topdown {
        v.extend([
            "--topdown".to_string(),
            "--level".into(),
            s.td_level.level.to_string(),
        ]);
    }
    if s.mem {
        v.push("--mem".into());
    }
    if let Some(f) = &s.replay_ring {
        v.extend(["--replay-ring".to_string(), f.clone()]);
    }
    v.extend(super::event_names::agent_args(&r.event.events));
    match (r.g, r.call_graph) {
        (_, Some(c)) => v.extend(["--call-graph".to_string(), c.arg()]),
        (true, None) => v.extend(["--call-graph".to_string(), "fp".into()]),
        (false, None) => {}
    }
    if r.off_cpu {
        v.push("--off-cpu".into());
    }
    if let Some(p) = r.period {
        v.extend(["-c".to_string(), p.to_string()]);
    }
    if r.all_cpus {
        v.push("-a".into());
    }
    if let Some(c) = &r.cpus {
        v.extend(["-C".to_string(), c.clone()]);
    }
    if let Some(d) = r.duration {
        v.extend(["--duration".to_string(), d.to_string()]);
    }
    if let Some(f) = r.freq {
        v.extend(["-F".to_string(), f.here()?.to_string()]);
    }
    if let Some(p) = r.pid {
        v.extend(["--pid".to_string(), p.to_string()]);
    }
    if let Some(t) = r.tid {
        v.extend(["--tid".to_string(), t.to_string()]);
    }
    if let Some(m) = r.mmap_pages {
        v.extend(["--mmap-pages".to_string(), m.to_string()]);
    }
    Ok(v)
}

/// Exits with the workload's status when it failed (what `record` passes on), saying how
/// it ended ("was killed by SIGSEGV").
pub fn pass_on(status: i32) {
    pass_on_from(status, "")
}

/// [`pass_on`] of a workload that ran on a machine of architecture `arch` (Alpha numbers
/// its signals its own way: said by number there).
pub fn pass_on_from(status: i32, arch: &str) {
    if status != 0 {
        let generic = arch != "alpha";
        eprintln!(
            "note: the workload {}",
            labperf::text::workload_end(status, generic)
        );
        std::process::exit(status);
    }
}

pub fn run(a: &Args) -> Result<()> {
    let attach = a.rec.pid.is_some() || a.rec.tid.is_some();
    if a.rec.duration.is_some() && !a.rec.all_cpus && a.rec.cpus.is_none() && !attach {
        bail!("--duration goes with -a or -C (the whole machine) or -p/-t (a process running); a command's recording ends with the command");
    }
    if attach && !a.command.is_empty() {
        bail!(
            "-p/-t record a process already running, and '{}' would be another: record it alone, or end the process's recording with --duration SECS (else it ends when the process exits, or at Ctrl-C)",
            a.command[0].to_string_lossy()
        );
    }
    if a.rec.freq == Some(super::opts::Freq::Max) && !a.hosts.host.is_empty() {
        bail!(
            "-F max with --host is not there yet: give -F HZ (a lab machine's limit is its {})",
            super::opts::MAX_SAMPLE_RATE
        );
    }
    let agent_args = agent_args(&a.rec, &a.special)?;
    if labperf::files::output::is_stdout(&a.rec.file.output) {
        lab::record_output(&a.rec.file.output)?;
    }
    if !a.hosts.host.is_empty() {
        return on_hosts(a, agent_args);
    }
    on_this_machine(a, &agent_args)
}

/// `--host`: the recording on each lab machine, each one's report, then the merged one.
fn on_hosts(a: &Args, agent_args: Vec<String>) -> Result<()> {
    let hosts = lab::expand(&a.hosts.host, &a.ssh, false)?;
    let pushes =
        labperf::lab::push::read(&a.push).map_err(|e| anyhow::anyhow!("{e}: nothing was run"))?;
    let job = lab::Job {
        verb: "record",
        agent_args,
        command: &a.command,
        output: &a.rec.file.output,
        binaries: true,
        push: &pushes,
    };
    let results = lab::run(&hosts, &a.ssh, &job);
    let mut failed = lab::summary(&results);
    // Aborted (a second interrupt): nothing is reported.
    if labperf::interrupt::aborting() {
        bail!("interrupted twice: aborted");
    }
    // From here on an interrupt ends labperf at once, as it ends `labperf report`.
    labperf::interrupt::restore_default();
    let (worst, arch) = report_each(a, &results, hosts.len(), &mut failed);
    failed += report_merged(a, &results, hosts.len());
    if failed > 0 {
        bail!(
            "{failed} of {} failed (see above)",
            labperf::text::plural(results.len() as u64, "host", "hosts")
        );
    }
    pass_on_from(worst, &arch);
    Ok(())
}

/// Each host's report (unless --no-report) and notes; returns the worst workload status
/// and its host's architecture, counting the reports that failed in `failed`.
fn report_each(
    a: &Args,
    results: &[(String, Result<lab::Done>)],
    hosts: usize,
    failed: &mut usize,
) -> (i32, String) {
    let (mut worst, mut arch) = (0, String::new());
    for (_, r) in results {
        let Ok(d) = r else { continue };
        if !a.no_report && !d.readable {
            eprintln!(
                "[{}] note: {} is not a regular file: no report (`labperf report` reads a file)",
                show(&d.name),
                d.file.display()
            );
        } else if !a.no_report {
            let heading = (hosts > 1).then(|| format!("== {} ==", show(&d.name)));
            if let Err(e) = super::report::print(&d.file, &a.report, heading.as_deref()) {
                eprintln!(
                    "[{}] error: {}",
                    show(&d.name),
                    show_text(&format!("{e:#}"))
                );
                *failed += 1;
            }
        }
        if d.interrupted {
            eprintln!(
                "[{}] note: interrupted: the recording in {} ends there",
                show(&d.name),
                d.file.display()
            );
        }
        if d.status != 0 {
            (worst, arch) = (d.status, d.arch.clone());
        }
    }
    (worst, arch)
}

/// Several hosts recorded: their merged report after the per-host ones (plain recordings;
/// another view's files are reported one by one only). Returns 1 when it failed, else 0.
fn report_merged(a: &Args, results: &[(String, Result<lab::Done>)], hosts: usize) -> usize {
    let mut failed = 0;
    let files: Vec<PathBuf> = results
        .iter()
        .filter_map(|(_, r)| r.as_ref().ok().filter(|d| d.readable))
        .map(|d| d.file.clone())
        .collect();
    let o = a.report.view_options();
    let plain = files.iter().all(|f| {
        matches!(
            labperf::views::view::choose(&f.as_path().into(), &o),
            Ok((labperf::views::view::View::Plain, _))
        )
    });
    if !a.no_report && hosts > 1 && files.len() > 1 && plain {
        let heading = format!("== {} hosts merged ==", files.len());
        if let Err(e) = super::report::print_many(&files, &a.report, Some(&heading)) {
            eprintln!("error: the merged report: {e:#}");
            failed += 1;
        }
    }
    failed
}

/// The recording on this machine, and its report.
fn on_this_machine(a: &Args, agent_args: &[String]) -> Result<()> {
    if a.special.profileme || a.special.mem || a.special.replay_ring.is_some() {
        bail!("--profileme, --mem and --replay-ring are for the Alpha (C) agent: record on an Alpha EV67 or later lab machine with --host HOST");
    }
    // The agent writes the file by the same rule; a device or a FIFO is not read back.
    let readable = lab::record_output(&a.rec.file.output)?;
    let agent = super::agents::find_agent()?;
    // perf's habit: the previous recording stays as FILE.old (a regular file only).
    labperf::files::output::keep_previous(&a.rec.file.output)?;
    let f = super::local::run(
        &agent,
        "record",
        Some(&a.rec.file.output),
        agent_args,
        std::io::stderr().is_terminal() && !super::quiet(),
        &a.command,
    )?;
    if f.interrupted {
        eprintln!(
            "note: interrupted: the recording in {} ends there",
            a.rec.file.output.display()
        );
    }
    if !a.no_report && !readable {
        eprintln!(
            "note: {} is not a regular file: no report (`labperf report` reads a file)",
            a.rec.file.output.display()
        );
    } else if !a.no_report {
        super::report::print(&a.rec.file.output, &a.report, None)?;
    }
    pass_on(f.status);
    Ok(())
}
