//! The Alpha lab machine's userland: Debian's busybox and dropbear, cross-built for Alpha
//! from Debian's source packages (`apt-get source`) and cached per user under the hash of
//! the packages' versions, the cross compiler, the cross C library and this file.

use super::super::cache;
use anyhow::{bail, Context};
use std::path::{Path, PathBuf};
use std::time::Instant;
use xshell::{cmd, Shell};

/// The C cross compiler's prefix.
const CROSS: &str = "alpha-linux-gnu-";

/// What the userland depends on: the source packages' versions, the cross compiler and
/// this file (the recipe).
fn inputs(sh: &Shell) -> anyhow::Result<Vec<u8>> {
    let versions = cmd!(sh, "apt-cache showsrc --only-source busybox dropbear")
        .read()
        .context("apt-cache showsrc failed")?;
    let versions: Vec<&str> = versions
        .lines()
        .filter(|l| l.starts_with("Package:") || l.starts_with("Version:"))
        .collect();
    if versions.is_empty() {
        bail!("apt knows no source package busybox or dropbear: add a deb-src entry (run `cargo xtask setup --for lab`)");
    }
    let gcc = format!("{CROSS}gcc");
    let gcc = cmd!(sh, "{gcc} --version").read()?;
    let format = "${Version}";
    let libc = cmd!(sh, "dpkg-query -W -f={format} libc6.1-dev-alpha-cross")
        .read()
        .context("libc6.1-dev-alpha-cross is not installed: run `cargo xtask setup --for lab`")?;
    let mut all = format!("{}\n{gcc}\n{libc}\n", versions.join("\n")).into_bytes();
    all.extend(include_bytes!("userland.rs"));
    Ok(all)
}

/// Busybox and dropbear for Alpha, static, from Debian's source packages: the cache entry
/// holding `busybox` and `dropbear`.
pub fn build(sh: &Shell) -> anyhow::Result<PathBuf> {
    let key = cache::key(sh, &inputs(sh)?)?;
    cache::publish(
        &format!("alpha-userland-{key}"),
        "dropbear",
        |build, staged| {
            let t = Instant::now();
            eprintln!(
                "lab alpha: building busybox and dropbear for Alpha (once per user; about 6 min)"
            );
            let _d = sh.push_dir(build);
            cmd!(sh, "apt-get source --download-only busybox dropbear")
            .run()
            .context("apt-get source failed: a deb-src entry is needed (`cargo xtask setup --for lab` adds one)")?;
            let mut sources = Vec::new();
            for e in std::fs::read_dir(build)?.flatten() {
                let n = e.file_name().to_string_lossy().into_owned();
                if n.ends_with(".dsc") {
                    sources.push(n);
                }
            }
            sources.sort();
            for dsc in &sources {
                cmd!(sh, "dpkg-source --no-check -x {dsc}")
                    .quiet()
                    .ignore_stdout()
                    .run()?;
            }
            let src = |prefix: &str| -> anyhow::Result<PathBuf> {
                std::fs::read_dir(build)?
                    .flatten()
                    .map(|e| e.path())
                    .find(|p| {
                        p.is_dir()
                            && p.file_name()
                                .is_some_and(|n| n.to_string_lossy().starts_with(prefix))
                    })
                    .with_context(|| format!("no {prefix} source unpacked"))
            };
            build_busybox(sh, &src("busybox-")?, staged)?;
            build_dropbear(sh, &src("dropbear-")?, staged)?;
            eprintln!(
                "lab alpha: userland built in {:.0} s",
                t.elapsed().as_secs_f64()
            );
            Ok(())
        },
    )
}

/// Debian's busybox-static configuration (all the applets in one program), cross-compiled
/// for Alpha, linked dynamically (see the module's note).
fn build_busybox(sh: &Shell, src: &Path, staged: &Path) -> anyhow::Result<()> {
    let _d = sh.push_dir(src);
    let config = std::fs::read_to_string(src.join("debian/config/pkg/static"))?;
    std::fs::write(
        src.join(".config"),
        config.replace("CONFIG_STATIC=y", "# CONFIG_STATIC is not set"),
    )?;
    let cross = format!("CROSS_COMPILE={CROSS}");
    cmd!(sh, "make -s {cross} oldconfig")
        .stdin("")
        .quiet()
        .ignore_stdout()
        .run()?;
    let jobs = "-j2";
    cmd!(sh, "make -s {cross} {jobs} busybox")
        .quiet()
        .run()
        .context("busybox did not build for Alpha")?;
    std::fs::copy(src.join("busybox"), staged.join("busybox"))?;
    Ok(())
}

/// Dropbear's server with its bundled libtomcrypt; no zlib, no login records, no syslog
/// (it logs to stderr), linked dynamically.
fn build_dropbear(sh: &Shell, src: &Path, staged: &Path) -> anyhow::Result<()> {
    let _d = sh.push_dir(src);
    let host = format!("--host={}", CROSS.trim_end_matches('-'));
    cmd!(sh, "sh ./configure {host} --disable-zlib --disable-lastlog --disable-utmp --disable-utmpx --disable-wtmp --disable-wtmpx --disable-pututline --disable-pututxline --disable-syslog --disable-harden")
        .quiet()
        .ignore_stdout()
        .run()
        .context("dropbear's configure failed for Alpha")?;
    // Keys only: no crypt() for passwords.
    std::fs::write(
        src.join("localoptions.h"),
        "#define DROPBEAR_SVR_PASSWORD_AUTH 0\n",
    )?;
    let jobs = "-j2";
    cmd!(sh, "make -s {jobs} PROGRAMS=dropbear")
        .quiet()
        .run()
        .context("dropbear did not build for Alpha")?;
    std::fs::copy(src.join("dropbear"), staged.join("dropbear"))?;
    Ok(())
}
