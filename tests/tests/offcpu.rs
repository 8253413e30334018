//! `record --off-cpu`: each thread's time off the CPU, checked against `labperf-bench
//! --blocking`'s own wall-clock accounting of its blocking classes and against the kernel's
//! times of each thread's life; `report --off-cpu` and `report --wall` of it.

use labperf_tests::{bin, report_json, scratch, BenchClock};
use std::collections::BTreeMap;
use std::path::Path;
use std::process::Command;

/// The bench's blocking classes (`labperf-bench --blocking all`).
const CLASSES: &[&str] = &[
    "block_sleep",
    "block_mutex",
    "block_pipe",
    "block_file",
    "spin_wall",
];

/// Records `bench --blocking all` for 3 s with `--off-cpu` and `opts` by the agent
/// `agent` starts; the bench's own account and the agent's standard error.
fn record(f: &Path, opts: &[&str], bench: &Path, agent: Command) -> (BenchClock, String) {
    let mut c = agent;
    let o = c
        .args(["record", "--off-cpu", "-e", "cpu-clock"])
        .args(opts)
        .arg("-o")
        .arg(f)
        .arg("--")
        .arg(bench)
        .args(["--duration", "3", "--blocking", "all"])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&o.stderr).into_owned();
    assert!(o.status.success(), "{err}");
    (BenchClock::parse(&o.stderr), err)
}

/// `report --children --format json` with `sel` (`--off-cpu`, `--wall`): each class's
/// inclusive share of the event's period.
fn class_children(f: &Path, sel: &str) -> BTreeMap<&'static str, f64> {
    let j = report_json(f, 0, |c| {
        c.args(["--children", sel]);
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
fn check_split(what: &str, got: &BTreeMap<&str, f64>, want: impl Fn(&str) -> u64, points: f64) {
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
fn threads(f: &Path) -> BTreeMap<u32, (u64, u64, u64)> {
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

#[test]
fn off_cpu_time_of_the_benchs_blocking_classes_is_its_own_wall_clock_accounting() {
    // The bench built as Rust programs usually are (glibc, dynamically linked): where a
    // thread blocks, its stack runs through the C library's system-call wrappers, which
    // glibc describes with CFI (musl's are assembly without). By DWARF; and by frame
    // pointers, whose walk cannot name the classes here (from the wrapper up, it goes through
    // Rust's std and glibc, built without frame pointers, which skip the frame that called
    // them: each class's own), so only each thread's time is checked.
    let d = scratch("offcpu-classes");
    for (name, opts) in [
        ("dwarf", &["--call-graph", "dwarf"][..]),
        ("fp", &["-g"][..]),
    ] {
        let f = d.join(format!("{name}.lpr"));
        let agent = Command::new(bin("labperf-agent"));
        let (clock, _) = record(&f, opts, &bin("labperf-bench-gnu"), agent);
        if name == "fp" {
            check_threads(name, &f);
            continue;
        }
        // Each class's share of the time the classes spent off the CPU: the bench's wall
        // time less its CPU time, each measured around its calls; 3 points (the issue's
        // bound; measured here within 0.1 point with the machine loaded by a CI run).
        check_split(
            &format!("{name} --off-cpu"),
            &class_children(&f, "--off-cpu"),
            |c| clock.off_cpu_ns(c),
            3.0,
        );
        // On- and off-CPU together (cpu-clock samples by their period): each class's
        // share of the classes' wall-clock time. 3 points: the on-CPU part is sampled
        // every 250 us.
        check_split(
            &format!("{name} --wall"),
            &class_children(&f, "--wall"),
            |c| clock.wall_ns(c),
            3.0,
        );
        check_threads(name, &f);
    }
}

/// Each thread's on-CPU samples and off-CPU time add up to its life, from FORK (the main
/// thread: the recording's start, just before its exec) to EXIT, by the kernel's clock: 2%
/// (the bound; what is not counted is the on-CPU time between a thread's last
/// sample and its switch, a sampling error of up to 250 us a switch, and the main thread's
/// exec before its events were enabled).
fn check_threads(name: &str, f: &Path) {
    let t = threads(f);
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

#[test]
fn without_the_privilege_the_off_cpu_time_is_kept_per_thread_without_its_stack() {
    // As an unprivileged user (perf_event_paranoid 2 here): the switch records are the
    // samples, each with no stack, and the agent says what is missing.
    let d = scratch("offcpu-unprivileged");
    std::fs::set_permissions(&d, std::os::unix::fs::PermissionsExt::from_mode(0o777)).unwrap();
    let paranoid = std::fs::read_to_string("/proc/sys/kernel/perf_event_paranoid").unwrap();
    assert!(
        paranoid.trim().parse::<i32>().unwrap() >= 2,
        "this test needs kernel.perf_event_paranoid >= 2 (it is {paranoid})"
    );
    // Copies nobody can run wherever the build is (a clone in a private home directory).
    let (agent, bench) = (d.join("labperf-agent"), d.join("labperf-bench"));
    std::fs::copy(bin("labperf-agent"), &agent).unwrap();
    std::fs::copy(bin("labperf-bench-gnu"), &bench).unwrap();
    let f = d.join("u.lpr");
    let mut nobody = Command::new("setpriv");
    nobody
        .args([
            "--reuid",
            "65534",
            "--regid",
            "65534",
            "--clear-groups",
            "--",
        ])
        .arg(&agent);
    let (clock, err) = record(&f, &[], &bench, nobody);
    assert!(
        err.contains("--off-cpu: a thread's switches are seen in kernel mode only"),
        "{err}"
    );
    let info = Command::new(bin("labperf"))
        .arg("info")
        .arg(&f)
        .output()
        .unwrap();
    assert!(String::from_utf8_lossy(&info.stdout).contains("without the stack it blocked in"));
    let dump = Command::new(bin("labperf"))
        .arg("dump")
        .arg(&f)
        .output()
        .unwrap();
    let dump = String::from_utf8_lossy(&dump.stdout).into_owned();
    let off: Vec<&str> = dump
        .lines()
        .filter(|l| l.contains("SAMPLE ev=1 "))
        .collect();
    assert!(off.len() > 50, "{} off-CPU samples", off.len());
    assert!(off.iter().all(|l| l.contains(" ip=0x0 ")), "{off:?}");
    // The main thread's time off the CPU holds its classes' by the bench's clock (2%: the
    // bench's clock reads around each call), and more (the bench's set-up writes and syncs
    // a 16 MiB file), within its life.
    let t = threads(&f);
    let main = clock.wall.iter().find(|e| e.thread == "main").unwrap().tid;
    let classes: u64 = CLASSES.iter().map(|c| clock.off_cpu_ns(c)).sum();
    let (_, got, life) = t[&main];
    assert!(
        got >= classes * 98 / 100 && got <= life,
        "main thread: {got} ns off the CPU, its classes {classes} ns by the bench's clock, its life {life} ns"
    );
    // The helper thread waits for the main thread's asks all its life but for a few ms of
    // CPU: 95% of its life and at most all of it (its user-mode samples are its CPU time
    // here, its kernel time is not sampled without the privilege).
    let (&helper, &(on, off, life)) = t.iter().find(|(&tid, _)| tid != main).unwrap();
    assert!(
        off >= life * 95 / 100 && on + off <= life + life / 100,
        "helper thread {helper}: {off} ns off the CPU and {on} ns on it, its life {life} ns"
    );
}
