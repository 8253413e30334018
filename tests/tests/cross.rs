//! The cross-built agents: every one static and of its architecture (object and file), the C
//! agent's writer read by the Rust decoder natively and on Alpha under qemu-alpha, and the
//! aarch64 agent under qemu-aarch64.

use labperf_common::{decode_all, Arch, CpuId, Record, Sample};
use labperf_tests::ring::*;
use labperf_tests::{assert_split, bin, report_json, scratch, BenchClock};
use std::collections::BTreeMap;
use std::path::PathBuf;
use std::process::Command;

fn agents() -> PathBuf {
    std::env::var_os("LABPERF_AGENTS_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| labperf_tests::root().join("target/agents"))
}

fn agent(dir: &str, name: &str) -> PathBuf {
    let p = agents().join(dir).join(name);
    assert!(
        p.is_file(),
        "{} is not built: run `cargo xtask build-agents`",
        p.display()
    );
    p
}

#[test]
fn every_agent_is_static_and_of_its_architecture() {
    let o = Command::new(bin("labperf"))
        .args(["agents", "--check", "--dir"])
        .arg(agents())
        .output()
        .unwrap();
    let table = String::from_utf8_lossy(&o.stdout);
    assert!(
        o.status.success(),
        "{table}{}",
        String::from_utf8_lossy(&o.stderr)
    );
    for (dir, arch, file_says) in [
        ("x86_64-unknown-linux-musl", "x86_64", "x86-64"),
        ("aarch64-unknown-linux-musl", "aarch64", "ARM aarch64"),
        ("alpha-unknown-linux-gnu", "alpha", "Alpha"),
        ("x86_64-unknown-linux-none", "x86_64", "x86-64"),
    ] {
        let row = table
            .lines()
            .find(|l| l.starts_with(dir) && l.contains("labperf-agent"))
            .unwrap_or_else(|| panic!("{dir} missing:\n{table}"));
        let cols: Vec<&str> = row.split_whitespace().collect();
        assert_eq!((cols[2], cols[3]), (arch, "yes"), "{row}");
        let f = Command::new("file")
            .arg("-b")
            .arg(agent(dir, "labperf-agent"))
            .output()
            .unwrap();
        let f = String::from_utf8_lossy(&f.stdout);
        assert!(
            f.contains(file_says)
                && (f.contains("statically linked") || f.contains("static-pie linked")),
            "{dir}: {f}"
        );
    }
    // Budgets (as xtask/src/build_agents.rs BUDGETS): Rust agents <= 256 KiB (no_std),
    // the Alpha agent <= 64 KiB.
    for (dir, max) in [
        ("x86_64-unknown-linux-musl", 256 * 1024),
        ("aarch64-unknown-linux-musl", 256 * 1024),
        ("alpha-unknown-linux-gnu", 64 * 1024),
    ] {
        let n = std::fs::metadata(agent(dir, "labperf-agent"))
            .unwrap()
            .len();
        assert!(
            n <= max,
            "{dir} agent is {n} bytes, over its {max}-byte budget"
        );
    }
    // A dynamically linked binary posing as an agent is caught.
    let d = scratch("fake-agent");
    std::fs::create_dir_all(d.join("x86_64-unknown-linux-musl")).unwrap();
    std::fs::copy(
        "/bin/true",
        d.join("x86_64-unknown-linux-musl/labperf-agent"),
    )
    .unwrap();
    let o = Command::new(bin("labperf"))
        .args(["agents", "--check", "--dir"])
        .arg(&d)
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&o.stderr).contains("is not static"));
}

/// Samples straight from saved ring-buffer bytes (the kernel's layout for
/// IP|TID|TIME|CPU|PERIOD), to check the C writer against.
/// (pid, tid, ip, time, cpu, period) of one ring sample.
type RingSample = (u32, u32, u64, u64, u32, u64);

fn ring_samples(ring: &[u8]) -> (Vec<RingSample>, usize) {
    let (mut out, mut other, mut at) = (Vec::new(), 0, 0);
    let u64_at = |p: usize| u64::from_le_bytes(ring[p..p + 8].try_into().unwrap());
    let u32_at = |p: usize| u32::from_le_bytes(ring[p..p + 4].try_into().unwrap());
    while at + 8 <= ring.len() {
        let (ty, size) = (
            u32_at(at),
            u16::from_le_bytes([ring[at + 6], ring[at + 7]]) as usize,
        );
        let b = at + 8;
        match ty {
            9 => out.push((
                u32_at(b + 8),
                u32_at(b + 12),
                u64_at(b),
                u64_at(b + 16),
                u32_at(b + 24),
                u64_at(b + 32),
            )),
            3 | 4 | 7 | 10 => other += 1, // comm, exit, fork, mmap2
            _ => {}
        }
        at += size;
    }
    (out, other)
}

