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
    let o = Command::new("perf")
        .args(["record", "-q", "-e", event, "-c", period, "-o"])
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
    assert!(ours.len() >= 3, "{ours:?}");
    assert_eq!(ours, theirs);
}
