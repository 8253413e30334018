//! The defaults a perf user expects (issue 49 item 7): `report` without a file reads
//! labperf.lpr, else ./perf.data; `import` and `report` name a file that is not theirs
//! (gzip, zstd, pprof, a labperf file, JSON); perf's verbs and options that labperf refuses
//! name what labperf has; `record --help` leads with `./my-prog` and the common options;
//! `-F max`; `-q` silences the on-the-fly import's line.

use labperf_tests::{bin, root, scratch};
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

fn labperf_in(dir: &Path, args: &[&str]) -> Output {
    Command::new(bin("labperf"))
        .current_dir(dir)
        .args(args)
        .output()
        .unwrap()
}

fn labperf(args: &[&str]) -> Output {
    Command::new(bin("labperf")).args(args).output().unwrap()
}

fn golden() -> PathBuf {
    root().join("tests/data/x86_64-bench-v1/record.lpr")
}

fn stacks() -> String {
    root()
        .join("tests/data/v2-stacks/record.lpr")
        .to_string_lossy()
        .into_owned()
}

/// perf 3.4's perf.data of one process (tests/data/perf/README.md).
fn perf_data() -> PathBuf {
    root().join("tests/data/perf/singleprocess-3.4.data")
}

#[test]
fn report_without_a_file_reads_labperf_lpr_else_perf_data() {
    let d = scratch("report_default_file");
    // Neither: both are named, and how to get one.
    let o = labperf_in(&d, &["report"]);
    assert_eq!(o.status.code(), Some(1));
    assert_eq!(
        text(&o.stderr),
        "labperf: error: no labperf.lpr or perf.data in this directory: name a file (`labperf \
         report FILE`), or record one (`labperf record ./my-prog`)\n"
    );
    // Only perf.data (before: "cannot open labperf.lpr"): read as `report perf.data` reads it.
    std::fs::copy(perf_data(), d.join("perf.data")).unwrap();
    let bare = labperf_in(&d, &["report"]);
    let named = labperf_in(&d, &["report", "perf.data"]);
    assert!(bare.status.success(), "{}", text(&bare.stderr));
    assert!(named.status.success(), "{}", text(&named.stderr));
    assert!(!bare.stdout.is_empty());
    assert_eq!(text(&bare.stdout), text(&named.stdout));
    assert!(
        text(&bare.stderr)
            .contains("labperf: perf.data is perf's perf.data: imported for this command"),
        "{}",
        text(&bare.stderr)
    );
    // Both: labperf.lpr first.
    std::fs::copy(golden(), d.join("labperf.lpr")).unwrap();
    let bare = labperf_in(&d, &["report"]);
    let named = labperf_in(&d, &["report", "labperf.lpr"]);
    assert!(bare.status.success(), "{}", text(&bare.stderr));
    assert_eq!(text(&bare.stdout), text(&named.stdout));
    assert_ne!(
        text(&bare.stdout),
        text(&labperf_in(&d, &["report", "perf.data"]).stdout)
    );
}

#[test]
fn quiet_silences_the_line_of_an_import_for_this_command() {
    let f = perf_data().to_string_lossy().into_owned();
    let loud = labperf(&["report", &f]);
    let quiet = labperf(&["-q", "report", &f]);
    assert!(loud.status.success() && quiet.status.success());
    assert!(
        text(&loud.stderr).contains("is perf's perf.data: imported for this command"),
        "{}",
        text(&loud.stderr)
    );
    assert!(
        !text(&quiet.stderr).contains("imported for this command"),
        "{}",
        text(&quiet.stderr)
    );
    assert_eq!(text(&loud.stdout), text(&quiet.stdout));
}

