//! The altperiod lab kernel: Debian's `linux-source-6.1` plus `xtask/kernel/altperiod/`'s
//! patch and config, cross-built once per user and kept in [`cache_dir`] under the hash of
//! every input (source version, patch, config, cross compiler, this recipe).

use crate::util::root;
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

/// The per-user cache of built kernels, outside any clone, so a new clone (CI's) reuses
/// them: `$LABPERF_CACHE_DIR`, else `$XDG_CACHE_HOME/labperf`, else `~/.cache/labperf`;
/// kernels under its `lab/kernels/`.
pub fn cache_dir() -> anyhow::Result<PathBuf> {
    let var = |v: &str| {
        std::env::var_os(v)
            .filter(|s| !s.is_empty())
            .map(PathBuf::from)
    };
    cache_in(var("LABPERF_CACHE_DIR"), var("XDG_CACHE_HOME"), var("HOME"))
        .context("no cache directory for the lab kernel: set LABPERF_CACHE_DIR or HOME")
}

/// [`cache_dir`] from the values of `$LABPERF_CACHE_DIR`, `$XDG_CACHE_HOME` and `$HOME`.
fn cache_in(own: Option<PathBuf>, xdg: Option<PathBuf>, home: Option<PathBuf>) -> Option<PathBuf> {
    let base = own
        .or_else(|| xdg.map(|x| x.join("labperf")))
        .or_else(|| home.map(|h| h.join(".cache/labperf")))?;
    Some(base.join("lab/kernels"))
}

/// What the built kernel depends on, one line or file each: the source package's version,
/// the patch, the config, the cross compiler's version, and this file (the recipe).
fn inputs(sh: &Shell) -> anyhow::Result<Vec<u8>> {
    let format = "${Version}";
    let version = cmd!(sh, "dpkg-query -W -f={format} {SOURCE_PACKAGE}")
        .read()
        .context("linux-source-6.1 is not installed: run `cargo xtask setup`")?;
    let gcc = cmd!(sh, "aarch64-linux-gnu-gcc --version")
        .read()
        .context("aarch64-linux-gnu-gcc is missing: run `cargo xtask setup`")?;
    let mut all = format!("{SOURCE_PACKAGE} {version}\n{gcc}\n").into_bytes();
    for f in ["altperiod.patch", "lab.config"] {
        all.extend(std::fs::read(material().join(f))?);
        all.push(0);
    }
    all.extend(include_bytes!("kernel.rs"));
    Ok(all)
}

/// The cache key: the first 16 hex digits of the SHA-256 of [`inputs`].
fn key(sh: &Shell) -> anyhow::Result<String> {
    let sum = cmd!(sh, "sha256sum").stdin(inputs(sh)?).read()?;
    Ok(sum.chars().take(16).collect())
}

/// The kernel `Image`, built if the cache has none for today's inputs. A build happens in
/// a directory of its own and its result appears by one rename of a complete directory:
/// another run (a second clone, a parallel CI) sees a kernel whole or not at all.
pub fn image(sh: &Shell) -> anyhow::Result<PathBuf> {
    if !Path::new(SOURCE).is_file() {
        bail!("{SOURCE} is missing: run `cargo xtask setup` (it installs {SOURCE_PACKAGE})");
    }
    let cache = cache_dir()?;
    let out = cache.join(format!("altperiod-{}", key(sh)?));
    let image = out.join("Image");
    if image.is_file() {
        eprintln!("lab kernel: cached in {}", out.display());
        return Ok(image);
    }
    let t = Instant::now();
    let nonce = format!(
        "{}-{}",
        std::process::id(),
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.subsec_nanos())
    );
    sweep(&cache);
    let build = cache.join(format!("build-{nonce}"));
    std::fs::create_dir_all(&build).with_context(|| format!("cannot make {}", build.display()))?;
    // A failed build's directory stays (its build.log is named in the error) until the
    // next run sweeps it.
    build_in(sh, &build, &cache, &out, &nonce)?;
    let _ = std::fs::remove_dir_all(&build);
    let secs = t.elapsed().as_secs_f64();
    eprintln!("lab kernel: built in {secs:.0} s");
    Ok(image)
}

/// Removes the build and staging directories of runs that are gone (their process id,
/// the name's first number, no longer alive): an interrupted or failed build's.
fn sweep(cache: &Path) {
    let Ok(dir) = std::fs::read_dir(cache) else {
        return;
    };
    for e in dir.flatten() {
        let name = e.file_name().to_string_lossy().into_owned();
        let pid = ["build-", "staged-"]
            .iter()
            .find_map(|p| name.strip_prefix(p))
            .and_then(|rest| rest.split('-').next())
            .and_then(|p| p.parse::<u32>().ok());
        if let Some(pid) = pid {
            if !Path::new(&format!("/proc/{pid}")).exists() {
                let _ = std::fs::remove_dir_all(e.path());
            }
        }
    }
}

/// Unpacks, patches, configures and compiles in `build`, then publishes `out` whole.
fn build_in(sh: &Shell, build: &Path, cache: &Path, out: &Path, nonce: &str) -> anyhow::Result<()> {
    let t = Instant::now();
    eprintln!(
        "lab kernel: building {} (once per user; about 4 min on 2 cores)",
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
        let _d = sh.push_dir(build);
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
    compile(build)?;
    // The result in a directory of its own, renamed into place whole.
    let staged = cache.join(format!("staged-{nonce}"));
    std::fs::create_dir_all(&staged)?;
    std::fs::copy(build.join("arch/arm64/boot/Image"), staged.join("Image"))?;
    std::fs::copy(build.join(".config"), staged.join("config"))?;
    std::fs::write(staged.join("inputs"), inputs(sh)?)?;
    let secs = t.elapsed().as_secs_f64();
    std::fs::write(staged.join("build-seconds"), format!("{secs:.0}\n"))?;
    if let Err(e) = std::fs::rename(&staged, out) {
        let _ = std::fs::remove_dir_all(&staged);
        // Another run published the same key first: its kernel is as good as ours.
        if !out.join("Image").is_file() {
            return Err(e).with_context(|| format!("cannot publish {}", out.display()));
        }
    }
    Ok(())
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_cache_is_labperf_s_own_then_xdg_then_home() {
        let p = |s: &str| Some(PathBuf::from(s));
        assert_eq!(cache_in(p("/c"), p("/x"), p("/h")), p("/c/lab/kernels"));
        assert_eq!(
            cache_in(None, p("/x"), p("/h")),
            p("/x/labperf/lab/kernels")
        );
        assert_eq!(
            cache_in(None, None, p("/h")),
            p("/h/.cache/labperf/lab/kernels")
        );
        assert_eq!(cache_in(None, None, None), None);
    }

    #[test]
    fn a_sweep_removes_the_directories_of_gone_runs_only() {
        let d = std::env::temp_dir().join(format!("labperf-sweep-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        // pid_max is at most 4194304: a pid above it is never alive.
        let gone = ["build-4294967-1", "staged-4294967-2"];
        let kept = [
            format!("build-{}-3", std::process::id()),
            format!("staged-{}-4", std::process::id()),
            "altperiod-0123456789abcdef".to_string(),
        ];
        for n in gone
            .iter()
            .map(|s| s.to_string())
            .chain(kept.iter().cloned())
        {
            std::fs::create_dir_all(d.join(n).join("sub")).unwrap();
        }
        sweep(&d);
        let mut left: Vec<String> = std::fs::read_dir(&d)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        left.sort();
        let mut want = kept.to_vec();
        want.sort();
        assert_eq!(left, want);
        std::fs::remove_dir_all(&d).unwrap();
    }
}
