//! The issue-46 table's ratios against perf, each measured side by side in one run (runs alternated, medians), printed beside the baseline kept in `xtask/bench-baseline.toml` and checked against it; `--quick` in CI, the full run writes docs/measurements.md's table.

use crate::util::{agents_dir, host_musl, root, target_dir};
use anyhow::{bail, Context};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Instant;

/// The baseline file, written only by `cargo xtask bench --quick --record-baseline`.
pub const BASELINE: &str = "xtask/bench-baseline.toml";

/// How much of its baseline a ratio may lose before the bench fails: a 2× slowdown (half the
/// baseline) fails whatever the run's noise, a 1.5× one may pass.
pub const MARGIN: f64 = 0.6;

/// A measurement's sizes: the quick one (CI) and the full one (docs/measurements.md).
pub struct Plan {
    /// Seconds and cpu-clock period (ns) of the flat recording.
    flat: (u32, u32),
    /// Seconds of the dwarf recording (at 4 kHz).
    dwarf_secs: u32,
    /// Bytes of text gzip compresses for the agent's cost.
    gzip_bytes: usize,
    /// Runs of each side (alternated); the median is taken.
    pub reps: usize,
    /// The baseline's section.
    pub section: &'static str,
}

pub const QUICK: Plan = Plan {
    flat: (5, 20_000),
    dwarf_secs: 5,
    gzip_bytes: 24 << 20,
    reps: 5,
    section: "quick",
};

pub const FULL: Plan = Plan {
    flat: (19, 20_000),
    dwarf_secs: 10,
    gzip_bytes: 96 << 20,
    reps: 5,
    section: "full",
};

/// One ratio of the table.
pub struct Ratio {
    /// Its key in the baseline.
    pub key: &'static str,
    /// What was measured, for the table.
    pub what: String,
    /// labperf's figure and perf's, as said in the table.
    pub ours: String,
    pub theirs: String,
    pub value: f64,
    /// Whether a larger value is better (perf's time over labperf's); else smaller is
    /// (the agent's added time as a share of perf's).
    pub higher_better: bool,
    /// The goal.
    pub goal: f64,
}

impl Ratio {
    /// The value as the table says it.
    pub fn said(&self) -> String {
        if self.higher_better {
            format!("{:.1}×", self.value)
        } else {
            format!("{:.2}×", self.value)
        }
    }

    /// Whether the value is worse than half the baseline's, with a margin: a 2× slowdown
    /// makes a ratio half its baseline, which one run's noise puts on either side of half,
    /// so a ratio fails below [`MARGIN`] of its baseline (for a smaller-is-better ratio,
    /// over baseline / `MARGIN`, the baseline taken as 0.05 at least: an agent cost near
    /// nothing is the timer's 10 ms).
    pub fn fails(&self, baseline: f64) -> bool {
        if self.higher_better {
            self.value < baseline * MARGIN
        } else {
            self.value > baseline.max(0.05) / MARGIN
        }
    }

    pub fn meets_goal(&self) -> bool {
        if self.higher_better {
            self.value >= self.goal
        } else {
            self.value <= self.goal
        }
    }
}

/// The programs and the directory of the run.
struct Tools {
    agent: PathBuf,
    bench: PathBuf,
    nofp: PathBuf,
    labperf: PathBuf,
    dir: PathBuf,
}

/// Runs `argv` with its output discarded (`stdout` into `out` when given); its wall time in
/// seconds, an error when it failed.
fn timed(argv: &[&dyn AsRef<std::ffi::OsStr>], out: Option<&Path>) -> anyhow::Result<f64> {
    let mut c = Command::new(argv[0]);
    c.args(&argv[1..])
        .stdin(Stdio::null())
        .stderr(Stdio::null());
    match out {
        Some(p) => c.stdout(std::fs::File::create(p)?),
        None => c.stdout(Stdio::null()),
    };
    let t = Instant::now();
    let st = c
        .status()
        .with_context(|| format!("cannot run {:?}", argv[0].as_ref()))?;
    let secs = t.elapsed().as_secs_f64();
    if !st.success() {
        let words: Vec<_> = argv
            .iter()
            .map(|a| a.as_ref().to_string_lossy().into_owned())
            .collect();
        bail!("`{}` failed: {st}", words.join(" "));
    }
    Ok(secs)
}

