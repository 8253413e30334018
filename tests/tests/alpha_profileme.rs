//! Alpha ProfileMe: synthetic payloads checked against a hand-written table of the seed's
//! rules (dump and `report`'s ProfileMe view), the 21%/0% mispredict known answer and DTB
//! hits/misses (`report`'s mem view) through the real Alpha agent's replay under qemu-alpha.

use labperf_common::{
    decode_all, Arch, Attr, CpuId, Encoder, Endian, EventDesc, Header, Record, Sample, Trailer,
};
use labperf_tests::alpha::*;
use labperf_tests::{bin, scratch};
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::Command;

/// A record file as an Alpha agent would write it: event 0 the cpu PMU's ProfileMe event
/// (PERF_TYPE_RAW, as the Alpha cpu PMU registers), event 1 a tracepoint.
fn lpr(samples: &[Sample]) -> Vec<u8> {
    let ev = |name: &str, type_| EventDesc {
        name: name.into(),
        attr: Attr {
            type_,
            size: 136,
            sample_type: PROFILEME_SAMPLE_TYPE,
            ..Default::default()
        },
        leader: None,
    };
    let h = Header {
        agent_version: "synthetic".into(),
        arch: Arch::Alpha,
        endian: Endian::Little,
        kernel_release: "6.18.0-profileme".into(),
        cpu: CpuId::Alpha {
            model: "EV67".into(),
        },
        hostname: "es40".into(),
        command: vec!["./workload".into()],
        clock_id: 1,
        start_time_ns: 0,
        start_realtime_ns: 0,
        events: vec![
            ev("cpu/instructions,profileme/", 4),
            ev("sched:sched_switch", 2),
        ],
        mode: "sample".into(),
        notes: vec![],
    };
    let mut e = Encoder::new();
    let mut f = Encoder::prelude().to_vec();
    f.extend(e.header_frame(&h));
    for (i, s) in samples.iter().enumerate() {
        let mut s = s.clone();
        s.time = i as u64;
        e.push(&Record::Sample(s));
    }
    if let Some(fr) = e.flush() {
        f.extend(fr);
    }
    f.extend(e.trailer_frame(&Trailer {
        samples: samples.len() as u64,
        ..Default::default()
    }));
    f
}

fn s(pmpc: u64, i_stat: u64, ctl: u64) -> Sample {
    Sample {
        pid: 7,
        tid: 7,
        ip: pmpc,
        raw: Some(payload(1, pmpc, i_stat, ctl)),
        ..Default::default()
    }
}

fn labperf(args: &[&str], file: &Path) -> String {
    let o = Command::new(bin("labperf"))
        .args(args)
        .arg(file)
        .output()
        .unwrap();
    assert!(
        o.status.success(),
        "labperf {args:?}: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    String::from_utf8(o.stdout).unwrap()
}

fn json(args: &[&str], file: &Path) -> Value {
    let mut a = args.to_vec();
    a.extend(["--format", "json", "--top", "0"]);
    serde_json::from_str(&labperf(&a, file)).unwrap()
}

/// The row of `table` (by SL1) whose location starts with `loc`.
fn row<'a>(j: &'a Value, sl1: u64, loc: &str) -> &'a Value {
    let t = j["tables"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["summary"]["sl1"] == sl1)
        .unwrap_or_else(|| panic!("no table for SL1 {sl1}: {j}"));
    t["rows"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["location"].as_str().unwrap().starts_with(loc))
        .unwrap_or_else(|| panic!("no row {loc} in SL1 {sl1}: {t}"))
}

fn traps(r: &Value) -> Vec<(String, u64)> {
    let mut v: Vec<(String, u64)> = r["traps"]
        .as_object()
        .unwrap()
        .iter()
        .map(|(k, n)| (k.clone(), n.as_u64().unwrap()))
        .collect();
    v.sort();
    v
}

