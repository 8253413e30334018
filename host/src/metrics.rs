//! `report --metrics`: per-function CPI and miss rates from strobed windows (the seed's
//! generate-function-metrics rules: long/short samples, discard, throttle).

use crate::load::{self, LoadError};
use crate::symbols::{Search, Symbolizer};
use labperf_common::{Header, Record, Sample};
use serde::Serialize;
use std::collections::HashMap;
use std::fmt::Write;
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
}

/// The finished table with its notes.
#[derive(Debug, Serialize)]
pub struct Metrics {
    pub rows: Vec<MetricsRow>,
    pub windows: u64,
    pub discarded: u64,
    pub dropped_after_throttle: u64,
    pub whole_run_cpi: Option<f64>,
    pub warnings: Vec<String>,
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
    let threshold = (s.period + s.window) / 2;
    let mut prev: HashMap<u32, Sample> = HashMap::new();
    let mut acc: HashMap<(String, Option<u32>), Acc> = HashMap::new();
    let mut order: Vec<(String, Option<u32>)> = Vec::new();
    let mut skip_next = false;
    let (mut windows, mut discarded, mut dropped) = (0u64, 0u64, 0u64);
    let mut window_cpis: Vec<f64> = Vec::new();
    let idx = [
        cols.cycles,
        cols.instructions,
        cols.branch_misses,
        cols.cache_refs,
        cols.cache_misses,
    ];
    let mut last_values: Option<Vec<u64>> = None;
    let mut throttled = false;
    for e in events {
        let Some(x) = e else {
            if s.decimated {
                continue;
            }
            // Throttle/unthrottle: the next sample's counts span a stopped counter.
            skip_next = true;
            throttled = true;
            prev.clear();
            continue;
        };
        if skip_next {
            skip_next = false;
            dropped += 1;
            continue;
        }
        last_values = Some(x.values.clone());
        let long = !s.fixed && x.period > threshold;
        if long {
            prev.insert(x.tid, x);
            continue;
        }
        let Some(start) = prev.insert(x.tid, x.clone()) else {
            continue;
        };
        if !s.fixed && start.period <= threshold {
            continue; // two short samples in a row: not a window of ours
        }
        let end_sym = sym(x.pid, x.ip);
        let key = (
            end_sym.clone(),
            match split {
                Split::None => None,
                Split::Thread => Some(x.tid),
                Split::Cpu => Some(x.cpu),
            },
        );
        let a = acc.entry(key.clone()).or_insert_with(|| {
            order.push(key.clone());
            Acc::default()
        });
        a.windows += 1;
        windows += 1;
        if discard == DiscardMode::Discard && sym(start.pid, start.ip) != end_sym {
            a.discarded += 1;
            discarded += 1;
            continue;
        }
        let mut d = [0u64; 5];
        for (k, i) in idx.iter().enumerate() {
            if let Some(i) = *i {
                d[k] = x
                    .values
                    .get(i)
                    .copied()
                    .unwrap_or(0)
                    .wrapping_sub(start.values.get(i).copied().unwrap_or(0));
                a.sums[k] = a.sums[k].saturating_add(d[k]);
            }
        }
        if d[1] > 0 && cols.cycles.is_some() {
            window_cpis.push(d[0] as f64 / d[1] as f64);
        }
    }
    let mut totals = [0u64; 5];
    for a in acc.values() {
        for (t, v) in totals.iter_mut().zip(a.sums) {
            *t = t.saturating_add(v);
        }
    }
    let pct =
        |v: u64, t: u64, present: bool| (present && t > 0).then(|| 100.0 * v as f64 / t as f64);
    let per_ki =
        |v: u64, i: u64, present: bool| (present && i > 0).then(|| 1000.0 * v as f64 / i as f64);
    let have = idx.map(|i| i.is_some());
    let mut rows: Vec<MetricsRow> = order
        .iter()
        .map(|k| {
            let a = &acc[k];
            let [cy, ins, bm, cr, cm] = a.sums;
            MetricsRow {
                symbol: k.0.clone(),
                split: k.1,
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
                discarded_pct: if a.windows > 0 {
                    100.0 * a.discarded as f64 / a.windows as f64
                } else {
                    0.0
                },
            }
        })
        .collect();
    rows.sort_by(|a, b| {
        b.samples
            .cmp(&a.samples)
            .then_with(|| a.symbol.cmp(&b.symbol))
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
        windows,
        discarded,
        dropped_after_throttle: dropped,
        whole_run_cpi: whole,
        warnings,
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
pub fn build(
    src: &load::Source,
    search: Search,
    discard: DiscardMode,
    split: Split,
) -> Result<(Metrics, load::FileInfo), MetricsError> {
    let path = src.name.as_path();
    let mut sym = Symbolizer::new(search);
    let mut stream: Vec<Option<Sample>> = Vec::new();
    let info = load::stream(src, |r| match r {
        Record::Sample(s) if s.event == 0 => stream.push(Some(s.clone())),
        Record::Throttle(t) if t.event == 0 => stream.push(None),
        other => sym.observe(other),
    })?;
    sym.recorded_on(info.header.as_ref());
    let header = info.header.clone();
    let mode = header.as_ref().map(|h| h.mode.clone()).unwrap_or_default();
    let s =
        strobe_info(&mode).ok_or_else(|| MetricsError::NotStrobed(path.into(), mode.clone()))?;
    let cols = header
        .as_ref()
        .map(Columns::from_header)
        .unwrap_or_default();
    let mut names: HashMap<(u32, u64), String> = HashMap::new();
    let m = compute(stream, s, &cols, discard, split, |pid, ip| {
        names
            .entry((pid, ip))
            .or_insert_with(|| {
                let l = sym.resolve(pid, ip);
                l.sym.map(|n| n.to_string()).unwrap_or_else(|| {
                    format!(
                        "{}+{:#x}",
                        l.dso.rsplit('/').next().unwrap_or(&l.dso),
                        l.vaddr
                    )
                })
            })
            .clone()
    });
    let mut m = m;
    m.warnings.extend(std::mem::take(&mut sym.warnings));
    Ok((m, info))
}

fn f(v: Option<f64>, prec: usize) -> String {
    v.map(|x| format!("{x:.prec$}"))
        .unwrap_or_else(|| "-".into())
}

impl Metrics {
    pub fn render(&self, format: crate::report::Format, top: usize) -> String {
        let rows = if top == 0 {
            &self.rows[..]
        } else {
            &self.rows[..top.min(self.rows.len())]
        };
        let mut s = String::new();
        match format {
            crate::report::Format::Table => {
                let _ = writeln!(
                    s,
                    "# {} windows, {} discarded; whole-run CPI {}",
                    self.windows,
                    self.discarded,
                    f(self.whole_run_cpi, 2)
                );
                let _ = writeln!(
                    s,
                    "{:<32} {:>7} {:>6} {:>6} {:>6} {:>6} {:>6} {:>6} {:>6} {:>6} {:>6} {:>6}",
                    "Symbol",
                    "#",
                    "CPI",
                    "BM/KI",
                    "CM/KI",
                    "%CM",
                    "%CY",
                    "%I",
                    "%BM",
                    "%L1DA",
                    "%L1DM",
                    "DIS"
                );
                for r in rows {
                    let name = match r.split {
                        Some(x) => format!("{} [{x}]", crate::text::show(&r.symbol)),
                        None => crate::text::show(&r.symbol).into_owned(),
                    };
                    let _ = writeln!(s, "{:<32} {:>7} {:>6} {:>6} {:>6} {:>6} {:>6} {:>6} {:>6} {:>6} {:>6} {:>6.1}", name, r.samples, f(r.cpi, 2), f(r.bm_per_ki, 1), f(r.cm_per_ki, 1), f(r.cm_pct, 1), f(r.cycles_pct, 1), f(r.instr_pct, 1), f(r.bm_pct, 1), f(r.l1da_pct, 1), f(r.l1dm_pct, 1), r.discarded_pct);
                }
            }
            crate::report::Format::Csv => {
                s.push_str("symbol,split,samples,cpi,bm_per_ki,cm_per_ki,cm_pct,cycles_pct,instr_pct,bm_pct,l1da_pct,l1dm_pct,discarded_pct\n");
                for r in rows {
                    let o = |v: Option<f64>| v.map(|x| format!("{x:.4}")).unwrap_or_default();
                    let _ = writeln!(
                        s,
                        "{},{},{},{},{},{},{},{},{},{},{},{},{:.4}",
                        crate::report::csv_field(&r.symbol),
                        r.split.map(|x| x.to_string()).unwrap_or_default(),
                        r.samples,
                        o(r.cpi),
                        o(r.bm_per_ki),
                        o(r.cm_per_ki),
                        o(r.cm_pct),
                        o(r.cycles_pct),
                        o(r.instr_pct),
                        o(r.bm_pct),
                        o(r.l1da_pct),
                        o(r.l1dm_pct),
                        r.discarded_pct
                    );
                }
            }
            crate::report::Format::Json => {
                s = serde_json::to_string_pretty(self).expect("metrics serialize");
                s.push('\n');
            }
        }
        s
    }
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
