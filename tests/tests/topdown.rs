//! Intel TopDown without the hardware: the agent's attrs for every recipe against expected
//! files (perf's tests/attr method, over recorded sysfs trees), its errors on this
//! machine, and the host's tables from recordings whose counts are worked out by hand
//! (the seed's interval table among them).

use labperf_common::{
    decode_all, Arch, Attr, Count, CpuId, Encoder, Endian, EventDesc, Header, Interval, Mmap2,
    Record, Sample, Trailer,
};
use labperf_tests::{bin, root, scratch};
use serde_json::Value;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;

fn plan_dir() -> PathBuf {
    root().join("tests/data/x86_64-topdown-plan")
}

fn agent() -> PathBuf {
    bin("labperf-agent")
}

/// `labperf-agent plan ARGS` over the sysfs tree `tree`.
fn plan(tree: &str, args: &[&str]) -> (bool, String, String) {
    let o = Command::new(agent())
        .arg("plan")
        .args(args)
        .env("LABPERF_SYSFS", root().join("tests/data/sysfs").join(tree))
        .output()
        .unwrap();
    (
        o.status.success(),
        String::from_utf8(o.stdout).unwrap(),
        String::from_utf8_lossy(&o.stderr).into_owned(),
    )
}

/// The `key=value` fields of one plan line.
fn fields(line: &str) -> BTreeMap<&str, &str> {
    line.split(' ')
        .filter_map(|kv| kv.split_once('='))
        .collect()
}

fn hex(v: &str) -> u64 {
    u64::from_str_radix(v.trim_start_matches("0x"), 16).unwrap()
}

#[test]
fn plan_output_matches_the_expected_attrs_of_every_recipe() {
    let recipes = std::fs::read_to_string(plan_dir().join("recipes.txt")).unwrap();
    let mut n = 0;
    for r in recipes.lines() {
        // name: sysfs tree: labperf-agent plan ARGS
        let mut parts = r.splitn(3, ": ");
        let (name, tree, cmd) = (
            parts.next().unwrap(),
            parts.next().unwrap(),
            parts.next().unwrap(),
        );
        let args: Vec<&str> = cmd
            .trim_start_matches("labperf-agent plan ")
            .split(' ')
            .collect();
        let (ok, out, err) = plan(tree, &args);
        assert!(ok, "{name}: {err}");
        let want = std::fs::read_to_string(plan_dir().join(format!("{name}.txt"))).unwrap();
        assert_eq!(out, want, "{name}: `{cmd}` with {tree}");
        n += 1;
    }
    assert_eq!(n, 12);
}

#[test]
fn topdown_attrs_follow_the_seeds_rules() {
    const GROUP: u64 = 1 << 3;
    const SAMPLE_READ: u64 = 1 << 4;
    // stat: SLOTS (0x0400) leads, the metrics (0x8000 + 0x100 i) follow, all read as a group.
    for (tree, level, n) in [
        ("x86_64-icelake", "1", 4),
        ("x86_64-sapphirerapids", "2", 8),
    ] {
        let (ok, out, err) = plan(tree, &["stat", "--topdown", "--level", level, "--", "w"]);
        assert!(ok, "{err}");
        let lines: Vec<_> = out.lines().map(fields).collect();
        assert_eq!(lines.len(), 1 + n);
        assert_eq!(
            (lines[0]["event"], lines[0]["config"], lines[0]["leader"]),
            ("slots", "0x400", "-")
        );
        for (i, l) in lines[1..].iter().enumerate() {
            assert_eq!(hex(l["config"]), 0x8000 + 0x100 * i as u64, "{l:?}");
            assert_eq!(l["leader"], "0");
        }
        assert!(lines.iter().all(|l| hex(l["read_format"]) & GROUP != 0));
        assert!(lines.iter().all(|l| l["type"] == "4" && l["cpu"] == "-1"));
    }
    // record: {slots, SAMPLER, topdown-*}: only the second event samples, and reads the group.
    let (_, out, _) = plan(
        "x86_64-icelake",
        &["record", "--topdown", "-c", "100003", "--", "w"],
    );
    let lines: Vec<_> = out.lines().map(fields).collect();
    assert_eq!((lines[0]["event"], lines[1]["event"]), ("slots", "cycles"));
    for (i, l) in lines.iter().enumerate() {
        let period: u64 = l.get("sample_period").map_or(1, |p| p.parse().unwrap());
        assert_eq!(period != 0, i == 1, "{l:?}");
        assert!(hex(l["sample_type"]) & SAMPLE_READ != 0);
    }
    // Before Ice Lake: per CPU, system-wide, kernel included, the five events.
    let (_, out, _) = plan("x86_64-skylake", &["stat", "--topdown", "--", "w"]);
    let lines: Vec<_> = out.lines().map(fields).collect();
    assert_eq!(lines.len(), 5);
    assert!(lines
        .iter()
        .all(|l| l["pid"] == "-1" && !l["flags"].contains("exclude_kernel")));
    // Errors that name the fix.
    let (ok, _, err) = plan(
        "x86_64-icelake",
        &["stat", "--topdown", "--level", "2", "--", "w"],
    );
    assert!(!ok && err.contains("Sapphire Rapids"), "{err}");
    let (ok, _, err) = plan("x86_64-skylake", &["record", "--topdown", "--", "w"]);
    assert!(!ok && err.contains("use stat --topdown"), "{err}");
    let (ok, _, err) = plan("x86_64-no-topdown", &["stat", "--topdown", "--", "w"]);
    assert!(!ok && err.contains("no TopDown events"), "{err}");
}