fn heads(records: &[Record]) -> Vec<(u32, u32, u64, u64, u32, u64)> {
    records
        .iter()
        .filter_map(|r| {
            if let Record::Sample(Sample {
                pid,
                tid,
                ip,
                time,
                cpu,
                period,
                ..
            }) = r
            {
                Some((*pid, *tid, *ip, *time, *cpu, *period))
            } else {
                None
            }
        })
        .collect()
}

/// Records 1.5 s of labperf-bench at 4 kHz of cpu-clock with the x86_64 agent built for
/// `target` (the C agent's or the Rust agent's), with `extra` agent options, into `lpr`;
/// returns the bench's own account of its CPU time.
fn record_bench(target: &str, lpr: &std::path::Path, extra: &[&std::ffi::OsStr]) -> BenchClock {
    let o = Command::new(agent(target, "labperf-agent"))
        .args(["record", "-e", "cpu-clock", "-c", "250000", "-o"])
        .arg(lpr)
        .args(extra)
        .arg("--")
        .arg(bin("labperf-bench"))
        .args(["--duration", "1.5"])
        .output()
        .unwrap();
    assert!(
        o.status.success(),
        "{target} agent: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    BenchClock::parse(&o.stderr)
}

/// Records labperf-bench with the C agent (x86_64 build), saving the ring bytes too;
/// returns the files and the bench's own account.
fn c_recording(test: &str) -> (PathBuf, PathBuf, BenchClock) {
    let d = scratch(test);
    let (lpr, ring) = (d.join("c.lpr"), d.join("c.ring"));
    let clock = record_bench(
        "x86_64-unknown-linux-none",
        &lpr,
        &["--dump-ring".as_ref(), ring.as_os_str()],
    );
    (lpr, ring, clock)
}

#[test]
fn c_agent_records_a_real_profile_that_labperf_reports() {
    let (lpr, _, clock) = c_recording("c-profile");
    let j = report_json(&lpr, 0, |_| {});
    let rows = j["tables"][0]["rows"].as_array().unwrap();
    let got: BTreeMap<String, f64> = rows
        .iter()
        .map(|r| {
            (
                r["name"].as_str().unwrap().to_string(),
                r["samples"].as_f64().unwrap(),
            )
        })
        .collect();
    let total: f64 = got.values().sum();
    // A sample every 250 µs of the classes' CPU time by the bench's clock, 90% at least
    // (the clock reads are kernel time no user sample sees).
    let want = clock.classes_s() * 4000.0;
    assert!(
        total >= 0.9 * want,
        "{total} samples in the C agent's profile, {want:.0} by the bench's clock"
    );
    // Each class's share against the CPU time the bench measured for it (half of its 1/7
    // share before, against the asked even split): 1.5 points, as the Rust agent's split
    // test (the C agent samples the same clock; dcache_miss reads low by ~0.5 point).
    assert_split(
        &got,
        &clock,
        &[
            "int_divider_stalls",
            "fp_divider_stalls",
            "branch_mispredicts",
            "dcache_miss",
            "double_to_int",
            "nops",
            "serializing",
        ],
        1.5,
    );
    let d = decode_all(&std::fs::read(&lpr).unwrap());
    assert!(d.losses.is_clean(), "{:?}", d.damage);
    let h = d.header.unwrap();
    assert_eq!(
        (h.arch, h.mode.as_str(), h.events[0].name.as_str()),
        (Arch::X86_64, "sample", "cpu-clock")
    );
    assert_eq!(d.trailer.unwrap().samples, heads(&d.records).len() as u64);
}

#[test]
fn both_agents_drain_their_ring_until_the_workload_ends() {
    // A ring of 2 pages holds about 170 samples (48 bytes each): 43 ms of the bench at
    // 4 kHz. An agent that does not drain it while the workload runs (as the C agent once
    // did, blocked on a pipe the workload held open) keeps only those, the first 43 ms;
    // one that drains has samples up to the end of the run.
    let d = scratch("drain");
    for (dir, name) in [
        ("x86_64-unknown-linux-none", "C"),
        ("x86_64-unknown-linux-musl", "Rust"),
    ] {
        let lpr = d.join(format!("{name}.lpr"));
        record_bench(dir, &lpr, &["--mmap-pages".as_ref(), "2".as_ref()]);
        let d = decode_all(&std::fs::read(&lpr).unwrap());
        assert!(d.losses.is_clean(), "{name}: {:?}", d.damage);
        let start = d.header.unwrap().start_time_ns;
        let end = d.trailer.unwrap().duration_ns;
        let last = heads(&d.records).iter().map(|h| h.3).max().unwrap() - start;
        // The bench runs until its wall-clock end, so its last sample lies within a
        // scheduling delay of the recording's end; 400 ms allows a crowded machine.
        assert!(
            last + 400_000_000 >= end,
            "{name} agent: last sample at {} ms of a {} ms recording",
            last / 1_000_000,
            end / 1_000_000
        );
    }
}

/// A recording's records less its KSYMS: the kernel functions its kernel samples name,
/// which the agent reads from /proc/kallsyms when it ends (no ring holds them).
fn without_ksyms(records: Vec<Record>) -> Vec<Record> {
    records
        .into_iter()
        .filter(|r| !matches!(r, Record::KernelSymbols(_)))
        .collect()
}

#[test]
fn c_writer_output_matches_the_ring_bytes_record_for_record() {
    let (lpr, ring, _) = c_recording("c-ring");
    let (want, other) = ring_samples(&std::fs::read(&ring).unwrap());
    let d = decode_all(&std::fs::read(&lpr).unwrap());
    assert!(want.len() > 1000);
    assert_eq!(heads(&d.records), want);
    let records = without_ksyms(d.records);
    assert_eq!(records.len() - want.len(), other);
}

#[test]
fn alpha_agent_replays_under_qemu_alpha_to_the_same_records() {
    let (lpr, ring, _) = c_recording("alpha-replay");
    let live = decode_all(&std::fs::read(&lpr).unwrap());
    let out = lpr.with_file_name("alpha.lpr");
    let o = Command::new("qemu-alpha")
        .arg(agent("alpha-unknown-linux-gnu", "labperf-agent"))
        .arg("replay")
        .arg(&ring)
        .args(["-e", "cpu-clock", "-c", "250000", "-o"])
        .arg(&out)
        .output()
        .expect("qemu-alpha (qemu-user) is installed by `cargo xtask setup`");
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let alpha = decode_all(&std::fs::read(&out).unwrap());
    assert!(alpha.losses.is_clean(), "{:?}", alpha.damage);
    // As root the live recording samples kernel mode too: its KSYMS come from this
    // machine's /proc/kallsyms at its end, the replay's from what qemu-alpha shows it.
    assert_eq!(without_ksyms(alpha.records), without_ksyms(live.records));
    let h = alpha.header.unwrap();
    assert_eq!((h.arch, h.mode.as_str()), (Arch::Alpha, "replay"));
    assert!(matches!(h.cpu, CpuId::Alpha { .. }));
    // The period stays under the Alpha PMU's 2^20-1 cap, and no exclude_* bit is set.
    assert!(h.events[0].attr.sample_period_or_freq < 1 << 20);
    assert!(
        !h.events[0]
            .attr
            .flag_names()
            .iter()
            .any(|f| f.starts_with("exclude")),
        "{:?}",
        h.events[0].attr.flag_names()
    );
    let o = Command::new("qemu-alpha")
        .arg(agent("alpha-unknown-linux-gnu", "labperf-agent"))
        .arg("replay")
        .arg(&ring)
        .args(["-c", "5000000", "-o"])
        .arg(&out)
        .output()
        .unwrap();
    assert!(o.status.success());
    assert_eq!(
        decode_all(&std::fs::read(&out).unwrap())
            .header
            .unwrap()
            .events[0]
            .attr
            .sample_period_or_freq,
        (1 << 20) - 1
    );
}

/// The C agent's `-q` (what `labperf -q record` passes the agent on a lab machine): no
/// "wrote N samples" line, the file written all the same.
#[test]
fn the_c_agent_s_quiet_option_leaves_out_its_wrote_line() {
    let d = scratch("c-quiet");
    let lpr = d.join("q.lpr");
    for (q, said) in [(&[][..], true), (&["-q"][..], false)] {
        let o = Command::new(agent("x86_64-unknown-linux-none", "labperf-agent"))
            .arg("record")
            .args(q)
            .args(["-e", "cpu-clock", "-o"])
            .arg(&lpr)
            .args(["--", "/bin/true"])
            .output()
            .unwrap();
        let e = String::from_utf8_lossy(&o.stderr);
        assert!(o.status.success(), "{q:?}: {e}");
        assert_eq!(e.contains("labperf-agent: wrote "), said, "{q:?}: {e}");
        assert!(lpr.is_file());
    }
}

#[test]
fn the_c_bench_prints_its_known_answer_and_the_c_agent_s_profile_matches_it() {
    // The freestanding C bench (the Alpha one's source, built for x86_64) recorded by the C
    // agent: each class's share of the samples is its share of the CPU time the bench's
    // own clock measured (1.5 points, as the Rust bench's split test).
    let d = scratch("c-bench");
    let lpr = d.join("c.lpr");
    let o = Command::new(agent("x86_64-unknown-linux-none", "labperf-agent"))
        .args(["record", "-e", "cpu-clock", "-c", "250000", "-o"])
        .arg(&lpr)
        .arg("--")
        .arg(agent("x86_64-unknown-linux-none", "labperf-bench"))
        .args(["--duration", "1", "--classes"])
        .arg("int_divider_stalls=3,nops=1,dcache_miss=1")
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let clock = BenchClock::parse(&o.stderr);
    let j = report_json(&lpr, 0, |_| {});
    let got: BTreeMap<String, f64> = j["tables"][0]["rows"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| {
            (
                r["name"].as_str().unwrap().to_string(),
                r["samples"].as_f64().unwrap(),
            )
        })
        .collect();
    let names = ["int_divider_stalls", "nops", "dcache_miss"];
    let n: f64 = names.iter().filter_map(|f| got.get(*f)).sum();
    // A sample every 250 µs of the classes' CPU time by its clock, 90% at least (its clock
    // reads, one per ~200 µs block, are kernel time no user sample sees).
    assert!(
        n >= 0.9 * clock.classes_s() * 4000.0,
        "{n} samples: {clock:?}"
    );
    assert_split(&got, &clock, &names, 1.5);
}

#[test]
fn alpha_bench_runs_under_qemu_alpha() {
    let b = agent("alpha-unknown-linux-gnu", "labperf-bench");
    let o = Command::new("qemu-alpha")
        .arg(&b)
        .arg("--list")
        .output()
        .unwrap();
    assert_eq!(String::from_utf8_lossy(&o.stdout).lines().count(), 7);
    let o = Command::new("qemu-alpha")
        .arg(&b)
        .args([
            "--duration",
            "0.3",
            "--classes",
            "nops,dcache_miss=2,int_divider_stalls",
        ])
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    // Its known answer, in the Rust bench's form: one line per class asked for its
    // calibration and one for its slices, the time in them within the process's.
    let clock = BenchClock::parse(&o.stderr);
    let paths: Vec<&str> = clock.entries.iter().map(|e| e.path.as_str()).collect();
    assert_eq!(
        paths,
        [
            "calibrate;int_divider_stalls",
            "calibrate;dcache_miss",
            "calibrate;nops",
            "int_divider_stalls",
            "dcache_miss",
            "nops"
        ],
        "{clock:?}"
    );
    assert!(clock.entries.iter().all(|e| e.ns > 0 && e.thread == "main"));
    assert!(
        clock.classes_s() * 1e9 <= clock.process_ns as f64,
        "{clock:?}"
    );
    let o = Command::new("qemu-alpha")
        .arg(&b)
        .args(["--classes", "nosuch"])
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(2));
}

