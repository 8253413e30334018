//! Private OpenSSH sshd instances on 127.0.0.1 for the tests, and `labperf` isolated from
//! this machine's own ssh set-up.

use crate::{bin, scratch};
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// A private sshd: its own host key, one authorized client key, root login by key only.
pub struct Sshd {
    pub dir: PathBuf,
    pub port: u16,
    pub child: Child,
}

pub fn keygen(path: &Path) {
    keygen_type(path, "ed25519");
}

/// A key pair of type `ty` (ed25519, rsa, ecdsa) at `path` and `path.pub`.
pub fn keygen_type(path: &Path, ty: &str) {
    let mut c = Command::new("ssh-keygen");
    c.args(["-q", "-t", ty, "-N", "", "-f"]).arg(path);
    if ty == "rsa" {
        c.args(["-b", "2048"]);
    }
    assert!(c.status().unwrap().success());
}

pub fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

impl Sshd {
    pub fn start(name: &str) -> Sshd {
        let dir = Self::keys(name);
        Self::start_in(dir, free_port())
    }

    /// A scratch directory for test `name` with a host key, a client key and that key
    /// authorized.
    pub fn keys(name: &str) -> PathBuf {
        let dir = scratch(name);
        keygen(&dir.join("host_key"));
        keygen(&dir.join("client_key"));
        std::fs::copy(dir.join("client_key.pub"), dir.join("authorized_keys")).unwrap();
        dir
    }

    /// Starts sshd in `dir` (made by [`Sshd::keys`]) with every login running `script`
    /// (written to `dir/file`) as its ForceCommand: a lab machine that answers as the
    /// test wants, `$SSH_ORIGINAL_COMMAND` holding what labperf asked.
    pub fn start_forcing(dir: PathBuf, file: &str, script: &str) -> Sshd {
        use std::os::unix::fs::PermissionsExt;
        let wrapper = dir.join(file);
        std::fs::write(&wrapper, script).unwrap();
        std::fs::set_permissions(&wrapper, std::fs::Permissions::from_mode(0o755)).unwrap();
        Self::start_with(
            dir,
            free_port(),
            &format!("ForceCommand {}\n", wrapper.display()),
        )
    }

    pub fn start_in(dir: PathBuf, port: u16) -> Sshd {
        Self::start_with(dir, port, "")
    }

    /// Starts sshd with extra configuration lines.
    pub fn start_with(dir: PathBuf, port: u16, extra: &str) -> Sshd {
        Self::start_full(dir, port, extra, None)
    }

    /// A lab machine of its own name: sshd in a new UTS namespace (as a container is) whose
    /// hostname is `hostname`, so what it runs (the agent's header) says that name.
    pub fn start_named(name: &str, hostname: &str) -> Sshd {
        let dir = Self::keys(name);
        Self::start_full(dir, free_port(), "", Some(hostname))
    }

    fn start_full(dir: PathBuf, port: u16, extra: &str, hostname: Option<&str>) -> Sshd {
        Self::start_at(dir, "127.0.0.1", port, extra, hostname, None)
    }

    /// Starts sshd in `dir` (made by [`Sshd::keys`]) listening on `addr:port` inside the
    /// network namespace `netns` (through `ip netns exec`): a machine the test may not
    /// reach itself. Ready once sshd has written its pid file (after binding).
    pub fn start_in_netns(dir: PathBuf, netns: &str, addr: &str, port: u16) -> Sshd {
        Self::start_at(dir, addr, port, "", None, Some(netns))
    }

    /// [`Sshd::start_in_netns`] with `extra` lines of sshd_config (`AllowTcpForwarding no`).
    pub fn start_in_netns_with(
        dir: PathBuf,
        netns: &str,
        addr: &str,
        port: u16,
        extra: &str,
    ) -> Sshd {
        Self::start_at(dir, addr, port, extra, None, Some(netns))
    }

