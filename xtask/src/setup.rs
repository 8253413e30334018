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
            "not root: install them with `sudo apt-get install {}`",
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

/// Installs the Debian packages whose commands are missing; `(command, package)` pairs.
fn packages(sh: &Shell, wanted: &[(&str, &str)]) -> anyhow::Result<String> {
    let missing: Vec<&str> = wanted
        .iter()
        .filter(|(c, _)| !have(sh, c))
        .map(|(_, p)| *p)
        .collect();
    if missing.is_empty() {
        return Ok(format!(
            "{} present",
            wanted
                .iter()
                .map(|(c, _)| *c)
                .collect::<Vec<_>>()
                .join(", ")
        ));
    }
    eprintln!("installing {}", missing.join(" "));
    apt(sh, &missing)?;
    Ok(format!("installed {}", missing.join(" ")))
}

pub fn run(a: &Args, s: &mut Summary) {
    let sh = Shell::new().expect("a shell");
    s.step("setup: rustup targets", || {
        let have = cmd!(sh, "rustup target list --installed")
            .read()
            .context("rustup is missing: install Rust with rustup (https://rustup.rs)")?;
        let mut added = Vec::new();
        for want in ["x86_64-unknown-linux-musl", "aarch64-unknown-linux-musl"] {
            if !have.lines().any(|l| l.trim() == want) {
                eprintln!("installing rustup target {want}");
                cmd!(sh, "rustup target add {want}")
                    .run()
                    .with_context(|| format!("run `rustup target add {want}` by hand"))?;
                added.push(want);
            }
        }
        Ok(if added.is_empty() {
            "x86_64 and aarch64 musl present".into()
        } else {
            format!("added {}", added.join(", "))
        })
    });
    s.step("setup: cross compiler, qemu-user, file, sshd", || {
        packages(
            &sh,
            &[
                ("gcc", "gcc"),
                ("alpha-linux-gnu-gcc", "gcc-alpha-linux-gnu"),
                ("qemu-alpha", "qemu-user"),
                ("qemu-aarch64", "qemu-user"),
                ("file", "file"),
                ("setpriv", "util-linux"),
            ],
        )
    });
    s.step("setup: binfmt_misc runs Alpha binaries (qemu-alpha)", || {
        let conf = std::path::Path::new("/usr/lib/binfmt.d/qemu-alpha.conf");
        let mut did = Vec::new();
        if !conf.exists() {
            apt(&sh, &["qemu-user-binfmt"])?;
            did.push("installed qemu-user-binfmt");
        }
        let dir = std::path::Path::new("/proc/sys/fs/binfmt_misc");
        if dir.join("qemu-alpha").exists() {
            did.push("qemu-alpha registered");
            return Ok(did.join(", "));
        }
        if !dir.join("register").exists() {
            cmd!(sh, "mount -t binfmt_misc binfmt_misc {dir}")
                .run()
                .context("cannot mount binfmt_misc: run `sudo mount -t binfmt_misc binfmt_misc /proc/sys/fs/binfmt_misc`")?;
        }
        std::fs::write(dir.join("register"), std::fs::read(conf)?).context(
            "cannot register qemu-alpha: run `sudo systemctl restart systemd-binfmt` (or as root: cat /usr/lib/binfmt.d/qemu-alpha.conf > /proc/sys/fs/binfmt_misc/register)",
        )?;
        did.push("registered qemu-alpha");
        Ok(did.join(", "))
    });
    if a.perf {
        s.step("setup: linux-perf", || {
            packages(&sh, &[("perf", "linux-perf")])
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
