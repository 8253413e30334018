//! What can go wrong reaching or using a lab machine over SSH (`RemoteError`, each with its remedy), and what a fetch received.

use crate::lab::names;
use std::path::PathBuf;

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

/// What a fetch received.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Fetched {
    pub size: u64,
    pub sha256: String,
    /// False when the lab machine had no SHA-256 tool: the size alone was checked.
    pub checksummed: bool,
}
