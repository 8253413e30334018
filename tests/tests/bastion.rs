//! Lab machines behind a bastion: two real OpenSSH sshd in a network namespace of the
//! test's own, the bastion on the namespace's veth address (which the test reaches) and
//! the target on the namespace's own 127.0.0.1 (which it does not: checked). labperf
//! reaches the target through ProxyJump (ssh config), `-J`, and ProxyCommand.

use labperf_common::{decode_all, Record};
use labperf_tests::netns::Netns;
use labperf_tests::sshd::*;
use labperf_tests::{bin, scratch};
use std::net::{TcpStream, ToSocketAddrs};
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::{Duration, Instant};

/// A bastion and a target only the bastion reaches; fields dropped in order (the sshd
/// before their namespace).
struct Lab {
    bastion: Sshd,
    target: Sshd,
    ns: Netns,
    /// labperf's HOME, cache and files.
    dir: PathBuf,
    /// The client key both machines take.
    key: PathBuf,
    /// known_hosts with both machines' keys.
    kh: PathBuf,
}

impl Lab {
    fn new(name: &str) -> Lab {
        let ns = Netns::new();
        let dir = scratch(name);
        let bdir = Sshd::keys(&format!("{name}-bastion"));
        let tdir = Sshd::keys(&format!("{name}-target"));
        std::fs::copy(bdir.join("client_key.pub"), tdir.join("authorized_keys")).unwrap();
        let bastion = Sshd::start_in_netns(bdir, &ns.name, &ns.ns_addr, free_port());
        let target = Sshd::start_in_netns(tdir, &ns.name, "127.0.0.1", free_port());
        // The test itself cannot reach the target; it reaches the bastion.
        let addr = ("127.0.0.1", target.port)
            .to_socket_addrs()
            .unwrap()
            .next()
            .unwrap();
        assert!(
            TcpStream::connect_timeout(&addr, Duration::from_secs(1)).is_err(),
            "the target must be out of the test's reach"
        );
        let baddr = (ns.ns_addr.as_str(), bastion.port)
            .to_socket_addrs()
            .unwrap()
            .next()
            .unwrap();
        assert!(TcpStream::connect_timeout(&baddr, Duration::from_secs(3)).is_ok());
        let key = bastion.dir.join("client_key");
        let kh = dir.join("known_hosts");
        let lab = Lab {
            bastion,
            target,
            ns,
            dir,
            key,
            kh,
        };
        lab.write_known_hosts(
            &lab.bastion.host_key("host_key"),
            &lab.target.host_key("host_key"),
        );
        lab
    }

    fn write_known_hosts(&self, bastion_key: &str, target_key: &str) {
        std::fs::write(
            &self.kh,
            format!(
                "[{}]:{} {bastion_key}\n[127.0.0.1]:{} {target_key}\n",
                self.ns.ns_addr, self.bastion.port, self.target.port
            ),
        )
        .unwrap();
    }

    /// The `Host bastion` block.
    fn bastion_block(&self) -> String {
        format!(
            "Host bastion\n  HostName {}\n  Port {}\n  User root\n  IdentityFile {}\n",
            self.ns.ns_addr,
            self.bastion.port,
            self.key.display()
        )
    }

    /// A `Host NAME` block for the target with `how` (a ProxyJump or ProxyCommand line).
    fn target_block(&self, name: &str, how: &str) -> String {
        format!(
            "Host {name}\n  HostName 127.0.0.1\n  Port {}\n  User root\n  IdentityFile {}\n  {how}\n",
            self.target.port,
            self.key.display()
        )
    }

    /// Writes an ssh config of `blocks`; returns its path.
    fn config(&self, blocks: &[String]) -> PathBuf {
        let p = self.dir.join("ssh_config");
        std::fs::write(&p, blocks.concat()).unwrap();
        p
    }

    /// `labperf VERB` (words: `hosts check`) with this lab's known_hosts, ssh config and remote directory.
    fn labperf(&self, verb: &str, cfg: &Path) -> Command {
        let mut c = labperf_in(&self.dir);
        c.args(verb.split_whitespace())
            .arg("--known-hosts")
            .arg(&self.kh)
            .arg("--ssh-config")
            .arg(cfg)
            .arg("--remote-dir")
            .arg(self.dir.join("remote"));
        c
    }

