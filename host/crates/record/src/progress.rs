//! A progress line on stderr for operations that take more than a second (only on a terminal).

use std::io::{IsTerminal, Write};
use std::time::{Duration, Instant};

pub struct Progress {
    what: &'static str,
    start: Instant,
    last: Instant,
    shown: bool,
    enabled: bool,
}

impl Progress {
    pub fn new(what: &'static str) -> Progress {
        let now = Instant::now();
        Progress {
            what,
            start: now,
            last: now,
            shown: false,
            enabled: std::io::stderr().is_terminal(),
        }
    }

    /// Reports `done` of `total` units (bytes); prints at most every 200 ms, after the first second.
    pub fn update(&mut self, done: u64, total: u64) {
        if !self.enabled
            || self.start.elapsed() < Duration::from_secs(1)
            || self.last.elapsed() < Duration::from_millis(200)
        {
            return;
        }
        self.last = Instant::now();
        self.shown = true;
        let pct = (100 * done).checked_div(total).unwrap_or(0);
        eprint!(
            "\r{}: {pct:>3}% ({:.1} of {:.1} MiB)   ",
            self.what,
            done as f64 / 1048576.0,
            total as f64 / 1048576.0
        );
        let _ = std::io::stderr().flush();
    }

    pub fn finish(&mut self) {
        if self.shown {
            eprint!("\r{:60}\r", "");
            self.shown = false;
        }
    }
}

impl Drop for Progress {
    fn drop(&mut self) {
        self.finish();
    }
}
