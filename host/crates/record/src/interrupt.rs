//! Ctrl-C and SIGTERM while labperf runs workloads: counted, not fatal, so the first one
//! can stop the workload and still save its recording; a second one aborts (every loop of
//! the remote flow looks at [`aborting`], so it ends within a fraction of a second, and
//! removes what it was writing); with [`install_remote`], a third exits at once. A signal that
//! ends labperf removes the temporary files it was writing first ([`register_temporary`]).

use std::sync::atomic::{AtomicBool, AtomicI32, AtomicU32, Ordering};

static COUNT: AtomicU32 = AtomicU32::new(0);
/// [`COUNT`] when the handler was installed.
static BASE: AtomicU32 = AtomicU32::new(0);
static INSTALLED: AtomicBool = AtomicBool::new(false);
/// The count at which the handler exits the process (0: never).
static EXIT_AT: AtomicU32 = AtomicU32::new(0);

extern "C" fn on_signal(_: libc::c_int) {
    let n = COUNT.fetch_add(1, Ordering::SeqCst).wrapping_add(1);
    let at = EXIT_AT.load(Ordering::SeqCst);
    if at != 0 && n >= at {
        // ProxyCommands run in process groups of their own: no Ctrl-C reaches them.
        kill_all_groups();
        remove_temporaries();
        // SAFETY: _exit is async-signal-safe.
        unsafe { libc::_exit(130) };
    }
}

fn set_handler(handler: usize) {
    for sig in [libc::SIGINT, libc::SIGTERM] {
        // SAFETY: installing an async-signal-safe handler that only bumps an atomic (and
        // may _exit), or the default disposition.
        unsafe {
            let mut sa: libc::sigaction = std::mem::zeroed();
            sa.sa_sigaction = handler;
            libc::sigemptyset(&mut sa.sa_mask);
            libc::sigaction(sig, &sa, std::ptr::null_mut());
        }
    }
}

/// Counts SIGINT and SIGTERM from now on instead of dying of them.
pub fn install() {
    BASE.store(COUNT.load(Ordering::SeqCst), Ordering::SeqCst);
    INSTALLED.store(true, Ordering::SeqCst);
    set_handler(on_signal as *const () as usize);
}

/// As [`install`], for the remote flow: a third interrupt exits at once (status 130),
/// whatever labperf is doing.
pub fn install_remote() {
    install();
    EXIT_AT.store(
        BASE.load(Ordering::SeqCst).wrapping_add(3),
        Ordering::SeqCst,
    );
}

/// Back to the default: the next SIGINT or SIGTERM ends the process (after the remote
/// flow, while its recordings are reported).
pub fn restore_default() {
    EXIT_AT.store(0, Ordering::SeqCst);
    INSTALLED.store(false, Ordering::SeqCst);
    // The default action, after the temporaries being written are removed.
    set_handler(on_fatal as *const () as usize);
}

/// How many interrupts have arrived.
pub fn count() -> u32 {
    COUNT.load(Ordering::SeqCst)
}

/// Whether two interrupts arrived since [`install`]: whatever labperf does on a lab
/// machine stops, and what it was writing is removed.
pub fn aborting() -> bool {
    INSTALLED.load(Ordering::SeqCst)
        && COUNT
            .load(Ordering::SeqCst)
            .wrapping_sub(BASE.load(Ordering::SeqCst))
            >= 2
}

/// The process groups of the ProxyCommands running now (0: a free slot; `lab::jump`
/// registers them), for those whose connection is abandoned (a second interrupt while
/// connecting: [`kill_group`]) and for the third interrupt's immediate exit (from the
/// signal handler: atomics and kill(2) only). They run in groups of their own, which no
/// Ctrl-C of the terminal reaches.
static GROUPS: [AtomicI32; 64] = [const { AtomicI32::new(0) }; 64];

/// Notes a ProxyCommand's process group.
pub fn register_group(pgid: i32) {
    for s in &GROUPS {
        if s.compare_exchange(0, pgid, Ordering::SeqCst, Ordering::SeqCst)
            .is_ok()
        {
            return;
        }
    }
}

/// Forgets a process group (its leader reaped).
pub fn unregister_group(pgid: i32) {
    for s in &GROUPS {
        let _ = s.compare_exchange(pgid, 0, Ordering::SeqCst, Ordering::SeqCst);
    }
}