/// The files people hand `import` and `report` by mistake, each a real one: (name, bytes,
/// what it is called).
fn not_theirs(d: &Path) -> Vec<(String, &'static str)> {
    let run = |c: &mut Command| {
        let o = c.output().unwrap();
        assert!(o.status.success(), "{c:?}: {}", text(&o.stderr));
        o.stdout
    };
    let gz = |from: &Path, to: &str| {
        let b = run(Command::new("gzip").arg("-c").arg(from));
        std::fs::write(d.join(to), b).unwrap();
    };
    gz(&perf_data(), "perf.data.gz");
    gz(&golden(), "bench.lpr.gz");
    std::fs::write(d.join("notes.gz"), {
        std::fs::write(d.join("notes"), "a text file\n").unwrap();
        run(Command::new("gzip").arg("-c").arg(d.join("notes")))
    })
    .unwrap();
    let plain = std::fs::read(perf_data()).unwrap();
    let mut zst = vec![0u8; zstd_safe::compress_bound(plain.len())];
    let n = zstd_safe::compress(&mut zst[..], &plain, 3).unwrap();
    zst.truncate(n);
    std::fs::write(d.join("perf.data.zst"), zst).unwrap();
    let g = golden();
    run(Command::new(bin("labperf"))
        .arg("-q")
        .arg("export")
        .arg(&g)
        .args(["--format", "pprof", "-o"])
        .arg(d.join("bench.pb.gz")));
    let json = run(Command::new(bin("labperf"))
        .arg("report")
        .arg(&g)
        .args(["--format", "json"]));
    std::fs::write(d.join("bench.json"), json).unwrap();
    std::fs::copy(&g, d.join("bench.lpr")).unwrap();
    vec![
        ("perf.data.gz".into(), "a gzip-compressed perf.data"),
        ("bench.lpr.gz".into(), "a gzip-compressed labperf record file"),
        ("notes.gz".into(), "gzip-compressed data"),
        ("perf.data.zst".into(), "zstd-compressed data"),
        (
            "bench.pb.gz".into(),
            "a pprof profile (gzipped protobuf, as `labperf export --format pprof` and Go's pprof write)",
        ),
        ("bench.json".into(), "JSON text"),
        ("bench.lpr".into(), "a labperf record file"),
    ]
}

#[test]
fn import_names_a_file_that_is_not_perf_data() {
    let d = scratch("import_names_the_file");
    for (f, what) in not_theirs(&d) {
        let o = labperf_in(&d, &["import", &f, "-o", "out.lpr"]);
        assert_eq!(o.status.code(), Some(1), "{f}");
        let e = text(&o.stderr);
        // Before: "cannot import bench.lpr.gz: a damaged perf.data file: its magic number is …".
        let want =
            format!("labperf: error: cannot import {f}: it is {what}, not perf's perf.data; ");
        assert!(e.starts_with(&want), "{f}: {e}");
        assert!(!e.contains("damaged"), "{f}: {e}");
        assert!(!d.join("out.lpr").exists());
    }
    // On standard input too (`… | labperf import -`): what its first bytes tell.
    for (f, what) in [
        ("bench.lpr.gz", "gzip-compressed data"),
        ("bench.lpr", "a labperf record file"),
        ("bench.json", "JSON text"),
    ] {
        let o = Command::new(bin("labperf"))
            .current_dir(&d)
            .args(["import", "-", "-o", "out.lpr"])
            .stdin(std::fs::File::open(d.join(f)).unwrap())
            .output()
            .unwrap();
        assert_eq!(o.status.code(), Some(1), "{f}");
        assert_eq!(
            text(&o.stderr),
            format!("labperf: error: cannot import standard input: it is {what}, not a `perf record -o -` stream\n"),
            "{f}"
        );
    }
    // Each says what reads it instead.
    let e = text(&labperf_in(&d, &["import", "bench.lpr"]).stderr);
    assert!(
        e.ends_with("; `labperf report bench.lpr` reads it as it is\n"),
        "{e}"
    );
    let e = text(&labperf_in(&d, &["import", "perf.data.gz"]).stderr);
    assert!(
        e.ends_with("; decompress it first (`zcat perf.data.gz > perf.data`), then `labperf report perf.data` or `labperf import perf.data`\n"),
        "{e}"
    );
    let e = text(&labperf_in(&d, &["import", "bench.pb.gz"]).stderr);
    assert!(
        e.ends_with(
            "; labperf writes pprof but does not read it: `go tool pprof -top bench.pb.gz` reads it\n"
        ),
        "{e}"
    );
}

