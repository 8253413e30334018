//! `labperf hosts check|list`: the lab from the hosts file (TOML or an Ansible inventory):
//! each host checked for what a recording needs (reachable, host key, login, architecture,
//! perf_event_paranoid, a hardware PMU, free space), with the fix for what is missing.

use super::lab::{connect, each_host, expand, Connected};
use super::opts::{help, FormatOpt, HostsArg, HostsFileOpt, RemoteOpts};
use anyhow::{bail, Result};
use labperf::lab::remote::{shell_quote, RemoteError};
use labperf::render::table::{Cell, Column, Table};
use labperf::text::show;

/// Check or list the lab machines of the hosts file.
#[derive(Debug, clap::Args)]
#[command(
    after_help = "EXAMPLES:\n  labperf hosts check                        # every host of ~/.config/labperf/hosts.toml\n  labperf hosts check --hosts-file inventory.yml @arm\n  labperf hosts list --hosts-file inventory.ini\n\nExit status: 1 when a host cannot record (unreachable, unknown or changed host key,\nlogin refused, no agent for its architecture, profiling not allowed, no room)."
)]
pub struct Args {
    #[command(subcommand)]
    pub what: What,
}

#[derive(Debug, clap::Subcommand)]
pub enum What {
    /// Connect to each host and say what a recording there needs, with the fix.
    Check(Check),
    /// The hosts and groups the hosts file names, with their addresses.
    List(List),
}

#[derive(Debug, clap::Args)]
#[command(
    mut_arg("format", |a| a.help(None::<&str>)),
    after_help = "EXAMPLES:\n  labperf hosts check                        # every host of the hosts file\n  labperf hosts check arm1,@x86 --format csv\n  labperf hosts check --hosts-file inventory.yml @arm"
)]
pub struct Check {
    #[command(flatten)]
    pub hosts: HostsArg,
    #[command(flatten)]
    pub ssh: RemoteOpts,
    #[command(flatten)]
    pub format: FormatOpt,
}

#[derive(Debug, clap::Args)]
#[command(
    mut_arg(
        "hosts_file",
        help("Hosts file [default: ~/.config/labperf/hosts.toml]")
    ),
    after_help = "EXAMPLES:\n  labperf hosts list\n  labperf hosts list --hosts-file inventory.ini"
)]
pub struct List {
    #[command(flatten)]
    pub hosts: HostsFileOpt,
}

/// Least free space in the remote directory for the agent and a recording.
const MIN_FREE_KIB: u64 = 64 << 10;

/// What one command there says (`$d`: the remote directory, or its nearest existing parent).
const FACTS: &str = "uname -m; cat /proc/sys/kernel/perf_event_paranoid 2>/dev/null || echo none; id -u; ls /sys/bus/event_source/devices 2>/dev/null | tr '\\n' ' '; echo; while [ ! -d \"$d\" ] && [ \"$d\" != \"${d%/*}\" ]; do d=${d%/*}; done; [ -d \"$d\" ] || d=.; df -Pk \"$d\" | tail -n 1";

/// One host's verdict: the facts found, what is wrong (empty: ready) and the fixes.
struct Verdict {
    arch: String,
    paranoid: String,
    pmu: String,
    free: String,
    problems: Vec<String>,
    fixes: Vec<String>,
    notes: Vec<String>,
}

impl Verdict {
    fn failed(problem: &str, fix: String) -> Verdict {
        Verdict {
            arch: String::new(),
            paranoid: String::new(),
            pmu: String::new(),
            free: String::new(),
            problems: vec![problem.into()],
            fixes: vec![fix],
            notes: Vec::new(),
        }
    }
}

/// Why a connection failed, as a verdict with its fix.
fn connection_verdict(e: &anyhow::Error, host: &str) -> Verdict {
    match e.downcast_ref::<RemoteError>() {
        Some(RemoteError::Unreachable { host, port, cause }) => Verdict::failed(
            "unreachable",
            format!("{}:{port}: {cause}: check its address and port (ssh config or hosts file), that the machine is up and sshd runs there", show(host)),
        ),
        Some(e @ RemoteError::ForwardingRefused { .. }) => {
            Verdict::failed("jump host refuses", e.to_string())
        }
        Some(e @ RemoteError::UnknownHost { .. }) => Verdict::failed("unknown host key", e.to_string()),
        Some(RemoteError::HostKeyChanged { .. }) => Verdict::failed(
            "HOST KEY CHANGED",
            format!("a reinstalled machine or an attack: confirm the new key with its owner, then remove the old entry (ssh-keygen -R) and connect once with --accept-new-host-key ({})", show(host)),
        ),
        Some(RemoteError::HostKeyRevoked { .. }) => Verdict::failed(
            "host key revoked",
            "the key is marked @revoked in known_hosts: do not connect".into(),
        ),
        Some(RemoteError::AuthFailed { .. }) => Verdict::failed(
            "login refused",
            "load the key into ssh-agent, set identity (or ansible_ssh_private_key_file) for this host, or pass --identity".into(),
        ),
        _ => Verdict::failed("cannot connect", format!("{e:#}")),
    }
}

