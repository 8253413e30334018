//! The inputs of the view goldens (`tests/views.rs` compares, `cargo xtask bless views`
//! rewrites `tests/data/views/`): one file per report view, built here byte for byte the
//! same on every run; the plain and metrics views name functions from
//! `tests/data/views/cxx.elf`, whose C++ names hold commas.

use crate::alpha::{MEM_OP_LOAD, MEM_OP_PFETCH, MEM_OP_STORE, MEM_TLB_HIT, MEM_TLB_MISS};
use crate::{bin, root};
use labperf_common::*;
use std::path::{Path, PathBuf};
use std::process::Command;

/// A C++ name as reports show it by default (as perf does): no parameter list.
pub const CXX_FIND: &str =
    "std::map<int, int, std::less<int>, std::allocator<std::pair<int const, int> > >::find";
/// The same with `--full-names`.
pub const CXX_FIND_FULL: &str =
    "std::map<int, int, std::less<int>, std::allocator<std::pair<int const, int> > >::find(int const&) const";
/// cxx.elf's functions (nm -S): map_find 0x40010c+0x1c, plain_c 0x400128+2.
pub const FIND_AT: u64 = 0x40_0110;
pub const PLAIN_AT: u64 = 0x40_0129;

pub fn views() -> PathBuf {
    root().join("tests/data/views")
}

pub fn event(name: &str, leader: Option<u32>, sample_type: u64) -> EventDesc {
    EventDesc {
        name: name.into(),
        attr: Attr {
            size: 136,
            sample_type,
            ..Default::default()
        },
        leader,
    }
}

pub fn header(events: Vec<EventDesc>, r: &Recipe) -> Header {
    Header {
        agent_version: "golden".into(),
        arch: Arch::X86_64,
        endian: Endian::Little,
        kernel_release: "6.1.0-golden".into(),
        cpu: CpuId::Unknown {
            cpuinfo: "golden".into(),
        },
        hostname: "golden".into(),
        command: vec!["./app".into()],
        clock_id: 1,
        start_time_ns: 0,
        start_realtime_ns: 0,
        events,
        mode: r.mode_string(),
        notes: vec![],
    }
}

/// A complete version-2 file: header, its recipe, the records, a trailer.
pub fn file(events: Vec<EventDesc>, recipe: Recipe, records: &[Record]) -> Vec<u8> {
    let mut e = Encoder::new();
    let mut f = Encoder::prelude().to_vec();
    f.extend(e.header_frame(&header(events, &recipe)));
    f.extend(e.header_ext_frame(&HeaderExt {
        recipe: Some(recipe),
        ..Default::default()
    }));
    let samples = records
        .iter()
        .filter(|r| matches!(r, Record::Sample(_)))
        .count() as u64;
    for r in records {
        e.push(r);
    }
    if let Some(fr) = e.flush() {
        f.extend(fr);
    }
    f.extend(e.trailer_frame(&Trailer {
        records: records.len() as u64,
        frames: 1,
        samples,
        ..Default::default()
    }));
    f
}

/// The cxx.elf mapping of process 1, named by its build-id and found through --symfs.
pub fn cxx_map() -> Record {
    let data = std::fs::read(views().join("cxx.elf")).unwrap();
    use object::Object;
    let id = object::File::parse(&*data)
        .unwrap()
        .build_id()
        .unwrap()
        .map(<[u8]>::to_vec);
    Record::Mmap2(Mmap2 {
        pid: 1,
        tid: 1,
        addr: 0x40_0000,
        len: 0x1000,
        pgoff: 0,
        prot: 5,
        flags: 2,
        build_id: id,
        path: "/cxx.elf".into(),
    })
}

pub fn sample(ip: u64, period: u64, values: Vec<u64>) -> Record {
    Record::Sample(Sample {
        pid: 1,
        tid: 1,
        ip,
        period,
        values,
        ..Default::default()
    })
}

