//! Helpers shared by the integration tests: locating built binaries and the golden data.

use std::path::{Path, PathBuf};
use std::process::Command;

/// The workspace root.
pub fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("tests/ sits in the workspace")
        .to_path_buf()
}

/// Finds a built binary: `$LABPERF_<NAME>` (set by `cargo xtask test`), the
/// xtask agent output, then the cargo profiles.
pub fn bin(name: &str) -> PathBuf {
    let var = format!(
        "LABPERF_{}",
        name.trim_start_matches("labperf-")
            .replace('-', "_")
            .to_uppercase()
    );
    if let Some(p) = std::env::var_os(&var) {
        return p.into();
    }
    let t = std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| root().join("target"));
    let cands = [
        t.join(format!(
            "agents/{}-unknown-linux-musl",
            std::env::consts::ARCH
        ))
        .join(name),
        t.join("release").join(name),
        t.join("debug").join(name),
    ];
    cands
        .iter()
        .find(|p| p.is_file())
        .cloned()
        .unwrap_or_else(|| panic!("{name} is not built: run `cargo xtask test` (or set {var})"))
}

/// The freestanding C agent's x86_64 build (the Alpha agent's code, run here), from
/// `$LABPERF_AGENTS_DIR` or `target/agents`.
pub fn c_agent() -> PathBuf {
    let p = std::env::var_os("LABPERF_AGENTS_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| root().join("target/agents"))
        .join("x86_64-unknown-linux-none/labperf-agent");
    assert!(
        p.is_file(),
        "{} is not built: run `cargo xtask build-agents`",
        p.display()
    );
    p
}

/// A fresh scratch directory for one test.
pub fn scratch(test: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("labperf-test-{test}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).expect("scratch dir");
    d
}
pub mod alpha;
pub mod distro;
pub mod golden;
pub mod known;
pub mod lab;
pub mod netns;
pub mod offcpu;
pub mod ring;
pub mod sshd;
pub mod views;

/// Whether this machine's kernel opens the hardware cycles event for this process (user
/// mode): asked with perf_event_open directly, independently of the agents.
pub fn hardware_cycles_open() -> bool {
    // perf_event_attr (136 bytes): type 0 (HARDWARE) and size in the first word, config 0
    // (CPU_CYCLES), no period; flags: disabled, exclude_kernel, exclude_hv.
    let mut attr = [0u64; 17];
    attr[0] = 136 << 32;
    attr[5] = 1 | 1 << 5 | 1 << 6;
    // SAFETY: a valid, zero-padded perf_event_attr for this process on any CPU.
    let fd = unsafe { libc::syscall(libc::SYS_perf_event_open, attr.as_ptr(), 0, -1, -1, 0) };
    if fd >= 0 {
        // SAFETY: closing the fd just opened.
        unsafe { libc::close(fd as i32) };
    }
    fd >= 0
}

/// `labperf report --format json --top TOP FILE`, with whatever `more` adds (environment,
/// options): asserts that it succeeded and returns its JSON.
pub fn report_json(file: &Path, top: u32, more: impl FnOnce(&mut Command)) -> serde_json::Value {
    let mut c = Command::new(bin("labperf"));
    c.args(["report", "--format", "json", "--top", &top.to_string()])
        .arg(file);
    more(&mut c);
    let o = c.output().unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    serde_json::from_slice(&o.stdout).unwrap()
}

/// The JSON report `labperf record --format json` printed: on standard error, since its
/// standard output (the workload's) is a pipe in a test, after labperf's and the
/// workload's lines: the one value from the first line starting with `{`.
pub fn recorded_json(stderr: &[u8]) -> serde_json::Value {
    let text = String::from_utf8_lossy(stderr);
    let start = if text.starts_with('{') {
        0
    } else {
        text.find("\n{")
            .unwrap_or_else(|| panic!("no JSON report in:\n{text}"))
            + 1
    };
    serde_json::Deserializer::from_str(&text[start..])
        .into_iter::<serde_json::Value>()
        .next()
        .unwrap_or_else(|| panic!("no JSON report in:\n{text}"))
        .unwrap_or_else(|e| panic!("the JSON report: {e}:\n{text}"))
}

/// Records labperf-bench on this machine with the agent (cpu-clock every `period` ns) into
/// `out`, with the bench's `--duration` and `--classes`; returns the bench's own account.
pub fn record_bench_local(out: &Path, period: &str, duration: &str, classes: &str) -> BenchClock {
    let o = Command::new(bin("labperf-agent"))
        .args(["record", "-c", period, "-o"])
        .arg(out)
        .arg("--")
        .arg(bin("labperf-bench"))
        .args(["--duration", duration, "--classes", classes])
        .output()
        .unwrap();
    assert!(
        o.status.success(),
        "labperf-agent record of the bench: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    BenchClock::parse(&o.stderr)
}

/// One line of the bench's known answer: the CPU time one thread spent on one call path.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BenchEntry {
    /// `main` or `bench-N`.
    pub thread: String,
    /// The thread's id, as samples name it.
    pub tid: u32,
    /// The bench's functions from the rotation down to the class function
    /// (`calls_b;calls_b_inlined;nops`, `calibrate;nops`, `nops`).
    pub path: String,
    pub ns: u64,
}

/// What `labperf-bench` (Rust or C) prints at exit, in every mode: the CPU time each class
/// took on each call path in each thread, by the thread's own CPU clock, and the process's
/// CPU time (`labperf-bench --help`, "THE KNOWN ANSWER"). This, not the asked weights, is
/// what a profile of the bench is checked against: the slices are random around the asked
/// split and the seed is fixed, so the realized split differs from the asked one by the
/// same amount every run (3:1 over 1.5 s: 73.5% against 75%).
#[derive(Debug, Clone, Default)]
pub struct BenchClock {
    pub entries: Vec<BenchEntry>,
    /// CLOCK_PROCESS_CPUTIME_ID at exit: every thread, set-up and calibration included.
    pub process_ns: u64,
    /// `--blocking`: the wall-clock time each class took, measured around its calls
    /// (`labperf-bench: wall ...` lines; `ns` is wall time).
    pub wall: Vec<BenchEntry>,
    /// `--blocking`: the wall-clock time of the whole rotation (`wall-rotation`).
    pub wall_rotation_ns: Option<u64>,
}

impl BenchClock {
    /// The bench's lines in `stderr` (found anywhere in a line: `labperf record --host`
    /// prefixes each remote line with the machine's name); panics when there are none or a
    /// line is malformed.
    pub fn parse(stderr: &[u8]) -> BenchClock {
        let text = String::from_utf8_lossy(stderr);
        let mut c = BenchClock::default();
        let mut process = None;
        for l in text.lines() {
            if let Some((_, rest)) = l.split_once("labperf-bench: cpu-process ns=") {
                process = Some(
                    rest.trim()
                        .parse()
                        .unwrap_or_else(|_| panic!("bad line {l}")),
                );
                continue;
            }
            if let Some((_, rest)) = l.split_once("labperf-bench: wall-rotation ") {
                let ns = rest.split_whitespace().find_map(|w| w.strip_prefix("ns="));
                c.wall_rotation_ns = Some(
                    ns.and_then(|n| n.parse().ok())
                        .unwrap_or_else(|| panic!("bad line {l}")),
                );
                continue;
            }
            let (rest, wall) = if let Some((_, rest)) = l.split_once("labperf-bench: cpu ") {
                (rest, false)
            } else if let Some((_, rest)) = l.split_once("labperf-bench: wall ") {
                (rest, true)
            } else {
                continue;
            };
            let kv: std::collections::BTreeMap<&str, &str> = rest
                .split_whitespace()
                .filter_map(|w| w.split_once('='))
                .collect();
            let get = |k: &str| *kv.get(k).unwrap_or_else(|| panic!("no {k}= in {l}"));
            let to = if wall { &mut c.wall } else { &mut c.entries };
            to.push(BenchEntry {
                thread: get("thread").to_string(),
                tid: get("tid")
                    .parse()
                    .unwrap_or_else(|_| panic!("bad tid in {l}")),
                path: get("path").to_string(),
                ns: get("ns")
                    .parse()
                    .unwrap_or_else(|_| panic!("bad ns in {l}")),
            });
        }
        assert!(
            !c.entries.is_empty(),
            "the bench printed no known answer ('labperf-bench: cpu ...' lines):\n{text}"
        );
        c.process_ns =
            process.unwrap_or_else(|| panic!("no 'labperf-bench: cpu-process' line:\n{text}"));
        c
    }

    /// The bench's name for a function a report names: `labperf_bench::calls_a` is
    /// `calls_a`; the classes and the inlined `calls_b_inlined` keep their names.
    fn local(name: &str) -> &str {
        name.trim_start_matches("labperf_bench::")
    }

    /// CPU ns of every path through `function` (a report's name or the bench's): its
    /// inclusive time, all threads, calibration included.
    pub fn inclusive_ns(&self, function: &str) -> u64 {
        let f = Self::local(function);
        self.entries
            .iter()
            .filter(|e| e.path.split(';').any(|p| p == f))
            .map(|e| e.ns)
            .sum()
    }

    /// `--blocking`: wall-clock ns of class `path`, all threads.
    pub fn wall_ns(&self, path: &str) -> u64 {
        self.wall
            .iter()
            .filter(|e| e.path == path)
            .map(|e| e.ns)
            .sum()
    }

    /// `--blocking`: the ns class `path` spent off the CPU (its wall-clock time less its
    /// CPU time).
    pub fn off_cpu_ns(&self, path: &str) -> u64 {
        self.wall_ns(path).saturating_sub(self.path_ns(path))
    }

    /// CPU ns of the exact path `path` (`calls_a;nops`), all threads.
    pub fn path_ns(&self, path: &str) -> u64 {
        self.entries
            .iter()
            .filter(|e| e.path == path)
            .map(|e| e.ns)
            .sum()
    }

    /// The CPU time of the exact path `path` as a percentage of that of `paths` together.
    pub fn pct_of_paths<'a>(&self, path: &str, paths: impl IntoIterator<Item = &'a str>) -> f64 {
        let all: u64 = paths.into_iter().map(|p| self.path_ns(p)).sum();
        assert!(all > 0, "no CPU time on those paths: {self:?}");
        100.0 * self.path_ns(path) as f64 / all as f64
    }

    /// CPU ns of every path in thread `tid`.
    pub fn thread_ns(&self, tid: u32) -> u64 {
        self.entries
            .iter()
            .filter(|e| e.tid == tid)
            .map(|e| e.ns)
            .sum()
    }

    /// The threads the bench ran, by tid.
    pub fn tids(&self) -> std::collections::BTreeSet<u32> {
        self.entries.iter().map(|e| e.tid).collect()
    }

    /// Every class function's CPU ns (all paths, calibration included), seconds.
    pub fn classes_s(&self) -> f64 {
        self.entries.iter().map(|e| e.ns).sum::<u64>() as f64 / 1e9
    }

    /// `function`'s inclusive CPU time as a percentage of the inclusive times of `of`
    /// added up (a report's names or the bench's).
    pub fn pct_of(&self, function: &str, of: &[&str]) -> f64 {
        let all: u64 = of.iter().map(|f| self.inclusive_ns(f)).sum();
        assert!(all > 0, "no CPU time in {of:?}: {self:?}");
        100.0 * self.inclusive_ns(function) as f64 / all as f64
    }
}

/// Asserts that each of `names`' share of `got` (any weight per function name: samples,
/// windows, Children percentages) among `names` is within `tol` points of its share of
/// their CPU time by the bench's clock (`clock.pct_of`); prints each pair. Returns the
/// largest difference.
pub fn assert_split(
    got: &std::collections::BTreeMap<String, f64>,
    clock: &BenchClock,
    names: &[&str],
    tol: f64,
) -> f64 {
    let all: f64 = names
        .iter()
        .map(|n| got.get(*n).copied().unwrap_or(0.0))
        .sum();
    assert!(all > 0.0, "none of {names:?} in {got:?}");
    let mut worst = 0.0f64;
    for n in names {
        let share = 100.0 * got.get(*n).copied().unwrap_or(0.0) / all;
        let want = clock.pct_of(n, names);
        eprintln!("{n}: {share:.2}% in the profile, {want:.2}% by the bench's clock");
        assert!(
            (share - want).abs() <= tol,
            "{n}: {share:.2}% in the profile, {want:.2}% by the bench's clock (±{tol}) of {names:?}"
        );
        worst = worst.max((share - want).abs());
    }
    worst
}

/// `labperf-bench --calls`: the tree's leaves with the caller path (2 frames, the inlined
/// one counted) that reaches each, and the bench's path of it (`BenchClock::path_ns`).
pub const BENCH_LEAF_PATHS: &[(&str, &str, &str)] = &[
    (
        "nops",
        "labperf_bench::run_slice <- labperf_bench::calls_a",
        "calls_a;nops",
    ),
    (
        "nops",
        "labperf_bench::run_slice <- calls_b_inlined",
        "calls_b;calls_b_inlined;nops",
    ),
    (
        "int_divider_stalls",
        "labperf_bench::run_slice <- labperf_bench::calls_a",
        "calls_a;int_divider_stalls",
    ),
    (
        "fp_divider_stalls",
        "labperf_bench::run_slice <- calls_b_inlined",
        "calls_b;calls_b_inlined;fp_divider_stalls",
    ),
];

/// The time the machine's CPUs have spent so far in interrupts and stolen by the hypervisor
/// (/proc/stat's irq, softirq and steal fields, in USER_HZ ticks), in ns. perf's clock
/// events (task-clock, cpu-clock) run on while an interrupt or the hypervisor holds a task's
/// CPU; the task's own CPU clock (CLOCK_PROCESS_CPUTIME_ID, rusage) does not count that time.
pub fn irq_and_steal_ns() -> f64 {
    let s = std::fs::read_to_string("/proc/stat").unwrap_or_default();
    let ticks: f64 = s
        .lines()
        .next()
        .map(|l| {
            l.split_whitespace()
                .skip(6)
                .take(3)
                .filter_map(|v| v.parse::<f64>().ok())
                .sum()
        })
        .unwrap_or(0.0);
    ticks * 1e7
}
