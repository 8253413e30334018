//! The agent on this machine, for `record` and `stat`: its result read from its status
//! file (never guessed from its exit code), Ctrl-C forwarded as the agent expects, a second
//! Ctrl-C kills it.

use anyhow::{bail, Context, Result};
use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

/// How a local run ended: the workload's exit code, and whether it was interrupted.
pub struct Finished {
    pub status: i32,
    pub interrupted: bool,
    /// The workload's user and system CPU time in ns (`stat --no-summary` says them).
    pub times: Option<(u64, u64)>,
}

/// An `ok` status line's rest: the exit code, then (`stat --no-summary`) the workload's
/// user and system time in ns.
pub fn ok_fields(rest: &str) -> (Option<i32>, Option<(u64, u64)>) {
    let mut f = rest.split_whitespace();
    let code = f.next().and_then(|c| c.parse().ok());
    let times = match (f.next(), f.next()) {
        (Some(u), Some(s)) => u.parse().ok().zip(s.parse().ok()),
        _ => None,
    };
    (code, times)
}

/// A fresh status file name in the temporary directory.
fn status_path() -> PathBuf {
    std::env::temp_dir().join(format!(
        "labperf-status-{}-{}",
        std::process::id(),
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos())
            .unwrap_or(0)
    ))
}

/// Runs `agent <verb> [-o output] --status-file F <agent_args> -- <command>` here.
pub fn run(
    agent: &Path,
    verb: &str,
    output: Option<&Path>,
    agent_args: &[String],
    progress: bool,
    command: &[OsString],
) -> Result<Finished> {
    labperf::interrupt::install();
    let status = status_path();
    let mut cmd = Command::new(agent);
    cmd.arg(verb);
    if let Some(o) = output {
        cmd.arg("-o").arg(o);
    }
    cmd.arg("--status-file").arg(&status).args(agent_args);
    if progress {
        cmd.arg("--progress");
    }
    cmd.arg("--").args(command);
    if super::verbose() {
        let words: Vec<String> = std::iter::once(cmd.get_program())
            .chain(cmd.get_args())
            .map(|w| labperf::lab::remote::shell_quote(&w.to_string_lossy()))
            .collect();
        eprintln!("labperf: running {}", labperf::text::show(&words.join(" ")));
    }
    let mut child = cmd.spawn().with_context(|| {
        format!(
            "cannot start the agent {}: check that it is executable",
            agent.display()
        )
    })?;
    // The first interrupt goes to the agent (a terminal's Ctrl-C reaches it anyway), which
    // stops the workload and finishes its file; labperf waits. A second one kills it.
    let base = labperf::interrupt::count();
    let (mut forwarded, mut killed) = (false, false);
    loop {
        if let Some(_st) = child.try_wait()? {
            break;
        }
        let n = labperf::interrupt::count().wrapping_sub(base);
        if n >= 1 && !forwarded {
            forwarded = true;
            // SAFETY: signalling our own child.
            unsafe { libc::kill(child.id() as i32, libc::SIGINT) };
        }
        if n >= 2 && !killed {
            eprintln!("labperf: interrupted again: killing the agent");
            let _ = child.kill();
            killed = true;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    let interrupted = labperf::interrupt::count() != base;
    let line = std::fs::read_to_string(&status).unwrap_or_default();
    let _ = std::fs::remove_file(&status);
    let line = line.trim();
    let (kind, rest) = line.split_once(' ').unwrap_or((line, ""));
    match kind {
        "ok" => {
            let (code, times) = ok_fields(rest);
            Ok(Finished {
                status: code.unwrap_or(0),
                interrupted,
                times,
            })
        }
        // The agent's stderr is ours: it has said why (`cannot run 'x': no such file…`)
        // on the line above, so this names the workload and the remedy, once.
        "exec-error" => bail!(
            "the workload '{}' could not be started (the agent says why above): check the command and PATH",
            labperf::text::show(&command[0].to_string_lossy())
        ),
        "disk-full" => bail!(
            "no space left for the record file: {}",
            labperf::text::show(rest)
        ),
        "agent-error" => {
            bail!("the agent could not {verb} (its message is above); nothing was recorded")
        }
        _ => {
            // The agent keeps it beside the file the output names (links resolved).
            match output.and_then(labperf::files::output::partial).filter(|p| p.exists()) {
                Some(p) => bail!(
                    "the agent was killed before it finished: what it had written is in {} (`labperf report` reads it)",
                    p.display()
                ),
                None => bail!("the agent was killed before it finished"),
            }
        }
    }
}
