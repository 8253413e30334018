//! `cargo xtask fuzz`: the decoder-and-reports fuzz target (fuzz/) with cargo-fuzz on nightly,
//! for a number of executions (10 million by default) or seconds, on every core.

use crate::util::{root, Summary};
use anyhow::{bail, Context};
use xshell::{cmd, Shell};

#[derive(clap::Args)]
pub struct Args {
    /// Executions in all (split over the jobs).
    #[arg(long, default_value_t = 10_000_000)]
    pub runs: u64,
    /// Fuzz for this many seconds instead of a number of executions.
    #[arg(long)]
    pub seconds: Option<u64>,
    /// Fuzzing processes at once [default: one per CPU].
    #[arg(long)]
    pub jobs: Option<u64>,
}

/// What a fuzz run did: executions, seconds, and libFuzzer's closing line.
pub struct Outcome {
    pub runs: u64,
    pub seconds: u64,
}

/// Fuzzes for `runs` executions (or `seconds`) in `jobs` processes; fails on any crash.
pub fn fuzz(runs: u64, seconds: Option<u64>, jobs: u64) -> anyhow::Result<Outcome> {
    let sh = Shell::new()?;
    let dir = root().join("fuzz");
    sh.change_dir(&dir);
    for j in 0..jobs {
        let _ = std::fs::remove_file(dir.join(format!("fuzz-{j}.log")));
    }
    let limit = match seconds {
        Some(s) => format!("-max_total_time={s}"),
        None => format!("-runs={}", runs.div_ceil(jobs)),
    };
    let (j, w) = (format!("-jobs={jobs}"), format!("-workers={jobs}"));
    // No sanitizer: the code under test is safe Rust, and without ASan it runs about 7
    // times faster; overflow checks and debug assertions stay on (cargo-fuzz's default).
    let out = cmd!(
        sh,
        "cargo +nightly fuzz run -s none decode -- {limit} {j} {w}"
    )
    .ignore_status()
    .output()?;
    let mut total = Outcome {
        runs: 0,
        seconds: 0,
    };
    let mut failed = !out.status.success();
    for job in 0..jobs {
        let log = std::fs::read_to_string(dir.join(format!("fuzz-{job}.log")))
            .with_context(|| format!("fuzz job {job} wrote no log"))?;
        match log.lines().rev().find(|l| l.starts_with("Done ")) {
            Some(done) => {
                // "Done 5000000 runs in 812 second(s)"
                let w: Vec<&str> = done.split_whitespace().collect();
                total.runs += w.get(1).and_then(|n| n.parse().ok()).unwrap_or(0);
                let s = w.get(4).and_then(|n| n.parse().ok()).unwrap_or(0);
                total.seconds = total.seconds.max(s);
            }
            None => {
                failed = true;
                eprint!(
                    "{}",
                    log.lines()
                        .rev()
                        .take(30)
                        .collect::<Vec<_>>()
                        .into_iter()
                        .rev()
                        .map(|l| format!("{l}\n"))
                        .collect::<String>()
                );
            }
        }
    }
    if failed {
        bail!("the fuzzer found a failure (the log is above; the input is under fuzz/artifacts/decode/)");
    }
    Ok(total)
}

pub fn run(a: &Args, s: &mut Summary) {
    let jobs = a
        .jobs
        .unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get() as u64));
    s.step("fuzz the decoder and every report", || {
        let o = fuzz(a.runs, a.seconds, jobs)?;
        let line = format!(
            "{} executions in {} s on {jobs} jobs, no failure",
            o.runs, o.seconds
        );
        println!("BENCH fuzz: {line}");
        Ok(line)
    });
}
