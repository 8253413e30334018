//! TopDown reports: the interval table of `stat --topdown` recordings and the per-symbol
//! table of `record --topdown` ones (slot-weighted metric deltas between a thread's
//! consecutive samples), as table (perf's colours), CSV or JSON.

use crate::record::load::{self, FileInfo, LoadError};
use crate::render::table::{Cell, Column, Table};
use crate::symbolize::symbols::{label, Search, Symbolizer};
use labperf_common::topdown::{self as td, Kind, Layout};
use labperf_common::{Header, Record};
use serde::Serialize;
use serde_json::json;
use std::collections::HashMap;
use std::path::Path;

/// The TopDown layout of a recording, from its header (None: not a TopDown recording).
pub fn layout_of(h: &Header) -> Option<Layout> {
    let names = h.events.iter().map(|e| e.name.as_str());
    let kind = if names.clone().any(|n| n == td::LEGACY_EVENTS[0]) {
        Kind::Legacy
    } else if names.clone().any(|n| n == td::SLOTS.0) {
        Kind::Metrics
    } else {
        return None;
    };
    let level = if names.clone().any(|n| n == td::LEVEL2_EVENTS[0].0) {
        2
    } else {
        1
    };
    Some(Layout::new(kind, level, names))
}

/// The metric keys of the columns, for CSV and JSON.
fn keys(l: &Layout) -> Vec<&'static str> {
    let mut k = vec![
        "retiring",
        "bad_speculation",
        "frontend_bound",
        "backend_bound",
    ];
    if l.level == 2 {
        k.extend([
            "heavy_operations",
            "light_operations",
            "branch_mispredict",
            "machine_clears",
            "fetch_latency",
            "fetch_bandwidth",
            "memory_bound",
            "core_bound",
        ]);
    }
    k
}

/// The level-1 metric each column is coloured as.
const COLOUR_AS: [&str; 4] = ["retiring", "bad-spec", "fe-bound", "be-bound"];

/// One line: its time (stat) or symbol (record), and its ratios.
#[derive(Debug, Clone, Serialize)]
pub struct Line {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub time_s: Option<f64>,
    /// The interval's end in ns (the table prints it exactly, as the agent does).
    #[serde(skip)]
    pub time_ns: Option<u64>,
    /// The ratios as numerators over one denominator (the table's integer rounding).
    #[serde(skip)]
    pub parts: Option<(Vec<Option<u64>>, u64)>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tid: Option<u32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub symbol: Option<String>,
    /// The function the samples return to (the callers table only).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub caller: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub dso: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub samples: Option<u64>,
    /// Slots attributed to the line (the weight of its ratios).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub slots: Option<u64>,
    /// Fractions in column order; None when perf would print none (fewer than two
    /// metrics above zero), a None entry for a metric not measured.
    pub ratios: Option<Vec<Option<f64>>>,
}

/// A finished TopDown report.
#[derive(Debug)]
pub struct Report {
    pub layout: Layout,
    pub by_symbol: bool,
    pub lines: Vec<Line>,
    /// `--call-graph callee`: each function's lines split by its caller (None: not asked).
    pub callers: Option<Vec<Line>>,
    pub total: Option<Line>,
    pub info: FileInfo,
    pub warnings: Vec<String>,
}

fn not_topdown(path: &Path) -> LoadError {
    LoadError::NotTopDown { path: path.into() }
}

/// A `record --topdown` sample as the report needs it: pid, tid, ip, its group values and
/// its return addresses (empty unless callers are asked).
type TdSample = (u32, u32, u64, Vec<u64>, Vec<u64>);

