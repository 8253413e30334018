//! `labperf import perf.data`: a plain `perf record` of the bench, imported, reports what
//! `perf report` reports on the same file.

use labperf_tests::{assert_split, bin, report_json, scratch, BenchClock};
use std::collections::BTreeMap;
use std::path::Path;
use std::process::Command;

/// `perf record -e EVENT -c PERIOD` of the bench into `data`: the bench's own account.
fn perf_record(
    data: &Path,
    event: &str,
    period: &str,
    duration: &str,
    classes: &str,
) -> BenchClock {
    perf_record_with(data, &["-e", event, "-c", period], duration, classes)
}

/// `perf record OPTIONS` of the bench into `data`: the bench's own account.
fn perf_record_with(data: &Path, options: &[&str], duration: &str, classes: &str) -> BenchClock {
    let o = Command::new("perf")
        .args(["record", "-q"])
        .args(options)
        .arg("-o")
        .arg(data)
        .arg("--")
        .arg(bin("labperf-bench"))
        .args(["--duration", duration, "--classes", classes])
        .output()
        .expect("perf (cargo xtask setup installs linux-perf)");
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    BenchClock::parse(&o.stderr)
}

/// `labperf import DATA -o OUT`: its output.
fn import(data: &Path, out: &Path) -> std::process::Output {
    Command::new(bin("labperf"))
        .arg("import")
        .arg(data)
        .arg("-o")
        .arg(out)
        .output()
        .unwrap()
}

#[test]
fn an_imported_perf_recording_reports_perf_s_top_ten() {
    let d = scratch("import");
    let data = d.join("perf.data");
    // User mode only: the classes' split is user time (the kernel's functions of an import
    // are checked against perf in callstacks.rs, on a kernel recording).
    let clock = perf_record(
        &data,
        "cpu-clock:u",
        "250000",
        "1.5",
        "int_divider_stalls=3,nops=2,dcache_miss=1",
    );
    let lpr = d.join("perf.lpr");
    let o = import(&data, &lpr);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    // perf's own report of the same file: "    46.47%  [.] int_divider_stalls".
    let p = Command::new("perf")
        .args(["report", "--stdio", "--sort", "sym", "-i"])
        .arg(&data)
        .output()
        .unwrap();
    assert!(p.status.success());
    let perf: Vec<(String, f64)> = String::from_utf8_lossy(&p.stdout)
        .lines()
        .filter(|l| !l.starts_with('#') && l.contains("%  ["))
        .take(10)
        .map(|l| {
            let (pct, rest) = l.trim().split_once("%  ").unwrap();
            let name = rest.split_once(' ').unwrap().1.trim().to_string();
            (name, pct.parse().unwrap())
        })
        .collect();
    // Ten rows, or all of them (a user-mode recording of the bench has five or so).
    assert!(perf.len() >= 4, "{}", String::from_utf8_lossy(&p.stdout));
    let j = report_json(&lpr, 0, |_| {});
    assert_eq!(j["view"], "plain");
    let ours: BTreeMap<String, f64> = j["tables"][0]["rows"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| {
            (
                r["name"].as_str().unwrap().to_string(),
                r["percent"].as_f64().unwrap(),
            )
        })
        .collect();
    // Every one of perf's top ten within 0.5 points.
    for (name, pct) in &perf {
        let got = ours.get(name).copied().unwrap_or(0.0);
        eprintln!("{name}: perf {pct:.2}%, labperf {got:.2}%");
        assert!(
            (got - pct).abs() <= 0.5,
            "{name}: perf {pct}%, labperf {got}%"
        );
    }
    // The classes split as the bench's clock measured them (1.5 points, as the agent's
    // split test: cpu-clock:u samples every 250 µs of that CPU time; dcache_miss reads
    // about half a point low, its clock reads being dearer kernel time).
    assert_split(
        &ours,
        &clock,
        &["int_divider_stalls", "nops", "dcache_miss"],
        1.5,
    );
    // The header says where it came from; the sample count is perf's.
    let info = Command::new(bin("labperf"))
        .arg("info")
        .arg(&lpr)
        .output()
        .unwrap();
    let info = String::from_utf8_lossy(&info.stdout);
    assert!(
        info.contains("(labperf import)") && info.contains("cpu-clock"),
        "{info}"
    );
    // Every sample of the file: as many as `perf script` prints.
    let script = Command::new("perf")
        .args(["script", "-F", "period", "-i"])
        .arg(&data)
        .output()
        .unwrap();
    assert!(script.status.success());
    let perf_samples = String::from_utf8_lossy(&script.stdout).lines().count() as u64;
    assert_eq!(j["summary"]["total_samples"], perf_samples);
    assert!(perf_samples > 1000);
}

#[test]
fn a_file_that_is_not_perf_data_is_a_clear_error() {
    let d = scratch("import-bad");
    let f = d.join("not.data");
    std::fs::write(&f, b"PERFILE2 but not really").unwrap();
    let o = import(&f, &d.join("x.lpr"));
    assert_eq!(o.status.code(), Some(1));
    let e = String::from_utf8_lossy(&o.stderr);
    assert!(
        e.contains("cannot import") && e.contains("perf.data"),
        "{e}"
    );
    assert!(!d.join("x.lpr").exists() && !d.join("x.lpr.part").exists());
}

