//! SSH to lab machines with ssh2: config, host keys (as OpenSSH checks them), authentication,
//! commands with bounded output and time, uploads, and fetches that stream to disk.
//!
//! Everything a lab machine sends is untrusted: command output is capped, a fetch reads
//! only a regular file and at most the size the caller allows, and a command that stops
//! answering times out. A dead connection is noticed by TCP keepalive and SSH keepalives.

use crate::lab::jump::{self, Keep};
use crate::lab::known_hosts::{self};
use crate::text::show;
use sha2::{Digest, Sha256};
use ssh2::{HashType, MethodType, Session};
use std::io::{Read, Write};
use std::net::{TcpStream, ToSocketAddrs};
use std::path::PathBuf;
use std::time::{Duration, Instant};

mod error;
mod framed;
mod shell;
mod target;
pub use error::*;
use framed::*;
pub use shell::*;
pub use target::*;

/// The programs labperf runs on a lab machine besides its POSIX shell: a lab machine needs
/// them (coreutils or busybox has them all). `tests/tidy.rs` checks that the code runs no
/// other, and that `cargo xtask setup` installs them here (the tests' sshd runs them).
pub const LAB_PROGRAMS: &[&str] = &[
    "sh",
    "uname",
    "cat",
    "mkdir",
    "test",
    "chmod",
    "mv",
    "rm",
    "wc",
    "head",
    "kill",
    "sha256sum",
    "grep",
    "ls",
    "tr",
    "id",
    "df",
    "tail",
];
/// Tried, when present, where `sha256sum` is missing.
pub const LAB_FALLBACKS: &[&str] = &["busybox", "shasum", "openssl"];

/// Largest output of a command whose output labperf reads (status lines, uname, sums).
pub const SMALL_OUTPUT: usize = 1 << 20;
/// How long a short command (mkdir, uname, a checksum) may stay silent.
pub const SHORT_TIMEOUT: Duration = Duration::from_secs(60);

pub struct Remote {
    sess: Session,
    /// The session's socket, waited on when a command has nothing to read.
    fd: std::os::unix::io::RawFd,
    pub target: Target,
    /// SHA-256 of the host key the machine showed (and known_hosts vouched for).
    host_key: Vec<u8>,
    /// What keeps a ProxyCommand or jump host's tunnel going: dropped after `sess`.
    keep: Option<Keep>,
}

/// The byte stream a session speaks over.
enum Link {
    Tcp(TcpStream),
    Unix(std::os::unix::net::UnixStream),
}

/// The connection to `name` took longer than `--connect-timeout` (every hop together).
fn timed_out(name: &str, timeout: Duration) -> RemoteError {
    RemoteError::Timeout {
        host: show(name).into_owned(),
        during: "connecting (TCP, SSH handshake and login, every jump host included)".into(),
        secs: timeout.as_secs(),
    }
}

/// What a remote command printed (bounded) and returned.
pub struct Output {
    pub stdout: Vec<u8>,
    pub stderr: Vec<u8>,
    pub status: i32,
}

