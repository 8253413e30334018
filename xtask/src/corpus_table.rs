//! `cargo xtask corpus-table`: runs the corpus tests (`tests/tests/corpus.rs`; with `--lab`
//! the emulated Arm machine's too) and Debian's programs against perf
//! (`tests/tests/debian.rs`), and makes docs/measurements.md's two tables of the lines they print
//! (`corpus-table: | program | built | mode | checked | worst |`, `debian-table: | program |
//! command | six worst differences |`), with the run they came from; `--write` puts them in
//! docs/measurements.md between their markers.

use crate::lab::Kernel;
use crate::util::{agents_dir, host_musl, root, target_dir};
use anyhow::{bail, Context};
use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};

#[derive(clap::Args)]
pub struct Args {
    /// Also the emulated Arm machine's corpus tests (boot it first: `cargo xtask lab up
    /// aarch64`).
    #[arg(long)]
    pub lab: bool,
    /// Replace the two tables in docs/measurements.md (between `<!-- corpus-table -->` and
    /// `<!-- /corpus-table -->`, and the `debian-table` markers); only when every test passed.
    #[arg(long)]
    pub write: bool,
}

const BEGIN: &str = "<!-- corpus-table -->";
const END: &str = "<!-- /corpus-table -->";
const DEBIAN_BEGIN: &str = "<!-- debian-table -->";
const DEBIAN_END: &str = "<!-- /debian-table -->";

/// The order of the table: the corpus tests print in the order nextest finishes them.
fn key(line: &str) -> (String, String, u8) {
    let cells: Vec<&str> = line.split('|').map(str::trim).collect();
    let get = |i: usize| cells.get(i).copied().unwrap_or("").to_string();
    let mode = match get(3).as_str() {
        "fp" => 0,
        _ => 1,
    };
    (get(1), get(2), mode)
}

fn output(cmd: &str, args: &[&str]) -> String {
    Command::new(cmd)
        .args(args)
        .output()
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
        .unwrap_or_default()
}

pub fn run(a: &Args) -> anyhow::Result<String> {
    let root = root();
    let st = Command::new("cargo")
        .args(["build", "-q", "-p", "labperf"])
        .current_dir(&root)
        .status()?;
    if !st.success() {
        bail!("cargo build -p labperf failed");
    }
    let agents = agents_dir(&host_musl());
    let mut c = Command::new("cargo");
    c.current_dir(&root)
        .args(["nextest", "run", "-p", "labperf-tests"])
        .args(["--test", "corpus", "--test", "debian"])
        .args(["--profile", "ci", "--no-capture", "--no-fail-fast"])
        .env("LABPERF_AGENT", agents.join("labperf-agent"))
        .env("LABPERF_LABPERF", target_dir().join("debug/labperf"))
        .env("LABPERF_AGENTS_DIR", target_dir().join("agents"))
        .env("LABPERF_LAB_DIR", Kernel::Debian.dir())
        .stdout(Stdio::piped());
    if a.lab {
        c.args(["--run-ignored", "all"]);
    }
    let mut child = c
        .spawn()
        .context("cargo nextest (cargo install cargo-nextest)")?;
    let (mut lines, mut debian) = (Vec::new(), Vec::new());
    for l in BufReader::new(child.stdout.take().expect("piped")).lines() {
        let l = l?;
        println!("{l}");
        if let Some(row) = l.strip_prefix("corpus-table: ") {
            lines.push(row.to_string());
        }
        if let Some(row) = l.strip_prefix("debian-table: ") {
            debian.push(row.to_string());
        }
    }
    let passed = child.wait()?.success();
    lines.sort_by_key(|l| key(l));
    lines.dedup();
    debian.sort();
    debian.dedup();
    let from = provenance(a.lab, passed);
    let table = from.clone()
        + "| Program | Built with | Mode | Checked | Worst error, points (where) |\n|---|---|---|---|---|\n"
        + &rows(&lines, 5)?;
    let debian_table = from
        + "| Program | Command | Self by shared object | Self by symbol | Children short of perf's | Inlined Children against addr2line -i | By shared object against perf's own recording | CPU time not covered, % |\n|---|---|---|---|---|---|---|---|\n"
        + &rows(&debian, 8)?;
    println!("\n{table}\n{debian_table}");
    if !passed {
        bail!("corpus tests failed: the tables above are not written");
    }
    if a.write {
        let file = crate::util::MEASUREMENTS;
        crate::util::write_block(file, BEGIN, END, &table)?;
        crate::util::write_block(file, DEBIAN_BEGIN, DEBIAN_END, &debian_table)?;
        return Ok(format!(
            "{} and {} rows written to {file}",
            lines.len(),
            debian.len()
        ));
    }
    Ok(format!("{} and {} rows", lines.len(), debian.len()))
}

/// The line before a table: the command, commit, date, machine, and whether all passed.
fn provenance(lab: bool, passed: bool) -> String {
    let cpu = std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|s| {
            s.lines()
                .find_map(|l| l.strip_prefix("model name"))
                .map(|m| m.trim_start_matches([' ', '\t', ':']).to_string())
        })
        .unwrap_or_else(|| "unknown CPU".into());
    format!(
        "From `cargo xtask corpus-table{}` at commit {} on {} (Linux {}, {}, {} CPUs), {}:\n\n",
        if lab { " --lab" } else { "" },
        output("git", &["rev-parse", "--short", "HEAD"]),
        output("date", &["-u", "+%Y-%m-%d"]),
        output("uname", &["-r"]),
        cpu,
        std::thread::available_parallelism().map_or(0, |n| n.get()),
        if passed {
            "every test passed"
        } else {
            "SOME TESTS FAILED"
        },
    )
}

/// The table's rows of `cells` cells each: a line with a `|` inside a cell would break it.
fn rows(lines: &[String], cells: usize) -> anyhow::Result<String> {
    let mut out = String::new();
    for l in lines {
        if l.matches('|').count() != cells + 1 {
            bail!("a table line with a `|` inside a cell: {l}");
        }
        out += l;
        out.push('\n');
    }
    Ok(out)
}