/// The seed's names for each TRAP_TYPE: (dump's `trap_type_names`, the script's `TRAP_TYPES`).
const TRAP_TABLE: [(&str, &str); 16] = [
    ("replay", "replay"),
    ("other (see PMPC)", "other"),
    ("DTB double miss (3 level)", "dtb2-3l"),
    ("DTB double miss (4 level)", "dtb2-4l"),
    ("FP disabled", "fen"),
    ("unaligned", "unalign"),
    ("DTB single miss", "dtb1"),
    ("Dstream fault", "dfault"),
    ("OPCDEC", "opcdec"),
    ("other (see PMPC)", "other"),
    ("machine check", "mchk"),
    ("other (see PMPC)", "other"),
    ("arithmetic", "arith"),
    ("other (see PMPC)", "other"),
    ("MT_FPCR", "mt_fpcr"),
    ("reset", "reset"),
];
/// Redirect traps: PAL entry offset, dump name, report name.
const REDIRECTS: [(u64, &str, &str); 3] = [
    (0x481, "Istream access violation", "iacv"),
    (0x581, "ITB miss", "itbmiss"),
    (0x681, "interrupt", "intr"),
];
const PAL_BASE: u64 = 0x18000;
const TRAP_PC: u64 = 0x1_2000_1000;
const STALE_PC: u64 = 0x1_2000_2000;
const BRANCH_PC: u64 = 0x1_2000_3000;

/// Every case of the seed's rules in one file.
fn synthetic(name: &str) -> PathBuf {
    let mut v = Vec::new();
    // Every TRAP_TYPE, three samples each at its own PC, trapped and not killed.
    for tt in 0..16u64 {
        for _ in 0..3 {
            v.push(s(TRAP_PC + 4 * tt, TRP | trap_type(tt), pctr1(3)));
        }
    }
    // Every redirect: two samples each, one of them killed (redirects count regardless).
    for (off, _, _) in REDIRECTS {
        v.push(s(PAL_BASE | off, 0, VAL | pctr1(3)));
        v.push(s(PAL_BASE | off, TRP | MIS, KILLED | pctr1(3)));
    }
    // The reviewer's ES40 case: 644 samples killed with TRP set, 10 of them with MIS too.
    // In their own SL1 table (PCTR1 counting retire delay), PCTR1 = 7 each.
    for i in 0..644 {
        let mis = if i < 10 { MIS } else { 0 };
        v.push(s(
            STALE_PC,
            TRP | mis | trap_type(6),
            KILLED | sl1(1) | pctr1(7),
        ));
    }
    // A live conditional branch: 100 samples, 21 mispredicted, TAK on half, STALLED on a quarter.
    for i in 0..100u64 {
        let mis = if (i * 37) % 100 < 21 { TRP | MIS } else { 0 };
        let tak = if i % 2 == 0 { TAK } else { 0 };
        let st = if i % 4 == 0 { STALLED } else { 0 };
        v.push(s(BRANCH_PC, mis, VAL | tak | st | pctr1(i)));
    }
    // Field positions: every I_STAT and PCTR_CTL field non-zero at once.
    v.push(s(
        0x1_2000_4000,
        TRP | LSO | ICM | ovr(5) | trap_type(12),
        VAL | TAK | SL0 | sl1(2) | pctr0(0xabcde) | pctr1(0x12345) | STALLED,
    ));
    // A kernel instruction that retired.
    v.push(s(0xffff_fc00_0031_0000, 0, VAL | pctr1(3)));
    // Not ProfileMe status: short (27 bytes, and none at all), version 0, a tracepoint's raw data.
    let mut short = s(TRAP_PC, 0, 0);
    short.raw.as_mut().unwrap().truncate(27);
    v.push(short.clone());
    v.push(short);
    v.push(Sample {
        raw: None,
        ..s(TRAP_PC, 0, 0)
    });
    v.push(Sample {
        raw: Some(payload(0, TRAP_PC, TRP, VAL)),
        ..s(TRAP_PC, 0, 0)
    });
    v.push(Sample {
        event: 1,
        ..s(TRAP_PC, TRP, VAL)
    });
    let d = scratch(name);
    let p = d.join("synthetic.lpr");
    std::fs::write(&p, lpr(&v)).unwrap();
    p
}