/// Whether this machine's core PMU has TopDown events (read from sysfs, not from the agent).
fn machine_has_topdown() -> bool {
    let d = std::path::Path::new("/sys/bus/event_source/devices");
    ["cpu", "cpu_core"].iter().any(|p| {
        ["slots", "topdown-total-slots"]
            .iter()
            .any(|e| d.join(p).join("events").join(e).exists())
    })
}

#[test]
fn stat_topdown_on_this_machine_counts_or_says_what_is_missing() {
    let d = scratch("td-machine");
    let f = d.join("td.lpr");
    let o = Command::new(agent())
        .args(["stat", "--topdown", "-I", "100", "-o"])
        .arg(&f)
        .args(["--", "/bin/sleep", "0.3"])
        .output()
        .unwrap();
    let e = String::from_utf8_lossy(&o.stderr);
    if machine_has_topdown() {
        // A TopDown PMU: it counts (as root, the pre-Ice Lake system-wide events too).
        assert!(o.status.success(), "{e}");
        let dec = decode_all(&std::fs::read(&f).unwrap());
        assert!(dec.losses.is_clean());
        assert!(dec.records.iter().any(|r| matches!(r, Record::Interval(_))));
    } else {
        assert_eq!(o.status.code(), Some(125));
        assert!(
            e.contains("no TopDown events") && e.contains("Ice Lake"),
            "{e}"
        );
        assert!(!f.exists());
    }
}

/// Copies the directory tree `from` into `to`.
fn copy_tree(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for e in std::fs::read_dir(from).unwrap() {
        let e = e.unwrap();
        let dst = to.join(e.file_name());
        if e.file_type().unwrap().is_dir() {
            copy_tree(&e.path(), &dst);
        } else {
            std::fs::copy(e.path(), dst).unwrap();
        }
    }
}

#[test]
fn a_sysfs_tree_without_the_pmu_behind_it_fails_before_the_workload_runs() {
    // An Ice Lake sysfs tree whose PMU type no PMU of this kernel has (PMU types are small
    // numbers handed out at boot): opening SLOTS fails on every machine, with a TopDown PMU
    // or without, said plainly, and the workload never runs.
    let d = scratch("td-open");
    let tree = d.join("sysfs");
    copy_tree(&root().join("tests/data/sysfs/x86_64-icelake"), &tree);
    std::fs::write(tree.join("bus/event_source/devices/cpu/type"), "1000000\n").unwrap();
    let marker = d.join("ran");
    let o = Command::new(agent())
        .args(["stat", "--topdown", "--", "/bin/touch"])
        .arg(&marker)
        .env("LABPERF_SYSFS", &tree)
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(125));
    let e = String::from_utf8_lossy(&o.stderr);
    assert!(e.contains("slots"), "{e}");
    assert!(
        !marker.exists(),
        "the workload ran although nothing was counted"
    );
}

