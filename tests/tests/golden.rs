//! Golden files of every wire version decode unchanged; damaged copies decode what is intact, through the CLI too.

use labperf_common::{decode_all, Record, WIRE_VERSION_1};
use labperf_tests::{bin, root, scratch};
use std::process::Command;

fn golden(dir: &str) -> (Vec<u8>, String) {
    let d = root().join("tests/data").join(dir);
    (
        std::fs::read(d.join("record.lpr")).unwrap(),
        std::fs::read_to_string(d.join("dump.txt")).unwrap(),
    )
}

#[test]
fn v1_golden_dump_is_unchanged() {
    let (_, want) = golden("x86_64-bench-v1");
    let o = Command::new(bin("labperf"))
        .arg("dump")
        .arg(root().join("tests/data/x86_64-bench-v1/record.lpr"))
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert_eq!(String::from_utf8(o.stdout).unwrap(), want);
}

#[test]
fn v1_golden_header_and_trailer() {
    let (bytes, _) = golden("x86_64-bench-v1");
    let d = decode_all(&bytes);
    assert_eq!(d.wire_version, Some(WIRE_VERSION_1));
    assert!(d.losses.is_clean());
    let h = d.header.unwrap();
    assert_eq!(h.events.len(), 1);
    assert_eq!(h.events[0].name, "cpu-clock");
    assert_eq!(h.events[0].attr.sample_period_or_freq, 1_000_000);
    assert_eq!(h.mode, "sample");
    assert!(h.command[0].ends_with("labperf-bench"));
    let t = d.trailer.unwrap();
    let samples = d
        .records
        .iter()
        .filter(|r| matches!(r, Record::Sample(_)))
        .count() as u64;
    assert_eq!(t.samples, samples);
    assert_eq!(t.records, d.records.len() as u64);
    assert_eq!(t.exit.code, Some(0));
}

/// (start, end, kind, nrecords) of every frame of an intact file.
fn frame_map(bytes: &[u8]) -> Vec<(usize, usize, u8, u32)> {
    let mut out = Vec::new();
    let mut at = labperf_common::PRELUDE_LEN;
    while let Ok((h, _, used)) = labperf_common::frame::parse(&bytes[at..]) {
        out.push((at, at + used, h.kind, h.nrecords));
        at += used;
    }
    assert_eq!(at, bytes.len(), "the golden file is all frames");
    out
}

#[test]
fn damaged_golden_still_reports_and_says_exactly_what_was_lost() {
    let (bytes, _) = golden("x86_64-bench-v1");
    let intact = decode_all(&bytes);
    let total = intact.records.len() as u64;
    let frames = frame_map(&bytes);
    let dir = scratch("golden-damage");
    // Corrupt 40 bytes in the middle and cut off the last 100.
    let mut b = bytes.clone();
    let mid = b.len() / 2;
    for x in &mut b[mid..mid + 40] {
        *x ^= 0x5a;
    }
    b.truncate(b.len() - 100);
    // What that must cost, from the frame map: every frame the corruption touches, and the
    // frame the cut falls in (its header is whole, so its records are counted); the
    // trailer frame goes too, and with it the count of anything after the cut.
    let hit: Vec<_> = frames
        .iter()
        .filter(|f| f.0 < mid + 40 && f.1 > mid || (f.0 + 36 <= b.len() && b.len() < f.1))
        .collect();
    assert!(
        hit.iter().all(|f| f.2 == labperf_common::FRAME_RECORDS),
        "{hit:?}"
    );
    let want_records: u64 = hit.iter().map(|f| u64::from(f.3)).sum();
    let d = decode_all(&b);
    assert_eq!(
        (
            d.losses.frames_lost,
            d.losses.records_lost,
            d.losses.unknown_loss
        ),
        (hit.len() as u32, want_records, true),
        "{:?}",
        d.damage
    );
    assert_eq!(d.records.len() as u64, total - want_records);
    let f = dir.join("damaged.lpr");
    std::fs::write(&f, &b).unwrap();
    let o = Command::new(bin("labperf"))
        .args(["report", "--format", "csv"])
        .arg(&f)
        .output()
        .unwrap();
    assert!(o.status.success());
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("the file is damaged"), "{err}");
    let info = Command::new(bin("labperf"))
        .arg("info")
        .arg(&f)
        .output()
        .unwrap();
    let info = String::from_utf8_lossy(&info.stdout);
    assert!(
        info.contains(&format!(
            "{} frame(s) and {want_records} record(s) lost",
            hit.len()
        )) && info.contains("trailer:         missing"),
        "{info}"
    );
    // Not a labperf file at all: a clear error and exit 1.
    let junk = dir.join("junk.lpr");
    std::fs::write(&junk, b"LPRX not ours at all").unwrap();
    let o = Command::new(bin("labperf"))
        .arg("report")
        .arg(&junk)
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&o.stderr).contains("is not a labperf record file"));
    // perf's magic is perf.data (imported on the fly), so a cut one says what perf's is.
    std::fs::write(&junk, b"PERFILE2 not ours").unwrap();
    let o = Command::new(bin("labperf"))
        .arg("report")
        .arg(&junk)
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(1));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains("is perf's perf.data: cannot import it")
            && err.contains("shorter (17 bytes) than perf.data's 104-byte header"),
        "{err}"
    );
    let o = Command::new(bin("labperf"))
        .arg("report")
        .arg(dir.join("missing.lpr"))
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&o.stderr).contains("cannot open the record file"));
}

