//! The TopDown logic against recorded sysfs trees (`tests/data/sysfs/`) and a kernel
//! layer that replays scripted group reads. Expected values are worked out by hand.

use super::*;
use std::collections::VecDeque;

fn sysfs(name: &str) -> String {
    format!(
        "{}/../../tests/data/sysfs/{name}",
        env!("CARGO_MANIFEST_DIR")
    )
}

/// What the scripted kernel saw opened.
#[derive(Debug, Clone, PartialEq)]
struct Opened {
    config: u64,
    read_format: u64,
    pid: i32,
    cpu: i32,
    group: i32,
    disabled: bool,
}

/// A kernel whose reads return scripted words; opens can be made to fail by config.
#[derive(Default)]
struct Script {
    opened: Vec<Opened>,
    reads: Vec<VecDeque<Vec<u64>>>,
    fail: Vec<(u64, i32)>,
    nreads: usize,
}

impl Kernel for Script {
    fn open(
        &mut self,
        a: &mut perf_event_attr,
        pid: i32,
        cpu: i32,
        group: i32,
    ) -> Result<i32, i32> {
        if let Some(&(_, e)) = self.fail.iter().find(|(c, _)| *c == a.config) {
            return Err(e);
        }
        self.opened.push(Opened {
            config: a.config,
            read_format: a.read_format,
            pid,
            cpu,
            group,
            disabled: a.disabled() != 0,
        });
        self.reads.push(VecDeque::new());
        Ok(self.opened.len() as i32 - 1)
    }
    fn read(&mut self, fd: i32, buf: &mut [u64]) -> usize {
        self.nreads += 1;
        match self.reads[fd as usize].pop_front() {
            Some(v) => {
                buf[..v.len()].copy_from_slice(&v);
                v.len()
            }
            None => 0,
        }
    }
    fn enable(&mut self, _: i32) {}
}

/// Each column in tenths of a percent (None: not measured), or None without ratios.
fn columns(r: &Recipe, v: &[u64]) -> Option<Vec<Option<u64>>> {
    let (num, den) = r.layout().parts(v)?;
    Some(
        num.iter()
            .map(|x| x.map(|x| td::permille(x, den)))
            .collect(),
    )
}

/// A PERF_FORMAT_GROUP read: nr, time_enabled, time_running, values.
fn group_read(v: &[u64]) -> Vec<u64> {
    let mut r = vec![v.len() as u64, 1000, 1000];
    r.extend_from_slice(v);
    r
}

#[test]
fn detection_reads_the_core_pmu_events() {
    let r = detect(&sysfs("x86_64-icelake"), 1).unwrap();
    assert_eq!((r.kind, r.pmu.as_str(), r.level), (Kind::Metrics, "cpu", 1));
    let got: Vec<(&str, u64, u32)> = r
        .events
        .iter()
        .map(|e| (e.name.as_str(), e.config, e.type_))
        .collect();
    assert_eq!(
        got,
        [
            ("slots", 0x0400, 4),
            ("topdown-retiring", 0x8000, 4),
            ("topdown-bad-spec", 0x8100, 4),
            ("topdown-fe-bound", 0x8200, 4),
            ("topdown-be-bound", 0x8300, 4)
        ]
    );
    let e = detect(&sysfs("x86_64-icelake"), 2).unwrap_err();
    assert!(
        e.contains("Sapphire Rapids") && e.contains("topdown-heavy-ops"),
        "{e}"
    );
    let r = detect(&sysfs("x86_64-sapphirerapids"), 2).unwrap();
    let l2: Vec<u64> = r.events[5..].iter().map(|e| e.config).collect();
    assert_eq!(l2, [0x8400, 0x8500, 0x8600, 0x8700]);
    // Hybrid: the P-core PMU, said in a note.
    let r = detect(&sysfs("x86_64-alderlake-hybrid"), 1).unwrap();
    assert_eq!((r.pmu.as_str(), r.events[0].type_), ("cpu_core", 4));
    assert!(r.notes[0].contains("cpu_core"), "{:?}", r.notes);
    // Missing metrics: left out with a note each, while two remain.
    let r = detect(&sysfs("x86_64-icelake-two-metrics"), 1).unwrap();
    assert_eq!(r.events.len(), 3);
    assert_eq!(r.notes.len(), 2);
    // Before Ice Lake: the five events and their sysfs scales.
    let r = detect(&sysfs("x86_64-skylake"), 1).unwrap();
    assert_eq!(r.kind, Kind::Legacy);
    assert_eq!(r.scales, [2, 1, 1, 1, 4]);
    assert!(r.events.iter().all(|e| e.kernel && e.user));
    let e = detect(&sysfs("x86_64-no-topdown"), 1).unwrap_err();
    assert!(e.contains("neither slots"), "{e}");
}

