//! The one report pipeline: what a file is (its recipe) picks the view, each view turns
//! the records into the table model, and `table` renders it. Options that do not apply
//! to the chosen view are refused here, with the reason.

use crate::record::load::{self, LoadError, Source};
use crate::render::table::Report;
use crate::symbolize::symbols::Search;
use crate::views::metrics::{DiscardMode, MetricsError, Split};
use crate::views::report::By;
use labperf_common::Recipe;

/// What a report shows. `labperf report FILE` takes it from the file's header.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum View {
    /// Samples per function (or per mapped file, or per address: --by).
    Plain,
    /// Per-function CPI and miss rates of a strobed recording (`record --metrics`).
    Metrics,
    /// Slot-weighted TopDown per function, or the intervals of `stat --topdown`.
    Topdown,
    /// Alpha ProfileMe: the DCPI-style summary, one table per PCTR1 selection.
    Profileme,
    /// Alpha DTB hits and misses by symbol and by data address.
    Mem,
    /// The counts of a `stat` recording, interval by interval.
    Intervals,
}

impl View {
    pub fn name(self) -> &'static str {
        match self {
            View::Plain => "plain",
            View::Metrics => "metrics",
            View::Topdown => "topdown",
            View::Profileme => "profileme",
            View::Mem => "mem",
            View::Intervals => "intervals",
        }
    }

    /// The view a recording of this recipe is read with.
    pub fn of(r: &Recipe) -> View {
        match r {
            Recipe::Sample { .. } => View::Plain,
            Recipe::Strobe { .. } => View::Metrics,
            Recipe::Stat => View::Intervals,
            Recipe::StatTopdown { .. } | Recipe::RecordTopdown { .. } => View::Topdown,
            Recipe::ProfileMe => View::Profileme,
            Recipe::Mem => View::Mem,
        }
    }
}

/// The options of a report; `None` where the user left an option out.
#[derive(Debug, Clone, Default)]
pub struct Options {
    /// Overrides the view the file's header names.
    pub view: Option<View>,
    /// `--by` keys (empty: by symbol).
    pub by: Vec<By>,
    pub pc: bool,
    pub discard: Option<DiscardMode>,
    pub split: Option<Split>,
    pub search: Search,
    /// The plain view per function with callees included (`--children`, perf's Children
    /// and Self columns) from the recordings' call stacks.
    pub children: bool,
    /// `--call-graph ORDER [--depth N]`: the `--children` table and, under each of its
    /// rows, the tree of callees or callers.
    pub graph: Option<crate::views::report::Graph>,
    /// The plain view keeps only the N busiest rows (0 = all), as `--top` prints them: a
    /// file with a million distinct addresses does not build a million rows to print 20.
    pub top: usize,
    /// `--event NAME|INDEX`: the plain view of one event's samples (without it, each
    /// event has its own table).
    pub event: Option<crate::record::events::Select>,
    /// `--comm`, `--pid`, `--tid`, `--dsos`, `--symbols`, `--time`, `--percentage`: the
    /// samples the plain view keeps.
    pub filter: crate::record::filter::Filter,
    /// `--max-stack N`: call stacks cut to their N innermost addresses.
    pub max_stack: Option<usize>,
    /// `--percent-limit P`: rows under P% of their event are not shown (perf's).
    pub percent_limit: Option<f64>,
}

