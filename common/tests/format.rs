//! Round-trip, truncation-at-every-offset, corruption and property tests of the record format.

use labperf_common::*;
use proptest::prelude::*;

fn header() -> Header {
    Header {
        agent_version: "labperf-agent 0.1.0".into(),
        arch: Arch::X86_64,
        endian: Endian::Little,
        kernel_release: "6.1.0-test".into(),
        cpu: CpuId::X86 {
            vendor: "GenuineIntel".into(),
            family: 6,
            model: 0x6a,
            stepping: 6,
            model_name: "Xeon".into(),
        },
        hostname: "lab1".into(),
        command: vec!["labperf-bench".into(), "--duration".into(), "1".into()],
        clock_id: 1,
        start_time_ns: 1_000_000,
        start_realtime_ns: 1_700_000_000_000_000_000,
        events: vec![EventDesc {
            name: "cpu-clock".into(),
            attr: Attr {
                type_: 1,
                size: 136,
                config: 0,
                sample_period_or_freq: 250_000,
                sample_type: 0x107,
                flags: 0b1_0000_0001_0011,
                ..Default::default()
            },
            leader: None,
        }],
        mode: "sample".into(),
        notes: vec![],
    }
}

/// A varied record stream: several threads, events, group values, extras.
fn records(n: usize, seed: u64) -> Vec<Record> {
    let mut x = seed | 1;
    let mut rnd = move || {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x
    };
    let mut t = 5_000_000u64;
    let mut v = [0u64; 3];
    let mut out = vec![Record::Mmap2(Mmap2 {
        pid: 10,
        tid: 10,
        addr: 0x5555_0000_0000,
        len: 0x10000,
        pgoff: 0,
        prot: 5,
        flags: 2,
        build_id: Some(vec![0xab; 20]),
        path: "/usr/bin/labperf-bench".into(),
    })];
    for i in 0..n {
        t += 200_000 + rnd() % 100_000;
        let r = match rnd() % 20 {
            0 => Record::Comm(Comm {
                pid: 10,
                tid: 11,
                comm: "worker".into(),
                exec: false,
            }),
            1 => Record::Fork(Task {
                pid: 10,
                ppid: 10,
                tid: 12,
                ptid: 10,
                time: t,
            }),
            2 => Record::Lost(Lost {
                event: 0,
                lost: rnd() % 9,
            }),
            3 => Record::Throttle(Throttle {
                time: t,
                event: 0,
                throttle: i % 2 == 0,
            }),
            4 => Record::Interval(Interval {
                time: t,
                tid: Some(11),
                delta: true,
                counts: vec![Count {
                    event: 0,
                    value: rnd() % 1000,
                    time_enabled: 5,
                    time_running: 5,
                }],
            }),
            5 if i % 7 == 0 => Record::KernelSymbols(KernelSymbols {
                syms: vec![KernelSymbol {
                    start: 0xffff_ffff_8100_0000 + rnd() % 0x1000,
                    end: 0xffff_ffff_8100_2000,
                    name: "read_zero".into(),
                    module: (i % 2 == 0).then(|| "kvm".into()),
                }],
                hidden: (i % 3 == 0).then_some(1),
            }),
            _ => {
                for e in &mut v {
                    *e += rnd() % 5000;
                }
                let grouped = rnd() % 3 == 0;
                Record::Sample(Sample {
                    event: (rnd() % 2) as u32,
                    pid: 10,
                    tid: 10 + (rnd() % 3) as u32,
                    ip: 0x5555_0000_1000 + rnd() % 0x8000,
                    time: t,
                    period: if rnd() % 4 == 0 { 300 } else { 999_700 },
                    cpu: (rnd() % 2) as u32,
                    values: if grouped { v.to_vec() } else { vec![] },
                    callchain: if rnd() % 5 == 0 {
                        vec![0x5555_0000_2000, 0x5555_0000_3000]
                    } else {
                        vec![]
                    },
                    raw: if rnd() % 7 == 0 {
                        Some(vec![1, 2, 3, 4])
                    } else {
                        None
                    },
                    data_src: if rnd() % 7 == 0 { Some(rnd()) } else { None },
                    addr: if rnd() % 7 == 0 { Some(rnd()) } else { None },
                    // A stack that moves a few words and changes a few: runs of repeats
                    // and literals against the thread's previous one, and odd lengths.
                    user_stack: (rnd() % 3 == 0).then(|| {
                        let sp = 0x7ffd_0000_1000 - 8 * (rnd() % 6);
                        let len = 200 + (rnd() % 3) as usize;
                        let mut data: Vec<u8> = (0..len)
                            .map(|j| ((sp as usize + j) / 8 % 251) as u8)
                            .collect();
                        for _ in 0..rnd() % 4 {
                            let at = (rnd() as usize) % len;
                            data[at] = rnd() as u8;
                        }
                        UserStack {
                            regs: vec![sp + 64, sp, 0x5555_0000_1000 + rnd() % 0x100],
                            sp,
                            data,
                        }
                    }),
                })
            }
        };
        out.push(r);
    }
    out
}

