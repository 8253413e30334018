//! Call stacks by frame pointers (`-g`, `--call-graph fp`) on this machine: the bench's
//! call tree (`labperf-bench --calls`, known inclusive shares) recorded by the agent and by
//! `labperf record`, reported with `--children`, and checked against `perf report
//! --children` on a perf recording of the same workload.

use labperf_tests::{bin, report_json, scratch, BENCH_LEAF_PATHS};
use std::collections::BTreeMap;
use std::path::Path;
use std::process::Command;

/// The bench's call tree: each function's inclusive share of the tree's time (the slices
/// that `main` runs through calls_a and calls_b), percent, as designed.
const TREE: &[(&str, f64)] = &[
    ("labperf_bench::calls_a", 50.0),
    ("labperf_bench::calls_b", 50.0),
    // Inlined into calls_b: a frame from the bench's DWARF.
    ("calls_b_inlined", 50.0),
    ("nops", 50.0),
    ("int_divider_stalls", 25.0),
    ("fp_divider_stalls", 25.0),
];

/// Runs `labperf-bench --calls` under `cmd` (a recorder and its options) and returns the
/// tree's shares as the bench measured them: the CPU time of each path's slices
/// ("spent calls_a nops 0.75"), as `TREE`'s names → percent of the tree.
fn record_calls(cmd: &mut Command) -> BTreeMap<String, f64> {
    record_calls_of(cmd, &bin("labperf-bench"))
}

fn record_calls_of(cmd: &mut Command, bench: &Path) -> BTreeMap<String, f64> {
    record_calls_with(cmd, bench, &[])
}

/// `record_calls_of` with more bench arguments (`--threads N`).
fn record_calls_with(cmd: &mut Command, bench: &Path, more: &[&str]) -> BTreeMap<String, f64> {
    let o = cmd
        .arg("--")
        .arg(bench)
        .args(["--calls", "--duration", "3"])
        .args(more)
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
        *spent.entry(format!("{} {}", w[0], w[1])).or_default() += s;
    }
    // calls_b calls through calls_b_inlined, which DWARF alone names.
    spent.insert("calls_b_inlined".into(), spent["labperf_bench::calls_b"]);
    let tree = spent["labperf_bench::calls_a"] + spent["labperf_bench::calls_b"];
    spent.values_mut().for_each(|v| *v = 100.0 * *v / tree);
    // And the tree's CPU time itself, seconds (all threads).
    spent.insert(TREE_CPU_S.into(), tree);
    spent
}

/// The key of the tree's CPU time in seconds in `record_calls`' map.
const TREE_CPU_S: &str = "tree CPU seconds";

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
    check_tree(&f, &spent);
}

/// Runs `labperf-bench-nofp --calls` (the bench built without frame pointers).
fn record_calls_nofp(cmd: &mut Command) -> BTreeMap<String, f64> {
    record_calls_of(cmd, &bin("labperf-bench-nofp"))
}

#[test]
fn dwarf_stacks_of_the_bench_built_without_frame_pointers_give_its_known_inclusive_shares() {
    let d = scratch("stacks-dwarf");
    // Frame pointers cannot unwind this build: its stacks stop in the leaf.
    let fp = d.join("fp.lpr");
    record_calls_nofp(
        Command::new(bin("labperf-agent"))
            .args(["record", "-g", "-c", "250000", "-o"])
            .arg(&fp),
    );
    let (rows, _) = children(&fp);
    let main = rows.get("labperf_bench::main").map_or(0.0, |r| r.0);
    assert!(
        main < 5.0,
        "frame pointers reached main in {main}%: the build has them"
    );
    // DWARF CFI does.
    let f = d.join("dwarf.lpr");
    let spent = record_calls_nofp(
        Command::new(bin("labperf-agent"))
            .args(["record", "--call-graph", "dwarf", "-c", "250000", "-o"])
            .arg(&f),
    );
    check_tree(&f, &spent);
    // Compact: each stack is what changed since the thread's previous one. perf writes
    // the whole 8192 bytes asked for (and the registers) with every sample: a twentieth
    // of that is the goal.
    let (_, summary) = children(&f);
    let n = summary["total_samples"].as_u64().unwrap();
    let per = std::fs::metadata(&f).unwrap().len() as f64 / n as f64;
    assert!(per <= 8192.0 / 20.0, "{per:.1} bytes per sample");
}

