//! `cargo xtask build-agents`: static agents and labperf-bench into target/agents/<triple>/:
//! Rust + musl for x86_64 and aarch64, freestanding C for Alpha (and for x86_64, to test it here).

use crate::util::{agents_dir, root, target_dir, Summary};
use anyhow::{bail, Context};
use xshell::{cmd, Shell};

#[derive(clap::Args, Default)]
pub struct Args {
    /// Which target: x86_64, aarch64, alpha, or all (the default).
    #[arg(long, default_value = "all")]
    pub target: String,
    /// Accepted for symmetry: agents are always built with the `agent` profile (release,
    /// with panic = "abort").
    #[arg(long)]
    pub release: bool,
    /// Write the size table into docs/measurements.md (between `<!-- agent-sizes -->` and
    /// `<!-- /agent-sizes -->`), from the sizes just measured: the figures there are this
    /// command's output, never typed (the flag keeps its old name).
    #[arg(long)]
    pub readme: bool,
}

/// The C agent's directory name for its x86_64 build (a test vehicle for the Alpha agent's logic).
pub const C_X86_64: &str = "x86_64-unknown-linux-none";
pub const ALPHA: &str = "alpha-unknown-linux-gnu";

/// Copies a built binary into place: copy then rename, so a copy of the old binary
/// that is still running stays valid and the copy never fails with ETXTBSY.
fn install(src: &std::path::Path, dst_dir: &std::path::Path, name: &str) -> anyhow::Result<()> {
    std::fs::create_dir_all(dst_dir)?;
    let tmp = dst_dir.join(format!(".{name}.tmp"));
    std::fs::copy(src, &tmp)
        .with_context(|| format!("cannot copy {} to {}", src.display(), tmp.display()))?;
    std::fs::rename(&tmp, dst_dir.join(name))
        .with_context(|| format!("cannot rename {} into {}", tmp.display(), dst_dir.display()))?;
    Ok(())
}

/// The cargo profile of the agents and the bench: the release profile with panic =
/// "abort" (Cargo.toml), so the host's release profile can unwind.
pub const PROFILE: &str = "agent";

/// Cargo's target directory for the agents and the bench: one of their own, so that
/// `cargo xtask test` builds the debug `labperf` in `target/` at the same time (cargo locks
/// a target directory for one build at a time; the agents' fat-LTO links leave a core idle).
pub fn build_dir() -> std::path::PathBuf {
    target_dir().join("agent-build")
}

/// Builds the Rust agent and bench for a musl triple, and the bench without frame pointers.
pub fn build(triple: &str) -> anyhow::Result<String> {
    build_with(triple, true)
}

/// Builds the Rust agent and bench for a musl triple; `nofp`: also the bench without frame
/// pointers (`labperf-bench-nofp`, a second build of it), which the tests and bench use,
/// and on this machine's architecture the bench built for glibc (`labperf-bench-gnu`).
pub fn build_with(triple: &str, nofp: bool) -> anyhow::Result<String> {
    let sh = Shell::new()?;
    sh.change_dir(root());
    let dir = build_dir();
    cmd!(
        sh,
        "cargo build --profile {PROFILE} --target {triple} --target-dir {dir} -p labperf-agent"
    )
    .run()
    .with_context(|| {
        format!("the {triple} build failed; `cargo xtask setup` installs the target")
    })?;
    // The bench keeps frame pointers in its own code, so `-g` (fp) walks its call tree
    // (`--calls`); the agent, size-bound, does not.
    cmd!(
        sh,
        "cargo rustc --profile {PROFILE} --target {triple} --target-dir {dir} -p labperf-bench -- -C force-frame-pointers=yes"
    )
    .run()
    .with_context(|| {
        format!("the {triple} bench build failed; `cargo xtask setup` installs the target")
    })?;
    for b in ["labperf-agent", "labperf-bench"] {
        install(
            &dir.join(triple).join(PROFILE).join(b),
            &agents_dir(triple),
            b,
        )?;
    }
    if !nofp {
        return Ok(agents_dir(triple).display().to_string());
    }
    // The same bench without frame pointers, for `--call-graph dwarf` (frame pointers
    // cannot unwind it): in a target directory of its own, so neither build undoes the
    // other's.
    let nofp = build_dir().join("nofp");
    cmd!(
        sh,
        "cargo rustc --profile {PROFILE} --target {triple} --target-dir {nofp} -p labperf-bench -- -C force-frame-pointers=no"
    )
    .run()
    .with_context(|| format!("the {triple} bench build (no frame pointers) failed"))?;
    install(
        &nofp.join(triple).join(PROFILE).join("labperf-bench"),
        &agents_dir(triple),
        "labperf-bench-nofp",
    )?;
    // On this machine's architecture, the bench as Rust programs are usually built:
    // dynamically linked with glibc, whose system-call wrappers have CFI (musl's
    // cancellation points are assembly without it, and its C library keeps no frame
    // pointers): where a thread blocks, its stack runs through them (`--off-cpu`).
    if let Some(arch) = triple.strip_suffix("-unknown-linux-musl") {
        if arch == std::env::consts::ARCH {
            let gnu = format!("{arch}-unknown-linux-gnu");
            cmd!(
                sh,
                "cargo rustc --profile {PROFILE} --target {gnu} --target-dir {dir} -p labperf-bench -- -C force-frame-pointers=yes"
            )
            .run()
            .with_context(|| format!("the {gnu} bench build failed"))?;
            install(
                &dir.join(&gnu).join(PROFILE).join("labperf-bench"),
                &agents_dir(triple),
                "labperf-bench-gnu",
            )?;
        }
    }
    Ok(agents_dir(triple).display().to_string())
}

