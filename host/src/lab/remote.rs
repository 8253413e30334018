//! SSH to lab machines with ssh2: config, host keys (as OpenSSH checks them), authentication,
//! commands with bounded output and time, uploads, and fetches that stream to disk.
//!
//! Everything a lab machine sends is untrusted: command output is capped, a fetch reads
//! only a regular file and at most the size the caller allows, and a command that stops
//! answering times out. A dead connection is noticed by TCP keepalive and SSH keepalives.

use crate::files::cache::b64;
use crate::lab::jump::{self, Keep};
use crate::lab::known_hosts::{self, Verdict};
use crate::lab::names;
use crate::lab::ssh_config;
use crate::text::show;
use sha2::{Digest, Sha256};
use ssh2::{HashType, MethodType, Session};
use std::io::{Read, Write};
use std::net::{TcpStream, ToSocketAddrs};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

#[derive(Debug, thiserror::Error)]
pub enum RemoteError {
    #[error("cannot reach {host}:{port}: {cause}. Check the host name and port, and that sshd runs there")]
    Unreachable {
        host: String,
        port: u16,
        cause: std::io::Error,
    },
    #[error("{jump} refuses to forward connections to {host}:{port} (administratively prohibited: its sshd's AllowTcpForwarding, PermitOpen or DisableForwarding; `ssh -J` is refused the same way). Ask its owner, or use another way there")]
    ForwardingRefused {
        jump: String,
        host: String,
        port: u16,
    },
    #[error("the SSH handshake with {host} failed: {cause}")]
    Handshake { host: String, cause: ssh2::Error },
    #[error("{host} is not in {file}; its {kind} key has SHA256 fingerprint {fingerprint}. Check that fingerprint with the machine's owner, then connect once with --accept-new-host-key")]
    UnknownHost {
        host: String,
        file: PathBuf,
        kind: String,
        fingerprint: String,
    },
    #[error("REMOTE HOST IDENTIFICATION HAS CHANGED: THE HOST KEY OF {host} HAS CHANGED since it was recorded in {file} (its {kind} key is now SHA256:{fingerprint}). A reinstalled machine or an attack: confirm the new key with its owner, then remove the old entry with `ssh-keygen -R '{entry}' -f {file}`")]
    HostKeyChanged {
        host: String,
        entry: String,
        file: PathBuf,
        kind: String,
        fingerprint: String,
    },
    #[error("THE HOST KEY OF {host} IS REVOKED in {file} (@revoked, {kind} SHA256:{fingerprint}): refusing to connect")]
    HostKeyRevoked {
        host: String,
        file: PathBuf,
        kind: String,
        fingerprint: String,
    },
    #[error("the host key {host} sent cannot be read ({why}): refusing to connect")]
    BadHostKey { host: String, why: String },
    #[error("cannot read the known_hosts file {file}: {why}")]
    KnownHosts { file: PathBuf, why: String },
    #[error("cannot log in to {user}@{host}: tried {tried}. Load your key into ssh-agent, pass --identity FILE, or set IdentityFile for this host in ~/.ssh/config")]
    AuthFailed {
        user: String,
        host: String,
        tried: String,
    },
    #[error("the connection to {host} dropped while {during}: {cause}")]
    Dropped {
        host: String,
        during: String,
        cause: std::io::Error,
    },
    #[error("{host} did not answer for {secs} s while {during}: the connection was given up")]
    Timeout {
        host: String,
        during: String,
        secs: u64,
    },
    #[error("ssh error on {host} while {during}: {cause}")]
    Ssh {
        host: String,
        during: String,
        cause: ssh2::Error,
    },
    #[error("{what} on {host} failed (exit status {status}): {stderr}")]
    Remote {
        host: String,
        what: String,
        status: i32,
        stderr: String,
    },
    #[error("{host} sent more than {limit} bytes while {during}: given up (a lab machine's answers are bounded)")]
    TooMuchOutput {
        host: String,
        during: String,
        limit: usize,
    },
    #[error("the remote disk of {host} is full while writing {path}: free space there, or use --remote-dir on a larger file system")]
    DiskFull { host: String, path: String },
    #[error("{path} on {host} is not writable ({stderr}): use --remote-dir with a directory you can write")]
    NotWritable {
        host: String,
        path: String,
        stderr: String,
    },
    #[error("{path} on {host} is not a regular file: not fetched")]
    NotRegular { host: String, path: String },
    #[error(
        "{path} on {host} is {size} bytes, over the {limit}-byte limit for this fetch: not fetched"
    )]
    TooLarge {
        host: String,
        path: String,
        size: u64,
        limit: u64,
    },
    #[error("{path} fetched from {host} does not match its checksum or size (remote {remote}, received {local}): the transfer was corrupted or cut; nothing was written")]
    Checksum {
        host: String,
        path: String,
        remote: String,
        local: String,
    },
    #[error("cannot read the ssh config {path}: {why}")]
    Config { path: PathBuf, why: String },
    #[error("{path}: {why}")]
    Local { path: PathBuf, why: String },
    #[error(transparent)]
    Output(#[from] crate::files::output::OutputError),
    #[error("--remote-dir {0:?}: {1}")]
    RemoteDir(String, String),
    #[error("interrupted twice: stopped what labperf was doing on {host}")]
    Interrupted { host: String },
    #[error("{origin}: {name}. Correct the name there (labperf refuses such names before any use, as OpenSSH does, so that no name runs as a shell command or becomes a known_hosts pattern)")]
    BadName {
        origin: String,
        name: names::BadName,
    },
}