/// The tree's inclusive shares in `report --children` rows against the bench's clock.
fn check_shares(rows: &BTreeMap<String, (f64, f64)>, spent: &BTreeMap<String, f64>) {
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
}

/// The bench tree's checks on a recording: every inclusive share within 2 points of the
/// bench's clock, ≥ 99 % of samples unwound to main, the leaves holding the time.
fn check_tree(f: &Path, spent: &BTreeMap<String, f64>) {
    let f = f.to_path_buf();
    // The bench's own account of its split: the design's, within 2 points (its slices are
    // random around their means).
    for &(name, want) in TREE {
        assert!((spent[name] - want).abs() <= 2.0, "{name}: {spent:?}");
    }
    let (rows, summary) = children(&f);
    let total = summary["total_samples"].as_u64().unwrap();
    // A sample every 250 µs of the bench's CPU time (the tree's alone is less than the
    // bench's): how many depends on how busy the CPUs are, so the floor is 90% of what the
    // bench's own clock says, and at least 2000 (a 25% share's binomial sd: 1 point).
    let floor = (0.9 * spent[TREE_CPU_S] * 4000.0).max(2000.0);
    assert!(
        total as f64 >= floor,
        "{total} samples, {floor:.0} expected from {:.2} s of the tree's CPU time",
        spent[TREE_CPU_S]
    );
    // Every sample has a stack (at least one frame beyond the sampled function).
    let stacked = summary["stacked_samples"].as_u64().unwrap();
    assert!(
        stacked as f64 >= 0.99 * total as f64,
        "{stacked} of {total}"
    );
    // Unwound to main: every sample but those outside the bench's own code (the vDSO's
    // clock_gettime keeps no frame pointer).
    let main = rows["labperf_bench::main"].0;
    assert!(main >= 99.0, "labperf_bench::main: children {main:.2}%");
    check_shares(&rows, spent);
    let tree = rows["labperf_bench::calls_a"].0 + rows["labperf_bench::calls_b"].0;
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
        (&["--call-graph", "dwarf,4096"][..], "dwarf"),
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
    // Modes this agent does not have, and stack sizes the kernel refuses, are refused
    // with the reason.
    for (mode, says) in [
        ("lbr", "frame pointers (fp) or DWARF"),
        ("dwarf,70000", "8 to 65528"),
    ] {
        let o = Command::new(bin("labperf-agent"))
            .args(["record", "--call-graph", mode, "--", "true"])
            .output()
            .unwrap();
        assert_eq!(o.status.code(), Some(2));
        assert!(String::from_utf8_lossy(&o.stderr).contains(says), "{mode}");
        let o = Command::new(bin("labperf"))
            .args(["record", "--local", "--call-graph", mode, "--", "true"])
            .output()
            .unwrap();
        assert_eq!(
            o.status.code(),
            Some(2),
            "labperf record --call-graph {mode}"
        );
    }
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
    // The first 10 of ours that perf lists too (perf has no entry for an inlined function:
    // the std helpers inlined into main's callers, calls_b_inlined; we do), and the tree's
    // functions wherever they rank.
    let tree: Vec<&str> = TREE.iter().map(|t| t.0).collect();
    let mut compared = Vec::new();
    let mut top10 = 0;
    for (name, pct) in top {
        let Some(&p) = theirs.get(name.as_str()) else {
            continue;
        };
        top10 += 1;
        if top10 > 10 && !tree.contains(&name.as_str()) {
            continue;
        }
        assert!(
            (pct - p).abs() <= 2.0,
            "{name}: labperf {pct:.2}%, perf {p:.2}%\nperf: {theirs:?}"
        );
        compared.push(name.clone());
    }
    // perf lists no inlined function as an entry of its own (its callchains show them).
    let named = TREE.iter().map(|t| t.0).filter(|n| *n != "calls_b_inlined");
    for name in named.chain(["labperf_bench::main"]) {
        assert!(
            compared.iter().any(|c| c == name),
            "{name} not compared: ours {ours:?}, perf {theirs:?}"
        );
    }
}

