//! `cargo xtask dist`: labperf plus every agent in one relocatable tree and tarball.
//!
//! Layout: `bin/labperf` and `lib/labperf/agents/<triple>/labperf-{agent,bench}`; labperf
//! finds an agent for a target's architecture at run time under `../lib/labperf/agents`.

use crate::util::{agents_dir, root, target_dir, Summary};
use anyhow::Context;
use xshell::{cmd, Shell};

#[derive(clap::Args)]
pub struct Args {}

pub fn run(_a: &Args, s: &mut Summary) {
    crate::build_agents::run(
        &crate::build_agents::Args {
            target: "all".into(),
            release: true,
        },
        s,
    );
    if s.failed() {
        return;
    }
    s.step("dist", || {
        let sh = Shell::new()?;
        sh.change_dir(root());
        cmd!(sh, "cargo build --release -p labperf").run()?;
        let name = format!(
            "labperf-{}-{}-linux",
            env!("CARGO_PKG_VERSION"),
            std::env::consts::ARCH
        );
        let top = target_dir().join("dist");
        let tree = top.join(&name);
        let _ = std::fs::remove_dir_all(&tree);
        std::fs::create_dir_all(tree.join("bin"))?;
        std::fs::copy(
            target_dir().join("release/labperf"),
            tree.join("bin/labperf"),
        )?;
        for triple in [
            "x86_64-unknown-linux-musl",
            "aarch64-unknown-linux-musl",
            crate::build_agents::ALPHA,
        ] {
            let to = tree.join("lib/labperf/agents").join(triple);
            std::fs::create_dir_all(&to)?;
            for b in ["labperf-agent", "labperf-bench"] {
                std::fs::copy(agents_dir(triple).join(b), to.join(b))
                    .with_context(|| format!("{triple}/{b} is not built"))?;
            }
        }
        let tarball = top.join(format!("{name}.tar.gz"));
        cmd!(sh, "tar -C {top} -czf {tarball} {name}").run()?;
        let listing = cmd!(sh, "{tree}/bin/labperf agents --check")
            .read()
            .context("the packed agents do not check out")?;
        println!("{listing}");
        Ok(format!(
            "{} ({} KiB)",
            tarball.display(),
            std::fs::metadata(&tarball)?.len() / 1024
        ))
    });
}
