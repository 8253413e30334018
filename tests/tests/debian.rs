//! Programs nobody here wrote: Debian's own `dd`, `xz`, `bzip2`, `gzip`, `sort`, `sqlite3`, `python3` and `node`, and a templated C++ program, each recorded with `--call-graph dwarf`, as root (kernel mode too).
//!
//! On the same samples (perf records, labperf reads perf's file): Self by shared object and
//! symbol within 0.5 point of `perf report`, Children at least perf's less 0.5 point
//! (labperf's unwinder may reach more callers than perf's, never fewer), an inlined
//! function's Children within 1 point of an `addr2line -i` count over perf's callchains.
//! labperf's own recording of the same command: shares by shared object within 3 points of
//! perf's recording (two runs of a deterministic workload), and its account of the CPU
//! time within 2%. Each program prints one `debian-table:` line: docs/measurements.md's table
//! (`cargo xtask corpus-table`).

use labperf_tests::distro::*;
use labperf_tests::known::{built, compile, corpus, import};
use labperf_tests::scratch;
use std::collections::BTreeMap;
use std::ffi::OsString;
use std::path::{Path, PathBuf};

/// The most a Self share may differ from perf's on the same samples, in points.
const SELF_POINTS: f64 = 0.5;
/// How far labperf's Children may fall short of perf's on the same samples, in points.
const CHILDREN_POINTS: f64 = 0.5;
/// The most an inlined function's Children may differ from the addr2line count, in points.
const INLINE_POINTS: f64 = 1.0;
/// The most a shared object's share may differ between labperf's and perf's recordings of
/// the same command: two runs, whose samples fall by chance (about 1 point at the 2,000 to
/// 4,000 samples of these runs) and whose kernel work varies a little. Beside other work
/// a program's split between its files moves more from run to run (the caches): these tests
/// keep the machine to themselves in CI (`.config/nextest.toml`), perf records each program
/// before and after labperf, and labperf's share is judged by its distance from the range of
/// perf's two, within this or the width of that range where it is more.
const DSO_POINTS: f64 = 3.0;
/// The most the samples may miss of the workload's CPU time by its rusage, in percent.
const ACCOUNT_PCT: f64 = 2.0;

/// An inlined function to count: its label, how addr2line names it (the whole signature)
/// and how labperf does (without the parameter list).
struct Inlined {
    label: &'static str,
    addr2line: fn(&str) -> bool,
    labperf: fn(&str) -> bool,
}

/// One program: its name and how it is run, the command, and the inlined functions to
/// count in which executable.
struct Program<'a> {
    name: &'static str,
    how: &'static str,
    cmd: Vec<OsString>,
    inlined: Option<(&'a Path, &'a [Inlined])>,
    /// Whether perf's report names inlined functions (false: both reports without them;
    /// perf 6.1's `addr2line` pipe hangs on node's 90 MB executable).
    perf_inline: bool,
    /// How far labperf's Children may fall short of perf's (points): [`CHILDREN_POINTS`],
    /// unless the program says why more.
    children_points: f64,
    /// A build of the program with frame pointers and its command: labperf records it with
    /// `-g` too, and its inlined functions are counted again over that file's callchains.
    fp_build: Option<(PathBuf, Vec<OsString>)>,
}

fn root_needed() {
    // SAFETY: geteuid cannot fail.
    assert_eq!(
        unsafe { libc::geteuid() },
        0,
        "these tests record kernel mode as root, as perf does: run them as root (CI does)"
    );
}

/// What one program's checks found: the worst difference of each kind (points) and where.
#[derive(Default)]
struct Worst {
    misses: Vec<String>,
    cells: Vec<String>,
}

impl Worst {
    /// Checks `diffs` (label, difference in points) against `ok`, notes the worst as a cell.
    fn check(&mut self, what: &str, diffs: Vec<(String, f64)>, ok: impl Fn(f64) -> bool) {
        let worst = diffs
            .iter()
            .max_by(|a, b| a.1.abs().total_cmp(&b.1.abs()))
            .cloned();
        for (at, d) in &diffs {
            if !ok(*d) {
                self.misses.push(format!("{what}: {at}: {d:+.2} points"));
            }
        }
        self.cells.push(match worst {
            Some((at, d)) => format!("{:.2} ({at})", d.abs()),
            None => "-".into(),
        });
    }
}

/// A difference from perf, in points, and where.
type Diff = (String, f64);

