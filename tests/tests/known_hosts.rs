//! known_hosts against the oracle: for each of many known_hosts files, the real OpenSSH
//! client (`ssh -o StrictHostKeyChecking=yes|accept-new`) and labperf connect to the same
//! test sshd (three host key types), and must make the same accept/refuse decision.

use labperf_tests::scratch;
use labperf_tests::sshd::*;
use std::path::{Path, PathBuf};
use std::process::Command;

/// What OpenSSH decides: connects (true) or refuses (false); and the file afterwards.
fn openssh(s: &Sshd, kh: &Path, mode: &str, home: &Path) -> (bool, String) {
    let o = Command::new("ssh")
        .env("HOME", home)
        .args(["-F", "/dev/null", "-o", "BatchMode=yes", "-o"])
        .arg(format!("StrictHostKeyChecking={mode}"))
        .arg("-o")
        .arg(format!("UserKnownHostsFile={}", kh.display()))
        .args([
            "-o",
            "GlobalKnownHostsFile=/dev/null",
            "-o",
            "UpdateHostKeys=no",
            "-o",
            "CheckHostIP=no",
            "-o",
            "HashKnownHosts=no",
            "-i",
        ])
        .arg(s.dir.join("client_key"))
        .args(["-p", &s.port.to_string(), "root@127.0.0.1", "true"])
        .output()
        .expect("ssh (openssh-client)");
    (
        o.status.success(),
        String::from_utf8_lossy(&o.stderr).into_owned(),
    )
}

/// What labperf decides, with `deploy` (connect, check, log in, put the agent there).
fn labperf(s: &Sshd, kh: &Path, accept_new: bool) -> (bool, String) {
    let mut c = labperf_in(&s.dir);
    c.args(["deploy", &s.spec(), "--known-hosts"])
        .arg(kh)
        .arg("--identity")
        .arg(s.dir.join("client_key"))
        .arg("--remote-dir")
        .arg(s.dir.join("remote"));
    if accept_new {
        c.arg("--accept-new-host-key");
    }
    let o = c.output().unwrap();
    (
        o.status.success(),
        String::from_utf8_lossy(&o.stderr).into_owned(),
    )
}

fn hash_names(file: &Path) {
    let st = Command::new("ssh-keygen")
        .arg("-H")
        .arg("-f")
        .arg(file)
        .output()
        .unwrap();
    assert!(
        st.status.success(),
        "{}",
        String::from_utf8_lossy(&st.stderr)
    );
}

