//! The synthetic golden recordings: every record kind and every sample flag, with a sample,
//! a stat and a strobe header, in each wire version; the user stacks version 2 gained; the
//! ring the C agent's golden file was replayed from. `tests/golden.rs` checks the committed
//! files against these (decoded equal, and re-encoded byte for byte); `cargo xtask bless
//! golden` writes the directories that do not exist yet (`write_missing`), never an
//! existing one.

use crate::{bin, root};
use labperf_common::*;
use std::path::{Path, PathBuf};
use std::process::Command;

/// Which header a golden file has.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// `record` of a group with PERF_SAMPLE_READ.
    Sample,
    /// `stat -I`: intervals.
    Stat,
    /// `record --metrics`, decimated strobing.
    Strobe,
}

pub const KINDS: [(Kind, &str); 3] = [
    (Kind::Sample, "every-record"),
    (Kind::Stat, "stat"),
    (Kind::Strobe, "strobe"),
];

fn attr(type_: u32, config: u64, period: u64, sample_type: u64, read_format: u64) -> Attr {
    Attr {
        type_,
        size: 136,
        config,
        sample_period_or_freq: period,
        sample_type,
        read_format,
        flags: 0b1_0001_0000_0000_0001, // disabled, mmap, enable_on_exec
        clockid: 1,
        ..Default::default()
    }
}

/// The header of a golden file of `kind`.
pub fn header(kind: Kind) -> Header {
    let (events, mode) = match kind {
        Kind::Sample => (
            vec![
                EventDesc {
                    name: "cycles".into(),
                    attr: attr(0, 0, 100_003, 0x1_0197, 0xc),
                    leader: None,
                },
                EventDesc {
                    name: "instructions".into(),
                    attr: attr(0, 1, 0, 0x1_0197, 0xc),
                    leader: Some(0),
                },
            ],
            "sample-read".to_string(),
        ),
        Kind::Stat => (
            vec![
                EventDesc {
                    name: "task-clock".into(),
                    attr: attr(1, 1, 0, 0, 3),
                    leader: None,
                },
                EventDesc {
                    name: "page-faults".into(),
                    attr: attr(1, 2, 0, 0, 3),
                    leader: None,
                },
            ],
            "stat".to_string(),
        ),
        Kind::Strobe => (
            ["cycles", "instructions", "branch-misses"]
                .iter()
                .enumerate()
                .map(|(i, n)| EventDesc {
                    name: (*n).into(),
                    attr: attr(0, [0, 1, 5][i], if i == 0 { 300 } else { 0 }, 0x197, 0xc),
                    leader: (i > 0).then_some(0),
                })
                .collect(),
            recipe(kind).mode_string(),
        ),
    };
    Header {
        agent_version: "labperf-agent 0.1.0".into(),
        arch: Arch::Aarch64,
        endian: Endian::Little,
        kernel_release: "6.1.0-golden".into(),
        cpu: CpuId::Arm {
            midr: Some(0x410f_d083),
            implementer: 0x41,
            part: 0xd08,
            variant: 0,
            revision: 3,
        },
        hostname: "golden".into(),
        command: vec!["labperf-bench".into(), "--duration".into(), "1".into()],
        clock_id: 1,
        start_time_ns: 1_000_000_000,
        start_realtime_ns: 1_764_000_000_000_000_000,
        events,
        mode,
        notes: vec!["a note".into()],
    }
}

/// The recipe a golden file of `kind` carries in its header extension (wire version 2 on).
pub fn recipe(kind: Kind) -> Recipe {
    match kind {
        Kind::Sample => Recipe::Sample { group_read: true },
        Kind::Stat => Recipe::Stat,
        Kind::Strobe => Recipe::Strobe {
            mode: StrobeMode::Decimate,
            period: 1_000_000,
            window: 300,
            jitter: false,
        },
    }
}