/// Self by shared object, then by shared object and symbol, against perf's on the same
/// samples.
fn self_diffs(
    perf: &BTreeMap<(String, String), f64>,
    ours: &BTreeMap<(String, String), Row>,
) -> (Vec<Diff>, Vec<Diff>) {
    let mut by_dso: BTreeMap<&str, (f64, f64)> = BTreeMap::new();
    for ((d, _), p) in perf {
        by_dso.entry(d).or_default().0 += p;
    }
    for ((d, _), r) in ours {
        by_dso.entry(d).or_default().1 += r.1;
    }
    let dsos = by_dso
        .iter()
        .map(|(d, (p, o))| (d.to_string(), o - p))
        .collect();
    let syms = perf
        .iter()
        .filter(|((_, s), _)| !unnamed(s))
        .map(|((d, s), p)| {
            let o = ours.get(&(d.clone(), s.clone())).map_or(0.0, |r| r.1);
            (format!("{s} in {d}"), o - p)
        })
        .collect();
    (dsos, syms)
}

/// Children against perf's on the same samples: by name (perf's `(inlined)` rows are the
/// function), where perf gives 1% or more.
fn children_diffs(
    perf: &BTreeMap<String, Vec<f64>>,
    ours: &BTreeMap<(String, String), Row>,
) -> Vec<(String, f64)> {
    let mut by_name: BTreeMap<&str, f64> = BTreeMap::new();
    for ((_, n), r) in ours {
        let e = by_name.entry(n).or_default();
        *e = e.max(r.0);
    }
    perf.iter()
        .filter(|(n, rows)| rows[0] >= 1.0 && !unnamed(n))
        // perf lists the DWARF name of the function at a symbol's address as inlined there
        // when it differs from the symbol table's (`__libc_start_main_impl (inlined)` at
        // `__libc_start_main`, `__GI___libc_read (inlined)` at `read`, with libc6-dbg's
        // debug file): a name of no frame of its own, which labperf does not make up.
        // Inlined functions are checked against addr2line below.
        .filter(|(n, _)| match n.strip_suffix(" (inlined)") {
            Some(plain) => by_name.contains_key(plain),
            None => true,
        })
        .map(|(n, rows)| {
            let plain = n.strip_suffix(" (inlined)").unwrap_or(n);
            let o = by_name.get(plain).copied().unwrap_or(0.0);
            (plain.to_string(), o - rows[0])
        })
        .collect()
}

/// Records `p` with perf and with labperf and checks both; prints its table line.
fn check(p: &Program<'_>) {
    root_needed();
    let d = scratch(&format!("debian-{}", p.name));
    let data = d.join("perf.data");
    perf_record(&data, &p.cmd);
    let imported = d.join("imported.lpr");
    import(&data, &imported);
    // Both without inlined functions where perf cannot name them in time.
    let inline: &[&str] = if p.perf_inline { &[] } else { &["--no-inline"] };
    let (ours, j) = labperf_children(&imported, inline);
    let mut w = Worst::default();
    let (dsos, syms) = self_diffs(&perf_self(&data), &ours);
    w.check("Self by shared object", dsos, |d| d.abs() <= SELF_POINTS);
    w.check("Self by symbol", syms, |d| d.abs() <= SELF_POINTS);
    let perf_children = perf_children(&data, inline);
    // One-sided: labperf's unwinder may reach more callers than perf's, never fewer; the
    // table shows the largest shortfall.
    let short = children_diffs(&perf_children, &ours)
        .into_iter()
        .map(|(at, d)| (at, d.min(0.0)))
        .collect();
    w.check("Children", short, |d| d >= -p.children_points);
    match p.inlined {
        Some((exe, fns)) => {
            // JSON (and CSV) say what the text table's `(inlined)` says: every row of these
            // functions is code only ever seen inlined; main is a function of its own.
            let rows = j["tables"][0]["rows"].as_array().unwrap();
            for f in fns.iter() {
                let marks: Vec<&serde_json::Value> = rows
                    .iter()
                    .filter(|r| (f.labperf)(r["name"].as_str().unwrap()))
                    .map(|r| &r["inlined"])
                    .collect();
                assert!(
                    !marks.is_empty() && marks.iter().all(|m| m.as_bool() == Some(true)),
                    "{}: {marks:?}",
                    f.label
                );
            }
            let main = rows.iter().find(|r| r["name"] == "main").expect("main");
            assert_eq!(main["inlined"], false, "{main}");
            let mut diffs: Vec<Diff> = fns
                .iter()
                .map(|f| {
                    let theirs = addr2line_share(&data, exe, &f.addr2line);
                    (
                        format!("{}, perf's file", f.label),
                        children_of(&ours, f) - theirs,
                    )
                })
                .collect();
            if let Some((fp_exe, fp_cmd)) = &p.fp_build {
                diffs.extend(own_inlined(&d, fp_exe, fp_cmd, fns));
            }
            w.check("inlined Children against addr2line -i", diffs, |d| {
                d.abs() <= INLINE_POINTS
            });
        }
        None => w.cells.push("-".into()),
    }
    own_recording(p, &d, &data, &mut w);
    println!(
        "debian-table: | {} | {} | {} |",
        p.name,
        p.how,
        w.cells.join(" | ")
    );
    assert!(w.misses.is_empty(), "{}: {:#?}", p.name, w.misses);
}

