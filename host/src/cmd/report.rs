//! `labperf report FILE…`: the file's view (from its header, or --view) as a table, CSV, JSON
//! or a self-contained HTML page.

use super::opts::{EventOpt, NarrowOpts, OutputOpt, ReportOpts};
use anyhow::{Context, Result};
use labperf::export::ToFolded;
use labperf::files::output::Dest;
use std::io::Write;
use std::path::PathBuf;

/// Print a report of a record file, in the view its header names.
#[derive(Debug, clap::Args)]
#[command(
    after_help = "The view comes from the file: a `record` file is shown per function, a \
`record --metrics` file with CPI and miss rates, a TopDown file with its slot shares, an Alpha \
ProfileMe or --mem file as DCPI-style summaries, a `stat -o` file interval by interval.

A recording of several events (`record -e cpu-clock -e page-faults`) has a table per event, \
each with shares of that event's own period, as perf shows them; --event NAME keeps one.

EXAMPLES:
  labperf report labperf.lpr
  labperf report two.lpr --event page-faults            # one event of several (or its index)
  labperf report bench.lpr --by dso --format csv
  labperf report -i bench.lpr -s dso --stdio             # perf report's spelling of the same table
  labperf report bench.lpr --top 5 --format json
  labperf report m.lpr --split thread
  labperf report m.lpr --call-graph callee      # metrics per function and per caller
  labperf report m.lpr --call-graph callee --depth 3     # ... per caller path, 3 frames
  labperf report alpha.lpr --pc --top 10
  labperf report td.lpr --format csv
  labperf report m.lpr --view plain
  labperf report arm1.lpr arm2.lpr x86.lpr --by host     # several machines, one table
  labperf report bench.lpr --format html -o bench.html   # facts, flame graph, charts, tables
  labperf report calls.lpr --children                    # inclusive (Children) and Self shares
  labperf report calls.lpr --call-graph caller --depth 2 # what each busy function calls
  labperf report calls.lpr --call-graph callee --top 3   # who calls the 3 busiest functions"
)]
pub struct Args {
    /// The record file (written by labperf record, labperf stat -o or labperf-agent, or
    /// perf's perf.data); several are merged into one plain report (`--by host|run` keeps
    /// them apart) [default: labperf.lpr, else ./perf.data as perf report reads it].
    #[arg(num_args = 1..)]
    pub files: Vec<PathBuf>,
    /// A record file, as perf report -i names it (repeatable; with FILEs, read after them).
    #[arg(short = 'i', long = "input", value_name = "FILE")]
    pub input: Vec<PathBuf>,
    #[command(flatten)]
    pub opts: ReportOpts,
    #[command(flatten)]
    pub narrow: NarrowOpts,
    #[command(flatten)]
    pub event: EventOpt,
    /// Plain view: the --children table and, under each of its rows, the tree of the
    /// functions it calls (caller) or of those that call it (callee), from the call stacks
    /// of `record -g`; branches under 0.5% of the event's period are left out, as perf does.
    /// Metrics and TopDown views (callee only): a second table of each function's rows split
    /// by its caller path, --depth frames up (default 1; inlined frames count), from the
    /// stack of each window's end sample: `run_slice <- calls_a`.
    #[arg(long, value_enum, value_name = "ORDER", conflicts_with = "by")]
    pub call_graph: Option<labperf::views::report::Order>,
    /// Levels of the call graph of each function, its own row the first (0: all, at most
    /// 127 as perf's --max-stack); metrics and TopDown: frames of each caller path (0: 1).
    #[arg(long, value_name = "N", default_value_t = 0)]
    pub depth: usize,
    /// As perf report -G (--inverted, perf's caller-based call graph): --call-graph
    /// caller, the --children table with, under each function, the functions it calls.
    #[arg(short = 'G', long = "inverted", conflicts_with_all = ["call_graph", "by"])]
    pub inverted: bool,
    /// As perf report --header-only: what `labperf info` prints of each file, no report.
    #[arg(long)]
    pub header_only: bool,
    #[command(flatten)]
    pub output: OutputOpt,
}

impl Args {
    /// The files to read: the FILEs, then the `-i` ones; when none is given, labperf.lpr,
    /// else perf's perf.data (as `perf report` reads it), in the current directory.
    pub fn files(&self) -> Result<Vec<PathBuf>> {
        let v: Vec<PathBuf> = self.files.iter().chain(&self.input).cloned().collect();
        if !v.is_empty() {
            return Ok(v);
        }
        let here = |f: &str| std::fs::symlink_metadata(f).is_ok();
        match ["labperf.lpr", "perf.data"].into_iter().find(|f| here(f)) {
            Some(f) => Ok(vec![f.into()]),
            None => anyhow::bail!(
                "no labperf.lpr or perf.data in this directory: name a file (`labperf report \
                 FILE`), or record one (`labperf record ./my-prog`)"
            ),
        }
    }
}

