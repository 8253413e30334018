//! Real failures of the agent on this kernel, each with its explanation and fix:
//! perf_event_paranoid, the perf mmap limit, the default-event fallback, stat, an event
//! that opened but never sampled, a panic, the signals a workload starts with, closed
//! standard descriptors, names and paths that are not UTF-8, the agent's own cost, its own
//! output that cannot be written, and `$LABPERF_SYSFS`.

use labperf_common::{decode_all, Record};
use labperf_tests::{bin, scratch};
use std::process::{Command, Output};

fn paranoid() -> i32 {
    std::fs::read_to_string("/proc/sys/kernel/perf_event_paranoid")
        .unwrap()
        .trim()
        .parse()
        .unwrap()
}

/// Runs the agent as user `nobody` (the tests run as root) in a directory it may write.
fn as_nobody(args: &[&str]) -> Output {
    let d = scratch("nobody");
    Command::new("chown")
        .arg("nobody")
        .arg(&d)
        .status()
        .unwrap();
    Command::new("setpriv")
        .args(["--reuid=65534", "--regid=65534", "--clear-groups", "--"])
        .arg(bin("labperf-agent"))
        .args(args)
        .current_dir(&d)
        .output()
        .expect("setpriv (util-linux) runs the agent unprivileged")
}

#[test]
fn unprivileged_kernel_sampling_names_the_sysctl() {
    let p = paranoid();
    let o = as_nobody(&[
        "record",
        "-e",
        "cpu-clock:k",
        "-o",
        "k.lpr",
        "--",
        "/bin/true",
    ]);
    let err = String::from_utf8_lossy(&o.stderr);
    if p >= 2 {
        assert_eq!(o.status.code(), Some(125), "{err}");
        assert!(
            err.contains(&format!("perf_event_paranoid is {p}"))
                && err.contains("sudo sysctl kernel.perf_event_paranoid=1"),
            "{err}"
        );
    } else {
        assert_eq!(
            o.status.code(),
            Some(0),
            "paranoid {p} allows kernel sampling: {err}"
        );
    }
}

#[test]
fn a_ring_buffer_over_the_mlock_limit_is_explained() {
    // 8192 pages (32 MiB) is over both perf_event_mlock_kb (516 KiB by default) and `ulimit -l` for an ordinary user.
    let o = as_nobody(&[
        "record",
        "-e",
        "cpu-clock",
        "--mmap-pages",
        "8192",
        "-o",
        "m.lpr",
        "--",
        "/bin/true",
    ]);
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(125), "{err}");
    assert!(
        err.contains("cannot map the 8192-page perf ring buffer")
            && err.contains("kernel.perf_event_mlock_kb")
            && err.contains("--mmap-pages"),
        "{err}"
    );
}

/// The agent's `record` of /bin/true into a scratch file: its stderr and the file's header.
fn record_true(name: &str, args: &[&str]) -> (String, labperf_common::Header) {
    let d = scratch(name);
    let f = d.join("f.lpr");
    let o = Command::new(bin("labperf-agent"))
        .arg("record")
        .args(args)
        .arg("-o")
        .arg(&f)
        .args(["--", "/bin/true"])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&o.stderr).into_owned();
    assert!(o.status.success(), "{err}");
    (err, decode_all(&std::fs::read(&f).unwrap()).header.unwrap())
}

#[test]
fn default_event_is_cycles_or_a_quiet_cpu_clock_fallback() {
    let (err, h) = record_true("fallback", &[]);
    // Whether this machine counts cycles, asked of the kernel directly (not of the agent).
    if labperf_tests::hardware_cycles_open() {
        assert_eq!(h.events[0].name, "cycles", "{err}");
        assert_eq!(h.events[0].attr.type_, 0);
    } else {
        // No hardware PMU (as on the CI machines): the default is replaced silently, as
        // perf replaces it; the header's notes say so (`labperf info` shows them).
        assert_eq!(h.events[0].name, "cpu-clock");
        assert_eq!(h.events[0].attr.type_, 1);
        assert!(
            h.notes
                .iter()
                .any(|n| n.contains("the default event 'cycles' is not available here")),
            "{:?}",
            h.notes
        );
    }
    assert!(!err.contains("notice") && !err.contains("cycles"), "{err}");
    assert!(!err.contains("os error"), "{err}");
    // The line that says what was written speaks English for one sample or many.
    assert!(
        err.contains(" sample (") || err.contains(" samples ("),
        "{err}"
    );
    assert!(!err.contains(" 1 samples"), "{err}");
}