#[test]
fn aarch64_agent_under_qemu_aarch64() {
    let a = agent("aarch64-unknown-linux-musl", "labperf-agent");
    let o = Command::new("qemu-aarch64")
        .arg(&a)
        .arg("--version")
        .output()
        .expect("qemu-aarch64 (qemu-user) is installed by `cargo xtask setup`");
    assert!(String::from_utf8_lossy(&o.stdout).contains("(aarch64)"));
    let o = Command::new("qemu-aarch64")
        .arg(&a)
        .arg("list")
        .output()
        .unwrap();
    assert!(o.status.success() && String::from_utf8_lossy(&o.stdout).contains("Software events"));
    // Whether qemu-aarch64 forwards perf_event_open, from qemu's own syscall trace (the
    // emulator's answer, not the agent's reading of it); then the branch that applies.
    let d = scratch("aarch64");
    let o = Command::new("qemu-aarch64")
        .arg("-strace")
        .arg(&a)
        .args(["record", "-e", "cpu-clock", "-o"])
        .arg(d.join("x.lpr"))
        .args(["--", "/bin/true"])
        .output()
        .unwrap();
    let trace = String::from_utf8_lossy(&o.stderr);
    // The call and its result, wherever they are: qemu writes each process's trace in pieces
    // to one stderr, so the workload's lines can cut the agent's call from its pid and from
    // its result (CI108 saw `22377 rt_sigprocmask(..., 22375 8) = 0` then the call on a line
    // of its own): the result is the first `= ` answer after the call.
    let at = trace
        .find("perf_event_open(")
        .unwrap_or_else(|| panic!("the agent never called perf_event_open:\n{trace}"));
    let after = &trace[at..];
    let answer = after
        .find(") = ")
        .map(|i| &after[i + 4..])
        .unwrap_or_else(|| panic!("no answer to perf_event_open:\n{trace}"));
    if answer.starts_with("-1 errno=38") {
        // ENOSYS: the agent says so, names qemu-user, and writes nothing.
        assert_eq!(o.status.code(), Some(125), "{trace}");
        assert!(
            trace.contains("Function not implemented") && trace.contains("qemu-user"),
            "{trace}"
        );
        assert!(!d.join("x.lpr").exists() && !d.join("x.lpr.part").exists());
    } else {
        // A qemu that forwards it: the agent records.
        assert!(o.status.success(), "{trace}");
        assert!(decode_all(&std::fs::read(d.join("x.lpr")).unwrap())
            .losses
            .is_clean());
    }
}

