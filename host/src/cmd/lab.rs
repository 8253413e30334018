//! The one remote flow of the CLI, for `record --host` and `stat --host`: connect (hosts
//! file, ssh config), put the agent there, run it with the workload's output streamed
//! back, fetch its file (and, for recordings, the binaries its samples need), clean up,
//! each host on its own thread; a failing host never stops the others.

use super::opts::RemoteOpts;
use anyhow::Result;
use labperf::lab::board::{Board, Phase};
use labperf::lab::deploy::{self, RunFiles, RunIo};
use labperf::lab::remote::{remote_dir, target_via, HostKeys, Remote};
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

/// The hosts named on the command line, each `@group` replaced by the group's hosts from
/// the hosts file (an inventory's groups; `@all` is every host); none given: every host
/// of the hosts file when `all_by_default`.
pub fn expand(given: &[String], o: &RemoteOpts, all_by_default: bool) -> Result<Vec<String>> {
    let needs_file =
        given.iter().any(|h| h.starts_with('@')) || (given.is_empty() && all_by_default);
    if !needs_file {
        return Ok(given.to_vec());
    }
    let file = labperf::lab::hosts::load(o.hosts.hosts_file.as_deref())?;
    if given.is_empty() {
        if file.hosts.is_empty() {
            anyhow::bail!("no hosts: name them (HOST,... or @group) or list them in the hosts file (--hosts-file, default ~/.config/labperf/hosts.toml)");
        }
        return Ok(file.hosts.keys().cloned().collect());
    }
    let mut out: Vec<String> = Vec::new();
    for h in given {
        match h.strip_prefix('@') {
            Some(g) => {
                let members = file.group(g).ok_or_else(|| {
                    let known: Vec<&str> = file.groups.keys().map(String::as_str).collect();
                    anyhow::anyhow!(
                        "no group '{}' in the hosts file (it has: {})",
                        show(g),
                        if known.is_empty() {
                            "no groups".into()
                        } else {
                            known.join(", ")
                        }
                    )
                })?;
                out.extend(members);
            }
            None => out.push(h.clone()),
        }
    }
    let mut seen = std::collections::HashSet::new();
    out.retain(|h| seen.insert(h.clone()));
    Ok(out)
}