/// Kills process group `pgid` if it is still registered (its leader not yet reaped): a
/// ProxyCommand left behind by a connection given up on its thread.
pub fn kill_group(pgid: i32) {
    if GROUPS.iter().any(|s| s.load(Ordering::SeqCst) == pgid) {
        // SAFETY: signalling the process group of a ProxyCommand we started, not reaped.
        unsafe { libc::kill(-pgid, libc::SIGKILL) };
    }
}

/// Kills every registered process group (async-signal-safe).
fn kill_all_groups() {
    for s in &GROUPS {
        let p = s.load(Ordering::SeqCst);
        if p > 0 {
            // SAFETY: as in kill_group; kill(2) is async-signal-safe.
            unsafe { libc::kill(-p, libc::SIGKILL) };
        }
    }
}

/// Temporary files being written (`files/output.rs`'s `.NAME.PID-….part`), as NUL-terminated
/// paths (leaked: a signal handler may read one while it is forgotten), removed when a signal
/// ends labperf: SIGTERM or Ctrl-C during `report -o` or `export -o` leaves none behind.
static TEMPORARIES: [std::sync::atomic::AtomicPtr<libc::c_char>; 64] =
    [const { std::sync::atomic::AtomicPtr::new(std::ptr::null_mut()) }; 64];

/// The signals whose default action ends the process (SIGKILL aside, and those the kernel
/// sends for a fault): a temporary is removed first when one of them ends labperf.
const FATAL: [libc::c_int; 11] = [
    libc::SIGINT,
    libc::SIGTERM,
    libc::SIGHUP,
    libc::SIGQUIT,
    libc::SIGUSR1,
    libc::SIGUSR2,
    libc::SIGALRM,
    libc::SIGVTALRM,
    libc::SIGPROF,
    libc::SIGXCPU,
    libc::SIGXFSZ,
];

/// Notes a temporary file to remove if a signal ends labperf; returns its slot (none when
/// all are taken). Installs, once, a handler of the [`FATAL`] signals that removes them and
/// then dies of the signal, where those signals still have their default action.
pub fn register_temporary(path: &std::path::Path) -> Option<usize> {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        for sig in FATAL {
            // SAFETY: reading the current action, and replacing only the default one with
            // an async-signal-safe handler (unlink, signal, raise).
            unsafe {
                let mut old: libc::sigaction = std::mem::zeroed();
                libc::sigaction(sig, std::ptr::null(), &mut old);
                if old.sa_sigaction == libc::SIG_DFL {
                    let mut sa: libc::sigaction = std::mem::zeroed();
                    sa.sa_sigaction = on_fatal as *const () as usize;
                    libc::sigemptyset(&mut sa.sa_mask);
                    libc::sigaction(sig, &sa, std::ptr::null_mut());
                }
            }
        }
    });
    let c = std::ffi::CString::new(path.as_os_str().as_encoded_bytes()).ok()?;
    let p = c.into_raw();
    for (i, s) in TEMPORARIES.iter().enumerate() {
        if s.compare_exchange(std::ptr::null_mut(), p, Ordering::SeqCst, Ordering::SeqCst)
            .is_ok()
        {
            return Some(i);
        }
    }
    None
}

/// Forgets the temporary of `slot` (renamed into place, or removed).
pub fn unregister_temporary(slot: usize) {
    TEMPORARIES[slot].store(std::ptr::null_mut(), Ordering::SeqCst);
}

/// Removes every registered temporary (async-signal-safe: unlink(2) only).
fn remove_temporaries() {
    for s in &TEMPORARIES {
        let p = s.load(Ordering::SeqCst);
        if !p.is_null() {
            // SAFETY: a NUL-terminated path never freed; unlink is async-signal-safe.
            unsafe { libc::unlink(p) };
        }
    }
}

extern "C" fn on_fatal(sig: libc::c_int) {
    remove_temporaries();
    // SAFETY: back to the default action, then the signal again: it ends the process once
    // this handler returns, as it would have without the handler.
    unsafe {
        libc::signal(sig, libc::SIG_DFL);
        libc::raise(sig);
    }
}