/// Where and as whom to connect, after `~/.ssh/config`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Target {
    /// The name the user gave (used in messages and file names).
    pub name: String,
    pub host: String,
    pub user: String,
    pub port: u16,
    pub identities: Vec<PathBuf>,
    /// How the connection is made: directly, through a ProxyCommand, or through jump hosts.
    pub route: Route,
    /// The config's options for this host (and its jump hosts) that labperf does not
    /// apply, one line each naming option, file, line and host: said once by the caller.
    pub unapplied: Vec<String>,
}

/// How a connection to a [`Target`] is made.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub enum Route {
    /// TCP to `host:port`.
    #[default]
    Direct,
    /// `sh -c` of this ProxyCommand (tokens expanded); SSH over its standard input and output.
    Command(String),
    /// Through these jump hosts in order (ProxyJump, `-J`): each reached through the
    /// previous one's `direct-tcpip` channel, the first directly or by its ProxyCommand
    /// (its own `route`), the target through the last.
    Jump(Vec<Target>),
}

fn home() -> PathBuf {
    std::env::var_os("HOME")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("/"))
}

fn local_user() -> String {
    std::env::var("USER").unwrap_or_else(|_| "root".into())
}

/// Expands OpenSSH's `%` tokens of `s` for `t`: `%h` host name, `%p` port, `%r` remote
/// user, `%n` the name given, `%d` home, `%u` local user, `%%`; others stay as written.
/// With `shell` (a ProxyCommand, which `sh -c` runs) every value is quoted for where it
/// stands in the shell text: outside quotes single-quoted, inside double quotes its `$`,
/// `` ` ``, `"` and `\` escaped, inside single quotes each `'` closed and reopened; so a
/// name reads as one literal word, whatever it holds and however the command quotes it
/// (`nc %h %p`, `nc "%h" %p`, `'%h'`). A backslash before a token means what it would
/// have meant before the first character of the name (names start with a letter or digit).
fn expand_tokens(s: &str, t: &Target, shell: bool) -> String {
    #[derive(Clone, Copy, PartialEq)]
    enum Q {
        Out,
        Single,
        Double,
    }
    let mut q = Q::Out;
    // The last character pushed is a backslash that escapes the next one (outside single quotes).
    let mut escaped = false;
    let mut out = String::new();
    let plain = |out: &mut String, c: char, q: &mut Q, escaped: &mut bool| {
        out.push(c);
        if !shell {
            return;
        }
        if std::mem::take(escaped) {
            return;
        }
        match (*q, c) {
            (Q::Out | Q::Double, '\\') => *escaped = true,
            (Q::Out, '\'') => *q = Q::Single,
            (Q::Out, '"') => *q = Q::Double,
            (Q::Single, '\'') | (Q::Double, '"') => *q = Q::Out,
            _ => {}
        }
    };
    let mut chars = s.chars();
    while let Some(c) = chars.next() {
        if c != '%' {
            plain(&mut out, c, &mut q, &mut escaped);
            continue;
        }
        let value = match chars.next() {
            Some('h') => t.host.clone(),
            Some('p') => t.port.to_string(),
            Some('r') => t.user.clone(),
            Some('n') => t.name.clone(),
            Some('d') => home().to_string_lossy().into_owned(),
            Some('u') => local_user(),
            Some('%') => {
                plain(&mut out, '%', &mut q, &mut escaped);
                continue;
            }
            Some(o) => {
                plain(&mut out, '%', &mut q, &mut escaped);
                plain(&mut out, o, &mut q, &mut escaped);
                continue;
            }
            None => {
                plain(&mut out, '%', &mut q, &mut escaped);
                continue;
            }
        };
        if !shell {
            out.push_str(&value);
            continue;
        }
        match q {
            Q::Out => {
                // `\%h` is the name's first character escaped: the name itself.
                if std::mem::take(&mut escaped) {
                    out.pop();
                }
                out.push_str(&shell_quote(&value));
            }
            Q::Double => {
                // `"\%h"` keeps its backslash (OpenSSH's shell sees `\h`): a literal one.
                if std::mem::take(&mut escaped) {
                    out.push('\\');
                }
                for c in value.chars() {
                    if matches!(c, '$' | '`' | '"' | '\\') {
                        out.push('\\');
                    }
                    out.push(c);
                }
            }
            Q::Single => out.push_str(&value.replace('\'', "'\\''")),
        }
    }
    out
}

