//! `labperf export FILE… --format folded|svg|firefox|pprof|parquet`: recordings' stacks for
//! flame-graph tools, the Firefox Profiler, pprof's viewers and query engines.

use super::opts::{help, EventOpt, FilterOpts, OutputOpt, SymbolOpts};
use anyhow::{bail, Context, Result};
use labperf::export::{Format, ToFirefox, ToFolded, ToParquet, ToPprof};
use labperf::files::output::{Dest, Output};
use labperf::record::events::Select;
use labperf::symbolize::stacks::StackTable;
use labperf::text::plural;
use std::path::{Path, PathBuf};

/// Write recordings' samples as folded stacks, an SVG flame graph, a Firefox Profiler or
/// pprof profile, or Parquet tables.
#[derive(Debug, clap::Args)]
#[command(
    mut_arg("output", help("Output file [default: standard output for folded; for one FILE, its name with .svg, .json, .pb.gz or .parquet]. `-` is standard output (every format but Parquet); a device or FIFO is written straight through, a symbolic link's file is replaced")),
    mut_arg("event", help("Export only the samples of this event (its name, or its index in `labperf info`'s list); folded and svg need it when the recordings sampled several events")),
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
  labperf export bench.lpr -o bench.svg                   # the format from the name; open it in a browser
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
    /// Output format [default: the one -o's name ends with: .folded, .svg, .json
    /// (firefox), .pb.gz or .pprof (pprof), .parquet].
    #[arg(long, value_enum)]
    pub format: Option<Format>,
    #[command(flatten)]
    pub output: OutputOpt,
    #[command(flatten)]
    pub event: EventOpt,
    #[command(flatten)]
    pub symbols: SymbolOpts,
    #[command(flatten)]
    pub filter: FilterOpts,
}

/// The format a file name's extension says (`x.svg`, `x.pb.gz`), if it is one of ours.
pub fn format_of_name(path: &Path) -> Option<Format> {
    let name = path.file_name()?.to_str()?.to_ascii_lowercase();
    [
        (".folded", Format::Folded),
        (".svg", Format::Svg),
        (".json", Format::Firefox),
        (".pb.gz", Format::Pprof),
        (".pprof", Format::Pprof),
        (".parquet", Format::Parquet),
    ]
    .into_iter()
    .find(|(ext, _)| name.ends_with(ext))
    .map(|(_, f)| f)
}

/// `--format`, else the one `-o`'s extension names; a `--format` that another of our
/// extensions contradicts is refused (`--format svg -o x.json`).
fn format(a: &Args) -> Result<Format> {
    use clap::ValueEnum;
    let name = |f: Format| {
        f.to_possible_value()
            .map_or(String::new(), |v| v.get_name().to_string())
    };
    let out = a.output.output.as_deref();
    match (a.format, out.and_then(format_of_name)) {
        (Some(f), Some(e)) if f != e => bail!(
            "--format {} but -o {} names a {} file: drop --format, or name the output for {}",
            name(f),
            out.map_or(String::new(), |p| p.display().to_string()),
            name(e),
            name(f)
        ),
        (Some(f), _) | (None, Some(f)) => Ok(f),
        (None, None) => bail!(
            "which format? pass --format folded|svg|firefox|pprof|parquet, or an -o name ending in .folded, .svg, .json, .pb.gz or .parquet"
        ),
    }
}

pub fn run(a: &Args) -> Result<()> {
    let format = format(a)?;
    super::opts::once_each(&a.files)?;
    // perf.data is imported on the fly (`import::source`).
    let srcs: Vec<labperf::record::load::Source> = a
        .files
        .iter()
        .map(|f| super::import::source(f))
        .collect::<Result<_>>()?;
    let what = match &a.files[..] {
        [one] => one.display().to_string(),
        many => format!("these {} files", many.len()),
    };
    let sel = a.event.select();
    if let Some(sel) = &sel {
        check_event(&srcs, sel, &what)?;
        super::opts::warn_wall(&srcs, Some(sel));
    }
    let filter = a.filter.get(false);
    let stacks = labperf::symbolize::stacks::collect_filtered(
        &srcs,
        a.symbols.search(),
        format.per_sample(),
        sel.as_ref(),
        &filter,
        a.filter.max_stack.map(|n| n as usize),
    )
    .with_context(|| format!("cannot export {what}"))?;
    if let (Some(f), false) = (&stacks.filtered, super::quiet()) {
        eprintln!(
            "{}",
            labperf::text::show_text(&filter.account(f.all, f.in_time, stacks.total_samples).0)
        );
    }
    say_warnings(&stacks);
    if stacks.total_samples == 0 {
        if stacks.filtered.is_some() {
            bail!("the filters keep no sample of {what}: nothing to export");
        }
        bail!("{what} holds no samples: nothing to export (record some with `labperf record`)");
    }
    // A flame graph adds up periods: of one event only.
    if matches!(format, Format::Folded | Format::Svg) {
        one_event(&stacks, &what)?;
    }
    let out = output_path(a, format)?;
    if format == Format::Parquet {
        let Some(out) = out.filter(|p| !labperf::files::output::is_stdout(p)) else {
            bail!("Parquet is two files: name them with -o OUT.parquet, not standard output");
        };
        return write_parquet(&stacks, &out);
    }
    // Straight to the file: an export is never held whole in memory.
    write_stream(format, &stacks, &out.unwrap_or_else(|| PathBuf::from("-")))
}