/// Cumulative group reads (nr, enabled, running, slots, retiring, bad spec, fe, be), and
/// the deltas they make: the seed's first line, then 50/10/20/20, then 3 of 2000 slots
/// retiring (0.15%: one formatter rounds it the same in the agent and the host).
const SCRIPT: [[u64; 8]; 3] = [
    [5, 1000, 1000, 4000, 230, 153, 296, 321],
    [5, 2000, 2000, 8000, 730, 253, 496, 521],
    [5, 3000, 3000, 10_000, 733, 1253, 996, 1018],
];
const DELTAS: [[u64; 5]; 3] = [
    [4000, 230, 153, 296, 321],
    [4000, 500, 100, 200, 200],
    [2000, 3, 1000, 500, 497],
];

#[test]
fn stat_topdown_writes_the_intervals_the_host_reports_line_for_line() {
    // Simulated counts (LABPERF_TOPDOWN_REPLAY: the agent's kernel layer replays these
    // group reads) through the real agent, its file, and the real host report.
    let d = scratch("td-replay");
    let script = d.join("reads.txt");
    let text: String = SCRIPT
        .iter()
        .map(|r| {
            r.iter()
                .map(|v| v.to_string())
                .collect::<Vec<_>>()
                .join(" ")
                + "\n"
        })
        .collect();
    std::fs::write(&script, text).unwrap();
    let f = d.join("td.lpr");
    let o = Command::new(agent())
        .args(["stat", "--topdown", "-I", "100", "-o"])
        .arg(&f)
        .args(["--", "/bin/sleep", "0.45"])
        .env(
            "LABPERF_SYSFS",
            root().join("tests/data/sysfs/x86_64-icelake"),
        )
        .env("LABPERF_TOPDOWN_REPLAY", &script)
        .output()
        .unwrap();
    let live = String::from_utf8_lossy(&o.stderr).into_owned();
    assert!(o.status.success(), "{live}");
    let dec = decode_all(&std::fs::read(&f).unwrap());
    assert!(dec.losses.is_clean());
    assert!(dec.header_ext.as_ref().unwrap().replayed);
    let intervals: Vec<&labperf_common::Interval> = dec
        .records
        .iter()
        .filter_map(|r| match r {
            Record::Interval(i) if i.delta => Some(i),
            _ => None,
        })
        .collect();
    assert!(intervals.len() >= 3, "{live}");
    for (i, want) in DELTAS.iter().enumerate() {
        let got: Vec<u64> = intervals[i].counts.iter().map(|c| c.value).collect();
        assert_eq!(&got[..], &want[..], "interval {i}");
    }
    // The agent's live lines and the host's table agree to the character.
    let rep = Command::new(bin("labperf"))
        .args(["report"])
        .arg(&f)
        .env("NO_COLOR", "1")
        .output()
        .unwrap();
    let table = String::from_utf8_lossy(&rep.stdout).into_owned();
    assert!(
        rep.status.success(),
        "{}",
        String::from_utf8_lossy(&rep.stderr)
    );
    let agent_lines: Vec<&str> = live
        .lines()
        .filter(|l| {
            l.starts_with("#           time")
                || l.trim_start().starts_with(|c: char| c.is_ascii_digit())
        })
        .collect();
    let host_lines: Vec<&str> = table
        .lines()
        .filter(|l| {
            l.starts_with("#           time")
                || l.trim_start().starts_with(|c: char| c.is_ascii_digit())
        })
        .collect();
    assert_eq!(agent_lines, host_lines, "live:\n{live}\ntable:\n{table}");
    assert!(host_lines[3].contains("0.2%"), "{table}");
    let total = |t: &str| {
        t.lines()
            .find(|l| l.trim_start().starts_with("total"))
            .map(str::to_string)
    };
    assert_eq!(total(&live), total(&table));
    assert!(total(&table).is_some());
}

fn event(name: &str, type_: u32, config: u64, leader: Option<u32>) -> EventDesc {
    EventDesc {
        name: name.into(),
        attr: Attr {
            type_,
            size: 136,
            config,
            ..Default::default()
        },
        leader,
    }
}

fn header(events: Vec<EventDesc>, mode: &str) -> Header {
    Header {
        agent_version: "synthetic".into(),
        arch: Arch::X86_64,
        endian: Endian::Little,
        kernel_release: "6.18".into(),
        cpu: CpuId::Unknown {
            cpuinfo: "GenuineIntel".into(),
        },
        hostname: "icx".into(),
        command: vec!["./w".into()],
        clock_id: 1,
        start_time_ns: 0,
        start_realtime_ns: 0,
        events,
        mode: mode.into(),
        notes: vec![],
    }
}

