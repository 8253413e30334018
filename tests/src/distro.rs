//! Programs nobody here wrote, checked against perf on the same samples: perf's recording and report by dso and symbol, perf script's callchains named by `addr2line -i` (an independent count of inlined functions), and labperf's own recording by dso and its CPU-time account (`tests/tests/debian.rs`).

use crate::bin;
use serde_json::Value;
use std::collections::{BTreeMap, BTreeSet};
use std::ffi::OsString;
use std::path::Path;
use std::process::{Command, Stdio};

/// A cpu-clock sample every 250 µs, as perf's default event here (no hardware PMU).
pub const PERIOD: &str = "250000";

/// A path's last part (perf reports shared objects by it); anonymous executable memory
/// (JIT code: labperf's `//anon`, perf's `[JIT] tid N`) by one name.
pub fn base(path: &str) -> String {
    if path == "//anon" || path.starts_with("[JIT] tid ") {
        return ANON.into();
    }
    path.rsplit('/').next().unwrap_or(path).to_string()
}

/// The name both tools' anonymous executable memory is compared under.
pub const ANON: &str = "[anonymous executable memory]";

/// `perf record --call-graph dwarf` of `cmd` (its output dropped) into `data`, as this
/// user (kernel mode too as root, as perf does by default).
pub fn perf_record(data: &Path, cmd: &[OsString]) {
    // perf 6.1 itself aborted now and then here ("assertion failed at util/build-id.c:1010",
    // "stack smashing detected", killed by SIGABRT): a crash of the reference is retried
    // once, said; a failure of any other kind is not.
    for attempt in 0..2 {
        match perf_record_once(data, cmd) {
            Ok(()) => return,
            Err(e) if attempt == 0 && e.contains("signal: 6") => {
                eprintln!("perf record crashed, once more: {e}");
            }
            Err(e) => panic!("perf record: {e}"),
        }
    }
}

fn perf_record_once(data: &Path, cmd: &[OsString]) -> Result<(), String> {
    let o = Command::new("perf")
        // No build-id cache: tests run side by side, and perf's writes to ~/.debug are not
        // safe against each other (one aborted, "stack smashing detected"); labperf import
        // names the kernel from /proc/kallsyms then, the running kernel being the recorded.
        .args(["record", "-q", "-N", "-c", PERIOD])
        .args(["--call-graph", "dwarf", "-o"])
        .arg(data)
        .arg("--")
        .args(cmd)
        .stdout(Stdio::null())
        .output()
        .expect("perf (cargo xtask setup installs linux-perf)");
    match o.status.success() {
        true => Ok(()),
        false => Err(format!(
            "{}: {}",
            o.status,
            String::from_utf8_lossy(&o.stderr)
        )),
    }
}

/// `labperf record --call-graph dwarf` of `cmd` into `out` (its output dropped), with the
/// default ring of 512 KiB per CPU, as perf's (a 4 MiB one, which loses nothing on a busy
/// machine, moved the C++ program's split between itself and the C library by 4 points:
/// the kernel writes each 8 KiB stack into it, through the workload's caches).
pub fn labperf_record(out: &Path, cmd: &[OsString]) {
    let o = Command::new(bin("labperf"))
        .args(["record", "--local", "--no-report", "-c", PERIOD])
        .args(["--call-graph", "dwarf", "-o"])
        .arg(out)
        .arg("--")
        .args(cmd)
        .stdout(Stdio::null())
        .output()
        .unwrap();
    assert!(
        o.status.success(),
        "labperf record: {}",
        String::from_utf8_lossy(&o.stderr)
    );
}