/// The line numbers (1-based) in the bench's `classes.rs` of the first line containing
/// `text` after the line containing `start`.
fn line_of(start: &str, text: &str) -> u32 {
    let src = std::fs::read_to_string(
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../agents/labperf-bench/src/classes.rs"),
    )
    .unwrap();
    let lines: Vec<&str> = src.lines().collect();
    let from = lines.iter().position(|l| l.contains(start)).unwrap();
    (lines[from..].iter().position(|l| l.contains(text)).unwrap() + from + 1) as u32
}

/// Rows of one table of a JSON report.
fn rows<'a>(j: &'a serde_json::Value, table: &str) -> &'a Vec<serde_json::Value> {
    j["tables"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["name"] == table)
        .unwrap_or_else(|| panic!("no table {table} in {j}"))["rows"]
        .as_array()
        .unwrap()
}

#[test]
fn source_lines_inlined_frames_and_call_graphs_of_the_bench_call_tree() {
    let d = scratch("stacks-lines");
    let f = d.join("calls.lpr");
    let spent = record_calls(
        Command::new(bin("labperf-agent"))
            .args(["record", "-g", "-c", "250000", "-o"])
            .arg(&f),
    );
    let count = |j: &serde_json::Value, key: &str| -> BTreeMap<String, u64> {
        rows(j, "functions")
            .iter()
            .map(|r| {
                (
                    r["name"].as_str().unwrap().to_string(),
                    r[key].as_u64().unwrap(),
                )
            })
            .collect()
    };
    // --by srcline: each class's samples fall on the lines of its hot loop in classes.rs
    // (their numbers read from the source): the `for` and the statement it repeats. 95%:
    // the rest are the function's entry and exit.
    let by_sym = count(&report_json(&f, 0, |_| {}), "samples");
    let by_line = count(
        &report_json(&f, 0, |c| {
            c.args(["--by", "srcline"]);
        }),
        "samples",
    );
    for (class, body) in [
        ("int_divider_stalls", "x = (x / d)"),
        ("fp_divider_stalls", "x /= d"),
        ("nops", "asm!("),
    ] {
        let f = format!("fn {class}");
        let lines = [line_of(&f, "for _ in 0.."), line_of(&f, body)];
        let on: u64 = lines
            .iter()
            .map(|l| {
                by_line
                    .get(&format!("classes.rs:{l}"))
                    .copied()
                    .unwrap_or(0)
            })
            .sum();
        let all = by_sym[class];
        assert!(
            on as f64 >= 0.95 * all as f64,
            "{class}: {on} of {all} samples on classes.rs:{lines:?}\n{by_line:?}"
        );
    }
    // The inlined frame is a frame of the stacks: every sample under calls_b passes through
    // it, but those sampled in calls_b itself (its own code, and the inlined function's
    // code after the call returns: a sampled address is the symbol table's function).
    let (children, _) = children(&f);
    let b = children["labperf_bench::calls_b"];
    assert!(b.0 > 40.0, "calls_b {b:?}");
    let inlined = children.get("calls_b_inlined").map_or(0.0, |c| c.0);
    assert!(
        (inlined - (b.0 - b.1)).abs() < 1e-9,
        "{inlined} of calls_b's {b:?}"
    );
    // --call-graph caller: under calls_b, calls_b_inlined with every sample of calls_b,
    // then run_slice; under calls_a, run_slice, then its two leaves.
    let caller = report_json(&f, 0, |c| {
        c.args(["--call-graph", "caller", "--depth", "2"]);
    });
    let tree = |j: &serde_json::Value, top: &str| -> Vec<(u64, String, u64)> {
        rows(j, "call_graph")
            .iter()
            .filter(|r| r["function"] == top)
            .map(|r| {
                (
                    r["depth"].as_u64().unwrap(),
                    r["name"].as_str().unwrap().to_string(),
                    r["samples"].as_u64().unwrap(),
                )
            })
            .collect()
    };
    let fs = count(&caller, "children");
    let tb = tree(&caller, "labperf_bench::calls_b");
    let nb = fs["labperf_bench::calls_b"];
    assert_eq!(tb[0], (0, "labperf_bench::calls_b".into(), nb), "{tb:?}");
    let nb_self = count(&caller, "self")["labperf_bench::calls_b"];
    assert_eq!(tb[1], (1, "calls_b_inlined".into(), nb - nb_self), "{tb:?}");
    assert_eq!(tb[2].0, 2, "{tb:?}");
    assert_eq!(tb[2].1, "labperf_bench::run_slice", "{tb:?}");
    assert!(tb.iter().all(|r| r.0 <= 2), "--depth 2: {tb:?}");
    let ta = tree(&caller, "labperf_bench::calls_a");
    // Its two leaves (a clock read of run_slice's can pass the 0.5% limit: not a leaf of
    // the tree's design).
    let na = fs["labperf_bench::calls_a"];
    let leaves: Vec<&str> = ta
        .iter()
        .filter(|r| r.0 == 2 && r.2 * 20 >= na)
        .map(|r| r.1.as_str())
        .collect();
    let mut sorted = leaves.clone();
    sorted.sort();
    assert_eq!(sorted, ["int_divider_stalls", "nops"], "{ta:?}");
    let leaf_sum: u64 = ta.iter().filter(|r| r.0 == 2).map(|r| r.2).sum();
    assert!(
        leaf_sum as f64 >= 0.97 * fs["labperf_bench::calls_a"] as f64,
        "{ta:?}"
    );
    // Siblings busiest first.
    assert!(ta[2].2 >= ta[3].2, "{ta:?}");
    // --call-graph callee: nops is reached through run_slice, which calls_a and (inlined)
    // calls_b call, every sample of it once, split as the bench's clock says (within
    // 2 points of the tree: cpu-clock samples the same CPU time the bench measures).
    let callee = report_json(&f, 0, |c| {
        c.args(["--call-graph", "callee", "--depth", "2"]);
    });
    let tn = tree(&callee, "nops");
    let nn = count(&callee, "children")["nops"];
    assert_eq!(tn[0], (0, "nops".into(), nn), "{tn:?}");
    assert_eq!(tn[1].1, "labperf_bench::run_slice", "{tn:?}");
    // The rest: main's calibration calls each class once, before the tree.
    let via_slices = tn[1].2;
    assert!(via_slices as f64 >= 0.99 * nn as f64, "{tn:?}");
    let callers: BTreeMap<&str, u64> = tn
        .iter()
        .filter(|r| r.0 == 2)
        .map(|r| (r.1.as_str(), r.2))
        .collect();
    assert_eq!(
        callers.keys().copied().collect::<Vec<_>>(),
        ["calls_b_inlined", "labperf_bench::calls_a"],
        "{tn:?}"
    );
    assert_eq!(callers.values().sum::<u64>(), via_slices, "{tn:?}");
    let tree_samples = (fs["labperf_bench::calls_a"] + nb) as f64;
    for (caller, path) in [
        ("labperf_bench::calls_a", "calls_a nops"),
        ("calls_b_inlined", "calls_b nops"),
    ] {
        let got = 100.0 * callers[caller] as f64 / tree_samples;
        let want = spent[path];
        assert!(
            (got - want).abs() <= 2.0,
            "nops via {caller}: {got:.2}% of the tree, {want:.2}% by the bench's clock"
        );
    }
}

