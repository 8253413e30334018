//! Files another local user plants where labperf and the agents write (issue 47): links at a
//! temporary's or an output's name, FIFOs at the status file's name, and descriptors given as
//! `-o`. The tests run as root (as CI does) and plant as user `nobody` (uid 65534), the
//! attacker of a machine that other users share.

use labperf_common::decode_all;
use labperf_tests::{bin, c_agent, scratch};
use std::io::Write;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

const NOBODY: u32 = 65534;

/// Runs `program args` as user `nobody`; whether it succeeded.
fn as_nobody(program: &str, args: &[&Path]) -> bool {
    Command::new(program)
        .args(args)
        .uid(NOBODY)
        .gid(NOBODY)
        .stderr(Stdio::null())
        .status()
        .unwrap_or_else(|e| panic!("{program}: {e}"))
        .success()
}

/// A directory any user can write, sticky as /tmp is, owned by `nobody` (so the kernel's
/// protected_symlinks, where set, still lets root follow nobody's links there: the attack
/// this guards against is labperf's, not the sysctl's).
fn shared_dir(test: &str) -> (PathBuf, PathBuf) {
    let d = scratch(test);
    let shared = d.join("shared");
    std::fs::create_dir(&shared).unwrap();
    std::os::unix::fs::chown(&shared, Some(NOBODY), Some(NOBODY)).unwrap();
    std::fs::set_permissions(&shared, std::fs::Permissions::from_mode(0o1777)).unwrap();
    (d, shared)
}

/// A root-owned 0600 file beside the shared directory (the attacker's target).
fn secret(d: &Path) -> PathBuf {
    let s = d.join("secret");
    std::fs::write(&s, "root's secret\n").unwrap();
    std::fs::set_permissions(&s, std::fs::Permissions::from_mode(0o600)).unwrap();
    s
}

fn mode(p: &Path) -> u32 {
    std::fs::metadata(p).unwrap().permissions().mode() & 0o777
}

#[test]
fn neither_agent_writes_through_a_link_planted_at_its_part_or_status_file() {
    // Before: the Rust agent opened X.part and STATUS.tmp with O_CREAT|O_TRUNC, following
    // nobody's link: root's secret became a recording.
    for (name, agent) in [("rust", bin("labperf-agent")), ("c", c_agent())] {
        let (d, shared) = shared_dir(&format!("planted-part-{name}"));
        let secret = secret(&d);
        let out = shared.join("x.lpr");
        let status = shared.join("status");
        for planted in [shared.join("x.lpr.part"), shared.join("status.tmp")] {
            assert!(as_nobody("ln", &[Path::new("-s"), &secret, &planted]));
        }
        let o = Command::new(&agent)
            .args(["record", "-e", "cpu-clock", "-c", "100000", "-o"])
            .arg(&out)
            .arg("--status-file")
            .arg(&status)
            .args(["--", "/bin/true"])
            .output()
            .unwrap();
        let e = String::from_utf8_lossy(&o.stderr);
        assert!(o.status.success(), "{name}: {:?}: {e}", o.status);
        assert_eq!(
            std::fs::read_to_string(&secret).unwrap(),
            "root's secret\n",
            "{name}: the secret was written through the planted link"
        );
        assert_eq!(mode(&secret), 0o600, "{name}");
        // The recording and the status are new files of root's, 0600 (perf's mode).
        let bytes = std::fs::read(&out).unwrap();
        let dec = decode_all(&bytes);
        assert!(
            dec.trailer.is_some() && dec.damage.is_empty(),
            "{name}: the recording decodes whole"
        );
        assert_eq!(
            std::fs::read_to_string(&status).unwrap(),
            "ok 0\n",
            "{name}"
        );
        for f in [&out, &status] {
            let m = std::fs::symlink_metadata(f).unwrap();
            assert!(m.is_file() && m.uid() == 0, "{name}: {}", f.display());
            assert_eq!(
                m.permissions().mode() & 0o777,
                0o600,
                "{name}: {}",
                f.display()
            );
        }
        assert!(!shared.join("x.lpr.part").exists() && !shared.join("status.tmp").exists());
        if name == "rust" {
            // A file root made 0644 and the recording replaces keeps its mode.
            std::fs::set_permissions(&out, std::fs::Permissions::from_mode(0o644)).unwrap();
            let o = Command::new(&agent)
                .args(["record", "-e", "cpu-clock", "-o"])
                .arg(&out)
                .args(["--", "/bin/true"])
                .output()
                .unwrap();
            assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
            assert_eq!(mode(&out), 0o644);
        }
        // A link nobody planted at the output's own name is refused, never followed.
        let theirs = shared.join("theirs.lpr");
        assert!(as_nobody("ln", &[Path::new("-s"), &secret, &theirs]));
        let o = Command::new(&agent)
            .args(["record", "-e", "cpu-clock", "-o"])
            .arg(&theirs)
            .args(["--", "/bin/true"])
            .output()
            .unwrap();
        let e = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(125), "{name}: {e}");
        assert!(e.contains("link another user owns"), "{name}: {e}");
        assert_eq!(
            std::fs::read_to_string(&secret).unwrap(),
            "root's secret\n",
            "{name}"
        );
        let _ = std::fs::remove_dir_all(&d);
    }
}

