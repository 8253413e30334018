//! `labperf script`: on a perf.data of the corpus's tiny program (gcc -O2
//! -fno-omit-frame-pointer, PIE), recorded here by `perf record -e cpu-clock` with and
//! without `-g`, its output is `perf script -i`'s line for line (every sample, in the same
//! order, with the same comm, tid, time, period, event, addresses, function+offset and
//! file, kernel frames included), with the default fields, with `-F` and with the filters
//! both take; on a labperf recording of the same program, one sample a line (a block with
//! `-g`), as many as the report counts, and the sampled function's samples its Self.

use labperf_tests::{bin, report_json, root, scratch};
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// Whether perf is installed; a test that needs it says why it stops where it is not.
fn perf_here(test: &str) -> bool {
    let ok = Command::new("perf")
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success());
    if !ok {
        eprintln!(
            "{test}: skipped: perf is not installed (`cargo xtask setup` installs linux-perf)"
        );
    }
    ok
}

/// The tiny corpus program built in `dir` with gcc -O2 -fno-omit-frame-pointer (PIE).
fn tiny(dir: &Path) -> PathBuf {
    let c = root().join("tests/corpus/tiny");
    let out = dir.join("tiny");
    let o = Command::new("gcc")
        .args(["-O2", "-fno-omit-frame-pointer", "-o"])
        .arg(&out)
        .arg(c.join("main.c"))
        .arg(c.join("fns.c"))
        .output()
        .expect("gcc");
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    out
}

/// About a quarter of a second of the tiny program.
const ITERATIONS: &str = "100000000";

