//! Call stacks by frame pointers (`-g`, `--call-graph fp`) on this machine: the bench's
//! call tree (`labperf-bench --calls`, known inclusive shares) recorded by the agent and by
//! `labperf record`, reported with `--children`, and checked against `perf report
//! --children` on a perf recording of the same workload.

use labperf_tests::{bin, report_json, scratch};
use std::collections::BTreeMap;
use std::path::Path;
use std::process::Command;

/// The bench's call tree: each function's inclusive share of the tree's time (the slices
/// that `main` runs through calls_a and calls_b), percent, as designed.
const TREE: &[(&str, f64)] = &[
    ("labperf_bench::calls_a", 50.0),
    ("labperf_bench::calls_b", 50.0),
    ("nops", 50.0),
    ("int_divider_stalls", 25.0),
    ("fp_divider_stalls", 25.0),
];

/// Runs `labperf-bench --calls` under `cmd` (a recorder and its options) and returns the
/// tree's shares as the bench measured them: the CPU time of each path's slices
/// ("spent calls_a nops 0.75"), as `TREE`'s names → percent of the tree.
fn record_calls(cmd: &mut Command) -> BTreeMap<String, f64> {
    let o = cmd
        .arg("--")
        .arg(bin("labperf-bench"))
        .args(["--calls", "--duration", "3"])
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let mut spent: BTreeMap<String, f64> = BTreeMap::new();
    for l in String::from_utf8_lossy(&o.stderr).lines() {
        let Some(rest) = l.strip_prefix("labperf-bench: spent ") else {
            continue;
        };
        let w: Vec<&str> = rest.split_whitespace().collect();
        let s: f64 = w[2].parse().unwrap();
        *spent.entry(format!("labperf_bench::{}", w[0])).or_default() += s;
        *spent.entry(w[1].to_string()).or_default() += s;
    }
    let tree = spent["labperf_bench::calls_a"] + spent["labperf_bench::calls_b"];
    spent.values_mut().for_each(|v| *v = 100.0 * *v / tree);
    spent
}

/// `report --children --format json` as name → (children %, self %), and the summary.
fn children(f: &Path) -> (BTreeMap<String, (f64, f64)>, serde_json::Value) {
    let j = report_json(f, 0, |c| {
        c.arg("--children");
    });
    let rows = j["tables"][0]["rows"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| {
            (
                r["name"].as_str().unwrap().to_string(),
                (
                    r["children_pct"].as_f64().unwrap(),
                    r["self_pct"].as_f64().unwrap(),
                ),
            )
        })
        .collect();
    (rows, j["summary"].clone())
}

#[test]
fn fp_stacks_of_the_bench_call_tree_give_its_known_inclusive_shares() {
    let d = scratch("stacks-fp");
    let f = d.join("calls.lpr");
    let spent = record_calls(
        Command::new(bin("labperf-agent"))
            .args(["record", "-g", "-c", "250000", "-o"])
            .arg(&f),
    );
    // The bench's own account of its split: the design's, within 2 points (its slices are
    // random around their means).
    for &(name, want) in TREE {
        assert!((spent[name] - want).abs() <= 2.0, "{name}: {spent:?}");
    }
    let (rows, summary) = children(&f);
    let total = summary["total_samples"].as_u64().unwrap();
    assert!(total > 8000, "{total} samples in 3 s at 4 kHz");
    // Every sample has a stack (the kernel walked at least one frame pointer).
    let stacked = summary["stacked_samples"].as_u64().unwrap();
    assert!(
        stacked as f64 >= 0.99 * total as f64,
        "{stacked} of {total}"
    );
    // Unwound to main: every sample but those outside the bench's own code (the vDSO's
    // clock_gettime keeps no frame pointer).
    let main = rows["labperf_bench::main"].0;
    assert!(main >= 99.0, "labperf_bench::main: children {main:.2}%");
    // The tree's inclusive shares (of calls_a + calls_b: main's calibration before the
    // tree is outside it) against the bench's own account, within 2 points: cpu-clock
    // samples every 250 µs of the same CPU time the bench measures.
    let tree = rows["labperf_bench::calls_a"].0 + rows["labperf_bench::calls_b"].0;
    for &(name, _) in TREE {
        let (got, _) = rows
            .get(name)
            .copied()
            .unwrap_or_else(|| panic!("{name} not in {rows:?}"));
        let got = 100.0 * got / tree;
        let want = spent[name];
        assert!(
            (got - want).abs() <= 2.0,
            "{name}: {got:.2}% of the tree in the profile, {want:.2}% by the bench's clock"
        );
    }
    // The inner nodes run no work of their own; the leaves are where time is spent.
    for inner in ["labperf_bench::calls_a", "labperf_bench::calls_b"] {
        assert!(rows[inner].1 < 0.5, "{inner} self {}", rows[inner].1);
    }
    let leaves: f64 = ["nops", "int_divider_stalls", "fp_divider_stalls"]
        .iter()
        .map(|n| rows[*n].1)
        .sum();
    assert!(
        leaves >= 0.97 * tree,
        "the leaves' self shares add to {leaves}, the tree's to {tree}"
    );
}

