//! The plain view: samples aggregated by perf's sort keys (symbol, mapped file, process
//! name, pid, address, source line; combinable), of one recording or of several merged
//! (`--by host|run` keeps them apart).

use crate::load::{self, FileInfo, LoadError};
use crate::symbols::{label, Location, Search, Symbolizer};
pub use crate::table::Format;
use crate::table::{Cell, Column, Table};
use serde::Serialize;
use serde_json::json;
use std::collections::HashMap;

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum By {
    Symbol,
    Dso,
    Pc,
    /// Per recording machine (the header's hostname) and symbol.
    Host,
    /// Per recording (the file's name) and symbol.
    Run,
    /// Per source line (`file:line`) in the sampled function (for inlined code, the line
    /// that calls it), from the binary's DWARF or its separate debug file; the function's
    /// name where there is none.
    Srcline,
    /// Per process name (the main thread's `comm`: its program's name after exec).
    Comm,
    /// Per process id.
    Pid,
}

impl By {
    /// The keys of `--by A,B,...` in order, each once: symbol when none is given, and
    /// after `host`/`run` alone (they group the functions).
    pub fn keys(given: &[By]) -> Vec<By> {
        let mut v: Vec<By> = Vec::new();
        for &b in given {
            if !v.contains(&b) {
                v.push(b);
            }
        }
        if v.iter().all(|b| matches!(b, By::Host | By::Run)) {
            v.push(By::Symbol);
        }
        v
    }

    /// Whether this key names code within a file (the row then shows the file too).
    fn in_file(self) -> bool {
        matches!(self, By::Symbol | By::Srcline | By::Pc)
    }
}

/// One output row.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct Row {
    /// The values of the report's keys, in order.
    pub keys: Vec<String>,
    pub dso: String,
    pub samples: u64,
    pub period: u64,
    /// Share of samples, percent.
    pub percent: f64,
}

/// A finished report.
#[derive(Debug)]
pub struct Report {
    pub total_samples: u64,
    pub total_period: u64,
    pub rows: Vec<Row>,
    pub info: FileInfo,
    pub warnings: Vec<String>,
    /// The keys rows are grouped by ([`By::keys`]).
    pub by: Vec<By>,
    /// More recordings merged into this one: their names and what they say of themselves.
    pub others: Vec<(String, FileInfo)>,
}

/// Reads `src` and aggregates its samples.
pub fn build(src: &load::Source, by: &[By], search: Search) -> Result<Report, LoadError> {
    build_many(std::slice::from_ref(src), by, search)
}

/// The run name of a recording: its file name without the extension.
pub fn run_name(src: &load::Source) -> String {
    src.name.file_stem().map_or_else(
        || src.name.display().to_string(),
        |s| s.to_string_lossy().into_owned(),
    )
}

