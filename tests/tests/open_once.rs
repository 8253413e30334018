//! A command opens its recording once: the header's peek and every view's pass read one mapping (issue 48), counted by the kernel's inotify IN_OPEN events on the file.

use labperf_tests::{bin, root, scratch};
use std::path::Path;
use std::process::Command;

/// The opens of `file` while `run` runs, as inotify counts them (IN_OPEN: any process).
/// inotify folds an event into an identical one still unread at its queue's tail: the
/// closes are watched too, so that two opens one after the other are two events.
fn opens_of(file: &Path, run: impl FnOnce()) -> usize {
    use std::os::unix::ffi::OsStrExt;
    // SAFETY: plain syscalls on a descriptor this function owns and closes.
    unsafe {
        let fd = libc::inotify_init1(libc::IN_NONBLOCK | libc::IN_CLOEXEC);
        assert!(
            fd >= 0,
            "inotify_init1: {}",
            std::io::Error::last_os_error()
        );
        let c = std::ffi::CString::new(file.as_os_str().as_bytes()).unwrap();
        let wd = libc::inotify_add_watch(fd, c.as_ptr(), libc::IN_OPEN | libc::IN_CLOSE);
        assert!(
            wd >= 0,
            "inotify_add_watch: {}",
            std::io::Error::last_os_error()
        );
        run();
        let mut opens = 0;
        let mut buf = [0u8; 4096];
        loop {
            let n = libc::read(fd, buf.as_mut_ptr().cast(), buf.len());
            if n <= 0 {
                break;
            }
            let mut at = 0usize;
            while at + 16 <= n as usize {
                let mask = u32::from_ne_bytes(buf[at + 4..at + 8].try_into().unwrap());
                let len = u32::from_ne_bytes(buf[at + 12..at + 16].try_into().unwrap());
                assert_eq!(mask & libc::IN_Q_OVERFLOW, 0, "inotify's queue overflowed");
                if mask & libc::IN_OPEN != 0 {
                    opens += 1;
                }
                at += 16 + len as usize;
            }
        }
        libc::close(fd);
        opens
    }
}

fn labperf(args: &[&str], file: &Path) {
    let o = Command::new(bin("labperf"))
        .args(args)
        .arg(file)
        .env("LC_ALL", "C")
        .output()
        .unwrap();
    assert!(
        o.status.success(),
        "labperf {args:?}: {}",
        String::from_utf8_lossy(&o.stderr)
    );
}

#[test]
fn a_report_of_a_recording_with_call_stacks_opens_it_once() {
    let d = scratch("open-once");
    let f = d.join("g.lpr");
    let o = Command::new(bin("labperf"))
        .args(["record", "--no-report", "-g", "-o"])
        .arg(&f)
        .arg("--")
        .arg(bin("labperf-bench"))
        .args(["--duration", "0.3"])
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let out = d.join("out");
    let out = out.to_str().unwrap();
    for args in [
        &["report", "--children"][..],
        &["report", "--format", "html", "-o", out],
        &["report", "--by", "dso"],
        &["export", "--format", "svg", "-o", out],
        &["export", "--format", "folded", "-o", out],
    ] {
        let n = opens_of(&f, || labperf(args, &f));
        assert_eq!(n, 1, "labperf {args:?} FILE opened FILE {n} times");
    }
    // Two files given: each opened once.
    let g = d.join("g2.lpr");
    std::fs::copy(&f, &g).unwrap();
    let n = opens_of(&g, || {
        let o = Command::new(bin("labperf"))
            .args(["report", "--children"])
            .arg(&f)
            .arg(&g)
            .output()
            .unwrap();
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    });
    assert_eq!(n, 1, "report A B opened B {n} times");
}

#[test]
fn a_report_of_perf_s_perf_data_opens_it_once() {
    let d = scratch("open-once-perf");
    let f = d.join("perf.data");
    std::fs::copy(root().join("tests/data/perf/singleprocess-3.4.data"), &f).unwrap();
    for args in [
        &["report", "--children", "-q"][..],
        &["report", "-q", "--by", "dso"],
    ] {
        let n = opens_of(&f, || labperf(args, &f));
        assert_eq!(n, 1, "labperf {args:?} perf.data opened it {n} times");
    }
}
