//! `cargo xtask bless [views|golden]`: writes the goldens the tests only compare against,
//! through the tests crate's `labperf-bless` program (never a test): `views` rewrites
//! `tests/data/views/` as labperf renders today (review the diff), `golden` writes the
//! golden recordings of a new wire version (never rewriting an existing one).

use crate::util::{root, target_dir, Summary};
use anyhow::bail;
use xshell::{cmd, Shell};

#[derive(clap::Args)]
pub struct Args {
    /// What to write: `views`, `golden`, or both when none is named.
    pub what: Vec<String>,
}

pub fn run(a: &Args, s: &mut Summary) {
    let what: Vec<String> = if a.what.is_empty() {
        vec!["views".into(), "golden".into()]
    } else {
        a.what.clone()
    };
    if let Some(bad) = what.iter().find(|w| *w != "views" && *w != "golden") {
        s.step("bless", || {
            bail!("unknown golden kind '{bad}': use views or golden")
        });
        return;
    }
    let built = s.step("build labperf", || {
        let sh = Shell::new()?;
        sh.change_dir(root());
        cmd!(sh, "cargo build -q -p labperf").run()?;
        Ok(String::new())
    });
    // The C agent's golden is its x86_64 build replaying a ring.
    let agent = !what.iter().any(|w| w == "golden")
        || s.step(
            &format!("build-agents {} (C)", crate::build_agents::C_X86_64),
            || crate::build_agents::build_c("gcc", "arch_x86_64.c", crate::build_agents::C_X86_64),
        );
    if !(built && agent) {
        return;
    }
    s.step(&format!("bless {}", what.join(" ")), || {
        let sh = Shell::new()?;
        sh.change_dir(root());
        let _e1 = sh.push_env("LABPERF_LABPERF", target_dir().join("debug/labperf"));
        let _e2 = sh.push_env("LABPERF_AGENTS_DIR", target_dir().join("agents"));
        cmd!(
            sh,
            "cargo run -q -p labperf-tests --bin labperf-bless -- {what...}"
        )
        .run()?;
        Ok("review `git diff tests/data` before committing".into())
    });
}
