//! `cargo xtask bench`: bytes per sample and report time against perf in the same run, then a fuzz run; `--quick`, the table's ratios alone against their baseline (CI).

mod ratios;
mod remote;

use crate::util::{agents_dir, host_musl, target_dir, Summary};
use anyhow::{bail, Context};
use std::path::PathBuf;
use std::time::Instant;
use xshell::{cmd, Shell};

#[derive(clap::Args)]
pub struct Args {
    /// Recording sizes as SECONDS:PERIOD_NS pairs (cpu-clock period); each is measured.
    #[arg(
        long,
        value_delimiter = ',',
        default_value = "10:250000,10:20000,30:20000"
    )]
    pub sizes: Vec<String>,
    /// Timed repetitions of each report (the median is used).
    #[arg(long, default_value_t = 5)]
    pub reps: usize,
    /// Seconds of decoder fuzzing (0 skips it).
    #[arg(long, default_value_t = 180)]
    pub fuzz_seconds: u64,
    /// Seconds (guest time) of each strobing recording on the emulated Arm machine (0 skips them).
    #[arg(long, default_value_t = 10)]
    pub strobe_seconds: u64,
    /// Seconds of each call-stack recording (dwarf bytes and cost; 0 skips them); the
    /// `--children` report is timed on 1M stacked samples whatever this is.
    #[arg(long, default_value_t = 5)]
    pub stacks_seconds: u64,
    /// Timed repetitions of the lab figures through private sshd instances (`record
    /// --host` against ssh + perf; wall time against host count); 0 skips them.
    #[arg(long, default_value_t = 5)]
    pub remote_reps: usize,
    /// Only the lab figures (after building the release agents and labperf).
    #[arg(long)]
    pub only_remote: bool,
    /// Only the ratios against perf of docs/measurements.md's table, at small sizes (about 2 minutes
    /// after the builds): each beside its baseline in `xtask/bench-baseline.toml`, failing
    /// when one is worse than 0.6 of it (a 2x slowdown). CI runs this.
    #[arg(long)]
    pub quick: bool,
    /// Write the ratios just measured as the baseline (`--quick`'s section, or the full
    /// run's) instead of checking them: the baseline file is never edited by hand.
    #[arg(long)]
    pub record_baseline: bool,
    /// Write the full run's ratios into docs/measurements.md's table (between `<!--
    /// bench-ratios -->` and `<!-- /bench-ratios -->`); the flag keeps its old name.
    #[arg(long)]
    pub readme: bool,
}

/// The table's ratios with `plan`'s sizes: measured, printed beside the baseline and
/// checked against it (or recorded as it); with `readme`, written into docs/measurements.md.
fn ratios_step(a: &Args, plan: &ratios::Plan, s: &mut Summary) {
    s.step(
        &format!(
            "ratios against perf ({} sizes), each beside its baseline in {} (fails below 0.6 of it: a 2x slowdown)",
            plan.section,
            ratios::BASELINE
        ),
        || {
            let before = ratios::load();
            let t = Instant::now();
            let r = ratios::measure(plan)?;
            let load = format!("{before} before, {} after", ratios::load());
            println!("BENCH ratios: measured in {:.0} s, load average {load}", t.elapsed().as_secs_f64());
            if a.record_baseline {
                ratios::record_baseline(plan.section, &r, &load)?;
            }
            let base = ratios::baseline(plan.section)?;
            let (lines, failed) = ratios::check(&r, &base);
            if a.readme {
                let when = std::process::Command::new("date")
                    .args(["-u", "+%Y-%m-%d"])
                    .output()
                    .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
                    .unwrap_or_default();
                crate::util::write_block(
                    crate::util::MEASUREMENTS,
                    "<!-- bench-ratios -->",
                    "<!-- /bench-ratios -->",
                    &ratios::readme_table(&r, &when, &load),
                )?;
            }
            if !failed.is_empty() {
                bail!(
                    "{} ratio(s) worse than {} of the baseline (a slowdown, or a much busier machine: rerun, and see the load):\n{}",
                    failed.len(),
                    ratios::MARGIN,
                    failed.join("\n")
                );
            }
            Ok(lines)
        },
    );
}

