//! Report filters as perf spells them (issue 49, item 3): `--comm`, `--pid`, `--tid`,
//! `--dsos`, `--symbols`, `--time`, `--percentage`, `--percent-limit`, `-n`, `--max-stack`,
//! `-G`, `--header-only`; each checked against the unfiltered report's rows of one crafted
//! recording (two processes, one of two threads, call stacks, known times), in the flat
//! table, `--children`, `export` and `diff`; `--pid` against perf 6.1 on a perf.data.

use labperf_common::*;
use labperf_tests::views::*;
use labperf_tests::{bin, root, scratch};
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// The first sample's time, ns; the samples are `STEP` apart.
const T0: u64 = 5_000_000_000;
const STEP: u64 = 10_000_000;

fn mapping(pid: u32) -> Record {
    match cxx_map() {
        Record::Mmap2(m) => Record::Mmap2(Mmap2 { pid, tid: pid, ..m }),
        _ => unreachable!(),
    }
}

fn comm(pid: u32, tid: u32, name: &str) -> Record {
    Record::Comm(Comm {
        pid,
        tid,
        comm: name.into(),
        exec: false,
    })
}

/// The recording: process 1 `alpha` (threads 1 and 2) and process 7 `beta`, in cxx.elf;
/// (pid, tid, ip, callchain, period, how many), the samples in this order, `STEP` apart.
const PLAN: &[(u32, u32, u64, bool, u64, u32)] = &[
    // map_find called from plain_c (a call stack: plain_c's Children hold them).
    (1, 1, FIND_AT, true, 1000, 5),
    (1, 1, PLAIN_AT, false, 1000, 2),
    (1, 2, FIND_AT, false, 2000, 3),
    (7, 7, PLAIN_AT, false, 1000, 4),
    // In the mapping but in no function.
    (7, 7, 0x40_0800, false, 3000, 1),
    (1, 2, PLAIN_AT, false, 1000, 6),
];

fn recording(dir: &Path) -> PathBuf {
    let mut r = vec![
        mapping(1),
        mapping(7),
        comm(1, 1, "alpha"),
        comm(1, 2, "alpha"),
        comm(7, 7, "beta"),
    ];
    let mut t = T0;
    for &(pid, tid, ip, chain, period, n) in PLAN {
        for _ in 0..n {
            r.push(Record::Sample(Sample {
                pid,
                tid,
                ip,
                time: t,
                period,
                // The return address into plain_c (looked up a byte back: PLAIN_AT).
                callchain: if chain {
                    vec![ip, PLAIN_AT + 1]
                } else {
                    vec![ip]
                },
                ..Default::default()
            }));
            t += STEP;
        }
    }
    let f = dir.join("two.lpr");
    std::fs::write(
        &f,
        file(
            vec![event("cycles", None, 0x107 | 0x20)],
            Recipe::Sample { group_read: false },
            &r,
        ),
    )
    .unwrap();
    f
}

fn total_samples() -> u64 {
    PLAN.iter().map(|p| u64::from(p.5)).sum()
}

fn labperf(args: &[&str], f: &Path) -> Output {
    Command::new(bin("labperf"))
        .args(args)
        .arg(f)
        .arg("--symfs")
        .arg(views())
        .output()
        .unwrap()
}

