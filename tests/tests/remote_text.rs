//! What lab machines answer never drives the terminal: two test sshd whose ForceCommand
//! answers labperf's probe, `hosts check` and the agent's `strobe-probe` with every class of
//! terminal control (CSI, OSC with a window title and an OSC 52 clipboard write, C0
//! controls, DEL, C1 controls as UTF-8 and as raw bytes), and every verb that prints remote
//! text is checked: `probe` of one host (in detail) and of the hosts file (table, CSV,
//! JSON), `hosts check`, and `record --host` (workload output, the agent's lines, its
//! status message).

use labperf_tests::sshd::{labperf_in, Sshd};
use std::path::Path;
use std::process::Output;

/// Every class, as printf(1) octal escapes: CSI clear screen and cursor home, OSC 0 window
/// title, OSC 52 clipboard write, SOH and backspace, DEL, C1 CSI and OSC in UTF-8, a raw
/// C1 CSI byte.
const HOSTILE: &str = r"\033[2J\033[1;1H\033]0;pwned\007\033]52;c;cm0gLXJmIH4=\007\001\010\177\302\23331m\302\235x\233";

/// A lab machine whose probe, `hosts check` and `strobe-probe` answers carry [`HOSTILE`]
/// (in the architecture too when `arch_too`: then no agent fits it); every other command
/// runs as asked.
fn wrapper(arch_too: bool) -> String {
    let arch = if arch_too { "\"x86_64$E\"" } else { "x86_64" };
    format!(
        r#"#!/bin/sh
E=$(printf '{HOSTILE}')
case "$SSH_ORIGINAL_COMMAND" in
  *'echo "arch $(uname -m)"'*)
    echo arch {arch}
    echo "kernel 6.1$E"
    echo "paranoid 2$E"
    echo "cpu Evil CPU$E"
    echo "pmu cpu$E 4$E"
    echo "events cpu$E slots$E"
    echo "format cpu$E event strobe_period"
    echo "pmu software 1" ;;
  *' strobe-probe'*)
    echo "strobing: kernel$E"
    echo "  and a second line$E" ;;
  *'perf_event_paranoid 2>/dev/null || echo none'*)
    echo "x86_64$E"
    echo "2$E"
    echo 0
    echo "cpu$E armv8$E"
    echo "/dev/x$E 1 1 99999999 1% /" ;;
  *) exec /bin/sh -c "$SSH_ORIGINAL_COMMAND" ;;
esac
"#
    )
}

/// Control characters a terminal would obey, in `b` (which must be UTF-8: a raw byte
/// would be one): everything `char::is_control` says but newline and tab, and DEL.
fn raw_controls(b: &[u8]) -> Result<(), String> {
    let s = std::str::from_utf8(b).map_err(|e| format!("not UTF-8 (a raw byte?): {e}"))?;
    let bad: Vec<String> = s
        .chars()
        .filter(|&c| c.is_control() && c != '\n' && c != '\t')
        .map(|c| format!("U+{:04X}", c as u32))
        .collect();
    if bad.is_empty() {
        Ok(())
    } else {
        Err(format!("raw {bad:?}"))
    }
}

fn check(what: &str, o: &Output) {
    for (name, stream) in [("stdout", &o.stdout), ("stderr", &o.stderr)] {
        if let Err(e) = raw_controls(stream) {
            panic!(
                "{what}: {name} has {e}:\n{}",
                String::from_utf8_lossy(stream).escape_debug()
            );
        }
    }
}

fn text(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned() + &String::from_utf8_lossy(&o.stderr)
}

struct Lab {
    _a: Sshd,
    _b: Sshd,
    dir: std::path::PathBuf,
    hosts: std::path::PathBuf,
}

/// lab-a (hostile architecture too) and lab-b, each a test sshd with its [`wrapper`].
fn lab() -> Lab {
    let start = |name: &str, arch_too: bool| {
        let dir = Sshd::keys(name);
        Sshd::start_forcing(dir, "hostile.sh", &wrapper(arch_too))
    };
    let (a, b) = (start("remote-text-a", true), start("remote-text-b", false));
    let dir = labperf_tests::scratch("remote-text");
    let mut known = String::new();
    let mut hosts = String::new();
    for (n, s) in [("lab-a", &a), ("lab-b", &b)] {
        known.push_str(&format!(
            "[127.0.0.1]:{} {}\n",
            s.port,
            s.host_key("host_key")
        ));
        hosts.push_str(&format!(
            "[hosts.{n}]\naddress = \"root@127.0.0.1:{}\"\nidentity = \"{}\"\nknown_hosts = \"{}\"\nremote_dir = \"{}\"\n",
            s.port,
            s.dir.join("client_key").display(),
            dir.join("known_hosts").display(),
            dir.join(format!("remote-{n}")).display()
        ));
    }
    std::fs::write(dir.join("known_hosts"), known).unwrap();
    let file = dir.join("hosts.toml");
    std::fs::write(&file, hosts).unwrap();
    Lab {
        _a: a,
        _b: b,
        dir,
        hosts: file,
    }
}

