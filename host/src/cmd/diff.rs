//! `labperf diff BASE NEW`: two recordings' reports in the same view, row by row, each
//! number as its baseline and its change (perf diff's Baseline and Delta).

use super::opts::{EventOpt, NarrowOpts, ReportOpts};
use anyhow::{Context, Result};
use std::path::PathBuf;

/// Compare two recordings: per symbol (or per row of their view), the baseline and the change.
#[derive(Debug, clap::Args)]
#[command(
    after_help = "Both files are shown in the same view (the first's header picks it, or --view), \
then joined on their text columns (symbol, file...). Every numeric column becomes its baseline \
(`<column>_base`) and its change, new minus base (`<column>_delta`); a row missing on one side \
counts as zero for counts and shares and as nothing for ratios (CPI). Rows sort by the size \
of the first column's change. Recordings of several events are joined event by event (a \
table per event; an event one side did not sample is joined against nothing); --event keeps \
one.

EXAMPLES:
  labperf diff before.lpr after.lpr
  labperf diff before.lpr after.lpr --format csv --top 0
  labperf diff m-old.lpr m-new.lpr            # metrics view: CPI, %I... before and change"
)]
pub struct Args {
    /// The baseline recording.
    pub base: PathBuf,
    /// The recording compared with it.
    pub new: PathBuf,
    #[command(flatten)]
    pub opts: ReportOpts,
    #[command(flatten)]
    pub narrow: NarrowOpts,
    #[command(flatten)]
    pub event: EventOpt,
}

pub fn run(a: &Args) -> Result<()> {
    let mut o = a.opts.view_options();
    a.narrow.apply(&mut o);
    o.event = a.event.select();
    // Every row of both reports is joined; `--top` cuts the joined table, ranked by change
    // (a row in one file's top rows but not the other's still has both sides).
    o.top = 0;
    // perf.data is imported on the fly (`import::source`).
    let (base, new) = (
        super::import::source(&a.base)?,
        super::import::source(&a.new)?,
    );
    if o.view.is_none() {
        // The base's view for both, so that a header difference is an error, not a mismatch.
        o.view = Some(labperf::views::view::choose(&base, &o)?.0);
    }
    let report = |f: &labperf::record::load::Source| {
        labperf::views::view::build(f, &o)
            .with_context(|| format!("cannot report {}", f.name.display()))
    };
    let (base, new) = (report(&base)?, report(&new)?);
    let d = labperf::views::diff::diff(&base, &new)?;
    for w in d.warnings.iter().filter(|_| !super::quiet()) {
        eprintln!("{}", labperf::text::show_text(w));
    }
    print!(
        "{}",
        d.render(a.opts.format.get(), a.opts.top, super::report::colour())
    );
    if d.damaged && a.opts.strict.strict {
        super::report::strict_exit();
    }
    Ok(())
}
