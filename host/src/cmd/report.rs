//! `labperf report FILE`: the per-function (or per-DSO / per-PC) profile.

use super::opts::ReportOpts;
use anyhow::{Context, Result};
use std::path::PathBuf;

/// Print a profile from a record file.
#[derive(Debug, clap::Args)]
#[command(
    after_help = "EXAMPLES:\n  labperf report labperf.lpr\n  labperf report bench.lpr --by dso --format csv\n  labperf report bench.lpr --top 5 --format json\n  labperf report alpha.lpr --profileme --pc --top 10\n  labperf report td.lpr --topdown --format csv\n  labperf report alpha-mem.lpr --mem --format csv"
)]
pub struct Args {
    /// The record file (written by labperf record or labperf-agent).
    #[arg(default_value = "labperf.lpr")]
    pub file: PathBuf,
    #[command(flatten)]
    pub opts: ReportOpts,
}

pub fn run(a: &Args) -> Result<()> {
    let damaged = print(&a.file, &a.opts)?;
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
    if o.topdown {
        let r =
            labperf::topdown::build(&file.into(), labperf::symbols::Search::new(o.symfs.clone()))
                .with_context(|| format!("cannot report TopDown from {}", file.display()))?;
        for w in r.info.warnings() {
            eprintln!("{}", labperf::text::show_text(&w));
        }
        for w in &r.warnings {
            eprintln!("note: {}", labperf::text::show_text(w));
        }
        print!("{}", r.render(o.format, o.top, colour()));
        return Ok(r.info.damaged());
    }
    if o.profileme {
        let r = labperf::profileme::build(
            &file.into(),
            o.pc,
            labperf::symbols::Search::new(o.symfs.clone()),
        )
        .with_context(|| format!("cannot report ProfileMe samples from {}", file.display()))?;
        for w in r.info.warnings() {
            eprintln!("{}", labperf::text::show_text(&w));
        }
        for w in &r.warnings {
            eprintln!("warning: {}", labperf::text::show_text(w));
        }
        if r.total == 0 {
            eprintln!(
                "note: {} holds no ProfileMe samples: record them on an Alpha EV67 or later with `labperf record --profileme`",
                file.display()
            );
        }
        print!("{}", r.render(o.format, o.top));
        return Ok(r.info.damaged());
    }
    if o.mem {
        let r = labperf::profileme::build_mem(
            &file.into(),
            labperf::symbols::Search::new(o.symfs.clone()),
        )
        .with_context(|| format!("cannot report DTB hits and misses from {}", file.display()))?;
        for w in r.info.warnings() {
            eprintln!("{}", labperf::text::show_text(&w));
        }
        for w in &r.warnings {
            eprintln!("warning: {}", labperf::text::show_text(w));
        }
        if r.loads + r.stores + r.prefetches == 0 {
            eprintln!(
                "note: {} holds no samples with a DTB data source: record with `labperf record --mem` on an Alpha EV67 or later",
                file.display()
            );
        }
        print!("{}", r.render(o.format, o.top));
        return Ok(r.info.damaged());
    }
    if o.metrics {
        let (m, info) = labperf::metrics::build(
            &file.into(),
            labperf::symbols::Search::new(o.symfs.clone()),
            o.discard,
            o.split,
        )
        .with_context(|| format!("cannot report metrics from {}", file.display()))?;
        for w in info.warnings() {
            eprintln!("{}", labperf::text::show_text(&w));
        }
        for w in &m.warnings {
            eprintln!("warning: {}", labperf::text::show_text(w));
        }
        print!("{}", m.render(o.format, o.top));
        return Ok(info.damaged());
    }
    let r = labperf::report::build(
        &file.into(),
        o.by,
        labperf::symbols::Search::new(o.symfs.clone()),
    )
    .with_context(|| {
        format!(
            "cannot report {}: check the path, or record one with `labperf record --local -- CMD`",
            file.display()
        )
    })?;
    for w in r.info.warnings() {
        eprintln!("{}", labperf::text::show_text(&w));
    }
    for w in &r.warnings {
        eprintln!("warning: {}", labperf::text::show_text(w));
    }
    if r.total_samples == 0 {
        eprintln!(
            "note: {} holds no samples (was the workload too short, or the period too long?)",
            file.display()
        );
    }
    print!("{}", r.render(o.format, o.by, o.top));
    Ok(r.info.damaged())
}

/// Colours for a table on a terminal, unless NO_COLOR is set.
pub fn colour() -> bool {
    use std::io::IsTerminal;
    std::io::stdout().is_terminal() && std::env::var_os("NO_COLOR").is_none()
}
