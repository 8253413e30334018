//! Record files and mapped paths made to hurt the reader: devices, FIFOs, floods of frames,
//! huge frames, floods of mappings, deep stacks over long names, many thread names, many
//! events, names that would forge folded lines. Every verb must finish quickly, with memory
//! bounded by a small multiple of the file (the bound `ARCHITECTURE.md` states).

use labperf_common::*;
use labperf_tests::{bin, scratch};
use std::path::Path;
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

/// Runs `c` (labperf) to the end; returns its output, its peak RSS (KiB: VmHWM, which
/// labperf prints at exit with LABPERF_PEAK_MEMORY; a child's rusage would count its
/// parent's memory from before its exec) and its wall time.
fn measured(c: &mut Command) -> (Output, u64, Duration) {
    let (o, rss, t) = measured_within(c, Duration::from_secs(600));
    let rss = rss.unwrap_or_else(|| {
        panic!(
            "labperf said nothing of its memory: {}",
            String::from_utf8_lossy(&o.stderr)
        )
    });
    (o, rss, t)
}

/// [`measured`], the command killed once it has run for `limit` (its peak RSS then
/// unknown: `None`).
/// The CPU time (user and system) of this process's children reaped so far.
fn children_cpu() -> Duration {
    // SAFETY: getrusage fills the struct it is given.
    let mut u: libc::rusage = unsafe { std::mem::zeroed() };
    assert_eq!(unsafe { libc::getrusage(libc::RUSAGE_CHILDREN, &mut u) }, 0);
    let tv = |t: libc::timeval| Duration::new(t.tv_sec as u64, t.tv_usec as u32 * 1000);
    tv(u.ru_utime) + tv(u.ru_stime)
}

