//! A lab of many machines through the test sshd: 32 host names over 4 sshd instances with
//! `--jobs 8` (every file fetched and reported, never more than 8 runs at once).

use labperf_tests::bin;
use labperf_tests::sshd::{labperf_in, Sshd};
use std::path::Path;

/// Every login runs its command through this wrapper, which logs when each agent run
/// starts and ends (the run is the command with `--status-file`).
const LOG_RUNS: &str = r#"#!/bin/sh
case "$SSH_ORIGINAL_COMMAND" in
  *"--status-file"*)
    echo "start $(date +%s%N)" >> '@LOG@'
    /bin/sh -c "$SSH_ORIGINAL_COMMAND"; s=$?
    echo "end $(date +%s%N)" >> '@LOG@'
    exit $s ;;
  *) exec /bin/sh -c "$SSH_ORIGINAL_COMMAND" ;;
esac
"#;

/// The most runs the log shows at once, and how many started.
fn most_at_once(log: &Path) -> (usize, usize) {
    let mut ev: Vec<(u64, i32)> = std::fs::read_to_string(log)
        .unwrap()
        .lines()
        .map(|l| {
            let (kind, t) = l.split_once(' ').unwrap();
            (t.parse().unwrap(), if kind == "start" { 1 } else { -1 })
        })
        .collect();
    // Ends before starts at the same instant.
    ev.sort();
    let (mut now, mut most) = (0i32, 0i32);
    for (_, d) in &ev {
        now += d;
        most = most.max(now);
    }
    (most as usize, ev.iter().filter(|e| e.1 == 1).count())
}

#[test]
fn thirty_two_host_names_over_four_sshds_run_eight_at_a_time() {
    let dir = Sshd::keys("fleet");
    let log = dir.join("runs.log");
    let script = LOG_RUNS.replace("@LOG@", &log.display().to_string());
    let sshds: Vec<Sshd> = (0..4)
        .map(|_| Sshd::start_forcing(dir.clone(), "log-runs.sh", &script))
        .collect();
    // The 4 machines' keys known beforehand; 32 names, 8 for each machine, two remote
    // directories on each (names of one machine share an agent upload).
    let mut known = String::new();
    for s in &sshds {
        known.push_str(&format!(
            "[127.0.0.1]:{} {}\n",
            s.port,
            s.host_key("host_key")
        ));
    }
    std::fs::write(dir.join("known_hosts"), known).unwrap();
    let mut hosts = String::new();
    let names: Vec<String> = (0..32).map(|i| format!("h{i:02}")).collect();
    for (i, n) in names.iter().enumerate() {
        hosts.push_str(&format!(
            "[hosts.{n}]\naddress = \"{}\"\nidentity = \"client_key\"\nknown_hosts = \"known_hosts\"\nremote_dir = \"{}\"\n",
            sshds[i % 4].spec(),
            dir.join(format!("remote-{}", i % 8)).display()
        ));
    }
    let hosts_file = dir.join("hosts.toml");
    std::fs::write(&hosts_file, hosts).unwrap();
    let t = std::time::Instant::now();
    let o = labperf_in(&dir)
        .args(["record", "--hosts-file"])
        .arg(&hosts_file)
        .args([
            "--host",
            &names.join(","),
            "--jobs",
            "8",
            "-e",
            "cpu-clock",
            "-o",
        ])
        .arg(dir.join("fleet.lpr"))
        .args(["--top", "3", "--", "/bin/sh", "-c"])
        // Each run waits 1.5 s first, so runs that may overlap do (an unbounded pool
        // would run all 32 at once), then spins briefly for the samples.
        .arg(format!(
            "sleep 1.5; exec {} --duration 0.1 --classes nops",
            bin("labperf-bench").display()
        ))
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    let out = String::from_utf8_lossy(&o.stdout);
    eprintln!("32 hosts, --jobs 8: {:.1} s", t.elapsed().as_secs_f64());
    assert!(o.status.success(), "{err}");
    let (most, started) = most_at_once(&log);
    eprintln!("at most {most} runs at once of {started}");
    assert_eq!(started, 32);
    assert!(most <= 8, "{most} runs at once with --jobs 8");
    // Eight workers over 32 hosts whose runs last 1.5 s: the eight overlap.
    assert!(most >= 6, "only {most} runs at once");
    // Every host's file fetched, whole, with the bench's samples; each reported, then all merged.
    for n in &names {
        let f = dir.join(format!("fleet-{n}.lpr"));
        let d = labperf_common::decode_all(
            &std::fs::read(&f).unwrap_or_else(|e| panic!("{}: {e}", f.display())),
        );
        let t = d.trailer.unwrap_or_else(|| panic!("{n}: no trailer"));
        assert!(t.samples > 50, "{n}: {} samples", t.samples);
        assert!(out.contains(&format!("== {n} ==")), "{n} not reported");
    }
    assert!(out.contains("== 32 hosts merged =="), "{out}");
    assert!(err.contains("summary: 32 of 32 hosts recorded"), "{err}");
}
