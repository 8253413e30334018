//! The one remote flow of the CLI, for `record --host` and `stat --host`: connect (hosts
//! file, ssh config), put the agent there, run it with the workload's output streamed
//! back, fetch its file (and, for recordings, the binaries its samples need), clean up,
//! each host on its own thread; a failing host never stops the others.

use super::opts::RemoteOpts;
use anyhow::Result;
use labperf::deploy::{self, RunFiles, RunIo};
use labperf::remote::{parse_target, remote_dir, HostKeys, Remote};
use labperf::text::{show, show_text};
use std::ffi::OsString;
use std::io::{IsTerminal, Write};
use std::path::{Path, PathBuf};
use std::time::Duration;

/// A connected lab machine and the remote directory to use there.
pub struct Connected {
    pub remote: Remote,
    pub remote_dir: String,
}

/// Connects to `spec`: a name from the hosts file, or `[user@]host[:port]` / an ssh config name.
pub fn connect(spec: &str, o: &RemoteOpts) -> Result<Connected> {
    let hosts = labperf::hosts::load(o.hosts_file.as_deref())?;
    let entry = hosts.hosts.get(spec).cloned().unwrap_or_default();
    let address = if entry.address.is_empty() {
        spec
    } else {
        entry.address.as_str()
    };
    let mut t = parse_target(address, o.ssh_config.as_deref())?;
    if !entry.address.is_empty() {
        t.name = spec.to_string();
    }
    let known = o
        .known_hosts
        .clone()
        .or(entry.known_hosts)
        .unwrap_or_else(|| HostKeys::default().file);
    let keys = HostKeys {
        file: known,
        accept_new: o.accept_new_host_key,
    };
    let mut ids = o.identity.clone();
    ids.extend(entry.identity);
    let dir = o
        .remote_dir
        .clone()
        .or(entry.remote_dir)
        .unwrap_or_else(|| ".cache/labperf".into());
    let remote_dir = remote_dir(&dir)?;
    let remote = Remote::connect(&t, &keys, &ids, Duration::from_secs(o.connect_timeout))?;
    Ok(Connected { remote, remote_dir })
}

/// The target's architecture: `--arch`, or what its `uname -m` says.
pub fn target_arch(r: &Remote, o: &RemoteOpts) -> Result<String> {
    Ok(match &o.arch {
        Some(arch) => arch.clone(),
        None => deploy::arch(r)?,
    })
}

/// Output file for one host: the given name, or `<stem>-<host>.lpr` when there are several.
pub fn output_for(output: &Path, name: &str, hosts: usize) -> PathBuf {
    if hosts == 1 {
        return output.to_path_buf();
    }
    let stem = output
        .file_stem()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_else(|| "labperf".into());
    let safe: String = name
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || "-_.".contains(c) {
                c
            } else {
                '_'
            }
        })
        .collect();
    output.with_file_name(format!("{stem}-{safe}.lpr"))
}

/// What to run on each host.
pub struct Job<'a> {
    /// `record` or `stat`.
    pub verb: &'a str,
    pub agent_args: Vec<String>,
    pub command: &'a [OsString],
    /// The local file (per host: see [`output_for`]).
    pub output: &'a Path,
    /// Fetch the binaries the samples need (recordings).
    pub binaries: bool,
    /// `--push`: files put on each host before the run (read once, here).
    pub push: &'a [labperf::push::Push],
}

/// One host's recording.
pub struct Done {
    pub name: String,
    pub file: PathBuf,
    pub status: i32,
    pub interrupted: bool,
}

/// The output of one host's run: the workload's stdout as it comes (each line prefixed with
/// the host when there are several), stderr by lines with the host in front; control
/// characters escaped wherever a terminal would obey them.
struct HostIo {
    name: String,
    multi: bool,
    out_line: Vec<u8>,
    err_line: Vec<u8>,
    raw_stdout: bool,
}

impl HostIo {
    fn new(name: &str, multi: bool) -> HostIo {
        HostIo {
            name: show(name).into_owned(),
            multi,
            out_line: Vec::new(),
            err_line: Vec::new(),
            // Piped elsewhere, one host's stdout passes byte for byte, as ssh passes it.
            raw_stdout: !multi && !std::io::stdout().is_terminal(),
        }
    }