/// The agent's command line while it runs under `labperf` (`ps` shows it to every user).
fn agent_args(labperf: u32) -> Vec<String> {
    let t = Instant::now();
    while t.elapsed() < Duration::from_secs(20) {
        for p in std::fs::read_dir("/proc").unwrap().flatten() {
            let Ok(pid) = p.file_name().to_string_lossy().parse::<u32>() else {
                continue;
            };
            let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
            let ppid = stat
                .rsplit_once(") ")
                .and_then(|(_, r)| r.split(' ').nth(1))
                .and_then(|s| s.parse::<u32>().ok());
            if ppid != Some(labperf) {
                continue;
            }
            let cmd = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
            let args: Vec<String> = cmd
                .split(|&b| b == 0)
                .map(|a| String::from_utf8_lossy(a).into_owned())
                .collect();
            if args.iter().any(|a| a == "--status-file") {
                return args;
            }
        }
        std::thread::sleep(Duration::from_millis(5));
    }
    panic!("no agent under labperf {labperf} within 20 s");
}

#[test]
fn a_local_runs_status_and_counts_are_where_no_other_user_can_plant() {
    // Before: the status file was /tmp/labperf-status-PID-NS, a name `ps` shows: nobody made
    // a FIFO there while the workload ran, and the run hung at its end (three Ctrl-C did
    // not end it); a link there made root write `ok 0` over a root file.
    let d = scratch("planted-status");
    let secret = secret(&d);
    for verb in ["record", "stat"] {
        let mut cmd = Command::new(bin("labperf"));
        cmd.arg(verb);
        if verb == "record" {
            cmd.args(["-e", "cpu-clock", "-o"]).arg(d.join("r.lpr"));
        }
        let mut child = cmd
            .args(["--", "sleep", "1"])
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let args = agent_args(child.id());
        let after = |flag: &str| {
            let i = args.iter().position(|a| a == flag).unwrap();
            PathBuf::from(&args[i + 1])
        };
        let status = after("--status-file");
        let mut private = vec![status.clone()];
        if verb == "stat" {
            // stat's counts go to a temporary record file: beside the status file.
            private.push(after("-o"));
        }
        for p in &private {
            let dir = p.parent().unwrap();
            let m = std::fs::symlink_metadata(dir).unwrap();
            assert!(m.is_dir() && m.uid() == 0, "{verb}: {}", dir.display());
            assert_eq!(m.permissions().mode() & 0o777, 0o700, "{verb}");
            // nobody can plant neither a FIFO nor a link there.
            assert!(
                !as_nobody("mkfifo", &[p]),
                "{verb}: nobody made a FIFO at {}",
                p.display()
            );
            assert!(!as_nobody("ln", &[Path::new("-s"), &secret, p]), "{verb}");
        }
        let t = Instant::now();
        let st = loop {
            if let Some(st) = child.try_wait().unwrap() {
                break st;
            }
            if t.elapsed() > Duration::from_secs(30) {
                let _ = child.kill();
                panic!("{verb}: labperf hung at the end of its run");
            }
            std::thread::sleep(Duration::from_millis(20));
        };
        let mut e = String::new();
        std::io::Read::read_to_string(child.stderr.as_mut().unwrap(), &mut e).unwrap();
        assert!(st.success(), "{verb}: {st:?}: {e}");
        assert!(!status.parent().unwrap().exists(), "{verb}: removed after");
    }
    assert_eq!(std::fs::read_to_string(&secret).unwrap(), "root's secret\n");
    let _ = std::fs::remove_dir_all(&d);
}