#[test]
fn an_import_into_its_own_perf_data_is_refused_and_the_recording_kept() {
    let d = scratch("import-self");
    let data = d.join("perf.data");
    perf_record(&data, "cpu-clock:u", "500000", "0.1", "nops");
    let before = std::fs::read(&data).unwrap();
    // The same file by another name too (a hard link).
    let link = d.join("link.data");
    std::fs::hard_link(&data, &link).unwrap();
    for out in [&data, &link] {
        let o = import(&data, out);
        let e = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(1), "{e}");
        assert!(e.contains("into itself"), "{e}");
        assert_eq!(std::fs::read(&data).unwrap(), before);
    }
    // `report`, `export` and `diff` of perf's file import it on the fly, and say so with the
    // command that keeps the import (before: "check the path, or record one with `labperf
    // record --local`").
    for args in [
        &["report"][..],
        &["export", "--format", "folded", "-o", "-"],
        &["diff", "link.data"],
    ] {
        let o = Command::new(bin("labperf"))
            .args(args)
            .arg(&data)
            .current_dir(&d)
            .output()
            .unwrap();
        let e = String::from_utf8_lossy(&o.stderr);
        assert!(o.status.success(), "{args:?}: {e}");
        assert!(
            e.contains("is perf's perf.data: imported for this command")
                && e.contains("`labperf import "),
            "{args:?}: {e}"
        );
        assert!(!String::from_utf8_lossy(&o.stdout).is_empty(), "{args:?}");
        assert_eq!(std::fs::read(&data).unwrap(), before);
    }
}

#[test]
fn a_cut_or_corrupted_perf_data_is_an_error_or_what_is_intact_never_a_crash() {
    let d = scratch("import-cut");
    let data = d.join("perf.data");
    perf_record(&data, "cpu-clock:u", "500000", "0.3", "nops");
    let whole = std::fs::read(&data).unwrap();
    let bad = d.join("bad.data");
    let out = d.join("bad.lpr");
    let mut cases: Vec<Vec<u8>> = (1..24)
        .map(|i| whole[..whole.len() * i / 24].to_vec())
        .collect();
    for i in 1..24 {
        // A byte flipped in the header, the attrs and the records.
        let mut v = whole.clone();
        let at = whole.len() * i / 24;
        v[at] ^= 0xa5;
        cases.push(v);
    }
    // Each section's size made enormous (the attrs', the data's, and every feature's, whose
    // {offset, size} entries follow the data): the parser would allocate that much.
    let u64_at = |v: &[u8], at: usize| u64::from_le_bytes(v[at..at + 8].try_into().unwrap());
    let table = (u64_at(&whole, 40) + u64_at(&whole, 48)) as usize;
    let features: u32 = whole[72..104].iter().map(|b| b.count_ones()).sum();
    assert!(features > 3, "perf writes its features");
    let sizes = [32, 48]
        .into_iter()
        .chain((0..features as usize).map(|k| table + 16 * k + 8));
    for at in sizes {
        let mut v = whole.clone();
        v[at..at + 8].copy_from_slice(&0x00a5_0000_0000_0000u64.to_le_bytes());
        cases.push(v);
    }
    let huge = cases.len() - features as usize - 2;
    for (n, bytes) in cases.iter().enumerate() {
        std::fs::write(&bad, bytes).unwrap();
        let o = import(&bad, &out);
        if n >= huge {
            assert_eq!(o.status.code(), Some(1), "case {n}");
            let e = String::from_utf8_lossy(&o.stderr);
            assert!(e.contains("ends past the file's"), "case {n}: {e}");
        }
        // 0 (what was intact) or 1 (a clear error): never a signal or Rust's 101.
        assert!(
            matches!(o.status.code(), Some(0 | 1)),
            "case {n}: {:?} {}",
            o.status,
            String::from_utf8_lossy(&o.stderr)
        );
        if o.status.code() == Some(1) {
            assert!(String::from_utf8_lossy(&o.stderr).contains("cannot import"));
        }
        assert!(!d.join("bad.lpr.part").exists(), "case {n}");
    }
}

#[test]
fn the_folded_stacks_of_an_import_are_inferno_s_of_perf_script() {
    let d = scratch("import-folded");
    let data = d.join("perf.data");
    // User mode; the vDSO's functions are named from the image perf keeps in its build-id
    // cache.
    perf_record(
        &data,
        "cpu-clock:u",
        "250000",
        "1",
        "int_divider_stalls=2,nops=1",
    );
    let lpr = d.join("perf.lpr");
    assert!(import(&data, &lpr).status.success());
    let ours = Command::new(bin("labperf"))
        .arg("export")
        .arg(&lpr)
        .args(["--format", "folded"])
        .output()
        .unwrap();
    assert!(ours.status.success());
    // perf script | inferno-collapse-perf, through a file.
    let script = Command::new("perf")
        .args(["script", "-i"])
        .arg(&data)
        .output()
        .unwrap();
    assert!(script.status.success());
    let script_file = d.join("script.txt");
    std::fs::write(&script_file, &script.stdout).unwrap();
    let theirs = Command::new("inferno-collapse-perf")
        .arg(&script_file)
        .output()
        .expect("inferno-collapse-perf (cargo xtask setup runs cargo install inferno)");
    assert!(theirs.status.success());
    let lines = |b: &[u8]| -> BTreeMap<String, u64> {
        String::from_utf8_lossy(b)
            .lines()
            .map(|l| {
                let (s, n) = l.rsplit_once(' ').unwrap();
                (s.to_string(), n.parse().unwrap())
            })
            .collect()
    };
    let (ours, theirs) = (lines(&ours.stdout), lines(&theirs.stdout));
    // The two classes always have stacks; the bench's own loop and the vDSO's clock reads
    // get one only when a sample lands there, which a busy machine's 1 s run may not give
    // (2 stacks seen under a full test run): the equality below is the check.
    assert!(ours.len() >= 2, "{ours:?}");
    assert_eq!(ours, theirs);
}