#[test]
fn every_trap_type_and_redirect_is_named_as_the_seed_names_it() {
    let f = synthetic("pm-traps");
    let dump = labperf(&["dump"], &f);
    for (tt, (long, _)) in TRAP_TABLE.iter().enumerate() {
        let pc = TRAP_PC + 4 * tt as u64;
        let want = format!("ProfileMe PMPC:\t{pc:016x} user trap {long}\n");
        assert!(dump.contains(&want), "missing {want:?}");
        let i_stat = TRP | trap_type(tt as u64);
        let want = format!(
            "ProfileMe I_STAT:\t{i_stat:016x} TRP 1 MIS 0 LSO 0 TrapType {tt} ICM 0 OVR 0\n"
        );
        assert!(dump.contains(&want), "missing {want:?}");
    }
    for (off, long, _) in REDIRECTS {
        let want = format!("ProfileMe PMPC:\t{:016x} PAL trap {long}\n", PAL_BASE | off);
        assert_eq!(dump.matches(&want).count(), 2, "{want:?}");
    }
    let j = json(&["report", "--pc"], &f);
    for (tt, (_, short)) in TRAP_TABLE.iter().enumerate() {
        let r = row(&j, 0, &format!("{:#018x}", TRAP_PC + 4 * tt as u64));
        assert_eq!(r["samples"], 3);
        assert_eq!(traps(r), vec![(short.to_string(), 3)], "TRAP_TYPE {tt}");
        assert_eq!(
            (r["mispr_pct"].as_f64(), r["invalid_pct"].as_f64()),
            (Some(0.0), Some(0.0))
        );
    }
    for (off, _, short) in REDIRECTS {
        let r = row(&j, 0, &format!("PAL+{off:#x}"));
        assert_eq!(traps(r), vec![(short.to_string(), 2)]);
        // The killed one's TRP and MIS are stale: no mispredict.
        assert_eq!(r["mispr_pct"].as_f64(), Some(0.0));
        assert_eq!(r["killed_pct"].as_f64(), Some(50.0));
    }
}

#[test]
fn stale_trp_and_mis_of_killed_instructions_count_nothing() {
    let f = synthetic("pm-stale");
    let j = json(&["report", "--pc"], &f);
    // 644 killed samples with TRP, 10 with MIS: no trap, no mispredict; not retired valid.
    let r = row(&j, 1, &format!("{STALE_PC:#018x}"));
    assert_eq!(r["samples"], 644);
    assert_eq!(r["killed_pct"].as_f64(), Some(100.0));
    assert_eq!(r["mispr_pct"].as_f64(), Some(0.0));
    assert_eq!(r["invalid_pct"].as_f64(), Some(100.0));
    assert_eq!(r["pctr1_mean"].as_f64(), Some(7.0));
    assert!(traps(r).is_empty(), "{r}");
    // Its own table: PCTR1 counted retire delay there (SL1 = 1).
    let t1 = &j["tables"].as_array().unwrap()[1];
    assert_eq!(
        (
            t1["summary"]["sl1"].as_u64(),
            t1["summary"]["pctr1_counts"].as_str()
        ),
        (Some(1), Some("retire delay"))
    );
    assert_eq!(t1["summary"]["samples"], 644);
    // The dump agrees: trap none, never "mispredicted", for all 644.
    let dump = labperf(&["dump"], &f);
    let stale = format!("ProfileMe PMPC:\t{STALE_PC:016x} user trap none\n");
    assert_eq!(dump.matches(&stale).count(), 644);
    assert!(!dump.contains(&format!("{STALE_PC:016x} user trap none mispredicted")));
    // The live branch: 21 of 100 mispredicted, half taken, a quarter stalled.
    let b = row(&j, 0, &format!("{BRANCH_PC:#018x}"));
    assert_eq!(
        [
            b["mispr_pct"].as_f64(),
            b["taken_pct"].as_f64(),
            b["stall_pct"].as_f64(),
            b["invalid_pct"].as_f64(),
            b["pctr1_mean"].as_f64()
        ],
        [Some(21.0), Some(50.0), Some(25.0), Some(0.0), Some(49.5)]
    );
    assert_eq!(
        dump.matches(&format!("{BRANCH_PC:016x} user trap none mispredicted\n"))
            .count(),
        21
    );
}

#[test]
fn every_field_sits_where_the_seed_puts_it() {
    let f = synthetic("pm-fields");
    let dump = labperf(&["dump"], &f);
    let i_stat = TRP | LSO | ICM | ovr(5) | trap_type(12);
    let ctl = VAL | TAK | SL0 | sl1(2) | pctr0(0xabcde) | pctr1(0x12345) | STALLED;
    for want in [
        "ProfileMe PMPC:\t0000000120004000 user trap arithmetic\n".to_string(),
        format!("ProfileMe I_STAT:\t{i_stat:016x} TRP 1 MIS 0 LSO 1 TrapType 12 ICM 1 OVR 5\n"),
        format!("ProfileMe PCTR_CTL:\t{ctl:016x} VAL 1 TAK 1 Stalled 1 Killed 0 SL0 1 SL1 2 PCTR0 703710 PCTR1 74565 (bcache misses)\n"),
        "ProfileMe PMPC:\tfffffc0000310000 kernel trap none\n".to_string(),
    ] {
        assert!(dump.contains(&want), "missing {want:?}");
    }
}

