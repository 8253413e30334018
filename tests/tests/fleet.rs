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

/// known_hosts lines naming each sshd's key at its port.
fn known_hosts(sshds: &[Sshd]) -> String {
    sshds
        .iter()
        .map(|s| format!("[127.0.0.1]:{} {}\n", s.port, s.host_key("host_key")))
        .collect()
}

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
    std::fs::write(dir.join("known_hosts"), known_hosts(&sshds)).unwrap();
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
    // The reports are on standard error: standard output, a pipe here, is the workloads'.
    let out = String::from_utf8_lossy(&o.stderr);
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

/// Three hosts from a hosts file: two test sshd, one port where nothing listens.
fn three_hosts(name: &str) -> (Vec<Sshd>, std::path::PathBuf, std::path::PathBuf) {
    let dir = Sshd::keys(name);
    let up: Vec<Sshd> = (0..2)
        .map(|_| Sshd::start_in(dir.clone(), labperf_tests::sshd::free_port()))
        .collect();
    let down = labperf_tests::sshd::free_port();
    std::fs::write(dir.join("known_hosts"), known_hosts(&up)).unwrap();
    let mut hosts = String::new();
    for (n, port) in [
        ("lab-a", up[0].port),
        ("lab-b", up[1].port),
        ("lab-down", down),
    ] {
        hosts.push_str(&format!(
            "[hosts.{n}]\naddress = \"root@127.0.0.1:{port}\"\nidentity = \"client_key\"\nknown_hosts = \"known_hosts\"\nremote_dir = \"{}\"\n",
            dir.join("remote").display()
        ));
    }
    let file = dir.join("hosts.toml");
    std::fs::write(&file, hosts).unwrap();
    (up, dir, file)
}

/// The summary table's row of `host`: its cells split on runs of spaces.
fn table_row<'a>(text: &'a str, host: &str) -> Vec<&'a str> {
    let line = text
        .lines()
        .rev()
        .find(|l| l.starts_with(&format!("{host} ")))
        .unwrap_or_else(|| panic!("no table row for {host} in:\n{text}"));
    line.split("  ")
        .map(str::trim)
        .filter(|c| !c.is_empty())
        .collect()
}

