//! `labperf record --host` against real OpenSSH sshd instances on 127.0.0.1, started here:
//! the full flow, host keys, authentication, exact arguments, and remote failures.

use labperf_common::decode_all;
use labperf_tests::{bin, scratch};
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

/// A private sshd: its own host key, one authorized client key, root login by key only.
struct Sshd {
    dir: PathBuf,
    port: u16,
    child: Child,
}

fn keygen(path: &Path) {
    let st = Command::new("ssh-keygen")
        .args(["-q", "-t", "ed25519", "-N", "", "-f"])
        .arg(path)
        .status()
        .unwrap();
    assert!(st.success());
}

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

impl Sshd {
    fn start(name: &str) -> Sshd {
        let dir = scratch(name);
        keygen(&dir.join("host_key"));
        keygen(&dir.join("client_key"));
        std::fs::copy(dir.join("client_key.pub"), dir.join("authorized_keys")).unwrap();
        Self::start_in(dir, free_port())
    }

    fn start_in(dir: PathBuf, port: u16) -> Sshd {
        Self::start_with(dir, port, "")
    }

    /// Starts sshd with extra configuration lines.
    fn start_with(dir: PathBuf, port: u16, extra: &str) -> Sshd {
        let _ = std::fs::create_dir_all("/run/sshd");
        let cfg = dir.join("sshd_config");
        std::fs::write(
            &cfg,
            format!(
                "Port {port}\nListenAddress 127.0.0.1\nHostKey {d}/host_key\nPidFile {d}/sshd.pid\nAuthorizedKeysFile {d}/authorized_keys\nPermitRootLogin prohibit-password\nPasswordAuthentication no\nKbdInteractiveAuthentication no\nUsePAM no\nStrictModes no\n{extra}",
                d = dir.display()
            ),
        )
        .unwrap();
        let child = Command::new("/usr/sbin/sshd")
            .args(["-D", "-e", "-f"])
            .arg(&cfg)
            .stderr(Stdio::null())
            .spawn()
            .expect("OpenSSH sshd (openssh-server, installed by `cargo xtask setup`)");
        let t = Instant::now();
        while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
            assert!(t.elapsed() < Duration::from_secs(10), "sshd did not start");
            std::thread::sleep(Duration::from_millis(50));
        }
        Sshd { dir, port, child }
    }

    fn spec(&self) -> String {
        format!("root@127.0.0.1:{}", self.port)
    }
}

impl Drop for Sshd {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// `labperf` isolated from this machine's own ssh set-up: HOME without keys (made under
/// `dir`), no ssh-agent, its cache under `dir`, and the built x86_64 agent.
fn labperf_in(dir: &Path) -> Command {
    let home = dir.join("home");
    std::fs::create_dir_all(&home).unwrap();
    let mut c = Command::new(bin("labperf"));
    c.env("HOME", &home)
        .env("XDG_CACHE_HOME", dir.join("cache"))
        .env_remove("SSH_AUTH_SOCK")
        .env("LABPERF_AGENT", bin("labperf-agent"));
    c
}

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
    let j: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    for f in [
        "int_divider_stalls",
        "fp_divider_stalls",
        "branch_mispredicts",
        "dcache_miss",
        "double_to_int",
        "nops",
        "serializing",
    ] {
        let n = j["rows"]
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
    // A 256 KiB tmpfs cannot hold the agent: the upload fails as "disk full" and leaves no partial file.
    let small = s.dir.join("small");
    std::fs::create_dir_all(&small).unwrap();
    let st = Command::new("mount")
        .args(["-t", "tmpfs", "-o", "size=256k", "tmpfs"])
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
    let (stdout, err) = (String::from_utf8_lossy(&o.stdout), stderr(&o));
    assert_eq!(stdout.matches("== root@127.0.0.1:").count(), 2, "{stdout}");
    assert_eq!(stdout.matches(" nops ").count(), 2, "{stdout}");
    assert!(
        err.contains("summary: 2 of 3 hosts recorded")
            && err.contains(&format!("127.0.0.1:{down}: FAILED: cannot reach")),
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
        "task-clock",
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
    assert_eq!(d.header.unwrap().mode, "stat");
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
  "f='"*".lpr'; "*)
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
    let dir = scratch("ssh-midfetch");
    keygen(&dir.join("host_key"));
    keygen(&dir.join("client_key"));
    std::fs::copy(dir.join("client_key.pub"), dir.join("authorized_keys")).unwrap();
    let wrapper = dir.join("cut-fetch.sh");
    std::fs::write(
        &wrapper,
        CUT_FETCH.replace("@DIR@", &dir.display().to_string()),
    )
    .unwrap();
    Command::new("chmod")
        .arg("755")
        .arg(&wrapper)
        .status()
        .unwrap();
    let s = Sshd::start_with(
        dir,
        free_port(),
        &format!("ForceCommand {}\n", wrapper.display()),
    );
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
    // The report printed after the run is the ProfileMe one, by PC: the branch row first.
    let stdout = String::from_utf8_lossy(&o.stdout);
    let branch = first_conditional_branch("branch_mispredicts");
    let line = stdout
        .lines()
        .find(|l| l.contains(&format!("{branch:#018x} branch_mispredicts")))
        .unwrap_or_else(|| panic!("{stdout}"));
    assert_eq!(line.split_whitespace().nth(3), Some("21.0"), "{line}");
}