/// One piece of a running command's output.
pub enum Chunk<'a> {
    Stdout(&'a [u8]),
    Stderr(&'a [u8]),
    /// Nothing arrived for a while (about 100 ms): a chance to look at interrupts.
    Idle,
}

/// Keepalive on the TCP connection: a peer that vanishes is noticed within about two
/// minutes (probes after 30 s idle, every 10 s, 6 tries; unacknowledged data gives up after 60 s).
fn keepalive(tcp: &TcpStream) {
    use std::os::fd::AsRawFd;
    let fd = tcp.as_raw_fd();
    let set = |level, opt, v: libc::c_int| {
        // SAFETY: setting an integer socket option on our own socket.
        unsafe {
            libc::setsockopt(
                fd,
                level,
                opt,
                &v as *const libc::c_int as *const libc::c_void,
                std::mem::size_of::<libc::c_int>() as libc::socklen_t,
            )
        };
    };
    set(libc::SOL_SOCKET, libc::SO_KEEPALIVE, 1);
    set(libc::IPPROTO_TCP, libc::TCP_KEEPIDLE, 30);
    set(libc::IPPROTO_TCP, libc::TCP_KEEPINTVL, 10);
    set(libc::IPPROTO_TCP, libc::TCP_KEEPCNT, 6);
    set(libc::IPPROTO_TCP, libc::TCP_USER_TIMEOUT, 60_000);
}

/// The end of a run (`$st` the agent's status file, `$f` its record file): the status
/// line, then, only when it says `ok`, the file's size in `$n` (exit 5: no file to send).
const STATUS_THEN_SIZE: &str = "head -c 4096 \"$st\" 2>/dev/null | head -n 1 | tr -d '\\n'; echo; case \"$(head -c 2 \"$st\" 2>/dev/null)\" in ok) ;; *) exit 5;; esac; [ -f \"$f\" ] || exit 3; n=$(wc -c < \"$f\") || exit 4";

/// The SHA-256 of a remote file with the first tool the lab machine has, or nothing; one
/// shell fragment (`$f` names the file), for [`Remote::fetch`] and the agent check.
pub const SHA256_OF_F: &str = "{ sha256sum \"$f\" || busybox sha256sum \"$f\" || shasum -a 256 \"$f\" || openssl dgst -sha256 -r \"$f\"; } 2>/dev/null | { read -r h _; echo \"$h\"; }";

impl Remote {
    /// Connects, checks the host key, and authenticates: ssh-agent (every identity), then
    /// the config's IdentityFiles and `--identity` files, then ~/.ssh/id_{ed25519,ecdsa,rsa}.
    /// A second interrupt ([`crate::interrupt::aborting`]) gives up at once: the connection
    /// is made on a thread of its own, left behind.
    pub fn connect(
        t: &Target,
        keys: &HostKeys,
        extra_identities: &[PathBuf],
        timeout: Duration,
    ) -> Result<Remote, RemoteError> {
        let (tx, rx) = std::sync::mpsc::channel();
        let (t2, keys, ids) = (t.clone(), keys.clone(), extra_identities.to_vec());
        // The ProxyCommands this connection starts: killed if it is given up.
        let groups = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
        let groups2 = groups.clone();
        std::thread::spawn(move || {
            let _ = tx.send(Self::connect_now(&t2, &keys, &ids, timeout, &groups2));
        });
        loop {
            match rx.recv_timeout(Duration::from_millis(50)) {
                Ok(r) => return r,
                Err(std::sync::mpsc::RecvTimeoutError::Timeout) => {
                    if crate::interrupt::aborting() {
                        for g in groups.lock().map(|g| g.clone()).unwrap_or_default() {
                            crate::interrupt::kill_group(g);
                        }
                        return Err(RemoteError::Interrupted {
                            host: show(&t.name).into_owned(),
                        });
                    }
                }
                Err(std::sync::mpsc::RecvTimeoutError::Disconnected) => {
                    return Err(RemoteError::Handshake {
                        host: t.host.clone(),
                        cause: ssh2::Error::from_errno(ssh2::ErrorCode::Session(-1)),
                    })
                }
            }
        }
    }

    /// Connects to `t` along its route, every hop's handshake and login within `timeout`
    /// of now in all.
    fn connect_now(
        t: &Target,
        keys: &HostKeys,
        extra_identities: &[PathBuf],
        timeout: Duration,
        groups: &std::sync::Mutex<Vec<i32>>,
    ) -> Result<Remote, RemoteError> {
        let deadline = Instant::now() + timeout;
        let hops: &[Target] = match &t.route {
            Route::Jump(hops) => hops,
            _ => &[],
        };
        let mut via: Option<Remote> = None;
        for hop in hops {
            let mut hop = hop.clone();
            hop.name = format!("{} (jump host to {})", hop.name, t.name);
            let (link, keep) = Self::link(&hop, via.take(), deadline, timeout, groups)?;
            via = Some(Self::login(
                &hop,
                link,
                keep,
                keys,
                extra_identities,
                deadline,
                timeout,
            )?);
        }
        let (link, keep) = Self::link(t, via, deadline, timeout, groups)?;
        let r = Self::login(t, link, keep, keys, extra_identities, deadline, timeout)?;
        r.sess.set_timeout(SHORT_TIMEOUT.as_millis() as u32);
        Ok(r)
    }

    /// The byte stream SSH to `t` goes over: through `via`'s `direct-tcpip` channel, else
    /// `t`'s ProxyCommand, else TCP; and what keeps it going.
    fn link(
        t: &Target,
        via: Option<Remote>,
        deadline: Instant,
        timeout: Duration,
        groups: &std::sync::Mutex<Vec<i32>>,
    ) -> Result<(Link, Option<Keep>), RemoteError> {
        let unreachable = |cause| RemoteError::Unreachable {
            host: show(&t.host).into_owned(),
            port: t.port,
            cause,
        };
        let left = || deadline.saturating_duration_since(Instant::now());
        if let Some(j) = via {
            j.sess.set_timeout(left().as_millis().max(1) as u32);
            let ch = j
                .sess
                .channel_direct_tcpip(&t.host, t.port, None)
                .map_err(|e| {
                    if e.code() == ssh2::ErrorCode::Session(-9) {
                        return timed_out(&j.target.name, timeout);
                    }
                    let msg = e.message();
                    if msg.contains("administratively prohibited") {
                        return RemoteError::ForwardingRefused {
                            jump: j.name().to_string(),
                            host: show(&t.host).into_owned(),
                            port: t.port,
                        };
                    }
                    let why = if msg.contains("connect failed") {
                        "could not connect to it (the name does not resolve there, or nothing listens on that port, as the jump host sees them)".to_string()
                    } else {
                        format!("could not open a connection to it: {msg}")
                    };
                    unreachable(std::io::Error::new(
                        std::io::ErrorKind::ConnectionRefused,
                        format!("{} {why}", j.name()),
                    ))
                })?;
            let Remote { sess, fd, keep, .. } = j;
            let (s, k) = jump::pump(sess, fd, ch, keep).map_err(unreachable)?;
            return Ok((Link::Unix(s), Some(k)));
        }
        if let Route::Command(c) = &t.route {
            let (s, k) = jump::command(c).map_err(|e| {
                unreachable(std::io::Error::new(
                    e.kind(),
                    format!("cannot start its ProxyCommand `{}`: {e}", show(c)),
                ))
            })?;
            if let (Keep::Command(c), Ok(mut g)) = (&k, groups.lock()) {
                g.push(c.id() as i32);
            }
            return Ok((Link::Unix(s), Some(k)));
        }
        let addr = (t.host.as_str(), t.port)
            .to_socket_addrs()
            .map_err(unreachable)?
            .next()
            .ok_or_else(|| {
                unreachable(std::io::Error::new(
                    std::io::ErrorKind::NotFound,
                    "no address",
                ))
            })?;
        let wait = left();
        if wait.is_zero() {
            return Err(timed_out(&t.name, timeout));
        }
        let tcp = TcpStream::connect_timeout(&addr, wait).map_err(unreachable)?;
        keepalive(&tcp);
        Ok((Link::Tcp(tcp), None))
    }

    /// The SSH session over `link`: handshake, host key, authentication (ssh-agent, then
    /// key files), all before `deadline`.
    fn login(
        t: &Target,
        link: Link,
        keep: Option<Keep>,
        keys: &HostKeys,
        extra_identities: &[PathBuf],
        deadline: Instant,
        timeout: Duration,
    ) -> Result<Remote, RemoteError> {
        let handshake = |cause: ssh2::Error| {
            if cause.code() == ssh2::ErrorCode::Session(-9) {
                return timed_out(&t.name, timeout);
            }
            RemoteError::Handshake {
                host: show(&t.name).into_owned(),
                cause,
            }
        };
        let mut sess = Session::new().map_err(handshake)?;
        let fd = match link {
            Link::Tcp(s) => {
                let fd = std::os::unix::io::AsRawFd::as_raw_fd(&s);
                sess.set_tcp_stream(s);
                fd
            }
            Link::Unix(s) => {
                let fd = std::os::unix::io::AsRawFd::as_raw_fd(&s);
                sess.set_tcp_stream(s);
                fd
            }
        };
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return Err(timed_out(&t.name, timeout));
        }
        sess.set_timeout(left.as_millis().max(1) as u32);
        let entries = known_hosts::read(&keys.file).map_err(|e| RemoteError::KnownHosts {
            file: keys.file.clone(),
            why: e.to_string(),
        })?;
        let name = known_hosts::lookup_name(&t.host, t.port);
        sess.method_pref(
            MethodType::HostKey,
            &known_hosts::algorithms(&entries, &name),
        )
        .map_err(handshake)?;
        sess.handshake().map_err(handshake)?;
        check_host_key(&sess, t, keys, &entries, &name)?;
        let host_key = sess
            .host_key_hash(HashType::Sha256)
            .map(<[u8]>::to_vec)
            .ok_or_else(|| RemoteError::BadHostKey {
                host: show(&t.name).into_owned(),
                why: "no SHA-256 of it".into(),
            })?;
        let remote = |sess: Session| {
            sess.set_keepalive(true, 15);
            Remote {
                sess,
                fd,
                target: t.clone(),
                host_key: host_key.clone(),
                keep,
            }
        };
        let mut tried = Vec::new();
        if let Ok(mut agent) = sess.agent() {
            if agent.connect().is_ok() && agent.list_identities().is_ok() {
                for id in agent.identities().unwrap_or_default() {
                    tried.push(format!("agent key {}", show(id.comment())));
                    if agent.userauth(&t.user, &id).is_ok() && sess.authenticated() {
                        return Ok(remote(sess));
                    }
                }
            }
        }
        let mut files: Vec<PathBuf> = t
            .identities
            .iter()
            .chain(extra_identities)
            .cloned()
            .collect();
        files.extend(
            ["id_ed25519", "id_ecdsa", "id_rsa"]
                .iter()
                .map(|n| home().join(".ssh").join(n)),
        );
        for f in files {
            if !f.is_file() {
                continue;
            }
            tried.push(f.display().to_string());
            if sess.userauth_pubkey_file(&t.user, None, &f, None).is_ok() && sess.authenticated() {
                return Ok(remote(sess));
            }
            if Instant::now() >= deadline {
                return Err(timed_out(&t.name, timeout));
            }
        }
        Err(RemoteError::AuthFailed {
            user: show(&t.user).into_owned(),
            host: show(&t.name).into_owned(),
            tried: if tried.is_empty() {
                "no keys (no agent, no key files)".into()
            } else {
                tried.join(", ")
            },
        })
    }

    /// SHA-256 of the machine's SSH host key, as it was checked when connecting: what
    /// keys its entries in the binary cache.
    pub fn host_key(&self) -> &[u8] {
        &self.host_key
    }

    /// The host's name for messages, escaped.
    pub fn name(&self) -> String {
        show(&self.target.name).into_owned()
    }

    fn ssh_err(&self, during: &str) -> impl Fn(ssh2::Error) -> RemoteError + '_ {
        let during = during.to_string();
        move |cause| {
            if cause.code() == ssh2::ErrorCode::Session(-9) {
                // LIBSSH2_ERROR_TIMEOUT
                return RemoteError::Timeout {
                    host: self.name(),
                    during: during.clone(),
                    secs: SHORT_TIMEOUT.as_secs(),
                };
            }
            RemoteError::Ssh {
                host: self.name(),
                during: during.clone(),
                cause,
            }
        }
    }

    /// Runs `cmd` through the remote shell, feeding `stdin`, handing its output to `on` as
    /// it arrives (nothing is kept). `idle` gives up when nothing arrives for that long;
    /// `None` waits as long as the command runs (a workload), with SSH keepalives. A second
    /// interrupt ([`crate::interrupt::aborting`]) ends it within 50 ms
    /// ([`RemoteError::Interrupted`]): nothing here blocks longer than that.
    /// Returns the exit status (128+9 when the command was killed or gave none).
    pub fn run_stream(
        &self,
        cmd: &str,
        stdin: Option<&[u8]>,
        idle: Option<Duration>,
        on: &mut dyn FnMut(Chunk) -> Result<(), RemoteError>,
    ) -> Result<i32, RemoteError> {
        self.exec(cmd, stdin, idle, None, on)
    }

    /// Runs `cmd` (no input, output bounded as [`Remote::run`]'s) whatever the interrupts,
    /// but for at most `within` in all: the clean-up after an abort.
    pub fn run_briefly(&self, cmd: &str, within: Duration) -> Result<Output, RemoteError> {
        let (mut out, mut err) = (Vec::new(), Vec::new());
        let status = self.exec(
            cmd,
            None,
            Some(SHORT_TIMEOUT),
            Some(Instant::now() + within),
            &mut |c| {
                match c {
                    Chunk::Stdout(b) if out.len() < SMALL_OUTPUT => out.extend_from_slice(b),
                    Chunk::Stderr(b) if err.len() < SMALL_OUTPUT => err.extend_from_slice(b),
                    _ => {}
                }
                Ok(())
            },
        )?;
        Ok(Output {
            stdout: out,
            stderr: err,
            status,
        })
    }

    /// [`Remote::run_stream`], with the session non-blocking throughout: every wait is on
    /// the socket for at most 50 ms, then the interrupt (unless `deadline` is given: then
    /// that deadline, for a clean-up) and the time limits are looked at.
    fn exec(
        &self,
        cmd: &str,
        stdin: Option<&[u8]>,
        idle: Option<Duration>,
        deadline: Option<Instant>,
        on: &mut dyn FnMut(Chunk) -> Result<(), RemoteError>,
    ) -> Result<i32, RemoteError> {
        let was_blocking = self.sess.is_blocking();
        self.sess.set_blocking(false);
        let r = self.exec_nonblocking(cmd, stdin, idle, deadline, on);
        self.sess.set_blocking(was_blocking);
        r
    }

    /// Whether to give up waiting: an abort (unless a clean-up's `deadline` is set), the
    /// deadline, or `since` older than `limit`.
    fn give_up(
        &self,
        during: &str,
        deadline: Option<Instant>,
        since: Instant,
        limit: Option<Duration>,
    ) -> Result<(), RemoteError> {
        if deadline.is_none() && crate::interrupt::aborting() {
            return Err(RemoteError::Interrupted { host: self.name() });
        }
        let late = deadline.is_some_and(|d| Instant::now() >= d);
        if late || limit.is_some_and(|l| since.elapsed() > l) {
            return Err(RemoteError::Timeout {
                host: self.name(),
                during: during.to_string(),
                secs: limit.unwrap_or(SHORT_TIMEOUT).as_secs(),
            });
        }
        Ok(())
    }

    /// Calls `f` until libssh2 no longer says it would block, waiting on the socket.
    fn again<T>(
        &self,
        during: &str,
        deadline: Option<Instant>,
        mut f: impl FnMut() -> Result<T, ssh2::Error>,
    ) -> Result<T, RemoteError> {
        let start = Instant::now();
        loop {
            match f() {
                // LIBSSH2_ERROR_EAGAIN
                Err(e) if e.code() == ssh2::ErrorCode::Session(-37) => {
                    self.give_up(during, deadline, start, Some(SHORT_TIMEOUT))?;
                    self.wait_readable(Duration::from_millis(50));
                }
                r => return r.map_err(self.ssh_err(during)),
            }
        }
    }

    fn exec_nonblocking(
        &self,
        cmd: &str,
        stdin: Option<&[u8]>,
        idle: Option<Duration>,
        deadline: Option<Instant>,
        on: &mut dyn FnMut(Chunk) -> Result<(), RemoteError>,
    ) -> Result<i32, RemoteError> {
        let during = format!(
            "running `{}`",
            show(&cmd.chars().take(60).collect::<String>())
        );
        let drop = |cause| RemoteError::Dropped {
            host: self.name(),
            during: during.clone(),
            cause,
        };
        let mut ch = self.again(&during, deadline, || self.sess.channel_session())?;
        self.again(&during, deadline, || ch.exec(cmd))?;
        let mut input = stdin.unwrap_or_default();
        let mut eof_sent = false;
        let mut buf = vec![0u8; 32768];
        let mut last = Instant::now();
        let mut last_keepalive = Instant::now();
        loop {
            let mut progressed = false;
            // The input, as the channel takes it; then its end.
            while !input.is_empty() {
                match ch.write(input) {
                    Ok(n) => {
                        input = &input[n..];
                        progressed = true;
                    }
                    Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => break,
                    Err(e) => return Err(drop(e)),
                }
            }
            if input.is_empty() && !eof_sent {
                match ch.send_eof() {
                    Ok(()) => eof_sent = true,
                    Err(e) if e.code() == ssh2::ErrorCode::Session(-37) => {}
                    Err(e) => return Err(self.ssh_err(&during)(e)),
                }
            }
            match ch.read(&mut buf) {
                Ok(0) => {}
                Ok(n) => {
                    on(Chunk::Stdout(&buf[..n]))?;
                    progressed = true;
                }
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {}
                Err(e) => return Err(drop(e)),
            }
            match ch.stderr().read(&mut buf) {
                Ok(0) => {}
                Ok(n) => {
                    on(Chunk::Stderr(&buf[..n]))?;
                    progressed = true;
                }
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {}
                Err(e) => return Err(drop(e)),
            }
            if ch.eof() && !progressed && eof_sent {
                break;
            }
            if progressed {
                last = Instant::now();
                // Between bursts of output too: a fast stream never holds off an abort.
                self.give_up(&during, deadline, last, None)?;
                continue;
            }
            self.give_up(&during, deadline, last, idle)?;
            if last_keepalive.elapsed() > Duration::from_secs(15) {
                last_keepalive = Instant::now();
                let _ = self.sess.keepalive_send();
            }
            // Let the caller look at interrupts; it may run other commands meanwhile.
            on(Chunk::Idle)?;
            self.sess.set_blocking(false);
            self.wait_readable(Duration::from_millis(50));
        }
        self.again(&during, deadline, || ch.wait_close())?;
        let status = ch.exit_status().map_err(self.ssh_err(&during))?;
        let signalled = ch.exit_signal().ok().and_then(|s| s.exit_signal).is_some();
        Ok(if status == -1 || signalled {
            128 + 9
        } else {
            status
        })
    }

    /// Waits until the socket has something to read (or can take what libssh2 is blocked
    /// writing), at most `limit`: a command's output is handled as soon as it arrives,
    /// with no sleep in between.
    fn wait_readable(&self, limit: Duration) {
        let mut events = libc::POLLIN;
        if self
            .sess
            .block_directions()
            .eq(&ssh2::BlockDirections::Outbound)
            || self.sess.block_directions() == ssh2::BlockDirections::Both
        {
            events |= libc::POLLOUT;
        }
        let mut p = libc::pollfd {
            fd: self.fd,
            events,
            revents: 0,
        };
        // SAFETY: one valid pollfd for the session's own socket.
        unsafe { libc::poll(&mut p, 1, limit.as_millis() as libc::c_int) };
    }

    /// Runs `cmd` and keeps its output, at most `limit` bytes of each stream.
    pub fn run(
        &self,
        cmd: &str,
        stdin: Option<&[u8]>,
        limit: usize,
    ) -> Result<Output, RemoteError> {
        let (mut out, mut err) = (Vec::new(), Vec::new());
        let during = format!(
            "running `{}`",
            show(&cmd.chars().take(60).collect::<String>())
        );
        let status = self.run_stream(cmd, stdin, Some(SHORT_TIMEOUT), &mut |c| {
            let (buf, b) = match c {
                Chunk::Stdout(b) => (&mut out, b),
                Chunk::Stderr(b) => (&mut err, b),
                Chunk::Idle => return Ok(()),
            };
            if buf.len() + b.len() > limit {
                return Err(RemoteError::TooMuchOutput {
                    host: self.name(),
                    during: during.clone(),
                    limit,
                });
            }
            buf.extend_from_slice(b);
            Ok(())
        })?;
        Ok(Output {
            stdout: out,
            stderr: err,
            status,
        })
    }

    /// Runs `cmd` and fails with its stderr unless it exits 0; returns its stdout.
    pub fn check(&self, what: &str, cmd: &str) -> Result<Vec<u8>, RemoteError> {
        let o = self.run(cmd, None, SMALL_OUTPUT)?;
        if o.status != 0 {
            return Err(RemoteError::Remote {
                host: self.name(),
                what: show(what).into_owned(),
                status: o.status,
                stderr: show(String::from_utf8_lossy(&o.stderr).trim()).into_owned(),
            });
        }
        Ok(o.stdout)
    }

    /// Writes `data` to `path` through a temporary name and a rename, so a partial
    /// upload never sits where a complete one would be.
    pub fn upload(&self, data: &[u8], path: &str, mode: &str) -> Result<(), RemoteError> {
        // Unique per upload: several workers of one labperf may put the same file at once
        // (host aliases of one machine).
        let tmp = format!("{path}.tmp.{}", unique_id());
        let (q, qt) = (shell_quote(path), shell_quote(&tmp));
        // The size is checked before the rename: an upload cut short (an interrupt, a
        // dropped connection) ends `cat` early, and never takes the file's place.
        let cmd = format!(
            "cat > {qt} && [ \"$(($(wc -c < {qt})))\" = {} ] && chmod {mode} {qt} && mv -f {qt} {q} || {{ s=$?; rm -f {qt}; exit $s; }}",
            data.len()
        );
        let o = self.run(&cmd, Some(data), SMALL_OUTPUT)?;
        if o.status != 0 {
            let stderr = show(String::from_utf8_lossy(&o.stderr).trim()).into_owned();
            return Err(if stderr.contains("No space left") {
                RemoteError::DiskFull {
                    host: self.name(),
                    path: show(path).into_owned(),
                }
            } else if stderr.contains("Permission denied") || stderr.contains("Read-only") {
                RemoteError::NotWritable {
                    host: self.name(),
                    path: show(path).into_owned(),
                    stderr,
                }
            } else {
                RemoteError::Remote {
                    host: self.name(),
                    what: format!("writing {}", show(path)),
                    status: o.status,
                    stderr,
                }
            });
        }
        Ok(())
    }

    /// The SHA-256 (hex) of a remote regular file, or `None` when it is missing or the lab
    /// machine has no SHA-256 tool.
    pub fn sha256(&self, path: &str) -> Result<Option<String>, RemoteError> {
        let cmd = format!(
            "f={}; [ -f \"$f\" ] || exit 0; {SHA256_OF_F}",
            shell_quote(path)
        );
        let out = self.check(&format!("checksumming {path}"), &cmd)?;
        let h = String::from_utf8_lossy(&out).trim().to_string();
        Ok((h.len() == 64 && h.chars().all(|c| c.is_ascii_hexdigit())).then_some(h))
    }

    /// Streams the remote regular file `path` into `dest`: at most `limit` bytes, checked
    /// against the size and SHA-256 the lab machine states first. Nothing but the file's
    /// own bytes reaches `dest`; on error the caller discards what `dest` got.
    pub fn fetch(
        &self,
        path: &str,
        limit: u64,
        dest: &mut dyn Write,
    ) -> Result<Fetched, RemoteError> {
        let cmd = format!(
            "f={}; [ -f \"$f\" ] || exit 3; n=$(wc -c < \"$f\") || exit 4; s=$({SHA256_OF_F}); echo \"$n $s\"; exec head -c \"$n\" \"$f\"",
            shell_quote(path)
        );
        let got = self.fetch_framed(&cmd, path, limit, dest, None)?;
        got.ok_or_else(|| RemoteError::NotRegular {
            host: self.name(),
            path: show(path).into_owned(),
        })
    }

    /// As [`Remote::fetch`], after the first line of the file `status` (put in `line`): the
    /// file is sent only when that line starts with `ok` (else `None`), and the shell
    /// command `then` runs once it was sent. One command for what the end of a run needs.
    pub fn fetch_after_status(
        &self,
        status: &str,
        path: &str,
        limit: u64,
        dest: &mut dyn Write,
        then: &str,
        line: &mut String,
    ) -> Result<Option<Fetched>, RemoteError> {
        let cmd = format!(
            "st={}; f={}; {STATUS_THEN_SIZE}; s=$({SHA256_OF_F}); echo \"$n $s\"; head -c \"$n\" \"$f\" || exit 4; {then}",
            shell_quote(status),
            shell_quote(path)
        );
        self.fetch_framed(&cmd, path, limit, dest, Some(line))
    }

    /// Runs a fetch command: [a status line,] `SIZE SHA256` then the file's bytes; checks
    /// them. Exit 5 (no file sent: the status said so) gives `None`.
    fn fetch_framed(
        &self,
        cmd: &str,
        path: &str,
        limit: u64,
        dest: &mut dyn Write,
        status_line: Option<&mut String>,
    ) -> Result<Option<Fetched>, RemoteError> {
        let mut f = Framed {
            status_done: status_line.is_none(),
            status_line,
            status_buf: Vec::new(),
            head: Vec::new(),
            want: None,
            got: 0,
            hasher: Sha256::new(),
            name: self.name(),
            shown: show(path).into_owned(),
            limit,
            dest,
            write_err: None,
        };
        let status = self.run_stream(cmd, None, Some(SHORT_TIMEOUT), &mut |c| {
            let Chunk::Stdout(b) = c else {
                return Ok(());
            };
            f.chunk(b)
        })?;
        f.finish(self.name(), status)
    }
}

#[cfg(test)]
mod tests {
    use crate::files::cache::b64;

    #[test]
    fn base64_matches_openssh() {
        assert_eq!(b64(b"hello"), "aGVsbG8");
        assert_eq!(b64(&[0xff, 0xee, 0xdd]), "/+7d");
    }
}
