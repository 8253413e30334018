//! `labperf record --host` against real OpenSSH sshd instances on 127.0.0.1, started here:
//! the full flow, host keys, authentication, exact arguments, and remote failures.

use labperf_common::decode_all;
use labperf_tests::bin;
use labperf_tests::sshd::*;
use std::path::Path;
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

/// `labperf record --host` with this test's known_hosts, key and remote directory, and
/// a HOME without keys so nothing of the machine's own ssh set-up is used.
fn record(s: &Sshd, kh: &Path, extra: &[&str], command: &[&str]) -> Output {
    record_cmd(s, kh, &s.dir.join("remote"))
        .args(extra)
        .arg("--")
        .args(command)
        .output()
        .unwrap()
}

/// `labperf record --host <s>` with this test's known_hosts, key and remote directory.
fn record_cmd(s: &Sshd, kh: &Path, remote_dir: &Path) -> Command {
    let mut c = labperf_in(&s.dir);
    c.args(["record", "--host", &s.spec(), "--known-hosts"])
        .arg(kh)
        .arg("--identity")
        .arg(s.dir.join("client_key"))
        .arg("--remote-dir")
        .arg(remote_dir);
    c
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

#[test]
fn record_host_full_flow_reports_the_bench() {
    let s = Sshd::start("ssh-flow");
    let kh = s.dir.join("known_hosts");
    let out = s.dir.join("flow.lpr");
    let bench = bin("labperf-bench");
    let o = record(
        &s,
        &kh,
        &[
            "--accept-new-host-key",
            "-e",
            "cpu-clock",
            "-c",
            "250000",
            "-o",
            out.to_str().unwrap(),
            "--format",
            "json",
            "--top",
            "0",
        ],
        &[bench.to_str().unwrap(), "--duration", "1.5"],
    );
    assert!(o.status.success(), "{}", stderr(&o));
    let err = stderr(&o);
    assert!(
        err.contains("x86_64: agent")
            && err.contains("(uploaded)")
            && err.contains("wrote")
            && err.contains("fetched"),
        "{err}"
    );
    // The report is on standard error: standard output, a pipe here, is the workload's.
    let j = labperf_tests::recorded_json(&o.stderr);
    for f in [
        "int_divider_stalls",
        "fp_divider_stalls",
        "branch_mispredicts",
        "dcache_miss",
        "double_to_int",
        "nops",
        "serializing",
    ] {
        let n = j["tables"][0]["rows"]
            .as_array()
            .unwrap()
            .iter()
            .find(|r| r["name"] == f)
            .map(|r| r["samples"].as_u64().unwrap())
            .unwrap_or(0);
        assert!(n > 30, "{f}: {n} samples\n{j}");
    }
    assert!(decode_all(&std::fs::read(&out).unwrap()).losses.is_clean());
    // The binaries the samples need were fetched into the build-id cache.
    let cache = s.dir.join("cache/labperf/binaries");
    let elves: Vec<_> = std::fs::read_dir(&cache)
        .unwrap()
        .flatten()
        .filter(|e| e.path().join("elf").is_file())
        .collect();
    assert!(
        !elves.is_empty(),
        "no binary cached under {}",
        cache.display()
    );
    // The second run finds the agent by its content hash and does not upload it again.
    let o = record(
        &s,
        &kh,
        &[
            "-e",
            "cpu-clock",
            "--no-report",
            "-o",
            out.to_str().unwrap(),
        ],
        &["/bin/true"],
    );
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(stderr(&o).contains("(already there)"), "{}", stderr(&o));
    // No temporary file is left on either side.
    assert!(!s.dir.join("flow.lpr.part").exists());
    let leftovers = Command::new("find")
        .arg(s.dir.join("remote"))
        .args(["-name", "*.tmp.*"])
        .output()
        .unwrap();
    assert!(leftovers.stdout.is_empty());
}

#[test]
fn host_keys_unknown_accepted_and_changed() {
    let s = Sshd::start("ssh-keys");
    let kh = s.dir.join("known_hosts");
    let out = s.dir.join("k.lpr");
    let args = [
        "-e",
        "task-clock",
        "--no-report",
        "-o",
        out.to_str().unwrap(),
    ];
    // Unknown host: refused, nothing recorded, known_hosts untouched.
    let o = record(&s, &kh, &args, &["/bin/true"]);
    assert_eq!(o.status.code(), Some(1));
    assert!(
        stderr(&o).contains("is not in")
            && stderr(&o).contains("--accept-new-host-key")
            && stderr(&o).contains("SHA256"),
        "{}",
        stderr(&o)
    );
    assert!(!kh.exists() && !out.exists());
    // Accepted once: recorded in known_hosts, and the run works.
    let mut with_accept = args.to_vec();
    with_accept.push("--accept-new-host-key");
    let o = record(&s, &kh, &with_accept, &["/bin/true"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let recorded = std::fs::read_to_string(&kh).unwrap();
    assert!(recorded.starts_with(&format!("[127.0.0.1]:{} ssh-ed25519 ", s.port)));
    // The same host with a new key: always refused, even with --accept-new-host-key.
    let (dir, port) = (s.dir.clone(), s.port);
    drop(s);
    std::fs::remove_file(dir.join("host_key")).unwrap();
    std::fs::remove_file(dir.join("host_key.pub")).unwrap();
    keygen(&dir.join("host_key"));
    let s = Sshd::start_in(dir, port);
    std::fs::remove_file(&out).unwrap();
    let o = record(&s, &kh, &with_accept, &["/bin/true"]);
    assert_eq!(o.status.code(), Some(1));
    assert!(
        stderr(&o).contains("HAS CHANGED") && stderr(&o).contains("ssh-keygen -R"),
        "{}",
        stderr(&o)
    );
    assert_eq!(std::fs::read_to_string(&kh).unwrap(), recorded);
    assert!(!out.exists());
}

#[test]
fn a_wrong_key_fails_to_log_in() {
    let s = Sshd::start("ssh-auth");
    std::fs::write(s.dir.join("authorized_keys"), "").unwrap(); // no key is authorized
    let kh = s.dir.join("known_hosts");
    let out = s.dir.join("a.lpr");
    let o = record(
        &s,
        &kh,
        &[
            "--accept-new-host-key",
            "--no-report",
            "-o",
            out.to_str().unwrap(),
        ],
        &["/bin/true"],
    );
    assert_eq!(o.status.code(), Some(1));
    let e = stderr(&o);
    assert!(
        e.contains("cannot log in to root@127.0.0.1")
            && e.contains("client_key")
            && e.contains("--identity"),
        "{e}"
    );
    assert!(!out.exists());
}

#[test]
fn workload_arguments_arrive_byte_exact_over_ssh() {
    let s = Sshd::start("ssh-args");
    let kh = s.dir.join("known_hosts");
    let got = s.dir.join("got.txt");
    let tricky = [
        "two  spaces",
        "it's",
        "\"dq\"",
        "$(touch /tmp/labperf-ssh-pwned);",
        "`id`",
        "; exit 9",
        "",
        "new\nline",
        "*",
        "\\back",
    ];
    let mut cmd = vec![
        "/bin/sh",
        "-c",
        "printf '%s\\0' \"$@\" > \"$0\"",
        got.to_str().unwrap(),
    ];
    cmd.extend(tricky);
    let o = record(
        &s,
        &kh,
        &[
            "--accept-new-host-key",
            "-e",
            "task-clock",
            "--no-report",
            "-o",
            s.dir.join("x.lpr").to_str().unwrap(),
        ],
        &cmd,
    );
    assert!(o.status.success(), "{}", stderr(&o));
    let want: Vec<u8> = tricky.iter().flat_map(|a| a.bytes().chain([0])).collect();
    assert_eq!(std::fs::read(&got).unwrap(), want);
    assert!(!Path::new("/tmp/labperf-ssh-pwned").exists());
}

#[test]
fn unwritable_and_full_remote_directories_are_reported() {
    let s = Sshd::start("ssh-disk");
    let kh = s.dir.join("known_hosts");
    let out = s.dir.join("d.lpr");
    let run = |remote: &Path| {
        record_cmd(&s, &kh, remote)
            .args(["--accept-new-host-key", "--no-report", "-o"])
            .arg(&out)
            .args(["--", "/bin/true"])
            .output()
            .unwrap()
    };
    // A read-only file system (a tmpfs mounted ro) as the remote directory.
    let ro = s.dir.join("ro");
    std::fs::create_dir_all(&ro).unwrap();
    let st = Command::new("mount")
        .args(["-t", "tmpfs", "-o", "ro,size=1m", "tmpfs"])
        .arg(&ro)
        .status()
        .unwrap();
    assert!(
        st.success(),
        "mounting a tmpfs needs root (CI runs as root)"
    );
    let o = run(&ro.join("labperf"));
    let _ = Command::new("umount").arg(&ro).status();
    assert_eq!(o.status.code(), Some(1));
    let e = stderr(&o);
    assert!(
        e.contains("is not writable")
            && e.contains("Read-only file system")
            && e.contains("--remote-dir"),
        "{e}"
    );
    assert!(!out.exists());
    // A tmpfs of half the agent's size cannot hold it: the upload fails as "disk full" and
    // leaves no partial file. (A fixed 256 KiB held the no_std agent, 213 KB.)
    let agent_kib = std::fs::metadata(bin("labperf-agent")).unwrap().len() / 1024;
    let small = s.dir.join("small");
    std::fs::create_dir_all(&small).unwrap();
    let st = Command::new("mount")
        .args([
            "-t",
            "tmpfs",
            "-o",
            &format!("size={}k", (agent_kib / 2).max(4)),
            "tmpfs",
        ])
        .arg(&small)
        .status()
        .unwrap();
    assert!(
        st.success(),
        "mounting a tmpfs needs root (CI runs as root)"
    );
    let o = run(&small);
    let _ = Command::new("umount").arg(&small).status();
    assert_eq!(o.status.code(), Some(1));
    assert!(
        stderr(&o).contains("disk of") && stderr(&o).contains("is full"),
        "{}",
        stderr(&o)
    );
    assert!(!out.exists());
}

#[test]
fn fan_out_to_three_hosts_with_one_down() {
    let (a, b) = (Sshd::start("ssh-fan-a"), Sshd::start("ssh-fan-b"));
    let down = free_port();
    // One known_hosts and one key for all three: b gets a's authorized key.
    std::fs::copy(a.dir.join("client_key.pub"), b.dir.join("authorized_keys")).unwrap();
    let kh = a.dir.join("known_hosts");
    let out = a.dir.join("fan.lpr");
    let hosts = format!("{},{},root@127.0.0.1:{down}", a.spec(), b.spec());
    let o = labperf_in(&a.dir)
        .args([
            "record",
            "--accept-new-host-key",
            "--host",
            &hosts,
            "--known-hosts",
        ])
        .arg(&kh)
        .arg("--identity")
        .arg(a.dir.join("client_key"))
        .arg("--remote-dir")
        .arg(a.dir.join("remote"))
        .args(["-e", "cpu-clock", "-o"])
        .arg(&out)
        .arg("--")
        .arg(bin("labperf-bench"))
        .args(["--duration", "0.5", "--classes", "nops"])
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(1));
    // The reports are on standard error (standard output, a pipe here, is the workloads'),
    // from the first host's heading on.
    let err = stderr(&o);
    let stdout = &err[err.find("== root@127.0.0.1:").unwrap_or(0)..];
    assert_eq!(stdout.matches("== root@127.0.0.1:").count(), 2, "{stdout}");
    // Each host's report, then the two merged: its nops samples are their sum.
    let nops: Vec<u64> = stdout
        .lines()
        .filter(|l| l.contains(" nops "))
        .map(|l| l.split_whitespace().nth(1).unwrap().parse().unwrap())
        .collect();
    assert_eq!(nops.len(), 3, "{stdout}");
    assert!(stdout.contains("== 2 hosts merged ==\n# "), "{stdout}");
    assert!(
        stdout.find("== 2 hosts merged ==") > stdout.rfind("== root@127.0.0.1:"),
        "{stdout}"
    );
    assert_eq!(nops[2], nops[0] + nops[1], "{stdout}");
    assert!(
        err.contains("summary: 2 of 3 hosts recorded")
            && err
                .lines()
                .any(|l| l.starts_with(&format!("root@127.0.0.1:{down} "))
                    && l.trim_end().ends_with("FAILED")),
        "{err}"
    );
    // The host's error, said once.
    assert_eq!(
        err.matches(&format!("cannot reach 127.0.0.1:{down}"))
            .count(),
        1,
        "{err}"
    );
    for s in [&a, &b] {
        assert!(a
            .dir
            .join(format!("fan-root_127.0.0.1_{}.lpr", s.port))
            .is_file());
    }
}

#[test]
fn a_killed_agent_and_a_dropped_connection_leave_no_file() {
    let s = Sshd::start("ssh-kill");
    let kh = s.dir.join("known_hosts");
    let out = s.dir.join("kill.lpr");
    let spawn = |s: &Sshd| {
        record_cmd(s, &kh, &s.dir.join("remote"))
            .args(["--accept-new-host-key", "--no-report", "-o"])
            .arg(&out)
            .args(["--", "/bin/sleep", "3"])
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap()
    };
    let wait_for_agent = || {
        let t = Instant::now();
        let pattern = format!("{}/agents/.*record", s.dir.join("remote").display());
        loop {
            let o = Command::new("pgrep")
                .args(["-f", &pattern])
                .output()
                .unwrap();
            if !o.stdout.is_empty() {
                return String::from_utf8_lossy(&o.stdout)
                    .split_whitespace()
                    .next()
                    .unwrap()
                    .to_string();
            }
            assert!(
                t.elapsed() < Duration::from_secs(10),
                "the agent never started"
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    };
    // The agent is killed on the lab machine.
    let child = spawn(&s);
    let agent = wait_for_agent();
    Command::new("kill")
        .args(["-KILL", &agent])
        .status()
        .unwrap();
    let o = child.wait_with_output().unwrap();
    assert_eq!(o.status.code(), Some(1));
    assert!(stderr(&o).contains("was killed"), "{}", stderr(&o));
    assert!(!out.exists());
    // Killed after it made its file, what it had written is saved as .part, and said so.
    let part = s.dir.join("kill.lpr.part");
    assert_eq!(
        part.exists(),
        stderr(&o).contains("saved with a .part name"),
        "{}",
        stderr(&o)
    );
    let _ = std::fs::remove_file(&part);
    // The connection drops (sshd's session process dies) while the agent runs.
    let child = spawn(&s);
    let _ = wait_for_agent();
    let sessions = Command::new("pgrep")
        .args(["-P", &s.child.id().to_string()])
        .output()
        .unwrap();
    for pid in String::from_utf8_lossy(&sessions.stdout).split_whitespace() {
        Command::new("kill").args(["-KILL", pid]).status().unwrap();
    }
    let o = child.wait_with_output().unwrap();
    assert_eq!(o.status.code(), Some(1));
    let e = stderr(&o);
    eprintln!("dropped connection reported as: {e}");
    assert!(e.contains("dropped while running"), "{e}");
    assert!(!out.exists() && !s.dir.join("kill.lpr.part").exists());
}

#[test]
fn probe_deploy_and_stat_through_a_hosts_file() {
    let s = Sshd::start("ssh-hostsfile");
    let hosts = s.dir.join("hosts.toml");
    std::fs::write(&hosts, format!("[hosts.lab-a]\naddress = \"{}\"\nidentity = \"client_key\"\nknown_hosts = \"known_hosts\"\nremote_dir = \"{}\"\n", s.spec(), s.dir.join("remote").display())).unwrap();
    // The verb, then --hosts-file, then the rest (which may end in `-- CMD`).
    let labperf = |args: &[&str]| {
        labperf_in(&s.dir)
            .arg(args[0])
            .arg("--hosts-file")
            .arg(&hosts)
            .args(&args[1..])
            .output()
            .unwrap()
    };
    let o = labperf(&["deploy", "lab-a", "--accept-new-host-key"]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(
        String::from_utf8_lossy(&o.stdout).contains("lab-a: x86_64,")
            && String::from_utf8_lossy(&o.stdout).contains("(uploaded)")
    );
    let o = labperf(&["deploy", "lab-a"]);
    assert!(
        String::from_utf8_lossy(&o.stdout).contains("(already there)"),
        "{}",
        stderr(&o)
    );
    // --bench pushes this machine's labperf-bench too, by content hash, runnable.
    let o = labperf(&["deploy", "lab-a", "--bench"]);
    let out = String::from_utf8_lossy(&o.stdout).into_owned();
    assert!(
        o.status.success() && out.contains("(uploaded)"),
        "{out}{}",
        stderr(&o)
    );
    let path = out
        .split("; bench ")
        .nth(1)
        .and_then(|r| r.split(" (").next())
        .unwrap_or_else(|| panic!("no bench path in {out}"));
    assert!(
        path.starts_with(s.dir.join("remote/push/").to_str().unwrap()),
        "{path}"
    );
    assert_eq!(
        std::fs::read(path).unwrap(),
        std::fs::read(bin("labperf-bench")).unwrap()
    );
    let st = Command::new(path)
        .args(["--duration", "0.05"])
        .status()
        .unwrap();
    assert!(st.success());
    let o = labperf(&["deploy", "lab-a", "--bench"]);
    let out = String::from_utf8_lossy(&o.stdout).into_owned();
    assert!(out.contains("labperf-bench (already there)"), "{out}");
    let o = labperf(&["probe", "lab-a"]);
    let p = String::from_utf8_lossy(&o.stdout);
    assert!(
        o.status.success()
            && p.contains("architecture: x86_64")
            && p.contains("software (type 1)")
            && p.contains("ProfileMe format bit: no"),
        "{p}{}",
        stderr(&o)
    );
    let paranoid = std::fs::read_to_string("/proc/sys/kernel/perf_event_paranoid").unwrap();
    assert!(
        p.contains(&format!("perf_event_paranoid: {}", paranoid.trim())),
        "{p}"
    );
    let out = s.dir.join("stat.lpr");
    let o = labperf(&[
        "stat",
        "--host",
        "lab-a",
        "-e",
        "task-clock,{page-faults,context-switches}",
        "-I",
        "100",
        "-o",
        out.to_str().unwrap(),
        "--",
        bin("labperf-bench").to_str().unwrap(),
        "--duration",
        "0.4",
        "--classes",
        "nops",
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(stderr(&o).contains("task-clock") && stderr(&o).contains("seconds time elapsed"));
    let d = decode_all(&std::fs::read(&out).unwrap());
    let h = d.header.unwrap();
    assert_eq!(h.mode, "stat");
    // perf's event list on the lab machine: an event and a group counted together.
    let events: Vec<(&str, Option<u32>)> = h
        .events
        .iter()
        .map(|e| (e.name.as_str(), e.leader))
        .collect();
    assert_eq!(
        events,
        [
            ("task-clock", None),
            ("page-faults", None),
            ("context-switches", Some(1))
        ]
    );
    assert!(stderr(&o).contains(" page-faults ") && stderr(&o).contains(" context-switches "));
    assert!(d.records.len() >= 4);
    // A name that is neither in the hosts file nor resolvable fails clearly.
    let o = labperf(&["probe", "no-such-lab-host.invalid"]);
    assert_eq!(o.status.code(), Some(1));
    assert!(
        stderr(&o).contains("cannot reach no-such-lab-host.invalid"),
        "{}",
        stderr(&o)
    );
}

/// Serves every command normally except the fetch of a record file: that one sends the
/// first 2000 bytes and then kills its own sshd session, as a dropped connection would.
/// Only that session: the one process among its ancestors whose parent is this test's sshd
/// (its pid is in @DIR@/sshd.pid), never the test's sshd itself nor the machine's.
const CUT_FETCH: &str = r#"#!/bin/sh
case "$SSH_ORIGINAL_COMMAND" in
  "st='"*".lpr'; "*"exit 5;;"*)
    /bin/sh -c "$SSH_ORIGINAL_COMMAND" | head -c 2000
    main=$(cat '@DIR@/sshd.pid')
    p=$$
    while [ "$p" -gt 1 ]; do
      read -r _ _ _ pp _ < "/proc/$p/stat"
      if [ "$pp" = "$main" ]; then kill -9 "$p"; break; fi
      p=$pp
    done ;;
  *) exec /bin/sh -c "$SSH_ORIGINAL_COMMAND" ;;
esac
"#;

#[test]
fn a_connection_dropped_mid_fetch_leaves_no_file() {
    let dir = Sshd::keys("ssh-midfetch");
    let script = CUT_FETCH.replace("@DIR@", &dir.display().to_string());
    let s = Sshd::start_forcing(dir, "cut-fetch.sh", &script);
    let kh = s.dir.join("known_hosts");
    let out = s.dir.join("cut.lpr");
    let o = record(
        &s,
        &kh,
        &[
            "--accept-new-host-key",
            "-e",
            "cpu-clock",
            "--no-report",
            "-o",
            out.to_str().unwrap(),
        ],
        &[bin("labperf-bench").to_str().unwrap(), "--duration", "0.5"],
    );
    assert_eq!(o.status.code(), Some(1));
    let e = stderr(&o);
    eprintln!("mid-fetch drop reported as: {e}");
    assert!(
        e.contains("fetching the record file")
            && (e.contains("dropped while") || e.contains("does not match its checksum")),
        "{e}"
    );
    assert!(!out.exists(), "a partial record file was left");
    let mut s = s;
    assert!(
        s.child.try_wait().unwrap().is_none(),
        "the cut killed the test's own sshd, not only its session"
    );
    assert!(std::fs::read_dir(&s.dir)
        .unwrap()
        .flatten()
        .all(|f| !f.file_name().to_string_lossy().ends_with(".part")));
}

#[test]
fn ssh_agent_identities_are_all_tried_and_ssh_config_aliases_resolve() {
    let s = Sshd::start("ssh-agent");
    // Two keys in the agent; only the second is authorized.
    keygen(&s.dir.join("decoy_key"));
    let sock = s.dir.join("agent.sock");
    let mut agent = Command::new("ssh-agent")
        .arg("-D")
        .arg("-a")
        .arg(&sock)
        .stdout(Stdio::null())
        .spawn()
        .expect("ssh-agent (openssh-client)");
    let t = Instant::now();
    while !sock.exists() {
        assert!(t.elapsed() < Duration::from_secs(5));
        std::thread::sleep(Duration::from_millis(20));
    }
    for k in ["decoy_key", "client_key"] {
        let st = Command::new("ssh-add")
            .env("SSH_AUTH_SOCK", &sock)
            .arg(s.dir.join(k))
            .stderr(Stdio::null())
            .status()
            .unwrap();
        assert!(st.success());
    }
    let listed = Command::new("ssh-add")
        .env("SSH_AUTH_SOCK", &sock)
        .arg("-l")
        .output()
        .unwrap();
    assert_eq!(String::from_utf8_lossy(&listed.stdout).lines().count(), 2);
    // An ~/.ssh/config alias with HostName, User and Port; no --identity: the agent must do.
    let cfg = s.dir.join("ssh_config");
    std::fs::write(
        &cfg,
        format!(
            "Host labalias\n  HostName 127.0.0.1\n  User root\n  Port {}\n",
            s.port
        ),
    )
    .unwrap();
    let home = s.dir.join("home");
    std::fs::create_dir_all(&home).unwrap();
    let o = Command::new(bin("labperf"))
        .env("HOME", &home)
        .env("SSH_AUTH_SOCK", &sock)
        .env("LABPERF_AGENT", bin("labperf-agent"))
        .args([
            "deploy",
            "labalias",
            "--accept-new-host-key",
            "--ssh-config",
        ])
        .arg(&cfg)
        .arg("--known-hosts")
        .arg(s.dir.join("known_hosts"))
        .arg("--remote-dir")
        .arg(s.dir.join("remote"))
        .output()
        .unwrap();
    let _ = agent.kill();
    let _ = agent.wait();
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(String::from_utf8_lossy(&o.stdout).starts_with("labalias: x86_64,"));
}

#[test]
fn alpha_agent_deploys_runs_under_binfmt_qemu_alpha_and_reports_profileme() {
    use labperf_tests::alpha::*;
    require_binfmt_alpha().unwrap_or_else(|e| panic!("{e}"));
    let s = Sshd::start("ssh-alpha");
    let kh = s.dir.join("known_hosts");
    let out = s.dir.join("alpha.lpr");
    // The target runs Alpha binaries through qemu-alpha, which has no perf_event_open:
    // the agent runs the (Alpha) workload and takes its samples from saved ring bytes.
    let ring = s.dir.join("target-ring.bin");
    std::fs::write(&ring, branch_ring(21).bytes).unwrap();
    let bench = alpha_bench();
    let o = record(
        &s,
        &kh,
        &[
            "--accept-new-host-key",
            "--arch",
            "alpha",
            "--profileme",
            "--replay-ring",
            ring.to_str().unwrap(),
            "--pc",
            "--top",
            "3",
            "-o",
            out.to_str().unwrap(),
        ],
        &[bench.to_str().unwrap(), "--duration", "0.2"],
    );
    let err = stderr(&o);
    assert!(o.status.success(), "{err}");
    assert!(
        err.contains("alpha: agent") && err.contains("(uploaded)") && err.contains("fetched"),
        "{err}"
    );
    // The uploaded agent is the Alpha one, and it ran (under qemu-alpha) on the target.
    let agents: Vec<_> = std::fs::read_dir(s.dir.join("remote/agents"))
        .unwrap()
        .flatten()
        .map(|e| e.path().join("labperf-agent"))
        .collect();
    assert!(
        agents.iter().any(|p| std::fs::read(p)
            .map(|b| b[18..20] == [0x26, 0x90])
            .unwrap_or(false)),
        "no Alpha ELF (EM_ALPHA 0x9026) among {agents:?}"
    );
    let d = decode_all(&std::fs::read(&out).unwrap());
    assert!(d.losses.is_clean());
    let h = d.header.unwrap();
    assert_eq!(h.arch, labperf_common::Arch::Alpha);
    assert_eq!(h.mode, "replay");
    assert_eq!(d.trailer.unwrap().exit.code, Some(0));
    // The report printed after the run is the ProfileMe one, by PC: the branch row first
    // (on standard error: standard output, a pipe here, is the workload's).
    let stdout = err;
    let branch = first_conditional_branch("branch_mispredicts");
    let line = stdout
        .lines()
        .find(|l| l.contains(&format!("{branch:#018x} branch_mispredicts")))
        .unwrap_or_else(|| panic!("{stdout}"));
    assert_eq!(line.split_whitespace().nth(3), Some("21.0"), "{line}");
}

/// A compromised lab machine (its sshd's ForceCommand): the record file it serves is a
/// crafted one, whose mappings name paths outside the cache and devices, and any other
/// file it is asked for comes back as a few bytes of its choosing. Everything else runs.
const HOSTILE: &str = r#"#!/bin/sh
case "$SSH_ORIGINAL_COMMAND" in
  # The end of a run: the agent's status line, then the record file.
  "st='"*".lpr'; "*"exit 5;;"*)
    printf 'ok 0\n'; n=$(wc -c < '@CRAFTED@'); echo "$n"; cat '@CRAFTED@' ;;
  *".lpr'; "*"exec head -c"*)
    n=$(wc -c < '@CRAFTED@'); echo "$n"; cat '@CRAFTED@' ;;
  *"ld-linux.so.2'; "*"exec head -c"*)
    n=$(wc -c < /bin/true); echo "$n"; cat /bin/true ;;
  *"exec head -c"*)
    printf '6\nevil!\n' ;;
  # The same answers to the fetches of labperf before commit c6f685d (sha256sum, then
  # cat), so the test shows what that version did with them.
  "sha256sum '"*".lpr'") sha256sum < '@CRAFTED@' ;;
  "cat '"*".lpr'") cat '@CRAFTED@' ;;
  "sha256sum '"*"ld-linux.so.2'") sha256sum < /bin/true ;;
  "cat '"*"ld-linux.so.2'") cat /bin/true ;;
  "sha256sum '"*"/.bashrc'" | "sha256sum '"*"/.profile'" | "sha256sum '"*"evil.so'")
    printf 'evil!\n' | sha256sum ;;
  "cat '"*"/.bashrc'" | "cat '"*"/.profile'" | "cat '"*"evil.so'") printf 'evil!\n' ;;
  *) exec /bin/sh -c "$SSH_ORIGINAL_COMMAND" ;;
