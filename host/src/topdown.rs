//! TopDown reports: the interval table of `stat --topdown` recordings and the per-symbol
//! table of `record --topdown` ones (slot-weighted metric deltas between a thread's
//! consecutive samples), as table (perf's colours), CSV or JSON.

use crate::load::{self, FileInfo, LoadError};
use crate::report::{csv_field, short, Format};
use crate::symbols::{Search, Symbolizer};
use labperf_common::topdown::{self as td, Colour, Kind, Layout};
use labperf_common::{Header, Record};
use serde::Serialize;
use std::collections::HashMap;
use std::fmt::Write;
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
    pub total: Option<Line>,
    pub info: FileInfo,
    pub warnings: Vec<String>,
}

fn not_topdown(path: &Path) -> LoadError {
    LoadError::NotTopDown { path: path.into() }
}

/// Reads a `stat --topdown` or `record --topdown` recording.
pub fn build(src: &load::Source, search: Search) -> Result<Report, LoadError> {
    let path = src.name.as_path();
    let mut sym = Symbolizer::new(search);
    let mut intervals = Vec::new();
    let mut samples = Vec::new();
    let info = load::stream(src, |r| match r {
        Record::Interval(i) => intervals.push(i.clone()),
        Record::Sample(s) => samples.push((s.pid, s.tid, s.ip, s.values.clone())),
        other => sym.observe(other),
    })?;
    sym.recorded_on(info.header.as_ref());
    let h = info.header.as_ref().ok_or_else(|| not_topdown(path))?;
    let layout = layout_of(h).ok_or_else(|| not_topdown(path))?;
    let slots_at = h.events.iter().position(|e| e.name == td::SLOTS.0);
    let n = h.events.len();
    let mut lines = Vec::new();
    let mut total = None;
    let by_symbol = h.mode.starts_with("sample") || !samples.is_empty();
    if !by_symbol {
        for i in &intervals {
            let mut v = vec![0u64; n];
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
    } else {
        // Group values are cumulative per thread: each sample's deltas since that
        // thread's previous sample belong to the sample's function.
        let mut prev: HashMap<(u32, u32), Vec<u64>> = HashMap::new();
        let mut acc: HashMap<(String, String), (u64, Vec<u64>)> = HashMap::new();
        let mut all = vec![0u64; n];
        for (pid, tid, ip, values) in samples {
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
                loc.sym
                    .as_deref()
                    .map(str::to_string)
                    .unwrap_or_else(|| format!("{:#x}", loc.vaddr)),
                loc.dso.to_string(),
            );
            let e = acc.entry(key).or_insert_with(|| (0, vec![0; n]));
            e.0 += 1;
            for (i, x) in d.iter().enumerate() {
                e.1[i] = e.1[i].saturating_add(*x);
                all[i] = all[i].saturating_add(*x);
            }
        }
        let mut v: Vec<_> = acc.into_iter().collect();
        let weight = |x: &Vec<u64>| slots_at.map_or(0, |s| x[s]);
        v.sort_by(|a, b| {
            weight(&b.1 .1)
                .cmp(&weight(&a.1 .1))
                .then_with(|| a.0.cmp(&b.0))
        });
        for ((symbol, dso), (count, x)) in v {
            lines.push(Line {
                time_s: None,
                time_ns: None,
                parts: layout.parts(&x),
                tid: None,
                symbol: Some(symbol),
                dso: Some(dso),
                samples: Some(count),
                slots: slots_at.map(|s| x[s]),
                ratios: layout.fractions(&x),
            });
        }
        total = Some(Line {
            time_s: None,
            time_ns: None,
            parts: layout.parts(&all),
            tid: None,
            symbol: Some("[total]".into()),
            dso: None,
            samples: Some(lines.iter().filter_map(|l| l.samples).sum()),
            slots: slots_at.map(|s| all[s]),
            ratios: layout.fractions(&all),
        });
    }
    let mut warnings = std::mem::take(&mut sym.warnings);
    warnings.extend(h.notes.iter().cloned());
    Ok(Report {
        layout,
        by_symbol,
        lines,
        total,
        info,
        warnings,
    })
}

fn paint(text: &str, c: Colour, colour: bool) -> String {
    match (colour, c) {
        (true, Colour::Green) => format!("\x1b[32m{text}\x1b[0m"),
        (true, Colour::Red) => format!("\x1b[31m{text}\x1b[0m"),
        _ => text.to_string(),
    }
}

