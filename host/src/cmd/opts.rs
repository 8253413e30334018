//! The options the verbs share, each defined once: how to reach lab machines, what a
//! recording is, and how a report is shown. A verb whose help says an option in its own
//! words replaces the help text only (`#[command(mut_arg(ID, help(TEXT)))]`).

use labperf::views::report::By;
use labperf::views::view::View;
use std::path::PathBuf;

/// A verb's own help text for a shared option: `#[command(mut_arg("host", help("…")))]`
/// (no trailing period, as clap prints a one-paragraph doc comment).
pub fn help(text: &'static str) -> impl FnOnce(clap::Arg) -> clap::Arg {
    move |a| a.help(text)
}

/// `--host`: the lab machines a verb runs on (`record`, `stat`).
#[derive(Debug, Clone, clap::Args)]
pub struct HostOpt {
    /// Lab machines to record on: [user@]host[:port], ~/.ssh/config or hosts-file names, or
    /// @group of the hosts file (an Ansible inventory's groups), comma-separated.
    #[arg(long, value_delimiter = ',')]
    pub host: Vec<String>,
}

/// `HOST,…`: the lab machines a verb reaches, as its positional argument (`deploy`, `probe`,
/// `hosts check`).
#[derive(Debug, Clone, clap::Args)]
pub struct HostsArg {
    /// Hosts or @groups [default: every host of the hosts file].
    #[arg(value_delimiter = ',')]
    pub hosts: Vec<String>,
}

/// `FILE`: the one record file a verb reads (`dump`, `info`).
#[derive(Debug, Clone, clap::Args)]
pub struct FileArg {
    #[arg(default_value = "labperf.lpr")]
    pub file: PathBuf,
}

/// `--hosts-file` (the verbs that reach lab machines, and `hosts list`).
#[derive(Debug, Clone, clap::Args)]
pub struct HostsFileOpt {
    /// Hosts file naming lab machines [default: ~/.config/labperf/hosts.toml].
    #[arg(long, value_name = "FILE")]
    pub hosts_file: Option<PathBuf>,
}

/// `-e/--event`: the events the agent samples or counts (`record`, `stat`).
#[derive(Debug, Clone, clap::Args)]
pub struct EventsOpt {
    /// Events to sample, as perf spells them: a comma list (-e cpu-clock,page-faults) or -e
    /// repeated; each cycles, cpu-clock, rHEX, pmu/event/ or a group {a,b} (its leader
    /// samples, the others are read in each sample: perf's :S); :u, :k modifiers.
    /// Without a hardware PMU, record samples cpu-clock in place of a hardware event, and
    /// stat shows it <not supported>. User and kernel mode
    /// are both sampled where the kernel allows it (root, CAP_PERFMON, or
    /// perf_event_paranoid <= 1), as perf does: `:u` samples user mode only, `:k` kernel
    /// mode only. Every report says what the samples cover of the workload's CPU time.
    /// `labperf list` lists this machine's events (`--host H`: a lab machine's).
    #[arg(short, long = "event", value_parser = super::event_names::event_spec)]
    pub events: Vec<String>,
}

/// A table's format as the command line spells it; the library's model is
/// `labperf::render::table::Format`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum TableFormat {
    Table,
    Csv,
    Json,
    /// One self-contained page (no network): tables, charts over time; `report` adds the
    /// recording's facts and its flame graph.
    Html,
}

impl From<TableFormat> for labperf::render::table::Format {
    fn from(f: TableFormat) -> labperf::render::table::Format {
        use labperf::render::table::Format;
        match f {
            TableFormat::Table => Format::Table,
            TableFormat::Csv => Format::Csv,
            TableFormat::Json => Format::Json,
            TableFormat::Html => Format::Html,
        }
    }
}

/// `--format` of a table (`report`, `diff`, `record`, `stat`, `probe`, `hosts check`).
#[derive(Debug, Clone, Copy, clap::Args)]
pub struct FormatOpt {
    /// Output format.
    #[arg(long, value_enum, default_value = "table")]
    pub format: TableFormat,
}

impl FormatOpt {
    /// The library's format.
    pub fn get(self) -> labperf::render::table::Format {
        self.format.into()
    }
}