/// Kernel text symbols of this machine's /proc/kallsyms, by name.
fn kallsyms_names() -> std::collections::BTreeSet<String> {
    std::fs::read_to_string("/proc/kallsyms")
        .unwrap()
        .lines()
        .filter_map(|l| {
            let w: Vec<&str> = l.split_whitespace().collect();
            matches!(w.get(1), Some(&("t" | "T" | "w" | "W"))).then(|| w[2].to_string())
        })
        .collect()
}

#[test]
fn kernel_frames_are_named_from_kallsyms_as_perf_names_them() {
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        // Kernel samples need root under perf_event_paranoid 2; CI runs as root.
        assert!(
            std::env::var_os("CI").is_none(),
            "CI runs the tests as root"
        );
        eprintln!("skipped: kernel sampling needs root");
        return;
    }
    let d = scratch("stacks-kernel");
    // dd from /dev/zero to /dev/null: nearly all its time is in the kernel.
    let dd = |cmd: &mut Command| {
        let o = cmd
            .arg("--")
            .args([
                "dd",
                "if=/dev/zero",
                "of=/dev/null",
                "bs=64k",
                "count=150000",
            ])
            .output()
            .unwrap();
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    };
    let f = d.join("k.lpr");
    dd(Command::new(bin("labperf-agent"))
        .args(["record", "-e", "cpu-clock:k", "-g", "-c", "100000", "-o"])
        .arg(&f));
    let data = d.join("perf.data");
    dd(Command::new("perf")
        .args([
            "record",
            "-q",
            "-g",
            "-e",
            "cpu-clock:k",
            "-c",
            "100000",
            "-o",
        ])
        .arg(&data));
    let (ours, summary) = children(&f);
    let total = summary["total_samples"].as_u64().unwrap();
    assert!(total > 1000, "{total} samples");
    let j = report_json(&f, 0, |c| {
        c.arg("--children");
    });
    let kernel: Vec<(String, f64)> = rows(&j, "functions")
        .iter()
        .filter(|r| r["dso"] == "[kernel.kallsyms]")
        .map(|r| {
            (
                r["name"].as_str().unwrap().to_string(),
                r["children_pct"].as_f64().unwrap(),
            )
        })
        .collect();
    // Every kernel frame is named, with a name this kernel has; the stacks reach the
    // system call entry from user space.
    let names = kallsyms_names();
    let unnamed: Vec<&(String, f64)> = kernel.iter().filter(|k| !names.contains(&k.0)).collect();
    assert!(
        kernel.len() >= 5 && unnamed.is_empty(),
        "unnamed {unnamed:?} of {kernel:?}"
    );
    let entry = kernel.iter().map(|k| k.1).fold(0.0, f64::max);
    assert!(
        entry >= 95.0,
        "the busiest kernel frame holds {entry}% of {kernel:?}"
    );
    // perf names the same functions with the same Children shares, within 3 points (two
    // runs of dd: the split between its read and write system calls varies that much).
    let theirs = perf_children(&data);
    let mut compared = 0;
    for (name, pct) in kernel.iter().take(10) {
        let p = theirs
            .get(name)
            .unwrap_or_else(|| panic!("{name} not in perf's report: {theirs:?}"));
        assert!(
            (pct - p).abs() <= 3.0,
            "{name}: labperf {pct:.2}%, perf {p:.2}%"
        );
        compared += 1;
    }
    assert!(compared >= 5, "{compared} compared; ours {ours:?}");
}

