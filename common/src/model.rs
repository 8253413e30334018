//! The decoded, portable form of everything a record file holds: header, records, trailer.

use alloc::string::String;
use alloc::vec::Vec;
use serde::{Deserialize, Serialize};

/// Target architecture of the agent that wrote the file.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum Arch {
    X86_64,
    Aarch64,
    Alpha,
    /// Any other `uname -m`.
    Other(String),
}

impl Arch {
    /// The `uname -m` spelling.
    pub fn name(&self) -> &str {
        match self {
            Arch::X86_64 => "x86_64",
            Arch::Aarch64 => "aarch64",
            Arch::Alpha => "alpha",
            Arch::Other(s) => s,
        }
    }
    /// Maps a `uname -m` string.
    pub fn from_uname(s: &str) -> Arch {
        match s {
            "x86_64" | "amd64" => Arch::X86_64,
            "aarch64" | "arm64" => Arch::Aarch64,
            "alpha" => Arch::Alpha,
            o => Arch::Other(o.into()),
        }
    }
}

/// Byte order of the target (the file itself is always little-endian).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum Endian {
    Little,
    Big,
}

/// What identifies the CPU, per architecture.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum CpuId {
    /// From CPUID: vendor string, display family/model and stepping, brand string.
    X86 {
        vendor: String,
        family: u32,
        model: u32,
        stepping: u32,
        model_name: String,
    },
    /// MIDR_EL1 of CPU 0 when sysfs has it, plus the implementer/part fields of /proc/cpuinfo.
    Arm {
        midr: Option<u64>,
        implementer: u32,
        part: u32,
        variant: u32,
        revision: u32,
    },
    /// The `cpu model` line of /proc/cpuinfo (e.g. `EV67`).
    Alpha { model: String },
    /// Nothing better was known: the first lines of /proc/cpuinfo.
    Unknown { cpuinfo: String },
}

/// A `perf_event_attr` as it was opened, in portable form. Field names follow
/// `linux/perf_event.h`; `flags` is the bitfield word that follows `read_format`
/// (bit 0 `disabled`, bit 1 `inherit`, ... as in the kernel header; see [`ATTR_FLAG_NAMES`]).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Attr {
    pub type_: u32,
    pub size: u32,
    pub config: u64,
    /// `sample_period`, or `sample_freq` when the `freq` flag (bit 10) is set.
    pub sample_period_or_freq: u64,
    pub sample_type: u64,
    pub read_format: u64,
    pub flags: u64,
    pub wakeup_events_or_watermark: u32,
    pub bp_type: u32,
    pub config1: u64,
    pub config2: u64,
    pub branch_sample_type: u64,
    pub sample_regs_user: u64,
    pub sample_stack_user: u32,
    pub clockid: i32,
    pub sample_regs_intr: u64,
    pub aux_watermark: u32,
    pub sample_max_stack: u16,
    pub aux_sample_size: u32,
    pub sig_data: u64,
    pub config3: u64,
}

/// Names of the `perf_event_attr` flag bits, index = bit number.
pub const ATTR_FLAG_NAMES: [&str; 39] = [
    "disabled",
    "inherit",
    "pinned",
    "exclusive",
    "exclude_user",
    "exclude_kernel",
    "exclude_hv",
    "exclude_idle",
    "mmap",
    "comm",
    "freq",
    "inherit_stat",
    "enable_on_exec",
    "task",
    "watermark",
    "precise_ip.0",
    "precise_ip.1",
    "mmap_data",
    "sample_id_all",
    "exclude_host",
    "exclude_guest",
    "exclude_callchain_kernel",
    "exclude_callchain_user",
    "mmap2",
    "comm_exec",
    "use_clockid",
    "context_switch",
    "write_backward",
    "namespaces",
    "ksymbol",
    "bpf_event",
    "aux_output",
    "cgroup",
    "text_poke",
    "build_id",
    "inherit_thread",
    "remove_on_exec",
    "sigtrap",
    "defer_callchain",
];

impl Attr {
    /// Whether flag bit `bit` is set.
    pub fn flag(&self, bit: u32) -> bool {
        bit < 64 && self.flags & (1u64 << bit) != 0
    }
    /// Whether the period field holds a frequency.
    pub fn is_freq(&self) -> bool {
        self.flag(10)
    }
    /// The names of the set flag bits.
    pub fn flag_names(&self) -> Vec<&'static str> {
        (0..ATTR_FLAG_NAMES.len() as u32)
            .filter(|&b| self.flag(b))
            .map(|b| ATTR_FLAG_NAMES[b as usize])
            .collect()
    }
}

/// One event as opened: its user-facing name, the attr, and its place in a group.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct EventDesc {
    pub name: String,
    pub attr: Attr,
    /// Index (in [`Header::events`]) of the group leader; `None` for a leader.
    pub leader: Option<u32>,
}