esac
"#;

/// Every file under `dir` (relative paths), skipping `skip` subtrees.
fn tree(dir: &Path, skip: &[&str]) -> std::collections::BTreeSet<String> {
    let mut out = std::collections::BTreeSet::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).unwrap().flatten() {
            let p = e.path();
            let rel = p.strip_prefix(dir).unwrap().to_string_lossy().into_owned();
            if skip.iter().any(|s| rel.starts_with(s)) {
                continue;
            }
            if e.file_type().unwrap().is_dir() {
                stack.push(p);
            } else {
                out.insert(rel);
            }
        }
    }
    out
}

#[test]
fn a_compromised_lab_machine_cannot_write_outside_the_cache() {
    use labperf_common::*;
    let dir = Sshd::keys("ssh-hostile");
    // The workstation's own files that the attack aims at.
    let home = dir.join("home");
    std::fs::create_dir_all(&home).unwrap();
    std::fs::write(home.join(".bashrc"), "original bashrc\n").unwrap();
    std::fs::write(home.join(".profile"), "original profile\n").unwrap();
    // Identity and time of each target: a rewrite with the same bytes is a change too
    // (here the lab machine is this machine, so what it sends for .bashrc is .bashrc).
    use std::os::unix::fs::MetadataExt;
    let stamp = |p: &Path| {
        let m = std::fs::metadata(p).unwrap();
        (m.ino(), m.mtime(), m.mtime_nsec())
    };
    let targets_before = [stamp(&home.join(".bashrc")), stamp(&home.join(".profile"))];
    // The crafted recording: mappings whose paths climb out of any directory they are
    // joined to, a build-id too short to be one, a real-looking build-id, a device.
    let up = format!("/../../../../../../../..{}", home.display());
    let maps: Vec<(String, Option<Vec<u8>>)> = vec![
        (format!("{up}/.bashrc"), None),
        (format!("{up}/.profile"), Some(vec![1, 2, 3])),
        ("/lib/x86_64-linux-gnu/evil.so".into(), Some(vec![0xee; 20])),
        // A real ELF comes back for this one, but not the one the recording names.
        ("/lib/ld-linux.so.2".into(), Some(vec![0xdd; 20])),
        ("/dev/zero".into(), None),
    ];
    let mut enc = Encoder::new();
    let mut f = Encoder::prelude().to_vec();
    let mut h = labperf_tests::golden::header(labperf_tests::golden::Kind::Sample);
    h.hostname = "evilhost".into();
    f.extend(enc.header_frame(&h));
    for (i, (path, build_id)) in maps.iter().enumerate() {
        let base = 0x10_0000 * (i as u64 + 1);
        enc.push(&Record::Mmap2(Mmap2 {
            pid: 9,
            tid: 9,
            addr: base,
            len: 0x1000,
            path: path.clone(),
            build_id: build_id.clone(),
            ..Default::default()
        }));
        enc.push(&Record::Sample(Sample {
            pid: 9,
            tid: 9,
            ip: base + 0x10,
            period: 1,
            ..Default::default()
        }));
    }
    f.extend(enc.trailer_frame(&Trailer::default()));
    let crafted = dir.join("crafted.lpr");
    std::fs::write(&crafted, &f).unwrap();
    let s = Sshd::start_forcing(
        dir,
        "hostile.sh",
        &HOSTILE.replace("@CRAFTED@", &crafted.display().to_string()),
    );
    let kh = s.dir.join("known_hosts");
    let out = s.dir.join("out.lpr");
    let before = tree(&s.dir, &["remote", "cache"]);
    let o = record(
        &s,
        &kh,
        &[
            "--accept-new-host-key",
            "-e",
            "task-clock",
            "-o",
            out.to_str().unwrap(),
        ],
        &["/bin/true"],
    );
    let err = stderr(&o);
    assert!(o.status.success(), "{err}");
    // Nothing outside the cache changed: only the record file and known_hosts are new.
    assert_eq!(
        std::fs::read_to_string(home.join(".bashrc")).unwrap(),
        "original bashrc\n"
    );
    assert_eq!(
        std::fs::read_to_string(home.join(".profile")).unwrap(),
        "original profile\n"
    );
    assert_eq!(
        [stamp(&home.join(".bashrc")), stamp(&home.join(".profile"))],
        targets_before,
        "a file outside the cache was rewritten\n{err}"
    );
    let after = tree(&s.dir, &["remote", "cache"]);
    let new: Vec<&String> = after.difference(&before).collect();
    assert_eq!(new, ["known_hosts", "out.lpr"], "{err}");
    // Nothing was cached: none of what came back is an ELF file, one build-id is no build-id.
    let cached = tree(&s.dir.join("cache"), &[]);
    assert!(
        cached.iter().all(|p| !p.ends_with("/elf")),
        "cached: {cached:?}\n{err}"
    );
    assert!(err.contains("not an ELF file"), "{err}");
    assert!(err.contains("not a real one"), "{err}");
    assert!(
        err.contains("the recording's dddddddd") && err.contains("the file changed since"),
        "{err}"
    );
    // No temporary file stayed behind in the cache either.
    assert!(cached.iter().all(|p| !p.contains(".tmp.")), "{cached:?}");
}