fn perf_report(data: &Path, args: &[&str]) -> String {
    let o = Command::new("perf")
        .args(["report", "--stdio", "-g", "none", "--percent-limit", "0"])
        .args(args)
        .arg("-i")
        .arg(data)
        .output()
        .unwrap();
    assert!(
        o.status.success(),
        "perf report: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    String::from_utf8_lossy(&o.stdout).into_owned()
}

/// The rows of `perf report -n --no-children --sort KEYS`: each row's sample count and its
/// key's words, in percent of all samples from the counts (perf's printed percentages are
/// rounded to 0.01: summed over thousands of unnamed addresses, they drift a point).
fn perf_counted(data: &Path, keys: &str) -> Vec<(f64, Vec<String>)> {
    let mut rows = Vec::new();
    for l in perf_report(data, &["-n", "--no-children", "--sort", keys]).lines() {
        let w: Vec<&str> = l.split_whitespace().collect();
        let pct = w
            .first()
            .and_then(|p| p.strip_suffix('%')?.parse::<f64>().ok());
        let n = w.get(1).and_then(|n| n.parse::<u64>().ok());
        if let (Some(_), Some(n)) = (pct, n) {
            rows.push((n as f64, w[2..].iter().map(|s| s.to_string()).collect()));
        }
    }
    let total: f64 = rows.iter().map(|r| r.0).sum();
    for r in &mut rows {
        r.0 = 100.0 * r.0 / total.max(1.0);
    }
    rows
}

/// perf's Self by (shared object, symbol), in percent (`perf report --no-children --sort
/// dso,sym`): "  45.12%  1802  dd  [k] read_zero".
pub fn perf_self(data: &Path) -> BTreeMap<(String, String), f64> {
    let mut out: BTreeMap<(String, String), f64> = BTreeMap::new();
    for (pct, w) in perf_counted(data, "dso,sym") {
        let Some(at) = w.iter().position(|x| x == "[.]" || x == "[k]") else {
            continue;
        };
        *out.entry((base(&w[..at].join(" ")), w[at + 1..].join(" ")))
            .or_default() += pct;
    }
    out
}

/// perf's shares by shared object (`perf report --sort dso`), in percent.
pub fn perf_dso(data: &Path) -> BTreeMap<String, f64> {
    let mut out: BTreeMap<String, f64> = BTreeMap::new();
    for (pct, w) in perf_counted(data, "dso") {
        *out.entry(base(&w.join(" "))).or_default() += pct;
    }
    out
}

/// perf's Children by symbol (`perf report --children --sort sym`), in percent: each name's
/// rows (perf may list a function twice), busiest first. `more`: perf's options
/// (`--no-inline`).
pub fn perf_children(data: &Path, more: &[&str]) -> BTreeMap<String, Vec<f64>> {
    let mut args = vec!["--children", "--sort", "sym"];
    args.extend_from_slice(more);
    let mut rows: BTreeMap<String, Vec<f64>> = BTreeMap::new();
    for l in perf_report(data, &args).lines() {
        let w: Vec<&str> = l.split_whitespace().collect();
        let Some(c) = w
            .first()
            .and_then(|p| p.strip_suffix('%')?.parse::<f64>().ok())
        else {
            continue;
        };
        if let Some(at) = w.iter().position(|x| *x == "[.]" || *x == "[k]") {
            rows.entry(w[at + 1..].join(" ")).or_default().push(c);
        }
    }
    for v in rows.values_mut() {
        v.sort_by(|a, b| b.total_cmp(a));
    }
    rows
}

/// One labperf `--children` row: (Children %, Self %).
pub type Row = (f64, f64);

/// `labperf report --children --format json --top 0` of `f` by (shared object's name,
/// function): (Children %, Self %); and the report.
pub fn labperf_children(f: &Path, more: &[&str]) -> (BTreeMap<(String, String), Row>, Value) {
    let j = crate::report_json(f, 0, |c| {
        c.arg("--children").args(more);
    });
    let mut out = BTreeMap::new();
    for r in j["tables"][0]["rows"].as_array().unwrap() {
        let n = |k: &str| r[k].as_f64().unwrap();
        out.insert(
            (
                base(r["dso"].as_str().unwrap_or("")),
                r["name"].as_str().unwrap().to_string(),
            ),
            (n("children_pct"), n("self_pct")),
        );
    }
    (out, j)
}

/// labperf's shares by shared object's name (`report --by dso`), in percent, and the report.
pub fn labperf_dso(f: &Path) -> (BTreeMap<String, f64>, Value) {
    let j = crate::report_json(f, 0, |c| {
        c.args(["--by", "dso"]);
    });
    let mut out = BTreeMap::new();
    for r in j["tables"][0]["rows"].as_array().unwrap() {
        *out.entry(base(r["name"].as_str().unwrap())).or_default() +=
            r["percent"].as_f64().unwrap();
    }
    (out, j)
}

/// Whether perf names a symbol by its address only (`0x0000000000002d97`).
pub fn unnamed(sym: &str) -> bool {
    let s = sym.strip_suffix(" (inlined)").unwrap_or(sym);
    // A PLT entry perf could not tie to a symbol.
    if s == "@plt" {
        return true;
    }
    s.starts_with("0x") || (s.len() >= 8 && s.bytes().all(|b| b.is_ascii_hexdigit()))
}

/// The samples of perf's recording `data` whose callchain holds a function of `exe` that
/// `addr2line -i` names as matching `want`, in percent of all samples: an independent
/// count of an inlined function's Children. Each frame in `exe` is looked up at its
/// address (`symbol + offset` from `perf script`, the symbol's address from the
/// executable's symbol table), a return address one byte back (inside its call).
pub fn addr2line_share(data: &Path, exe: &Path, want: &dyn Fn(&str) -> bool) -> f64 {
    let o = Command::new("perf")
        .args([
            "script",
            "--no-inline",
            "--no-demangle",
            "-F",
            "ip,sym,symoff,dso",
            "-i",
        ])
        .arg(data)
        .output()
        .unwrap();
    assert!(
        o.status.success(),
        "perf script: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    let syms = symbols(exe);
    let name = base(&exe.to_string_lossy());
    // Each sample's frames in `exe`: (file address, leaf).
    let mut samples: Vec<Vec<u64>> = Vec::new();
    let mut cur: Option<Vec<u64>> = None;
    for l in String::from_utf8_lossy(&o.stdout).lines() {
        if l.trim().is_empty() {
            samples.extend(cur.take());
            continue;
        }
        let frames = cur.get_or_insert_with(Vec::new);
        // A sample's first line is its sampled address; the others are return addresses.
        let leaf = frames.is_empty();
        let t = l.trim();
        // "401a0f _Z11count_words...+0x16f (/tmp/cxxmap)"
        let (Some(sym_off), Some(dso)) = (t.split_whitespace().nth(1), t.rsplit_once(" (")) else {
            frames.push(u64::MAX);
            continue;
        };
        if base(dso.1.trim_end_matches(')')) != name {
            frames.push(u64::MAX);
            continue;
        }
        let addr = sym_off
            .rsplit_once("+0x")
            .and_then(|(s, off)| Some(syms.get(s)? + u64::from_str_radix(off, 16).ok()?));
        frames.push(match addr {
            Some(a) if leaf => a,
            Some(a) => a - 1,
            None => u64::MAX,
        });
    }
    samples.extend(cur.take());
    share(exe, &samples, want)
}

/// The samples of labperf's own recording `f` (made with `-g`: each sample's callchain as
/// the kernel walked it, from `labperf dump`) whose callchain holds a function of `exe`
/// that `addr2line -i` names as matching `want`, in percent of all samples: the same
/// independent count as [`addr2line_share`], over labperf's own file. A callchain's first
/// user address is where the sample (or the kernel's entry) interrupted it; the others are
/// return addresses, looked up one byte back.
pub fn addr2line_share_of_recording(f: &Path, exe: &Path, want: &dyn Fn(&str) -> bool) -> f64 {
    let o = Command::new(bin("labperf"))
        .arg("dump")
        .arg(f)
        .output()
        .unwrap();
    assert!(
        o.status.success(),
        "labperf dump: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    let text = String::from_utf8_lossy(&o.stdout).into_owned();
    let name = base(&exe.to_string_lossy());
    let data = std::fs::read(exe).unwrap();
    let elf = object::File::parse(&*data).unwrap();
    let hex = |v: &str| u64::from_str_radix(v.trim().trim_start_matches("0x"), 16).ok();
    // The executable's mappings: (start, end, file offset at start).
    let maps: Vec<(u64, u64, u64)> = text
        .lines()
        .filter(|l| l.contains(" MMAP2 ") && base(l.rsplit(' ').next().unwrap_or("")) == name)
        .filter_map(|l| {
            let r = l.split_once('[')?.1.split_once(']')?.0;
            let (start, rest) = r.split_once('(')?;
            let (len, off) = rest.split_once(") @ ")?;
            let s = hex(start)?;
            Some((s, s + hex(len)?, hex(off)?))
        })
        .collect();
    let vaddr = |a: u64| -> Option<u64> {
        use object::{Object, ObjectSegment};
        let &(start, _, pgoff) = maps.iter().find(|m| m.0 <= a && a < m.1)?;
        let off = a - start + pgoff;
        elf.segments().find_map(|seg| {
            let (fo, fl) = seg.file_range();
            (fo <= off && off < fo + fl).then(|| seg.address() + (off - fo))
        })
    };
    let mut samples: Vec<Vec<u64>> = Vec::new();
    for l in text.lines().filter(|l| l.contains(" SAMPLE ")) {
        let chain = l
            .split_once("callchain=[")
            .and_then(|c| c.1.split_once(']'))
            .map_or("", |c| c.0);
        let addrs: Vec<u64> = chain.split(',').filter_map(hex).collect();
        let user = addrs
            .iter()
            .position(|&a| a >> 63 == 0)
            .unwrap_or(addrs.len());
        let frames = addrs[user..]
            .iter()
            .enumerate()
            .filter_map(|(i, &a)| vaddr(if i == 0 { a } else { a.wrapping_sub(1) }))
            .collect();
        samples.push(frames);
    }
    share(exe, &samples, want)
}

/// The share (percent) of `samples` (each its frames' file addresses in `exe`) holding a
/// function `addr2line -i` names as matching `want`.
fn share(exe: &Path, samples: &[Vec<u64>], want: &dyn Fn(&str) -> bool) -> f64 {
    let all: BTreeSet<u64> = samples
        .iter()
        .flatten()
        .copied()
        .filter(|&a| a != u64::MAX)
        .collect();
    let names = addr2line_names(exe, &all);
    let hit = samples
        .iter()
        .filter(|s| {
            s.iter()
                .any(|a| names.get(a).is_some_and(|ns| ns.iter().any(|n| want(n))))
        })
        .count();
    100.0 * hit as f64 / samples.len().max(1) as f64
}

/// The function symbols of `exe` by (mangled) name: their addresses.
fn symbols(exe: &Path) -> BTreeMap<String, u64> {
    use object::{Object, ObjectSymbol};
    let data = std::fs::read(exe).unwrap();
    let f = object::File::parse(&*data).unwrap();
    f.symbols()
        .filter(|s| s.kind() == object::SymbolKind::Text)
        .filter_map(|s| Some((s.name().ok()?.to_string(), s.address())))
        .collect()
}

/// `addr2line -a -i -f -C -e exe` of `addrs`: each address's function and the functions
/// inlined there, as addr2line names them.
fn addr2line_names(exe: &Path, addrs: &BTreeSet<u64>) -> BTreeMap<u64, Vec<String>> {
    use std::io::Write;
    let mut c = Command::new("addr2line")
        .args(["-a", "-i", "-f", "-C", "-e"])
        .arg(exe)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .expect("addr2line (binutils)");
    let input: String = addrs.iter().map(|a| format!("{a:#x}\n")).collect();
    let mut stdin = c.stdin.take().unwrap();
    let writer = std::thread::spawn(move || stdin.write_all(input.as_bytes()));
    let o = c.wait_with_output().unwrap();
    writer.join().unwrap().unwrap();
    let mut out: BTreeMap<u64, Vec<String>> = BTreeMap::new();
    let mut at = None;
    let text = String::from_utf8_lossy(&o.stdout);
    let mut lines = text.lines();
    while let Some(l) = lines.next() {
        if let Some(hex) = l.strip_prefix("0x") {
            at = u64::from_str_radix(hex, 16).ok();
            continue;
        }
        // A function's name, then its file and line.
        let _ = lines.next();
        if let Some(a) = at {
            out.entry(a).or_default().push(l.to_string());
        }
    }
    out
}