/// Reads a `stat --topdown` or `record --topdown` recording; `by_caller` (`report
/// --call-graph callee [--depth N]`) adds the table of each function's callers, N frames up.
pub fn build(
    src: &load::Source,
    search: Search,
    by_caller: Option<usize>,
) -> Result<Report, LoadError> {
    let path = src.name.as_path();
    let mut callers = match by_caller {
        Some(depth) => Some(crate::symbolize::callers::Callers::of(src, &search, depth)?),
        None => None,
    };
    let mut sym = Symbolizer::new(search);
    let (intervals, samples, info) = read(src, &mut sym, &mut callers)?;
    sym.recorded_on(src, info.header.as_ref(), info.header_ext.as_ref());
    let h = info.header.as_ref().ok_or_else(|| not_topdown(path))?;
    let layout = layout_of(h).ok_or_else(|| not_topdown(path))?;
    let shape = Shape {
        layout: &layout,
        slots_at: h.events.iter().position(|e| e.name == td::SLOTS.0),
        n: h.events.len(),
    };
    let by_symbol = h.mode.starts_with("sample") || !samples.is_empty();
    let (lines, caller_lines, total) = if !by_symbol {
        let (lines, total) = shape.interval_lines(&intervals);
        (lines, None, total)
    } else {
        let acc = shape.accumulate(samples, &mut sym, callers.as_mut());
        let (lines, caller_lines, total) = shape.symbol_lines(acc, callers.is_some());
        (lines, caller_lines, Some(total))
    };
    // Each with what it is: a symbol that could not be read, or a note of the agent's.
    let mut warnings: Vec<String> = std::mem::take(&mut sym.warnings)
        .into_iter()
        .map(|w| format!("warning: {w}"))
        .collect();
    warnings.extend(h.notes.iter().map(|n| format!("note: {n}")));
    warnings.extend(callers.and_then(|c| c.note()));
    if by_caller.is_some() && !by_symbol {
        warnings.push("note: a `stat --topdown` recording has intervals, not samples: there are no callers to expand by (record --topdown -g)".into());
    }
    Ok(Report {
        layout,
        by_symbol,
        lines,
        callers: caller_lines,
        total,
        info,
        warnings,
    })
}

/// The intervals and samples of `src` (each sample's return addresses when `callers` are
/// asked); every other record goes to the symbolizer.
fn read(
    src: &load::Source,
    sym: &mut Symbolizer,
    callers: &mut Option<crate::symbolize::callers::Callers>,
) -> Result<(Vec<labperf_common::Interval>, Vec<TdSample>, FileInfo), LoadError> {
    let mut intervals = Vec::new();
    let mut samples = Vec::new();
    let info = load::stream(src, |r| match r {
        Record::Interval(i) => intervals.push(i.clone()),
        Record::Sample(s) => {
            let ret = callers
                .as_mut()
                .map(|c| c.return_addresses(s))
                .unwrap_or_default();
            samples.push((s.pid, s.tid, s.ip, s.values.clone(), ret))
        }
        other => sym.observe(other),
    })?;
    Ok((intervals, samples, info))
}

/// A key's samples and the sum of each event's deltas.
type Tally = (u64, Vec<u64>);

/// The samples and deltas per key.
type Acc<K> = HashMap<K, Tally>;

/// What the samples add up to: per (function, file), per (function, file, caller) and in all.
struct Accumulated {
    acc: Acc<(String, String)>,
    by_caller: Acc<(String, String, String)>,
    all: Vec<u64>,
}

/// The recording's TopDown layout and where its values sit: how lines are made.
struct Shape<'a> {
    layout: &'a Layout,
    /// The slots event's index, what lines are weighted by.
    slots_at: Option<usize>,
    /// Events in the header.
    n: usize,
}