/// At most this many jump hosts on the way to one machine (a ProxyJump loop stops here).
const MAX_HOPS: usize = 8;

/// Parses `[user@]host[:port]`, applying the matching blocks of `config` (HostName, User,
/// Port, IdentityFile, ProxyJump, ProxyCommand). Explicit parts win over the config.
pub fn parse_target(spec: &str, config: Option<&Path>) -> Result<Target, RemoteError> {
    target_via(spec, "--host", config, None)
}

/// [`parse_target`], with `jump` (`-J`: `[user@]host[:port]`, comma-separated, or `none`)
/// in place of the config's ProxyJump and ProxyCommand for the target, as OpenSSH's `-J`.
/// `origin` says where `spec` came from (`--host`, a hosts file's entry), for a refused
/// name: every host and user name on the way (the spec's, the config's HostName and User,
/// every jump host's) is checked by [`names`] before it is used.
pub fn target_via(
    spec: &str,
    origin: &str,
    config: Option<&Path>,
    jump: Option<&str>,
) -> Result<Target, RemoteError> {
    let path = config
        .map(PathBuf::from)
        .unwrap_or_else(|| home().join(".ssh/config"));
    let cfg = ssh_config::Config::read(&path).map_err(|why| RemoteError::Config {
        path: path.clone(),
        why,
    })?;
    let mut notes = Vec::new();
    let mut t = resolve(spec, origin, cfg.as_ref(), &path, jump, 0, &mut notes)?;
    let mut seen = std::collections::HashSet::new();
    notes.retain(|n| seen.insert(n.clone()));
    t.unapplied = notes;
    Ok(t)
}

/// A name refused, said with where it came from.
fn refused(origin: &str) -> impl Fn(names::BadName) -> RemoteError + '_ {
    move |name| RemoteError::BadName {
        origin: origin.to_string(),
        name,
    }
}

/// One host of a route: its config, then its own way there (unless `jump` replaces it).
fn resolve(
    spec: &str,
    origin: &str,
    cfg: Option<&ssh_config::Config>,
    path: &Path,
    jump: Option<&str>,
    depth: usize,
    notes: &mut Vec<String>,
) -> Result<Target, RemoteError> {
    use ssh_config::Proxy;
    let config = |why| RemoteError::Config {
        path: path.to_path_buf(),
        why,
    };
    if depth > MAX_HOPS {
        return Err(config(format!(
            "the way to {} takes over {MAX_HOPS} jump hosts (a ProxyJump loop?)",
            show(spec)
        )));
    }
    let (user, name, port) = names::split_spec(spec);
    names::check_host(&name).map_err(refused(origin))?;
    if let Some(u) = &user {
        names::check_user(u).map_err(refused(origin))?;
    }
    let l = match cfg {
        Some(c) => c.lookup(&name).map_err(config)?,
        None => Default::default(),
    };
    let at = |keyword: &str, line: usize| {
        format!(
            "{keyword} for {} in {} line {line}",
            show(&name),
            path.display()
        )
    };
    notes.extend(
        l.unapplied
            .iter()
            .map(|(u, why)| format!("{u} (for {}) is not applied{why}", show(&name))),
    );
    let mut t = Target {
        name: name.clone(),
        host: l.host(&name),
        user: match user {
            Some(u) => u,
            None => match &l.user {
                Some(u) => {
                    names::check_user(u).map_err(refused(&at("User", l.user_line)))?;
                    u.clone()
                }
                None => {
                    let u = local_user();
                    names::check_user(&u).map_err(refused("$USER (the local user)"))?;
                    u
                }
            },
        },
        port: port.or(l.port).unwrap_or(22),
        identities: Vec::new(),
        route: Route::Direct,
        unapplied: Vec::new(),
    };
    if l.host_name.is_some() {
        names::check_host(&t.host).map_err(refused(&at("HostName", l.host_name_line)))?;
    }
    t.identities = l
        .identities
        .iter()
        .map(|f| {
            let f = f.to_string_lossy();
            match f.strip_prefix("~/") {
                Some(rest) => home().join(expand_tokens(rest, &t, false)),
                None => PathBuf::from(expand_tokens(&f, &t, false)),
            }
        })
        .collect();
    let (proxy, hops_from) = match jump {
        Some(j) if j.eq_ignore_ascii_case("none") => (Proxy::None, String::new()),
        Some(j) => (
            Proxy::Jump(j.split(',').map(str::to_string).collect()),
            "-J".to_string(),
        ),
        None => (
            l.proxy.unwrap_or(Proxy::None),
            at("ProxyJump", l.proxy_line),
        ),
    };
    t.route = match proxy {
        Proxy::None => Route::Direct,
        Proxy::Command(c) => Route::Command(expand_tokens(&c, &t, true)),
        Proxy::Jump(hops) => jump_chain(&hops, &hops_from, cfg, path, &name, depth, notes)?,
    };
    Ok(t)
}

