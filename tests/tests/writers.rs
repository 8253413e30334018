//! Every writer that finishes a file through a temporary name and a rename, given what is
//! not a regular file: a character device node, a FIFO (read while it is written) and a
//! symbolic link to a device node, all made in a scratch directory (never the real
//! /dev/null; the tests run as root, as CI does). Afterwards each node must still be what
//! it was, and the FIFO's reader must have the bytes. Also: `-o -` where a format streams,
//! a link to a regular file kept as a link, and a directory or a socket refused.

use labperf_common::decode_all;
use labperf_tests::c_agent;
use labperf_tests::sshd::{labperf_in, Sshd};
use labperf_tests::{bin, root, scratch};
use std::io::Read;
use std::os::unix::fs::{FileTypeExt, MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

/// A character device node (1,3: what /dev/null is), a FIFO and a link to the node.
struct Nodes {
    dir: PathBuf,
    dev: PathBuf,
    fifo: PathBuf,
    link: PathBuf,
}

fn nodes(test: &str) -> Nodes {
    let dir = scratch(test);
    let (dev, fifo, link) = (dir.join("null"), dir.join("fifo"), dir.join("lnull"));
    let c = |p: &Path| std::ffi::CString::new(p.as_os_str().as_encoded_bytes()).unwrap();
    // SAFETY: plain system calls on NUL-terminated paths in this test's scratch directory.
    unsafe {
        assert_eq!(
            libc::mknod(c(&dev).as_ptr(), libc::S_IFCHR | 0o666, libc::makedev(1, 3)),
            0,
            "mknod {} (the tests run as root): {}",
            dev.display(),
            std::io::Error::last_os_error()
        );
        assert_eq!(libc::mkfifo(c(&fifo).as_ptr(), 0o666), 0, "mkfifo");
    }
    std::os::unix::fs::symlink("null", &link).unwrap();
    Nodes {
        dir,
        dev,
        fifo,
        link,
    }
}

impl Nodes {
    /// Each node is still what it was.
    fn check(&self, what: &str) {
        let m = std::fs::symlink_metadata(&self.dev).unwrap();
        assert!(
            m.file_type().is_char_device() && m.rdev() == libc::makedev(1, 3),
            "{what}: {} is no longer the character device node: {:?}, {} bytes",
            self.dev.display(),
            m.file_type(),
            m.len()
        );
        let m = std::fs::symlink_metadata(&self.fifo).unwrap();
        assert!(
            m.file_type().is_fifo(),
            "{what}: {} is no longer a FIFO: {:?}, {} bytes",
            self.fifo.display(),
            m.file_type(),
            m.len()
        );
        let m = std::fs::symlink_metadata(&self.link).unwrap();
        assert!(
            m.file_type().is_symlink()
                && std::fs::read_link(&self.link).unwrap() == Path::new("null"),
            "{what}: {} is no longer the link to the node: {:?}",
            self.link.display(),
            m.file_type()
        );
        let left: Vec<String> = std::fs::read_dir(&self.dir)
            .unwrap()
            .flatten()
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .filter(|n| n.contains("part") || n.contains("tmp") || n.contains("fetch"))
            .collect();
        assert!(left.is_empty(), "{what}: temporaries left: {left:?}");
    }

    /// Runs `writer` on the device node, the link to it, and the FIFO while a reader drains
    /// it; each must succeed, leave the nodes as they were and say `note` on stderr (when
    /// not empty). Returns the FIFO's bytes.
    fn each(&self, what: &str, note: &str, writer: impl Fn(&Path) -> Output) -> Vec<u8> {
        let done = |o: &Output, name: &str| {
            assert!(o.status.success(), "{what} on the {name}: {}", stderr(o));
            self.check(&format!("{what} on the {name}"));
            assert!(
                stderr(o).contains(note),
                "{what} on the {name}: {}",
                stderr(o)
            );
        };
        for (p, name) in [(&self.dev, "device"), (&self.link, "link to the device")] {
            done(&writer(p), name);
        }
        let r = FifoReader::open(&self.fifo);
        let o = writer(&self.fifo);
        let got = r.finish();
        done(&o, "FIFO");
        assert!(!got.is_empty(), "{what}: the FIFO's reader got nothing");
        got
    }
}

/// Reads a FIFO while it is written. It is held open for reading and writing, so a writer
/// never waits for it and a writer that replaced the node instead never hangs the test.
struct FifoReader {
    done: Arc<AtomicBool>,
    thread: std::thread::JoinHandle<Vec<u8>>,
}

impl FifoReader {
    fn open(path: &Path) -> FifoReader {
        let mut f = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .custom_flags(libc::O_NONBLOCK)
            .open(path)
            .unwrap();
        let done = Arc::new(AtomicBool::new(false));
        let d = done.clone();
        let thread = std::thread::spawn(move || {
            let mut got = Vec::new();
            let mut buf = vec![0u8; 1 << 16];
            loop {
                // Once the writer has exited, what it wrote is in the pipe: drain, then stop.
                let last = d.load(Ordering::SeqCst);
                loop {
                    match f.read(&mut buf) {
                        Ok(n) if n > 0 => got.extend_from_slice(&buf[..n]),
                        Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => break,
                        r => panic!("reading the FIFO: {r:?}"),
                    }
                }
                if last {
                    return got;
                }
                std::thread::sleep(std::time::Duration::from_millis(2));
            }
        });
        FifoReader { done, thread }
    }

    fn finish(self) -> Vec<u8> {
        self.done.store(true, Ordering::SeqCst);
        self.thread.join().unwrap()
    }
}

/// A complete record file: decodes cleanly, to its trailer.
fn assert_recording(what: &str, b: &[u8]) {
    let d = decode_all(b);
    assert!(
        d.trailer.is_some() && d.losses.is_clean(),
        "{what}: {} bytes that are not a complete recording: {:?}",
        b.len(),
        d.damage
    );
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

#[test]
fn both_agents_write_record_and_status_files_through_devices_and_fifos() {
    let n = nodes("writers-agents");
    for (agent, name) in [(bin("labperf-agent"), "Rust"), (c_agent(), "C")] {
        let got = n.each(&format!("{name} agent record -o"), "", |p| {
            Command::new(&agent)
                .args(["record", "-e", "cpu-clock", "-o"])
                .arg(p)
                .args(["--", "/bin/true"])
                .output()
                .unwrap()
        });
        assert_recording(name, &got);
        let file = n.dir.join(format!("{name}.lpr"));
        let got = n.each(&format!("{name} agent --status-file"), "", |p| {
            Command::new(&agent)
                .args(["record", "-e", "cpu-clock", "-o"])
                .arg(&file)
                .arg("--status-file")
                .arg(p)
                .args(["--", "/bin/true"])
                .output()
                .unwrap()
        });
        assert_eq!(String::from_utf8_lossy(&got), "ok 0\n", "{name}");
        std::fs::remove_file(&file).unwrap();
        // A link to a regular file stays a link; the file it names gets the recording (and
        // a status file's link, the status).
        let (real, status) = (n.dir.join("real.lpr"), n.dir.join("status.txt"));
        std::fs::write(&real, "old").unwrap();
        std::fs::write(&status, "old").unwrap();
        let (link, slink) = (n.dir.join("to-real"), n.dir.join("to-status"));
        std::os::unix::fs::symlink("real.lpr", &link).unwrap();
        std::os::unix::fs::symlink("status.txt", &slink).unwrap();
        let o = Command::new(&agent)
            .args(["record", "-e", "cpu-clock", "-o"])
            .arg(&link)
            .arg("--status-file")
            .arg(&slink)
            .args(["--", "/bin/true"])
            .output()
            .unwrap();
        assert!(o.status.success(), "{name}: {}", stderr(&o));
        for l in [&link, &slink] {
            let m = std::fs::symlink_metadata(l).unwrap();
            assert!(m.file_type().is_symlink(), "{name}: {}", l.display());
        }
        assert_recording(name, &std::fs::read(&real).unwrap());
        assert_eq!(
            std::fs::read_to_string(&status).unwrap(),
            "ok 0\n",
            "{name}"
        );
        for f in [&real, &status, &link, &slink] {
            std::fs::remove_file(f).unwrap();
        }
        // A directory and standard output are refused, with the reason.
        for (out, why) in [
            (n.dir.as_path(), "directory"),
            (Path::new("-"), "standard output"),
        ] {
            let o = Command::new(&agent)
                .args(["record", "-e", "cpu-clock", "-o"])
                .arg(out)
                .args(["--", "/bin/true"])
                .output()
                .unwrap();
            assert_eq!(o.status.code(), Some(125), "{name}: {}", stderr(&o));
            assert!(stderr(&o).contains(why), "{name}: {}", stderr(&o));
        }
    }
    n.check("the agents");
}

#[test]
fn record_and_stat_local_write_through_devices_and_fifos_without_reading_them_back() {
    let n = nodes("writers-record-local");
    let note = "is not a regular file: no report";
    let got = n.each("labperf record --local -o", note, |p| {
        Command::new(bin("labperf"))
            .env("LABPERF_AGENT", bin("labperf-agent"))
            .args(["record", "-e", "cpu-clock", "-o"])
            .arg(p)
            .args(["--", "/bin/true"])
            .output()
            .unwrap()
    });
    assert_recording("record --local", &got);
    let got = n.each("labperf stat -o", "", |p| {
        Command::new(bin("labperf"))
            .env("LABPERF_AGENT", bin("labperf-agent"))
            .args(["stat", "-e", "cpu-clock", "-o"])
            .arg(p)
            .args(["--", "/bin/true"])
            .output()
            .unwrap()
    });
    assert_recording("stat", &got);
}

#[test]
fn record_host_fetches_through_devices_and_fifos() {
    let s = Sshd::start("writers-record-host");
    let n = nodes("writers-record-host-nodes");
    let kh = s.dir.join("known_hosts");
    let note = "is not a regular file: no report";
    let got = n.each("labperf record --host -o", note, |p| {
        labperf_in(&s.dir)
            .args(["record", "--host", &s.spec(), "--known-hosts"])
            .arg(&kh)
            .arg("--accept-new-host-key")
            .arg("--identity")
            .arg(s.dir.join("client_key"))
            .arg("--remote-dir")
            .arg(s.dir.join("remote"))
            .args(["-e", "cpu-clock", "-o"])
            .arg(p)
            .args(["--", "/bin/true"])
            .output()
            .unwrap()
    });
    assert_recording("record --host", &got);
}

/// `labperf ARGS`, asserting success.
fn labperf(args: &[&std::ffi::OsStr]) -> Output {
    let o = Command::new(bin("labperf")).args(args).output().unwrap();
    assert!(o.status.success(), "{args:?}: {}", stderr(&o));
    o
}

#[test]
fn report_and_export_write_through_devices_fifos_and_standard_output() {
    let n = nodes("writers-report-export");
    let rec = root().join("tests/data/x86_64-bench-v1/record.lpr");
    for format in ["table", "csv", "json", "html"] {
        let args = |out: &Path| -> Vec<std::ffi::OsString> {
            vec![
                "report".into(),
                rec.clone().into(),
                "--format".into(),
                format.into(),
                "-o".into(),
                out.into(),
            ]
        };
        let via_stdout = labperf(
            &args(Path::new("-"))
                .iter()
                .map(|a| a.as_os_str())
                .collect::<Vec<_>>(),
        )
        .stdout;
        assert!(!via_stdout.is_empty(), "report --format {format} -o -");
        let got = n.each(&format!("report --format {format} -o"), "", |p| {
            Command::new(bin("labperf")).args(args(p)).output().unwrap()
        });
        assert_eq!(
            String::from_utf8_lossy(&got),
            String::from_utf8_lossy(&via_stdout),
            "report --format {format}"
        );
    }
    for format in ["folded", "svg", "firefox", "pprof"] {
        let args = |out: &Path| -> Vec<std::ffi::OsString> {
            vec![
                "export".into(),
                rec.clone().into(),
                "--format".into(),
                format.into(),
                "-o".into(),
                out.into(),
            ]
        };
        let via_stdout = labperf(
            &args(Path::new("-"))
                .iter()
                .map(|a| a.as_os_str())
                .collect::<Vec<_>>(),
        )
        .stdout;
        assert!(!via_stdout.is_empty(), "export --format {format} -o -");
        let got = n.each(&format!("export --format {format} -o"), "", |p| {
            Command::new(bin("labperf")).args(args(p)).output().unwrap()
        });
        assert_eq!(got, via_stdout, "export --format {format}");
    }
    let parquet = |p: &Path| {
        Command::new(bin("labperf"))
            .arg("export")
            .arg(&rec)
            .args(["--format", "parquet", "-o"])
            .arg(p)
            .output()
            .unwrap()
    };
    // A device (`/dev/null`) is refused: its stacks table would be a new file in /dev
    // (issue 47). A FIFO gets the samples, the stacks table beside it.
    for p in [&n.dev, &n.link] {
        let o = parquet(p);
        assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
        assert!(
            stderr(&o).contains("Parquet is two files"),
            "{}",
            stderr(&o)
        );
    }
    let r = FifoReader::open(&n.fifo);
    let o = parquet(&n.fifo);
    let got = r.finish();
    assert!(o.status.success(), "{}", stderr(&o));
    assert_eq!(&got[..4], b"PAR1", "a Parquet file through the FIFO");
    std::fs::remove_file(n.dir.join("fifo.stacks.parquet")).unwrap();
    n.check("export --format parquet");
}

#[test]
fn import_writes_through_devices_fifos_and_standard_output() {
    let n = nodes("writers-import");
    let data = n.dir.join("perf.data");
    let st = Command::new("perf")
        .args(["record", "-q", "-e", "cpu-clock", "-c", "100000", "-o"])
        .arg(&data)
        .arg("--")
        .arg(bin("labperf-bench"))
        .args(["--duration", "0.2"])
        .status()
        .expect("perf (cargo xtask setup installs linux-perf)");
    assert!(st.success());
    let got = n.each("import -o", "", |p| {
        Command::new(bin("labperf"))
            .arg("import")
            .arg(&data)
            .arg("-o")
            .arg(p)
            .output()
            .unwrap()
    });
    assert_recording("import", &got);
    let o = labperf(&[
        "import".as_ref(),
        data.as_os_str(),
        "-o".as_ref(),
        "-".as_ref(),
    ]);
    assert_eq!(o.stdout, got, "import -o - and through the FIFO");
    std::fs::remove_file(&data).unwrap();
    let _ = std::fs::remove_file(n.dir.join("perf.data.old"));
    n.check("import");
}

#[test]
fn a_directory_or_a_socket_is_refused_with_the_reason_and_a_link_to_a_file_stays() {
    let d = scratch("writers-refused");
    let rec = root().join("tests/data/x86_64-bench-v1/record.lpr");
    let sock = d.join("sock");
    let _listener = std::os::unix::net::UnixListener::bind(&sock).unwrap();
    std::os::unix::fs::symlink("sock", d.join("to-sock")).unwrap();
    // A link to nothing: a planted link would make a file where it points.
    std::os::unix::fs::symlink("nothing", d.join("dangling")).unwrap();
    for (out, why) in [
        (d.clone(), "it is a directory"),
        (sock.clone(), "it is a socket"),
        (d.join("to-sock"), "it is a socket"),
        (d.join("dangling"), "a symbolic link to nothing"),
    ] {
        for verb in [
            vec!["report".into(), rec.clone().into_os_string()],
            vec![
                "export".into(),
                rec.clone().into_os_string(),
                "--format".into(),
                "folded".into(),
            ],
            vec!["import".into(), rec.clone().into_os_string()],
            vec![
                "record".into(),
                "-e".into(),
                "cpu-clock".into(),
                "--no-report".into(),
            ],
        ] {
            let mut c = Command::new(bin("labperf"));
            c.args(&verb).arg("-o").arg(&out);
            if verb[0] == "record" {
                c.env("LABPERF_AGENT", bin("labperf-agent"))
                    .args(["--", "/bin/true"]);
            }
            let o = c.output().unwrap();
            assert_eq!(o.status.code(), Some(1), "{verb:?} -o {}", out.display());
            assert!(
                stderr(&o).contains(why),
                "{verb:?} -o {}: {}",
                out.display(),
                stderr(&o)
            );
        }
    }
    assert!(std::fs::symlink_metadata(&sock)
        .unwrap()
        .file_type()
        .is_socket());
    assert!(!d.join("nothing").exists());
    // Both agents refuse the same, themselves.
    for agent in [bin("labperf-agent"), c_agent()] {
        for (out, why) in [
            (d.join("to-sock"), "socket"),
            (d.join("dangling"), "a symbolic link to nothing"),
        ] {
            let o = Command::new(&agent)
                .args(["record", "-e", "cpu-clock", "-o"])
                .arg(&out)
                .args(["--", "/bin/true"])
                .output()
                .unwrap();
            assert_eq!(o.status.code(), Some(125), "{}", stderr(&o));
            assert!(stderr(&o).contains(why), "{}", stderr(&o));
        }
    }
    assert!(!d.join("nothing").exists());
    // A link to a regular file: the link stays, the file it names is replaced.
    let real = d.join("real.txt");
    std::fs::write(&real, "old").unwrap();
    std::os::unix::fs::symlink("real.txt", d.join("to-real")).unwrap();
    labperf(&[
        "report".as_ref(),
        rec.as_os_str(),
        "-o".as_ref(),
        d.join("to-real").as_os_str(),
    ]);
    assert!(std::fs::symlink_metadata(d.join("to-real"))
        .unwrap()
        .file_type()
        .is_symlink());
    let shown = labperf(&["report".as_ref(), rec.as_os_str()]).stdout;
    assert_eq!(std::fs::read(&real).unwrap(), shown);
    // `record -o -` is refused: the workload's output goes to standard output.
    let o = Command::new(bin("labperf"))
        .env("LABPERF_AGENT", bin("labperf-agent"))
        .args(["record", "-o", "-", "--", "/bin/true"])
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(1));
    assert!(stderr(&o).contains("standard output"), "{}", stderr(&o));
}
