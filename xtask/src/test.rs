//! `cargo xtask test`: builds the agents and runs every test (nextest `ci` profile when available).

use crate::lab::Kernel;
use crate::util::{agents_dir, host_musl, root, target_dir, Summary};
use xshell::{cmd, Shell};

#[derive(clap::Args)]
pub struct Args {
    /// Extra arguments for the test runner (e.g. a filter).
    pub rest: Vec<String>,
}

pub fn run(a: &Args, s: &mut Summary) {
    let triple = host_musl();
    // Both lab machines (Debian's kernel, and the altperiod kernel, from the per-user cache
    // or built on first use) boot while the agents, labperf and clippy build: a boot is
    // mostly one qemu thread waiting on its guest.
    let labs = std::thread::spawn(|| {
        [Kernel::Debian, Kernel::Altperiod].map(|k| {
            let was_up = crate::lab::is_up(k);
            let t = std::time::Instant::now();
            let r = crate::lab::up(k, None);
            (k, was_up, r, t.elapsed().as_secs_f64())
        })
    });
    crate::build_agents::run(
        &crate::build_agents::Args {
            target: "all".into(),
            release: true,
        },
        s,
    );
    s.step("build labperf", || {
        let sh = Shell::new()?;
        sh.change_dir(root());
        cmd!(sh, "cargo build -p labperf").run()?;
        Ok(String::new())
    });
    s.step("cargo fmt --check", || {
        let sh = Shell::new()?;
        sh.change_dir(root());
        cmd!(sh, "cargo fmt --all -- --check").run()?;
        Ok(String::new())
    });
    s.step("cargo clippy -D warnings", || {
        let sh = Shell::new()?;
        sh.change_dir(root());
        cmd!(
            sh,
            "cargo clippy --workspace --all-targets --quiet -- -D warnings"
        )
        .run()?;
        Ok(String::new())
    });
    let mut booted = Vec::new();
    match labs.join() {
        Ok(ups) => {
            for (k, was_up, r, secs) in ups {
                let step = format!("lab up aarch64 --kernel {} (for the lab tests)", k.name());
                if s.record(&step, r, secs) && !was_up {
                    booted.push(k);
                }
            }
        }
        Err(_) => {
            s.record(
                "lab up aarch64 (for the lab tests)",
                Err(anyhow::anyhow!(
                    "the thread booting the lab machines panicked"
                )),
                0.0,
            );
        }
    }
    let dir = agents_dir(&triple);
    let rest = &a.rest;
    s.step("tests", || {
        let sh = Shell::new()?;
        sh.change_dir(root());
        let _e1 = sh.push_env("LABPERF_AGENT", dir.join("labperf-agent"));
        let _e2 = sh.push_env("LABPERF_BENCH", dir.join("labperf-bench"));
        let _e7 = sh.push_env("LABPERF_BENCH_NOFP", dir.join("labperf-bench-nofp"));
        let _e3 = sh.push_env("LABPERF_LABPERF", target_dir().join("debug/labperf"));
        let _e4 = sh.push_env("LABPERF_AGENTS_DIR", target_dir().join("agents"));
        let _e5 = sh.push_env("LABPERF_LAB_DIR", Kernel::Debian.dir());
        let _e6 = sh.push_env("LABPERF_ALTPERIOD_LAB_DIR", Kernel::Altperiod.dir());
        if cmd!(sh, "cargo nextest --version")
            .quiet()
            .ignore_stdout()
            .ignore_stderr()
            .run()
            .is_ok()
        {
            // --run-ignored all: the lab tests are ignored by plain `cargo test`.
            cmd!(
                sh,
                "cargo nextest run --workspace --profile ci --run-ignored all {rest...}"
            )
            .run()?;
            // nextest does not run doctests.
            cmd!(sh, "cargo test --workspace --doc").run()?;
        } else {
            cmd!(sh, "cargo test --workspace {rest...} -- --include-ignored").run()?;
        }
        Ok(String::new())
    });
    for k in booted {
        s.step(&format!("lab down --kernel {}", k.name()), || {
            crate::lab::down(k)
        });
    }
}
