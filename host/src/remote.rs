//! SSH to lab machines with ssh2: config, host keys, authentication, commands, upload and fetch.

use sha2::{Digest, Sha256};
use ssh2::{CheckResult, HashType, KnownHostFileKind, Session};
use std::io::{Read, Write};
use std::net::{TcpStream, ToSocketAddrs};
use std::path::{Path, PathBuf};
use std::time::Duration;

#[derive(Debug, thiserror::Error)]
pub enum RemoteError {
    #[error("cannot reach {host}:{port}: {cause}. Check the host name and port, and that sshd runs there")]
    Unreachable {
        host: String,
        port: u16,
        cause: std::io::Error,
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
    #[error("THE HOST KEY OF {host} HAS CHANGED since it was recorded in {file} (now SHA256 {fingerprint}). A reinstalled machine or an attack: confirm the new key with its owner, then remove the old entry with `ssh-keygen -R '{entry}' -f {file}`")]
    HostKeyChanged {
        host: String,
        entry: String,
        file: PathBuf,
        fingerprint: String,
    },
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
    #[error("the remote disk of {host} is full while writing {path}: free space there, or use --remote-dir on a larger file system")]
    DiskFull { host: String, path: String },
    #[error("{path} on {host} is not writable ({stderr}): use --remote-dir with a directory you can write")]
    NotWritable {
        host: String,
        path: String,
        stderr: String,
    },
    #[error("{path} fetched from {host} does not match its checksum (remote {remote}, received {local}): the transfer was corrupted or cut; nothing was written")]
    Checksum {
        host: String,
        path: String,
        remote: String,
        local: String,
    },
    #[error("cannot read the ssh config {path}: {why}")]
    Config { path: PathBuf, why: String },
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
}

fn home() -> PathBuf {
    std::env::var_os("HOME")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("/"))
}

/// Parses `[user@]host[:port]`, applying the matching `Host` entries of `config`
/// (HostName, User, Port, IdentityFile). Explicit parts win over the config.
pub fn parse_target(spec: &str, config: Option<&Path>) -> Result<Target, RemoteError> {
    let (user, rest) = match spec.rsplit_once('@') {
        Some((u, r)) => (Some(u.to_string()), r),
        None => (None, spec),
    };
    let (name, port) = match rest.rsplit_once(':') {
        Some((h, p)) if !h.contains(':') && p.parse::<u16>().is_ok() => {
            (h.to_string(), p.parse().ok())
        }
        _ => (rest.to_string(), None),
    };
    let mut t = Target {
        name: name.clone(),
        host: name.clone(),
        user: user.clone().unwrap_or_default(),
        port: port.unwrap_or(22),
        identities: Vec::new(),
    };
    let path = config
        .map(PathBuf::from)
        .unwrap_or_else(|| home().join(".ssh/config"));
    if path.is_file() {
        let f = std::fs::File::open(&path).map_err(|e| RemoteError::Config {
            path: path.clone(),
            why: e.to_string(),
        })?;
        let cfg = ssh2_config::SshConfig::default()
            .parse(
                &mut std::io::BufReader::new(f),
                ssh2_config::ParseRule::ALLOW_UNKNOWN_FIELDS
                    | ssh2_config::ParseRule::ALLOW_UNSUPPORTED_FIELDS,
            )
            .map_err(|e| RemoteError::Config {
                path: path.clone(),
                why: e.to_string(),
            })?;
        let p = cfg.query(&name);
        if let Some(h) = p.host_name {
            t.host = h;
        }
        if user.is_none() {
            if let Some(u) = p.user {
                t.user = u;
            }
        }
        if port.is_none() {
            if let Some(pt) = p.port {
                t.port = pt;
            }
        }
        t.identities = p.identity_file.unwrap_or_default();
    }
    if t.user.is_empty() {
        t.user = std::env::var("USER").unwrap_or_else(|_| "root".into());
    }
    Ok(t)
}

