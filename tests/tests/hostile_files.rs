//! Record files and mapped paths made to hurt the reader: devices, FIFOs, floods of frames,
//! huge frames, floods of mappings. `report`, `info` and `dump` must finish quickly, with
//! memory bounded by a small multiple of the file (the bound `ARCHITECTURE.md` states).

use labperf_common::*;
use labperf_tests::{bin, scratch};
use std::path::Path;
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

/// Runs `c` (labperf) to the end; returns its output, its peak RSS (KiB: VmHWM, which
/// labperf prints at exit with LABPERF_PEAK_MEMORY; a child's rusage would count its
/// parent's memory from before its exec) and its wall time.
fn measured(c: &mut Command) -> (Output, u64, Duration) {
    c.env("LABPERF_PEAK_MEMORY", "1");
    let t = Instant::now();
    let child = c
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let pid = child.id() as i32;
    // Read the pipes on threads, then reap the child with wait4 for its rusage.
    let mut child = child;
    let (mut so, mut se) = (child.stdout.take().unwrap(), child.stderr.take().unwrap());
    let a = std::thread::spawn(move || {
        let mut v = Vec::new();
        std::io::Read::read_to_end(&mut so, &mut v).unwrap();
        v
    });
    let b = std::thread::spawn(move || {
        let mut v = Vec::new();
        std::io::Read::read_to_end(&mut se, &mut v).unwrap();
        v
    });
    let mut status = 0;
    // SAFETY: an all-zero rusage is valid; wait4 fills it for our own child.
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: waiting for our own child with valid pointers.
    let r = unsafe { libc::wait4(pid, &mut status, 0, &mut ru) };
    assert_eq!(r, pid);
    let out = Output {
        status: std::os::unix::process::ExitStatusExt::from_raw(status),
        stdout: a.join().unwrap(),
        stderr: b.join().unwrap(),
    };
    let err = String::from_utf8_lossy(&out.stderr);
    let peak = err
        .lines()
        .find_map(|l| l.strip_prefix("labperf: peak memory "))
        .and_then(|v| v.trim_end_matches(" kB").trim().parse().ok())
        .unwrap_or_else(|| panic!("labperf said nothing of its memory: {err}"));
    let _ = ru;
    (out, peak, t.elapsed())
}

fn header() -> Header {
    labperf_tests::golden::header(labperf_tests::golden::Kind::Sample)
}

/// A file of `header`, then `frames` (each a list of records), then a trailer.
fn write(path: &Path, frames: impl IntoIterator<Item = Vec<Record>>) -> u64 {
    let mut enc = Encoder::new();
    let mut f = Encoder::prelude().to_vec();
    f.extend(enc.header_frame(&header()));
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
/// distinct sampled address. A file names a new address in about 4 bytes, and a report or
/// export keeps a name, a row or a stack per address: measured at 1,000,000 addresses
/// (debug build), `report` 0.27 KiB each, svg 0.32, parquet 0.42, every row as JSON 0.66,
/// pprof 0.73, firefox 0.94 (the Firefox Profiler's tables, in `fxprof-processed-profile`);
/// 1.25 leaves a margin.
fn bound_kib(file_bytes: u64, addresses: u64) -> u64 {
    (8 * file_bytes + (64 << 20)) / 1024 + addresses * 5 / 4
}

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
    // A flood of mappings: 2 million of them, each a distinct address and path, in 7
    // processes that each have a sample (so every mapping must be kept).
    let maps = d.join("maps.lpr");
    let frames = (0..40).map(|k| {
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
    write(&maps, frames.chain(std::iter::once(samples.collect())));
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
