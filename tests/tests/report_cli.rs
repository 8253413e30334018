//! What `labperf report`, `info` and `dump` tell a reader beyond the table: samples the
//! kernel lost, `--strict` on damage, and text from a recording escaped before it reaches
//! a terminal.

use labperf_common::*;
use labperf_tests::{bin, root, scratch};
use std::process::Command;

fn write(path: &std::path::Path, h: &Header, records: &[Record]) {
    let mut enc = Encoder::new();
    let mut f = Encoder::prelude().to_vec();
    f.extend(enc.header_frame(h));
    for r in records {
        enc.push(r);
    }
    f.extend(enc.trailer_frame(&Trailer::default()));
    std::fs::write(path, f).unwrap();
}

fn header() -> Header {
    labperf_tests::golden::header(labperf_tests::golden::Kind::Sample)
}

#[test]
fn samples_the_kernel_lost_are_said_with_their_share() {
    let d = scratch("report-lost");
    let f = d.join("lost.lpr");
    let mut recs: Vec<Record> = (0..150)
        .map(|i| {
            Record::Sample(Sample {
                pid: 1,
                tid: 1,
                ip: 0x1000 + i,
                period: 1,
                ..Default::default()
            })
        })
        .collect();
    recs.push(Record::Lost(Lost { event: 0, lost: 30 }));
    recs.push(Record::Lost(Lost { event: 0, lost: 20 }));
    write(&f, &header(), &recs);
    for view in [&[][..], &["--by", "dso"][..]] {
        let o = Command::new(bin("labperf"))
            .arg("report")
            .args(view)
            .arg(&f)
            .output()
            .unwrap();
        let e = String::from_utf8_lossy(&o.stderr);
        assert!(o.status.success(), "{e}");
        assert!(
            e.contains("the kernel lost 50 samples, 25.0% of the 200 it produced"),
            "{e}"
        );
    }
}

#[test]
fn strict_exits_3_on_a_damaged_file_and_0_on_an_intact_one() {
    let golden = root().join("tests/data/x86_64-bench-v1/record.lpr");
    let d = scratch("report-strict");
    let mut b = std::fs::read(&golden).unwrap();
    let mid = b.len() / 2;
    b[mid] ^= 0xff;
    let damaged = d.join("damaged.lpr");
    std::fs::write(&damaged, b).unwrap();
    for verb in ["report", "info", "dump"] {
        let run = |f: &std::path::Path, strict: bool| {
            let mut c = Command::new(bin("labperf"));
            c.arg(verb);
            if strict {
                c.arg("--strict");
            }
            c.arg(f).output().unwrap().status.code()
        };
        assert_eq!(run(&golden, true), Some(0), "{verb}");
        assert_eq!(run(&damaged, false), Some(0), "{verb}: without --strict");
        assert_eq!(run(&damaged, true), Some(3), "{verb}: --strict");
    }
}