pub fn plain() -> Vec<u8> {
    let mut r = vec![cxx_map()];
    r.extend((0..5).map(|_| sample(FIND_AT, 1000, vec![])));
    r.extend((0..3).map(|_| sample(PLAIN_AT, 1000, vec![])));
    // In the mapping but in no function; and in no mapping at all.
    r.push(sample(0x40_0800, 1000, vec![]));
    r.push(sample(0x7000, 1000, vec![]));
    file(
        vec![event("cycles", None, 0x107)],
        Recipe::Sample { group_read: false },
        &r,
    )
}

pub fn metrics() -> Vec<u8> {
    metrics_with(50)
}

/// [`metrics`] with `find_ins` instructions in each of `find`'s three windows (CPI
/// 100/find_ins).
pub fn metrics_with(find_ins: u64) -> Vec<u8> {
    // Alternating periods: a 900-cycle period, then a 100-cycle window whose counts are
    // the window's. Group {cycles, instructions, branch-misses}, cumulative.
    let mut r = vec![cxx_map()];
    let mut t = [0u64; 3];
    let mut pair = |r: &mut Vec<Record>, start: u64, end: u64, ins: u64, bm: u64| {
        t[0] += 900;
        t[1] += 900;
        r.push(sample(start, 900, t.to_vec()));
        t[0] += 100;
        t[1] += ins;
        t[2] += bm;
        r.push(sample(end, 100, t.to_vec()));
    };
    for _ in 0..3 {
        pair(&mut r, FIND_AT, FIND_AT, find_ins, 1); // CPI 2 in metrics()
    }
    pair(&mut r, PLAIN_AT, PLAIN_AT, 100, 0); // CPI 1
    pair(&mut r, FIND_AT, PLAIN_AT, 80, 0); // crosses functions: discarded
    file(
        vec![
            event("cycles", None, 0x117),
            event("instructions", Some(0), 0),
            event("branch-misses", Some(0), 0),
        ],
        Recipe::Strobe {
            mode: StrobeMode::KernelV4,
            period: 1000,
            window: 100,
            jitter: false,
        },
        &r,
    )
}

pub fn topdown() -> Vec<u8> {
    topdown_of(&[
        (1_001_281_330, [4000, 230, 153, 296, 321]),
        (2_003_009_005, [4000, 50, 68, 466, 416]),
    ])
}

/// A `stat --topdown` level-1 file of the intervals `(time, [slots, retiring, bad spec,
/// frontend bound, backend bound])` (slot counts, deltas).
pub fn topdown_of(intervals: &[(u64, [u64; 5])]) -> Vec<u8> {
    let names = [
        "slots",
        "topdown-retiring",
        "topdown-bad-spec",
        "topdown-fe-bound",
        "topdown-be-bound",
    ];
    let events = names
        .iter()
        .enumerate()
        .map(|(i, n)| event(n, (i > 0).then_some(0), 0))
        .collect();
    let interval = |time: u64, v: [u64; 5]| {
        Record::Interval(Interval {
            time,
            tid: None,
            delta: true,
            counts: v
                .iter()
                .enumerate()
                .map(|(i, &value)| Count {
                    event: i as u32,
                    value,
                    time_enabled: 1,
                    time_running: 1,
                })
                .collect(),
        })
    };
    let records: Vec<Record> = intervals.iter().map(|&(t, v)| interval(t, v)).collect();
    file(
        events,
        Recipe::StatTopdown {
            level: 1,
            legacy: false,
            pmu: "cpu".into(),
        },
        &records,
    )
}

pub fn mem() -> Vec<u8> {
    let mut r = vec![cxx_map()];
    let mut push = |ip: u64, addr: u64, src: u64| {
        r.push(Record::Sample(Sample {
            pid: 1,
            tid: 1,
            ip,
            addr: Some(addr),
            data_src: Some(src),
            ..Default::default()
        }))
    };
    for i in 0..4 {
        let tlb = if i == 3 { MEM_TLB_MISS } else { MEM_TLB_HIT };
        push(FIND_AT, 0x1_4000_0000, MEM_OP_LOAD | tlb);
    }
    push(PLAIN_AT, 0x1_4000_2000, MEM_OP_STORE | MEM_TLB_HIT);
    push(PLAIN_AT, 0x1_4000_0000, MEM_OP_PFETCH | MEM_TLB_MISS);
    file(
        vec![event("cpu/cycles,profileme/", None, 0x1_8507)],
        Recipe::Mem,
        &r,
    )
}

