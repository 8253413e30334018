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
    /// Callchain (return addresses), innermost first, without context markers: the
    /// kernel's frames first when the event samples the kernel (top bit set), then the
    /// user's.
    pub callchain: Vec<u64>,
    /// PERF_SAMPLE_RAW payload.
    pub raw: Option<Vec<u8>>,
    pub data_src: Option<u64>,
    pub addr: Option<u64>,
    /// PERF_SAMPLE_REGS_USER and PERF_SAMPLE_STACK_USER (`--call-graph dwarf`): what a
    /// host needs to unwind the user stack with the binaries' DWARF CFI.
    pub user_stack: Option<UserStack>,
}

/// A sample's user registers and a copy of its user stack (`--call-graph dwarf`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct UserStack {
    /// The user registers of the event's `sample_regs_user`, in ascending bit order
    /// (x86_64: bp, sp, ip; aarch64: x29, x30, sp, pc).
    pub regs: Vec<u64>,
    /// The address of `data[0]`: the sampled user stack pointer.
    pub sp: u64,
    /// The stack from `sp` up, as the kernel copied it (at most [`crate::MAX_USER_STACK`]).
    pub data: Vec<u8>,
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

impl Count {
    /// The value scaled for multiplexing as perf scales it (`value * enabled / running`,
    /// integer arithmetic; 0 when the counter never ran).
    pub fn scaled(&self) -> u64 {
        let v = (u128::from(self.value) * u128::from(self.time_enabled))
            .checked_div(u128::from(self.time_running))
            .unwrap_or(0);
        u64::try_from(v).unwrap_or(u64::MAX)
    }

    /// The share of the enabled time the counter ran, in hundredths of a percent.
    pub fn running_bp(&self) -> u64 {
        let v = (u128::from(self.time_running) * 10_000)
            .checked_div(u128::from(self.time_enabled))
            .unwrap_or(0);
        u64::try_from(v).unwrap_or(u64::MAX)
    }
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

/// One kernel function of the recording machine (a text symbol of `/proc/kallsyms`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct KernelSymbol {
    /// Its address as the running kernel has it (KASLR applied).
    pub start: u64,
    /// The next symbol's address: the function holds `start..end`.
    pub end: u64,
    pub name: String,
    /// The module that holds it, `None` for the kernel image.
    pub module: Option<String>,
}

/// `KSYMS`: the functions of the recording machine's kernel that hold the kernel addresses
/// the file's samples name (ips and callchain entries), read from `/proc/kallsyms` when
/// the recording ends; sorted by address, at most [`crate::MAX_KSYMS`] per record (a file
/// may hold several). Kernel addresses are those with the top bit set.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct KernelSymbols {
    pub syms: Vec<KernelSymbol>,
    /// Set when `/proc/kallsyms` showed every address as 0: the value of
    /// `/proc/sys/kernel/kptr_restrict` (kernel functions cannot be named).
    pub hidden: Option<u32>,
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
    KernelSymbols(KernelSymbols),
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

/// Whose CPU time a [`Usage`] counts.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum UsageScope {
    /// The workload the agent started, with every descendant that was waited for
    /// (`getrusage(RUSAGE_CHILDREN)` once the workload was reaped: the kernel's rusage).
    Workload,
    /// The process attached to (`-p`): its `/proc/PID/stat` utime and stime (with those of
    /// the children it waited for) from the attach to the end, or to its last reading
    /// before it ended.
    Process,
    /// The thread attached to (`-t`): its `/proc/PID/task/TID/stat`, likewise.
    Thread,
    /// The CPUs recorded (`-a`/`-C`): `/proc/stat`'s busy time of those CPUs from start to
    /// end (user and nice as user; system, irq and softirq as system), `cpus` of them, and
    /// their idle time (idle and iowait) beside it.
    Cpus { cpus: u32, idle_ns: u64 },
}

