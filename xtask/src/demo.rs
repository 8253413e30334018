//! `cargo xtask demo`: builds this machine's agent and bench and the release labperf, and
//! profiles labperf-bench on this machine. Its setup ([`crate::setup::Need::Demo`]) is the
//! musl target and what labperf's build links with, each only when missing.

use crate::util::{agents_dir, host_musl, target_dir, Summary};
use anyhow::Context;
use xshell::{cmd, Shell};

#[derive(clap::Args)]
pub struct Args {
    /// Seconds the bench runs.
    #[arg(long, default_value = "3")]
    pub duration: String,
}

pub fn run(a: &Args, s: &mut Summary) {
    let triple = host_musl();
    if !crate::build_agents::build_all_release(&triple, s) {
        return;
    }
    s.step("profile labperf-bench", || {
        let sh = Shell::new()?;
        let dir = agents_dir(&triple);
        let (agent, bench) = (dir.join("labperf-agent"), dir.join("labperf-bench"));
        let labperf = target_dir().join("release/labperf");
        let out = target_dir().join("demo.lpr");
        let d = &a.duration;
        cmd!(
            sh,
            "{labperf} record --local -o {out} -- {bench} --duration {d}"
        )
        .env("LABPERF_AGENT", &agent)
        .run()
        .context("the recording failed (see above)")?;
        Ok(format!(
            "the profile is above; the file is {}",
            out.display()
        ))
    });
}
