//! Symbols found by themselves: separate debug files (by build-id and by .gnu_debuglink),
//! the vDSO image the agent records, debug files fetched from a lab machine, and the
//! names and shares perf gives on the same samples of a python3 workload.

use labperf_tests::sshd::*;
use labperf_tests::{bin, report_json, scratch};
use object::Object;
use std::path::{Path, PathBuf};
use std::process::Command;

/// A python3 workload that spends its time in libc (memmove, memchr, memcmp, memset: named
/// only by libc's separate debug file), libz and the interpreter.
const PY: &str = r#"
import zlib
b = bytearray(4_000_000)
for i in range(120):
    c = bytes(b)
    c.find(b"x")
    zlib.crc32(c)
    c == bytes(b)
    b"\x01" * 2_000_000
    sum(range(30000))
"#;

fn build_id(p: &Path) -> Vec<u8> {
    let data = std::fs::read(p).unwrap();
    object::File::parse(&*data)
        .unwrap()
        .build_id()
        .unwrap()
        .unwrap()
        .to_vec()
}

fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

/// The libc the python3 here runs with (Debian's multiarch path for this architecture),
/// and its debug file from libc6-dbg.
fn libc() -> (PathBuf, PathBuf) {
    let libc = PathBuf::from(format!(
        "/lib/{}-linux-gnu/libc.so.6",
        std::env::consts::ARCH
    ));
    assert!(
        libc.is_file(),
        "{} is missing: these tests need Debian's libc6 of this architecture",
        libc.display()
    );
    let id = build_id(&libc);
    let debug = PathBuf::from(format!(
        "/usr/lib/debug/.build-id/{}/{}.debug",
        hex(&id[..1]),
        hex(&id[1..])
    ));
    assert!(
        debug.is_file(),
        "{} is missing: `cargo xtask setup` installs libc6-dbg",
        debug.display()
    );
    (libc, debug)
}

#[test]
fn python3_top_functions_match_perf_on_the_same_samples() {
    let (_, debug) = libc();
    let d = scratch("sym-python");
    std::fs::write(d.join("w.py"), PY).unwrap();
    // One execution, one recording: perf samples python3's user cpu-clock every 100 µs of
    // its CPU time, and labperf reads the same samples (perf.data, imported); each names
    // them with its own symbol search (libc's functions from its separate debug file).
    let o = Command::new("perf")
        .args(["record", "-q", "-e", "cpu-clock:u", "-c", "100000", "-o"])
        .arg(d.join("perf.data"))
        .arg("--")
        .arg("python3")
        .arg(d.join("w.py"))
        .output()
        .expect("perf is installed by `cargo xtask setup`");
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let lpr = d.join("py.lpr");
    let o = Command::new(bin("labperf"))
        .arg("import")
        .arg(d.join("perf.data"))
        .arg("-o")
        .arg(&lpr)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let o = Command::new("perf")
        .args(["report", "--stdio", "--sort", "sym", "-q", "-i"])
        .arg(d.join("perf.data"))
        .output()
        .unwrap();
    // "    30.45%  [.] crc32_z"
    let theirs: Vec<(String, f64)> = String::from_utf8_lossy(&o.stdout)
        .lines()
        .filter_map(|l| {
            let (pct, name) = l.split_once("] ")?;
            let pct = pct.trim().split('%').next()?.parse().ok()?;
            Some((name.trim().to_string(), pct))
        })
        .take(10)
        .collect();
    assert_eq!(theirs.len(), 10, "{}", String::from_utf8_lossy(&o.stdout));
    let j = report_json(&lpr, 0, |_| {});
    let rows = j["tables"][0]["rows"].as_array().unwrap();
    let ours: std::collections::BTreeMap<&str, f64> = rows
        .iter()
        .map(|r| (r["name"].as_str().unwrap(), r["percent"].as_f64().unwrap()))
        .collect();
    // The same samples: perf's top ten, each with perf's share to its two decimals.
    for (name, pct) in &theirs {
        let got = ours.get(name.as_str()).copied().unwrap_or(0.0);
        assert!(
            (got - pct).abs() <= 0.005 + 1e-9,
            "{name}: perf {pct:.2}%, labperf {got:.3}%\n perf: {theirs:?}"
        );
    }
    // libc's hot functions (in the top ten) are local symbols that only its debug file names.
    let libc_named: Vec<&str> = rows
        .iter()
        .take(10)
        .filter(|r| r["dso"].as_str().unwrap().ends_with("libc.so.6"))
        .map(|r| r["name"].as_str().unwrap())
        .collect();
    assert!(
        libc_named.len() >= 2 && libc_named.iter().all(|n| n.starts_with("__mem")),
        "libc rows {libc_named:?} (debug file {})",
        debug.display()
    );
    // Source lines come from the same debug file (its DWARF sections are compressed):
    // libc's busiest addresses are on the lines binutils' addr2line gives for them.
    let libc_rows = |j: &serde_json::Value| -> Vec<String> {
        j["tables"][0]["rows"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|r| r["dso"].as_str().unwrap().ends_with("libc.so.6"))
            .map(|r| r["name"].as_str().unwrap().to_string())
            .collect()
    };
    let lines = libc_rows(&report_json(&lpr, 0, |c| {
        c.args(["--by", "srcline"]);
    }));
    let pcs = libc_rows(&report_json(&lpr, 0, |c| {
        c.args(["--by", "pc"]);
    }));
    for pc in pcs.iter().take(3) {
        let vaddr = pc.split_whitespace().next().unwrap();
        let o = Command::new("addr2line")
            .arg("-e")
            .arg(&debug)
            .arg(vaddr)
            .output()
            .expect("addr2line (binutils)");
        let theirs = String::from_utf8_lossy(&o.stdout);
        let theirs = theirs.trim().rsplit('/').next().unwrap().to_string();
        assert!(
            !theirs.starts_with("??") && lines.contains(&theirs),
            "{pc}: addr2line says {theirs}; labperf's libc lines {lines:?}"
        );
    }
}