/// The records of a golden file of `kind`, in frames (each inner Vec is one records frame).
pub fn frames(kind: Kind) -> Vec<Vec<Record>> {
    let side = vec![
        Record::Comm(Comm {
            pid: 100,
            tid: 100,
            comm: "labperf-bench".into(),
            exec: true,
        }),
        Record::Mmap2(Mmap2 {
            pid: 100,
            tid: 100,
            addr: 0x40_0000,
            len: 0x2_0000,
            pgoff: 0,
            prot: 5,
            flags: 2,
            build_id: Some((1..=20).collect()),
            path: "/root/labperf-bench".into(),
        }),
        Record::Mmap2(Mmap2 {
            pid: 100,
            tid: 100,
            addr: 0xffff_8000_0000,
            len: 0x2000,
            pgoff: 0,
            prot: 5,
            flags: 2,
            build_id: None,
            path: "[vdso]".into(),
        }),
        Record::Fork(Task {
            pid: 100,
            ppid: 100,
            tid: 101,
            ptid: 100,
            time: 1_000_100_000,
        }),
    ];
    let sample = |i: u64| Sample {
        event: 0,
        pid: 100,
        tid: 100 + (i % 2) as u32,
        ip: 0x40_1000 + i * 0x24,
        time: 1_000_200_000 + i * 1_000_000,
        period: 100_003 + i % 3,
        cpu: (i % 2) as u32,
        ..Default::default()
    };
    match kind {
        Kind::Sample => {
            let mut a = side;
            let mut b = Vec::new();
            for i in 0..8u64 {
                let mut s = sample(i);
                // Every sample flag: EVENT (i = 3), VALUES (a group read, then none), CALLCHAIN,
                // EXTRA raw, data_src and addr.
                s.event = u32::from(i == 3);
                if i % 4 != 2 {
                    s.values = vec![i * 100_003, i * 50_001 + 7];
                }
                if i % 2 == 1 {
                    s.callchain = vec![0x40_2000 + i, 0x40_3000, 0x7fff_0000_1000];
                }
                if i == 5 {
                    s.raw = Some(vec![1, 2, 3, 4, 5, 6, 7]);
                    s.data_src = Some(0x0800_0142);
                    s.addr = Some(0x7fff_dead_b000);
                }
                if i == 6 {
                    s.addr = Some(0x7fff_dead_a000);
                }
                if i < 4 {
                    a.push(Record::Sample(s));
                } else {
                    b.push(Record::Sample(s));
                }
            }
            a.push(Record::Lost(Lost { event: 0, lost: 12 }));
            b.push(Record::Throttle(Throttle {
                time: 1_010_000_000,
                event: 0,
                throttle: true,
            }));
            b.push(Record::Throttle(Throttle {
                time: 1_011_000_000,
                event: 0,
                throttle: false,
            }));
            b.push(Record::Comm(Comm {
                pid: 100,
                tid: 101,
                comm: "worker".into(),
                exec: false,
            }));
            b.push(Record::Exit(Task {
                pid: 100,
                ppid: 100,
                tid: 101,
                ptid: 100,
                time: 1_012_000_000,
            }));
            vec![a, b]
        }
        Kind::Stat => {
            let iv = |t: u64, tid: Option<u32>, delta: bool, a: u64, b: u64| {
                Record::Interval(Interval {
                    time: t,
                    tid,
                    delta,
                    counts: vec![
                        Count {
                            event: 0,
                            value: a,
                            time_enabled: t,
                            time_running: t,
                        },
                        Count {
                            event: 1,
                            value: b,
                            time_enabled: t,
                            time_running: t / 2,
                        },
                    ],
                })
            };
            vec![
                vec![
                    iv(100_000_000, None, true, 99_000_000, 12),
                    iv(200_000_000, Some(101), true, 98_000_000, 3),
                ],
                vec![iv(250_000_000, None, false, 246_000_000, 15)],
            ]
        }
        Kind::Strobe => {
            let mut a = side;
            let mut c = [0u64; 3];
            for i in 0..6u64 {
                // A long sample, then its 300-cycle window.
                c[0] += 999_700;
                c[1] += 999_000;
                c[2] += 1_000;
                let mut long = sample(2 * i);
                long.period = 999_700;
                long.values = c.to_vec();
                c[0] += 300;
                c[1] += 280 - i;
                c[2] += i % 2;
                let mut win = sample(2 * i + 1);
                win.period = 300;
                win.values = c.to_vec();
                a.push(Record::Sample(long));
                a.push(Record::Sample(win));
            }
            vec![a]
        }
    }
}

/// The trailer a golden file ends with (records and frames are the encoder's).
pub fn trailer(kind: Kind) -> Trailer {
    let samples = frames(kind)
        .iter()
        .flatten()
        .filter(|r| matches!(r, Record::Sample(_)))
        .count() as u64;
    Trailer {
        samples,
        lost: if kind == Kind::Sample { 12 } else { 0 },
        throttled: u64::from(kind == Kind::Sample),
        dropped: if kind == Kind::Strobe { 3_322 } else { 0 },
        agent_cpu_ns: 12_345_678,
        agent_peak_rss_kib: 2_048,
        exit: ExitStatus {
            code: Some(0),
            signal: None,
        },
        duration_ns: 1_100_000_000,
        ..Default::default()
    }
}