/// Builds the freestanding C agent and bench with `cc` for the directory `dir`.
pub fn build_c(cc: &str, arch_file: &str, dir: &str) -> anyhow::Result<String> {
    let sh = Shell::new()?;
    let src = root().join("agents/alpha");
    sh.change_dir(&src);
    let out = agents_dir(dir);
    std::fs::create_dir_all(&out)?;
    let flags = [
        "-static",
        "-nostdlib",
        "-ffreestanding",
        "-fno-stack-protector",
        "-fno-builtin",
        "-Wall",
        "-Wextra",
        "-Wno-unused-parameter",
        "-Werror",
        "-Wl,-z,max-page-size=0x2000",
    ];
    let pie: &[&str] = if arch_file.contains("x86_64") {
        &["-fno-pie", "-no-pie"]
    } else {
        &[]
    };
    // The agent unwinds nothing: no unwind tables, and no function nothing calls (the Alpha
    // build must fit its 64 KiB budget, whose text ends where the next 8 KiB page starts).
    let lean = [
        "-fno-asynchronous-unwind-tables",
        "-fno-unwind-tables",
        "-ffunction-sections",
        "-Wl,--gc-sections",
    ];
    let (agent, bench) = (
        out.join(".labperf-agent.tmp"),
        out.join(".labperf-bench.tmp"),
    );
    cmd!(
        sh,
        "{cc} {flags...} {pie...} {lean...} -s -Os -o {agent} {arch_file} lib.c writer.c agent.c -lgcc"
    )
    .run()
    .with_context(|| {
        format!("{cc} failed on the C agent; `cargo xtask setup` installs the cross compiler")
    })?;
    // The bench keeps its symbols: it is the workload that reports name by function; and
    // its frame pointers, so `-g` walks its stacks.
    cmd!(
        sh,
        "{cc} {flags...} {pie...} -O2 -fno-omit-frame-pointer -o {bench} {arch_file} lib.c bench.c -lgcc"
    )
    .run()
    .with_context(|| format!("{cc} failed on the C bench"))?;
    std::fs::rename(&agent, out.join("labperf-agent"))?;
    std::fs::rename(&bench, out.join("labperf-bench"))?;
    Ok(out.display().to_string())
}

/// Builds this machine's agent and bench (not the bench without frame pointers) and the
/// release `labperf`, as steps of `s`; returns whether both succeeded.
pub fn build_all_release(triple: &str, s: &mut Summary) -> bool {
    s.step(&format!("build agent and bench {triple}"), || {
        build_with(triple, false)
    }) && s.step("build labperf (release)", || {
        let sh = Shell::new()?;
        sh.change_dir(root());
        cmd!(sh, "cargo build --release -p labperf").run()?;
        Ok(String::new())
    })
}