#[derive(Debug, thiserror::Error)]
pub enum ViewError {
    #[error("the {view} view expands its rows by their callers only: pass --call-graph callee")]
    CallersOnly { view: &'static str },
    #[error(transparent)]
    Load(#[from] LoadError),
    #[error(transparent)]
    Metrics(#[from] MetricsError),
    #[error(transparent)]
    Event(#[from] crate::record::events::NoSuchEvent),
    #[error("several files are merged in the plain view only, and {file} is shown in the {view} view{why}: report it alone, or pass --view plain")]
    NotMergeable {
        file: String,
        view: &'static str,
        why: &'static str,
    },
    #[error("--children counts call stacks, which keep each frame's function and file and each stack's thread name, recording and machine, not the {key} of a sample: with --children, --by takes symbol, dso, comm, host and run")]
    ChildrenBy { key: &'static str },
    #[error("{option} applies to the {applies} view only, and {file} is shown in the {view} view{why}: drop {option}, or pass --view {applies}")]
    NotApplicable {
        option: &'static str,
        applies: &'static str,
        view: &'static str,
        file: String,
        why: &'static str,
    },
}

/// Which view a file is shown in, and why (for messages): the option, else its header.
pub fn choose(src: &Source, o: &Options) -> Result<(View, &'static str), LoadError> {
    if let Some(v) = o.view {
        return Ok((v, " (--view)"));
    }
    let p = load::peek(src)?;
    Ok(match &p.header {
        Some(h) => (
            View::of(&labperf_common::recipe_of(h, p.header_ext.as_ref())),
            " (its header says so)",
        ),
        // A file whose header is lost: its samples can still be counted.
        None => (View::Plain, " (its header is lost)"),
    })
}

fn check(src: &Source, o: &Options, view: View, why: &'static str) -> Result<(), ViewError> {
    let f = &o.filter;
    let given: [(&'static str, bool, View); 15] = [
        ("--comm", !f.comms.is_empty(), View::Plain),
        ("--pid", !f.pids.is_empty(), View::Plain),
        ("--tid", !f.tids.is_empty(), View::Plain),
        ("--dsos", !f.dsos.is_empty(), View::Plain),
        ("--symbols", !f.symbols.is_empty(), View::Plain),
        ("--time", f.time.is_some(), View::Plain),
        ("--max-stack", o.max_stack.is_some(), View::Plain),
        ("--percent-limit", o.percent_limit.is_some(), View::Plain),
        ("--by", !o.by.is_empty(), View::Plain),
        ("--event", o.event.is_some(), View::Plain),
        ("--children", o.children, View::Plain),
        ("--call-graph", o.graph.is_some(), View::Plain),
        ("--pc", o.pc, View::Profileme),
        ("--discard", o.discard.is_some(), View::Metrics),
        ("--split", o.split.is_some(), View::Metrics),
    ];
    // The metrics and TopDown views expand their rows by caller (one level up).
    if let Some(g) = o.graph {
        if matches!(view, View::Metrics | View::Topdown) {
            if g.order != crate::views::report::Order::Callee {
                return Err(ViewError::CallersOnly { view: view.name() });
            }
            return check(
                src,
                &Options {
                    graph: None,
                    ..o.clone()
                },
                view,
                why,
            );
        }
    }
    for (option, set, applies) in given {
        if set && view != applies {
            return Err(ViewError::NotApplicable {
                option,
                applies: applies.name(),
                view: view.name(),
                file: src.name.display().to_string(),
                why,
            });
        }
    }
    if o.children || o.graph.is_some() {
        for b in &o.by {
            let key = match b {
                By::Pid => "pid",
                By::Tid => "tid",
                By::Pc => "address (pc)",
                By::Srcline => "source line",
                _ => continue,
            };
            return Err(ViewError::ChildrenBy { key });
        }
    }
    if let Some(sel) = &o.event {
        let p = load::peek(src)?;
        let names = crate::record::events::Names::of(p.header.as_ref());
        crate::record::events::check(sel, [(src.name.display().to_string(), &names)])?;
    }
    Ok(())
}

/// The options of the HTML page: in the plain view, recordings whose events take call
/// stacks show Children beside Self (as `--children` does), unless another view, `--by`
/// or `--call-graph` is asked for; otherwise `o` as given.
pub fn page_options(srcs: &[Source], o: &Options) -> Result<Options, ViewError> {
    let mut page = o.clone();
    if o.children
        || o.graph.is_some()
        || !o.by.is_empty()
        || o.pc
        || o.discard.is_some()
        || o.split.is_some()
    {
        return Ok(page);
    }
    let mut stacked = false;
    for src in srcs {
        if choose(src, o)?.0 != View::Plain {
            return Ok(page);
        }
        let p = load::peek(src)?;
        stacked |= crate::symbolize::quality::Quality::of_header(p.header.as_ref()).is_some();
    }
    page.children = stacked;
    Ok(page)
}

/// Reads several recordings and builds one report of them: the plain view only (per
/// symbol, `--by host|run` keeping machines or files apart).
pub fn build_many(srcs: &[Source], o: &Options) -> Result<Report, ViewError> {
    if let [one] = srcs {
        return build(one, o);
    }
    for src in srcs {
        let (view, why) = choose(src, o)?;
        if view != View::Plain {
            return Err(ViewError::NotMergeable {
                file: src.name.display().to_string(),
                view: view.name(),
                why,
            });
        }
        check(src, o, view, why)?;
    }
    let mut r = if o.children || o.graph.is_some() {
        crate::views::report::children(
            srcs,
            o.search.clone(),
            o.top,
            o.graph,
            o.event.as_ref(),
            (&o.filter, o.max_stack, &o.by),
        )?
    } else {
        let mut r = crate::views::report::build_many(
            srcs,
            &o.by,
            o.search.clone(),
            o.event.as_ref(),
            &o.filter,
        )?
        .keep(o.top)
        .table();
        let mut stacks = Vec::new();
        for src in srcs {
            let q = crate::symbolize::measure::measure(src, &o.search)?;
            stacks.push((src.name.display().to_string(), q));
        }
        crate::render::table::annotate(&mut r, &stacks);
        r
    };
    r.view = View::Plain.name();
    limit(&mut r, o.percent_limit);
    Ok(r)
}

/// `--percent-limit P`: the rows of each ranked table under P% (of the first percent
/// column: Overhead, or Children beside Self) left out, as perf leaves them out.
fn limit(r: &mut Report, p: Option<f64>) {
    let Some(p) = p else {
        return;
    };
    for t in r.tables.iter_mut().filter(|t| t.ranked) {
        let Some(col) = t
            .columns
            .iter()
            .position(|c| c.key == "children_pct" || c.key == "percent")
        else {
            continue;
        };
        t.rows.retain(|row| match row.get(col) {
            Some(crate::render::table::Cell::Percent { value, .. }) => *value >= p,
            _ => true,
        });
    }
    r.summary
        .insert("percent_limit".into(), serde_json::json!(p));
}

/// Reads `src` and builds its report in the chosen (or named) view.
pub fn build(src: &Source, o: &Options) -> Result<Report, ViewError> {
    let (view, why) = choose(src, o)?;
    check(src, o, view, why)?;
    let search = o.search.clone();
    let mut r = match view {
        View::Plain if o.children || o.graph.is_some() => crate::views::report::children(
            std::slice::from_ref(src),
            search,
            o.top,
            o.graph,
            o.event.as_ref(),
            (&o.filter, o.max_stack, &o.by),
        )?,
        View::Plain => {
            crate::views::report::build(src, &o.by, search, o.event.as_ref(), &o.filter)?
                .keep(o.top)
                .table()
        }
        View::Metrics => {
            let (m, info) = crate::views::metrics::build(
                src,
                search,
                o.discard.unwrap_or(DiscardMode::Discard),
                o.split.unwrap_or(Split::None),
                o.graph.map(|g| g.depth),
            )?;
            m.table(&info)
        }
        View::Topdown => {
            crate::views::topdown::build(src, search, o.graph.map(|g| g.depth))?.table()
        }
        View::Profileme => {
            let r = crate::views::profileme::build(src, o.pc, search)?;
            let none = r.total == 0;
            let mut t = r.table();
            if none {
                t.warnings.push("note: the file holds no ProfileMe samples: record them on an Alpha EV67 or later with `labperf record --profileme --host HOST`".into());
            }
            t
        }
        View::Mem => {
            let r = crate::views::profileme::build_mem(src, search)?;
            let none = r.loads + r.stores + r.prefetches == 0;
            let mut t = r.table();
            if none {
                t.warnings.push("note: the file holds no samples with a DTB data source: record with `labperf record --mem --host HOST` on an Alpha EV67 or later".into());
            }
            t
        }
        View::Intervals => crate::views::intervals::build(src)?,
    };
    // How far the call stacks reach (`--children` has counted them as it read them).
    let counted = matches!(view, View::Plain) && (o.children || o.graph.is_some());
    if !counted && !matches!(view, View::Intervals) {
        let q = crate::symbolize::measure::measure(src, &o.search)?;
        crate::render::table::annotate(&mut r, &[(src.name.display().to_string(), q)]);
    }
    r.view = view.name();
    if view == View::Plain {
        limit(&mut r, o.percent_limit);
    }
    Ok(r)
}
