//! A fetch's framed output read as it comes (status line, `SIZE SHA256`, the bytes hashed), and the host-key check of a new session as OpenSSH makes it.

use super::error::{Fetched, RemoteError};
use super::target::{HostKeys, Target};
use crate::files::cache::b64;
use crate::lab::known_hosts::{self, Verdict};
use crate::text::show;
use sha2::{Digest, Sha256};
use ssh2::{HashType, Session};
use std::io::Write;
use std::path::PathBuf;

/// One fetch as its output comes ([`Remote::fetch_framed`]): [a status line,] the `SIZE
/// SHA256` line, then the file's bytes, hashed and passed on to `dest`.
pub(super) struct Framed<'a> {
    pub(super) status_done: bool,
    pub(super) status_line: Option<&'a mut String>,
    pub(super) status_buf: Vec<u8>,
    pub(super) head: Vec<u8>,
    /// The size and SHA-256 the lab machine stated.
    pub(super) want: Option<(u64, String)>,
    pub(super) got: u64,
    pub(super) hasher: Sha256,
    pub(super) name: String,
    pub(super) shown: String,
    pub(super) limit: u64,
    pub(super) dest: &'a mut dyn Write,
    /// The first error writing to `dest` (the rest of the file is still read and hashed).
    pub(super) write_err: Option<std::io::Error>,
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
    pub(super) fn chunk(&mut self, mut b: &[u8]) -> Result<(), RemoteError> {
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
    pub(super) fn finish(self, host: String, status: i32) -> Result<Option<Fetched>, RemoteError> {
        let shown = self.shown;
        if status == 5 && !self.status_buf.is_empty() {
            return Ok(None);
        }
        if status == 3 {
            return Err(RemoteError::NotRegular {
                host: host.clone(),
                path: shown,
            });
        }
        if status != 0 {
            return Err(RemoteError::Remote {
                host: host.clone(),
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
                host: host.clone(),
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

pub(super) fn check_host_key(
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