#[test]
fn a_terminal_shows_one_live_line_per_host_then_the_table_and_plain_mode_the_same_facts() {
    let (_up, dir, hosts) = three_hosts("fleet-live");
    let bench = bin("labperf-bench");
    let args = |out: &str| -> Vec<String> {
        vec![
            "record".into(),
            "--hosts-file".into(),
            hosts.display().to_string(),
            "--host".into(),
            "lab-a,lab-b,lab-down".into(),
            "--connect-timeout".into(),
            "3".into(),
            "-e".into(),
            "cpu-clock".into(),
            "--no-report".into(),
            "-o".into(),
            dir.join(out).display().to_string(),
            "--".into(),
            bench.display().to_string(),
            "--duration".into(),
            "2.5".into(),
        ]
    };
    // On a pseudo-terminal (script(1) gives the command one; its output is the terminal's).
    let labperf = labperf_in(&dir);
    let mut line = format!("cd {} && exec", dir.display());
    for (k, v) in labperf.get_envs() {
        match v {
            Some(v) => {
                line = format!(
                    "{}={} {line}",
                    k.to_str().unwrap(),
                    shell(v.to_str().unwrap())
                )
            }
            None => line = format!("unset {}; {line}", k.to_str().unwrap()),
        }
    }
    let mut cmd = format!("{line} {}", shell(bin("labperf").to_str().unwrap()));
    for a in args("live.lpr") {
        cmd.push(' ');
        cmd.push_str(&shell(&a));
    }
    let o = std::process::Command::new("script")
        .args(["-qfec", &cmd, "/dev/null"])
        .output()
        .expect("script (bsdutils) gives the command a terminal");
    let tty = String::from_utf8_lossy(&o.stdout).replace("\r\n", "\n");
    // The board is drawn, then drawn again over itself (three lines up, cleared).
    let redraws = tty.matches("\x1b[3A\x1b[J").count();
    assert!(redraws >= 3, "{redraws} redraws:\n{tty}");
    // While the bench ran, its host's line said so with the agent's samples so far.
    assert!(
        tty.lines().any(|l| l.starts_with("lab-a ")
            && l.contains("running ")
            && l.contains(" samples, 0 lost")),
        "{tty}"
    );
    // The last drawing: one line per host, in order, each with its outcome.
    let last = tty.rsplit("\x1b[3A\x1b[J").next().unwrap();
    let board: Vec<&str> = last.lines().take(3).collect();
    assert!(
        board[0].starts_with("lab-a ")
            && board[0].contains(" done ")
            && board[0].contains("live-lab-a.lpr"),
        "{board:?}"
    );
    assert!(
        board[1].starts_with("lab-b ") && board[1].contains(" done "),
        "{board:?}"
    );
    assert!(
        board[2].starts_with("lab-down ")
            && board[2]
                .trim_end_matches("\x1b[K")
                .trim_end()
                .ends_with(" failed"),
        "{board:?}"
    );
    // Its error is said once, whole, above the board (a board line is cut to the width).
    assert_eq!(tty.matches("cannot reach").count(), 1, "{tty}");
    assert!(tty.contains("[lab-down] error: cannot reach"), "{tty}");
    // Then the table: host, arch, samples and lost of each file, the file, the status.
    assert!(tty.contains("summary: 2 of 3 hosts recorded"), "{tty}");
    for (h, f) in [("lab-a", "live-lab-a.lpr"), ("lab-b", "live-lab-b.lpr")] {
        let row = table_row(&tty, h);
        let d = labperf_common::decode_all(&std::fs::read(dir.join(f)).unwrap());
        let t = d.trailer.unwrap();
        let path = dir.join(f).display().to_string();
        assert_eq!(
            row,
            [
                h,
                "x86_64",
                &t.samples.to_string(),
                &t.lost.to_string(),
                &path,
                "ok"
            ],
            "{tty}"
        );
    }
    let row = table_row(&tty, "lab-down");
    assert!(row.len() == 6 && row[5] == "FAILED", "{row:?}");

    // Not a terminal: the same facts as lines, and the same table.
    let o = labperf_in(&dir).args(args("plain.lpr")).output().unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(1), "{err}");
    assert!(
        !err.contains("\x1b["),
        "no terminal codes when not a terminal: {err}"
    );
    for h in ["lab-a", "lab-b"] {
        for phase in ["connecting", "running", "fetching", "done"] {
            assert!(
                err.lines()
                    .any(|l| l.starts_with(&format!("[{h}] {phase}"))),
                "[{h}] {phase} in:\n{err}"
            );
        }
        let row = table_row(&err, h);
        assert_eq!((row[1], row[5]), ("x86_64", "ok"), "{err}");
    }
    assert!(
        err.lines()
            .any(|l| l.starts_with("[lab-down] failed: cannot reach")),
        "{err}"
    );
    assert_eq!(err.matches("cannot reach").count(), 1, "said once: {err}");
    assert_eq!(table_row(&err, "lab-down")[5], "FAILED");
}

fn shell(s: &str) -> String {
    format!("'{}'", s.replace('\'', r"'\''"))
}

#[test]
fn probe_without_hosts_probes_every_host_of_the_hosts_file_into_one_table() {
    let (_up, dir, hosts) = three_hosts("fleet-probe");
    let o = labperf_in(&dir)
        .args(["probe", "--connect-timeout", "3", "--hosts-file"])
        .arg(&hosts)
        .output()
        .unwrap();
    let out = String::from_utf8_lossy(&o.stdout);
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(1), "{err}");
    let paranoid = std::fs::read_to_string("/proc/sys/kernel/perf_event_paranoid").unwrap();
    let header: Vec<&str> = out.lines().next().unwrap().split_whitespace().collect();
    assert_eq!(
        header,
        [
            "Host",
            "Arch",
            "Kernel",
            "Paranoid",
            "PMUs",
            "TopDown",
            "Strobing",
            "ProfileMe",
            "Status"
        ]
    );
    for h in ["lab-a", "lab-b"] {
        let row = table_row(&out, h);
        assert_eq!(
            (row[1], row[3], row[8]),
            ("x86_64", paranoid.trim(), "ok"),
            "{out}"
        );
    }
    assert!(
        table_row(&out, "lab-down")
            .last()
            .unwrap()
            .starts_with("FAILED: cannot reach"),
        "{out}"
    );
    assert!(err.contains("1 of 3 hosts could not be probed"), "{err}");
    // The error is in its row only, not said again on stderr.
    assert!(!err.contains("cannot reach"), "{err}");
    // JSON: the same rows.
    let o = labperf_in(&dir)
        .args([
            "probe",
            "--connect-timeout",
            "3",
            "--format",
            "json",
            "--hosts-file",
        ])
        .arg(&hosts)
        .output()
        .unwrap();
    let j: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let rows = j["tables"][0]["rows"].as_array().unwrap();
    let names: Vec<&str> = rows.iter().map(|r| r["host"].as_str().unwrap()).collect();
    assert_eq!(names, ["lab-a", "lab-b", "lab-down"]);
    assert_eq!(rows[0]["arch"], "x86_64");
}