/// A log opened for appending (`>> log`) holding `before`, given to `cmd` as its standard
/// output; `after` appended once it ends. Returns the log's bytes.
fn through_append_log(d: &Path, cmd: &mut Command) -> Vec<u8> {
    let log = d.join("ci.log");
    std::fs::write(&log, "before\n").unwrap();
    let f = std::fs::OpenOptions::new().append(true).open(&log).unwrap();
    let o = cmd.stdout(f.try_clone().unwrap()).output().unwrap();
    assert!(
        o.status.success(),
        "{:?}: {}",
        o.status,
        String::from_utf8_lossy(&o.stderr)
    );
    (&f).write_all(b"after\n").unwrap();
    std::fs::read(&log).unwrap()
}

#[test]
fn o_dev_stdout_into_an_append_log_keeps_its_earlier_and_later_lines() {
    // Before: `-o /dev/stdout` of a redirected regular file replaced the file through a
    // temporary and a rename: the CI log lost its earlier and later lines.
    let d = scratch("planted-dev-stdout");
    let rec = labperf_tests::root().join("tests/data/v2-stacks/record.lpr");
    let want = Command::new(bin("labperf"))
        .arg("report")
        .arg(&rec)
        .output()
        .unwrap()
        .stdout;
    assert!(!want.is_empty());
    for o in ["/dev/stdout", "/dev/fd/1", "/proc/self/fd/1"] {
        let log = through_append_log(
            &d,
            Command::new(bin("labperf"))
                .arg("report")
                .arg(&rec)
                .args(["-o", o]),
        );
        let mut expect = b"before\n".to_vec();
        expect.extend_from_slice(&want);
        expect.extend_from_slice(b"after\n");
        assert_eq!(
            String::from_utf8_lossy(&log),
            String::from_utf8_lossy(&expect),
            "report -o {o}"
        );
    }
    // The agents too: the recording follows the log's first line, the file stays.
    for (name, agent) in [("rust", bin("labperf-agent")), ("c", c_agent())] {
        let log = through_append_log(
            &d,
            Command::new(agent).args([
                "record",
                "-e",
                "cpu-clock",
                "-o",
                "/dev/stdout",
                "--",
                "/bin/true",
            ]),
        );
        assert!(
            log.starts_with(b"before\n") && log.ends_with(b"after\n"),
            "{name}"
        );
        let rec = &log[7..log.len() - 6];
        let dec = decode_all(rec);
        assert!(
            dec.trailer.is_some() && dec.damage.is_empty(),
            "{name}: the recording decodes whole"
        );
    }
    let _ = std::fs::remove_dir_all(&d);
}

