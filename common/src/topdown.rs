//! Intel TopDown (Ice Lake and later): decoding the PERF_METRICS register read with RDPMC,
//! slot-scaled deltas between two readings, and perf's ratios and colours for
//! `stat --topdown` (level 1, and level 2 where the CPU has it).

use alloc::string::String;
use alloc::vec::Vec;

/// Level-1 metrics, in the order of their 8-bit fields in PERF_METRICS (bits 0-7, 8-15, …).
pub const LEVEL1: [&str; 4] = ["retiring", "bad-spec", "fe-bound", "be-bound"];

/// The i-th 8-bit field of a PERF_METRICS value (the seed's `GET_METRIC`).
pub const fn field(metrics: u64, i: u32) -> u64 {
    (metrics >> (i * 8)) & 0xff
}

/// The four level-1 fractions of a PERF_METRICS value: each field over 0xff. The four
/// fields add up to 0xff (= 100%).
pub fn level1_fractions(metrics: u64) -> [f64; 4] {
    [0, 1, 2, 3].map(|i| field(metrics, i) as f64 / 255.0)
}

/// One RDPMC reading: the SLOTS fixed counter and the PERF_METRICS register, read together.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Reading {
    pub slots: u64,
    pub metrics: u64,
}

/// Slots per level-1 category between readings `a` and `b`, as the seed computes them:
/// each field scaled by its slots count, then b minus a. The fields are fractions of
/// 0xff, so the results are in slots × 255; [`delta_fractions`] turns them into ratios.
pub fn delta_scaled(a: Reading, b: Reading) -> [i128; 4] {
    [0, 1, 2, 3].map(|i| {
        field(b.metrics, i) as i128 * b.slots as i128
            - field(a.metrics, i) as i128 * a.slots as i128
    })
}

/// The level-1 ratios of the region between `a` and `b` (None if no slots elapsed).
/// The seed's pseudo-code divides the scaled deltas by the slots delta only; the fields
/// are in 1/0xff units, so this also divides by 0xff to get fractions that sum to 1.
pub fn delta_fractions(a: Reading, b: Reading) -> Option<[f64; 4]> {
    let slots = b.slots.checked_sub(a.slots).filter(|&s| s > 0)? as f64;
    Some(delta_scaled(a, b).map(|v| v as f64 / 255.0 / slots))
}

/// perf's ratio: a metric over the sum of the metrics read with it (the kernel's
/// topdown-* counts, slot-scaled). perf's `full_td` rule: at least two metrics must be
/// present with a non-zero count, else there is no ratio.
pub fn ratios(counts: &[Option<u64>]) -> Option<Vec<Option<f64>>> {
    let (num, den) = ratio_parts(counts)?;
    Some(
        num.iter()
            .map(|n| n.map(|v| v as f64 / den as f64))
            .collect(),
    )
}

/// [`ratios`] as (numerators, common denominator), for integer callers (the agent
/// prints tenths of a percent without floats).
pub fn ratio_parts(counts: &[Option<u64>]) -> Option<(Vec<Option<u64>>, u64)> {
    let nonzero = counts.iter().flatten().filter(|&&v| v > 0).count();
    let sum: u64 = counts
        .iter()
        .flatten()
        .fold(0u64, |a, &v| a.saturating_add(v));
    if nonzero < 2 || sum == 0 {
        return None;
    }
    Some((counts.to_vec(), sum))
}

/// `num / den` in tenths of a percent, rounded half up (integer only).
pub fn permille(num: u64, den: u64) -> u64 {
    if den == 0 {
        return 0;
    }
    ((num as u128 * 2000 + den as u128) / (den as u128 * 2)) as u64
}

/// The level-1 metric events, in PERF_METRICS field order, with their raw configs on the
/// cpu (or cpu_core) PMU: `event=0x00,umask=0x80..0x83`.
pub const LEVEL1_EVENTS: [(&str, u64); 4] = [
    ("topdown-retiring", 0x8000),
    ("topdown-bad-spec", 0x8100),
    ("topdown-fe-bound", 0x8200),
    ("topdown-be-bound", 0x8300),
];
/// Level 2 (Sapphire Rapids and later): each splits one level-1 metric.
pub const LEVEL2_EVENTS: [(&str, u64); 4] = [
    ("topdown-heavy-ops", 0x8400),
    ("topdown-br-mispredict", 0x8500),
    ("topdown-fetch-lat", 0x8600),
    ("topdown-mem-bound", 0x8700),
];
/// The SLOTS fixed counter (fixed counter 3): `event=0x00,umask=0x4`.
pub const SLOTS: (&str, u64) = ("slots", 0x0400);
/// Column titles: level 1, then level 2 with the four derived ones after each pair.
pub const LEVEL1_TITLES: [&str; 4] = [
    "retiring",
    "bad speculation",
    "frontend bound",
    "backend bound",
];
pub const LEVEL2_TITLES: [&str; 8] = [
    "heavy operations",
    "light operations",
    "branch mispredict",
    "machine clears",
    "fetch latency",
    "fetch bandwidth",
    "memory bound",
    "core bound",
];