/// The bytes of a golden file of `kind` in wire `version` (1: no header extension).
pub fn encode(kind: Kind, version: u16) -> Vec<u8> {
    let mut enc = Encoder::new();
    let mut file = prelude(version).to_vec();
    file.extend(enc.header_frame(&header(kind)));
    if version >= WIRE_VERSION_2 {
        file.extend(enc.header_ext_frame(&HeaderExt {
            recipe: Some(recipe(kind)),
            replayed: false,
            ..Default::default()
        }));
    }
    for f in frames(kind) {
        for r in &f {
            enc.push(r);
        }
        file.extend(enc.flush().unwrap());
    }
    file.extend(enc.trailer_frame(&trailer(kind)));
    file
}

/// The records version 2 gained that older readers skip by length (no new version): user
/// stacks (USTACK after their samples, each coded against its thread's previous stack in
/// the frame: literal, repeated, another thread's, and a new frame starting over) and
/// kernel symbols (KSYMS, named and hidden). Written once to `tests/data/v2-stacks/`.
pub fn stack_frames() -> Vec<Vec<Record>> {
    let stack = |sp: u64, len: usize, salt: u8| UserStack {
        regs: vec![sp + 0x40, sp, 0x40_1200],
        sp,
        // Each byte a function of its address: the same address, the same byte.
        data: (0..len)
            .map(|j| ((sp as usize + j) as u8).wrapping_mul(7) ^ salt)
            .collect(),
    };
    let sample = |tid: u32, ip: u64, time: u64, callchain: Vec<u64>, u: Option<UserStack>| {
        Record::Sample(Sample {
            event: 0,
            pid: 100,
            tid,
            ip,
            time,
            period: 100_003,
            cpu: 0,
            callchain,
            user_stack: u,
            ..Default::default()
        })
    };
    let mut changed = stack(0x7ffd_0000_1000 - 16, 80, 0);
    changed.data[20] ^= 0xff;
    vec![
        vec![
            Record::Comm(Comm {
                pid: 100,
                tid: 100,
                comm: "labperf-bench-nofp".into(),
                exec: true,
            }),
            sample(
                100,
                0x40_1200,
                1_000,
                vec![],
                Some(stack(0x7ffd_0000_1000, 64, 0)),
            ),
            // 16 bytes deeper, one byte changed: two new words, one literal, repeats.
            sample(100, 0x40_1210, 2_000, vec![], Some(changed)),
            // Another thread: literal again, with an odd length (a 3-byte tail).
            sample(
                101,
                0x40_1220,
                3_000,
                vec![],
                Some(stack(0x7ffc_0000_2000, 67, 9)),
            ),
            // A kernel sample and its stack, kernel frames first.
            sample(
                100,
                0xffff_ffff_8100_1010,
                4_000,
                vec![0xffff_ffff_8100_1010, 0xffff_ffff_8100_3008, 0x40_1230],
                None,
            ),
            Record::KernelSymbols(KernelSymbols {
                syms: vec![
                    KernelSymbol {
                        start: 0xffff_ffff_8100_1000,
                        end: 0xffff_ffff_8100_2000,
                        name: "read_zero".into(),
                        module: None,
                    },
                    KernelSymbol {
                        start: 0xffff_ffff_c000_0000,
                        end: 0xffff_ffff_c000_0800,
                        name: "kvm_vcpu_ioctl".into(),
                        module: Some("kvm".into()),
                    },
                ],
                hidden: None,
            }),
        ],
        vec![
            // A new frame remembers nothing: thread 100's stack is literal again.
            sample(
                100,
                0x40_1200,
                5_000,
                vec![],
                Some(stack(0x7ffd_0000_1000, 64, 0)),
            ),
            Record::KernelSymbols(KernelSymbols {
                syms: vec![],
                hidden: Some(2),
            }),
        ],
    ]
}

