//! What labperf says as it works, read as a perf user reads it: `--top` says what it hid,
//! `record` keeps the previous file as `.old` (a regular file only), `export -o x.svg`
//! needs no `--format`, output into a closed pipe ends quietly, plurals and signal names,
//! a failed host's error said once, `info` in words (issue 27's quiet defaults).

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
