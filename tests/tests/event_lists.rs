//! perf's `-e` spelling in `record` and `stat`, through the host (which splits a value into
//! one `-e` per event or group for every agent), the Rust agent directly and the C agent:
//! comma lists, `{a,b}` groups (each member's count kept), `-e` repeated; checked against a
//! C program that faults a known number of fresh pages and measures its own CPU time.

use labperf_common::decode_all;
use labperf_tests::{bin, c_agent, hardware_cycles_open, irq_and_steal_ns, scratch};
use serde_json::Value;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// `prog PAGES BURN_MS`: writes one byte to each of PAGES fresh anonymous pages (huge pages
/// off: one minor fault each), burns BURN_MS of CPU time in `burn_outer` → `burn_inner`, and
/// prints its CPU time (CLOCK_PROCESS_CPUTIME_ID) as `cpu_ns=N` on standard error.
const PROG: &str = r#"#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <sys/mman.h>
#include <unistd.h>

static long cpu_ns(void) {
    struct timespec t;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
    return t.tv_sec * 1000000000L + t.tv_nsec;
}

__attribute__((noinline)) unsigned long burn_inner(unsigned long x) {
    for (int i = 0; i < 100000; i++) {
        x = x * 6364136223846793005UL + i;
        __asm__ volatile("" : "+r"(x));
    }
    return x;
}

__attribute__((noinline)) unsigned long burn_outer(long ms) {
    unsigned long x = 1;
    long end = cpu_ns() + ms * 1000000L;
    while (cpu_ns() < end) x = burn_inner(x);
    return x;
}

