//! `record --off-cpu`: each thread's time off the CPU, checked against `labperf-bench
//! --blocking`'s own wall-clock accounting of its blocking classes and against the kernel's
//! times of each thread's life; `report --off-cpu` and `report --wall` of it.

use labperf_tests::offcpu::{check_split, check_threads, class_children, threads, CLASSES};
use labperf_tests::{bin, scratch, BenchClock};
use std::path::Path;
use std::process::Command;

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
            &class_children(&f, "--off-cpu", None),
            |c| clock.off_cpu_ns(c),
            3.0,
        );
        // On- and off-CPU together (cpu-clock samples by their period): each class's
        // share of the classes' wall-clock time. 3 points: the on-CPU part is sampled
        // every 250 us.
        check_split(
            &format!("{name} --wall"),
            &class_children(&f, "--wall", None),
            |c| clock.wall_ns(c),
            3.0,
        );
        check_threads(name, &f);
        check_firefox(name, &f);
    }
}

/// `export --off-cpu --format firefox`: each thread's samples weigh their time off the CPU
/// (in the profile's intervals, the rest carried to the thread's next sample), so the
/// profile's total is the recording's, to within one interval per thread.
fn check_firefox(name: &str, f: &Path) {
    let out = f.with_extension("json");
    let o = Command::new(bin("labperf"))
        .args(["export", "--off-cpu", "--format", "firefox", "-o"])
        .arg(&out)
        .arg(f)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let j: serde_json::Value = serde_json::from_slice(&std::fs::read(&out).unwrap()).unwrap();
    let interval_ns = (j["meta"]["interval"].as_f64().unwrap() * 1e6) as u64;
    let threads = j["threads"].as_array().unwrap();
    let intervals: u64 = threads
        .iter()
        .map(|t| {
            let w = t["samples"]["weight"].as_array().expect("weights");
            w.iter().map(|v| v.as_u64().unwrap()).sum::<u64>()
        })
        .sum();
    let off: u64 = threads_off_cpu(f);
    let got = intervals * interval_ns;
    assert!(
        got <= off && off - got <= interval_ns * threads.len() as u64,
        "{name}: the Firefox profile weighs {got} ns off the CPU, the recording {off} ns"
    );
}

/// The recording's off-CPU ns, all threads.
fn threads_off_cpu(f: &Path) -> u64 {
    threads(f).values().map(|t| t.1).sum()
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
    check_stackless("unprivileged", &f, &clock);
}

/// A recording whose off-CPU samples have no stack: each sample's ip is 0, the main
/// thread's time off the CPU holds its classes' and fits in its life, the helper thread's
/// is most of its life.
fn check_stackless(name: &str, f: &Path, clock: &BenchClock) {
    let dump = Command::new(bin("labperf"))
        .arg("dump")
        .arg(f)
        .output()
        .unwrap();
    let dump = String::from_utf8_lossy(&dump.stdout).into_owned();
    let off: Vec<&str> = dump
        .lines()
        .filter(|l| l.contains("SAMPLE ev=1 "))
        .collect();
    assert!(off.len() > 50, "{name}: {} off-CPU samples", off.len());
    assert!(
        off.iter().all(|l| l.contains(" ip=0x0 ")),
        "{name}: {off:?}"
    );
    // The main thread's time off the CPU holds its classes' by the bench's clock (2%: the
    // bench's clock reads around each call), and more (the bench's set-up writes and syncs
    // a 16 MiB file), within its life.
    let t = threads(f);
    let main = clock.wall.iter().find(|e| e.thread == "main").unwrap().tid;
    let classes: u64 = CLASSES.iter().map(|c| clock.off_cpu_ns(c)).sum();
    let (_, got, life) = t[&main];
    assert!(
        got >= classes * 98 / 100 && got <= life,
        "{name}: main thread: {got} ns off the CPU, its classes {classes} ns by the bench's clock, its life {life} ns"
    );
    // The helper thread waits for the main thread's asks all its life but for a few ms of
    // CPU: 95% of its life and at most all of it (its user-mode samples are its CPU time
    // here, its kernel time is not sampled: user-only events).
    let (&helper, &(on, off, life)) = t.iter().find(|(&tid, _)| tid != main).unwrap();
    assert!(
        off >= life * 95 / 100 && on + off <= life + life / 100,
        "{name}: helper thread {helper}: {off} ns off the CPU and {on} ns on it, its life {life} ns"
    );
}

#[test]
fn the_c_agent_records_each_threads_time_off_the_cpu_from_its_switch_records() {
    // The freestanding C agent (the Alpha agent's code, built for x86_64 here): the switch
    // records only, no stacks, as on the Alpha machine.
    let d = scratch("offcpu-c");
    let f = d.join("c.lpr");
    let (clock, _) = record(
        &f,
        &[],
        &bin("labperf-bench-gnu"),
        Command::new(labperf_tests::c_agent()),
    );
    check_stackless("C agent", &f, &clock);
}
