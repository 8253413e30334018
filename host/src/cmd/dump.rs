//! `labperf dump FILE`: every record decoded, one per line, like `perf report -D`.

use anyhow::{Context, Result};
use labperf_common::Record;
use std::io::Write;

/// Print every record of a file, decoded.
#[derive(Debug, clap::Args)]
#[command(
    mut_arg(
        "strict",
        super::opts::help(
            "Exit with status 3 when the file is damaged (what is intact still prints)"
        )
    ),
    after_help = "EXAMPLES:\n  labperf dump labperf.lpr | less\n  labperf dump bench.lpr | grep MMAP2"
)]
pub struct Args {
    #[command(flatten)]
    pub file: super::opts::FileArg,
    #[command(flatten)]
    pub strict: super::opts::StrictOpt,
}

pub fn run(a: &Args) -> Result<()> {
    let stdout = std::io::stdout();
    let mut out = std::io::BufWriter::new(stdout.lock());
    let mut n = 0u64;
    let mut err = None;
    let mut pm = labperf::views::profileme::Skipped::default();
    let mut pm_decoded = 0u64;
    let mut types: Option<Vec<u32>> = None;
    let info =
        labperf::record::load::stream_with_header(&a.file.file.as_path().into(), |h, _, r| {
            n += 1;
            if err.is_some() {
                return;
            }
            let mut text = labperf::views::dump::line(r);
            // Alpha recordings: decode each sample's ProfileMe payload as `perf report -D` does.
            if let (Some(h), Record::Sample(s)) = (h, r) {
                if h.arch == labperf_common::Arch::Alpha {
                    let t = types
                        .get_or_insert_with(|| h.events.iter().map(|e| e.attr.type_).collect());
                    match labperf::views::profileme::payload(t, s) {
                        Ok(p) => {
                            pm_decoded += 1;
                            text += &labperf::views::dump::profileme_lines(&p);
                        }
                        Err(e) => pm.add(e),
                    }
                }
            }
            if let Err(e) = writeln!(out, "{n:>8} {text}") {
                err = Some(e);
            }
        })
        .with_context(|| format!("cannot dump {}", a.file.file.display()))?;
    // A closed pipe (`| head`) included: main.rs ends quietly on it.
    if let Some(e) = err {
        return Err(e).context("cannot write to stdout");
    }
    if info
        .header
        .as_ref()
        .is_some_and(|h| h.arch == labperf_common::Arch::Alpha)
    {
        writeln!(
            out,
            "PROFILEME decoded={pm_decoded} skipped={} (short={} version={} not_cpu_pmu={})",
            pm.total(),
            pm.short,
            pm.version,
            pm.not_cpu_pmu
        )
        .ok();
    }
    if let Some(u) = info.trailer_ext.as_ref().and_then(|x| x.usage.as_ref()) {
        writeln!(out, "USAGE {}", labperf::views::dump::usage_line(u)).ok();
    }
    for d in &info.damage {
        writeln!(out, "DAMAGE {d}").ok();
    }
    out.flush().context("cannot write to stdout")?;
    if a.strict.strict && info.damaged() {
        super::report::strict_exit();
    }
    Ok(())
}
