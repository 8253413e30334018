//! Unwinding small real programs and saying how far stacks reach: a tiny gcc `-O2
//! -fomit-frame-pointer` program (`main → fn_a`, `main → fn_b → fn_c`, each function
//! timing itself with `CLOCK_PROCESS_CPUTIME_ID`) built as a PIE, with its functions in a
//! shared library, non-PIE and static, recorded with `--call-graph dwarf` and checked
//! against the program's own clock and against `perf report --children` of a perf
//! recording imported (the same samples); `-g` of it said to stop at the sampled
//! function; and the call-stack figures of crafted files, whose truth is exact, in every
//! report, `info` and the HTML page.

use labperf_common::{
    Arch, Attr, CpuId, Encoder, Endian, EventDesc, Header, HeaderExt, Mmap2, Recipe, Record,
    Sample, Trailer, UserStack,
};
use labperf_tests::known::{compile, import, perf_children, report_children, split, Shares};
use labperf_tests::{bin, report_json, scratch};
use object::{Object, ObjectSegment, ObjectSymbol};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;

/// The functions (`tests/corpus/tiny/fns.c`): each times itself (CPU time of the process)
/// and adds it to its total; fn_b calls fn_c. An executable segment well under 2 KiB, in
/// one page: the layout whose load bias was computed past the segment (and the module's
/// CFI skipped without a word).
const FNS: &str = include_str!("../corpus/tiny/fns.c");

/// main (`tests/corpus/tiny/main.c`): 10 rounds of fn_a then fn_b, timed; prints the
/// CPU-time split (seconds).
const MAIN: &str = include_str!("../corpus/tiny/main.c");

/// Iterations: about half a second of CPU time (2000+ samples at 250 µs).
const ITERATIONS: &str = "200000000";

/// gcc with `args`, in `dir`; fails with gcc's words.
fn gcc(dir: &Path, args: &[&str]) {
    compile(dir, "gcc", args);
}

/// How a test program is built.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Build {
    Pie,
    /// The functions in `libfns.so`, called from main (linked with an rpath).
    Shared,
    NoPie,
    Static,
}

/// Builds the program in `dir` and returns its path and the file holding the functions.
fn build(dir: &Path, b: Build) -> (PathBuf, PathBuf) {
    std::fs::write(dir.join("fns.c"), FNS).unwrap();
    std::fs::write(dir.join("main.c"), MAIN).unwrap();
    let opt = ["-O2", "-g", "-fomit-frame-pointer"];
    let exe = dir.join("prog");
    let mut args: Vec<&str> = opt.to_vec();
    match b {
        Build::Pie => args.extend(["-pie", "-fPIE", "-o", "prog", "main.c", "fns.c"]),
        Build::NoPie => args.extend(["-no-pie", "-fno-pie", "-o", "prog", "main.c", "fns.c"]),
        Build::Static => args.extend(["-static", "-o", "prog", "main.c", "fns.c"]),
        Build::Shared => {
            let mut lib: Vec<&str> = opt.to_vec();
            lib.extend(["-shared", "-fPIC", "-o", "libfns.so", "fns.c"]);
            gcc(dir, &lib);
            args.extend(["-o", "prog", "main.c", "-L.", "-lfns"]);
        }
    }
    let rpath = format!("-Wl,-rpath,{}", dir.display());
    if b == Build::Shared {
        args.push(&rpath);
    }
    gcc(dir, &args);
    let fns = if b == Build::Shared {
        dir.join("libfns.so")
    } else {
        exe.clone()
    };
    (exe, fns)
}

/// The executable segments (PT_LOAD with PF_X) of an ELF file: (file size, vaddr).
fn exec_segments(path: &Path) -> Vec<(u64, u64)> {
    let data = std::fs::read(path).unwrap();
    let f = object::File::parse(&*data).unwrap();
    f.segments()
        .filter(|s| matches!(s.flags(), object::SegmentFlags::Elf { p_flags, .. } if p_flags.0 & 1 != 0))
        .map(|s| (s.file_range().1, s.address()))
        .collect()
}