/// Pre-Ice Lake TopDown events (generic counters, per core): total slots, slots issued,
/// slots retired, fetch bubbles, recovery bubbles, in this order.
pub const LEGACY_EVENTS: [&str; 5] = [
    "topdown-total-slots",
    "topdown-slots-issued",
    "topdown-slots-retired",
    "topdown-fetch-bubbles",
    "topdown-recovery-bubbles",
];

/// perf's pre-Ice Lake formulas (stat-shadow's `td_*`), as numerators over the total
/// slots (`counts` in [`LEGACY_EVENTS`] order, already multiplied by their sysfs scale):
/// retiring = retired; bad speculation = issued − retired + recovery bubbles; frontend
/// bound = fetch bubbles; backend bound = total − the other three. perf clamps values
/// just below 0 to 0; callers clamp each ratio to [0, 1].
pub fn legacy_parts(counts: [u64; 5]) -> Option<([u64; 4], u64)> {
    let [total, issued, retired, fetch, recovery] = counts;
    if total == 0 {
        return None;
    }
    // Saturating arithmetic: each part is clamped to [0, total].
    let bad = issued
        .saturating_add(recovery)
        .saturating_sub(retired)
        .min(total);
    let (ret, fe) = (retired.min(total), fetch.min(total));
    let be = total.saturating_sub(ret.saturating_add(bad).saturating_add(fe));
    Some(([ret, bad, fe, be], total))
}

/// [`legacy_parts`] as fractions.
pub fn legacy_fractions(counts: [u64; 5]) -> Option<[f64; 4]> {
    let (n, d) = legacy_parts(counts)?;
    Some(n.map(|v| v as f64 / d as f64))
}

/// Ice Lake and later (SLOTS + PERF_METRICS), or the older per-core events.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Metrics,
    Legacy,
}

/// Where each TopDown event sits in a list of counts, and which columns follow from it:
/// level 1 (4 columns), and with level 2 heavy ops, light ops, branch mispredict,
/// machine clears, fetch latency, fetch bandwidth, memory bound, core bound.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Layout {
    pub kind: Kind,
    pub level: u8,
    pub l1: [Option<usize>; 4],
    pub l2: [Option<usize>; 4],
    pub legacy: [Option<usize>; 5],
}

impl Layout {
    /// The layout of counts named `names` (event names, in count order).
    pub fn new<'a>(kind: Kind, level: u8, names: impl Iterator<Item = &'a str> + Clone) -> Layout {
        let at = |n: &str| names.clone().position(|x| x == n);
        Layout {
            kind,
            level,
            l1: LEVEL1_EVENTS.map(|(n, _)| at(n)),
            l2: LEVEL2_EVENTS.map(|(n, _)| at(n)),
            legacy: LEGACY_EVENTS.map(at),
        }
    }

    /// The column titles.
    pub fn titles(&self) -> Vec<&'static str> {
        let mut t = LEVEL1_TITLES.to_vec();
        if self.level == 2 {
            t.extend(LEVEL2_TITLES);
        }
        t
    }

    /// The columns of `v` as numerators over one denominator (None: not measured), or
    /// None when perf would print no ratios (fewer than two metrics above zero).
    pub fn parts(&self, v: &[u64]) -> Option<(Vec<Option<u64>>, u64)> {
        let get = |i: Option<usize>| i.and_then(|i| v.get(i).copied());
        match self.kind {
            Kind::Legacy => {
                let c = self.legacy.map(|i| get(i).unwrap_or(0));
                let (num, den) = legacy_parts(c)?;
                Some((num.iter().map(|&x| Some(x)).collect(), den))
            }
            Kind::Metrics => {
                let l1: Vec<Option<u64>> = self.l1.iter().map(|&i| get(i)).collect();
                let (mut num, den) = ratio_parts(&l1)?;
                if self.level == 2 {
                    for (&at, whole) in self.l2.iter().zip(&l1) {
                        let part = get(at).unwrap_or(0);
                        num.push(Some(part));
                        num.push(Some(whole.unwrap_or(0).saturating_sub(part)));
                    }
                }
                Some((num, den))
            }
        }
    }

    /// [`Layout::parts`] as fractions.
    pub fn fractions(&self, v: &[u64]) -> Option<Vec<Option<f64>>> {
        let (num, den) = self.parts(v)?;
        Some(
            num.iter()
                .map(|n| n.map(|n| n as f64 / den as f64))
                .collect(),
        )
    }
}