/// `labperf report FILE --format F --top 0 --symfs tests/data/views` (no view option).
pub fn report(f: &Path, format: &str) -> String {
    let o = Command::new(bin("labperf"))
        .args(["report", "--top", "0", "--format", format, "--symfs"])
        .arg(views())
        .arg(f)
        .env("XDG_CACHE_HOME", f.with_extension("cache"))
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    String::from_utf8(o.stdout).unwrap()
}

/// Each view's input in `dir`: (view, the file to report). Built ones are written there;
/// the ProfileMe and interval views read committed golden recordings.
pub fn inputs(dir: &Path) -> Vec<(&'static str, PathBuf)> {
    let built: [(&str, Vec<u8>); 4] = [
        ("plain", plain()),
        ("metrics", metrics()),
        ("topdown", topdown()),
        ("mem", mem()),
    ];
    let mut v: Vec<(&'static str, PathBuf)> = built
        .into_iter()
        .map(|(view, bytes)| {
            let p = dir.join(format!("{view}.lpr"));
            std::fs::write(&p, bytes).unwrap();
            (view, p)
        })
        .collect();
    v.push((
        "profileme",
        root().join("tests/data/c-agent-x86_64-v2-profileme/record.lpr"),
    ));
    v.push(("intervals", root().join("tests/data/v2-stat/record.lpr")));
    v
}

/// Every golden of `tests/data/views/` as labperf renders it today: (file name, text), the
/// CSV, JSON and table of each view's input (`inputs`, written into `dir`).
pub fn rendered(dir: &Path) -> Vec<(String, String)> {
    let mut out = Vec::new();
    for (view, f) in inputs(dir) {
        for (format, ext) in [("csv", "csv"), ("json", "json"), ("table", "txt")] {
            out.push((format!("{view}.{ext}"), report(&f, format)));
        }
    }
    out
}

/// A recursive C program: `dive` calls itself `depth` times (its first argument), then
/// spins in `spin`, for 0.4 s of CPU time; `sink++` after each call keeps every frame.
const DEEP_C: &str = r#"
#include <stdlib.h>
#include <time.h>
static volatile unsigned long sink;
__attribute__((noinline)) static void spin(void) {
    for (unsigned long i = 0; i < 20000; i++) sink += i;
}
__attribute__((noinline)) static void dive(int depth) {
    if (depth == 0) { spin(); return; }
    dive(depth - 1);
    sink++;
}
int main(int argc, char **argv) {
    int depth = argc > 1 ? atoi(argv[1]) : 100;
    struct timespec t;
    do {
        dive(depth);
        clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
    } while (t.tv_sec * 1000000000L + t.tv_nsec < 400000000L);
    return 0;
}
"#;

/// Builds the recursive program in `dir` (gcc, dynamically linked, frame pointers kept)
/// and records it there with `labperf record --local -g -e cpu-clock -c 250000`, `depth`
/// calls deep: returns the recording and the program.
pub fn record_deep(dir: &Path, depth: u32) -> (PathBuf, PathBuf) {
    record_deep_via(dir, depth, &[])
}

/// [`record_deep`] with the program started by `via` (`["env"]`: `env` execs it).
pub fn record_deep_via(dir: &Path, depth: u32, via: &[&str]) -> (PathBuf, PathBuf) {
    std::fs::write(dir.join("deep.c"), DEEP_C).unwrap();
    crate::known::compile(
        dir,
        "gcc",
        &[
            "-O1",
            "-g",
            "-fno-omit-frame-pointer",
            "-o",
            "deep",
            "deep.c",
        ],
    );
    let (exe, out) = (dir.join("deep"), dir.join("deep.lpr"));
    let o = Command::new(bin("labperf"))
        .args([
            "record",
            "--local",
            "-g",
            "-e",
            "cpu-clock",
            "-c",
            "250000",
            "-o",
        ])
        .arg(&out)
        .arg("--")
        .args(via)
        .arg(&exe)
        .arg(depth.to_string())
        .output()
        .unwrap();
    assert!(
        o.status.success(),
        "labperf record of the recursive program: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    (out, exe)
}