/// Single-quotes `s` for a POSIX shell: every byte stays literal (spaces, quotes, `;$()`, newlines).
pub fn shell_quote(s: &str) -> String {
    format!("'{}'", s.replace('\'', r"'\''"))
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

pub struct Remote {
    sess: Session,
    pub target: Target,
}

/// What a remote command printed and returned.
pub struct Output {
    pub stdout: Vec<u8>,
    pub stderr: Vec<u8>,
    pub status: i32,
}

/// Base64 without padding (OpenSSH's fingerprint spelling); see [`b64_padded`].
fn b64(data: &[u8]) -> String {
    const A: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut s = String::new();
    for c in data.chunks(3) {
        let n = (u32::from(c[0]) << 16)
            | (u32::from(*c.get(1).unwrap_or(&0)) << 8)
            | u32::from(*c.get(2).unwrap_or(&0));
        for i in 0..c.len() + 1 {
            s.push(A[(n >> (18 - 6 * i)) as usize & 63] as char);
        }
    }
    s
}

/// Base64 with padding, as in known_hosts lines.
fn b64_padded(data: &[u8]) -> String {
    let mut s = b64(data);
    while !s.len().is_multiple_of(4) {
        s.push('=');
    }
    s
}

impl Remote {
    /// Connects, checks the host key, and authenticates: ssh-agent (every identity), then
    /// the config's IdentityFiles and `--identity` files, then ~/.ssh/id_{ed25519,ecdsa,rsa}.
    pub fn connect(
        t: &Target,
        keys: &HostKeys,
        extra_identities: &[PathBuf],
        timeout: Duration,
    ) -> Result<Remote, RemoteError> {
        let unreachable = |cause| RemoteError::Unreachable {
            host: t.host.clone(),
            port: t.port,
            cause,
        };
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
        let tcp = TcpStream::connect_timeout(&addr, timeout).map_err(unreachable)?;
        let _ = tcp.set_read_timeout(Some(Duration::from_secs(600)));
        let mut sess = Session::new().map_err(|cause| RemoteError::Handshake {
            host: t.host.clone(),
            cause,
        })?;
        sess.set_tcp_stream(tcp);
        sess.set_timeout(600_000);
        sess.handshake().map_err(|cause| RemoteError::Handshake {
            host: t.host.clone(),
            cause,
        })?;
        check_host_key(&sess, t, keys)?;
        let mut tried = Vec::new();
        if let Ok(mut agent) = sess.agent() {
            if agent.connect().is_ok() && agent.list_identities().is_ok() {
                for id in agent.identities().unwrap_or_default() {
                    tried.push(format!("agent key {}", id.comment()));
                    if agent.userauth(&t.user, &id).is_ok() && sess.authenticated() {
                        return Ok(Remote {
                            sess,
                            target: t.clone(),
                        });
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
                return Ok(Remote {
                    sess,
                    target: t.clone(),
                });
            }
        }
        Err(RemoteError::AuthFailed {
            user: t.user.clone(),
            host: t.name.clone(),
            tried: if tried.is_empty() {
                "no keys (no agent, no key files)".into()
            } else {
                tried.join(", ")
            },
        })
    }

    fn ssh_err(&self, during: &str) -> impl Fn(ssh2::Error) -> RemoteError + '_ {
        let during = during.to_string();
        move |cause| RemoteError::Ssh {
            host: self.target.name.clone(),
            during: during.clone(),
            cause,
        }
    }

    /// Runs `cmd` through the remote shell, feeding `stdin`, calling `on_stderr` as stderr arrives.
    pub fn run(
        &self,
        cmd: &str,
        stdin: Option<&[u8]>,
        mut on_stderr: impl FnMut(&[u8]),
    ) -> Result<Output, RemoteError> {
        let during = format!("running `{}`", cmd.chars().take(60).collect::<String>());
        let drop = |cause| RemoteError::Dropped {
            host: self.target.name.clone(),
            during: during.clone(),
            cause,
        };
        let mut ch = self.sess.channel_session().map_err(self.ssh_err(&during))?;
        ch.exec(cmd).map_err(self.ssh_err(&during))?;
        if let Some(data) = stdin {
            ch.write_all(data).map_err(drop)?;
        }
        ch.send_eof().map_err(self.ssh_err(&during))?;
        let (mut out, mut err) = (Vec::new(), Vec::new());
        let mut buf = [0u8; 32768];
        self.sess.set_blocking(false);
        let r = loop {
            let mut progressed = false;
            match ch.read(&mut buf) {
                Ok(0) => {}
                Ok(n) => {
                    out.extend_from_slice(&buf[..n]);
                    progressed = true;
                }
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {}
                Err(e) => break Err(drop(e)),
            }
            match ch.stderr().read(&mut buf) {
                Ok(0) => {}
                Ok(n) => {
                    on_stderr(&buf[..n]);
                    err.extend_from_slice(&buf[..n]);
                    progressed = true;
                }
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {}
                Err(e) => break Err(drop(e)),
            }
            if ch.eof() && !progressed {
                break Ok(());
            }
            if !progressed {
                std::thread::sleep(Duration::from_millis(5));
            }
        };
        self.sess.set_blocking(true);
        r?;
        ch.wait_close().map_err(self.ssh_err(&during))?;
        let status = ch.exit_status().map_err(self.ssh_err(&during))?;
        if status == -1 || ch.exit_signal().ok().and_then(|s| s.exit_signal).is_some() {
            return Ok(Output {
                stdout: out,
                stderr: err,
                status: 128 + 9,
            });
        }
        Ok(Output {
            stdout: out,
            stderr: err,
            status,
        })
    }

    /// Runs `cmd` and fails with its stderr unless it exits 0.
    pub fn check(
        &self,
        what: &str,
        cmd: &str,
        stdin: Option<&[u8]>,
    ) -> Result<Vec<u8>, RemoteError> {
        let o = self.run(cmd, stdin, |_| {})?;
        if o.status != 0 {
            return Err(RemoteError::Remote {
                host: self.target.name.clone(),
                what: what.into(),
                status: o.status,
                stderr: String::from_utf8_lossy(&o.stderr).trim().into(),
            });
        }
        Ok(o.stdout)
    }

    /// Writes `data` to `path` through a temporary name and a rename, so a partial
    /// upload never sits where a complete one would be.
    pub fn upload(&self, data: &[u8], path: &str, mode: &str) -> Result<(), RemoteError> {
        let tmp = format!("{path}.tmp.{}", std::process::id());
        let (q, qt) = (shell_quote(path), shell_quote(&tmp));
        let cmd = format!(
            "cat > {qt} && chmod {mode} {qt} && mv -f {qt} {q} || {{ s=$?; rm -f {qt}; exit $s; }}"
        );
        let o = self.run(&cmd, Some(data), |_| {})?;
        if o.status != 0 {
            let stderr = String::from_utf8_lossy(&o.stderr).trim().to_string();
            return Err(if stderr.contains("No space left") {
                RemoteError::DiskFull {
                    host: self.target.name.clone(),
                    path: path.into(),
                }
            } else if stderr.contains("Permission denied") || stderr.contains("Read-only") {
                RemoteError::NotWritable {
                    host: self.target.name.clone(),
                    path: path.into(),
                    stderr,
                }
            } else {
                RemoteError::Remote {
                    host: self.target.name.clone(),
                    what: format!("writing {path}"),
                    status: o.status,
                    stderr,
                }
            });
        }
        Ok(())
    }

    /// Reads a remote file, checked against its SHA-256 computed on the remote side.
    pub fn fetch(&self, path: &str) -> Result<Vec<u8>, RemoteError> {
        let q = shell_quote(path);
        let sum = self.check(
            &format!("checksumming {path}"),
            &format!("sha256sum {q}"),
            None,
        )?;
        let remote = String::from_utf8_lossy(&sum)
            .split_whitespace()
            .next()
            .unwrap_or("")
            .to_string();
        let data = self.check(&format!("reading {path}"), &format!("cat {q}"), None)?;
        let local: String = Sha256::digest(&data)
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect();
        if local != remote {
            return Err(RemoteError::Checksum {
                host: self.target.name.clone(),
                path: path.into(),
                remote,
                local,
            });
        }
        Ok(data)
    }
}

fn check_host_key(sess: &Session, t: &Target, keys: &HostKeys) -> Result<(), RemoteError> {
    let (key, kind) = sess.host_key().ok_or_else(|| RemoteError::Handshake {
        host: t.host.clone(),
        cause: ssh2::Error::from_errno(ssh2::ErrorCode::Session(-1)),
    })?;
    let fingerprint = sess
        .host_key_hash(HashType::Sha256)
        .map(b64)
        .unwrap_or_default();
    let kind_name = format!("{kind:?}");
    let mut kh = sess.known_hosts().map_err(|cause| RemoteError::Handshake {
        host: t.host.clone(),
        cause,
    })?;
    if keys.file.is_file() {
        let _ = kh.read_file(&keys.file, KnownHostFileKind::OpenSSH);
    }
    let entry = if t.port == 22 {
        t.host.clone()
    } else {
        format!("[{}]:{}", t.host, t.port)
    };
    match kh.check_port(&t.host, t.port, key) {
        CheckResult::Match => Ok(()),
        CheckResult::Mismatch => Err(RemoteError::HostKeyChanged {
            host: t.name.clone(),
            entry,
            file: keys.file.clone(),
            fingerprint,
        }),
        CheckResult::NotFound | CheckResult::Failure => {
            if !keys.accept_new {
                return Err(RemoteError::UnknownHost {
                    host: t.name.clone(),
                    file: keys.file.clone(),
                    kind: kind_name,
                    fingerprint,
                });
            }
            // Append the entry the way OpenSSH does, creating the file if needed.
            let key_type = match kind {
                ssh2::HostKeyType::Rsa => "ssh-rsa",
                ssh2::HostKeyType::Dss => "ssh-dss",
                ssh2::HostKeyType::Ecdsa256 => "ecdsa-sha2-nistp256",
                ssh2::HostKeyType::Ecdsa384 => "ecdsa-sha2-nistp384",
                ssh2::HostKeyType::Ecdsa521 => "ecdsa-sha2-nistp521",
                ssh2::HostKeyType::Ed25519 => "ssh-ed25519",
                ssh2::HostKeyType::Unknown => "unknown",
            };
            if let Some(dir) = keys.file.parent() {
                let _ = std::fs::create_dir_all(dir);
            }
            let line = format!("{entry} {key_type} {}\n", b64_padded(key));
            let mut f = std::fs::OpenOptions::new()
                .create(true)
                .append(true)
                .open(&keys.file)
                .map_err(|e| RemoteError::Config {
                    path: keys.file.clone(),
                    why: e.to_string(),
                })?;
            f.write_all(line.as_bytes())
                .map_err(|e| RemoteError::Config {
                    path: keys.file.clone(),
                    why: e.to_string(),
                })?;
            eprintln!(
                "labperf: added {entry} ({key_type} SHA256:{fingerprint}) to {}",
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
    fn base64_matches_openssh() {
        assert_eq!(b64(b"hello"), "aGVsbG8");
        assert_eq!(b64(&[0xff, 0xee, 0xdd]), "/+7d");
        assert_eq!(b64_padded(b"hello"), "aGVsbG8=");
    }
}
