//! The agent's options as parsed from its command line (`main.rs` parses them), and its version: what record, stat and plan read.

use crate::prelude::*;

pub const VERSION: &str = concat!("labperf-agent ", env!("CARGO_PKG_VERSION"));

/// Options shared by record and stat.
#[derive(Debug, Default, Clone)]
pub struct Opts {
    pub events: Vec<String>,
    pub period: Option<u64>,
    pub freq: Option<u64>,
    pub output: Option<String>,
    pub pid: Option<i32>,
    /// `-t/--tid`: attach to this thread only.
    pub tid: Option<i32>,
    /// `stat --no-summary`: no table at the end (labperf prints perf's from the file).
    pub no_summary: bool,
    /// `-q/--quiet` (`labperf -q record`): no "wrote N samples" line at the end.
    pub quiet: bool,
    /// `-a` (every online CPU: empty) or `-C LIST`: record every task on these CPUs.
    pub cpus: Option<Vec<i32>>,
    /// `--duration SECS` of a whole-machine recording, in ms.
    pub duration_ms: Option<u64>,
    /// `--status-file`: where to say how the run ended.
    pub status_file: Option<String>,
    /// `replay --sample-type/--read-format`: the ring's layout.
    pub sample_type: Option<u64>,
    pub read_format: Option<u64>,
    pub interval_ms: Option<u64>,
    pub mmap_pages: usize,
    pub no_inherit: bool,
    /// `record --discard`: the rings read and their records dropped, nothing kept but the
    /// header and trailer: what the kernel's sampling costs under the lightest reader
    /// (`cargo xtask bench`'s floor for the agent's cost).
    pub discard: bool,
    pub progress: bool,
    pub flush_ms: u64,
    pub command: Vec<crate::rt::OsString>,
    /// `record --metrics`: the strobed metrics group.
    pub metrics: bool,
    pub window: u64,
    pub jitter: bool,
    /// `--strobe auto|kernel|decimate|fixed`.
    pub strobe: String,
    /// `--topdown`, its `--level` (1 or 2) and `--per-thread`.
    pub topdown: bool,
    pub level: u8,
    pub per_thread: bool,
    /// `-g` / `--call-graph fp`: PERF_SAMPLE_CALLCHAIN.
    pub call_graph: bool,
    /// `--call-graph dwarf[,SIZE]`: the bytes of user stack each sample copies.
    pub dwarf: Option<u32>,
    /// `record --off-cpu`: each thread's time off the CPU as `offcpu-time` samples.
    pub off_cpu: bool,
}
