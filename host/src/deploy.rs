//! The one remote flow (record and stat alike): the agent put on the lab machine by content
//! hash and verified, the run with the agent's result told out of band (`--status-file`),
//! interrupts forwarded, then the record file and the binaries its samples need fetched.

use crate::cache;
use crate::remote::{shell_quote, shell_words, Chunk, Remote, RemoteError, SMALL_OUTPUT};
use crate::text::show;
use labperf_common::Record;
use sha2::{Digest, Sha256};
use std::collections::HashSet;
use std::ffi::OsString;
use std::path::Path;

/// Largest record file fetched (a 30 s recording at 50 kHz is about 10 MiB).
pub const MAX_RECORD: u64 = 4 << 30;
/// Largest binary fetched for symbols.
pub const MAX_BINARY: u64 = 1 << 30;
/// Most binaries fetched for one recording, and their total size.
pub const MAX_BINARIES: usize = 256;
pub const MAX_BINARIES_BYTES: u64 = 4 << 30;
/// Largest agent labperf uploads.
const MAX_AGENT: u64 = 64 << 20;

/// Why a run on a lab machine did not give a recording.
#[derive(Debug, thiserror::Error)]
pub enum RunError {
    #[error(transparent)]
    Remote(#[from] RemoteError),
    #[error("the workload could not be started on {host}: {why}")]
    WorkloadNotStarted { host: String, why: String },
    #[error("the agent on {host} could not record: {why}")]
    AgentFailed { host: String, why: String },
    #[error("the agent on {host} was killed (SIGKILL, or the connection was cut) before it finished{}", if *.partial { "; what it had written is saved with a .part name" } else { "; no complete record file was fetched" })]
    AgentKilled { host: String, partial: bool },
    #[error("interrupted twice: the agent and the workload on {host} were killed and their files removed")]
    Aborted { host: String },
}

/// `uname -m` of the target: a plain word, or an error.
pub fn arch(r: &Remote) -> Result<String, RemoteError> {
    let out = r.check("uname -m", "uname -m")?;
    let a = String::from_utf8_lossy(&out).trim().to_string();
    if a.is_empty() || a.len() > 32 || !a.chars().all(|c| c.is_ascii_alphanumeric() || c == '_') {
        return Err(RemoteError::Remote {
            host: r.name(),
            what: "uname -m".into(),
            status: 0,
            stderr: format!("it answered {:?}, not an architecture", show(&a)),
        });
    }
    Ok(a)
}

/// What one round trip learns before a run ([`prepare`]).
#[derive(Debug)]
pub struct Prepared {
    /// `uname -m`.
    pub arch: String,
    /// For each candidate agent: `Some(path)` when the lab machine has it byte for byte.
    pub agents: Vec<Option<String>>,
    /// The run directory is there and writable (else [`make_runs_dir`] before the run).
    pub runs_ready: bool,
}

/// A local agent that may go to a lab machine: its architecture and bytes.
pub struct Candidate {
    pub arch: String,
    pub data: Vec<u8>,
}

impl Candidate {
    /// Reads an agent (bounded).
    pub fn read(arch: &str, local: &Path) -> Result<Candidate, RemoteError> {
        use std::io::Read;
        let mut data = Vec::new();
        std::fs::File::open(local)
            .and_then(|f| f.take(MAX_AGENT + 1).read_to_end(&mut data))
            .map_err(|e| RemoteError::Local {
                path: local.into(),
                why: format!("cannot read the agent: {e}"),
            })?;
        Ok(Candidate {
            arch: arch.into(),
            data,
        })
    }