#[test]
fn report_names_a_file_that_is_not_a_recording() {
    let d = scratch("report_names_the_file");
    for (f, what) in not_theirs(&d) {
        if f == "bench.lpr" {
            continue;
        }
        let o = labperf_in(&d, &["report", &f]);
        assert_eq!(o.status.code(), Some(1), "{f}");
        let e = text(&o.stderr);
        let want = format!(
            "{f} is not a labperf record file (it does not start with the LABPERF magic and holds no labperf frames). It is {what}: "
        );
        assert!(e.contains(&want), "{f}: {e}");
    }
    // A program given as the record file: the command that records it runs it, `./NAME`
    // for a name in the current directory (before: `labperf record prog`, which a shell
    // looks up in PATH); a path with a slash as it is.
    std::fs::copy(bin("labperf-bench"), d.join("prog")).unwrap();
    let elf = "an ELF program or library, not a recording";
    for (verb, tail) in [
        (
            "report",
            format!("It is {elf}: record it: `labperf record ./prog`.\n"),
        ),
        (
            "import",
            format!("it is {elf}, not perf's perf.data; record it: `labperf record ./prog`\n"),
        ),
    ] {
        let e = text(&labperf_in(&d, &[verb, "prog"]).stderr);
        assert!(e.ends_with(&tail), "{verb}: {e}");
    }
    let abs = d.join("prog").display().to_string();
    let e = text(&labperf_in(&d, &["report", &abs]).stderr);
    assert!(
        e.ends_with(&format!("record it: `labperf record {abs}`.\n")),
        "{e}"
    );
}

