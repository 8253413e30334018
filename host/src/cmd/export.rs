//! `labperf export FILE… --format folded|svg|firefox|pprof|parquet`: recordings' stacks for
//! flame-graph tools, the Firefox Profiler, pprof's viewers and query engines.

use super::opts::SymbolOpts;
use anyhow::{bail, Context, Result};
use labperf::export::Format;
use std::io::Write;
use std::path::{Path, PathBuf};

/// Write recordings' samples as folded stacks, an SVG flame graph, a Firefox Profiler or
/// pprof profile, or Parquet tables.
#[derive(Debug, clap::Args)]
#[command(
    after_help = "Stacks are the sampled function and, where the recording has callchains, its \
callers; a recording without them gives one frame per sample. Function names are embedded: \
the output needs neither the binaries nor a symbol server. Several files export as one, \
each sample keeping its host, architecture and run (pprof labels, Parquet columns, Firefox \
processes).

Parquet writes two tables: OUT (one row per sample: host, arch, run, event, pid, tid, time, \
weight, stack_id, symbol, dso) and OUT's .stacks.parquet sibling (stack_id, depth, symbol, \
dso; depth 0 is the sampled function).

Several events (`record -e cpu-clock -e page-faults`) stay apart: pprof has a sample type per \
event (cpu-clock/nanoseconds, page-faults/count; pick one with -sample_index) and an `event` \
label, the Firefox profile a thread per thread and event (`main (page-faults)`), Parquet its \
`event` column. A flame graph (folded, svg) adds up one event's periods: with several events \
it needs --event NAME, and the error lists the events. --event keeps one event in every format.

EXAMPLES:
  labperf export bench.lpr --format svg -o bench.svg      # open it in a browser
  labperf export bench.lpr --format folded > bench.folded
  labperf export two.lpr --format svg --event page-faults -o faults.svg
  labperf export bench.lpr --format pprof -o bench.pb.gz
  go tool pprof -top bench.pb.gz
  labperf export bench.lpr --format firefox -o bench.json # profiler.firefox.com: Load a file
  labperf export lab-*.lpr --format parquet -o lab.parquet
  duckdb -c \"SELECT host, symbol, sum(weight) FROM 'lab.parquet' GROUP BY ALL ORDER BY 3 DESC\""
)]
pub struct Args {
    /// The record files.
    #[arg(required = true, num_args = 1..)]
    pub files: Vec<PathBuf>,
    /// Output format.
    #[arg(long, value_enum)]
    pub format: Format,
    /// Output file [default: standard output for folded; for one FILE, its name with .svg,
    /// .json, .pb.gz or .parquet].
    #[arg(short, long)]
    pub output: Option<PathBuf>,
    /// Export only the samples of this event (its name, or its index in `labperf info`'s
    /// list); folded and svg need it when the recordings sampled several events.
    #[arg(long, value_name = "NAME")]
    pub event: Option<String>,
    #[command(flatten)]
    pub symbols: SymbolOpts,
}

