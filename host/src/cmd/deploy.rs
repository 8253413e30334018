//! `labperf deploy HOST`: put the right agent on lab machines (by content hash) without recording.

use super::agents::agent_for;
use super::lab::{connect, Connected};
use super::opts::{help, HostsArg, RemoteOpts};
use anyhow::{bail, Result};
use labperf::lab::deploy;

/// Upload the matching agent to lab machines.
#[derive(Debug, clap::Args)]
#[command(
    mut_arg("hosts", |a| help("Hosts ([user@]host[:port], ssh config or hosts-file names), comma-separated")(a).required(true)),
    after_help = "EXAMPLES:\n  labperf deploy lab1,lab2\n  labperf deploy root@127.0.0.1:10022 --identity target/lab/aarch64/id_ed25519\n  labperf deploy arm1 --bench    # and the machine's labperf-bench: its path is printed"
)]
pub struct Args {
    #[command(flatten)]
    pub hosts: HostsArg,
    #[command(flatten)]
    pub ssh: RemoteOpts,
    /// Also push the known-answer workload, labperf-bench, of each machine's architecture
    /// (as `record --push` does: by content hash under the remote directory).
    #[arg(long)]
    pub bench: bool,
}

pub fn run(a: &Args) -> Result<()> {
    let mut failed = 0;
    let hosts = super::lab::expand(&a.hosts.hosts, &a.ssh, false)?;
    for h in &hosts {
        let r = (|| -> Result<String> {
            let Connected { remote, remote_dir } = connect(h, &a.ssh)?;
            let arch = super::lab::target_arch(&remote, &a.ssh)?;
            let (path, uploaded) = deploy::ensure_agent(&remote, &agent_for(&arch)?, &remote_dir)?;
            let said = |u: bool| if u { "uploaded" } else { "already there" };
            let mut m = format!("{arch}, {path} ({})", said(uploaded));
            if a.bench {
                let pushes = labperf::lab::push::read(&[super::agents::bench_for(&arch)?])?;
                labperf::lab::push::check_arch(&pushes, h, &arch)?;
                for (path, uploaded) in labperf::lab::push::upload(&remote, &pushes, &remote_dir)? {
                    m.push_str(&format!("; bench {path} ({})", said(uploaded)));
                }
            }
            Ok(m)
        })();
        match r {
            Ok(m) => println!("{}: {m}", labperf::text::show(h)),
            Err(e) => {
                eprintln!(
                    "[{}] error: {}",
                    labperf::text::show(h),
                    labperf::text::show_text(&format!("{e:#}"))
                );
                failed += 1;
            }
        }
    }
    if failed > 0 {
        bail!(
            "{failed} of {} failed",
            labperf::text::plural(hosts.len() as u64, "host", "hosts")
        );
    }
    Ok(())
}