#[test]
fn a_files_kernel_symbols_name_its_kernel_addresses_and_hidden_ones_get_a_note() {
    use labperf_common::*;
    let d = scratch("stacks-ksyms");
    let write = |name: &str, ksyms: KernelSymbols| {
        let mut enc = Encoder::new();
        let mut file = prelude(WIRE_VERSION).to_vec();
        let h = Header {
            agent_version: "test".into(),
            arch: Arch::X86_64,
            endian: Endian::Little,
            kernel_release: "6.1".into(),
            cpu: CpuId::Unknown {
                cpuinfo: String::new(),
            },
            hostname: "lab".into(),
            command: vec!["dd".into()],
            clock_id: 1,
            start_time_ns: 0,
            start_realtime_ns: 0,
            events: vec![EventDesc {
                name: "cpu-clock".into(),
                attr: Attr::default(),
                leader: None,
            }],
            mode: "sample".into(),
            notes: vec![],
        };
        file.extend(enc.header_frame(&h));
        // Leaf, caller, its caller: a kernel stack, then a user frame nothing maps.
        for (ip, chain) in [
            (
                0xffff_ffff_8100_1010u64,
                vec![0xffff_ffff_8100_3008u64, 0x4010],
            ),
            (0xffff_ffff_8100_1020, vec![0xffff_ffff_8100_3008, 0x4010]),
            (0xffff_ffff_8100_3004, vec![0x4010]),
        ] {
            enc.push(&Record::Sample(Sample {
                pid: 7,
                tid: 7,
                ip,
                period: 1,
                callchain: std::iter::once(ip).chain(chain).collect(),
                ..Default::default()
            }));
        }
        enc.push(&Record::KernelSymbols(ksyms));
        file.extend(enc.flush().unwrap());
        file.extend(enc.trailer_frame(&Trailer::default()));
        let f = d.join(name);
        std::fs::write(&f, file).unwrap();
        f
    };
    let sym = |start: u64, end: u64, name: &str| KernelSymbol {
        start,
        end,
        name: name.into(),
        module: None,
    };
    let f = write(
        "named.lpr",
        KernelSymbols {
            syms: vec![
                sym(0xffff_ffff_8100_1000, 0xffff_ffff_8100_2000, "read_zero"),
                sym(0xffff_ffff_8100_3000, 0xffff_ffff_8100_4000, "vfs_read"),
            ],
            hidden: None,
        },
    );
    let (rows, _) = children(&f);
    let got = |n: &str| {
        rows.get(n)
            .map(|r| (r.0.round() as u64, r.1.round() as u64))
    };
    // read_zero: 2 of 3 samples, all its own; vfs_read: in every stack, 1 sampled in it.
    assert_eq!(got("read_zero"), Some((67, 67)), "{rows:?}");
    assert_eq!(got("vfs_read"), Some((100, 33)), "{rows:?}");
    let flat = report_json(&f, 0, |_| {});
    let names: Vec<(&str, &str)> = rows_of(&flat)
        .iter()
        .map(|r| (r["name"].as_str().unwrap(), r["dso"].as_str().unwrap()))
        .collect();
    assert_eq!(
        names,
        [
            ("read_zero", "[kernel.kallsyms]"),
            ("vfs_read", "[kernel.kallsyms]")
        ]
    );
    // kptr_restrict: addresses, and a note that says why and what to do.
    let f = write(
        "hidden.lpr",
        KernelSymbols {
            syms: vec![],
            hidden: Some(1),
        },
    );
    let j = report_json(&f, 0, |_| {});
    let w = j["warnings"].to_string();
    assert!(
        w.contains("kptr_restrict = 1") && w.contains("sysctl"),
        "{w}"
    );
    assert!(rows_of(&j).iter().all(|r| r["name"]
        .as_str()
        .unwrap()
        .starts_with("[kernel.kallsyms]+0x")));
    // `dump` shows the record.
    let o = Command::new(bin("labperf"))
        .arg("dump")
        .arg(&f)
        .output()
        .unwrap();
    assert!(
        String::from_utf8_lossy(&o.stdout).contains("KSYMS 0 symbols hidden (kptr_restrict=1)"),
        "{}",
        String::from_utf8_lossy(&o.stdout)
    );
}

