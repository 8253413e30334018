//! `labperf annotate [FILE] [SYMBOL]`: one function's instructions with each one's share
//! of the function's samples and the source lines between them, as `perf annotate --stdio`.

use super::opts::{EventOpt, SymbolOpts};
use anyhow::Result;
use std::path::{Path, PathBuf};

/// Show a function's instructions and source lines with their share of its samples.
#[derive(Debug, clap::Args)]
#[command(
    mut_arg(
        "event",
        super::opts::help(
            "Only the samples of this event (its name, or its index in `labperf info`'s list) [default: the first event with samples]"
        )
    ),
    after_help = "The function's instructions come from binutils' objdump for the binary's machine \
(`objdump` here, `aarch64-linux-gnu-objdump` or `alpha-linux-gnu-objdump` for a lab machine's), \
the source lines from its DWARF (or its separate debug file), as perf annotate shows them. Each \
instruction's percent is its share of the function's samples (of their period: perf's `local \
period`); a strobed recording (`record --metrics`) adds each instruction's windows, their CPI and \
misses per 1000 instructions. The binary is found as report finds it (the path recorded, the binary \
cache, --symfs).

EXAMPLES:
  labperf annotate                                 # labperf.lpr (else perf.data): the busiest function
  labperf annotate perf.data hot                   # the function hot of perf.data
  labperf annotate -i perf.data --stdio hot        # perf annotate's spelling of the same
  labperf annotate bench.lpr -n hot                # samples instead of percents, as perf's -n
  labperf annotate two.lpr hot --event page-faults # one event of several"
)]
pub struct Args {
    /// The record file (labperf's, or perf's perf.data) [default: labperf.lpr, else
    /// ./perf.data]; a single word that names no file is the SYMBOL.
    #[arg(value_name = "FILE")]
    pub file: Option<PathBuf>,
    /// The function, as `labperf report` names it [default: the busiest one whose binary is
    /// found].
    #[arg(value_name = "SYMBOL")]
    pub symbol: Option<String>,
    /// The record file, as perf annotate -i names it.
    #[arg(short = 'i', long = "input", value_name = "FILE")]
    pub input: Option<PathBuf>,
    /// The function, as perf annotate -s names it.
    #[arg(short = 's', long = "symbol", value_name = "SYMBOL")]
    pub symbol_opt: Option<String>,
    /// As perf annotate --stdio: the text, which is the only output here.
    #[arg(long)]
    pub stdio: bool,
    /// Each instruction's samples instead of its percent (perf annotate's -n).
    #[arg(short = 'n', long)]
    pub show_nr_samples: bool,
    #[command(flatten)]
    pub event: EventOpt,
    #[command(flatten)]
    pub symbols: SymbolOpts,
}

impl Args {
    /// The record file and the function asked for (see [`Args::file`]).
    fn what(&self) -> Result<(PathBuf, Option<String>)> {
        let here = |p: &Path| std::fs::symlink_metadata(p).is_ok();
        let (mut file, mut symbol) = (self.input.clone(), self.symbol_opt.clone());
        let symbol_word = |w: &PathBuf| w.to_string_lossy().into_owned();
        match (&self.file, &self.symbol) {
            (Some(f), Some(s)) => {
                if file.is_some() {
                    anyhow::bail!("the record file is given twice (FILE and -i): give one");
                }
                file = Some(f.clone());
                set_symbol(&mut symbol, s.clone())?;
            }
            // One word: the file when it names one (or -s names the function), else the function.
            (Some(w), None) if file.is_none() && (here(w) || symbol.is_some()) => {
                file = Some(w.clone());
            }
            (Some(w), None) => set_symbol(&mut symbol, symbol_word(w))?,
            _ => {}
        }
        let file = match file {
            Some(f) => f,
            None => match ["labperf.lpr", "perf.data"]
                .into_iter()
                .find(|f| here(Path::new(f)))
            {
                Some(f) => f.into(),
                None => anyhow::bail!(
                    "no labperf.lpr or perf.data in this directory: name a file (`labperf annotate FILE SYMBOL`), or record one (`labperf record ./my-prog`)"
                ),
            },
        };
        Ok((file, symbol))
    }
}

/// Sets the function asked for, once.
fn set_symbol(symbol: &mut Option<String>, s: String) -> Result<()> {
    if symbol.as_ref().is_some_and(|have| *have != s) {
        anyhow::bail!(
            "two functions are named ({} and {s}): annotate takes one",
            symbol.as_deref().unwrap_or_default()
        );
    }
    *symbol = Some(s);
    Ok(())
}

pub fn run(a: &Args) -> Result<()> {
    let (file, symbol) = a.what()?;
    // perf.data is imported on the fly.
    let src = super::import::source(&file)?;
    let o = labperf::views::annotate::Options {
        symbol,
        search: a.symbols.search(),
        event: a.event.select(),
    };
    let an = labperf::views::annotate::annotate(&src, &o)?;
    for n in an.notes.iter().filter(|_| !super::quiet()) {
        eprintln!("{}", labperf::text::show_text(n));
    }
    print!("{}", an.render(a.show_nr_samples));
    Ok(())
}
