//! `labperf probe [HOST,...]`: what lab machines can measure (architecture, CPU, PMUs,
//! paranoid, features): one host in detail, several (or every host of the hosts file) at
//! once as one table.

use super::lab::{connect, Connected};
use super::opts::{help, FormatOpt, HostsArg, RemoteOpts};
use anyhow::{bail, Result};
use labperf::text::{show, show_text};

/// Show what lab machines can measure.
#[derive(Debug, clap::Args)]
#[command(
    mut_arg("hosts", help("Hosts to probe ([user@]host[:port], ssh config or hosts-file names), comma-separated [default: every host of the hosts file]. One host is shown in detail, several as a table")),
    mut_arg("format", help("The table of several hosts as a table, CSV or JSON")),
    after_help = "EXAMPLES:\n  labperf probe lab1\n  labperf probe root@127.0.0.1:10022 --identity target/lab/aarch64/id_ed25519\n  labperf probe                     # every host of the hosts file, at once: one table\n  labperf probe arm1,arm2 --format csv"
)]
pub struct Args {
    #[command(flatten)]
    pub hosts: HostsArg,
    #[command(flatten)]
    pub ssh: RemoteOpts,
    #[command(flatten)]
    pub format: FormatOpt,
}

/// Runs on the target with any POSIX sh (busybox included): one fact per line.
pub const SCRIPT: &str = r#"echo "arch $(uname -m)"; echo "kernel $(uname -r)"; echo "paranoid $(cat /proc/sys/kernel/perf_event_paranoid 2>/dev/null)"; m=$(grep -m1 -E '^(model name|cpu model|CPU part|Processor)' /proc/cpuinfo); echo "cpu ${m#*: }"; for d in /sys/bus/event_source/devices/*; do n=${d##*/}; echo "pmu $n $(cat $d/type 2>/dev/null)"; if [ -d $d/events ]; then echo "events $n $(ls $d/events | tr '\n' ' ')"; fi; if [ -d $d/format ]; then echo "format $n $(ls $d/format | tr '\n' ' ')"; fi; done"#;

/// What a probe found.
#[derive(Debug, Default, PartialEq)]
pub struct Facts {
    pub arch: String,
    pub kernel: String,
    pub cpu: String,
    pub paranoid: Option<i32>,
    /// (name, type, events, format terms)
    pub pmus: Vec<(String, String, Vec<String>, Vec<String>)>,
}

pub fn parse(out: &str) -> Facts {
    let mut f = Facts::default();
    for l in out.lines() {
        let (k, v) = l.split_once(' ').unwrap_or((l, ""));
        match k {
            "arch" => f.arch = v.trim().into(),
            "kernel" => f.kernel = v.trim().into(),
            "cpu" => f.cpu = v.trim().into(),
            "paranoid" => f.paranoid = v.trim().parse().ok(),
            "pmu" => {
                let (n, t) = v.split_once(' ').unwrap_or((v, ""));
                f.pmus
                    .push((n.into(), t.trim().into(), Vec::new(), Vec::new()));
            }
            "events" | "format" => {
                let (n, list) = v.split_once(' ').unwrap_or((v, ""));
                if let Some(p) = f.pmus.iter_mut().find(|p| p.0 == n) {
                    let items = list.split_whitespace().map(String::from).collect();
                    if k == "events" {
                        p.2 = items;
                    } else {
                        p.3 = items;
                    }
                }
            }
            _ => {}
        }
    }
    f
}

impl Facts {
    fn has_event(&self, pmu: &str, e: &str) -> bool {
        self.pmus
            .iter()
            .any(|p| p.0 == pmu && p.2.iter().any(|x| x == e))
    }
    fn has_format(&self, pmu: &str, t: &str) -> bool {
        self.pmus
            .iter()
            .any(|p| p.0 == pmu && p.3.iter().any(|x| x == t))
    }