#[test]
fn labperf_finds_its_agent_in_an_installed_tree() {
    // The `cargo xtask dist` layout: bin/labperf and lib/labperf/agents/<triple>/.
    let d = scratch("installed");
    let triple = format!("{}-unknown-linux-musl", std::env::consts::ARCH);
    std::fs::create_dir_all(d.join("bin")).unwrap();
    std::fs::create_dir_all(d.join("lib/labperf/agents").join(&triple)).unwrap();
    std::fs::copy(bin("labperf"), d.join("bin/labperf")).unwrap();
    std::fs::copy(
        bin("labperf-agent"),
        d.join("lib/labperf/agents")
            .join(&triple)
            .join("labperf-agent"),
    )
    .unwrap();
    let installed = || {
        let mut c = Command::new(d.join("bin/labperf"));
        c.env_remove("LABPERF_AGENT")
            .env_remove("LABPERF_AGENTS_DIR");
        c
    };
    let o = installed()
        .args(["record", "--local", "--no-report", "-e", "task-clock", "-o"])
        .arg(d.join("x.lpr"))
        .args(["--", "/bin/true"])
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let o = installed().args(["agents", "--check"]).output().unwrap();
    assert!(o.status.success() && String::from_utf8_lossy(&o.stdout).contains(&triple));
    // It says which directory it listed.
    let listed = d.join("lib/labperf/agents");
    assert_eq!(
        String::from_utf8_lossy(&o.stderr).trim(),
        format!("labperf: the agents in {}", listed.display())
    );
    // Without the installed tree, a `cargo install --path host` binary: the agents of the
    // source tree it was built from (`cargo xtask build-agents`' target/agents).
    std::fs::remove_dir_all(d.join("lib")).unwrap();
    let o = installed().args(["agents"]).output().unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let tree = labperf_tests::root().join("target/agents");
    assert_eq!(
        String::from_utf8_lossy(&o.stderr).trim(),
        format!("labperf: the agents in {}", tree.display())
    );
    // LABPERF_AGENTS_DIR names the one directory: an empty one has no agent, and the error
    // says where labperf looked and what to do.
    let empty = d.join("no-agents");
    std::fs::create_dir_all(&empty).unwrap();
    let o = installed()
        .env("LABPERF_AGENTS_DIR", &empty)
        .args(["record", "--local", "-o"])
        .arg(d.join("y.lpr"))
        .args(["--", "/bin/true"])
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(1));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains(&format!("looked under {}", empty.display()))
            && err.contains("cargo xtask build-agents"),
        "{err}"
    );
}