fn write(name: &str, h: &Header, records: &[Record]) -> PathBuf {
    let mut e = Encoder::new();
    let mut f = Encoder::prelude().to_vec();
    f.extend(e.header_frame(h));
    for r in records {
        e.push(r);
    }
    if let Some(fr) = e.flush() {
        f.extend(fr);
    }
    f.extend(e.trailer_frame(&Trailer::default()));
    let p = scratch(name).join("td.lpr");
    std::fs::write(&p, f).unwrap();
    p
}

fn metrics_events(level2: bool) -> Vec<EventDesc> {
    let mut v = vec![event("slots", 4, 0x400, None)];
    let names = [
        "topdown-retiring",
        "topdown-bad-spec",
        "topdown-fe-bound",
        "topdown-be-bound",
        "topdown-heavy-ops",
        "topdown-br-mispredict",
        "topdown-fetch-lat",
        "topdown-mem-bound",
    ];
    for (i, n) in names.iter().enumerate().take(if level2 { 8 } else { 4 }) {
        v.push(event(n, 4, 0x8000 + 0x100 * i as u64, Some(0)));
    }
    v
}

fn interval(time: u64, tid: Option<u32>, delta: bool, values: &[u64]) -> Record {
    Record::Interval(Interval {
        time,
        tid,
        delta,
        counts: values
            .iter()
            .enumerate()
            .map(|(i, &value)| Count {
                event: i as u32,
                value,
                ..Default::default()
            })
            .collect(),
    })
}

/// The JSON keys of the level-1 and level-2 columns, in the table's order.
const L2_KEYS: [&str; 12] = [
    "retiring",
    "bad_speculation",
    "frontend_bound",
    "backend_bound",
    "heavy_operations",
    "light_operations",
    "branch_mispredict",
    "machine_clears",
    "fetch_latency",
    "fetch_bandwidth",
    "memory_bound",
    "core_bound",
];

/// A JSON row's level-1 shares.
fn l1(row: &Value) -> Vec<f64> {
    L2_KEYS[..4]
        .iter()
        .map(|k| row[k].as_f64().unwrap_or(f64::NAN))
        .collect()
}

/// `labperf report FILE` (no view option: the header says TopDown).
fn report(file: &Path, extra: &[&str]) -> String {
    let o = Command::new(bin("labperf"))
        .args(["report"])
        .args(extra)
        .arg(file)
        .env("NO_COLOR", "1")
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    String::from_utf8(o.stdout).unwrap()
}

#[test]
fn the_seeds_interval_table_comes_back_exactly() {
    // The seed's `perf stat -a --topdown -I1000` example, as slot counts in tenths of a
    // percent of each interval (line 6 sums to 999, as its rounded figures do).
    let rows: [(u64, [u64; 4]); 8] = [
        (1_001_281_330, [230, 153, 296, 321]),
        (2_003_009_005, [50, 68, 466, 416]),
        (3_004_646_182, [67, 67, 460, 406]),
        (4_006_326_375, [50, 64, 476, 410]),
        (5_007_991_804, [51, 63, 463, 423]),
        (6_009_626_773, [62, 71, 473, 393]),
        (7_011_296_356, [47, 67, 462, 424]),
        (8_012_951_831, [47, 67, 475, 411]),
    ];
    let recs: Vec<Record> = rows
        .iter()
        .map(|(t, m)| interval(*t, None, true, &[4000, m[0], m[1], m[2], m[3]]))
        .collect();
    let f = write(
        "td-seed",
        &header(
            metrics_events(false),
            "stat:topdown;level=1;kind=metrics;pmu=cpu",
        ),
        &recs,
    );
    // Copied from the seed's topdown.txt.
    let want = "\
#           time             retiring      bad speculation       frontend bound        backend bound
     1.001281330                23.0%                15.3%                29.6%                32.1%
     2.003009005                 5.0%                 6.8%                46.6%                41.6%
     3.004646182                 6.7%                 6.7%                46.0%                40.6%
     4.006326375                 5.0%                 6.4%                47.6%                41.0%
     5.007991804                 5.1%                 6.3%                46.3%                42.3%
     6.009626773                 6.2%                 7.1%                47.3%                39.3%
     7.011296356                 4.7%                 6.7%                46.2%                42.4%
     8.012951831                 4.7%                 6.7%                47.5%                41.1%
";
    assert_eq!(report(&f, &[]), want);
    let csv = report(&f, &["--format", "csv"]);
    let mut lines = csv.lines();
    assert_eq!(
        lines.next(),
        Some("time_s,slots,retiring,bad_speculation,frontend_bound,backend_bound")
    );
    assert_eq!(
        lines.next(),
        Some("1.001281330,4000,0.230000,0.153000,0.296000,0.321000")
    );
}