    fn start_at(
        dir: PathBuf,
        addr: &str,
        port: u16,
        extra: &str,
        hostname: Option<&str>,
        netns: Option<&str>,
    ) -> Sshd {
        let _ = std::fs::create_dir_all("/run/sshd");
        let cfg = dir.join("sshd_config");
        std::fs::write(
            &cfg,
            format!(
                "Port {port}\nListenAddress {addr}\nHostKey {d}/host_key\nPidFile {d}/sshd.pid\nAuthorizedKeysFile {d}/authorized_keys\nPermitRootLogin prohibit-password\nPasswordAuthentication no\nKbdInteractiveAuthentication no\nUsePAM no\nStrictModes no\n# The login shell skips root's .bashrc (bash reads it for ssh commands only at SHLVL 0):\n# this machine's own set-up (pyenv, say) is not the lab machine's.\nSetEnv SHLVL=1\n{extra}",
                d = dir.display()
            ),
        )
        .unwrap();
        let _ = std::fs::remove_file(dir.join("sshd.pid"));
        let mut c = match (hostname, netns) {
            (_, Some(ns)) => {
                let mut c = Command::new("ip");
                c.args(["netns", "exec", ns, "/usr/sbin/sshd"]);
                c
            }
            (None, None) => Command::new("/usr/sbin/sshd"),
            (Some(h), None) => {
                let mut c = Command::new("unshare");
                c.args(["--uts", "--", "sh", "-c"])
                    .arg("hostname \"$0\" && exec /usr/sbin/sshd \"$@\"")
                    .arg(h);
                c
            }
        };
        let child = c
            .args(["-D", "-e", "-f"])
            .arg(&cfg)
            .stderr(Stdio::null())
            .spawn()
            .expect("OpenSSH sshd (openssh-server, installed by `cargo xtask setup`)");
        let mut child = child;
        let t = Instant::now();
        let pid = dir.join("sshd.pid");
        let up = || match netns {
            None => std::net::TcpStream::connect((addr, port)).is_ok(),
            Some(_) => pid.is_file(),
        };
        while !up() {
            if let Ok(Some(st)) = child.try_wait() {
                panic!("sshd exited at once ({st}): see {}", cfg.display());
            }
            assert!(t.elapsed() < Duration::from_secs(10), "sshd did not start");
            std::thread::sleep(Duration::from_millis(50));
        }
        Sshd { dir, port, child }
    }

    /// An sshd with three host keys: ed25519 (`host_key`), RSA and ECDSA P-256.
    pub fn start_with_key_types(name: &str) -> Sshd {
        let dir = scratch(name);
        keygen(&dir.join("host_key"));
        keygen_type(&dir.join("host_rsa"), "rsa");
        keygen_type(&dir.join("host_ecdsa"), "ecdsa");
        keygen(&dir.join("client_key"));
        std::fs::copy(dir.join("client_key.pub"), dir.join("authorized_keys")).unwrap();
        let extra = format!(
            "HostKey {d}/host_rsa\nHostKey {d}/host_ecdsa\n",
            d = dir.display()
        );
        Self::start_with(dir, free_port(), &extra)
    }

    /// The public host key of type `file` (`host_key`, `host_rsa`, `host_ecdsa`): "type base64".
    pub fn host_key(&self, file: &str) -> String {
        let s = std::fs::read_to_string(self.dir.join(format!("{file}.pub"))).unwrap();
        s.split_whitespace().take(2).collect::<Vec<_>>().join(" ")
    }

    pub fn spec(&self) -> String {
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
pub fn labperf_in(dir: &Path) -> Command {
    let home = dir.join("home");
    std::fs::create_dir_all(&home).unwrap();
    let mut c = Command::new(bin("labperf"));
    c.env("HOME", &home)
        .env("XDG_CACHE_HOME", dir.join("cache"))
        .env_remove("SSH_AUTH_SOCK")
        .env("LABPERF_AGENT", bin("labperf-agent"));
    c
}
