//! `cargo xtask build-agents`: static musl agents and labperf-bench into target/agents/<triple>/.

use crate::util::{agents_dir, target_dir, Summary};
use anyhow::{bail, Context};
use xshell::{cmd, Shell};

#[derive(clap::Args, Default)]
pub struct Args {
    /// Which target: this machine's architecture (default), x86_64, or all.
    #[arg(long, default_value = "host")]
    pub target: String,
    /// Accepted for symmetry: agents are always built with the release profile.
    #[arg(long)]
    pub release: bool,
}

/// Builds one musl triple; returns the agent's size.
pub fn build(triple: &str) -> anyhow::Result<String> {
    let sh = Shell::new()?;
    sh.change_dir(crate::util::root());
    cmd!(
        sh,
        "cargo build --release --target {triple} -p labperf-agent -p labperf-bench"
    )
    .run()
    .with_context(|| {
        format!("the {triple} build failed; `cargo xtask setup` installs the target")
    })?;
    let out = agents_dir(triple);
    std::fs::create_dir_all(&out)?;
    let mut sizes = Vec::new();
    for b in ["labperf-agent", "labperf-bench"] {
        let src = target_dir().join(triple).join("release").join(b);
        let dst = out.join(b);
        // Copy then rename: a copy of the old binary that is still running stays
        // valid, and the copy never fails with ETXTBSY.
        let tmp = out.join(format!(".{b}.tmp"));
        std::fs::copy(&src, &tmp)
            .with_context(|| format!("cannot copy {} to {}", src.display(), tmp.display()))?;
        std::fs::rename(&tmp, &dst)
            .with_context(|| format!("cannot rename {} to {}", tmp.display(), dst.display()))?;
        let elf = std::fs::read(&dst)?;
        if elf.get(..4) != Some(b"\x7fELF") {
            bail!("{} is not an ELF file", dst.display());
        }
        sizes.push(format!("{b} {} KiB", elf.len() / 1024));
    }
    Ok(format!("{} ({})", out.display(), sizes.join(", ")))
}

/// Builds the agents for `triple` and the release `labperf`, as steps of `s`;
/// returns whether both succeeded.
pub fn build_all_release(triple: &str, s: &mut Summary) -> bool {
    s.step("build agents", || build(triple))
        && s.step("build labperf (release)", || {
            let sh = Shell::new()?;
            sh.change_dir(crate::util::root());
            cmd!(sh, "cargo build --release -p labperf").run()?;
            Ok(String::new())
        })
}

pub fn run(a: &Args, s: &mut Summary) {
    let host = crate::util::host_musl();
    let triples: Vec<String> = match a.target.as_str() {
        "host" => vec![host],
        "x86_64" | "all" => vec!["x86_64-unknown-linux-musl".into()],
        other => {
            s.step(&format!("build-agents {other}"), || bail!("target '{other}' is not built yet: this xtask builds x86_64 (cross targets come with the cross-build work)"));
            return;
        }
    };
    for t in triples {
        s.step(&format!("build-agents {t}"), || build(&t));
    }
}
