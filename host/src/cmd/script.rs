//! `labperf script [FILE]`: every sample of a recording (labperf's, or perf's perf.data
//! imported on the fly) as perf 6.1's `perf script` prints it; `-F` picks the fields.

use super::opts::FilterOpts;
use anyhow::{Context, Result};
use labperf::views::script::{Fields, Options};
use std::path::PathBuf;

/// Print every sample, one line each (with `record -g`, its call stack under it), as
/// `perf script` does.
#[derive(Debug, clap::Args)]
#[command(
    mut_arg(
        "comms",
        super::opts::help(
            "Only the samples of these threads' names, as the first column shows them (comma-separated; perf's -c/--comms)"
        )
    ),
    mut_arg(
        "symbols",
        super::opts::help(
            "Only the samples whose sampled function is one of these, named as the lines name them (comma-separated, but for the commas within <>, () or [] of a C++ name; perf script's -S)"
        )
    ),
    mut_arg(
        "max_stack",
        super::opts::help(
            "At most N frames of each call stack (perf's --max-stack; default: whole)"
        )
    ),
    after_help = "Each sample prints as perf 6.1's `perf script` prints it: the thread's name, \
its thread id, the CPU (for recordings that kept it, as `-a`'s), the time in seconds, the \
period, the event, then the sampled address, its function+offset and its file; a recording \
with call stacks (`record -g`) has one frame a line under it, innermost first, and a blank \
line after each sample. Samples are in time order. A perf.data prints the same samples, \
times and names as `perf script -i perf.data` (on the machine that recorded it).

EXAMPLES:
  labperf script                                # labperf.lpr, else perf.data
  labperf script bench.lpr | less
  labperf script perf.data -F comm,tid,time,ip,sym
  labperf script bench.lpr -F +pid              # the default fields and the pid
  labperf script bench.lpr --comm bench --time 10%/1
  labperf script calls.lpr -G                   # no call stacks: one line per sample
  labperf script calls.lpr | stackcollapse-perf.pl | flamegraph.pl > flame.svg"
)]
pub struct Args {
    /// The record file (written by labperf record or labperf-agent, or perf's perf.data)
    /// [default: labperf.lpr, else ./perf.data as perf script reads it].
    pub file: Option<PathBuf>,
    /// The record file, as perf script -i names it.
    #[arg(
        short = 'i',
        long = "input",
        value_name = "FILE",
        conflicts_with = "file"
    )]
    pub input: Option<PathBuf>,
    /// The fields to print, as perf's -F names them: `f1,f2` (these only, in perf's order)
    /// or `+f1,-f2` (the default ones with some added or taken away). labperf prints comm,
    /// tid, pid, time, cpu, period, event, ip, sym, symoff and dso [default: comm, tid, cpu
    /// (when recorded), time, period, event, ip, sym, symoff, dso].
    /// Given again, each one applies to the fields before it, as perf's -F does (`-F ip,sym
    /// -F +pid`).
    #[arg(short = 'F', long = "fields", value_name = "FIELDS", value_parser = fields, allow_hyphen_values = true, action = clap::ArgAction::Append)]
    pub fields: Vec<String>,
    /// As perf script -G (--hide-call-graph): one line per sample, no call stack.
    #[arg(short = 'G', long = "hide-call-graph")]
    pub hide_call_graph: bool,
    /// Times with nanoseconds (9 decimals), as perf script --ns.
    #[arg(long)]
    pub ns: bool,
    /// Directory searched first for binaries (DIR/<build-id>/elf or DIR/<path>); repeatable.
    #[arg(long, value_name = "DIR")]
    pub symfs: Vec<PathBuf>,
    #[command(flatten)]
    pub filter: FilterOpts,
}

/// `-F`'s value, checked alone (as the first `-F`); [`Args::fields`] applies them in order.
fn fields(s: &str) -> Result<String, String> {
    Fields::parse(s).map(|_| s.to_string())
}

impl Args {
    /// The fields of every `-F`, each applied to those before it (the default first).
    fn fields(&self) -> Result<Fields> {
        self.fields
            .iter()
            .try_fold(Fields::default(), |f, s| f.then(s))
            .map_err(|e| anyhow::anyhow!(e))
    }

    /// FILE or `-i FILE`; when neither is given, labperf.lpr, else perf's perf.data (as
    /// `perf script` reads it), in the current directory.
    fn file(&self) -> Result<PathBuf> {
        if let Some(f) = self.file.as_ref().or(self.input.as_ref()) {
            return Ok(f.clone());
        }
        let here = |f: &str| std::fs::symlink_metadata(f).is_ok();
        match ["labperf.lpr", "perf.data"].into_iter().find(|f| here(f)) {
            Some(f) => Ok(f.into()),
            None => anyhow::bail!(
                "no labperf.lpr or perf.data in this directory: name a file (`labperf script \
                 FILE`), or record one (`labperf record ./my-prog`)"
            ),
        }
    }
}

pub fn run(a: &Args) -> Result<()> {
    let file = a.file()?;
    // perf.data is imported on the fly (`import::source`).
    let src = super::import::source(&file)?;
    let o = Options {
        fields: a.fields()?,
        hide_call_graph: a.hide_call_graph,
        ns: a.ns,
        max_stack: a.filter.max_stack.map(|n| n as usize),
        filter: a.filter.get(false),
    };
    let mut search = labperf::symbolize::symbols::Search::new(a.symfs.clone());
    search.full_names = super::verbose();
    let stdout = std::io::stdout();
    let mut out = std::io::BufWriter::new(stdout.lock());
    let printed = labperf::views::script::write(&src, search, &o, &mut out)
        .with_context(|| format!("cannot print the samples of {}", file.display()))?;
    std::io::Write::flush(&mut out).context("cannot write to stdout")?;
    if !super::quiet() {
        for w in &printed.warnings {
            eprintln!("{}", labperf::text::show_text(w));
        }
        if o.filter.is_active() {
            eprintln!(
                "labperf: the filters kept {} of {} samples",
                printed.samples, printed.all
            );
        }
    }
    Ok(())
}