fn json(args: &[&str], f: &Path) -> Value {
    let mut a = vec!["report", "--format", "json", "--top", "0"];
    a.extend_from_slice(args);
    let o = labperf(&a, f);
    assert!(
        o.status.success(),
        "{args:?}: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    serde_json::from_slice(&o.stdout).unwrap()
}

fn rows(j: &Value) -> Vec<Value> {
    j["tables"][0]["rows"].as_array().unwrap().clone()
}

fn kept(j: &Value) -> u64 {
    j["summary"]["filter"]["kept_samples"].as_u64().unwrap()
}

/// Each row of `--by KEY` against `--OPTION VALUE`: the filtered report is that row, its
/// samples, period and share exact (perf's absolute percentage), and with `--percentage
/// relative` 100%; every value of the unfiltered table is tried, and they add up to all.
fn each_row_is_its_filter(f: &Path, key: &str, option: &str) {
    let whole = json(&["--by", key], f);
    let rs = rows(&whole);
    assert!(rs.len() >= 2, "{whole}");
    // The column of the key (`name` for functions).
    let col = if key == "symbol" { "name" } else { key };
    let mut sum = 0;
    for r in &rs {
        let v = match &r[col] {
            Value::String(s) => s.clone(),
            other => other.to_string(),
        };
        let j = json(&["--by", key, option, &v], f);
        let got = rows(&j);
        assert_eq!(got.len(), 1, "{option} {v}: {j}");
        assert_eq!(
            got[0], *r,
            "{option} {v}: the row as in the unfiltered table"
        );
        assert_eq!(j["summary"]["total_samples"], r["samples"], "{option} {v}");
        assert_eq!(kept(&j), r["samples"].as_u64().unwrap());
        assert_eq!(j["summary"]["filter"]["samples"], total_samples());
        assert_eq!(j["summary"]["filter"]["percentage"], "absolute");
        let rel = json(&["--by", key, option, &v, "--percentage", "relative"], f);
        assert_eq!(rows(&rel)[0]["percent"], 100.0, "{option} {v} relative");
        sum += r["samples"].as_u64().unwrap();
    }
    assert_eq!(sum, total_samples());
}

#[test]
fn comm_pid_and_tid_filters_give_the_by_comm_pid_and_tid_rows() {
    let d = scratch("filters-threads");
    let f = recording(&d);
    each_row_is_its_filter(&f, "comm", "--comm");
    each_row_is_its_filter(&f, "pid", "--pid");
    each_row_is_its_filter(&f, "tid", "--tid");
    // The counts known from the plan: alpha 16, beta 5; thread 2 of alpha 9.
    assert_eq!(kept(&json(&["--comm", "alpha"], &f)), 16);
    assert_eq!(kept(&json(&["--comms", "beta"], &f)), 5);
    assert_eq!(kept(&json(&["--tid", "2"], &f)), 9);
    assert_eq!(kept(&json(&["--pid", "1,7"], &f)), 21);
    // The heading says the report is filtered and of how much.
    let o = labperf(&["report", "--comm", "beta"], &f);
    let text = String::from_utf8_lossy(&o.stdout);
    assert!(
        text.contains("# filtered by --comm beta: 5 of the 21 samples kept (23.81%); percentages are of all 21 samples"),
        "{text}"
    );
}

#[test]
fn symbols_and_dsos_filters_give_the_functions_and_files_rows() {
    let d = scratch("filters-names");
    let f = recording(&d);
    // Symbols: the C++ name's commas are not separators.
    each_row_is_its_filter(&f, "symbol", "--symbols");
    let j = json(&["--symbols", &format!("{CXX_FIND},plain_c")], &f);
    assert_eq!(kept(&j), 8 + 12);
    let rs = rows(&j);
    let names: Vec<&str> = rs.iter().map(|r| r["name"].as_str().unwrap()).collect();
    assert_eq!(names, ["plain_c", CXX_FIND]);
    // A name is matched whole, as perf's: a prefix is not the function.
    assert_eq!(kept(&json(&["--symbols", "plain"], &f)), 0);
    // Dsos, by file name or path: every sample is in cxx.elf.
    assert_eq!(kept(&json(&["--dsos", "cxx.elf"], &f)), total_samples());
    assert_eq!(kept(&json(&["-d", "/cxx.elf"], &f)), total_samples());
    assert_eq!(kept(&json(&["--dsos", "libc.so.6"], &f)), 0);
    // Combined with a thread: alpha's map_find is thread 1's 5 and thread 2's 3.
    assert_eq!(kept(&json(&["--symbols", CXX_FIND, "--tid", "2"], &f)), 3);
}

#[test]
fn time_windows_absolute_and_percent_slices_part_the_samples() {
    let d = scratch("filters-time");
    let f = recording(&d);
    // Absolute, in seconds as perf prints them: the first 7 samples (thread 1's).
    let j = json(&["--time", "5,5.06", "--by", "tid"], &f);
    assert_eq!(j["summary"]["total_samples"], 7);
    assert_eq!(rows(&j)[0]["tid"], 1);
    // (Both ends are in the window, as perf's: the sample at 5.06 s is in both.)
    assert_eq!(
        json(&["--time", "5.06,"], &f)["summary"]["total_samples"],
        15
    );
    assert_eq!(json(&["--time", ",5.0"], &f)["summary"]["total_samples"], 1);
    // Ten slices of 10%: each sample in exactly one, their counts adding up to all.
    let mut sum = 0;
    let mut per = Vec::new();
    for k in 1..=10 {
        let n = json(&["--time", &format!("10%/{k}")], &f)["summary"]["total_samples"]
            .as_u64()
            .unwrap();
        per.push(n);
        sum += n;
    }
    assert_eq!(sum, total_samples(), "{per:?}");
    // The span is 200 steps (21 samples, 20 gaps): each slice 2 steps, the last 3 samples.
    assert_eq!(per, [2, 2, 2, 2, 2, 2, 2, 2, 2, 3]);
    let a = json(&["--time", "0%-50%"], &f)["summary"]["total_samples"]
        .as_u64()
        .unwrap();
    let b = json(&["--time", "50%-100%"], &f)["summary"]["total_samples"]
        .as_u64()
        .unwrap();
    assert_eq!((a, b), (10, 11));
    assert_eq!(
        json(&["--time", "10%/1,10%/2"], &f)["summary"]["total_samples"],
        4
    );
    // Shares are of the window's samples.
    let j = json(&["--time", "0%-50%", "--by", "tid"], &f);
    let pct: f64 = rows(&j)
        .iter()
        .map(|r| r["percent"].as_f64().unwrap())
        .sum();
    assert!((pct - 100.0).abs() < 1e-9, "{j}");
    // A bad window says what a window is.
    let o = labperf(&["report", "--time", "10%/11"], &f);
    assert_eq!(o.status.code(), Some(2));
    assert!(
        String::from_utf8_lossy(&o.stderr).contains("there is no slice 11 of 10%"),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
}

#[test]
fn the_account_stays_the_recording_s_and_the_heading_says_filtered() {
    // A recording with the kernel's CPU-time account: filtered, the account is the same,
    // the heading says what the filter kept.
    let f = root().join("tests/data/v2-usage/record.lpr");
    let whole = json(&[], &f);
    let j = json(&["--time", "0%-50%"], &f);
    assert!(whole["summary"]["cpu_time"].is_object(), "{whole}");
    assert_eq!(j["summary"]["cpu_time"], whole["summary"]["cpu_time"]);
    let all = whole["summary"]["total_samples"].as_u64().unwrap();
    assert_eq!(j["summary"]["filter"]["samples"], all);
    assert_eq!(
        j["summary"]["filter"]["kept_samples"],
        j["summary"]["total_samples"]
    );
    assert!(j["summary"]["total_samples"].as_u64().unwrap() < all, "{j}");
}

#[test]
fn percent_limit_and_show_nr_samples_as_perf() {
    let d = scratch("filters-limit");
    let f = recording(&d);
    let whole = rows(&json(&[], &f));
    for limit in [0.0, 10.0, 20.0, 40.0] {
        let got = rows(&json(&["--percent-limit", &limit.to_string()], &f));
        let want: Vec<Value> = whole
            .iter()
            .filter(|r| r["percent"].as_f64().unwrap() >= limit)
            .cloned()
            .collect();
        assert_eq!(got, want, "--percent-limit {limit}");
    }
    assert!(rows(&json(&["--percent-limit", "20"], &f)).len() < whole.len());
    // With --children, the Children share.
    let ch = rows(&json(&["--children", "--percent-limit", "50"], &f));
    assert!(
        ch.iter()
            .all(|r| r["children_pct"].as_f64().unwrap() >= 50.0)
            && !ch.is_empty(),
        "{ch:?}"
    );
    // -n: the Samples column is always there; the same table.
    let a = labperf(&["report"], &f);
    let b = labperf(&["report", "-n"], &f);
    assert!(b.status.success());
    assert_eq!(a.stdout, b.stdout);
}

/// The `--children` rows by name: (children samples, self samples).
fn children(j: &Value) -> std::collections::BTreeMap<String, (u64, u64)> {
    rows(j)
        .iter()
        .map(|r| {
            (
                r["name"].as_str().unwrap().to_string(),
                (r["children"].as_u64().unwrap(), r["self"].as_u64().unwrap()),
            )
        })
        .collect()
}

#[test]
fn filters_children_max_stack_and_inverted_graph() {
    let d = scratch("filters-children");
    let f = recording(&d);
    // plain_c's Children: its own 12 and the 5 map_find samples it called.
    let all = children(&json(&["--children"], &f));
    assert_eq!(all["plain_c"], (17, 12), "{all:?}");
    // --max-stack 1: the sampled function alone, Children is Self.
    let one = children(&json(&["--children", "--max-stack", "1"], &f));
    for (name, (c, s)) in &one {
        assert_eq!(c, s, "{name}");
    }
    assert_eq!(one["plain_c"], (12, 12));
    // --max-stack 2: the 5 two-frame stacks are cut there, and the line says so by N
    // (before: "5 cut at the 4-frame limit", the kernel's count with its context markers).
    let o = labperf(&["report", "--children", "--max-stack", "2"], &f);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let text = String::from_utf8_lossy(&o.stdout);
    assert!(
        text.lines().any(|l| l
            == "# call stacks (fp): 21 samples, 0 reached the outermost frame, 5 cut at --max-stack 2, \
                16 stopped (16 frame pointer missing in cxx.elf, 16 of them at the sampled function)"),
        "{text}"
    );
    // --depth N: N levels of each function's call graph, its own row the first (before:
    // N levels under it, --depth 1 showed map_find under plain_c).
    let levels = |depth: &str| -> Vec<(String, u64, String)> {
        let j = json(&["-G", "--depth", depth], &f);
        let t = j["tables"]
            .as_array()
            .unwrap()
            .iter()
            .find(|t| t["name"] == "call_graph")
            .unwrap()
            .clone();
        t["rows"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|r| r["function"] == "plain_c")
            .map(|r| {
                (
                    r["name"].as_str().unwrap().to_string(),
                    r["depth"].as_u64().unwrap(),
                    r["samples"].to_string(),
                )
            })
            .collect()
    };
    let root = ("plain_c".to_string(), 0, "17".to_string());
    assert_eq!(levels("1"), std::slice::from_ref(&root));
    let two = vec![root, (CXX_FIND.to_string(), 1, "5".to_string())];
    assert_eq!(levels("2"), two);
    assert_eq!(levels("0"), two);
    // Filters in --children: thread 1 only (5 map_find under plain_c, 2 plain_c).
    let t1 = children(&json(&["--children", "--tid", "1"], &f));
    assert_eq!(t1["plain_c"], (7, 2));
    assert_eq!(t1[CXX_FIND], (5, 5));
    // --symbols keeps the samples in map_find: plain_c is there as their caller only.
    let s = children(&json(&["--children", "--symbols", CXX_FIND], &f));
    assert_eq!(s["plain_c"], (5, 0));
    assert_eq!(s[CXX_FIND], (8, 8));
    // --comm, by the thread's name in stacks.
    let j = json(&["--children", "--comm", "beta"], &f);
    assert_eq!(kept(&j), 5);
    // -G is perf's caller-based graph: --call-graph caller.
    let a = labperf(&["report", "-G"], &f);
    let b = labperf(&["report", "--call-graph", "caller"], &f);
    assert!(a.status.success(), "{}", String::from_utf8_lossy(&a.stderr));
    assert_eq!(a.stdout, b.stdout);
    assert!(String::from_utf8_lossy(&a.stdout).contains("Call graph (caller)"));
}

#[test]
fn export_diff_and_the_html_page_take_the_filters() {
    let d = scratch("filters-export");
    let f = recording(&d);
    // Folded stacks of beta: its 5 samples.
    let o = labperf(&["export", "--format", "folded", "--comm", "beta"], &f);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let folded = String::from_utf8_lossy(&o.stdout);
    let n: u64 = folded
        .lines()
        .map(|l| l.rsplit(' ').next().unwrap().parse::<u64>().unwrap())
        .sum();
    // (folded weighs by period: 4 x 1000 + 3000)
    assert_eq!(n, 7000, "{folded}");
    assert!(folded.lines().all(|l| l.starts_with("beta;")), "{folded}");
    // Nothing kept: said so.
    let o = labperf(&["export", "--format", "folded", "--pid", "99"], &f);
    assert!(!o.status.success());
    assert!(String::from_utf8_lossy(&o.stderr).contains("the filters keep no sample"));
    // diff of a file with itself, one thread: that thread's rows, no change.
    let o = Command::new(bin("labperf"))
        .args(["diff", "--format", "json", "--tid", "2"])
        .arg(&f)
        .arg(&f)
        .arg("--symfs")
        .arg(views())
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let j: Value = serde_json::from_slice(&o.stdout).unwrap();
    let names: Vec<String> = rows(&j).iter().map(|r| r["name"].to_string()).collect();
    assert_eq!(names.len(), 2, "{j}");
    // The HTML page says it is filtered.
    let o = labperf(&["report", "--format", "html", "--comm", "beta"], &f);
    assert!(o.status.success());
    assert!(String::from_utf8_lossy(&o.stdout).contains("filtered by --comm beta"));
}

#[test]
fn header_only_is_info_and_other_views_say_why_not() {
    let d = scratch("filters-other");
    let f = recording(&d);
    let a = labperf(&["report", "--header-only"], &f);
    let b = Command::new(bin("labperf"))
        .args(["info"])
        .arg(&f)
        .arg("--symfs")
        .arg(views())
        .output()
        .unwrap();
    assert!(a.status.success());
    assert_eq!(a.stdout, b.stdout);
    assert!(String::from_utf8_lossy(&a.stdout).contains("hostname:        golden"));
    // A metrics recording: windows of a strobe pair samples, no filter applies.
    let m = d.join("m.lpr");
    std::fs::write(&m, metrics()).unwrap();
    for opt in [
        &["--comm", "x"][..],
        &["--time", "0%-10%"],
        &["--max-stack", "2"],
        &["--percent-limit", "5"],
    ] {
        let mut args = vec!["report"];
        args.extend_from_slice(opt);
        let o = labperf(&args, &m);
        assert!(!o.status.success());
        let e = String::from_utf8_lossy(&o.stderr);
        assert!(
            e.contains(&format!(
                "{} applies to the plain view only, and {} is shown in the metrics view",
                opt[0],
                m.display()
            )),
            "{e}"
        );
    }
}

/// perf's `--sort pid -n --pid P` of a perf.data: (percent, samples).
fn perf_pid(data: &Path, pid: &str) -> (f64, u64) {
    let o = Command::new("perf")
        .args([
            "report", "--stdio", "--sort", "pid", "-n", "--pid", pid, "-i",
        ])
        .arg(data)
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&o.stdout);
    let line = text
        .lines()
        .find(|l| l.contains('%') && !l.starts_with('#'))
        .unwrap_or_else(|| panic!("perf report --pid {pid}:\n{text}"));
    let mut w = line.split_whitespace();
    let pct = w.next().unwrap().trim_end_matches('%').parse().unwrap();
    let n = w.next().unwrap().parse().unwrap();
    (pct, n)
}

#[test]
fn pid_filter_agrees_with_perf_on_a_perf_data() {
    if Command::new("perf").arg("--version").output().is_err() {
        eprintln!("skipped: no perf on this machine");
        return;
    }
    let data = root().join("tests/data/perf/armv7.perf_3.14-3.8.data");
    // The processes whose samples perf and labperf attribute alike (`--by pid`).
    for pid in ["10220", "19082", "19081", "19079"] {
        let (pct, n) = perf_pid(&data, pid);
        let j = json(&["--by", "pid", "--pid", pid], &data);
        let r = &rows(&j)[0];
        assert_eq!(r["samples"].as_u64().unwrap(), n, "--pid {pid}");
        assert_eq!(
            format!("{:.2}", r["percent"].as_f64().unwrap()),
            format!("{pct:.2}"),
            "--pid {pid}: perf's absolute percentage"
        );
    }
}

#[test]
fn children_combine_with_by_keys() {
    let d = scratch("filters-children-by");
    let f = recording(&d);
    // Self of each (comm, function) is that row of the flat table, exactly.
    let flat: std::collections::BTreeMap<(String, String), u64> =
        rows(&json(&["--by", "comm,symbol"], &f))
            .iter()
            .map(|r| {
                (
                    (
                        r["comm"].as_str().unwrap().into(),
                        r["name"].as_str().unwrap().into(),
                    ),
                    r["samples"].as_u64().unwrap(),
                )
            })
            .collect();
    let ch = json(&["--children", "--by", "comm,symbol"], &f);
    let mut selfs = std::collections::BTreeMap::new();
    let mut children = std::collections::BTreeMap::new();
    for r in rows(&ch) {
        let k: (String, String) = (
            r["comm"].as_str().unwrap().into(),
            r["name"].as_str().unwrap().into(),
        );
        if r["self"].as_u64().unwrap() > 0 {
            selfs.insert(k.clone(), r["self"].as_u64().unwrap());
        }
        children.insert(k, r["children"].as_u64().unwrap());
    }
    assert_eq!(selfs, flat, "{ch}");
    // alpha's plain_c: its own 8 and the 5 map_find samples it called; beta's its own 4.
    assert_eq!(children[&("alpha".into(), "plain_c".into())], 13);
    assert_eq!(children[&("beta".into(), "plain_c".into())], 4);
    // Per process name, Children is Self: every frame of a stack is its thread's.
    for r in rows(&json(&["--children", "--by", "comm"], &f)) {
        assert_eq!(r["children"], r["self"], "{r}");
    }
    // Per file: every stack is in cxx.elf.
    let dso = rows(&json(&["--children", "--sort", "dso"], &f));
    assert_eq!(dso.len(), 1);
    assert_eq!(dso[0]["children"], total_samples());
    // With a filter too.
    let j = json(&["--children", "--by", "comm", "--tid", "2"], &f);
    assert_eq!(rows(&j)[0]["children"], 9);
    // A key the stacks do not keep is refused with the reason.
    let o = labperf(&["report", "--children", "--by", "pid"], &f);
    assert!(!o.status.success());
    let e = String::from_utf8_lossy(&o.stderr);
    assert!(
        e.contains("--children counts call stacks") && e.contains("not the pid of a sample"),
        "{e}"
    );
}