#[test]
fn writers_refuse_a_planted_link_and_create_0600_files() {
    let (d, shared) = shared_dir("planted-writers");
    let secret = secret(&d);
    let rec = labperf_tests::root().join("tests/data/v2-stacks/record.lpr");
    let labperf = |args: &[&str], out: &Path| {
        Command::new(bin("labperf"))
            .args(args)
            .arg(&rec)
            .arg("-o")
            .arg(out)
            .output()
            .unwrap()
    };
    // Before: `report -o` followed nobody's link and replaced root's secret.
    let theirs = shared.join("report.txt");
    assert!(as_nobody("ln", &[Path::new("-s"), &secret, &theirs]));
    for args in [&["report"][..], &["export", "--format", "folded"]] {
        let o = labperf(args, &theirs);
        let e = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(1), "{args:?}: {e}");
        assert!(e.contains("a symbolic link another user owns"), "{e}");
        assert_eq!(std::fs::read_to_string(&secret).unwrap(), "root's secret\n");
    }
    // Root's own link is followed (the file it names replaced, its mode kept).
    let mine = d.join("mine.txt");
    std::os::unix::fs::symlink(&secret, &mine).unwrap();
    assert!(labperf(&["report"], &mine).status.success());
    assert!(std::fs::read_to_string(&secret)
        .unwrap()
        .contains("Overhead"));
    assert_eq!(mode(&secret), 0o600);
    // New files are 0600 (before: 0644); a file root had made 0644 keeps its mode.
    let new = d.join("new.txt");
    assert!(labperf(&["report"], &new).status.success());
    assert_eq!(mode(&new), 0o600);
    std::fs::set_permissions(&new, std::fs::Permissions::from_mode(0o644)).unwrap();
    assert!(labperf(&["report"], &new).status.success());
    assert_eq!(mode(&new), 0o644);
    // `import` of a 0600 perf.data makes a 0600 recording (before: 0644).
    let perf = d.join("perf.data");
    std::fs::copy(
        labperf_tests::root().join("tests/data/perf/i686-3.4.data"),
        &perf,
    )
    .unwrap();
    std::fs::set_permissions(&perf, std::fs::Permissions::from_mode(0o600)).unwrap();
    let o = Command::new(bin("labperf"))
        .arg("import")
        .arg(&perf)
        .arg("-o")
        .arg(d.join("imported.lpr"))
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert_eq!(mode(&d.join("imported.lpr")), 0o600);
    // A file nobody owns that root replaces becomes root's, 0600 (never nobody's mode).
    let given = shared.join("given.txt");
    assert!(as_nobody(
        "sh",
        &[
            Path::new("-c"),
            Path::new(&format!("umask 0; echo x > {}", given.display()))
        ]
    ));
    assert_eq!(mode(&given), 0o666);
    assert!(labperf(&["report"], &given).status.success());
    assert_eq!(
        (mode(&given), std::fs::metadata(&given).unwrap().uid()),
        (0o600, 0)
    );
    let _ = std::fs::remove_dir_all(&d);
}

#[test]
fn parquet_beside_a_device_is_refused_and_makes_no_file() {
    // Before: `export --format parquet -o /dev/null` made /dev/null.stacks.parquet (as root,
    // a file in /dev). Here a device node made in a scratch directory stands for /dev/null
    // (a FIFO still takes the samples, its stacks table beside it: `writers.rs`).
    let d = scratch("planted-parquet");
    let null = d.join("null");
    let c = std::ffi::CString::new(null.to_str().unwrap()).unwrap();
    // SAFETY: mknod of a NUL-terminated path in this test's scratch directory.
    assert_eq!(
        unsafe { libc::mknod(c.as_ptr(), libc::S_IFCHR | 0o666, libc::makedev(1, 3)) },
        0
    );
    let rec = labperf_tests::root().join("tests/data/v2-stacks/record.lpr");
    for out in [null.clone(), PathBuf::from("/dev/stdout")] {
        let o = Command::new(bin("labperf"))
            .args(["export", "--format", "parquet"])
            .arg(&rec)
            .arg("-o")
            .arg(&out)
            .output()
            .unwrap();
        let e = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(1), "{e}");
        assert!(e.contains("Parquet is two files"), "{e}");
    }
    assert_eq!(std::fs::read_dir(&d).unwrap().count(), 1, "only the node");
    let _ = std::fs::remove_dir_all(&d);
}

#[test]
fn sigterm_during_report_o_leaves_no_hidden_part_file() {
    // Before: SIGTERM while `report -o` or `export -o` worked left `.NAME.PID-….part`.
    let d = scratch("planted-sigterm");
    let rec = d.join("big.lpr");
    labperf_tests::record_bench_local(&rec, "20000", "1", "nops");
    for args in [
        &["report", "--children"][..],
        &["export", "--format", "firefox"],
    ] {
        no_part_left_by(libc::SIGTERM, &d, &rec, args);
    }
    let _ = std::fs::remove_dir_all(&d);
}

#[test]
fn other_fatal_signals_during_export_o_leave_no_hidden_part_file() {
    // Before: SIGQUIT, SIGUSR1 and SIGALRM (default action: end the process) left the
    // `.part` file; only SIGINT, SIGTERM and SIGHUP removed it.
    let d = scratch("planted-other-signals");
    let rec = d.join("big.lpr");
    labperf_tests::record_bench_local(&rec, "20000", "1", "nops");
    for sig in [libc::SIGQUIT, libc::SIGUSR1, libc::SIGALRM] {
        no_part_left_by(sig, &d, &rec, &["export", "--format", "firefox"]);
    }
    let _ = std::fs::remove_dir_all(&d);
}