/// `--strict` (`report`, `diff`, `record`, `dump`, `info`).
#[derive(Debug, Clone, Copy, clap::Args)]
pub struct StrictOpt {
    /// Exit with status 3 when the file is damaged (the report of what is intact still prints).
    #[arg(long)]
    pub strict: bool,
}

/// `-o/--output` where it may be left out (`report`, `stat`, `export`).
#[derive(Debug, Clone, clap::Args)]
pub struct OutputOpt {
    /// Write the report to this file instead of standard output (`-`: standard output; a
    /// device or FIFO is written straight through, a symbolic link's file is replaced).
    #[arg(short, long)]
    pub output: Option<PathBuf>,
}

/// `-o/--output`: the record file a verb writes (`record`, `import`).
#[derive(Debug, Clone, clap::Args)]
pub struct RecordFileOpt {
    /// Where to write the record file: a regular file (replaced once complete; through a
    /// symbolic link, the file it names), or a device or FIFO written straight through
    /// (then no report follows). Not `-`: the workload's output goes to standard output.
    #[arg(short, long, default_value = "labperf.lpr")]
    pub output: PathBuf,
}

/// `--topdown` (`record`, `stat`).
#[derive(Debug, Clone, Copy, clap::Args)]
pub struct TopdownOpt {
    /// Intel TopDown: samples the {slots,SAMPLER,topdown-*} group (-e SAMPLER, default
    /// cycles) for slot-weighted retiring, bad speculation, frontend and backend bound per
    /// function.
    #[arg(long)]
    pub topdown: bool,
}

/// `--level` of TopDown (`record`, `stat`).
#[derive(Debug, Clone, Copy, clap::Args)]
pub struct LevelOpt {
    /// With --topdown: TopDown level 1, or 2 (Sapphire Rapids and later).
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u8).range(1..=2))]
    pub level: u8,
}

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
    /// ssh config file [default: ~/.ssh/config]: HostName, User, Port, IdentityFile,
    /// ProxyJump and ProxyCommand are applied; any other option of a block that applies is
    /// named once on stderr.
    #[arg(long, value_name = "FILE")]
    pub ssh_config: Option<PathBuf>,
    /// Reach the hosts through these jump hosts, in order, as `ssh -J` does (each looked up
    /// in the ssh config; the first by its own ProxyJump or ProxyCommand too); replaces the
    /// config's ProxyJump and ProxyCommand for the hosts; `none`: directly.
    #[arg(short = 'J', long = "jump", value_name = "[USER@]HOST[:PORT],...")]
    pub jump: Option<String>,
    /// Directory on the lab machine for agents and runs (relative to the login
    /// directory; `~/DIR` means the same) [default: the hosts file's, else .cache/labperf].
    #[arg(long)]
    pub remote_dir: Option<String>,
    /// Seconds to wait for a connection: TCP, the SSH handshake and the login, of every
    /// jump host and the host together.
    #[arg(long, default_value_t = 10)]
    pub connect_timeout: u64,
    /// Use this architecture's agent instead of the one `uname -m` names: for a machine
    /// that runs foreign binaries through binfmt_misc (qemu-alpha, say).
    #[arg(long, value_name = "ARCH")]
    pub arch: Option<String>,
    #[command(flatten)]
    pub hosts: HostsFileOpt,
    /// At most N hosts at once (each host's connection, upload, run and fetch are its
    /// own; the others start as one finishes) [default: 16].
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u16).range(1..))]
    pub jobs: Option<u16>,
    /// Each host's progress: one live line per host on a terminal (connecting, uploading,
    /// running N s with the agent's samples so far, fetching, done or failed), or the same
    /// facts as plain lines (not a terminal, or `plain`).
    #[arg(long, value_enum, default_value = "auto")]
    pub progress: labperf::lab::board::Progress,
}

impl RemoteOpts {
    /// How many hosts run at once.
    pub fn jobs(&self) -> usize {
        usize::from(self.jobs.unwrap_or(16))
    }
}

/// How call stacks are recorded (perf's spellings).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CallGraph {
    /// The kernel walks the frame pointers.
    Fp,
    /// Each sample copies the user registers and this many bytes of user stack, unwound
    /// on the host with the binaries' DWARF CFI.
    Dwarf(u32),
}

