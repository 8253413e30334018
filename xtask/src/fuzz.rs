//! `cargo xtask fuzz`: runs the decoder fuzz target (fuzz/) with cargo-fuzz on nightly.

use crate::util::{root, Summary};
use anyhow::Context;
use xshell::{cmd, Shell};

#[derive(clap::Args)]
pub struct Args {
    /// How long to fuzz, seconds.
    #[arg(long, default_value_t = 180)]
    pub seconds: u64,
}

/// Fuzzes for `seconds`; returns libFuzzer's closing line.
pub fn fuzz(seconds: u64) -> anyhow::Result<String> {
    let sh = Shell::new()?;
    sh.change_dir(root().join("fuzz"));
    let t = format!("-max_total_time={seconds}");
    let out = cmd!(sh, "cargo +nightly fuzz run decode -- {t}")
        .ignore_status()
        .output()?;
    let err = String::from_utf8_lossy(&out.stderr);
    eprint!(
        "{}",
        err.lines()
            .rev()
            .take(15)
            .collect::<Vec<_>>()
            .into_iter()
            .rev()
            .map(|l| format!("{l}\n"))
            .collect::<String>()
    );
    if !out.status.success() {
        anyhow::bail!("the fuzzer found a failure (artifact under fuzz/artifacts/decode/)");
    }
    let done = err
        .lines()
        .rev()
        .find(|l| l.starts_with("Done "))
        .context("libFuzzer printed no closing line")?;
    Ok(done.to_string())
}

pub fn run(a: &Args, s: &mut Summary) {
    s.step("fuzz decode", || fuzz(a.seconds));
}
