//! `labperf report FILE`: the file's view (from its header, or --view) as a table, CSV or JSON.

use super::opts::ReportOpts;
use anyhow::{Context, Result};
use std::path::PathBuf;

/// Print a report of a record file, in the view its header names.
#[derive(Debug, clap::Args)]
#[command(
    after_help = "The view comes from the file: a `record` file is shown per function, a \
`record --metrics` file with CPI and miss rates, a TopDown file with its slot shares, an Alpha \
ProfileMe or --mem file as DCPI-style summaries, a `stat -o` file interval by interval.

EXAMPLES:
  labperf report labperf.lpr
  labperf report bench.lpr --by dso --format csv
  labperf report bench.lpr --top 5 --format json
  labperf report m.lpr --split thread
  labperf report alpha.lpr --pc --top 10
  labperf report td.lpr --format csv
  labperf report m.lpr --view plain
  labperf report arm1.lpr arm2.lpr x86.lpr --by host     # several machines, one table"
)]
pub struct Args {
    /// The record file (written by labperf record, labperf stat -o or labperf-agent);
    /// several are merged into one plain report (`--by host|run` keeps them apart).
    #[arg(default_value = "labperf.lpr", num_args = 1..)]
    pub files: Vec<PathBuf>,
    #[command(flatten)]
    pub opts: ReportOpts,
}

pub fn run(a: &Args) -> Result<()> {
    let damaged = if let [one] = &a.files[..] {
        print(one, &a.opts)?
    } else {
        print_many(&a.files, &a.opts)?
    };
    if damaged && a.opts.strict {
        strict_exit();
    }
    Ok(())
}

/// `--strict` on a damaged file: the report stands, the exit status says 3.
pub fn strict_exit() -> ! {
    eprintln!("labperf: the file is damaged (--strict): exit status 3");
    std::process::exit(3)
}

/// Builds and prints a report; warnings go to stderr. Returns whether the file was damaged.
pub fn print(file: &std::path::Path, o: &ReportOpts) -> Result<bool> {
    let r = labperf::view::build(&file.into(), &o.view_options()).with_context(|| {
        format!(
            "cannot report {}: check the path, or record one with `labperf record --local -- CMD`",
            file.display()
        )
    })?;
    for w in &r.warnings {
        eprintln!("{}", labperf::text::show_text(w));
    }
    print!("{}", r.render(o.format, o.top, colour()));
    Ok(r.damaged)
}

/// Builds and prints one report of several files; returns whether any was damaged.
pub fn print_many(files: &[PathBuf], o: &ReportOpts) -> Result<bool> {
    let srcs: Vec<labperf::load::Source> = files.iter().map(|f| f.as_path().into()).collect();
    let r = labperf::view::build_many(&srcs, &o.view_options())
        .context("cannot report these files together: check the paths")?;
    for w in &r.warnings {
        eprintln!("{}", labperf::text::show_text(w));
    }
    print!("{}", r.render(o.format, o.top, colour()));
    Ok(r.damaged)
}

/// Colours for a table on a terminal, unless NO_COLOR is set.
pub fn colour() -> bool {
    use std::io::IsTerminal;
    std::io::stdout().is_terminal() && std::env::var_os("NO_COLOR").is_none()
}