/// Each records frame's byte range and its records.
type Frames = Vec<(std::ops::Range<usize>, Vec<Record>)>;

/// Encodes `recs` flushing every `per_frame` records; returns the file and the
/// records of each frame with the frame's byte range.
fn encode(recs: &[Record], per_frame: usize) -> (Vec<u8>, Frames) {
    let mut enc = Encoder::new();
    let mut file = Encoder::prelude().to_vec();
    file.extend(enc.header_frame(&header()));
    let mut frames = Vec::new();
    for chunk in recs.chunks(per_frame) {
        for r in chunk {
            enc.push(r);
        }
        let f = enc.flush().unwrap();
        frames.push((file.len()..file.len() + f.len(), chunk.to_vec()));
        file.extend(f);
    }
    file.extend(enc.trailer_frame(&Trailer {
        samples: 1,
        ..Default::default()
    }));
    (file, frames)
}

#[test]
fn round_trip() {
    let recs = records(2000, 7);
    let (file, _) = encode(&recs, 97);
    let d = decode_all(&file);
    assert_eq!(d.wire_version, Some(WIRE_VERSION));
    assert_eq!(d.header, Some(header()));
    assert_eq!(d.records, recs);
    assert!(d.losses.is_clean(), "{:?}", d.damage);
    let t = d.trailer.unwrap();
    assert_eq!(t.records, recs.len() as u64);
    assert_eq!(t.frames, (recs.len() as u32).div_ceil(97));
}

#[test]
fn streaming_in_small_pieces_matches_whole() {
    let recs = records(500, 3);
    let (file, _) = encode(&recs, 50);
    for piece in [1usize, 3, 7, 64, 1000] {
        let mut d = Decoder::new();
        let mut got = Vec::new();
        for c in file.chunks(piece) {
            d.push(c);
            while let Some(e) = d.poll() {
                if let Event::Record(r) = e {
                    got.push(r);
                }
            }
        }
        d.finish();
        while let Some(e) = d.poll() {
            assert!(!matches!(e, Event::Damage(_)), "piece {piece}: {e:?}");
        }
        assert_eq!(got, recs, "piece size {piece}");
    }
}

#[test]
fn truncation_at_every_offset() {
    let recs = records(300, 11);
    let (file, frames) = encode(&recs, 40);
    for cut in 0..file.len() {
        let d = decode_all(&file[..cut]);
        assert_eq!(decode_whole(&file[..cut]).0, d.records, "cut at {cut}");
        let complete: Vec<Record> = frames
            .iter()
            .filter(|(r, _)| r.end <= cut)
            .flat_map(|(_, v)| v.clone())
            .collect();
        assert_eq!(d.records, complete, "cut at {cut}");
        assert!(
            !d.damage.is_empty(),
            "cut at {cut}: truncation not reported"
        );
        assert!(d.trailer.is_none());
        // A frame cut after its header was read: its records are counted exactly.
        if let Some((r, v)) = frames
            .iter()
            .find(|(r, _)| r.start + FRAME_HEADER_LEN <= cut && cut < r.end)
        {
            let _ = r;
            assert_eq!(d.losses.records_lost, v.len() as u64, "cut at {cut}");
        }
        assert!(
            d.losses.unknown_loss,
            "cut at {cut}: what follows the cut is unknown"
        );
    }
}