/// Each refused perf spelling: its arguments, what the message must name, and that
/// spelling run, which must work (with `--help` after it where it needs a workload: clap
/// checks each option, and an option's value, before it reads --help).
#[test]
fn refused_perf_verbs_and_options_name_what_labperf_has() {
    let g = golden().to_string_lossy().into_owned();
    let s = stacks();
    let cases: &[(&[&str], &str, &[&str])] = &[
        (
            &["top"],
            "`labperf record -a --duration 5 -o box.lpr`",
            &["report", &g, "--by", "comm,dso"],
        ),
        (
            &["sched"],
            "`labperf record --off-cpu`",
            &["record", "--off-cpu", "--help"],
        ),
        (&["evlist"], "`labperf info FILE`", &["info", &g]),
        (&["version"], "`labperf --version`", &["--version"]),
        (
            &["report", &g, "--symbol-filter", "x"],
            "`--symbols NAMES`",
            &["report", &g, "--symbols", "x"],
        ),
        (
            &["report", &g, "--header"],
            "`--header-only`",
            &["report", &g, "--header-only"],
        ),
        (
            &["report", &s, "-g"],
            "`--call-graph caller`",
            &["report", &s, "--children"],
        ),
        (
            &["report", &g, "-F", "overhead,sym"],
            "`--by KEYS`",
            &["report", &g, "--by", "comm,dso"],
        ),
        (
            &["annotate", &g, "--tui"],
            "perf's `--stdio`",
            &["annotate", "--stdio", "--help"],
        ),
        (
            &["annotate", "--percent-type", "global-period"],
            "`local-period`",
            &["annotate", "-n", "--help"],
        ),
        (
            &["report", &g, "--tui"],
            "`--format html -o page.html`",
            &["report", &g, "--format", "html"],
        ),
        (
            &["report", &g, "-k", "/boot/vmlinux"],
            "`--symfs DIR`",
            &["report", &g, "--symfs", "/nonexistent"],
        ),
        (
            &["record", "--all-user", "--", "true"],
            "`-e cpu-clock:u`",
            &["record", "-e", "cpu-clock:u", "--help"],
        ),
        (
            &["record", "-b", "--", "true"],
            "labperf records none",
            &["list"],
        ),
        (
            &["stat", "-x", ",", "--", "true"],
            "`--format csv`",
            &["stat", "--format", "csv", "--help"],
        ),
        (
            &["stat", "--per-core", "--", "true"],
            "is not there yet",
            &["stat", "--help"],
        ),
    ];
    for (args, names, works) in cases {
        let o = labperf(args);
        let e = text(&o.stderr);
        assert_eq!(o.status.code(), Some(2), "{args:?}: {e}");
        assert!(e.starts_with("labperf: error: "), "{args:?}: {e}");
        assert!(e.contains(names), "{args:?} does not name {names}: {e}");
        // Not clap's look-alike or its `-- -G`.
        for clap in ["similar argument", "to pass", "tip:", "unrecognized"] {
            assert!(!e.contains(clap), "{args:?}: {e}");
        }
        let w = labperf(works);
        assert!(
            w.status.success(),
            "{works:?}, named for {args:?}: {}",
            text(&w.stderr)
        );
    }
    // The exact words of two.
    assert_eq!(
        text(&labperf(&["report", &g, "--symbol-filter=x"]).stderr),
        "labperf: error: `report --symbol-filter` (perf's match of part of a name) is `--symbols NAMES` here, whole names as the report shows them\n"
    );
    assert_eq!(
        text(&labperf(&["top"]).stderr),
        "labperf: error: labperf has no `top` yet: record a while, then report (`labperf record -a \
         --duration 5 -o box.lpr`, then `labperf report box.lpr --by comm,dso`; a lab machine's: \
         `--host H`)\n"
    );
    // perf's annotate is labperf's too (tests/tests/annotate.rs).
    assert!(labperf(&["annotate", "--help"]).status.success());
    // An option perf does not have either is clap's to answer, with its usage.
    let o = labperf(&["report", &g, "--no-such-option"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(text(&o.stderr).contains("unexpected argument '--no-such-option'"));
}

#[test]
fn record_help_leads_with_my_prog_and_the_ten_common_options() {
    for flag in ["-h", "--help"] {
        let o = labperf(&["record", flag]);
        assert!(o.status.success());
        let h = text(&o.stdout);
        let lines: Vec<&str> = h.lines().collect();
        // The first example, before the usage: the user's own program.
        assert_eq!(
            lines[2].trim_start(),
            "labperf record ./my-prog              # run it here, sampled; then where its time went",
            "{h}"
        );
        let usage = lines.iter().position(|l| l.starts_with("Usage:")).unwrap();
        assert!(usage > 2);
        // The first options after the usage are the ten, in this order, then -h; the lab
        // machines' and the PMUs' come under their headings below.
        let opts: Vec<&str> = lines
            .iter()
            .skip_while(|l| **l != "Options:")
            .skip(1)
            .take_while(|l| l.is_empty() || l.starts_with(' '))
            .filter(|l| l.starts_with("  -") || l.starts_with("      --"))
            .map(|l| l.trim_start().split("  ").next().unwrap())
            .collect();
        assert_eq!(
            opts,
            [
                "-e, --event <EVENTS>",
                "-F, --freq <HZ>",
                "-c, --period <N>",
                "-g",
                "--call-graph <MODE>",
                "-o, --output <OUTPUT>",
                "-p, --pid <PID>",
                "-a, --all-cpus",
                "--duration <SECS>",
                "--no-report",
                "-h, --help",
            ],
            "{flag}: {h}"
        );
        let at = |s: &str| {
            lines
                .iter()
                .position(|l| *l == s)
                .unwrap_or_else(|| panic!("{s}: {h}"))
        };
        assert!(at("Options:") < at("Sampling:"));
        assert!(at("Sampling:") < at("Lab machines:"));
        assert!(at("Lab machines:") < at("Special PMUs (Intel TopDown, Alpha ProfileMe):"));
        let ex = h.split("EXAMPLES:\n").nth(1).unwrap();
        assert!(ex.starts_with("  labperf record ./my-prog "), "{ex}");
    }
}

#[test]
fn freq_max_is_the_kernel_s_limit() {
    let max: u64 = std::fs::read_to_string("/proc/sys/kernel/perf_event_max_sample_rate")
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    let d = scratch("freq_max");
    let o = labperf_in(
        &d,
        &[
            "-q",
            "record",
            "-F",
            "max",
            "--no-report",
            "-o",
            "m.lpr",
            "--",
            "true",
        ],
    );
    assert!(o.status.success(), "{}", text(&o.stderr));
    let info = text(&labperf_in(&d, &["info", "m.lpr"]).stdout);
    let event = info.lines().find(|l| l.starts_with("event 0:")).unwrap();
    assert!(event.contains(&format!(" freq={max} ")), "{event}");
    // Before: "invalid digit found in string".
    let o = labperf(&["record", "-F", "maximum", "--", "true"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(
        text(&o.stderr)
            .contains("takes samples per second (a whole number) or `max`, not 'maximum'"),
        "{}",
        text(&o.stderr)
    );
    let o = labperf(&["record", "-F", "max", "--host", "nowhere", "--", "true"]);
    assert_eq!(o.status.code(), Some(1));
    assert_eq!(
        text(&o.stderr),
        "labperf: error: -F max with --host is not there yet: give -F HZ (a lab machine's limit is \
         its /proc/sys/kernel/perf_event_max_sample_rate)\n"
    );
}

/// `-F 0` and `-c 0` (here `--period 0`) are refused before anything runs, as perf refuses them ("frequency and
/// count are zero, aborting"); before, the agent refused them and labperf said "the agent
/// was killed before it finished".
#[test]
fn a_zero_frequency_or_period_is_refused_up_front() {
    for (opt, long, what) in [
        (
            "-F",
            "--freq <HZ>",
            "takes samples per second, 1 or more, or `max`: a frequency of 0 is invalid",
        ),
        (
            "--period",
            "--period <N>",
            "takes events per sample, 1 or more: a period of 0 is invalid",
        ),
    ] {
        let o = labperf(&[
            "record",
            opt,
            "0",
            "--no-report",
            "-o",
            "/dev/null",
            "--",
            "true",
        ]);
        assert_eq!(o.status.code(), Some(2), "{opt}");
        assert_eq!(
            text(&o.stderr),
            format!(
                "error: invalid value '0' for '{long}': {what}\n\nFor more information, try '--help'.\n"
            ),
            "{opt}"
        );
    }
}

/// `-q`, before or after the verb, silences the agent's "wrote N samples" line too (before:
/// `labperf record -q` still printed "labperf-agent: wrote 2 samples (9005 bytes) to
/// q.lpr"); the file is written all the same.
#[test]
fn quiet_silences_the_agent_s_wrote_line() {
    let d = scratch("quiet_record");
    let record = |q: &[&str]| {
        let mut args = q.to_vec();
        args.extend([
            "--no-report",
            "-e",
            "cpu-clock",
            "-o",
            "q.lpr",
            "--",
            "true",
        ]);
        let _ = std::fs::remove_file(d.join("q.lpr"));
        let o = labperf_in(&d, &args);
        assert!(o.status.success(), "{q:?}: {}", text(&o.stderr));
        assert!(d.join("q.lpr").is_file(), "{q:?}");
        text(&o.stderr)
    };
    let loud = record(&["record"]);
    assert!(
        loud.lines()
            .any(|l| l.starts_with("labperf-agent: wrote ") && l.ends_with(" to q.lpr")),
        "{loud}"
    );
    for q in [&["-q", "record"][..], &["record", "-q"]] {
        let e = record(q);
        assert!(!e.contains("wrote"), "{q:?}: {e}");
    }
}