/// The jump hosts of a ProxyJump (or `-J`) to `name`, in order: the first by its own
/// config (its own way there included), the others reached through the one before them,
/// as OpenSSH's `ssh -J` reaches them; each name checked as said by `origin`.
fn jump_chain(
    hops: &[String],
    origin: &str,
    cfg: Option<&ssh_config::Config>,
    path: &Path,
    name: &str,
    depth: usize,
    notes: &mut Vec<String>,
) -> Result<Route, RemoteError> {
    let config = |why| RemoteError::Config {
        path: path.to_path_buf(),
        why,
    };
    let hops: Vec<&str> = hops
        .iter()
        .map(|h| h.trim())
        .filter(|h| !h.is_empty())
        .collect();
    let Some(first) = hops.first() else {
        return Err(config(format!("an empty ProxyJump for {}", show(name))));
    };
    let mut first = resolve(first, origin, cfg, path, None, depth + 1, notes)?;
    let mut chain = match std::mem::take(&mut first.route) {
        Route::Jump(before) => before,
        r => {
            first.route = r;
            Vec::new()
        }
    };
    chain.push(first);
    for h in &hops[1..] {
        chain.push(resolve(
            h,
            origin,
            cfg,
            path,
            Some("none"),
            depth + 1,
            notes,
        )?);
    }
    if chain.len() > MAX_HOPS {
        return Err(config(format!(
            "the way to {} takes over {MAX_HOPS} jump hosts",
            show(name)
        )));
    }
    Ok(Route::Jump(chain))
}

/// A name part no other call in this machine's processes gives: the pid, a per-process
/// counter and the time, for temporary and run files (several hosts run at once).
pub fn unique_id() -> String {
    static N: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    format!(
        "{}-{}-{}",
        std::process::id(),
        N.fetch_add(1, std::sync::atomic::Ordering::Relaxed),
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos())
    )
}

/// Single-quotes `s` for a POSIX shell: every byte stays literal (spaces, quotes, `;$()`, newlines).
pub fn shell_quote(s: &str) -> String {
    format!("'{}'", s.replace('\'', r"'\''"))
}

/// One argument for a POSIX shell, byte for byte: single-quoted when it is UTF-8; else a
/// `printf` of its octal escapes (ssh sends commands as text), with a trailing `.` kept
/// and cut again so that command substitution keeps trailing newlines.
pub fn shell_arg(a: &std::ffi::OsStr) -> String {
    use std::os::unix::ffi::OsStrExt;
    match a.to_str() {
        Some(s) => shell_quote(s),
        None => {
            let octal: String = a.as_bytes().iter().map(|b| format!("\\{b:03o}")).collect();
            format!("\"$(printf '{octal}.')\"")
        }
    }
}

/// A shell command line of arguments, byte for byte (see [`shell_arg`]). Arguments that
/// are not UTF-8 are first put in variables, cut of their guard dot, then expanded.
pub fn shell_words(args: &[std::ffi::OsString]) -> (String, String) {
    let mut prelude = String::new();
    let mut words = Vec::new();
    for (i, a) in args.iter().enumerate() {
        if a.to_str().is_some() {
            words.push(shell_arg(a));
        } else {
            prelude.push_str(&format!("lp{i}={}; lp{i}=\"${{lp{i}%.}}\"; ", shell_arg(a)));
            words.push(format!("\"$lp{i}\""));
        }
    }
    (prelude, words.join(" "))
}

