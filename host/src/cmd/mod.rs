//! One module per CLI verb (`<verb>.rs`), the options they share (`opts.rs`), and the two
//! ways the agent runs: on this machine (`local.rs`) and on lab machines (`lab.rs`).

pub mod agents;
pub mod annotate;
pub mod completions;
pub mod deploy;
pub mod diff;
pub mod dump;
pub mod event_names;
pub mod export;
pub mod hosts;
pub mod import;
pub mod info;
pub mod lab;
pub mod list;
pub mod local;
pub mod man;
pub mod opts;
pub mod perf_words;
pub mod probe;
pub mod record;
pub mod report;
pub mod script;
pub mod stat;

use std::sync::atomic::{AtomicBool, Ordering};

/// `-q/--quiet`: no report warnings or notes, no progress of a local recording.
static QUIET: AtomicBool = AtomicBool::new(false);
/// `-v/--verbose`: labperf says what it runs.
static VERBOSE: AtomicBool = AtomicBool::new(false);

/// Sets `-q` and `-v` for the whole run (main.rs, once).
pub fn set_verbosity(quiet: bool, verbose: bool) {
    QUIET.store(quiet, Ordering::Relaxed);
    VERBOSE.store(verbose, Ordering::Relaxed);
}

/// Whether `-q` was given.
pub fn quiet() -> bool {
    QUIET.load(Ordering::Relaxed)
}

/// Whether `-v` was given.
pub fn verbose() -> bool {
    VERBOSE.load(Ordering::Relaxed)
}
