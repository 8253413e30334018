//! Ctrl-C and SIGTERM while labperf runs workloads: counted, not fatal, so the first one
//! can stop the workload and still save its recording, and a second one can abort.

use std::sync::atomic::{AtomicU32, Ordering};

static COUNT: AtomicU32 = AtomicU32::new(0);

extern "C" fn on_signal(_: libc::c_int) {
    COUNT.fetch_add(1, Ordering::SeqCst);
}

/// Counts SIGINT and SIGTERM from now on instead of dying of them.
pub fn install() {
    for sig in [libc::SIGINT, libc::SIGTERM] {
        // SAFETY: installing an async-signal-safe handler that only bumps an atomic.
        unsafe {
            let mut sa: libc::sigaction = std::mem::zeroed();
            sa.sa_sigaction = on_signal as *const () as usize;
            libc::sigemptyset(&mut sa.sa_mask);
            libc::sigaction(sig, &sa, std::ptr::null_mut());
        }
    }
}

/// How many interrupts have arrived.
pub fn count() -> u32 {
    COUNT.load(Ordering::SeqCst)
}