/// A C program whose hot loop calls libc through its PLT (`labs`, `ffs`, from a PIE built
/// as Debian's gcc builds by default).
const PLT_LOOP: &str = r#"
#include <stdlib.h>
#include <strings.h>
#include <time.h>
int main(void) {
    struct timespec a, b;
    long s = 0;
    clock_gettime(CLOCK_MONOTONIC, &a);
    do {
        for (long i = 0; i < 1000000; i++)
            s += labs(i - 500000) + ffs((int)i);
        clock_gettime(CLOCK_MONOTONIC, &b);
    } while ((b.tv_sec - a.tv_sec) * 1000000000L + (b.tv_nsec - a.tv_nsec) < 300000000L);
    return s == 42;
}
"#;

/// `perf record -e cpu-clock:u -c 100000` of `exe` into `data` (with `home` as `$HOME`,
/// where perf keeps its build-id cache, when given).
fn perf_record_user(data: &Path, exe: &Path, home: Option<&Path>) {
    let mut c = Command::new("perf");
    c.args(["record", "-q", "-e", "cpu-clock:u", "-c", "100000", "-o"])
        .arg(data)
        .arg("--")
        .arg(exe);
    if let Some(h) = home {
        c.env("HOME", h);
    }
    let o = c
        .output()
        .expect("perf is installed by `cargo xtask setup`");
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
}

/// `labperf import DATA -o LPR`, asserted to succeed.
fn import_to(data: &Path, lpr: &Path) {
    let o = Command::new(bin("labperf"))
        .arg("import")
        .arg(data)
        .arg("-o")
        .arg(lpr)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
}

/// `perf report --sort sym` of `data`: (name, samples), busiest first.
fn perf_sym_rows(data: &Path) -> Vec<(String, u64)> {
    perf_sym_rows_with(
        data,
        &std::env::var_os("HOME").map_or("/".into(), PathBuf::from),
    )
}