#[test]
fn cycles_asked_for_falls_back_with_one_short_notice() {
    let (err, h) = record_true("fallback-asked", &["-e", "cycles"]);
    if labperf_tests::hardware_cycles_open() {
        assert_eq!(h.events[0].name, "cycles", "{err}");
        assert!(!err.contains("notice"), "{err}");
    } else {
        assert_eq!(h.events[0].name, "cpu-clock");
        let notices: Vec<&str> = err.lines().filter(|l| l.contains("notice")).collect();
        assert_eq!(
            notices,
            ["labperf-agent: notice: 'cycles' is not available here (no such event on this machine's PMU): sampling cpu-clock instead"],
            "{err}"
        );
    }
}

#[test]
fn stat_leaves_out_default_hardware_events_quietly_and_named_ones_aloud() {
    let stat = |args: &[&str]| {
        let o = Command::new(bin("labperf-agent"))
            .arg("stat")
            .args(args)
            .args(["--", "/bin/true"])
            .output()
            .unwrap();
        assert!(o.status.success(), "{o:?}");
        String::from_utf8_lossy(&o.stderr).into_owned()
    };
    let err = stat(&[]);
    assert!(!err.contains("notice"), "{err}");
    let err = stat(&["-e", "task-clock", "-e", "cycles"]);
    if labperf_tests::hardware_cycles_open() {
        assert!(!err.contains("notice"), "{err}");
    } else {
        assert_eq!(
            err.lines().filter(|l| l.contains("notice")).collect::<Vec<_>>(),
            ["labperf-agent: notice: 'cycles' is not supported here (no such event on this machine's PMU): left out"],
            "{err}"
        );
    }
}

#[test]
fn stat_records_intervals_and_totals() {
    let d = scratch("stat");
    let f = d.join("s.lpr");
    let o = Command::new(bin("labperf-agent"))
        .args([
            "stat",
            "-e",
            "task-clock",
            "-e",
            "page-faults",
            "-I",
            "100",
            "-o",
        ])
        .arg(&f)
        .arg("--")
        .arg(bin("labperf-bench"))
        .args(["--duration", "0.6", "--classes", "nops"])
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let dec = decode_all(&std::fs::read(&f).unwrap());
    assert!(dec.losses.is_clean());
    assert_eq!(dec.header.as_ref().unwrap().mode, "stat");
    let iv: Vec<_> = dec
        .records
        .iter()
        .filter_map(|r| {
            if let Record::Interval(i) = r {
                Some(i)
            } else {
                None
            }
        })
        .collect();
    assert!(iv.len() >= 5, "{} intervals", iv.len());
    let total = iv.last().unwrap();
    assert!(!total.delta);
    // task-clock (ns) of a 0.6 s busy loop: at most 0.6 s plus start-up, and well above
    // zero even on a loaded machine; the deltas add up to it.
    let tc = total.counts[0].value;
    assert!((100_000_000..900_000_000).contains(&tc), "task-clock {tc}");
    let sum: u64 = iv[..iv.len() - 1].iter().map(|i| i.counts[0].value).sum();
    assert!(
        sum <= tc && sum as f64 > 0.95 * tc as f64,
        "interval sum {sum} vs total {tc}"
    );
}

#[test]
fn a_frequency_over_the_kernels_limit_is_lowered_with_a_notice() {
    let max: u64 = std::fs::read_to_string("/proc/sys/kernel/perf_event_max_sample_rate")
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    let d = scratch("freq");
    let f = d.join("f.lpr");
    let o = Command::new(bin("labperf-agent"))
        .args(["record", "-e", "cpu-clock", "-F"])
        .arg((max * 10).to_string())
        .arg("-o")
        .arg(&f)
        .args(["--", "/bin/true"])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(o.status.success(), "{err}");
    assert!(
        err.contains(&format!("throttling from {} Hz to {max} Hz", max * 10)),
        "{err}"
    );
    let h = decode_all(&std::fs::read(&f).unwrap()).header.unwrap();
    assert_eq!(h.events[0].attr.sample_period_or_freq, max);
    assert!(h
        .notes
        .iter()
        .any(|n| n.contains("perf_event_max_sample_rate")));
}