/// Reads each of `srcs` and aggregates their samples together; each file's addresses are
/// named with its own side-band records and recording machine.
pub fn build_many(srcs: &[load::Source], by: &[By], search: Search) -> Result<Report, LoadError> {
    let by = By::keys(by);
    // LABPERF_THREADS caps the decoding threads (default: one per CPU).
    let threads = std::env::var("LABPERF_THREADS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get()));
    // (keys, dso) → (samples, period): each file name held once (a file can name a new
    // address in a few bytes, so what is kept per address is what memory is).
    type Key = (Vec<String>, std::rc::Rc<str>);
    let mut acc: HashMap<Key, (u64, u64)> = HashMap::new();
    let mut dsos: std::collections::HashSet<std::rc::Rc<str>> = Default::default();
    let (mut total, mut total_period) = (0u64, 0u64);
    let mut infos: Vec<(String, FileInfo)> = Vec::new();
    let mut warnings = Vec::new();
    for src in srcs {
        let counts = load::sample_counts(src, threads)?;
        // Addresses are resolved once every side-band record (mmap2, fork) is known.
        let mut sym = Symbolizer::new(search.clone());
        let info = &counts.info;
        sym.recorded_on(src, info.header.as_ref(), info.header_ext.as_ref());
        let mut parents = HashMap::new();
        for r in counts.others.iter().cloned() {
            if let load::Side::Fork { pid, ppid } = r {
                parents.insert(pid, ppid);
            }
            sym.observe(&r.record());
        }
        let host = info
            .header
            .as_ref()
            .map_or_else(|| "unknown".to_string(), |h| h.hostname.clone());
        let run = run_name(src);
        for (&(pid, ip), &(n, period)) in &counts.by_ip {
            let Location { dso, sym: s, vaddr } = sym.resolve(pid, ip);
            let keys = by
                .iter()
                .map(|k| match k {
                    By::Host => host.clone(),
                    By::Run => run.clone(),
                    By::Comm => counts.comm(pid, &parents),
                    By::Pid => pid.to_string(),
                    By::Symbol => label(&dso, s.as_deref(), vaddr),
                    By::Dso => dso.to_string(),
                    By::Srcline => match sym.source(pid, ip).line {
                        Some((file, line)) => {
                            format!("{}:{line}", crate::table::file_name(&file))
                        }
                        None => label(&dso, s.as_deref(), vaddr),
                    },
                    By::Pc => format!(
                        "{vaddr:#x}{}",
                        s.as_ref().map(|n| format!(" <{n}>")).unwrap_or_default()
                    ),
                })
                .collect();
            // The file is a column only beside code within it.
            let dso: &str = if by.iter().any(|k| k.in_file()) {
                &dso
            } else {
                ""
            };
            let dso = match dsos.get(dso) {
                Some(d) => d.clone(),
                None => {
                    let d: std::rc::Rc<str> = dso.into();
                    dsos.insert(d.clone());
                    d
                }
            };
            let e = acc.entry((keys, dso)).or_default();
            e.0 += n;
            e.1 = e.1.saturating_add(period);
            total += n;
            total_period = total_period.saturating_add(period);
        }
        warnings.append(&mut sym.warnings);
        infos.push((src.name.display().to_string(), counts.info));
    }
    drop(dsos);
    let mut rows: Vec<Row> = acc
        .into_iter()
        .map(|((keys, dso), (samples, period))| Row {
            keys,
            dso: dso.to_string(),
            samples,
            period,
            percent: if total > 0 {
                100.0 * samples as f64 / total as f64
            } else {
                0.0
            },
        })
        .collect();
    rows.sort_by(|a, b| {
        b.samples
            .cmp(&a.samples)
            .then_with(|| a.keys.cmp(&b.keys))
            .then_with(|| a.dso.cmp(&b.dso))
    });
    warnings.sort();
    warnings.dedup();
    let (_, info) = infos.remove(0);
    Ok(Report {
        total_samples: total,
        total_period,
        rows,
        warnings,
        info,
        by,
        others: infos,
    })
}

/// `report --children`: per function (symbol and file), the samples whose stack holds it
/// (Children: itself and its callees, each sample once however often the function recurs)
/// and those sampled in it (Self), as shares of all samples; the busiest `top` rows (0:
/// all). The stacks are `export`'s: the same names, one frame per return address.
pub fn children(
    srcs: &[load::Source],
    search: Search,
    top: usize,
    graph: Option<Graph>,
) -> Result<crate::table::Report, LoadError> {
    let st = crate::export::collect_many(srcs, search, false)?;
    // Per frame: (children, self) in samples; the thread's name (each stack's root) is
    // not a function.
    let mut acc: Vec<(u64, u64)> = vec![(0, 0); st.frames.len()];
    let mut seen: Vec<u32> = vec![u32::MAX; st.frames.len()];
    let mut stacked = 0u64;
    for (k, s) in st.stacks.iter().enumerate() {
        let fr = st.path(s).get(1..).unwrap_or_default();
        let Some((&leaf, callers)) = fr.split_last() else {
            continue;
        };
        if !callers.is_empty() {
            stacked += s.samples;
        }
        acc[leaf as usize].1 += s.samples;
        for &f in fr {
            if seen[f as usize] != k as u32 {
                seen[f as usize] = k as u32;
                acc[f as usize].0 += s.samples;
            }
        }
    }
    let total = st.total_samples;
    let mut rows: Vec<(usize, u64, u64)> = acc
        .iter()
        .enumerate()
        .filter(|(_, a)| a.0 > 0)
        .map(|(i, a)| (i, a.0, a.1))
        .collect();
    rows.sort_by(|a, b| {
        b.1.cmp(&a.1)
            .then(b.2.cmp(&a.2))
            .then_with(|| st.frames[a.0].name.cmp(&st.frames[b.0].name))
    });
    if top > 0 {
        rows.truncate(top);
    }
    let pct = |n: u64| Cell::Percent {
        value: if total > 0 {
            100.0 * n as f64 / total as f64
        } else {
            0.0
        },
        places: 2,
    };
    let mut t = Table::new(
        "functions",
        vec![
            Column::right("children_pct", "Children", 8),
            Column::right("self_pct", "Self", 8),
            Column::right("children", "Samples", 9),
            Column::right("self", "Self samples", 9),
            Column::left("name", "Symbol", 40),
            Column::left("dso", "DSO", 0),
        ],
    );
    t.hidden = vec!["self"];
    let tree = graph.map(|g| call_graph(&st, &rows, g, total));
    let (tree, cut) = match tree {
        Some((t, cut)) => (Some(t), cut),
        None => (None, None),
    };
    t.rows = rows
        .into_iter()
        .map(|(i, c, s)| {
            let f = &st.frames[i];
            vec![
                pct(c),
                pct(s),
                Cell::Int(c),
                Cell::Int(s),
                Cell::text(f.name.clone()),
                Cell::file(&f.dso),
            ]
        })
        .collect();
    let mut warnings: Vec<String> = st.warnings.clone();
    warnings.extend(cut);
    if total > 0 && stacked == 0 {
        warnings.push("note: no sample has a call stack (record with -g, or --call-graph fp): Children equals Self".into());
    }
    let stacks: Vec<(String, Option<crate::quality::Quality>)> = srcs
        .iter()
        .map(|s| s.name.display().to_string())
        .zip(st.runs.iter().map(|r| r.stacks.clone()))
        .collect();
    let info = st
        .runs
        .into_iter()
        .next()
        .map(|r| r.info)
        .unwrap_or_default();
    let mut summary = serde_json::Map::new();
    summary.insert("total_samples".into(), serde_json::json!(total));
    summary.insert("stacked_samples".into(), serde_json::json!(stacked));
    summary.insert("files".into(), serde_json::json!(srcs.len()));
    let mut r = crate::table::Report {
        heading: vec![format!(
            "# {total} samples, {stacked} with a call stack; Children: the function and its callees"
        )],
        summary,
        tables: std::iter::once(t).chain(tree).collect(),
        ..crate::table::Report::of_file("plain", &info, warnings)
    };
    crate::quality::annotate(&mut r, &stacks);
    Ok(r)
}

/// Which way `report --call-graph` walks the stacks from each listed function.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Order {
    /// Down: the functions it calls, and theirs (perf's `caller`).
    Caller,
    /// Up: the functions that call it, and theirs, to the thread's first function (perf's
    /// `callee`).
    Callee,
}