/// Runs `cmd` (a recorder, then `--` and the program) and returns the program's split.
fn run(cmd: &mut Command, exe: &Path) -> BTreeMap<String, f64> {
    let o = cmd.arg("--").arg(exe).arg(ITERATIONS).output().unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    split(&String::from_utf8_lossy(&o.stdout))
}

/// `labperf record --call-graph dwarf` of the program, every 250 µs of CPU time.
fn record_dwarf(dir: &Path, exe: &Path) -> (PathBuf, BTreeMap<String, f64>) {
    let f = dir.join("dwarf.lpr");
    let s = run(
        Command::new(bin("labperf"))
            .args(["record", "--local", "--no-report", "--call-graph", "dwarf"])
            .args(["-c", "250000", "-o"])
            .arg(&f)
            .env("XDG_CACHE_HOME", dir.join("cache")),
        exe,
    );
    (f, s)
}

/// `report --children --format json` as name → (children %, self %), and the report.
fn children(f: &Path) -> (Shares, serde_json::Value) {
    report_children(f, |_| {})
}

/// Every function's Children and Self against the program's clock, within 2 points: a
/// cpu-clock sample every 250 µs of the CPU time the program measures, and the functions
/// run in blocks of tens of milliseconds, so a share is off by the samples at block edges
/// (30 edges in 2000 samples: 1.5 points at worst) plus the process's time outside main
/// (the loader, exit: well under a point). main holds at least 99 %.
fn check_clock(rows: &BTreeMap<String, (f64, f64)>, s: &BTreeMap<String, f64>, what: &str) {
    let t = s["total"];
    let want: [(&str, f64, f64); 4] = [
        ("main", 100.0, 100.0 * (t - s["fn_a"] - s["fn_b"]) / t),
        ("fn_a", 100.0 * s["fn_a"] / t, 100.0 * s["fn_a"] / t),
        (
            "fn_b",
            100.0 * s["fn_b"] / t,
            100.0 * (s["fn_b"] - s["fn_c"]) / t,
        ),
        ("fn_c", 100.0 * s["fn_c"] / t, 100.0 * s["fn_c"] / t),
    ];
    let main = rows.get("main").map_or(0.0, |r| r.0);
    assert!(
        main >= 99.0,
        "{what}: main has {main:.2}% Children (the program runs in it): {rows:?}"
    );
    for (name, children, own) in want {
        let (c, o) = rows
            .get(name)
            .copied()
            .unwrap_or_else(|| panic!("{what}: {name} is not in the report: {rows:?}"));
        assert!(
            (c - children).abs() <= 2.0 && (o - own).abs() <= 2.0,
            "{what}: {name} Children {c:.2}% Self {o:.2}%, by the program's clock {children:.2}% and {own:.2}% ({s:?})"
        );
    }
}

/// The report's call-stack figures: most stacks reached the outermost frame, none was
/// skipped silently (they add up to the samples).
fn check_stacks(j: &serde_json::Value, what: &str) {
    let st = &j["summary"]["stacks"];
    let total = j["summary"]["total_samples"].as_u64().unwrap();
    let n = |k: &str| {
        st[k]
            .as_u64()
            .unwrap_or_else(|| panic!("{what}: no {k} in {st}"))
    };
    assert_eq!(st["mode"], "dwarf", "{what}");
    assert_eq!(
        n("samples") + n("without_stack"),
        total,
        "{what}: every sample is counted: {st}"
    );
    assert_eq!(
        n("outermost") + n("cut_at_stack_size") + n("cut_at_frame_limit") + n("stopped"),
        n("samples"),
        "{what}: {st}"
    );
    assert!(
        n("outermost") as f64 >= 0.99 * n("samples") as f64,
        "{what}: {st}"
    );
}