pub fn run(a: &Args) -> Result<()> {
    // (--header-only is `labperf info`'s: main.rs sends it there.)
    // -G: perf's caller-based graph (its `--call-graph caller`).
    let order = match (a.call_graph, a.inverted) {
        (_, true) => Some(labperf::views::report::Order::Caller),
        (o, false) => o,
    };
    if a.depth > 0 && order.is_none() {
        anyhow::bail!("--depth N is the depth of a call graph: pass --call-graph caller|callee (or -G) with it");
    }
    let graph = order.map(|order| labperf::views::report::Graph {
        order,
        depth: a.depth,
    });
    // Where it goes is checked before the work (a directory or a socket is refused).
    let out = a
        .output
        .output
        .as_deref()
        .map(labperf::files::output::Output::create)
        .transpose()?;
    let (text, damaged) = render(
        &sources(&a.files()?)?,
        (&a.opts, Some(&a.narrow)),
        graph,
        a.event.select(),
    )?;
    match out {
        Some(mut o) => {
            o.write_all(text.as_bytes())
                .map_err(|e| anyhow::anyhow!("cannot write the report: {e}"))?;
            let dest = o.dest().clone();
            o.commit()?;
            if let Some(p) = a
                .output
                .output
                .as_ref()
                .filter(|_| dest != Dest::Stdout && !super::quiet())
            {
                eprintln!("labperf: report written to {}", p.display());
            }
        }
        None => print!("{text}"),
    }
    if damaged && a.opts.strict.strict {
        strict_exit();
    }
    Ok(())
}

/// `--strict` on a damaged file: the report stands, the exit status says 3.
pub fn strict_exit() -> ! {
    eprintln!("labperf: the file is damaged (--strict): exit status 3");
    std::process::exit(3)
}

/// Whether `record` prints its report on standard error: when standard output is not a
/// terminal. A redirected standard output (a file, a pipe) is the workload's, which writes
/// into it as it would without labperf: `labperf record -- ./prog > out` leaves only the
/// program's bytes in `out`, and the report still shows on the terminal, where standard
/// error goes (`2> report.txt` keeps it; `labperf report FILE` prints it again anywhere).
/// On a terminal both go to the screen, the report after the program's lines, as before.
/// Not "no report with -o": the report after recording is labperf's habit with or without
/// -o, and what it prints should not depend on where the workload's output goes.
pub fn recorded_to_stderr() -> bool {
    use std::io::IsTerminal;
    !std::io::stdout().is_terminal()
}

/// Writes `record`'s output (its report, a host's heading) where [`recorded_to_stderr`] says.
pub fn recorded_out(text: &str) {
    if recorded_to_stderr() {
        eprint!("{text}");
    } else {
        print!("{text}");
    }
}

/// The call graph of the report `record` prints: after `record -g` (the recordings hold
/// call stacks) the Children table with the caller tree under each row, as `perf report`
/// shows a `perf record -g` recording; none when --no-children, another view, --by, --pc,
/// --discard or --split is asked, or the recordings hold no stacks.
fn recorded_graph(
    srcs: &[labperf::record::load::Source],
    o: &ReportOpts,
) -> Option<labperf::views::report::Graph> {
    if o.no_children {
        return None;
    }
    let vo = labperf::views::view::Options {
        children: false,
        ..o.view_options()
    };
    // The HTML page's rule: Children where every recording is plain and one has stacks.
    let page = labperf::views::view::page_options(srcs, &vo).ok()?;
    page.children.then_some(labperf::views::report::Graph {
        order: labperf::views::report::Order::Caller,
        depth: 0,
    })
}

/// Builds and prints `record`'s report of its file (where [`recorded_out`] writes; after
/// `-g` with Children and the caller tree), under `heading` when given (a host's name);
/// warnings go to stderr first. Returns whether the file was damaged.
pub fn print(file: &std::path::Path, o: &ReportOpts, heading: Option<&str>) -> Result<bool> {
    print_many(std::slice::from_ref(&file.to_path_buf()), o, heading)
}

/// [`print`] of one report of several files; returns whether any was damaged.
pub fn print_many(files: &[PathBuf], o: &ReportOpts, heading: Option<&str>) -> Result<bool> {
    let srcs = sources(files)?;
    let (text, damaged) = render(&srcs, (o, None), recorded_graph(&srcs, o), None)?;
    // The heading right above its report, after the warnings (one stream when redirected).
    let heading = heading.map(|h| format!("{h}\n")).unwrap_or_default();
    recorded_out(&format!("{heading}{text}"));
    Ok(damaged)
}

/// The files opened, each once (perf.data imported on the fly: `import::source`); a file
/// named twice is refused.
fn sources(files: &[PathBuf]) -> Result<Vec<labperf::record::load::Source>> {
    super::opts::once_each(files)?;
    files.iter().map(|f| super::import::source(f)).collect()
}