/// The Children (percent) labperf gives inlined function `f`: its busiest row.
fn children_of(ours: &BTreeMap<(String, String), Row>, f: &Inlined) -> f64 {
    ours.iter()
        .filter(|((_, n), _)| (f.labperf)(n))
        .map(|(_, r)| r.0)
        .fold(0.0, f64::max)
}

/// labperf's own recording (`-g`, of `exe` built with frame pointers, run as `cmd`): each
/// inlined function's Children against an `addr2line -i` count over that file's own
/// callchains (`labperf dump`). A sample in the C library's memcmp, which keeps no frame
/// pointer, has its caller's call site skipped by the kernel's walk: labperf puts it back
/// from the call instructions (the report's `restored_caller`), the raw count cannot. So
/// labperf's share is the count's, plus at most the restored samples' share: the
/// difference returned is what lies outside that range.
fn own_inlined(d: &Path, exe: &Path, cmd: &[OsString], fns: &[Inlined]) -> Vec<Diff> {
    let f = d.join("own-fp.lpr");
    let o = std::process::Command::new(labperf_tests::bin("labperf"))
        .args(["record", "--local", "--no-report", "-g", "-c", PERIOD, "-o"])
        .arg(&f)
        .arg("--")
        .args(cmd)
        .stdout(std::process::Stdio::null())
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let (ours, j) = labperf_children(&f, &[]);
    let st = &j["summary"]["stacks"];
    let restored = 100.0 * st["restored_caller"].as_f64().unwrap_or(0.0)
        / st["samples"].as_f64().unwrap_or(1.0).max(1.0);
    fns.iter()
        .map(|inl| {
            let theirs = addr2line_share_of_recording(&f, exe, &inl.addr2line);
            let d = children_of(&ours, inl) - theirs;
            let outside = if d > restored { d - restored } else { d.min(0.0) };
            (
                format!(
                    "{}, labperf's own -g recording: {d:+.2} with {restored:.2}% of callers restored",
                    inl.label
                ),
                outside,
            )
        })
        .collect()
}

/// labperf's own recording of the same command: shares by shared object against perf's
/// recording, and its account of the CPU time.
fn own_recording(p: &Program<'_>, d: &Path, data: &Path, w: &mut Worst) {
    let own = d.join("own.lpr");
    labperf_record(&own, &p.cmd);
    let again = d.join("perf-again.data");
    perf_record(&again, &p.cmd);
    let (ours, j) = labperf_dso(&own);
    let perf = perf_dso(data);
    let perf_again = perf_dso(&again);
    let perf_noise = dso_diffs(&perf_again, &perf)
        .iter()
        .map(|(_, d)| d.abs())
        .fold(0.0, f64::max);
    // labperf's run lies between perf's two: a machine whose load drifts (CI's two cores,
    // other jobs) moves all three alike, so each share is judged by its distance from the
    // range of perf's two runs, within DSO_POINTS.
    let a = dso_diffs(&ours, &perf);
    let b: BTreeMap<String, f64> = dso_diffs(&ours, &perf_again).into_iter().collect();
    let outside = a
        .into_iter()
        .map(|(n, da)| {
            let db = b.get(&n).copied().unwrap_or(da);
            // Both differences of one sign: outside the range, by the nearer one.
            let d = if da.signum() == db.signum() {
                if da.abs() < db.abs() {
                    da
                } else {
                    db
                }
            } else {
                0.0
            };
            (n, d)
        })
        .collect();
    w.check("by shared object against perf's recording", outside, |d| {
        d.abs() <= DSO_POINTS.max(perf_noise)
    });
    if let Some(c) = w.cells.last_mut() {
        c.push_str(&format!("; perf's two runs {perf_noise:.2}"));
    }
    // What the samples miss of the workload's CPU time, less the samples the kernel lost
    // (a busy machine keeps the agent from its ring now and then: the account says so, and
    // how much): every CPU second is either in a sample or said.
    let c = &j["summary"]["cpu_time"];
    let n = |k: &str| {
        c[k].as_f64()
            .unwrap_or_else(|| panic!("{}: no {k} in the account: {}", p.name, j["summary"]))
    };
    let total = n("covered_ns") * 100.0 / (100.0 - n("gap_pct"));
    let lost = 100.0 * n("lost_ns") / total;
    w.check(
        "the account of the workload's CPU time",
        vec![(
            format!("% not covered; {lost:.2}% lost"),
            n("gap_pct") - lost,
        )],
        |g| g.abs() <= ACCOUNT_PCT,
    );
}

