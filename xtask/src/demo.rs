//! `cargo xtask demo [--lab]`: builds the agent and bench and the release labperf, and
//! profiles labperf-bench on this machine, or (`--lab`) on the emulated Arm lab machine by
//! strobing, the whole lab flow in one command. Its setup ([`crate::setup::Need::Demo`]) is
//! the musl target and what labperf's build links with, each only when missing; `--lab`
//! has [`crate::setup::Need::DemoLab`]: demo's, the lab's and the aarch64 musl target.

use crate::lab::Kernel;
use crate::util::{agents_dir, host_musl, root, target_dir, Summary};
use anyhow::Context;
use xshell::{cmd, Shell};

#[derive(clap::Args)]
pub struct Args {
    /// Seconds the bench runs [default: 3; 1 with --lab, whose emulated CPU runs the bench
    /// about 30 times slower than this one].
    #[arg(long)]
    pub duration: Option<String>,
    /// Profile the bench on the emulated Arm lab machine instead: boot it (`lab up`), deploy
    /// the aarch64 agent and bench over SSH, record per-function metrics by strobing
    /// (`record --host --metrics`), fetch and report; the machine is stopped again if the
    /// demo booted it.
    #[arg(long)]
    pub lab: bool,
}

pub fn run(a: &Args, s: &mut Summary) {
    if a.lab {
        lab(a, s);
        return;
    }
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
        let d = a.duration.as_deref().unwrap_or("3");
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

/// `demo --lab`: the aarch64 agent and bench, the release labperf, the lab machine up, one
/// `labperf record --host … --metrics` of the bench there.
fn lab(a: &Args, s: &mut Summary) {
    const ARM: &str = "aarch64-unknown-linux-musl";
    let k = Kernel::Debian;
    let was_up = crate::lab::is_up(k);
    // The machine boots while the agent and labperf build.
    let boot = std::thread::spawn(move || {
        let t = std::time::Instant::now();
        (crate::lab::up(k, None), t.elapsed().as_secs_f64())
    });
    let built = s.step(&format!("build agent and bench {ARM}"), || {
        crate::build_agents::build_with(ARM, false)
    }) && s.step("build labperf (release)", || {
        let sh = Shell::new()?;
        sh.change_dir(root());
        cmd!(sh, "cargo build --release -p labperf").run()?;
        Ok(String::new())
    });
    let up = match boot.join() {
        Ok((r, secs)) => s.record("lab up aarch64", r, secs),
        Err(_) => s.record(
            "lab up aarch64",
            Err(anyhow::anyhow!(
                "the thread booting the lab machine panicked"
            )),
            0.0,
        ),
    };
    if built && up {
        s.step(
            "profile labperf-bench on the lab machine (strobing)",
            || record_on_lab(k, a.duration.as_deref().unwrap_or("1")),
        );
    }
    if up && !was_up {
        s.step("lab down aarch64", || crate::lab::down(k));
    }
}

/// Pushes the bench with the recording, records per-function metrics of it there and lets
/// labperf print the report.
fn record_on_lab(k: Kernel, secs: &str) -> anyhow::Result<String> {
    let sh = Shell::new()?;
    let d = k.dir();
    let port = std::fs::read_to_string(d.join("port"))?;
    let host = format!("root@127.0.0.1:{}", port.trim());
    let (key, known) = (d.join("id_ed25519"), d.join("known_hosts"));
    let bench = agents_dir("aarch64-unknown-linux-musl").join("labperf-bench");
    let labperf = target_dir().join("release/labperf");
    let out = target_dir().join("demo-lab.lpr");
    cmd!(
        sh,
        "{labperf} record --host {host} --identity {key} --known-hosts {known} --accept-new-host-key --metrics --push {bench} -o {out} -- labperf-bench --duration {secs}"
    )
    .env("LABPERF_AGENTS_DIR", target_dir().join("agents"))
    .run()
    .context("the lab recording failed (see above)")?;
    Ok(format!(
        "the per-function metrics are above; the file is {}",
        out.display()
    ))
}