#[test]
fn short_version_0_and_non_cpu_payloads_are_skipped_and_counted() {
    let f = synthetic("pm-skips");
    let j = json(&["report"], &f);
    // Hand count: 48 trap + 6 redirect + 644 stale + 100 branch + 1 fields + 1 kernel.
    assert_eq!(j["summary"]["total"], 800);
    assert_eq!(
        j["summary"]["skipped"],
        serde_json::json!({"short": 3, "version": 1, "not_cpu_pmu": 1})
    );
    assert_eq!(j["summary"]["skipped_total"], 5);
    let table = labperf(&["report"], &f);
    assert!(
        table.starts_with("800 ProfileMe samples, 5 without ProfileMe data"),
        "{table}"
    );
    let dump = labperf(&["dump"], &f);
    assert!(dump.contains("PROFILEME decoded=800 skipped=5 (short=3 version=1 not_cpu_pmu=1)"));
    // CSV: one line per row, the header first.
    let csv = labperf(&["report", "--pc", "--format", "csv", "--top", "0"], &f);
    assert!(csv.starts_with("table,samples,killed_pct,"), "{csv}");
    assert_eq!(csv.lines().count(), 1 + 16 + 3 + 1 + 1 + 1 + 1);
}

/// Runs the real Alpha agent under qemu-alpha: `replay RING <opts> -o OUT`.
fn alpha_replay(ring: &Ring, opts: &[&str], dir: &Path) -> PathBuf {
    let rp = dir.join("ring.bin");
    std::fs::write(&rp, &ring.bytes).unwrap();
    let out = dir.join("replayed.lpr");
    let o = Command::new("qemu-alpha")
        .arg(alpha_agent())
        .arg("replay")
        .arg(&rp)
        .args(opts)
        .arg("-o")
        .arg(&out)
        .output()
        .expect("qemu-alpha (qemu-user) is installed by `cargo xtask setup`");
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    out
}

#[test]
fn known_answer_21_and_0_percent_through_the_alpha_agent_under_qemu() {
    let branch = first_conditional_branch("branch_mispredicts");
    for (per_100, want) in [(21, 21.0), (0, 0.0)] {
        let d = scratch(&format!("pm-known-{per_100}"));
        let out = alpha_replay(&branch_ring(per_100), &["--profileme"], &d);
        let dec = decode_all(&std::fs::read(&out).unwrap());
        assert!(dec.losses.is_clean(), "{:?}", dec.damage);
        let h = dec.header.unwrap();
        assert_eq!((h.arch, h.mode.as_str()), (Arch::Alpha, "replay"));
        assert_eq!(h.events[0].name, "cpu/instructions,profileme/");
        assert_eq!(h.events[0].attr.sample_type, PROFILEME_SAMPLE_TYPE);
        let j = json(&["report", "--pc"], &out);
        assert_eq!(j["summary"]["total"], 1800);
        assert_eq!(j["summary"]["skipped_total"], 0);
        let r = row(&j, 0, &format!("{branch:#018x} branch_mispredicts"));
        assert_eq!(r["samples"], 1000);
        assert_eq!(r["mispr_pct"].as_f64(), Some(want), "{r}");
        assert_eq!(r["taken_pct"].as_f64(), Some(50.0));
        assert_eq!(r["pctr1_mean"].as_f64(), Some(20.0));
        // By symbol: the bench's functions, named from the Alpha ELF.
        let j = json(&["report"], &out);
        let f = row(&j, 0, "labperf-bench branch_mispredicts");
        assert_eq!(f["samples"], 1500);
        assert_eq!(f["dso"].as_str(), alpha_bench().to_str());
        assert_eq!(row(&j, 0, "labperf-bench nops")["samples"], 300);
        // The table form prints that row with the DCPI columns.
        let table = labperf(&["report", "--pc"], &out);
        let line = table
            .lines()
            .find(|l| l.contains(&format!("{branch:#018x}")))
            .unwrap();
        let cols: Vec<&str> = line.split_whitespace().collect();
        assert_eq!(cols[0], "1000");
        assert_eq!(cols[3], format!("{want:.1}"), "{line}");
    }
}