#[test]
fn a_workloads_exit_status_and_stderr_never_discard_its_recording() {
    let s = Sshd::start("ssh-exits");
    let kh = s.dir.join("known_hosts");
    // A workload that exits 125 or 127 itself, one killed by a signal, one that prints
    // what a full disk prints: each is the workload's business, and its recording is kept.
    let cases: [(&str, i32); 4] = [
        ("echo 'No space left on device' >&2; exit 125", 125),
        ("exit 127", 127),
        ("kill -9 $$", 137),
        ("echo 'write error: No space left on device' >&2", 0),
    ];
    for (i, (script, want)) in cases.iter().enumerate() {
        for local in [false, true] {
            let out = s.dir.join(format!("exit-{i}-{local}.lpr"));
            let args = [
                "--accept-new-host-key",
                "-e",
                "task-clock",
                "--no-report",
                "-o",
                out.to_str().unwrap(),
            ];
            let cmd = ["/bin/sh", "-c", script];
            let o = if local {
                labperf_in(&s.dir)
                    .args(["record", "--local", "-e", "task-clock", "--no-report", "-o"])
                    .arg(&out)
                    .arg("--")
                    .args(cmd)
                    .output()
                    .unwrap()
            } else {
                record(&s, &kh, &args, &cmd)
            };
            let err = stderr(&o);
            assert_eq!(
                o.status.code(),
                Some(*want),
                "{script} (local {local}): {err}"
            );
            let d = decode_all(
                &std::fs::read(&out)
                    .unwrap_or_else(|e| panic!("{script} (local {local}): no file: {e}\n{err}")),
            );
            let t = d.trailer.unwrap();
            let code = t.exit.code.or(t.exit.signal.map(|s| 128 + s));
            assert_eq!(code, Some(*want), "{script}");
            assert!(!err.contains("disk of"), "{err}");
        }
    }
    // The run's files on the lab machine are gone.
    let left = Command::new("find")
        .arg(s.dir.join("remote/runs"))
        .args(["-type", "f"])
        .output()
        .unwrap();
    assert!(
        left.stdout.is_empty(),
        "{}",
        String::from_utf8_lossy(&left.stdout)
    );
}