/// perf records the program with `--call-graph dwarf`; `labperf import` reads that file:
/// labperf's Children and Self of the program's functions against perf's of the same
/// samples (within 0.5 points: both unwind the same stack copies with the same CFI, and
/// may differ on the loader's few samples only), and against the program's clock.
fn check_against_perf(dir: &Path, exe: &Path, what: &str) {
    let data = dir.join("perf.data");
    let s = run(
        Command::new("perf")
            .args(["record", "-q", "--call-graph", "dwarf", "-e", "cpu-clock:u"])
            .args(["-c", "250000", "-o"])
            .arg(&data),
        exe,
    );
    let f = dir.join("imported.lpr");
    import(&data, &f);
    let theirs = perf_children(&data);
    let (ours, j) = children(&f);
    // Every sample perf wrote, whole: 8 KiB of stack each closes frames early enough
    // for a reader to rebuild them.
    let o = Command::new("perf")
        .args(["script", "-F", "tid,period", "--hide-call-graph", "-i"])
        .arg(&data)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let perf_samples = String::from_utf8_lossy(&o.stdout).lines().count() as u64;
    assert_eq!(j["damaged"], false, "{what}: {}", j["warnings"]);
    assert_eq!(
        j["summary"]["total_samples"].as_u64(),
        Some(perf_samples),
        "{what}: perf script lists {perf_samples} samples"
    );
    for name in ["_start", "main", "fn_a", "fn_b", "fn_c"] {
        let (Some(o), Some(t)) = (ours.get(name), theirs.get(name)) else {
            panic!("{what}: {name}: labperf {ours:?}, perf {theirs:?}");
        };
        assert!(
            (o.0 - t.0).abs() <= 0.5 && (o.1 - t.1).abs() <= 0.5,
            "{what}: {name}: labperf {o:?}, perf {t:?} (Children, Self) of the same samples"
        );
    }
    check_clock(&ours, &s, &format!("{what}, imported from perf"));
    check_stacks(&j, &format!("{what}, imported from perf"));
}

/// A build's dwarf recording against the program's clock, and the call-stack figures.
fn dwarf_known_answer(b: Build, test: &str) -> PathBuf {
    let dir = scratch(test);
    let (exe, fns) = build(&dir, b);
    // The layout the test is about: the functions' code in one small segment (a static
    // build holds the C library's code too).
    assert!(
        b == Build::Static || exec_segments(&fns).iter().any(|&(size, _)| size < 0x800),
        "{b:?}: no executable segment under 2 KiB in {}: {:?}",
        fns.display(),
        exec_segments(&fns)
    );
    let (f, s) = record_dwarf(&dir, &exe);
    let (rows, j) = children(&f);
    check_clock(&rows, &s, &format!("{b:?}"));
    check_stacks(&j, &format!("{b:?}"));
    dir
}

#[test]
fn dwarf_stacks_of_a_tiny_pie_give_its_own_clock_and_perf_s_shares() {
    let dir = dwarf_known_answer(Build::Pie, "unwind-pie");
    check_against_perf(&dir, &dir.join("prog"), "PIE");
}

#[test]
fn dwarf_stacks_through_a_small_shared_library_give_its_own_clock_and_perf_s_shares() {
    let dir = dwarf_known_answer(Build::Shared, "unwind-shared");
    check_against_perf(&dir, &dir.join("prog"), "shared library");
}

#[test]
fn dwarf_stacks_of_non_pie_and_static_builds_give_their_own_clock() {
    dwarf_known_answer(Build::NoPie, "unwind-nopie");
    dwarf_known_answer(Build::Static, "unwind-static");
}