#[test]
fn impossible_ring_sizes_and_process_ids_are_refused_before_anything_runs() {
    for args in [
        &["record", "--mmap-pages", "1073741824", "--", "/bin/true"][..],
        &["record", "--mmap-pages", "1048576", "--", "/bin/true"][..],
        &["record", "--pid", "0"][..],
        &["record", "--pid", "-1"][..],
        &["stat", "--pid", "0"][..],
    ] {
        let o = Command::new(bin("labperf-agent"))
            .args(args)
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(2), "{args:?}: {err}");
        assert!(
            err.contains("--mmap-pages must be a power of two from 1 to 65536")
                || err.contains("--pid/--tid take an id greater than 0"),
            "{args:?}: {err}"
        );
    }
}

/// An event that opens but never fires (x86_64 has no alignment faults to count) is said by
/// the Rust agent itself, as the C agent says it, beside the one that sampled.
#[test]
fn an_event_that_opened_but_never_sampled_is_said_by_the_agent() {
    let d = scratch("never-sampled");
    let o = Command::new(bin("labperf"))
        .args(["record", "-e", "cpu-clock", "-e", "alignment-faults", "-o"])
        .arg(d.join("f.lpr"))
        .arg("--")
        .arg(bin("labperf-bench"))
        .args(["--duration", "0.3", "--classes", "nops"])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(o.status.success(), "{err}");
    assert!(
        err.contains(
            "labperf-agent: warning: event 'alignment-faults' opened but produced no sample"
        ),
        "{err}"
    );
    assert!(!err.contains("event 'cpu-clock' opened but"), "{err}");
}

/// A panic is the agent's own failure: `labperf-agent: panicked at FILE:LINE:COL:` and the
/// message on stderr, then status 125 (the agent is `no_std`: its panic handler does this,
/// with no `std` runtime; a missing status file tells the host it did not finish).
#[test]
fn a_panic_says_where_and_what_and_exits_125() {
    let o = Command::new(bin("labperf-agent"))
        .args(["__panic", "x"])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(125), "{err}");
    assert!(
        err.starts_with("labperf-agent: panicked at agents/labperf-agent/src/main.rs:"),
        "{err}"
    );
    assert!(err.ends_with(":\nasked to panic (1 arguments)\n"), "{err}");
}

/// The agent ignores SIGPIPE (a closed FIFO is an error it reports, not its death), but the
/// workload starts with every signal at its default, as from a shell: `yes | head -1` in a
/// recorded script ends by SIGPIPE. (The agent built with `std` passed its ignored SIGPIPE
/// on to every workload.)
#[test]
fn the_workload_starts_with_sigpipe_at_its_default() {
    let d = scratch("sigpipe");
    let o = Command::new(bin("labperf-agent"))
        .args(["record", "-e", "cpu-clock", "-o"])
        .arg(d.join("f.lpr"))
        .args(["--", "grep", "^SigIgn:", "/proc/self/status"])
        .output()
        .unwrap();
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(
        o.status.success(),
        "{out}{}",
        String::from_utf8_lossy(&o.stderr)
    );
    let ignored = u64::from_str_radix(out.trim().trim_start_matches("SigIgn:").trim(), 16)
        .unwrap_or_else(|_| panic!("{out}"));
    assert_eq!(ignored & 1 << (libc::SIGPIPE - 1), 0, "{out}");
}

