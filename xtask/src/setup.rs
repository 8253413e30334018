//! `cargo xtask setup`: installs missing rustup targets and Debian packages, idempotently.

use crate::util::{is_root, Summary};
use anyhow::{bail, Context};
use xshell::{cmd, Shell};

#[derive(clap::Args, Default)]
pub struct Args {
    /// Also install linux-perf (the benchmark's reference).
    #[arg(long)]
    pub perf: bool,
    /// Also install cargo-fuzz and the nightly toolchain it needs.
    #[arg(long)]
    pub fuzz: bool,
}

fn have(sh: &Shell, bin: &str) -> bool {
    cmd!(sh, "which {bin}")
        .quiet()
        .ignore_stdout()
        .ignore_stderr()
        .run()
        .is_ok()
}

fn apt(sh: &Shell, pkgs: &[&str]) -> anyhow::Result<()> {
    if !is_root() {
        bail!(
            "not root: install them yourself with `sudo apt-get install {}`",
            pkgs.join(" ")
        );
    }
    let _ = cmd!(sh, "apt-get update -qq").run();
    cmd!(sh, "apt-get install -y -qq {pkgs...}")
        .env("DEBIAN_FRONTEND", "noninteractive")
        .run()
        .with_context(|| {
            format!(
                "apt-get failed: run `apt-get install {}` by hand",
                pkgs.join(" ")
            )
        })
}

pub fn run(a: &Args, s: &mut Summary) {
    let sh = Shell::new().expect("a shell");
    s.step("setup: rustup targets", || {
        let have = cmd!(sh, "rustup target list --installed")
            .read()
            .context("rustup is missing: install Rust with rustup (https://rustup.rs)")?;
        let want = crate::util::host_musl();
        if have.lines().any(|l| l.trim() == want) {
            return Ok(format!("{want} present"));
        }
        eprintln!("installing rustup target {want}");
        cmd!(sh, "rustup target add {want}")
            .run()
            .with_context(|| format!("run `rustup target add {want}` by hand"))?;
        Ok(format!("{want} installed"))
    });
    if a.perf {
        s.step("setup: linux-perf", || {
            if have(&sh, "perf") {
                return Ok("perf present".into());
            }
            apt(&sh, &["linux-perf"])?;
            Ok("linux-perf installed".into())
        });
    }
    if a.fuzz {
        s.step("setup: cargo-fuzz", || {
            if cmd!(sh, "rustup toolchain list")
                .read()?
                .lines()
                .all(|l| !l.starts_with("nightly"))
            {
                cmd!(sh, "rustup toolchain install nightly --profile minimal")
                    .run()
                    .context("run `rustup toolchain install nightly` by hand")?;
            }
            if cmd!(sh, "cargo fuzz --version")
                .quiet()
                .ignore_stdout()
                .ignore_stderr()
                .run()
                .is_ok()
            {
                return Ok("cargo-fuzz present".into());
            }
            cmd!(sh, "cargo install --locked cargo-fuzz")
                .run()
                .context("run `cargo install cargo-fuzz` by hand")?;
            Ok("cargo-fuzz installed".into())
        });
    }
}