fn measured_within(c: &mut Command, limit: Duration) -> (Output, Option<u64>, Duration) {
    c.env("LABPERF_PEAK_MEMORY", "1");
    let t = Instant::now();
    let mut child = c
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // Read the pipes on threads (stdout's first MiB kept: folded stacks of a hostile file
    // can be a GiB), then reap the child.
    let (mut so, mut se) = (child.stdout.take().unwrap(), child.stderr.take().unwrap());
    let a = std::thread::spawn(move || {
        let mut v = Vec::new();
        let mut buf = vec![0u8; 1 << 16];
        loop {
            match std::io::Read::read(&mut so, &mut buf) {
                Ok(0) => break,
                Ok(n) if v.len() < 1 << 20 => v.extend_from_slice(&buf[..n]),
                Ok(_) => {}
                Err(e) => panic!("{e}"),
            }
        }
        v
    });
    let b = std::thread::spawn(move || {
        let mut v = Vec::new();
        std::io::Read::read_to_end(&mut se, &mut v).unwrap();
        v
    });
    let status = loop {
        if let Some(st) = child.try_wait().unwrap() {
            break st;
        }
        if t.elapsed() > limit {
            child.kill().unwrap();
            break child.wait().unwrap();
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    let out = Output {
        status,
        stdout: a.join().unwrap(),
        stderr: b.join().unwrap(),
    };
    let err = String::from_utf8_lossy(&out.stderr);
    let peak = err
        .lines()
        .find_map(|l| l.strip_prefix("labperf: peak memory "))
        .and_then(|v| v.trim_end_matches(" kB").trim().parse().ok());
    (out, peak, t.elapsed())
}

fn header() -> Header {
    labperf_tests::golden::header(labperf_tests::golden::Kind::Sample)
}

/// A file of `header`, then `frames` (each a list of records), then a trailer.
fn write(path: &Path, frames: impl IntoIterator<Item = Vec<Record>>) -> u64 {
    write_with(path, &header(), frames)
}

/// [`write`] with header `h`.
fn write_with(path: &Path, h: &Header, frames: impl IntoIterator<Item = Vec<Record>>) -> u64 {
    let mut enc = Encoder::new();
    let mut f = Encoder::prelude().to_vec();
    f.extend(enc.header_frame(h));
    for fr in frames {
        for r in &fr {
            enc.push(r);
        }
        if let Some(b) = enc.flush() {
            f.extend(b);
        }
    }
    f.extend(enc.trailer_frame(&Trailer::default()));
    std::fs::write(path, &f).unwrap();
    f.len() as u64
}

fn labperf(args: &[&str], file: &Path) -> Command {
    let mut c = Command::new(bin("labperf"));
    c.args(args)
        .arg(file)
        .env("XDG_CACHE_HOME", file.with_extension("cache"));
    c
}

/// The memory bound of ARCHITECTURE.md: 8 x the file, plus 64 MiB, plus 1.25 KiB per
/// distinct sampled address, thread name or interval count. A file names a new address in
/// about 4 bytes,
/// and a report or export keeps a name, a row or a stack per address: measured at 1,000,000
/// addresses (debug build), `report` 0.27 KiB each, svg 0.32, parquet 0.42, every row as
/// JSON 0.66, pprof 0.73, firefox 0.94 (the Firefox Profiler's tables, in
/// `fxprof-processed-profile`); 1.25 leaves a margin. A thread's name costs less (1 KiB
/// at 80,000 names in the Firefox format), and so does an interval's count, a row of the
/// intervals view (1.1 KiB at 80,000 in the HTML report). The Firefox format adds
/// [`FIREFOX_KIB_PER_1K_SAMPLES`].
fn bound_kib(file_bytes: u64, names: u64) -> u64 {
    (8 * file_bytes + (64 << 20)) / 1024 + names * 5 / 4
}

/// What the Firefox format holds per sample beyond the bound (its sample tables, and the
/// samples in time order): 64 bytes, in KiB per thousand samples.
const FIREFOX_KIB_PER_1K_SAMPLES: u64 = 64 * 1000 / 1024;

/// The distinct addresses of `dense.lpr`.
const DENSE: u64 = 200_000;

#[test]
fn devices_and_fifos_are_refused_as_record_files() {
    let d = scratch("hostile-devices");
    let fifo = d.join("fifo.lpr");
    let c = std::ffi::CString::new(fifo.to_str().unwrap()).unwrap();
    // SAFETY: creating a FIFO at a path of ours.
    assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
    for verb in ["report", "info", "dump"] {
        for f in [
            Path::new("/dev/zero"),
            Path::new("/dev/urandom"),
            fifo.as_path(),
        ] {
            let (o, rss, t) = measured(&mut labperf(&[verb], f));
            let err = String::from_utf8_lossy(&o.stderr);
            assert_eq!(o.status.code(), Some(1), "{verb} {}: {err}", f.display());
            assert!(err.contains("not a regular file"), "{err}");
            assert!(
                t < Duration::from_secs(5) && rss < 64 << 10,
                "{verb}: {t:?}, {rss} KiB"
            );
        }
    }
}

#[test]
fn mapped_devices_and_fifos_are_never_read() {
    let d = scratch("hostile-maps");
    let fifo = d.join("fifo.so");
    let c = std::ffi::CString::new(fifo.to_str().unwrap()).unwrap();
    // SAFETY: creating a FIFO at a path of ours.
    assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
    let paths = [
        "/dev/zero".to_string(),
        "/dev/urandom".to_string(),
        "/proc/self/mem".to_string(),
        fifo.display().to_string(),
        d.display().to_string(),
    ];
    let mut recs = Vec::new();
    for (i, p) in paths.iter().enumerate() {
        let base = 0x100_0000 * (i as u64 + 1);
        recs.push(Record::Mmap2(Mmap2 {
            pid: 5,
            tid: 5,
            addr: base,
            len: 0x10000,
            path: p.clone(),
            ..Default::default()
        }));
        recs.push(Record::Sample(Sample {
            pid: 5,
            tid: 5,
            ip: base + 0x40,
            period: 1,
            ..Default::default()
        }));
    }
    let f = d.join("maps.lpr");
    write(&f, [recs]);
    for verb in ["report", "dump", "info"] {
        let (o, rss, t) = measured(&mut labperf(&[verb], &f));
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        assert!(t < Duration::from_secs(10), "{verb} took {t:?}");
        assert!(rss < 64 << 10, "{verb}: {rss} KiB");
    }
}

/// Writes the large crafted files into `d`. In the test's own process: labperf's peak is
/// the VmHWM it prints of its own address space after exec (`measured`), which nothing of
/// this process's memory reaches.
fn write_large_crafted_files(d: &Path) {
    // 1.5 million empty records frames: 54 MB of nothing.
    let empty = d.join("empty-frames.lpr");
    {
        let mut enc = Encoder::new();
        let mut f = Encoder::prelude().to_vec();
        f.extend(enc.header_frame(&header()));
        let one = frame::build(FRAME_RECORDS, 0, 0, 0, &[]);
        for seq in 0..1_500_000u32 {
            let mut fr = one.clone();
            fr[8..12].copy_from_slice(&(seq + 1).to_le_bytes());
            let hc = labperf_common::crc::crc32(&fr[..32]);
            fr[32..36].copy_from_slice(&hc.to_le_bytes());
            f.extend_from_slice(&fr);
        }
        std::fs::write(&empty, &f).unwrap();
    }
    // One 16 MiB frame of samples with 256 group values each.
    let values = d.join("values.lpr");
    let sample = |i: u64, n: usize| {
        Record::Sample(Sample {
            pid: 1,
            tid: 1,
            ip: 0x1000 + i,
            period: 1,
            values: (0..n as u64).map(|k| k * 1_000_003 + i).collect(),
            ..Default::default()
        })
    };
    let mut recs = Vec::new();
    let mut enc = Encoder::new();
    let mut i = 0;
    while enc.pending_bytes() < 15 << 20 {
        let r = sample(i, 256);
        enc.push(&r);
        recs.push(r);
        i += 1;
    }
    write(&values, [recs]);
    // A flood of mappings: 2 million of them, in 7 processes that each have a sample.
    many_maps(&d.join("maps.lpr"), 2_000_000);
    // Dense samples: DENSE of them, each at its own address (so as many rows, stacks and
    // frames), about 4 bytes each: what reports and exports keep per address.
    let dense = d.join("dense.lpr");
    let frames = (0..DENSE / 50_000).map(|k| {
        (0..50_000u64)
            .map(|j| {
                let i = k * 50_000 + j;
                Record::Sample(Sample {
                    pid: 1,
                    tid: 1,
                    ip: 0x1000 + i,
                    time: i,
                    period: 1,
                    ..Default::default()
                })
            })
            .collect::<Vec<_>>()
    });
    write(&dense, frames);
}

/// A flood of mappings: `n` of them, each a distinct address and path, in 7 processes
/// that each have a sample (so every mapping must be kept).
fn many_maps(path: &Path, n: u64) -> u64 {
    let frames = (0..n / 50_000).map(|k| {
        (0..50_000u64)
            .map(|j| {
                let i = k * 50_000 + j;
                Record::Mmap2(Mmap2 {
                    pid: (i % 7) as u32,
                    addr: i * 0x2000,
                    len: 0x1000,
                    path: format!("/l/{i}"),
                    ..Default::default()
                })
            })
            .collect::<Vec<_>>()
    });
    let samples = (0..7u32).map(|pid| {
        Record::Sample(Sample {
            pid,
            tid: pid,
            ip: u64::from(pid) * 0x2000 + 8,
            period: 1,
            ..Default::default()
        })
    });
    write(path, frames.chain(std::iter::once(samples.collect())))
}

/// The kernel text the deep-stack files sample: functions of 16 bytes from here.
const KTEXT: u64 = 0xffff_ffff_8100_0000;

/// Kernel functions named `names`, 16 bytes each from [`KTEXT`].
fn ksyms(names: &[String]) -> Record {
    Record::KernelSymbols(KernelSymbols {
        syms: names
            .iter()
            .enumerate()
            .map(|(i, n)| KernelSymbol {
                start: KTEXT + 16 * i as u64,
                end: KTEXT + 16 * (i as u64 + 1),
                name: n.clone(),
                module: None,
            })
            .collect(),
        hidden: None,
    })
}

/// A file of `stacks` distinct samples, each with a `depth`-deep kernel callchain over
/// the kernel functions `names` (the sample's ip in the first), its return addresses drawn
/// at random: every entry a byte of the file, and every stack soon a path of its own. The
/// thread is named by one COMM record.
fn deep_stacks(path: &Path, stacks: u64, depth: usize, names: &[String]) -> u64 {
    let comm = Record::Comm(Comm {
        pid: 1,
        tid: 1,
        comm: "deep".into(),
        exec: true,
    });
    let k = names.len() as u64;
    let frames = (0..stacks.div_ceil(500)).map(|f| {
        let mut v: Vec<Record> = (f * 500..stacks.min((f + 1) * 500))
            .map(|i| {
                let mut x = i.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1;
                let callchain = (0..depth)
                    .map(|j| {
                        x ^= x << 13;
                        x ^= x >> 7;
                        x ^= x << 17;
                        let r = if j == 0 { i % k } else { x % k };
                        // A return address in function r (looked up one byte back).
                        KTEXT + 16 * r + 8
                    })
                    .collect();
                Record::Sample(Sample {
                    pid: 1,
                    tid: 1,
                    ip: KTEXT + 4,
                    time: i,
                    period: 1,
                    callchain,
                    ..Default::default()
                })
            })
            .collect();
        if f == 0 {
            v.insert(0, comm.clone());
        }
        v
    });
    let frames: Vec<Vec<Record>> = frames.chain(std::iter::once(vec![ksyms(names)])).collect();
    write(path, frames)
}

/// A file of `threads` threads of one process, each named by its own COMM record and
/// sampled once (at one of four addresses): the names an export looks up.
fn many_comms(path: &Path, threads: u32) -> u64 {
    let recs: Vec<Record> = (0..threads)
        .flat_map(|i| {
            [
                Record::Comm(Comm {
                    pid: 7,
                    tid: 1000 + i,
                    comm: format!("worker-{i:06}"),
                    exec: false,
                }),
                Record::Sample(Sample {
                    pid: 7,
                    tid: 1000 + i,
                    ip: 0x40_1000 + 16 * u64::from(i % 4),
                    time: u64::from(i),
                    period: 1,
                    ..Default::default()
                }),
            ]
        })
        .collect();
    write(path, recs.chunks(20_000).map(<[Record]>::to_vec))
}

/// The distinct callchains of `deep.lpr`.
const DEEP: u64 = 640;

/// Writes the files of the tests below into `d` (in the test's own process, as
/// [`write_large_crafted_files`]): `long-names.lpr`, 100 distinct 4,096-deep callchains
/// over two kernel functions with 2 KiB names; `deep.lpr`, [`DEEP`] distinct 4,096-deep
/// callchains over three; `maps.lpr`, 500,000 mappings; `comms-10k.lpr` and
/// `comms-80k.lpr`, as many threads, each with its own name.
fn write_deep_stack_files(d: &Path) {
    let long: Vec<String> = (0..2).map(|i| format!("{i}{}", "x".repeat(2047))).collect();
    deep_stacks(&d.join("long-names.lpr"), 100, 4096, &long);
    let short: Vec<String> = (0..3).map(|i| format!("kernel_function_{i}")).collect();
    deep_stacks(&d.join("deep.lpr"), DEEP, 4096, &short);
    many_maps(&d.join("maps.lpr"), 500_000);
    many_comms(&d.join("comms-10k.lpr"), 10_000);
    many_comms(&d.join("comms-80k.lpr"), 80_000);
}

/// The files of [`write_deep_stack_files`], written into a scratch directory of `test`.
fn deep_stack_files(test: &str) -> std::path::PathBuf {
    let d = scratch(test);
    write_deep_stack_files(&d);
    d
}

/// Every verb that reads a whole recording: each report (with the `--children` and call
/// graph trees), `info`, `dump`, every export format and the HTML report. `OUT` stands for
/// an output file.
const EVERY_VERB: &[&[&str]] = &[
    &["report"],
    &["report", "--children"],
    &["report", "--call-graph", "caller"],
    &["report", "--call-graph", "callee", "--children"],
    &[
        "report",
        "--call-graph",
        "caller",
        "--top",
        "0",
        "--format",
        "json",
    ],
    &["info"],
    &["dump"],
    // To standard output (read, not kept): 800 MB of lines for long-names.lpr.
    &["export", "--format", "folded"],
    &["export", "--format", "svg", "-o", "OUT"],
    &["export", "--format", "pprof", "-o", "OUT"],
    &["export", "--format", "firefox", "-o", "OUT"],
    &["export", "--format", "parquet", "-o", "OUT"],
    &["report", "--format", "html", "-o", "OUT"],
];

/// Runs every verb on `file`, of `names` distinct sampled addresses and thread names and
/// `samples` samples: each must succeed within `limit` and the memory bound. Returns each
/// verb's time (by its index in [`EVERY_VERB`]), and prints what each took.
fn every_verb_within_the_bound(
    file: &Path,
    names: u64,
    samples: u64,
    limit: Duration,
) -> Vec<Duration> {
    let size = std::fs::metadata(file).unwrap().len();
    let out = file.with_extension("out");
    let name = file.file_name().unwrap().to_string_lossy().into_owned();
    let mut times = Vec::new();
    for args in EVERY_VERB {
        let args: Vec<&str> = args
            .iter()
            .map(|a| {
                if *a == "OUT" {
                    out.to_str().unwrap()
                } else {
                    a
                }
            })
            .collect();
        let verb = args.join(" ");
        let mut c = labperf(&args, file);
        let (o, rss, t) = measured_within(&mut c, limit);
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(t < limit, "{verb} of {name} ran past {limit:?}: killed");
        assert!(o.status.success(), "{verb} of {name}: {err}");
        let rss = rss.unwrap_or_else(|| panic!("{verb}: no peak memory: {err}"));
        eprintln!(
            "{name} ({} KB) {verb}: {} MB peak, {:.1} s",
            size >> 10,
            rss >> 10,
            t.as_secs_f64()
        );
        times.push(t);
        let bound = bound_kib(size, names)
            + if verb.contains("firefox") {
                samples * FIREFOX_KIB_PER_1K_SAMPLES / 1000
            } else {
                0
            };
        assert!(
            rss <= bound,
            "{verb} of {name} ({size} bytes, {names} addresses and thread names, {samples} samples) peaked at {rss} KiB, over its bound of {bound} KiB"
        );
    }
    times
}

#[test]
fn deep_stacks_long_names_and_many_mappings_stay_within_the_bound() {
    // Deep stacks make long folded lines, long names longer ones, and many paths make
    // large trees: every verb streams them or prunes them to what it shows (issue 25).
    let d = deep_stack_files("hostile-deep");
    // Names: the ip and a return address in each kernel function, and the thread; in
    // maps.lpr 7 samples, each its own address and process.
    for (file, names, samples) in [
        ("long-names.lpr", 4, 100),
        ("deep.lpr", 5, DEEP),
        ("maps.lpr", 14, 7),
    ] {
        every_verb_within_the_bound(&d.join(file), names, samples, Duration::from_secs(30));
    }
}

#[test]
fn process_names_are_looked_up_by_index() {
    // 80,000 threads each named once: names were looked up by a scan of those seen (24 s
    // for every export and the HTML report). Indexed, every verb takes seconds, and about
    // eight times as long as on a file of 10,000 names (less: the start-up cost is fixed).
    let d = deep_stack_files("hostile-comms");
    let (small, large) = (d.join("comms-10k.lpr"), d.join("comms-80k.lpr"));
    let times = every_verb_within_the_bound(&large, 80_004, 80_000, Duration::from_secs(15));
    let out = d.join("out");
    for (i, args) in EVERY_VERB.iter().enumerate() {
        if !matches!(args.get(2), Some(&"folded" | &"html")) {
            continue;
        }
        let args: Vec<&str> = args
            .iter()
            .map(|a| {
                if *a == "OUT" {
                    out.to_str().unwrap()
                } else {
                    a
                }
            })
            .collect();
        let (o, _, t10) = measured_within(&mut labperf(&args, &small), Duration::from_secs(60));
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        let t80 = times[i];
        eprintln!("{args:?}: 10,000 names {t10:?}, 80,000 names {t80:?}");
        // Linear: 8 times the names, at most 16 times the time (a scan is 64 times;
        // 0.5 s of slack for a loaded machine).
        assert!(
            t80.as_secs_f64() <= 16.0 * t10.as_secs_f64() + 0.5,
            "{args:?}: {t10:?} for 10,000 names, {t80:?} for 80,000"
        );
    }
}

#[test]
fn the_html_charts_find_each_thread_s_series_by_index() {
    // A `stat` recording of 80,000 threads, counted once each: the HTML report charts
    // each thread's counts as a series, and found each among those before it by a scan.
    let d = scratch("hostile-series");
    let f = d.join("stat.lpr");
    let intervals: Vec<Record> = (0..80_000u32)
        .map(|tid| {
            Record::Interval(Interval {
                time: 1_000_000,
                tid: Some(tid),
                delta: true,
                counts: vec![Count {
                    event: 0,
                    value: u64::from(tid),
                    time_enabled: 1,
                    time_running: 1,
                }],
            })
        })
        .collect();
    let size = write_with(
        &f,
        &labperf_tests::golden::header(labperf_tests::golden::Kind::Stat),
        intervals.chunks(20_000).map(<[Record]>::to_vec),
    );
    let out = d.join("stat.html");
    let mut c = Command::new(bin("labperf"));
    c.args(["report", "--format", "html", "-o"])
        .arg(&out)
        .arg(&f);
    let (o, rss, t) = measured_within(&mut c, Duration::from_secs(20));
    assert!(t < Duration::from_secs(20), "ran past 20 s: killed");
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    // Each count is a row of the report: the bound's third term counts them.
    assert!(rss.unwrap() <= bound_kib(size, 80_000), "{rss:?} KiB");
    // The ten busiest threads are charted.
    let html = std::fs::read_to_string(&out).unwrap();
    assert!(
        html.contains("thread 79999"),
        "no chart of the busiest thread"
    );
    eprintln!("{t:?}");
}

#[test]
fn unwinding_is_linear_in_the_mappings() {
    // A `--call-graph dwarf` recording of one process with 400,000 mappings: each was
    // checked against every one kept before (8·10^10 steps); now against its neighbour.
    let d = scratch("hostile-unwind");
    let f = d.join("unwind.lpr");
    let mut h = header();
    h.arch = Arch::X86_64;
    // User registers bp, sp and ip, and the user stack.
    h.events[0].attr.sample_type |= 1 << 12 | 1 << 13;
    h.events[0].attr.sample_regs_user = 0x1c0;
    h.events[0].attr.sample_stack_user = 64;
    let n = 400_000u64;
    let mut frames: Vec<Vec<Record>> = (0..n / 50_000)
        .map(|k| {
            (0..50_000)
                .map(|j| {
                    let i = k * 50_000 + j;
                    Record::Mmap2(Mmap2 {
                        pid: 3,
                        tid: 3,
                        addr: 0x10_0000 + i * 0x2000,
                        len: 0x1000,
                        path: "/nonexistent/lib.so".into(),
                        ..Default::default()
                    })
                })
                .collect()
        })
        .collect();
    frames.push(vec![Record::Sample(Sample {
        pid: 3,
        tid: 3,
        ip: 0x10_0010,
        period: 1,
        user_stack: Some(UserStack {
            regs: vec![0x7ffd_0000_0040, 0x7ffd_0000_0000, 0x10_0010],
            sp: 0x7ffd_0000_0000,
            data: vec![0; 64],
        }),
        ..Default::default()
    })]);
    let size = write_with(&f, &h, frames);
    for args in [
        &["export", "--format", "folded"][..],
        &["report", "--children"],
    ] {
        let (o, rss, t) = measured_within(&mut labperf(args, &f), Duration::from_secs(20));
        assert!(
            t < Duration::from_secs(20),
            "{args:?} ran past 20 s: killed"
        );
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        assert!(rss.unwrap() <= bound_kib(size, 1), "{args:?}: {rss:?} KiB");
        eprintln!("{args:?}: {t:?}");
    }
}

#[test]
fn names_cannot_forge_folded_lines_or_overflow_the_flame_graph() {
    // Thread and function names with newlines, `;` and a count of their own: each would
    // start a line, split a frame, or read as inferno's second (differential) count,
    // which the overflow guard did not see ("184467440737095516160.00%").
    let d = scratch("hostile-names");
    let f = d.join("names.lpr");
    let forged = " 18446744073709551615";
    let names: Vec<String> = vec![
        // A line of its own, of count u64::MAX: the sum of counts overflows.
        format!("f\nfake;stack{forged}\nrest"),
        format!("g;h{forged}"),
        format!("k\r\n{forged}"),
    ];
    let mut recs = vec![
        Record::Comm(Comm {
            pid: 1,
            tid: 1,
            comm: format!("evil\nthread;x{forged}"),
            exec: true,
        }),
        ksyms(&names),
    ];
    // Three stacks, of 5, 3 and 2 samples, each through every function.
    let chains = [[1u64, 2], [2, 0], [0, 1]];
    for (n, chain) in [5u64, 3, 2].iter().zip(chains) {
        for t in 0..*n {
            recs.push(Record::Sample(Sample {
                pid: 1,
                tid: 1,
                ip: KTEXT + 4,
                time: t,
                period: 1_000,
                callchain: chain.iter().map(|r| KTEXT + 16 * r + 8).collect(),
                ..Default::default()
            }));
        }
    }
    write(&f, [recs]);
    let o = labperf(&["export", "--format", "folded"], &f)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let folded = String::from_utf8(o.stdout).unwrap();
    // One line per stack, each of three frames below the thread, its count last and alone.
    let lines: Vec<&str> = folded.lines().collect();
    assert_eq!(lines.len(), 3, "{folded}");
    let mut total = 0;
    for l in &lines {
        let (stack, count) = l.rsplit_once(' ').unwrap();
        total += count.parse::<u64>().unwrap();
        assert_eq!(stack.split(';').count(), 4, "{l}");
        let last = stack.rsplit_once(' ').map_or("", |(_, w)| w);
        assert!(last.parse::<u64>().is_err(), "{l}: a second count");
        assert!(
            stack.starts_with("evil\\nthread_x_18446744073709551615;"),
            "{l}"
        );
    }
    assert_eq!(total, 10_000, "{folded}");
    assert!(
        folded.contains("f\\nfake_stack 18446744073709551615\\nrest;"),
        "{folded}"
    );
    // The flame graph, alone and in the HTML report: every share at most 100%.
    for args in [
        &["export", "--format", "svg", "-o"][..],
        &["report", "--format", "html", "-o"],
    ] {
        let out = d.join("out");
        let mut c = Command::new(bin("labperf"));
        let o = c.args(args).arg(&out).arg(&f).output().unwrap();
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        let svg = std::fs::read_to_string(&out).unwrap();
        // Each frame's title: `NAME (N events, P%)`.
        let shares: Vec<f64> = svg
            .split("events, ")
            .skip(1)
            .map(|s| s.split('%').next().unwrap().parse().unwrap())
            .collect();
        assert!(!shares.is_empty(), "{svg}");
        assert!(shares.iter().all(|&p| p <= 100.0), "{args:?}: {shares:?}");
        assert!(svg.contains("(10,000 events, 100.00%)"), "{svg}");
    }
}

#[test]
fn memory_is_bounded_by_a_small_multiple_of_the_file() {
    let d = scratch("hostile-memory");
    write_large_crafted_files(&d);
    let (empty, values, maps, dense) = (
        d.join("empty-frames.lpr"),
        d.join("values.lpr"),
        d.join("maps.lpr"),
        d.join("dense.lpr"),
    );
    let mut checked = Vec::new();
    let out = d.join("out");
    let out = out.to_str().unwrap();
    let common: &[&[&str]] = &[&["report"], &["info"], &["dump"]];
    let exports: &[&[&str]] = &[
        &["report"],
        &["report", "--top", "0", "--format", "json", "-o", out],
        &["export", "--format", "svg", "-o", out],
        &["export", "--format", "pprof", "-o", out],
        &["export", "--format", "firefox", "-o", out],
        &["export", "--format", "parquet", "-o", out],
        &["report", "--format", "html", "-o", out],
    ];
    // The samples of values.lpr: one per address, as many as fit in 15 MiB.
    let values_addresses = labperf_tests::report_json(&values, 1, |_| {})["summary"]
        ["total_samples"]
        .as_u64()
        .unwrap();
    assert!(values_addresses > 10_000, "{values_addresses}");
    for (file, addresses, verbs) in [
        (&empty, 0, common),
        (&values, values_addresses, common),
        (&maps, 7, common),
        (&values, values_addresses, exports),
        (&dense, DENSE, exports),
    ] {
        let size = std::fs::metadata(file).unwrap().len();
        for args in verbs {
            let verb = args.join(" ");
            let mut c = labperf(args, file);
            if verb == "dump" {
                c.stdout(Stdio::null());
            }
            let (o, rss, t) = measured(&mut c);
            assert!(
                o.status.success(),
                "{verb}: {}",
                String::from_utf8_lossy(&o.stderr)
            );
            checked.push(format!(
                "{} ({} MB) {verb}: {} MB peak, {:.1} s",
                file.file_name().unwrap().to_string_lossy(),
                size >> 20,
                rss >> 10,
                t.as_secs_f64()
            ));
            assert!(
                rss <= bound_kib(size, addresses),
                "{verb} of {} ({size} bytes, {addresses} addresses) peaked at {rss} KiB, over 8x the file + 64 MiB + 1.25 KiB per address",
                file.display()
            );
        }
    }
    eprintln!("{}", checked.join("\n"));
}

#[test]
fn symbolization_is_linear_in_the_mappings() {
    // 100 000 mappings of one process and a sample in each: a linear scan per address
    // would take 10^10 steps; an index takes moments.
    let d = scratch("hostile-linear");
    let f = d.join("linear.lpr");
    let n = 100_000u64;
    let mut recs: Vec<Record> = (0..n)
        .map(|i| {
            Record::Mmap2(Mmap2 {
                pid: 3,
                tid: 3,
                addr: i * 0x1000,
                len: 0x1000,
                path: "[anon]".into(),
                ..Default::default()
            })
        })
        .collect();
    recs.extend((0..n).map(|i| {
        Record::Sample(Sample {
            pid: 3,
            tid: 3,
            ip: i * 0x1000 + 8,
            period: 1,
            ..Default::default()
        })
    }));
    write(&f, recs.chunks(50_000).map(<[Record]>::to_vec));
    let (o, _, t) = measured(&mut labperf(&["report", "--by", "dso"], &f));
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert!(
        String::from_utf8_lossy(&o.stdout).contains(&format!("{n}")),
        "{}",
        String::from_utf8_lossy(&o.stdout)
    );
    // Seconds at most, even for a debug build on a loaded 2-core machine (quadratic
    // would be an hour).
    assert!(t < Duration::from_secs(30), "report took {t:?}");
}

#[test]
fn user_stacks_past_a_frames_budget_are_damage_not_work() {
    // One frame: a 64 KiB user stack, then 20,000 samples that repeat it whole (a few bytes
    // each, 1.3 GB of stack to rebuild). A reader rebuilds at most 8 MiB per frame (and
    // 256 bytes per payload byte): the rest of the frame is damage, read in no time.
    let d = scratch("hostile-ustack");
    let f = d.join("ustack.lpr");
    let stack = UserStack {
        regs: vec![0, 0x7ffd_0000_0000, 0x40_1000],
        sp: 0x7ffd_0000_0000,
        data: vec![7; 65536],
    };
    let samples = (0..20_000u64).map(|i| {
        Record::Sample(Sample {
            pid: 1,
            tid: 1,
            ip: 0x40_1000,
            time: i,
            period: 1,
            user_stack: Some(stack.clone()),
            ..Default::default()
        })
    });
    let size = write(&f, [samples.collect::<Vec<_>>()]);
    assert!(size < 2 << 20, "{size} bytes");
    for args in [&["report"][..], &["report", "--children"]] {
        let (o, rss, t) = measured(&mut labperf(args, &f));
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(o.status.success(), "{err}");
        assert!(
            err.contains("more user stack than a frame may rebuild"),
            "{err}"
        );
        assert!(t < Duration::from_secs(10), "{args:?}: {t:?}");
        assert!(rss <= bound_kib(size, 1), "{args:?}: {rss} KiB");
    }
}

/// What each sampled event may cost beyond [`bound_kib`], in KiB: its tables (measured at
/// 20,000 events of one sample each, debug build: 3.5 KiB for the plain report, 6.4 with
/// `--children`, 11.2 with a call graph: two tables, each its columns and summary).
const EVENT_KIB: u64 = 16;

/// The events of `many-events.lpr`, each sampled once.
const EVENTS: u32 = 20_000;

/// A header of `events` sampling events (`ev00000`, ...) and a sample of each, with a
/// callchain: its own function, called from one of 100.
fn many_events(path: &Path, events: u32) -> u64 {
    let mut h = header();
    let attr = h.events[0].attr.clone();
    h.mode = "sample".into();
    h.events = (0..events)
        .map(|i| EventDesc {
            name: format!("ev{i:05}"),
            attr: attr.clone(),
            leader: None,
        })
        .collect();
    let recs: Vec<Record> = (0..events)
        .map(|i| {
            let ip = 0x40_1000 + 16 * u64::from(i);
            Record::Sample(Sample {
                event: i,
                pid: 7,
                tid: 7,
                ip,
                time: u64::from(i),
                period: 1000,
                callchain: vec![ip, 0x30_0000 + 16 * u64::from(i % 100)],
                ..Default::default()
            })
        })
        .collect();
    write_with(path, &h, recs.chunks(5_000).map(<[Record]>::to_vec))
}

#[test]
fn many_events_cost_what_their_samples_cost() {
    // A file can name thousands of events, one sample each: a table per event must not
    // cost a pass over every stack or frame per event (quadratic), nor a flame graph, a
    // pprof value or a Firefox track per event whatever their number.
    let d = scratch("hostile-events");
    let file = d.join("many-events.lpr");
    let size = many_events(&file, EVENTS);
    let out = d.join("out");
    let out = out.to_str().unwrap();
    let names = u64::from(EVENTS) + 100 + 1;
    let limit = Duration::from_secs(30);
    // (verb, whether it succeeds, what its error says).
    let verbs: &[(&[&str], bool, &str)] = &[
        (&["report"], true, ""),
        (&["report", "--children"], true, ""),
        (&["report", "--call-graph", "caller"], true, ""),
        (
            &["report", "--call-graph", "callee", "--children"],
            true,
            "",
        ),
        (&["report", "--format", "json", "-o", out], true, ""),
        (&["report", "--format", "html", "-o", out], true, ""),
        (&["report", "--event", "ev12345"], true, ""),
        (
            &["export", "--format", "folded"],
            false,
            "pass --event NAME",
        ),
        (
            &["export", "--format", "svg", "-o", out],
            false,
            "pass --event NAME",
        ),
        (
            &["export", "--format", "pprof", "-o", out],
            false,
            "export at most 64",
        ),
        (&["export", "--format", "firefox", "-o", out], true, ""),
        (&["export", "--format", "parquet", "-o", out], true, ""),
    ];
    let mut took = Vec::new();
    for &(args, ok, says) in verbs {
        let verb = args.join(" ");
        let cpu = children_cpu();
        let (o, rss, t) = measured_within(&mut labperf(args, &file), limit);
        took.push(children_cpu() - cpu);
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(t < limit, "{verb} ran past {limit:?}: killed");
        assert_eq!(o.status.success(), ok, "{verb}: {err}");
        assert!(err.contains(says), "{verb}: {err}");
        // An error names a few events, not all 20,000.
        assert!(
            err.len() < 64 << 10,
            "{verb}: {} bytes of errors",
            err.len()
        );
        let rss = rss.unwrap_or_else(|| panic!("{verb}: no peak memory: {err}"));
        eprintln!(
            "many-events.lpr {verb}: {} MB peak, {:.1} s",
            rss >> 10,
            t.as_secs_f64()
        );
        let bound = bound_kib(size, names)
            + u64::from(EVENTS) * EVENT_KIB
            + if verb.contains("firefox") {
                u64::from(EVENTS) * FIREFOX_KIB_PER_1K_SAMPLES / 1000
            } else {
                0
            };
        assert!(
            rss <= bound,
            "{verb} peaked at {rss} KiB, over its bound of {bound} KiB"
        );
        if verb.contains("html") {
            let page = std::fs::read_to_string(out).unwrap();
            assert_eq!(page.matches("<h2>Flame graph: ").count(), 16, "{verb}");
            assert!(
                err.contains("the 16 events with the most samples of 20000"),
                "{err}"
            );
        }
    }
    // Linear in the events: a quarter of them takes about a quarter of the time (a pass
    // over every event per event, as naming each event once took, is 16 times). The CPU
    // time labperf used, not the wall time: beside a CPU hog (CI27) `report` of the whole
    // file took 3.38 s of wall time, and 0.29 s for a quarter.
    let quarter = d.join("quarter.lpr");
    many_events(&quarter, EVENTS / 4);
    for (i, &(args, _, _)) in verbs.iter().enumerate().take(2) {
        let cpu = children_cpu();
        let (o, _, _) = measured_within(&mut labperf(args, &quarter), limit);
        let t = children_cpu() - cpu;
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        eprintln!(
            "{args:?}: {} events {t:?}, {EVENTS} {:?}",
            EVENTS / 4,
            took[i]
        );
        // 8 times leaves room for a loaded machine (and 0.5 s for the start-up).
        assert!(
            took[i].as_secs_f64() <= 8.0 * t.as_secs_f64() + 0.5,
            "{args:?}: {t:?} for {} events, {:?} for {EVENTS}",
            EVENTS / 4,
            took[i]
        );
    }
    // The file against itself: each event's table joined with its own (the JSON to a file:
    // measured_within keeps a MiB of standard output).
    let json = d.join("diff.json");
    let t = Instant::now();
    let mut child = Command::new(bin("labperf"))
        .args(["diff", "--format", "json"])
        .arg(&file)
        .arg(&file)
        .env("XDG_CACHE_HOME", file.with_extension("cache"))
        .stdout(std::fs::File::create(&json).unwrap())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let status = loop {
        if let Some(st) = child.try_wait().unwrap() {
            break st;
        }
        if t.elapsed() > limit {
            child.kill().unwrap();
            panic!("diff ran past {limit:?}: killed");
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    assert!(status.success());
    let j: serde_json::Value = serde_json::from_slice(&std::fs::read(&json).unwrap()).unwrap();
    assert_eq!(j["tables"].as_array().unwrap().len(), EVENTS as usize);
    eprintln!("many-events.lpr diff: {:.1} s", t.elapsed().as_secs_f64());
}
