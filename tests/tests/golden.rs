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

#[test]
fn damaged_golden_still_reports_and_says_what_was_lost() {
    let (bytes, _) = golden("x86_64-bench-v1");
    let dir = scratch("golden-damage");
    // Corrupt 40 bytes in the middle and cut off the last 100.
    let mut b = bytes.clone();
    let mid = b.len() / 2;
    for x in &mut b[mid..mid + 40] {
        *x ^= 0x5a;
    }
    b.truncate(b.len() - 100);
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
        info.contains("record(s) lost") && info.contains("trailer:         missing"),
        "{info}"
    );
    // Not a labperf file at all: a clear error and exit 1.
    let junk = dir.join("junk.lpr");
    std::fs::write(&junk, b"PERFILE2 not ours").unwrap();
    let o = Command::new(bin("labperf"))
        .arg("report")
        .arg(&junk)
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&o.stderr).contains("is not a labperf record file"));
    let o = Command::new(bin("labperf"))
        .arg("report")
        .arg(dir.join("missing.lpr"))
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&o.stderr).contains("cannot open the record file"));
}
