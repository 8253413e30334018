//! Known answers of off-CPU recordings (`record --off-cpu` of `labperf-bench --blocking`),
//! shared by the tests on this machine (`offcpu.rs`) and on the emulated Arm one.

use crate::{bin, report_json};
use std::collections::BTreeMap;
use std::path::Path;
use std::process::Command;

/// The bench's blocking classes (`labperf-bench --blocking all`).
pub const CLASSES: &[&str] = &[
    "block_sleep",
    "block_mutex",
    "block_pipe",
    "block_file",
    "spin_wall",
];

/// `report --children --format json` with `sel` (`--off-cpu`, `--wall`): each class's
/// inclusive share of the event's period; `cache`: the binary cache a lab machine's
/// recording fetched its binaries into.
pub fn class_children(f: &Path, sel: &str, cache: Option<&Path>) -> BTreeMap<&'static str, f64> {
    let j = report_json(f, 0, |c| {
        c.args(["--children", sel]);
        if let Some(d) = cache {
            c.env("XDG_CACHE_HOME", d);
        }
    });
    let tables = j["tables"].as_array().unwrap();
    assert_eq!(tables.len(), 1, "{sel}: one event, one table: {j}");
    let rows = tables[0]["rows"].as_array().unwrap();
    CLASSES
        .iter()
        .map(|&c| {
            let r = rows
                .iter()
                .find(|r| r["name"] == c)
                .unwrap_or_else(|| panic!("{sel}: no row {c}: {j}"));
            (c, r["children_pct"].as_f64().unwrap())
        })
        .collect()
}

/// Each class's share of the classes together: `got` (report shares) against `want` (ns by
/// the bench's clock), within `points`.
pub fn check_split(what: &str, got: &BTreeMap<&str, f64>, want: impl Fn(&str) -> u64, points: f64) {
    let g: f64 = got.values().sum();
    let w: u64 = CLASSES.iter().map(|c| want(c)).sum();
    for c in CLASSES {
        let (g, w) = (100.0 * got[c] / g, 100.0 * want(c) as f64 / w as f64);
        assert!(
            (g - w).abs() <= points,
            "{what}: {c}: {g:.2}% of the classes' time in the report, {w:.2}% by the bench's clock ({got:?})"
        );
    }
}

/// Per thread from `labperf dump`: (on-CPU ns of cpu-clock, off-CPU ns, its life in ns:
/// FORK (or the recording's start for the first thread) to EXIT).
pub fn threads(f: &Path) -> BTreeMap<u32, (u64, u64, u64)> {
    let info = Command::new(bin("labperf"))
        .arg("info")
        .arg(f)
        .output()
        .unwrap();
    let info = String::from_utf8_lossy(&info.stdout).into_owned();
    let start: f64 = info
        .split_once("the recording started at ")
        .and_then(|(_, r)| r.split_whitespace().next())
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| panic!("no start in {info}"));
    let start = (start * 1e9) as u64;
    let d = Command::new(bin("labperf"))
        .arg("dump")
        .arg(f)
        .output()
        .unwrap();
    assert!(d.status.success());
    let mut t: BTreeMap<u32, (u64, u64, u64, u64)> = BTreeMap::new();
    for l in String::from_utf8_lossy(&d.stdout).lines() {
        let kv: BTreeMap<&str, &str> = l
            .split_whitespace()
            .filter_map(|w| w.split_once('='))
            .collect();
        let num = |k: &str| kv.get(k).and_then(|v| v.parse::<u64>().ok());
        let Some(tid) = num("tid") else { continue };
        let e = t.entry(tid as u32).or_insert((0, 0, start, 0));
        if l.contains(" SAMPLE ") {
            let p = num("period").unwrap();
            match num("ev") {
                Some(0) => e.0 += p,
                Some(1) => e.1 += p,
                ev => panic!("event {ev:?} in {l}"),
            }
        } else if l.contains(" FORK ") {
            e.2 = num("time").unwrap();
        } else if l.contains(" EXIT ") {
            e.3 = num("time").unwrap();
        }
    }
    t.into_iter()
        .map(|(tid, (on, off, from, to))| {
            assert!(to > from, "thread {tid}: no EXIT after its start");
            (tid, (on, off, to - from))
        })
        .collect()
}

/// Each thread's on-CPU samples and off-CPU time add up to its life, from FORK (the main
/// thread: the recording's start, just before its exec) to EXIT, by the kernel's clock: 2%
/// (the bound; what is not counted is the on-CPU time between a thread's last
/// sample and its switch, a sampling error of up to 250 us a switch, and the main thread's
/// exec before its events were enabled).
pub fn check_threads(name: &str, f: &Path) {
    let t = threads(f);
    // `report --wall --by tid` gives each thread the same on- plus off-CPU ns, exactly.
    let j = report_json(f, 0, |c| {
        c.args(["--wall", "--by", "tid"]);
    });
    let by_tid: BTreeMap<u32, u64> = j["tables"][0]["rows"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| {
            (
                r["tid"].as_u64().unwrap() as u32,
                r["period"].as_u64().unwrap(),
            )
        })
        .collect();
    let want: BTreeMap<u32, u64> = t
        .iter()
        .map(|(&tid, &(on, off, _))| (tid, on + off))
        .collect();
    assert_eq!(
        by_tid, want,
        "{name}: report --wall --by tid against the samples"
    );
    assert_eq!(
        t.len(),
        2,
        "{name}: the bench's main thread and its helper: {t:?}"
    );
    for (tid, (on, off, life)) in &t {
        let sum = on + off;
        let err = 100.0 * (sum as f64 - *life as f64).abs() / *life as f64;
        assert!(
            err <= 2.0,
            "{name}: thread {tid}: {on} ns on the CPU + {off} ns off it = {sum} ns, its life {life} ns ({err:.2}% apart)"
        );
        assert!(*off > 0, "{name}: thread {tid} never off the CPU");
    }
}