#[test]
fn labperf_decides_as_openssh_on_every_known_hosts_file() {
    let s = Sshd::start_with_key_types("kh-oracle");
    let d = scratch("kh-oracle-files");
    let home = d.join("home");
    std::fs::create_dir_all(&home).unwrap();
    // Keys that are not the server's.
    keygen_type(&d.join("wrong_ed"), "ed25519");
    keygen_type(&d.join("wrong_rsa"), "rsa");
    let pubkey = |p: PathBuf| {
        std::fs::read_to_string(p)
            .unwrap()
            .split_whitespace()
            .take(2)
            .collect::<Vec<_>>()
            .join(" ")
    };
    let (wrong_ed, wrong_rsa) = (
        pubkey(d.join("wrong_ed.pub")),
        pubkey(d.join("wrong_rsa.pub")),
    );
    let (ed, rsa, ecdsa) = (
        s.host_key("host_key"),
        s.host_key("host_rsa"),
        s.host_key("host_ecdsa"),
    );
    let h = format!("[127.0.0.1]:{}", s.port);
    let long = format!("{h} ssh-rsa {}", "QUFB".repeat(1500));
    // (name, file contents, hash the names with ssh-keygen -H)
    let cases: Vec<(&str, String, bool)> = vec![
        ("empty", String::new(), false),
        ("the right ed25519 key", format!("{h} {ed}\n"), false),
        ("a wrong ed25519 key", format!("{h} {wrong_ed}\n"), false),
        ("known only by its RSA key", format!("{h} {rsa}\n"), false),
        (
            "known only by its ECDSA key",
            format!("{h} {ecdsa}\n"),
            false,
        ),
        (
            "known only by a wrong RSA key",
            format!("{h} {wrong_rsa}\n"),
            false,
        ),
        (
            "right RSA, wrong ed25519",
            format!("{h} {rsa}\n{h} {wrong_ed}\n"),
            false,
        ),
        (
            "a >4 KB line, then a wrong key",
            format!("{long}\n{h} {wrong_ed}\n"),
            false,
        ),
        (
            "a >4 KB line, then the right key",
            format!("{long}\n{h} {ed}\n"),
            false,
        ),
        (
            "a bare @cert-authority, then a wrong key",
            format!("@cert-authority\n{h} {wrong_ed}\n"),
            false,
        ),
        (
            "a host with no key, then a wrong key",
            format!("{h}\n{h} {wrong_ed}\n"),
            false,
        ),
        (
            "a cut RSA key, then a wrong key",
            format!("{h} ssh-rsa AAAA\n{h} {wrong_ed}\n"),
            false,
        ),
        (
            "the key @revoked, and listed",
            format!("@revoked * {ed}\n{h} {ed}\n"),
            false,
        ),
        (
            "a @cert-authority line with the host's key",
            format!("@cert-authority {h} {ed}\n"),
            false,
        ),
        (
            "a port-22 entry with a wrong key",
            format!("127.0.0.1 {wrong_ed}\n"),
            false,
        ),
        (
            "a port-22 entry with the right key",
            format!("127.0.0.1 {ed}\n"),
            false,
        ),
        (
            "a port-22 entry with the right RSA key",
            format!("127.0.0.1 {rsa}\n"),
            false,
        ),
        (
            "a wrong key for the port, the right one for port 22",
            format!("{h} {wrong_ed}\n127.0.0.1 {ed}\n"),
            false,
        ),
        (
            "CRLF line ends",
            format!("# comment\r\n{h} {ed}\r\n"),
            false,
        ),
        (
            "CRLF line ends, wrong key",
            format!("{h} {wrong_ed}\r\n"),
            false,
        ),
        (
            "a wildcard pattern",
            format!("[127.0.0.*]:{} {ed}\n", s.port),
            false,
        ),
        (
            "a wildcard pattern, wrong key",
            format!("[127.0.0.?]:{} {wrong_ed}\n", s.port),
            false,
        ),
        (
            "a negated pattern",
            format!("[127.0.0.*]:{},!{h} {wrong_ed}\n", s.port),
            false,
        ),
        ("hashed, right key", format!("{h} {ed}\n"), true),
        ("hashed, wrong key", format!("{h} {wrong_ed}\n"), true),
        (
            "tabs and spaces between fields",
            format!("{h}\t {ed}\n"),
            false,
        ),
        (
            "no final newline, another host",
            format!("[other]:22 {wrong_ed}"),
            false,
        ),
    ];
    assert!(cases.len() >= 15);
    let mut report = Vec::new();
    for (name, text, hashed) in &cases {
        for mode in ["yes", "accept-new"] {
            let (a, b) = (d.join("ssh_kh"), d.join("labperf_kh"));
            std::fs::write(&a, text).unwrap();
            if *hashed {
                hash_names(&a);
            }
            std::fs::copy(&a, &b).unwrap();
            let orig = std::fs::read(&a).unwrap();
            let (ssh_ok, ssh_err) = openssh(&s, &a, mode, &home);
            let (lp_ok, lp_err) = labperf(&s, &b, mode == "accept-new");
            let same = ssh_ok == lp_ok;
            report.push(format!(
                "{} {name} ({mode}): OpenSSH {}, labperf {}",
                if same { "  " } else { "!!" },
                if ssh_ok { "connects" } else { "refuses" },
                if lp_ok { "connects" } else { "refuses" }
            ));
            if !same {
                report.push(format!(
                    "   ssh: {}\n   labperf: {}",
                    ssh_err.trim(),
                    lp_err.trim()
                ));
            }
            // What accept-new wrote, OpenSSH reads: the host is known to it afterwards.
            if lp_ok && mode == "accept-new" {
                let (again, err) = openssh(&s, &b, "yes", &home);
                assert!(
                    again,
                    "{name}: OpenSSH does not accept the file labperf wrote: {err}\n{}",
                    std::fs::read_to_string(&b).unwrap()
                );
            }
            // A refusal never writes.
            if !lp_ok {
                assert_eq!(std::fs::read(&b).unwrap(), orig, "{name}");
            }
        }
    }
    let text = report.join("\n");
    eprintln!("{text}");
    assert!(
        !text.contains("!!"),
        "labperf and OpenSSH disagree:\n{text}"
    );
    // The cases cover both decisions in both modes.
    assert!(text.contains("labperf connects") && text.contains("labperf refuses"));
}