pub fn run(a: &Args) -> Result<()> {
    let srcs: Vec<labperf::load::Source> = a.files.iter().map(|f| f.as_path().into()).collect();
    let what = match &a.files[..] {
        [one] => one.display().to_string(),
        many => format!("these {} files", many.len()),
    };
    let sel = a.event.clone().map(labperf::events::Select);
    if let Some(sel) = &sel {
        let mut names = Vec::new();
        for s in &srcs {
            let p = labperf::load::peek(s).with_context(|| format!("cannot export {what}"))?;
            names.push((
                s.name.display().to_string(),
                labperf::events::Names::of(p.header.as_ref()),
            ));
        }
        labperf::events::check(sel, names.iter().map(|(f, n)| (f.clone(), n)))?;
    }
    let stacks = labperf::export::collect_events(
        &srcs,
        a.symbols.search(),
        a.format.per_sample(),
        sel.as_ref(),
    )
    .with_context(|| format!("cannot export {what}"))?;
    for w in stacks.warnings.iter().chain(
        stacks
            .runs
            .iter()
            .flat_map(|r| r.info.warnings())
            .collect::<Vec<_>>()
            .iter(),
    ) {
        eprintln!("{}", labperf::text::show_text(w));
    }
    // How far the stacks reach, as `report` says it.
    for r in &stacks.runs {
        if let Some(q) = &r.stacks {
            eprintln!("note: {}: {}", labperf::text::show(&r.name), q.line());
            for w in q.warnings() {
                eprintln!("{}", labperf::text::show_text(&w));
            }
        }
    }
    if stacks.total_samples == 0 {
        bail!("{what} holds no samples: nothing to export (record some with `labperf record`)");
    }
    // A flame graph adds up periods: of one event only.
    let sampled = stacks.sampled_events();
    if sampled.len() > 1 && matches!(a.format, Format::Folded | Format::Svg) {
        let list: Vec<String> = sampled
            .iter()
            .map(|&(e, n, _)| {
                format!(
                    "{} ({n} samples)",
                    labperf::text::show(&stacks.events.names[e as usize])
                )
            })
            .collect();
        bail!(
            "{what} holds samples of {} events: {}; a flame graph adds up the periods of one: pass --event NAME (one file per event: run export once per event)",
            sampled.len(),
            list.join(", ")
        );
    }
    let ext = match a.format {
        Format::Folded => None,
        Format::Svg => Some("svg"),
        Format::Firefox => Some("json"),
        Format::Pprof => Some("pb.gz"),
        Format::Parquet => Some("parquet"),
    };
    let out = match (&a.output, ext) {
        (Some(p), _) if p.as_os_str() != "-" => Some(p.clone()),
        (Some(_), _) | (None, None) => None,
        (None, Some(ext)) => match &a.files[..] {
            [one] => Some(one.with_extension(ext)),
            _ => bail!("several files export to one output: name it with -o OUT.{ext}"),
        },
    };
    if a.format == Format::Parquet {
        let Some(out) = out else {
            bail!("Parquet is two files: name them with -o OUT.parquet, not standard output");
        };
        let side = stacks_path(&out);
        let (mut samples, mut stack_rows) = (New::create(&out)?, New::create(&side)?);
        stacks
            .parquet(samples.writer(), stack_rows.writer())
            .context("cannot write the Parquet tables")?;
        let bytes = samples.finish()?;
        stack_rows.finish()?;
        eprintln!(
            "labperf: {} samples written to {} ({:.1} bytes per sample), {} stacks to {}",
            stacks.samples.len(),
            out.display(),
            bytes as f64 / stacks.samples.len().max(1) as f64,
            stacks.stacks.len(),
            side.display()
        );
        return Ok(());
    }
    // Straight to the file: an export is never held whole in memory.
    let write = |w: &mut dyn Write| -> Result<()> {
        match a.format {
            Format::Folded => w.write_all(stacks.folded().as_bytes())?,
            Format::Svg => stacks.svg(w).context("cannot draw the flame graph")?,
            Format::Firefox => stacks
                .firefox(w)
                .context("cannot write the Firefox profile")?,
            Format::Pprof => stacks.pprof(w).context("cannot encode the pprof profile")?,
            Format::Parquet => unreachable!("written above"),
        }
        Ok(())
    };
    match out {
        None => {
            let mut o = std::io::BufWriter::new(std::io::stdout().lock());
            write(&mut o)?;
            o.flush()?;
        }
        Some(p) => {
            let mut f = New::create(&p)?;
            write(f.writer())?;
            f.finish()?;
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

/// The stacks table beside `out`: `x.parquet` → `x.stacks.parquet`.
pub fn stacks_path(out: &Path) -> PathBuf {
    let name = out
        .file_name()
        .map_or("export".into(), |n| n.to_string_lossy().into_owned());
    let stem = name.strip_suffix(".parquet").unwrap_or(&name);
    out.with_file_name(format!("{stem}.stacks.parquet"))
}

/// A file written through a temporary name and renamed when complete: a reader never sees
/// half a file, and a failed export leaves none.
struct New {
    path: PathBuf,
    tmp: PathBuf,
    file: Option<std::io::BufWriter<std::fs::File>>,
}

impl New {
    fn create(path: &Path) -> Result<New> {
        let mut tmp = path.as_os_str().to_owned();
        tmp.push(".part");
        let tmp = PathBuf::from(tmp);
        let file = std::fs::File::create(&tmp)
            .with_context(|| format!("cannot write {}", tmp.display()))?;
        Ok(New {
            path: path.to_path_buf(),
            tmp,
            file: Some(std::io::BufWriter::with_capacity(1 << 20, file)),
        })
    }

    fn writer(&mut self) -> &mut std::io::BufWriter<std::fs::File> {
        self.file.as_mut().expect("open until finished")
    }

    /// Flushes and renames; returns the file's size.
    fn finish(mut self) -> Result<u64> {
        let f = self
            .file
            .take()
            .expect("open until finished")
            .into_inner()
            .map_err(|e| e.into_error())
            .with_context(|| format!("cannot write {}", self.tmp.display()))?;
        let n = f.metadata()?.len();
        std::fs::rename(&self.tmp, &self.path)
            .with_context(|| format!("cannot rename to {}", self.path.display()))?;
        Ok(n)
    }
}

impl Drop for New {
    fn drop(&mut self) {
        if self.file.take().is_some() {
            let _ = std::fs::remove_file(&self.tmp);
        }
    }
}