impl std::str::FromStr for CallGraph {
    type Err = String;
    fn from_str(s: &str) -> Result<CallGraph, String> {
        match s.split_once(',') {
            None if s == "fp" => Ok(CallGraph::Fp),
            None if s == "dwarf" => Ok(CallGraph::Dwarf(8192)),
            Some(("dwarf", n)) => match n.parse::<u32>() {
                Ok(n) if (8..=65528).contains(&n) => Ok(CallGraph::Dwarf(n & !7)),
                _ => Err(format!(
                    "dwarf,SIZE takes 8 to 65528 bytes of stack, not '{n}'"
                )),
            },
            _ => Err(format!(
                "takes fp or dwarf[,SIZE] (bytes of stack, default 8192), not '{s}'"
            )),
        }
    }
}

impl CallGraph {
    /// The agent's spelling.
    pub fn arg(self) -> String {
        match self {
            CallGraph::Fp => "fp".into(),
            CallGraph::Dwarf(n) => format!("dwarf,{n}"),
        }
    }
}

/// `-F`: a frequency in Hz, or `max`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Freq {
    Hz(u64),
    /// The kernel's limit, kernel.perf_event_max_sample_rate, of the machine recorded.
    Max,
}

impl std::str::FromStr for Freq {
    type Err = String;
    fn from_str(s: &str) -> Result<Freq, String> {
        match s {
            "max" => Ok(Freq::Max),
            _ => match s.parse() {
                // perf refuses it too ("frequency and count are zero, aborting").
                Ok(0) => Err(
                    "takes samples per second, 1 or more, or `max`: a frequency of 0 is invalid"
                        .into(),
                ),
                Ok(n) => Ok(Freq::Hz(n)),
                Err(_) => Err(format!(
                    "takes samples per second (a whole number) or `max`, not '{s}'"
                )),
            },
        }
    }
}

/// Where the kernel keeps its limit of `-F`.
pub const MAX_SAMPLE_RATE: &str = "/proc/sys/kernel/perf_event_max_sample_rate";

impl Freq {
    /// The frequency in Hz on this machine: `max` is its kernel's limit.
    pub fn here(self) -> anyhow::Result<u64> {
        match self {
            Freq::Hz(n) => Ok(n),
            Freq::Max => std::fs::read_to_string(MAX_SAMPLE_RATE)
                .ok()
                .and_then(|s| s.trim().parse().ok())
                .ok_or_else(|| {
                    anyhow::anyhow!("-F max: cannot read {MAX_SAMPLE_RATE}: give -F HZ")
                }),
        }
    }
}

/// `-c`: events a sample, 1 or more (the agent refuses 0 as a frequency of 0).
fn period(s: &str) -> Result<u64, String> {
    match s.parse::<u64>() {
        Ok(0) => Err("takes events per sample, 1 or more: a period of 0 is invalid".into()),
        Ok(n) => Ok(n),
        Err(_) => Err(format!(
            "takes events per sample (a whole number, 1 or more), not '{s}'"
        )),
    }
}

/// Refuses a file named twice among the record files a command merges (`report A B`,
/// `export A B`): by another name too (a hard or symbolic link, `./A`), as the same device
/// and inode. Merged with itself, its samples would count twice.
pub fn once_each(files: &[PathBuf]) -> anyhow::Result<()> {
    use std::os::unix::fs::MetadataExt;
    let mut seen: Vec<((u64, u64), &PathBuf)> = Vec::new();
    for f in files {
        // One that cannot be read is said by the reading.
        let Ok(m) = std::fs::metadata(f) else {
            continue;
        };
        let id = (m.dev(), m.ino());
        if let Some((_, first)) = seen.iter().find(|(i, _)| *i == id) {
            let (a, b) = (first.display().to_string(), f.display().to_string());
            let (a, b) = (labperf::text::show(&a), labperf::text::show(&b));
            anyhow::bail!(if a == b {
                format!("{a} is named twice: merged with itself, its samples would count twice; name it once")
            } else {
                format!("{a} and {b} are the same file (same inode): merged with itself, its samples would count twice; name it once")
            });
        }
        seen.push((id, f));
    }
    Ok(())
}

/// `-m/--mmap-pages`: a power of two from 1 to 65536 (the agent's range).
fn mmap_pages(s: &str) -> Result<u32, String> {
    match s.parse::<u32>() {
        Ok(n) if n.is_power_of_two() && n <= 1 << 16 => Ok(n),
        _ => Err(format!(
            "takes ring-buffer data pages per CPU, a power of two from 1 to 65536 (default 128), not '{s}'"
        )),
    }
}