/// Each agent's size budget in bytes, by its directory under `target/agents/`: what a lab
/// machine is sent in one round trip. The Rust agents 256 KiB (`no_std` since issue 28;
/// 512 KiB with `std`), the freestanding C agents 64 KiB.
pub const BUDGETS: &[(&str, u64)] = &[
    ("x86_64-unknown-linux-musl", 256 * 1024),
    ("aarch64-unknown-linux-musl", 256 * 1024),
    (ALPHA, 64 * 1024),
    (C_X86_64, 64 * 1024),
];

/// The size table of `agents` (directory, bytes) against [`BUDGETS`], and an error naming
/// every agent over its budget (or with none).
pub fn budget_table(agents: &[(String, u64)]) -> (String, Result<(), String>) {
    let mut table = format!(
        "{:<28} {:>9} {:>9} {:>9}\n",
        "agent", "bytes", "budget", "left"
    );
    let mut over = Vec::new();
    for (dir, n) in agents {
        match BUDGETS.iter().find(|(d, _)| d == dir) {
            Some(&(_, b)) => {
                let left = b as i64 - *n as i64;
                table += &format!("{dir:<28} {n:>9} {b:>9} {left:>9}\n");
                if left < 0 {
                    over.push(format!(
                        "{dir}/labperf-agent is {n} bytes, {} over its budget of {b}",
                        -left
                    ));
                }
            }
            None => {
                table += &format!("{dir:<28} {n:>9} {:>9} {:>9}\n", "none", "-");
                over.push(format!(
                    "{dir}/labperf-agent has no size budget (xtask/src/build_agents.rs BUDGETS)"
                ));
            }
        }
    }
    let r = if over.is_empty() {
        Ok(())
    } else {
        Err(over.join("; "))
    };
    (table, r)
}

/// Checks every built agent with `object` (through `labperf agents --check`) and `file`,
/// prints the size table, and fails when an agent is over its size budget ([`BUDGETS`]).
pub fn verify() -> anyhow::Result<String> {
    let sh = Shell::new()?;
    sh.change_dir(root());
    let dir = target_dir().join("agents");
    let table = cmd!(sh, "cargo run -q -p labperf -- agents --dir {dir} --check")
        .read()
        .context("an agent is not a static binary of its target (see above)")?;
    println!("{table}");
    let mut notes = Vec::new();
    for entry in std::fs::read_dir(&dir)?.flatten() {
        let p = entry.path().join("labperf-agent");
        if p.is_file() {
            let f = cmd!(sh, "file -b {p}")
                .read()
                .context("`file` is missing: `cargo xtask setup` installs it")?;
            if !f.contains("statically linked") && !f.contains("static-pie linked") {
                bail!("file(1) says {} is not static: {f}", p.display());
            }
            notes.push(format!(
                "{}: {}",
                entry.file_name().to_string_lossy(),
                f.split(',').take(2).collect::<Vec<_>>().join(",")
            ));
        }
    }
    notes.sort();
    let mut sizes = Vec::new();
    for entry in std::fs::read_dir(&dir)?.flatten() {
        let p = entry.path().join("labperf-agent");
        if p.is_file() {
            sizes.push((
                entry.file_name().to_string_lossy().into_owned(),
                std::fs::metadata(&p)?.len(),
            ));
        }
    }
    sizes.sort();
    let (table, within) = budget_table(&sizes);
    println!("{table}");
    within.map_err(|e| anyhow::anyhow!("over budget: {e}"))?;
    let md = budget_markdown(&sizes);
    std::fs::write(dir.join("sizes.md"), &md)?;
    Ok(notes.join("; "))
}

/// `--readme`: the size table `verify` wrote (target/agents/sizes.md) into
/// docs/measurements.md.
pub fn write_readme() -> anyhow::Result<String> {
    let md = std::fs::read_to_string(target_dir().join("agents/sizes.md"))
        .context("no size table: the agents were not verified")?;
    crate::util::write_block(crate::util::MEASUREMENTS, SIZES_BEGIN, SIZES_END, &md)?;
    Ok(format!(
        "{}'s agent size table written",
        crate::util::MEASUREMENTS
    ))
}