/// Issue 47 F4: labperf takes agents only from where the installation put them, and only
/// when no other user could have put them there: a labperf copied to a directory another
/// user planted `agents/` in (here beside it, as `/tmp/agents` beside `/tmp/labperf`) does
/// not run that agent; an agent in a world-writable directory, or in one another user
/// owns, is refused with the directory, the reason and the fix; the upload to a lab
/// machine takes the agent through the same check (`agents::shipped_for`).
#[test]
fn agents_another_user_could_have_put_there_are_refused() {
    use std::os::unix::fs::PermissionsExt;
    use std::path::Path;
    let d = scratch("planted-agents");
    let triple = format!("{}-unknown-linux-musl", std::env::consts::ARCH);
    std::fs::copy(bin("labperf"), d.join("labperf")).unwrap();
    let pwned = d.join("pwned");
    let planted = d.join("agents").join(&triple);
    std::fs::create_dir_all(&planted).unwrap();
    let fake = planted.join("labperf-agent");
    std::fs::write(&fake, format!("#!/bin/sh\n: > {}\n", pwned.display())).unwrap();
    std::fs::set_permissions(&fake, std::fs::Permissions::from_mode(0o755)).unwrap();
    let chmod = |p: &Path, mode: u32| {
        std::fs::set_permissions(p, std::fs::Permissions::from_mode(mode)).unwrap()
    };
    let nobody = |p: &Path| {
        // SAFETY: chown of the test's own file to nobody (the test runs as root).
        let c = std::ffi::CString::new(p.as_os_str().as_encoded_bytes()).unwrap();
        assert_eq!(unsafe { libc::chown(c.as_ptr(), 65534, 65534) }, 0);
    };
    // Another user's directory, and one every user may write: each refused, said so.
    let agents = d.join("agents");
    let record = |env: Option<&Path>| {
        let mut c = Command::new(d.join("labperf"));
        c.env_remove("LABPERF_AGENT")
            .env_remove("LABPERF_AGENTS_DIR");
        if let Some(e) = env {
            c.env("LABPERF_AGENTS_DIR", e);
        }
        c.args(["record", "--local", "--no-report", "-o"])
            .arg(d.join("x.lpr"))
            .args(["--", "/bin/true"])
            .output()
            .unwrap()
    };
    for what in ["owned by nobody", "world-writable", "group-writable"] {
        match what {
            "owned by nobody" => nobody(&agents),
            "world-writable" => chmod(&agents, 0o777),
            _ => chmod(&agents, 0o775),
        }
        // `labperf agents` lists it and fails, as a record with it would.
        let o = Command::new(d.join("labperf"))
            .env_remove("LABPERF_AGENT")
            .env("LABPERF_AGENTS_DIR", &agents)
            .arg("agents")
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(1), "agents, {what}: {err}");
        assert!(
            err.contains("of the agents listed would be refused by record"),
            "agents, {what}: {err}"
        );
        for env in [None, Some(agents.as_path())] {
            let o = record(env);
            let err = String::from_utf8_lossy(&o.stderr);
            assert_eq!(o.status.code(), Some(1), "{what}: {err}");
            assert!(!pwned.exists(), "{what}: the planted agent ran: {err}");
            let why = match what {
                "owned by nobody" => format!(
                    "the directory {} belongs to user 65534 (neither you nor root)",
                    agents.display()
                ),
                "world-writable" => format!(
                    "the directory {} is writable by its group and every user (mode 0777)",
                    agents.display()
                ),
                _ => format!(
                    "the directory {} is writable by its group (mode 0775)",
                    agents.display()
                ),
            };
            assert!(
                err.contains(&format!("refusing the agent {}", fake.display()))
                    && err.contains(&why)
                    && err.contains("LABPERF_AGENTS_DIR"),
                "{what}: {err}"
            );
        }
        // Put back: root's, 0755.
        let c = std::ffi::CString::new(agents.as_os_str().as_encoded_bytes()).unwrap();
        // SAFETY: chown of the test's own directory back to root.
        assert_eq!(unsafe { libc::chown(c.as_ptr(), 0, 0) }, 0);
        chmod(&agents, 0o755);
    }
    // The file itself writable by others, or another user's.
    chmod(&fake, 0o757);
    let err = String::from_utf8_lossy(&record(None).stderr).into_owned();
    assert!(
        err.contains(&format!(
            "the file {} is writable by every user (mode 0757)",
            fake.display()
        )),
        "{err}"
    );
    chmod(&fake, 0o755);
    nobody(&fake);
    let err = String::from_utf8_lossy(&record(None).stderr).into_owned();
    assert!(
        err.contains(&format!(
            "the file {} belongs to user 65534",
            fake.display()
        )),
        "{err}"
    );
    assert!(!pwned.exists());
    // A world-writable directory with the sticky bit (as /tmp) protects what it holds: a
    // real agent of ours in one is taken, from the agents directory beside labperf.
    std::fs::remove_file(&fake).unwrap();
    std::fs::copy(bin("labperf-agent"), &fake).unwrap();
    chmod(&d, 0o1777);
    let o = record(None);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    // But a name another user adds there: in a sticky agents directory nobody makes the
    // agent's name a link to a program of root's (the new-user trial ran /usr/bin/id as the
    // agent so): the link is theirs, refused, named.
    chmod(&planted, 0o1777);
    std::fs::remove_file(&fake).unwrap();
    let ln = Command::new("setpriv")
        .args([
            "--reuid=65534",
            "--regid=65534",
            "--clear-groups",
            "ln",
            "-s",
        ])
        .arg(format!("{}", std::path::Path::new("/bin/sh").display()))
        .arg(&fake)
        .status()
        .unwrap();
    assert!(ln.success());
    let o = record(None);
    let err = String::from_utf8_lossy(&o.stderr).into_owned();
    chmod(&planted, 0o755);
    chmod(&d, 0o755);
    assert_eq!(o.status.code(), Some(1), "{err}");
    assert!(
        err.contains(&format!(
            "the symbolic link {} belongs to user 65534",
            fake.display()
        )),
        "{err}"
    );
}