int main(int argc, char **argv) {
    if (argc != 3) return 2;
    long pages = atol(argv[1]), burn = atol(argv[2]);
    long pg = sysconf(_SC_PAGESIZE);
    if (pages) {
        char *p = mmap(0, pages * pg, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (p == MAP_FAILED) return 3;
        madvise(p, pages * pg, MADV_NOHUGEPAGE);
        for (long i = 0; i < pages; i++) p[i * pg] = 1;
    }
    unsigned long x = burn_outer(burn);
    printf("out: first line\nout: %ld pages, parity %lu\n", pages, x & 1);
    fflush(stdout);
    fprintf(stderr, "err: a line of the workload's own\n");
    printf("out: last line, no newline");
    fflush(stdout);
    fprintf(stderr, "cpu_ns=%ld\n", cpu_ns());
    return 0;
}
"#;

/// [`PROG`] compiled into `dir` (frame pointers kept, for `-g`).
fn prog(dir: &Path) -> PathBuf {
    let src = dir.join("prog.c");
    std::fs::write(&src, PROG).unwrap();
    let exe = dir.join("prog");
    let o = Command::new("gcc")
        .args([
            "-O2",
            "-fno-omit-frame-pointer",
            "-mno-omit-leaf-frame-pointer",
            "-o",
        ])
        .arg(&exe)
        .arg(&src)
        .output()
        .expect("gcc (cargo xtask setup installs it)");
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    exe
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

/// `labperf ARGS` (C locale), which must succeed; `agent` picks the agent (`LABPERF_AGENT`).
fn labperf(args: &[&str], agent: Option<&Path>) -> Output {
    let mut c = Command::new(bin("labperf"));
    c.args(args).env("LC_ALL", "C");
    if let Some(a) = agent {
        c.env("LABPERF_AGENT", a);
    }
    let o = c.output().unwrap();
    assert!(o.status.success(), "labperf {args:?}: {}", text(&o.stderr));
    o
}

/// The CPU time the program printed, in ms.
fn cpu_ms(stderr: &str) -> f64 {
    stderr
        .lines()
        .find_map(|l| l.strip_prefix("cpu_ns="))
        .and_then(|v| v.trim().parse::<f64>().ok())
        .unwrap_or_else(|| panic!("no cpu_ns line in {stderr}"))
        / 1e6
}

/// The count of `event` in `stat`'s summary (msec for the clocks).
fn count(summary: &str, event: &str) -> f64 {
    let l = summary
        .lines()
        .find(|l| {
            let w: Vec<&str> = l.split_whitespace().collect();
            w.get(1) == Some(&event) || (w.get(1) == Some(&"msec") && w.get(2) == Some(&event))
        })
        .unwrap_or_else(|| panic!("no {event} line in:\n{summary}"));
    l.split_whitespace().next().unwrap().parse().unwrap()
}

/// The events a record file's header names: (name, index of its group's leader).
fn header_events(file: &Path) -> Vec<(String, Option<u32>)> {
    let h = decode_all(&std::fs::read(file).unwrap()).header;
    let h = h.unwrap_or_else(|| panic!("{} has no header", file.display()));
    h.events
        .iter()
        .map(|e| (e.name.clone(), e.leader))
        .collect()
}

/// task-clock against the program's own CPU clock (which also holds the forked child's time
/// before exec, a millisecond or two; task-clock holds the exit's freeing of the pages it
/// touched, after the program's last reading of its clock: 3.5 ms over it once, for 2,000
/// pages on a busy run; and the interrupts' and the hypervisor's time on the task's CPU,
/// `lost_ns`, which the program's clock leaves out: 5.6 ms over it once in CI, beside a lab
/// machine's emulator), page-faults at least the pages it touched.
fn check_counts(e: &str, pages: f64, lost_ns: f64) {
    let own = cpu_ms(e);
    let ms = count(e, "task-clock");
    let lost = lost_ns / 1e6;
    assert!(
        (own - 5.0..=own + 5.0 + lost).contains(&ms),
        "task-clock {ms} msec, the program's clock {own} ms, {lost} ms of interrupts and steal:\n{e}"
    );
    let faults = count(e, "page-faults");
    assert!(
        (pages..=pages + 300.0).contains(&faults),
        "{faults} faults for {pages} pages:\n{e}"
    );
}

/// `labperf stat ARGS` and the machine's interrupt and steal time over it.
fn stat(args: &[&str], agent: Option<&Path>) -> (String, f64) {
    let lost0 = irq_and_steal_ns();
    let o = labperf(args, agent);
    (text(&o.stderr), irq_and_steal_ns() - lost0)
}

#[test]
fn stat_takes_comma_lists_and_groups_each_member_counted() {
    let d = scratch("evlist-stat");
    let p = prog(&d);
    let p = p.to_str().unwrap();
    // perf's most common spelling; cycles has no PMU on a machine without one: said, and
    // the other events counted.
    let (e, lost) = stat(
        &[
            "stat",
            "-e",
            "task-clock,page-faults,cycles",
            "--",
            p,
            "2000",
            "40",
        ],
        None,
    );
    check_counts(&e, 2000.0, lost);
    if !hardware_cycles_open() {
        assert!(e.contains("'cycles' is not supported here"), "{e}");
        // perf's line for it in the summary (`perf stat` prints the same here).
        assert!(
            e.lines()
                .any(|l| l.trim_end() == "   <not supported>      cycles"),
            "{e}"
        );
    } else {
        assert!(count(&e, "cycles") > 0.0, "{e}");
    }
    // A group and a repeated -e: each member's count kept, its line and its place in the
    // file (the member's leader named in the header).
    let f = d.join("group.lpr");
    let (e, lost) = stat(
        &[
            "stat",
            "-e",
            "{task-clock,page-faults}",
            "-e",
            "context-switches",
            "-o",
            f.to_str().unwrap(),
            "--",
            p,
            "3000",
            "40",
        ],
        None,
    );
    check_counts(&e, 3000.0, lost);
    count(&e, "context-switches");
    assert_eq!(
        header_events(&f),
        [
            ("task-clock".to_string(), None),
            ("page-faults".to_string(), Some(0)),
            ("context-switches".to_string(), None)
        ]
    );
    // Modifiers of a group go to each member: user mode only.
    let o = labperf(
        &[
            "stat",
            "-e",
            "{task-clock,page-faults}:u",
            "--",
            p,
            "1000",
            "20",
        ],
        None,
    );
    let e = text(&o.stderr);
    count(&e, "task-clock:u");
    assert!(count(&e, "page-faults:u") >= 1000.0, "{e}");
}

#[test]
fn the_rust_agent_splits_its_own_event_lists() {
    let d = scratch("evlist-agent");
    let p = prog(&d);
    let o = Command::new(bin("labperf-agent"))
        .args([
            "stat",
            "-e",
            "task-clock,{page-faults,context-switches}",
            "--",
        ])
        .arg(&p)
        .args(["1500", "20"])
        .output()
        .unwrap();
    let e = text(&o.stderr);
    assert!(o.status.success(), "{e}");
    // `total COUNT NAME` per counter.
    let total = |name: &str| -> f64 {
        e.lines()
            .map(|l| l.split_whitespace().collect::<Vec<_>>())
            .find(|w| w.len() == 3 && w[0] == "total" && w[2] == name)
            .unwrap_or_else(|| panic!("no total of {name} in {e}"))[1]
            .parse()
            .unwrap()
    };
    assert!(total("page-faults") >= 1500.0, "{e}");
    total("task-clock");
    total("context-switches");
}

#[test]
fn comma_lists_reach_the_c_agent_one_event_each() {
    let d = scratch("evlist-c");
    let p = prog(&d);
    let p = p.to_str().unwrap();
    let agent = c_agent();
    let (e, lost) = stat(
        &[
            "stat",
            "-e",
            "task-clock,page-faults",
            "--",
            p,
            "2000",
            "40",
        ],
        Some(&agent),
    );
    check_counts(&e, 2000.0, lost);
    // record: a table per sampled event.
    let f = d.join("c.lpr");
    labperf(
        &[
            "record",
            "--no-report",
            "-e",
            "cpu-clock,page-faults",
            "-o",
            f.to_str().unwrap(),
            "--",
            p,
            "5000",
            "100",
        ],
        Some(&agent),
    );
    let names: Vec<String> = header_events(&f).into_iter().map(|(n, _)| n).collect();
    assert_eq!(names, ["cpu-clock", "page-faults"]);
    let t = tables(&f);
    assert_eq!(t.keys().collect::<Vec<_>>(), ["cpu-clock", "page-faults"]);
}

/// `labperf report --format json --top 0 FILE`: each table's event and its total period.
fn tables(f: &Path) -> BTreeMap<String, u64> {
    let o = labperf(
        &[
            "report",
            "--format",
            "json",
            "--top",
            "0",
            f.to_str().unwrap(),
        ],
        None,
    );
    let j: Value = serde_json::from_slice(&o.stdout).unwrap();
    let mut t = BTreeMap::new();
    for table in j["tables"].as_array().unwrap() {
        if table["name"] != "functions" {
            continue;
        }
        // A table's own summary names its event (several events), else the report's.
        let ev = table["summary"]["event"]
            .as_str()
            .or_else(|| j["summary"]["event"].as_str())
            .unwrap_or_else(|| panic!("a table without an event: {table}"))
            .to_string();
        let period: u64 = table["rows"]
            .as_array()
            .unwrap()
            .iter()
            .map(|r| r["period"].as_u64().unwrap())
            .sum();
        t.insert(ev, period);
    }
    t
}

#[test]
fn record_takes_comma_lists_and_groups() {
    let d = scratch("evlist-record");
    let p = prog(&d);
    let p = p.to_str().unwrap();
    // Two sampling events, a table each: page-faults' periods add up to the faults (its
    // samples every few faults at 4 kHz: within a sample's period of the pages touched).
    let f = d.join("two.lpr");
    labperf(
        &[
            "record",
            "--no-report",
            "-e",
            "cpu-clock,page-faults",
            "-o",
            f.to_str().unwrap(),
            "--",
            p,
            "20000",
            "100",
        ],
        None,
    );
    let t = tables(&f);
    assert_eq!(
        t.keys().collect::<Vec<_>>(),
        ["cpu-clock", "page-faults"],
        "{t:?}"
    );
    assert!(
        (16_000..=24_500).contains(&t["page-faults"]),
        "{t:?} for 20000 pages"
    );
    // A group and an event in one value: the group's leader samples, its member is read in
    // each sample (one table), the other event samples too.
    let f = d.join("group.lpr");
    labperf(
        &[
            "record",
            "--no-report",
            "-e",
            "{cpu-clock,page-faults},task-clock",
            "-o",
            f.to_str().unwrap(),
            "--",
            p,
            "2000",
            "100",
        ],
        None,
    );
    assert_eq!(
        header_events(&f),
        [
            ("cpu-clock".to_string(), None),
            ("page-faults".to_string(), Some(0)),
            ("task-clock".to_string(), None)
        ]
    );
    let t = tables(&f);
    assert_eq!(
        t.keys().collect::<Vec<_>>(),
        ["cpu-clock", "task-clock"],
        "{t:?}"
    );
    // A malformed list is refused before anything runs, naming the value.
    let o = Command::new(bin("labperf"))
        .args(["record", "-e", "cpu-clock,,page-faults", "--", p, "0", "0"])
        .output()
        .unwrap();
    assert!(!o.status.success());
    assert!(
        text(&o.stderr).contains("'cpu-clock,,page-faults' has an empty item"),
        "{}",
        text(&o.stderr)
    );
}

/// `tsc` of x86's `msr` PMU per ms of task-clock, and the summary, from `tool` (labperf
/// or perf) counting `prog`.
fn tsc_rate(tool: &[&str], prog: &str) -> (f64, String) {
    let o = Command::new(tool[0])
        .args(&tool[1..])
        .args(["stat", "-e", "msr/tsc/,task-clock", "--", prog, "200", "1"])
        .env("LC_ALL", "C")
        .output()
        .unwrap();
    let e = text(&o.stderr);
    assert!(o.status.success(), "{tool:?}: {e}");
    (count(&e, "msr/tsc/") / count(&e, "task-clock"), e)
}

/// A PMU that takes no exclusion bit (the `msr` PMU refuses even exclude_hv: EINVAL) is
/// opened without it, as perf's fallback opens it: `msr/tsc/` counts the time-stamp
/// counter while the task runs, so per ms of task-clock it is the TSC's frequency, a
/// constant of this machine, which perf measures the same way (within 5 %: each run's
/// task-clock and tsc start and stop a few µs apart around the task's switches).
#[test]
fn an_msr_event_counts_as_perf_counts_it() {
    if !Path::new("/sys/bus/event_source/devices/msr").is_dir() {
        eprintln!("skipped: this machine has no msr PMU (x86 only)");
        return;
    }
    let d = scratch("evlist-msr");
    let p = prog(&d);
    let p = p.to_str().unwrap();
    let l = bin("labperf");
    let (ours, e) = tsc_rate(&[l.to_str().unwrap()], p);
    let (perfs, pe) = tsc_rate(&["perf"], p);
    assert!(
        (ours / perfs - 1.0).abs() < 0.05,
        "labperf: {ours:.0} tsc a ms, perf: {perfs:.0}:\n{e}\n{pe}"
    );
}