#[test]
fn a_workload_that_cannot_start_leaves_the_previous_recording_alone() {
    let s = Sshd::start("ssh-typo");
    let kh = s.dir.join("known_hosts");
    let out = s.dir.join("old.lpr");
    std::fs::write(&out, b"the previous recording").unwrap();
    let o = record(
        &s,
        &kh,
        &[
            "--accept-new-host-key",
            "--no-report",
            "-o",
            out.to_str().unwrap(),
        ],
        &["/no/such/program"],
    );
    assert_eq!(o.status.code(), Some(1));
    assert!(
        stderr(&o).contains("could not be started"),
        "{}",
        stderr(&o)
    );
    assert_eq!(std::fs::read(&out).unwrap(), b"the previous recording");
    let o = labperf_in(&s.dir)
        .args(["record", "--local", "--no-report", "-o"])
        .arg(&out)
        .args(["--", "/no/such/program"])
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(1));
    assert!(
        stderr(&o).contains("could not be started"),
        "{}",
        stderr(&o)
    );
    assert_eq!(std::fs::read(&out).unwrap(), b"the previous recording");
    let o = Command::new(bin("labperf-agent"))
        .args(["record", "-o"])
        .arg(&out)
        .args(["--", "/no/such/program"])
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(127));
    assert_eq!(std::fs::read(&out).unwrap(), b"the previous recording");
    assert!(!s.dir.join("old.lpr.part").exists());
}

/// The agent's pid on the test's lab machine (its command line names the remote dir).
fn remote_agent(s: &Sshd) -> Option<String> {
    let pattern = format!("{}/agents/.*record", s.dir.join("remote").display());
    let o = Command::new("pgrep")
        .args(["-f", &pattern])
        .output()
        .unwrap();
    String::from_utf8_lossy(&o.stdout)
        .split_whitespace()
        .next()
        .map(str::to_string)
}