use labperf_tests::golden::{self, Kind};

use labperf_tests::golden::{dump, golden_dir};

#[test]
fn stacks_golden_decodes_exactly_and_reencodes_byte_for_byte() {
    let d = root().join("tests/data/v2-stacks");
    let bytes = std::fs::read(d.join("record.lpr")).unwrap();
    assert!(
        bytes == golden::encode_stacks(),
        "v2-stacks: the encoder no longer writes the golden bytes"
    );
    let dec = decode_all(&bytes);
    assert!(dec.losses.is_clean(), "{:?}", dec.damage);
    let want: Vec<Record> = golden::stack_frames().into_iter().flatten().collect();
    assert_eq!(dec.records, want);
    assert_eq!(
        dump(&d.join("record.lpr")),
        std::fs::read_to_string(d.join("dump.txt")).unwrap()
    );
    // USTACK belongs to its sample: not counted as a record of its own.
    assert_eq!(dec.trailer.unwrap().records, want.len() as u64);
}

#[test]
fn the_c_agents_golden_file_decodes_to_what_the_rust_agent_makes_of_its_ring() {
    let d = root().join("tests/data").join(golden::C_GOLDEN);
    let golden = decode_all(&std::fs::read(d.join("record.lpr")).unwrap());
    assert!(golden.losses.is_clean(), "{:?}", golden.damage);
    assert_eq!(golden.wire_version, Some(labperf_common::WIRE_VERSION_2));
    let x = golden.header_ext.clone().unwrap();
    assert_eq!(
        (x.recipe, x.replayed),
        (Some(labperf_common::Recipe::ProfileMe), true)
    );
    assert_eq!(
        std::fs::read(d.join("ring.bin")).unwrap(),
        golden::c_golden_ring().bytes,
        "the ring the golden file came from"
    );
    let scratch = scratch("c-golden");
    let out = scratch.join("rust.lpr");
    let st = Command::new(bin("labperf-agent"))
        .arg("replay")
        .arg(d.join("ring.bin"))
        .args([
            "--sample-type",
            &format!("{:x}", labperf_tests::ring::PROFILEME_SAMPLE_TYPE),
            "-o",
        ])
        .arg(&out)
        .status()
        .unwrap();
    assert!(st.success());
    let rust = decode_all(&std::fs::read(&out).unwrap());
    assert_eq!(golden.records, rust.records);
    assert_eq!(golden.records.len(), 24 + 4);
    assert_eq!(golden.trailer.unwrap().samples, 24);
}

