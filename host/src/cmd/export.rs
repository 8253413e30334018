//! `labperf export FILE --format folded|svg|pprof`: the recording's stacks for flame-graph
//! tools and pprof's viewers.

use super::opts::SymbolOpts;
use anyhow::{bail, Context, Result};
use labperf::export::Format;
use std::io::Write;
use std::path::{Path, PathBuf};

/// Write a recording's samples as folded stacks, an SVG flame graph or a pprof profile.
#[derive(Debug, clap::Args)]
#[command(
    after_help = "Stacks are the sampled function and, where the recording has callchains, its \
callers; a recording without them gives one frame per sample. Function names are embedded: \
the output needs neither the binaries nor a symbol server.

EXAMPLES:
  labperf export bench.lpr --format svg -o bench.svg      # open it in a browser
  labperf export bench.lpr --format folded > bench.folded
  labperf export bench.lpr --format pprof -o bench.pb.gz
  go tool pprof -top bench.pb.gz"
)]
pub struct Args {
    /// The record file.
    pub file: PathBuf,
    /// Output format.
    #[arg(long, value_enum)]
    pub format: Format,
    /// Output file [default: standard output for folded; FILE's name with .svg or .pb.gz].
    #[arg(short, long)]
    pub output: Option<PathBuf>,
    #[command(flatten)]
    pub symbols: SymbolOpts,
}

pub fn run(a: &Args) -> Result<()> {
    let stacks = labperf::export::collect(&a.file.as_path().into(), a.symbols.search())
        .with_context(|| format!("cannot export {}", a.file.display()))?;
    for w in stacks.warnings.iter().chain(&stacks.info.warnings()) {
        eprintln!("{}", labperf::text::show_text(w));
    }
    if stacks.total_samples == 0 {
        bail!(
            "{} holds no samples: nothing to export (record some with `labperf record`)",
            a.file.display()
        );
    }
    let run = a
        .file
        .file_stem()
        .map_or("run".into(), |s| s.to_string_lossy().into_owned());
    let bytes = match a.format {
        Format::Folded => stacks.folded().into_bytes(),
        Format::Svg => {
            let mut v = Vec::new();
            stacks.svg(&mut v).context("cannot draw the flame graph")?;
            v
        }
        Format::Pprof => stacks
            .pprof(&run)
            .context("cannot encode the pprof profile")?,
    };
    let out = match (&a.output, a.format) {
        (Some(p), _) if p.as_os_str() != "-" => Some(p.clone()),
        (Some(_), _) | (None, Format::Folded) => None,
        (None, Format::Svg) => Some(a.file.with_extension("svg")),
        (None, Format::Pprof) => Some(a.file.with_extension("pb.gz")),
    };
    match out {
        None => std::io::stdout().lock().write_all(&bytes)?,
        Some(p) => {
            write_new(&p, &bytes)?;
            eprintln!(
                "labperf: {} stacks of {} samples written to {}",
                stacks.stacks.len(),
                stacks.total_samples,
                p.display()
            );
        }
    }
    Ok(())
}

/// Writes through a temporary name and a rename: a reader never sees half a file.
fn write_new(p: &Path, bytes: &[u8]) -> Result<()> {
    let mut tmp = p.as_os_str().to_owned();
    tmp.push(".part");
    let tmp = PathBuf::from(tmp);
    std::fs::write(&tmp, bytes).with_context(|| format!("cannot write {}", tmp.display()))?;
    std::fs::rename(&tmp, p).with_context(|| format!("cannot rename to {}", p.display()))?;
    Ok(())
}
