//! Shared xtask helpers: the step summary, workspace paths, the host triple.

use anyhow::Context;
use std::path::PathBuf;
use std::time::Instant;

/// Collects the outcome of each step; xtask keeps going after a failure and prints one summary.
#[derive(Default)]
pub struct Summary {
    steps: Vec<(String, Result<String, String>, f64)>,
}

impl Summary {
    /// Runs one step, recording its outcome.
    pub fn step(&mut self, name: &str, f: impl FnOnce() -> anyhow::Result<String>) -> bool {
        eprintln!("\n==> {name}");
        let t = Instant::now();
        let r = f().map_err(|e| format!("{e:#}"));
        let ok = r.is_ok();
        if let Err(e) = &r {
            eprintln!("xtask: {name} FAILED: {e}");
        }
        self.steps.push((name.into(), r, t.elapsed().as_secs_f64()));
        ok
    }

    /// Records the outcome of a step that ran elsewhere (a thread), `secs` long.
    pub fn record(&mut self, name: &str, r: anyhow::Result<String>, secs: f64) -> bool {
        let r = r.map_err(|e| format!("{e:#}"));
        let ok = r.is_ok();
        match &r {
            Ok(_) => eprintln!("\n==> {name}: done"),
            Err(e) => eprintln!("xtask: {name} FAILED: {e}"),
        }
        self.steps.push((name.into(), r, secs));
        ok
    }

    pub fn failed(&self) -> bool {
        self.steps.iter().any(|s| s.1.is_err())
    }

    /// Prints the summary; returns the exit code.
    pub fn finish(&self) -> i32 {
        eprintln!("\n==> summary");
        for (name, r, secs) in &self.steps {
            match r {
                Ok(note) => eprintln!("  ok    {name:<34} {secs:>7.1} s  {note}"),
                Err(e) => eprintln!(
                    "  FAIL  {name:<34} {secs:>7.1} s  {}",
                    e.lines().next().unwrap_or("")
                ),
            }
        }
        i32::from(self.failed())
    }
}

pub fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("xtask/ sits in the workspace")
        .to_path_buf()
}

pub fn target_dir() -> PathBuf {
    std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| root().join("target"))
}

/// The musl triple of this machine's architecture.
pub fn host_musl() -> String {
    format!("{}-unknown-linux-musl", std::env::consts::ARCH)
}

/// Where build-agents puts a target's binaries.
pub fn agents_dir(triple: &str) -> PathBuf {
    target_dir().join("agents").join(triple)
}

pub fn is_root() -> bool {
    std::process::Command::new("id")
        .arg("-u")
        .output()
        .map(|o| String::from_utf8_lossy(&o.stdout).trim() == "0")
        .unwrap_or(false)
}

/// The file the generated tables live in: `docs/measurements.md` (every measured figure with
/// its date, machine and command), relative to the repository root.
pub const MEASUREMENTS: &str = "docs/measurements.md";

/// Replaces the text between `begin` and `end` in `file` (relative to the repository root)
/// with `text`, both markers kept: the generated tables of [`MEASUREMENTS`].
pub fn write_block(file: &str, begin: &str, end: &str, text: &str) -> anyhow::Result<()> {
    let path = root().join(file);
    let old = std::fs::read_to_string(&path).with_context(|| format!("reading {file}"))?;
    let (Some(b), Some(e)) = (old.find(begin), old.find(end)) else {
        anyhow::bail!("{file} has no {begin} ... {end} block");
    };
    let new = format!("{}{begin}\n{text}{}", &old[..b], &old[e..]);
    std::fs::write(&path, new)?;
    Ok(())
}