/// `--quick`: the agent and bench of this machine and the release labperf, then the ratios.
fn quick(a: &Args, s: &mut Summary) {
    let triple = host_musl();
    let built = s.step(&format!("build agent and benches {triple}"), || {
        crate::build_agents::build_with(&triple, true)
    }) && s.step("build labperf (release)", || {
        let sh = Shell::new()?;
        sh.change_dir(crate::util::root());
        cmd!(sh, "cargo build --release -p labperf").run()?;
        Ok(String::new())
    });
    if built {
        ratios_step(a, &ratios::QUICK, s);
    }
}

fn median_secs(reps: usize, mut f: impl FnMut() -> anyhow::Result<()>) -> anyhow::Result<f64> {
    let mut v = Vec::new();
    for _ in 0..reps.max(1) {
        let t = Instant::now();
        f()?;
        v.push(t.elapsed().as_secs_f64());
    }
    v.sort_by(|a, b| a.total_cmp(b));
    Ok(v[v.len() / 2])
}

pub fn run(a: &Args, s: &mut Summary) {
    if a.quick {
        return quick(a, s);
    }
    let triple = host_musl();
    if !crate::build_agents::build_all_release(&triple, s) {
        return;
    }
    crate::build_agents::run(
        &crate::build_agents::Args {
            target: "all".into(),
            release: true,
            ..Default::default()
        },
        s,
    );
    if a.remote_reps > 0 {
        remote::overhead(a.remote_reps, s);
        remote::scale(s);
    }
    if a.only_remote {
        return;
    }
    agent_sizes(s);
    ratios_step(a, &ratios::FULL, s);
    let dir = target_dir().join("bench");
    let _ = std::fs::create_dir_all(&dir);
    let tools = Tools {
        agent: agents_dir(&triple).join("labperf-agent"),
        bench: agents_dir(&triple).join("labperf-bench"),
        labperf: target_dir().join("release/labperf"),
        dir,
    };
    for size in &a.sizes {
        let Some((secs, period)) = size.split_once(':') else {
            s.step(&format!("size {size}"), || {
                bail!("sizes are SECONDS:PERIOD_NS, e.g. 10:20000")
            });
            continue;
        };
        let mut m = SizeRun::new(a, &tools, secs, period);
        if !m.record(s) {
            continue;
        }
        m.bytes_per_sample(s);
        m.report_time(s);
        m.flame_graph(s);
        m.parquet(s);
    }
    merged_report(a, s, &tools);
    if a.stacks_seconds > 0 {
        stacks(a, s);
    }
    if a.strobe_seconds > 0 {
        strobing(a, s);
    }
    if a.fuzz_seconds > 0 {
        fuzz_decoder(a, s);
    }
}

/// The agents' sizes against their budgets, and the distribution's perf for scale.
fn agent_sizes(s: &mut Summary) {
    s.step("agent sizes vs budgets and the distro's perf", || {
        let mut lines = Vec::new();
        for &(dir, budget) in crate::build_agents::BUDGETS {
            let n = std::fs::metadata(agents_dir(dir).join("labperf-agent"))?.len();
            let line = format!("{dir} labperf-agent {:.1} KiB (budget {} KiB)", n as f64 / 1024.0, budget / 1024);
            println!("BENCH agent-size: {line}");
            if n > budget {
                bail!("{line}: over budget");
            }
            lines.push(line);
        }
        let sh = Shell::new()?;
        if let Ok(perf) = cmd!(sh, "which perf").read() {
            let exe = std::fs::metadata(perf.trim())?.len();
            let libs: u64 = cmd!(sh, "ldd {perf}").read()?.lines().filter_map(|l| l.split("=>").nth(1)).filter_map(|r| r.split_whitespace().next()).filter_map(|p| std::fs::metadata(p).ok()).map(|m| m.len()).sum();
            println!("BENCH agent-size: distro perf {:.1} KiB + {:.1} KiB of shared libraries (no static perf to measure)", exe as f64 / 1024.0, libs as f64 / 1024.0);
        }
        Ok(lines.join("; "))
    });
}

/// What every recording size's figures run, and where their files go.
struct Tools {
    agent: PathBuf,
    bench: PathBuf,
    labperf: PathBuf,
    dir: PathBuf,
}

