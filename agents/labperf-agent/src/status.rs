//! How a run ended, told out of band: the agent's own failures apart from the workload's
//! exit status, in `--status-file` (the host never guesses from exit codes or stderr).
//!
//! The file holds one line: `ok <workload exit code>` (for `stat --no-summary`, the
//! labperf CLI's stat, followed by ` <user ns> <system ns>`: the CPU time of the workload
//! the agent started and reaped, which `perf stat` prints; 0 for an attached process), `exec-error <message>` (the
//! workload could not be started), `disk-full <message>` (the record file could not be
//! written: no space) or `agent-error <message>` (anything else the agent could not do).
//! A missing file means the agent was killed before it could write one.

use crate::prelude::*;

/// Why the agent could not finish a recording.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FailKind {
    /// The agent itself could not record (events, options, ring buffers...).
    Agent,
    /// The workload could not be started.
    Exec,
    /// The record file could not be written for lack of space.
    DiskFull,
}

/// An agent failure: its kind and the message for the user.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Fail {
    pub kind: FailKind,
    pub msg: String,
}

impl Fail {
    pub fn exec(msg: String) -> Fail {
        Fail {
            kind: FailKind::Exec,
            msg,
        }
    }

    /// A failure to write `what`: disk full for ENOSPC and EDQUOT, else the agent's.
    pub fn io(e: &crate::rt::Error, msg: String) -> Fail {
        let kind = match e.raw_os_error() {
            Some(libc::ENOSPC) | Some(libc::EDQUOT) => FailKind::DiskFull,
            _ => FailKind::Agent,
        };
        Fail { kind, msg }
    }

    /// The agent's exit code for this failure: 127 when the workload could not be
    /// started, else 125.
    pub fn exit_code(&self) -> i32 {
        match self.kind {
            FailKind::Exec => 127,
            _ => 125,
        }
    }
}

impl From<String> for Fail {
    fn from(msg: String) -> Fail {
        Fail {
            kind: FailKind::Agent,
            msg,
        }
    }
}

impl From<&str> for Fail {
    fn from(msg: &str) -> Fail {
        Fail::from(msg.to_string())
    }
}

impl core::fmt::Display for Fail {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.write_str(&self.msg)
    }
}

/// The status line for a run's result; `times`: with the workloads' CPU times.
pub fn line(r: &Result<i32, Fail>, times: bool) -> String {
    let one_line = |m: &str| m.replace(['\n', '\r'], " ");
    match r {
        Ok(code) if !times => format!("ok {code}\n"),
        Ok(code) => {
            let (user, sys, _) = crate::sys::usage(libc::RUSAGE_CHILDREN);
            format!("ok {code} {user} {sys}\n")
        }
        Err(f) => format!(
            "{} {}\n",
            match f.kind {
                FailKind::Agent => "agent-error",
                FailKind::Exec => "exec-error",
                FailKind::DiskFull => "disk-full",
            },
            one_line(&f.msg)
        ),
    }
}

/// Writes the status file by `dest.rs`'s rule (a regular file through a new 0600 temporary,
/// then a rename; a device, FIFO or descriptor straight through); a failure to write it is only
/// reported, as the run's own result matters more.
pub fn write(path: &str, r: &Result<i32, Fail>, times: bool) {
    let res = crate::dest::open(path, ".tmp", "the status file")
        .map_err(|(_, m)| m)
        .and_then(|(mut f, at, then)| {
            f.write_all(line(r, times).as_bytes())
                .and_then(|_| then.map_or(Ok(()), |p| crate::rt::rename(&at, p)))
                .map_err(|e| format!("cannot write the status file '{path}': {e}"))
        });
    if let Err(e) = res {
        eprintln!("labperf-agent: warning: {e}");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn status_lines() {
        assert_eq!(line(&Ok(125), false), "ok 125\n");
        // stat --no-summary: the code, then the workloads' user and system ns.
        let l = line(&Ok(3), true);
        let f: Vec<&str> = l.trim_end().split(' ').collect();
        assert_eq!((f.len(), f[0], f[1]), (4, "ok", "3"), "{l}");
        assert!(
            f[2].parse::<u64>().is_ok() && f[3].parse::<u64>().is_ok(),
            "{l}"
        );
        assert_eq!(
            line(
                &Err(Fail::exec("cannot run 'x':\nno such file".into())),
                true
            ),
            "exec-error cannot run 'x': no such file\n"
        );
        let full = crate::rt::Error::from_raw_os_error(libc::ENOSPC);
        assert_eq!(
            line(&Err(Fail::io(&full, "cannot write".into())), true),
            "disk-full cannot write\n"
        );
        assert_eq!(
            line(&Err("no events".into()), false),
            "agent-error no events\n"
        );
        assert_eq!(Fail::exec(String::new()).exit_code(), 127);
        assert_eq!(Fail::from("x").exit_code(), 125);
    }
}