#[test]
fn synthetic_goldens_of_every_version_decode_exactly_and_reencode_byte_for_byte() {
    let mut checked = 0;
    for version in [
        labperf_common::WIRE_VERSION_1,
        labperf_common::WIRE_VERSION_2,
    ] {
        for (kind, name) in golden::KINDS {
            let d = golden_dir(name, version);
            let bytes = std::fs::read(d.join("record.lpr"))
                .unwrap_or_else(|e| panic!("{}: {e}", d.display()));
            // Today's encoder still writes these bytes: the encoding is pinned.
            assert!(
                bytes == golden::encode(kind, version),
                "v{version}-{name}: the encoder no longer writes the golden bytes"
            );
            let dec = decode_all(&bytes);
            assert!(dec.losses.is_clean(), "{:?}", dec.damage);
            assert_eq!(dec.wire_version, Some(version));
            assert_eq!(dec.header.as_ref(), Some(&golden::header(kind)));
            let want: Vec<Record> = golden::frames(kind).into_iter().flatten().collect();
            assert_eq!(dec.records, want, "v{version}-{name}");
            let mut t = golden::trailer(kind);
            t.records = want.len() as u64;
            t.frames = golden::frames(kind).len() as u32;
            assert_eq!(dec.trailer, Some(t));
            let ext = dec.header_ext.clone();
            if version == labperf_common::WIRE_VERSION_1 {
                assert_eq!(ext, None);
            } else {
                assert_eq!(ext.and_then(|x| x.recipe), Some(golden::recipe(kind)));
            }
            // Both versions give the same recipe: v1 through the mode string.
            assert_eq!(
                labperf_common::recipe_of(dec.header.as_ref().unwrap(), dec.header_ext.as_ref()),
                golden::recipe(kind),
                "v{version}-{name}"
            );
            assert_eq!(
                dump(&d.join("record.lpr")),
                std::fs::read_to_string(d.join("dump.txt")).unwrap()
            );
            checked += 1;
        }
    }
    assert_eq!(checked, 6);
}

#[test]
fn usage_golden_decodes_exactly_and_reencodes_byte_for_byte() {
    let d = root().join("tests/data/v2-usage");
    let bytes = std::fs::read(d.join("record.lpr")).unwrap();
    assert!(
        bytes == golden::encode_usage(),
        "v2-usage: the encoder no longer writes the golden bytes"
    );
    let dec = decode_all(&bytes);
    assert!(dec.losses.is_clean(), "{:?}", dec.damage);
    let want: Vec<Record> = golden::frames(Kind::Sample).into_iter().flatten().collect();
    assert_eq!(dec.records, want);
    assert_eq!(dec.trailer_ext, Some(golden::usage()));
    assert_eq!(
        dec.trailer.unwrap().samples,
        golden::trailer(Kind::Sample).samples
    );
    assert_eq!(
        dump(&d.join("record.lpr")),
        std::fs::read_to_string(d.join("dump.txt")).unwrap()
    );
    // An older reader decodes the trailer's postcard body alone (postcard's from_bytes,
    // which leaves what follows): the item is after it.
    let t = labperf_common::Encoder::new()
        .trailer_frame_ext(&golden::trailer(Kind::Sample), &golden::usage());
    let body = &t[labperf_common::FRAME_HEADER_LEN..];
    let (old, rest) = postcard::take_from_bytes::<labperf_common::Trailer>(body).unwrap();
    assert_eq!(old.samples, golden::trailer(Kind::Sample).samples);
    assert_eq!(
        rest,
        labperf_common::encode::encode_trailer_ext(&golden::usage())
    );
}

fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

