//! The options the verbs share, each set defined once: how to reach lab machines, what a
//! recording is, and how a report is shown.

use labperf::report::{By, Format};
use std::path::PathBuf;

/// How to reach lab machines over SSH (shared by the verbs that take --host).
#[derive(Debug, Clone, clap::Args)]
pub struct RemoteOpts {
    /// known_hosts file to check host keys against [default: ~/.ssh/known_hosts].
    #[arg(long, value_name = "FILE")]
    pub known_hosts: Option<PathBuf>,
    /// Record the key of a host seen for the first time (OpenSSH's accept-new); a changed key is always refused.
    #[arg(long)]
    pub accept_new_host_key: bool,
    /// Private key to try after the ssh-agent's (repeatable).
    #[arg(long, value_name = "FILE")]
    pub identity: Vec<PathBuf>,
    /// ssh config file [default: ~/.ssh/config].
    #[arg(long, value_name = "FILE")]
    pub ssh_config: Option<PathBuf>,
    /// Directory on the lab machine for agents and runs (relative to the login
    /// directory; `~/DIR` means the same) [default: the hosts file's, else .cache/labperf].
    #[arg(long)]
    pub remote_dir: Option<String>,
    /// Seconds to wait for a TCP connection.
    #[arg(long, default_value_t = 10)]
    pub connect_timeout: u64,
    /// Use this architecture's agent instead of the one `uname -m` names: for a machine
    /// that runs foreign binaries through binfmt_misc (qemu-alpha, say).
    #[arg(long, value_name = "ARCH")]
    pub arch: Option<String>,
    /// Hosts file naming lab machines [default: ~/.config/labperf/hosts.toml].
    #[arg(long, value_name = "FILE")]
    pub hosts_file: Option<PathBuf>,
}

/// Options that shape a recording, shared with remote recording.
#[derive(Debug, Clone, clap::Args)]
pub struct RecordOpts {
    /// Event to sample (repeatable): cycles, cpu-clock, rHEX, pmu/event/, or a group {a,b}.
    /// Without a hardware PMU, hardware events fall back to cpu-clock.
    #[arg(short, long = "event")]
    pub events: Vec<String>,
    /// Sample every N events (ns for cpu-clock).
    #[arg(short = 'c', long, conflicts_with = "freq")]
    pub period: Option<u64>,
    /// Sample about HZ times per second.
    #[arg(short = 'F', long)]
    pub freq: Option<u64>,
    /// Where to write the record file.
    #[arg(short, long, default_value = "labperf.lpr")]
    pub output: PathBuf,
    /// With --metrics (per-function metrics by strobing: a short counting window after
    /// each long period -c, default 1000000): the window in cycles.
    #[arg(long, default_value_t = 300)]
    pub window: u64,
    /// With --metrics: jitter the window start.
    #[arg(long)]
    pub jitter: bool,
    /// With --metrics: auto (kernel alternating periods when verified, else decimate), kernel, decimate or fixed.
    #[arg(long, default_value = "auto")]
    pub strobe: String,
    /// With --topdown: TopDown level 1, or 2 (Sapphire Rapids and later).
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u8).range(1..=2))]
    pub level: u8,
    /// C agent (Alpha): take the samples from ring-buffer bytes saved on the target (a
    /// path there) instead of perf_event_open, which emulators such as qemu-user lack.
    /// The workload still runs; the file's header says it was replayed.
    #[arg(long, value_name = "TARGET_FILE")]
    pub replay_ring: Option<String>,
}

/// How to present a report.
#[derive(Debug, Clone, clap::Args)]
pub struct ReportOpts {
    /// Group samples by function, by mapped file, or by instruction address.
    #[arg(long, value_enum, default_value = "symbol")]
    pub by: By,
    /// Show only the N busiest rows (0 = all).
    #[arg(long, default_value_t = 20)]
    pub top: usize,
    /// Output format.
    #[arg(long, value_enum, default_value = "table")]
    pub format: Format,
    /// Exit with status 3 when the file is damaged (the report of what is intact still prints).
    #[arg(long)]
    pub strict: bool,
    /// Directory searched first for binaries (DIR/<build-id>/elf or DIR/<path>); repeatable.
    #[arg(long, value_name = "DIR")]
    pub symfs: Vec<PathBuf>,
    /// Per-function metrics (CPI, miss rates) from a `record --metrics` recording.
    #[arg(long, conflicts_with_all = ["profileme", "mem"])]
    pub metrics: bool,
    /// Alpha EV67+: ProfileMe. `record` samples cpu/instructions,profileme/ (with --host);
    /// `report` prints the DCPI-style summary (killed, invalid, mispredicted, taken,
    /// stalled, mean PCTR1, traps), one table per thing PCTR1 counted.
    #[arg(long, conflicts_with = "mem")]
    pub profileme: bool,
    /// With --profileme: one row per instruction (PMPC) instead of per symbol.
    #[arg(long, requires = "profileme")]
    pub pc: bool,
    /// Intel TopDown. `record` samples the {slots,SAMPLER,topdown-*} group (-e SAMPLER,
    /// default cycles); `report` prints slot-weighted retiring, bad speculation,
    /// frontend and backend bound per symbol, or the intervals of a `stat --topdown` file.
    #[arg(long, conflicts_with_all = ["profileme", "mem", "metrics"])]
    pub topdown: bool,
    /// Alpha EV67+: DTB hits and misses. `record` samples cpu/cycles,profileme/ with data
    /// source and address (with --host); `report` counts hits and misses of loads, stores
    /// and prefetches, by symbol and by data address.
    #[arg(long)]
    pub mem: bool,
    /// With --metrics: drop windows whose start and end symbols differ, or keep them.
    #[arg(short = 's', long = "discard", value_enum, default_value = "discard")]
    pub discard: labperf::metrics::DiscardMode,
    /// With --metrics: one row per symbol and thread, or per symbol and CPU.
    #[arg(long, value_enum, default_value = "none")]
    pub split: labperf::metrics::Split,
}