/// Level-2 values derived from level 1 and the four level-2 metrics, all as fractions:
/// (light-ops, machine-clears, fetch-bandwidth, core-bound) =
/// (retiring − heavy-ops, bad-spec − br-mispredict, fe-bound − fetch-lat, be-bound − mem-bound).
pub fn level2_derived(
    l1: [f64; 4],
    heavy_ops: f64,
    br_mispredict: f64,
    fetch_lat: f64,
    mem_bound: f64,
) -> [f64; 4] {
    [
        l1[0] - heavy_ops,
        l1[1] - br_mispredict,
        l1[2] - fetch_lat,
        l1[3] - mem_bound,
    ]
    .map(|v| v.max(0.0))
}

/// How perf colours a level-1 ratio.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Colour {
    Normal,
    Green,
    Red,
}

/// perf's thresholds: retiring above 70% green; frontend and backend bound above 20%
/// red; bad speculation above 10% red.
pub fn colour(metric: &str, ratio: f64) -> Colour {
    match metric {
        "retiring" if ratio > 0.7 => Colour::Green,
        "fe-bound" | "be-bound" if ratio > 0.2 => Colour::Red,
        "bad-spec" if ratio > 0.1 => Colour::Red,
        _ => Colour::Normal,
    }
}

/// The seed's warning for `stat --topdown` without `-I`, with the grammar its review asked for.
pub const LONG_RUN_WARNING: &str = "Topdown accuracy may decrease when measuring long periods.\nPlease print the result regularly, e.g. -I1000";

/// One table cell: `num / den` in tenths of a percent, rounded half up (`23.0%`), or `-`
/// when the metric was not measured. The agent's live lines and the host's tables both
/// print through this, so they agree to the digit.
pub fn cell(num: Option<u64>, den: u64) -> String {
    match num {
        Some(n) => {
            let p = permille(n, den);
            alloc::format!("{}.{}%", p / 10, p % 10)
        }
        None => "-".into(),
    }
}

/// The cells of a line: each column of [`Layout::parts`], or all `-` when perf would
/// print no ratios.
pub fn cells(parts: Option<&(Vec<Option<u64>>, u64)>, ncols: usize) -> Vec<String> {
    (0..ncols)
        .map(|i| match parts {
            Some((num, den)) => cell(num.get(i).copied().flatten(), *den),
            None => "-".into(),
        })
        .collect()
}

/// Nanoseconds as seconds with nine decimals (`1.001281330`).
pub fn seconds(ns: u64) -> String {
    alloc::format!("{}.{:09}", ns / 1_000_000_000, ns % 1_000_000_000)
}

/// The table header: `#`, the first column's title right-aligned in 15, `thread` in 12
/// when per thread, then each title right-aligned in 21 (the seed's interval table).
pub fn header_line(first: &str, per_thread: bool, titles: &[&str]) -> String {
    use core::fmt::Write;
    let mut s = String::new();
    let _ = write!(s, "#{first:>15}");
    if per_thread {
        let _ = write!(s, "{:>12}", "thread");
    }
    for t in titles {
        let _ = write!(s, "{t:>21}");
    }
    s
}

