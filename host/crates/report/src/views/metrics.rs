//! `report --metrics`: per-function CPI and miss rates from strobed windows (the seed's
//! generate-function-metrics rules: long/short samples, discard, throttle).

use crate::record::load::{self, LoadError};
use crate::render::table::{Cell, Column, Table};
use crate::symbolize::symbols::{label, Search, Symbolizer};
use labperf_common::{Header, Record, Sample};
use serde::Serialize;
use std::collections::HashMap;
use std::path::PathBuf;

/// The strobe settings a `--metrics` recording carries in its header mode string.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StrobeInfo {
    pub period: u64,
    pub window: u64,
    /// Every sample is a window (the fixed-period baseline).
    pub fixed: bool,
    /// The agent kept only whole windows (decimation): it already broke windows at
    /// throttles, so the throttle rule does not apply again.
    pub decimated: bool,
}

/// Parses `strobe:<mode>;period=P;window=W;jitter=J`.
pub fn strobe_info(mode: &str) -> Option<StrobeInfo> {
    let rest = mode.strip_prefix("strobe:")?;
    let mut parts = rest.split(';');
    let kind = parts.next()?;
    let (mut period, mut window) = (None, None);
    for p in parts {
        match p.split_once('=') {
            Some(("period", v)) => period = v.parse().ok(),
            Some(("window", v)) => window = v.parse().ok(),
            _ => {}
        }
    }
    Some(StrobeInfo {
        period: period?,
        window: window?,
        fixed: kind == "fixed",
        decimated: kind == "decimate",
    })
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum DiscardMode {
    /// Drop the counts of a window whose start and end symbols differ (still ranked in #).
    Discard,
    /// Keep every window, attributed to its end symbol.
    None,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Split {
    None,
    Thread,
    Cpu,
}

/// Which group value holds which event.
#[derive(Debug, Clone, Default)]
pub struct Columns {
    pub cycles: Option<usize>,
    pub instructions: Option<usize>,
    pub branch_misses: Option<usize>,
    pub cache_refs: Option<usize>,
    pub cache_misses: Option<usize>,
}

impl Columns {
    pub fn from_header(h: &Header) -> Columns {
        // Group members of the sampler (event 0), in group order.
        let members: Vec<&str> = h
            .events
            .iter()
            .enumerate()
            .filter(|(i, e)| *i == 0 || e.leader == Some(0))
            .map(|(_, e)| e.name.as_str())
            .collect();
        let at = |n: &str| members.iter().position(|m| *m == n);
        Columns {
            cycles: at("cycles"),
            instructions: at("instructions"),
            branch_misses: at("branch-misses"),
            cache_refs: at("cache-references"),
            cache_misses: at("cache-misses"),
        }
    }
}

#[derive(Debug, Default, Clone)]
struct Acc {
    windows: u64,
    discarded: u64,
    sums: [u64; 5],
}

/// One row of the metrics table; `None` where the event was not recorded.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct MetricsRow {
    pub symbol: String,
    /// The function the windows' end samples return to (the callers table only).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub caller: Option<String>,
    pub split: Option<u32>,
    pub samples: u64,
    pub cpi: Option<f64>,
    pub bm_per_ki: Option<f64>,
    pub cm_per_ki: Option<f64>,
    pub cm_pct: Option<f64>,
    pub cycles_pct: Option<f64>,
    pub instr_pct: Option<f64>,
    pub bm_pct: Option<f64>,
    pub l1da_pct: Option<f64>,
    pub l1dm_pct: Option<f64>,
    pub discarded_pct: f64,
    /// The kept windows' summed counts (cycles, instructions, branch-misses,
    /// cache-references, cache-misses; 0 where not recorded), and the windows discarded.
    #[serde(skip)]
    pub sums: [u64; 5],
    #[serde(skip)]
    pub discarded: u64,
}

/// The finished table with its notes.
#[derive(Debug, Serialize)]
pub struct Metrics {
    pub rows: Vec<MetricsRow>,
    /// `--call-graph callee`: each function's windows split by its caller (None: not asked).
    pub callers: Option<Vec<MetricsRow>>,
    pub windows: u64,
    pub discarded: u64,
    pub dropped_after_throttle: u64,
    pub whole_run_cpi: Option<f64>,
    pub warnings: Vec<String>,
}

/// A function and the caller path its windows came by (the callers table's key).
type SymbolCaller = (String, String);

/// The window rules applied to a stream of the sampler's samples and throttle events, one
/// at a time (nothing but the previous sample of each thread and the sums is kept).
pub struct Windows {
    s: StrobeInfo,
    cols: Columns,
    discard: DiscardMode,
    split: Split,
    threshold: u64,
    prev: HashMap<u32, Sample>,
    acc: HashMap<(String, Option<u32>), Acc>,
    order: Vec<(String, Option<u32>)>,
    /// `--call-graph callee`: (function, caller) → sums, in first-seen order.
    callers: Option<(HashMap<SymbolCaller, Acc>, Vec<SymbolCaller>)>,
    skip_next: bool,
    windows: u64,
    discarded: u64,
    dropped: u64,
    window_cpis: Vec<f64>,
    last_values: Option<Vec<u64>>,
    throttled: bool,
}

impl Windows {
    pub fn new(s: StrobeInfo, cols: &Columns, discard: DiscardMode, split: Split) -> Windows {
        Windows {
            s,
            cols: cols.clone(),
            discard,
            split,
            threshold: s.period.saturating_add(s.window) / 2,
            prev: HashMap::new(),
            acc: HashMap::new(),
            order: Vec::new(),
            callers: None,
            skip_next: false,
            windows: 0,
            discarded: 0,
            dropped: 0,
            window_cpis: Vec::new(),
            last_values: None,
            throttled: false,
        }
    }

    /// Also splits each function's windows by the function its end sample returns to.
    pub fn by_caller(mut self) -> Windows {
        self.callers = Some(Default::default());
        self
    }

    fn idx(&self) -> [Option<usize>; 5] {
        let c = &self.cols;
        [
            c.cycles,
            c.instructions,
            c.branch_misses,
            c.cache_refs,
            c.cache_misses,
        ]
    }

    /// Takes the next event: a sample of the sampler, or `None` for a throttle or
    /// unthrottle. `sym` names the function of an (pid, ip), `caller` the function a
    /// sample returns to (asked only with `by_caller`, of windows' end samples).
    pub fn push(
        &mut self,
        e: Option<&Sample>,
        sym: &mut dyn FnMut(u32, u64) -> String,
        caller: &mut dyn FnMut(&Sample) -> String,
    ) {
        let s = self.s;
        let Some(x) = e else {
            if s.decimated {
                return;
            }
            // Throttle/unthrottle: the next sample's counts span a stopped counter.
            self.skip_next = true;
            self.throttled = true;
            self.prev.clear();
            return;
        };
        if self.skip_next {
            self.skip_next = false;
            self.dropped += 1;
            return;
        }
        self.last_values = Some(x.values.clone());
        let long = !s.fixed && x.period > self.threshold;
        if long {
            self.prev.insert(x.tid, x.clone());
            return;
        }
        let Some(start) = self.prev.insert(x.tid, x.clone()) else {
            return;
        };
        if !s.fixed && start.period <= self.threshold {
            return; // two short samples in a row: not a window of ours
        }
        let end_sym = sym(x.pid, x.ip);
        let key = (
            end_sym.clone(),
            match self.split {
                Split::None => None,
                Split::Thread => Some(x.tid),
                Split::Cpu => Some(x.cpu),
            },
        );
        let idx = self.idx();
        let order = &mut self.order;
        let a = self.acc.entry(key.clone()).or_insert_with(|| {
            order.push(key.clone());
            Acc::default()
        });
        self.windows += 1;
        let discard = self.discard == DiscardMode::Discard && sym(start.pid, start.ip) != end_sym;
        let mut d = [0u64; 5];
        for (k, i) in idx.iter().enumerate() {
            if let Some(i) = *i {
                d[k] = x
                    .values
                    .get(i)
                    .copied()
                    .unwrap_or(0)
                    .wrapping_sub(start.values.get(i).copied().unwrap_or(0));
            }
        }
        let by_caller = self.callers.as_mut().map(|(acc, order)| {
            let key = (end_sym.clone(), caller(x));
            acc.entry(key.clone()).or_insert_with(|| {
                order.push(key);
                Acc::default()
            })
        });
        for a in std::iter::once(a).chain(by_caller) {
            a.windows += 1;
            if discard {
                a.discarded += 1;
                continue;
            }
            for (k, i) in idx.iter().enumerate() {
                if i.is_some() {
                    a.sums[k] = a.sums[k].saturating_add(d[k]);
                }
            }
        }
        if discard {
            self.discarded += 1;
            return;
        }
        if d[1] > 0 && self.cols.cycles.is_some() {
            self.window_cpis.push(d[0] as f64 / d[1] as f64);
        }
    }
}

/// Applies the window rules to a stream of the sampler's samples and throttle events.
/// `sym` names the function of an (pid, ip); `None` in `events` marks a throttle or unthrottle.
pub fn compute(
    events: impl IntoIterator<Item = Option<Sample>>,
    s: StrobeInfo,
    cols: &Columns,
    discard: DiscardMode,
    split: Split,
    mut sym: impl FnMut(u32, u64) -> String,
) -> Metrics {
    let mut w = Windows::new(s, cols, discard, split);
    for e in events {
        w.push(e.as_ref(), &mut sym, &mut |_| String::new());
    }
    w.finish()
}

impl Windows {
    /// The table of what was pushed.
    pub fn finish(self) -> Metrics {
        let Windows {
            s,
            cols,
            acc,
            order,
            windows,
            discarded,
            dropped,
            window_cpis,
            last_values,
            throttled,
            callers,
            ..
        } = self;
        let idx = [
            cols.cycles,
            cols.instructions,
            cols.branch_misses,
            cols.cache_refs,
            cols.cache_misses,
        ];
        let mut totals = [0u64; 5];
        for a in acc.values() {
            for (t, v) in totals.iter_mut().zip(a.sums) {
                *t = t.saturating_add(v);
            }
        }
        let pct =
            |v: u64, t: u64, present: bool| (present && t > 0).then(|| 100.0 * v as f64 / t as f64);
        let per_ki = |v: u64, i: u64, present: bool| {
            (present && i > 0).then(|| 1000.0 * v as f64 / i as f64)
        };
        let have = idx.map(|i| i.is_some());
        let row = |symbol: &str, split: Option<u32>, caller: Option<&str>, a: &Acc| {
            let [cy, ins, bm, cr, cm] = a.sums;
            MetricsRow {
                symbol: symbol.to_string(),
                caller: caller.map(str::to_string),
                split,
                samples: a.windows,
                cpi: (have[0] && have[1] && ins > 0).then(|| cy as f64 / ins as f64),
                bm_per_ki: per_ki(bm, ins, have[2] && have[1]),
                cm_per_ki: per_ki(cm, ins, have[4] && have[1]),
                cm_pct: pct(cm, cr, have[3] && have[4]),
                cycles_pct: pct(cy, totals[0], have[0]),
                instr_pct: pct(ins, totals[1], have[1]),
                bm_pct: pct(bm, totals[2], have[2]),
                l1da_pct: pct(cr, totals[3], have[3]),
                l1dm_pct: pct(cm, totals[4], have[4]),
                discarded_pct: pct(a.discarded, a.windows, true).unwrap_or(0.0),
                sums: a.sums,
                discarded: a.discarded,
            }
        };
        let mut rows: Vec<MetricsRow> = order
            .iter()
            .map(|k| row(&k.0, k.1, None, &acc[k]))
            .collect();
        rows.sort_by(|a, b| {
            b.samples
                .cmp(&a.samples)
                .then_with(|| a.symbol.cmp(&b.symbol))
        });
        // Under each function (in the table's order), its callers by windows.
        let callers = callers.map(|(cacc, corder)| {
            let rank: HashMap<&str, usize> = rows
                .iter()
                .enumerate()
                .rev()
                .map(|(i, r)| (r.symbol.as_str(), i))
                .collect();
            let mut v: Vec<MetricsRow> = corder
                .iter()
                .map(|k| row(&k.0, None, Some(&k.1), &cacc[k]))
                .collect();
            v.sort_by(|a, b| {
                let r = |x: &MetricsRow| rank.get(x.symbol.as_str()).copied().unwrap_or(usize::MAX);
                r(a).cmp(&r(b))
                    .then(b.samples.cmp(&a.samples))
                    .then_with(|| a.caller.cmp(&b.caller))
            });
            v
        });
        // Whole-run CPI: the sampler's own running totals when they count the whole run (kernel
        // alternating periods, never throttled); a throttled sampler stops counting while its
        // group keeps going, so then the windows' aggregate is the reference.
        let cumulative_ok = !throttled && !s.decimated && !s.fixed;
        let whole = match (&last_values, cols.cycles, cols.instructions, cumulative_ok) {
            (Some(v), Some(c), Some(i), true) if v.get(i).copied().unwrap_or(0) > 0 => {
                v.get(c).map(|&cy| cy as f64 / v[i] as f64)
            }
            _ if totals[1] > 0 && have[0] => Some(totals[0] as f64 / totals[1] as f64),
            _ => None,
        };
        let mut warnings = Vec::new();
        if let Some(w) = whole {
            let far = window_cpis.iter().filter(|&&c| c > 4.0 * w).count();
            if far > 0 {
                warnings.push(format!("{far} of {} windows have a CPI over 4x the whole-run CPI ({w:.2}): very short windows can inflate CPI (interrupt and cache effects); try a longer --window", window_cpis.len()));
            }
        }
        if dropped > 0 {
            warnings.push(format!(
                "{dropped} samples right after a throttle or unthrottle were dropped"
            ));
        }
        Metrics {
            rows,
            callers,
            windows,
            discarded,
            dropped_after_throttle: dropped,
            whole_run_cpi: whole,
            warnings,
        }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum MetricsError {
    #[error(transparent)]
    Load(#[from] LoadError),
    #[error("{0} is not a --metrics recording (its mode is '{1}'): record it with `labperf record --metrics`")]
    NotStrobed(PathBuf, String),
}

/// Reads a recording and computes its metrics table.
/// The strobing of a recording: from its recipe (a `--metrics` recording) or none.
pub fn strobe_of(h: &Header, ext: Option<&labperf_common::HeaderExt>) -> Option<StrobeInfo> {
    match labperf_common::recipe_of(h, ext) {
        labperf_common::Recipe::Strobe {
            mode,
            period,
            window,
            ..
        } => Some(StrobeInfo {
            period,
            window,
            fixed: mode == labperf_common::StrobeMode::Fixed,
            decimated: mode == labperf_common::StrobeMode::Decimate,
        }),
        _ => None,
    }
}

/// Reads a recording and computes its metrics table, one record at a time: symbols are
/// resolved as samples come, from the mappings recorded before them.
/// `by_caller` (`report --call-graph callee [--depth N]`) adds the table of each function's
/// callers, N frames up.
pub fn build(
    src: &load::Source,
    search: Search,
    discard: DiscardMode,
    split: Split,
    by_caller: Option<usize>,
) -> Result<(Metrics, load::FileInfo), MetricsError> {
    let under = match by_caller {
        Some(depth) => Some(Under::Callers(Box::new(
            crate::symbolize::callers::Callers::of(src, &search, depth)?,
        ))),
        None => None,
    };
    build_under(src, search, (discard, split), under)
}

/// Each function's windows per instruction (`labperf annotate`): the metrics with the
/// second table ([`Metrics::callers`]) keyed by the address of each window's end sample in
/// its file's own address space (`0x…`), the discard rule still the functions'.
pub fn by_address(
    src: &load::Source,
    search: Search,
    discard: DiscardMode,
) -> Result<(Metrics, load::FileInfo), MetricsError> {
    build_under(src, search, (discard, Split::None), Some(Under::Address))
}

/// What the second table of [`build_under`] splits each function's windows by.
enum Under {
    /// The caller path of the end sample, N frames up.
    Callers(Box<crate::symbolize::callers::Callers>),
    /// The end sample's address.
    Address,
}

/// [`build`], its second table split by `under`.
fn build_under(
    src: &load::Source,
    search: Search,
    (discard, split): (DiscardMode, Split),
    mut under: Option<Under>,
) -> Result<(Metrics, load::FileInfo), MetricsError> {
    let path = src.name.as_path();
    // Every side-band record first (a pass of its own): a sample can come before the
    // mapping it is in (another CPU's ring), and a name is held once made. Shared by the
    // namers of sampled functions and of callers.
    let mut first = Symbolizer::new(search);
    load::stream(src, |r| {
        if !matches!(r, Record::Sample(_)) {
            first.observe(r)
        }
    })?;
    let sym = std::cell::RefCell::new(first);
    let mut windows: Option<Windows> = None;
    let mut started = false;
    let mut names: HashMap<(u32, u64), String> = HashMap::new();
    let info = load::stream_with_header(src, |h, ext, r| {
        if !started {
            started = true;
            sym.borrow_mut().recorded_on(src, h, ext);
            windows = h.and_then(|h| {
                strobe_of(h, ext).map(|s| {
                    let w = Windows::new(s, &Columns::from_header(h), discard, split);
                    if under.is_some() {
                        w.by_caller()
                    } else {
                        w
                    }
                })
            });
        }
        let Some(w) = windows.as_mut() else {
            return;
        };
        let mut name = |pid: u32, ip: u64| {
            names
                .entry((pid, ip))
                .or_insert_with(|| {
                    let l = sym.borrow_mut().resolve(pid, ip);
                    label(&l.dso, l.sym.as_deref(), l.vaddr)
                })
                .clone()
        };
        let mut caller = |s: &Sample| match under.as_mut() {
            Some(Under::Callers(c)) => c.caller(&mut sym.borrow_mut(), s),
            Some(Under::Address) => format!("{:#x}", sym.borrow_mut().resolve(s.pid, s.ip).vaddr),
            None => String::new(),
        };
        match r {
            Record::Sample(s) if s.event == 0 => w.push(Some(s), &mut name, &mut caller),
            Record::Throttle(t) if t.event == 0 => w.push(None, &mut name, &mut caller),
            _ => {}
        }
    })?;
    let mut sym = sym.into_inner();
    let Some(w) = windows else {
        let mode = info
            .header
            .as_ref()
            .map(|h| h.mode.clone())
            .unwrap_or_default();
        return Err(MetricsError::NotStrobed(path.into(), mode));
    };
    let mut m = w.finish();
    m.warnings.extend(std::mem::take(&mut sym.warnings));
    if let Some(Under::Callers(c)) = under {
        m.warnings.extend(c.note());
    }
    Ok((m, info))
}

impl Metrics {
    /// The report in the table model.
    pub fn table(self, info: &load::FileInfo) -> crate::render::table::Report {
        let t = rows_table("functions", &self.rows, false);
        let callers = self
            .callers
            .as_ref()
            .map(|c| rows_table("callers", c, true));
        let mut summary = serde_json::Map::new();
        summary.insert("windows".into(), serde_json::json!(self.windows));
        summary.insert("discarded".into(), serde_json::json!(self.discarded));
        summary.insert(
            "dropped_after_throttle".into(),
            serde_json::json!(self.dropped_after_throttle),
        );
        summary.insert(
            "whole_run_cpi".into(),
            serde_json::json!(self.whole_run_cpi),
        );
        crate::render::table::Report {
            heading: vec![format!(
                "# {} windows, {} discarded; whole-run CPI {}",
                self.windows,
                self.discarded,
                self.whole_run_cpi
                    .map_or("-".to_string(), |c| format!("{c:.2}"))
            )],
            summary,
            tables: std::iter::once(t).chain(callers).collect(),
            ..crate::render::table::Report::of_file("metrics", info, self.warnings)
        }
    }
}

/// The metrics columns of `rows`: with a Split column when any row is split, a Caller
/// column for the callers table.
fn rows_table(name: &'static str, rows: &[MetricsRow], caller: bool) -> Table {
    let split = rows.iter().any(|r| r.split.is_some());
    let mut columns = vec![Column::left("symbol", "Symbol", 32)];
    if caller {
        columns.push(Column::left("caller", "Caller", 32));
    }
    if split {
        columns.push(Column::right("split", "Split", 5));
    }
    for (k, t) in [
        ("samples", "#"),
        ("cpi", "CPI"),
        ("bm_per_ki", "BM/KI"),
        ("cm_per_ki", "CM/KI"),
        ("cm_pct", "%CM"),
        ("cycles_pct", "%CY"),
        ("instr_pct", "%I"),
        ("bm_pct", "%BM"),
        ("l1da_pct", "%L1DA"),
        ("l1dm_pct", "%L1DM"),
        ("discarded_pct", "DIS"),
    ] {
        columns.push(Column::right(k, t, 6).tight_gap());
    }
    let mut t = Table::new(name, columns);
    t.rows = rows
        .iter()
        .map(|r| {
            let mut row = vec![Cell::text(r.symbol.clone())];
            if caller {
                row.push(Cell::text(r.caller.clone().unwrap_or_default()));
            }
            if split {
                row.push(r.split.map_or(Cell::Empty, |x| Cell::Int(u64::from(x))));
            }
            row.push(Cell::Int(r.samples));
            row.push(Cell::opt_float(r.cpi, 2));
            for v in [
                r.bm_per_ki,
                r.cm_per_ki,
                r.cm_pct,
                r.cycles_pct,
                r.instr_pct,
                r.bm_pct,
                r.l1da_pct,
                r.l1dm_pct,
            ] {
                row.push(Cell::opt_float(v, 1));
            }
            row.push(Cell::Float {
                value: r.discarded_pct,
                places: 1,
            });
            row
        })
        .collect();
    t
}

#[cfg(test)]
mod tests {
    use super::*;

    const S: StrobeInfo = StrobeInfo {
        period: 1000,
        window: 100,
        fixed: false,
        decimated: false,
    };

    fn cols() -> Columns {
        Columns {
            cycles: Some(0),
            instructions: Some(1),
            branch_misses: Some(2),
            cache_refs: None,
            cache_misses: None,
        }
    }

    /// A long sample at `ip_start` then a window ending at `ip_end`, with counts.
    fn pair(
        t: &mut [u64; 3],
        ip_start: u64,
        ip_end: u64,
        cy: u64,
        ins: u64,
        bm: u64,
    ) -> Vec<Option<Sample>> {
        t[0] += 900;
        t[1] += 900;
        let long = Sample {
            tid: 1,
            pid: 1,
            ip: ip_start,
            period: 900,
            values: t.to_vec(),
            ..Default::default()
        };
        t[0] += cy;
        t[1] += ins;
        t[2] += bm;
        let win = Sample {
            tid: 1,
            pid: 1,
            ip: ip_end,
            period: 100,
            values: t.to_vec(),
            ..Default::default()
        };
        vec![Some(long), Some(win)]
    }

    fn name(_: u32, ip: u64) -> String {
        format!("f{}", ip / 100)
    }

    #[test]
    fn windows_discard_and_columns() {
        let mut t = [0u64; 3];
        let mut ev = Vec::new();
        ev.extend(pair(&mut t, 100, 110, 100, 50, 1)); // f1: CPI 2
        ev.extend(pair(&mut t, 100, 120, 100, 50, 3)); // f1 again
        ev.extend(pair(&mut t, 200, 210, 100, 100, 0)); // f2: CPI 1
        ev.extend(pair(&mut t, 200, 310, 100, 100, 0)); // starts in f2, ends in f3: discarded
        let m = compute(
            ev.clone(),
            S,
            &cols(),
            DiscardMode::Discard,
            Split::None,
            name,
        );
        assert_eq!((m.windows, m.discarded), (4, 1));
        let f1 = m.rows.iter().find(|r| r.symbol == "f1").unwrap();
        assert_eq!(f1.samples, 2);
        assert_eq!(f1.cpi, Some(2.0));
        assert_eq!(f1.bm_per_ki, Some(1000.0 * 4.0 / 100.0));
        assert_eq!(f1.instr_pct, Some(50.0)); // 100 of 200 kept instructions
        assert_eq!(f1.bm_pct, Some(100.0));
        assert_eq!(f1.cm_pct, None, "no cache events: the column is empty");
        let f3 = m.rows.iter().find(|r| r.symbol == "f3").unwrap();
        assert_eq!(
            (f3.samples, f3.discarded_pct, f3.cpi),
            (1, 100.0, None),
            "a discarded window still counts in #"
        );
        // -s none keeps it, attributed to its end symbol.
        let m = compute(ev, S, &cols(), DiscardMode::None, Split::None, name);
        assert_eq!(m.discarded, 0);
        assert_eq!(
            m.rows.iter().find(|r| r.symbol == "f3").unwrap().cpi,
            Some(1.0)
        );
    }

    #[test]
    fn long_and_short_samples_by_threshold() {
        // (1000 + 100) / 2 = 550: a 551-cycle sample is long, a 550-cycle one is a window.
        let mk = |ip, period, c| {
            Some(Sample {
                tid: 1,
                pid: 1,
                ip,
                period,
                values: vec![c, c],
                ..Default::default()
            })
        };
        let ev = vec![mk(100, 551, 551), mk(110, 550, 1101), mk(120, 550, 1651)];
        let m = compute(ev, S, &cols(), DiscardMode::Discard, Split::None, name);
        assert_eq!(
            m.windows, 1,
            "the second short sample follows a short one: no window"
        );
        assert_eq!(m.rows[0].cpi, Some(1.0));
    }

    #[test]
    fn first_sample_after_throttle_is_dropped() {
        let mut t = [0u64; 3];
        let mut ev = pair(&mut t, 100, 110, 100, 100, 0);
        ev.push(None); // throttle
        ev.extend(pair(&mut t, 200, 210, 100, 100, 0)); // its long sample is dropped, so no window
        ev.extend(pair(&mut t, 300, 310, 100, 100, 0));
        let m = compute(ev, S, &cols(), DiscardMode::Discard, Split::None, name);
        assert_eq!(m.dropped_after_throttle, 1);
        assert_eq!(m.windows, 2);
        assert!(m.rows.iter().all(|r| r.symbol != "f2"));
        // A decimated recording's throttles were handled by the agent.
        let mut t = [0u64; 3];
        let mut ev = vec![None];
        ev.extend(pair(&mut t, 200, 210, 100, 100, 0));
        let m = compute(
            ev,
            StrobeInfo {
                decimated: true,
                ..S
            },
            &cols(),
            DiscardMode::Discard,
            Split::None,
            name,
        );
        assert_eq!((m.windows, m.dropped_after_throttle), (1, 0));
    }

    #[test]
    fn fixed_period_windows_chain_and_splits() {
        let s = StrobeInfo { fixed: true, ..S };
        let mk = |tid, ip, c| {
            Some(Sample {
                tid,
                pid: 1,
                ip,
                cpu: tid,
                period: 100,
                values: vec![c, c / 2],
                ..Default::default()
            })
        };
        let ev = vec![
            mk(1, 100, 100),
            mk(2, 100, 100),
            mk(1, 110, 200),
            mk(2, 210, 300),
            mk(1, 120, 300),
        ];
        let m = compute(ev, s, &cols(), DiscardMode::Discard, Split::Thread, name);
        assert_eq!((m.windows, m.discarded), (3, 1));
        let t1 = m.rows.iter().find(|r| r.split == Some(1)).unwrap();
        assert_eq!(
            (t1.symbol.as_str(), t1.samples, t1.cpi),
            ("f1", 2, Some(2.0))
        );
    }

    #[test]
    fn inflated_window_cpi_is_warned() {
        let mut t = [0u64; 3];
        let mut ev = Vec::new();
        for _ in 0..10 {
            ev.extend(pair(&mut t, 100, 110, 100, 100, 0));
        }
        ev.extend(pair(&mut t, 100, 110, 4500, 100, 0)); // CPI 45 in one window
        let m = compute(ev, S, &cols(), DiscardMode::Discard, Split::None, name);
        assert!(
            m.warnings
                .iter()
                .any(|w| w.contains("1 of 11 windows have a CPI over 4x")),
            "{:?}",
            m.warnings
        );
    }

    #[test]
    fn samples_with_fewer_values_than_the_header_names_do_not_panic() {
        // A crafted file (once an index out of bounds): the header names a group of five,
        // the samples carry one value each. Missing values count as zero.
        let cols = Columns {
            cycles: Some(0),
            instructions: Some(1),
            branch_misses: Some(2),
            cache_refs: Some(3),
            cache_misses: Some(40),
        };
        let s = |ip: u64, period: u64, v: u64| {
            Some(Sample {
                tid: 1,
                pid: 1,
                ip,
                period,
                values: vec![v],
                ..Default::default()
            })
        };
        let m = compute(
            vec![
                s(100, 900, 900),
                s(110, 100, 1000),
                s(120, 900, 1900),
                s(130, 100, 2000),
            ],
            S,
            &cols,
            DiscardMode::None,
            Split::None,
            name,
        );
        assert_eq!(m.windows, 2);
        assert_eq!(m.rows.iter().map(|r| r.samples).sum::<u64>(), 2);
    }

    #[test]
    fn strobe_mode_strings() {
        assert_eq!(
            strobe_info("strobe:decimate;period=1000000;window=300;jitter=0"),
            Some(StrobeInfo {
                period: 1_000_000,
                window: 300,
                fixed: false,
                decimated: true
            })
        );
        assert_eq!(
            strobe_info("strobe:fixed;period=1000000;window=300;jitter=1").map(|s| s.fixed),
            Some(true)
        );
        assert_eq!(strobe_info("sample"), None);
    }
}
