//! Ctrl-C and SIGTERM while labperf runs workloads: counted, not fatal, so the first one
//! can stop the workload and still save its recording; a second one aborts (every loop of
//! the remote flow looks at [`aborting`], so it ends within a fraction of a second, and
//! removes what it was writing); with [`install_remote`], a third exits at once.

use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};

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
    set_handler(libc::SIG_DFL);
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