/// The bytes of `tests/data/v2-stacks/record.lpr`.
pub fn encode_stacks() -> Vec<u8> {
    let mut enc = Encoder::new();
    let mut file = prelude(WIRE_VERSION_2).to_vec();
    file.extend(enc.header_frame(&header(Kind::Sample)));
    file.extend(enc.header_ext_frame(&HeaderExt {
        recipe: Some(recipe(Kind::Sample)),
        replayed: false,
        ..Default::default()
    }));
    for f in stack_frames() {
        for r in &f {
            enc.push(r);
        }
        file.extend(enc.flush().unwrap());
    }
    file.extend(enc.trailer_frame(&trailer(Kind::Sample)));
    file
}

/// The trailer extension of `tests/data/v2-usage/record.lpr`: the workload's CPU time.
pub fn usage() -> TrailerExt {
    TrailerExt {
        usage: Some(Usage {
            scope: UsageScope::Workload,
            user_ns: 1_050_000_000,
            system_ns: 49_000_000,
            minor_faults: 312,
            major_faults: 2,
            resolution_ns: 1_000,
        }),
        ..Default::default()
    }
}

/// The bytes of `tests/data/v2-usage/record.lpr`: the sample golden's header and records,
/// its trailer followed by the trailer extension's USAGE item (an addition within version
/// 2 that older readers never see: they decode the trailer's postcard body alone).
pub fn encode_usage() -> Vec<u8> {
    let mut enc = Encoder::new();
    let mut file = prelude(WIRE_VERSION_2).to_vec();
    file.extend(enc.header_frame(&header(Kind::Sample)));
    file.extend(enc.header_ext_frame(&HeaderExt {
        recipe: Some(recipe(Kind::Sample)),
        replayed: false,
        ..Default::default()
    }));
    for f in frames(Kind::Sample) {
        for r in &f {
            enc.push(r);
        }
        file.extend(enc.flush().unwrap());
    }
    file.extend(enc.trailer_frame_ext(&trailer(Kind::Sample), &usage()));
    file
}

/// The ring the C agent's golden file was replayed from: side band and ProfileMe samples.
pub fn c_golden_ring() -> crate::ring::Ring {
    use crate::ring::*;
    let mut r = Ring::default();
    r.comm(300, "labperf-bench");
    r.mmap2_with(
        300,
        0x1_2000_0000,
        0x10000,
        0,
        Some(&[0x5a; 20]),
        "/root/labperf-bench",
    );
    r.task(false, 300, 300, 301, 300, 2_000);
    for i in 0..24u64 {
        let raw = crate::alpha::payload(
            1,
            0x1_2000_0100 + i * 4,
            (i % 3) << 39,
            2 | (i % 2) | (i << 6),
        );
        r.ksample(
            PROFILEME_SAMPLE_TYPE,
            0,
            &KSample {
                ip: 0x1_2000_0100 + i * 4,
                pid: 300,
                tid: 300 + (i % 2) as u32,
                time: 5_000 + i * 1_000,
                cpu: 0,
                period: 1_000,
                raw,
                ..Default::default()
            },
        );
    }
    r.lost(0, 2);
    r
}

/// The C agent's golden directory under `tests/data/`.
pub const C_GOLDEN: &str = "c-agent-x86_64-v2-profileme";

/// Where the synthetic golden file of `kind` in wire `version` lives.
pub fn golden_dir(kind: &str, version: u16) -> PathBuf {
    root().join("tests/data").join(format!("v{version}-{kind}"))
}

/// `labperf dump FILE`: its output.
pub fn dump(file: &Path) -> String {
    let o = Command::new(bin("labperf"))
        .arg("dump")
        .arg(file)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    String::from_utf8(o.stdout).unwrap()
}

