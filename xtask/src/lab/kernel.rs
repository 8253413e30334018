//! The altperiod lab kernel: Debian's `linux-source-6.1` plus `xtask/kernel/altperiod/`'s
//! patch and config, cross-built once and cached by the hash of all three.

use crate::util::{root, target_dir};
use anyhow::{bail, Context};
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};
use xshell::{cmd, Shell};

/// Where `cargo xtask setup` (package `linux-source-6.1`) puts the kernel source.
pub const SOURCE: &str = "/usr/src/linux-source-6.1.tar.xz";
const SOURCE_PACKAGE: &str = "linux-source-6.1";

fn material() -> PathBuf {
    root().join("xtask/kernel/altperiod")
}

/// The cache key: the source package's version, the patch and the config.
fn key(sh: &Shell) -> anyhow::Result<String> {
    let format = "${Version}";
    let version = cmd!(sh, "dpkg-query -W -f={format} {SOURCE_PACKAGE}")
        .read()
        .context("linux-source-6.1 is not installed: run `cargo xtask setup`")?;
    let mut all = format!("{SOURCE_PACKAGE} {version}\n").into_bytes();
    for f in ["altperiod.patch", "lab.config"] {
        all.extend(std::fs::read(material().join(f))?);
        all.push(0);
    }
    let sum = cmd!(sh, "sha256sum").stdin(all).read()?;
    Ok(sum.chars().take(16).collect())
}

/// The kernel `Image`, built if the cache has none for today's source, patch and config.
pub fn image(sh: &Shell) -> anyhow::Result<PathBuf> {
    if !Path::new(SOURCE).is_file() {
        bail!("{SOURCE} is missing: run `cargo xtask setup` (it installs {SOURCE_PACKAGE})");
    }
    let out = target_dir()
        .join("lab/kernels")
        .join(format!("altperiod-{}", key(sh)?));
    let image = out.join("Image");
    if image.is_file() {
        return Ok(image);
    }
    let t = Instant::now();
    let build = target_dir().join("lab/kernels/build");
    let _ = std::fs::remove_dir_all(&build);
    std::fs::create_dir_all(&build)?;
    eprintln!(
        "lab kernel: building {} (once; about 4 min on 2 cores)",
        out.display()
    );
    eprintln!("lab kernel: unpacking {SOURCE}");
    cmd!(sh, "tar -xJf {SOURCE} -C {build} --strip-components=1").run()?;
    let patch = material().join("altperiod.patch");
    cmd!(
        sh,
        "patch -p1 --forward --batch --quiet -d {build} -i {patch}"
    )
    .run()
    .context("altperiod.patch does not apply to this linux-source-6.1")?;
    let config = material().join("lab.config");
    let make = |args: &[&str]| -> anyhow::Result<()> {
        cmd!(
            sh,
            "make -s -C {build} ARCH=arm64 CROSS_COMPILE=aarch64-linux-gnu- {args...}"
        )
        .run()?;
        Ok(())
    };
    make(&["tinyconfig"])?;
    let merge = build.join("scripts/kconfig/merge_config.sh");
    {
        let _d = sh.push_dir(&build);
        cmd!(sh, "sh {merge} -m .config {config}")
            .env("ARCH", "arm64")
            .env("CROSS_COMPILE", "aarch64-linux-gnu-")
            .quiet()
            .ignore_stdout()
            .run()?;
    }
    make(&["olddefconfig"])?;
    // Every option the lab needs must have survived olddefconfig (a dependency not met
    // drops an option silently), and none it switched off may be on.
    let have = std::fs::read_to_string(build.join(".config"))?;
    let wanted = std::fs::read_to_string(&config)?;
    let lost: Vec<&str> = wanted
        .lines()
        .filter(|l| match l.strip_prefix("# ") {
            Some(off) => off
                .strip_suffix(" is not set")
                .is_some_and(|sym| have.lines().any(|h| h.starts_with(&format!("{sym}=")))),
            None => l.starts_with("CONFIG_") && !have.lines().any(|h| h == *l),
        })
        .collect();
    if !lost.is_empty() {
        bail!(
            "lab.config lines olddefconfig did not keep (a dependency is missing or forces it): {}",
            lost.join(" ")
        );
    }
    compile(&build)?;
    std::fs::create_dir_all(&out)?;
    std::fs::copy(build.join("arch/arm64/boot/Image"), out.join("Image.tmp"))?;
    std::fs::copy(build.join(".config"), out.join("config"))?;
    std::fs::rename(out.join("Image.tmp"), &image)?;
    let secs = t.elapsed().as_secs_f64();
    std::fs::write(out.join("build-seconds"), format!("{secs:.0}\n"))?;
    let _ = std::fs::remove_dir_all(&build);
    eprintln!("lab kernel: built in {secs:.0} s");
    Ok(image)
}

/// `make Image` with a progress line every 20 s (files compiled so far); the log is kept
/// in the build directory and its tail printed on failure.
fn compile(build: &Path) -> anyhow::Result<()> {
    let jobs = std::thread::available_parallelism().map_or(2, |n| n.get());
    let log_path = build.join("build.log");
    let mut child = Command::new("make")
        .arg("-C")
        .arg(build)
        .args([
            "ARCH=arm64",
            "CROSS_COMPILE=aarch64-linux-gnu-",
            &format!("-j{jobs}"),
            "Image",
        ])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .context("cannot run make")?;
    let stderr = child.stderr.take().context("make's stderr")?;
    let err_thread = std::thread::spawn(move || {
        BufReader::new(stderr)
            .lines()
            .map_while(Result::ok)
            .collect::<Vec<_>>()
    });
    let t = Instant::now();
    let mut last = Instant::now();
    let mut compiled = 0usize;
    let mut log = Vec::new();
    for line in BufReader::new(child.stdout.take().context("make's stdout")?)
        .lines()
        .map_while(Result::ok)
    {
        if line.trim_start().starts_with("CC ") {
            compiled += 1;
        }
        if last.elapsed() >= Duration::from_secs(20) {
            eprintln!(
                "lab kernel: {compiled} files compiled, {:.0} s",
                t.elapsed().as_secs_f64()
            );
            last = Instant::now();
        }
        log.push(line);
    }
    let st = child.wait()?;
    let errors = err_thread.join().unwrap_or_default();
    log.extend(errors.iter().cloned());
    std::fs::write(&log_path, log.join("\n"))?;
    if !st.success() {
        let tail: Vec<&str> = errors
            .iter()
            .rev()
            .take(30)
            .rev()
            .map(String::as_str)
            .collect();
        bail!(
            "make Image failed ({st}); log in {}:\n{}",
            log_path.display(),
            tail.join("\n")
        );
    }
    eprintln!(
        "lab kernel: {compiled} files compiled in {:.0} s",
        t.elapsed().as_secs_f64()
    );
    Ok(())
}
