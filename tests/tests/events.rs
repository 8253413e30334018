//! Recordings of several sampling events (`record -e cpu-clock -e page-faults`): each event
//! is reported apart, with shares of its own period, as perf does, in every view, in `diff`
//! and in every export. Checked against a C program that times its own functions with
//! CLOCK_PROCESS_CPUTIME_ID and faults a known number of pages, and against perf reading
//! the same samples.

use labperf_tests::{bin, root, scratch};
use serde_json::Value;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// The workload: 20 rounds of `burn_a` (2N steps), `burn_b` (N steps, the same loop) and
/// `touch_pages` (writes one byte to each of PAGES fresh anonymous pages, huge pages off:
/// one minor fault each), each timed with CLOCK_PROCESS_CPUTIME_ID; prints each one's CPU
/// seconds and the pages touched.
const PROG: &str = r#"#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <sys/mman.h>
#include <unistd.h>

static double cpu_now(void) {
    struct timespec t;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
    return t.tv_sec + t.tv_nsec * 1e-9;
}

__attribute__((noinline)) unsigned long burn_a(unsigned long n) {
    unsigned long x = 1;
    for (unsigned long i = 0; i < n; i++) {
        x = x * 6364136223846793005UL + i;
        __asm__ volatile("" : "+r"(x));
    }
    return x;
}

__attribute__((noinline)) unsigned long burn_b(unsigned long n) {
    unsigned long x = 3;
    for (unsigned long i = 0; i < n; i++) {
        x = x * 6364136223846793005UL + i;
        __asm__ volatile("" : "+r"(x));
    }
    return x;
}

__attribute__((noinline)) void touch_pages(volatile char *p, long pages, long page) {
    for (long i = 0; i < pages; i++)
        p[i * page] = 1;
}

