//! `cargo xtask hwcheck`: the TopDown known-answer checks on this machine's Intel PMU with
//! PERF_METRICS (Ice Lake and later): labperf-bench classes whose TopDown category is known,
//! counted by `labperf-agent stat --topdown`, reported by `labperf report`, one verdict per
//! check. On any other machine it says which PMU and which file it lacks, and exits 3.

use crate::util::{agents_dir, host_musl, root, target_dir, Summary};
use anyhow::{bail, Context};
use std::path::{Path, PathBuf};
use xshell::{cmd, Shell};

/// The exit status when this machine has no TopDown PMU with PERF_METRICS: nothing was
/// checked (0: every check passed; 1: a check failed or could not run).
pub const NO_TOPDOWN: i32 = 3;

#[derive(clap::Args)]
pub struct Args {
    /// Detect from this sysfs tree instead of /sys (e.g. tests/data/sysfs/x86_64-icelake)
    /// and stop there: a recorded tree says what a machine has, not what its counters read.
    #[arg(long, value_name = "DIR")]
    pub sysfs: Option<PathBuf>,
    /// Seconds the bench runs each class.
    #[arg(long, default_value = "1.5")]
    pub duration: String,
}

/// What the sysfs tree says of TopDown.
#[derive(Debug, PartialEq, Eq)]
pub enum Detected {
    /// SLOTS and the four level-1 metric events (PERF_METRICS): the checks can run.
    Metrics {
        /// The PMU's directory name: `cpu`, or `cpu_core` on hybrid parts.
        pmu: String,
        /// `caps/pmu_name` when the kernel exposes it (`icelake`, `sapphire_rapids`...).
        name: Option<String>,
        /// The level-2 events too (Sapphire Rapids and later).
        level2: bool,
    },
    /// No TopDown with PERF_METRICS: why, naming the PMU and the file missing.
    None(String),
}

/// The four level-1 metric events (perf's names, as sysfs lists them).
const LEVEL1: [&str; 4] = [
    "topdown-retiring",
    "topdown-bad-spec",
    "topdown-fe-bound",
    "topdown-be-bound",
];
/// The level-2 events Sapphire Rapids added.
const LEVEL2: [&str; 4] = [
    "topdown-heavy-ops",
    "topdown-br-mispredict",
    "topdown-fetch-lat",
    "topdown-mem-bound",
];

/// Reads the TopDown support of the sysfs tree at `sysfs` (`/sys` on a live machine): the
/// core PMU (`cpu_core` on hybrid parts, else `cpu`) under `bus/event_source/devices`,
/// its `events/slots` and `events/topdown-*`, and `caps/pmu_name`. The same rules as the
/// agent's `stat --topdown`, but all four level-1 metrics are required: the checks compare
/// them.
pub fn detect(sysfs: &Path) -> Detected {
    let devices = sysfs.join("bus/event_source/devices");
    let pmu = ["cpu_core", "cpu"]
        .into_iter()
        .find(|p| devices.join(p).join("events").is_dir());
    let Some(pmu) = pmu else {
        let mut present: Vec<String> = std::fs::read_dir(&devices)
            .map(|d| {
                d.flatten()
                    .map(|e| e.file_name().to_string_lossy().into_owned())
                    .collect()
            })
            .unwrap_or_default();
        present.sort();
        return Detected::None(format!(
            "no core PMU: {} is missing (the PMUs here: {}); a VM without a virtual PMU has none",
            devices.join("cpu/events").display(),
            if present.is_empty() {
                "none".to_string()
            } else {
                present.join(", ")
            }
        ));
    };
    let dir = devices.join(pmu);
    let events = dir.join("events");
    let name = std::fs::read_to_string(dir.join("caps/pmu_name"))
        .ok()
        .map(|s| s.trim().to_string())
        .filter(|s| !s.is_empty());
    let called = match &name {
        Some(n) => format!("the {pmu} PMU ({n})"),
        None => format!("the {pmu} PMU"),
    };
    let has = |e: &str| events.join(e).is_file();
    if !has("slots") {
        return Detected::None(if has("topdown-total-slots") {
            format!(
                "{called} has only the pre-Ice Lake TopDown events ({} is there, {} is missing): no PERF_METRICS",
                events.join("topdown-total-slots").display(),
                events.join("slots").display()
            )
        } else {
            format!(
                "{called} has no TopDown: {} is missing (Intel Ice Lake or later has it)",
                events.join("slots").display()
            )
        });
    }
    let missing: Vec<String> = LEVEL1
        .iter()
        .filter(|e| !has(e))
        .map(|e| events.join(e).display().to_string())
        .collect();
    if !missing.is_empty() {
        return Detected::None(format!(
            "{called} has SLOTS but not all four level-1 metrics the checks compare: {} missing",
            missing.join(", ")
        ));
    }
    Detected::Metrics {
        pmu: pmu.to_string(),
        name,
        level2: LEVEL2.iter().all(|e| has(e)),
    }
}