/// Rings of every record kind both agents convert, each in one sample layout:
/// (name, ring, sample_type, read_format, kernel records that are samples).
fn differential_rings() -> Vec<(&'static str, Ring, u64, u64)> {
    let mut out = Vec::new();
    let side_band = |r: &mut Ring| {
        r.comm(100, "bench");
        r.mmap2_with(
            100,
            0x5555_0000_0000,
            0x20000,
            0x1000,
            Some(&[0xab; 20]),
            "/usr/bin/bench",
        );
        r.mmap2_with(100, 0x7f00_0000_0000, 0x1000, 0, None, "//anon");
        r.task(false, 101, 100, 101, 100, 5_000);
        r.task(true, 101, 100, 101, 100, 9_000);
        r.lost(0, 17);
        r.lost_samples(3);
        r.throttle(false, 6_000, 0);
        r.throttle(true, 7_000, 0);
    };
    let base = |i: u64| KSample {
        ip: 0x5555_0000_1000 + (i * 37) % 0x8000,
        pid: 100,
        tid: 100 + (i % 3) as u32,
        time: 1_000_000 + i * 250_000,
        cpu: (i % 2) as u32,
        period: 250_000 + (i % 5),
        ..Default::default()
    };
    let mut r = Ring::default();
    side_band(&mut r);
    for i in 0..60 {
        r.ksample(PLAIN_SAMPLE_TYPE, 0, &base(i));
    }
    out.push(("plain and side band", r, PLAIN_SAMPLE_TYPE, 0));
    let st = PLAIN_SAMPLE_TYPE | SAMPLE_READ | SAMPLE_IDENTIFIER;
    let rf = FORMAT_GROUP | FORMAT_ID | FORMAT_TOTAL_TIME_ENABLED | FORMAT_TOTAL_TIME_RUNNING;
    let mut r = Ring::default();
    side_band(&mut r);
    for i in 0..60 {
        let n = if i % 7 == 3 { 2 } else { 3 };
        let values = (0..n).map(|k| (i * 1000 * (k + 1) + k, 50 + k)).collect();
        r.ksample(
            st,
            rf,
            &KSample {
                id: 50,
                values,
                ..base(i)
            },
        );
    }
    out.push(("group read", r, st, rf));
    let st = PLAIN_SAMPLE_TYPE | SAMPLE_CALLCHAIN;
    let mut r = Ring::default();
    for i in 0..40 {
        // PERF_CONTEXT_USER (-512) marks where user frames start; agents leave it out.
        let callchain = vec![
            0xffff_ffff_ffff_fe00,
            0x5555_0000_2000 + i,
            0x5555_0000_3000,
        ];
        r.ksample(
            st,
            0,
            &KSample {
                callchain,
                ..base(i)
            },
        );
    }
    out.push(("callchain", r, st, 0));
    let mut r = Ring::default();
    side_band(&mut r);
    for i in 0..40 {
        let raw = labperf_tests::alpha::payload(1, 0x1_2000_0000 + i * 4, i << 33, 2 | (i << 6));
        r.ksample(PROFILEME_SAMPLE_TYPE, 0, &KSample { raw, ..base(i) });
    }
    out.push(("ProfileMe raw", r, PROFILEME_SAMPLE_TYPE, 0));
    let mut r = Ring::default();
    for i in 0..40 {
        let raw = labperf_tests::alpha::payload(1, 0x1_2000_0000 + i * 4, 0, 2);
        r.ksample(
            MEM_SAMPLE_TYPE,
            0,
            &KSample {
                raw,
                addr: 0x1_4000_0000 + i * 64,
                data_src: (2 + (i % 2) * 2) | (0x02 << 26),
                ..base(i)
            },
        );
    }
    out.push(("mem", r, MEM_SAMPLE_TYPE, 0));
    let st = PLAIN_SAMPLE_TYPE | SAMPLE_WEIGHT | SAMPLE_DATA_SRC;
    let mut r = Ring::default();
    for i in 0..20 {
        r.ksample(
            st,
            0,
            &KSample {
                weight: i,
                data_src: 0x1000 + i,
                ..base(i)
            },
        );
    }
    out.push(("weight and data source", r, st, 0));
    out
}