int main(int argc, char **argv) {
    if (argc != 3) return 2;
    long rounds = 20, pages = atol(argv[1]);
    unsigned long n = strtoul(argv[2], 0, 10);
    long page = sysconf(_SC_PAGESIZE);
    double ta = 0, tb = 0, tt = 0;
    unsigned long sink = 0;
    for (long r = 0; r < rounds; r++) {
        double s = cpu_now();
        sink += burn_a(2 * n);
        double m = cpu_now();
        sink += burn_b(n);
        double e = cpu_now();
        size_t len = pages * page;
        char *mem = mmap(0, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (mem == MAP_FAILED) return 1;
        madvise(mem, len, MADV_NOHUGEPAGE);
        double t0 = cpu_now();
        touch_pages(mem, pages, page);
        double t1 = cpu_now();
        munmap(mem, len);
        ta += m - s; tb += e - m; tt += t1 - t0;
    }
    printf("burn_a %.6f\nburn_b %.6f\ntouch_pages %.6f\ntotal %.6f\npages %ld\nsink %lu\n",
           ta, tb, tt, cpu_now(), rounds * pages, sink & 1);
    return 0;
}
"#;

/// Compiles [`PROG`] (`gcc -O2 -g`, frame pointers kept for `-g`, leaf functions' too) into
/// `d`.
fn build(d: &Path) -> PathBuf {
    let src = d.join("prog.c");
    std::fs::write(&src, PROG).unwrap();
    let exe = d.join("prog");
    let o = Command::new("gcc")
        .args(["-O2", "-g", "-fno-omit-frame-pointer", "-o"])
        .arg(&exe)
        .arg(&src)
        .output()
        .expect("gcc (cargo xtask setup installs it)");
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    exe
}

/// `labperf-agent record ARGS -o d/NAME.lpr -- prog PAGES N`: the file and the program's
/// own figures (`burn_a`, `burn_b`, `touch_pages`, `total` in CPU seconds, `pages`).
fn record(
    d: &Path,
    prog: &Path,
    name: &str,
    args: &[&str],
    pages: u32,
    n: u32,
) -> (PathBuf, BTreeMap<String, f64>) {
    let out = d.join(format!("{name}.lpr"));
    let o = Command::new(bin("labperf-agent"))
        .arg("record")
        .args(args)
        .arg("-o")
        .arg(&out)
        .arg("--")
        .arg(prog)
        .args([pages.to_string(), n.to_string()])
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    (out, clock(&o.stdout))
}

fn clock(stdout: &[u8]) -> BTreeMap<String, f64> {
    String::from_utf8_lossy(stdout)
        .lines()
        .filter_map(|l| {
            let (k, v) = l.split_once(' ')?;
            Some((k.to_string(), v.parse().ok()?))
        })
        .collect()
}

fn labperf(args: &[&str], files: &[&Path]) -> Output {
    Command::new(bin("labperf"))
        .args(args)
        .args(files)
        .output()
        .unwrap()
}

/// `labperf ARGS FILES --format json --top 0`, which must succeed.
fn json(args: &[&str], files: &[&Path]) -> Value {
    let mut a = args.to_vec();
    a.extend(["--format", "json", "--top", "0"]);
    let o = labperf(&a, files);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    serde_json::from_slice(&o.stdout).unwrap()
}

/// One row of a plain table: samples, period, share (percent).
#[derive(Debug, Clone, Copy, PartialEq)]
struct Row {
    samples: u64,
    period: u64,
    pct: f64,
}

/// The event a table counts: its own summary's (several events), else the report's.
fn event_of(j: &Value, t: &Value) -> String {
    t["summary"]["event"]
        .as_str()
        .or_else(|| j["summary"]["event"].as_str())
        .unwrap_or_else(|| panic!("a table without an event: {t}"))
        .to_string()
}

/// A plain report's `functions` tables: event → symbol → row (a name in several files, such
/// as an unnamed address, added up).
fn tables(j: &Value) -> BTreeMap<String, BTreeMap<String, Row>> {
    let mut out = BTreeMap::new();
    for t in j["tables"].as_array().unwrap() {
        if t["name"] != "functions" {
            continue;
        }
        let mut rows: BTreeMap<String, Row> = BTreeMap::new();
        for r in t["rows"].as_array().unwrap() {
            let e = rows
                .entry(r["name"].as_str().unwrap().to_string())
                .or_insert(Row {
                    samples: 0,
                    period: 0,
                    pct: 0.0,
                });
            e.samples += r["samples"].as_u64().unwrap();
            e.period += r["period"].as_u64().unwrap();
            e.pct += r["percent"].as_f64().unwrap();
        }
        assert!(
            out.insert(event_of(j, t), rows).is_none(),
            "one table per event"
        );
    }
    out
}

/// The program's split of burn_a against burn_b: burn_a's share of the two, percent.
fn split(c: &BTreeMap<String, f64>) -> f64 {
    100.0 * c["burn_a"] / (c["burn_a"] + c["burn_b"])
}

/// A report's burn_a share of burn_a and burn_b (the functions the program times with
/// CPU time of the user's only).
fn split_of(t: &BTreeMap<String, Row>) -> f64 {
    100.0 * t["burn_a"].pct / (t["burn_a"].pct + t["burn_b"].pct)
}

const PAGES: u32 = 2000;
const STEPS: u32 = 5_000_000;

#[test]
fn two_events_are_two_tables_each_in_shares_of_its_own_period() {
    let d = scratch("events-two");
    let prog = build(&d);
    // Two executions, compared only through the program's own clock, and with each other.
    // User mode only (`:u`): the program's clock times its functions' user CPU (as root the
    // samples would count the kernel's page-fault handling inside touch_pages too).
    let (one, c1) = record(&d, &prog, "one", &["-e", "cpu-clock:u"], PAGES, STEPS);
    let (two, c2) = record(
        &d,
        &prog,
        "two",
        &["-e", "cpu-clock:u", "-e", "page-faults:u"],
        PAGES,
        STEPS,
    );
    assert_eq!(c2["pages"], f64::from(20 * PAGES));
    let j = json(&["report"], &[&two]);
    let t = tables(&j);
    assert_eq!(
        t.keys().collect::<Vec<_>>(),
        ["cpu-clock", "page-faults"],
        "{j}"
    );
    // Each table is one event's: its rows add up to its totals and to 100%.
    for (i, tab) in j["tables"].as_array().unwrap().iter().enumerate() {
        let ev = ["cpu-clock", "page-faults"][i];
        assert_eq!(tab["summary"]["event"], ev);
        let rows = &t[ev];
        let (n, p, pct) = rows.values().fold((0, 0, 0.0), |a, r| {
            (a.0 + r.samples, a.1 + r.period, a.2 + r.pct)
        });
        assert_eq!(tab["summary"]["total_samples"], n, "{ev}");
        assert_eq!(tab["summary"]["total_period"], p, "{ev}");
        assert!((pct - 100.0).abs() < 1e-6, "{ev}: {pct}%");
        for r in rows.values() {
            let want = 100.0 * r.period as f64 / p as f64;
            assert!((r.pct - want).abs() < 1e-9, "{ev}: {r:?}");
        }
        assert_eq!(
            tab["title"],
            format!("# {n} samples of event '{ev}', total period {p}")
        );
    }
    // The text table names each event as perf does.
    let text = String::from_utf8(labperf(&["report"], &[&two]).stdout).unwrap();
    for ev in ["cpu-clock", "page-faults"] {
        let n = t[ev].values().map(|r| r.samples).sum::<u64>();
        assert!(
            text.contains(&format!("# {n} samples of event '{ev}'")),
            "{text}"
        );
    }
    // The page faults are touch_pages' (40000 of the 40100 or so the program makes), by
    // period, over 90 %: in frequency mode the kernel sets each period from the rate it saw
    // (a few samples of period 1 to 100 in the dynamic loader first, then hundreds), and a
    // sample after a stall (a loaded machine) carried a period of 3045 faults in the loader,
    // 7.6 % of the total, once; by samples the early ones weighed 9.6 % once.
    assert!(
        t["page-faults"]["touch_pages"].pct > 90.0,
        "touch_pages {:.1}%: {t:?}",
        t["page-faults"]["touch_pages"].pct
    );
    // cpu-clock: each table against the program's own clock. The program times user CPU
    // (burn_a, burn_b) and the clock counts the sampling interrupts' kernel time inside
    // each (the samples, user mode only, do not), in the same proportion; a function's
    // share moves by a sample or two at each of the 40 switches between them: 1 point.
    let t1 = tables(&json(&["report"], &[&one]));
    assert_eq!(t1.keys().collect::<Vec<_>>(), ["cpu-clock"]);
    for (what, tab, c) in [("one", &t1, &c1), ("two", &t, &c2)] {
        let (got, want) = (split_of(&tab["cpu-clock"]), split(c));
        eprintln!("{what}: burn_a {got:.2}% of burn_a+burn_b, its clock {want:.2}%");
        assert!((got - want).abs() <= 1.0, "{what}: {got} against {want}");
    }
    // And the two recordings' cpu-clock shares with each other, as reported (acceptance:
    // within 1 point; today's code gave burn_a 51% against 65%).
    for f in ["burn_a", "burn_b"] {
        let (a, b) = (t1["cpu-clock"][f].pct, t["cpu-clock"][f].pct);
        eprintln!("{f}: cpu-clock alone {a:.2}%, with page-faults {b:.2}%");
        assert!((a - b).abs() <= 1.0, "{f}: {a} against {b}");
    }
    // --event NAME or INDEX: that table alone, the same rows exactly.
    for (sel, ev) in [
        ("cpu-clock", "cpu-clock"),
        ("0", "cpu-clock"),
        ("1", "page-faults"),
    ] {
        let j = json(&["report", "--event", sel], &[&two]);
        assert_eq!(j["tables"].as_array().unwrap().len(), 1);
        assert_eq!(j["summary"]["event"], ev);
        assert_eq!(tables(&j)[ev], t[ev], "--event {sel}");
    }
    // An event the file does not have: the error lists those it has.
    let o = labperf(&["report", "--event", "cycles"], &[&two]);
    assert_eq!(o.status.code(), Some(1));
    let e = String::from_utf8_lossy(&o.stderr);
    assert!(
        e.contains("no event cycles") && e.contains("cpu-clock (0), page-faults (1)"),
        "{e}"
    );
    // Several files merged: the same event name joins, the other stays apart.
    let m = json(&["report"], &[&one, &two]);
    let mt = tables(&m);
    assert_eq!(mt.keys().collect::<Vec<_>>(), ["cpu-clock", "page-faults"]);
    for f in ["burn_a", "burn_b"] {
        assert_eq!(
            mt["cpu-clock"][f].samples,
            t1["cpu-clock"][f].samples + t["cpu-clock"][f].samples
        );
    }
    assert_eq!(mt["page-faults"], t["page-faults"]);
    // --by dso keeps them apart too.
    let by = json(&["report", "--by", "dso"], &[&two]);
    assert_eq!(by["tables"].as_array().unwrap().len(), 2);
}

#[test]
fn fault_counts_of_two_fault_events_are_exact_each_in_its_table() {
    let d = scratch("events-faults");
    let prog = build(&d);
    // Every fault a sample (-c 1): touch_pages faults each of its 20 x 500 fresh pages
    // once, a minor fault (anonymous memory, huge pages off); nothing else faults in it
    // (its code page is main's, mapped by then).
    let (f, c) = record(
        &d,
        &prog,
        "faults",
        &["-e", "page-faults", "-e", "minor-faults", "-c", "1"],
        500,
        10_000,
    );
    assert_eq!(c["pages"], 10_000.0);
    let j = json(&["report"], &[&f]);
    let t = tables(&j);
    assert_eq!(
        t.keys().collect::<Vec<_>>(),
        ["minor-faults", "page-faults"]
    );
    for ev in ["page-faults", "minor-faults"] {
        let r = t[ev]["touch_pages"];
        assert_eq!((r.samples, r.period), (10_000, 10_000), "{ev}: {r:?}");
        let total: u64 = t[ev].values().map(|r| r.period).sum();
        assert!((r.pct - 100.0 * 10_000.0 / total as f64).abs() < 1e-9);
    }
    // Every fault is a page fault; minor ones are most (major: read from disk).
    let total = |ev: &str| t[ev].values().map(|r| r.period).sum::<u64>();
    assert!(total("page-faults") >= total("minor-faults"));
}

/// `perf report --stdio -n --sort sym`, event by event: event → symbol → (samples, percent).
/// perf's per-event tables: (samples, percent, rows) by function name; rows of one name
/// (`_start` of ld.so and of the program) summed, as `tables` sums labperf's.
fn perf_tables(data: &Path) -> BTreeMap<String, BTreeMap<String, (u64, f64, u32)>> {
    let o = Command::new("perf")
        .args(["report", "--stdio", "-n", "--sort", "sym", "-i"])
        .arg(data)
        .output()
        .expect("perf (cargo xtask setup installs linux-perf)");
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let text = String::from_utf8_lossy(&o.stdout);
    let mut out: BTreeMap<String, BTreeMap<String, (u64, f64, u32)>> = BTreeMap::new();
    let mut event = None;
    for l in text.lines() {
        // "# Samples: 1K of event 'cpu-clock:u'"
        if let Some(rest) = l.strip_prefix("# Samples: ") {
            let ev = rest
                .split_once(" of event '")
                .unwrap()
                .1
                .trim_end_matches('\'');
            event = Some(ev.to_string());
            out.entry(ev.to_string()).or_default();
            continue;
        }
        // "    65.31%           960  [.] burn_a"
        let Some((pct, rest)) = l.trim().split_once("%") else {
            continue;
        };
        let (Ok(pct), Some(ev)) = (pct.parse::<f64>(), &event) else {
            continue;
        };
        let (n, name) = rest.trim().split_once(' ').unwrap();
        let name = name.trim().trim_start_matches("[.]").trim().to_string();
        let r = out.get_mut(ev).unwrap().entry(name).or_insert((0, 0.0, 0));
        r.0 += n.parse::<u64>().unwrap();
        r.1 += pct;
        r.2 += 1;
    }
    out
}

#[test]
fn an_imported_two_event_perf_recording_reports_perf_s_tables() {
    let d = scratch("events-perf");
    let prog = build(&d);
    // One execution, read by both tools.
    let data = d.join("perf.data");
    let o = Command::new("perf")
        .args([
            "record",
            "-q",
            "-e",
            "cpu-clock:u",
            "-e",
            "page-faults:u",
            "-o",
        ])
        .arg(&data)
        .arg("--")
        .arg(&prog)
        .args([PAGES.to_string(), STEPS.to_string()])
        .output()
        .expect("perf (cargo xtask setup installs linux-perf)");
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let lpr = d.join("perf.lpr");
    let o = Command::new(bin("labperf"))
        .arg("import")
        .arg(&data)
        .arg("-o")
        .arg(&lpr)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let perf = perf_tables(&data);
    let ours = tables(&json(&["report"], &[&lpr]));
    assert_eq!(
        perf.keys().collect::<Vec<_>>(),
        ours.keys().collect::<Vec<_>>()
    );
    assert_eq!(perf.len(), 2, "{perf:?}");
    for (ev, rows) in &perf {
        let mine = &ours[ev];
        // Every sample of the event, as perf counts them.
        let n: u64 = rows.values().map(|r| r.0).sum();
        assert_eq!(n, mine.values().map(|r| r.samples).sum::<u64>(), "{ev}");
        assert_eq!(rows.len(), mine.len(), "{ev}: {rows:?} {mine:?}");
        for (name, &(samples, pct, n)) in rows {
            let r = mine.get(name).unwrap_or_else(|| {
                panic!("{ev}: perf's {name:?} is not labperf's: {rows:?} {mine:?}")
            });
            eprintln!("{ev} {name}: perf {samples} {pct}%, labperf {r:?}");
            assert_eq!(r.samples, samples, "{ev} {name}");
            // perf prints two decimals, per row summed.
            assert!(
                (r.pct - pct).abs() <= 0.006 * f64::from(n),
                "{ev} {name}: {pct} {r:?}"
            );
        }
    }
    // perf's frequency-mode periods, as above: over 90 %.
    assert!(ours["page-faults:u"]["touch_pages"].pct > 90.0, "{ours:?}");
    assert!(ours["cpu-clock:u"]["burn_a"].pct > 50.0);
}

/// `labperf export FILE --format F [MORE]`: its output.
fn export(file: &Path, format: &str, more: &[&str]) -> Output {
    Command::new(bin("labperf"))
        .arg("export")
        .arg(file)
        .args(["--format", format])
        .args(more)
        .output()
        .unwrap()
}

/// `go tool pprof ARGS PB`: its output.
fn pprof(d: &Path, pb: &Path, args: &[&str]) -> String {
    let o = Command::new("go")
        .args(["tool", "pprof"])
        .args(args)
        .arg(pb)
        .env("HOME", d)
        .output()
        .expect("go (cargo xtask setup installs golang-go)");
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    String::from_utf8(o.stdout).unwrap()
}

/// pprof's `-top` rows: name → flat share (percent).
fn pprof_top(out: &str) -> BTreeMap<String, f64> {
    out.lines()
        .filter_map(|l| {
            let w: Vec<&str> = l.split_whitespace().collect();
            if w.len() != 6 || !w[1].ends_with('%') {
                return None;
            }
            Some((w[5].to_string(), w[1].trim_end_matches('%').parse().ok()?))
        })
        .collect()
}

/// A Firefox processed profile's threads: name → leaf function → samples.
fn firefox_leaves(j: &Value) -> BTreeMap<String, BTreeMap<String, u64>> {
    let mut out: BTreeMap<String, BTreeMap<String, u64>> = BTreeMap::new();
    for th in j["threads"].as_array().unwrap() {
        let strings = th["stringArray"].as_array().unwrap();
        let frame = th["stackTable"]["frame"].as_array().unwrap();
        let func = th["frameTable"]["func"].as_array().unwrap();
        let name = th["funcTable"]["name"].as_array().unwrap();
        let e = out
            .entry(th["name"].as_str().unwrap().to_string())
            .or_default();
        for s in th["samples"]["stack"].as_array().unwrap() {
            let f = frame[s.as_u64().unwrap() as usize].as_u64().unwrap() as usize;
            let n = name[func[f].as_u64().unwrap() as usize].as_u64().unwrap() as usize;
            *e.entry(strings[n].as_str().unwrap().to_string())
                .or_default() += 1;
        }
    }
    out
}

/// Python: the rows of the query `sys.argv[1]`, each a JSON list on its own line.
const DUCKDB_ROWS: &str = "import duckdb, json, sys
for r in duckdb.sql(sys.argv[1]).fetchall():
    print(json.dumps([x if isinstance(x, (int, float)) else str(x) for x in r]))";

/// Python with DuckDB (the venv `cargo xtask setup` makes): the rows of `sql`, in `dir`.
fn duckdb(dir: &Path, sql: &str) -> Vec<Value> {
    let python = root().join("target/venv/bin/python");
    let o = Command::new(&python)
        .arg("-c")
        .arg(DUCKDB_ROWS)
        .arg(sql)
        .current_dir(dir)
        .output()
        .unwrap_or_else(|e| panic!("{}: {e} (cargo xtask setup makes it)", python.display()));
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    String::from_utf8(o.stdout)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

/// inferno's tooltip count: 1,234,567.
fn grouped(n: u64) -> String {
    let digits: Vec<char> = n.to_string().chars().rev().collect();
    let groups: Vec<String> = digits
        .chunks(3)
        .map(|c| c.iter().rev().collect())
        .rev()
        .collect();
    groups.join(",")
}

#[test]
fn every_export_keeps_the_events_apart() {
    let d = scratch("events-export");
    let prog = build(&d);
    let (two, _) = record(
        &d,
        &prog,
        "two",
        &["-e", "cpu-clock", "-e", "page-faults"],
        PAGES,
        STEPS,
    );
    let t = tables(&json(&["report"], &[&two]));
    // pprof: a sample type per event; each one's shares are its table's.
    let pb = d.join("two.pb.gz");
    let o = export(&two, "pprof", &["-o", pb.to_str().unwrap()]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    for ev in ["cpu-clock", "page-faults"] {
        let out = pprof(
            &d,
            &pb,
            &["-top", &format!("-sample_index={ev}"), "-symbolize=none"],
        );
        assert!(out.contains(&format!("Type: {ev}")), "{out}");
        let top = pprof_top(&out);
        for (name, r) in &t[ev] {
            if r.pct < 0.5 {
                continue;
            }
            let got = top.get(name).copied().unwrap_or(0.0);
            assert!(
                (got - r.pct).abs() <= 0.006,
                "{ev} {name}: pprof {got}% report {}%",
                r.pct
            );
        }
    }
    // Without -sample_index, pprof opens on the first event's periods (the profile's
    // default sample type), not on the last type listed.
    let out = pprof(&d, &pb, &["-top", "-symbolize=none"]);
    assert!(out.contains("Type: cpu-clock"), "{out}");
    // The samples count every event's; the `event` label picks one.
    let faults = pprof_top(&pprof(
        &d,
        &pb,
        &[
            "-top",
            "-sample_index=samples",
            "-tagfocus=event=page-faults",
            "-symbolize=none",
        ],
    ));
    let want = t["page-faults"]["touch_pages"];
    let all: u64 = t.values().flat_map(|r| r.values()).map(|r| r.samples).sum();
    let got = faults["touch_pages"];
    assert!(
        (got - 100.0 * want.samples as f64 / all as f64).abs() <= 0.006,
        "{got} {want:?} {all}"
    );
    // Folded and SVG add up one event's periods: without --event, an error naming them.
    for format in ["folded", "svg"] {
        let o = export(&two, format, &["-o", d.join("x").to_str().unwrap()]);
        assert_eq!(o.status.code(), Some(1), "{format}");
        let e = String::from_utf8_lossy(&o.stderr);
        assert!(
            e.contains("samples of 2 events")
                && e.contains("cpu-clock (")
                && e.contains("page-faults (")
                && e.contains("--event"),
            "{e}"
        );
        assert!(!d.join("x").exists());
    }
    for ev in ["cpu-clock", "page-faults"] {
        let o = export(&two, "folded", &["--event", ev]);
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        let mut got: BTreeMap<String, u64> = BTreeMap::new();
        for l in String::from_utf8(o.stdout).unwrap().lines() {
            let (stack, n) = l.rsplit_once(' ').unwrap();
            let leaf = stack.rsplit(';').next().unwrap();
            *got.entry(leaf.to_string()).or_default() += n.parse::<u64>().unwrap();
        }
        let want: BTreeMap<String, u64> =
            t[ev].iter().map(|(k, r)| (k.clone(), r.period)).collect();
        assert_eq!(got, want, "{ev}");
        let svg = d.join(format!("{ev}.svg"));
        let o = export(&two, "svg", &["--event", ev, "-o", svg.to_str().unwrap()]);
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        let svg = std::fs::read_to_string(&svg).unwrap();
        let (name, unit) = match ev {
            "cpu-clock" => ("burn_a", "ns"),
            _ => ("touch_pages", "events"),
        };
        let r = t[ev][name];
        let title = format!(
            "<title>{name} ({} {unit}, {:.2}%)</title>",
            grouped(r.period),
            r.pct
        );
        assert!(svg.contains(&title), "{title} not in the {ev} SVG");
    }
    // Firefox: a thread per thread and event; each one's samples are its table's.
    let ff = d.join("two.json");
    let o = export(&two, "firefox", &["-o", ff.to_str().unwrap()]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let j: Value = serde_json::from_slice(&std::fs::read(&ff).unwrap()).unwrap();
    let threads = firefox_leaves(&j);
    assert_eq!(
        threads.keys().collect::<Vec<_>>(),
        ["prog (cpu-clock)", "prog (page-faults)"]
    );
    for ev in ["cpu-clock", "page-faults"] {
        let want: BTreeMap<String, u64> =
            t[ev].iter().map(|(k, r)| (k.clone(), r.samples)).collect();
        assert_eq!(threads[&format!("prog ({ev})")], want, "{ev}");
    }
    // Parquet: each sample's event, its weight its own event's period.
    let pq = d.join("two.parquet");
    let o = export(&two, "parquet", &["-o", pq.to_str().unwrap()]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let mut got: BTreeMap<String, BTreeMap<String, (u64, u64)>> = BTreeMap::new();
    for r in duckdb(
        &d,
        "SELECT event, symbol, count(*), sum(weight) FROM 'two.parquet' GROUP BY ALL",
    ) {
        got.entry(r[0].as_str().unwrap().into())
            .or_default()
            .insert(
                r[1].as_str().unwrap().into(),
                (r[2].as_u64().unwrap(), r[3].as_u64().unwrap()),
            );
    }
    let want: BTreeMap<String, BTreeMap<String, (u64, u64)>> = t
        .iter()
        .map(|(ev, rows)| {
            (
                ev.clone(),
                rows.iter()
                    .map(|(k, r)| (k.clone(), (r.samples, r.period)))
                    .collect(),
            )
        })
        .collect();
    assert_eq!(got, want);
    // --event keeps one event in every format.
    let o = export(
        &two,
        "pprof",
        &["--event", "page-faults", "-o", pb.to_str().unwrap()],
    );
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let out = pprof(
        &d,
        &pb,
        &["-top", "-sample_index=samples", "-symbolize=none"],
    );
    let top = pprof_top(&out);
    let n: u64 = t["page-faults"].values().map(|r| r.samples).sum();
    let pct = 100.0 * t["page-faults"]["touch_pages"].samples as f64 / n as f64;
    assert!((top["touch_pages"] - pct).abs() <= 0.006, "{out}");
    assert!(!top.contains_key("burn_a"), "{out}");
}

#[test]
fn children_call_graphs_html_and_diff_keep_the_events_apart() {
    let d = scratch("events-views");
    let prog = build(&d);
    // DWARF stacks: the hot functions are leaves, which gcc builds without a frame even
    // with -fno-omit-frame-pointer (fp stacks would skip their caller). User mode only: the
    // sums below are of the program's own stacks (as root the kernel's faults while it
    // execs the program would be samples with no user stack of the program's).
    let args = [
        "--call-graph",
        "dwarf",
        "-e",
        "cpu-clock:u",
        "-e",
        "page-faults:u",
    ];
    let (base, _) = record(&d, &prog, "base", &args, PAGES, STEPS / 2);
    let (new, _) = record(&d, &prog, "new", &args, PAGES, STEPS / 4);
    let flat = tables(&json(&["report"], &[&base]));
    // --children: a table per event, its shares of the event's own period; the program's
    // `_start` holds every sample of the program's (the dynamic loader's few before it do
    // not), main nearly all.
    let j = json(&["report", "--children"], &[&base]);
    // Each event's samples whose stack is its leaf alone (CI61: a page fault in libc's
    // `__libc_early_init`, which the loader calls, unwound no further), as the summary
    // counts them.
    let unstacked = |ev: &str| {
        j["summary"]["events"]
            .as_array()
            .unwrap()
            .iter()
            .find(|e| e["name"] == ev)
            .map(|e| e["samples"].as_u64().unwrap() - e["stacked_samples"].as_u64().unwrap())
            .unwrap_or_else(|| panic!("{ev}: not in the summary: {j}"))
    };
    let fns: Vec<&Value> = j["tables"].as_array().unwrap().iter().collect();
    assert_eq!(fns.len(), 2, "{j}");
    for (t, ev) in fns.iter().zip(["cpu-clock", "page-faults"]) {
        assert_eq!(t["summary"]["event"], ev);
        let row = |name: &str| {
            t["rows"]
                .as_array()
                .unwrap()
                .iter()
                .find(|r| r["name"] == name)
                .unwrap_or_else(|| panic!("{ev}: no {name} in {t}"))
                .clone()
        };
        // Counted in samples: a share of the period can be far from the share of samples
        // (CI22: one page-faults sample in the loader carried 1.01 % of the period).
        let start_of = |dso: fn(&str) -> bool| -> u64 {
            t["rows"]
                .as_array()
                .unwrap()
                .iter()
                .filter(|r| r["name"] == "_start" && dso(r["dso"].as_str().unwrap()))
                .map(|r| r["children"].as_u64().unwrap())
                .sum()
        };
        let loader = start_of(|d| d.contains("/ld-linux"));
        // The program's `_start` holds main and what runs after it returns (CI52: a
        // cpu-clock sample in exit's flush of stdout, `_IO_cleanup` → `write`, below
        // `__libc_start_main`, not below main).
        let start = start_of(|d| d.ends_with("/prog"));
        let total = t["summary"]["total_samples"].as_u64().unwrap();
        let without_stack = unstacked(ev);
        let main = row("main")["children"].as_u64().unwrap();
        assert!(
            start + loader + without_stack >= total
                && main <= start
                && main as f64 > 0.95 * total as f64,
            "{ev}: main {main}, the program's _start {start}, the loader {loader}, {without_stack} without a stack, of {total}: {t}"
        );
        // Self is the flat report's share, exactly (the same samples, the same periods).
        let leaf = if ev == "cpu-clock" {
            "burn_a"
        } else {
            "touch_pages"
        };
        let own = row(leaf)["self_pct"].as_f64().unwrap();
        assert!((own - flat[ev][leaf].pct).abs() < 1e-9, "{ev}: {own}");
    }
    // --call-graph caller: the tree of each event under its own table.
    let j = json(&["report", "--call-graph", "caller"], &[&base]);
    let names: Vec<(String, String)> = j["tables"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| (t["name"].as_str().unwrap().into(), event_of(&j, t)))
        .collect();
    let want: Vec<(String, String)> = [
        ("functions", "cpu-clock"),
        ("call_graph", "cpu-clock"),
        ("functions", "page-faults"),
        ("call_graph", "page-faults"),
    ]
    .iter()
    .map(|(a, b)| (a.to_string(), b.to_string()))
    .collect();
    assert_eq!(names, want);
    let tree = &j["tables"][3]["rows"];
    let under_main = tree
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["function"] == "main" && r["name"] == "touch_pages" && r["depth"] == 1)
        .unwrap_or_else(|| panic!("{tree}"));
    let share = under_main["percent"].as_f64().unwrap();
    assert!(
        (share - flat["page-faults"]["touch_pages"].pct).abs() < 1e-9,
        "{share}"
    );
    // HTML: a flame graph per event, drawn in its own unit.
    let html = d.join("base.html");
    let o = labperf(
        &["report", "--format", "html", "-o", html.to_str().unwrap()],
        &[&base],
    );
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let page = std::fs::read_to_string(&html).unwrap();
    let flame = |ev: &str| -> &str {
        let at = page
            .find(&format!("class=\"flamegraph\" data-event=\"{ev}\""))
            .unwrap_or_else(|| panic!("no {ev} flame graph"));
        let end = page[at..].find("</section>").unwrap();
        &page[at..at + end]
    };
    let (cpu, pf) = (flame("cpu-clock"), flame("page-faults"));
    assert!(cpu.contains("<title>burn_a (") && cpu.contains(" ns, "));
    assert!(!cpu.contains("<title>touch_pages (") || !cpu.contains(" events, "));
    assert!(pf.contains("<title>touch_pages (") && pf.contains(" events, "));
    assert!(
        !pf.contains("<title>burn_a ("),
        "burn_a makes no page faults"
    );
    assert!(page.contains("data-event=\"page-faults\"><thead>"));
    // diff of two two-event recordings: joined event by event.
    let nt = tables(&json(&["report"], &[&new]));
    let j = json(&["diff"], &[&base, &new]);
    let ts = j["tables"].as_array().unwrap();
    assert_eq!(ts.len(), 2, "{j}");
    for (t, (ev, f)) in ts
        .iter()
        .zip([("cpu-clock", "burn_a"), ("page-faults", "touch_pages")])
    {
        assert_eq!(t["summary"]["event"], ev);
        let r = t["rows"]
            .as_array()
            .unwrap()
            .iter()
            .find(|r| r["name"] == f)
            .unwrap();
        assert_eq!(r["event"], ev);
        let (b, n) = (flat[ev][f].pct, nt[ev][f].pct);
        assert!(
            (r["percent_base"].as_f64().unwrap() - b).abs() < 1e-9,
            "{r}"
        );
        assert!(
            (r["percent_delta"].as_f64().unwrap() - (n - b)).abs() < 1e-9,
            "{r}"
        );
        assert_eq!(
            r["period_base"].as_f64().unwrap(),
            flat[ev][f].period as f64
        );
    }
}

#[test]
fn a_group_read_by_its_leader_stays_one_table() {
    // {cpu-clock,page-faults}: the leader samples, page-faults is read in each sample
    // (PERF_SAMPLE_READ): one sampling event, one table, named.
    let d = scratch("events-group");
    let prog = build(&d);
    let (f, _) = record(
        &d,
        &prog,
        "group",
        &["-e", "{cpu-clock,page-faults}"],
        200,
        STEPS / 4,
    );
    let j = json(&["report"], &[&f]);
    assert_eq!(j["tables"].as_array().unwrap().len(), 1, "{j}");
    assert_eq!(j["summary"]["event"], "cpu-clock");
    let t = tables(&j);
    let pct: f64 = t["cpu-clock"].values().map(|r| r.pct).sum();
    assert!((pct - 100.0).abs() < 1e-6);
    assert!(t["cpu-clock"]["burn_a"].pct > 40.0, "{t:?}");
    let text = String::from_utf8(labperf(&["report"], &[&f]).stdout).unwrap();
    assert!(
        text.starts_with(&format!(
            "# {} samples of event 'cpu-clock'",
            t["cpu-clock"].values().map(|r| r.samples).sum::<u64>()
        )),
        "{text}"
    );
}

/// `--event MEMBER` of a group recording (`{cpu-clock,page-faults}`): the member's counts,
/// read in each sample of the leader, per function, as perf delivers them: each sample
/// where a thread's count grew is one of the member's, its period the growth (before: "the
/// file holds no samples"). A crafted recording of known counts, two threads.
#[test]
fn a_group_member_s_counts_are_reported_per_function_with_event() {
    use labperf_common::{Recipe, Record, Sample};
    use labperf_tests::views::{cxx_map, event, file, views, CXX_FIND, FIND_AT, PLAIN_AT};
    let d = scratch("events-group-member");
    // (tid, ip, page-faults count read): thread 1 from 10 to 30, thread 2 from 4 to 7.
    let reads: &[(u32, u64, u64)] = &[
        (1, FIND_AT, 10),  // +10 (from 0)
        (2, FIND_AT, 4),   // +4 (thread 2's own count, from 0)
        (1, PLAIN_AT, 10), // +0: no sample of page-faults
        (1, PLAIN_AT, 25), // +15
        (2, PLAIN_AT, 7),  // +3
        (1, FIND_AT, 30),  // +5
    ];
    let mut records = vec![cxx_map()];
    for (i, &(tid, ip, faults)) in reads.iter().enumerate() {
        records.push(Record::Sample(Sample {
            pid: 1,
            tid,
            ip,
            time: 1_000 * (i as u64 + 1),
            period: 1000,
            values: vec![1000 * (i as u64 + 1), faults],
            ..Default::default()
        }));
    }
    let st = 0x107 | 0x10;
    let f = d.join("group.lpr");
    std::fs::write(
        &f,
        file(
            vec![
                event("cpu-clock", None, st),
                event("page-faults", Some(0), st),
            ],
            Recipe::Sample { group_read: true },
            &records,
        ),
    )
    .unwrap();
    let symfs = views();
    let symfs = symfs.to_str().unwrap();
    // (samples, period) per function: map_find 10 + 4 + 5, plain_c 15 + 3.
    let want = BTreeMap::from([
        (CXX_FIND.to_string(), (3, 19)),
        ("plain_c".to_string(), (2, 18)),
    ]);
    for more in [&[][..], &["--children"]] {
        let mut args = vec!["report", "--event", "page-faults", "--symfs", symfs];
        args.extend_from_slice(more);
        let j = json(&args, &[&f]);
        // --children: Self's samples, and its share of the 37 faults.
        let (n, p) = match more.is_empty() {
            true => ("samples", "period"),
            false => ("self", "self_pct"),
        };
        let rows: BTreeMap<String, (u64, u64)> = j["tables"][0]["rows"]
            .as_array()
            .unwrap()
            .iter()
            .map(|r| {
                let period = match more.is_empty() {
                    true => r[p].as_u64().unwrap(),
                    false => (r[p].as_f64().unwrap() * 37.0 / 100.0).round() as u64,
                };
                (
                    r["name"].as_str().unwrap().to_string(),
                    (r[n].as_u64().unwrap(), period),
                )
            })
            .collect();
        assert_eq!(rows, want, "{more:?}: {j}");
    }
    let o = labperf(
        &["report", "--event", "page-faults", "--symfs", symfs],
        &[&f],
    );
    let (out, e) = (
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr),
    );
    assert!(o.status.success(), "{e}");
    assert!(
        out.starts_with("# 5 samples of event 'page-faults', total period 37\n"),
        "{out}"
    );
    assert!(e.contains("note: page-faults was read in each sample of cpu-clock (its group's leader): a row's samples are those of cpu-clock in which page-faults's count grew, its period by how much"), "{e}");
    // Without --event: the leader's table alone, as perf's group view, and where the
    // member is.
    let o = labperf(&["report", "--symfs", symfs], &[&f]);
    let (out, e) = (
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr),
    );
    assert!(
        out.starts_with("# 6 samples of event 'cpu-clock', total period 6000\n"),
        "{out}"
    );
    assert!(!out.contains("page-faults"), "{out}");
    assert!(e.contains("note: page-faults is read in each sample of cpu-clock (its group's leader): `--event page-faults` shows its counts per function"), "{e}");
}

#[test]
fn event_indexes_past_the_header_s_list_are_one_unknown_event() {
    // A crafted file: one event in its header, samples naming 20,000 different events.
    // They make two tables, not 20,000: the header's event and "unknown event".
    use labperf_common::{Encoder, EventDesc, Record, Sample, Trailer};
    let d = scratch("events-unknown");
    let mut h = labperf_tests::golden::header(labperf_tests::golden::Kind::Sample);
    h.events.truncate(1);
    h.events[0] = EventDesc {
        name: "cpu-clock".into(),
        ..h.events[0].clone()
    };
    h.mode = "sample".into();
    let mut enc = Encoder::new();
    let mut f = Encoder::prelude().to_vec();
    f.extend(enc.header_frame(&h));
    for i in 0..20_000u32 {
        enc.push(&Record::Sample(Sample {
            event: i,
            pid: 1,
            tid: 1,
            ip: 0x1000 + u64::from(i % 2),
            period: 10,
            ..Default::default()
        }));
    }
    f.extend(enc.flush().unwrap());
    f.extend(enc.trailer_frame(&Trailer::default()));
    let file = d.join("crafted.lpr");
    std::fs::write(&file, &f).unwrap();
    let j = json(&["report"], &[&file]);
    let t = tables(&j);
    assert_eq!(
        t.keys().collect::<Vec<_>>(),
        ["cpu-clock", "unknown event"],
        "{j}"
    );
    let n = |ev: &str| t[ev].values().map(|r| r.samples).sum::<u64>();
    assert_eq!((n("cpu-clock"), n("unknown event")), (1, 19_999));
    // pprof: the samples and the two events' periods.
    let pb = d.join("crafted.pb.gz");
    let o = export(&file, "pprof", &["-o", pb.to_str().unwrap()]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let o = Command::new("go")
        .args(["tool", "pprof", "-raw"])
        .arg(&pb)
        .env("HOME", &d)
        .output()
        .expect("go (cargo xtask setup installs golang-go)");
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let raw = String::from_utf8_lossy(&o.stdout);
    assert!(
        // The first event's periods are the default sample type (`[dflt]`).
        raw.contains("samples/count cpu-clock/nanoseconds[dflt] unknown event/count"),
        "{raw}"
    );
}