/// The same, with `home` as `$HOME` (perf's build-id cache is in its `.debug`).
fn perf_sym_rows_with(data: &Path, home: &Path) -> Vec<(String, u64)> {
    let o = Command::new("perf")
        .args(["report", "--stdio", "-n", "-q", "--sort", "sym", "-i"])
        .arg(data)
        .env("HOME", home)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    // "    12.34%       123  [.] labs@plt"
    String::from_utf8_lossy(&o.stdout)
        .lines()
        .filter_map(|l| {
            let (left, name) = l.split_once("] ")?;
            let samples = left.split_whitespace().nth(1)?.parse().ok()?;
            Some((name.trim().to_string(), samples))
        })
        .collect()
}

#[test]
fn plt_stubs_are_named_and_counted_as_perf_does_on_the_same_samples() {
    // Before: perf's `labs@plt` and `ffs@plt` rows were labperf's `p+0x1030`, unnamed.
    let d = scratch("sym-plt");
    std::fs::write(d.join("p.c"), PLT_LOOP).unwrap();
    let o = Command::new("gcc")
        .args(["-O1", "-fno-builtin", "-o"])
        .arg(d.join("p"))
        .arg(d.join("p.c"))
        .output()
        .expect("gcc is installed by `cargo xtask setup`");
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let data = d.join("perf.data");
    perf_record_user(&data, &d.join("p"), None);
    let lpr = d.join("p.lpr");
    import_to(&data, &lpr);
    let theirs = perf_sym_rows(&data);
    let stubs: Vec<&(String, u64)> = theirs.iter().filter(|(n, _)| n.ends_with("@plt")).collect();
    // 0.3 s of the loop every 100 µs: about 3,000 samples, about 200 in `labs@plt` (a
    // jump, in a round of a dozen instructions; `ffs@plt` gets far fewer here).
    assert!(
        stubs.iter().any(|(n, s)| n == "labs@plt" && *s > 20),
        "perf's rows: {theirs:?}"
    );
    let j = report_json(&lpr, 0, |_| {});
    let ours: std::collections::BTreeMap<&str, u64> = j["tables"][0]["rows"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| (r["name"].as_str().unwrap(), r["samples"].as_u64().unwrap()))
        .collect();
    // The same samples: each stub's count is perf's exactly.
    for (name, n) in stubs {
        assert_eq!(
            ours.get(name.as_str()),
            Some(n),
            "{name}: perf's rows {theirs:?}"
        );
    }
}

#[test]
fn an_import_names_a_program_rebuilt_since_from_perf_s_build_id_cache() {
    // Before: the import kept no build-id, and the report named the samples from the file
    // now at the recorded path, a rebuilt program, silently wrong.
    let d = scratch("sym-rebuilt");
    let src = |hot: &str, other: &str| {
        format!(
            "__attribute__((noinline)) void {other}(void) {{ __asm__ volatile(\"\"); }}\n\
             volatile unsigned long sink;\n\
             __attribute__((noinline)) void {hot}(void) {{\n\
               for (unsigned long i = 0; i < 150000000UL; i++) sink += i * i;\n\
             }}\n\
             int main(void) {{ {other}(); {hot}(); return 0; }}\n"
        )
    };
    let gcc = |code: String| {
        std::fs::write(d.join("p.c"), code).unwrap();
        let o = Command::new("gcc")
            .args(["-O1", "-o"])
            .arg(d.join("p"))
            .arg(d.join("p.c"))
            .output()
            .expect("gcc is installed by `cargo xtask setup`");
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    };
    gcc(src("first_hot_loop", "first_other"));
    // perf's build-id cache is `$HOME/.debug` (perf sets `$PERF_BUILDID_DIR` for the
    // commands it runs, and reads its `buildid.dir` setting, not that variable).
    let home = d.join("home");
    let cache = home.join(".debug");
    std::fs::create_dir_all(&home).unwrap();
    let data = d.join("perf.data");
    perf_record_user(&data, &d.join("p"), Some(&home));
    assert!(cache.join(".build-id").is_dir(), "perf cached no file");
    // The program rebuilt at its path: other names, another layout, another build-id.
    gcc(src(
        "zz_rebuilt_hot",
        "zz_rebuilt_other_function_with_a_longer_body",
    ));
    let lpr = d.join("p.lpr");
    import_to(&data, &lpr);
    let top = |env_cache: bool| {
        let j = report_json(&lpr, 1, |c| {
            c.env("XDG_CACHE_HOME", d.join("xdg"));
            c.env(
                "HOME",
                if env_cache {
                    home.clone()
                } else {
                    d.join("none")
                },
            );
        });
        (
            j["tables"][0]["rows"][0]["name"]
                .as_str()
                .unwrap()
                .to_string(),
            j["warnings"].to_string(),
        )
    };
    // perf's answer on its file, from its cache.
    let theirs = perf_sym_rows_with(&data, &home);
    assert_eq!(theirs[0].0, "first_hot_loop", "{theirs:?}");
    let (name, _) = top(true);
    assert_eq!(name, "first_hot_loop");
    // Without perf's copy, the rebuilt file is read with a warning naming both build-ids.
    let (_, warnings) = top(false);
    let recorded = perf_buildid(&data, &d.join("p"));
    assert!(
        warnings.contains(&recorded) && warnings.contains("build-id"),
        "{recorded}: {warnings}"
    );
}