/// `replay` of `ring` by an agent (`runner` runs it: nothing, or qemu-alpha).
fn replay(
    runner: Option<&str>,
    agent: &std::path::Path,
    ring: &std::path::Path,
    st: u64,
    rf: u64,
    out: &std::path::Path,
) -> labperf_common::Decoded {
    let mut c = match runner {
        Some(r) => {
            let mut c = Command::new(r);
            c.arg(agent);
            c
        }
        None => Command::new(agent),
    };
    let o = c
        .arg("replay")
        .arg(ring)
        .args([
            "--sample-type",
            &format!("{st:x}"),
            "--read-format",
            &format!("{rf:x}"),
            "-o",
        ])
        .arg(out)
        .output()
        .unwrap();
    assert!(
        o.status.success(),
        "{}: {}",
        agent.display(),
        String::from_utf8_lossy(&o.stderr)
    );
    let d = decode_all(&std::fs::read(out).unwrap());
    assert!(d.losses.is_clean(), "{:?}", d.damage);
    d
}

#[test]
fn rust_and_c_agents_convert_the_same_ring_bytes_to_the_same_records() {
    let d = scratch("differential");
    let rust = bin("labperf-agent");
    let c = agent("x86_64-unknown-linux-none", "labperf-agent");
    let alpha = agent("alpha-unknown-linux-gnu", "labperf-agent");
    for (name, ring, st, rf) in differential_rings() {
        let path = d.join("ring.bin");
        std::fs::write(&path, &ring.bytes).unwrap();
        let r = replay(None, &rust, &path, st, rf, &d.join("rust.lpr"));
        let x = replay(None, &c, &path, st, rf, &d.join("c.lpr"));
        let a = replay(
            Some("qemu-alpha"),
            &alpha,
            &path,
            st,
            rf,
            &d.join("alpha.lpr"),
        );
        // Every kernel record kind in the ring came through (the side band: comm, two
        // mmap2, fork, exit, lost, lost samples, throttle, unthrottle).
        let samples = r
            .records
            .iter()
            .filter(|x| matches!(x, Record::Sample(_)))
            .count();
        assert!(samples >= 20, "{name}: {samples} samples");
        assert_eq!(
            r.trailer.as_ref().unwrap().samples,
            samples as u64,
            "{name}"
        );
        if name == "plain and side band" {
            assert_eq!(r.records.len(), samples + 9, "{name}: {:#?}", r.records);
            let build_id = r.records.iter().find_map(|x| match x {
                Record::Mmap2(m) if m.build_id.is_some() => m.build_id.clone(),
                _ => None,
            });
            assert_eq!(build_id, Some(vec![0xab; 20]));
            assert_eq!(r.trailer.as_ref().unwrap().lost, 20);
        }
        assert_eq!(
            x.records, r.records,
            "{name}: the C agent differs from the Rust agent"
        );
        assert_eq!(
            a.records, r.records,
            "{name}: the Alpha build differs from the Rust agent"
        );
        assert_eq!(
            (
                x.trailer.as_ref().unwrap().samples,
                a.trailer.as_ref().unwrap().samples
            ),
            (samples as u64, samples as u64),
            "{name}"
        );
        // Both say what the samples are and that they were replayed.
        for f in [&r, &x, &a] {
            assert!(f.header_ext.as_ref().unwrap().replayed, "{name}");
        }
    }
    // Real ring bytes, saved by the C agent while it recorded the bench on this machine.
    let (lpr, ring, _) = c_recording("differential-real");
    let live = decode_all(&std::fs::read(&lpr).unwrap());
    let st = live.header.as_ref().unwrap().events[0].attr.sample_type;
    let r = replay(None, &rust, &ring, st, 0, &d.join("rust-real.lpr"));
    assert!(r.records.len() > 1000);
    assert_eq!(r.records, live.records);
}