/// The CPU time of what was recorded by the kernel's own accounting (trailer item
/// [`crate::trailer_item::USAGE`]): what a report's samples are checked against.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Usage {
    pub scope: UsageScope,
    /// CPU time in user mode, ns.
    pub user_ns: u64,
    /// CPU time in kernel mode, ns.
    pub system_ns: u64,
    /// Page faults served without I/O, and with I/O (0 where the scope has none: CPUs).
    pub minor_faults: u64,
    pub major_faults: u64,
    /// How fine the times above are, ns: 1,000 for rusage (microseconds), a clock tick
    /// (10,000,000 at USER_HZ 100) for `/proc`.
    pub resolution_ns: u64,
}

/// What the trailer frame carries after the [`Trailer`] (wire version 2 on): tagged items,
/// as the header extension's.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TrailerExt {
    /// Item 1: the recorded CPU time by the kernel's accounting.
    pub usage: Option<Usage>,
    /// Items of tags this decoder does not know (skipped).
    pub unknown_items: u32,
}

/// How strobed windows were made (see [`Recipe::Strobe`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum StrobeMode {
    /// The kernel's alternating periods, RFC v2 ABI (`alternative_sample_period`).
    KernelRfcV2,
    /// The kernel's alternating periods, v4 ABI (`hf_sample`).
    KernelV4,
    /// Arm's driver term `strobe_period`.
    DriverTerm,
    /// Every window sampled, one kept about each period, the rest dropped by the agent.
    Decimate,
    /// Every window kept: a plain fixed short period.
    Fixed,
}

impl StrobeMode {
    /// The name the agent prints and the legacy mode string carries.
    pub fn name(self) -> &'static str {
        match self {
            StrobeMode::KernelRfcV2 => "kernel-rfc-v2",
            StrobeMode::KernelV4 => "kernel-v4",
            StrobeMode::DriverTerm => "driver-strobe_period",
            StrobeMode::Decimate => "decimate",
            StrobeMode::Fixed => "fixed",
        }
    }
    /// The mode of `name` (see [`StrobeMode::name`]).
    pub fn from_name(name: &str) -> Option<StrobeMode> {
        [
            StrobeMode::KernelRfcV2,
            StrobeMode::KernelV4,
            StrobeMode::DriverTerm,
            StrobeMode::Decimate,
            StrobeMode::Fixed,
        ]
        .into_iter()
        .find(|m| m.name() == name)
    }
}

/// What kind of recording a file is: the typed contract behind [`Header::mode`]. Written
/// (wire version 2 on) in the header-extension frame; for older files
/// [`Recipe::from_legacy_mode`] reads it back from the mode string and the events.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum Recipe {
    /// Samples of one or more events; `group_read`: groups read with PERF_SAMPLE_READ.
    Sample { group_read: bool },
    /// Per-function metrics by strobing: a `window`-cycle window after each `period`.
    Strobe {
        mode: StrobeMode,
        period: u64,
        window: u64,
        jitter: bool,
    },
    /// Counting (`stat`): interval records.
    Stat,
    /// `stat --topdown`: TopDown groups counted per thread (`legacy`: the pre-Ice Lake
    /// events per core), intervals of the named core `pmu`.
    StatTopdown {
        level: u8,
        legacy: bool,
        pmu: String,
    },
    /// `record --topdown`: `{slots, SAMPLER, topdown-*}` read in each sample.
    RecordTopdown { level: u8 },
    /// Alpha ProfileMe samples (28-byte RAW status).
    ProfileMe,
    /// Alpha DTB hits and misses (ProfileMe with DATA_SRC and ADDR).
    Mem,
}

