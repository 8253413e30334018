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
    let labs = boot_labs();
    let host = build_labperf();
    crate::build_agents::build_steps(
        &crate::build_agents::Args {
            target: "all".into(),
            release: true,
            ..Default::default()
        },
        s,
    );
    let (r, secs) = host.join().unwrap_or_else(|_| {
        (
            Err(anyhow::anyhow!("the thread building labperf panicked")),
            0.0,
        )
    });
    s.record("build labperf (beside the agents)", r, secs);
    s.step(
        "verify agents (object, file) and sizes",
        crate::build_agents::verify,
    );
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
            for (lab, was_up, r, secs) in ups {
                let step = format!("lab up {} (for the lab tests)", lab.name());
                if s.record(&step, r, secs) && !was_up {
                    booted.push(lab);
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
        let _e9 = sh.push_env("LABPERF_BENCH_GNU", dir.join("labperf-bench-gnu"));
        let _e3 = sh.push_env("LABPERF_LABPERF", target_dir().join("debug/labperf"));
        let _e4 = sh.push_env("LABPERF_AGENTS_DIR", target_dir().join("agents"));
        let _e5 = sh.push_env("LABPERF_LAB_DIR", Kernel::Debian.dir());
        let _e6 = sh.push_env("LABPERF_ALTPERIOD_LAB_DIR", Kernel::Altperiod.dir());
        let _e8 = sh.push_env("LABPERF_ALPHA_LAB_DIR", crate::lab::alpha::dir());
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
    for lab in booted {
        s.step(&format!("lab down {}", lab.name()), || match lab {
            Lab::Arm(k) => crate::lab::down(k),
            Lab::Alpha => crate::lab::alpha::down(),
        });
    }
}

/// A lab machine the tests boot.
enum Lab {
    Arm(Kernel),
    Alpha,
}

impl Lab {
    fn name(&self) -> String {
        match self {
            Lab::Arm(k) => format!("aarch64 --kernel {}", k.name()),
            Lab::Alpha => "alpha".into(),
        }
    }
}

/// A lab machine booted: the machine, whether it was up before, the outcome, seconds.
type Up = (Lab, bool, anyhow::Result<String>, f64);

/// The lab machines (the Arm one with Debian's kernel and with the altperiod kernel, the
/// Alpha one; their kernels from the per-user cache or built on first use) boot while the
/// agents, labperf and clippy build: a boot is mostly one qemu thread waiting on its guest.
fn boot_labs() -> std::thread::JoinHandle<Vec<Up>> {
    std::thread::spawn(|| {
        let mut ups: Vec<Up> = Vec::new();
        for k in [Kernel::Debian, Kernel::Altperiod] {
            let was_up = crate::lab::is_up(k);
            let t = std::time::Instant::now();
            let r = crate::lab::up(k, None);
            ups.push((Lab::Arm(k), was_up, r, t.elapsed().as_secs_f64()));
        }
        let was_up = crate::lab::alpha::is_up();
        let t = std::time::Instant::now();
        let r = crate::lab::alpha::up(None);
        ups.push((Lab::Alpha, was_up, r, t.elapsed().as_secs_f64()));
        ups
    })
}

/// The debug `labperf`, built beside the agents (they build in a target directory of their
/// own): their fat-LTO links keep one core busy and leave the other free. The outcome, seconds.
fn build_labperf() -> std::thread::JoinHandle<(anyhow::Result<String>, f64)> {
    std::thread::spawn(|| {
        let t = std::time::Instant::now();
        let r = (|| {
            let sh = Shell::new()?;
            sh.change_dir(root());
            cmd!(sh, "cargo build --quiet -p labperf").run()?;
            anyhow::Ok(String::new())
        })();
        (r, t.elapsed().as_secs_f64())
    })
}