#[test]
fn interrupts_stop_the_remote_workload_save_its_recording_and_clean_up() {
    let s = Sshd::start("ssh-interrupt");
    let kh = s.dir.join("known_hosts");
    let bench = bin("labperf-bench");
    let run = |out: &Path| {
        record_cmd(&s, &kh, &s.dir.join("remote"))
            .args([
                "--accept-new-host-key",
                "-e",
                "cpu-clock",
                "--no-report",
                "-o",
            ])
            .arg(out)
            .arg("--")
            .arg(&bench)
            .args(["--duration", "60", "--classes", "nops"])
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap()
    };
    let wait_agent = || {
        let t = Instant::now();
        loop {
            if let Some(p) = remote_agent(&s) {
                return p;
            }
            assert!(
                t.elapsed() < Duration::from_secs(10),
                "the agent never started"
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    };
    // One SIGINT (and, the second time, SIGTERM as a service manager sends it): the
    // workload stops, the agent finishes its file, labperf fetches it and cleans up.
    for (i, sig) in [libc::SIGINT, libc::SIGTERM].into_iter().enumerate() {
        let out = s.dir.join(format!("int-{i}.lpr"));
        let child = run(&out);
        wait_agent();
        std::thread::sleep(Duration::from_millis(800));
        let t = Instant::now();
        // SAFETY: signalling our own child.
        unsafe { libc::kill(child.id() as i32, sig) };
        let o = child.wait_with_output().unwrap();
        let err = stderr(&o);
        assert!(t.elapsed() < Duration::from_secs(10), "{err}");
        assert_eq!(
            o.status.code(),
            Some(130),
            "the bench died of SIGINT: {err}"
        );
        assert!(err.contains("interrupted"), "{err}");
        let d = decode_all(&std::fs::read(&out).unwrap());
        assert!(d.losses.is_clean(), "{:?}", d.damage);
        assert_eq!(d.trailer.unwrap().exit.signal, Some(2));
        assert!(remote_agent(&s).is_none(), "the agent still runs");
    }
    // Twice: abort. The agent and the workload are killed, nothing is saved or left.
    let out = s.dir.join("abort.lpr");
    let child = run(&out);
    let pid = wait_agent();
    // The agent is seen (even as the shell that execs it) before it forks the workload:
    // wait for the child, as a slow machine may take a while to get there.
    let t = Instant::now();
    let workload = loop {
        let o = Command::new("pgrep").args(["-P", &pid]).output().unwrap();
        let w = String::from_utf8_lossy(&o.stdout).trim().to_string();
        if !w.is_empty() {
            break w;
        }
        assert!(
            t.elapsed() < Duration::from_secs(10),
            "the agent never started its workload"
        );
        std::thread::sleep(Duration::from_millis(20));
    };
    for _ in 0..2 {
        // SAFETY: signalling our own child.
        unsafe { libc::kill(child.id() as i32, libc::SIGINT) };
        std::thread::sleep(Duration::from_millis(30));
    }
    let o = child.wait_with_output().unwrap();
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    assert!(stderr(&o).contains("interrupted twice"), "{}", stderr(&o));
    assert!(!out.exists());
    std::thread::sleep(Duration::from_millis(300));
    assert!(remote_agent(&s).is_none(), "the agent still runs");
    assert!(
        !Path::new(&format!("/proc/{workload}")).exists()
            || std::fs::read_to_string(format!("/proc/{workload}/stat"))
                .is_ok_and(|st| st.contains(") Z")),
        "the workload outlived the abort"
    );
    let left = Command::new("find")
        .arg(s.dir.join("remote/runs"))
        .args(["-type", "f"])
        .output()
        .unwrap();
    assert!(
        left.stdout.is_empty(),
        "{}",
        String::from_utf8_lossy(&left.stdout)
    );
}

#[test]
fn remote_stdout_streams_as_it_comes_and_remote_text_is_escaped() {
    let s = Sshd::start("ssh-stdout");
    let kh = s.dir.join("known_hosts");
    let out = s.dir.join("o.lpr");
    let mut child = record_cmd(&s, &kh, &s.dir.join("remote"))
        .args([
            "--accept-new-host-key",
            "-e",
            "task-clock",
            "--no-report",
            "-o",
        ])
        .arg(&out)
        .args([
            "--",
            "/bin/sh",
            "-c",
            "echo one; printf '\\033[31mred\\007\\n' >&2; sleep 2; echo two",
        ])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let t = Instant::now();
    let mut lines = std::io::BufRead::lines(std::io::BufReader::new(child.stdout.take().unwrap()));
    let first = lines.next().unwrap().unwrap();
    let at_first = t.elapsed();
    let second = lines.next().unwrap().unwrap();
    let at_second = t.elapsed();
    let o = child.wait_with_output().unwrap();
    let err = String::from_utf8_lossy(&o.stderr).into_owned();
    assert!(o.status.success(), "{err}");
    assert_eq!((first.as_str(), second.as_str()), ("one", "two"));
    // "one" came while the workload still ran (it sleeps 2 s before "two").
    assert!(
        at_second - at_first > Duration::from_millis(1500),
        "{at_first:?} {at_second:?}"
    );
    assert!(err.contains("\\x1b[31mred\\x07"), "{err}");
    assert!(
        !o.stderr.contains(&0x1b) && !o.stderr.contains(&0x07),
        "{err}"
    );
}

#[test]
fn a_tampered_agent_is_put_back() {
    let s = Sshd::start("ssh-tamper");
    let kh = s.dir.join("known_hosts");
    let deploy = || {
        labperf_in(&s.dir)
            .args([
                "deploy",
                &s.spec(),
                "--accept-new-host-key",
                "--known-hosts",
            ])
            .arg(&kh)
            .arg("--identity")
            .arg(s.dir.join("client_key"))
            .arg("--remote-dir")
            .arg(s.dir.join("remote"))
            .output()
            .unwrap()
    };
    let o = deploy();
    assert!(String::from_utf8_lossy(&o.stdout).contains("(uploaded)"));
    let agents: Vec<_> = std::fs::read_dir(s.dir.join("remote/agents"))
        .unwrap()
        .flatten()
        .map(|e| e.path().join("labperf-agent"))
        .collect();
    // Someone on the lab machine replaces the agent under the same name.
    std::fs::write(&agents[0], b"#!/bin/sh\necho pwned\n").unwrap();
    let o = deploy();
    let (out, err) = (String::from_utf8_lossy(&o.stdout), stderr(&o));
    assert!(
        o.status.success() && out.contains("(uploaded)"),
        "{out}{err}"
    );
    assert!(err.contains("is not the one labperf put there"), "{err}");
    assert_eq!(
        std::fs::read(&agents[0]).unwrap(),
        std::fs::read(bin("labperf-agent")).unwrap()
    );
    assert!(String::from_utf8_lossy(&deploy().stdout).contains("(already there)"));
}

/// A lab machine whose shell finds only what LAB_PROGRAMS lists, minus every SHA-256 tool.
const NO_SHA: &str = r#"#!/bin/sh
PATH='@FARM@'; export PATH
exec /bin/sh -c "$SSH_ORIGINAL_COMMAND"
"#;

#[test]
fn a_lab_machine_without_sha256sum_still_works() {
    let dir = Sshd::keys("ssh-nosha");
    let farm = dir.join("bin");
    std::fs::create_dir_all(&farm).unwrap();
    for p in [
        "sh", "uname", "cat", "mkdir", "test", "chmod", "mv", "rm", "wc", "head", "kill", "grep",
        "ls", "tr", "sleep",
    ] {
        let real = Command::new("which").arg(p).output().unwrap();
        let real = String::from_utf8_lossy(&real.stdout).trim().to_string();
        std::os::unix::fs::symlink(real, farm.join(p)).unwrap();
    }
    let s = Sshd::start_forcing(
        dir,
        "nosha.sh",
        &NO_SHA.replace("@FARM@", &farm.display().to_string()),
    );
    let kh = s.dir.join("known_hosts");
    let out = s.dir.join("n.lpr");
    for round in 0..2 {
        let o = record(
            &s,
            &kh,
            &[
                "--accept-new-host-key",
                "-e",
                "task-clock",
                "--no-report",
                "-o",
                out.to_str().unwrap(),
            ],
            &["/bin/sleep", "0.1"],
        );
        let err = stderr(&o);
        assert!(o.status.success(), "{err}");
        assert!(err.contains("checked by its size only"), "{err}");
        // The agent is recognised by reading it back: not uploaded twice.
        assert!(
            err.contains(if round == 0 {
                "(uploaded)"
            } else {
                "(already there)"
            }),
            "{err}"
        );
        assert!(decode_all(&std::fs::read(&out).unwrap()).losses.is_clean());
    }
}

#[test]
fn non_utf8_workload_arguments_arrive_byte_for_byte() {
    use std::os::unix::ffi::OsStrExt;
    let s = Sshd::start("ssh-bytes");
    let kh = s.dir.join("known_hosts");
    let arg = std::ffi::OsStr::from_bytes(b"caf\xe9 \xff\xfe'\"$x\n\n");
    for local in [false, true] {
        let got = s.dir.join(format!("got-{local}"));
        let mut c = if local {
            let mut c = labperf_in(&s.dir);
            c.args(["record", "--local"]);
            c
        } else {
            let mut c = record_cmd(&s, &kh, &s.dir.join("remote"));
            c.arg("--accept-new-host-key");
            c
        };
        let o = c
            .args(["-e", "task-clock", "--no-report", "-o"])
            .arg(s.dir.join("b.lpr"))
            .args(["--", "/bin/sh", "-c", "printf '%s' \"$1\" > \"$0\""])
            .arg(&got)
            .arg(arg)
            .output()
            .unwrap();
        assert!(o.status.success(), "{}", stderr(&o));
        assert_eq!(
            std::fs::read(&got).unwrap(),
            arg.as_bytes(),
            "local {local}"
        );
    }
}

#[test]
fn a_remote_dir_under_the_login_directory_and_local_errors_said_as_such() {
    let s = Sshd::start("ssh-tilde");
    let kh = s.dir.join("known_hosts");
    let name = format!(".labperf-test-tilde-{}", std::process::id());
    let o = labperf_in(&s.dir)
        .args([
            "deploy",
            &s.spec(),
            "--accept-new-host-key",
            "--known-hosts",
        ])
        .arg(&kh)
        .arg("--identity")
        .arg(s.dir.join("client_key"))
        .args(["--remote-dir", &format!("~/{name}")])
        .output()
        .unwrap();
    // sshd logs root in at its home directory.
    let home = std::path::PathBuf::from("/root");
    let made = home.join(&name);
    // Exactly what a `~` taken literally would make (a `/root/~` left by something else
    // does not count).
    let stray = home.join("~").join(&name).exists();
    let _ = std::fs::remove_dir_all(&made);
    let _ = std::fs::remove_dir_all(home.join("~").join(&name));
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(String::from_utf8_lossy(&o.stdout).contains(&format!("{name}/agents/")));
    assert!(!stray, "a directory named ~ was made");
    // A missing local agent is a local error, said as one.
    let o = labperf_in(&s.dir)
        .env("LABPERF_AGENT", "/nonexistent/labperf-agent")
        .args(["deploy", &s.spec(), "--known-hosts"])
        .arg(&kh)
        .arg("--identity")
        .arg(s.dir.join("client_key"))
        .arg("--remote-dir")
        .arg(s.dir.join("remote"))
        .output()
        .unwrap();
    let e = stderr(&o);
    assert_eq!(o.status.code(), Some(1));
    assert!(
        e.contains("/nonexistent/labperf-agent: cannot read the agent")
            && !e.contains("ssh config"),
        "{e}"
    );
}

#[test]
fn a_pushed_program_runs_from_the_cache_by_hash_and_a_wrong_architecture_is_refused() {
    let s = Sshd::start("ssh-push");
    let kh = s.dir.join("known_hosts");
    // A program built now (not on the lab machine), with a function of its own to find.
    let src = s.dir.join("pushed.c");
    std::fs::write(
        &src,
        "#include <stdlib.h>\n\
         __attribute__((noinline)) unsigned long pushed_spin(unsigned long n) {\n\
           volatile unsigned long x = 0; for (unsigned long i = 0; i < n; i++) x += i; return x; }\n\
         int main(int argc, char **argv) { unsigned long s = 0;\n\
           for (int r = 0; r < atoi(argv[1]); r++) s += pushed_spin(1000000); return s == 1; }\n",
    )
    .unwrap();
    let build = s.dir.join("build");
    std::fs::create_dir_all(&build).unwrap();
    let prog = build.join("my-prog");
    let st = Command::new("gcc")
        .args(["-O1", "-g", "-o"])
        .arg(&prog)
        .arg(&src)
        .status()
        .unwrap();
    assert!(st.success());
    let out = s.dir.join("push.lpr");
    let run = |extra: &[&str], cmd: &[&str]| {
        let mut c = record_cmd(&s, &kh, &s.dir.join("remote"));
        c.args(["--accept-new-host-key", "-e", "cpu-clock", "-c", "250000"])
            .args(["--format", "json", "--top", "0", "-o"])
            .arg(&out)
            .args(extra)
            .arg("--")
            .args(cmd)
            .output()
            .unwrap()
    };
    let push = ["--push", prog.to_str().unwrap()];
    let o = run(&push, &["my-prog", "400"]);
    let err = stderr(&o);
    assert!(o.status.success(), "{err}");
    assert!(
        err.contains("pushed ") && err.contains("my-prog (uploaded)"),
        "{err}"
    );
    // It ran from the push directory (by content hash), executable.
    let pushed: Vec<_> = std::fs::read_dir(s.dir.join("remote/push"))
        .unwrap()
        .flatten()
        .map(|e| e.path().join("my-prog"))
        .collect();
    assert_eq!(pushed.len(), 1, "{pushed:?}");
    assert_eq!(
        std::fs::read(&pushed[0]).unwrap(),
        std::fs::read(&prog).unwrap()
    );
    use std::os::unix::fs::PermissionsExt;
    let mode = std::fs::metadata(&pushed[0]).unwrap().permissions().mode();
    assert_eq!(mode & 0o777, 0o755);
    // The report names its function, from the local copy (stored by its build-id).
    // The report is on standard error: standard output, a pipe here, is the workload's.
    let j = labperf_tests::recorded_json(&o.stderr);
    let spin = j["tables"][0]["rows"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["name"] == "pushed_spin")
        .unwrap_or_else(|| panic!("pushed_spin not in {j}"))
        .clone();
    assert!(spin["samples"].as_u64().unwrap() > 100, "{spin}");
    assert!(spin["dso"].as_str().unwrap().ends_with("my-prog"), "{spin}");
    // The second run finds it by its hash: nothing uploaded.
    let o = run(&push, &["my-prog", "10"]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(
        stderr(&o).contains("my-prog (already there)"),
        "{}",
        stderr(&o)
    );
    // A directory pushed whole (a program and the data it reads beside it), run by its
    // path under the directory's name: the layout arrives, the data file not executable.
    let tools = s.dir.join("tools");
    std::fs::create_dir_all(tools.join("bin")).unwrap();
    std::fs::write(tools.join("data.txt"), "42\n").unwrap();
    std::fs::write(
        tools.join("bin/run"),
        "#!/bin/sh\nread n < \"${0%/*}/../data.txt\"; echo \"answer $n\"\n",
    )
    .unwrap();
    std::fs::set_permissions(
        tools.join("bin/run"),
        std::fs::Permissions::from_mode(0o755),
    )
    .unwrap();
    let o = run(
        &["--push", tools.to_str().unwrap(), "--no-report"],
        &["tools/bin/run"],
    );
    assert!(o.status.success(), "{}", stderr(&o));
    assert_eq!(String::from_utf8_lossy(&o.stdout), "answer 42\n");
    let data: Vec<_> = std::fs::read_dir(s.dir.join("remote/push"))
        .unwrap()
        .flatten()
        .map(|e| e.path().join("tools/data.txt"))
        .filter(|p| p.is_file())
        .collect();
    assert_eq!(data.len(), 1, "{data:?}");
    let mode = std::fs::metadata(&data[0]).unwrap().permissions().mode();
    assert_eq!(mode & 0o777, 0o644);
    // An aarch64 program for this x86_64 host: refused, with why, before anything is put
    // there or run (not even the agent, in a fresh remote directory).
    let arm = std::env::var_os("LABPERF_AGENTS_DIR")
        .map(std::path::PathBuf::from)
        .unwrap_or_else(|| labperf_tests::root().join("target/agents"))
        .join("aarch64-unknown-linux-musl/labperf-bench");
    let fresh = s.dir.join("remote-fresh");
    let o = record_cmd(&s, &kh, &fresh)
        .args(["--no-report", "-o"])
        .arg(s.dir.join("arm.lpr"))
        .arg("--push")
        .arg(&arm)
        .args(["--", "labperf-bench"])
        .output()
        .unwrap();
    assert!(!o.status.success());
    let err = stderr(&o);
    assert!(
        err.contains("it is an ELF file for aarch64") && err.contains("is x86_64"),
        "{err}"
    );
    assert!(err.contains("nothing was uploaded or run"), "{err}");
    assert!(!fresh.exists(), "something was put in {}", fresh.display());
    assert!(!s.dir.join("arm.lpr").exists());
}

/// A crafted x86_64 record file of `hostname`: for each mapping (path, build-id, address,
/// length, file offset, sampled addresses) its MMAP2 record and one sample per address,
/// in pid 9; frames closed every 256 KiB.
type Map<'a> = (&'a str, Option<Vec<u8>>, u64, u64, u64, Vec<u64>);
fn crafted_recording(hostname: &str, maps: &[Map]) -> Vec<u8> {
    use labperf_common::*;
    let mut enc = Encoder::new();
    let mut f = Encoder::prelude().to_vec();
    let mut h = labperf_tests::golden::header(labperf_tests::golden::Kind::Sample);
    h.hostname = hostname.into();
    h.arch = Arch::X86_64;
    f.extend(enc.header_frame(&h));
    for (path, build_id, addr, len, pgoff, ips) in maps {
        enc.push(&Record::Mmap2(Mmap2 {
            pid: 9,
            tid: 9,
            addr: *addr,
            len: *len,
            pgoff: *pgoff,
            path: path.to_string(),
            build_id: build_id.clone(),
            ..Default::default()
        }));
        for ip in ips {
            enc.push(&Record::Sample(Sample {
                pid: 9,
                tid: 9,
                ip: *ip,
                period: 1,
                ..Default::default()
            }));
        }
        if enc.pending_bytes() > 256 << 10 {
            f.extend(enc.flush().unwrap());
        }
    }
    f.extend(enc.trailer_frame(&Trailer::default()));
    f
}

/// The function the bench-like victim spends its time in, and a same-length name the
/// attacker's copy gives it (so both builds lay out the same).
const VICTIM_C: &str = "#include <time.h>\nvolatile unsigned long sink;\n__attribute__((noinline)) void spin_here(void) { for (unsigned long i = 0; i < 1000; i++) sink += i * i; }\nint main(void) { struct timespec a, b; clock_gettime(CLOCK_MONOTONIC, &a); do { spin_here(); clock_gettime(CLOCK_MONOTONIC, &b); } while ((b.tv_sec - a.tv_sec) * 1000000000L + (b.tv_nsec - a.tv_nsec) < 400000000L); return 0; }\n";

fn gcc(dir: &Path, out: &str, args: &[&str]) -> std::path::PathBuf {
    let src = dir.join("victim.c");
    std::fs::write(&src, VICTIM_C).unwrap();
    let o = Command::new("gcc")
        .args(["-O1", "-o"])
        .arg(dir.join(out))
        .arg(&src)
        .args(args)
        .output()
        .expect("gcc (cargo xtask setup installs it)");
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    dir.join(out)
}

/// An ELF file's build-id and the address of its function `name`.
fn elf_facts(p: &Path, name: &str) -> (Option<Vec<u8>>, u64) {
    use object::{Object, ObjectSymbol};
    let data = std::fs::read(p).unwrap();
    let f = object::File::parse(&*data).unwrap();
    let id = f.build_id().unwrap().map(<[u8]>::to_vec);
    let addr = f
        .symbols()
        .find(|s| s.name() == Ok(name))
        .unwrap_or_else(|| panic!("no {name} in {}", p.display()))
        .address();
    (id, addr)
}

/// The top function of `labperf report` of `file` (CSV, every row), with the cache of `dir`.
fn report_rows(dir: &Path, file: &Path) -> String {
    let o = labperf_in(dir)
        .args(["report", "--format", "csv", "--top", "0"])
        .arg(file)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", stderr(&o));
    String::from_utf8_lossy(&o.stdout).into_owned()
}

/// A compromised lab machine: the end of the run serves @CRAFTED@, and the fetch of each
/// victim's path serves the attacker's copy instead (an ELF of the right machine with the
/// build-id the recording names, or none); everything else runs as asked.
const POISONER: &str = r#"#!/bin/sh
case "$SSH_ORIGINAL_COMMAND" in
  "st='"*".lpr'; "*"exit 5;;"*)
    printf 'ok 0\n'; n=$(wc -c < '@CRAFTED@'); echo "$n"; cat '@CRAFTED@' ;;
  "f='@NOID@'; "*"exec head -c"* | "f='/opt/lab-only/libx.so'; "*"exec head -c"*)
    n=$(wc -c < '@FAKE_NOID@'); echo "$n"; cat '@FAKE_NOID@' ;;
  "f='@WITHID@'; "*"exec head -c"*)
    n=$(wc -c < '@FAKE_WITHID@'); echo "$n"; cat '@FAKE_WITHID@' ;;
  *"exec head -c"*) exit 3 ;;
  *) exec /bin/sh -c "$SSH_ORIGINAL_COMMAND" ;;