/// A recording for the report ratios, run at a raised priority (`nice -n -15`, where the
/// user may: nice runs it unchanged otherwise): its sample count is the bench's CPU time, and
/// other builds on a shared 2-core machine would cut it (a 10 s recording at 4 kHz held 6,075
/// samples at load 8, 36,587 at load 5), and the ratios with it.
fn recorded(argv: &[&dyn AsRef<std::ffi::OsStr>], out: Option<&Path>) -> anyhow::Result<f64> {
    let mut v: Vec<&dyn AsRef<std::ffi::OsStr>> = vec![&"nice", &"-n", &"-15"];
    v.extend_from_slice(argv);
    timed(&v, out)
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

/// Each of `sides` run `reps` times, alternated (one of each, then again); each side's
/// median seconds.
fn alternated(
    reps: usize,
    sides: &mut [&mut dyn FnMut() -> anyhow::Result<f64>],
) -> anyhow::Result<Vec<f64>> {
    let mut t = vec![Vec::new(); sides.len()];
    for _ in 0..reps.max(1) {
        for (i, f) in sides.iter_mut().enumerate() {
            t[i].push(f()?);
        }
    }
    Ok(t.into_iter().map(median).collect())
}

/// perf's and labperf's report times as a ratio (perf's over labperf's).
fn speed(key: &'static str, what: String, goal: f64, ours: f64, theirs: f64) -> Ratio {
    Ratio {
        key,
        what,
        ours: format!("{:.1} ms", ours * 1e3),
        theirs: format!("{:.1} ms", theirs * 1e3),
        value: theirs / ours,
        higher_better: true,
        goal,
    }
}

/// The sample count `labperf info` says.
fn samples(labperf: &Path, f: &Path) -> anyhow::Result<u64> {
    let o = Command::new(labperf).arg("info").arg(f).output()?;
    let info = String::from_utf8_lossy(&o.stdout);
    info.lines()
        .find(|l| l.starts_with("totals:"))
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|n| n.parse().ok())
        .context("no totals in labperf info")
}

/// Measures every ratio of the table with `plan`'s sizes.
pub fn measure(plan: &Plan) -> anyhow::Result<Vec<Ratio>> {
    let triple = host_musl();
    let t = Tools {
        agent: agents_dir(&triple).join("labperf-agent"),
        bench: agents_dir(&triple).join("labperf-bench"),
        nofp: agents_dir(&triple).join("labperf-bench-nofp"),
        labperf: target_dir().join("release/labperf"),
        dir: target_dir().join("bench").join(plan.section),
    };
    std::fs::create_dir_all(&t.dir)?;
    let mut out = Vec::new();
    flat(plan, &t, &mut out)?;
    dwarf(plan, &t, &mut out)?;
    agent_cost(plan, &t, &mut out)?;
    Ok(out)
}

/// The flat recording: `report` against `perf report --stdio` (perf recording the fields
/// labperf records), the SVG flame graph against `perf script | inferno-collapse-perf |
/// inferno-flamegraph` (perf's default fields, as its users record).
fn flat(plan: &Plan, t: &Tools, out: &mut Vec<Ratio>) -> anyhow::Result<()> {
    let Tools {
        agent,
        bench,
        labperf,
        dir,
        ..
    } = t;
    let (secs, period) = (plan.flat.0.to_string(), plan.flat.1.to_string());
    let ours = dir.join("flat.lpr");
    let matched = dir.join("flat-matched.data");
    let defaults = dir.join("flat-defaults.data");
    let d = ["--duration", &secs];
    recorded(
        &[
            agent,
            &"record",
            &"-e",
            &"cpu-clock",
            &"-c",
            &period,
            &"-o",
            &ours,
            &"--",
            bench,
            &d[0],
            &d[1],
        ],
        None,
    )?;
    recorded(
        &[
            &"perf",
            &"record",
            &"-q",
            &"-e",
            &"cpu-clock:u",
            &"-c",
            &period,
            &"--sample-cpu",
            &"-o",
            &matched,
            &"--",
            bench,
            &d[0],
            &d[1],
        ],
        None,
    )?;
    recorded(
        &[
            &"perf",
            &"record",
            &"-q",
            &"-e",
            &"cpu-clock",
            &"-c",
            &period,
            &"-o",
            &defaults,
            &"--",
            bench,
            &d[0],
            &d[1],
        ],
        None,
    )?;
    let n = samples(labperf, &ours)?;
    let mb = std::fs::metadata(&ours)?.len() as f64 / 1e6;
    let m = alternated(
        plan.reps,
        &mut [
            &mut || timed(&[labperf, &"report", &ours], None),
            &mut || timed(&[&"perf", &"report", &"--stdio", &"-i", &matched], None),
        ],
    )?;
    out.push(speed(
        "flat-report",
        format!("`report` of a flat recording ({n} samples, {mb:.1} MB) vs `perf report --stdio` (perf with labperf's fields)"),
        30.0,
        m[0],
        m[1],
    ));
    let svg = dir.join("flat.svg");
    let pipeline = format!(
        "perf script -i {} 2>/dev/null | inferno-collapse-perf | inferno-flamegraph > {}",
        defaults.display(),
        dir.join("flat-perf.svg").display()
    );
    let m = alternated(
        plan.reps,
        &mut [
            &mut || {
                timed(
                    &[labperf, &"export", &ours, &"--format", &"svg", &"-o", &svg],
                    None,
                )
            },
            &mut || timed(&[&"sh", &"-c", &pipeline], None),
        ],
    )?;
    out.push(speed(
        "svg",
        "SVG flame graph of that recording vs `perf script | inferno-collapse-perf | inferno-flamegraph` (perf's default fields)".into(),
        30.0,
        m[0],
        m[1],
    ));
    Ok(())
}