fn ok(o: Output, what: &str) -> String {
    assert!(
        o.status.success(),
        "{what}: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    String::from_utf8(o.stdout).unwrap()
}

/// `perf record -e cpu-clock [-g] -o OUT -- tiny`.
fn perf_record(out: &Path, prog: &Path, g: bool) {
    let mut c = Command::new("perf");
    c.args(["record", "-q", "-e", "cpu-clock"]);
    if g {
        c.arg("-g");
    }
    let o = c
        .arg("-o")
        .arg(out)
        .arg("--")
        .arg(prog)
        .arg(ITERATIONS)
        .output();
    ok(o.expect("perf record"), "perf record");
}

fn perf_script(data: &Path, more: &[&str]) -> String {
    let o = Command::new("perf")
        .arg("script")
        .args(more)
        .arg("-i")
        .arg(data)
        .output()
        .expect("perf script");
    ok(o, &format!("perf script {more:?}"))
}

fn labperf_script(file: &Path, more: &[&str], cache: &Path) -> String {
    let o = Command::new(bin("labperf"))
        .args(["-q", "script"])
        .arg(file)
        .args(more)
        .env("XDG_CACHE_HOME", cache)
        .output()
        .unwrap();
    ok(o, &format!("labperf script {more:?}"))
}

/// Asserts that labperf's text is perf's line for line, naming the first lines that differ.
fn same_lines(what: &str, labperf: &str, perf: &str) {
    let (l, p): (Vec<&str>, Vec<&str>) = (labperf.lines().collect(), perf.lines().collect());
    let differ: Vec<String> = l
        .iter()
        .zip(&p)
        .enumerate()
        .filter(|(_, (a, b))| a != b)
        .take(5)
        .map(|(i, (a, b))| format!("line {}:\n  labperf: {a:?}\n  perf:    {b:?}", i + 1))
        .collect();
    assert!(
        differ.is_empty() && l.len() == p.len(),
        "{what}: labperf script printed {} lines, perf script {}; first differences:\n{}",
        l.len(),
        p.len(),
        differ.join("\n")
    );
    eprintln!("{what}: {} lines identical", l.len());
}

/// The header lines of the samples (not a frame, not a blank line).
fn samples(text: &str) -> Vec<&str> {
    text.lines()
        .filter(|l| !l.is_empty() && !l.starts_with('\t'))
        .collect()
}

#[test]
fn script_of_perf_data_is_perf_script_line_for_line() {
    if !perf_here("script_of_perf_data_is_perf_script_line_for_line") {
        return;
    }
    let d = scratch("script-perf");
    let prog = tiny(&d);
    let cache = d.join("cache");
    for g in [false, true] {
        let data = d.join(if g { "g.data" } else { "flat.data" });
        perf_record(&data, &prog, g);
        let perf = perf_script(&data, &[]);
        let lab = labperf_script(&data, &[], &cache);
        same_lines(&format!("-g {g}: default fields"), &lab, &perf);
        // Enough samples, most in the program's three functions, named with offsets.
        let n = samples(&perf).len();
        assert!(n > 500, "-g {g}: only {n} samples");
        let ours = perf
            .lines()
            .filter(|l| {
                [" fn_a+0x", " fn_b+0x", " fn_c+0x"]
                    .iter()
                    .any(|f| l.contains(f))
            })
            .count();
        assert!(
            2 * ours > n,
            "-g {g}: {ours} of {n} samples in fn_a/b/c:\n{perf}"
        );
        if g {
            // Frames under each sample: the callers reach main in the program.
            assert!(perf.contains(" main+0x") && perf.contains(&format!(" ({})", prog.display())));
        }
        for f in [
            "comm,tid,time",
            "+pid",
            "-period,-event",
            "tid,time,ip,sym",
            "comm,pid,tid,time,period,event,ip,sym,symoff,dso",
            "ip,sym,dso",
        ] {
            same_lines(
                &format!("-g {g}: -F {f}"),
                &labperf_script(&data, &["-F", f], &cache),
                &perf_script(&data, &["-F", f]),
            );
        }
        // -F given twice: the second applies to the first's fields, as perf's does.
        for o in [
            &["-G"][..],
            &["--ns"],
            &["--max-stack", "2"],
            &["-F", "ip,sym", "-F", "+pid"],
        ] {
            same_lines(
                &format!("-g {g}: {o:?}"),
                &labperf_script(&data, o, &cache),
                &perf_script(&data, o),
            );
        }
    }
}

#[test]
fn script_filters_are_perf_script_s() {
    if !perf_here("script_filters_are_perf_script_s") {
        return;
    }
    let d = scratch("script-filters");
    let prog = tiny(&d);
    let cache = d.join("cache");
    let data = d.join("g.data");
    perf_record(&data, &prog, true);
    // A window from the recording's own times: its second quarter.
    let times: Vec<f64> = perf_script(&data, &["-F", "time"])
        .lines()
        .filter_map(|l| l.trim().trim_end_matches(':').parse().ok())
        .collect();
    let (first, last) = (times[0], times[times.len() - 1]);
    let q = (last - first) / 4.0;
    let window = format!("{:.6},{:.6}", first + q, first + 2.0 * q);
    let tid = perf_script(&data, &["-F", "tid"])
        .lines()
        .next()
        .unwrap()
        .trim()
        .to_string();
    for o in [
        vec!["--comm", "tiny"],
        vec!["--comm", "nothing"],
        vec!["--tid", &tid],
        vec!["--time", &window],
        vec!["--time", "10%/2"],
        vec!["--time", "50%-100%"],
        vec!["-S", "fn_a"],
        vec!["--dsos", "[kernel.kallsyms]"],
    ] {
        let perf = perf_script(&data, &o);
        let lab = labperf_script(&data, &o, &cache);
        same_lines(&format!("{o:?}"), &lab, &perf);
        if o[0] != "--comm" || o[1] != "nothing" {
            assert!(!perf.is_empty(), "{o:?} kept no sample");
        }
    }
}

/// The report's samples of function `name` (0 when it has no row).
fn report_samples(j: &serde_json::Value, name: &str) -> u64 {
    j["tables"][0]["rows"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["name"] == name)
        .map_or(0, |r| r["samples"].as_u64().unwrap())
}

#[test]
fn script_of_a_labperf_recording_counts_as_its_report() {
    let d = scratch("script-labperf");
    let prog = tiny(&d);
    let cache = d.join("cache");
    // Flat, `-g` and `--call-graph dwarf` (whose samples carry the user stack alone, no
    // callchain: its frames were left out of script once, and a kernel sample's own address).
    for (mode, stacks) in [
        ("flat", &[][..]),
        ("g", &["-g"][..]),
        ("dwarf", &["--call-graph", "dwarf"][..]),
    ] {
        let g = mode != "flat";
        let f = d.join(format!("{mode}.lpr"));
        let mut c = Command::new(bin("labperf"));
        c.args(["record", "--local", "--no-report", "-e", "cpu-clock"]);
        c.args(stacks);
        let o = c
            .arg("-o")
            .arg(&f)
            .arg("--")
            .arg(&prog)
            .arg(ITERATIONS)
            .env("XDG_CACHE_HOME", &cache)
            .output()
            .unwrap();
        ok(o, "labperf record");
        let text = labperf_script(&f, &[], &cache);
        let j = report_json(&f, 0, |c| {
            c.env("XDG_CACHE_HOME", &cache);
        });
        let total = j["summary"]["total_samples"].as_u64().unwrap();
        let heads = samples(&text);
        assert_eq!(heads.len() as u64, total, "{mode}: samples");
        if !g {
            assert_eq!(text.lines().count() as u64, total, "one line per sample");
        }
        // The sampled function: the line itself, or with -g the first frame under it.
        let sampled: Vec<&str> = if g {
            text.split("\n\n")
                .filter_map(|b| b.lines().nth(1))
                .collect()
        } else {
            text.lines().collect()
        };
        assert_eq!(sampled.len() as u64, total);
        for name in ["fn_a", "fn_b", "fn_c"] {
            let lines = sampled
                .iter()
                .filter(|l| l.contains(&format!(" {name}+0x")))
                .count() as u64;
            let self_samples = report_samples(&j, name);
            assert!(
                self_samples > 50,
                "{mode}: {name} has {self_samples} samples"
            );
            assert_eq!(
                lines, self_samples,
                "{mode}: {name}'s lines against its Self"
            );
            eprintln!("{mode}: {name}: {lines} lines, the report's Self {self_samples} samples");
        }
        // The fields of a labperf recording: comm, tid, cpu (the agent records it), time.
        let first = heads[0];
        assert!(first.contains("tiny ") && first.contains(" [0"), "{first}");
        assert!(first.contains(" cpu-clock: "), "{first}");
    }
}

#[test]
fn script_refuses_fields_it_cannot_print() {
    let d = scratch("script-fields");
    let golden = root().join("tests/labperf.lpr");
    let run = |args: &[&str]| {
        Command::new(bin("labperf"))
            .arg("script")
            .arg(&golden)
            .args(args)
            .env("XDG_CACHE_HOME", d.join("cache"))
            .output()
            .unwrap()
    };
    let fields = "comm,tid,pid,time,cpu,period,event,ip,sym,symoff,dso";
    for (args, code, want) in [
        (
            &["-F", "foo"][..],
            2,
            format!("no field 'foo': the fields are {fields}"),
        ),
        (
            &["-F", "brstack"],
            2,
            format!("perf's field 'brstack' is not one labperf prints; it prints {fields}"),
        ),
        (
            &["-F", "symoff"],
            2,
            "symoff is the offset after the function's name: ask for sym too".into(),
        ),
        (
            &["-F", "sw:comm"],
            2,
            "labperf takes no event type before the fields ('sw:')".into(),
        ),
        (
            &["-F", "comm,+tid"],
            2,
            "cannot mix +field or -field with plain fields".into(),
        ),
    ] {
        let o = run(args);
        let e = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(code), "{args:?}: {e}");
        assert!(e.contains(&want), "{args:?}: {e}");
    }
    // The help lists what -F takes.
    let o = Command::new(bin("labperf"))
        .args(["script", "--help"])
        .output()
        .unwrap();
    let help = ok(o, "script --help");
    assert!(
        help.contains("comm,\n") || help.contains("labperf prints comm"),
        "{help}"
    );
    assert!(help.contains("EXAMPLES:"), "{help}");
}