/// A little-endian perf.data file's layout: the data section, and each set feature bit's
/// {offset, size} entry (its place in the file) with the section it names.
struct PerfData {
    data: (usize, usize),
    features: Vec<(u32, usize, usize, usize)>,
}

fn u64_at(v: &[u8], at: usize) -> usize {
    u64::from_le_bytes(v[at..at + 8].try_into().unwrap()) as usize
}

fn u32_at(v: &[u8], at: usize) -> usize {
    u32::from_le_bytes(v[at..at + 4].try_into().unwrap()) as usize
}

fn layout(v: &[u8]) -> PerfData {
    assert_eq!(&v[..8], b"PERFILE2");
    let data = (u64_at(v, 40), u64_at(v, 48));
    let mut features = Vec::new();
    for f in 0..256u32 {
        if v[72 + f as usize / 8] & (1 << (f % 8)) != 0 {
            let entry = data.0 + data.1 + 16 * features.len();
            features.push((f, entry, u64_at(v, entry), u64_at(v, entry + 8)));
        }
    }
    PerfData { data, features }
}

impl PerfData {
    /// The file offset of feature `f`'s section (perf's HEADER_* number).
    fn section(&self, f: u32) -> usize {
        self.features
            .iter()
            .find(|x| x.0 == f)
            .unwrap_or_else(|| panic!("perf wrote no feature {f}"))
            .2
    }
    /// Each record of the data section: (file offset, type, misc, size).
    fn records(&self, v: &[u8]) -> Vec<(usize, u32, u16, usize)> {
        let (mut at, mut out) = (self.data.0, Vec::new());
        while at < self.data.0 + self.data.1 {
            let size = u16::from_le_bytes([v[at + 6], v[at + 7]]) as usize;
            out.push((
                at,
                u32_at(v, at) as u32,
                u16::from_le_bytes([v[at + 4], v[at + 5]]),
                size,
            ));
            at += size;
        }
        out
    }
}