fn rows_of(j: &serde_json::Value) -> &Vec<serde_json::Value> {
    j["tables"][0]["rows"].as_array().unwrap()
}

#[test]
fn dwarf_stacks_of_processes_a_shell_forks_and_execs_unwind_each_in_its_own_mappings() {
    // sh forks twice and execs the bench in each child: two processes with their own pids
    // and mappings (the first runs beside the second on the other CPU), and the shell.
    let d = scratch("stacks-fork");
    let f = d.join("fork.lpr");
    let nofp = bin("labperf-bench-nofp");
    let script = format!(
        "{0} --calls --duration 1 & {0} --calls --duration 1; wait",
        nofp.display()
    );
    let o = Command::new(bin("labperf-agent"))
        .args(["record", "--call-graph", "dwarf", "-c", "250000", "-o"])
        .arg(&f)
        .args(["--", "sh", "-c", &script])
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    // Two bench processes of their own (other pids than the shell; the kernel's comm is the
    // name's first 15 bytes) were sampled, each for a
    // good part of its second of CPU: the count is not exact, as other tests share the CPUs.
    let dump = Command::new(bin("labperf"))
        .arg("dump")
        .arg(&f)
        .output()
        .unwrap();
    assert!(dump.status.success());
    let dump = String::from_utf8_lossy(&dump.stdout);
    let mut bench_pids = BTreeMap::<String, u64>::new();
    for l in dump.lines() {
        if l.contains("COMM (exec)") && l.ends_with(" labperf-bench-n") {
            let pid = l
                .split_whitespace()
                .find(|w| w.starts_with("pid="))
                .unwrap();
            bench_pids.insert(pid.to_string(), 0);
        }
    }
    for l in dump.lines().filter(|l| l.contains(" SAMPLE ")) {
        let pid = l
            .split_whitespace()
            .find(|w| w.starts_with("pid="))
            .unwrap();
        if let Some(n) = bench_pids.get_mut(pid) {
            *n += 1;
        }
    }
    assert_eq!(bench_pids.len(), 2, "{bench_pids:?}");
    assert!(bench_pids.values().all(|&n| n > 1000), "{bench_pids:?}");
    let (rows, _) = children(&f);
    // Both processes' stacks reach main: each is half the samples.
    let main = rows["labperf_bench::main"].0;
    assert!(main >= 98.0, "labperf_bench::main: children {main:.2}%");
    for inner in ["labperf_bench::calls_a", "labperf_bench::calls_b"] {
        let s = rows[inner].0;
        assert!((s - 50.0).abs() <= 3.0, "{inner}: {s:.2}%");
    }
}

