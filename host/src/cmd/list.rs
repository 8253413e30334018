//! `labperf list [PMU]`: the events `-e` takes on this machine (or on lab machines with
//! `--host`, their sysfs read as `probe` reads it).

use super::event_names::{local_pmus, Pmus, HARDWARE, SOFTWARE, SYSFS};
use super::opts::{HostOpt, RemoteOpts};
use anyhow::{bail, Result};
use labperf::text::{show, show_text};
use std::path::Path;

/// List the events `-e` takes: software, hardware (when there is a hardware PMU), and the
/// events of each PMU in /sys/bus/event_source/devices.
#[derive(Debug, clap::Args)]
#[command(
    after_help = "Tracepoints are not listed: labperf records no tracepoint (`perf list tracepoint` lists them).\n\nEXAMPLES:\n  labperf list\n  labperf list msr                 # one PMU's events and format terms\n  labperf list --host arm1         # a lab machine's (its /sys, read over SSH)\n  labperf record -e cpu-clock -c 100000 -- ./my-prog"
)]
pub struct Args {
    /// Only this PMU's events, and its format terms (for pmu/term=val,.../).
    pub pmu: Option<String>,
    #[command(flatten)]
    pub hosts: HostOpt,
    #[command(flatten)]
    pub ssh: RemoteOpts,
}

/// Whether one of these PMUs takes the generic hardware events: the CPU's own (perf's
/// raw type 4, `cpu`, a hybrid `cpu_core`/`cpu_atom`, or an Arm `armv*` PMU).
fn hardware_pmu(pmus: &Pmus) -> Option<&str> {
    pmus.iter()
        .find(|(n, t, _, _)| {
            t == "4" || n == "cpu" || n.starts_with("cpu_") || n.starts_with("armv")
        })
        .map(|p| p.0.as_str())
}

/// The listing: one event a line, as perf lists them (`name OR alias  [kind]`).
fn render(pmus: &Pmus, filter: Option<&str>) -> String {
    let mut out = String::new();
    let line = |out: &mut String, names: &[&str], kind: &str| {
        out.push_str(&format!("  {:<48} [{kind}]\n", names.join(" OR ")));
    };
    if filter.is_none() {
        for n in SOFTWARE {
            line(&mut out, n, "Software event");
        }
        match hardware_pmu(pmus) {
            Some(p) => {
                for n in HARDWARE {
                    line(&mut out, n, &format!("Hardware event, PMU {}", show(p)));
                }
            }
            None => out.push_str(
                "  (no hardware events: no CPU PMU here; `record` samples cpu-clock in place of cycles and the other hardware events, `stat` shows them <not supported>)\n",
            ),
        }
    }
    for (p, ty, events, format) in pmus {
        if filter.is_some_and(|f| f != p) {
            continue;
        }
        for e in events
            .iter()
            .filter(|e| !e.ends_with(".scale") && !e.ends_with(".unit"))
        {
            line(
                &mut out,
                &[&format!("{}/{}/", show(p), show(e))],
                "Kernel PMU event",
            );
        }
        if filter.is_some() {
            out.push_str(&format!(
                "  PMU {} (type {}): format terms {}\n",
                show(p),
                show(ty),
                show(&format.join(" "))
            ));
        }
    }
    if filter.is_none() {
        out.push_str(
            "  rHEX                                             [Raw event: the CPU PMU's code]\n",
        );
        out.push_str("  pmu/term=val,.../                                [PMU event by its format terms: `labperf list PMU`]\n");
        out.push_str("  (tracepoints are not listed: labperf records none)\n");
    }
    out
}

pub fn run(a: &Args) -> Result<()> {
    let filter = a.pmu.as_deref();
    if a.hosts.host.is_empty() {
        let pmus = local_pmus(Path::new(SYSFS));
        if let Some(f) = filter.filter(|f| !pmus.iter().any(|p| p.0 == *f)) {
            bail!(
                "this machine has no PMU named '{}' ({SYSFS}/{} is missing): `labperf list` lists them",
                show(f),
                show(f)
            );
        }
        print!("{}", render(&pmus, filter));
        return Ok(());
    }
    let hosts = super::lab::expand(&a.hosts.host, &a.ssh, false)?;
    let results = super::lab::each_host(&hosts, a.ssh.jobs(), |_, h| {
        let c = super::lab::connect(h, &a.ssh)?;
        let out = c.remote.check("listing the events", super::probe::SCRIPT)?;
        Ok(super::probe::parse(&String::from_utf8_lossy(&out)).pmus)
    });
    let mut failed = 0;
    for (h, r) in hosts.iter().zip(results) {
        if hosts.len() > 1 {
            println!("== {} ==", show(h));
        }
        match r {
            Ok(pmus) => print!("{}", render(&pmus, filter)),
            Err(e) => {
                eprintln!("[{}] error: {}", show(h), show_text(&format!("{e:#}")));
                failed += 1;
            }
        }
    }
    if failed > 0 {
        bail!("{failed} of {} host(s) could not be listed", hosts.len());
    }
    Ok(())
}