/// One table line: the first column (a time, `total`, or slots) right-aligned in 16, the
/// thread in 12 when given (`Some("")` keeps the column blank), then each cell in 21.
pub fn table_line(first: &str, tid: Option<&str>, cells: &[String]) -> String {
    use core::fmt::Write;
    let mut s = String::new();
    let _ = write!(s, "{first:>16}");
    if let Some(t) = tid {
        let _ = write!(s, "{t:>12}");
    }
    for c in cells {
        let _ = write!(s, "{c:>21}");
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;
    use alloc::vec;

    #[test]
    fn fields_over_0xff() {
        // Hand-built from the seed: retiring 0x40, bad-spec 0x10, fe 0x2f, be 0x80 (sum 0xff).
        let m = 0x80_2f_10_40u64;
        assert_eq!(
            [field(m, 0), field(m, 1), field(m, 2), field(m, 3)],
            [0x40, 0x10, 0x2f, 0x80]
        );
        let f = level1_fractions(m);
        assert!((f[0] - 64.0 / 255.0).abs() < 1e-12);
        assert!(
            (f.iter().sum::<f64>() - 1.0).abs() < 1e-12,
            "the four fields add up to 0xff"
        );
        assert_eq!(
            field(0xffff_ffff_0000_0000 | m, 3),
            0x80,
            "upper bits are not part of level 1"
        );
    }

    #[test]
    fn slot_scaled_deltas() {
        // a: 1000 slots, all retiring. b: 3000 slots, half retiring, half backend bound
        // (0x7f / 0x80). Between them 2000 slots: retiring 0x7f*3000 - 0xff*1000 slot-fields.
        let a = Reading {
            slots: 1000,
            metrics: 0xff,
        };
        let b = Reading {
            slots: 3000,
            metrics: 0x80_00_00_7f,
        };
        let d = delta_scaled(a, b);
        assert_eq!(d, [0x7f * 3000 - 0xff * 1000, 0, 0, 0x80 * 3000]);
        let r = delta_fractions(a, b).unwrap();
        assert!((r[0] - (127.0 * 3000.0 - 255.0 * 1000.0) / 255.0 / 2000.0).abs() < 1e-12);
        assert!((r[3] - 128.0 * 3000.0 / 255.0 / 2000.0).abs() < 1e-12);
        assert!(
            (r.iter().sum::<f64>() - 1.0).abs() < 1e-9,
            "the region's ratios add up to 1"
        );
        assert_eq!(delta_fractions(b, b), None);
    }

    #[test]
    fn perf_ratios_need_two_metrics() {
        let r = ratios(&[Some(300), Some(100), Some(100), Some(500)]).unwrap();
        assert_eq!(r, vec![Some(0.3), Some(0.1), Some(0.1), Some(0.5)]);
        let r = ratios(&[Some(300), None, Some(100), None]).unwrap();
        assert_eq!(r, vec![Some(0.75), None, Some(0.25), None]);
        assert_eq!(ratios(&[Some(300), None, None, None]), None);
        assert_eq!(ratios(&[Some(0), Some(0)]), None);
        // perf's full_td counts metrics above zero: one non-zero metric is not enough.
        assert_eq!(ratios(&[Some(300), Some(0), Some(0), Some(0)]), None);
        assert_eq!(permille(153, 1000), 153);
        assert_eq!(permille(1, 3), 333);
        assert_eq!(permille(2, 3), 667);
        assert_eq!(permille(5, 0), 0);
    }

    #[test]
    fn legacy_formulas() {
        // total 1000, issued 600, retired 400, fetch bubbles 150, recovery 50:
        // retiring 0.4, bad spec (600-400+50)/1000 = 0.25, fe 0.15, be 1-0.8 = 0.2.
        let f = legacy_fractions([1000, 600, 400, 150, 50]).unwrap();
        assert_eq!(f, [0.4, 0.25, 0.15, 0.2]);
        // Over-full: backend bound clamps at 0 rather than going negative.
        assert_eq!(legacy_fractions([100, 90, 40, 40, 0]).unwrap()[3], 0.0);
        assert_eq!(legacy_fractions([0, 1, 1, 1, 1]), None);
    }

    #[test]
    fn level2_and_colours() {
        let l2 = level2_derived([0.5, 0.2, 0.2, 0.1], 0.1, 0.15, 0.05, 0.12);
        let want = [0.4, 0.05, 0.15, 0.0];
        for (g, w) in l2.iter().zip(want) {
            assert!((g - w).abs() < 1e-12, "{l2:?}");
        }
        assert_eq!(colour("retiring", 0.71), Colour::Green);
        assert_eq!(colour("retiring", 0.70), Colour::Normal);
        assert_eq!(colour("bad-spec", 0.11), Colour::Red);
        assert_eq!(colour("fe-bound", 0.21), Colour::Red);
        assert_eq!(colour("be-bound", 0.2), Colour::Normal);
        assert!(LONG_RUN_WARNING
            .starts_with("Topdown accuracy may decrease when measuring long periods."));
    }

    #[test]
    fn one_formatter_rounds_half_up() {
        // 3/2000 = 0.15%: rounded half up in integers, not through a binary float.
        assert_eq!(cell(Some(3), 2000), "0.2%");
        assert_eq!(cell(Some(1), 3), "33.3%");
        assert_eq!(cell(Some(2), 3), "66.7%");
        assert_eq!(cell(None, 3), "-");
        assert_eq!(seconds(1_001_281_330), "1.001281330");
        assert_eq!(seconds(5), "0.000000005");
        assert_eq!(
            table_line(
                &seconds(2_003_009_005),
                None,
                &cells(Some(&(vec![Some(50), None], 1000)), 2)
            ),
            "     2.003009005                 5.0%                    -"
        );
        assert_eq!(
            header_line("time", true, &["a"]),
            "#           time      thread                    a"
        );
    }
}