/// Options that shape a recording, shared with remote recording; `record --help` shows
/// the ten a perf user reaches for first, without a heading (-e, -F, -c, -g, --call-graph,
/// -o, -p, -a, --duration, and record's --no-report), then the rest of the sampling's, and
/// the special PMUs' and the metrics' after the lab machines'.
#[derive(Debug, Clone, clap::Args)]
pub struct RecordOpts {
    #[command(flatten)]
    pub event: EventsOpt,
    /// Sample about HZ times per second; `max`: as often as the kernel allows
    /// (kernel.perf_event_max_sample_rate, as perf's -F max).
    #[arg(short = 'F', long, value_name = "HZ")]
    pub freq: Option<Freq>,
    /// Sample every N events (ns for cpu-clock).
    #[arg(short = 'c', long, value_name = "N", conflicts_with = "freq", value_parser = period)]
    pub period: Option<u64>,
    /// Record each sample's call stack (as --call-graph fp).
    #[arg(short = 'g')]
    pub g: bool,
    /// Record each sample's call stack: fp walks the frame pointers (the workload must be
    /// built with them; user frames, and kernel frames of :k events); dwarf[,SIZE] copies
    /// SIZE bytes of user stack (default 8192) and unwinds them here with the binaries'
    /// DWARF CFI (any build; each stack is sent as what changed since the thread's last).
    #[arg(long, value_name = "MODE")]
    pub call_graph: Option<CallGraph>,
    #[command(flatten)]
    pub file: RecordFileOpt,
    /// Record a process already running (as perf record -p) instead of a command: all its
    /// threads, until it exits, --duration SECS or Ctrl-C (on a lab machine with --host,
    /// a process there).
    #[arg(
        short = 'p',
        long,
        value_name = "PID",
        conflicts_with_all = ["tid", "all_cpus", "cpus"]
    )]
    pub pid: Option<u32>,
    /// Record the whole machine: every task on every CPU (one ring buffer per CPU), for
    /// --duration SECS or while CMD runs; events without :u/:k sample kernel mode too,
    /// named from the machine's kallsyms. Needs root, CAP_PERFMON or
    /// kernel.perf_event_paranoid at 0 or below there.
    #[arg(short = 'a', long)]
    pub all_cpus: bool,
    /// With -a/-C/-p/-t: record SECS seconds (a CMD still running then is stopped).
    #[arg(long, value_name = "SECS")]
    pub duration: Option<f64>,
    /// Record one thread already running (as perf record -t), until it exits, --duration
    /// SECS or Ctrl-C.
    #[arg(
        short = 't',
        long,
        value_name = "TID",
        conflicts_with_all = ["all_cpus", "cpus"],
        help_heading = "Sampling"
    )]
    pub tid: Option<u32>,
    /// As -a, on these CPUs only: 0,2-3.
    #[arg(
        short = 'C',
        long = "cpu",
        value_name = "LIST",
        conflicts_with = "all_cpus",
        help_heading = "Sampling"
    )]
    pub cpus: Option<String>,
    /// Ring-buffer data pages per CPU, a power of two up to 65536 (default 128; the Alpha
    /// C agent's 16): more when the report says the kernel lost samples.
    #[arg(short = 'm', long, value_name = "PAGES", value_parser = mmap_pages, help_heading = "Sampling")]
    pub mmap_pages: Option<u32>,
    /// Also record each thread's time off the CPU (sleeps, locks, I/O, waiting for a CPU)
    /// as perf's `offcpu-time` event, each sample the stack the thread left the CPU in and
    /// the nanoseconds until it ran again (call stacks as -g unless --call-graph dwarf; with
    /// root, CAP_PERFMON or kernel.perf_event_paranoid at 1 or below, for the stacks and for
    /// the on-CPU events' kernel time; without, the time per thread, no stack).
    /// `report --off-cpu` shows it, `report --wall` on- and off-CPU time together.
    #[arg(long, help_heading = "Sampling", conflicts_with_all = ["metrics", "topdown", "profileme", "mem"])]
    pub off_cpu: bool,
    // The special PMUs' and metrics' options are `SpecialOpts`, after the lab machines'.
}

