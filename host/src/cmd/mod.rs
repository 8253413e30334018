//! One module per CLI verb, and the options they share.

pub mod agents;
pub mod deploy;
pub mod dump;
pub mod info;
pub mod probe;
pub mod record;
pub mod remote;
pub mod report;
pub mod stat;

use labperf::report::{By, Format};
use std::path::PathBuf;

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