#[test]
fn the_group_is_led_by_slots_and_read_with_format_group() {
    let r = detect(&sysfs("x86_64-icelake"), 1).unwrap();
    let mut k = Script::default();
    let c = open(&mut k, r, &[100, 101], &[0, 1], true, true).unwrap();
    assert_eq!(c.groups.len(), 2, "one group per thread");
    let g = FORMAT_GROUP | EN | RUN;
    for (t, tid) in [(0usize, 100), (5, 101)] {
        let lead = &k.opened[t];
        assert_eq!(
            (
                lead.config,
                lead.read_format,
                lead.pid,
                lead.cpu,
                lead.group,
                lead.disabled
            ),
            (0x0400, g, tid, -1, -1, true)
        );
        for (j, cfg) in [0x8000, 0x8100, 0x8200, 0x8300].into_iter().enumerate() {
            let m = &k.opened[t + 1 + j];
            assert_eq!(
                (m.config, m.read_format, m.pid, m.group, m.disabled),
                (cfg, g, tid, t as i32, false)
            );
        }
    }
}

#[test]
fn intervals_read_each_group_once_and_give_perfs_ratios() {
    let r = detect(&sysfs("x86_64-icelake"), 1).unwrap();
    let mut k = Script::default();
    let mut c = open(&mut k, r.clone(), &[7], &[0], true, true).unwrap();
    // Cumulative counts, as the kernel keeps them (it folds PERF_METRICS into them and
    // clears the register on each read). Interval 1 is the seed's first line.
    k.reads[0].extend([
        group_read(&[4000, 230, 153, 296, 321]),
        group_read(&[8000, 730, 253, 496, 521]),
        group_read(&[8000, 730, 253, 496, 521]),
    ]);
    let d1 = c.deltas(&mut k);
    assert_eq!(k.nreads, 1, "one read per group per interval");
    assert_eq!(d1, [(Some(7), vec![4000, 230, 153, 296, 321])]);
    let cols = columns(&r, &d1[0].1).unwrap();
    assert_eq!(cols, [Some(230), Some(153), Some(296), Some(321)]);
    assert_eq!(
        header_line(&r, "time", false),
        "#           time             retiring      bad speculation       frontend bound        backend bound"
    );
    assert_eq!(
        line(1_001_281_330, None, &cells(&r, &d1[0].1)),
        "     1.001281330                23.0%                15.3%                29.6%                32.1%"
    );
    // Interval 2: 500, 100, 200, 200 of 1000 → 50.0 10.0 20.0 20.0.
    let d2 = c.deltas(&mut k);
    assert_eq!(k.nreads, 2);
    assert_eq!(
        columns(&r, &d2[0].1).unwrap(),
        [Some(500), Some(100), Some(200), Some(200)]
    );
    // An idle interval: no metric moved, so no ratios (perf prints nothing there).
    let d3 = c.deltas(&mut k);
    assert_eq!(columns(&r, &d3[0].1), None);
    assert_eq!(
        line(3_000_000_000, Some(7), &cells(&r, &d3[0].1)),
        "     3.000000000           7                    -                    -                    -                    -"
    );
    // A failed read keeps the previous counts: a zero delta, never a wrapped one.
    let d4 = c.deltas(&mut k);
    assert_eq!(d4[0].1, [0, 0, 0, 0, 0]);
}

#[test]
fn level_2_splits_each_level_1_metric() {
    let r = detect(&sysfs("x86_64-sapphirerapids"), 2).unwrap();
    // Level 1: retiring 500, bad spec 200, fe 200, be 100 (sum 1000); level 2: heavy ops
    // 100, br mispredict 150, fetch latency 50, memory bound 80.
    let v = [9000, 500, 200, 200, 100, 100, 150, 50, 80];
    let cols: Vec<u64> = columns(&r, &v)
        .unwrap()
        .into_iter()
        .map(Option::unwrap)
        .collect();
    assert_eq!(
        cols,
        [500, 200, 200, 100, 100, 400, 150, 50, 50, 150, 80, 20]
    );
    assert_eq!(titles(&r).len(), 12);
    assert!(header_line(&r, "time", true)
        .starts_with("#           time      thread             retiring      bad speculation"));
    assert!(header_line(&r, "time", false).ends_with("         memory bound           core bound"));
}