    fn flush_lines(buf: &mut Vec<u8>, all: bool, mut emit: impl FnMut(&[u8])) {
        while let Some(i) = buf.iter().position(|&c| c == b'\n') {
            let l: Vec<u8> = buf.drain(..=i).collect();
            emit(&l[..l.len() - 1]);
        }
        if all && !buf.is_empty() {
            let l = std::mem::take(buf);
            emit(&l);
        }
    }

    fn finish(&mut self) {
        let name = self.name.clone();
        Self::flush_lines(&mut self.err_line, true, |l| {
            eprintln!("[{name}] {}", labperf::text::show_bytes(l));
        });
        let (multi, raw) = (self.multi, self.raw_stdout);
        Self::flush_lines(&mut self.out_line, true, |l| {
            print_stdout_line(&name, multi, raw, l);
        });
        let _ = std::io::stdout().flush();
    }
}

fn print_stdout_line(name: &str, multi: bool, raw: bool, l: &[u8]) {
    let mut out = std::io::stdout().lock();
    if multi {
        let _ = writeln!(out, "[{name}] {}", labperf::text::show_bytes(l));
    } else if raw {
        let _ = out.write_all(l);
        let _ = out.write_all(b"\n");
    } else {
        let _ = writeln!(out, "{}", labperf::text::show_bytes(l));
    }
}

impl RunIo for HostIo {
    fn stdout(&mut self, b: &[u8]) {
        if self.raw_stdout {
            let mut out = std::io::stdout().lock();
            let _ = out.write_all(b);
            let _ = out.flush();
            return;
        }
        self.out_line.extend_from_slice(b);
        let (name, multi) = (self.name.clone(), self.multi);
        Self::flush_lines(&mut self.out_line, false, |l| {
            print_stdout_line(&name, multi, false, l);
        });
    }
    fn stderr(&mut self, b: &[u8]) {
        self.err_line.extend_from_slice(b);
        let name = self.name.clone();
        Self::flush_lines(&mut self.err_line, false, |l| {
            eprintln!("[{name}] {}", labperf::text::show_bytes(l));
        });
    }
    fn say(&mut self, m: &str) {
        eprintln!("[{}] {}", self.name, show_text(m));
    }
}

/// Runs `job` on one host.
fn one(spec: &str, o: &RemoteOpts, job: &Job, hosts: usize) -> Result<Done> {
    let interrupts = labperf::interrupt::count();
    let mut io = HostIo::new(spec, hosts > 1);
    let Connected {
        remote: r,
        remote_dir,
    } = connect(spec, o)?;
    let files = RunFiles::new(&remote_dir);
    // One round trip: the architecture, the run directory, and which agent is there.
    let candidates: Vec<deploy::Candidate> = match &o.arch {
        Some(a) => vec![a.as_str()],
        None => vec!["x86_64", "aarch64", "alpha"],
    }
    .into_iter()
    .filter_map(|a| {
        let local = super::agents::agent_for(a).ok()?;
        deploy::Candidate::read(a, &local).ok()
    })
    .collect();
    let ready = deploy::prepare(&r, &files, &candidates, &remote_dir)?;
    let arch = o.arch.clone().unwrap_or(ready.arch);
    // A pushed program that cannot run there stops the host before anything is put on it.
    labperf::push::check_arch(job.push, spec, &arch)
        .map_err(|e| anyhow::anyhow!("{e}: nothing was uploaded or run"))?;
    if !ready.runs_ready {
        deploy::make_runs_dir(&r, &files)?;
    }
    let there = candidates
        .iter()
        .zip(&ready.agents)
        .find(|(c, _)| super::agents::triple_for(&c.arch) == super::agents::triple_for(&arch))
        .and_then(|(_, p)| p.clone());
    let (agent, uploaded) = match there {
        Some(path) => (path, false),
        None => {
            let local_agent = super::agents::agent_for(&arch)?;
            deploy::ensure_agent(&r, &local_agent, &remote_dir)?
        }
    };
    io.say(&format!(
        "{arch}: agent {} ({})",
        show(&agent),
        if uploaded {
            "uploaded"
        } else {
            "already there"
        }
    ));
    let mut command = job.command.to_vec();
    if !job.push.is_empty() {
        for (p, (path, uploaded)) in
            job.push
                .iter()
                .zip(labperf::push::upload(&r, job.push, &remote_dir)?)
        {
            io.say(&format!(
                "pushed {} to {} ({})",
                p.given.display(),
                show(&path),
                if uploaded {
                    "uploaded"
                } else {
                    "already there"
                }
            ));
        }
        command = labperf::push::rewrite(job.command, job.push, &remote_dir);
    }
    let file = output_for(job.output, spec, hosts);
    let ran = deploy::run_agent(
        &r,
        &agent,
        &files,
        job.verb,
        &job.agent_args,
        &command,
        &mut io,
    );
    io.finish();
    let done = match ran {
        Ok(interrupted) => deploy::finish(&r, &files, interrupted, &file).map_err(|e| match e {
            deploy::RunError::Remote(e) => anyhow::Error::from(e)
                .context(format!("fetching the record file from {}", show(spec))),
            e => e.into(),
        }),
        Err(e) => Err(e.into()),
    };
    let (finished, got) = match done {
        Ok(f) => f,
        Err(e) => {
            return Err(match e.downcast::<deploy::RunError>() {
                Ok(deploy::RunError::AgentKilled { host, .. }) => {
                    let partial = deploy::fetch_partial(&r, &files, &file);
                    deploy::RunError::AgentKilled { host, partial }.into()
                }
                Ok(e) => {
                    deploy::cleanup(&r, &files);
                    e.into()
                }
                Err(e) => {
                    deploy::cleanup(&r, &files);
                    e
                }
            });
        }
    };
    // A second interrupt that came as the run ended still aborts: nothing is kept.
    if labperf::interrupt::count().wrapping_sub(interrupts) >= 2 {
        let _ = std::fs::remove_file(&file);
        return Err(deploy::RunError::Aborted {
            host: show(spec).into_owned(),
        }
        .into());
    }
    if !got.checksummed {
        io.say("warning: this machine has no SHA-256 tool (sha256sum, busybox, shasum, openssl): the record file was checked by its size only");
    }
    if job.binaries {
        let cache = labperf::cache::binaries();
        for w in labperf::push::seed_cache(job.push, &cache) {
            io.say(&format!("warning: a pushed file's symbols: {w}"));
        }
        for w in deploy::fetch_binaries(&r, &file, &labperf::cache::binaries()) {
            io.say(&format!("warning: {w}"));
        }
    }
    io.say(&format!("fetched {}", file.display()));
    Ok(Done {
        name: spec.to_string(),
        file,
        status: finished.status,
        interrupted: finished.interrupted,
    })
}