#[test]
fn script_refuses_a_field_the_samples_lack() {
    if !perf_here("script_refuses_a_field_the_samples_lack") {
        return;
    }
    let d = scratch("script-lack");
    let prog = tiny(&d);
    let data = d.join("flat.data");
    perf_record(&data, &prog, false);
    // A recording of one task keeps no CPU: perf leaves the default field out, refuses it
    // named.
    let lab = labperf_script(&data, &["-F", "comm,time"], &d.join("cache"));
    assert!(!lab.contains('['), "{lab}");
    let o = Command::new(bin("labperf"))
        .args(["script", "-F", "comm,cpu"])
        .arg(&data)
        .output()
        .unwrap();
    let e = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(1), "{e}");
    assert!(
        e.contains("the samples of 'cpu-clock' do not carry the CPU attribute: cannot print the 'cpu' field"),
        "{e}"
    );
}

/// Each sample's heading and frame addresses, a line each; with `collapse`, a run of one
/// address as one (perf prints a frame's address once more for each function DWARF says
/// was inlined there, which labperf does not print).
fn addresses(text: &str, collapse: bool) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for l in text.lines() {
        let a = match l.strip_prefix('\t') {
            Some(f) => f.split_whitespace().next().unwrap_or("").to_string(),
            None => l.to_string(),
        };
        if !collapse || out.last() != Some(&a) || !l.starts_with('\t') {
            out.push(a);
        }
    }
    out
}