/// An agent started with its standard output and error closed (a launcher that closes them;
/// `>&- 2>&-`) has them on /dev/null while it records, as `std` programs do (it opens
/// /dev/null on a closed 0, 1 or 2 before anything else): no perf event or file of its own
/// takes descriptor 1 or 2 and receives its messages (with `std` gone, its perf events took
/// them and every message was lost), and its record file is whole.
#[test]
fn closed_standard_output_and_error_are_dev_null_while_it_records() {
    let d = scratch("closed-fds");
    let f = d.join("f.lpr");
    let mut agent = Command::new("sh")
        .arg("-c")
        .arg(r#"exec "$0" record -e cpu-clock -c 100000 -o "$1" -- sleep 1 >&- 2>&-"#)
        .arg(bin("labperf-agent"))
        .arg(&f)
        .spawn()
        .unwrap();
    let fd = |n: u32| std::fs::read_link(format!("/proc/{}/fd/{n}", agent.id()));
    // Recording: the record file is open (its `.part`).
    let t = std::time::Instant::now();
    while !(3..64).any(|n| fd(n).is_ok_and(|p| p.to_string_lossy().ends_with(".part"))) {
        assert!(
            t.elapsed().as_secs() < 10,
            "the agent never opened its record file"
        );
        std::thread::sleep(std::time::Duration::from_millis(5));
    }
    let (out, err) = (fd(1), fd(2));
    let st = agent.wait().unwrap();
    assert!(st.success(), "{st}");
    assert_eq!(out.unwrap(), std::path::Path::new("/dev/null"));
    assert_eq!(err.unwrap(), std::path::Path::new("/dev/null"));
    let dec = decode_all(&std::fs::read(&f).unwrap());
    assert!(dec.damage.is_empty(), "{:?}", dec.damage);
    assert!(dec.trailer.is_some());
}

/// A process's name and the files it maps are bytes: attaching to one whose executable's
/// name is not UTF-8 records it (its comm and mapping with U+FFFD for the byte), and
/// watches it until it ends, as any other (the agent read /proc/PID/maps and
/// /proc/PID/stat as UTF-8: attaching failed with "cannot read /proc/PID/maps").
#[test]
fn a_process_whose_name_is_not_utf8_is_attached_and_named() {
    use std::os::unix::ffi::OsStrExt;
    let d = scratch("not-utf8");
    let exe = d.join(std::ffi::OsStr::from_bytes(b"sl\xffp"));
    std::fs::copy("/bin/sleep", &exe).unwrap();
    // Another test's fork may still hold the copy open for writing (ETXTBSY) until it execs.
    let mut child = (0..100)
        .find_map(|_| match Command::new(&exe).arg("1.5").spawn() {
            Err(e) if e.raw_os_error() == Some(libc::ETXTBSY) => {
                std::thread::sleep(std::time::Duration::from_millis(20));
                None
            }
            r => Some(r.unwrap()),
        })
        .expect("the copy of sleep stayed busy for 2 s");
    std::thread::sleep(std::time::Duration::from_millis(200));
    let f = d.join("f.lpr");
    let t = std::time::Instant::now();
    let o = Command::new(bin("labperf-agent"))
        .args(["record", "-e", "cpu-clock", "-p"])
        .arg(child.id().to_string())
        .arg("-o")
        .arg(&f)
        .output()
        .unwrap();
    // It followed the process to its end, not one look and out: the process has ended when
    // the agent returns.
    let ended = child.try_wait().unwrap().is_some();
    child.wait().unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(o.status.success(), "{err}");
    assert!(
        ended,
        "the agent ended {:?} after it started, before the process",
        t.elapsed()
    );
    let dec = decode_all(&std::fs::read(&f).unwrap());
    assert!(dec
        .records
        .iter()
        .any(|r| matches!(r, Record::Comm(c) if c.pid == child.id() && c.comm == "sl\u{fffd}p")));
    let want = format!("{}/sl\u{fffd}p", d.display());
    assert!(
        dec.records
            .iter()
            .any(|r| matches!(r, Record::Mmap2(m) if m.path == want)),
        "no mapping of {want}"
    );
}

/// The agent's cost in the trailer is its own: its peak RSS is its own address space's, not
/// the process's that started it (getrusage's ru_maxrss keeps the starter's high-water mark
/// across fork and exec: the Rust agent, 300 KiB, said 15,452 KiB when python3 started it).
/// Both agents; this test's process touches 64 MiB first.
#[test]
fn the_agent_s_peak_rss_is_its_own_not_its_starter_s() {
    let big = std::hint::black_box(vec![1u8; 64 << 20]);
    let c_agent = labperf_tests::c_agent();
    let d = scratch("own-rss");
    for agent in [bin("labperf-agent"), c_agent] {
        let f = d.join("f.lpr");
        let o = Command::new(&agent)
            .args(["record", "-e", "cpu-clock", "-o"])
            .arg(&f)
            .args(["--", "/bin/true"]) // the C agent does not search PATH
            .output()
            .unwrap();
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        let t = decode_all(&std::fs::read(&f).unwrap()).trailer.unwrap();
        // Its rings (2 x 129 pages per CPU at most here) and a few buffers: far below 64 MiB.
        assert!(
            (1..16 * 1024).contains(&t.agent_peak_rss_kib),
            "{}: {} KiB",
            agent.display(),
            t.agent_peak_rss_kib
        );
    }
    drop(big);
}

/// The agent's own output that cannot be written is not a success (the `std` agent
/// aborted, 134; the first `no_std` one said nothing and exited 0): into a full disk, 125
/// and why; into a closed pipe, SIGPIPE, quietly, as `labperf` and perf end. A failing
/// workload's status stays its own.
#[test]
fn output_that_cannot_be_written_is_a_failure() {
    let agent = bin("labperf-agent");
    let full = || {
        std::fs::OpenOptions::new()
            .write(true)
            .open("/dev/full")
            .unwrap()
    };
    let o = Command::new(&agent)
        .arg("--help")
        .stdout(full())
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(125));
    assert_eq!(
        String::from_utf8_lossy(&o.stderr),
        "labperf-agent: error: cannot write its output: No space left on device (os error 28)\n"
    );
    // stat's counts are its output (on stderr).
    let o = Command::new(&agent)
        .args(["stat", "-e", "task-clock", "--", "/bin/true"])
        .stderr(full())
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(125));
    let o = Command::new(&agent)
        .args(["stat", "-e", "task-clock", "--", "/bin/false"])
        .stderr(full())
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(1));
    // A pipe whose reader is gone before the agent starts (closed after it, the pipe's
    // buffer may take all of `list` first: CI91 saw status 0): `list` ends by SIGPIPE.
    let mut fds = [0; 2];
    // SAFETY: a pipe into a valid array; the read end closed at once, the write end owned.
    let write = unsafe {
        assert_eq!(libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC), 0);
        libc::close(fds[0]);
        <std::os::fd::OwnedFd as std::os::fd::FromRawFd>::from_raw_fd(fds[1])
    };
    let st = Command::new(&agent)
        .arg("list")
        .stdout(write)
        .status()
        .unwrap();
    use std::os::unix::process::ExitStatusExt;
    assert_eq!(st.signal(), Some(libc::SIGPIPE), "{st}");
}

/// `$LABPERF_SYSFS` is where the agent reads the PMUs (`list`, `-e pmu/event/`), as its
/// usage says, not only TopDown's: a recorded Ice Lake tree gives `cpu/slots/` its type and
/// code on a machine without that PMU (it read /sys for everything but TopDown).
#[test]
fn labperf_sysfs_is_where_the_pmus_are_read() {
    let tree = labperf_tests::root().join("tests/data/sysfs/x86_64-icelake");
    let o = Command::new(bin("labperf-agent"))
        .args(["plan", "record", "-e", "cpu/slots/", "--", "true"])
        .env("LABPERF_SYSFS", &tree)
        .output()
        .unwrap();
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert!(
        out.starts_with("event=cpu/slots/ ")
            && out.contains(" type=4 ")
            && out.contains(" config=0x400 "),
        "{out}"
    );
    let o = Command::new(bin("labperf-agent"))
        .arg("list")
        .env("LABPERF_SYSFS", &tree)
        .output()
        .unwrap();
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(out.contains("\nPMU cpu (type 4)\n"), "{out}");
    assert!(
        out.contains("    cpu/slots/  event=0x00,umask=0x4\n"),
        "{out}"
    );
}