fn check_one(host: &str, o: &RemoteOpts) -> Verdict {
    let Connected { remote, remote_dir } = match connect(host, o) {
        Ok(c) => c,
        Err(e) => return connection_verdict(&e, host),
    };
    let out = match remote.run(
        &format!("d={}; {FACTS}", shell_quote(&remote_dir)),
        None,
        labperf::lab::remote::SMALL_OUTPUT,
    ) {
        Ok(o) => String::from_utf8_lossy(&o.stdout).into_owned(),
        Err(e) => return Verdict::failed("cannot run commands", e.to_string()),
    };
    let lines: Vec<&str> = out.lines().collect();
    let get = |i: usize| lines.get(i).map_or("", |l| l.trim());
    let (arch, paranoid, uid, pmus) = (get(0), get(1), get(2), get(3));
    let free_kib: Option<u64> = get(4)
        .split_whitespace()
        .nth(3)
        .and_then(|n| n.parse().ok());
    let mut v = Verdict {
        arch: arch.into(),
        paranoid: paranoid.into(),
        pmu: String::new(),
        free: free_kib.map_or("?".into(), |k| format!("{} MiB", k >> 10)),
        problems: Vec::new(),
        fixes: Vec::new(),
        notes: Vec::new(),
    };
    let arch = o.arch.clone().unwrap_or_else(|| arch.to_string());
    if super::agents::agent_for(&arch).is_err() {
        v.problems.push(format!("no agent for {}", show(&arch)));
        v.fixes.push(format!(
            "cargo xtask build-agents --target {} (labperf has x86_64, aarch64 and alpha)",
            show(&arch)
        ));
    }
    let root = uid == "0";
    match paranoid.parse::<i32>() {
        Err(_) => {
            v.problems.push("no perf events".into());
            v.fixes.push("a kernel with CONFIG_PERF_EVENTS".into());
        }
        Ok(p) if p > 2 && !root => {
            v.problems
                .push(format!("paranoid {p}: no profiling for this user"));
            v.fixes
                .push("sysctl -w kernel.perf_event_paranoid=2 there (or log in as root)".into());
        }
        Ok(p) if p > 0 && !root => v
            .notes
            .push("-a (the whole machine) needs root, CAP_PERFMON or paranoid <= 0".into()),
        Ok(_) => {}
    }
    let hardware: Vec<&str> = pmus
        .split_whitespace()
        .filter(|n| {
            matches!(*n, "cpu" | "cpu_core" | "cpu_atom")
                || n.starts_with("armv8")
                || n.starts_with("armv7")
                || n.starts_with("arm_")
        })
        .collect();
    v.pmu = if hardware.is_empty() {
        v.notes
            .push("no hardware PMU: cpu-clock sampling only (a VM: enable its virtual PMU)".into());
        "software only".into()
    } else {
        hardware.join(",")
    };
    match free_kib {
        Some(k) if k < MIN_FREE_KIB => {
            v.problems.push(format!("{} MiB free", k >> 10));
            v.fixes.push(format!(
                "free space under {} or set remote_dir (labperf_remote_dir) to a larger file system",
                show(&remote_dir)
            ));
        }
        Some(_) => {}
        None => v.notes.push("free space unknown (no df output)".into()),
    }
    v
}

pub fn run(a: &Args) -> Result<()> {
    match &a.what {
        What::List(l) => list(l),
        What::Check(c) => check(c),
    }
}

fn check(c: &Check) -> Result<()> {
    let hosts = expand(&c.hosts.hosts, &c.ssh, true)?;
    let verdicts = each_host(&hosts, c.ssh.jobs(), |_, h| Ok(check_one(h, &c.ssh)));
    let mut t = Table::new(
        "hosts",
        vec![
            Column::left("host", "Host", 12),
            Column::left("arch", "Arch", 7),
            Column::right("paranoid", "Paranoid", 8),
            Column::left("pmu", "PMU", 12),
            Column::right("free", "Free", 9),
            Column::left("verdict", "Verdict", 16),
            Column::left("fix", "Fix", 0),
        ],
    );
    t.ranked = false;
    let mut bad = 0;
    for (h, v) in hosts.iter().zip(verdicts) {
        let v = v.unwrap_or_else(|e| Verdict::failed("cannot check", format!("{e:#}")));
        let text = |s: &str| {
            if s.is_empty() {
                Cell::Empty
            } else {
                Cell::text(show(s))
            }
        };
        let verdict = if v.problems.is_empty() {
            if v.notes.is_empty() {
                "ready".to_string()
            } else {
                "ready (see notes)".to_string()
            }
        } else {
            bad += 1;
            v.problems.join("; ")
        };
        let mut fix = v.fixes.join("; ");
        if !v.notes.is_empty() {
            if !fix.is_empty() {
                fix.push_str("; ");
            }
            fix.push_str(&format!("note: {}", v.notes.join("; ")));
        }
        t.rows.push(vec![
            Cell::text(show(h)),
            text(&v.arch),
            // A number (-1 is one) is a number cell; anything else what the host said.
            match v.paranoid.parse::<i32>() {
                Ok(p) => Cell::Shown {
                    text: p.to_string(),
                    value: serde_json::json!(p),
                },
                Err(_) => text(&v.paranoid),
            },
            text(&v.pmu),
            text(&v.free),
            Cell::text(verdict),
            text(&fix),
        ]);
    }
    let r = labperf::render::table::Report {
        view: "hosts",
        tables: vec![t],
        ..Default::default()
    };
    print!("{}", r.render(c.format.get(), 0, false));
    if bad > 0 {
        bail!(
            "{bad} of {} cannot record (see the Fix column)",
            labperf::text::plural(hosts.len() as u64, "host", "hosts")
        );
    }
    Ok(())
}

fn list(l: &List) -> Result<()> {
    let f = labperf::lab::hosts::load(l.hosts.hosts_file.as_deref())?;
    for (name, h) in &f.hosts {
        println!("{}  {}", show(name), show(&h.address));
    }
    for (g, members) in &f.groups {
        println!("@{}: {}", show(g), show(&members.join(", ")));
    }
    Ok(())
}