esac
"#;

#[test]
fn a_lab_machine_cannot_rename_functions_of_other_machines_recordings() {
    let dir = Sshd::keys("ssh-poison");
    // This machine's programs, one without a build-id and one with, and the recordings
    // made of them here.
    let noid = gcc(&dir, "victim-noid", &["-Wl,--build-id=none"]);
    let withid = gcc(&dir, "victim-id", &[]);
    let (none, spin_noid) = elf_facts(&noid, "spin_here");
    assert_eq!(none, None);
    let (id, spin_id) = elf_facts(&withid, "spin_here");
    let id = id.expect("gcc gives a build-id by default");
    let hexid: String = id.iter().map(|b| format!("{b:02x}")).collect();
    // The attacker's copies: the same code, the function renamed, the build-id claimed.
    let fake_noid = gcc(
        &dir,
        "fake-noid",
        &["-Dspin_here=evil_fake", "-Wl,--build-id=none"],
    );
    let fake_id = gcc(
        &dir,
        "fake-id",
        &[
            "-Dspin_here=evil_fake",
            &format!("-Wl,--build-id=0x{hexid}"),
        ],
    );
    assert_eq!(elf_facts(&fake_noid, "evil_fake"), (None, spin_noid));
    assert_eq!(
        elf_facts(&fake_id, "evil_fake"),
        (Some(id.clone()), spin_id)
    );
    let local: Vec<std::path::PathBuf> = [&noid, &withid]
        .iter()
        .map(|exe| {
            let out = dir.join(format!(
                "{}.lpr",
                exe.file_name().unwrap().to_string_lossy()
            ));
            let o = Command::new(bin("labperf-agent"))
                .args(["record", "-e", "cpu-clock", "-c", "200000", "-o"])
                .arg(&out)
                .arg("--")
                .arg(exe)
                .output()
                .unwrap();
            assert!(o.status.success(), "{}", stderr(&o));
            out
        })
        .collect();
    let top = |dir: &Path, file: &Path| {
        let rows = report_rows(dir, file);
        rows.lines()
            .nth(1)
            .unwrap_or("")
            .split(',')
            .nth(3)
            .unwrap_or("")
            .to_string()
    };
    for f in &local {
        assert_eq!(top(&dir, f), "spin_here", "{}", report_rows(&dir, f));
    }
    // The lab machine's recording claims this machine's hostname, the victims' paths and
    // build-ids, and a library of its own (absent here), each with a sample in the function.
    let hostname = String::from_utf8(Command::new("hostname").output().unwrap().stdout)
        .unwrap()
        .trim()
        .to_string();
    let base = 0x5555_0000_0000u64;
    let map = |path: &'static str, id: Option<Vec<u8>>, i: u64, spin: u64| -> Map<'static> {
        let at = base * (i + 1);
        (path, id, at, 0x10_0000, 0, vec![at + spin + 4; 3])
    };
    let noid_s: &'static str = Box::leak(noid.display().to_string().into_boxed_str());
    let withid_s: &'static str = Box::leak(withid.display().to_string().into_boxed_str());
    let crafted = dir.join("crafted.lpr");
    std::fs::write(
        &crafted,
        crafted_recording(
            &hostname,
            &[
                map(noid_s, None, 0, spin_noid),
                map(withid_s, Some(id.clone()), 1, spin_id),
                map("/opt/lab-only/libx.so", None, 2, spin_noid),
            ],
        ),
    )
    .unwrap();
    let script = POISONER
        .replace("@CRAFTED@", &crafted.display().to_string())
        .replace("@NOID@", noid_s)
        .replace("@WITHID@", withid_s)
        .replace("@FAKE_NOID@", &fake_noid.display().to_string())
        .replace("@FAKE_WITHID@", &fake_id.display().to_string());
    let a = Sshd::start_forcing(dir, "poisoner.sh", &script);
    let kh = a.dir.join("known_hosts");
    let from_a = a.dir.join("from-a.lpr");
    let o = record(
        &a,
        &kh,
        &[
            "--accept-new-host-key",
            "-e",
            "cpu-clock",
            "--no-report",
            "-o",
            from_a.to_str().unwrap(),
        ],
        &["/bin/true"],
    );
    assert!(o.status.success(), "{}", stderr(&o));
    // The attack landed: the fakes are in the cache, the build-id's shared entry included
    // (no entry was there: the first writer of a build-id), and the lab machine's own
    // recording is named from them where this machine has no file of the recorded build-id.
    let cache = a.dir.join("cache/labperf/binaries");
    assert_eq!(
        std::fs::read(cache.join(&hexid).join("elf")).ok(),
        std::fs::read(&fake_id).ok(),
        "{}",
        stderr(&o)
    );
    let rows = report_rows(&a.dir, &from_a);
    assert!(rows.contains(",evil_fake,"), "{rows}\n{}", stderr(&o));
    // The cache's index says which machine (its host key) the recording came from; a
    // recording made here came from none.
    let fp = String::from_utf8(
        Command::new("ssh-keygen")
            .arg("-lf")
            .arg(a.dir.join("host_key.pub"))
            .output()
            .unwrap()
            .stdout,
    )
    .unwrap();
    let fp = fp.split_whitespace().nth(1).unwrap().to_string();
    let info = |f: &Path| {
        let o = labperf_in(&a.dir).arg("info").arg(f).output().unwrap();
        String::from_utf8_lossy(&o.stdout).into_owned()
    };
    assert!(
        info(&from_a).contains(&format!(
            "fetched from:    {} (host key {fp}, x86_64)",
            a.spec()
        )),
        "{}",
        info(&from_a)
    );
    assert!(
        !info(&local[0]).contains("fetched from"),
        "{}",
        info(&local[0])
    );
    // This machine's recordings keep their names: its own files come first, and what a lab
    // machine fetched under a path serves that machine's recordings only.
    for f in &local {
        let rows = report_rows(&a.dir, f);
        assert!(!rows.contains("evil_fake"), "{}:\n{rows}", f.display());
        assert_eq!(top(&a.dir, f), "spin_here", "{rows}");
    }
    // Another lab machine (another host key) with a recording of the same claimed hostname
    // and the same path, whose own copy cannot be fetched: the first machine's copy of that
    // path is not used for it (its samples are addresses).
    let dir_b = Sshd::keys("ssh-poison-b");
    let crafted_b = dir_b.join("crafted.lpr");
    std::fs::write(
        &crafted_b,
        crafted_recording(
            &hostname,
            &[map("/opt/lab-only/libx.so", None, 2, spin_noid)],
        ),
    )
    .unwrap();
    let b = Sshd::start_forcing(
        dir_b,
        "b.sh",
        &POISONER
            .replace("@CRAFTED@", &crafted_b.display().to_string())
            .replace("'/opt/lab-only/libx.so'", "'/nothing/served'"),
    );
    let from_b = a.dir.join("from-b.lpr");
    let o = record_cmd(&b, &kh, &b.dir.join("remote"))
        .env("XDG_CACHE_HOME", a.dir.join("cache"))
        .args([
            "--accept-new-host-key",
            "-e",
            "cpu-clock",
            "--no-report",
            "-o",
        ])
        .arg(&from_b)
        .args(["--", "/bin/true"])
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", stderr(&o));
    let rows = report_rows(&a.dir, &from_b);
    assert!(!rows.contains("evil_fake"), "{rows}\n{}", stderr(&o));
    assert!(rows.contains(",libx.so+0x"), "{rows}");
}