/// The file header (frame kind [`crate::FRAME_HEADER`]).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Header {
    /// Version string of the agent that wrote the file (e.g. `labperf-agent 0.1.0`).
    pub agent_version: String,
    pub arch: Arch,
    pub endian: Endian,
    /// `uname -r`.
    pub kernel_release: String,
    pub cpu: CpuId,
    pub hostname: String,
    /// The workload's argv, or `["--pid", PID]` when attached.
    pub command: Vec<String>,
    /// The clock of every `time` in the file (a `clockid_t`, 1 = CLOCK_MONOTONIC).
    pub clock_id: i32,
    /// That clock's value when recording started, in ns.
    pub start_time_ns: u64,
    /// Wall-clock (CLOCK_REALTIME) start, ns since the Unix epoch.
    pub start_realtime_ns: u64,
    /// Every event as opened; a sample's `event` indexes this list.
    pub events: Vec<EventDesc>,
    /// The recipe or mode used (e.g. `sample`, `stat`, `strobe:decimate`).
    pub mode: String,
    /// Free-form notes from the agent (fallbacks taken, events missing).
    pub notes: Vec<String>,
}

/// One sample (perf `PERF_RECORD_SAMPLE`). Fields the attr did not ask for are 0/empty.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Sample {
    /// Index into [`Header::events`] of the event that fired.
    pub event: u32,
    pub pid: u32,
    pub tid: u32,
    pub ip: u64,
    /// Nanoseconds on [`Header::clock_id`].
    pub time: u64,
    pub period: u64,
    pub cpu: u32,
    /// PERF_SAMPLE_READ group values, in [`Header::events`] group order.
    pub values: Vec<u64>,
    /// User callchain (return addresses), innermost first, without context markers.
    pub callchain: Vec<u64>,
    /// PERF_SAMPLE_RAW payload.
    pub raw: Option<Vec<u8>>,
    pub data_src: Option<u64>,
    pub addr: Option<u64>,
}

/// `PERF_RECORD_MMAP2`: a file mapped executable into `pid`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Mmap2 {
    pub pid: u32,
    pub tid: u32,
    pub addr: u64,
    pub len: u64,
    pub pgoff: u64,
    pub prot: u32,
    pub flags: u32,
    /// The GNU build-id when the kernel reported one (or the agent read it).
    pub build_id: Option<Vec<u8>>,
    pub path: String,
}

/// `PERF_RECORD_COMM`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Comm {
    pub pid: u32,
    pub tid: u32,
    pub comm: String,
    /// Set when the name changed through `execve` (the process image was replaced).
    pub exec: bool,
}

/// `PERF_RECORD_FORK` / `PERF_RECORD_EXIT`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Task {
    pub pid: u32,
    pub ppid: u32,
    pub tid: u32,
    pub ptid: u32,
    pub time: u64,
}

/// `PERF_RECORD_LOST`: the kernel dropped `lost` records of event `event`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Lost {
    pub event: u32,
    pub lost: u64,
}

/// `PERF_RECORD_THROTTLE` (`throttle = true`) and `PERF_RECORD_UNTHROTTLE`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Throttle {
    pub time: u64,
    pub event: u32,
    pub throttle: bool,
}

/// One counter read in counting mode.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Count {
    pub event: u32,
    pub value: u64,
    pub time_enabled: u64,
    pub time_running: u64,
}

/// Counting mode: the counters read at the end of an interval (or of the run).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Interval {
    /// ns since [`Header::start_time_ns`].
    pub time: u64,
    /// The thread counted, when counting per thread.
    pub tid: Option<u32>,
    /// Whether values are deltas over the interval (`true`) or totals since start.
    pub delta: bool,
    pub counts: Vec<Count>,
}

/// Any record of a file's record frames.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Record {
    Sample(Sample),
    Mmap2(Mmap2),
    Comm(Comm),
    Fork(Task),
    Exit(Task),
    Lost(Lost),
    Throttle(Throttle),
    Interval(Interval),
}

/// How the workload ended.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ExitStatus {
    pub code: Option<i32>,
    pub signal: Option<i32>,
}

/// The trailer (frame kind [`crate::FRAME_TRAILER`]): written once, last, on a clean finish.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Trailer {
    /// Records written in record frames (all kinds).
    pub records: u64,
    /// Record frames written.
    pub frames: u32,
    pub samples: u64,
    /// Sum of `Lost::lost`.
    pub lost: u64,
    /// Throttle records seen.
    pub throttled: u64,
    /// Samples the agent dropped on purpose (e.g. strobing decimation).
    pub dropped: u64,
    /// User + system CPU time of the agent itself.
    pub agent_cpu_ns: u64,
    /// Peak resident set size of the agent, KiB.
    pub agent_peak_rss_kib: u64,
    pub exit: ExitStatus,
    /// ns since [`Header::start_time_ns`] when recording stopped.
    pub duration_ns: u64,
}
