//! `cargo xtask test`: builds the agents and runs every test (nextest `ci` profile when available).

use crate::util::{agents_dir, host_musl, root, target_dir, Summary};
use xshell::{cmd, Shell};

#[derive(clap::Args)]
pub struct Args {
    /// Extra arguments for the test runner (e.g. a filter).
    pub rest: Vec<String>,
}

pub fn run(a: &Args, s: &mut Summary) {
    let triple = host_musl();
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
    let was_up = crate::lab::is_up();
    let lab_up = s.step("lab up aarch64 (for the lab tests)", || {
        crate::lab::up(10022)
    });
    let dir = agents_dir(&triple);
    let rest = &a.rest;
    s.step("tests", || {
        let sh = Shell::new()?;
        sh.change_dir(root());
        let _e1 = sh.push_env("LABPERF_AGENT", dir.join("labperf-agent"));
        let _e2 = sh.push_env("LABPERF_BENCH", dir.join("labperf-bench"));
        let _e3 = sh.push_env("LABPERF_LABPERF", target_dir().join("debug/labperf"));
        let _e4 = sh.push_env("LABPERF_AGENTS_DIR", target_dir().join("agents"));
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
    if lab_up && !was_up {
        s.step("lab down", crate::lab::down);
    }
}