/// The options of the special PMUs (Intel TopDown, Alpha ProfileMe and mem) and of
/// `--metrics`, which `record --help` shows last.
#[derive(Debug, Clone, clap::Args)]
pub struct SpecialOpts {
    /// Alpha EV67+ (with --host): ProfileMe samples of cpu/instructions,profileme/ for the
    /// DCPI-style summary (killed, invalid, mispredicted, taken, stalled, PCTR1, traps).
    #[arg(long, conflicts_with_all = ["mem", "topdown"], help_heading = SPECIAL)]
    pub profileme: bool,
    #[command(flatten, next_help_heading = SPECIAL)]
    pub td: TopdownOpt,
    /// Alpha EV67+ (with --host): DTB hits and misses (cpu/cycles,profileme/ with data
    /// source and address) of loads, stores and prefetches.
    #[arg(long, conflicts_with = "topdown", help_heading = SPECIAL)]
    pub mem: bool,
    #[command(flatten, next_help_heading = SPECIAL)]
    pub td_level: LevelOpt,
    /// C agent (Alpha): take the samples from ring-buffer bytes saved on the target (a
    /// path there) instead of perf_event_open, which emulators such as qemu-user lack.
    /// The workload still runs; the file's header says it was replayed.
    #[arg(long, value_name = "TARGET_FILE", help_heading = SPECIAL)]
    pub replay_ring: Option<String>,
    /// Per-function metrics (CPI, miss rates) by strobing: a short counting window after
    /// each long period.
    #[arg(long, conflicts_with_all = ["profileme", "mem", "topdown"], help_heading = METRICS)]
    pub metrics: bool,
    /// With --metrics (per-function metrics by strobing: a short counting window after
    /// each long period -c, default 1000000): the window in cycles.
    #[arg(long, default_value_t = 300, help_heading = METRICS)]
    pub window: u64,
    /// With --metrics: jitter the window start.
    #[arg(long, help_heading = METRICS)]
    pub jitter: bool,
    /// With --metrics: auto (kernel alternating periods when verified, else decimate), kernel, decimate or fixed.
    #[arg(long, default_value = "auto", help_heading = METRICS)]
    pub strobe: String,
}

/// `record --help`'s heading of the special PMUs' options.
pub const SPECIAL: &str = "Special PMUs (Intel TopDown, Alpha ProfileMe)";
/// `record --help`'s heading of the metrics' options.
pub const METRICS: &str = "Metrics (--metrics)";

/// How to present a report.
#[derive(Debug, Clone, clap::Args)]
pub struct ReportOpts {
    /// The view [default: the one the file's header names: plain, metrics, topdown,
    /// profileme, mem or intervals].
    #[arg(long, value_enum)]
    pub view: Option<View>,
    /// Plain view: group samples by function (symbol), mapped file (dso), process name
    /// (comm), process id (pid), thread id (tid), instruction address (pc), source line (srcline: file:line
    /// from the binary's DWARF or its separate debug file), or by function per recording
    /// machine (host) or per file (run); keys combine as perf's --sort does:
    /// `--by comm,dso` [default: symbol]. `-s/--sort` as in perf report (`-s sym` is
    /// symbol).
    #[arg(
        short = 's',
        long,
        visible_alias = "sort",
        value_enum,
        value_delimiter = ','
    )]
    pub by: Vec<By>,
    /// Plain view: each function's samples with its callees' (Children) beside its own
    /// (Self), from the call stacks of `record -g`, as `perf report --children`; with
    /// --by symbol, dso, comm, host or run, per row of those keys (a file's Children: the
    /// samples whose stack passes through it).
    #[arg(long, overrides_with = "no_children")]
    pub children: bool,
    /// As perf report --no-children: Self only, which is the default here (the last of
    /// --children and --no-children counts).
    #[arg(long, overrides_with = "children")]
    pub no_children: bool,
    /// Show only the N busiest rows of each ranked table (0 = all; time series are whole).
    #[arg(long, default_value_t = 20)]
    pub top: usize,
    #[command(flatten)]
    pub format: FormatOpt,
    /// As perf report --stdio: the text table, which is the default (--format table).
    #[arg(long, conflicts_with = "format")]
    pub stdio: bool,
    #[command(flatten)]
    pub strict: StrictOpt,
    #[command(flatten)]
    pub symbols: SymbolOpts,
    /// ProfileMe view: one row per instruction (PMPC) instead of per symbol.
    #[arg(long)]
    pub pc: bool,
    /// Metrics view: drop windows whose start and end symbols differ, or keep them
    /// [default: discard].
    #[arg(long = "discard", value_enum)]
    pub discard: Option<labperf::views::metrics::DiscardMode>,
    /// Metrics view: one row per symbol and thread, or per symbol and CPU [default: none].
    #[arg(long, value_enum)]
    pub split: Option<labperf::views::metrics::Split>,
}