/// Runs `job` on every host, at most `--jobs` at once (a worker takes the next host as it
/// finishes one, so a slow or dead host holds up one worker for its own timeouts only);
/// results in the order of `hosts`.
pub fn run(hosts: &[String], o: &RemoteOpts, job: &Job) -> Vec<(String, Result<Done>)> {
    labperf::interrupt::install();
    let next = std::sync::atomic::AtomicUsize::new(0);
    let results: Vec<std::sync::Mutex<Option<Result<Done>>>> =
        hosts.iter().map(|_| std::sync::Mutex::new(None)).collect();
    std::thread::scope(|sc| {
        for _ in 0..o.jobs().min(hosts.len()) {
            sc.spawn(|| loop {
                let i = next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                let Some(h) = hosts.get(i) else { break };
                let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                    one(h, o, job, hosts.len())
                }))
                .unwrap_or_else(|_| Err(anyhow::anyhow!("the worker for this host panicked")));
                *results[i].lock().unwrap_or_else(|e| e.into_inner()) = Some(r);
            });
        }
    });
    hosts
        .iter()
        .cloned()
        .zip(results)
        .map(|(h, r)| {
            let r = r.into_inner().unwrap_or_else(|e| e.into_inner());
            (
                h,
                r.unwrap_or_else(|| Err(anyhow::anyhow!("this host was not run"))),
            )
        })
        .collect()
}

/// Prints the per-host summary (several hosts) and returns how many failed.
pub fn summary(results: &[(String, Result<Done>)]) -> usize {
    let failed = results.iter().filter(|(_, r)| r.is_err()).count();
    for (host, r) in results {
        if let Err(e) = r {
            eprintln!("[{}] error: {e:#}", show(host));
        }
    }
    if results.len() > 1 {
        eprintln!(
            "summary: {} of {} hosts recorded",
            results.len() - failed,
            results.len()
        );
        for (host, r) in results {
            eprintln!(
                "  {}: {}",
                show(host),
                match r {
                    Ok(d) => format!("ok, {}", d.file.display()),
                    Err(e) => format!("FAILED: {}", format!("{e:#}").lines().next().unwrap_or("")),
                }
            );
        }
    }
    failed
}
