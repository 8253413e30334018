//! The doc-test harness: every `$ labperf …` command in a ```console block of README.md and
//! docs/*.md runs, on the bench, in the order the file gives them.
//!
//! The convention (stated in README.md and docs/testing.md): in a ```console block each line
//! starting with `$ ` is a command (a line ending in `\` continues on the next), every other
//! line is sample output and is not compared; a ```synopsis block shows a command's syntax
//! with placeholders and is not run; every long option of both must be in its verb's
//! `--help`; a `labperf` command in any other block is refused.
//! Each markdown file runs in a scratch directory of its own, where `my-prog` is this
//! machine's `labperf-bench` and `my-prog-aarch64` the aarch64 bench, so a file's later
//! commands read what its earlier ones wrote. A console block with a lab command (`--host`,
//! `probe`, `deploy`, `hosts`) runs against the emulated Arm lab machine as host `arm1` (a
//! hosts file in the scratch HOME) when `$LABPERF_LAB_DIR` is set, as `cargo xtask test`
//! sets it; without it the block's commands are printed as not run and the rest is checked.

use labperf_tests::{bin, root, scratch};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// How long one documented command may take: they are meant to be quick (short durations).
const LIMIT: Duration = Duration::from_secs(120);

/// A fenced block of a markdown file: its info string, the line of its opening fence, and its
/// lines with their line numbers.
struct Block {
    info: String,
    line: usize,
    lines: Vec<(usize, String)>,
}

/// One command of a console block, its continuation lines joined.
struct Cmd {
    at: String,
    text: String,
}

fn blocks(text: &str) -> Vec<Block> {
    let mut out = Vec::new();
    let mut open: Option<Block> = None;
    for (i, l) in text.lines().enumerate() {
        let n = i + 1;
        if let Some(fence) = l.trim_start().strip_prefix("```") {
            match open.take() {
                Some(b) => out.push(b),
                None => {
                    open = Some(Block {
                        info: fence.trim().to_string(),
                        line: n,
                        lines: Vec::new(),
                    })
                }
            }
        } else if let Some(b) = open.as_mut() {
            b.lines.push((n, l.to_string()));
        }
    }
    assert!(open.is_none(), "a fence is never closed");
    out
}

/// Whether a line (of any block) is a labperf command.
fn is_labperf(l: &str) -> bool {
    let l = l.trim_start();
    l.strip_prefix("$ ").unwrap_or(l).starts_with("labperf ")
}

fn commands(file: &str, b: &Block) -> Vec<Cmd> {
    let mut out: Vec<Cmd> = Vec::new();
    let mut cont = false;
    for (n, l) in &b.lines {
        let body = if cont {
            Some(l.trim())
        } else {
            l.strip_prefix("$ ")
        };
        let Some(body) = body else { continue };
        let (part, more) = match body.strip_suffix('\\') {
            Some(p) => (p, true),
            None => (body, false),
        };
        if cont {
            let c = out.last_mut().unwrap();
            c.text.push(' ');
            c.text.push_str(part.trim());
        } else {
            out.push(Cmd {
                at: format!("{file}:{n}"),
                text: part.trim().to_string(),
            });
        }
        cont = more;
    }
    out
}

/// Whether a command needs a lab machine (its comment, after ` #`, does not count).
fn is_lab(c: &Cmd) -> bool {
    let cmd = c.text.split(" #").next().unwrap();
    cmd.contains("--host")
        || ["labperf probe", "labperf deploy", "labperf hosts"]
            .iter()
            .any(|p| cmd.starts_with(p))
}

/// The markdown files whose commands run: README.md, then docs/*.md by name.
fn doc_files() -> Vec<PathBuf> {
    let mut docs: Vec<PathBuf> = std::fs::read_dir(root().join("docs"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "md"))
        .collect();
    docs.sort();
    let mut files = vec![root().join("README.md")];
    files.extend(docs);
    files
}

