//! The per-user lab cache: what a lab machine is built from that takes minutes (kernels,
//! the Alpha userland), kept outside any clone under the hash of its inputs, built in a
//! directory of its own and published by one rename of a complete directory.

use anyhow::Context;
use std::path::{Path, PathBuf};
use xshell::{cmd, Shell};

/// The per-user lab cache, outside any clone, so a new clone (CI's) reuses it:
/// `$LABPERF_CACHE_DIR`, else `$XDG_CACHE_HOME/labperf`, else `~/.cache/labperf`; its
/// `lab/` (kernels under `lab/kernels/`).
pub fn dir() -> anyhow::Result<PathBuf> {
    let var = |v: &str| {
        std::env::var_os(v)
            .filter(|s| !s.is_empty())
            .map(PathBuf::from)
    };
    cache_in(var("LABPERF_CACHE_DIR"), var("XDG_CACHE_HOME"), var("HOME"))
        .context("no cache directory for the lab: set LABPERF_CACHE_DIR or HOME")
}

/// [`dir`] from the values of `$LABPERF_CACHE_DIR`, `$XDG_CACHE_HOME` and `$HOME`.
fn cache_in(own: Option<PathBuf>, xdg: Option<PathBuf>, home: Option<PathBuf>) -> Option<PathBuf> {
    let base = own
        .or_else(|| xdg.map(|x| x.join("labperf")))
        .or_else(|| home.map(|h| h.join(".cache/labperf")))?;
    Some(base.join("lab"))
}

/// A cache key: the first 16 hex digits of the SHA-256 of `inputs`.
pub fn key(sh: &Shell, inputs: &[u8]) -> anyhow::Result<String> {
    let sum = cmd!(sh, "sha256sum").stdin(inputs).read()?;
    Ok(sum.chars().take(16).collect())
}

/// The cache entry `name` (a path under [`dir`]), made by `build(build_dir, staged)` when
/// it has no `file`: `build` works in `build_dir` and leaves the entry's files in
/// `staged`, which appears as `name` by one rename. Another run (a second clone, a
/// parallel CI) sees an entry whole or not at all; a failed build's directory stays (its
/// logs named in the error) until a later run sweeps it.
pub fn publish(
    name: &str,
    file: &str,
    build: impl FnOnce(&Path, &Path) -> anyhow::Result<()>,
) -> anyhow::Result<PathBuf> {
    let cache = dir()?;
    let out = cache.join(name);
    if out.join(file).is_file() {
        eprintln!("lab cache: {} cached", out.display());
        return Ok(out);
    }
    let nonce = format!(
        "{}-{}",
        std::process::id(),
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.subsec_nanos())
    );
    std::fs::create_dir_all(&cache)?;
    sweep(&cache);
    let (work, staged) = (
        cache.join(format!("build-{nonce}")),
        cache.join(format!("staged-{nonce}")),
    );
    for d in [&work, &staged] {
        std::fs::create_dir_all(d).with_context(|| format!("cannot make {}", d.display()))?;
    }
    build(&work, &staged)?;
    if let Some(parent) = out.parent() {
        std::fs::create_dir_all(parent)?;
    }
    if let Err(e) = std::fs::rename(&staged, &out) {
        let _ = std::fs::remove_dir_all(&staged);
        // Another run published the same key first: its entry is as good as ours.
        if !out.join(file).is_file() {
            return Err(e).with_context(|| format!("cannot publish {}", out.display()));
        }
    }
    let _ = std::fs::remove_dir_all(&work);
    Ok(out)
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_cache_is_labperf_s_own_then_xdg_then_home() {
        let p = |s: &str| Some(PathBuf::from(s));
        assert_eq!(cache_in(p("/c"), p("/x"), p("/h")), p("/c/lab"));
        assert_eq!(cache_in(None, p("/x"), p("/h")), p("/x/labperf/lab"));
        assert_eq!(cache_in(None, None, p("/h")), p("/h/.cache/labperf/lab"));
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
            "kernels".to_string(),
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