#[test]
fn fp_stacks_of_a_build_without_frame_pointers_are_said_to_stop_and_dwarf_is_suggested() {
    let dir = scratch("unwind-fp");
    let (exe, _) = build(&dir, Build::Pie);
    let f = dir.join("fp.lpr");
    run(
        Command::new(bin("labperf"))
            .args([
                "record",
                "--local",
                "--no-report",
                "-g",
                "-c",
                "250000",
                "-o",
            ])
            .arg(&f)
            .env("XDG_CACHE_HOME", dir.join("cache")),
        &exe,
    );
    for args in [&[][..], &["--children"][..]] {
        let j = report_json(&f, 0, |c| {
            c.args(args);
        });
        let st = &j["summary"]["stacks"];
        assert_eq!(st["mode"], "fp", "{args:?}");
        let (n, leaf) = (
            st["samples"].as_u64().unwrap(),
            st["stopped_at_sampled_function"].as_u64().unwrap(),
        );
        // The functions keep no frame pointer: the kernel's walk ends in them (a few
        // samples land in the loader or libc, whose frames may lead a step further).
        assert!(n > 1000 && leaf as f64 >= 0.9 * n as f64, "{args:?}: {st}");
        let w = j["warnings"].to_string();
        assert!(
            w.contains("stop at the sampled function") && w.contains("--call-graph dwarf"),
            "{args:?}: {w}"
        );
    }
    // The text report says it on stderr, with the figures line in its heading.
    let o = Command::new(bin("labperf"))
        .args(["report", "--children"])
        .arg(&f)
        .output()
        .unwrap();
    assert!(o.status.success());
    let (out, err) = (
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr),
    );
    assert!(out.contains("# call stacks (fp): "), "{out}");
    assert!(
        err.contains("stop at the sampled function") && err.contains("--call-graph dwarf"),
        "{err}"
    );
}

/// A library's function that loops over a leaf of its own (gcc builds the leaf without a
/// frame, even with `-fno-omit-frame-pointer`), called by main through its PLT.
const PLT_LIB: &str = r#"
__attribute__((noinline)) static unsigned long leaf_step(unsigned long x) {
    return x * 6364136223846793005UL + 1442695040888963407UL;
}
unsigned long two_loop(unsigned long n) {
    unsigned long x = n;
    for (unsigned long i = 0; i < n; i++) x = leaf_step(x) ^ i;
    return x;
}
"#;
const PLT_MAIN: &str = r#"
#include <stdio.h>
unsigned long two_loop(unsigned long);
int main(void) { printf("%lu\n", two_loop(150000000UL)); return 0; }
"#;

#[test]
fn fp_stacks_restore_a_frameless_leaf_s_caller_that_main_calls_through_its_plt() {
    // Before: the leaf's caller, skipped by the kernel's walk, was restored from main's
    // call instruction as its target, the stub `two_loop@plt` (whose Children then held the
    // leaf's samples), not the function `two_loop` the stub leads to.
    let dir = scratch("unwind-fp-plt");
    std::fs::write(dir.join("lib.c"), PLT_LIB).unwrap();
    std::fs::write(dir.join("main.c"), PLT_MAIN).unwrap();
    let fp = ["-O2", "-fno-omit-frame-pointer"];
    gcc(
        &dir,
        &[&fp[..], &["-shared", "-fPIC", "-o", "libtwo.so", "lib.c"]].concat(),
    );
    let rpath = format!("-Wl,-rpath,{}", dir.display());
    gcc(
        &dir,
        &[&fp[..], &["-o", "prog", "main.c", "-L.", "-ltwo", &rpath]].concat(),
    );
    let f = dir.join("fp.lpr");
    // User mode only: the exact sum below is of user functions (as root the kernel's
    // interrupt and fault handlers are sampled under them too).
    let o = Command::new(bin("labperf"))
        .args([
            "record",
            "--local",
            "--no-report",
            "-e",
            "cpu-clock:u",
            "-g",
            "-c",
            "250000",
            "-o",
        ])
        .arg(&f)
        .env("XDG_CACHE_HOME", dir.join("cache"))
        .arg("--")
        .arg(dir.join("prog"))
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let (rows, j) = children(&f);
    let get = |n: &str| rows.get(n).copied().unwrap_or((0.0, 0.0));
    let (two, leaf, stub) = (get("two_loop"), get("leaf_step"), get("two_loop@plt"));
    // The leaf has samples of its own, all of them without their caller's frame.
    assert!(leaf.1 > 10.0, "{rows:?}");
    assert!(j["summary"]["stacks"]["restored_caller"].as_u64().unwrap() > 0);
    // Exact: two_loop calls nothing but the leaf, and every sample of the leaf is under it.
    assert!(
        (two.0 - (two.1 + leaf.1)).abs() < 1e-6,
        "two_loop Children {:.3}%, its Self {:.3}% + the leaf's {:.3}%: {rows:?}",
        two.0,
        two.1,
        leaf.1
    );
    assert!((stub.0 - stub.1).abs() < 1e-6, "two_loop@plt: {stub:?}");
}