impl Shape<'_> {
    /// `stat --topdown`: a line per delta interval, and the total the last cumulative one gives.
    fn interval_lines(&self, intervals: &[labperf_common::Interval]) -> (Vec<Line>, Option<Line>) {
        let (layout, slots_at) = (self.layout, self.slots_at);
        let mut lines = Vec::new();
        let mut total = None;
        for i in intervals {
            let mut v = vec![0u64; self.n];
            for c in &i.counts {
                if let Some(x) = v.get_mut(c.event as usize) {
                    *x = c.value;
                }
            }
            let line = Line {
                time_s: Some(i.time as f64 / 1e9),
                time_ns: Some(i.time),
                parts: layout.parts(&v),
                tid: i.tid,
                symbol: None,
                caller: None,
                dso: None,
                samples: None,
                slots: slots_at.map(|s| v[s]),
                ratios: layout.fractions(&v),
            };
            if i.delta {
                lines.push(line);
            } else {
                total = Some(line);
            }
        }
        (lines, total)
    }

    /// `record --topdown`: group values are cumulative per thread, so each sample's deltas
    /// since that thread's previous sample belong to the sample's function (and caller).
    fn accumulate(
        &self,
        samples: Vec<TdSample>,
        sym: &mut Symbolizer,
        mut callers: Option<&mut crate::symbolize::callers::Callers>,
    ) -> Accumulated {
        let n = self.n;
        let mut prev: HashMap<(u32, u32), Vec<u64>> = HashMap::new();
        let mut a = Accumulated {
            acc: HashMap::new(),
            by_caller: HashMap::new(),
            all: vec![0u64; n],
        };
        for (pid, tid, ip, values, ret) in samples {
            if values.len() != n {
                continue;
            }
            let p = prev.insert((pid, tid), values.clone());
            let Some(p) = p else { continue };
            let d: Vec<u64> = values
                .iter()
                .zip(&p)
                .map(|(a, b)| a.saturating_sub(*b))
                .collect();
            let loc = sym.resolve(pid, ip);
            let key = (
                label(&loc.dso, loc.sym.as_deref(), loc.vaddr),
                loc.dso.to_string(),
            );
            let add = |e: &mut (u64, Vec<u64>)| {
                e.0 += 1;
                for (i, x) in d.iter().enumerate() {
                    e.1[i] = e.1[i].saturating_add(*x);
                }
            };
            if let Some(c) = callers.as_mut() {
                let k = (key.0.clone(), key.1.clone(), c.name(sym, pid, &ret));
                add(a.by_caller.entry(k).or_insert_with(|| (0, vec![0; n])));
            }
            add(a.acc.entry(key).or_insert_with(|| (0, vec![0; n])));
            for (i, x) in d.iter().enumerate() {
                a.all[i] = a.all[i].saturating_add(*x);
            }
        }
        a
    }

    /// A function's line (under a caller, for the callers table).
    fn line(
        &self,
        symbol: String,
        dso: String,
        caller: Option<String>,
        count: u64,
        x: &[u64],
    ) -> Line {
        Line {
            time_s: None,
            time_ns: None,
            parts: self.layout.parts(x),
            tid: None,
            symbol: Some(symbol),
            caller,
            dso: Some(dso),
            samples: Some(count),
            slots: self.slots_at.map(|s| x[s]),
            ratios: self.layout.fractions(x),
        }
    }

    /// The functions by slots, their callers' lines (when `callers` are asked) and the total.
    fn symbol_lines(&self, a: Accumulated, callers: bool) -> (Vec<Line>, Option<Vec<Line>>, Line) {
        let slots_at = self.slots_at;
        let mut v: Vec<_> = a.acc.into_iter().collect();
        let weight = |x: &Vec<u64>| slots_at.map_or(0, |s| x[s]);
        v.sort_by(|a, b| {
            weight(&b.1 .1)
                .cmp(&weight(&a.1 .1))
                .then_with(|| a.0.cmp(&b.0))
        });
        // Under each function (in the table's order), its callers by slots.
        let caller_lines = callers.then(|| self.caller_lines(&v, a.by_caller));
        let mut lines = Vec::new();
        for ((symbol, dso), (count, x)) in v {
            lines.push(self.line(symbol, dso, None, count, &x));
        }
        let all = a.all;
        let total = Line {
            time_s: None,
            time_ns: None,
            parts: self.layout.parts(&all),
            tid: None,
            symbol: Some("[total]".into()),
            caller: None,
            dso: None,
            samples: Some(lines.iter().filter_map(|l| l.samples).sum()),
            slots: slots_at.map(|s| all[s]),
            ratios: self.layout.fractions(&all),
        };
        (lines, caller_lines, total)
    }

    /// Each function's callers, under it in the order of `ranked` (the functions' table),
    /// by slots.
    fn caller_lines(
        &self,
        ranked: &[((String, String), Tally)],
        by_caller: Acc<(String, String, String)>,
    ) -> Vec<Line> {
        let slots_at = self.slots_at;
        let weight = |x: &Vec<u64>| slots_at.map_or(0, |s| x[s]);
        let rank: HashMap<&(String, String), usize> = ranked
            .iter()
            .enumerate()
            .map(|(i, (k, _))| (k, i))
            .collect();
        let mut c: Vec<_> = by_caller.into_iter().collect();
        c.sort_by(|a, b| {
            let r = |k: &(String, String, String)| {
                rank.get(&(k.0.clone(), k.1.clone()))
                    .copied()
                    .unwrap_or(usize::MAX)
            };
            r(&a.0)
                .cmp(&r(&b.0))
                .then_with(|| weight(&b.1 .1).cmp(&weight(&a.1 .1)))
                .then_with(|| a.0.cmp(&b.0))
        });
        c.into_iter()
            .map(|((s, d, c), (count, x))| self.line(s, d, Some(c), count, &x))
            .collect()
    }
}