/// The build-id `perf buildid-list` gives for `file` in `data`.
fn perf_buildid(data: &Path, file: &Path) -> String {
    let o = Command::new("perf")
        .args(["buildid-list", "-i"])
        .arg(data)
        .output()
        .unwrap();
    String::from_utf8_lossy(&o.stdout)
        .lines()
        .find_map(|l| {
            let (id, path) = l.split_once(' ')?;
            (Path::new(path) == file).then(|| id.to_string())
        })
        .unwrap_or_else(|| panic!("{}: no build-id", file.display()))
}

/// Records the bench (static, with symbols) copied into `dir` as `name`.
fn record_copy(dir: &Path, exe: &Path) -> PathBuf {
    let out = dir.join("run.lpr");
    let o = Command::new(bin("labperf-agent"))
        .args(["record", "-e", "cpu-clock", "-c", "200000", "-o"])
        .arg(&out)
        .arg("--")
        .arg(exe)
        .args(["--duration", "0.6", "--classes", "nops"])
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    out
}

fn top_name(file: &Path, home: &Path) -> String {
    let j = report_json(file, 1, |c| {
        c.env("HOME", home)
            .env("XDG_CACHE_HOME", home.join("cache"));
    });
    j["tables"][0]["rows"][0]["name"]
        .as_str()
        .unwrap()
        .to_string()
}

fn objcopy(args: &[&str], from: &Path, to: &Path) {
    let o = Command::new("objcopy")
        .args(args)
        .arg(from)
        .arg(to)
        .output()
        .expect("objcopy (binutils) is installed by `cargo xtask setup`");
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
}

#[test]
fn stripped_binaries_are_named_from_their_debug_files() {
    let d = scratch("sym-debuglink");
    let home = d.join("home");
    // By .gnu_debuglink (no build-id: the link's CRC is the proof): bench.debug beside it.
    let plain = d.join("plain");
    objcopy(
        &["--remove-section", ".note.gnu.build-id"],
        &bin("labperf-bench"),
        &plain,
    );
    objcopy(&["--only-keep-debug"], &plain, &d.join("bench.debug"));
    let exe = d.join("bench");
    objcopy(&["--strip-all"], &plain, &d.join("stripped"));
    std::fs::copy(d.join("bench.debug"), d.join("bench.debug.keep")).unwrap();
    Command::new("objcopy")
        .arg("--add-gnu-debuglink=bench.debug")
        .arg(d.join("stripped"))
        .arg(&exe)
        .current_dir(&d)
        .status()
        .unwrap();
    let run = record_copy(&d, &exe);
    assert_eq!(top_name(&run, &home), "nops");
    // In .debug/ beside it.
    std::fs::create_dir_all(d.join(".debug")).unwrap();
    std::fs::rename(d.join("bench.debug"), d.join(".debug/bench.debug")).unwrap();
    assert_eq!(top_name(&run, &home), "nops");
    // A debug file whose CRC differs is not this file's: addresses, not wrong names.
    let mut bytes = std::fs::read(d.join(".debug/bench.debug")).unwrap();
    let n = bytes.len();
    bytes[n - 1] ^= 0xff;
    std::fs::write(d.join(".debug/bench.debug"), &bytes).unwrap();
    assert!(top_name(&run, &home).starts_with("bench+0x"));
    // By build-id, from the binary cache's <id>/debug (a stripped file with its note). What
    // a lab machine put in the cache names a binary from the cache only: never the file
    // read from its recorded path on this machine.
    let d2 = scratch("sym-cache-debug");
    let exe = d2.join("bench");
    objcopy(&["--strip-all"], &bin("labperf-bench"), &exe);
    let run = record_copy(&d2, &exe);
    let home = d2.join("home");
    assert!(top_name(&run, &home).starts_with("bench+0x"));
    let id = build_id(&exe);
    let entry = home.join("cache/labperf/binaries").join(hex(&id));
    std::fs::create_dir_all(&entry).unwrap();
    objcopy(
        &["--only-keep-debug"],
        &bin("labperf-bench"),
        &entry.join("debug"),
    );
    assert!(top_name(&run, &home).starts_with("bench+0x"));
    // The file gone from its path, its copy in the cache is read, with the debug file beside it.
    std::fs::rename(&exe, entry.join("elf")).unwrap();
    assert_eq!(top_name(&run, &home), "nops");
}