/// `--remote-dir`, as a path the remote shell takes literally: `~/x` (or `~`) is the
/// login directory, where relative paths start anyway; `~user/` is refused.
pub fn remote_dir(dir: &str) -> Result<String, RemoteError> {
    let bad = |why: &str| Err(RemoteError::RemoteDir(dir.into(), why.into()));
    if dir.is_empty() {
        return bad("empty");
    }
    if dir.contains('\0') || dir.contains('\n') {
        return bad("it holds a NUL or newline character");
    }
    if dir == "~" {
        return Ok(".".into());
    }
    if let Some(rest) = dir.strip_prefix("~/") {
        return Ok(if rest.is_empty() {
            ".".into()
        } else {
            rest.into()
        });
    }
    if dir.starts_with('~') {
        return bad("~user/ is not supported: give the path relative to the login directory, or an absolute one");
    }
    Ok(dir.into())
}

/// How host keys are checked.
#[derive(Debug, Clone)]
pub struct HostKeys {
    pub file: PathBuf,
    /// Record unknown hosts (OpenSSH's `StrictHostKeyChecking=accept-new`); changed keys are always refused.
    pub accept_new: bool,
}

impl Default for HostKeys {
    fn default() -> Self {
        HostKeys {
            file: home().join(".ssh/known_hosts"),
            accept_new: false,
        }
    }
}

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

/// What a fetch received.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Fetched {
    pub size: u64,
    pub sha256: String,
    /// False when the lab machine had no SHA-256 tool: the size alone was checked.
    pub checksummed: bool,
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
        f.finish(self, status)
    }
}

/// One fetch as its output comes ([`Remote::fetch_framed`]): [a status line,] the `SIZE
/// SHA256` line, then the file's bytes, hashed and passed on to `dest`.
struct Framed<'a> {
    status_done: bool,
    status_line: Option<&'a mut String>,
    status_buf: Vec<u8>,
    head: Vec<u8>,
    /// The size and SHA-256 the lab machine stated.
    want: Option<(u64, String)>,
    got: u64,
    hasher: Sha256,
    name: String,
    shown: String,
    limit: u64,
    dest: &'a mut dyn Write,
    /// The first error writing to `dest` (the rest of the file is still read and hashed).
    write_err: Option<std::io::Error>,
}

/// Adds `b` up to its first newline to `line` (at most `limit` bytes in all, or
/// `TooMuchOutput` on `host` while doing `during`): how many bytes of `b` the line took, or
/// `None` while it has no newline yet.
fn line_into(
    line: &mut Vec<u8>,
    b: &[u8],
    limit: usize,
    host: &str,
    during: impl FnOnce() -> String,
) -> Result<Option<usize>, RemoteError> {
    let i = b.iter().position(|&x| x == b'\n');
    let take = i.map_or(b.len(), |i| i + 1);
    line.extend_from_slice(&b[..take]);
    if line.len() > limit {
        return Err(RemoteError::TooMuchOutput {
            host: host.to_string(),
            during: during(),
            limit,
        });
    }
    Ok(i.map(|_| take))
}