    /// Where it goes under `remote_dir`: `agents/<sha256, 32 digits>/labperf-agent`.
    pub fn remote_path(&self, remote_dir: &str) -> String {
        format!(
            "{remote_dir}/agents/{}/labperf-agent",
            &sha256_hex(&self.data)[..32]
        )
    }
}

/// [`prepare`]'s questions (`$r`: the run directory): the architecture and whether the
/// run directory is ready.
const PREPARE: &str =
    "uname -m; if [ -d \"$r\" ] && [ -w \"$r\" ]; then echo runs-ok; else echo runs-missing; fi";
/// Whether the agent `$f` is there (then its SHA-256 follows).
const AGENT_THERE: &str = "[ -f \"$f\" ] && [ -x \"$f\" ] || { echo missing; exit 0; }";

/// One command before a run, instead of one per question: the machine's architecture,
/// whether the run directory is there and writable, and which of the `agents` is already
/// there (by its SHA-256; without a SHA-256 tool there, none is taken as there and
/// [`ensure_agent`] checks by reading back). It changes nothing there.
pub fn prepare(
    r: &Remote,
    files: &RunFiles,
    agents: &[Candidate],
    remote_dir: &str,
) -> Result<Prepared, RemoteError> {
    let mut cmd = format!("r={}; {PREPARE}", shell_quote(files.runs_dir()));
    for a in agents {
        cmd.push_str(&format!(
            "; (f={}; {AGENT_THERE}; {})",
            shell_quote(&a.remote_path(remote_dir)),
            crate::remote::SHA256_OF_F
        ));
    }
    let o = r.run(&cmd, None, SMALL_OUTPUT)?;
    let out = String::from_utf8_lossy(&o.stdout).into_owned();
    let mut lines = out.lines();
    let arch = lines.next().unwrap_or("").trim().to_string();
    if arch.is_empty()
        || arch.len() > 32
        || !arch.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
    {
        return Err(RemoteError::Remote {
            host: r.name(),
            what: "uname -m".into(),
            status: o.status,
            stderr: format!(
                "it answered {:?}, not an architecture{}",
                show(&arch),
                match String::from_utf8_lossy(&o.stderr).trim() {
                    "" => String::new(),
                    e => format!(" ({})", show(e)),
                }
            ),
        });
    }
    let runs_ready = lines.next() == Some("runs-ok");
    let agents = agents
        .iter()
        .map(|a| {
            let h = lines.next().unwrap_or("").trim();
            (h == sha256_hex(&a.data)).then(|| a.remote_path(remote_dir))
        })
        .collect();
    Ok(Prepared {
        arch,
        agents,
        runs_ready,
    })
}

/// Makes the run directory (the first run there) and checks it is writable.
pub fn make_runs_dir(r: &Remote, files: &RunFiles) -> Result<(), RemoteError> {
    make_dir(r, files.runs_dir())
}

/// `mkdir -p DIR` there, and DIR writable.
fn make_dir(r: &Remote, dir: &str) -> Result<(), RemoteError> {
    let q = shell_quote(dir);
    let o = r.run(&format!("mkdir -p {q} && test -w {q}"), None, SMALL_OUTPUT)?;
    if o.status != 0 {
        return Err(RemoteError::NotWritable {
            host: r.name(),
            path: show(dir).into_owned(),
            stderr: show(String::from_utf8_lossy(&o.stderr).trim()).into_owned(),
        });
    }
    Ok(())
}

fn sha256_hex(data: &[u8]) -> String {
    Sha256::digest(data)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// Whether the remote file `path` holds exactly `data` (and, with `exec`, may be run): by
/// the lab machine's SHA-256, or, without a SHA-256 tool there, by reading it back.
/// `None`: no such file.
fn remote_matches(
    r: &Remote,
    path: &str,
    data: &[u8],
    exec: bool,
) -> Result<Option<bool>, RemoteError> {
    let probe = format!(
        "f={}; [ -f \"$f\" ] {} || {{ echo missing; exit 0; }}; {}",
        shell_quote(path),
        if exec { "&& [ -x \"$f\" ]" } else { "" },
        crate::remote::SHA256_OF_F
    );
    let out = r.check(&format!("checking {path}"), &probe)?;
    let h = String::from_utf8_lossy(&out).trim().to_string();
    if h == "missing" {
        return Ok(None);
    }
    if h.len() == 64 {
        return Ok(Some(h == sha256_hex(data)));
    }
    // No SHA-256 tool on the lab machine: read the file back (it is no larger than `data`).
    let mut back = Vec::new();
    match r.fetch(path, data.len() as u64, &mut back) {
        Ok(_) => Ok(Some(back == data)),
        Err(RemoteError::TooLarge { .. }) | Err(RemoteError::Checksum { .. }) => Ok(Some(false)),
        Err(e) => Err(e),
    }
}

/// Makes sure the agent `local` is on the target under `<remote_dir>/agents/<sha256>/`,
/// uploading it when it is missing or is not byte for byte the local one. Returns its
/// remote path and whether it was uploaded.
pub fn ensure_agent(
    r: &Remote,
    local: &Path,
    remote_dir: &str,
) -> Result<(String, bool), RemoteError> {
    let agent = Candidate::read("", local)?;
    let path = agent.remote_path(remote_dir);
    let (dir, name) = path
        .rsplit_once('/')
        .unwrap_or((remote_dir, "labperf-agent"));
    let placed = ensure_file(r, &agent.data, dir, name, true)?;
    Ok((placed.path, placed.uploaded))
}

/// A file put on a lab machine by [`ensure_file`].
pub struct Placed {
    pub path: String,
    pub uploaded: bool,
}

/// Makes sure `<dir>/<rel>` on the target holds exactly `data` (mode 755 with `exec`, else
/// 644), uploading it (temporary name, then rename) when it is missing or differs, and
/// checking it after. `rel` may name subdirectories; they are made.
pub fn ensure_file(
    r: &Remote,
    data: &[u8],
    dir: &str,
    rel: &str,
    exec: bool,
) -> Result<Placed, RemoteError> {
    let path = format!("{dir}/{rel}");
    match remote_matches(r, &path, data, exec)? {
        Some(true) => {
            return Ok(Placed {
                path,
                uploaded: false,
            })
        }
        Some(false) => eprintln!(
            "[{}] warning: {} is not the one labperf put there: uploading it again",
            r.name(),
            show(&path)
        ),
        None => {}
    }
    make_dir(r, path.rsplit_once('/').map_or(dir, |(p, _)| p))?;
    r.upload(data, &path, if exec { "755" } else { "644" })?;
    if remote_matches(r, &path, data, exec)? != Some(true) {
        return Err(RemoteError::Checksum {
            host: r.name(),
            path: show(&path).into_owned(),
            remote: "a different file".into(),
            local: sha256_hex(data),
        });
    }
    Ok(Placed {
        path,
        uploaded: true,
    })
}

/// The files of one run on the lab machine.
#[derive(Debug, Clone)]
pub struct RunFiles {
    pub file: String,
    pub status: String,
    pub pid: String,
}

impl RunFiles {
    /// Fresh names under `<remote_dir>/runs/`.
    pub fn new(remote_dir: &str) -> RunFiles {
        let base = format!("{remote_dir}/runs/{}", crate::remote::unique_id());
        RunFiles {
            file: format!("{base}.lpr"),
            status: format!("{base}.status"),
            pid: format!("{base}.pid"),
        }
    }

    fn runs_dir(&self) -> &str {
        self.file.rsplit_once('/').map_or(".", |(d, _)| d)
    }
}

/// Where a run's output goes.
pub trait RunIo {
    /// The workload's (and the agent's) stdout.
    fn stdout(&mut self, b: &[u8]);
    /// The agent's and the workload's stderr.
    fn stderr(&mut self, b: &[u8]);
    /// A message of labperf's about this host.
    fn say(&mut self, m: &str);
}

/// How a run on a lab machine ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Finished {
    /// The workload's exit code (128+N when killed by signal N).
    pub status: i32,
    /// The run was stopped by an interrupt (its recording is complete all the same).
    pub interrupted: bool,
}

/// Runs `agent <verb> -o <file> --status-file <status> <agent_args> -- <command>` on the
/// target. A first interrupt (Ctrl-C, SIGTERM: see [`crate::interrupt`]) is forwarded to
/// the agent, which stops the workload and finishes its file; a second kills both. The
/// agent's own result comes from its status file, never from its exit code or stderr.
pub fn run_agent(
    r: &Remote,
    agent: &str,
    files: &RunFiles,
    verb: &str,
    agent_args: &[String],
    command: &[OsString],
    io: &mut dyn RunIo,
) -> Result<bool, RunError> {
    let (prelude, words) = shell_words(command);
    let mut cmd = format!(
        "{prelude}echo $$ > {}; exec {} {verb} -o {} --status-file {}",
        shell_quote(&files.pid),
        shell_quote(agent),
        shell_quote(&files.file),
        shell_quote(&files.status)
    );
    for a in agent_args {
        cmd.push(' ');
        cmd.push_str(&shell_quote(a));
    }
    cmd.push_str(" -- ");
    cmd.push_str(&words);
    let base = crate::interrupt::count();
    let (mut sent_int, mut aborted) = (false, false);
    let signal = |sig: &str| {
        let k = format!("kill -{sig} \"$(cat {})\"", shell_quote(&files.pid));
        let _ = r.run(&k, None, SMALL_OUTPUT);
    };
    let ran = r.run_stream(&cmd, None, None, &mut |c| {
        match c {
            Chunk::Stdout(b) => io.stdout(b),
            Chunk::Stderr(b) => io.stderr(b),
            Chunk::Idle => {}
        }
        let n = crate::interrupt::count().wrapping_sub(base);
        if n >= 1 && !sent_int {
            sent_int = true;
            io.say("interrupted: stopping the workload; the agent finishes its file (interrupt again to abort)");
            signal("INT");
        }
        if n >= 2 {
            aborted = true;
            signal("KILL");
            return Err(RemoteError::Remote {
                host: r.name(),
                what: "the run".into(),
                status: 130,
                stderr: "aborted".into(),
            });
        }
        Ok(())
    });
    if aborted {
        cleanup(r, files);
        return Err(RunError::Aborted { host: r.name() });
    }
    ran?;
    Ok(sent_int)
}

/// After [`run_agent`], in one command: how the agent says the run ended (its status
/// file), and when it recorded, its record file fetched to `local` and the run's files
/// removed there. A run that did not record gives its error; the caller then saves a
/// killed agent's partial file ([`fetch_partial`]) or cleans up ([`cleanup`]).
pub fn finish(
    r: &Remote,
    files: &RunFiles,
    interrupted: bool,
    local: &Path,
) -> Result<(Finished, crate::remote::Fetched), RunError> {
    let then = format!(
        "rm -f {} {} {} {}",
        shell_quote(&files.file),
        shell_quote(&format!("{}.part", files.file)),
        shell_quote(&files.status),
        shell_quote(&files.pid)
    );
    let mut line = String::new();
    let got = fetch_file_with(local, |dest| {
        r.fetch_after_status(
            &files.status,
            &files.file,
            MAX_RECORD,
            dest,
            &then,
            &mut line,
        )
    });
    let line = line.trim().to_string();
    // The connection failed before the status line came: that is the error, not the agent.
    let got = match got {
        Err(e) if line.is_empty() => return Err(e.into()),
        got => got,
    };
    let (kind, rest) = line.split_once(' ').unwrap_or((line.as_str(), ""));
    let host = r.name();
    let why = show(rest).into_owned();
    match kind {
        "ok" => {
            let status = rest.trim().parse().map_err(|_| RunError::AgentFailed {
                host: host.clone(),
                why: format!("its status file says {:?}", show(&line)),
            })?;
            let fetched = got?.ok_or_else(|| RunError::AgentKilled {
                host: host.clone(),
                partial: false,
            })?;
            Ok((
                Finished {
                    status,
                    interrupted,
                },
                fetched,
            ))
        }
        "exec-error" => Err(RunError::WorkloadNotStarted { host, why }),
        "disk-full" => Err(RemoteError::DiskFull {
            host,
            path: show(&files.file).into_owned(),
        }
        .into()),
        "agent-error" => Err(RunError::AgentFailed { host, why }),
        _ => Err(RunError::AgentKilled {
            host,
            partial: false,
        }),
    }
}

/// Removes a run's files from the lab machine.
pub fn cleanup(r: &Remote, files: &RunFiles) {
    let _ = r.run(
        &format!(
            "rm -f {} {} {} {}",
            shell_quote(&files.file),
            shell_quote(&format!("{}.part", files.file)),
            shell_quote(&files.status),
            shell_quote(&files.pid)
        ),
        None,
        SMALL_OUTPUT,
    );
}

/// Fetches the remote file `remote` to `local` by [`crate::output`]'s rule: a regular file
/// is streamed into a new temporary file beside it, checked, then renamed, so `local` is
/// either the complete file or what it was before; a device or FIFO gets the bytes as they
/// come.
pub fn fetch_file(
    r: &Remote,
    remote: &str,
    local: &Path,
    limit: u64,
) -> Result<crate::remote::Fetched, RemoteError> {
    fetch_file_with(local, |dest| r.fetch(remote, limit, dest).map(Some))?.ok_or_else(|| {
        RemoteError::NotRegular {
            host: r.name(),
            path: show(remote).into_owned(),
        }
    })
}

/// Streams what `fetch` writes into `local` ([`crate::output::Output`]), completed once
/// `fetch` says it is complete and checked (`Some`); `None` or an error leaves a regular
/// `local` as it was.
fn fetch_file_with(
    local: &Path,
    fetch: impl FnOnce(&mut dyn std::io::Write) -> Result<Option<crate::remote::Fetched>, RemoteError>,
) -> Result<Option<crate::remote::Fetched>, RemoteError> {
    let mut out = crate::output::Output::create(local)?;
    let fetched = fetch(&mut out)?;
    if fetched.is_some() {
        out.commit()?;
    }
    Ok(fetched)
}

/// After an agent died: saves what it had written (its `.part` file) beside the file
/// `local` names ([`crate::output::partial`]); nothing is saved for a device or a FIFO.
pub fn fetch_partial(r: &Remote, files: &RunFiles, local: &Path) -> bool {
    let ok = crate::output::partial(local).is_some_and(|part| {
        fetch_file(r, &format!("{}.part", files.file), &part, MAX_RECORD).is_ok()
    });
    cleanup(r, files);
    ok
}

/// A mapped file: its path and build-id.
type MappedFile = (String, Option<Vec<u8>>);

/// The files that the recording's samples land in: (path, build-id), at most
/// [`MAX_BINARIES`], from its mmap2 records and sample addresses.
fn files_hit(file: &Path) -> (Vec<MappedFile>, String) {
    let mut maps: Vec<(u32, u64, u64, usize)> = Vec::new();
    let mut files: Vec<MappedFile> = Vec::new();
    let mut ips: HashSet<(u32, u64)> = HashSet::new();
    let mut hostname = String::new();
    let info = crate::load::stream(&file.into(), |r| match r {
        Record::Mmap2(m) if m.path.starts_with('/') => {
            let i = files
                .iter()
                .position(|(p, b)| *p == m.path && *b == m.build_id)
                .unwrap_or_else(|| {
                    files.push((m.path.clone(), m.build_id.clone()));
                    files.len() - 1
                });
            maps.push((m.pid, m.addr, m.addr.saturating_add(m.len), i));
        }
        Record::Sample(s) if ips.len() < 1 << 20 => {
            ips.insert((s.pid, s.ip));
        }
        _ => {}
    });
    if let Ok(info) = &info {
        if let Some(h) = &info.header {
            hostname = h.hostname.clone();
        }
    }
    let mut hit = vec![false; files.len()];
    maps.sort_unstable();
    for (pid, ip) in ips {
        // The mappings of this pid that start at or below ip; the last one that covers it.
        let lo = maps.partition_point(|m| m.0 < pid);
        let hi = maps.partition_point(|m| m.0 < pid || (m.0 == pid && m.1 <= ip));
        if let Some(m) = maps[lo..hi].iter().rev().find(|m| ip < m.2) {
            hit[m.3] = true;
        }
    }
    let out = files
        .into_iter()
        .zip(hit)
        .filter_map(|(f, h)| h.then_some(f))
        .take(MAX_BINARIES)
        .collect();
    (out, hostname)
}

/// Fetches the ELF files that the recording's samples land in into the binary cache (see
/// [`crate::cache`]): only regular files, only ELF files, and only with the build-id the
/// recording names. Returns warnings.
pub fn fetch_binaries(r: &Remote, file: &Path, root: &Path) -> Vec<String> {
    let (files, hostname) = files_hit(file);
    let mut warnings = Vec::new();
    let mut total = 0u64;
    for (path, build_id) in files {
        let dest = match build_id.as_deref() {
            Some(b) => match cache::by_build_id(root, b) {
                Some(d) => d,
                None => {
                    warnings.push(format!(
                        "{} has a build-id of {} bytes, not a real one: not fetched",
                        show(&path),
                        b.len()
                    ));
                    continue;
                }
            },
            None => cache::by_path(root, &hostname, &path),
        };
        if build_id.is_some() && dest.is_file() {
            fetch_debug(r, root, &dest, &mut total, &mut warnings);
            continue;
        }
        if total >= MAX_BINARIES_BYTES {
            warnings.push(format!(
                "over {} GiB of binaries fetched: {} and the rest were not",
                MAX_BINARIES_BYTES >> 30,
                show(&path)
            ));
            break;
        }
        let mut pending = match cache::Pending::new(root) {
            Ok(p) => p,
            Err(e) => {
                warnings.push(e.to_string());
                break;
            }
        };
        let fetched = r.fetch(&path, MAX_BINARY, &mut PendingWriter(&mut pending));
        match fetched {
            Ok(f) => {
                total += f.size;
                match check_elf(pending.path(), build_id.as_deref()) {
                    Ok(()) => match pending.store(&dest) {
                        Ok(()) if build_id.is_some() => {
                            fetch_debug(r, root, &dest, &mut total, &mut warnings)
                        }
                        Ok(()) => {}
                        Err(e) => warnings.push(e.to_string()),
                    },
                    Err(why) => {
                        pending.discard();
                        warnings.push(format!(
                            "{} on {}: {why}: its symbols were not cached",
                            show(&path),
                            r.name()
                        ));
                    }
                }
            }
            Err(e) => {
                pending.discard();
                warnings.push(format!("cannot fetch {} for symbols: {e}", show(&path)));
            }
        }
    }
    warnings
}

/// For a cached binary without a full symbol table (`<root>/<id>/elf`), fetches its
/// separate debug file from the lab machine's `/usr/lib/debug/.build-id/xx/rest.debug`
/// into `<root>/<id>/debug` when the machine has one: an ELF file of the same build-id.
fn fetch_debug(r: &Remote, root: &Path, elf: &Path, total: &mut u64, warnings: &mut Vec<String>) {
    let debug = elf.with_file_name("debug");
    if debug.is_file() {
        return;
    }
    let Ok(data) = crate::load::map_regular(elf, MAX_BINARY) else {
        return;
    };
    let Ok(e) = crate::symbols::Elf::parse((*data).as_ref()) else {
        return;
    };
    let Some(id) = e.build_id.as_deref().filter(|b| cache::valid_build_id(b)) else {
        return;
    };
    if e.has_symtab || *total >= MAX_BINARIES_BYTES {
        return;
    }
    let path = format!(
        "/usr/lib/debug/.build-id/{}/{}.debug",
        cache::hex(&id[..1]),
        cache::hex(&id[1..])
    );
    let Ok(mut pending) = cache::Pending::new(root) else {
        return;
    };
    match r.fetch(&path, MAX_BINARY, &mut PendingWriter(&mut pending)) {
        Ok(f) => {
            *total += f.size;
            match check_elf(pending.path(), Some(id)) {
                Ok(()) => {
                    if let Err(e) = pending.store(&debug) {
                        warnings.push(e.to_string());
                    }
                }
                Err(why) => {
                    pending.discard();
                    warnings.push(format!("{path} on {}: {why}: not cached", r.name()));
                }
            }
        }
        // No debug file there: the usual case.
        Err(RemoteError::NotRegular { .. }) => pending.discard(),
        Err(e) => {
            pending.discard();
            warnings.push(format!("cannot fetch {path} for symbols: {e}"));
        }
    }
}

/// A [`cache::Pending`] as a writer.
struct PendingWriter<'a>(&'a mut cache::Pending);

impl std::io::Write for PendingWriter<'_> {
    fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
        self.0
            .write(b)
            .map_err(|e| std::io::Error::other(e.to_string()))?;
        Ok(b.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// Whether the fetched file is an ELF file with the recorded build-id.
fn check_elf(path: &Path, want: Option<&[u8]>) -> Result<(), String> {
    let data = crate::load::map_regular(path, MAX_BINARY).map_err(|e| e.to_string())?;
    let elf =
        crate::symbols::Elf::parse((*data).as_ref()).map_err(|_| "not an ELF file".to_string())?;
    match (want, elf.build_id.as_deref()) {
        (Some(w), Some(h)) if w != h => Err(format!(
            "its build-id is {}, the recording's {}: the file changed since",
            cache::hex(h),
            cache::hex(w)
        )),
        (Some(w), None) => Err(format!(
            "it has no build-id, the recording says {}",
            cache::hex(w)
        )),
        _ => Ok(()),
    }
}