/// A TopDown category of a report's JSON row.
type Category = &'static str;

/// Level 1, in perf's order (the report's JSON columns).
const CATEGORIES: [Category; 4] = [
    "retiring",
    "bad_speculation",
    "frontend_bound",
    "backend_bound",
];

/// One known answer: the bench's class, the category that must be the largest of the four
/// (level 1), and why.
const CHECKS: [(&str, Category, &str); 5] = [
    (
        "nops",
        "retiring",
        "runs of nops retire at the full width, nothing waits",
    ),
    (
        "int_divider_stalls",
        "backend_bound",
        "dependent 64-bit divides wait on the divider",
    ),
    (
        "fp_divider_stalls",
        "backend_bound",
        "dependent double divides wait on the divider",
    ),
    (
        "dcache_miss",
        "backend_bound",
        "pointer chasing through 32 MiB waits on memory",
    ),
    (
        "branch_mispredicts",
        "bad_speculation",
        "branches on random bytes: about half go the other way",
    ),
];

/// Level 2 (Sapphire Rapids and later): (class, the part that must exceed the other, the
/// other, why).
const CHECKS_L2: [(&str, Category, Category, &str); 3] = [
    (
        "dcache_miss",
        "memory_bound",
        "core_bound",
        "its stalls are on memory",
    ),
    (
        "int_divider_stalls",
        "core_bound",
        "memory_bound",
        "its stalls are on the divider, a core unit",
    ),
    (
        "branch_mispredicts",
        "branch_mispredict",
        "machine_clears",
        "its bad speculation is mispredicted branches",
    ),
];

/// The whole run's shares in `labperf report --format json` of a `stat --topdown`
/// recording: its `total` row (the agent writes the run's totals at the end), else the
/// interval rows weighted by their slots. Columns absent or null (not printed: fewer than
/// two metrics above zero) are left out.
pub fn shares(report_json: &str) -> anyhow::Result<std::collections::BTreeMap<String, f64>> {
    let j: serde_json::Value =
        serde_json::from_str(report_json).context("labperf report printed no JSON")?;
    if j["view"] != "topdown" {
        bail!("not a TopDown report: {}", j["view"]);
    }
    let t = &j["tables"][0];
    let mut out = std::collections::BTreeMap::new();
    if let Some(total) = t["total"].as_array().and_then(|a| a.first()) {
        for (k, v) in total.as_object().into_iter().flatten() {
            if let Some(x) = v.as_f64().filter(|_| k != "slots" && k != "time_s") {
                out.insert(k.clone(), x);
            }
        }
        return Ok(out);
    }
    let rows = t["rows"].as_array().context("no rows")?;
    let mut weight = std::collections::BTreeMap::<String, f64>::new();
    for r in rows {
        let slots = r["slots"].as_f64().unwrap_or(0.0);
        for (k, v) in r.as_object().into_iter().flatten() {
            if let Some(x) = v.as_f64().filter(|_| k != "slots" && k != "time_s") {
                *out.entry(k.clone()).or_default() += x * slots;
                *weight.entry(k.clone()).or_default() += slots;
            }
        }
    }
    for (k, v) in out.iter_mut() {
        let w = weight[k];
        if w > 0.0 {
            *v /= w;
        }
    }
    if out.is_empty() {
        bail!("no TopDown shares in the report");
    }
    Ok(out)
}

