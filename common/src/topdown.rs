//! Intel TopDown (Ice Lake and later): decoding the PERF_METRICS register read with RDPMC,
//! slot-scaled deltas between two readings, and perf's ratios and colours for
//! `stat --topdown` (level 1, and level 2 where the CPU has it).

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
/// topdown-* counts). Needs at least two metrics with a non-zero sum.
pub fn ratios(counts: &[Option<u64>]) -> Option<Vec<Option<f64>>> {
    let present: Vec<u64> = counts.iter().flatten().copied().collect();
    let sum: u64 = present.iter().sum();
    if present.len() < 2 || sum == 0 {
        return None;
    }
    Some(
        counts
            .iter()
            .map(|c| c.map(|v| v as f64 / sum as f64))
            .collect(),
    )
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
}
