//! What labperf says as it works, read as a perf user reads it: `--top` says what it hid,
//! `record` keeps the previous file as `.old` (a regular file only), `export -o x.svg`
//! needs no `--format`, output into a closed pipe ends quietly, plurals and signal names,
//! a failed host's error said once, `info` in words, an attached recording's missing exit
//! explained (issue 27's quiet defaults).

use labperf_tests::{bin, root, scratch};
use std::os::unix::fs::FileTypeExt;
use std::os::unix::process::ExitStatusExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

fn labperf(args: &[&str]) -> Output {
    Command::new(bin("labperf")).args(args).output().unwrap()
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

/// A recording of the bench (a golden file: 289 samples in 50 rows).
fn bench() -> PathBuf {
    root().join("tests/data/x86_64-bench-v1/record.lpr")
}

#[test]
fn top_says_how_many_rows_it_hid_and_their_share_of_samples() {
    let f = bench();
    let f = f.to_str().unwrap();
    // Every row, to count what --top 3 leaves out.
    let o = labperf(&["report", f, "--top", "0", "--format", "json"]);
    assert!(o.status.success(), "{}", text(&o.stderr));
    let j: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let rows = j["tables"][0]["rows"].as_array().unwrap();
    assert!(rows.len() > 3, "{j}");
    assert!(j["tables"][0].get("not_shown").is_none(), "{j}");
    let total: u64 = rows.iter().map(|r| r["samples"].as_u64().unwrap()).sum();
    let hidden: u64 = rows[3..]
        .iter()
        .map(|r| r["samples"].as_u64().unwrap())
        .sum();
    let pct = 100.0 * hidden as f64 / total as f64;
    let line = format!(
        "… {} more rows ({pct:.1}% of samples) not shown: --top 0 shows all",
        rows.len() - 3
    );

    let o = labperf(&["report", f, "--top", "3"]);
    let out = text(&o.stdout);
    assert!(o.status.success(), "{}", text(&o.stderr));
    assert_eq!(out.lines().last(), Some(line.as_str()), "{out}");
    // --top 0 shows all, and says nothing.
    let o = labperf(&["report", f, "--top", "0"]);
    assert!(
        !text(&o.stdout).contains("not shown"),
        "{}",
        text(&o.stdout)
    );

    // JSON: a field of the table; CSV: no made-up row.
    let o = labperf(&["report", f, "--top", "3", "--format", "json"]);
    let j: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let n = &j["tables"][0]["not_shown"];
    assert_eq!(n["rows"].as_u64(), Some(rows.len() as u64 - 3), "{j}");
    assert!(
        (n["samples_pct"].as_f64().unwrap() - pct).abs() < 1e-9,
        "{j}"
    );
    assert_eq!(j["tables"][0]["rows"].as_array().unwrap().len(), 3);
    let o = labperf(&["report", f, "--top", "3", "--format", "csv"]);
    let csv = text(&o.stdout);
    assert_eq!(csv.lines().count(), 4, "a header and 3 rows: {csv}");
    assert!(!csv.contains("not shown"), "{csv}");
}

#[test]
fn top_of_a_children_report_says_what_it_hid_in_self_samples() {
    let f = root().join("tests/data/v2-stacks/record.lpr");
    let o = labperf(&["report", f.to_str().unwrap(), "--children", "--top", "0"]);
    let all = text(&o.stdout);
    assert!(o.status.success(), "{}", text(&o.stderr));
    // The rows under the column titles: Children, Self, Samples, Self samples, Symbol, DSO.
    let rows: Vec<Vec<&str>> = all
        .lines()
        .skip_while(|l| !l.starts_with("Children"))
        .skip(1)
        .map(|l| l.split_whitespace().collect())
        .collect();
    assert!(rows.len() > 2, "{all}");
    let self_pct: f64 = rows[2..]
        .iter()
        .map(|r| r[1].trim_end_matches('%').parse::<f64>().unwrap())
        .sum();
    let o = labperf(&["report", f.to_str().unwrap(), "--children", "--top", "2"]);
    let out = text(&o.stdout);
    assert_eq!(
        out.lines().last().unwrap(),
        format!(
            "… {} more rows ({self_pct:.1}% of self samples) not shown: --top 0 shows all",
            rows.len() - 2
        ),
        "{out}"
    );
}

/// labperf with its standard output a pipe nobody reads any more (its read end closed
/// before labperf starts, so every write fails with EPIPE).
fn into_closed_pipe(args: &[&str]) -> Output {
    let mut fds = [0i32; 2];
    // SAFETY: pipe(2) into a two-element array; the read end is closed at once.
    unsafe {
        assert_eq!(libc::pipe(fds.as_mut_ptr()), 0);
        libc::close(fds[0]);
    }
    // SAFETY: the write end was just made and is owned here alone.
    let w = unsafe { <std::os::fd::OwnedFd as std::os::fd::FromRawFd>::from_raw_fd(fds[1]) };
    Command::new(bin("labperf"))
        .args(args)
        .stdout(Stdio::from(w))
        .stderr(Stdio::piped())
        .output()
        .unwrap()
}

#[test]
fn output_into_a_closed_pipe_ends_quietly_by_sigpipe() {
    let f = bench();
    let f = f.to_str().unwrap();
    let d = scratch("messages-epipe");
    let g = d.join("g.lpr");
    std::fs::copy(f, &g).unwrap();
    let g = g.to_str().unwrap();
    for args in [
        &["report", f][..],
        &["report", f, "--format", "json"],
        &["report", f, "--format", "csv"],
        &["dump", f],
        &["info", f],
        &["diff", f, g],
        &["export", f, "--format", "folded"],
        &["export", f, "--format", "svg", "-o", "-"],
        &["export", f, "--format", "pprof", "-o", "-"],
        &["export", f, "--format", "firefox", "-o", "-"],
    ] {
        let o = into_closed_pipe(args);
        let err = text(&o.stderr);
        // As `seq 100000 | head` ends: killed by SIGPIPE (the shell's 141), nothing said.
        assert_eq!(o.status.signal(), Some(libc::SIGPIPE), "{args:?}: {err}");
        assert!(
            !err.contains("Broken pipe") && !err.contains("error"),
            "{args:?}: {err}"
        );
    }
}

/// `labperf record --local -o OUT -- /bin/echo WORD`: its status and stderr.
fn record_to(out: &Path, word: &str) -> Output {
    Command::new(bin("labperf"))
        .args(["record", "--local", "--no-report", "-e", "cpu-clock", "-o"])
        .arg(out)
        .args(["--", "/bin/echo", word])
        .output()
        .unwrap()
}

#[test]
fn record_keeps_the_previous_file_as_old() {
    let d = scratch("messages-old");
    let f = d.join("r.lpr");
    let old = d.join("r.lpr.old");
    let o = record_to(&f, "first");
    assert!(o.status.success(), "{}", text(&o.stderr));
    assert!(!old.exists(), "nothing to keep the first time");
    let first = std::fs::read(&f).unwrap();
    let o = record_to(&f, "second");
    assert!(o.status.success(), "{}", text(&o.stderr));
    assert_eq!(
        std::fs::read(&old).unwrap(),
        first,
        "r.lpr.old is the first recording"
    );
    let second = std::fs::read(&f).unwrap();
    assert_ne!(second, first);
    assert!(labperf_common::decode_all(&second).trailer.is_some());
    // A third time: the older .old gives way.
    let o = record_to(&f, "third");
    assert!(o.status.success(), "{}", text(&o.stderr));
    assert_eq!(std::fs::read(&old).unwrap(), second);
    // A link to a regular file: the file it names is kept beside it, the link stays.
    std::os::unix::fs::symlink("r.lpr", d.join("link.lpr")).unwrap();
    let third = std::fs::read(&f).unwrap();
    let o = record_to(&d.join("link.lpr"), "fourth");
    assert!(o.status.success(), "{}", text(&o.stderr));
    assert_eq!(std::fs::read(&old).unwrap(), third);
    assert!(!d.join("link.lpr.old").exists());
    assert!(std::fs::symlink_metadata(d.join("link.lpr"))
        .unwrap()
        .file_type()
        .is_symlink());
}

#[test]
fn record_keeps_no_old_for_a_device_or_a_fifo() {
    let d = scratch("messages-old-nodes");
    let (dev, fifo) = (d.join("null"), d.join("fifo"));
    let c = |p: &Path| std::ffi::CString::new(p.as_os_str().as_encoded_bytes()).unwrap();
    // SAFETY: plain system calls on NUL-terminated paths in this test's scratch directory
    // (a node like /dev/null, made here: never the real one; the tests run as root).
    unsafe {
        assert_eq!(
            libc::mknod(c(&dev).as_ptr(), libc::S_IFCHR | 0o666, libc::makedev(1, 3)),
            0,
            "mknod (the tests run as root): {}",
            std::io::Error::last_os_error()
        );
        assert_eq!(libc::mkfifo(c(&fifo).as_ptr(), 0o666), 0, "mkfifo");
    }
    let o = record_to(&dev, "dev");
    assert!(o.status.success(), "{}", text(&o.stderr));
    // The FIFO's reader, while the recording is written into it.
    let reader = {
        let fifo = fifo.clone();
        std::thread::spawn(move || std::fs::read(fifo).unwrap().len())
    };
    let o = record_to(&fifo, "fifo");
    assert!(o.status.success(), "{}", text(&o.stderr));
    assert!(reader.join().unwrap() > 0);
    let mut names: Vec<String> = std::fs::read_dir(&d)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    assert_eq!(names, ["fifo", "null"]);
    assert!(std::fs::symlink_metadata(&dev)
        .unwrap()
        .file_type()
        .is_char_device());
    assert!(std::fs::symlink_metadata(&fifo)
        .unwrap()
        .file_type()
        .is_fifo());
}

#[test]
fn export_takes_its_format_from_the_output_name() {
    let d = scratch("messages-export");
    let f = bench();
    let f = f.to_str().unwrap();
    for (name, magic) in [
        ("x.svg", &b"<?xml"[..]),
        ("x.folded", b"labperf-bench;"),
        ("x.pb.gz", b"\x1f\x8b"),
        ("x.json", b"{"),
        ("x.parquet", b"PAR1"),
    ] {
        let out = d.join(name);
        let o = labperf(&["export", f, "-o", out.to_str().unwrap()]);
        assert!(o.status.success(), "{name}: {}", text(&o.stderr));
        let bytes = std::fs::read(&out).unwrap();
        assert!(bytes.starts_with(magic), "{name}: {:?}", &bytes[..8]);
    }
    // --format that the name agrees with, or a name that is none of ours: --format says.
    let o = labperf(&[
        "export",
        f,
        "--format",
        "svg",
        "-o",
        d.join("y.svg").to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", text(&o.stderr));
    let o = labperf(&[
        "export",
        f,
        "--format",
        "svg",
        "-o",
        d.join("page.html").to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", text(&o.stderr));
    assert!(std::fs::read(d.join("page.html"))
        .unwrap()
        .starts_with(b"<?xml"));
    // A --format the name contradicts: refused before anything is written.
    let z = d.join("z.json");
    let o = labperf(&["export", f, "--format", "svg", "-o", z.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(1));
    assert!(
        text(&o.stderr).contains(&format!(
            "--format svg but -o {} names a firefox file: drop --format, or name the output for svg",
            z.display()
        )),
        "{}",
        text(&o.stderr)
    );
    assert!(!z.exists());
    // Neither: the question, with the answers.
    let o = labperf(&["export", f]);
    assert_eq!(o.status.code(), Some(1));
    assert!(
        text(&o.stderr).contains("which format? pass --format"),
        "{}",
        text(&o.stderr)
    );
}

#[test]
fn a_workload_killed_by_a_signal_is_named_and_one_sample_is_singular() {
    let d = scratch("messages-signal");
    let f = d.join("s.lpr");
    let o = Command::new(bin("labperf"))
        .args(["record", "--local", "--no-report", "-e", "cpu-clock", "-o"])
        .arg(&f)
        .args(["--", "/bin/sh", "-c", "kill -SEGV $$"])
        .output()
        .unwrap();
    let err = text(&o.stderr);
    assert_eq!(o.status.code(), Some(139), "{err}");
    assert!(
        err.contains("note: the workload was killed by SIGSEGV\n"),
        "{err}"
    );
    assert!(!err.contains("exited with status"), "{err}");
    let o = labperf(&["info", f.to_str().unwrap()]);
    assert!(
        text(&o.stdout).contains("workload exit:   killed by SIGSEGV\n"),
        "{}",
        text(&o.stdout)
    );
    // "wrote 1 sample" (the agent's line) and "# 1 sample of event" (the report's).
    let h = labperf_tests::golden::header(labperf_tests::golden::Kind::Sample);
    let mut enc = labperf_common::Encoder::new();
    let mut bytes = labperf_common::Encoder::prelude().to_vec();
    bytes.extend(enc.header_frame(&h));
    enc.push(&labperf_common::Record::Sample(labperf_common::Sample {
        pid: 1,
        tid: 1,
        ip: 0x1000,
        period: 7,
        ..Default::default()
    }));
    bytes.extend(enc.trailer_frame(&labperf_common::Trailer {
        samples: 1,
        ..Default::default()
    }));
    let one = d.join("one.lpr");
    std::fs::write(&one, bytes).unwrap();
    let o = labperf(&["report", one.to_str().unwrap()]);
    let out = text(&o.stdout);
    assert!(out.starts_with("# 1 sample of event '"), "{out}");
    let o = labperf(&["info", one.to_str().unwrap()]);
    let out = text(&o.stdout);
    assert!(out.contains("totals:          1 sample, "), "{out}");
    assert!(out.contains("(1 sample, 0 mmaps, "), "{out}");
    let o = labperf(&[
        "export",
        one.to_str().unwrap(),
        "-o",
        d.join("one.svg").to_str().unwrap(),
    ]);
    assert!(
        text(&o.stderr).contains("labperf: 1 stack of 1 sample written to "),
        "{}",
        text(&o.stderr)
    );
}

/// A port on 127.0.0.1 nothing listens on (bound, then let go): connections are refused.
fn refusing_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

#[test]
fn a_failed_hosts_error_is_said_once() {
    let (p, q) = (refusing_port(), refusing_port());
    let one = format!("127.0.0.1:{p}");
    let two = format!("127.0.0.1:{p},127.0.0.1:{q}");
    let d = scratch("messages-hosts");
    let out = d.join("h.lpr");
    let out = out.to_str().unwrap();
    for (args, last) in [
        (
            vec!["record", "--host", &one, "-o", out, "--", "/bin/true"],
            "labperf: error: 1 of 1 host failed (see above)",
        ),
        (
            vec!["record", "--host", &two, "-o", out, "--", "/bin/true"],
            "labperf: error: 2 of 2 hosts failed (see above)",
        ),
        (
            vec!["stat", "--host", &one, "--", "/bin/true"],
            "labperf: error: 1 of 1 host failed",
        ),
        (
            vec!["probe", &two],
            "labperf: error: 2 of 2 hosts could not be probed",
        ),
    ] {
        let o = Command::new(bin("labperf"))
            .args(&args)
            .env("HOME", &d)
            .stdin(Stdio::null())
            .output()
            .unwrap();
        let all = format!("{}{}", text(&o.stdout), text(&o.stderr));
        assert_eq!(o.status.code(), Some(1), "{args:?}: {all}");
        for port in if args.contains(&two.as_str()) {
            vec![p, q]
        } else {
            vec![p]
        } {
            let reason = format!("cannot reach 127.0.0.1:{port}: Connection refused");
            assert_eq!(
                all.matches(&reason).count(),
                1,
                "{args:?}: said once:\n{all}"
            );
        }
        assert_eq!(
            text(&o.stderr).lines().last(),
            Some(last),
            "{args:?}: {all}"
        );
    }
}

#[test]
fn info_speaks_words_not_debug_text_or_raw_nanoseconds() {
    let f = root().join("tests/data/v2-every-record");
    let f = std::fs::read_dir(&f)
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|p| p.extension().is_some_and(|x| x == "lpr"))
        .unwrap();
    let h = labperf_common::decode_all(&std::fs::read(&f).unwrap())
        .header
        .unwrap();
    let o = labperf(&["info", f.to_str().unwrap()]);
    let out = text(&o.stdout);
    assert!(o.status.success(), "{}", text(&o.stderr));
    // No Rust debug text, no raw clock readings.
    assert!(!out.contains('{') && !out.contains("Little"), "{out}");
    assert!(!out.contains(&h.start_realtime_ns.to_string()), "{out}");
    assert!(!out.contains(&format!("{} ns", h.start_time_ns)), "{out}");
    let started = out
        .lines()
        .find_map(|l| l.strip_prefix("started:         "))
        .unwrap_or_else(|| panic!("no started: line in\n{out}"));
    // `date -u -d @SECONDS` says the same date.
    let secs = h.start_realtime_ns / 1_000_000_000;
    let date = Command::new("date")
        .args(["-u", &format!("-d@{secs}"), "+%Y-%m-%dT%H:%M:%S"])
        .output()
        .unwrap();
    assert_eq!(
        started,
        format!(
            "{}.{:03}Z",
            text(&date.stdout).trim(),
            h.start_realtime_ns / 1_000_000 % 1000
        )
    );
    assert!(
        out.contains("target:          aarch64 (little-endian), kernel "),
        "{out}"
    );
    let recipe = out.lines().find(|l| l.starts_with("recipe:")).unwrap();
    assert!(recipe.starts_with("recipe:          sampling"), "{recipe}");
    assert!(out.contains("clock:           CLOCK_MONOTONIC"), "{out}");
    assert!(
        out.lines()
            .any(|l| l.starts_with("duration:") && l.ends_with(" s")),
        "{out}"
    );
}

#[test]
fn info_and_titles_say_what_an_attached_recording_recorded() {
    let d = scratch("messages-no-exit");
    let cases: [(&[&str], &str); 5] = [
        (
            &["--pid", "4242"],
            "none: attached to process 4242, which labperf did not start (record -p)",
        ),
        (
            &["--tid", "4243"],
            "none: attached to thread 4243, which labperf did not start (record -t)",
        ),
        (
            &["-a", "--duration", "0.300"],
            "none: the whole machine, without a command (record -a)",
        ),
        (
            &["-C", "0,2-3", "--duration", "1.000"],
            "none: CPUs 0,2-3, without a command (record -C)",
        ),
        // A workload's exit the trailer lacks is not guessed at.
        (&["./prog"], "unknown"),
    ];
    for (i, (command, words)) in cases.iter().enumerate() {
        let mut h = labperf_tests::golden::header(labperf_tests::golden::Kind::Sample);
        h.command = command.iter().map(|w| w.to_string()).collect();
        let mut enc = labperf_common::Encoder::new();
        let mut bytes = labperf_common::Encoder::prelude().to_vec();
        bytes.extend(enc.header_frame(&h));
        bytes.extend(enc.trailer_frame(&labperf_common::Trailer::default()));
        let f = d.join(format!("{i}.lpr"));
        std::fs::write(&f, bytes).unwrap();
        let o = labperf(&["info", f.to_str().unwrap()]);
        let out = text(&o.stdout);
        assert!(o.status.success(), "{}", text(&o.stderr));
        assert!(
            out.contains(&format!("\nworkload exit:   {words}\n")),
            "{command:?}: {out}"
        );
    }
    // The HTML page's and the flame graph's titles name what an attached recording recorded,
    // not the header's `--pid N` as if it were a command line.
    let mut h = labperf_tests::golden::header(labperf_tests::golden::Kind::Sample);
    h.command = vec!["--pid".into(), "4242".into()];
    let mut enc = labperf_common::Encoder::new();
    let mut bytes = labperf_common::Encoder::prelude().to_vec();
    bytes.extend(enc.header_frame(&h));
    enc.push(&labperf_common::Record::Sample(labperf_common::Sample {
        pid: 4242,
        tid: 4242,
        ip: 0x1000,
        period: 1,
        ..Default::default()
    }));
    bytes.extend(enc.trailer_frame(&labperf_common::Trailer::default()));
    let f = d.join("p.lpr");
    std::fs::write(&f, bytes).unwrap();
    let (page, svg) = (d.join("p.html"), d.join("p.svg"));
    for (out, args) in [
        (&page, ["report", "--format", "html"]),
        (&svg, ["export", "--format", "svg"]),
    ] {
        let o = labperf(&[
            args[0],
            f.to_str().unwrap(),
            args[1],
            args[2],
            "-o",
            out.to_str().unwrap(),
        ]);
        assert!(o.status.success(), "{}", text(&o.stderr));
    }
    let page = std::fs::read_to_string(page).unwrap();
    assert!(page.contains("<h1>labperf: process 4242</h1>"), "{page}");
    // Without samples, an attached process is asked whether it ran (`sleep` never does),
    // not whether the workload was too short.
    let mut enc = labperf_common::Encoder::new();
    let mut bytes = labperf_common::Encoder::prelude().to_vec();
    bytes.extend(enc.header_frame(&h));
    bytes.extend(enc.trailer_frame(&labperf_common::Trailer::default()));
    let none = d.join("none.lpr");
    std::fs::write(&none, bytes).unwrap();
    let o = labperf(&["report", none.to_str().unwrap()]);
    assert!(
        text(&o.stderr).contains("note: the file holds no samples (did the process run on a CPU while recorded, or was the period too long?)"),
        "{}",
        text(&o.stderr)
    );
    let svg = std::fs::read_to_string(svg).unwrap();
    assert!(svg.contains(">labperf: process 4242 on "), "{svg}");
}