/// Each check's verdict from the classes' shares: (passed, the line to print).
pub fn verdicts(
    measured: &std::collections::BTreeMap<&str, std::collections::BTreeMap<String, f64>>,
    level2: bool,
) -> Vec<(bool, String)> {
    let pct = |m: &std::collections::BTreeMap<String, f64>, c: &str| {
        m.get(c)
            .map_or("-".to_string(), |v| format!("{:.1}%", 100.0 * v))
    };
    let mut out = Vec::new();
    for (class, want, why) in CHECKS {
        let Some(m) = measured.get(class) else {
            out.push((false, format!("{class}: not measured")));
            continue;
        };
        let top = CATEGORIES
            .iter()
            .copied()
            .filter(|c| m.contains_key(*c))
            .max_by(|a, b| m[*a].total_cmp(&m[*b]));
        let all: Vec<String> = CATEGORIES
            .iter()
            .map(|c| format!("{c} {}", pct(m, c)))
            .collect();
        out.push((
            top == Some(want),
            format!("{class}: {want} is the largest ({why}): {}", all.join(", ")),
        ));
    }
    // Across classes: branch_mispredicts has the most bad speculation of all.
    let bad = |c: &str| {
        measured
            .get(c)
            .and_then(|m| m.get("bad_speculation"))
            .copied()
    };
    let others = CHECKS
        .iter()
        .map(|c| c.0)
        .filter(|c| *c != "branch_mispredicts")
        .filter_map(|c| bad(c).map(|b| (c, b)))
        .max_by(|a, b| a.1.total_cmp(&b.1));
    let ok = match (bad("branch_mispredicts"), others) {
        (Some(b), Some((_, o))) => b > o,
        _ => false,
    };
    out.push((
        ok,
        format!(
            "branch_mispredicts has more bad speculation than any other class: {}, the most of the others {}",
            bad("branch_mispredicts").map_or("-".into(), |b| format!("{:.1}%", 100.0 * b)),
            others.map_or("-".into(), |(c, b)| format!("{:.1}% ({c})", 100.0 * b))
        ),
    ));
    if level2 {
        for (class, more, less, why) in CHECKS_L2 {
            let m = measured.get(class);
            let get = |c: &str| m.and_then(|m| m.get(c)).copied();
            let ok = matches!((get(more), get(less)), (Some(a), Some(b)) if a > b);
            out.push((
                ok,
                format!(
                    "{class}: {more} above {less} ({why}): {}, {}",
                    m.map_or("-".into(), |m| format!("{more} {}", pct(m, more))),
                    m.map_or("-".into(), |m| format!("{less} {}", pct(m, less)))
                ),
            ));
        }
    }
    out
}

