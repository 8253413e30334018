//! Known answers from real programs: the corpus sources (`tests/corpus/`) compiled as
//! people compile them, the programs' own account of their CPU time (`split` lines), and
//! the Children and Self shares by function that `labperf report --children` and `perf
//! report --children` give, for the tests to compare (`unwinding.rs`, `corpus.rs`).

use crate::{bin, root};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;

/// The corpus sources.
pub fn corpus() -> PathBuf {
    root().join("tests/corpus")
}

/// Runs `program` with `args` in `dir` (a compiler, a linker, objcopy); fails with its words.
pub fn compile(dir: &Path, program: &str, args: &[&str]) {
    let o = Command::new(program)
        .current_dir(dir)
        .args(args)
        .output()
        .unwrap_or_else(|e| panic!("{program}: {e} (`cargo xtask setup` installs it)"));
    assert!(
        o.status.success(),
        "{program} {args:?}: {}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    );
}

/// A directory for `name`'s build, shared by the tests of one test run (nextest's
/// `NEXTEST_RUN_ID`; this process's id under plain `cargo test`): the first test that
/// needs it runs `build` in a directory of its own and renames it into place; the others
/// (and this test's later modes) find it there. Builds must not record their directory
/// (an rpath is `$ORIGIN`, a debug link a name beside the binary).
pub fn built(name: &str, build: impl FnOnce(&Path)) -> PathBuf {
    let run =
        std::env::var("NEXTEST_RUN_ID").unwrap_or_else(|_| format!("pid-{}", std::process::id()));
    let top = std::env::temp_dir().join(format!("labperf-corpus-{run}"));
    let dir = top.join(name);
    if dir.is_dir() {
        return dir;
    }
    let tmp = top.join(format!("{name}.{}.tmp", std::process::id()));
    let _ = std::fs::remove_dir_all(&tmp);
    std::fs::create_dir_all(&tmp).unwrap();
    build(&tmp);
    if std::fs::rename(&tmp, &dir).is_err() {
        // Another test built it first: theirs is the same.
        assert!(dir.is_dir(), "cannot rename {} into place", tmp.display());
        let _ = std::fs::remove_dir_all(&tmp);
    }
    dir
}

/// The programs' own account of their CPU time: every `split total T name t ...` line of
/// `text` (one per process; after a lab machine's name), summed by name (seconds).
pub fn split(text: &str) -> BTreeMap<String, f64> {
    let mut out: BTreeMap<String, f64> = BTreeMap::new();
    // A lab machine's lines come with its name first.
    for line in text
        .lines()
        .filter_map(|l| l.find("split total ").map(|at| &l[at + "split ".len()..]))
    {
        let w: Vec<&str> = line.split_whitespace().collect();
        assert!(w.len().is_multiple_of(2), "a split line of pairs: {line}");
        for p in w.chunks(2) {
            let v: f64 = p[1]
                .parse()
                .unwrap_or_else(|_| panic!("{} is no number in: {line}", p[1]));
            *out.entry(p[0].to_string()).or_default() += v;
        }
    }
    assert!(
        out.contains_key("total"),
        "the program printed no split: {text}"
    );
    out
}

/// A function's shares of a profile, in percent: (Children, Self).
pub type Shares = BTreeMap<String, (f64, f64)>;

/// `labperf report --children --format json --top 0` of `f` (with what `more` adds) as
/// name → (Children %, Self %), and the whole report. A name in two files (the loader's
/// `_start` and the program's) keeps its busiest row, as [`perf_children`] does.
pub fn report_children(f: &Path, more: impl FnOnce(&mut Command)) -> (Shares, serde_json::Value) {
    let j = crate::report_json(f, 0, |c| {
        c.arg("--children");
        more(c);
    });
    let mut rows = Shares::new();
    for r in j["tables"][0]["rows"].as_array().unwrap() {
        let (c, s) = (
            r["children_pct"].as_f64().unwrap(),
            r["self_pct"].as_f64().unwrap(),
        );
        rows.entry(r["name"].as_str().unwrap().to_string())
            .and_modify(|v: &mut (f64, f64)| {
                if c > v.0 {
                    *v = (c, s)
                }
            })
            .or_insert((c, s));
    }
    (rows, j)
}

/// `perf report --children` of `data` as symbol → (Children %, Self %). perf names a
/// function inlined at a sampled place `name (inlined)`: kept so, apart from the function
/// itself. A name in two rows (the loader's `_start` and the program's) keeps its busiest.
pub fn perf_children(data: &Path) -> Shares {
    perf_children_rows(data)
        .into_iter()
        .map(|(k, v)| (k, v[0]))
        .collect()
}

/// `perf report --children` of `data` as symbol → its rows (Children %, Self %), busiest
/// first: perf gives one function several rows at times (two files' `_start`; libc's
/// `__libc_start_call_main` reached through an inlined frame and not).
pub fn perf_children_rows(data: &Path) -> BTreeMap<String, Vec<(f64, f64)>> {
    let o = Command::new("perf")
        .args([
            "report",
            "--children",
            "--stdio",
            "--sort",
            "sym",
            "-g",
            "none",
        ])
        .args(["--percent-limit", "0", "-i"])
        .arg(data)
        .output()
        .expect("perf (cargo xtask setup installs linux-perf)");
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    // "    50.05%    50.05%  [.] fn_a", busiest first.
    let mut rows: BTreeMap<String, Vec<(f64, f64)>> = BTreeMap::new();
    for l in String::from_utf8_lossy(&o.stdout)
        .lines()
        .filter(|l| !l.trim_start().starts_with('#'))
    {
        let w: Vec<&str> = l.split_whitespace().collect();
        let pct = |i: usize| w.get(i)?.strip_suffix('%')?.parse::<f64>().ok();
        let (Some(c), Some(s)) = (pct(0), pct(1)) else {
            continue;
        };
        if let Some(at) = w.iter().position(|x| *x == "[.]" || *x == "[k]") {
            rows.entry(w[at + 1..].join(" ")).or_default().push((c, s));
        }
    }
    rows
}

/// `labperf import DATA -o OUT`: perf's recording as a labperf file.
pub fn import(data: &Path, out: &Path) {
    let o = Command::new(bin("labperf"))
        .arg("import")
        .arg(data)
        .arg("-o")
        .arg(out)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
}