/// Each shared object's share in `a` less its share in `b`, in points.
fn dso_diffs(a: &BTreeMap<String, f64>, b: &BTreeMap<String, f64>) -> Vec<Diff> {
    let mut names: Vec<&String> = a.keys().chain(b.keys()).collect();
    names.sort();
    names.dedup();
    names
        .into_iter()
        .map(|n| {
            let (x, y) = (
                a.get(n).copied().unwrap_or(0.0),
                b.get(n).copied().unwrap_or(0.0),
            );
            (n.clone(), x - y)
        })
        .collect()
}

fn cmd(args: &[&str]) -> Vec<OsString> {
    args.iter().map(OsString::from).collect()
}

/// A deterministic text of `mb` MiB (words of a small alphabet, lines of up to 80
/// characters) in the run's shared build directory: the compressors' and sort's input.
fn text(mb: usize) -> PathBuf {
    let dir = built(&format!("text-{mb}"), |d| {
        let mut s = String::with_capacity(mb << 20);
        let mut x: u32 = 2_463_534_242;
        let mut line = 0;
        while s.len() < mb << 20 {
            x ^= x << 13;
            x ^= x >> 17;
            x ^= x << 5;
            let len = 2 + x % 9;
            for k in 0..len {
                s.push((b'a' + ((x >> (k * 3)) % 12) as u8) as char);
            }
            line += len as usize + 1;
            if line > 72 {
                s.push('\n');
                line = 0;
            } else {
                s.push(' ');
            }
        }
        std::fs::write(d.join("input.txt"), s).unwrap();
    });
    dir.join("input.txt")
}

#[test]
fn dd_copying_zeros_spends_its_time_in_the_kernel() {
    check(&Program {
        name: "dd",
        how: "dd if=/dev/zero of=/dev/null bs=64k count=200000",
        cmd: cmd(&[
            "/usr/bin/dd",
            "if=/dev/zero",
            "of=/dev/null",
            "bs=64k",
            "count=200000",
        ]),
        inlined: None,
        perf_inline: true,
        children_points: CHILDREN_POINTS,
        fp_build: None,
    });
}

#[test]
fn xz_compresses_text() {
    let t = text(1);
    check(&Program {
        name: "xz",
        how: "xz -6 -T1 -c (1 MiB of text)",
        cmd: vec![
            "/usr/bin/xz".into(),
            "-6".into(),
            "-T1".into(),
            "-c".into(),
            t.into(),
        ],
        inlined: None,
        perf_inline: true,
        children_points: CHILDREN_POINTS,
        fp_build: None,
    });
}

#[test]
fn bzip2_compresses_text() {
    let t = text(8);
    check(&Program {
        name: "bzip2",
        how: "bzip2 -9 -c (8 MiB of text)",
        cmd: vec!["/usr/bin/bzip2".into(), "-9".into(), "-c".into(), t.into()],
        inlined: None,
        perf_inline: true,
        children_points: CHILDREN_POINTS,
        fp_build: None,
    });
}

#[test]
fn gzip_compresses_text() {
    let t = text(8);
    check(&Program {
        name: "gzip",
        how: "gzip -9 -c (8 MiB of text)",
        cmd: vec!["/usr/bin/gzip".into(), "-9".into(), "-c".into(), t.into()],
        inlined: None,
        perf_inline: true,
        children_points: CHILDREN_POINTS,
        fp_build: None,
    });
}