/// `report --call-graph callee --depth 2 --format json` of a metrics recording: (symbol,
/// caller path) → windows, from its callers table.
fn metrics_callers(f: &Path) -> BTreeMap<(String, String), u64> {
    let j = report_json(f, 0, |c| {
        c.args(["--call-graph", "callee", "--depth", "2"]);
    });
    rows(&j, "callers")
        .iter()
        .map(|r| {
            (
                (
                    r["symbol"].as_str().unwrap().to_string(),
                    r["caller"].as_str().unwrap().to_string(),
                ),
                r["samples"].as_u64().unwrap(),
            )
        })
        .collect()
}

/// A strobed metrics recording's rows split by caller: each leaf of the bench's tree by the
/// path that reached it, each path's share of the tree's windows within 2 points of the
/// bench's clock, and no tree window under another path.
fn check_metrics_callers(f: &Path, spent: &BTreeMap<String, f64>) {
    let by = metrics_callers(f);
    let of = |sym: &str, path: &str| by.get(&(sym.into(), path.into())).copied().unwrap_or(0);
    let tree: u64 = BENCH_LEAF_PATHS.iter().map(|&(s, p, _)| of(s, p)).sum();
    // 3 s of windows every 300 µs of CPU: ~9000 for the tree's 2.5 s.
    assert!(tree > 4000, "{tree} windows in the tree: {by:?}");
    for &(sym, path, bench) in BENCH_LEAF_PATHS {
        let got = 100.0 * of(sym, path) as f64 / tree as f64;
        let want = spent[bench];
        assert!(
            (got - want).abs() <= 2.0,
            "{sym} by {path}: {got:.2}% of the tree's windows, {want:.2}% by the bench's clock"
        );
    }
    // Each leaf's windows through run_slice came by the tree's paths only (its calibration
    // calls it directly, and a window ending in the call itself is one frame up).
    for leaf in ["nops", "int_divider_stalls", "fp_divider_stalls"] {
        let other: u64 = by
            .iter()
            .filter(|((s, p), _)| s == leaf && p.starts_with("labperf_bench::run_slice <- "))
            .filter(|((s, p), _)| {
                !BENCH_LEAF_PATHS
                    .iter()
                    .any(|&(ls, lp, _)| ls == s && lp == p)
            })
            .map(|(_, n)| n)
            .sum();
        assert_eq!(other, 0, "{leaf} by another path: {by:?}");
    }
}