/// `report --call-graph ORDER --depth N`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Graph {
    pub order: Order,
    /// Levels below each listed function (0: all).
    pub depth: usize,
}

/// Branches under this share of all samples are left out of a call graph (perf's default
/// `--call-graph graph,0.5`).
pub const GRAPH_PERCENT_LIMIT: f64 = 0.5;

/// The deepest level of a call graph (perf's default `--max-stack`).
pub const GRAPH_MAX_DEPTH: usize = 127;

/// What the `call_graph` table may hold, in bytes of its rows (estimated: each row's names,
/// its indent and its cells), shared evenly by the listed functions: a tree that would
/// hold more stops at the level before (a note says where).
pub const GRAPH_BUDGET: u64 = 8 << 20;

/// The `call_graph` table: under each of `rows` (the listed functions, busiest first), the
/// tree of the paths its samples take, callees (`Caller`) or callers (`Callee`), each node
/// with the samples that pass through it. A sample counts under a function once, at the
/// function's outermost frame (recursion does not count it twice); siblings are busiest
/// first, then by name. A tree is built a level at a time from the stacks through its
/// function, branches under [`GRAPH_PERCENT_LIMIT`] left out as they come: its memory is
/// that of the stacks and the rows it shows. Returns a note when a tree was cut short of
/// `g.depth` ([`GRAPH_MAX_DEPTH`], [`GRAPH_BUDGET`]).
fn call_graph(
    st: &crate::export::Stacks,
    rows: &[(usize, u64, u64)],
    g: Graph,
    total: u64,
) -> (Table, Option<String>) {
    struct Node {
        frame: u32,
        samples: u64,
        kids: Vec<usize>,
    }
    // The stacks through a node: (stack, where the node's frame is in it).
    type Members = Vec<(u32, u32)>;
    let pct = |n: u64| Cell::Percent {
        value: if total > 0 {
            100.0 * n as f64 / total as f64
        } else {
            0.0
        },
        places: 2,
    };
    let limit = ((GRAPH_PERCENT_LIMIT / 100.0 * total as f64).ceil() as u64).max(1);
    let levels = match g.depth {
        0 => GRAPH_MAX_DEPTH,
        d => d.min(GRAPH_MAX_DEPTH),
    };
    let budget = GRAPH_BUDGET / rows.len().max(1) as u64;
    let mut cut: Option<(String, usize, &str)> = None;
    let mut t = Table::new(
        "call_graph",
        vec![
            Column::left("function", "Function", 0),
            Column::right("depth", "Depth", 5),
            Column::right("percent", "Percent", 8),
            Column::right("samples", "Samples", 9),
            Column::left("tree", "Call graph", 40),
            Column::left("name", "Symbol", 0),
            Column::left("dso", "DSO", 0),
        ],
    );
    t.ranked = false;
    t.hidden = vec!["function", "depth", "name"];
    t.title = Some(match g.order {
        Order::Caller => "Call graph (caller): the functions each one calls".into(),
        Order::Callee => "Call graph (callee): the functions that call each one".into(),
    });
    // Frames of a stack after its thread's name, outermost first.
    let body = |s: u32| st.path(&st.stacks[s as usize]).get(1..).unwrap_or_default();
    let step = |s: u32, at: u32| -> Option<(u32, u32)> {
        let fr = body(s);
        let next = match g.order {
            Order::Caller => at.checked_add(1)?,
            Order::Callee => at.checked_sub(1)?,
        };
        fr.get(next as usize).map(|&f| (f, next))
    };
    for &(top, children, _) in rows {
        let top = top as u32;
        let name = &st.frames[top as usize].name;
        // What a row costs: its names (the function's, the node's twice), its file, its
        // indent, its cells.
        let row_cost = |frame: u32, depth: usize| -> u64 {
            let f = &st.frames[frame as usize];
            (name.len() + 2 * f.name.len() + f.dso.len() + 3 * depth + 200) as u64
        };
        let mut cost = row_cost(top, 0);
        // The tree of this function's paths; node 0 is the function itself.
        let mut nodes = vec![Node {
            frame: top,
            samples: children,
            kids: Vec::new(),
        }];
        // The stacks through each node of the level being built: (stack, where in it).
        let mut level: Vec<(usize, Members)> = vec![(
            0,
            (0..st.stacks.len() as u32)
                .filter_map(|s| Some((s, body(s).iter().position(|&f| f == top)? as u32)))
                .collect(),
        )];
        for depth in 1.. {
            // Each node's children: the next frame of each of its stacks.
            // (parent, frame, samples, its stacks) of each child.
            let mut next: Vec<(usize, u32, u64, Members)> = Vec::new();
            for (parent, members) in &level {
                let mut kid_of: HashMap<u32, usize> = HashMap::new();
                let first = next.len();
                for &(s, at) in members {
                    let Some((f, at)) = step(s, at) else {
                        continue;
                    };
                    let k = *kid_of.entry(f).or_insert_with(|| {
                        next.push((*parent, f, 0, Vec::new()));
                        next.len() - 1
                    });
                    next[k].2 += st.stacks[s as usize].samples;
                    next[k].3.push((s, at));
                }
                // Branches too narrow to show go now, with their stacks.
                let mut k = first;
                for j in first..next.len() {
                    if next[j].2 >= limit {
                        next.swap(k, j);
                        k += 1;
                    }
                }
                next.truncate(k);
            }
            if next.is_empty() {
                break;
            }
            let more: u64 = next.iter().map(|n| row_cost(n.1, depth)).sum();
            let why = if depth > levels {
                // As deep as asked, or as perf's --max-stack.
                (g.depth == 0 || g.depth > levels).then_some("perf's --max-stack")
            } else if cost + more > budget {
                Some("the call graph's size")
            } else {
                None
            };
            if depth > levels || why.is_some() {
                if let Some(why) = why {
                    if cut.as_ref().is_none_or(|c| c.1 > depth - 1) {
                        cut = Some((name.clone(), depth - 1, why));
                    }
                }
                break;
            }
            cost += more;
            level = next
                .into_iter()
                .map(|(parent, frame, samples, members)| {
                    nodes.push(Node {
                        frame,
                        samples,
                        kids: Vec::new(),
                    });
                    let n = nodes.len() - 1;
                    nodes[parent].kids.push(n);
                    (n, members)
                })
                .collect();
        }
        drop(level);
        // Depth first, busiest child first.
        let mut todo: Vec<(usize, usize, String)> = vec![(0, 0, String::new())];
        while let Some((n, depth, indent)) = todo.pop() {
            let node = &nodes[n];
            let f = &st.frames[node.frame as usize];
            let tree = if depth == 0 {
                f.name.clone()
            } else {
                format!("{indent}└─ {}", f.name)
            };
            t.rows.push(vec![
                Cell::text(name.clone()),
                Cell::Int(depth as u64),
                pct(node.samples),
                Cell::Int(node.samples),
                Cell::text(tree),
                Cell::text(f.name.clone()),
                Cell::file(&f.dso),
            ]);
            let mut kids = node.kids.clone();
            kids.sort_by(|&a, &b| {
                nodes[b].samples.cmp(&nodes[a].samples).then_with(|| {
                    st.frames[nodes[a].frame as usize]
                        .name
                        .cmp(&st.frames[nodes[b].frame as usize].name)
                })
            });
            let inner = if depth == 0 {
                String::new()
            } else {
                format!("{indent}   ")
            };
            for &k in kids.iter().rev() {
                todo.push((k, depth + 1, inner.clone()));
            }
        }
    }
    t.summary.insert(
        "order".into(),
        serde_json::json!(match g.order {
            Order::Caller => "caller",
            Order::Callee => "callee",
        }),
    );
    t.summary.insert("depth".into(), serde_json::json!(g.depth));
    t.summary.insert(
        "percent_limit".into(),
        serde_json::json!(GRAPH_PERCENT_LIMIT),
    );
    let note = cut.map(|(f, depth, why)| {
        format!(
            "note: the call graph stops at depth {depth} (under {}), as deep as {why} allows; --depth N shows fewer levels",
            crate::text::show(&f)
        )
    });
    (t, note)
}