#[test]
fn text_from_a_recording_cannot_drive_the_terminal() {
    let d = scratch("report-escapes");
    let f = d.join("esc.lpr");
    let mut h = header();
    h.hostname = "lab\u{1b}]0;owned\u{7}".into();
    h.command = vec!["\u{1b}[2J".into()];
    h.notes = vec!["\u{9b}31mred".into()];
    let recs = vec![
        Record::Comm(Comm {
            pid: 1,
            tid: 1,
            comm: "x\u{1b}[5m".into(),
            exec: true,
        }),
        Record::Mmap2(Mmap2 {
            pid: 1,
            tid: 1,
            addr: 0x1000,
            len: 0x1000,
            path: "/tmp/\u{1b}[31mevil\nline".into(),
            ..Default::default()
        }),
        Record::Sample(Sample {
            pid: 1,
            tid: 1,
            ip: 0x1010,
            period: 1,
            ..Default::default()
        }),
    ];
    write(&f, &h, &recs);
    for args in [
        vec!["info"],
        vec!["dump"],
        vec!["report"],
        vec!["report", "--by", "dso"],
        vec!["report", "--format", "csv"],
    ] {
        let o = Command::new(bin("labperf"))
            .args(&args)
            .arg(&f)
            .output()
            .unwrap();
        assert!(o.status.success(), "{args:?}");
        for stream in [&o.stdout, &o.stderr] {
            assert!(
                !stream.iter().any(|&b| b == 0x1b || b == 0x07),
                "{args:?} printed a raw control character: {}",
                String::from_utf8_lossy(stream)
            );
        }
        let all =
            String::from_utf8_lossy(&o.stdout).into_owned() + &String::from_utf8_lossy(&o.stderr);
        assert!(!all.contains('\u{9b}'), "{args:?}: {all}");
        if args == ["info"] {
            assert!(all.contains("lab\\x1b]0;owned\\x07"), "{all}");
        }
        if args == ["dump"] {
            assert!(all.contains("/tmp/\\x1b[31mevil\\nline"), "{all}");
        }
    }
}

#[test]
fn csv_text_cells_that_a_spreadsheet_would_run_as_formulas_get_a_quote() {
    let d = scratch("report-csv-formulas");
    let f = d.join("formulas.lpr");
    // One process per hostile name (comm), each with a mapping named the same way (dso).
    let names = [
        "=HYPERLINK(\"http://x\",\"y\")",
        "+1+2",
        "-2+3",
        "@SUM(A1)",
        "\tcmd",
        "\rcmd",
        "plain",
    ];
    let mut recs = Vec::new();
    for (i, n) in names.iter().enumerate() {
        let pid = 10 + i as u32;
        let base = 0x10_0000 * (i as u64 + 1);
        recs.push(Record::Comm(Comm {
            pid,
            tid: pid,
            comm: n.to_string(),
            exec: true,
        }));
        recs.push(Record::Mmap2(Mmap2 {
            pid,
            tid: pid,
            addr: base,
            len: 0x1000,
            path: n.to_string(),
            ..Default::default()
        }));
        // Different sample counts keep the row order fixed: the first name busiest.
        for k in 0..(20 - i as u64) {
            recs.push(Record::Sample(Sample {
                pid,
                tid: pid,
                ip: base + 0x10 + k,
                period: 1,
                ..Default::default()
            }));
        }
    }
    write(&f, &header(), &recs);
    for by in ["comm", "dso"] {
        let o = Command::new(bin("labperf"))
            .args(["report", "--by", by, "--format", "csv", "--top", "0"])
            .arg(&f)
            .output()
            .unwrap();
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        let csv = String::from_utf8(o.stdout).unwrap();
        let mut lines = csv.lines();
        let header: Vec<&str> = lines.next().unwrap().split(',').collect();
        // The name is the last column (`dso` rows are keyed `name`).
        let col = header.len() - 1;
        assert_eq!(
            header[col],
            if by == "comm" { "comm" } else { "name" },
            "{csv}"
        );
        let rows: Vec<&str> = lines.collect();
        assert_eq!(rows.len(), names.len(), "{csv}");
        let want = [
            "\"'=HYPERLINK(\"\"http://x\"\",\"\"y\"\")\"",
            "'+1+2",
            "'-2+3",
            "'@SUM(A1)",
            "'\\tcmd",
            "'\\rcmd",
            "plain",
        ];
        for (row, w) in rows.iter().zip(want) {
            // Numbers before it are never prefixed.
            assert!(
                row.ends_with(w),
                "--by {by}: {row:?} does not end with {w:?}"
            );
            let cells: Vec<&str> = row.split(',').collect();
            for (i, c) in cells.iter().enumerate().take(col) {
                assert!(
                    c.parse::<f64>().is_ok(),
                    "--by {by}: column {} is not a plain number: {row}",
                    header[i]
                );
            }
        }
    }
}
