//! `cargo xtask dist`: labperf plus every agent in one relocatable tree and tarball.
//!
//! Layout: `bin/labperf` and `lib/labperf/agents/<triple>/labperf-{agent,bench}`; labperf
//! finds an agent for a target's architecture at run time under `../lib/labperf/agents`.
//! `share/man/man1/labperf*.1` and the bash, zsh and fish completions under `share/` are
//! written by that labperf itself ([`docs`]).
//!
//! The released `labperf` is one static executable: built for this architecture's musl
//! target with the host's `static` feature (OpenSSL and zlib compiled from source into it,
//! mimalloc as its allocator), so that it runs on any Linux of its architecture whatever
//! shared libraries that machine has. The tarball is checked as a user would use it:
//! unpacked in an empty directory, with an empty environment, it records and reports.

use crate::util::{agents_dir, host_musl, root, target_dir, Summary};
use anyhow::{bail, Context};
use std::path::Path;
use xshell::{cmd, Shell};

pub mod docs;

#[derive(clap::Args)]
pub struct Args {}

pub fn run(_a: &Args, s: &mut Summary) {
    crate::build_agents::run(
        &crate::build_agents::Args {
            target: "all".into(),
            release: true,
            ..Default::default()
        },
        s,
    );
    if s.failed() {
        return;
    }
    let mut packed = None;
    s.step("dist", || {
        let (tarball, name) = pack()?;
        let size = std::fs::metadata(&tarball)?.len() / 1024;
        let notes = docs::notes(&name);
        packed = Some((tarball.clone(), name));
        Ok(format!("{} ({size} KiB); {}", tarball.display(), notes))
    });
    if let Some((tarball, name)) = packed {
        s.step("dist: unpacked in an empty directory, it records", || {
            try_unpacked(&tarball, &name)
        });
    }
}

/// Builds the static labperf, lays out the tree and packs it: (tarball, its top folder).
fn pack() -> anyhow::Result<(std::path::PathBuf, String)> {
    let sh = Shell::new()?;
    sh.change_dir(root());
    let triple = host_musl();
    cmd!(
        sh,
        "cargo build --release -p labperf --target {triple} --features static"
    )
    .run()?;
    let built = target_dir().join(&triple).join("release/labperf");
    if let Some(why) = not_static(&std::fs::read(&built)?) {
        bail!("{} is not a static executable: {why}", built.display());
    }
    let name = format!(
        "labperf-{}-{}-linux",
        env!("CARGO_PKG_VERSION"),
        std::env::consts::ARCH
    );
    let top = target_dir().join("dist");
    let tree = top.join(&name);
    let _ = std::fs::remove_dir_all(&tree);
    std::fs::create_dir_all(tree.join("bin"))?;
    std::fs::copy(&built, tree.join("bin/labperf"))?;
    docs::write(&tree.join("bin/labperf"), &tree)?;
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
    Ok((tarball, name))
}

/// Unpacks the tarball in a new empty directory and, with an empty environment (no
/// cargo, no HOME of ours, only /usr/bin:/bin on PATH), lists the agents, records this
/// machine's bench and reports it: the report must name the bench's functions.
fn try_unpacked(tarball: &Path, name: &str) -> anyhow::Result<String> {
    let sh = Shell::new()?;
    let dir = target_dir().join("dist/try");
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(dir.join("home"))?;
    sh.change_dir(&dir);
    cmd!(sh, "tar -xzf {tarball}").run()?;
    let top = dir.join(name);
    let labperf = top.join("bin/labperf");
    let bench = top
        .join("lib/labperf/agents")
        .join(host_musl())
        .join("labperf-bench");
    let home = dir.join("home");
    fn clean<'a>(c: xshell::Cmd<'a>, home: &Path) -> xshell::Cmd<'a> {
        c.env_clear().env("PATH", "/usr/bin:/bin").env("HOME", home)
    }
    let agents = clean(cmd!(sh, "{labperf} agents --check"), &home).read()?;
    clean(cmd!(
        sh,
        "{labperf} -q record -e cpu-clock -o try.lpr -- {bench} --duration 0.5 --classes int_divider_stalls=1,nops=1"
    ), &home)
    .run()?;
    let report = clean(cmd!(sh, "{labperf} report --format csv try.lpr"), &home).read()?;
    for f in ["int_divider_stalls", "nops"] {
        if !report.contains(f) {
            bail!("the unpacked labperf's report does not name {f}:\n{report}");
        }
    }
    let checked = agents.lines().filter(|l| l.contains(" yes ")).count();
    let manual = docs::check(&top, &home)?;
    // As root: in a root holding nothing but the unpacked tree (no C library, no shell),
    // the binary still starts (without /proc it cannot find its own path, so only this).
    let alone = if crate::util::is_root() {
        let inside = format!("/{name}/bin/labperf");
        cmd!(sh, "chroot {dir} {inside} --version").read()?;
        "; ran alone in a chroot of the tree"
    } else {
        ""
    };
    Ok(format!(
        "{checked} static agents; recorded and reported the bench; {manual}{alone}"
    ))
}

/// Why an ELF executable is not static (it asks for a program interpreter or names shared
/// libraries), or `None`. Reads the program headers of a 64-bit little-endian ELF.
fn not_static(elf: &[u8]) -> Option<String> {
    let u16_at = |o: usize| elf.get(o..o + 2).map(|b| u16::from_le_bytes([b[0], b[1]]));
    let u32_at = |o: usize| {
        elf.get(o..o + 4)
            .map(|b| u32::from_le_bytes(b.try_into().unwrap()))
    };
    let u64_at = |o: usize| {
        elf.get(o..o + 8)
            .map(|b| u64::from_le_bytes(b.try_into().unwrap()))
    };
    if elf.get(..6) != Some(b"\x7fELF\x02\x01") {
        return Some("not a 64-bit little-endian ELF file".into());
    }
    let (Some(phoff), Some(phentsize), Some(phnum)) = (u64_at(32), u16_at(54), u16_at(56)) else {
        return Some("its ELF header is cut".into());
    };
    for i in 0..phnum as usize {
        let at = phoff as usize + i * phentsize as usize;
        match u32_at(at) {
            // PT_INTERP: a dynamic loader runs it.
            Some(3) => return Some("it names a program interpreter (PT_INTERP)".into()),
            // PT_DYNAMIC of a static-pie has no DT_NEEDED; the interpreter is what counts.
            Some(_) => {}
            None => return Some("its program headers are cut".into()),
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::not_static;

    #[test]
    fn a_dynamic_executable_is_not_static_and_a_static_one_is() {
        // This test binary is linked dynamically against glibc.
        let me = std::fs::read(std::env::current_exe().unwrap()).unwrap();
        assert_eq!(
            not_static(&me).as_deref(),
            Some("it names a program interpreter (PT_INTERP)")
        );
        // A crafted static ELF: header only, one PT_LOAD.
        let mut elf = vec![0u8; 64 + 56];
        elf[..6].copy_from_slice(b"\x7fELF\x02\x01");
        elf[32..40].copy_from_slice(&64u64.to_le_bytes());
        elf[54..56].copy_from_slice(&56u16.to_le_bytes());
        elf[56..58].copy_from_slice(&1u16.to_le_bytes());
        elf[64..68].copy_from_slice(&1u32.to_le_bytes());
        assert_eq!(not_static(&elf), None);
        elf[64..68].copy_from_slice(&3u32.to_le_bytes());
        assert!(not_static(&elf).is_some());
        assert!(not_static(&elf[..70]).is_some());
    }
}