/// `labperf import` in an address space of at most 2 GiB: an allocation of the sizes a
/// damaged count asks for fails (and aborts the process) instead of being granted lazily.
fn import_bounded(data: &Path, out: &Path) -> std::process::Output {
    use std::os::unix::process::CommandExt;
    let mut c = Command::new(bin("labperf"));
    c.arg("import").arg(data).arg("-o").arg(out);
    // SAFETY: setrlimit is async-signal-safe; nothing else runs between fork and exec.
    unsafe {
        c.pre_exec(|| {
            let l = libc::rlimit {
                rlim_cur: 2 << 30,
                rlim_max: 2 << 30,
            };
            if libc::setrlimit(libc::RLIMIT_AS, &l) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
    c.output().unwrap()
}

/// perf's feature numbers (HEADER_* in tools/perf/util/header.h).
const HOSTNAME: u32 = 3;
const CMDLINE: u32 = 11;
const EVENT_DESC: u32 = 12;

#[test]
fn counts_inside_feature_sections_are_bounded_by_the_file_never_allocated_from() {
    let d = scratch("import-counts");
    let data = d.join("perf.data");
    perf_record(&data, "cpu-clock:u", "500000", "0.2", "nops");
    let whole = std::fs::read(&data).unwrap();
    let l = layout(&whole);
    let ed = l.section(EVENT_DESC);
    let attr_size = u32_at(&whole, ed + 4);
    assert!(attr_size >= 64, "EVENT_DESC's attr size {attr_size}");
    // EVENT_DESC: u32 nr, u32 attr_size, then per event the attr, u32 nr_ids, the name as
    // {u32 len, bytes}, the ids. The parser reserves nr events, nr_ids ids and len bytes
    // before reading them: 0x7fffffff events are some 400 GB.
    let attr_end = ed + 8 + attr_size;
    let refused: [(&[(usize, u32)], &str); 4] = [
        (&[(ed, 0x7fff_ffff)], "2147483647 events of at least"),
        (&[(attr_end, 0xffff_ffff)], "4294967295 ids claimed"),
        (
            &[(attr_end + 4, 0xffff_fff0)],
            "event 0's name: 4294967280 bytes claimed",
        ),
        // The attr's own size between PERF_ATTR_SIZE_VER2 (80) and VER3 (96): the parser
        // reads 80 bytes, skips attr_size - 95 and so ends 15 bytes early, where it takes
        // the name's length from the attr's tail (the fuzzer's find, made to ask 4 GB).
        (
            &[(ed + 8 + 4, 95), (attr_end - 11, 0xffff_fff0)],
            "event 0: its attr's size 95 is not a perf_event_attr's",
        ),
    ];
    // String features: the command line's count (a 32 GB reservation of string slices)
    // and the hostname's length; labperf leaves them out and imports the rest.
    let left_out: [(&[(usize, u32)], &str); 2] = [
        (
            &[(l.section(CMDLINE), 0x7fff_ffff)],
            "CMDLINE feature is damaged",
        ),
        (
            &[(l.section(HOSTNAME), 0xffff_ff00)],
            "HOSTNAME feature is damaged",
        ),
    ];
    let bad = d.join("bad.data");
    let out = d.join("bad.lpr");
    let part = d.join("bad.lpr.part");
    for (patches, says) in refused.iter().chain(&left_out) {
        let mut v = whole.clone();
        for &(at, value) in *patches {
            v[at..at + 4].copy_from_slice(&value.to_le_bytes());
        }
        std::fs::write(&bad, &v).unwrap();
        let _ = std::fs::remove_file(&out);
        let t = std::time::Instant::now();
        let o = import_bounded(&bad, &out);
        let e = String::from_utf8_lossy(&o.stderr);
        let refuse = refused.iter().any(|r| r.1 == *says);
        eprintln!("{says}: {:?} in {:?}: {e}", o.status, t.elapsed());
        assert_eq!(
            o.status.code(),
            Some(if refuse { 1 } else { 0 }),
            "{says}: {e}"
        );
        assert!(e.contains(says), "{says}: {e}");
        assert!(!part.exists(), "{says}");
        assert_eq!(out.exists(), !refuse, "{says}");
        if refuse {
            assert!(e.contains("cannot import"), "{e}");
        } else {
            // Every sample is there.
            let ours = report_json(&out, 0, |_| {});
            let good = d.join("good.lpr");
            assert!(import(&data, &good).status.success());
            let theirs = report_json(&good, 0, |_| {});
            assert_eq!(
                ours["summary"]["total_samples"],
                theirs["summary"]["total_samples"]
            );
            assert!(ours["summary"]["total_samples"].as_u64().unwrap() > 10);
        }
    }
}

#[test]
fn an_mmap2_build_id_over_20_bytes_is_a_damaged_record_not_a_parser_assertion() {
    let d = scratch("import-mmap2");
    let data = d.join("perf.data");
    // MMAP2 records with the mapped files' build-ids (PERF_RECORD_MISC_MMAP_BUILD_ID).
    perf_record_with(
        &data,
        &["-e", "cpu-clock:u", "-c", "500000", "--buildid-mmap"],
        "0.2",
        "nops",
    );
    let whole = std::fs::read(&data).unwrap();
    let l = layout(&whole);
    let (at, ..) = *l
        .records(&whole)
        .iter()
        .find(|r| r.1 == 10 && r.2 & (1 << 14) != 0)
        .expect("an MMAP2 record with a build-id");
    // After the 8-byte header: pid, tid (4 each), addr, len, pgoff (8 each), then the
    // build-id's length, which linux-perf-event-reader asserts is at most 20.
    assert!(whole[at + 8 + 32] <= 20);
    let mut v = whole.clone();
    v[at + 8 + 32] = 21;
    let bad = d.join("bad.data");
    std::fs::write(&bad, &v).unwrap();
    let out = d.join("bad.lpr");
    let o = import_bounded(&bad, &out);
    let e = String::from_utf8_lossy(&o.stderr);
    assert!(o.status.success(), "{:?}: {e}", o.status);
    assert!(e.contains("; 1 damaged record left out"), "{e}");
    assert!(!d.join("bad.lpr.part").exists());
    // Every sample is kept.
    let good = d.join("good.lpr");
    assert!(import(&data, &good).status.success());
    let (ours, theirs) = (report_json(&out, 0, |_| {}), report_json(&good, 0, |_| {}));
    assert_eq!(
        ours["summary"]["total_samples"],
        theirs["summary"]["total_samples"]
    );
}

#[test]
fn a_callchain_longer_than_a_labperf_sample_holds_is_cut_not_written_unreadable() {
    let d = scratch("import-deep");
    let data = d.join("perf.data");
    perf_record_with(
        &data,
        &["-e", "cpu-clock:u", "-c", "500000", "-g"],
        "0.2",
        "nops",
    );
    let whole = std::fs::read(&data).unwrap();
    let l = layout(&whole);
    // The sample's fields before the callchain: IDENTIFIER, IP, TID, TIME, ADDR, ID,
    // STREAM_ID, CPU, PERIOD (8 bytes each), from the attr's sample_type.
    let st = u64_at(&whole, u64_at(&whole, 24) + 24) as u64;
    assert!(
        st & (1 << 5) != 0 && st & (1 << 4) == 0,
        "sample_type {st:#x}"
    );
    let before = [16, 0, 1, 2, 3, 6, 9, 7, 8]
        .iter()
        .filter(|&&b| st & (1 << b) != 0)
        .count();
    let (at, _, _, size) = *l
        .records(&whole)
        .iter()
        .find(|r| r.1 == 9)
        .expect("a sample");
    let nr_at = at + 8 + 8 * before;
    let nr = u64_at(&whole, nr_at);
    // 5,000 frames: the sample's own, then copies of its last.
    let add = 5000 - nr;
    let last = whole[nr_at + 8 * nr..nr_at + 8 * nr + 8].to_vec();
    let mut v = whole[..nr_at + 8 + 8 * nr].to_vec();
    for _ in 0..add {
        v.extend_from_slice(&last);
    }
    v.extend_from_slice(&whole[nr_at + 8 + 8 * nr..]);
    v[nr_at..nr_at + 8].copy_from_slice(&5000u64.to_le_bytes());
    let grown = 8 * add;
    v[at + 6..at + 8].copy_from_slice(&((size + grown) as u16).to_le_bytes());
    v[48..56].copy_from_slice(&((l.data.1 + grown) as u64).to_le_bytes());
    // The feature sections follow the data: each moves with it.
    for &(_, entry, off, _) in &l.features {
        v[entry + grown..entry + grown + 8].copy_from_slice(&((off + grown) as u64).to_le_bytes());
    }
    let deep = d.join("deep.data");
    std::fs::write(&deep, &v).unwrap();
    // perf reads it: the file is sound.
    let p = Command::new("perf")
        .args(["script", "-F", "ip", "-i"])
        .arg(&deep)
        .output()
        .unwrap();
    assert!(p.status.success(), "{}", String::from_utf8_lossy(&p.stderr));
    let out = d.join("deep.lpr");
    let o = import(&deep, &out);
    let e = String::from_utf8_lossy(&o.stderr);
    assert!(o.status.success(), "{e}");
    assert!(
        e.contains("; 1 callchain cut to their innermost 4096 frames"),
        "{e}"
    );
    // The file labperf wrote reads back whole, every sample in it.
    let good = d.join("good.lpr");
    assert!(import(&data, &good).status.success());
    let (ours, theirs) = (report_json(&out, 0, |_| {}), report_json(&good, 0, |_| {}));
    assert_eq!(ours["damaged"], false, "{ours}");
    assert_eq!(
        ours["summary"]["total_samples"],
        theirs["summary"]["total_samples"]
    );
}

#[test]
fn no_failed_import_leaves_its_part_file() {
    let d = scratch("import-part");
    let data = d.join("perf.data");
    perf_record(&data, "cpu-clock:u", "500000", "0.1", "nops");
    // The output is a directory: the import is written, and the rename fails.
    let out = d.join("out.lpr");
    std::fs::create_dir(&out).unwrap();
    let o = import(&data, &out);
    let e = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(1), "{e}");
    assert!(!d.join("out.lpr.part").exists(), "{e}");
    assert!(out.is_dir());
}

/// Inputs `cargo xtask fuzz` found (made small), each a clear error or an import, never an
/// abort or an allocation the file does not justify.
#[test]
fn what_the_fuzzer_found_is_a_clear_error() {
    let d = scratch("import-fuzz-finds");
    let cases = [
        (
            // EVENT_DESC whose attr says 127 bytes (between PERF_ATTR_SIZE_VER6 and VER7):
            // the parser read 120, skipped 1 and took the name's length (32 MiB) from the
            // attr.
            "fuzz-event-desc-attr-size-127.data",
            "event 0: its attr's size 127 is not a perf_event_attr's",
        ),
        (
            // CMDLINE's section starts 2 bytes before the feature table: its count, checked
            // in the file, was read by the parser through the rewritten table (391 million
            // strings: a 6.3 GB reservation).
            "fuzz-cmdline-overlaps-feature-table.data",
            "its CMDLINE feature (141 bytes at 5972) overlaps the feature table (64 bytes at 5974)",
        ),
    ];
    for (file, says) in cases {
        let data = labperf_tests::root().join("tests/data/import").join(file);
        let out = d.join("out.lpr");
        let o = import_bounded(&data, &out);
        let e = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(1), "{file}: {e}");
        assert!(e.contains(says), "{file}: {e}");
        assert!(!out.exists() && !d.join("out.lpr.part").exists(), "{file}");
    }
}

/// Replaces the record at `at` (`size` bytes) of `v` with an AUXTRACE record (type 71) of the
/// same size that claims `aux` bytes of trace data after it.
fn auxtrace_in_place(v: &mut [u8], at: usize, size: usize, aux: u64) {
    assert!(
        size >= 48,
        "a record of {size} bytes cannot hold AUXTRACE's fields"
    );
    v[at..at + 4].copy_from_slice(&71u32.to_le_bytes());
    v[at + 4..at + 6].copy_from_slice(&0u16.to_le_bytes());
    v[at + 8..at + 16].copy_from_slice(&aux.to_le_bytes());
}

#[test]
fn an_auxtrace_record_s_claimed_length_is_bounded_by_the_file_or_skipped_in_a_stream() {
    let d = scratch("import-aux");
    let data = d.join("perf.data");
    perf_record(&data, "cpu-clock:u", "500000", "0.1", "nops");
    let mut v = std::fs::read(&data).unwrap();
    let l = layout(&v);
    let &(at, _, _, size) = l
        .records(&v)
        .iter()
        .find(|r| r.3 >= 48)
        .expect("a record of 48 bytes or more");
    // 2^60 bytes: the parser reserved them before reading (a 2 GiB address space aborts).
    auxtrace_in_place(&mut v, at, size, 1 << 60);
    let bad = d.join("aux.data");
    std::fs::write(&bad, &v).unwrap();
    let o = import_bounded(&bad, &d.join("aux.lpr"));
    let e = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(1), "{e}");
    assert!(
        e.contains("an AUXTRACE record claims 1152921504606846976 bytes of trace data"),
        "{e}"
    );
    // The same in a stream: the trace data is skipped, never held; the stream ends first,
    // which is said (what came before is imported).
    let stream = d.join("stream.data");
    let o = Command::new("perf")
        .args([
            "record",
            "-q",
            "-e",
            "cpu-clock:u",
            "-c",
            "500000",
            "-o",
            "-",
            "--",
        ])
        .arg(bin("labperf-bench"))
        .args(["--duration", "0.1", "--classes", "nops"])
        .output()
        .unwrap();
    assert!(o.status.success());
    let mut s = o.stdout;
    // The stream's records from byte 16: the first of the kernel's (after perf's own header
    // records) of 48 bytes or more.
    let mut at = 16;
    let sample = loop {
        let size = u16::from_le_bytes([s[at + 6], s[at + 7]]) as usize;
        if u32_at(&s, at) < 64 && size >= 48 {
            break (at, size);
        }
        at += size;
    };
    auxtrace_in_place(&mut s, sample.0, sample.1, 1 << 60);
    std::fs::write(&stream, &s).unwrap();
    let o = import_bounded(&stream, &d.join("stream.lpr"));
    let e = String::from_utf8_lossy(&o.stderr);
    assert!(o.status.success(), "{:?}: {e}", o.status);
    assert!(
        e.contains("is cut off: the input ends ")
            && e.contains(" bytes into 1152921504606846976 bytes of AUXTRACE record's trace data")
            && e.contains("1152921504606846976 bytes of AUX trace data"),
        "{e}"
    );
}