/// Issue 47 F7: a lab machine that sends back the exact bytes of a recording made here
/// (and serves its own copy, a function renamed, of the file without build-id it samples)
/// does not become that recording's origin in the binary cache: the local recording keeps
/// its names and says no machine; the file the fetch wrote, and a copy of it, are that
/// machine's.
#[test]
fn a_lab_machine_that_sends_back_a_local_recording_does_not_become_its_origin() {
    let dir = Sshd::keys("ssh-replayed");
    let noid = gcc(&dir, "replayed-noid", &["-Wl,--build-id=none"]);
    let (_, spin) = elf_facts(&noid, "spin_here");
    let fake = gcc(
        &dir,
        "replayed-fake",
        &["-Dspin_here=evil_fake", "-Wl,--build-id=none"],
    );
    assert_eq!(elf_facts(&fake, "evil_fake"), (None, spin));
    let local = dir.join("local.lpr");
    let o = Command::new(bin("labperf-agent"))
        .args(["record", "-e", "cpu-clock", "-c", "200000", "-o"])
        .arg(&local)
        .arg("--")
        .arg(&noid)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", stderr(&o));
    let top = |dir: &Path, file: &Path| {
        let rows = report_rows(dir, file);
        let f = rows
            .lines()
            .nth(1)
            .unwrap_or("")
            .split(',')
            .nth(3)
            .unwrap_or("")
            .to_string();
        (f, rows)
    };
    assert_eq!(top(&dir, &local).0, "spin_here");
    let noid_s = noid.display().to_string();
    let script = POISONER
        .replace("@CRAFTED@", &local.display().to_string())
        .replace("@NOID@", &noid_s)
        .replace("@WITHID@", "/nothing/served")
        .replace("@FAKE_NOID@", &fake.display().to_string())
        .replace("@FAKE_WITHID@", "/nothing/served");
    let a = Sshd::start_forcing(dir, "replayer.sh", &script);
    let kh = a.dir.join("known_hosts");
    let from_a = a.dir.join("from-a.lpr");
    let o = record(
        &a,
        &kh,
        &[
            "--accept-new-host-key",
            "-e",
            "cpu-clock",
            "--no-report",
            "-o",
            from_a.to_str().unwrap(),
        ],
        &["/bin/true"],
    );
    assert!(o.status.success(), "{}", stderr(&o));
    assert_eq!(
        std::fs::read(&from_a).unwrap(),
        std::fs::read(&local).unwrap()
    );
    let info = |f: &Path| {
        let o = labperf_in(&a.dir).arg("info").arg(f).output().unwrap();
        String::from_utf8_lossy(&o.stdout).into_owned()
    };
    // The machine's claim stands for the file it sent, and for a copy of it made later.
    let copy = a.dir.join("copy-of-from-a.lpr");
    std::fs::copy(&from_a, &copy).unwrap();
    for f in [&from_a, &copy] {
        assert!(
            info(f).contains(&format!("fetched from:    {}", a.spec())),
            "{}: {}",
            f.display(),
            info(f)
        );
        let (name, rows) = top(&a.dir, f);
        assert_eq!(name, "evil_fake", "{rows}\n{}", stderr(&o));
    }
    // The recording made here keeps its names and says no machine.
    assert!(!info(&local).contains("fetched from"), "{}", info(&local));
    let (name, rows) = top(&a.dir, &local);
    assert_eq!(name, "spin_here", "{rows}");
}