/// Decodes with a [`Decoder::whole`] over shared bytes (the report's path).
fn decode_whole(file: &[u8]) -> (Vec<Record>, Losses, Vec<Damage>) {
    let mut d = Decoder::whole(std::sync::Arc::new(file.to_vec()));
    let (mut recs, mut dmg) = (Vec::new(), Vec::new());
    while let Some(e) = d.poll() {
        match e {
            Event::Record(r) => recs.push(r),
            Event::Damage(x) => dmg.push(x),
            _ => {}
        }
    }
    (recs, d.losses().clone(), dmg)
}

/// Checks that the decoded records are exactly those of the frames the damage did not
/// touch, in order, and that the accounting is exact when the trailer survived.
fn check_damaged(
    file: &[u8],
    damaged: std::ops::Range<usize>,
    frames: &[(std::ops::Range<usize>, Vec<Record>)],
    total: usize,
) {
    let d = decode_all(file);
    let (w_recs, w_losses, w_damage) = decode_whole(file);
    assert_eq!(
        (&w_recs, &w_losses, &w_damage),
        (&d.records, &d.losses, &d.damage),
        "whole and streaming decoders disagree"
    );
    let intact: Vec<Record> = frames
        .iter()
        .filter(|(r, _)| r.end <= damaged.start || r.start >= damaged.end)
        .flat_map(|(_, v)| v.clone())
        .collect();
    // Every frame untouched by the damage decodes, and nothing else does.
    assert!(
        d.records == intact,
        "damage {damaged:?}: {} records decoded, {} intact",
        d.records.len(),
        intact.len()
    );
    if d.trailer.is_some() {
        assert!(!d.losses.unknown_loss, "damage {damaged:?}: {:?}", d.damage);
        assert_eq!(
            d.records.len() as u64 + d.losses.records_lost,
            total as u64,
            "accounting, damage {damaged:?}: {:?}",
            d.damage
        );
    }
}

#[test]
fn corrupted_ranges_lose_only_their_frames() {
    let recs = records(400, 5);
    let (file, frames) = encode(&recs, 30);
    let mut x = 0x9E37_79B9_7F4A_7C15u64;
    for _ in 0..3000 {
        x = x
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        let start = (x >> 20) as usize % file.len();
        let len = 1 + (x >> 50) as usize % 200;
        let end = (start + len).min(file.len());
        let mut f = file.clone();
        for (i, b) in f[start..end].iter_mut().enumerate() {
            *b ^= (x >> (i % 56)) as u8 | 1;
        }
        check_damaged(&f, start..end, &frames, recs.len());
    }
}

#[test]
fn cut_out_frames_are_counted() {
    let recs = records(400, 9);
    let (file, frames) = encode(&recs, 30);
    let (a, b) = (frames[2].0.start, frames[4].0.end);
    let mut f = file[..a].to_vec();
    f.extend_from_slice(&file[b..]);
    let d = decode_all(&f);
    let lost: usize = frames[2..=4].iter().map(|(_, v)| v.len()).sum();
    assert_eq!(d.losses.records_lost, lost as u64);
    assert_eq!(d.losses.frames_lost, 3);
    assert_eq!(d.records.len() + lost, recs.len());
}

#[test]
fn not_a_labperf_file() {
    let d = decode_all(b"PERFILE2 this is a perf.data file, not ours");
    assert!(!d.is_labperf());
    assert!(!d.damage.is_empty());
    let d = decode_all(&[]);
    assert!(!d.is_labperf());
}