/// `--event`: each file's events checked for the one selected, before any work.
fn check_event(srcs: &[labperf::record::load::Source], sel: &Select, what: &str) -> Result<()> {
    let mut names = Vec::new();
    for s in srcs {
        let p = labperf::record::load::peek(s).with_context(|| format!("cannot export {what}"))?;
        names.push((
            s.name.display().to_string(),
            labperf::record::events::Names::of(p.header.as_ref()),
        ));
    }
    labperf::record::events::check(sel, names.iter().map(|(f, n)| (f.clone(), n)))?;
    Ok(())
}

/// The warnings of reading the recordings, then how far each one's stacks reach, as
/// `report` says it.
fn say_warnings(stacks: &StackTable) {
    if super::quiet() {
        return;
    }
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
}

/// A flame graph's samples are of one event: several are refused, with the first ones
/// named.
fn one_event(stacks: &StackTable, what: &str) -> Result<()> {
    let sampled = stacks.sampled_events();
    if sampled.len() > 1 {
        // The first events (a crafted file can name thousands), then how many more.
        let mut list: Vec<String> = sampled
            .iter()
            .take(labperf::record::events::LISTED)
            .map(|&(e, n, _)| {
                format!(
                    "{} ({n} samples)",
                    labperf::text::show(&stacks.events.names[e as usize])
                )
            })
            .collect();
        if sampled.len() > list.len() {
            list.push(format!("and {} more", sampled.len() - list.len()));
        }
        bail!(
            "{what} holds samples of {} events: {}; a flame graph adds up the periods of one: pass --event NAME (one file per event: run export once per event)",
            sampled.len(),
            list.join(", ")
        );
    }
    Ok(())
}

/// Where the export goes: `-o`, else one FILE's name with the format's extension, else
/// standard output (`None`, folded only).
fn output_path(a: &Args, format: Format) -> Result<Option<PathBuf>> {
    let ext = match format {
        Format::Folded => None,
        Format::Svg => Some("svg"),
        Format::Firefox => Some("json"),
        Format::Pprof => Some("pb.gz"),
        Format::Parquet => Some("parquet"),
    };
    Ok(match (&a.output.output, ext) {
        (Some(p), _) => Some(p.clone()),
        (None, None) => None,
        (None, Some(ext)) => match &a.files[..] {
            [one] => Some(one.with_extension(ext)),
            _ => bail!("several files export to one output: name it with -o OUT.{ext}"),
        },
    })
}

/// Parquet's two tables: the samples to `out`, the stacks beside it.
fn write_parquet(stacks: &StackTable, out: &Path) -> Result<()> {
    // The stacks' table is a file beside OUT: beside a device or a descriptor (`/dev/null`,
    // `/dev/stdout`) it would be a new file in /dev. A FIFO (a reader of the samples
    // beside the user's other files) keeps it.
    let fifo = std::fs::metadata(out).is_ok_and(|m| {
        use std::os::unix::fs::FileTypeExt;
        m.file_type().is_fifo()
    });
    let dest = labperf::files::output::resolve(out)?;
    if dest.file().is_none() && !(fifo && matches!(dest, Dest::Stream(_))) {
        bail!(
            "Parquet is two files, OUT and OUT's .stacks.parquet beside it: name a regular file (or a FIFO) with -o OUT.parquet, not a device or descriptor like {}",
            labperf::text::show(&out.display().to_string())
        );
    }
    let side = stacks_path(out);
    let (mut samples, mut stack_rows) = (Output::create(out)?, Output::create(&side)?);
    stacks
        .parquet(&mut samples, &mut stack_rows)
        .context("cannot write the Parquet tables")?;
    let bytes = samples.commit()?;
    stack_rows.commit()?;
    if super::quiet() {
        return Ok(());
    }
    eprintln!(
        "labperf: {} written to {} ({:.1} bytes per sample), {} to {}",
        plural(stacks.samples.len() as u64, "sample", "samples"),
        out.display(),
        bytes as f64 / stacks.samples.len().max(1) as f64,
        plural(stacks.stacks.len() as u64, "stack", "stacks"),
        side.display()
    );
    Ok(())
}

/// Every format but Parquet, written as it is made to `path` (`-`: standard output).
fn write_stream(format: Format, stacks: &StackTable, path: &Path) -> Result<()> {
    let mut out = Output::create(path)?;
    let note = match format {
        Format::Folded => {
            stacks.write_folded(&mut out)?;
            None
        }
        Format::Svg => stacks
            .svg(&mut out)
            .context("cannot draw the flame graph")?,
        Format::Firefox => stacks
            .firefox(&mut out)
            .context("cannot write the Firefox profile")?,
        Format::Pprof => {
            stacks
                .pprof(&mut out)
                .context("cannot encode the pprof profile")?;
            None
        }
        Format::Parquet => unreachable!("written by write_parquet"),
    };
    if let Some(n) = note.filter(|_| !super::quiet()) {
        eprintln!("{n}");
    }
    let dest = out.dest().clone();
    out.commit()?;
    if dest != Dest::Stdout && !super::quiet() {
        eprintln!(
            "labperf: {} of {} written to {}",
            plural(stacks.stacks.len() as u64, "stack", "stacks"),
            plural(stacks.total_samples, "sample", "samples"),
            path.display()
        );
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