/// The dwarf recordings (the bench without frame pointers, `--calls`, 4 kHz): `report
/// --children` against perf's, and plain `report` against `perf report --no-children`.
fn dwarf(plan: &Plan, t: &Tools, out: &mut Vec<Ratio>) -> anyhow::Result<()> {
    let Tools {
        agent,
        nofp,
        labperf,
        dir,
        ..
    } = t;
    let secs = plan.dwarf_secs.to_string();
    let ours = dir.join("dwarf.lpr");
    let theirs = dir.join("dwarf.data");
    let d = ["--calls", "--duration", &secs];
    recorded(
        &[
            agent,
            &"record",
            &"--call-graph",
            &"dwarf",
            &"-e",
            &"cpu-clock:u",
            &"-c",
            &"250000",
            &"-o",
            &ours,
            &"--",
            nofp,
            &d[0],
            &d[1],
            &d[2],
        ],
        None,
    )?;
    recorded(
        &[
            &"perf",
            &"record",
            &"-q",
            &"--call-graph",
            &"dwarf",
            &"-e",
            &"cpu-clock:u",
            &"-c",
            &"250000",
            &"-o",
            &theirs,
            &"--",
            nofp,
            &d[0],
            &d[1],
            &d[2],
        ],
        None,
    )?;
    let n = samples(labperf, &ours)?;
    let m = alternated(
        plan.reps,
        &mut [
            &mut || timed(&[labperf, &"report", &"--children", &ours], None),
            &mut || {
                timed(
                    &[
                        &"perf",
                        &"report",
                        &"--children",
                        &"--stdio",
                        &"-i",
                        &theirs,
                    ],
                    None,
                )
            },
            &mut || timed(&[labperf, &"report", &ours], None),
            &mut || {
                timed(
                    &[
                        &"perf",
                        &"report",
                        &"--no-children",
                        &"--stdio",
                        &"-i",
                        &theirs,
                    ],
                    None,
                )
            },
        ],
    )?;
    out.push(speed(
        "dwarf-children",
        format!("`report --children` of a `--call-graph dwarf` recording ({n} samples, {secs} s at 4 kHz) vs perf's on its own"),
        20.0,
        m[0],
        m[1],
    ));
    out.push(speed(
        "dwarf-report",
        "plain `report` of that file vs `perf report --no-children --stdio` (goal: under 60 ms)"
            .into(),
        0.0,
        m[2],
        m[3],
    ));
    Ok(())
}

/// Text for gzip to compress: words of a fixed list in a fixed pseudo-random order.
fn gzip_input(dir: &Path, bytes: usize) -> anyhow::Result<PathBuf> {
    let p = dir.join(format!("gzip-input-{bytes}.txt"));
    if std::fs::metadata(&p).is_ok_and(|m| m.len() as usize >= bytes) {
        return Ok(p);
    }
    const WORDS: &[&str] = &[
        "sample", "stack", "frame", "perf", "event", "kernel", "ring", "buffer", "thread",
        "process", "symbol", "address", "unwind", "report", "record", "decode", "agent", "machine",
        "cycle", "branch", "cache", "miss", "page", "fault", "the", "of", "and", "a", "to", "in",
        "is", "it",
    ];
    let mut s = String::with_capacity(bytes + 16);
    let mut x: u64 = 0x2545_f491_4f6c_dd1d;
    while s.len() < bytes {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        s.push_str(WORDS[(x % WORDS.len() as u64) as usize]);
        s.push(if x >> 60 == 0 { '\n' } else { ' ' });
    }
    let tmp = p.with_extension("tmp");
    std::fs::write(&tmp, s)?;
    std::fs::rename(&tmp, &p)?;
    Ok(p)
}