/// One recording size: labperf's recording and perf's two, with their sample counts.
struct SizeRun<'a> {
    a: &'a Args,
    t: &'a Tools,
    secs: &'a str,
    period: &'a str,
    tag: String,
    ours: PathBuf,
    perf_files: [(&'static str, PathBuf); 2],
    /// labperf's samples, then perf's (defaults, matched fields).
    counts: (u64, [u64; 2]),
}

impl<'a> SizeRun<'a> {
    fn new(a: &'a Args, t: &'a Tools, secs: &'a str, period: &'a str) -> Self {
        let dir = &t.dir;
        // perf as users run it (`-e cpu-clock -c N`: perf's default sample fields, user
        // and kernel), and with the fields labperf records (user only, with the CPU).
        let ours = dir.join(format!("bench-{secs}s-{period}.lpr"));
        let perf_files = [
            (
                "perf defaults",
                dir.join(format!("perf-{secs}s-{period}.data")),
            ),
            (
                "matched fields",
                dir.join(format!("perf-matched-{secs}s-{period}.data")),
            ),
        ];
        let tag = format!("{secs} s at {period} ns");
        SizeRun {
            a,
            t,
            secs,
            period,
            tag,
            ours,
            perf_files,
            counts: (0u64, [0u64; 2]),
        }
    }

    /// Records the bench with labperf-agent and perf; false when that failed.
    fn record(&mut self, s: &mut Summary) -> bool {
        let Tools {
            agent,
            bench,
            labperf,
            ..
        } = self.t;
        let SizeRun {
            secs,
            period,
            tag,
            ours,
            perf_files,
            ..
        } = &*self;
        let mut counts = self.counts;
        let recorded = s.step(&format!("record {tag}: labperf-agent and perf record"), || {
            let sh = Shell::new()?;
            cmd!(sh, "{agent} record -e cpu-clock -c {period} -o {ours} -- {bench} --duration {secs}").run()?;
            let (default, matched) = (&perf_files[0].1, &perf_files[1].1);
            cmd!(sh, "perf record -q -e cpu-clock -c {period} -o {default} -- {bench} --duration {secs}").run().context("perf record failed; `cargo xtask setup` installs it")?;
            cmd!(sh, "perf record -q -e cpu-clock:u -c {period} --sample-cpu -o {matched} -- {bench} --duration {secs}").run().context("perf record failed; `cargo xtask setup` installs it")?;
            let info = cmd!(sh, "{labperf} info {ours}").read()?;
            let ours_n: u64 = info.lines().find(|l| l.starts_with("totals:")).and_then(|l| l.split_whitespace().nth(1)).and_then(|n| n.parse().ok()).context("no totals in labperf info")?;
            let mut theirs = [0u64; 2];
            for (i, (_, f)) in perf_files.iter().enumerate() {
                theirs[i] = cmd!(sh, "perf script -i {f} -F ip").read()?.lines().count() as u64;
            }
            counts = (ours_n, theirs);
            Ok(format!("{ours_n} samples (labperf), {} (perf defaults), {} (perf, matched fields)", theirs[0], theirs[1]))
        });
        self.counts = counts;
        recorded
    }

    /// The recording's bytes per sample against perf's.
    fn bytes_per_sample(&self, s: &mut Summary) {
        let SizeRun {
            tag,
            ours,
            perf_files,
            counts,
            ..
        } = self;
        s.step(&format!("bytes per sample, {tag} (target <= 0.25x of perf with matched fields)"), || {
            let ob = std::fs::metadata(ours)?.len() as f64;
            let on = counts.0.max(1) as f64;
            let mut lines = Vec::new();
            let mut matched = 0.0;
            for (i, (what, f)) in perf_files.iter().enumerate() {
                let tb = std::fs::metadata(f)?.len() as f64;
                let tn = counts.1[i].max(1) as f64;
                let ratio = (ob / on) / (tb / tn);
                let line = format!("{} samples: labperf {:.2} B/sample ({} B), perf ({what}) {:.2} B/sample ({} B): {ratio:.3}x", counts.0, ob / on, ob as u64, tb / tn, tb as u64);
                println!("BENCH bytes-per-sample {tag} ({what}): {line}");
                lines.push(line);
                matched = ratio;
            }
            if matched > 0.25 {
                bail!("{}: above the 0.25x target", lines.join("; "));
            }
            Ok(lines.join("; "))
        });
    }

    /// `labperf report` against `perf report --stdio`.
    fn report_time(&self, s: &mut Summary) {
        let SizeRun {
            a,
            tag,
            ours,
            perf_files,
            counts,
            ..
        } = self;
        let labperf = &self.t.labperf;
        s.step(&format!("report time, {tag} (target >= 30x perf with matched fields)"), || {
            let sh = Shell::new()?;
            let ours_t = median_secs(a.reps, || {
                cmd!(sh, "{labperf} report {ours}").quiet().ignore_stdout().ignore_stderr().run()?;
                Ok(())
            })?;
            let mut lines = Vec::new();
            let mut matched = 0.0;
            for (what, f) in perf_files {
                let theirs_t = median_secs(a.reps, || {
                    cmd!(sh, "perf report --stdio -i {f}").quiet().ignore_stdout().ignore_stderr().run()?;
                    Ok(())
                })?;
                let ratio = theirs_t / ours_t;
                let line = format!("{} samples: labperf report {:.1} ms, perf report --stdio ({what}) {:.1} ms (median of {}): {ratio:.1}x faster", counts.0, ours_t * 1e3, theirs_t * 1e3, a.reps);
                println!("BENCH report-time {tag} ({what}): {line}");
                lines.push(line);
                matched = ratio;
            }
            let line = lines.join("; ");
            // Below ~200k samples both tools spend most of their time starting up
            // (process start, ELF loading): the ratio is shown, the target not applied.
            if counts.0 < 200_000 {
                return Ok(format!("{line} (startup-bound size: no target)"));
            }
            if matched < 30.0 {
                bail!("{line}: below the 30x target");
            }
            Ok(line)
        });
    }

    /// `labperf export --format svg` against perf script | inferno.
    fn flame_graph(&self, s: &mut Summary) {
        let SizeRun {
            a,
            secs,
            period,
            tag,
            ours,
            perf_files,
            counts,
            ..
        } = self;
        let Tools { labperf, dir, .. } = self.t;
        s.step(&format!("flame graph, {tag} (target >= 20x perf script | inferno at >= 1M samples)"), || {
            let sh = Shell::new()?;
            let svg = dir.join(format!("bench-{secs}s-{period}.svg"));
            let ours_t = median_secs(a.reps, || {
                cmd!(sh, "{labperf} export {ours} --format svg -o {svg}").quiet().ignore_stderr().run()?;
                Ok(())
            })?;
            // perf's users' route: perf script, collapse, draw (perf's default fields).
            let data = &perf_files[0].1;
            let theirs_svg = dir.join(format!("perf-{secs}s-{period}.svg"));
            let pipeline = format!(
                "perf script -i {} 2>/dev/null | inferno-collapse-perf | inferno-flamegraph > {}",
                data.display(),
                theirs_svg.display()
            );
            let theirs_t = median_secs(a.reps, || {
                cmd!(sh, "sh -c {pipeline}").quiet().run()?;
                Ok(())
            })?;
            let ratio = theirs_t / ours_t;
            let line = format!("{} samples: labperf export --format svg {:.1} ms, perf script | inferno-collapse-perf | inferno-flamegraph ({} samples) {:.1} ms (median of {}): {ratio:.1}x faster", counts.0, ours_t * 1e3, counts.1[0], theirs_t * 1e3, a.reps);
            println!("BENCH flame-graph {tag}: {line}");
            if counts.0 < 1_000_000 {
                return Ok(format!("{line} (under 1M samples: no target)"));
            }
            if ratio < 20.0 {
                bail!("{line}: below the 20x target");
            }
            Ok(line)
        });
    }

    /// The Parquet export's bytes per sample and time.
    fn parquet(&self, s: &mut Summary) {
        let SizeRun {
            a,
            secs,
            period,
            tag,
            ours,
            perf_files,
            counts,
            ..
        } = self;
        let Tools { labperf, dir, .. } = self.t;
        s.step(&format!("Parquet export, {tag} (bytes per sample)"), || {
            let sh = Shell::new()?;
            let pq = dir.join(format!("bench-{secs}s-{period}.parquet"));
            let t = median_secs(a.reps, || {
                cmd!(sh, "{labperf} export {ours} --format parquet -o {pq}").quiet().ignore_stderr().run()?;
                Ok(())
            })?;
            let stacks = dir.join(format!("bench-{secs}s-{period}.stacks.parquet"));
            let (pb, sb) = (std::fs::metadata(&pq)?.len(), std::fs::metadata(&stacks)?.len());
            let n = counts.0.max(1) as f64;
            let ob = std::fs::metadata(ours)?.len() as f64;
            let tb = std::fs::metadata(&perf_files[0].1)?.len() as f64 / counts.1[0].max(1) as f64;
            let line = format!("{} samples: Parquet {:.2} B/sample ({pb} B samples + {sb} B stacks) in {:.1} ms (median of {}); the labperf recording {:.2} B/sample, perf.data (perf defaults) {tb:.2} B/sample", counts.0, (pb + sb) as f64 / n, t * 1e3, a.reps, ob / n);
            println!("BENCH parquet {tag}: {line}");
            Ok(line)
        });
    }
}

/// The merged report of ten copies of one recording against one.
fn merged_report(a: &Args, s: &mut Summary, t: &Tools) {
    let Tools { labperf, dir, .. } = t;
    // Many recordings at once: `report` of ten copies of the last size's recording (the
    // largest by default) against one.
    if let Some(biggest) = a.sizes.iter().filter_map(|z| z.split_once(':')).next_back() {
        let one = dir.join(format!("bench-{}s-{}.lpr", biggest.0, biggest.1));
        s.step("merged report of 10 files (target: time per sample within 1.5x of one file)", || {
            let sh = Shell::new()?;
            let mut files = Vec::new();
            for i in 0..10 {
                let f = dir.join(format!("merge-{i}.lpr"));
                std::fs::copy(&one, &f)?;
                files.push(f);
            }
            let t1 = median_secs(a.reps, || {
                cmd!(sh, "{labperf} report {one}").quiet().ignore_stdout().ignore_stderr().run()?;
                Ok(())
            })?;
            let all = &files;
            let t10 = median_secs(a.reps, || {
                cmd!(sh, "{labperf} report {all...}").quiet().ignore_stdout().ignore_stderr().run()?;
                Ok(())
            })?;
            let per = t10 / (10.0 * t1);
            let line = format!("1 file {:.1} ms, 10 files {:.1} ms: {per:.2}x the time per sample (median of {})", t1 * 1e3, t10 * 1e3, a.reps);
            println!("BENCH merged-report: {line}");
            for f in &files {
                let _ = std::fs::remove_file(f);
            }
            if per > 1.5 {
                bail!("{line}: above 1.5x");
            }
            Ok(line)
        });
    }
}

/// Fuzzes the decoder for `--fuzz-seconds`.
fn fuzz_decoder(a: &Args, s: &mut Summary) {
    crate::setup::run(crate::setup::Need::Fuzz, s);
    s.step(
        &format!("fuzz the decoder for {} s", a.fuzz_seconds),
        || {
            let jobs = std::thread::available_parallelism().map_or(1, |n| n.get() as u64);
            let o = crate::fuzz::fuzz("decode", 0, Some(a.fuzz_seconds), jobs)?;
            Ok(format!(
                "{} executions in {} s, no failure",
                o.runs, o.seconds
            ))
        },
    );
}

/// `/usr/bin/time -f '%U %S %M'`'s figures on its last stderr line: CPU seconds, peak KiB.
fn time_figures(stderr: &str) -> anyhow::Result<(f64, u64)> {
    let l = stderr
        .lines()
        .rev()
        .find(|l| l.starts_with("TIME "))
        .context("no /usr/bin/time line")?;
    let w: Vec<&str> = l.split_whitespace().collect();
    let cpu = w[1].parse::<f64>()? + w[2].parse::<f64>()?;
    Ok((cpu, w[3].parse()?))
}

/// Call stacks: `--call-graph dwarf` bytes per sample and the recorders' own cost against
/// `perf record --call-graph dwarf` on one run of the bench built without frame pointers
/// (both attached to it), and `report --children` against `perf report --children` on
/// 1M frame-pointer stacks.
fn stacks(a: &Args, s: &mut Summary) {
    let triple = host_musl();
    let dir = target_dir().join("bench");
    let _ = std::fs::create_dir_all(&dir);
    let agent = agents_dir(&triple).join("labperf-agent");
    let nofp = agents_dir(&triple).join("labperf-bench-nofp");
    let bench = agents_dir(&triple).join("labperf-bench");
    let labperf = target_dir().join("release/labperf");
    let secs = a.stacks_seconds.to_string();
    s.step(&format!("call stacks, dwarf: bytes per sample and recorder cost, {secs} s (target <= 1/10 of perf --call-graph dwarf, goal 1/20)"), || {
        let sh = Shell::new()?;
        let (ours, theirs) = (dir.join("dwarf.lpr"), dir.join("perf-dwarf.data"));
        // The bench first; both recorders attach to it, so they see the same run and
        // /usr/bin/time counts each recorder alone (not the workload).
        let mut child = std::process::Command::new(&nofp)
            .args(["--calls", "--duration", &secs])
            .stderr(std::process::Stdio::null())
            .spawn()?;
        let pid = child.id().to_string();
        std::thread::sleep(std::time::Duration::from_millis(200));
        let perf = {
            let (theirs, pid) = (theirs.clone(), pid.clone());
            std::thread::spawn(move || -> anyhow::Result<String> {
                let sh = Shell::new()?;
                Ok(cmd!(sh, "/usr/bin/time -f 'TIME %U %S %M' perf record -q --call-graph dwarf -e cpu-clock:u -c 250000 -p {pid} -o {theirs}").ignore_status().output().map(|o| String::from_utf8_lossy(&o.stderr).into_owned())?)
            })
        };
        let mine = cmd!(sh, "/usr/bin/time -f 'TIME %U %S %M' {agent} record --call-graph dwarf -e cpu-clock:u -c 250000 --pid {pid} -o {ours}").ignore_status().output()?;
        child.wait()?;
        let perf_err = perf.join().map_err(|_| anyhow::anyhow!("perf thread panicked"))??;
        let (our_cpu, our_rss) = time_figures(&String::from_utf8_lossy(&mine.stderr))?;
        let (perf_cpu, perf_rss) = time_figures(&perf_err)?;
        let info = cmd!(sh, "{labperf} info {ours}").read()?;
        let on: u64 = info.lines().find(|l| l.starts_with("records:")).and_then(|l| l.split('(').nth(1)).and_then(|l| l.split_whitespace().next()).and_then(|n| n.parse().ok()).context("no sample count in labperf info")?;
        let dump = cmd!(sh, "perf report -D -i {theirs}").ignore_stderr().read()?;
        let tn = dump.lines().filter(|l| l.contains("PERF_RECORD_SAMPLE")).count() as u64;
        let (ob, tb) = (std::fs::metadata(&ours)?.len() as f64, std::fs::metadata(&theirs)?.len() as f64);
        let (ops, tps) = (ob / on.max(1) as f64, tb / tn.max(1) as f64);
        let ratio = ops / tps;
        let line = format!("labperf {on} samples, {ops:.1} B/sample; perf {tn} samples, {tps:.1} B/sample: {ratio:.4}x (1/{:.0}); recorder CPU {our_cpu:.2} s vs perf {perf_cpu:.2} s, peak RSS {our_rss} KiB vs perf {perf_rss} KiB", 1.0 / ratio);
        println!("BENCH dwarf: {line}");
        if ratio > 0.1 {
            bail!("{line}: above 1/10");
        }
        Ok(line)
    });
    s.step("report --children on 1M stacked samples (target >= 10x perf report --children --stdio)", || {
        let sh = Shell::new()?;
        let (ours, theirs) = (dir.join("children.lpr"), dir.join("perf-children.data"));
        // 12 s at 10 µs: over a million frame-pointer stacks each (the timer loses a few).
        cmd!(sh, "{agent} record -g -e cpu-clock:u -c 10000 -o {ours} -- {bench} --calls --duration 12").ignore_stderr().run()?;
        cmd!(sh, "perf record -q -g -e cpu-clock:u -c 10000 -o {theirs} -- {bench} --calls --duration 12").ignore_stderr().run()?;
        let info = cmd!(sh, "{labperf} info {ours}").read()?;
        let on: u64 = info.lines().find(|l| l.starts_with("records:")).and_then(|l| l.split('(').nth(1)).and_then(|l| l.split_whitespace().next()).and_then(|n| n.parse().ok()).context("no sample count in labperf info")?;
        let ours_t = median_secs(a.reps.min(3), || {
            cmd!(sh, "{labperf} report {ours} --children").quiet().ignore_stdout().ignore_stderr().run()?;
            Ok(())
        })?;
        let theirs_t = median_secs(a.reps.min(3), || {
            cmd!(sh, "perf report --children --stdio -i {theirs}").quiet().ignore_stdout().ignore_stderr().run()?;
            Ok(())
        })?;
        let ratio = theirs_t / ours_t;
        let line = format!("{on} samples: labperf report --children {:.0} ms, perf report --children --stdio {:.0} ms (median of {}): {ratio:.1}x faster", ours_t * 1e3, theirs_t * 1e3, a.reps.min(3));
        println!("BENCH children: {line}");
        if on < 1_000_000 {
            bail!("{line}: fewer than 1M samples");
        }
        if ratio < 10.0 {
            bail!("{line}: below the 10x target");
        }
        Ok(line)
    });
}

/// One strobing recording's figures.
struct StrobeRun {
    /// The row's name; also the file's: `strobe-<label>.lpr`.
    label: &'static str,
    bytes: u64,
    json: String,
    info: String,
}

impl StrobeRun {
    /// A function's %I in the report.
    fn pct(&self, f: &str) -> f64 {
        let key = format!("\"symbol\": \"{f}\"");
        self.json
            .split('{')
            .find(|r| r.contains(&key))
            .and_then(|r| r.split("\"instr_pct\": ").nth(1))
            .and_then(|v| v.split([',', '\n']).next())
            .and_then(|v| v.trim().parse().ok())
            .unwrap_or(f64::NAN)
    }

    /// The report's window count (its summary).
    fn windows(&self) -> f64 {
        self.json
            .split("\"windows\": ")
            .nth(1)
            .and_then(|v| v.split([',', '\n', '}']).next())
            .and_then(|v| v.trim().parse().ok())
            .unwrap_or(f64::NAN)
    }

    /// A figure of `labperf info`: the number after `label` on its line.
    fn info_number(&self, line: &str, label: &str) -> f64 {
        self.info
            .lines()
            .find(|l| l.starts_with(line))
            .and_then(|l| {
                let words: Vec<&str> = l.split_whitespace().collect();
                let i = words
                    .iter()
                    .position(|w| w.trim_end_matches(',') == label)?;
                words.get(i.checked_sub(1)?)?.parse().ok()
            })
            .unwrap_or(f64::NAN)
    }
}

/// The bench's split in the strobing recordings (CPU time, so instructions under -icount).
const STROBE_SPLIT: [(&str, f64); 3] = [
    ("int_divider_stalls", 50.0),
    ("fp_divider_stalls", 100.0 / 3.0),
    ("double_to_int", 100.0 / 6.0),
];

/// The three strobing modes on the altperiod lab machine, same workload and guest time:
/// the kernel's alternating periods (at the same period, and at decimation's window rate),
/// in-agent decimation and the fixed 300-cycle window.
/// File bytes, worst %I error against the known split, agent CPU, throttling, report time.
fn strobing(a: &Args, s: &mut Summary) {
    let k = crate::lab::Kernel::Altperiod;
    let was_up = crate::lab::is_up(k);
    if !s.step("lab up aarch64 --kernel altperiod", || {
        crate::lab::up(k, None)
    }) {
        return;
    }
    let dir = target_dir().join("bench");
    let labperf = target_dir().join("release/labperf");
    let secs = a.strobe_seconds.to_string();
    let mut runs: Vec<StrobeRun> = Vec::new();
    s.step("strobing: kernel, decimated and fixed recordings of the same run", || {
        let sh = Shell::new()?;
        let ssh = crate::lab::ssh_args(k)?;
        let bench = agents_dir("aarch64-unknown-linux-musl").join("labperf-bench");
        let upload = "cat > /root/labperf-bench.tmp && chmod +x /root/labperf-bench.tmp && mv -f /root/labperf-bench.tmp /root/labperf-bench";
        cmd!(sh, "ssh {ssh...} {upload}").stdin(std::fs::read(&bench)?).run()?;
        let lab = k.dir();
        let (key, kh) = (lab.join("id_ed25519"), lab.join("known_hosts"));
        let port = std::fs::read_to_string(lab.join("port"))?.trim().to_string();
        let host = format!("root@127.0.0.1:{port}");
        // The kernel mode twice: at the same period, and at a period giving about as many
        // windows as decimation keeps (a throttled sampler yields ~1 window per 4 ms tick).
        for (label, mode, period) in [("kernel", "kernel", "25000"), ("kernel-c750000", "kernel", "750000"), ("decimate", "decimate", "25000"), ("fixed", "fixed", "25000")] {
            let out = dir.join(format!("strobe-{label}.lpr"));
            let json = cmd!(sh, "{labperf} record --host {host} --identity {key} --known-hosts {kh} --accept-new-host-key --metrics --strobe {mode} -c {period} --format json --top 0 -o {out} -- /root/labperf-bench --duration {secs} --classes int_divider_stalls=3,fp_divider_stalls=2,double_to_int=1").read()?;
            let info = cmd!(sh, "{labperf} info {out}").read()?;
            runs.push(StrobeRun { label, bytes: std::fs::metadata(&out)?.len(), json, info });
        }
        Ok(runs.iter().map(|r| format!("{} {} B", r.label, r.bytes)).collect::<Vec<_>>().join(", "))
    });
    if runs.len() == 4 {
        s.step("strobing: bytes, %I error, agent CPU, throttling, report time (targets: decimated 1/20 of fixed, 2 points, 20x)", || {
            let sh = Shell::new()?;
            let fixed = &runs[3];
            let mut lines = Vec::new();
            let mut misses = Vec::new();
            for r in &runs {
                let worst = STROBE_SPLIT.iter().map(|(f, w)| (r.pct(f) - w).abs()).fold(0.0, f64::max);
                let f = dir.join(format!("strobe-{}.lpr", r.label));
                let t = median_secs(a.reps, || {
                    cmd!(sh, "{labperf} report {f}").quiet().ignore_stdout().ignore_stderr().run()?;
                    Ok(())
                })?;
                let cpu = r.info_number("agent cost:", "s");
                let samples = r.info_number("totals:", "samples");
                let throttled = r.info_number("totals:", "throttled");
                let pcts: Vec<String> = STROBE_SPLIT.iter().map(|(f, _)| format!("{:.2}", r.pct(f))).collect();
                let windows = r.windows();
                let line = format!(
                    "{:<14} {:>9} B (1/{:.1} of fixed, {:.1} B/window), {windows:.0} windows, %I {} (worst error {worst:.2} points), agent CPU {cpu:.3} s ({:.1} us/window), {samples:.0} samples, {throttled:.0} throttles, report {:.1} ms",
                    r.label,
                    r.bytes,
                    fixed.bytes as f64 / r.bytes as f64,
                    r.bytes as f64 / windows,
                    pcts.join("/"),
                    cpu * 1e6 / windows,
                    t * 1e3
                );
                println!("BENCH strobing: {line}");
                if r.label == "decimate" {
                    if r.bytes * 20 > fixed.bytes {
                        misses.push("decimated file over 1/20 of fixed");
                    }
                    if worst >= 2.0 {
                        misses.push("decimated %I error 2 points or more");
                    }
                }
                if r.label.starts_with("kernel") && worst >= 2.0 {
                    misses.push("kernel-mode %I error 2 points or more");
                }
                lines.push((r.label, t, line));
            }
            let speed = lines[3].1 / lines[2].1;
            println!("BENCH strobing: decimated report {speed:.1}x faster than fixed");
            if speed < 20.0 {
                misses.push("decimated report under 20x faster than fixed");
            }
            if !misses.is_empty() {
                bail!("a target is missed: {}", misses.join("; "));
            }
            Ok(format!("decimated report {speed:.1}x faster than fixed"))
        });
    }
    if !was_up {
        s.step("lab down --kernel altperiod", || crate::lab::down(k));
    }
}