/// The test program's functions (address, size) by name, from its symbol table.
fn symbols(exe: &Path) -> BTreeMap<String, (u64, u64)> {
    let data = std::fs::read(exe).unwrap();
    let f = object::File::parse(&*data).unwrap();
    f.symbols()
        .filter(|s| s.kind() == object::SymbolKind::Text)
        .filter_map(|s| Some((s.name().ok()?.to_string(), (s.address(), s.size()))))
        .collect()
}

/// The return address of main's call of fn_a (the byte after a `call rel32` to it).
fn main_calls_fn_a(exe: &Path, sym: &BTreeMap<String, (u64, u64)>) -> u64 {
    calls(exe, sym, "main", "fn_a")
}

/// The return address of `caller`'s call of `callee` (the byte after a `call rel32` to it).
fn calls(exe: &Path, sym: &BTreeMap<String, (u64, u64)>, caller: &str, callee: &str) -> u64 {
    let data = std::fs::read(exe).unwrap();
    let f = object::File::parse(&*data).unwrap();
    let (main, size) = sym[caller];
    let seg = f
        .segments()
        .find(|s| s.address() <= main && main < s.address() + s.size())
        .unwrap();
    let at = (main - seg.address() + seg.file_range().0) as usize;
    let code = &data[at..at + size as usize];
    (0..code.len().saturating_sub(5))
        .find_map(|i| {
            let rel = i32::from_le_bytes(code[i + 1..i + 5].try_into().unwrap());
            let next = main + i as u64 + 5;
            (code[i] == 0xe8 && next.wrapping_add(rel as i64 as u64) == sym[callee].0)
                .then_some(next)
        })
        .unwrap_or_else(|| panic!("{caller} calls {callee}"))
}

/// The program's executable mapping at load bias `bias`, as the kernel maps it.
fn exec_mapping(exe: &Path, bias: u64, pid: u32) -> Record {
    let data = std::fs::read(exe).unwrap();
    let f = object::File::parse(&*data).unwrap();
    let seg = f
        .segments()
        .find(|s| matches!(s.flags(), object::SegmentFlags::Elf { p_flags, .. } if p_flags.0 & 1 != 0))
        .unwrap();
    let (off, size) = seg.file_range();
    let start = seg.address() & !0xfff;
    Record::Mmap2(Mmap2 {
        pid,
        tid: pid,
        addr: bias + start,
        len: ((seg.address() + size + 0xfff) & !0xfff) - start,
        pgoff: off & !0xfff,
        prot: 5,
        flags: 2,
        build_id: f.build_id().unwrap().map(<[u8]>::to_vec),
        path: exe.to_string_lossy().into_owned(),
    })
}

/// A record file of one event (`attr`) and `records`.
fn write_file(path: &Path, attr: Attr, records: &[Record]) {
    let recipe = Recipe::Sample { group_read: false };
    let h = Header {
        agent_version: "test".into(),
        arch: Arch::X86_64,
        endian: Endian::Little,
        kernel_release: "6.1.0-test".into(),
        cpu: CpuId::Unknown {
            cpuinfo: "test".into(),
        },
        hostname: "test".into(),
        command: vec!["./prog".into()],
        clock_id: 1,
        start_time_ns: 0,
        start_realtime_ns: 0,
        events: vec![EventDesc {
            name: "cpu-clock".into(),
            attr,
            leader: None,
        }],
        mode: recipe.mode_string(),
        notes: vec![],
    };
    let mut e = Encoder::new();
    let mut f = Encoder::prelude().to_vec();
    f.extend(e.header_frame(&h));
    f.extend(e.header_ext_frame(&HeaderExt {
        recipe: Some(recipe),
        ..Default::default()
    }));
    for r in records {
        e.push(r);
    }
    if let Some(fr) = e.flush() {
        f.extend(fr);
    }
    f.extend(
        e.trailer_frame(&Trailer {
            records: records.len() as u64,
            frames: 1,
            samples: records
                .iter()
                .filter(|r| matches!(r, Record::Sample(_)))
                .count() as u64,
            ..Default::default()
        }),
    );
    std::fs::write(path, f).unwrap();
}