/// `argv` under `/usr/bin/time` with its output into `out`: its wall seconds and the CPU
/// seconds (user + system) of it and the children it waited for.
fn timed_cpu(
    argv: &[&dyn AsRef<std::ffi::OsStr>],
    out: &Path,
    times: &Path,
) -> anyhow::Result<(f64, f64)> {
    let mut v: Vec<&dyn AsRef<std::ffi::OsStr>> =
        vec![&"/usr/bin/time", &"-f", &"%U %S", &"-o", &times];
    v.extend_from_slice(argv);
    let wall = timed(&v, Some(out))?;
    let t = std::fs::read_to_string(times)?;
    let cpu: f64 = t
        .lines()
        .last()
        .context("no /usr/bin/time figures")?
        .split_whitespace()
        .map(|x| x.parse::<f64>().unwrap_or(0.0))
        .sum();
    Ok((wall, cpu))
}

/// The recorders' added cost on `gzip -c` at 4 kHz (cpu-clock, user and kernel as root),
/// without stacks and with frame-pointer stacks (`-g`): gzip alone, under labperf-agent and
/// under perf record, alternated. The ratio is of the CPU time each adds (the recorder's,
/// the kernel's sampling in the workload's, and the workload's own slowdown: user + system
/// of the whole tree): on a shared 2-core machine wall time varies by more than the
/// agent's cost; the added wall time is printed beside it.
fn agent_cost(plan: &Plan, t: &Tools, out: &mut Vec<Ratio>) -> anyhow::Result<()> {
    let Tools { agent, dir, .. } = t;
    let input = gzip_input(dir, plan.gzip_bytes)?;
    let gz = dir.join("out.gz");
    let times = dir.join("time.txt");
    let (ours, theirs) = (dir.join("gzip.lpr"), dir.join("gzip.data"));
    for (key, g, what, goal) in [
        ("agent-flat", None, "no stacks", 0.15),
        ("agent-g", Some("-g"), "`-g` (frame-pointer stacks)", 0.3),
    ] {
        let g: Vec<&str> = g.into_iter().collect();
        let mut a: Vec<&dyn AsRef<std::ffi::OsStr>> =
            vec![agent, &"record", &"-e", &"cpu-clock", &"-F", &"4000"];
        let mut p: Vec<&dyn AsRef<std::ffi::OsStr>> = vec![
            &"perf",
            &"record",
            &"-q",
            &"-e",
            &"cpu-clock",
            &"-F",
            &"4000",
        ];
        for x in &g {
            a.push(x);
            p.push(x);
        }
        a.extend([
            &"-o" as &dyn AsRef<std::ffi::OsStr>,
            &ours,
            &"--",
            &"gzip",
            &"-c",
            &input,
        ]);
        p.extend([
            &"-o" as &dyn AsRef<std::ffi::OsStr>,
            &theirs,
            &"--",
            &"gzip",
            &"-c",
            &input,
        ]);
        let alone: [&dyn AsRef<std::ffi::OsStr>; 3] = [&"gzip", &"-c", &input];
        // The floor: the same events read by the agent with `--discard`, which drops each
        // record as it reads it (the kernel's sampling and the reading alone).
        let mut d = a.clone();
        d.insert(2, &"--discard");
        let mut runs = [Vec::new(), Vec::new(), Vec::new(), Vec::new()];
        for _ in 0..plan.reps.max(1) {
            for (i, argv) in [&alone[..], &a[..], &p[..], &d[..]].into_iter().enumerate() {
                runs[i].push(timed_cpu(argv, &gz, &times)?);
            }
        }
        let med = |i: usize, f: fn(&(f64, f64)) -> f64| median(runs[i].iter().map(f).collect());
        let (wall, cpu) = (|x: &(f64, f64)| x.0, |x: &(f64, f64)| x.1);
        let (w0, w1, w2) = (med(0, wall), med(1, wall), med(2, wall));
        let (c0, c1, c2, c3) = (med(0, cpu), med(1, cpu), med(2, cpu), med(3, cpu));
        let (added_ours, added_perf) = ((c1 - c0).max(0.0), (c2 - c0).max(0.01));
        let floor = (c3 - c0).max(0.0) / added_perf;
        let pct = |x: f64, of: f64| format!("{:+.1} %", 100.0 * (x - of) / of);
        out.push(Ratio {
            key,
            what: format!("agent's added CPU time (and wall time), gzip at 4 kHz, {what}, as a share of perf's"),
            ours: format!(
                "CPU {} (wall {}); reading and discarding the records: CPU {}, {floor:.2}x of perf's",
                pct(c1, c0),
                pct(w1, w0),
                pct(c3, c0)
            ),
            theirs: format!("CPU {} (wall {})", pct(c2, c0), pct(w2, w0)),
            value: added_ours / added_perf,
            higher_better: false,
            goal,
        });
    }
    Ok(())
}