/// A zstd frame of exactly `len` bytes that decompresses to about 32,000 times that: RLE
/// blocks of 128 KiB, 4 bytes each (a raw block first takes the remainder).
fn zstd_bomb(len: usize) -> Vec<u8> {
    // Magic, a frame header without content size or checksum, a 128 KiB window.
    let mut z = vec![0x28, 0xb5, 0x2f, 0xfd, 0x00, 0x38];
    let avail = len - z.len();
    let raw = (avail - 3) % 4;
    z.extend_from_slice(&((raw as u32) << 3).to_le_bytes()[..3]);
    z.extend(std::iter::repeat_n(b'x', raw));
    let blocks = (len - z.len()) / 4;
    for i in 0..blocks {
        let last = u32::from(i + 1 == blocks);
        let h = (131072u32 << 3) | (1 << 1) | last;
        z.extend_from_slice(&h.to_le_bytes()[..3]);
        z.push(b'y');
    }
    assert_eq!(z.len(), len);
    z
}

#[test]
fn zstd_records_that_decompress_past_the_budget_are_refused_never_held() {
    let d = scratch("import-zstd-bomb");
    let data = d.join("perf.data");
    perf_record_with(
        &data,
        &["-e", "cpu-clock:u", "-c", "500000", "-z"],
        "0.1",
        "nops",
    );
    let mut v = std::fs::read(&data).unwrap();
    let l = layout(&v);
    let &(at, _, _, size) = l
        .records(&v)
        .iter()
        .find(|r| r.1 == 81)
        .expect("perf record -z wrote a COMPRESSED record");
    // About the largest COMPRESSED record a u16 size holds (64 KiB) decompressing to 2 GiB.
    let body = 65520;
    let mut bomb = v[..at].to_vec();
    bomb.extend_from_slice(&81u32.to_le_bytes());
    bomb.extend_from_slice(&0u16.to_le_bytes());
    bomb.extend_from_slice(&((body + 8) as u16).to_le_bytes());
    bomb.extend(zstd_bomb(body));
    bomb.extend_from_slice(&v[at + size..]);
    // The data section grew by the difference, and the feature sections moved with it.
    let grown = body + 8 - size;
    v.clear();
    let data_size = l.data.1 + grown;
    bomb[48..56].copy_from_slice(&(data_size as u64).to_le_bytes());
    for &(_, entry, off, _) in &l.features {
        let entry = entry + grown;
        bomb[entry..entry + 8].copy_from_slice(&((off + grown) as u64).to_le_bytes());
    }
    let bad = d.join("bomb.data");
    std::fs::write(&bad, &bomb).unwrap();
    let o = import_bounded(&bad, &d.join("bomb.lpr"));
    let e = String::from_utf8_lossy(&o.stderr);
    // Before: killed (the 2 GiB address space exhausted by one record's output).
    assert_eq!(o.status.code(), Some(1), "{:?}: {e}", o.status);
    assert!(
        e.contains("zstd-compressed records decompress to more than") && e.contains("zstd bomb"),
        "{e}"
    );
}