    /// `record --host HOST` (`cmd` is `labperf record` and its options) of a workload printing its SSH_CONNECTION then running the
    /// bench; asserts the recording and that the target's sshd ran it, reached from its
    /// own 127.0.0.1 (the bastion's side), not the test's.
    fn record_on_target(&self, cmd: &mut Command, host: &str) {
        let out = self
            .dir
            .join(format!("{}.lpr", host.replace(['@', ':'], "_")));
        let o = cmd
            .args(["--host", host, "-e", "cpu-clock", "--no-report", "-o"])
            .arg(&out)
            .arg("--")
            .args([
                "sh",
                "-c",
                "echo \"conn: $SSH_CONNECTION\"; exec \"$0\" --duration 0.3",
            ])
            .arg(bin("labperf-bench"))
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(o.status.success(), "{err}");
        let stdout = String::from_utf8_lossy(&o.stdout);
        let conn: Vec<&str> = stdout
            .lines()
            .find_map(|l| l.strip_prefix("conn: "))
            .unwrap_or_else(|| panic!("no SSH_CONNECTION line: {stdout}"))
            .split_whitespace()
            .collect();
        assert_eq!(conn.len(), 4, "{stdout}");
        assert_eq!(
            (conn[0], conn[2], conn[3]),
            (
                "127.0.0.1",
                "127.0.0.1",
                self.target.port.to_string().as_str()
            ),
            "the target's sshd ran it, reached from inside the namespace: {stdout}"
        );
        let d = decode_all(&std::fs::read(&out).unwrap());
        assert!(d.losses.is_clean());
        let samples = d
            .records
            .iter()
            .filter(|r| matches!(r, Record::Sample(_)))
            .count();
        assert!(samples > 10, "{samples} samples: {err}");
    }
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

#[test]
fn record_through_the_proxyjump_of_the_ssh_config() {
    let lab = Lab::new("bastion-jump");
    let cfg = lab.config(&[
        lab.target_block("target", "ProxyJump bastion"),
        lab.bastion_block(),
    ]);
    lab.record_on_target(&mut lab.labperf("record", &cfg), "target");
    // `ProxyJump none` on the command line: directly, which cannot reach it.
    let o = lab
        .labperf("deploy", &cfg)
        .args(["target", "-J", "none", "--connect-timeout", "3"])
        .output()
        .unwrap();
    assert!(!o.status.success());
    assert!(
        stderr(&o).contains("cannot reach 127.0.0.1"),
        "{}",
        stderr(&o)
    );
}

#[test]
fn record_through_jump_hosts_on_the_command_line() {
    let lab = Lab::new("bastion-dash-j");
    // The jump host by its config name; the target by address, not in the config.
    let cfg = lab.config(&[lab.bastion_block()]);
    let target = format!("root@127.0.0.1:{}", lab.target.port);
    let mut c = lab.labperf("record", &cfg);
    c.args(["-J", "bastion", "--identity"]).arg(&lab.key);
    lab.record_on_target(&mut c, &target);
    // No config at all: the jump host as `user@host:port`, and two hops (the bastion
    // through itself: the first reaches it directly, the second through the first).
    let none = lab.dir.join("no-such-config");
    let hop = format!("root@{}:{}", lab.ns.ns_addr, lab.bastion.port);
    for jumps in [hop.clone(), format!("{hop},{hop}")] {
        let mut c = lab.labperf("record", &none);
        c.args(["--jump", &jumps, "--identity"]).arg(&lab.key);
        lab.record_on_target(&mut c, &target);
    }
}

#[test]
fn record_through_a_proxycommand() {
    let lab = Lab::new("bastion-proxycommand");
    // A ProxyCommand as `nc` would be used: a pipe to the target's address, run inside
    // the namespace (so it needs no ssh client and no netcat).
    let how = format!(
        "ProxyCommand exec ip netns exec {} {} %h %p",
        lab.ns.name,
        bin_of("labperf-tcp-pipe").display()
    );
    let cfg = lab.config(&[lab.target_block("target", &how)]);
    lab.record_on_target(&mut lab.labperf("record", &cfg), "target");
}

/// A binary of the tests crate.
fn bin_of(name: &str) -> PathBuf {
    assert_eq!(name, "labperf-tcp-pipe");
    PathBuf::from(env!("CARGO_BIN_EXE_labperf-tcp-pipe"))
}

#[test]
fn deploy_probe_and_hosts_check_through_the_bastion() {
    let lab = Lab::new("bastion-verbs");
    let cfg = lab.config(&[
        lab.target_block("target", "ProxyJump bastion"),
        lab.bastion_block(),
    ]);
    let o = lab.labperf("deploy", &cfg).arg("target").output().unwrap();
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(
        out.starts_with("target: x86_64, ") && out.contains(" (uploaded)"),
        "{out}"
    );
    let o = lab.labperf("probe", &cfg).arg("target").output().unwrap();
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(out.contains("x86_64"), "{out}");
    let o = lab
        .labperf("hosts check", &cfg)
        .arg("target")
        .output()
        .unwrap();
    let out = String::from_utf8_lossy(&o.stdout);
    let row = out
        .lines()
        .find(|l| l.starts_with("target "))
        .unwrap_or_else(|| panic!("{out}{}", stderr(&o)));
    assert!(
        row.contains(" x86_64 ") && row.contains("  ready"),
        "{out}{}",
        stderr(&o)
    );
}

#[test]
fn wrong_host_keys_of_the_target_and_of_the_bastion_are_refused() {
    let lab = Lab::new("bastion-keys");
    let cfg = lab.config(&[
        lab.target_block("target", "ProxyJump bastion"),
        lab.bastion_block(),
    ]);
    let (bkey, tkey) = (
        lab.bastion.host_key("host_key"),
        lab.target.host_key("host_key"),
    );
    let deploy = || {
        lab.labperf("deploy", &cfg)
            .args(["target", "--accept-new-host-key"])
            .output()
            .unwrap()
    };
    // The target shows the key the known_hosts line holds for the bastion: refused.
    lab.write_known_hosts(&bkey, &bkey);
    let o = deploy();
    let err = stderr(&o);
    assert!(!o.status.success());
    assert!(
        err.contains("HOST KEY OF target HAS CHANGED") && !err.contains("jump host"),
        "{err}"
    );
    // The bastion shows a key other than its recorded one: refused, and named.
    lab.write_known_hosts(&tkey, &tkey);
    let o = deploy();
    let err = stderr(&o);
    assert!(!o.status.success());
    assert!(
        err.contains("HOST KEY OF bastion (jump host to target) HAS CHANGED"),
        "{err}"
    );
    // Unknown to known_hosts: both keys refused without --accept-new-host-key, both
    // recorded with it (each under its own address), and then both checked.
    std::fs::write(&lab.kh, "").unwrap();
    let o = lab.labperf("deploy", &cfg).arg("target").output().unwrap();
    assert!(
        stderr(&o).contains("bastion (jump host to target) is not in"),
        "{}",
        stderr(&o)
    );
    let o = deploy();
    assert!(o.status.success(), "{}", stderr(&o));
    let kh = std::fs::read_to_string(&lab.kh).unwrap();
    assert!(
        kh.contains(&format!("[{}]:{} {bkey}", lab.ns.ns_addr, lab.bastion.port))
            && kh.contains(&format!("[127.0.0.1]:{} {tkey}", lab.target.port)),
        "{kh}"
    );
    let o = lab.labperf("deploy", &cfg).arg("target").output().unwrap();
    assert!(o.status.success(), "{}", stderr(&o));
}

#[test]
fn an_unapplied_option_is_said_once_per_host() {
    let lab = Lab::new("bastion-unapplied");
    let cfg = lab.config(&[
        lab.target_block("target", "ProxyJump bastion"),
        lab.target_block("again", "ProxyJump bastion"),
        lab.bastion_block(),
        "Host *\n  Ciphers aes128-ctr,aes256-ctr\n  ServerAliveInterval 5\nMatch exec \"true\"\n  Port 1\n"
            .into(),
    ]);
    let o = lab
        .labperf("deploy", &cfg)
        .args(["target,again", "--jobs", "1"])
        .output()
        .unwrap();
    let err = stderr(&o);
    assert!(o.status.success(), "{err}");
    for host in ["target", "again", "bastion"] {
        let said = format!("Ciphers (for {host}) is not applied\n");
        assert_eq!(err.matches(&said).count(), 1, "{said}: {err}");
    }
    assert_eq!(
        err.matches("the block `Match exec \"true\"` (for ").count(),
        3,
        "{err}"
    );
    assert!(!err.contains("ServerAliveInterval"), "harmless: {err}");
    let o = lab
        .labperf("deploy", &cfg)
        .args(["target", "-q"])
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(!stderr(&o).contains("not applied"), "{}", stderr(&o));
}

#[test]
fn a_hung_target_or_jump_host_times_out_within_the_connect_timeout() {
    let lab = Lab::new("bastion-hung");
    // Accepts (the kernel completes the connection) and never speaks.
    let hung = lab.ns.listen("127.0.0.1:0");
    let hung_port = hung.local_addr().unwrap().port();
    let cfg = lab.config(&[
        format!(
            "Host hung\n  HostName 127.0.0.1\n  Port {hung_port}\n  User root\n  ProxyJump bastion\n"
        ),
        lab.bastion_block(),
    ]);
    let outside = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let jump = format!("root@127.0.0.1:{}", outside.local_addr().unwrap().port());
    for (what, extra) in [("target", None), ("jump host", Some(jump.as_str()))] {
        let mut c = lab.labperf("deploy", &cfg);
        c.args(["hung", "--connect-timeout", "2"]);
        if let Some(j) = extra {
            c.args(["-J", j]);
        }
        let t = Instant::now();
        let o = c.output().unwrap();
        let took = t.elapsed();
        let err = stderr(&o);
        assert!(!o.status.success(), "{what}: {err}");
        assert!(
            err.contains("did not answer for 2 s while connecting"),
            "{what}: {err}"
        );
        assert!(
            took >= Duration::from_millis(1900) && took < Duration::from_secs(3),
            "{what}: {took:?}"
        );
    }
    drop(hung);
}

#[test]
fn a_bastion_that_refuses_forwarding_or_cannot_reach_the_target_says_why() {
    let lab = Lab::new("bastion-refuses");
    let cfg = lab.config(&[
        lab.target_block("nores", "ProxyJump bastion")
            .replace("HostName 127.0.0.1", "HostName no-such-host.invalid"),
        lab.bastion_block(),
    ]);
    // The name does not resolve on the bastion: said in `deploy` and in `hosts check`'s
    // Fix column (which said only "check the address and port in the hosts file").
    let o = lab.labperf("deploy", &cfg).arg("nores").output().unwrap();
    let err = stderr(&o);
    assert!(!o.status.success());
    assert!(
        err.contains(
            "bastion (jump host to nores) could not connect to it (the name does not resolve there"
        ),
        "{err}"
    );
    let o = lab
        .labperf("hosts check", &cfg)
        .arg("nores")
        .output()
        .unwrap();
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(
        out.contains("unreachable")
            && out.contains("no-such-host.invalid:")
            && out.contains("could not connect to it"),
        "{out}"
    );
    // A bastion whose sshd has `AllowTcpForwarding no`: named as the reason, not "check
    // that sshd runs there".
    let bdir = Sshd::keys("bastion-refuses-nofwd");
    std::fs::copy(
        lab.bastion.dir.join("client_key.pub"),
        bdir.join("authorized_keys"),
    )
    .unwrap();
    let nofwd = Sshd::start_in_netns_with(
        bdir,
        &lab.ns.name,
        &lab.ns.ns_addr,
        free_port(),
        "AllowTcpForwarding no\n",
    );
    let hop = format!("root@{}:{}", lab.ns.ns_addr, nofwd.port);
    let target = format!("root@127.0.0.1:{}", lab.target.port);
    let run = |verb: &str| {
        lab.labperf(verb, &cfg)
            .args([&target, "-J", &hop, "--accept-new-host-key", "--identity"])
            .arg(&lab.key)
            .output()
            .unwrap()
    };
    let o = run("deploy");
    let err = stderr(&o);
    assert!(!o.status.success());
    assert!(
        err.contains("(jump host to 127.0.0.1) refuses to forward connections to 127.0.0.1:")
            && err.contains("AllowTcpForwarding")
            && !err.contains("sshd runs there"),
        "{err}"
    );
    let o = run("hosts check");
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(
        out.contains("jump host refuses") && out.contains("AllowTcpForwarding"),
        "{out}"
    );
}

#[test]
fn record_through_a_proxycommand_of_openssh_ssh_w() {
    let lab = Lab::new("bastion-ssh-w");
    // The most common real ProxyCommand: OpenSSH's own client, `-W %h:%p`, with a key.
    let how = format!(
        "ProxyCommand ssh -F /dev/null -i {} -o UserKnownHostsFile={} -o BatchMode=yes -p {} -W %h:%p root@{}",
        lab.key.display(),
        lab.kh.display(),
        lab.bastion.port,
        lab.ns.ns_addr
    );
    let cfg = lab.config(&[lab.target_block("target", &how)]);
    lab.record_on_target(&mut lab.labperf("record", &cfg), "target");
    // The ssh it started is gone once labperf is.
    let key = lab.key.display().to_string();
    let left: Vec<String> = std::fs::read_dir("/proc")
        .unwrap()
        .flatten()
        .filter_map(|e| std::fs::read(e.path().join("cmdline")).ok())
        .map(|c| String::from_utf8_lossy(&c).replace('\0', " "))
        .filter(|c| c.starts_with("ssh ") && c.contains(&key))
        .collect();
    assert!(left.is_empty(), "{left:?}");
}

/// The processes whose command line is `cmdline` (arguments joined by spaces).
fn processes(cmdline: &str) -> Vec<i32> {
    std::fs::read_dir("/proc")
        .unwrap()
        .flatten()
        .filter_map(|e| {
            let pid = e.file_name().to_str()?.parse::<i32>().ok()?;
            let c = std::fs::read(e.path().join("cmdline")).ok()?;
            let c = String::from_utf8_lossy(&c).replace('\0', " ");
            (c.trim_end() == cmdline).then_some(pid)
        })
        .collect()
}

#[test]
fn interrupted_twice_while_a_proxycommand_hangs_leaves_no_process() {
    let lab = Lab::new("bastion-interrupt");
    let sleep = format!("sleep 4242.{}", std::process::id());
    let cfg = lab.config(&[lab.target_block("target", &format!("ProxyCommand exec {sleep}"))]);
    // Its stderr to a file: a ProxyCommand left running would hold a pipe open.
    let errf = lab.dir.join("stderr");
    let mut child = lab
        .labperf("record", &cfg)
        .args(["--host", "target", "--no-report", "--", "true"])
        .stdout(std::process::Stdio::null())
        .stderr(std::fs::File::create(&errf).unwrap())
        .spawn()
        .unwrap();
    let t = Instant::now();
    while processes(&sleep).is_empty() {
        assert!(t.elapsed() < Duration::from_secs(20), "no ProxyCommand");
        std::thread::sleep(Duration::from_millis(10));
    }
    for _ in 0..2 {
        // SAFETY: signalling our own child.
        unsafe { libc::kill(child.id() as i32, libc::SIGINT) };
        std::thread::sleep(Duration::from_millis(30));
    }
    let t = Instant::now();
    let status = loop {
        if let Some(st) = child.try_wait().unwrap() {
            break st;
        }
        assert!(t.elapsed() < Duration::from_secs(5), "still running");
        std::thread::sleep(Duration::from_millis(10));
    };
    let took = t.elapsed();
    std::thread::sleep(Duration::from_millis(200));
    let left = processes(&sleep);
    for pid in &left {
        // SAFETY: the test's own leftover ProxyCommand.
        unsafe { libc::kill(*pid, libc::SIGKILL) };
    }
    let err = std::fs::read_to_string(&errf).unwrap();
    assert!(took < Duration::from_secs(2), "{took:?}");
    assert_eq!(status.code(), Some(1), "{err}");
    assert!(err.contains("interrupted twice"), "{err}");
    assert!(
        left.is_empty(),
        "the ProxyCommand outlived labperf: {left:?}"
    );
}

/// Issue 47 F1: a host or user name that holds a shell command (an inventory's
/// `ansible_host` or `ansible_user`, a hosts file's address, `--host`) never runs, with
/// the usual bastion config: OpenSSH's own client as the ProxyCommand, `ssh -W %h:%p`
/// (which `sh -c` runs). Each is refused before any use, naming the character and where the
/// name came from; the same way reaches the target by a good name. And a name that is a
/// known_hosts pattern (`*,evil...`) is never written there by `--accept-new-host-key`.
#[test]
fn names_holding_shell_commands_never_run_through_an_openssh_proxycommand() {
    let lab = Lab::new("bastion-names");
    let ssh_w = |dest: &str| {
        format!(
            "ProxyCommand ssh -F /dev/null -i {} -o UserKnownHostsFile={} -o BatchMode=yes -p {} -W {dest} root@{}",
            lab.key.display(),
            lab.kh.display(),
            lab.bastion.port,
            lab.ns.ns_addr
        )
    };
    let block = |how: &str| {
        format!(
            "Host *\n  User root\n  IdentityFile {}\n  {how}\n",
            lab.key.display()
        )
    };
    let cfg = lab.config(&[block(&ssh_w("%h:%p"))]);
    let write = |name: &str, text: String| {
        let p = lab.dir.join(name);
        std::fs::write(&p, text).unwrap();
        p
    };
    // The way works: the target by a good name, through OpenSSH's `ssh -W %h:%p`.
    let port = lab.target.port;
    let good = write(
        "good.ini",
        format!("[lab]\ntarget ansible_host=127.0.0.1 ansible_port={port}\n"),
    );
    let o = lab
        .labperf("hosts check", &cfg)
        .arg("--hosts-file")
        .arg(&good)
        .arg("@lab")
        .output()
        .unwrap();
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(
        out.lines()
            .any(|l| l.starts_with("target ") && l.contains("  ready")),
        "{out}{}",
        stderr(&o)
    );
    let pwned = lab.dir.join("pwned");
    let run = format!("$(touch {})", pwned.display());
    let host_rule = ": a host name holds ASCII letters, digits, '-', '.', '_', and ':' and '%' of an IPv6 address";
    let ini = write(
        "host.ini",
        format!("[lab]\nok1 ansible_host=127.0.0.1\nnode1 ansible_host='node{run}.lab.example'\n"),
    );
    let user = write(
        "user.ini",
        format!(
            "[lab]\nnode1 ansible_host=127.0.0.1 ansible_port={port} ansible_user='root{run}'\n"
        ),
    );
    let toml = write(
        "hosts.toml",
        format!("[hosts.node1]\naddress = \"root@n{run}.lab.example:{port}\"\n"),
    );
    let cases: [(&str, Vec<String>, String); 4] = [
        (
            "an inventory's ansible_host",
            vec!["--hosts-file".into(), ini.display().to_string(), "@lab".into()],
            format!(
                "the hosts file {} is not valid: line 3: host 'node1', its ansible_host: the host name 'node{run}.lab.example' has '$' at character 5{host_rule}",
                ini.display()
            ),
        ),
        (
            "an inventory's ansible_user",
            vec!["--hosts-file".into(), user.display().to_string(), "@lab".into()],
            format!(
                "the hosts file {} is not valid: line 2: host 'node1', its ansible_user: the user name 'root{run}' has '$' at character 5",
                user.display()
            ),
        ),
        (
            "a hosts file's address",
            vec!["--hosts-file".into(), toml.display().to_string(), "node1".into()],
            format!(
                "the hosts file {} is not valid: line 2: host 'node1', its address: the host name 'n{run}.lab.example' has '$' at character 2{host_rule}",
                toml.display()
            ),
        ),
        (
            "--host",
            vec![format!("a{run}.lab.example")],
            format!("--host: the host name 'a{run}.lab.example' has '$' at character 2{host_rule}"),
        ),
    ];
    for (what, args, want) in cases {
        let o = lab
            .labperf("hosts check", &cfg)
            .args(&args)
            .output()
            .unwrap();
        // A file refused whole is said on standard error; one host's fault in its row.
        let err = format!("{}{}", String::from_utf8_lossy(&o.stdout), stderr(&o));
        assert!(!o.status.success(), "{what}: {err}");
        assert!(
            !pwned.exists(),
            "{what}: the name ran as a shell command: {err}"
        );
        assert!(err.contains(&want), "{what}: want {want}\n got {err}");
    }
    // A ProxyCommand that goes to the target whatever the name: `*,evil.lab.example` would
    // have been written to known_hosts as a pattern that matches every host.
    let cfg = lab.config(&[block(&ssh_w(&format!("127.0.0.1:{port}")))]);
    let kh = lab.dir.join("known_hosts.new");
    for name in ["*,evil.lab.example", "evil.lab.example,*"] {
        let inv = write(
            "evil.ini",
            format!("[lab]\nnode1 ansible_host='{name}' ansible_user=root\n"),
        );
        let o = labperf_in(&lab.dir)
            .args(["hosts", "check", "--accept-new-host-key", "--known-hosts"])
            .arg(&kh)
            .arg("--ssh-config")
            .arg(&cfg)
            .arg("--hosts-file")
            .arg(&inv)
            .arg("@lab")
            .output()
            .unwrap();
        let err = stderr(&o);
        let bad = name.find(['*', ',']).unwrap();
        let want = format!(
            "host 'node1', its ansible_host: the host name '{name}' has '{}' at character {}",
            &name[bad..bad + 1],
            bad + 1
        );
        assert!(err.contains(&want), "{name}: want {want}\n got {err}");
        let written = std::fs::read_to_string(&kh).unwrap_or_default();
        assert!(written.is_empty(), "{name}: {written}");
    }
    // A good name through the same ProxyCommand is written as itself.
    let o = labperf_in(&lab.dir)
        .args(["hosts", "check", "--accept-new-host-key", "--known-hosts"])
        .arg(&kh)
        .arg("--ssh-config")
        .arg(&cfg)
        .args(["--remote-dir"])
        .arg(lab.dir.join("remote"))
        .arg("root@good.lab.example")
        .output()
        .unwrap();
    let written = std::fs::read_to_string(&kh).unwrap_or_default();
    assert!(
        written.starts_with("good.lab.example ssh-"),
        "{written}{}",
        stderr(&o)
    );
}

/// Issue 47: a ProxyCommand whose children ignore SIGHUP is killed whole when the
/// connection is given up at `--connect-timeout`: labperf's standard error (which they
/// inherit) closes when labperf ends, so a `2>&1 | tail` is not kept waiting by them.
#[test]
fn proxycommand_children_that_ignore_sighup_end_with_the_connect_timeout() {
    use std::io::Read;
    let dir = scratch("proxy-sighup");
    let sleep = format!("sleep 20.{}", std::process::id());
    let cfg = dir.join("ssh_config");
    std::fs::write(
        &cfg,
        format!("Host stuck\n  HostName 127.0.0.1\n  User root\n  ProxyCommand (trap '' HUP; exec {sleep}) & exec sleep 300\n"),
    )
    .unwrap();
    let mut child = labperf_in(&dir)
        .args(["deploy", "stuck", "--connect-timeout", "2", "--known-hosts"])
        .arg(dir.join("known_hosts"))
        .arg("--ssh-config")
        .arg(&cfg)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    // Read to the end, as `2>&1 | tail` does.
    let t = Instant::now();
    let mut err = String::new();
    child
        .stderr
        .take()
        .unwrap()
        .read_to_string(&mut err)
        .unwrap();
    let took = t.elapsed();
    let status = child.wait().unwrap();
    let left = processes(&sleep);
    for pid in &left {
        // SAFETY: the test's own leftover process.
        unsafe { libc::kill(*pid, libc::SIGKILL) };
    }
    assert!(!status.success(), "{err}");
    assert!(
        err.contains("did not answer for 2 s while connecting"),
        "{err}"
    );
    assert!(left.is_empty(), "outlived labperf: {left:?}");
    assert!(
        took >= Duration::from_millis(1900) && took < Duration::from_secs(5),
        "standard error closed after {took:?}: {err}"
    );
}
