//! The agent on this machine, for `record` and `stat`: its result read from its status
//! file (never guessed from its exit code; in a private 0700 directory of the run), Ctrl-C
//! forwarded as the agent expects, a second Ctrl-C kills it, a third exits.

use anyhow::{bail, Context, Result};
use std::ffi::OsString;
use std::path::Path;
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

/// Runs `agent <verb> [-o output] --status-file F <agent_args> -- <command>` here.
pub fn run(
    agent: &Path,
    verb: &str,
    output: Option<&Path>,
    agent_args: &[String],
    progress: bool,
    command: &[OsString],
) -> Result<Finished> {
    // A third interrupt exits, whatever labperf is waiting for.
    labperf::interrupt::install_remote();
    // The status file in a directory of this run's own (0700): no other user can read it,
    // nor plant a link or a FIFO at its name.
    let dir = labperf::files::private::PrivateDir::new().context(
        "cannot make a private directory for the agent's status file in the temporary directory: check TMPDIR",
    )?;
    let status = dir.join("status");
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
    let me = die_with_labperf(&mut cmd);
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
    if killed {
        kill_orphans(me);
    }
    let interrupted = labperf::interrupt::count() != base;
    let line = labperf::files::private::read_regular(&status, 64 << 10);
    drop(dir);
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

/// The agent never outlives labperf (killed, or a test's panic): it dies with it, and its
/// workload with the agent (the agents set the same on their workload). Orphans of the
/// workload (a shell's children) come to labperf, which kills them at a second interrupt
/// ([`kill_orphans`]). Returns labperf's pid.
fn die_with_labperf(cmd: &mut Command) -> i32 {
    // SAFETY: prctl reads or sets flags of this process only.
    unsafe { libc::prctl(libc::PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) };
    let me = std::process::id() as i32;
    // SAFETY: between fork and exec the closure calls only prctl and getppid, both
    // async-signal-safe; labperf spawns the agent from its main thread, which lives as
    // long as labperf (PR_SET_PDEATHSIG fires when the forking thread ends).
    unsafe {
        std::os::unix::process::CommandExt::pre_exec(cmd, move || {
            libc::prctl(
                libc::PR_SET_PDEATHSIG,
                libc::SIGKILL as libc::c_ulong,
                0,
                0,
                0,
            );
            if libc::getppid() != me {
                return Err(std::io::Error::from_raw_os_error(libc::ESRCH)); // labperf died
            }
            Ok(())
        });
    }
    me
}

/// After a second interrupt killed the agent: kills what is left of its workload, the
/// processes that came to labperf (a subreaper) as their parents died (the workload dies
/// with the agent, but a shell's children, `sh -c "trap '' INT; sleep 6"`'s sleep, would
/// run on). Until none has come for 100 ms, at most 2 s.
fn kill_orphans(me: i32) {
    let t = std::time::Instant::now();
    let mut quiet = 0;
    while quiet < 4 && t.elapsed() < Duration::from_secs(2) {
        let kids = children(me);
        quiet = if kids.is_empty() { quiet + 1 } else { 0 };
        for k in kids {
            // SAFETY: signalling and reaping a child of ours.
            unsafe {
                libc::kill(k, libc::SIGKILL);
                libc::waitpid(k, std::ptr::null_mut(), libc::WNOHANG);
            }
        }
        std::thread::sleep(Duration::from_millis(25));
    }
}

/// The processes whose parent is `me` (from /proc/PID/stat; zombies too, to reap).
fn children(me: i32) -> Vec<i32> {
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    dir.flatten()
        .filter_map(|e| e.file_name().to_str()?.parse::<i32>().ok())
        .filter(|pid| {
            let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
            // "PID (COMM) STATE PPID ...": COMM may hold spaces and parentheses.
            stat.rsplit_once(") ")
                .and_then(|(_, r)| r.split(' ').nth(1))
                .and_then(|p| p.parse::<i32>().ok())
                == Some(me)
        })
        .collect()
}