const SIZES_BEGIN: &str = "<!-- agent-sizes -->";
const SIZES_END: &str = "<!-- /agent-sizes -->";

/// Thousands separated by commas, as docs/measurements.md writes byte counts.
fn commas(n: i64) -> String {
    let d = n.unsigned_abs().to_string();
    let mut out = String::new();
    for (i, c) in d.chars().enumerate() {
        if i > 0 && (d.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    if n < 0 {
        out.insert(0, '-');
    }
    out
}

/// The size table (docs/measurements.md) of `agents` (directory, bytes) against [`BUDGETS`].
pub fn budget_markdown(agents: &[(String, u64)]) -> String {
    let mut t = String::from(
        "| agent (`target/agents/`) | bytes | KiB | budget | left |\n|---|---:|---:|---:|---:|\n",
    );
    for (dir, n) in agents {
        let budget = BUDGETS.iter().find(|(d, _)| d == dir).map(|&(_, b)| b);
        let (b, left) = match budget {
            Some(b) => (commas(b as i64), commas(b as i64 - *n as i64)),
            None => ("none".into(), "-".into()),
        };
        t += &format!(
            "| `{dir}` | {} | {:.1} | {b} | {left} |\n",
            commas(*n as i64),
            *n as f64 / 1024.0
        );
    }
    t
}

pub fn run(a: &Args, s: &mut Summary) {
    build_steps(a, s);
    s.step("verify agents (object, file) and sizes", verify);
    if a.readme {
        s.step(
            "write the size table into docs/measurements.md",
            write_readme,
        );
    }
}

/// The build steps of [`run`], without the verification (which builds the debug `labperf`).
pub fn build_steps(a: &Args, s: &mut Summary) {
    let want = |t: &str| a.target == "all" || a.target == t;
    if !["all", "x86_64", "aarch64", "alpha"].contains(&a.target.as_str()) {
        s.step("build-agents", || {
            bail!(
                "unknown target '{}': use x86_64, aarch64, alpha or all",
                a.target
            )
        });
        return;
    }
    if want("x86_64") {
        s.step("build-agents x86_64-unknown-linux-musl", || {
            build("x86_64-unknown-linux-musl")
        });
        s.step(&format!("build-agents {C_X86_64} (C)"), || {
            build_c("gcc", "arch_x86_64.c", C_X86_64)
        });
    }
    if want("aarch64") {
        s.step("build-agents aarch64-unknown-linux-musl", || {
            build("aarch64-unknown-linux-musl")
        });
    }
    if want("alpha") {
        s.step(&format!("build-agents {ALPHA} (C)"), || {
            build_c("alpha-linux-gnu-gcc", "arch_alpha.c", ALPHA)
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_agent_72_bytes_over_its_budget_fails_verify() {
        let sizes = [
            ("aarch64-unknown-linux-musl".into(), 188_120),
            ("x86_64-unknown-linux-musl".into(), 256 * 1024 + 72),
        ];
        let (table, r) = budget_table(&sizes);
        assert_eq!(
            r.unwrap_err(),
            "x86_64-unknown-linux-musl/labperf-agent is 262216 bytes, 72 over its budget of 262144"
        );
        assert!(
            table.contains("aarch64-unknown-linux-musl      188120    262144     74024\n"),
            "{table}"
        );
        assert!(
            table.contains("x86_64-unknown-linux-musl       262216    262144       -72\n"),
            "{table}"
        );
        assert_eq!(
            budget_markdown(&sizes),
            "| agent (`target/agents/`) | bytes | KiB | budget | left |\n|---|---:|---:|---:|---:|\n\
             | `aarch64-unknown-linux-musl` | 188,120 | 183.7 | 262,144 | 74,024 |\n\
             | `x86_64-unknown-linux-musl` | 262,216 | 256.1 | 262,144 | -72 |\n"
        );
        let (_, r) = budget_table(&[("x86_64-unknown-linux-musl".into(), 256 * 1024)]);
        assert_eq!(r, Ok(()));
        let (_, r) = budget_table(&[("riscv64-unknown-linux-musl".into(), 1)]);
        assert!(r.unwrap_err().contains("no size budget"));
    }
}