/// The bench of `triple` in the agents directory (`$LABPERF_AGENTS_DIR` or target/agents).
fn agents_bench(triple: &str) -> PathBuf {
    std::env::var_os("LABPERF_AGENTS_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| root().join("target/agents"))
        .join(triple)
        .join("labperf-bench")
}

/// The scratch directory of one markdown file: `my-prog`, `bin/labperf`, and with a lab, the
/// aarch64 bench as `my-prog-aarch64` and the hosts file naming the lab machine `arm1`.
fn workdir(name: &str, lab: Option<&labperf_tests::lab::Lab>) -> PathBuf {
    let d = scratch(&format!("doc-{name}"));
    std::fs::create_dir_all(d.join("bin")).unwrap();
    std::os::unix::fs::symlink(bin("labperf"), d.join("bin/labperf")).unwrap();
    std::os::unix::fs::symlink(bin("labperf-bench"), d.join("my-prog")).unwrap();
    if let Some(lab) = lab {
        let arm = agents_bench("aarch64-unknown-linux-musl");
        std::fs::copy(&arm, d.join("my-prog-aarch64"))
            .unwrap_or_else(|e| panic!("{}: {e}: run `cargo xtask build-agents`", arm.display()));
        let cfg = d.join(".config/labperf");
        std::fs::create_dir_all(&cfg).unwrap();
        let hosts = format!(
            "[hosts.arm1]\naddress = \"{}\"\nidentity = \"{}\"\nknown_hosts = \"{}\"\n",
            lab.host(),
            lab.dir().join("id_ed25519").display(),
            d.join("known_hosts").display()
        );
        std::fs::write(cfg.join("hosts.toml"), hosts).unwrap();
    }
    d
}

/// Runs one command with `sh -c` in `dir` (HOME there, labperf first on PATH), within
/// [`LIMIT`]; returns an error with its status and output when it fails.
fn run(dir: &Path, c: &Cmd) -> Result<Duration, String> {
    let path = format!(
        "{}:{}",
        dir.join("bin").display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let t = Instant::now();
    let mut child = Command::new("sh")
        .arg("-c")
        .arg(&c.text)
        .current_dir(dir)
        .env("PATH", path)
        .env("HOME", dir)
        .env("XDG_CACHE_HOME", dir.join("cache"))
        .env_remove("XDG_CONFIG_HOME")
        .env_remove("SSH_AUTH_SOCK")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let (out, err) = (child.stdout.take().unwrap(), child.stderr.take().unwrap());
    let read = |mut r: Box<dyn std::io::Read + Send>| {
        std::thread::spawn(move || {
            let mut v = Vec::new();
            let _ = r.read_to_end(&mut v);
            v
        })
    };
    let (out, err) = (read(Box::new(out)), read(Box::new(err)));
    let status = loop {
        if let Some(s) = child.try_wait().unwrap() {
            break Some(s);
        }
        if t.elapsed() > LIMIT {
            let _ = child.kill();
            let _ = child.wait();
            break None;
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    let (out, err) = (out.join().unwrap(), err.join().unwrap());
    let tail = |v: &[u8]| {
        let s = String::from_utf8_lossy(v);
        let lines: Vec<&str> = s.lines().collect();
        lines[lines.len().saturating_sub(30)..].join("\n")
    };
    match status {
        Some(s) if s.success() => Ok(t.elapsed()),
        s => Err(format!(
            "{}: `{}` {}\n--- stderr:\n{}\n--- stdout (end):\n{}",
            c.at,
            c.text,
            match s {
                Some(s) => format!("failed ({s})"),
                None => format!("took over {} s and was killed", LIMIT.as_secs()),
            },
            tail(&err),
            tail(&out)
        )),
    }
}

#[test]
fn every_documented_labperf_command_runs_on_the_bench() {
    let lab = std::env::var_os("LABPERF_LAB_DIR").map(|_| labperf_tests::lab::Lab::debian());
    if let Some(lab) = &lab {
        lab.port();
    }
    let (mut ran, mut not_run, mut misplaced, mut failed) = (0, Vec::new(), Vec::new(), Vec::new());
    for f in doc_files() {
        let name = f.strip_prefix(root()).unwrap().display().to_string();
        let text = std::fs::read_to_string(&f).unwrap();
        let blocks = blocks(&text);
        for b in &blocks {
            for (n, l) in &b.lines {
                let ok = match b.info.as_str() {
                    "console" => !is_labperf(l) || l.starts_with("$ "),
                    "synopsis" => true,
                    _ => !is_labperf(l),
                };
                if !ok {
                    misplaced.push(format!("{name}:{n} (block of line {}): {l}", b.line));
                }
            }
        }
        let console: Vec<(bool, Vec<Cmd>)> = blocks
            .iter()
            .filter(|b| b.info == "console")
            .map(|b| {
                let cmds = commands(&name, b);
                (cmds.iter().any(is_lab), cmds)
            })
            .collect();
        if console.is_empty() {
            continue;
        }
        let with_lab = console.iter().any(|(l, _)| *l);
        let dir = workdir(
            &name.replace(['/', '.'], "-"),
            lab.as_ref().filter(|_| with_lab),
        );
        if with_lab && lab.is_some() {
            // The scratch known_hosts starts empty: the machine's key, as a user's first
            // `probe --accept-new-host-key` records it.
            let probe = Cmd {
                at: format!("{name} (set-up)"),
                text: "labperf probe arm1 --accept-new-host-key".into(),
            };
            if let Err(e) = run(&dir, &probe) {
                failed.push(e);
            }
        }
        for (is_lab_block, cmds) in &console {
            for c in cmds {
                if *is_lab_block && lab.is_none() {
                    println!(
                        "not run (no LABPERF_LAB_DIR, no lab machine): {}: {}",
                        c.at, c.text
                    );
                    not_run.push(c.at.clone());
                    continue;
                }
                match run(&dir, c) {
                    Ok(t) => {
                        println!("ran {} in {:.2} s: {}", c.at, t.as_secs_f64(), c.text);
                        ran += 1;
                    }
                    Err(e) => failed.push(e),
                }
            }
        }
    }
    println!(
        "{ran} documented commands ran, {} not run (a lab machine's), {} failed",
        not_run.len(),
        failed.len()
    );
    assert!(
        misplaced.is_empty(),
        "labperf commands outside a ```console block (`$ labperf …`, run by this test) or a \
         ```synopsis block (syntax, not run):\n{}",
        misplaced.join("\n")
    );
    assert!(
        failed.is_empty(),
        "documented commands that failed:\n\n{}",
        failed.join("\n\n")
    );
    // README's own-program example and views are local: they always run.
    assert!(ran >= 8, "only {ran} documented commands ran");
}

/// A synopsis line's verb (`report`, `hosts check`, …) and the long options it names before
/// its workload (` -- `) and its comment (` #`); `None` for a line that is no labperf command.
fn synopsis_options(line: &str) -> Option<(String, Vec<String>)> {
    let l = line.trim_start();
    let l = l.strip_prefix("$ ").unwrap_or(l).strip_prefix("labperf ")?;
    let l = l.split(" #").next().unwrap().split(" -- ").next().unwrap();
    let words: Vec<&str> = l.split_whitespace().collect();
    let verb = match words.as_slice() {
        ["hosts", sub, ..] => format!("hosts {sub}"),
        [verb, ..] => verb.to_string(),
        [] => return None,
    };
    let options = l
        .split(|c: char| c.is_whitespace() || "[]|=,".contains(c))
        .filter(|w| w.starts_with("--") && w.len() > 2)
        .map(str::to_string)
        .collect();
    Some((verb, options))
}

#[test]
fn every_long_option_of_a_documented_command_is_in_its_verb_s_help() {
    let mut help = std::collections::BTreeMap::new();
    let (mut checked, mut unknown) = (0, Vec::new());
    for f in doc_files() {
        let name = f.strip_prefix(root()).unwrap().display().to_string();
        let text = std::fs::read_to_string(&f).unwrap();
        // Console commands too: the lab ones are not run without a lab machine.
        let checked_blocks = blocks(&text);
        let blocks = checked_blocks
            .iter()
            .filter(|b| b.info == "synopsis" || b.info == "console");
        for b in blocks {
            for (n, l) in &b.lines {
                if b.info == "console" && !l.starts_with("$ ") {
                    continue;
                }
                let Some((verb, options)) = synopsis_options(l) else {
                    continue;
                };
                let text: &String = help.entry(verb.clone()).or_insert_with(|| {
                    let o = Command::new(bin("labperf"))
                        .args(verb.split(' '))
                        .arg("--help")
                        .output()
                        .unwrap();
                    assert!(o.status.success(), "labperf {verb} --help: {o:?}");
                    String::from_utf8_lossy(&o.stdout).into_owned()
                });
                for opt in options {
                    checked += 1;
                    if !text.contains(&format!("{opt} ")) && !text.contains(&format!("{opt}\n")) {
                        unknown.push(format!("{name}:{n}: labperf {verb} has no {opt}"));
                    }
                }
            }
        }
    }
    println!("{checked} long options of documented commands checked against --help");
    assert!(
        unknown.is_empty(),
        "documented options labperf does not take:\n{}",
        unknown.join("\n")
    );
    assert!(checked > 20, "only {checked} options checked");
    // The scan reads what it must.
    assert_eq!(
        synopsis_options("labperf report r.lpr [--pc] [--format table|csv] -- prog --flag # x"),
        Some(("report".into(), vec!["--pc".into(), "--format".into()]))
    );
    assert_eq!(
        synopsis_options("labperf hosts check -J b --hosts-file=h.toml @arm").map(|(v, _)| v),
        Some("hosts check".into())
    );
}
