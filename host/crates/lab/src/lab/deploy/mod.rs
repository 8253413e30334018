//! The one remote flow (record and stat alike): the agent put on the lab machine by content
//! hash and verified, the run with the agent's result told out of band (`--status-file`),
//! interrupts forwarded, then the record file and the binaries its samples need fetched.

use crate::lab::remote::{shell_quote, shell_words, Chunk, Remote, RemoteError, SMALL_OUTPUT};
use crate::text::show;
use std::ffi::OsString;
use std::path::Path;

mod binaries;
pub use binaries::*;

/// Largest record file fetched (a 30 s recording at 50 kHz is about 10 MiB).
pub const MAX_RECORD: u64 = 4 << 30;
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
    #[error("interrupted twice: labperf stopped on {host} (its agent and workload killed if they still ran) and removed the files of this run")]
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
            crate::lab::remote::SHA256_OF_F
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
        crate::lab::remote::SHA256_OF_F
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
        let base = format!("{remote_dir}/runs/{}", crate::lab::remote::unique_id());
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
    let mut sent_int = false;
    let ran = r.run_stream(&cmd, None, None, &mut |c| {
        match c {
            Chunk::Stdout(b) => io.stdout(b),
            Chunk::Stderr(b) => io.stderr(b),
            Chunk::Idle => {}
        }
        // A second interrupt ends run_stream itself (Interrupted).
        let n = crate::interrupt::count().wrapping_sub(base);
        if n >= 1 && !sent_int && !crate::interrupt::aborting() {
            sent_int = true;
            io.say("interrupted: stopping the workload; the agent finishes its file (interrupt again to abort)");
            let k = format!("kill -INT \"$(cat {})\"", shell_quote(&files.pid));
            let _ = r.run(&k, None, SMALL_OUTPUT);
        }
        Ok(())
    });
    match ran {
        Err(RemoteError::Interrupted { .. }) => {
            cleanup(r, files);
            Err(RunError::Aborted { host: r.name() })
        }
        Err(e) => Err(e.into()),
        Ok(_) => Ok(sent_int),
    }
}

/// After [`run_agent`], in one command: how the agent says the run ended (its status
/// file), and when it recorded, its record file fetched to `local` and the run's files
/// removed there. A run that did not record gives its error; the caller then saves a
/// killed agent's partial file ([`fetch_partial`]) or cleans up ([`cleanup`]). With
/// `keep_old` (`record`), a regular `local` the complete file replaces is kept as
/// `local.old` ([`crate::files::output::keep_previous`]).
pub fn finish(
    r: &Remote,
    files: &RunFiles,
    interrupted: bool,
    local: &Path,
    keep_old: bool,
) -> Result<(Finished, crate::lab::remote::Fetched), RunError> {
    let then = format!(
        "rm -f {} {} {} {}",
        shell_quote(&files.file),
        shell_quote(&format!("{}.part", files.file)),
        shell_quote(&files.status),
        shell_quote(&files.pid)
    );
    let mut line = String::new();
    let got = fetch_file_with(local, keep_old, |dest| {
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
            // `ok CODE`, then `stat --no-summary`'s user and system times (unused here).
            let code = rest.split_whitespace().next().unwrap_or("");
            let status = code.parse().map_err(|_| RunError::AgentFailed {
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

/// How long the clean-up after a second interrupt may take: labperf exits within a second.
pub const ABORT_GRACE: std::time::Duration = std::time::Duration::from_millis(500);

/// Removes the run's files from the lab machine; after a second interrupt, first kills its
/// agent (and so its workload) if it still runs. One command, given [`ABORT_GRACE`] after a
/// second interrupt.
pub fn cleanup(r: &Remote, files: &RunFiles) {
    let pid = shell_quote(&files.pid);
    let aborting = crate::interrupt::aborting();
    let _ = r.run_briefly(
        &format!(
            "{}rm -f {} {} {} {pid}",
            if aborting {
                format!("[ -f {pid} ] && kill -KILL \"$(cat {pid})\" 2>/dev/null; ")
            } else {
                String::new()
            },
            shell_quote(&files.file),
            shell_quote(&format!("{}.part", files.file)),
            shell_quote(&files.status),
        ),
        if aborting {
            ABORT_GRACE
        } else {
            crate::lab::remote::SHORT_TIMEOUT
        },
    );
}

/// Fetches the remote file `remote` to `local` by [`crate::files::output`]'s rule: a regular file
/// is streamed into a new temporary file beside it, checked, then renamed, so `local` is
/// either the complete file or what it was before; a device or FIFO gets the bytes as they
/// come.
pub fn fetch_file(
    r: &Remote,
    remote: &str,
    local: &Path,
    limit: u64,
) -> Result<crate::lab::remote::Fetched, RemoteError> {
    fetch_file_with(local, false, |dest| r.fetch(remote, limit, dest).map(Some))?.ok_or_else(|| {
        RemoteError::NotRegular {
            host: r.name(),
            path: show(remote).into_owned(),
        }
    })
}

/// Streams what `fetch` writes into `local` ([`crate::files::output::Output`]), completed once
/// `fetch` says it is complete and checked (`Some`), the file it replaces kept as `.old`
/// with `keep_old`; `None` or an error leaves a regular `local` as it was.
fn fetch_file_with(
    local: &Path,
    keep_old: bool,
    fetch: impl FnOnce(
        &mut dyn std::io::Write,
    ) -> Result<Option<crate::lab::remote::Fetched>, RemoteError>,
) -> Result<Option<crate::lab::remote::Fetched>, RemoteError> {
    let mut out = crate::files::output::Output::create(local)?;
    let fetched = fetch(&mut out)?;
    if fetched.is_some() {
        if keep_old {
            crate::files::output::keep_previous(local)?;
        }
        out.commit()?;
    }
    Ok(fetched)
}

/// After an agent died: saves what it had written (its `.part` file) beside the file
/// `local` names ([`crate::files::output::partial`]); nothing is saved for a device or a FIFO.
pub fn fetch_partial(r: &Remote, files: &RunFiles, local: &Path) -> bool {
    let ok = crate::files::output::partial(local).is_some_and(|part| {
        fetch_file(r, &format!("{}.part", files.file), &part, MAX_RECORD).is_ok()
    });
    cleanup(r, files);
    ok
}