#[test]
fn replayed_profileme_file_dumps_what_the_ring_held() {
    let d = scratch("pm-dump");
    let mut r = Ring::default();
    r.comm(9, "w");
    let cases = [
        (0x1_2000_0d30u64, TRP | MIS, VAL | TAK | pctr1(9)),
        (PAL_BASE | 0x581, 0, pctr1(2)),
        (
            0x1_2000_0d34,
            TRP | trap_type(5),
            KILLED | sl1(3) | pctr1(1),
        ),
    ];
    for (i, &(pc, st, ctl)) in cases.iter().enumerate() {
        r.sample(9, 100 + i as u64, pc, &payload(1, pc, st, ctl), None);
    }
    let out = alpha_replay(&r, &["--profileme"], &d);
    let dump = labperf(&["dump"], &out);
    let want = [
        format!("ProfileMe PMPC:\t0000000120000d30 user trap none mispredicted\n         ProfileMe I_STAT:\t{:016x} TRP 1 MIS 1 LSO 0 TrapType 0 ICM 0 OVR 0\n         ProfileMe PCTR_CTL:\t{:016x} VAL 1 TAK 1 Stalled 0 Killed 0 SL0 0 SL1 0 PCTR0 0 PCTR1 9 (cycles)", TRP | MIS, VAL | TAK | pctr1(9)),
        format!("ProfileMe PMPC:\t{:016x} PAL trap ITB miss\n", PAL_BASE | 0x581),
        format!("ProfileMe PMPC:\t0000000120000d34 user trap none\n         ProfileMe I_STAT:\t{:016x} TRP 1 MIS 0 LSO 0 TrapType 5 ICM 0 OVR 0\n         ProfileMe PCTR_CTL:\t{:016x} VAL 0 TAK 0 Stalled 0 Killed 1 SL0 0 SL1 3 PCTR0 0 PCTR1 1 (mbox replays)", TRP | trap_type(5), KILLED | sl1(3) | pctr1(1)),
    ];
    for w in &want {
        assert!(dump.contains(w.as_str()), "missing {w:?} in\n{dump}");
    }
    assert!(dump.contains("PROFILEME decoded=3 skipped=0"));
    assert_eq!(dump.matches("SAMPLE ev=0 pid=9 tid=9").count(), 3);
}

#[test]
fn dtb_hits_and_misses_by_symbol_and_address_through_the_alpha_agent() {
    let d = scratch("pm-mem");
    let (dc, _) = bench_symbol("dcache_miss");
    let (nops, _) = bench_symbol("nops");
    let (base, len) = bench_text_mapping();
    let mut r = Ring::default();
    r.mmap2(5, base, len, alpha_bench().to_str().unwrap());
    let (a, b) = (0x1_4000_0000u64, 0x1_4000_2000u64);
    let mut t = 0;
    let mut push = |r: &mut Ring, pc: u64, addr: u64, src: u64| {
        t += 1;
        r.sample(5, t, pc, &payload(1, pc, 0, VAL), Some((addr, src)));
    };
    // dcache_miss: 60 loads of a (45 DTB hits, 15 misses), 20 loads of b (all misses).
    for i in 0..60 {
        let tlb = if i % 4 == 3 {
            MEM_TLB_MISS
        } else {
            MEM_TLB_HIT
        };
        push(&mut r, dc + 8, a, MEM_OP_LOAD | tlb);
    }
    for _ in 0..20 {
        push(&mut r, dc + 8, b, MEM_OP_LOAD | MEM_TLB_MISS);
    }
    // nops: 10 stores to b (hits) and 4 prefetches of a (2 misses); 7 non-memory instructions.
    for _ in 0..10 {
        push(&mut r, nops, b, MEM_OP_STORE | MEM_TLB_HIT);
    }
    for i in 0..4 {
        let tlb = if i < 2 { MEM_TLB_MISS } else { MEM_TLB_HIT };
        push(&mut r, nops, a, MEM_OP_PFETCH | tlb);
    }
    for _ in 0..7 {
        push(&mut r, nops + 4, 0, 1 /* PERF_MEM_OP_NA */);
    }
    let out = alpha_replay(&r, &["--mem"], &d);
    let h = decode_all(&std::fs::read(&out).unwrap()).header.unwrap();
    assert_eq!(h.events[0].name, "cpu/cycles,profileme/");
    assert_eq!(h.events[0].attr.sample_type, MEM_SAMPLE_TYPE);
    let j = json(&["report"], &out);
    assert_eq!(
        [
            &j["summary"]["samples"],
            &j["summary"]["loads"],
            &j["summary"]["stores"],
            &j["summary"]["prefetches"],
            &j["summary"]["without_data_source"]
        ],
        [101, 80, 10, 4, 7]
    );
    // One table per operation and grouping: `loads_by_symbol`, `stores_by_address`, ...
    let find = |by: &str, op: &str, loc: &str| -> (u64, u64) {
        let plural = if op == "prefetch" {
            "prefetches".to_string()
        } else {
            format!("{op}s")
        };
        let name = format!("{plural}_{by}");
        let r = j["tables"]
            .as_array()
            .unwrap()
            .iter()
            .find(|t| t["name"] == name.as_str())
            .unwrap_or_else(|| panic!("no table {name}: {j}"))["rows"]
            .as_array()
            .unwrap()
            .iter()
            .find(|r| r["op"] == op && r["location"] == loc)
            .unwrap_or_else(|| panic!("no {op} {loc} in {name}: {j}"));
        (r["hits"].as_u64().unwrap(), r["misses"].as_u64().unwrap())
    };
    assert_eq!(
        find("by_symbol", "load", "labperf-bench dcache_miss"),
        (45, 35)
    );
    assert_eq!(find("by_symbol", "store", "labperf-bench nops"), (10, 0));
    assert_eq!(find("by_symbol", "prefetch", "labperf-bench nops"), (2, 2));
    assert_eq!(find("by_address", "load", &format!("{a:#018x}")), (45, 15));
    assert_eq!(find("by_address", "load", &format!("{b:#018x}")), (0, 20));
    assert_eq!(find("by_address", "store", &format!("{b:#018x}")), (10, 0));
    assert_eq!(
        find("by_address", "prefetch", &format!("{a:#018x}")),
        (2, 2)
    );
    let table = labperf(&["report"], &out);
    assert!(
        table.contains("load             45        35   43.8  labperf-bench dcache_miss"),
        "{table}"
    );
}