/// `labperf ARGS REC -o DIR/out` ended by `sig` while it writes its temporary (tried up to
/// 20 times until the signal lands then): no `.out.*` file is left in `d`.
fn no_part_left_by(sig: i32, d: &Path, rec: &Path, args: &[&str]) {
    for _ in 0..20 {
        let mut child = Command::new(bin("labperf"))
            .args(args)
            .arg(rec)
            .arg("-o")
            .arg(d.join("out"))
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let part = loop {
            let p = std::fs::read_dir(d)
                .unwrap()
                .flatten()
                .find(|e| e.file_name().to_string_lossy().starts_with(".out."));
            if p.is_some() || child.try_wait().unwrap().is_some() {
                break p;
            }
        };
        // SAFETY: signalling our own child.
        unsafe { libc::kill(child.id() as i32, sig) };
        let st = child.wait().unwrap();
        if part.is_some() && std::os::unix::process::ExitStatusExt::signal(&st) == Some(sig) {
            let left: Vec<_> = std::fs::read_dir(d)
                .unwrap()
                .flatten()
                .map(|e| e.file_name())
                .filter(|n| n.to_string_lossy().starts_with(".out."))
                .collect();
            assert!(left.is_empty(), "{sig} {args:?}: left {left:?}");
            return;
        }
    }
    panic!("{sig} {args:?}: never caught while writing");
}

#[test]
fn the_c_agents_numbers_never_wrap() {
    // Before: 2^64 + 1 wrapped to 1 and recorded with period 1.
    let o = Command::new(c_agent())
        .args(["record", "-c", "18446744073709551617", "-o", "/dev/null"])
        .args(["--", "/bin/true"])
        .output()
        .unwrap();
    let e = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "{e}");
    assert!(
        e.contains("expects a number greater than 0, got 18446744073709551617"),
        "{e}"
    );
    let o = Command::new(c_agent())
        .args(["plan", "-c", "18446744073709551615"])
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
}

#[test]
fn two_interrupts_end_a_local_run_whose_output_fifo_has_no_reader() {
    // A FIFO nobody reads (planted, or named by mistake) blocks the agent's open; Ctrl-C
    // must still end the run: the second kills the agent, a third would exit labperf.
    let d = scratch("planted-fifo-interrupt");
    let fifo = d.join("r.lpr");
    let c = std::ffi::CString::new(fifo.to_str().unwrap()).unwrap();
    // SAFETY: mkfifo of a NUL-terminated path in this test's scratch directory.
    assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
    let mut child = Command::new(bin("labperf"))
        .args(["record", "-e", "cpu-clock", "-o"])
        .arg(&fifo)
        .args(["--", "sleep", "5"])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    agent_args(child.id());
    let t = Instant::now();
    let st = loop {
        if let Some(st) = child.try_wait().unwrap() {
            break st;
        }
        assert!(
            t.elapsed() < Duration::from_secs(10),
            "labperf still runs 10 s after the interrupts"
        );
        // SAFETY: signalling our own child, every 300 ms until it ends.
        unsafe { libc::kill(child.id() as i32, libc::SIGINT) };
        std::thread::sleep(Duration::from_millis(300));
    };
    assert!(t.elapsed() < Duration::from_secs(2), "{:?}", t.elapsed());
    assert!(!st.success());
    let _ = std::fs::remove_dir_all(&d);
}

