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

/// A fresh scratch directory for one test.
pub fn scratch(test: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("labperf-test-{test}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).expect("scratch dir");
    d
}
pub mod alpha;
pub mod golden;
pub mod known;
pub mod lab;
pub mod ring;
pub mod sshd;

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

/// Records labperf-bench on this machine with the agent (cpu-clock every `period` ns) into
/// `out`, with the bench's `--duration` and `--classes`.
pub fn record_bench_local(out: &Path, period: &str, duration: &str, classes: &str) {
    let st = Command::new(bin("labperf-agent"))
        .args(["record", "-c", period, "-o"])
        .arg(out)
        .arg("--")
        .arg(bin("labperf-bench"))
        .args(["--duration", duration, "--classes", classes])
        .status()
        .unwrap();
    assert!(st.success(), "labperf-agent record of the bench");
}

/// `labperf-bench --calls`: the tree's leaves with the caller path (2 frames, the inlined
/// one counted) that reaches each, and the path's name in the bench's "spent" lines.
pub const BENCH_LEAF_PATHS: &[(&str, &str, &str)] = &[
    (
        "nops",
        "labperf_bench::run_slice <- labperf_bench::calls_a",
        "calls_a nops",
    ),
    (
        "nops",
        "labperf_bench::run_slice <- calls_b_inlined",
        "calls_b nops",
    ),
    (
        "int_divider_stalls",
        "labperf_bench::run_slice <- labperf_bench::calls_a",
        "calls_a int_divider_stalls",
    ),
    (
        "fp_divider_stalls",
        "labperf_bench::run_slice <- calls_b_inlined",
        "calls_b fp_divider_stalls",
    ),
];