#[test]
fn c_agent_records_call_stacks_on_x86_64_and_says_alpha_has_none() {
    let d = scratch("c-stacks");
    let lpr = d.join("c.lpr");
    let o = Command::new(agent("x86_64-unknown-linux-none", "labperf-agent"))
        .args(["record", "-g", "-e", "cpu-clock", "-c", "250000", "-o"])
        .arg(&lpr)
        .arg("--")
        .arg(bin("labperf-bench"))
        .args(["--calls", "--duration", "1.5"])
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let j = report_json(&lpr, 0, |c| {
        c.arg("--children");
    });
    let total = j["summary"]["total_samples"].as_u64().unwrap();
    let stacked = j["summary"]["stacked_samples"].as_u64().unwrap();
    assert!(
        stacked as f64 >= 0.99 * total as f64,
        "{stacked} of {total}"
    );
    let share = |name: &str| {
        j["tables"][0]["rows"]
            .as_array()
            .unwrap()
            .iter()
            .find(|r| r["name"] == name)
            .unwrap_or_else(|| panic!("{name} missing: {j}"))["children_pct"]
            .as_f64()
            .unwrap()
    };
    // The stacks that reached the outermost frame came through main, but for the few of
    // the process's start and exit (2 of 3,621 once): 99 % of them at least. The ones that
    // stopped (a sample in a function before it set up its frame: 9 to 30 of about 5,000
    // here, and enough in one CI run to put main under 99 % of all) are the report's to
    // say, and stay few. The tree's two halves as the bench's clock split them (5 points against the
    // asked half each before; 2 against the clock, as the Rust agent's call-stack tests:
    // cpu-clock samples the CPU time the bench measures).
    let main_row = j["tables"][0]["rows"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["name"] == "labperf_bench::main")
        .unwrap_or_else(|| panic!("labperf_bench::main missing: {j}"));
    let stacks = &j["summary"]["stacks"];
    let outermost = stacks["outermost"].as_u64().unwrap();
    let through_main = main_row["children"].as_u64().unwrap();
    assert!(
        through_main as f64 >= 0.99 * outermost as f64 && through_main <= outermost,
        "{through_main} through main: {stacks}"
    );
    assert!(outermost as f64 >= 0.97 * total as f64, "{stacks}");
    let clock = BenchClock::parse(&o.stderr);
    let tree = ["labperf_bench::calls_a", "labperf_bench::calls_b"];
    let got: BTreeMap<String, f64> = tree.iter().map(|n| (n.to_string(), share(n))).collect();
    assert_split(&got, &clock, &tree, 2.0);
    // Linux on Alpha has no callchains: the Alpha agent refuses -g with the reason,
    // before it opens anything.
    let o = Command::new(agent("alpha-unknown-linux-gnu", "labperf-agent"))
        .args(["record", "-g", "--", "true"])
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(2));
    let e = String::from_utf8_lossy(&o.stderr);
    assert!(e.contains("Linux on Alpha records no call stacks"), "{e}");
    // Stacks by DWARF are not the C agent's.
    let o = Command::new(agent("x86_64-unknown-linux-none", "labperf-agent"))
        .args(["record", "--call-graph", "dwarf", "--", "true"])
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&o.stderr).contains("frame pointers only"));
}