#[test]
fn unknown_long_record_is_skipped() {
    // A records frame with a future long tag (0x7f) between two samples.
    let mut enc = Encoder::new();
    let s = Sample {
        pid: 1,
        tid: 1,
        ip: 10,
        time: 20,
        ..Default::default()
    };
    enc.push(&Record::Sample(s.clone()));
    let f = enc.flush().unwrap();
    let mut payload = f[FRAME_HEADER_LEN..].to_vec();
    payload.extend_from_slice(&[0x7f, 3, 9, 9, 9]);
    payload.extend_from_slice(&[tag::SAMPLE, sample_flag::THREAD, 2, 2, 0]);
    let mut file = Encoder::prelude().to_vec();
    file.extend(frame::build(
        FRAME_HEADER,
        0,
        0,
        0,
        &postcard::to_allocvec(&header()).unwrap(),
    ));
    file.extend(frame::build(FRAME_RECORDS, 1, 0, 3, &payload));
    let d = decode_all(&file);
    assert_eq!(d.records.len(), 2);
    assert_eq!(d.losses.unknown_records, 1);
    assert_eq!(
        d.records[1],
        Record::Sample(Sample {
            ip: 11,
            time: 21,
            ..s
        })
    );
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn prop_round_trip(n in 0usize..200, seed in any::<u64>(), per in 1usize..64) {
        let recs = records(n, seed);
        let (file, _) = encode(&recs, per);
        let d = decode_all(&file);
        prop_assert_eq!(d.records, recs);
        prop_assert!(d.losses.is_clean());
    }

    #[test]
    fn prop_samples_round_trip(samples in prop::collection::vec((any::<u32>(), any::<u32>(), any::<u64>(), any::<u64>(), any::<u64>(), prop::collection::vec(any::<u64>(), 0..6), prop::option::of(any::<u64>())), 1..100)) {
        let recs: Vec<Record> = samples.into_iter().map(|(pid, tid, ip, time, period, values, addr)| Record::Sample(Sample { pid, tid, ip, time, period, values, addr, cpu: pid % 4, event: tid % 3, ..Default::default() })).collect();
        let (file, _) = encode(&recs, 16);
        prop_assert_eq!(decode_all(&file).records, recs);
    }

    #[test]
    fn prop_arbitrary_bytes_never_panic(bytes in prop::collection::vec(any::<u8>(), 0..2048)) {
        let _ = decode_all(&bytes);
        let mut with_prelude = Encoder::prelude().to_vec();
        with_prelude.extend_from_slice(&bytes);
        let _ = decode_all(&with_prelude);
    }

    #[test]
    fn prop_garbage_inside_valid_frames_never_panics(seed in any::<u64>(), at in any::<prop::sample::Index>(), junk in prop::collection::vec(any::<u8>(), 1..64)) {
        let recs = records(100, seed);
        let (mut file, _) = encode(&recs, 10);
        let i = at.index(file.len());
        let end = (i + junk.len()).min(file.len());
        file[i..end].copy_from_slice(&junk[..end - i]);
        let _ = decode_all(&file);
    }
}

#[test]
fn light_reading_gives_the_same_sample_heads() {
    let recs = records(1000, 21);
    let (file, _) = encode(&recs, 64);
    let mut d = Decoder::new();
    d.push(&file);
    d.finish();
    let mut heads = Vec::new();
    let mut others = Vec::new();
    while let Some(e) = d.poll_frame() {
        if let FrameEvent::Records(mut rr) = e {
            while let Some(r) = rr.next_light() {
                match r.unwrap() {
                    Light::Sample(h) => heads.push(h),
                    Light::Record(r) => others.push(*r),
                }
            }
        }
    }
    let want: Vec<SampleHead> = recs
        .iter()
        .filter_map(|r| match r {
            Record::Sample(s) => Some(SampleHead {
                event: s.event,
                pid: s.pid,
                tid: s.tid,
                ip: s.ip,
                time: s.time,
                period: s.period,
                cpu: s.cpu,
            }),
            _ => None,
        })
        .collect();
    assert_eq!(heads, want);
    let want_others: Vec<Record> = recs
        .iter()
        .filter(|r| !matches!(r, Record::Sample(_)))
        .cloned()
        .collect();
    assert_eq!(others, want_others);
}

#[test]
fn side_band_reading_skips_user_stacks_and_gives_the_same_heads_and_records() {
    let recs = records(1000, 22);
    assert!(recs
        .iter()
        .any(|r| matches!(r, Record::Sample(s) if s.user_stack.is_some())));
    let (file, _) = encode(&recs, 64);
    let read = |side_band: bool| {
        let mut d = Decoder::new();
        d.push(&file);
        d.finish();
        let mut got = Vec::new();
        while let Some(e) = d.poll_frame() {
            if let FrameEvent::Records(mut rr) = e {
                let f = |l: Light| {
                    got.push(match l {
                        Light::Sample(h) => format!("{h:?}"),
                        Light::Record(r) => format!("{r:?}"),
                    })
                };
                let err = if side_band {
                    rr.for_each_side_band(f)
                } else {
                    rr.for_each_light(f)
                };
                assert!(err.is_none(), "{err:?}");
            }
        }
        got
    };
    let light = read(false);
    assert_eq!(light.len(), recs.len());
    assert_eq!(read(true), light);
}