#[test]
fn metrics_rows_split_by_caller_give_the_bench_trees_paths_with_fp_and_dwarf_stacks() {
    let d = scratch("stacks-metrics");
    // Strobed windows of cpu-clock (the counters this machine has), each window's end
    // sample with its stack: by frame pointers, then from the bench built without them.
    let f = d.join("fp.lpr");
    let spent = record_calls(
        Command::new(bin("labperf-agent"))
            .args(["record", "--metrics", "--strobe", "fixed", "-g"])
            .args(["-c", "300000", "--window", "30000", "-o"])
            .arg(&f),
    );
    check_metrics_callers(&f, &spent);
    let f = d.join("dwarf.lpr");
    let spent = record_calls_nofp(
        Command::new(bin("labperf-agent"))
            .args([
                "record",
                "--metrics",
                "--strobe",
                "fixed",
                "--call-graph",
                "dwarf",
            ])
            .args(["-c", "300000", "--window", "30000", "-o"])
            .arg(&f),
    );
    check_metrics_callers(&f, &spent);
    // Depth 1 names the immediate caller; a recording without stacks says it has none.
    let j = report_json(&f, 0, |c| {
        c.args(["--call-graph", "callee"]);
    });
    let callers: std::collections::BTreeSet<&str> = rows(&j, "callers")
        .iter()
        .filter(|r| r["symbol"] == "nops")
        .map(|r| r["caller"].as_str().unwrap())
        .collect();
    assert!(callers.contains("labperf_bench::run_slice"), "{callers:?}");
    assert!(callers.iter().all(|c| !c.contains(" <- ")), "{callers:?}");
    let flat = d.join("flat.lpr");
    record_calls(
        Command::new(bin("labperf-agent"))
            .args(["record", "--metrics", "--strobe", "fixed"])
            .args(["-c", "300000", "--window", "30000", "-o"])
            .arg(&flat),
    );
    let j = report_json(&flat, 0, |c| {
        c.args(["--call-graph", "callee"]);
    });
    assert!(
        j["warnings"]
            .to_string()
            .contains("no sample has a call stack"),
        "{}",
        j["warnings"]
    );
    // Callers of a metrics row come from below it: --call-graph caller is refused, with why.
    let o = Command::new(bin("labperf"))
        .args(["report", "--call-graph", "caller"])
        .arg(&f)
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(1), "{o:?}");
    assert!(
        String::from_utf8_lossy(&o.stderr).contains("pass --call-graph callee"),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
}

#[test]
fn stacks_of_three_threads_give_the_trees_shares_by_fp_and_by_dwarf() {
    // The bench's rotation in its main thread and two more (bench-1, bench-2), each with
    // its own stack: by frame pointers, then by DWARF from the build without them (each
    // thread's user stack coded against that thread's previous one).
    let d = scratch("stacks-threads");
    let runs = [
        ("fp", bin("labperf-bench"), &["-g"][..]),
        (
            "dwarf",
            bin("labperf-bench-nofp"),
            &["--call-graph", "dwarf"][..],
        ),
    ];
    for (name, bench, opts) in runs {
        let f = d.join(format!("{name}.lpr"));
        let spent = record_calls_with(
            Command::new(bin("labperf-agent"))
                .arg("record")
                .args(opts)
                .args(["-c", "250000", "-o"])
                .arg(&f),
            &bench,
            &["--threads", "3"],
        );
        // Three threads of one process sampled, each for a good part of the run (not an
        // exact count: 3 threads share 2 CPUs with other tests).
        let dump = Command::new(bin("labperf"))
            .arg("dump")
            .arg(&f)
            .output()
            .unwrap();
        assert!(dump.status.success());
        let mut tids = BTreeMap::<String, u64>::new();
        let mut pids = std::collections::BTreeSet::new();
        for l in String::from_utf8_lossy(&dump.stdout)
            .lines()
            .filter(|l| l.contains(" SAMPLE "))
        {
            let field = |k: &str| {
                l.split_whitespace()
                    .find(|w| w.starts_with(k))
                    .map(str::to_string)
            };
            pids.insert(field("pid=").unwrap());
            *tids.entry(field("tid=").unwrap()).or_default() += 1;
        }
        assert_eq!(pids.len(), 1, "{name}: {pids:?}");
        assert_eq!(tids.len(), 3, "{name}: {tids:?}");
        assert!(tids.values().all(|&n| n > 500), "{name}: {tids:?}");
        // Every thread's stack goes through rotate (the spawned threads' do not reach main).
        let (rows, _) = children(&f);
        let rotate = rows["labperf_bench::rotate"].0;
        assert!(
            rotate >= 99.0,
            "{name}: labperf_bench::rotate: children {rotate:.2}%"
        );
        let main = rows["labperf_bench::main"].0;
        assert!(
            (20.0..50.0).contains(&main),
            "{name}: labperf_bench::main {main:.2}%: the main thread's third"
        );
        check_shares(&rows, &spent);
    }
}