impl Recipe {
    /// The legacy [`Header::mode`] string of this recipe (what wire version 1 carried).
    pub fn mode_string(&self) -> String {
        match self {
            Recipe::Sample { group_read: false } => "sample".into(),
            Recipe::Sample { group_read: true } => "sample-read".into(),
            Recipe::Strobe {
                mode,
                period,
                window,
                jitter,
            } => alloc::format!(
                "strobe:{};period={period};window={window};jitter={}",
                mode.name(),
                u8::from(*jitter)
            ),
            Recipe::Stat => "stat".into(),
            Recipe::StatTopdown { level, legacy, pmu } => alloc::format!(
                "stat:topdown;level={level};kind={};pmu={pmu}",
                if *legacy { "legacy" } else { "metrics" }
            ),
            Recipe::RecordTopdown { .. } => "sample-read".into(),
            Recipe::ProfileMe | Recipe::Mem => "sample".into(),
        }
    }

    /// The recipe of a file without a header extension (wire version 1), from its mode
    /// string and events: what the host used to guess in several places, now in one.
    pub fn from_legacy_mode(h: &Header) -> Recipe {
        let m = h.mode.as_str();
        if let Some(rest) = m.strip_prefix("strobe:") {
            let mut parts = rest.split(';');
            let mode = parts.next().and_then(StrobeMode::from_name);
            let (mut period, mut window, mut jitter) = (None, None, false);
            for p in parts {
                match p.split_once('=') {
                    Some(("period", v)) => period = v.parse().ok(),
                    Some(("window", v)) => window = v.parse().ok(),
                    Some(("jitter", v)) => jitter = v == "1",
                    _ => {}
                }
            }
            if let (Some(mode), Some(period), Some(window)) = (mode, period, window) {
                return Recipe::Strobe {
                    mode,
                    period,
                    window,
                    jitter,
                };
            }
        }
        let names = || h.events.iter().map(|e| e.name.as_str());
        if let Some(rest) = m.strip_prefix("stat:topdown") {
            let field = |k: &str| {
                rest.split(';')
                    .find_map(|p| p.strip_prefix(k)?.strip_prefix('='))
                    .unwrap_or("")
            };
            return Recipe::StatTopdown {
                level: field("level").parse().unwrap_or(1),
                legacy: field("kind") == "legacy",
                pmu: field("pmu").into(),
            };
        }
        if m == "stat" {
            return Recipe::Stat;
        }
        let level = if names().any(|n| n == crate::topdown::LEVEL2_EVENTS[0].0) {
            2
        } else {
            1
        };
        if names().any(|n| n == crate::topdown::SLOTS.0) {
            return Recipe::RecordTopdown { level };
        }
        // ProfileMe: the cpu PMU's profileme events (RAW samples), by their names.
        if let Some(e) = h.events.first() {
            if e.attr.sample_type & (1 << 10) != 0 {
                return if e.attr.sample_type & (1 << 15) != 0 {
                    Recipe::Mem
                } else {
                    Recipe::ProfileMe
                };
            }
        }
        Recipe::Sample {
            group_read: m == "sample-read",
        }
    }
}

/// What the header-extension frame (kind [`crate::FRAME_HEADER_EXT`]) adds to the header.
/// Each field is one tagged item of the frame, so items can be appended without breaking
/// older readers (they skip tags they do not know).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct HeaderExt {
    /// Item 1: what kind of recording this is.
    pub recipe: Option<Recipe>,
    /// Item 2: the samples were re-encoded from saved ring-buffer bytes (`replay`), not
    /// read from a perf fd while the workload ran.
    pub replayed: bool,
    /// Item 3: the recording machine's vDSO image (an ELF), when the agent could read it.
    pub vdso: Option<Vec<u8>>,
    /// Items of tags this decoder does not know (skipped).
    pub unknown_items: u32,
}

/// The recipe of a file: its header extension's, or (wire version 1) the one its mode
/// string and events imply.
pub fn recipe_of(h: &Header, ext: Option<&HeaderExt>) -> Recipe {
    ext.and_then(|x| x.recipe.clone())
        .unwrap_or_else(|| Recipe::from_legacy_mode(h))
}