/// The samples a report keeps and the rows it shows, as perf report spells them
/// (`report`, `diff`; `record` prints its report whole).
#[derive(Debug, Clone, clap::Args)]
pub struct NarrowOpts {
    #[command(flatten)]
    pub filter: FilterOpts,
    /// Plain view, with --comm, --pid, --tid, --dsos or --symbols: absolute (perf's
    /// default) gives each row its share of every sample in the --time window, kept or
    /// not; relative its share of the kept samples (the rows add up to 100%).
    #[arg(long, value_enum, value_name = "HOW", default_value = "absolute")]
    pub percentage: Percentage,
    /// Plain view: rows under this percent (Overhead; Children with --children) are not
    /// shown, as perf's.
    #[arg(long, value_name = "PCT", value_parser = percent_limit)]
    pub percent_limit: Option<f64>,
    /// As perf report -n: the Samples column, which labperf's tables always show.
    #[arg(short = 'n', long)]
    pub show_nr_samples: bool,
}

impl NarrowOpts {
    /// Puts the filters, `--max-stack` and `--percent-limit` into the pipeline's options.
    pub fn apply(&self, o: &mut labperf::views::view::Options) {
        o.filter = self.filter.get(self.percentage == Percentage::Relative);
        o.max_stack = self.filter.max_stack.map(|n| n as usize);
        o.percent_limit = self.percent_limit;
    }
}

/// `--percentage` (perf's spelling).
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Percentage {
    Absolute,
    Relative,
}

/// `--percent-limit`: a percentage from 0 to 100.
fn percent_limit(s: &str) -> Result<f64, String> {
    match s.trim_end_matches('%').parse::<f64>() {
        Ok(v) if (0.0..=100.0).contains(&v) => Ok(v),
        _ => Err(format!("takes a percentage from 0 to 100, not '{s}'")),
    }
}

/// The samples a report or an export keeps, as perf report spells it (`report`, `diff`,
/// `export`); plain view only.
#[derive(Debug, Clone, clap::Args)]
pub struct FilterOpts {
    /// Only the samples of these processes, by name (comma-separated; perf's -c/--comms):
    /// the name `--by comm` shows (in stacks and exports, the sampled thread's name).
    #[arg(
        short = 'c',
        long = "comm",
        visible_alias = "comms",
        value_name = "NAMES",
        value_delimiter = ','
    )]
    pub comms: Vec<String>,
    /// Only the samples of these process ids (comma-separated).
    #[arg(long = "pid", value_name = "PIDS", value_delimiter = ',')]
    pub pids: Vec<u32>,
    /// Only the samples of these thread ids (comma-separated).
    #[arg(long = "tid", value_name = "TIDS", value_delimiter = ',')]
    pub tids: Vec<u32>,
    /// Only the samples in these mapped files, by path or file name (comma-separated;
    /// `[kernel.kallsyms]` for the kernel).
    #[arg(
        short = 'd',
        long = "dsos",
        visible_alias = "dso",
        value_name = "DSOS",
        value_delimiter = ','
    )]
    pub dsos: Vec<String>,
    /// Only the samples in these functions, named as the report names them
    /// (comma-separated, but for the commas within <>, () or [] of a C++ name; Self is
    /// theirs, Children what they and their callees took).
    #[arg(short = 'S', long = "symbols", value_name = "NAMES")]
    pub symbols: Vec<String>,
    /// Only the samples in this window, as perf's --time: START,END in seconds of the
    /// recording's clock (as `perf script` prints times; either may be left out), or
    /// percent slices of the first to the last sample: 10%/4 (the fourth tenth), 0%-10%,
    /// 10%/1,10%/2.
    #[arg(long, value_name = "WINDOW", allow_hyphen_values = true)]
    pub time: Option<labperf::record::filter::Times>,
    /// Call stacks cut to their N innermost addresses, the sampled one included (perf's
    /// --max-stack; default: whole).
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..))]
    pub max_stack: Option<u32>,
}