/// The call-stack line of `f` as `report`, `report --children`, `info` and the HTML page
/// say it: all the same, and returned with the JSON figures of both reports (equal too).
fn said(f: &Path, dir: &Path) -> (String, serde_json::Value) {
    let mut lines = Vec::new();
    let mut figures = Vec::new();
    for args in [&[][..], &["--children"][..]] {
        let o = Command::new(bin("labperf"))
            .arg("report")
            .args(args)
            .arg(f)
            .output()
            .unwrap();
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        let out = String::from_utf8_lossy(&o.stdout).into_owned();
        let line = out
            .lines()
            .find_map(|l| l.strip_prefix("# call stacks "))
            .unwrap_or_else(|| panic!("report {args:?} says nothing of its stacks: {out}"));
        lines.push(format!("call stacks {line}"));
        figures.push(
            report_json(f, 0, |c| {
                c.args(args);
            })["summary"]["stacks"]
                .clone(),
        );
    }
    let o = Command::new(bin("labperf"))
        .arg("info")
        .arg(f)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let out = String::from_utf8_lossy(&o.stdout).into_owned();
    lines.push(
        out.lines()
            .find_map(|l| l.strip_prefix("stacks:"))
            .unwrap_or_else(|| panic!("info says nothing of the stacks: {out}"))
            .trim()
            .to_string(),
    );
    let html = dir.join("r.html");
    let o = Command::new(bin("labperf"))
        .args(["report", "--format", "html", "-o"])
        .arg(&html)
        .arg(f)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let page = std::fs::read_to_string(&html).unwrap();
    let fact = page
        .split("<td class=\"fact-call-stacks\">")
        .nth(1)
        .and_then(|s| s.split("</td>").next())
        .unwrap_or_else(|| panic!("the HTML page has no call-stacks fact"));
    // The page's row is headed "call stacks": its cell holds the rest of the line.
    lines.push(format!(
        "call stacks {}",
        fact.replace("&lt;", "<")
            .replace("&gt;", ">")
            .replace("&amp;", "&")
    ));
    for l in &lines {
        assert_eq!(l, &lines[0], "every place says the same: {lines:#?}");
    }
    assert_eq!(figures[0], figures[1], "report and --children count alike");
    (lines.remove(0), figures.remove(0))
}

/// PERF_SAMPLE_* bits of the crafted files.
const IP_TID_TIME_PERIOD: u64 = 1 | 2 | 4 | 0x100;
const CALLCHAIN: u64 = 0x20;
const REGS_USER: u64 = 0x1000;
const STACK_USER: u64 = 0x2000;