#[test]
fn record_profileme_without_the_format_bit_says_what_is_needed() {
    // This machine's kernel has no ProfileMe series: the agent refuses with the reason.
    let o = Command::new("qemu-alpha")
        .arg(alpha_agent())
        .args(["record", "--profileme", "--", "/bin/true"])
        .env("LABPERF_SYSFS", scratch("pm-nofmt"))
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(125));
    let e = String::from_utf8_lossy(&o.stderr);
    assert!(
        e.contains("ProfileMe needs an Alpha EV67 or later and a kernel with the ProfileMe series"),
        "{e}"
    );
    assert!(
        e.contains("/bus/event_source/devices/cpu/format/profileme"),
        "{e}"
    );
}

#[test]
fn alpha_attrs_follow_the_pmu_rules() {
    // A sysfs tree as the ProfileMe series lays it out, with the format bit at two places.
    let d = scratch("pm-plan");
    let fmt = d.join("bus/event_source/devices/cpu/format");
    std::fs::create_dir_all(&fmt).unwrap();
    let plan = |bit: &str, args: &[&str]| {
        std::fs::write(fmt.join("profileme"), bit).unwrap();
        let o = Command::new("qemu-alpha")
            .arg(alpha_agent())
            .arg("plan")
            .args(args)
            .env("LABPERF_SYSFS", &d)
            .output()
            .unwrap();
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        String::from_utf8(o.stdout).unwrap()
    };
    // No exclude_* bit (EPERM on Alpha), the period capped at 2^20-1, not precise, RAW.
    assert_eq!(
        plan("config:63\n", &["--profileme", "-c", "5000000", "--", "w"]),
        "event=cpu/instructions,profileme/ group_fd=-1 type=0 size=136 config=0x8000000000000001 config1=0x0 config2=0x0 sample_period=1048575 sample_type=0x587 read_format=0x0 disabled=1 inherit=1 exclude_user=0 exclude_kernel=0 exclude_hv=0 exclude_idle=0 precise_ip=0 enable_on_exec=1\n"
    );
    assert_eq!(
        plan("config1:0\n", &["--mem", "--", "w"]),
        "event=cpu/cycles,profileme/ group_fd=-1 type=0 size=136 config=0x0 config1=0x1 config2=0x0 sample_period=100003 sample_type=0x858f read_format=0x0 disabled=1 inherit=1 exclude_user=0 exclude_kernel=0 exclude_hv=0 exclude_idle=0 precise_ip=0 enable_on_exec=1\n"
    );
    // Two counters at most.
    let o = Command::new("qemu-alpha")
        .arg(alpha_agent())
        .args([
            "plan",
            "-e",
            "cycles",
            "-e",
            "instructions",
            "-e",
            "branches",
        ])
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&o.stderr).contains("two counters"));
}