    /// The facts of one host, for a terminal: every string from the lab machine (and the
    /// host's name) escaped by [`show`].
    pub fn render(&self, host: &str) -> String {
        let mut s = format!(
            "{}\n  architecture: {}\n  cpu: {}\n  kernel: {}\n",
            show(host),
            show(&self.arch),
            if self.cpu.is_empty() {
                "unknown".into()
            } else {
                show(&self.cpu)
            },
            show(&self.kernel)
        );
        let p = match self.paranoid {
            Some(v) if v <= -1 => format!("{v} (everything allowed)"),
            Some(v @ 0..=1) => format!("{v} (CPU-wide and kernel profiling allowed)"),
            Some(2) => "2 (user-space profiling of your own processes; root for more)".into(),
            Some(v) => format!("{v} (unprivileged profiling disabled: run as root or `sysctl kernel.perf_event_paranoid=2`)"),
            None => "unknown (no /proc/sys/kernel/perf_event_paranoid: no perf events in this kernel?)".into(),
        };
        s += &format!("  perf_event_paranoid: {p}\n  PMUs:\n");
        for (n, t, ev, _) in &self.pmus {
            let shown: Vec<&str> = ev
                .iter()
                .filter(|e| !e.ends_with(".scale") && !e.ends_with(".unit"))
                .map(String::as_str)
                .collect();
            s += &format!(
                "    {} (type {}){}{}\n",
                show(n),
                show(t),
                if shown.is_empty() { "" } else { ": " },
                show(&shown.join(" "))
            );
        }
        if self.arch == "alpha" {
            s += &format!("  hardware counters: {}\n", self.alpha_counters());
        }
        s += &format!("  TopDown: {}\n", self.topdown());
        let strobe = self.strobe_term();
        s += &format!(
            "  strobe_period driver term: {}\n",
            strobe
                .map(|p| format!("yes, on {}", show(&p)))
                .unwrap_or_else(|| "no".into())
        );
        s += &format!(
            "  ProfileMe format bit: {}\n",
            if self.has_format("cpu", "profileme") {
                "yes"
            } else {
                "no (needs an EV67 or later and a kernel with the ProfileMe series)"
            }
        );
        s
    }

    /// What an Alpha kernel's PMU offers: Linux registers it (as `cpu`) on EV67 to EV69
    /// only, with two counters; sampling needs their overflow interrupt.
    fn alpha_counters(&self) -> String {
        match self.pmus.iter().find(|p| p.0 == "cpu") {
            Some((_, t, _, _)) => format!(
                "the EV67 PMU (cpu, type {}): 2 counters, cycles, instructions and cache-misses (B-cache); they sample only where the counters raise their overflow interrupt (QEMU's Alpha does not: there `-e cycles` opens but gives no sample; cpu-clock and task-clock sample)",
                show(t)
            ),
            None => "none: Linux registers the Alpha PMU on EV67 to EV69 only (and with CONFIG_PERF_EVENTS); cpu-clock and task-clock sample".into(),
        }
    }

    /// Whether TopDown is there: on which PMU, with how many metrics.
    fn topdown(&self) -> String {
        let core = ["cpu_core", "cpu"]
            .into_iter()
            .find(|p| self.has_event(p, "slots"));
        match core {
            Some(p) => {
                let l1 = [
                    "topdown-retiring",
                    "topdown-bad-spec",
                    "topdown-fe-bound",
                    "topdown-be-bound",
                ]
                .iter()
                .filter(|e| self.has_event(p, e))
                .count();
                let l2 = [
                    "topdown-heavy-ops",
                    "topdown-br-mispredict",
                    "topdown-fetch-lat",
                    "topdown-mem-bound",
                ]
                .iter()
                .filter(|e| self.has_event(p, e))
                .count();
                format!("yes on {p} (slots, {l1}/4 level-1 metrics, {l2}/4 level-2 metrics)")
            }
            None if self.has_event("cpu", "topdown-total-slots") => {
                "pre-Ice Lake events only (topdown-total-slots ...)".into()
            }
            None => "no".into(),
        }
    }

    /// The PMU with a strobing driver term, if any.
    fn strobe_term(&self) -> Option<String> {
        self.pmus
            .iter()
            .find(|p| {
                p.3.iter()
                    .any(|t| t == "strobe_period" || t == "alt_period")
            })
            .map(|p| p.0.clone())
    }
}

/// Probes one host: its facts and the first line of what the agent says of strobing.
fn probe(h: &str, o: &RemoteOpts) -> Result<(Facts, String)> {
    let Connected { remote, remote_dir } = connect(h, o)?;
    let facts = parse(&String::from_utf8_lossy(&remote.check("probing", SCRIPT)?));
    // The strobing mode `record --metrics` would use, verified by the agent itself.
    let strobing = match super::agents::agent_for(&facts.arch).and_then(|local| {
        Ok(labperf::lab::deploy::ensure_agent(
            &remote,
            &local,
            &remote_dir,
        )?)
    }) {
        Ok((agent, _)) => {
            let o = remote.run(
                &format!("{} strobe-probe", labperf::lab::remote::shell_quote(&agent)),
                None,
                labperf::lab::remote::SMALL_OUTPUT,
            )?;
            let text = String::from_utf8_lossy(&o.stdout).trim().to_string();
            if text.starts_with("strobing:") {
                text
            } else {
                "strobing: not checked (this agent has no strobe-probe)".into()
            }
        }
        Err(e) => format!("strobing: not checked ({e:#})"),
    };
    Ok((facts, strobing))
}