#[test]
fn call_stack_figures_of_crafted_files_are_exact_in_every_report_info_and_html() {
    // The crafted stacks are x86_64's (its CFI, its call instruction, its registers).
    assert_eq!(
        std::env::consts::ARCH,
        "x86_64",
        "this test crafts x86_64 stacks and CFI: run it on an x86_64 machine"
    );
    let dir = scratch("unwind-figures");
    let (exe, _) = build(&dir, Build::Pie);
    let sym = symbols(&exe);
    let bias = 0x5555_5555_4000u64;
    let at = |name: &str, off: u64| bias + sym[name].0 + off;
    let sample = |ip: u64, callchain: Vec<u64>, user_stack: Option<UserStack>| {
        Record::Sample(Sample {
            pid: 7,
            tid: 7,
            ip,
            period: 250_000,
            callchain,
            user_stack,
            ..Default::default()
        })
    };
    let gone = "/nonexistent/labperf-test/libgone.so";
    let gone_map = Record::Mmap2(Mmap2 {
        pid: 7,
        tid: 7,
        addr: 0x7f00_0000_0000,
        len: 0x1000,
        prot: 5,
        path: gone.into(),
        ..Default::default()
    });

    // -g: the kernel's callchains.
    let mut r = vec![exec_mapping(&exe, bias, 7), gone_map.clone()];
    // 7 reach _start (through main).
    r.extend((0..7).map(|_| {
        let ip = at("fn_a", 4);
        sample(ip, vec![ip, at("main", 5), at("_start", 5)], None)
    }));
    // 5 stop at the sampled function: no caller.
    r.extend((0..5).map(|_| sample(at("fn_b", 4), vec![at("fn_b", 4)], None)));
    // 3 stop in fn_b, its caller: fn_b keeps no frame pointer either.
    r.extend((0..3).map(|_| sample(at("fn_c", 4), vec![at("fn_c", 4), at("fn_b", 5)], None)));
    // 2 whose walk read a return address from a frame that was none: in no file.
    r.extend((0..2).map(|_| sample(at("fn_a", 4), vec![at("fn_a", 4), 0xdead_0000], None)));
    // 4 at the kernel's 127-entry limit (the chain and its context marker).
    r.extend((0..4).map(|_| sample(at("fn_a", 4), vec![at("fn_a", 4); 126], None)));
    // 1 in a file that is not here.
    r.push(sample(0x7f00_0000_0010, vec![0x7f00_0000_0010], None));
    // 2 without a stack.
    r.extend((0..2).map(|_| sample(at("fn_a", 4), vec![], None)));
    // 1 in fn_c, which has no frame of its own: the kernel's walk skipped fn_b and went on
    // from main's call of fn_b; restored from that call (fn_b calls fn_c).
    r.push(sample(
        at("fn_c", 4),
        vec![
            at("fn_c", 4),
            bias + calls(&exe, &sym, "main", "fn_b"),
            at("_start", 5),
        ],
        None,
    ));
    let f = dir.join("fp.lpr");
    write_file(
        &f,
        Attr {
            size: 136,
            sample_type: IP_TID_TIME_PERIOD | CALLCHAIN,
            ..Default::default()
        },
        &r,
    );
    let (line, j) = said(&f, &dir);
    assert_eq!(
        line,
        "call stacks (fp): 23 samples, 8 reached the outermost frame, 4 cut at the 127-frame limit, 11 stopped (10 frame pointer missing in prog, 1 binary not found in libgone.so, 8 of them at the sampled function); 17 skipped the caller of a function sampled without its frame, 1 of them restored from the call; 2 samples without a stack"
    );
    // Every chain of two addresses or more whose sampled function has no frame there (the
    // program keeps none): all but the last with no direct call before the next address.
    assert_eq!(
        (j["skipped_caller"].clone(), j["restored_caller"].clone()),
        (17.into(), 1.into()),
        "{j}"
    );
    // fn_b's Children: its 5 own samples, the 3 of fn_c below it and the one restored.
    let (_, rep) = report_children(&f, |_| {});
    let fn_b = rep["tables"][0]["rows"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["name"] == "fn_b")
        .map(|r| r["children"].as_u64().unwrap());
    assert_eq!(fn_b, Some(9), "{rep}");
    for (k, v) in [
        ("samples", 23),
        ("without_stack", 2),
        ("outermost", 8),
        ("cut_at_frame_limit", 4),
        ("cut_at_stack_size", 0),
        ("stopped", 11),
        ("stopped_at_sampled_function", 8),
    ] {
        assert_eq!(j[k], v, "{k}: {j}");
    }

    // --call-graph dwarf: user stacks of 8 bytes, unwound with the program's CFI.
    let ustack = |ip: u64, words: &[u64]| {
        let sp = 0x7ffd_0000_0000u64;
        Some(UserStack {
            // bp, sp, ip: the registers of sample_regs_user 0x1c0, ascending.
            regs: vec![0, sp, ip],
            sp,
            data: words.iter().flat_map(|w| w.to_le_bytes()).collect(),
        })
    };
    let fn_a = at("fn_a", 0);
    let ret = bias + main_calls_fn_a(&exe, &sym);
    let mut r = vec![exec_mapping(&exe, bias, 7), gone_map];
    // 3 at _start's first instruction: the outermost frame itself.
    r.extend((0..3).map(|_| sample(at("_start", 0), vec![], ustack(at("_start", 0), &[]))));
    // 4 at fn_a's entry, whose return address into main is the whole 8-byte copy: main's
    // frame lies past it.
    r.extend((0..4).map(|_| sample(fn_a, vec![], ustack(fn_a, &[ret]))));
    // 2 whose return address is in no file.
    r.extend((0..2).map(|_| sample(fn_a, vec![], ustack(fn_a, &[0xdead_0000]))));
    // 1 in a file that is not here.
    r.push(sample(
        0x7f00_0000_0010,
        vec![],
        ustack(0x7f00_0000_0010, &[]),
    ));
    // 1 of a kernel thread: no user stack.
    r.push(sample(0xffff_ffff_8100_0000, vec![], None));
    let f = dir.join("dwarf.lpr");
    write_file(
        &f,
        Attr {
            size: 136,
            sample_type: IP_TID_TIME_PERIOD | REGS_USER | STACK_USER,
            sample_regs_user: 0x1c0,
            sample_stack_user: 8,
            ..Default::default()
        },
        &r,
    );
    let (line, j) = said(&f, &dir);
    assert_eq!(
        line,
        "call stacks (dwarf, 8 bytes copied): 10 samples, 3 reached the outermost frame, 4 cut at the stack-size limit, 3 stopped (2 at an address in no mapped file, 1 binary not found in libgone.so, 1 of them at the sampled function); 1 sample without a stack"
    );
    for (k, v) in [
        ("samples", 10),
        ("without_stack", 1),
        ("outermost", 3),
        ("cut_at_stack_size", 4),
        ("cut_at_frame_limit", 0),
        ("stopped", 3),
        ("stopped_at_sampled_function", 1),
    ] {
        assert_eq!(j[k], v, "{k}: {j}");
    }
}