impl Framed<'_> {
    /// One chunk of the command's standard output.
    fn chunk(&mut self, mut b: &[u8]) -> Result<(), RemoteError> {
        if !self.status_done {
            match self.status(b)? {
                Some(rest) => b = rest,
                None => return Ok(()),
            }
        }
        if self.want.is_none() {
            if b.is_empty() {
                return Ok(());
            }
            match self.size_line(b)? {
                Some(rest) => b = rest,
                None => return Ok(()),
            }
        }
        self.body(b)
    }

    /// The status line (at most 4200 bytes): what follows it, or `None` while it is
    /// incomplete.
    fn status<'b>(&mut self, b: &'b [u8]) -> Result<Option<&'b [u8]>, RemoteError> {
        let during = || format!("reading the status of {}", self.shown);
        let Some(take) = line_into(&mut self.status_buf, b, 4200, &self.name, during)? else {
            return Ok(None);
        };
        self.status_done = true;
        if let Some(l) = self.status_line.as_mut() {
            **l = String::from_utf8_lossy(&self.status_buf).into_owned();
        }
        Ok(Some(&b[take..]))
    }

    /// The `SIZE SHA256` line (at most 200 bytes; a size over the limit is refused): what
    /// follows it, or `None` while it is incomplete.
    fn size_line<'b>(&mut self, b: &'b [u8]) -> Result<Option<&'b [u8]>, RemoteError> {
        let during = || format!("fetching {}", self.shown);
        let Some(take) = line_into(&mut self.head, b, 200, &self.name, during)? else {
            return Ok(None);
        };
        let line = String::from_utf8_lossy(&self.head).into_owned();
        let mut it = line.split_whitespace();
        let size: u64 = it.next().and_then(|n| n.parse().ok()).unwrap_or(u64::MAX);
        if size > self.limit {
            return Err(RemoteError::TooLarge {
                host: self.name.clone(),
                path: self.shown.clone(),
                size,
                limit: self.limit,
            });
        }
        self.want = Some((size, it.next().unwrap_or("").to_string()));
        Ok(Some(&b[take..]))
    }

    /// The file's bytes: never more than the stated size.
    fn body(&mut self, b: &[u8]) -> Result<(), RemoteError> {
        let (size, _) = self.want.as_ref().expect("set above");
        if self.got + b.len() as u64 > *size {
            return Err(RemoteError::TooMuchOutput {
                host: self.name.clone(),
                during: format!("fetching {}", self.shown),
                limit: *size as usize,
            });
        }
        self.got += b.len() as u64;
        self.hasher.update(b);
        if self.write_err.is_none() {
            if let Err(e) = self.dest.write_all(b) {
                self.write_err = Some(e);
            }
        }
        Ok(())
    }

    /// The command's exit status and what came, checked against the stated size and hash.
    fn finish(self, r: &Remote, status: i32) -> Result<Option<Fetched>, RemoteError> {
        let shown = self.shown;
        if status == 5 && !self.status_buf.is_empty() {
            return Ok(None);
        }
        if status == 3 {
            return Err(RemoteError::NotRegular {
                host: r.name(),
                path: shown,
            });
        }
        if status != 0 {
            return Err(RemoteError::Remote {
                host: r.name(),
                what: format!("reading {shown}"),
                status,
                stderr: String::new(),
            });
        }
        if let Some(e) = self.write_err {
            return Err(RemoteError::Local {
                path: PathBuf::from(&shown),
                why: format!("cannot write what was fetched: {e}"),
            });
        }
        let local: String = self
            .hasher
            .finalize()
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect();
        let (size, remote) = self.want.unwrap_or((u64::MAX, String::new()));
        let checksummed = remote.len() == 64;
        let got = self.got;
        if got != size || (checksummed && remote != local) {
            return Err(RemoteError::Checksum {
                host: r.name(),
                path: shown,
                remote: format!("{size} bytes {remote}"),
                local: format!("{got} bytes {local}"),
            });
        }
        Ok(Some(Fetched {
            size,
            sha256: local,
            checksummed,
        }))
    }
}