/// `labperf import DATA -o OUT` in an address space of `limit` bytes.
fn import_within(data: &Path, out: &Path, limit: u64) -> std::process::Output {
    use std::os::unix::process::CommandExt;
    let mut c = Command::new(bin("labperf"));
    c.arg("import").arg(data).arg("-o").arg(out);
    // SAFETY: setrlimit is async-signal-safe; nothing else runs between fork and exec.
    unsafe {
        c.pre_exec(move || {
            let l = libc::rlimit {
                rlim_cur: limit,
                rlim_max: limit,
            };
            if libc::setrlimit(libc::RLIMIT_AS, &l) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
    c.output().unwrap()
}

/// zstd data, cut into COMPRESSED records (little-endian, at most 65,520 bytes of data
/// each): `pad` bytes of skippable frames (zstd decompresses them to nothing: they raise
/// the ratio budget of 256 times the compressed bytes) and then `frames` frames of `each`
/// 8-byte FINISHED_INIT records (a type the parser holds and labperf counts, never keeps).
fn tiny_record_bomb(pad: usize, frames: usize, each: usize) -> Vec<u8> {
    let mut z = Vec::new();
    let mut left = pad;
    while left > 8 {
        let n = (left - 8).min(1 << 20);
        z.extend(0x184D_2A50u32.to_le_bytes());
        z.extend((n as u32).to_le_bytes());
        z.resize(z.len() + n, 0);
        left -= n + 8;
    }
    let mut one = 82u32.to_le_bytes().to_vec();
    one.extend(0u16.to_le_bytes());
    one.extend(8u16.to_le_bytes());
    let plain: Vec<u8> = one.iter().copied().cycle().take(8 * each).collect();
    let mut frame = vec![0u8; zstd_safe::compress_bound(plain.len())];
    let n = zstd_safe::compress(&mut frame[..], &plain, 1).unwrap();
    frame.truncate(n);
    let mut records = Vec::new();
    let cut = |data: &[u8], records: &mut Vec<u8>| {
        for c in data.chunks(65520) {
            records.extend(81u32.to_le_bytes());
            records.extend(0u16.to_le_bytes());
            records.extend(((c.len() + 8) as u16).to_le_bytes());
            records.extend(c);
            // perf's records are whole 8-byte words: the parser pads nothing.
            assert_eq!(c.len() % 8, 0, "{}", c.len());
        }
    };
    let z_len = z.len() - z.len() % 8;
    z.truncate(z_len);
    cut(&z, &mut records);
    for _ in 0..frames {
        // Each frame in a record of its own, padded with a skippable frame to whole words.
        let mut f = frame.clone();
        let rest = (8 - (f.len() + 8) % 8) % 8;
        f.extend(0x184D_2A50u32.to_le_bytes());
        f.extend((rest as u32).to_le_bytes());
        f.resize(f.len() + rest, 0);
        cut(&f, &mut records);
    }
    records
}

#[test]
fn zstd_bombs_of_tiny_records_stay_within_256_mib_in_file_and_pipe_mode() {
    // Before: a 466 KB perf.data of 8-byte records compressed 256:1 (within the ratio
    // budget) took 2.6 GB to import, 2.1 GB as a stream: the parser held all of them in one
    // round, at some 200 bytes each. Now a round holds at most 32 MiB counted at 256 bytes
    // per record: the bomb is refused, or (a stream's records cut into records under that)
    // imported with round boundaries added, under an address space of 256 MiB.
    let d = scratch("import-tiny-bomb");
    let data = d.join("perf.data");
    perf_record_with(
        &data,
        &["-e", "cpu-clock:u", "-c", "500000", "-z"],
        "0.1",
        "nops",
    );
    let v = std::fs::read(&data).unwrap();
    let l = layout(&v);
    let &(at, _, _, size) = l
        .records(&v)
        .iter()
        .find(|r| r.1 == 81)
        .expect("perf record -z wrote a COMPRESSED record");
    // 460 KB of padding and 12.5 M records (100 MB) in one frame.
    let bomb = tiny_record_bomb(460_000, 1, 12_500_000);
    assert!(bomb.len() < 480_000, "{}", bomb.len());
    let mut file = v[..at].to_vec();
    file.extend(&bomb);
    file.extend(&v[at + size..]);
    let grown = bomb.len() - size;
    file[48..56].copy_from_slice(&((l.data.1 + grown) as u64).to_le_bytes());
    for &(_, entry, off, _) in &l.features {
        let entry = entry + grown;
        file[entry..entry + 8].copy_from_slice(&((off + grown) as u64).to_le_bytes());
    }
    let bad = d.join("bomb.data");
    std::fs::write(&bad, &file).unwrap();
    // A stream: `perf record -o -`, the bomb after its first record of the kernel's.
    let o = Command::new("perf")
        .args([
            "record",
            "-q",
            "-e",
            "cpu-clock:u",
            "-c",
            "500000",
            "-o",
            "-",
            "--",
        ])
        .arg(bin("labperf-bench"))
        .args(["--duration", "0.1", "--classes", "nops"])
        .output()
        .unwrap();
    assert!(o.status.success());
    let s = o.stdout;
    let mut at = 16;
    while u32_at(&s, at) >= 64 {
        at += u16::from_le_bytes([s[at + 6], s[at + 7]]) as usize;
    }
    let stream_with = |bomb: &[u8], name: &str| {
        let mut v = s[..at].to_vec();
        v.extend(bomb);
        v.extend(&s[at..]);
        let p = d.join(name);
        std::fs::write(&p, v).unwrap();
        p
    };
    let stream = stream_with(&bomb, "bomb-stream.data");
    for input in [&bad, &stream] {
        let o = import_within(input, &d.join("bomb.lpr"), 256 << 20);
        let e = String::from_utf8_lossy(&o.stderr);
        // Before: killed (SIGABRT: memory allocation failed) under 256 MiB.
        assert_eq!(
            o.status.code(),
            Some(1),
            "{}: {:?}: {e}",
            input.display(),
            o.status
        );
        assert!(
            e.contains("take more than 32 MiB as the parser holds them")
                && e.contains("refused as a zstd bomb"),
            "{e}"
        );
    }
    // A stream of 16 frames of 60,000 records each (15.5 MiB as the parser holds them):
    // imported, a round boundary before every other one.
    let many = stream_with(&tiny_record_bomb(0, 16, 60_000), "many-stream.data");
    let o = import_within(&many, &d.join("many.lpr"), 256 << 20);
    let e = String::from_utf8_lossy(&o.stderr);
    assert!(o.status.success(), "{:?}: {e}", o.status);
    assert!(e.contains("round boundaries"), "{e}");
}

#[test]
fn an_import_with_q_writes_its_file_and_says_nothing() {
    // Before: `labperf import -q` printed its "N records (M samples) written to" line.
    let d = scratch("import-quiet");
    let data = d.join("q.data");
    perf_record(&data, "cpu-clock", "500000", "0.2", "nops");
    let said = import(&data, &d.join("loud.lpr"));
    assert!(String::from_utf8_lossy(&said.stderr).contains("written to"));
    for q in [&["import", "-q"][..], &["-q", "import"][..]] {
        let out = d.join("quiet.lpr");
        let o = Command::new(bin("labperf"))
            .args(q)
            .arg(&data)
            .arg("-o")
            .arg(&out)
            .output()
            .unwrap();
        assert!(o.status.success(), "{q:?}");
        assert_eq!(String::from_utf8_lossy(&o.stderr), "", "{q:?}");
        assert_eq!(
            std::fs::read(&out).unwrap(),
            std::fs::read(d.join("loud.lpr")).unwrap()
        );
    }
}

/// `labperf info perf.data` and `labperf report perf.data --header-only` show perf's file's
/// header, imported for the command as `report` imports it (before: "perf.data is not a
/// labperf record file … `labperf import FILE -o FILE.lpr` makes              a labperf
/// recording of it"); `dump`, which reads labperf's frames only, names the file in its
/// remedy.
#[test]
fn info_and_header_only_show_a_perf_data_s_header() {
    let d = scratch("import-info");
    let data = d.join("perf.data");
    perf_record(&data, "cpu-clock:u", "500000", "0.1", "nops");
    let perf_samples = {
        let o = Command::new("perf")
            .args(["script", "-F", "period", "-i"])
            .arg(&data)
            .output()
            .unwrap();
        assert!(o.status.success());
        String::from_utf8_lossy(&o.stdout).lines().count()
    };
    let size = std::fs::metadata(&data).unwrap().len();
    for args in [&["info"][..], &["report", "--header-only"]] {
        let o = Command::new(bin("labperf"))
            .args(args)
            .arg("perf.data")
            .current_dir(&d)
            .output()
            .unwrap();
        let (out, e) = (
            String::from_utf8_lossy(&o.stdout),
            String::from_utf8_lossy(&o.stderr),
        );
        assert!(o.status.success(), "{args:?}: {e}");
        assert!(
            out.starts_with(&format!(
                "file:            perf.data ({size} bytes; perf's perf.data, imported for this command: "
            )),
            "{args:?}: {out}"
        );
        for line in [
            "agent:           perf ".to_string(),
            format!("command:         {}", perf_command(&data)),
            "event 0:         cpu-clock:u ".to_string(),
            format!("totals:          {perf_samples} samples, 0 lost"),
        ] {
            assert!(
                out.lines().any(|l| l.starts_with(&line)),
                "{args:?}: no line {line:?} in\n{out}"
            );
        }
        assert!(
            e.contains("perf.data is perf's perf.data: imported for this command"),
            "{args:?}: {e}"
        );
    }
    let o = Command::new(bin("labperf"))
        .args(["dump", "perf.data"])
        .current_dir(&d)
        .output()
        .unwrap();
    let e = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(1), "{e}");
    assert!(
        e.ends_with(
            "It is perf's perf.data: `labperf import perf.data` makes a labperf recording of it.\n"
        ),
        "{e}"
    );
}

/// The command line `perf record` wrote into `data`'s header, as `perf report --header-only`
/// prints it (`# cmdline : …`).
fn perf_command(data: &Path) -> String {
    let o = Command::new("perf")
        .args(["report", "--header-only", "-i"])
        .arg(data)
        .output()
        .unwrap();
    assert!(o.status.success());
    String::from_utf8_lossy(&o.stdout)
        .lines()
        .find_map(|l| l.strip_prefix("# cmdline : "))
        .expect("perf's header has a cmdline")
        .trim_end()
        .to_string()
}
