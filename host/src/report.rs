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
        let Some((&leaf, callers)) = s.frames[1..].split_last() else {
            continue;
        };
        if !callers.is_empty() {
            stacked += s.samples;
        }
        acc[leaf as usize].1 += s.samples;
        for &f in &s.frames[1..] {
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
    if total > 0 && stacked == 0 {
        warnings.push("note: no sample has a call stack (record with -g, or --call-graph fp): Children equals Self".into());
    }
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
    Ok(crate::table::Report {
        heading: vec![format!(
            "# {total} samples, {stacked} with a call stack; Children: the function and its callees"
        )],
        summary,
        tables: std::iter::once(t).chain(tree).collect(),
        ..crate::table::Report::of_file("plain", &info, warnings)
    })
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

/// The `call_graph` table: under each of `rows` (the listed functions, busiest first), the
/// tree of the paths its samples take, callees (`Caller`) or callers (`Callee`), each node
/// with the samples that pass through it. A sample counts under a function once, at the
/// function's outermost frame (recursion does not count it twice); siblings are busiest
/// first, then by name.
fn call_graph(
    st: &crate::export::Stacks,
    rows: &[(usize, u64, u64)],
    g: Graph,
    total: u64,
) -> Table {
    struct Node {
        frame: u32,
        samples: u64,
        kids: Vec<usize>,
    }
    let pct = |n: u64| Cell::Percent {
        value: if total > 0 {
            100.0 * n as f64 / total as f64
        } else {
            0.0
        },
        places: 2,
    };
    let limit = (GRAPH_PERCENT_LIMIT / 100.0 * total as f64).ceil() as u64;
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
    for &(top, children, _) in rows {
        let top = top as u32;
        // The tree of this function's paths; node 0 is the function itself.
        let mut nodes = vec![Node {
            frame: top,
            samples: children,
            kids: Vec::new(),
        }];
        let mut index: HashMap<(usize, u32), usize> = HashMap::new();
        for s in &st.stacks {
            // frames[0] is the thread's name, then outermost to innermost.
            let fr = &s.frames[1..];
            let Some(at) = fr.iter().position(|&f| f == top) else {
                continue;
            };
            let path: Box<dyn Iterator<Item = &u32>> = match g.order {
                Order::Caller => Box::new(fr[at + 1..].iter()),
                Order::Callee => Box::new(fr[..at].iter().rev()),
            };
            let mut parent = 0usize;
            for (d, &f) in path.enumerate() {
                if g.depth > 0 && d >= g.depth {
                    break;
                }
                let next = nodes.len();
                let n = *index.entry((parent, f)).or_insert(next);
                if n == next {
                    nodes.push(Node {
                        frame: f,
                        samples: 0,
                        kids: Vec::new(),
                    });
                    nodes[parent].kids.push(n);
                }
                nodes[n].samples += s.samples;
                parent = n;
            }
        }
        let name = &st.frames[top as usize].name;
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
            let mut kids: Vec<usize> = node
                .kids
                .iter()
                .copied()
                .filter(|&k| nodes[k].samples >= limit.max(1))
                .collect();
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
    t
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