impl Lab {
    /// `labperf VERB… --hosts-file H ARGS…`.
    fn labperf(&self, verb: &[&str], args: &[&str]) -> Output {
        labperf_in(&self.dir)
            .args(verb)
            .arg("--hosts-file")
            .arg(&self.hosts)
            .args(args)
            .output()
            .unwrap()
    }
}

#[test]
fn probe_hosts_check_and_record_host_escape_every_control_a_lab_machine_sends() {
    let lab = lab();
    // One host in detail: the hostile architecture (no agent for it), and the hostile
    // kernel, CPU, PMU names and the agent's strobe lines.
    let o = lab.labperf(&["probe"], &["lab-a"]);
    check("probe lab-a", &o);
    assert!(o.status.success(), "{}", text(&o));
    let t = text(&o);
    assert!(
        t.contains(r"architecture: x86_64\x1b[2J\x1b[1;1H\x1b]0;pwned\x07\x1b]52;c;"),
        "{t}"
    );
    assert!(t.contains("strobing: not checked (labperf has no"), "{t}");
    let o = lab.labperf(&["probe"], &["lab-b"]);
    check("probe lab-b", &o);
    assert!(o.status.success(), "{}", text(&o));
    let t = text(&o);
    for shown in [
        r"kernel: 6.1\x1b[2J",
        r"cpu: Evil CPU\x1b[2J",
        r"cpu\x1b[2J\x1b[1;1H\x1b]0;pwned\x07",
        r"strobe_period driver term: yes, on cpu\x1b[2J",
        r"strobing: kernel\x1b[2J",
        r"and a second line\x1b",
        r"\x01\x08\x7f\x9b31m\x9dx",
    ] {
        assert!(t.contains(shown), "{shown} not in:\n{t}");
    }
    // Every host of the hosts file, as one table in each format.
    for format in ["table", "csv", "json"] {
        let o = lab.labperf(&["probe"], &["--format", format]);
        check(&format!("probe --format {format}"), &o);
        assert!(o.status.success(), "{}", text(&o));
        assert!(text(&o).contains("lab-b"), "{}", text(&o));
    }
    for format in ["table", "csv", "json"] {
        let o = lab.labperf(&["hosts", "check"], &["--format", format]);
        check(&format!("hosts check --format {format}"), &o);
        // JSON doubles the backslash of the shown escape.
        let shown = if format == "json" {
            r"x86_64\\x1b[2J"
        } else {
            r"x86_64\x1b[2J"
        };
        assert!(text(&o).contains(shown), "{}", text(&o));
    }
    // record --host on both: each host's workload lines (stdout and stderr), the agent's
    // lines, the summary; then a workload whose name is hostile, in the agent's error and
    // its status file.
    let o = lab.labperf(
        &["record"],
        &[
            "--host",
            "lab-a,lab-b",
            "--accept-new-host-key",
            "-e",
            "cpu-clock",
            "--no-report",
            "-o",
            lab.dir.join("run.lpr").to_str().unwrap(),
            "--",
            "/bin/sh",
            "-c",
            &format!("printf '{HOSTILE}\\n'; printf '{HOSTILE}\\n' >&2"),
        ],
    );
    check("record --host lab-a,lab-b", &o);
    assert!(o.status.success(), "{}", text(&o));
    let t = text(&o);
    assert!(t.contains(r"[lab-a] \x1b[2J\x1b[1;1H"), "{t}");
    let hostile_name = "/nonexistent/\u{1b}]0;pwned\u{7}\u{9b}31m";
    let o = lab.labperf(
        &["record"],
        &[
            "--host",
            "lab-b",
            "-e",
            "cpu-clock",
            "-o",
            lab.dir.join("none.lpr").to_str().unwrap(),
            "--",
            hostile_name,
        ],
    );
    check("record --host lab-b of a hostile command name", &o);
    assert_eq!(o.status.code(), Some(1), "{}", text(&o));
    assert!(text(&o).contains("/nonexistent/"), "{}", text(&o));
    assert!(!Path::new(&lab.dir.join("none.lpr")).exists());
}