/// The report of one file or several merged, rendered; warnings go to stderr. HTML adds
/// the recordings' facts and, when they hold samples, their flame graph.
fn render(
    srcs: &[labperf::record::load::Source],
    (o, narrow): (&ReportOpts, Option<&NarrowOpts>),
    graph: Option<labperf::views::report::Graph>,
    event: Option<labperf::record::events::Select>,
) -> Result<(String, bool)> {
    super::opts::warn_wall(srcs, event.as_ref());
    let mut vo = labperf::views::view::Options {
        graph,
        event,
        ..o.view_options()
    };
    if let Some(n) = narrow {
        n.apply(&mut vo);
    }
    // The HTML page of a recording with call stacks has Children beside Self.
    let vo = match o.format.get() {
        // (A file that cannot be read is the build's to explain.)
        labperf::render::table::Format::Html => {
            labperf::views::view::page_options(srcs, &vo).unwrap_or(vo)
        }
        _ => vo,
    };
    let r = match srcs {
        [one] => labperf::views::view::build(one, &vo)
            .with_context(|| format!("cannot report {}", one.name.display()))?,
        _ => labperf::views::view::build_many(srcs, &vo)
            .context("cannot report these files together: check the paths")?,
    };
    for w in r.warnings.iter().filter(|_| !super::quiet()) {
        eprintln!("{}", labperf::text::show_text(w));
    }
    let text = r.render_page(o.format.get(), o.top, colour(), || html_page(srcs, &vo, o))?;
    Ok((text, r.damaged))
}

/// What the HTML page adds to a report: the recordings' facts and, when they hold samples,
/// their flame graphs (one per sampled event, the busiest `MAX_FLAMES`) and, of one
/// recording, its busiest functions annotated (`MAX_ANNOTATED`, as `labperf annotate`
/// shows them).
fn html_page(
    srcs: &[labperf::record::load::Source],
    vo: &labperf::views::view::Options,
    o: &ReportOpts,
) -> Result<labperf::render::html::Extras> {
    let sel = vo.event.as_ref();
    let st = labperf::symbolize::stacks::collect_filtered(
        srcs,
        o.symbols.search(),
        false,
        sel,
        &vo.filter,
        vo.max_stack,
    )
    .context("cannot read the recordings' stacks for the flame graph")?;
    let svg = |event: Option<u32>| -> Result<String> {
        let mut flame = Vec::new();
        if let Some(n) = st
            .svg_of(event, inferno::flamegraph::Direction::Inverted, &mut flame)
            .context("cannot draw the flame graph")?
        {
            if !super::quiet() {
                eprintln!("{n}");
            }
        }
        Ok(String::from_utf8_lossy(&flame).into_owned())
    };
    let sampled = st.sampled_events();
    let mut flames = Vec::new();
    if let [_] = &sampled[..] {
        flames.push(labperf::render::html::Flame {
            event: None,
            svg: svg(None)?,
        });
    }
    // Several events: a flame graph per event (their periods never add up), each drawn
    // from the same stacks, one at a time; the busiest MAX_FLAMES events only.
    if sampled.len() > 1 {
        let mut drawn = sampled.clone();
        drawn.sort_by_key(|&(e, n, _)| (std::cmp::Reverse(n), e));
        drawn.truncate(labperf::render::html::MAX_FLAMES);
        drawn.sort_by_key(|&(e, _, _)| e);
        if sampled.len() > drawn.len() && !super::quiet() {
            eprintln!(
                "note: the HTML report draws the flame graphs of the {} events with the most samples of {}; `labperf export --format svg --event NAME` draws any other",
                drawn.len(),
                sampled.len()
            );
        }
        for (e, _, _) in drawn {
            flames.push(labperf::render::html::Flame {
                event: Some(st.events.names[e as usize].clone()),
                svg: svg(Some(e))?,
            });
        }
    }
    // The facts of the recordings; their stacks go now.
    let runs = {
        let mut st = st;
        std::mem::take(&mut st.runs)
    };
    Ok(labperf::render::html::Extras {
        runs,
        flames,
        annotated: annotated(srcs, vo),
    })
}

/// The busiest functions of a single recording, annotated for the HTML page (none for
/// several, or where none can be: no samples, no binary, no objdump).
fn annotated(
    srcs: &[labperf::record::load::Source],
    vo: &labperf::views::view::Options,
) -> Vec<labperf::render::html::Annotated> {
    use labperf::views::annotate;
    let [src] = srcs else {
        return Vec::new();
    };
    let o = annotate::Options {
        symbol: None,
        search: vo.search.clone(),
        event: vo.event.clone(),
    };
    annotate::busiest(src, &o, labperf::render::html::MAX_ANNOTATED)
        .unwrap_or_default()
        .into_iter()
        .map(|a| labperf::render::html::Annotated {
            name: a.name.clone(),
            text: a.render(false),
        })
        .collect()
}

/// Colours for a table on a terminal, unless NO_COLOR is set.
pub fn colour() -> bool {
    use std::io::IsTerminal;
    std::io::stdout().is_terminal() && std::env::var_os("NO_COLOR").is_none()
}