#[test]
fn level_2_per_thread_missing_metrics_and_colours() {
    // Level 2, two threads and a total. Thread 11: retiring 500 (heavy 100), bad spec 200
    // (branch mispredict 150), fe 200 (fetch latency 50), be 100 (memory 80).
    let t11 = [9000, 500, 200, 200, 100, 100, 150, 50, 80];
    // Thread 12: nothing retired or missed but backend: one metric above zero, no ratios.
    let t12 = [9000, 0, 0, 0, 900, 0, 0, 0, 0];
    let f = write(
        "td-l2",
        &header(
            metrics_events(true),
            "stat:topdown;level=2;kind=metrics;pmu=cpu",
        ),
        &[
            interval(1_000_000_000, Some(11), true, &t11),
            interval(1_000_000_000, Some(12), true, &t12),
            interval(
                1_500_000_000,
                None,
                false,
                &[18000, 500, 200, 200, 1000, 100, 150, 50, 80],
            ),
        ],
    );
    let j: Value = serde_json::from_str(&report(&f, &["--format", "json"])).unwrap();
    assert_eq!(j["view"], "topdown", "the header names the view");
    assert_eq!(j["summary"]["level"], 2);
    let rows = &j["tables"][0]["rows"];
    let r: Vec<f64> = L2_KEYS
        .iter()
        .map(|k| rows[0][k].as_f64().unwrap())
        .collect();
    // heavy 10%, light 40%, branch mispredict 15%, machine clears 5%, fetch latency 5%,
    // fetch bandwidth 15%, memory bound 8%, core bound 2%.
    assert_eq!(
        r,
        [0.5, 0.2, 0.2, 0.1, 0.1, 0.4, 0.15, 0.05, 0.05, 0.15, 0.08, 0.02]
    );
    assert_eq!(rows[0]["tid"], 11);
    assert!(L2_KEYS.iter().all(|k| rows[1][k].is_null()), "{}", rows[1]);
    // Total: 500+200+200+1000 = 1900 slots of metrics.
    let total = j["tables"][0]["total"][0]["backend_bound"]
        .as_f64()
        .unwrap();
    assert!((total - 1000.0 / 1900.0).abs() < 1e-12);
    // The table marks thread rows and paints as perf: retiring > 70% green, bad spec > 10%,
    // frontend and backend bound > 20% red.
    let table = report(&f, &[]);
    assert!(
        table.starts_with("#           time      thread             retiring"),
        "{table}"
    );
    assert!(
        table.contains("           -                    -"),
        "{table}"
    );
    let o = Command::new(bin("labperf"))
        .args(["report"])
        .arg(&f)
        .output()
        .unwrap();
    let plain = String::from_utf8(o.stdout).unwrap();
    assert!(!plain.contains('\x1b'), "no colour when not on a terminal");
    // Missing metrics: a recording with only retiring and be-bound.
    let f = write(
        "td-missing",
        &header(
            vec![
                event("slots", 4, 0x400, None),
                event("topdown-retiring", 4, 0x8000, Some(0)),
                event("topdown-be-bound", 4, 0x8300, Some(0)),
            ],
            "stat:topdown;level=1;kind=metrics;pmu=cpu",
        ),
        &[interval(1_000_000_000, None, true, &[1000, 600, 200])],
    );
    assert!(report(&f, &[]).contains("     1.000000000                75.0%                    -                    -                25.0%"));
}