/// `cargo xtask hwcheck`; returns the exit status.
pub fn run(a: &Args) -> i32 {
    let sysfs = a.sysfs.clone().unwrap_or_else(|| PathBuf::from("/sys"));
    let found = detect(&sysfs);
    let (pmu, name, level2) = match found {
        Detected::None(why) => {
            println!(
                "hwcheck: no TopDown PMU with PERF_METRICS in {}: {why}.\nNothing was checked (exit {NO_TOPDOWN}). The checks need an Intel CPU of Ice Lake or later with its PMU exposed (bare metal, or a VM with a virtual PMU).",
                sysfs.display()
            );
            return NO_TOPDOWN;
        }
        Detected::Metrics { pmu, name, level2 } => (pmu, name, level2),
    };
    let what = format!(
        "the {pmu} PMU{} with PERF_METRICS, level 1{}",
        name.map(|n| format!(" ({n})")).unwrap_or_default(),
        if level2 { " and 2" } else { "" }
    );
    if a.sysfs.is_some() {
        println!(
            "hwcheck: {} has {what}: on the machine itself, `cargo xtask hwcheck` runs {} checks",
            sysfs.display(),
            CHECKS.len() + 1 + if level2 { CHECKS_L2.len() } else { 0 }
        );
        return 0;
    }
    println!("hwcheck: this machine has {what}");
    let mut s = Summary::default();
    crate::setup::run(crate::setup::Need::Demo, &mut s);
    let triple = host_musl();
    s.step(&format!("build-agents {triple}"), || {
        crate::build_agents::build(&triple)
    });
    s.step("build labperf", || {
        let sh = Shell::new()?;
        sh.change_dir(root());
        cmd!(sh, "cargo build -q -p labperf").run()?;
        Ok(String::new())
    });
    if s.failed() {
        return s.finish();
    }
    let agent = agents_dir(&triple).join("labperf-agent");
    let bench = agents_dir(&triple).join("labperf-bench");
    let labperf = target_dir().join("debug/labperf");
    let out = target_dir().join("hwcheck");
    let mut measured = std::collections::BTreeMap::new();
    for (class, _, _) in CHECKS {
        let r = s.step(&format!("stat --topdown of {class}"), || {
            std::fs::create_dir_all(&out)?;
            let f = out.join(format!("{class}.lpr"));
            let level = if level2 { "2" } else { "1" };
            let sh = Shell::new()?;
            let dur = &a.duration;
            cmd!(
                sh,
                "{agent} stat --topdown --level {level} -o {f} -- {bench} --duration {dur} --classes {class}"
            )
            .ignore_stderr()
            .run()?;
            let json = cmd!(sh, "{labperf} report {f} --format json").read()?;
            let m = shares(&json)?;
            let line = CATEGORIES
                .iter()
                .map(|c| format!("{c} {:.1}%", 100.0 * m.get(*c).copied().unwrap_or(f64::NAN)))
                .collect::<Vec<_>>()
                .join(", ");
            measured.insert(class, m);
            Ok(line)
        });
        if !r {
            break;
        }
    }
    if s.failed() {
        return s.finish();
    }
    let v = verdicts(&measured, level2);
    println!("\nhwcheck on {what}:");
    for (ok, line) in &v {
        println!("  {}  {line}", if *ok { "PASS" } else { "FAIL" });
    }
    let failed = v.iter().filter(|x| !x.0).count();
    println!(
        "hwcheck: {} of {} checks passed (recordings in {})",
        v.len() - failed,
        v.len(),
        out.display()
    );
    i32::from(failed > 0)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tree(name: &str) -> PathBuf {
        root().join("tests/data/sysfs").join(name)
    }

    #[test]
    fn the_recorded_sysfs_trees_are_detected_as_the_agent_sees_them() {
        assert_eq!(
            detect(&tree("x86_64-icelake")),
            Detected::Metrics {
                pmu: "cpu".into(),
                name: None,
                level2: false
            }
        );
        assert_eq!(
            detect(&tree("x86_64-sapphirerapids")),
            Detected::Metrics {
                pmu: "cpu".into(),
                name: None,
                level2: true
            }
        );
        // Hybrid: TopDown is the P-cores' PMU's.
        assert_eq!(
            detect(&tree("x86_64-alderlake-hybrid")),
            Detected::Metrics {
                pmu: "cpu_core".into(),
                name: None,
                level2: true
            }
        );
        let none = |t: &str| match detect(&tree(t)) {
            Detected::None(why) => why,
            d => panic!("{t}: {d:?}"),
        };
        let why = none("x86_64-skylake");
        assert!(
            why.contains("pre-Ice Lake")
                && why.contains("cpu/events/topdown-total-slots is there")
                && why.contains("cpu/events/slots is missing"),
            "{why}"
        );
        let why = none("x86_64-no-topdown");
        assert!(
            why.contains("the cpu PMU has no TopDown")
                && why.contains("cpu/events/slots is missing"),
            "{why}"
        );
        let why = none("x86_64-icelake-two-metrics");
        assert!(
            why.contains("topdown-bad-spec") && why.contains("topdown-fe-bound missing"),
            "{why}"
        );
    }

    #[test]
    fn a_machine_without_a_core_pmu_names_the_missing_directory_and_the_pmus_it_has() {
        // This machine's kind: software PMUs only (a VM without a virtual PMU).
        let d = std::env::temp_dir().join(format!("hwcheck-vm-{}", std::process::id()));
        for p in ["breakpoint", "software", "tracepoint"] {
            std::fs::create_dir_all(d.join("bus/event_source/devices").join(p)).unwrap();
        }
        let got = detect(&d);
        std::fs::remove_dir_all(&d).unwrap();
        match got {
            Detected::None(why) => assert!(
                why.contains("no core PMU")
                    && why.contains("devices/cpu/events is missing")
                    && why.contains("the PMUs here: breakpoint, software, tracepoint"),
                "{why}"
            ),
            d => panic!("{d:?}"),
        }
        // caps/pmu_name names the PMU when the kernel gives it.
        let d = std::env::temp_dir().join(format!("hwcheck-caps-{}", std::process::id()));
        let cpu = d.join("bus/event_source/devices/cpu");
        std::fs::create_dir_all(cpu.join("events")).unwrap();
        std::fs::create_dir_all(cpu.join("caps")).unwrap();
        std::fs::write(cpu.join("caps/pmu_name"), "skylake\n").unwrap();
        let got = detect(&d);
        std::fs::remove_dir_all(&d).unwrap();
        assert!(
            matches!(&got, Detected::None(w) if w.starts_with("the cpu PMU (skylake) has no TopDown")),
            "{got:?}"
        );
    }

    #[test]
    fn shares_come_from_the_total_row_else_the_intervals_by_their_slots() {
        // The view golden (two intervals of 4000 slots each, no total).
        let golden = std::fs::read_to_string(root().join("tests/data/views/topdown.json")).unwrap();
        let m = shares(&golden).unwrap();
        assert!((m["retiring"] - (0.23 + 0.05) / 2.0).abs() < 1e-9, "{m:?}");
        assert!(
            (m["backend_bound"] - (0.321 + 0.416) / 2.0).abs() < 1e-9,
            "{m:?}"
        );
        let with_total = r#"{"view":"topdown","tables":[{"rows":[{"time_s":1.0,"slots":10,"retiring":0.9,"bad_speculation":0.0,"frontend_bound":0.05,"backend_bound":0.05}],
            "total":[{"time_s":"total","slots":100,"retiring":0.1,"bad_speculation":0.6,"frontend_bound":null,"backend_bound":0.3}]}]}"#;
        let m = shares(with_total).unwrap();
        assert_eq!(m.get("retiring"), Some(&0.1));
        assert_eq!(m.get("frontend_bound"), None, "null: not printed");
        assert!(shares(r#"{"view":"plain","tables":[]}"#).is_err());
    }

    #[test]
    fn verdicts_name_the_largest_category_of_each_class() {
        let m = |r: f64, b: f64, f: f64, e: f64| {
            [
                ("retiring", r),
                ("bad_speculation", b),
                ("frontend_bound", f),
                ("backend_bound", e),
            ]
            .into_iter()
            .map(|(k, v)| (k.to_string(), v))
            .collect::<std::collections::BTreeMap<String, f64>>()
        };
        let mut measured = std::collections::BTreeMap::new();
        measured.insert("nops", m(0.9, 0.0, 0.05, 0.05));
        measured.insert("int_divider_stalls", m(0.1, 0.0, 0.1, 0.8));
        measured.insert("fp_divider_stalls", m(0.1, 0.0, 0.1, 0.8));
        measured.insert("dcache_miss", m(0.05, 0.0, 0.05, 0.9));
        measured.insert("branch_mispredicts", m(0.3, 0.5, 0.1, 0.1));
        let v = verdicts(&measured, false);
        assert_eq!(v.len(), CHECKS.len() + 1);
        assert!(v.iter().all(|x| x.0), "{v:?}");
        // A branch_mispredicts compiled branch-free: retiring leads, and it no longer has the
        // most bad speculation.
        measured.insert("branch_mispredicts", m(0.8, 0.0, 0.1, 0.1));
        let v = verdicts(&measured, false);
        let failed: Vec<&String> = v.iter().filter(|x| !x.0).map(|x| &x.1).collect();
        assert_eq!(failed.len(), 2, "{v:?}");
        assert!(failed[0].starts_with("branch_mispredicts: bad_speculation is the largest"));
        // Level 2 asked but not measured: each of its checks fails, said so.
        let v = verdicts(&measured, true);
        assert_eq!(v.len(), CHECKS.len() + 1 + CHECKS_L2.len());
        assert!(v[v.len() - 3..].iter().all(|x| !x.0), "{v:?}");
    }
}