/// Connects to `spec`: a name from the hosts file, or `[user@]host[:port]` / an ssh config name.
pub fn connect(spec: &str, o: &RemoteOpts) -> Result<Connected> {
    let hosts = labperf::lab::hosts::load(o.hosts.hosts_file.as_deref())?;
    let entry = hosts.hosts.get(spec).cloned().unwrap_or_default();
    let address = if entry.address.is_empty() {
        spec
    } else {
        entry.address.as_str()
    };
    let origin = if entry.address.is_empty() {
        "--host".to_string()
    } else {
        let file = o
            .hosts
            .hosts_file
            .clone()
            .unwrap_or_else(labperf::lab::hosts::default_path);
        format!("host '{}' of the hosts file {}", show(spec), file.display())
    };
    let mut t = target_via(address, &origin, o.ssh_config.as_deref(), o.jump.as_deref())?;
    say_unapplied(&t.unapplied);
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

/// Says each ssh_config option labperf does not apply, once per run (not with `-q`).
fn say_unapplied(notes: &[String]) {
    static SAID: std::sync::Mutex<Option<std::collections::HashSet<String>>> =
        std::sync::Mutex::new(None);
    if super::quiet() {
        return;
    }
    let mut said = SAID.lock().unwrap_or_else(|e| e.into_inner());
    let said = said.get_or_insert_with(Default::default);
    for n in notes {
        if said.insert(n.clone()) {
            eprintln!("labperf: {}", show(n));
        }
    }
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

/// Where a recording (`record -o`, `stat -o`) goes, by [`labperf::files::output`]'s rule, checked
/// before anything runs: whether it is a regular file, read back for the report and the
/// binaries (a device or a FIFO is written straight through and not). A directory, a socket
/// and standard output (where the workload's output goes) are refused.
pub fn record_output(path: &Path) -> Result<bool> {
    match labperf::files::output::resolve(path)? {
        labperf::files::output::Dest::Stdout => anyhow::bail!(
            "-o -: a record file does not go to standard output (the workload's output goes there): name a file, a device or a FIFO"
        ),
        d => Ok(d.file().is_some()),
    }
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
    pub push: &'a [labperf::lab::push::Push],
}

/// One host's recording.
pub struct Done {
    pub name: String,
    pub arch: String,
    pub file: PathBuf,
    pub status: i32,
    pub interrupted: bool,
    /// Whether `file` is a regular file that can be read back (not a device or a FIFO
    /// written straight through).
    pub readable: bool,
}

/// The output of one host's run, through the board: the workload's stdout as it comes
/// (each line prefixed with the host when there are several), stderr by lines with the
/// host in front, the agent's progress lines onto the host's board line; control
/// characters escaped wherever a terminal would obey them.
struct HostIo<'a> {
    name: String,
    multi: bool,
    out_line: Vec<u8>,
    err_line: Vec<u8>,
    raw_stdout: bool,
    board: &'a Board,
    index: usize,
}

impl<'a> HostIo<'a> {
    fn new(name: &str, multi: bool, board: &'a Board, index: usize) -> HostIo<'a> {
        HostIo {
            name: show(name).into_owned(),
            multi,
            out_line: Vec::new(),
            err_line: Vec::new(),
            // Piped elsewhere, one host's stdout passes byte for byte, as ssh passes it.
            raw_stdout: !multi && !std::io::stdout().is_terminal(),
            board,
            index,
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

    fn err_line(&self, l: &[u8]) {
        let text = labperf::text::show_bytes(l);
        match labperf::lab::board::agent_progress(&text) {
            Some(p) => self.board.progress(self.index, &p),
            None => self
                .board
                .println(&format!("[{}] {text}", self.name), false),
        }
    }

    fn out_line(&self, l: &[u8]) {
        if self.multi {
            let text = format!("[{}] {}", self.name, labperf::text::show_bytes(l));
            self.board.println(&text, true);
        } else if self.raw_stdout {
            let mut out = std::io::stdout().lock();
            let _ = out.write_all(l);
            let _ = out.write_all(b"\n");
        } else {
            self.board.println(&labperf::text::show_bytes(l), true);
        }
    }

    fn finish(&mut self) {
        let err = std::mem::take(&mut self.err_line);
        let out = std::mem::take(&mut self.out_line);
        Self::flush_lines(&mut err.clone(), true, |l| self.err_line(l));
        Self::flush_lines(&mut out.clone(), true, |l| self.out_line(l));
        let _ = std::io::stdout().flush();
    }
}

impl RunIo for HostIo<'_> {
    fn stdout(&mut self, b: &[u8]) {
        if self.raw_stdout {
            let mut out = std::io::stdout().lock();
            let _ = out.write_all(b);
            let _ = out.flush();
            return;
        }
        let mut buf = std::mem::take(&mut self.out_line);
        buf.extend_from_slice(b);
        Self::flush_lines(&mut buf, false, |l| self.out_line(l));
        self.out_line = buf;
    }
    fn stderr(&mut self, b: &[u8]) {
        let mut buf = std::mem::take(&mut self.err_line);
        buf.extend_from_slice(b);
        Self::flush_lines(&mut buf, false, |l| self.err_line(l));
        self.err_line = buf;
    }
    fn say(&mut self, m: &str) {
        self.board
            .println(&format!("[{}] {}", self.name, show_text(m)), false);
    }
}

/// Runs `job` on host number `index`, telling the board where it is. After a second
/// interrupt every phase stops within a fraction of a second: what this host was writing
/// is removed (here and, within [`deploy::ABORT_GRACE`], there) and it fails as aborted.
fn one(
    spec: &str,
    o: &RemoteOpts,
    job: &Job,
    hosts: usize,
    board: &Board,
    index: usize,
) -> Result<Done> {
    let mut fetched = None;
    let r = one_flow(spec, o, job, hosts, board, index, &mut fetched);
    if !labperf::interrupt::aborting() {
        return r;
    }
    // Aborted: the recording fetched by this run (not one that was there before) goes too;
    // only a regular file is removed, never a device, a FIFO or a link's name.
    if let Some(f) = fetched {
        if let Ok(labperf::files::output::Dest::File(p)) = labperf::files::output::resolve(&f) {
            let _ = std::fs::remove_file(p);
        }
    }
    match r {
        Err(e) if e.downcast_ref::<deploy::RunError>().is_some() => Err(e),
        _ => Err(aborted(spec)),
    }
}

/// Aborted by a second interrupt.
fn aborted(spec: &str) -> anyhow::Error {
    deploy::RunError::Aborted {
        host: show(spec).into_owned(),
    }
    .into()
}

fn one_flow(
    spec: &str,
    o: &RemoteOpts,
    job: &Job,
    hosts: usize,
    board: &Board,
    index: usize,
    fetched: &mut Option<PathBuf>,
) -> Result<Done> {
    let file = output_for(job.output, spec, hosts);
    // Where the file goes is settled before anything runs: a directory or a socket is
    // refused, a device or a FIFO is written straight through and never read back.
    let readable = record_output(&file)?;
    let mut io = HostIo::new(spec, hosts > 1, board, index);
    let h = HostRun {
        spec,
        o,
        job,
        board,
        index,
    };
    board.set(index, Phase::Connecting, "");
    let Connected {
        remote: r,
        remote_dir,
    } = connect(spec, o)?;
    let files = RunFiles::new(&remote_dir);
    let (arch, agent) = h.place_agent(&r, &files, &remote_dir, &mut io)?;
    let command = h.push(&r, &remote_dir, &mut io)?;
    if labperf::interrupt::aborting() {
        return Err(aborted(spec));
    }
    let (finished, got) = h.run(&r, &files, &agent, &command, &file, &mut io)?;
    *fetched = Some(file.clone());
    // A second interrupt that came as the run ended still aborts: nothing is kept.
    // (`one` removes the file, a regular one only.)
    if labperf::interrupt::aborting() {
        return Err(aborted(spec));
    }
    if !got.checksummed {
        io.say("warning: this machine has no SHA-256 tool (sha256sum, busybox, shasum, openssl): the record file was checked by its size only");
    }
    h.binaries(&r, &arch, &file, readable, &got, &mut io)?;
    io.say(&format!("fetched {}", file.display()));
    Ok(Done {
        name: spec.to_string(),
        arch,
        file,
        status: finished.status,
        interrupted: finished.interrupted,
        readable,
    })
}

/// One host's run after it is connected, step by step ([`one_flow`] calls them in order):
/// the agent placed, the pushed files, the run with its record file fetched, the binaries.
struct HostRun<'a> {
    spec: &'a str,
    o: &'a RemoteOpts,
    job: &'a Job<'a>,
    board: &'a Board,
    index: usize,
}

impl HostRun<'_> {
    /// One round trip learns the architecture, the run directory, and which agent is
    /// there; a pushed program for another architecture stops the host here, the run
    /// directory is made, and the agent uploaded unless it is there. Returns the
    /// architecture and the agent's path there.
    fn place_agent(
        &self,
        r: &Remote,
        files: &RunFiles,
        remote_dir: &str,
        io: &mut HostIo,
    ) -> Result<(String, String)> {
        let o = self.o;
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
        let ready = deploy::prepare(r, files, &candidates, remote_dir)?;
        let arch = o.arch.clone().unwrap_or(ready.arch);
        // A pushed program that cannot run there stops the host before anything is put on it.
        labperf::lab::push::check_arch(self.job.push, self.spec, &arch)
            .map_err(|e| anyhow::anyhow!("{e}: nothing was uploaded or run"))?;
        if !ready.runs_ready {
            deploy::make_runs_dir(r, files)?;
        }
        let there = candidates
            .iter()
            .zip(&ready.agents)
            .find(|(c, _)| super::agents::triple_for(&c.arch) == super::agents::triple_for(&arch))
            .and_then(|(_, p)| p.clone());
        let (agent, uploaded) = match there {
            Some(path) => (path, false),
            None => {
                self.board
                    .set(self.index, Phase::Uploading, format!("{arch} agent"));
                let local_agent = super::agents::agent_for(&arch)?;
                deploy::ensure_agent(r, &local_agent, remote_dir)?
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
        Ok((arch, agent))
    }

    /// `--push`: the files put there (each said, uploaded or already there), and the
    /// workload's command naming the pushed copies.
    fn push(&self, r: &Remote, remote_dir: &str, io: &mut HostIo) -> Result<Vec<OsString>> {
        let job = self.job;
        if job.push.is_empty() {
            return Ok(job.command.to_vec());
        }
        self.board.set(
            self.index,
            Phase::Uploading,
            format!("{} pushed", job.push.len()),
        );
        for (p, (path, uploaded)) in job
            .push
            .iter()
            .zip(labperf::lab::push::upload(r, job.push, remote_dir)?)
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
        Ok(labperf::lab::push::rewrite(
            job.command,
            job.push,
            remote_dir,
        ))
    }

    /// Runs the agent (its progress lines feed the host's board line) and fetches its
    /// record file to `file`; a run that did not record saves a killed agent's partial
    /// file, or cleans up there.
    fn run(
        &self,
        r: &Remote,
        files: &RunFiles,
        agent: &str,
        command: &[OsString],
        file: &Path,
        io: &mut HostIo,
    ) -> Result<(deploy::Finished, labperf::lab::remote::Fetched)> {
        let (spec, board, index) = (self.spec, self.board, self.index);
        board.set(index, Phase::Running, "");
        // The agent's progress lines feed the host's board line.
        let mut agent_args = self.job.agent_args.clone();
        agent_args.push("--progress".into());
        let ran = deploy::run_agent(r, agent, files, self.job.verb, &agent_args, command, io);
        io.finish();
        if ran.is_ok() {
            board.set(index, Phase::Fetching, "");
        }
        let done = match ran {
            Ok(interrupted) => {
                deploy::finish(r, files, interrupted, file, self.job.verb == "record").map_err(
                    |e| match e {
                        deploy::RunError::Remote(e) => anyhow::Error::from(e)
                            .context(format!("fetching the record file from {}", show(spec))),
                        e => e.into(),
                    },
                )
            }
            Err(e) => Err(e.into()),
        };
        done.map_err(|e| match e.downcast::<deploy::RunError>() {
            Ok(deploy::RunError::AgentKilled { host, .. }) if !labperf::interrupt::aborting() => {
                let partial = deploy::fetch_partial(r, files, file);
                deploy::RunError::AgentKilled { host, partial }.into()
            }
            Ok(e @ deploy::RunError::Aborted { .. }) => e.into(),
            Ok(e) => {
                deploy::cleanup(r, files);
                e.into()
            }
            Err(e) => {
                deploy::cleanup(r, files);
                e
            }
        })
    }

    /// For a recording to a regular file: the machine noted in the binary cache's index,
    /// the pushed files' symbols seeded there, and the binaries its samples need fetched.
    fn binaries(
        &self,
        r: &Remote,
        arch: &str,
        file: &Path,
        readable: bool,
        got: &labperf::lab::remote::Fetched,
        io: &mut HostIo,
    ) -> Result<()> {
        let job = self.job;
        if job.binaries && !readable {
            io.say(&format!(
                "{} is not a regular file: the binaries were not fetched (record to a file for symbols)",
                file.display()
            ));
        }
        if job.binaries && readable {
            let cache = labperf::files::cache::binaries();
            // Which machine this recording came from: its host key, never what the file says.
            let machine = labperf::files::cache::Machine {
                host_key: r.host_key().to_vec(),
                name: self.spec.to_string(),
                arch: arch.to_string(),
            };
            if let Err(e) =
                labperf::files::cache::note_recording(&cache, got.size, &got.sha256, &machine, file)
            {
                io.say(&format!("warning: the binary cache's index of recordings: {e}: the report may miss this machine's own binaries"));
            }
            for w in labperf::lab::push::seed_cache(job.push, &cache) {
                io.say(&format!("warning: a pushed file's symbols: {w}"));
            }
            self.board.set(self.index, Phase::Fetching, "binaries");
            let key = labperf::files::cache::recording_key(got.size, &got.sha256);
            for w in deploy::fetch_binaries(r, file, &cache, &machine, &key)? {
                io.say(&format!("warning: {w}"));
            }
        }
        Ok(())
    }
}

/// Runs `job` on every host, at most `--jobs` at once (a worker takes the next host as it
/// finishes one, so a slow or dead host holds up one worker for its own timeouts only);
/// each host's phase on the board (`--progress`); results in the order of `hosts`.
pub fn run(hosts: &[String], o: &RemoteOpts, job: &Job) -> Vec<(String, Result<Done>)> {
    labperf::interrupt::install_remote();
    let board = Board::new(hosts, o.progress, std::io::stderr().is_terminal());
    let (done_tx, done_rx) = std::sync::mpsc::channel::<()>();
    let results = std::thread::scope(|sc| {
        // The running times move on a live board; it stops the moment every host is done.
        let b = &board;
        sc.spawn(move || {
            while let Err(std::sync::mpsc::RecvTimeoutError::Timeout) =
                done_rx.recv_timeout(std::time::Duration::from_millis(250))
            {
                b.tick();
            }
        });
        let r = each_host(hosts, o.jobs(), |i, h| {
            let r = one(h, o, job, hosts.len(), &board, i);
            match &r {
                Ok(d) => board.set(i, Phase::Done, d.file.display().to_string()),
                Err(e) => board.fail(i, &format!("{e:#}")),
            }
            r
        });
        drop(done_tx);
        r
    });
    board.finish();
    hosts.iter().cloned().zip(results).collect()
}

/// `f` on every host, at most `jobs` at once: a worker takes the next host as it finishes
/// one, so a slow or dead host holds up one worker for its own timeouts only. Results in
/// the order of `hosts`.
pub fn each_host<T: Send>(
    hosts: &[String],
    jobs: usize,
    f: impl Fn(usize, &str) -> Result<T> + Sync,
) -> Vec<Result<T>> {
    let next = std::sync::atomic::AtomicUsize::new(0);
    let slots: Vec<std::sync::Mutex<Option<Result<T>>>> =
        hosts.iter().map(|_| std::sync::Mutex::new(None)).collect();
    std::thread::scope(|sc| {
        for _ in 0..jobs.clamp(1, hosts.len().max(1)) {
            sc.spawn(|| loop {
                let i = next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                let Some(h) = hosts.get(i) else { break };
                // After a second interrupt no further host is started.
                let r = if labperf::interrupt::aborting() {
                    Err(labperf::lab::deploy::RunError::Aborted {
                        host: show(h).into_owned(),
                    }
                    .into())
                } else {
                    f(i, h)
                };
                *slots[i].lock().unwrap_or_else(|e| e.into_inner()) = Some(r);
            });
        }
    });
    slots
        .into_iter()
        .map(|m| {
            m.into_inner()
                .unwrap_or_else(|e| e.into_inner())
                .unwrap_or_else(|| Err(anyhow::anyhow!("this host was not run")))
        })
        .collect()
}

/// With several hosts, the summary table: host, architecture, samples and lost samples of
/// the fetched file, the file, the status (a failure's error was said once, as it failed,
/// by [`Board::fail`]). Returns how many failed.
pub fn summary(results: &[(String, Result<Done>)]) -> usize {
    let failed = results.iter().filter(|(_, r)| r.is_err()).count();
    if results.len() > 1 {
        eprintln!(
            "summary: {} of {} hosts recorded",
            results.len() - failed,
            results.len()
        );
        eprint!(
            "{}",
            summary_table(results).render(labperf::render::table::Format::Table, 0, false)
        );
    }
    failed
}

/// The hosts' table (the table model, rendered as every table is).
fn summary_table(results: &[(String, Result<Done>)]) -> labperf::render::table::Report {
    use labperf::render::table::{Cell, Column, Table};
    let mut t = Table::new(
        "hosts",
        vec![
            Column::left("host", "Host", 12),
            Column::left("arch", "Arch", 7),
            Column::right("samples", "Samples", 9),
            Column::right("lost", "Lost", 6),
            Column::left("file", "File", 20),
            Column::left("status", "Status", 0),
        ],
    );
    t.ranked = false;
    for (host, r) in results {
        t.rows.push(match r {
            Ok(d) => {
                let trailer = d
                    .readable
                    .then(|| labperf::record::load::stream(&d.file.as_path().into(), |_| {}).ok())
                    .flatten()
                    .and_then(|i| i.trailer);
                vec![
                    Cell::text(show(host)),
                    Cell::text(show(&d.arch)),
                    trailer
                        .as_ref()
                        .map_or(Cell::Empty, |t| Cell::Int(t.samples)),
                    trailer.as_ref().map_or(Cell::Empty, |t| Cell::Int(t.lost)),
                    Cell::text(d.file.display().to_string()),
                    Cell::text(match (d.interrupted, d.status) {
                        (true, _) => "ok (interrupted)".to_string(),
                        (false, 0) => "ok".to_string(),
                        (false, n) => format!(
                            "ok (the workload {})",
                            labperf::text::workload_end(n, d.arch != "alpha")
                        ),
                    }),
                ]
            }
            Err(_) => vec![
                Cell::text(show(host)),
                Cell::Empty,
                Cell::Empty,
                Cell::Empty,
                Cell::Empty,
                Cell::text("FAILED"),
            ],
        });
    }
    labperf::render::table::Report {
        view: "hosts",
        tables: vec![t],
        ..Default::default()
    }
}