#[test]
fn pre_ice_lake_formulas_in_the_report() {
    let names = [
        "topdown-total-slots",
        "topdown-slots-issued",
        "topdown-slots-retired",
        "topdown-fetch-bubbles",
        "topdown-recovery-bubbles",
    ];
    let events = names.iter().map(|n| event(n, 4, 0, None)).collect();
    // total 1000, issued 600, retired 400, fetch bubbles 160, recovery bubbles 48:
    // retiring 40%, bad spec (600-400+48)/1000 = 24.8%, fe 16%, be the rest, 19.2%.
    let f = write(
        "td-legacy",
        &header(events, "stat:topdown;level=1;kind=legacy;pmu=cpu"),
        &[interval(
            1_000_000_000,
            None,
            true,
            &[1000, 600, 400, 160, 48],
        )],
    );
    let t = report(&f, &[]);
    assert!(t.contains("     1.000000000                40.0%                24.8%                16.0%                19.2%"), "{t}");
    let j: Value = serde_json::from_str(&report(&f, &["--format", "json"])).unwrap();
    assert_eq!(j["summary"]["kind"], "legacy");
}

/// The addresses of the bench's functions (its symbol table; the bench is not PIE).
fn bench_symbols() -> impl Fn(&str) -> u64 {
    use object::{Object, ObjectSymbol};
    let data = std::fs::read(bin("labperf-bench")).unwrap();
    let elf = object::File::parse(&*data).unwrap();
    let syms: std::collections::HashMap<String, u64> = elf
        .symbols()
        .filter_map(|s| Some((s.name().ok()?.to_string(), s.address())))
        .collect();
    move |n| syms[n]
}

/// A synthetic `record --topdown` file of the bench (pid 5): its executable segment mapped
/// at its own address, then one sample per (ip, return addresses, cumulative group values
/// {slots, cycles, retiring, bad-spec, fe-bound, be-bound}).
fn bench_td_recording(name: &str, samples: &[(u64, &[u64], [u64; 6])]) -> PathBuf {
    use object::{Object, ObjectSegment};
    let bench = bin("labperf-bench");
    let data = std::fs::read(&bench).unwrap();
    let elf = object::File::parse(&*data).unwrap();
    let seg = elf
        .segments()
        .find(|s| (s.address()..s.address() + s.size()).contains(&samples[0].0))
        .unwrap();
    let (off, _) = seg.file_range();
    let mut recs = vec![Record::Mmap2(Mmap2 {
        pid: 5,
        tid: 5,
        addr: seg.address(),
        len: seg.size(),
        pgoff: off,
        prot: 5,
        flags: 2,
        build_id: None,
        path: bench.to_str().unwrap().into(),
    })];
    for (i, (ip, rets, v)) in samples.iter().enumerate() {
        // The kernel's callchain: the sampled ip, then the return addresses (none: no -g).
        let callchain = if rets.is_empty() {
            Vec::new()
        } else {
            std::iter::once(*ip).chain(rets.iter().copied()).collect()
        };
        recs.push(Record::Sample(Sample {
            event: 1,
            pid: 5,
            tid: 5,
            ip: *ip,
            time: i as u64,
            values: v.to_vec(),
            callchain,
            ..Default::default()
        }));
    }
    let mut events = vec![
        event("slots", 4, 0x400, None),
        event("cycles", 0, 0, Some(0)),
    ];
    events.extend(metrics_events(false).into_iter().skip(1));
    write(name, &header(events, "sample"), &recs)
}

#[test]
fn record_topdown_attributes_slot_deltas_to_functions() {
    // Group values {slots, cycles, retiring, bad-spec, fe-bound, be-bound}, cumulative per
    // thread. Between samples: 1000 slots in branch_mispredicts (bad spec 400 of them),
    // then 2000 in int_divider_stalls (backend 1700), then 1000 more in branch_mispredicts.
    let sym = bench_symbols();
    let (bm, idiv) = (sym("branch_mispredicts"), sym("int_divider_stalls"));
    let f = bench_td_recording(
        "td-record",
        &[
            (bm, &[], [0, 0, 0, 0, 0, 0]),
            (bm, &[], [1000, 10, 300, 400, 100, 200]),
            (idiv, &[], [3000, 30, 500, 400, 200, 1900]),
            (bm, &[], [4000, 40, 800, 800, 300, 2100]),
        ],
    );
    let j: Value = serde_json::from_str(&report(&f, &["--format", "json"])).unwrap();
    let row = |n: &str| {
        j["tables"][0]["rows"]
            .as_array()
            .unwrap()
            .iter()
            .find(|l| l["symbol"] == n)
            .unwrap_or_else(|| panic!("no {n}: {j}"))
            .clone()
    };
    let b = row("branch_mispredicts");
    // 2000 slots: retiring 300+300, bad spec 400+400, fe 100+100, be 200+200 → of 2000.
    assert_eq!(
        (b["samples"].as_u64(), b["slots"].as_u64()),
        (Some(2), Some(2000))
    );
    assert_eq!(l1(&b), [0.3, 0.4, 0.1, 0.2]);
    let d = row("int_divider_stalls");
    assert_eq!(d["slots"], 2000);
    assert_eq!(l1(&d), [0.1, 0.0, 0.05, 0.85]);
    // The table ranks by slots, then the symbol, its file and its samples.
    let t = report(&f, &[]);
    assert!(t.starts_with("#          slots"), "{t}");
    assert!(
        t.contains("            2000                30.0%                40.0%                10.0%                20.0%  branch_mispredicts  labperf-bench        2\n"),
        "{t}"
    );
}