#[test]
fn hosts_check_of_an_ansible_inventory_gives_each_host_its_verdict_and_groups_select_hosts() {
    let dir = Sshd::keys("fleet-check");
    let good = Sshd::start_in(dir.clone(), labperf_tests::sshd::free_port());
    let changed = Sshd::start_in(dir.clone(), labperf_tests::sshd::free_port());
    let down = labperf_tests::sshd::free_port();
    // The changed machine's recorded key is another one than it has now.
    labperf_tests::sshd::keygen(&dir.join("old_key"));
    let old = std::fs::read_to_string(dir.join("old_key.pub")).unwrap();
    let old: Vec<&str> = old.split_whitespace().take(2).collect();
    std::fs::write(
        dir.join("known_hosts"),
        format!(
            "[127.0.0.1]:{} {}\n[127.0.0.1]:{} {}\n",
            good.port,
            good.host_key("host_key"),
            changed.port,
            old.join(" ")
        ),
    )
    .unwrap();
    let vars = format!(
        "ansible_user=root\nansible_ssh_private_key_file=client_key\nlabperf_known_hosts=known_hosts\nlabperf_remote_dir={}\n",
        dir.join("remote").display()
    );
    let ini = dir.join("inventory");
    std::fs::write(
        &ini,
        format!(
            "[lab]\ngood ansible_host=127.0.0.1 ansible_port={}\nchanged ansible_host=127.0.0.1 ansible_port={}\ndown ansible_host=127.0.0.1 ansible_port={down}\n\n[lab:vars]\n{vars}",
            good.port, changed.port
        ),
    )
    .unwrap();
    let o = labperf_in(&dir)
        .args([
            "hosts",
            "check",
            "@lab",
            "--connect-timeout",
            "3",
            "--hosts-file",
        ])
        .arg(&ini)
        .output()
        .unwrap();
    let out = String::from_utf8_lossy(&o.stdout);
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(1), "{out}{err}");
    let paranoid = std::fs::read_to_string("/proc/sys/kernel/perf_event_paranoid").unwrap();
    let row = table_row(&out, "good");
    assert_eq!((row[1], row[2]), ("x86_64", paranoid.trim()), "{out}");
    assert!(row[5].starts_with("ready"), "{out}");
    let row = table_row(&out, "changed");
    assert!(row.contains(&"HOST KEY CHANGED"), "{out}");
    assert!(row.last().unwrap().contains("ssh-keygen -R"), "{out}");
    let row = table_row(&out, "down");
    assert!(row.contains(&"unreachable"), "{out}");
    assert!(err.contains("2 of 3 hosts cannot record"), "{err}");
    // The same lab as a YAML inventory: `--host @up` records on its one host.
    let yaml = dir.join("lab.yml");
    let yaml_vars: String = vars
        .lines()
        .map(|l| {
            let (k, v) = l.split_once('=').unwrap();
            format!("        {k}: \"{v}\"\n")
        })
        .collect();
    std::fs::write(
        &yaml,
        format!(
            "all:\n  children:\n    up:\n      hosts:\n        good:\n          ansible_host: 127.0.0.1\n          ansible_port: {}\n      vars:\n{yaml_vars}    gone:\n      hosts:\n        down:\n          ansible_port: {down}\n",
            good.port
        ),
    )
    .unwrap();
    let o = labperf_in(&dir)
        .args([
            "record",
            "--host",
            "@up",
            "-e",
            "cpu-clock",
            "--no-report",
            "--hosts-file",
        ])
        .arg(&yaml)
        .arg("-o")
        .arg(dir.join("up.lpr"))
        .arg("--")
        .arg(bin("labperf-bench"))
        .args(["--duration", "0.3"])
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let t = labperf_common::decode_all(&std::fs::read(dir.join("up.lpr")).unwrap())
        .trailer
        .unwrap();
    assert!(t.samples > 100, "{} samples", t.samples);
    // An unknown group is refused with the groups there are.
    let o = labperf_in(&dir)
        .args(["record", "--host", "@nope", "--hosts-file"])
        .arg(&yaml)
        .args(["--", "/bin/true"])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains("no group 'nope'") && err.contains("up"),
        "{err}"
    );
}