#[test]
fn labperf_record_g_passes_stacks_through_and_a_flat_recording_says_it_has_none() {
    let d = scratch("stacks-cli");
    for (flag, name) in [
        (&["-g"][..], "g"),
        (&["--call-graph", "fp"][..], "fp"),
        (&[][..], "flat"),
    ] {
        let f = d.join(format!("{name}.lpr"));
        let o = Command::new(bin("labperf"))
            .args(["record", "--local", "--no-report", "-c", "500000"])
            .args(flag)
            .arg("-o")
            .arg(&f)
            .arg("--")
            .arg(bin("labperf-bench"))
            .args(["--calls", "--duration", "0.5"])
            .env("XDG_CACHE_HOME", d.join("cache"))
            .output()
            .unwrap();
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        let j = report_json(&f, 0, |c| {
            c.arg("--children");
        });
        let (total, stacked) = (
            j["summary"]["total_samples"].as_u64().unwrap(),
            j["summary"]["stacked_samples"].as_u64().unwrap(),
        );
        let note = j["warnings"]
            .to_string()
            .contains("no sample has a call stack");
        if name == "flat" {
            assert_eq!(stacked, 0);
            assert!(note, "{}", j["warnings"]);
        } else {
            assert!(
                stacked as f64 >= 0.99 * total as f64,
                "{name}: {stacked} of {total}"
            );
            assert!(!note);
        }
    }
    // Modes this agent does not have are refused with the reason.
    let o = Command::new(bin("labperf-agent"))
        .args(["record", "--call-graph", "dwarf", "--", "true"])
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&o.stderr).contains("frame pointers only"));
}

/// `perf report --children` as symbol → children %.
fn perf_children(data: &Path) -> BTreeMap<String, f64> {
    let o = Command::new("perf")
        .args([
            "report",
            "--children",
            "--stdio",
            "--sort",
            "sym",
            "-g",
            "none",
        ])
        .args(["--percent-limit", "0", "-i"])
        .arg(data)
        .output()
        .expect("perf (cargo xtask setup installs linux-perf)");
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    // "    50.12%     0.00%  [.] labperf_bench::calls_a"
    String::from_utf8_lossy(&o.stdout)
        .lines()
        .filter(|l| !l.trim_start().starts_with('#'))
        .filter_map(|l| {
            let w: Vec<&str> = l.split_whitespace().collect();
            let pct: f64 = w.first()?.strip_suffix('%')?.parse().ok()?;
            let at = w.iter().position(|x| *x == "[.]" || *x == "[k]")?;
            Some((w[at + 1..].join(" "), pct))
        })
        .collect()
}

#[test]
fn children_agree_with_perf_report_children_on_the_bench_call_tree() {
    let d = scratch("stacks-perf");
    let data = d.join("perf.data");
    record_calls(
        Command::new("perf")
            .args([
                "record",
                "-q",
                "-g",
                "-e",
                "cpu-clock:u",
                "-c",
                "250000",
                "-o",
            ])
            .arg(&data),
    );
    let theirs = perf_children(&data);
    let f = d.join("calls.lpr");
    record_calls(
        Command::new(bin("labperf-agent"))
            .args(["record", "-g", "-c", "250000", "-o"])
            .arg(&f),
    );
    let (ours, _) = children(&f);
    // Our top 10 by children, each against perf's share of the same function (two runs
    // of the same randomized split: within 2 points).
    let mut top: Vec<(&String, f64)> = ours.iter().map(|(k, v)| (k, v.0)).collect();
    top.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(b.0)));
    let mut compared = Vec::new();
    for (name, pct) in top.into_iter().take(10) {
        let Some(&p) = theirs.get(name.as_str()) else {
            continue;
        };
        assert!(
            (pct - p).abs() <= 2.0,
            "{name}: labperf {pct:.2}%, perf {p:.2}%\nperf: {theirs:?}"
        );
        compared.push(name.clone());
    }
    for name in TREE.iter().map(|t| t.0).chain(["labperf_bench::main"]) {
        assert!(
            compared.iter().any(|c| c == name),
            "{name} not compared: ours {ours:?}, perf {theirs:?}"
        );
    }
}