fn check_host_key(
    sess: &Session,
    t: &Target,
    keys: &HostKeys,
    entries: &[ssh_key::known_hosts::Entry],
    name: &str,
) -> Result<(), RemoteError> {
    let handshake = |cause| RemoteError::Handshake {
        host: t.host.clone(),
        cause,
    };
    let (raw, _) = sess
        .host_key()
        .ok_or_else(|| handshake(ssh2::Error::from_errno(ssh2::ErrorCode::Session(-1))))?;
    let key = ssh_key::PublicKey::from_bytes(raw).map_err(|e| RemoteError::BadHostKey {
        host: show(&t.name).into_owned(),
        why: e.to_string(),
    })?;
    let fingerprint = sess
        .host_key_hash(HashType::Sha256)
        .map(b64)
        .unwrap_or_default();
    let kind = key.algorithm().as_str().to_string();
    let host = show(&t.name).into_owned();
    match known_hosts::check_host(entries, &t.host, t.port, &key) {
        Verdict::Known => Ok(()),
        Verdict::Revoked => Err(RemoteError::HostKeyRevoked {
            host,
            file: keys.file.clone(),
            kind,
            fingerprint,
        }),
        Verdict::Changed => Err(RemoteError::HostKeyChanged {
            host,
            entry: show(name).into_owned(),
            file: keys.file.clone(),
            kind,
            fingerprint,
        }),
        Verdict::New if !keys.accept_new => Err(RemoteError::UnknownHost {
            host,
            file: keys.file.clone(),
            kind,
            fingerprint,
        }),
        Verdict::New => {
            let line = known_hosts::line_for(&t.host, t.port, &key).map_err(|why| {
                RemoteError::KnownHosts {
                    file: keys.file.clone(),
                    why,
                }
            })?;
            known_hosts::append(&keys.file, &line).map_err(|e| RemoteError::KnownHosts {
                file: keys.file.clone(),
                why: e.to_string(),
            })?;
            eprintln!(
                "labperf: added {} ({kind} SHA256:{fingerprint}) to {}",
                show(name),
                keys.file.display()
            );
            Ok(())
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quoting_keeps_every_byte() {
        assert_eq!(shell_quote("a b"), "'a b'");
        assert_eq!(shell_quote("it's"), r"'it'\''s'");
        assert_eq!(shell_quote("$(x);`y`\n"), "'$(x);`y`\n'");
        use std::os::unix::ffi::OsStringExt;
        let bad = std::ffi::OsString::from_vec(vec![b'a', 0xff, b'\n']);
        let (pre, words) = shell_words(&["x y".into(), bad]);
        assert_eq!(
            pre,
            "lp1=\"$(printf '\\141\\377\\012.')\"; lp1=\"${lp1%.}\"; "
        );
        assert_eq!(words, "'x y' \"$lp1\"");
    }

    /// Every token a ProxyCommand expands reaches its program as one literal word, however
    /// the command quotes it: names that hold every shell metacharacter (which
    /// [`names`] refuses before this, as OpenSSH does) run nothing.
    #[test]
    fn proxycommand_tokens_are_quoted_for_where_they_stand() {
        let d = std::env::temp_dir().join(format!("lp-tokens-{}", std::process::id()));
        std::fs::create_dir_all(&d).unwrap();
        let f = d.join("pwned");
        let evil = format!(
            "a$(touch {})'\"`touch {}`\\b; touch {} #",
            f.display(),
            f.display(),
            f.display()
        );
        let t = Target {
            name: format!("n{evil}"),
            host: format!("h{evil}"),
            user: format!("u{evil}"),
            port: 2222,
            identities: Vec::new(),
            route: Route::Direct,
            unapplied: Vec::new(),
        };
        let (h, u, n) = (&t.host, &t.user, &t.name);
        for (cmd, want) in [
            ("printf '%%s|' %h %r %n %p", format!("{h}|{u}|{n}|2222|")),
            ("printf '%%s|' \"%h\" \"x%r:%p\"", format!("{h}|x{u}:2222|")),
            ("printf '%%s|' '%h' 'x%n'", format!("{h}|x{n}|")),
            ("printf '%%s|' \\%h \"\\%h\"", format!("{h}|\\{h}|")),
            ("printf '%%s|' %h%%%x", format!("{h}%%x|")),
        ] {
            let line = expand_tokens(cmd, &t, true);
            let out = std::process::Command::new("sh")
                .arg("-c")
                .arg(&line)
                .output()
                .unwrap();
            assert_eq!(
                String::from_utf8_lossy(&out.stdout),
                want,
                "{cmd} as {line}"
            );
            assert!(!f.exists(), "{cmd} as {line} ran a name");
        }
        // Not for a shell (IdentityFile): the values as they are.
        assert_eq!(expand_tokens("k-%r", &t, false), format!("k-{u}"));
        std::fs::remove_dir_all(d).unwrap();
    }

    #[test]
    fn names_are_refused_with_where_they_came_from() {
        let d = std::env::temp_dir().join(format!("lp-badnames-{}", std::process::id()));
        std::fs::create_dir_all(&d).unwrap();
        let cfg = d.join("config");
        std::fs::write(&cfg, "Host bad-hn\n  HostName x$(id)\nHost bad-user\n  User r;id\nHost bad-jump\n  ProxyJump ok,j`id`\nHost ok\n  HostName 10.0.0.1\n").unwrap();
        let e = |spec: &str, jump: Option<&str>| {
            target_via(spec, "--host", Some(&cfg), jump)
                .unwrap_err()
                .to_string()
        };
        assert!(e("a$(touch x)", None)
            .starts_with("--host: the host name 'a$(touch x)' has '$' at character 2"));
        assert!(
            e("r$(x)@ok", None).starts_with("--host: the user name 'r$(x)' has '$' at character 2")
        );
        let cfgs = cfg.display();
        assert!(e("bad-hn", None).starts_with(&format!(
            "HostName for bad-hn in {cfgs} line 2: the host name 'x$(id)'"
        )));
        assert!(e("bad-user", None).starts_with(&format!(
            "User for bad-user in {cfgs} line 4: the user name 'r;id'"
        )));
        assert!(e("bad-jump", None).starts_with(&format!(
            "ProxyJump for bad-jump in {cfgs} line 6: the host name 'j`id`'"
        )));
        assert!(
            e("ok", Some("j|id,ok")).starts_with("-J: the host name 'j|id' has '|' at character 2")
        );
        assert!(e("ok", Some("ok,*")).starts_with("-J: the host name '*' has '*' at character 1"));
        assert!(target_via("ok", "--host", Some(&cfg), None).is_ok());
        std::fs::remove_dir_all(d).unwrap();
    }

    #[test]
    fn remote_dirs() {
        assert_eq!(remote_dir("~/x").unwrap(), "x");
        assert_eq!(remote_dir("~").unwrap(), ".");
        assert_eq!(remote_dir(".cache/labperf").unwrap(), ".cache/labperf");
        assert_eq!(remote_dir("/tmp/lp").unwrap(), "/tmp/lp");
        assert!(remote_dir("~bob/x").is_err());
        assert!(remote_dir("").is_err());
    }

    #[test]
    fn targets_and_ssh_config() {
        let d = std::env::temp_dir().join(format!("lp-sshcfg-{}", std::process::id()));
        std::fs::create_dir_all(&d).unwrap();
        let cfg = d.join("config");
        std::fs::write(&cfg, "Host lab1\n  HostName 10.1.2.3\n  User bench\n  Port 2200\n  IdentityFile /keys/lab1\n\nHost *\n  User fallback\n").unwrap();
        let t = parse_target("lab1", Some(&cfg)).unwrap();
        assert_eq!(
            (t.host.as_str(), t.user.as_str(), t.port),
            ("10.1.2.3", "bench", 2200)
        );
        assert_eq!(t.identities, vec![PathBuf::from("/keys/lab1")]);
        let t = parse_target("me@lab1:2222", Some(&cfg)).unwrap();
        assert_eq!((t.user.as_str(), t.port), ("me", 2222));
        let t = parse_target("other", Some(&cfg)).unwrap();
        assert_eq!(
            (t.host.as_str(), t.user.as_str(), t.port),
            ("other", "fallback", 22)
        );
        std::fs::remove_dir_all(d).unwrap();
    }

    #[test]
    fn routes_through_jump_hosts_as_openssh_builds_them() {
        let d = std::env::temp_dir().join(format!("lp-sshjump-{}", std::process::id()));
        std::fs::create_dir_all(&d).unwrap();
        let cfg = d.join("config");
        std::fs::write(&cfg, "Host t\n  HostName 10.0.0.9\n  ProxyJump a,me@b:2200\nHost a\n  ProxyJump c\n  Port 2201\nHost b\n  ProxyJump ignored\n  HostName 10.0.0.2\nHost c\n  HostName gw\n  User u\n  ProxyCommand exec nc %h %p # as %r%%\nHost l1\n  ProxyJump l2\nHost l2\n  ProxyJump l1\n").unwrap();
        let t = parse_target("t", Some(&cfg)).unwrap();
        let Route::Jump(hops) = &t.route else {
            panic!("{t:?}")
        };
        let names: Vec<(&str, &str, u16)> = hops
            .iter()
            .map(|h| (h.name.as_str(), h.host.as_str(), h.port))
            .collect();
        assert_eq!(
            names,
            [("c", "gw", 22), ("a", "a", 2201), ("b", "10.0.0.2", 2200)]
        );
        assert_eq!(
            hops[0].route,
            Route::Command("exec nc 'gw' '22' # as 'u'%".into())
        );
        assert!(hops[1..].iter().all(|h| h.route == Route::Direct));
        assert_eq!(hops[2].user, "me");
        // -J replaces the config's way; `none` goes directly.
        let t = target_via("t", "-", Some(&cfg), Some("root@x:1")).unwrap();
        let Route::Jump(hops) = &t.route else {
            panic!("{t:?}")
        };
        assert_eq!(
            (hops.len(), hops[0].user.as_str(), hops[0].port),
            (1, "root", 1)
        );
        assert_eq!(
            target_via("t", "-", Some(&cfg), Some("none"))
                .unwrap()
                .route,
            Route::Direct
        );
        // IPv6 hops and targets, bracketed with a port (`ssh -J` takes them so).
        let t = target_via(
            "u@[::1]:2200",
            "-",
            Some(&cfg),
            Some("me@[fe80::2]:2022,[::3]"),
        )
        .unwrap();
        assert_eq!(
            (t.host.as_str(), t.user.as_str(), t.port),
            ("::1", "u", 2200)
        );
        let Route::Jump(hops) = &t.route else {
            panic!("{t:?}")
        };
        let hops: Vec<(&str, &str, u16)> = hops
            .iter()
            .map(|h| (h.host.as_str(), h.user.as_str(), h.port))
            .collect();
        assert_eq!(hops[0], ("fe80::2", "me", 2022));
        assert_eq!((hops[1].0, hops[1].2), ("::3", 22));
        assert_eq!(names::split_spec("::1"), (None, "::1".into(), None));
        // A loop is refused, not followed for ever.
        let e = parse_target("l1", Some(&cfg)).unwrap_err().to_string();
        assert!(e.contains("jump hosts"), "{e}");
        std::fs::remove_dir_all(d).unwrap();
    }

    #[test]
    fn base64_matches_openssh() {
        assert_eq!(b64(b"hello"), "aGVsbG8");
        assert_eq!(b64(&[0xff, 0xee, 0xdd]), "/+7d");
    }
}