#[test]
fn script_of_a_dwarf_recording_unwinds_as_perf() {
    if !perf_here("script_of_a_dwarf_recording_unwinds_as_perf") {
        return;
    }
    let d = scratch("script-dwarf");
    let prog = tiny(&d);
    let data = d.join("dwarf.data");
    let o = Command::new("perf")
        .args([
            "record",
            "-q",
            "-e",
            "cpu-clock",
            "--call-graph",
            "dwarf",
            "-o",
        ])
        .arg(&data)
        .arg("--")
        .arg(&prog)
        .arg("30000000")
        .output()
        .expect("perf record");
    ok(o, "perf record --call-graph dwarf");
    let perf = perf_script(&data, &[]);
    let lab = labperf_script(&data, &[], &d.join("cache"));
    // The same samples, and under each the same frames (the interrupted address, then
    // each caller one byte back); perf's `(inlined)` lines are not printed.
    let (l, p) = (addresses(&lab, false), addresses(&perf, true));
    let differ: Vec<(usize, &String, &String)> = l
        .iter()
        .zip(&p)
        .enumerate()
        .filter(|(_, (a, b))| a != b)
        .map(|(i, (a, b))| (i, a, b))
        .take(5)
        .collect();
    assert!(
        differ.is_empty() && l.len() == p.len(),
        "{} against {} addresses; first differences {differ:?}",
        l.len(),
        p.len()
    );
    let mains = lab.lines().filter(|l| l.contains(" main+0x")).count();
    assert!(mains > 50, "only {mains} frames in main:\n{lab}");
    eprintln!(
        "--call-graph dwarf: {} addresses identical, {mains} frames in main",
        l.len()
    );
    // Lines without DWARF's inlined functions are perf's.
    let plain: Vec<&str> = perf
        .lines()
        .filter(|l| !l.ends_with(" (inlined)"))
        .collect();
    let fn_a = |v: &[&str]| v.iter().filter(|l| l.contains(" fn_a+0x")).count();
    let ours: Vec<&str> = lab.lines().collect();
    assert_eq!(fn_a(&ours), fn_a(&plain), "fn_a's frames");
}
