//! `record --host`: the same recording on lab machines over SSH, several at once.

use super::record::{agent_for, Args, RemoteOpts};
use anyhow::{bail, Context, Result};
use labperf::deploy;
use labperf::remote::{parse_target, HostKeys, Remote};
use std::io::Write;
use std::path::PathBuf;
use std::time::Duration;

struct Done {
    name: String,
    file: PathBuf,
    symfs: Vec<PathBuf>,
    status: i32,
}

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
    let remote = Remote::connect(&t, &keys, &ids, Duration::from_secs(o.connect_timeout))?;
    Ok(Connected {
        remote,
        remote_dir: entry.remote_dir.unwrap_or_else(|| o.remote_dir.clone()),
    })
}

/// Output file for one host: the given name, or `<stem>-<host>.lpr` when recording on several.
fn output_for(a: &Args, name: &str) -> PathBuf {
    if a.host.len() == 1 {
        return a.rec.output.clone();
    }
    let stem = a
        .rec
        .output
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
    a.rec.output.with_file_name(format!("{stem}-{safe}.lpr"))
}

/// The target's architecture: `--arch`, or what its `uname -m` says.
pub fn target_arch(r: &Remote, o: &RemoteOpts) -> Result<String> {
    Ok(match &o.arch {
        Some(arch) => arch.clone(),
        None => deploy::arch(r)?,
    })
}

fn one(spec: &str, a: &Args, agent_args: &[String]) -> Result<Done> {
    let say = |m: &str| eprintln!("[{spec}] {m}");
    let Connected {
        remote: r,
        remote_dir,
    } = connect(spec, &a.ssh)?;
    let arch = target_arch(&r, &a.ssh)?;
    let local_agent = agent_for(&arch)?;
    let (agent, uploaded) = deploy::ensure_agent(&r, &local_agent, &remote_dir)?;
    say(&format!(
        "{arch}: agent {} ({})",
        agent,
        if uploaded {
            "uploaded"
        } else {
            "already there"
        }
    ));
    let mut line = Vec::new();
    let (remote_file, status) = deploy::run_agent(
        &r,
        &agent,
        &a.ssh.remote_dir,
        "record",
        agent_args,
        &a.command,
        |b| {
            line.extend_from_slice(b);
            while let Some(i) = line.iter().position(|&c| c == b'\n') {
                let l: Vec<u8> = line.drain(..=i).collect();
                eprint!("[{spec}] {}", String::from_utf8_lossy(&l));
            }
        },
    )?;
    let _ = std::io::stderr().flush();
    match status {
        125 => bail!("the agent on {spec} could not record (its message is above); nothing was profiled"),
        127 => bail!("the workload '{}' could not be started on {spec} (see above)", a.command[0]),
        137 => bail!("the agent on {spec} was killed (SIGKILL or the connection was cut); no complete record file was fetched"),
        _ => {}
    }
    let file = output_for(a, spec);
    deploy::fetch_record(&r, &remote_file, &file)
        .with_context(|| format!("fetching the record file from {spec}"))?;
    let (symfs, warnings) =
        deploy::fetch_binaries(&r, &file, &deploy::local_cache().join("binaries"));
    for w in warnings {
        say(&format!("warning: {w}"));
    }
    say(&format!("fetched {}", file.display()));
    Ok(Done {
        name: spec.to_string(),
        file,
        symfs,
        status,
    })
}

pub fn record(a: &Args, agent_args: &[String]) -> Result<()> {
    let results: Vec<(String, Result<Done>)> = std::thread::scope(|sc| {
        let handles: Vec<_> = a
            .host
            .iter()
            .map(|h| (h.clone(), sc.spawn(move || one(h, a, agent_args))))
            .collect();
        handles
            .into_iter()
            .map(|(h, j)| {
                (
                    h,
                    j.join().unwrap_or_else(|_| {
                        Err(anyhow::anyhow!("the worker for this host panicked"))
                    }),
                )
            })
            .collect()
    });
    let mut failed = 0;
    let mut worst_status = 0;
    for (host, r) in &results {
        match r {
            Ok(d) => {
                if !a.no_report {
                    if a.host.len() > 1 {
                        println!("== {} ==", d.name);
                    }
                    let mut opts = a.report.clone();
                    opts.symfs.extend(d.symfs.iter().cloned());
                    if let Err(e) = super::report::print(&d.file, &opts) {
                        eprintln!("[{host}] error: {e:#}");
                        failed += 1;
                    }
                }
                if d.status != 0 {
                    worst_status = d.status;
                }
            }
            Err(e) => {
                eprintln!("[{host}] error: {e:#}");
                failed += 1;
            }
        }
    }
    if a.host.len() > 1 {
        eprintln!(
            "summary: {} of {} hosts recorded",
            results.len() - failed,
            results.len()
        );
        for (host, r) in &results {
            eprintln!(
                "  {host}: {}",
                match r {
                    Ok(d) => format!("ok, {}", d.file.display()),
                    Err(e) => format!("FAILED: {}", format!("{e:#}").lines().next().unwrap_or("")),
                }
            );
        }
    }
    if failed > 0 {
        bail!("{failed} of {} host(s) failed (see above)", results.len());
    }
    if worst_status != 0 {
        eprintln!("note: the workload exited with status {worst_status}");
        std::process::exit(worst_status);
    }
    Ok(())
}