impl Report {
    /// Keeps the `top` busiest rows (0: all); totals and shares stay those of every row.
    pub fn keep(mut self, top: usize) -> Report {
        if top > 0 {
            self.rows.truncate(top);
            self.rows.shrink_to_fit();
        }
        self
    }

    /// The report in the table model: a column per key (`name` for the code key, or for
    /// the file when it is the only key, as before keys combined), then the file beside
    /// code keys.
    pub fn table(self) -> crate::table::Report {
        let only_dso = self.by == [By::Dso];
        let mut columns = vec![
            Column::right("percent", "Overhead", 8),
            Column::right("samples", "Samples", 9),
            Column::right("period", "Period", 12),
        ];
        for k in &self.by {
            columns.push(match k {
                By::Host => Column::left("host", "Host", 12),
                By::Run => Column::left("run", "Run", 12),
                By::Comm => Column::left("comm", "Command", 16),
                By::Pid => Column::right("pid", "Pid", 7),
                By::Dso if only_dso => Column::left("name", "DSO", 40),
                By::Dso => Column::left("dso", "DSO", 24),
                By::Symbol => Column::left("name", "Symbol", 40),
                By::Srcline => Column::left("name", "Source line", 40),
                By::Pc => Column::left("name", "PC", 40),
            });
        }
        let file_column = self.by.iter().any(|k| k.in_file()) && !self.by.contains(&By::Dso);
        if file_column {
            columns.push(Column::left("dso", "DSO", 0));
        }
        let mut t = Table::new("functions", columns);
        let by = self.by.clone();
        t.rows = self
            .rows
            .into_iter()
            .map(|r| {
                let mut row = vec![
                    Cell::Percent {
                        value: r.percent,
                        places: 2,
                    },
                    Cell::Int(r.samples),
                    Cell::Int(r.period),
                ];
                for (k, v) in by.iter().zip(r.keys) {
                    row.push(match k {
                        By::Pid => v.parse().map_or(Cell::Text(v), Cell::Int),
                        By::Dso => Cell::file(&v),
                        _ => Cell::Text(v),
                    });
                }
                if file_column {
                    row.push(Cell::file(&r.dso));
                }
                row
            })
            .collect();
        let mut summary = serde_json::Map::new();
        summary.insert("total_samples".into(), json!(self.total_samples));
        summary.insert("total_period".into(), json!(self.total_period));
        if !self.others.is_empty() {
            summary.insert("files".into(), json!(1 + self.others.len()));
        }
        // Each merged file's own warnings (damage, losses), said with its name.
        let mut warnings: Vec<String> = Vec::new();
        let mut damaged = false;
        for (name, info) in &self.others {
            damaged |= info.damaged();
            for w in info.warnings() {
                let (kind, rest) = w.split_once(": ").unwrap_or(("warning", &w));
                warnings.push(format!("{kind}: {}: {rest}", crate::text::show(name)));
            }
        }
        warnings.extend(self.warnings);
        if self.total_samples == 0 {
            warnings.push("note: the file holds no samples (was the workload too short, or the period too long?)".into());
        }
        crate::table::Report {
            heading: vec![format!(
                "# {} samples, total period {}{}",
                self.total_samples,
                self.total_period,
                if self.others.is_empty() {
                    String::new()
                } else {
                    format!(", {} files merged", 1 + self.others.len())
                }
            )],
            summary,
            tables: vec![t],
            damaged: self.info.damaged() || damaged,
            ..crate::table::Report::of_file("plain", &self.info, warnings)
        }
    }
}
