//! The workload's standard output and error are the workload's: `labperf record` of a
//! program that prints known lines leaves its standard output byte-identical to a run
//! without labperf and its standard error's lines whole, and prints its report on standard
//! error when standard output is redirected; after `-g` that report is the Children table
//! with the caller tree, as perf's.

use labperf_tests::{bin, scratch};
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// `prog MS`: prints known lines on standard output (the last without a newline) and
/// standard error around `MS` ms of CPU time spent in `outer` → `inner`.
const PROG: &str = r#"#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static long cpu_ns(void) {
    struct timespec t;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
    return t.tv_sec * 1000000000L + t.tv_nsec;
}

__attribute__((noinline)) unsigned long inner(unsigned long x) {
    for (int i = 0; i < 100000; i++) {
        x = x * 6364136223846793005UL + i;
        __asm__ volatile("" : "+r"(x));
    }
    return x;
}

__attribute__((noinline)) unsigned long outer(long ms) {
    unsigned long x = 1;
    long end = cpu_ns() + ms * 1000000L;
    while (cpu_ns() < end) x = inner(x);
    return x;
}

int main(int argc, char **argv) {
    long ms = argc > 1 ? atol(argv[1]) : 100;
    printf("out: first line\n");
    fflush(stdout);
    fprintf(stderr, "err: before the work\n");
    unsigned long x = outer(ms);
    printf("out: parity %lu\nout: \xc3\xa9\t and a last line without newline", x & 1);
    fflush(stdout);
    fprintf(stderr, "err: after the work\n");
    return 0;
}
"#;

/// [`PROG`] compiled into `dir` (frame pointers kept, for `-g`).
fn prog(dir: &Path) -> PathBuf {
    let src = dir.join("prog.c");
    std::fs::write(&src, PROG).unwrap();
    let exe = dir.join("prog");
    let o = Command::new("gcc")
        .args([
            "-O1",
            "-fno-omit-frame-pointer",
            "-mno-omit-leaf-frame-pointer",
            "-fno-inline",
            "-o",
        ])
        .arg(&exe)
        .arg(&src)
        .output()
        .expect("gcc (cargo xtask setup installs it)");
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    exe
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

/// `labperf record ARGS -o FILE -- prog 150`, its standard output and error piped (not a
/// terminal), which must succeed.
fn record(args: &[&str], file: &Path, prog: &Path) -> Output {
    let o = Command::new(bin("labperf"))
        .arg("record")
        .args(args)
        .arg("-o")
        .arg(file)
        .arg("--")
        .arg(prog)
        .arg("150")
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", text(&o.stderr));
    o
}

#[test]
fn a_redirected_stdout_holds_only_the_workload_s_bytes() {
    let d = scratch("workload-output");
    let p = prog(&d);
    let alone = Command::new(&p).arg("150").output().unwrap();
    assert!(alone.status.success());
    let f = d.join("r.lpr");
    let o = record(&["-e", "cpu-clock"], &f, &p);
    // Byte for byte what the program wrote alone, nothing of labperf's.
    assert_eq!(o.stdout, alone.stdout, "{}", text(&o.stdout));
    // Its standard error's lines are there whole; the report follows them there.
    let e = text(&o.stderr);
    let (before, after) = (
        e.find("err: before the work\n").expect(&e),
        e.find("err: after the work\n").expect(&e),
    );
    let report = e.find("# ").unwrap_or_else(|| panic!("no report in:\n{e}"));
    assert!(before < after && after < report, "{e}");
    assert!(e[report..].contains("samples of event 'cpu-clock'"), "{e}");
    assert!(
        e[report..].contains("outer") || e[report..].contains("inner"),
        "{e}"
    );
    // --no-report: nothing of labperf's on standard output either.
    let o = record(&["-e", "cpu-clock", "--no-report"], &f, &p);
    assert_eq!(o.stdout, alone.stdout);
    assert!(!text(&o.stderr).contains("# "), "{}", text(&o.stderr));
}

#[test]
fn after_g_the_report_shows_children_and_the_caller_tree() {
    let d = scratch("workload-output-g");
    let p = prog(&d);
    let f = d.join("g.lpr");
    let o = record(&["-g", "-e", "cpu-clock"], &f, &p);
    let e = text(&o.stderr);
    let report = &e[e.find("# ").unwrap_or_else(|| panic!("no report in:\n{e}"))..];
    // The Children column beside Self, as `labperf report --call-graph caller` shows it.
    let want = Command::new(bin("labperf"))
        .args(["report", "--call-graph", "caller"])
        .arg(&f)
        .output()
        .unwrap();
    assert!(want.status.success(), "{}", text(&want.stderr));
    let want = text(&want.stdout);
    assert!(want.contains("Children"), "{want}");
    assert!(
        report.starts_with(&want),
        "record's report:\n{report}\nreport --call-graph caller:\n{want}"
    );
    // The tree: main calls outer, which calls inner.
    let tree: Vec<&str> = want
        .lines()
        .filter_map(|l| l.split("└─ ").nth(1)?.split_whitespace().next())
        .collect();
    assert!(
        tree.windows(2).any(|w| w == ["outer", "inner"]),
        "{tree:?}\n{want}"
    );
    // Without -g: the flat Self table, as before.
    let o = record(&["-e", "cpu-clock"], &f, &p);
    let e = text(&o.stderr);
    assert!(!e.contains("Children"), "{e}");
    // --no-children keeps the flat table after -g.
    let o = record(&["-g", "-e", "cpu-clock", "--no-children"], &f, &p);
    assert!(!text(&o.stderr).contains("Children"), "{}", text(&o.stderr));
}