impl Report {
    /// The report in the table model: perf's interval table (its layout is the agent's
    /// live output, cell for cell), or the per-symbol table of a `record --topdown` file.
    pub fn table(self) -> crate::render::table::Report {
        let titles = self.layout.titles();
        let keys = keys(&self.layout);
        let has_tid = self.lines.iter().any(|l| l.tid.is_some());
        let columns = |with_caller: bool| {
            let mut columns = vec![if self.by_symbol {
                Column::right("slots", "slots", 16).tight()
            } else {
                Column::right("time_s", "time", 16).tight()
            }];
            if has_tid {
                columns.push(Column::right("tid", "thread", 12).tight());
            }
            if !self.by_symbol {
                // The weight of each line's shares: in CSV and JSON (the agent's live lines,
                // which the text table matches, leave it out).
                columns.push(Column::right("slots", "slots", 0).tight());
            }
            for (k, t) in keys.iter().zip(&titles) {
                columns.push(Column::right(*k, t, 21).tight());
            }
            if self.by_symbol {
                columns.push(Column::left("symbol", "symbol", 0));
                if with_caller {
                    columns.push(Column::left("caller", "caller", 0));
                }
                columns.push(Column::left("dso", "dso", 0));
                columns.push(Column::right("samples", "samples", 0));
            }
            columns
        };
        let by_symbol = self.by_symbol;
        let row = |l: &Line, total: bool, with_caller: bool| -> Vec<Cell> {
            let mut r = Vec::new();
            r.push(if by_symbol {
                l.slots.map_or(Cell::Empty, Cell::Int)
            } else if total {
                Cell::Shown {
                    text: "total".into(),
                    value: json!("total"),
                }
            } else {
                match l.time_ns {
                    Some(t) => Cell::Shown {
                        text: td::seconds(t),
                        value: json!(t as f64 / 1e9),
                    },
                    None => Cell::Empty,
                }
            });
            if has_tid {
                r.push(l.tid.map_or(Cell::text(""), |t| Cell::Int(u64::from(t))));
            }
            if !by_symbol {
                r.push(l.slots.map_or(Cell::Empty, Cell::Int));
            }
            for i in 0..titles.len() {
                let cell = match &l.parts {
                    Some((num, den)) => match num.get(i).copied().flatten() {
                        Some(n) => Cell::Share { num: n, den: *den },
                        None => Cell::Empty,
                    },
                    None => Cell::Empty,
                };
                let ratio = l.ratios.as_ref().and_then(|r| r.get(i).copied().flatten());
                r.push(match (COLOUR_AS.get(i), ratio) {
                    (Some(metric), Some(x)) => Cell::Painted(Box::new(cell), td::colour(metric, x)),
                    _ => cell,
                });
            }
            if by_symbol {
                r.push(Cell::text(l.symbol.clone().unwrap_or_default()));
                if with_caller {
                    r.push(Cell::text(l.caller.clone().unwrap_or_default()));
                }
                r.push(l.dso.as_deref().map_or(Cell::Empty, Cell::file));
                r.push(l.samples.map_or(Cell::Empty, Cell::Int));
            }
            r
        };
        let mut t = Table::new(
            if by_symbol { "functions" } else { "intervals" },
            columns(false),
        );
        t.hash_header = true;
        if !by_symbol {
            t.hidden = vec!["slots"];
        }
        t.ranked = by_symbol;
        t.rows = self.lines.iter().map(|l| row(l, false, false)).collect();
        if let Some(total) = &self.total {
            t.footer.push(row(total, true, false));
        }
        // Each function's lines split by its caller, under the same columns.
        let callers = self.callers.as_ref().filter(|_| by_symbol).map(|c| {
            let mut t = Table::new("callers", columns(true));
            t.hash_header = true;
            t.rows = c.iter().map(|l| row(l, false, true)).collect();
            t
        });
        let mut summary = serde_json::Map::new();
        summary.insert(
            "kind".into(),
            json!(match self.layout.kind {
                Kind::Metrics => "metrics",
                Kind::Legacy => "legacy",
            }),
        );
        summary.insert("level".into(), json!(self.layout.level));
        crate::render::table::Report {
            summary,
            tables: std::iter::once(t).chain(callers).collect(),
            ..crate::render::table::Report::of_file("topdown", &self.info, self.warnings)
        }
    }
}
