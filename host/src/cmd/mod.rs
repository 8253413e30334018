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
    #[arg(long)]
    pub metrics: bool,
    /// With --metrics: drop windows whose start and end symbols differ, or keep them.
    #[arg(short = 's', long = "discard", value_enum, default_value = "discard")]
    pub discard: labperf::metrics::DiscardMode,
    /// With --metrics: one row per symbol and thread, or per symbol and CPU.
    #[arg(long, value_enum, default_value = "none")]
    pub split: labperf::metrics::Split,
}