/// A lab machine whose record file has 100,000 mappings (300 of them sampled), served at
/// the end of the run (then the run's files are removed, and `@DIR@/served` is made); its
/// binaries stall (`@DIR@/fetching`
/// made, then nothing for 20 s); with `@DIR@/stall-record` the record file itself stalls
/// after its first 1000 bytes; with `@DIR@/stall-upload` uploads stall (`@DIR@/uploading`
/// made, nothing read). Everything else runs as asked.
const STALLING: &str = r#"#!/bin/sh
case "$SSH_ORIGINAL_COMMAND" in
  "cat > '"*) if [ -e '@DIR@/stall-upload' ]; then : > '@DIR@/uploading'; sleep 20; exit 1; fi
    exec /bin/sh -c "$SSH_ORIGINAL_COMMAND" ;;
  "st='"*".lpr'; "*"exit 5;;"*)
    printf 'ok 0\n'; n=$(wc -c < '@CRAFTED@'); echo "$n"
    if [ -e '@DIR@/stall-record' ]; then
      head -c 1000 '@CRAFTED@'; : > '@DIR@/served'; sleep 20
    else
      # As the end of a run does: the run's files go once the record file is sent.
      cat '@CRAFTED@'; rm -f '@DIR@'/remote/runs/*; : > '@DIR@/served'
    fi ;;
  *"exec head -c"*) : > '@DIR@/fetching'; sleep 20 ;;
  *) exec /bin/sh -c "$SSH_ORIGINAL_COMMAND" ;;
esac
"#;

/// Sends SIGINT twice (30 ms apart) to `child` once `ready` says so, and returns how long
/// after the second one it exited, with its output. Gives up (killing it) after 5 s.
fn interrupt_twice(
    mut child: std::process::Child,
    what: &str,
    ready: impl Fn() -> bool,
) -> (Duration, Output) {
    let t = Instant::now();
    while !ready() {
        if t.elapsed() > Duration::from_secs(60) || child.try_wait().unwrap().is_some() {
            let _ = child.kill();
            let o = child.wait_with_output().unwrap();
            panic!("never got to {what}: {}", stderr(&o));
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    for i in 0..2 {
        if i == 1 {
            std::thread::sleep(Duration::from_millis(30));
        }
        // SAFETY: signalling our own child.
        unsafe { libc::kill(child.id() as i32, libc::SIGINT) };
    }
    let second = Instant::now();
    while child.try_wait().unwrap().is_none() {
        if second.elapsed() > Duration::from_secs(5) {
            let _ = child.kill();
            let o = child.wait_with_output().unwrap();
            panic!(
                "{what}: still running 5 s after the second SIGINT\n{}",
                stderr(&o)
            );
        }
        std::thread::sleep(Duration::from_millis(5));
    }
    let took = second.elapsed();
    (took, child.wait_with_output().unwrap())
}

#[test]
fn a_second_ctrl_c_ends_every_phase_within_a_second() {
    let dir = Sshd::keys("ssh-ctrlc");
    // 100,000 mappings of distinct files (about 3 MB): 300 of them sampled.
    let paths: Vec<String> = (0..100_000)
        .map(|i| format!("/opt/lab/lib{i}.so"))
        .collect();
    let maps: Vec<Map> = paths
        .iter()
        .enumerate()
        .map(|(i, p)| {
            let at = 0x1000_0000 + i as u64 * 0x1000;
            let ips = if i % 333 == 0 { vec![at + 8] } else { vec![] };
            (p.as_str(), None, at, 0x1000, 0, ips)
        })
        .collect();
    let crafted = dir.join("many.lpr");
    std::fs::write(&crafted, crafted_recording("lab", &maps)).unwrap();
    let script = STALLING
        .replace("@CRAFTED@", &crafted.display().to_string())
        .replace("@DIR@", &dir.display().to_string());
    let s = Sshd::start_forcing(dir, "stalling.sh", &script);
    let kh = s.dir.join("known_hosts");
    let cache = s.dir.join("cache/labperf/binaries");
    let start = |out: &Path| {
        for m in ["served", "fetching"] {
            let _ = std::fs::remove_file(s.dir.join(m));
        }
        record_cmd(&s, &kh, &s.dir.join("remote"))
            .args([
                "--accept-new-host-key",
                "-e",
                "cpu-clock",
                "--no-report",
                "-o",
            ])
            .arg(out)
            .args(["--", "/bin/true"])
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap()
    };
    // What an abort must leave: no record file, no temporary file here or in the cache,
    // no run file there.
    let clean = |out: &Path, o: &Output| {
        let err = stderr(o);
        assert_eq!(o.status.code(), Some(1), "{err}");
        assert!(err.contains("interrupted twice"), "{err}");
        assert!(!out.exists(), "{err}");
        let temp: Vec<String> = tree(&s.dir, &["remote/agents"])
            .into_iter()
            .filter(|p| p.contains(".fetch.") || p.contains(".tmp.") || p.ends_with(".part"))
            .collect();
        assert!(temp.is_empty(), "left behind: {temp:?}\n{err}");
        if let Ok(rd) = std::fs::read_dir(s.dir.join("remote/runs")) {
            let left: Vec<_> = rd.flatten().map(|e| e.file_name()).collect();
            assert!(left.is_empty(), "left on the lab machine: {left:?}\n{err}");
        }
    };
    // 0. The agent's upload stalls (the lab machine reads none of it).
    std::fs::write(s.dir.join("stall-upload"), "").unwrap();
    let out = s.dir.join("upload.lpr");
    let (took, o) = interrupt_twice(start(&out), "the upload", || {
        s.dir.join("uploading").exists()
    });
    eprintln!("in a stalled upload: exited {took:?} after the second SIGINT");
    clean(&out, &o);
    assert!(took < Duration::from_secs(1), "{took:?}\n{}", stderr(&o));
    std::fs::remove_file(s.dir.join("stall-upload")).unwrap();
    // 1. 300 ms after the record file came: reading its 100,000 mappings for the files
    // they name, or fetching the first of them.
    let out = s.dir.join("many-1.lpr");
    let (took, o) = interrupt_twice(start(&out), "the record file's fetch", || {
        s.dir.join("served").exists() && {
            std::thread::sleep(Duration::from_millis(300));
            true
        }
    });
    eprintln!("after the record file: exited {took:?} after the second SIGINT");
    clean(&out, &o);
    assert!(took < Duration::from_secs(1), "{took:?}\n{}", stderr(&o));
    // 2. A binary fetch that stalls.
    let out = s.dir.join("many-2.lpr");
    let (took, o) = interrupt_twice(start(&out), "the binary fetch", || {
        s.dir.join("fetching").exists()
    });
    eprintln!("in the binary fetch: exited {took:?} after the second SIGINT");
    clean(&out, &o);
    assert!(took < Duration::from_secs(1), "{took:?}\n{}", stderr(&o));
    // Nothing was cached from the stalled fetch.
    let cached: Vec<String> = tree(&cache, &[])
        .into_iter()
        .filter(|p| p.ends_with("elf"))
        .collect();
    assert!(cached.is_empty(), "{cached:?}");
    // 3. The record file's fetch stalls after 1000 bytes: no partial file, no run file left.
    std::fs::write(s.dir.join("stall-record"), "").unwrap();
    let out = s.dir.join("many-3.lpr");
    let (took, o) = interrupt_twice(start(&out), "the stalled record file", || {
        s.dir.join("served").exists()
    });
    eprintln!("in a stalled record fetch: exited {took:?} after the second SIGINT");
    clean(&out, &o);
    assert!(took < Duration::from_secs(1), "{took:?}\n{}", stderr(&o));
}

#[test]
fn a_second_ctrl_c_ends_a_connection_that_never_answers() {
    // A "lab machine" that takes the TCP connection and never says a word: the SSH
    // handshake would wait for its 60 s timeout.
    let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = l.local_addr().unwrap().port();
    let dir = labperf_tests::scratch("ssh-ctrlc-connect");
    let child = labperf_in(&dir)
        .args(["record", "--host", &format!("root@127.0.0.1:{port}")])
        .arg("--known-hosts")
        .arg(dir.join("known_hosts"))
        .args(["--accept-new-host-key", "--no-report", "-o"])
        .arg(dir.join("x.lpr"))
        .args(["--", "/bin/true"])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let c = l.accept();
        let _ = tx.send(());
        // Held open, silent, until the test ends.
        std::thread::sleep(Duration::from_secs(30));
        drop(c);
    });
    let (took, o) = interrupt_twice(child, "the connection", || {
        rx.try_recv().is_ok() && {
            // In the handshake by now.
            std::thread::sleep(Duration::from_millis(200));
            true
        }
    });
    eprintln!("in the handshake: exited {took:?} after the second SIGINT");
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    assert!(stderr(&o).contains("interrupted twice"), "{}", stderr(&o));
    assert!(took < Duration::from_secs(1), "{took:?}\n{}", stderr(&o));
    assert!(!dir.join("x.lpr").exists());
}