impl Report {
    /// Renders the report; `colour` paints the table as perf does.
    pub fn render(&self, format: Format, top: usize, colour: bool) -> String {
        let titles = self.layout.titles();
        let keys = keys(&self.layout);
        let lines: Vec<&Line> = if self.by_symbol && top > 0 {
            self.lines.iter().take(top).collect()
        } else {
            self.lines.iter().collect()
        };
        let mut s = String::new();
        match format {
            Format::Table => {
                let has_tid = self.lines.iter().any(|l| l.tid.is_some());
                let first = if self.by_symbol { "slots" } else { "time" };
                s.push_str(&td::header_line(first, has_tid, &titles));
                if self.by_symbol {
                    s.push_str("  symbol");
                }
                s.push('\n');
                let total = self.total.as_ref().map(|t| (t, true));
                for (l, is_total) in lines.iter().map(|l| (*l, false)).chain(total) {
                    let first = match (is_total && !self.by_symbol, l.time_ns, l.slots) {
                        (true, _, _) => "total".to_string(),
                        (_, Some(t), _) => td::seconds(t),
                        (_, None, Some(n)) => n.to_string(),
                        _ => "-".into(),
                    };
                    let tid = l.tid.map(|t| t.to_string());
                    let tid = match (&tid, has_tid) {
                        (Some(t), _) => Some(t.as_str()),
                        (None, true) => Some(""),
                        (None, false) => None,
                    };
                    let cells = td::cells(l.parts.as_ref(), titles.len());
                    let mut line = td::table_line(&first, tid, &[]);
                    for (i, cell) in cells.iter().enumerate() {
                        let r = l.ratios.as_ref().and_then(|r| r[i]);
                        let c = match (i < 4, r) {
                            (true, Some(r)) => td::colour(COLOUR_AS[i], r),
                            _ => Colour::Normal,
                        };
                        line.push_str(&paint(&format!("{cell:>21}"), c, colour));
                    }
                    s.push_str(&line);
                    if let Some(sym) = &l.symbol {
                        let _ = write!(s, "  {}", crate::text::show(sym));
                        if let Some(d) = &l.dso {
                            let _ = write!(s, " ({})", crate::text::show(short(d)));
                        }
                    }
                    s.push('\n');
                }
            }
            Format::Csv => {
                let head = if self.by_symbol {
                    "symbol,dso,samples,slots"
                } else {
                    "time_s,tid,slots"
                };
                let _ = writeln!(s, "{head},{}", keys.join(","));
                for l in lines.iter().copied().chain(self.total.as_ref()) {
                    if self.by_symbol {
                        let _ = write!(
                            s,
                            "{},{},{},{}",
                            csv_field(l.symbol.as_deref().unwrap_or("")),
                            csv_field(l.dso.as_deref().unwrap_or("")),
                            l.samples.unwrap_or(0),
                            l.slots.map(|x| x.to_string()).unwrap_or_default()
                        );
                    } else {
                        let _ = write!(
                            s,
                            "{},{},{}",
                            l.time_s
                                .map(|t| format!("{t:.9}"))
                                .unwrap_or("total".into()),
                            l.tid.map(|t| t.to_string()).unwrap_or_default(),
                            l.slots.map(|x| x.to_string()).unwrap_or_default()
                        );
                    }
                    for i in 0..keys.len() {
                        let r = l.ratios.as_ref().and_then(|r| r[i]);
                        let _ = write!(s, ",{}", r.map(|r| format!("{r:.6}")).unwrap_or_default());
                    }
                    s.push('\n');
                }
            }
            Format::Json => {
                #[derive(Serialize)]
                struct J<'a> {
                    kind: &'static str,
                    level: u8,
                    columns: &'a [&'static str],
                    lines: Vec<&'a Line>,
                    total: Option<&'a Line>,
                    warnings: &'a [String],
                    damaged: bool,
                }
                s = serde_json::to_string_pretty(&J {
                    kind: match self.layout.kind {
                        Kind::Metrics => "metrics",
                        Kind::Legacy => "legacy",
                    },
                    level: self.layout.level,
                    columns: &keys,
                    lines,
                    total: self.total.as_ref(),
                    warnings: &self.warnings,
                    damaged: !self.info.losses.is_clean(),
                })
                .expect("lines serialize");
                s.push('\n');
            }
        }
        s
    }
}
