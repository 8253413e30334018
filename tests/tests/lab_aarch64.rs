//! On the emulated Arm lab machine (`cargo xtask lab up aarch64`; `cargo xtask test` boots it):
//! the aarch64 agent sampling and counting the real PMU. Under `-icount shift=0` cycles equal
//! instructions exactly, so these checks are deterministic.
//!
//! Ignored by plain `cargo test`; the nextest `ci` profile run by `cargo xtask test` runs them.

use labperf_common::{decode_all, Arch, CpuId, Record};
use labperf_tests::{bin, report_json, root, scratch};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

fn lab() -> PathBuf {
    std::env::var_os("LABPERF_LAB_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| root().join("target/lab/aarch64"))
}

fn ssh() -> Command {
    let d = lab();
    let port = std::fs::read_to_string(d.join("port"))
        .expect("the lab is not up: run `cargo xtask lab up aarch64`");
    let mut c = Command::new("ssh");
    c.arg("-o").arg(format!(
        "UserKnownHostsFile={}",
        d.join("known_hosts").display()
    ));
    c.args([
        "-o",
        "StrictHostKeyChecking=accept-new",
        "-o",
        "BatchMode=yes",
        "-i",
    ])
    .arg(d.join("id_ed25519"));
    c.args(["-p", port.trim(), "root@127.0.0.1"]);
    c
}

fn run(cmd: &str) -> String {
    let o = ssh().arg(cmd).output().unwrap();
    assert!(
        o.status.success(),
        "`{cmd}` failed on the lab machine: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    String::from_utf8_lossy(&o.stderr).into_owned()
}

fn upload(local: &Path, remote: &str) {
    // Through a temporary name: a still-running copy would make `cat >` fail with ETXTBSY.
    let st = ssh()
        .arg(format!(
            "cat > {remote}.tmp && chmod +x {remote}.tmp && mv -f {remote}.tmp {remote}"
        ))
        .stdin(std::fs::File::open(local).unwrap())
        .status()
        .unwrap();
    assert!(st.success());
}

fn fetch(remote: &str, local: &Path) -> Vec<u8> {
    let o = ssh()
        .arg(format!("cat {remote}"))
        .stderr(Stdio::inherit())
        .output()
        .unwrap();
    assert!(o.status.success());
    std::fs::write(local, &o.stdout).unwrap();
    o.stdout
}

fn deploy() -> PathBuf {
    let agents = std::env::var_os("LABPERF_AGENTS_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| root().join("target/agents"))
        .join("aarch64-unknown-linux-musl");
    upload(&agents.join("labperf-agent"), "/root/labperf-agent");
    upload(&agents.join("labperf-bench"), "/root/labperf-bench");
    agents
}

#[test]
#[ignore = "needs the emulated Arm lab machine: `cargo xtask test` boots it"]
fn aarch64_agent_samples_the_real_pmu_by_function() {
    let agents = deploy();
    run("cd /root && ./labperf-agent record -c 1000000 -o /tmp/cyc.lpr -- ./labperf-bench --duration 3 --classes int_divider_stalls=3,nops=1,dcache_miss=1");
    let d = scratch("lab-cycles");
    let bytes = fetch("/tmp/cyc.lpr", &d.join("cyc.lpr"));
    let dec = decode_all(&bytes);
    assert!(dec.losses.is_clean(), "{:?}", dec.damage);
    let h = dec.header.unwrap();
    assert_eq!(h.arch, Arch::Aarch64);
    assert!(matches!(h.cpu, CpuId::Arm { .. }));
    // The hardware event opened for real: no cpu-clock fallback.
    assert_eq!(
        (h.events[0].name.as_str(), h.events[0].attr.type_),
        ("cycles", 0)
    );
    assert!(h.notes.is_empty(), "{:?}", h.notes);
    // Symbols come from the local copy of the binary the machine ran (/root/labperf-bench).
    let symfs = d.join("symfs");
    std::fs::create_dir_all(symfs.join("root")).unwrap();
    std::fs::copy(
        agents.join("labperf-bench"),
        symfs.join("root/labperf-bench"),
    )
    .unwrap();
    let j = report_json(&d.join("cyc.lpr"), 0, |c| {
        c.arg("--symfs").arg(&symfs);
    });
    let n = |f: &str| {
        j["tables"][0]["rows"]
            .as_array()
            .unwrap()
            .iter()
            .find(|r| r["name"] == f)
            .map(|r| r["samples"].as_u64().unwrap())
            .unwrap_or(0)
    };
    let total = n("int_divider_stalls") + n("nops") + n("dcache_miss");
    assert!(total > 1500, "{j}");
    // Cycles track CPU time here, so the shares follow the 3:1:1 split (±3 points).
    for (f, want) in [
        ("int_divider_stalls", 60.0),
        ("nops", 20.0),
        ("dcache_miss", 20.0),
    ] {
        let share = 100.0 * n(f) as f64 / total as f64;
        eprintln!("{f}: {share:.1}% of {total} cycle samples, split {want}%");
        assert!((share - want).abs() < 3.0, "{f}: {share:.1}%, want {want}%");
    }
}

#[test]
#[ignore = "needs the emulated Arm lab machine: `cargo xtask test` boots it"]
fn group_reads_on_the_real_pmu_show_cycles_equal_instructions() {
    deploy();
    let err = run("cd /root && ./labperf-agent record -e '{cycles,instructions}' -c 1000000 -o /tmp/grp.lpr -- ./labperf-bench --duration 1 --classes fp_divider_stalls,branch_mispredicts");
    // Debian's 6.1 refuses inherit with PERF_SAMPLE_READ: the agent says so and goes on.
    assert!(
        err.contains("refuses inherit with PERF_SAMPLE_READ"),
        "{err}"
    );
    let dec = decode_all(&fetch(
        "/tmp/grp.lpr",
        &scratch("lab-group").join("grp.lpr"),
    ));
    assert_eq!(dec.header.unwrap().mode, "sample-read");
    let vals: Vec<Vec<u64>> = dec
        .records
        .iter()
        .filter_map(|r| {
            if let Record::Sample(s) = r {
                Some(s.values.clone())
            } else {
                None
            }
        })
        .collect();
    assert!(vals.len() > 500, "{} samples", vals.len());
    for v in &vals {
        assert_eq!(v.len(), 2);
        assert_eq!(
            v[0], v[1],
            "under -icount every cycle retires one instruction"
        );
    }
    assert!(vals.windows(2).all(|w| w[1][0] > w[0][0]));
}

#[test]
#[ignore = "needs the emulated Arm lab machine: `cargo xtask test` boots it"]
fn stat_counts_the_real_pmu() {
    deploy();
    run("cd /root && ./labperf-agent stat -e cycles -e instructions -e armv8_pmuv3/inst_retired/ -I 200 -o /tmp/st.lpr -- ./labperf-bench --duration 0.6 --classes nops");
    let dec = decode_all(&fetch("/tmp/st.lpr", &scratch("lab-stat").join("st.lpr")));
    let total = dec
        .records
        .iter()
        .rev()
        .find_map(|r| {
            if let Record::Interval(i) = r {
                Some(i.clone())
            } else {
                None
            }
        })
        .unwrap();
    assert!(!total.delta);
    let c: Vec<u64> = total.counts.iter().map(|c| c.value).collect();
    assert!(c[0] > 300_000_000, "{c:?}");
    assert_eq!(c[0], c[1]);
    assert_eq!(
        c[1], c[2],
        "the generic and the PMU-named event are the same counter"
    );
}

/// `labperf record --host <the lab machine>` with its key and known_hosts, isolated under `d`.
fn record_host(d: &Path) -> Command {
    let port = std::fs::read_to_string(lab().join("port")).unwrap();
    let mut c = Command::new(bin("labperf"));
    c.env("HOME", d)
        .env("XDG_CACHE_HOME", d.join("cache"))
        .env_remove("SSH_AUTH_SOCK");
    c.args([
        "record",
        "--host",
        &format!("root@127.0.0.1:{}", port.trim()),
        "--identity",
    ]);
    c.arg(lab().join("id_ed25519"))
        .arg("--known-hosts")
        .arg(lab().join("known_hosts"));
    c
}

#[test]
#[ignore = "needs the emulated Arm lab machine: `cargo xtask test` boots it"]
fn record_host_on_the_arm_machine_ranks_functions_by_instructions() {
    deploy();
    let d = scratch("lab-host");
    let out = d.join("arm.lpr");
    let o = record_host(&d)
        .args([
            "--accept-new-host-key",
            "-e",
            "{cycles,instructions}",
            "-c",
            "1000000",
            "--format",
            "json",
            "--top",
            "0",
            "-o",
        ])
        .arg(&out)
        .args([
            "--",
            "/root/labperf-bench",
            "--duration",
            "3",
            "--classes",
            "int_divider_stalls=3,fp_divider_stalls=2,nops=1",
        ])
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert!(String::from_utf8_lossy(&o.stderr).contains("aarch64: agent"));
    let j: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let rows = j["tables"][0]["rows"].as_array().unwrap();
    let n = |f: &str| {
        rows.iter()
            .find(|r| r["name"] == f)
            .map(|r| r["samples"].as_u64().unwrap())
            .unwrap_or(0)
    };
    let ranked: Vec<&str> = rows
        .iter()
        .filter_map(|r| r["name"].as_str())
        .filter(|f| ["int_divider_stalls", "fp_divider_stalls", "nops"].contains(f))
        .collect();
    assert_eq!(
        ranked,
        ["int_divider_stalls", "fp_divider_stalls", "nops"],
        "{j}"
    );
    // Cycles equal instructions here, and the bench splits CPU time 3:2:1.
    let total = (n("int_divider_stalls") + n("fp_divider_stalls") + n("nops")) as f64;
    for (f, want) in [
        ("int_divider_stalls", 50.0),
        ("fp_divider_stalls", 100.0 / 3.0),
        ("nops", 100.0 / 6.0),
    ] {
        let share = 100.0 * n(f) as f64 / total;
        assert!(
            (share - want).abs() < 3.0,
            "{f}: {share:.1}% want {want:.1}%"
        );
    }
}

/// `labperf record --host … --metrics --no-report` on the lab machine, then a separate
/// `labperf report FILE` with no view option (the header names the metrics view, the
/// binary cache the record filled gives the names); returns the JSON report and the file size.
pub fn metrics_run(name: &str, strobe: &str, period: &str, secs: &str) -> (serde_json::Value, u64) {
    deploy();
    let d = scratch(name);
    let out = d.join("m.lpr");
    let o = record_host(&d)
        .args([
            "--accept-new-host-key",
            "--metrics",
            "--strobe",
            strobe,
            "-c",
            period,
            "--no-report",
            "-o",
        ])
        .arg(&out)
        .args([
            "--",
            "/root/labperf-bench",
            "--duration",
            secs,
            "--classes",
            "int_divider_stalls=3,fp_divider_stalls=2,double_to_int=1",
        ])
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    // The trailer counts the samples the file holds, whatever the strobing mode (a kept
    // window is two samples); samples + dropped are the samples the kernel gave.
    let d = labperf_common::decode_all(&std::fs::read(&out).unwrap());
    let in_file = d
        .records
        .iter()
        .filter(|r| matches!(r, labperf_common::Record::Sample(_)))
        .count() as u64;
    let t = d.trailer.expect("a complete recording");
    assert_eq!(t.samples, in_file, "{strobe}: trailer {t:?}");
    if strobe == "fixed" {
        assert_eq!(t.dropped, 0);
    }
    assert!(o.stdout.is_empty(), "--no-report prints no report");
    let home = out.parent().unwrap();
    let j = report_json(&out, 0, |c| {
        c.env("HOME", home)
            .env("XDG_CACHE_HOME", home.join("cache"));
    });
    assert_eq!(j["view"], "metrics", "the header names the view");
    (j, std::fs::metadata(&out).unwrap().len())
}

fn instr_pct(j: &serde_json::Value, f: &str) -> f64 {
    j["tables"][0]["rows"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["symbol"] == f)
        .and_then(|r| r["instr_pct"].as_f64())
        .unwrap_or(-100.0)
}

#[test]
#[ignore = "needs the emulated Arm lab machine: `cargo xtask test` boots it"]
fn metrics_known_answers_through_record_host() {
    // The bench splits CPU time 3:2:1; under -icount a nanosecond is an instruction, so
    // that is also the exact instruction split between the three functions.
    let want = [
        ("int_divider_stalls", 50.0),
        ("fp_divider_stalls", 100.0 / 3.0),
        ("double_to_int", 100.0 / 6.0),
    ];
    // A 300-cycle sampler is throttled to ~400 samples per 4 ms tick, so windows come
    // only from the start of each tick: the accuracy is set by the number of ticks
    // (12 s of guest time: ~3000, one standard deviation under 1 point).
    let (j, _) = metrics_run("lab-metrics", "auto", "20000", "12");
    assert!(
        j["summary"]["windows"].as_u64().unwrap() > 8000,
        "{}",
        j["summary"]["windows"]
    );
    let share_sum: f64 = want.iter().map(|(f, _)| instr_pct(&j, f)).sum();
    for (f, w) in want {
        // %I among the three functions (the rest of the program is a fraction of a percent).
        let got = 100.0 * instr_pct(&j, f) / share_sum;
        eprintln!("{f}: %I {got:.2} (want {w:.2})");
        assert!(
            (got - w).abs() < 2.0,
            "{f}: {got:.2}% of instructions, want {w:.2}%"
        );
        let row = j["tables"][0]["rows"]
            .as_array()
            .unwrap()
            .iter()
            .find(|r| r["symbol"] == f)
            .unwrap();
        let cpi = row["cpi"].as_f64().unwrap();
        assert!((cpi - 1.0).abs() <= 0.01, "{f}: CPI {cpi}");
    }
}

#[test]
#[ignore = "needs the emulated Arm lab machine: `cargo xtask test` boots it"]
fn probe_shows_the_arm_pmu_and_the_strobing_mode() {
    let d = scratch("lab-probe");
    let port = std::fs::read_to_string(lab().join("port")).unwrap();
    let o = Command::new(bin("labperf"))
        .env("HOME", &d)
        .env_remove("SSH_AUTH_SOCK")
        .args([
            "probe",
            &format!("root@127.0.0.1:{}", port.trim()),
            "--accept-new-host-key",
            "--identity",
        ])
        .arg(lab().join("id_ed25519"))
        .arg("--known-hosts")
        .arg(lab().join("known_hosts"))
        .output()
        .unwrap();
    let p = String::from_utf8_lossy(&o.stdout);
    assert!(
        o.status.success(),
        "{p}{}",
        String::from_utf8_lossy(&o.stderr)
    );
    assert!(
        p.contains("architecture: aarch64")
            && p.contains("armv8_pmuv3 (type")
            && p.contains("cpu_cycles")
            && p.contains("inst_retired"),
        "{p}"
    );
    // Debian's 6.1: no alternating periods (size-144 attrs are E2BIG), so decimation.
    assert!(
        p.contains("strobing: decimate")
            && p.contains("kernel-rfc-v2: not available (Argument list too long"),
        "{p}"
    );
    assert!(
        p.contains("perf_event_paranoid: 3") && p.contains("ProfileMe format bit: no"),
        "{p}"
    );
}