pub fn run(a: &Args) -> Result<()> {
    let hosts = super::lab::expand(&a.hosts.hosts, &a.ssh, true)?;
    // Every host at once (at most --jobs), each on its own connection and timeouts.
    let results = super::lab::each_host(&hosts, a.ssh.jobs(), |_, h| probe(h, &a.ssh));
    let failed = results.iter().filter(|r| r.is_err()).count();
    if let [one] = &results[..] {
        match one {
            Ok((facts, strobing)) => {
                print!("{}", facts.render(&hosts[0]));
                for (i, l) in strobing.lines().enumerate() {
                    println!("  {}{}", if i == 0 { "" } else { "  " }, show(l.trim()));
                }
            }
            Err(e) => eprintln!(
                "[{}] error: {}",
                show(&hosts[0]),
                show_text(&format!("{e:#}"))
            ),
        }
    } else {
        // A failed host's error is said once: in its row.
        print!(
            "{}",
            table(&hosts, &results).render(a.format.get(), 0, false)
        );
    }
    if failed > 0 {
        bail!(
            "{failed} of {} could not be probed",
            labperf::text::plural(hosts.len() as u64, "host", "hosts")
        );
    }
    Ok(())
}

/// Several hosts' facts, a row each.
fn table(hosts: &[String], results: &[Result<(Facts, String)>]) -> labperf::render::table::Report {
    use labperf::render::table::{Cell, Column, Table};
    let mut t = Table::new(
        "hosts",
        vec![
            Column::left("host", "Host", 12),
            Column::left("arch", "Arch", 7),
            Column::left("kernel", "Kernel", 10),
            Column::right("paranoid", "Paranoid", 8),
            Column::left("pmus", "PMUs", 16),
            Column::left("topdown", "TopDown", 8),
            Column::left("strobing", "Strobing", 10),
            Column::left("profileme", "ProfileMe", 9),
            Column::left("status", "Status", 0),
        ],
    );
    t.ranked = false;
    for (h, r) in hosts.iter().zip(results) {
        let host = Cell::text(show(h));
        t.rows.push(match r {
            Ok((f, strobing)) => {
                let pmus: Vec<&str> = f
                    .pmus
                    .iter()
                    .map(|p| p.0.as_str())
                    .filter(|n| {
                        !matches!(
                            *n,
                            "software" | "tracepoint" | "breakpoint" | "kprobe" | "uprobe"
                        )
                    })
                    .collect();
                let strobe = strobing.lines().next().unwrap_or("");
                let strobe = strobe.strip_prefix("strobing: ").unwrap_or(strobe);
                vec![
                    host,
                    Cell::text(show(&f.arch)),
                    Cell::text(show(&f.kernel)),
                    // A number (-1 is one), not text a spreadsheet would be warned of.
                    f.paranoid.map_or(Cell::Empty, |p| Cell::Shown {
                        text: p.to_string(),
                        value: serde_json::json!(p),
                    }),
                    Cell::text(show(&pmus.join(","))),
                    Cell::text(f.topdown().split(" (").next().unwrap_or("").to_string()),
                    Cell::text(show(
                        strobe
                            .split_whitespace()
                            .next()
                            .unwrap_or("")
                            .trim_end_matches(':'),
                    )),
                    Cell::text(if f.has_format("cpu", "profileme") {
                        "yes"
                    } else {
                        "no"
                    }),
                    Cell::text("ok"),
                ]
            }
            Err(e) => {
                let mut row = vec![host];
                row.extend(std::iter::repeat_n(Cell::Empty, 7));
                row.push(Cell::text(format!(
                    "FAILED: {}",
                    show(format!("{e:#}").lines().next().unwrap_or(""))
                )));
                row
            }
        });
    }
    labperf::render::table::Report {
        view: "hosts",
        tables: vec![t],
        ..Default::default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_topdown_profileme_and_paranoid() {
        let f = parse("arch x86_64\nkernel 6.8\nparanoid 2\ncpu Intel(R) Xeon(R) Platinum 8480+\npmu cpu 4\nevents cpu slots topdown-retiring topdown-bad-spec topdown-fe-bound topdown-be-bound topdown-heavy-ops \nformat cpu event umask\npmu software 1\n");
        let r = f.render("x");
        assert!(
            r.contains("TopDown: yes on cpu (slots, 4/4 level-1 metrics, 1/4 level-2 metrics)"),
            "{r}"
        );
        assert!(r.contains("perf_event_paranoid: 2 (user-space"));
        assert!(r.contains("ProfileMe format bit: no"));
        let f = parse("arch alpha\nparanoid 1\npmu cpu 4\nformat cpu event profileme\n");
        assert!(f.render("a").contains("ProfileMe format bit: yes"));
        assert!(!r.contains("hardware counters"), "{r}");
    }

    #[test]
    fn an_alpha_probe_says_what_its_pmu_offers() {
        let with = parse("arch alpha\npmu cpu 4\npmu software 1\n").render("a");
        assert!(
            with.contains("hardware counters: the EV67 PMU (cpu, type 4): 2 counters"),
            "{with}"
        );
        let without = parse("arch alpha\npmu software 1\n").render("a");
        assert!(
            without.contains(
                "hardware counters: none: Linux registers the Alpha PMU on EV67 to EV69 only"
            ),
            "{without}"
        );
    }
}