/// Writes every golden directory that does not exist yet: the synthetic files of each wire
/// version, `v2-stacks`, and the C agent's (its x86_64 build, under `agents_dir`, replaying
/// [`c_golden_ring`]). An existing directory is never rewritten: a new wire version gets
/// new directories. Returns the directories written.
pub fn write_missing(agents_dir: &Path) -> Vec<PathBuf> {
    let mut written = Vec::new();
    for version in [WIRE_VERSION_1, WIRE_VERSION] {
        for (kind, name) in KINDS {
            let d = golden_dir(name, version);
            if d.exists() {
                continue;
            }
            std::fs::create_dir_all(&d).unwrap();
            let f = d.join("record.lpr");
            std::fs::write(&f, encode(kind, version)).unwrap();
            std::fs::write(d.join("dump.txt"), dump(&f)).unwrap();
            std::fs::write(
                d.join("README.md"),
                format!("# v{version}-{name}: wire version {version}, synthetic ({kind:?} header)\n\nWritten by `tests/src/golden.rs` (`cargo xtask bless golden`). `record.lpr` holds {}; `dump.txt` is `labperf dump` of it. `tests/golden.rs` checks that the file decodes to exactly those records and header, that today's encoder writes it byte for byte, and that `labperf dump` still prints `dump.txt`. Never regenerate this directory: add a new one for a new version.\n", match kind { Kind::Sample => "every record kind (sample, mmap2 with and without build-id, comm, fork, exit, lost, throttle, unthrottle) and every sample flag (thread, event, cpu, period, group values, callchain, raw, data source, address)", Kind::Stat => "interval records (deltas, a per-thread one, and totals)", Kind::Strobe => "strobed long and window samples with group values" }),
            )
            .unwrap();
            written.push(d);
        }
    }
    let d = root().join("tests/data/v2-stacks");
    if !d.exists() {
        std::fs::create_dir_all(&d).unwrap();
        let f = d.join("record.lpr");
        std::fs::write(&f, encode_stacks()).unwrap();
        std::fs::write(d.join("dump.txt"), dump(&f)).unwrap();
        std::fs::write(
            d.join("README.md"),
            "# v2-stacks: wire version 2, synthetic (sample header)\n\nWritten by `tests/src/golden.rs` (`stack_frames`, `encode_stacks`; `cargo xtask bless golden`). `record.lpr` holds what version 2 gained that older readers skip by length: samples with user stacks (USTACK records coded against the thread's previous stack: literal, repeated with a changed word, another thread's, a new frame starting over) and kernel symbols (KSYMS, named and hidden). `dump.txt` is `labperf dump` of it. `tests/golden.rs` checks that the file decodes to exactly those records, that today's encoder writes it byte for byte, and that `labperf dump` still prints `dump.txt`. Never regenerate this directory.\n",
        )
        .unwrap();
        written.push(d);
    }
    let d = root().join("tests/data/v2-usage");
    if !d.exists() {
        std::fs::create_dir_all(&d).unwrap();
        let f = d.join("record.lpr");
        std::fs::write(&f, encode_usage()).unwrap();
        std::fs::write(d.join("dump.txt"), dump(&f)).unwrap();
        std::fs::write(
            d.join("README.md"),
            "# v2-usage: wire version 2, synthetic (sample header)\n\nWritten by `tests/src/golden.rs` (`usage`, `encode_usage`; `cargo xtask bless golden`). `record.lpr` is the sample golden's header and records with a trailer extension: the trailer's postcard body followed by the USAGE item (the workload's CPU time by the kernel's accounting), which version 2 gained without a new version (older readers decode the trailer's body alone). `dump.txt` is `labperf dump` of it (its `USAGE` line). `tests/golden.rs` checks that the file decodes to exactly those records and that usage, that today's encoder writes it byte for byte, and that `labperf dump` still prints `dump.txt`. Never regenerate this directory.\n",
        )
        .unwrap();
        written.push(d);
    }
    let d = root().join("tests/data").join(C_GOLDEN);
    if !d.exists() {
        std::fs::create_dir_all(&d).unwrap();
        std::fs::write(d.join("ring.bin"), c_golden_ring().bytes).unwrap();
        let agent = agents_dir.join("x86_64-unknown-linux-none/labperf-agent");
        let st = Command::new(&agent)
            .current_dir(&d)
            .args(["replay", "ring.bin", "--profileme", "-o", "record.lpr"])
            .status()
            .unwrap_or_else(|e| panic!("{}: {e}", agent.display()));
        assert!(st.success(), "{} replay failed", agent.display());
        std::fs::write(d.join("README.md"), "# c-agent-x86_64-v2-profileme: wire version 2, written by the C agent\n\nThe freestanding C agent (`agents/alpha/`, its x86_64 build) replayed `ring.bin` (kernel-layout ProfileMe samples, comm, mmap2 with a build-id, fork, lost; made by `c_golden_ring` in `tests/src/golden.rs`) with `labperf-agent replay ring.bin --profileme -o record.lpr` (`cargo xtask bless golden`). `tests/golden.rs` checks that the file decodes cleanly, says ProfileMe and replayed, and holds exactly the records today's Rust agent makes of `ring.bin`: files the C agent wrote stay readable. Never regenerate this directory.\n").unwrap();
        written.push(d);
    }
    written
}