/// A program whose time goes to page faults (the kernel's), recorded by perf with
/// `--call-graph dwarf` and kernel samples: the kernel's callchain ends at the kernel's
/// entry, and the user frame it interrupted (`touch`, where each page is first written) is
/// the unwound user stack's first frame. `touch` and `main` get perf's Children on the
/// same samples (equal to two decimals here; 0.5 points allowed, as above).
#[test]
fn dwarf_stacks_of_kernel_samples_keep_the_user_frame_the_kernel_interrupted() {
    let dir = scratch("unwind-kernel");
    std::fs::write(
        dir.join("pf.c"),
        r#"#include <sys/mman.h>
__attribute__((noinline)) void touch(char *p, long n) { for (long i = 0; i < n; i += 4096) p[i] = 1; }
int main(void) {
    for (int r = 0; r < 10; r++) {
        long n = 40000L * 4096;
        char *p = mmap(0, n, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        touch(p, n);
        munmap(p, n);
    }
    return 0;
}
"#,
    )
    .unwrap();
    gcc(&dir, &["-O2", "-g", "-o", "pf", "pf.c"]);
    let data = dir.join("perf.data");
    let o = Command::new("perf")
        .args(["record", "-q", "--call-graph", "dwarf", "-e", "cpu-clock"])
        .args(["-c", "250000", "-o"])
        .arg(&data)
        .arg("--")
        .arg(dir.join("pf"))
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let f = dir.join("imported.lpr");
    import(&data, &f);
    let theirs = perf_children(&data);
    let (ours, _) = children(&f);
    for name in ["main", "touch"] {
        let (Some(o), Some(t)) = (ours.get(name), theirs.get(name)) else {
            panic!("{name}: labperf {ours:?}, perf {theirs:?}");
        };
        assert!(
            (o.0 - t.0).abs() <= 0.5 && (o.1 - t.1).abs() <= 0.5,
            "{name}: labperf {o:?}, perf {t:?} (Children, Self) of the same samples"
        );
    }
    // Most samples are in the kernel's fault path: the test is about them.
    let t = theirs["touch"];
    assert!(t.0 - t.1 > 50.0, "touch {t:?}: too few kernel samples");
}