/// The baseline's ratios of `section`, by key (none when the file or section is absent).
pub fn baseline(section: &str) -> anyhow::Result<toml::Table> {
    let p = root().join(BASELINE);
    let Ok(text) = std::fs::read_to_string(&p) else {
        return Ok(toml::Table::new());
    };
    let t: toml::Table = text.parse().with_context(|| {
        format!(
            "{} is not TOML; `cargo xtask bench --quick --record-baseline` rewrites it",
            p.display()
        )
    })?;
    Ok(t.get(section)
        .and_then(|s| s.as_table())
        .cloned()
        .unwrap_or_default())
}

/// Writes `ratios` as `section`'s baseline (the other section kept).
pub fn record_baseline(section: &str, ratios: &[Ratio], load: &str) -> anyhow::Result<()> {
    let p = root().join(BASELINE);
    let mut all: toml::Table = std::fs::read_to_string(&p)
        .ok()
        .and_then(|t| t.parse().ok())
        .unwrap_or_default();
    let mut s = toml::Table::new();
    for r in ratios {
        s.insert(
            r.key.into(),
            toml::Value::Float((r.value * 1000.0).round() / 1000.0),
        );
    }
    s.insert("load".into(), toml::Value::String(load.into()));
    all.insert(section.into(), toml::Value::Table(s));
    let text = format!(
        "# Written by `cargo xtask bench --quick --record-baseline` (section quick) and `cargo xtask\n# bench --record-baseline` (full); never by hand. Each ratio is perf's time over labperf's\n# (higher is better) but agent-*, the agent's added CPU time over perf's (lower is better).\n# `cargo xtask bench` fails when a ratio is worse than 0.6 of its baseline (a 2x slowdown).\n{}",
        toml::to_string(&all)?
    );
    std::fs::write(&p, text)?;
    Ok(())
}

/// The ratios beside their baseline, one line each; the failures' lines.
pub fn check(ratios: &[Ratio], base: &toml::Table) -> (String, Vec<String>) {
    let mut lines = Vec::new();
    let mut failed = Vec::new();
    for r in ratios {
        let b = base.get(r.key).and_then(|v| v.as_float());
        let verdict = match b {
            None => "no baseline".to_string(),
            Some(b) if r.fails(b) => format!("FAIL: baseline {b:.2}, worse than {MARGIN} of it"),
            Some(b) => format!("baseline {b:.2}, ok"),
        };
        let goal = if r.goal == 0.0 {
            "no goal as a ratio".to_string()
        } else {
            format!(
                "goal {}{}: {}",
                if r.higher_better { "≥ " } else { "≤ " },
                r.goal,
                if r.meets_goal() { "met" } else { "not met" }
            )
        };
        let line = format!(
            "BENCH ratio {:<15} {:>8} (labperf {}, perf {}) {verdict}; {goal}",
            r.key,
            r.said(),
            r.ours,
            r.theirs,
        );
        println!("{line}");
        if b.is_some_and(|b| r.fails(b)) {
            failed.push(line.clone());
        }
        lines.push(line);
    }
    (lines.join("\n"), failed)
}

/// docs/measurements.md's table of `ratios` (between its `<!-- bench-ratios -->` markers).
pub fn readme_table(ratios: &[Ratio], when: &str, load: &str) -> String {
    let mut t = format!(
        "Generated by `cargo xtask bench --readme` on {when} (this machine, perf 6.1, medians of 5 runs alternated with perf's; load average {load}):\n\n| what | labperf | perf | ratio | goal |\n|---|---|---|---|---|\n"
    );
    for r in ratios {
        let goal = if r.goal == 0.0 {
            String::new()
        } else if r.higher_better {
            format!("≥ {}×", r.goal)
        } else {
            format!("≤ {}×", r.goal)
        };
        t.push_str(&format!(
            "| {} | {} | {} | **{}** | {goal} |\n",
            r.what.replace('|', "\\|"),
            r.ours,
            r.theirs,
            r.said()
        ));
    }
    t
}

/// This machine's load average (`/proc/loadavg`'s three figures).
pub fn load() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .map(|l| l.split_whitespace().take(3).collect::<Vec<_>>().join(" "))
        .unwrap_or_default()
}