#[test]
fn record_topdown_rows_split_by_caller_from_the_samples_callchains() {
    // Synthetic (no PERF_METRICS here): the bench's functions as the sampled ones and as
    // their callers. Slot deltas: 1000 in branch_mispredicts called from nops (bad spec
    // 400), 2000 in int_divider_stalls called from dcache_miss (backend 1700), 1000 in
    // branch_mispredicts called from dcache_miss (bad spec 500), which nops called.
    let sym = bench_symbols();
    let (bm, idiv) = (sym("branch_mispredicts"), sym("int_divider_stalls"));
    // Return addresses one byte into the callers (looked up one byte back: each function's
    // first instruction, where nothing is inlined).
    let (nops, dmiss) = (sym("nops") + 1, sym("dcache_miss") + 1);
    let f = bench_td_recording(
        "td-callers",
        &[
            (bm, &[nops], [0, 0, 0, 0, 0, 0]),
            (bm, &[nops], [1000, 10, 300, 400, 100, 200]),
            (idiv, &[dmiss], [3000, 30, 500, 400, 200, 1900]),
            (bm, &[dmiss, nops], [4000, 40, 600, 900, 300, 2200]),
        ],
    );
    let callers = |depth: &str| -> Vec<(String, String, u64, u64, Vec<f64>)> {
        let j: Value = serde_json::from_str(&report(
            &f,
            &[
                "--format",
                "json",
                "--call-graph",
                "callee",
                "--depth",
                depth,
            ],
        ))
        .unwrap();
        let t = j["tables"]
            .as_array()
            .unwrap()
            .iter()
            .find(|t| t["name"] == "callers")
            .unwrap_or_else(|| panic!("no callers table: {j}"));
        t["rows"]
            .as_array()
            .unwrap()
            .iter()
            .map(|r| {
                (
                    r["symbol"].as_str().unwrap().to_string(),
                    r["caller"].as_str().unwrap().to_string(),
                    r["samples"].as_u64().unwrap(),
                    r["slots"].as_u64().unwrap(),
                    l1(r),
                )
            })
            .collect()
    };
    let s = |x: &str| x.to_string();
    // In the functions' order (by slots: int_divider_stalls' 2000 ties branch_mispredicts'
    // 2000, then by name), each function's callers by slots.
    assert_eq!(
        callers("1"),
        [
            (
                s("branch_mispredicts"),
                s("dcache_miss"),
                1,
                1000,
                vec![0.1, 0.5, 0.1, 0.3]
            ),
            (
                s("branch_mispredicts"),
                s("nops"),
                1,
                1000,
                vec![0.3, 0.4, 0.1, 0.2]
            ),
            (
                s("int_divider_stalls"),
                s("dcache_miss"),
                1,
                2000,
                vec![0.1, 0.0, 0.05, 0.85]
            ),
        ]
    );
    // Two frames up: the path through dcache_miss goes on to nops.
    assert_eq!(
        callers("2")
            .into_iter()
            .map(|r| (r.0, r.1))
            .collect::<Vec<_>>(),
        [
            (s("branch_mispredicts"), s("dcache_miss <- nops")),
            (s("branch_mispredicts"), s("nops")),
            (s("int_divider_stalls"), s("dcache_miss")),
        ]
    );
    // The functions table is the one without callers.
    let j: Value = serde_json::from_str(&report(&f, &["--format", "json"])).unwrap();
    assert_eq!(j["tables"].as_array().unwrap().len(), 1, "{j}");
}