#[test]
fn both_agents_refuse_intervals_and_durations_past_their_common_maximum() {
    // Before: the C agent's `-I 18446744073709` wrapped in its ms-to-ns conversion and
    // busy-looped forever after one line; `-I 4294967297` wrapped poll's int timeout. Both
    // agents now take at most 4294967295 ms (perf's unsigned int -I) for -I, --duration and
    // --flush-ms, refused past it with the same range.
    for (name, agent) in [("rust", bin("labperf-agent")), ("c", c_agent())] {
        for (args, says) in [
            (&["stat", "-I", "18446744073709"][..], "1 to 4294967295 ms"),
            (
                &["stat", "-I", "18446744073709551615"],
                "1 to 4294967295 ms",
            ),
            (&["stat", "-I", "4294967296"], "1 to 4294967295 ms"),
            (&["stat", "-I", "0"], "1 to 4294967295 ms"),
            (&["record", "--flush-ms", "4294967296"], "0 to 4294967295"),
            (
                &["stat", "-a", "--duration", "4294967.296"],
                "0.001 to 4294967.295 seconds",
            ),
            (
                &["record", "-a", "--duration", "18446744073709551"],
                "0.001 to 4294967.295 seconds",
            ),
        ] {
            let t = Instant::now();
            let mut child = Command::new(&agent)
                .args(args)
                .args([
                    "-e",
                    "task-clock",
                    "-o",
                    "/dev/null",
                    "--",
                    "/bin/sleep",
                    "0.2",
                ])
                .stdout(Stdio::null())
                .stderr(Stdio::piped())
                .spawn()
                .unwrap();
            while child.try_wait().unwrap().is_none() && t.elapsed() < Duration::from_secs(5) {
                std::thread::sleep(Duration::from_millis(20));
            }
            let _ = child.kill();
            let o = child.wait_with_output().unwrap();
            let e = String::from_utf8_lossy(&o.stderr);
            assert_eq!(o.status.code(), Some(2), "{name} {args:?}: {e}");
            assert!(e.contains(says), "{name} {args:?}: {e}");
        }
        // The maximum itself is taken, and a short workload ends the run at once.
        let t = Instant::now();
        let o = Command::new(&agent)
            .args(["stat", "-I", "4294967295", "-e", "task-clock"])
            .args(["-o", "/dev/null", "--", "/bin/sleep", "0.3"])
            .output()
            .unwrap();
        let e = String::from_utf8_lossy(&o.stderr);
        assert!(o.status.success(), "{name}: {e}");
        // 0.3 s of sleep; a second and more of slack for a loaded 2-core machine (the
        // wrapped timeout took 1.8 s, the wrapped conversion forever).
        assert!(
            t.elapsed() < Duration::from_millis(1500),
            "{name}: {:?}",
            t.elapsed()
        );
    }
}

/// The first process whose parent is `parent` and whose command line contains `word`,
/// within 20 s.
fn child_with(parent: u32, word: &str) -> u32 {
    let t = Instant::now();
    while t.elapsed() < Duration::from_secs(20) {
        for p in std::fs::read_dir("/proc").unwrap().flatten() {
            let Ok(pid) = p.file_name().to_string_lossy().parse::<u32>() else {
                continue;
            };
            let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
            let ppid = stat
                .rsplit_once(") ")
                .and_then(|(_, r)| r.split(' ').nth(1))
                .and_then(|s| s.parse::<u32>().ok());
            let cmd = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
            if ppid == Some(parent) && String::from_utf8_lossy(&cmd).contains(word) {
                return pid;
            }
        }
        std::thread::sleep(Duration::from_millis(5));
    }
    panic!("no process '{word}' under {parent} within 20 s");
}

/// Whether `pid` still runs (a zombie, or no process, does not).
fn runs(pid: u32) -> bool {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    stat.rsplit_once(") ")
        .is_some_and(|(_, r)| !r.starts_with('Z') && !r.starts_with('X'))
}

fn fifo(d: &Path) -> PathBuf {
    let fifo = d.join("r.lpr");
    let c = std::ffi::CString::new(fifo.to_str().unwrap()).unwrap();
    // SAFETY: mkfifo of a NUL-terminated path in this test's scratch directory.
    assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
    fifo
}