#[test]
fn sort_sorts_lines() {
    // `-R` (a random order by each line's hash, from a fixed random source): sort's own
    // hashing, steady from run to run. A plain sort of a large text is the C library's
    // strcmp on lines scattered in memory, whose share moved 5 points between identical
    // runs beside other work (the caches), too much for two recordings to agree in 3.
    let t = text(8);
    let source = format!("--random-source={}", t.display());
    check(&Program {
        name: "sort",
        how: "sort -R --random-source=INPUT --parallel=1 (8 MiB of text)",
        cmd: vec![
            "/usr/bin/sort".into(),
            "-R".into(),
            source.into(),
            "--parallel=1".into(),
            t.into(),
        ],
        inlined: None,
        perf_inline: true,
        children_points: CHILDREN_POINTS,
        fp_build: None,
    });
}

#[test]
fn sqlite3_runs_a_recursive_query() {
    check(&Program {
        name: "sqlite3",
        how: "sqlite3 :memory: (a recursive query grouped and sorted)",
        cmd: cmd(&[
            "/usr/bin/sqlite3",
            ":memory:",
            "WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 600000) \
             SELECT count(*), sum(length(printf('%x', i * 2654435761 % 1000003))) FROM n \
             GROUP BY i % 97 ORDER BY 2 LIMIT 3;",
        ]),
        inlined: None,
        perf_inline: true,
        children_points: CHILDREN_POINTS,
        fp_build: None,
    });
}

#[test]
fn python3_runs_the_corpus_script() {
    check(&Program {
        name: "python3",
        how: "Debian's python3 running tests/corpus/corpus.py",
        cmd: vec![
            "/usr/bin/python3".into(),
            corpus().join("corpus.py").into_os_string(),
            "25".into(),
        ],
        inlined: None,
        perf_inline: true,
        children_points: CHILDREN_POINTS,
        fp_build: None,
    });
}

#[test]
fn node_runs_a_javascript_loop() {
    check(&Program {
        name: "node",
        how: "node tests/corpus/work.js (JIT code without a perf map)",
        cmd: vec![
            "/usr/bin/node".into(),
            corpus().join("work.js").into_os_string(),
            // Two rounds, about 1 s of CPU time: V8's start-up and tier-up vary from run to
            // run, and one round's 0.5 s let them move the JIT code's share 3.57 points
            // outside perf's two runs (2.80 apart) with the machine to itself.
            "2".into(),
        ],
        inlined: None,
        perf_inline: false,
        // V8's builtins (Builtins_InterpreterEntryTrampoline, Builtins_JSEntry, ...) are
        // code in /usr/bin/node that no CFI covers: labperf ends a stack at the first such
        // frame (past it are frame-pointer guesses, which code without unwind tables, as
        // musl's, may not keep), where perf's libdw follows the frame pointers: about 3%
        // of node's stacks reach fewer callers (seen: 2.99 points at most).
        children_points: 3.5,
        fp_build: None,
    });
}

#[test]
fn cxx_map_lookups_inline_operator_brackets_and_lower_bound() {
    let dir = built("cxxmap-gxx", |d| {
        let s = corpus().join("cxxmap.cpp");
        compile(
            d,
            "g++",
            &["-O2", "-g", "-o", "cxxmap", &s.to_string_lossy()],
        );
        let fp = ["-O2", "-g", "-fno-omit-frame-pointer", "-o", "cxxmap-fp"];
        compile(d, "g++", &[&fp[..], &[s.to_str().unwrap()]].concat());
    });
    let exe = dir.join("cxxmap");
    let fp_exe = dir.join("cxxmap-fp");
    let inlined = [
        Inlined {
            label: "std::map::operator[]",
            addr2line: |n| n.starts_with("std::map<") && n.contains(">::operator[]("),
            labperf: |n| n.starts_with("std::map<") && n.ends_with(">::operator[]"),
        },
        Inlined {
            label: "std::map::lower_bound",
            addr2line: |n| n.starts_with("std::map<") && n.contains(">::lower_bound("),
            labperf: |n| n.starts_with("std::map<") && n.ends_with(">::lower_bound"),
        },
    ];
    check(&Program {
        name: "cxxmap",
        how: "g++ -O2 -g, std::map<std::string, long> (PIE, no frame pointers)",
        // 300 rounds: about 0.9 s, 3,700 samples (at 100, 1,350 samples put a 50% share's
        // standard deviation near 1.4 points a run, and CI once saw labperf's run 3.43
        // points outside perf's two).
        cmd: vec![exe.clone().into_os_string(), "300".into()],
        inlined: Some((&exe, &inlined)),
        perf_inline: true,
        children_points: CHILDREN_POINTS,
        fp_build: Some((fp_exe.clone(), vec![fp_exe.into_os_string(), "100".into()])),
    });
}