#[test]
fn vdso_samples_are_named_from_the_image_the_agent_recorded() {
    let d = scratch("sym-vdso");
    let out = d.join("vdso.lpr");
    // The bench reads the clock between work slices: through the vDSO.
    let o = Command::new(bin("labperf-agent"))
        .args(["record", "-e", "cpu-clock", "-c", "20000", "-o"])
        .arg(&out)
        .arg("--")
        .arg(bin("labperf-bench"))
        .args(["--duration", "1", "--classes", "nops"])
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let dec = labperf_common::decode_all(&std::fs::read(&out).unwrap());
    let image = dec
        .header_ext
        .unwrap()
        .vdso
        .expect("the agent records the vDSO");
    assert!(image.starts_with(b"\x7fELF"));
    let j = report_json(&out, 0, |_| {});
    let vdso: Vec<&str> = j["tables"][0]["rows"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|r| r["dso"] == "[vdso]")
        .map(|r| r["name"].as_str().unwrap())
        .collect();
    assert!(!vdso.is_empty(), "no [vdso] samples: {j}");
    // perf's choice among the aliases: the global __vdso_ name, not the weak one.
    assert!(vdso.iter().all(|n| n.starts_with("__vdso_")), "{vdso:?}");
}

#[test]
fn record_host_fetches_the_debug_files_of_stripped_libraries() {
    let (libc, debug) = libc();
    let s = Sshd::start("sym-remote-debug");
    let kh = s.dir.join("known_hosts");
    std::fs::write(s.dir.join("w.py"), PY).unwrap();
    let o = labperf_in(&s.dir)
        .args(["record", "--host", &s.spec(), "--known-hosts"])
        .arg(&kh)
        .arg("--identity")
        .arg(s.dir.join("client_key"))
        .arg("--remote-dir")
        .arg(s.dir.join("remote"))
        .args(["--accept-new-host-key", "-e", "cpu-clock", "-c", "200000"])
        .args(["--format", "json", "--top", "10", "-o"])
        .arg(s.dir.join("py.lpr"))
        .arg("--")
        .arg("python3")
        .arg(s.dir.join("w.py"))
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let entry = s
        .dir
        .join("cache/labperf/binaries")
        .join(hex(&build_id(&libc)));
    assert_eq!(
        std::fs::read(entry.join("debug")).ok().map(|b| b.len()),
        Some(std::fs::metadata(&debug).unwrap().len() as usize),
        "libc's debug file was fetched into {}\n{}",
        entry.display(),
        String::from_utf8_lossy(&o.stderr)
    );
    // The report is on standard error: standard output, a pipe here, is the workload's.
    let j = labperf_tests::recorded_json(&o.stderr);
    assert!(
        j["tables"][0]["rows"]
            .as_array()
            .unwrap()
            .iter()
            .any(|r| r["name"].as_str().unwrap().starts_with("__memmove")),
        "{j}"
    );
}