#[test]
fn one_interrupt_ends_a_run_blocked_opening_its_fifo_and_the_agent_dies_with_labperf() {
    // Before: the agent's open of a FIFO with no reader started again after Ctrl-C (one
    // SIGINT to the process group did nothing), and an agent whose labperf was killed
    // stayed blocked there for ever, its parent init.
    let d = scratch("planted-fifo-one-interrupt");
    let fifo = fifo(&d);
    let start = || {
        Command::new(bin("labperf"))
            .args(["record", "--local", "-e", "cpu-clock", "-o"])
            .arg(&fifo)
            .args(["--", "sleep", "5"])
            .process_group(0)
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap()
    };
    let mut child = start();
    let agent = child_with(child.id(), "--status-file");
    // The agent blocks in the open (or is about to): wait for its workload, forked first.
    child_with(agent, "sleep");
    std::thread::sleep(Duration::from_millis(300));
    let t = Instant::now();
    // SAFETY: Ctrl-C as a terminal sends it: to labperf's process group, once.
    unsafe { libc::kill(-(child.id() as i32), libc::SIGINT) };
    let st = loop {
        if let Some(st) = child.try_wait().unwrap() {
            break st;
        }
        if t.elapsed() > Duration::from_secs(5) {
            let _ = child.kill();
            panic!("one interrupt did not end the run in 5 s");
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    assert!(!st.success());
    assert!(!runs(agent), "the agent {agent} outlived labperf");
    // labperf killed outright: its agent goes with it.
    let mut child = start();
    let agent = child_with(child.id(), "--status-file");
    child.kill().unwrap();
    child.wait().unwrap();
    let t = Instant::now();
    while runs(agent) && t.elapsed() < Duration::from_secs(2) {
        std::thread::sleep(Duration::from_millis(10));
    }
    assert!(!runs(agent), "the agent {agent} outlived a killed labperf");
    let _ = std::fs::remove_dir_all(&d);
}

#[test]
fn a_second_interrupt_leaves_nothing_of_a_workload_that_ignores_sigint() {
    // Before: the second Ctrl-C killed the agent (and, with it, the shell), but the
    // shell's `sleep` ran on, an orphan.
    let d = scratch("planted-second-interrupt");
    let mut child = Command::new(bin("labperf"))
        .args(["record", "--local", "-e", "cpu-clock", "-o"])
        .arg(d.join("r.lpr"))
        .args(["--", "sh", "-c", "trap '' INT; sleep 7.25; true"])
        .process_group(0)
        .stdout(Stdio::null())
        // A file, not a pipe: an orphan holding the pipe would delay its end to its own.
        .stderr(std::fs::File::create(d.join("err")).unwrap())
        .spawn()
        .unwrap();
    let agent = child_with(child.id(), "--status-file");
    let shell = child_with(agent, "trap");
    let sleep = child_with(shell, "7.25");
    for _ in 0..2 {
        // SAFETY: Ctrl-C as a terminal sends it, to labperf's process group.
        unsafe { libc::kill(-(child.id() as i32), libc::SIGINT) };
        std::thread::sleep(Duration::from_millis(300));
    }
    let t = Instant::now();
    let st = loop {
        if let Some(st) = child.try_wait().unwrap() {
            break st;
        }
        assert!(t.elapsed() < Duration::from_secs(5), "labperf runs on");
        std::thread::sleep(Duration::from_millis(20));
    };
    let e = std::fs::read_to_string(d.join("err")).unwrap();
    assert!(!st.success(), "{e}");
    assert!(e.contains("interrupted again: killing the agent"), "{e}");
    for (what, pid) in [("agent", agent), ("shell", shell), ("sleep", sleep)] {
        if runs(pid) {
            // SAFETY: ending what the test started, before failing.
            unsafe { libc::kill(pid as i32, libc::SIGKILL) };
            panic!("the workload's {what} ({pid}) outlived labperf: {e}");
        }
    }
    let _ = std::fs::remove_dir_all(&d);
}

/// `labperf ARGS RECORDING -o OUT`, ended after 10 s (a writer blocked on a FIFO).
fn write_with(args: &[&str], out: &Path) -> (Option<i32>, String) {
    let rec = labperf_tests::root().join("tests/data/v2-stacks/record.lpr");
    let mut child = Command::new(bin("labperf"))
        .args(args)
        .arg(&rec)
        .arg("-o")
        .arg(out)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let t = Instant::now();
    while child.try_wait().unwrap().is_none() && t.elapsed() < Duration::from_secs(10) {
        std::thread::sleep(Duration::from_millis(20));
    }
    let _ = child.kill();
    let o = child.wait_with_output().unwrap();
    (
        o.status.code(),
        String::from_utf8_lossy(&o.stderr).into_owned(),
    )
}

#[test]
fn writers_refuse_another_users_fifo_in_a_sticky_dir_and_their_links_above_the_output() {
    // Before: root's report went into nobody's FIFO in a root-owned sticky directory (or
    // hung with no reader), and `-o pub/d/x` with nobody's `pub/d -> victim` wrote into
    // victim.
    let d = scratch("planted-fifo-and-dir-link");
    let tmp = d.join("tmp"); // as /tmp: root's, sticky, anyone writes
    std::fs::create_dir(&tmp).unwrap();
    std::fs::set_permissions(&tmp, std::fs::Permissions::from_mode(0o1777)).unwrap();
    let victim = d.join("victim");
    std::fs::create_dir(&victim).unwrap();
    let fifo = tmp.join("out.txt");
    assert!(as_nobody("mkfifo", &[&fifo]));
    let link = tmp.join("d");
    assert!(as_nobody("ln", &[Path::new("-s"), &victim, &link]));
    let mine = d.join("mylink"); // root's link to nobody's
    std::os::unix::fs::symlink(&link, &mine).unwrap();
    for args in [&["report"][..], &["export", "--format", "folded"]] {
        let (code, e) = write_with(args, &fifo);
        assert_eq!(code, Some(1), "{args:?}: {e}");
        assert!(
            e.contains(&format!(
                "cannot write {}: it is a FIFO another user owns in a shared (sticky) directory",
                fifo.display()
            )),
            "{args:?}: {e}"
        );
        for out in [link.join("x"), mine.join("x")] {
            let (code, e) = write_with(args, &out);
            assert_eq!(code, Some(1), "{args:?}: {e}");
            // The link nobody owns is named, not root's `mylink` that leads to it.
            assert!(
                e.contains(&format!(
                    "cannot write {}: {} is a symbolic link another user owns",
                    out.display(),
                    link.display()
                )),
                "{args:?}: {e}"
            );
        }
    }
    assert_eq!(std::fs::read_dir(&victim).unwrap().count(), 0);
    let _ = std::fs::remove_dir_all(&d);
}

#[test]
fn a_writers_error_names_the_file_given_and_the_os_error_once() {
    // Before: `cannot write nodir/.x.txt.30841-0-324939371.part: No such file or
    // directory (os error 2): No such file or directory (os error 2)`.
    let d = scratch("planted-error-names");
    let out = d.join("nodir/x.txt");
    for args in [&["report"][..], &["export", "--format", "folded"]] {
        let (code, e) = write_with(args, &out);
        assert_eq!(code, Some(1), "{args:?}: {e}");
        assert_eq!(
            e.trim_end().lines().last().unwrap_or_default(),
            format!(
                "labperf: error: cannot write {}: No such file or directory (os error 2)",
                out.display()
            ),
            "{args:?}"
        );
    }
    let _ = std::fs::remove_dir_all(&d);
}

#[test]
fn the_rust_agent_refuses_another_users_fifo_in_a_sticky_dir_and_their_links_above_its_file() {
    // Before: `labperf-agent record -o tmp/x.lpr` wrote into nobody's FIFO there (or hung
    // with no reader), and `-o tmp/d/x.lpr` through nobody's `d -> victim` into victim.
    let d = scratch("planted-agent-fifo-and-dir-link");
    let tmp = d.join("tmp"); // as /tmp: root's, sticky, anyone writes
    std::fs::create_dir(&tmp).unwrap();
    std::fs::set_permissions(&tmp, std::fs::Permissions::from_mode(0o1777)).unwrap();
    let victim = d.join("victim");
    std::fs::create_dir(&victim).unwrap();
    let fifo = tmp.join("x.lpr");
    assert!(as_nobody("mkfifo", &[&fifo]));
    let link = tmp.join("d");
    assert!(as_nobody("ln", &[Path::new("-s"), &victim, &link]));
    let mine = d.join("mylink"); // root's link to nobody's
    std::os::unix::fs::symlink(&link, &mine).unwrap();
    // The link nobody owns is named, also at the end of root's `mylink`.
    let theirs = format!("'{}' is a symbolic link another user owns", link.display());
    for (out, says) in [
        (
            fifo,
            "it is a FIFO another user owns in a shared (sticky) directory",
        ),
        (link.join("x.lpr"), theirs.as_str()),
        (mine.join("x.lpr"), theirs.as_str()),
    ] {
        let mut child = Command::new(bin("labperf-agent"))
            .args(["record", "-e", "cpu-clock", "-o"])
            .arg(&out)
            .args(["--", "/bin/true"])
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let t = Instant::now();
        while child.try_wait().unwrap().is_none() && t.elapsed() < Duration::from_secs(10) {
            std::thread::sleep(Duration::from_millis(20));
        }
        let _ = child.kill();
        let o = child.wait_with_output().unwrap();
        let e = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(125), "{}: {e}", out.display());
        assert!(e.contains(says), "{}: {e}", out.display());
    }
    assert_eq!(std::fs::read_dir(&victim).unwrap().count(), 0);
    let _ = std::fs::remove_dir_all(&d);
}
