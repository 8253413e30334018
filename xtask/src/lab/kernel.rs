//! The lab kernels built from source: Debian's `linux-source-6.1` plus a [`Recipe`]'s patch
//! and config (`xtask/kernel/<name>/`), cross-built once per user and kept in the lab cache
//! ([`super::cache`]) under the hash of every input (source version, patch, config, cross
//! compiler, the recipe and this file). Each machine's module holds its recipe.

use super::cache;
use crate::util::root;
use anyhow::{bail, Context};
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};
use xshell::{cmd, Shell};

/// How one lab kernel is made: `xtask/kernel/<name>/` holds `patch` and `lab.config`
/// (appended to the architecture's tinyconfig).
#[derive(Debug)]
pub struct Recipe {
    /// The cache entry's prefix and the directory of its material.
    pub name: &'static str,
    /// `make ARCH=`.
    pub arch: &'static str,
    /// `make CROSS_COMPILE=` (its `gcc` is the cross compiler).
    pub cross: &'static str,
    /// The patch file in the material directory.
    pub patch: &'static str,
    /// The make target, and where it leaves the kernel in the build tree.
    pub target: &'static str,
    pub built: &'static str,
    /// The kernel's file name in the cache entry.
    pub file: &'static str,
    /// About how long a build takes here (said before it starts).
    pub about: &'static str,
}

/// Where `cargo xtask setup` (package `linux-source-6.1`) puts the kernel source.
pub const SOURCE: &str = "/usr/src/linux-source-6.1.tar.xz";
const SOURCE_PACKAGE: &str = "linux-source-6.1";

impl Recipe {
    fn material(&self) -> PathBuf {
        root().join("xtask/kernel").join(self.name)
    }
}

/// What the built kernel depends on, one line or file each: the source package's version,
/// the patch, the config, the cross compiler's version, the recipe and this file.
fn inputs(sh: &Shell, r: &Recipe) -> anyhow::Result<Vec<u8>> {
    let format = "${Version}";
    let version = cmd!(sh, "dpkg-query -W -f={format} {SOURCE_PACKAGE}")
        .read()
        .context("linux-source-6.1 is not installed: run `cargo xtask setup`")?;
    let gcc = format!("{}gcc", r.cross);
    let gcc = cmd!(sh, "{gcc} --version")
        .read()
        .with_context(|| format!("{gcc} is missing: run `cargo xtask setup`"))?;
    let mut all = format!("{SOURCE_PACKAGE} {version}\n{gcc}\n{r:?}\n").into_bytes();
    for f in [r.patch, "lab.config"] {
        all.extend(std::fs::read(r.material().join(f))?);
        all.push(0);
    }
    all.extend(include_bytes!("kernel.rs"));
    Ok(all)
}

/// The kernel of recipe `r`, built if the cache has none for today's inputs (published
/// whole by [`cache::publish`]).
pub fn image(sh: &Shell, r: &Recipe) -> anyhow::Result<PathBuf> {
    if !Path::new(SOURCE).is_file() {
        bail!("{SOURCE} is missing: run `cargo xtask setup` (it installs {SOURCE_PACKAGE})");
    }
    let key = cache::key(sh, &inputs(sh, r)?)?;
    let out = cache::publish(
        &format!("kernels/{}-{key}", r.name),
        r.file,
        |build, staged| {
            let t = Instant::now();
            eprintln!(
                "lab kernel {}: building (once per user; {} on 2 cores)",
                r.name, r.about
            );
            build_in(sh, r, build)?;
            std::fs::copy(build.join(r.built), staged.join(r.file))?;
            std::fs::copy(build.join(".config"), staged.join("config"))?;
            std::fs::write(staged.join("inputs"), inputs(sh, r)?)?;
            let secs = t.elapsed().as_secs_f64();
            std::fs::write(staged.join("build-seconds"), format!("{secs:.0}\n"))?;
            eprintln!("lab kernel {}: built in {secs:.0} s", r.name);
            Ok(())
        },
    )?;
    Ok(out.join(r.file))
}

/// Unpacks, patches, configures and compiles in `build`.
fn build_in(sh: &Shell, r: &Recipe, build: &Path) -> anyhow::Result<()> {
    eprintln!("lab kernel {}: unpacking {SOURCE}", r.name);
    cmd!(sh, "tar -xJf {SOURCE} -C {build} --strip-components=1").run()?;
    let patch = r.material().join(r.patch);
    cmd!(
        sh,
        "patch -p1 --forward --batch --quiet -d {build} -i {patch}"
    )
    .run()
    .with_context(|| format!("{} does not apply to this linux-source-6.1", r.patch))?;
    let config = r.material().join("lab.config");
    let (arch, cross) = (
        format!("ARCH={}", r.arch),
        format!("CROSS_COMPILE={}", r.cross),
    );
    let make = |args: &[&str]| -> anyhow::Result<()> {
        cmd!(sh, "make -s -C {build} {arch} {cross} {args...}").run()?;
        Ok(())
    };
    make(&["tinyconfig"])?;
    let merge = build.join("scripts/kconfig/merge_config.sh");
    {
        let _d = sh.push_dir(build);
        cmd!(sh, "sh {merge} -m .config {config}")
            .env("ARCH", r.arch)
            .env("CROSS_COMPILE", r.cross)
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
    compile(r, build)
}

/// `make <target>` with a progress line every 20 s (files compiled so far); the log is kept
/// in the build directory and its tail printed on failure.
fn compile(r: &Recipe, build: &Path) -> anyhow::Result<()> {
    let jobs = std::thread::available_parallelism().map_or(2, |n| n.get());
    let log_path = build.join("build.log");
    let mut child = Command::new("make")
        .arg("-C")
        .arg(build)
        .args([
            &format!("ARCH={}", r.arch),
            &format!("CROSS_COMPILE={}", r.cross),
            &format!("-j{jobs}"),
            r.target,
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
                "lab kernel {}: {compiled} files compiled, {:.0} s",
                r.name,
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
            "make {} failed ({st}); log in {}:\n{}",
            r.target,
            log_path.display(),
            tail.join("\n")
        );
    }
    eprintln!(
        "lab kernel {}: {compiled} files compiled in {:.0} s",
        r.name,
        t.elapsed().as_secs_f64()
    );
    Ok(())
}