/// The postcard bytes of a fixed Header, Trailer and of the recipes the C agent writes:
/// `agents/alpha/agent.c` writes them by hand, field by field, so they must never move.
#[test]
fn postcard_bytes_of_the_header_trailer_and_recipes_are_frozen() {
    let mut enc = labperf_common::Encoder::new();
    let h = enc.header_frame(&golden::header(Kind::Stat));
    assert_eq!(
        hex(&h[labperf_common::FRAME_HEADER_LEN..]),
        HEADER_POSTCARD,
        "the Header's postcard layout changed"
    );
    let t = enc.trailer_frame(&golden::trailer(Kind::Sample));
    assert_eq!(
        hex(&t[labperf_common::FRAME_HEADER_LEN..]),
        // records 0, frames 0 (a fresh encoder) | 08 | 0c | 01 | 00 | cec2f105 (12345678 ns) |
        // 8010 (2048 KiB) | 01 00 (code Some(0)), 00 (no signal) | 80d6c28c04 (1.1e9 ns)
        "0000080c0100cec2f105801001000080d6c28c04",
        "the Trailer's postcard layout changed"
    );
    use labperf_common::{encode::encode_header_ext, HeaderExt, Recipe};
    for (r, want) in [
        (Recipe::Sample { group_read: false }, "01020000"),
        (Recipe::Sample { group_read: true }, "01020001"),
        (Recipe::ProfileMe, "010105"),
        (Recipe::Mem, "010106"),
    ] {
        let x = HeaderExt {
            recipe: Some(r.clone()),
            ..Default::default()
        };
        assert_eq!(hex(&encode_header_ext(&x)), want, "{r:?}");
    }
    let replayed = HeaderExt {
        recipe: Some(Recipe::ProfileMe),
        replayed: true,
        ..Default::default()
    };
    assert_eq!(hex(&encode_header_ext(&replayed)), "0101050200");
    // Item 3, the vDSO image: tag, length, the bytes as they are.
    let vdso = HeaderExt {
        vdso: Some(b"\x7fELF".to_vec()),
        ..Default::default()
    };
    assert_eq!(hex(&encode_header_ext(&vdso)), "03047f454c46");
    let (back, ok) = labperf_common::decode::decode_header_ext(&encode_header_ext(&vdso));
    assert!(ok);
    assert_eq!(back, vdso);
    // Larger than MAX_VDSO: damage, not an allocation the file chose.
    let big = HeaderExt {
        vdso: Some(vec![0; labperf_common::MAX_VDSO + 1]),
        ..Default::default()
    };
    assert!(!labperf_common::decode::decode_header_ext(&encode_header_ext(&big)).1);
    // The trailer extension's USAGE item, as agents/alpha/agent.c's usage_item writes it:
    // 01 (USAGE) | 0f (length) | 00 Workload | 80f5d6f403 (1.05e9 ns) | c0dcae17 (49e6 ns)
    // | b802 (312) | 02 | e807 (1000 ns); with -a, 03 Cpus, then the count and the idle ns.
    use labperf_common::encode::encode_trailer_ext;
    assert_eq!(
        hex(&encode_trailer_ext(&golden::usage())),
        "010f0080f5d6f403c0dcae17b80202e807"
    );
    let cpus = labperf_common::TrailerExt {
        usage: Some(labperf_common::Usage {
            scope: labperf_common::UsageScope::Cpus {
                cpus: 2,
                idle_ns: 10_000_000,
            },
            user_ns: 20_000_000,
            system_ns: 0,
            minor_faults: 0,
            major_faults: 0,
            resolution_ns: 10_000_000,
        }),
        ..Default::default()
    };
    assert_eq!(
        hex(&encode_trailer_ext(&cpus)),
        "0111030280ade20480dac40900000080ade204"
    );
    let (back, ok) = labperf_common::decode::decode_trailer_ext(&encode_trailer_ext(&cpus));
    assert!(ok);
    assert_eq!(back, cpus);
    // An item of a tag this reader does not know is skipped, a cut one is damage.
    let (x, ok) = labperf_common::decode::decode_trailer_ext(&[0x7f, 0x01, 0xaa]);
    assert!(ok && x.usage.is_none() && x.unknown_items == 1);
    assert!(!labperf_common::decode::decode_trailer_ext(&[0x01, 0x05, 0x00]).1);
}

/// postcard(golden::header(Kind::Stat)), checked field by field against the spec once:
/// 13 "labperf-agent 0.1.0" | 01 Aarch64 | 00 Little | 0c "6.1.0-golden" | 01 Arm, 01 Some
/// 83a1bf8804 (MIDR), 41, 881a (0xd08), 00, 03 | 06 "golden" | 03 argv | 02 zz(1) clock |
/// 8094ebdc03 (1e9) | realtime | 02 events, each name, Attr (21 fields), 00 (no leader) |
/// 04 "stat" | 01 notes, 06 "a note".
const HEADER_POSTCARD: &str = "136c6162706572662d6167656e7420302e312e3001000c362e312e302d676f6c64656e010183a1bf880441881a000306676f6c64656e030d6c6162706572662d62656e63680a2d2d6475726174696f6e0131028094ebdc038080a8bef694bfbd18020a7461736b2d636c6f636b0188010100000381a0040000000000000002000000000000000b706167652d6661756c74730188010200000381a0040000000000000002000000000000000473746174010661206e6f7465";