#[test]
fn a_missing_metric_leaves_its_column_empty() {
    let r = detect(&sysfs("x86_64-icelake-two-metrics"), 1).unwrap();
    // slots, retiring 600, be-bound 200: 75% and 25%.
    assert_eq!(
        columns(&r, &[1000, 600, 200]).unwrap(),
        [Some(750), None, None, Some(250)]
    );
    // One metric above zero is not enough for perf.
    assert_eq!(columns(&r, &[1000, 600, 0]), None);
}

#[test]
fn pre_ice_lake_counts_every_cpu_scaled_and_multiplexed() {
    let r = detect(&sysfs("x86_64-skylake"), 1).unwrap();
    let mut k = Script::default();
    let mut c = open(&mut k, r.clone(), &[7], &[0, 1], true, true).unwrap();
    assert_eq!(k.opened.len(), 10, "five events on each CPU");
    assert!(k
        .opened
        .iter()
        .all(|o| o.pid == -1 && o.group == -1 && !o.disabled));
    assert_eq!(k.opened[5].cpu, 1);
    // CPU 0 counted all the time; CPU 1 half the time (enabled 2, running 1), so x2.
    let cpu0 = [250, 300, 200, 80, 6];
    let cpu1 = [125, 150, 100, 40, 3];
    for i in 0..5 {
        k.reads[i].push_back(vec![cpu0[i], 1, 1]);
        k.reads[5 + i].push_back(vec![cpu1[i], 2, 1]);
    }
    let d = c.deltas(&mut k);
    let mut sum = [0u64; 5];
    for (_, v) in &d {
        for i in 0..5 {
            sum[i] += v[i];
        }
    }
    // With the scales (total slots x2, recovery bubbles x4): 1000, 600, 400, 160, 48.
    assert_eq!(sum, [1000, 600, 400, 160, 48]);
    // retiring 400/1000, bad spec (600-400+48)/1000, fe 160/1000, be the rest (192).
    assert_eq!(
        columns(&r, &sum).unwrap(),
        [Some(400), Some(248), Some(160), Some(192)]
    );
}

#[test]
fn pre_ice_lake_without_root_says_why() {
    let r = detect(&sysfs("x86_64-skylake"), 1).unwrap();
    let mut k = Script {
        fail: vec![(0x003c | 1 << 21, libc::EACCES)],
        ..Default::default()
    };
    let e = open(&mut k, r, &[7], &[0], true, true).err().unwrap();
    assert!(
        e.contains("needs root") && e.contains("perf_event_paranoid <= 0"),
        "{e}"
    );
}

#[test]
fn nmi_watchdog_warning_follows_the_sysctl() {
    let d = std::env::temp_dir().join(format!("labperf-nmi-{}", std::process::id()));
    std::fs::create_dir_all(d.join("sys/kernel")).unwrap();
    std::fs::write(d.join("sys/kernel/nmi_watchdog"), "1\n").unwrap();
    assert!(nmi_watchdog_warning(d.to_str().unwrap())
        .unwrap()
        .contains("echo 0 > /proc/sys/kernel/nmi_watchdog"));
    std::fs::write(d.join("sys/kernel/nmi_watchdog"), "0\n").unwrap();
    assert_eq!(nmi_watchdog_warning(d.to_str().unwrap()), None);
}

#[test]
fn record_group_puts_the_sampler_second() {
    let r = detect(&sysfs("x86_64-icelake"), 1).unwrap();
    let cycles = crate::events::parse("cycles").unwrap();
    let v = record_specs(&r, cycles).unwrap();
    let names: Vec<&str> = v.iter().map(|e| e.name.as_str()).collect();
    assert_eq!(
        names,
        [
            "slots",
            "cycles",
            "topdown-retiring",
            "topdown-bad-spec",
            "topdown-fe-bound",
            "topdown-be-bound"
        ]
    );
    // Hybrid: a generic sampler names the P-core PMU (type 4) in config bits 32-63.
    let hy = detect(&sysfs("x86_64-alderlake-hybrid"), 1).unwrap();
    let v = record_specs(&hy, crate::events::parse("cycles").unwrap()).unwrap();
    assert_eq!((v[1].type_, v[1].config), (0, 4 << 32));
    let legacy = detect(&sysfs("x86_64-skylake"), 1).unwrap();
    assert!(record_specs(&legacy, crate::events::parse("cycles").unwrap()).is_err());
}
