//! Starting the workload gated on a pipe, so events are opened before it execs; waiting and signals.

use crate::prelude::*;

use core::sync::atomic::Ordering;

/// A spawned workload, stopped before `execve` until [`Workload::go`].
pub struct Workload {
    pub pid: i32,
    gate: i32,
    status: i32,
    argv0: String,
}

/// The last SIGINT/SIGTERM received (0 if none): the runtime's, whose blocking opens it ends.
pub use crate::rt::SIGNALLED;

extern "C" fn on_signal(sig: libc::c_int) {
    SIGNALLED.store(sig, Ordering::SeqCst);
}

/// Routes SIGINT and SIGTERM to [`SIGNALLED`].
pub fn install_signal_handlers() {
    for sig in [libc::SIGINT, libc::SIGTERM] {
        // SAFETY: installing an async-signal-safe handler that only stores an atomic.
        unsafe {
            let mut sa: libc::sigaction = core::mem::zeroed();
            sa.sa_sigaction = on_signal as *const () as usize;
            libc::sigemptyset(&mut sa.sa_mask);
            libc::sigaction(sig, &sa, core::ptr::null_mut());
        }
    }
}

impl Workload {
    /// Forks the workload; the child blocks on a pipe and execs on [`Workload::go`],
    /// which reports an exec failure.
    pub fn spawn(argv: &[crate::rt::OsString]) -> Result<Workload, String> {
        use alloc::ffi::CString;
        let cargs: Vec<CString> = argv
            .iter()
            .map(|a| {
                CString::new(a.as_bytes())
                    .map_err(|_| format!("workload argument {a:?} contains a NUL byte"))
            })
            .collect::<Result<_, _>>()?;
        // SAFETY: getpid cannot fail.
        let agent = unsafe { libc::getpid() };
        let mut ptrs: Vec<*const libc::c_char> = cargs.iter().map(|c| c.as_ptr()).collect();
        ptrs.push(core::ptr::null());
        let (mut gate, mut status) = ([0i32; 2], [0i32; 2]);
        // SAFETY: valid arrays for pipe2.
        if unsafe { libc::pipe2(gate.as_mut_ptr(), libc::O_CLOEXEC) } != 0
            || unsafe { libc::pipe2(status.as_mut_ptr(), libc::O_CLOEXEC) } != 0
        {
            return Err(format!(
                "cannot create a pipe: {}",
                crate::rt::Error::last_os_error()
            ));
        }
        // SAFETY: the agent is single-threaded here; the child only calls
        // async-signal-safe functions before execvp.
        let pid = unsafe { libc::fork() };
        if pid < 0 {
            return Err(format!(
                "cannot fork the workload: {}",
                crate::rt::Error::last_os_error()
            ));
        }
        if pid == 0 {
            // SAFETY: child side, see above.
            unsafe {
                libc::close(gate[1]);
                libc::close(status[0]);
                // A killed agent takes its workload with it: nothing runs on unobserved.
                libc::prctl(
                    libc::PR_SET_PDEATHSIG,
                    libc::SIGKILL as libc::c_ulong,
                    0,
                    0,
                    0,
                );
                if libc::getppid() != agent {
                    libc::_exit(125); // the agent died before the line above
                }
                let mut b = [0u8; 1];
                if libc::read(gate[0], b.as_mut_ptr() as *mut libc::c_void, 1) != 1 {
                    libc::_exit(125);
                }
                // The agent ignores SIGPIPE; the workload starts with the default, as
                // from a shell (an ignored signal would stay ignored across exec).
                libc::signal(libc::SIGPIPE, libc::SIG_DFL);
                libc::execvp(ptrs[0], ptrs.as_ptr());
                let e = *libc::__errno_location();
                libc::write(status[1], &e as *const i32 as *const libc::c_void, 4);
                libc::_exit(127);
            }
        }
        // SAFETY: closing the child's ends in the parent.
        unsafe {
            libc::close(gate[0]);
            libc::close(status[1]);
        }
        Ok(Workload {
            pid,
            gate: gate[1],
            status: status[0],
            argv0: argv[0].to_string_lossy().into_owned(),
        })
    }

    /// Lets the workload exec; returns why the exec failed, if it did.
    pub fn go(&mut self) -> Result<(), String> {
        let mut e = 0i32;
        // SAFETY: writing one byte to our pipe, closing it, then reading the status pipe.
        let n = unsafe {
            libc::write(self.gate, b"g".as_ptr() as *const libc::c_void, 1);
            libc::close(self.gate);
            let n = libc::read(self.status, &mut e as *mut i32 as *mut libc::c_void, 4);
            libc::close(self.status);
            n
        };
        self.gate = -1;
        if n == 4 {
            let _ = wait(self.pid, true);
            let why = match e {
                libc::ENOENT => "no such file or command in PATH".to_string(),
                libc::EACCES => "permission denied (is it executable?)".to_string(),
                libc::ENOEXEC => "not an executable format this machine runs".to_string(),
                _ => crate::rt::Error::from_raw_os_error(e).to_string(),
            };
            return Err(format!("cannot run '{}': {why}", self.argv0));
        }
        Ok(())
    }

    /// Kills a workload that was never released.
    pub fn abort(mut self) {
        if self.gate >= 0 {
            // SAFETY: closing the gate makes the child exit 125.
            unsafe { libc::close(self.gate) };
            self.gate = -1;
        }
        let _ = wait(self.pid, true);
    }
}

/// Waits for `pid`; `None` while it runs (when `block` is false).
pub fn wait(pid: i32, block: bool) -> Option<labperf_common::ExitStatus> {
    let mut st = 0;
    loop {
        // SAFETY: valid status pointer.
        let r = unsafe { libc::waitpid(pid, &mut st, if block { 0 } else { libc::WNOHANG }) };
        if r == pid {
            break;
        }
        if r == 0 {
            return None;
        }
        if r < 0 && crate::sys::errno() == libc::EINTR {
            continue;
        }
        return Some(labperf_common::ExitStatus::default());
    }
    Some(if libc::WIFEXITED(st) {
        labperf_common::ExitStatus {
            code: Some(libc::WEXITSTATUS(st)),
            signal: None,
        }
    } else {
        labperf_common::ExitStatus {
            code: None,
            signal: Some(libc::WTERMSIG(st)),
        }
    })
}

/// The exit code the agent should return for a workload status.
pub fn exit_code(s: &labperf_common::ExitStatus) -> i32 {
    match (s.code, s.signal) {
        (Some(c), _) => c,
        (None, Some(sig)) => 128 + sig,
        _ => 0,
    }
}

/// Whether an attached process still runs. A process that exited but was not reaped yet
/// (a zombie, state Z in /proc/PID/stat) has ended too: signal 0 still reaches it.
pub fn attached_alive(pid: i32) -> bool {
    // SAFETY: signal 0 only checks existence.
    if unsafe { libc::kill(pid, 0) } != 0 && crate::sys::errno() == libc::ESRCH {
        return false;
    }
    match crate::rt::read_lossy(format!("/proc/{pid}/stat")) {
        // The state follows the parenthesised command name, which may hold spaces.
        Ok(s) => !matches!(
            s.rsplit_once(')')
                .and_then(|(_, r)| r.trim_start().chars().next()),
            Some('Z' | 'X')
        ),
        Err(_) => false,
    }
}