impl FilterOpts {
    /// The library's filter (`relative`: `--percentage relative`).
    pub fn get(&self, relative: bool) -> labperf::record::filter::Filter {
        labperf::record::filter::Filter {
            comms: self.comms.clone(),
            pids: self.pids.clone(),
            tids: self.tids.clone(),
            dsos: self.dsos.clone(),
            symbols: self
                .symbols
                .iter()
                .flat_map(|s| labperf::record::filter::split_names(s))
                .collect(),
            time: self.time.clone(),
            relative,
        }
    }
}

impl ReportOpts {
    /// The pipeline's options.
    pub fn view_options(&self) -> labperf::views::view::Options {
        labperf::views::view::Options {
            view: self.view,
            by: self.by.clone(),
            pc: self.pc,
            discard: self.discard,
            split: self.split,
            search: self.symbols.search(),
            top: self.top,
            children: self.children,
            graph: None,
            event: None,
            filter: Default::default(),
            max_stack: None,
            percent_limit: None,
        }
    }
}

/// `--event` of `report` and `diff` (`record`'s `-e/--event` names what to record).
#[derive(Debug, Clone, clap::Args)]
pub struct EventOpt {
    /// Plain view: only the samples of this event (its name, or its index in `labperf
    /// info`'s list). Without it, a recording of several events (`record -e cpu-clock -e
    /// page-faults`) has a table per event, each with shares of that event's own period.
    #[arg(long, value_name = "NAME", conflicts_with_all = ["off_cpu", "wall"])]
    pub event: Option<String>,
    /// Only the time threads spent off the CPU (`record --off-cpu`'s offcpu-time event, or
    /// perf's): each stack weighed by the nanoseconds its thread waited there.
    #[arg(long, conflicts_with = "wall")]
    pub off_cpu: bool,
    /// Wall-clock time: the on-CPU clock samples (cpu-clock, task-clock: their periods are
    /// ns) and the off-CPU time of `record --off-cpu` as one event, `wall-time`.
    #[arg(long)]
    pub wall: bool,
}

/// `--wall` of recordings without time off the CPU: said, since the report is then their
/// on-CPU clock alone (a file that cannot be peeked at is the build's to explain).
pub fn warn_wall(
    srcs: &[labperf::record::load::Source],
    sel: Option<&labperf::record::events::Select>,
) {
    use labperf::record::events::{Names, OFF_CPU, WALL};
    if super::quiet() || sel.is_none_or(|s| s.0 != WALL) {
        return;
    }
    for s in srcs {
        let Ok(p) = labperf::record::load::peek(s) else {
            continue;
        };
        if !Names::of(p.header.as_ref()).contains(OFF_CPU) {
            eprintln!(
                "warning: {} has no time off the CPU (record it with --off-cpu): --wall shows its on-CPU clock samples alone",
                labperf::text::show(&s.name.display().to_string())
            );
        }
    }
}

impl EventOpt {
    pub fn select(&self) -> Option<labperf::record::events::Select> {
        use labperf::record::events::{Select, OFF_CPU, WALL};
        match (self.off_cpu, self.wall) {
            (true, _) => Some(Select(OFF_CPU.into())),
            (_, true) => Some(Select(WALL.into())),
            _ => self.event.clone().map(Select),
        }
    }
}

/// Where binaries are found (`report`, `export`).
#[derive(Debug, Clone, clap::Args)]
pub struct SymbolOpts {
    /// Directory searched first for binaries (DIR/<build-id>/elf or DIR/<path>); repeatable.
    #[arg(long, value_name = "DIR")]
    pub symfs: Vec<PathBuf>,
    /// Stacks without the functions DWARF says were inlined (by default each address
    /// expands into the function and those inlined there, as perf's `--inline`)
    #[arg(long)]
    pub no_inline: bool,
    /// C++ functions named with their parameter lists and return types (by default without
    /// them, as perf shows them: `std::map<K, V>::operator[]`)
    #[arg(long)]
    pub full_names: bool,
}

impl SymbolOpts {
    pub fn search(&self) -> labperf::symbolize::symbols::Search {
        let mut s = labperf::symbolize::symbols::Search::new(self.symfs.clone());
        s.no_inline = self.no_inline;
        s.full_names = self.full_names || super::verbose();
        s
    }
}
