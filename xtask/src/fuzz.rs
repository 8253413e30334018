//! `cargo xtask fuzz`: the fuzz targets (fuzz/) with cargo-fuzz on nightly, at the release
//! profile: `decode` (the decoder and every report), `import` (`labperf import` of
//! perf.data, seeded with files perf records here) and `config` (the ssh config, hosts
//! files and Ansible inventories, seeded with small ones of each), each for a number of
//! executions (10 million by default) or seconds, on every core.

use crate::util::{root, Summary};
use anyhow::{bail, Context};
use xshell::{cmd, Shell};

#[derive(clap::Args)]
pub struct Args {
    /// Executions in all, per target (split over the jobs).
    #[arg(long, default_value_t = 10_000_000)]
    pub runs: u64,
    /// Fuzz for this many seconds per target instead of a number of executions.
    #[arg(long)]
    pub seconds: Option<u64>,
    /// Fuzzing processes at once [default: one per CPU].
    #[arg(long)]
    pub jobs: Option<u64>,
    /// Which target: decode, import, config, or all (the default).
    #[arg(long, default_value = "all")]
    pub target: String,
}

/// The fuzz targets, in the order `all` runs them.
pub const TARGETS: [&str; 3] = ["decode", "import", "config"];

/// What a fuzz run did: executions, seconds, and libFuzzer's closing line.
pub struct Outcome {
    pub runs: u64,
    pub seconds: u64,
}

/// The `perf record` options of each import seed: plain samples, frame-pointer and DWARF
/// callchains, build-id mmaps, two events (sample ids), a group read, kernel samples with
/// addresses, CPUs and context switches, page faults.
const SEEDS: &[&[&str]] = &[
    &["-e", "cpu-clock:u", "-c", "200000"],
    &["-e", "cpu-clock:u", "-c", "200000", "-g"],
    &["-e", "cpu-clock:u", "-c", "200000", "--buildid-mmap"],
    &["-e", "cpu-clock:u,task-clock:u", "-c", "200000"],
    &[
        "-e",
        "cpu-clock",
        "-c",
        "200000",
        "-g",
        "-T",
        "--sample-cpu",
        "-d",
        "--switch-events",
    ],
    &["-e", "{cpu-clock:u,task-clock:u}:S", "-c", "200000"],
    &[
        "-e",
        "cpu-clock:u",
        "-c",
        "1000000",
        "--call-graph",
        "dwarf,64",
    ],
    &["-e", "page-faults:u", "-c", "1", "-g"],
];

/// The largest input the import target takes: the seeds are 10 to 30 KiB.
const IMPORT_MAX_LEN: u64 = 64 << 10;

/// Records the import target's seed corpus (small perf.data files of a shell loop) into
/// `fuzz/corpus/import/seed-N`, replacing earlier seeds; returns how many.
pub fn import_seeds(sh: &Shell) -> anyhow::Result<usize> {
    let dir = root().join("fuzz/corpus/import");
    std::fs::create_dir_all(&dir)?;
    for (n, opts) in SEEDS.iter().enumerate() {
        let out = dir.join(format!("seed-{n}"));
        let opts = opts.iter().copied();
        // -N: no copies of the binaries in ~/.debug. The workload: about 50 ms of shell.
        let work = "i=0; while [ $i -lt 30000 ]; do i=$((i+1)); done";
        cmd!(sh, "perf record -q -N {opts...} -o {out} -- sh -c {work}")
            .quiet()
            .run()
            .context("perf record failed (`cargo xtask setup` installs linux-perf)")?;
        let size = std::fs::metadata(&out)?.len();
        if size > IMPORT_MAX_LEN {
            bail!(
                "the seed {} is {size} bytes, over {IMPORT_MAX_LEN}",
                out.display()
            );
        }
    }
    Ok(SEEDS.len())
}

/// The config target's seeds: its first byte picks the parser (0 ssh config, 1 TOML hosts
/// file, 2 INI inventory, 3 YAML inventory), the rest is the text.
const CONFIG_SEEDS: &[(u8, &str)] = &[
    (0, "# lab\nHost lab1 *.lab.example !bad\n  HostName %h.example\n  User bench\n  Port 2200\n  IdentityFile ~/.ssh/id_%r\n  ProxyCommand ssh -W \"%h:%p\" bastion\nMatch host *.example !originalhost x\n  ProxyJump a,me@b:2222\nHost *\n  User fallback\n  Include config.d/*\n"),
    (0, "Host=x\n  ProxyJump none\n  ProxyCommand 'nc' \"%h\" %p # c\nHost y\n  HostName [::1]\n  Ciphers aes128-ctr\n"),
    (1, "[hosts.arm1]\naddress = \"root@127.0.0.1:10022\"\nidentity = \"keys/id\"\nremote_dir = \".cache/lp\"\n\n[hosts.v6]\naddress = \"me@[fe80::1%eth0]:22\"\n\n[groups]\narm = [\"arm1\", \"v6\"]\n"),
    (2, "lone ansible_host=10.0.0.9\n\n[arm]\narm[01:02] ansible_port=2222\n\n[x86]\nx1 ansible_host=10.0.0.5 ansible_user=bob labperf_remote_dir='/scratch/lp'\n\n[arm:vars]\nansible_user=root\n\n[lab:children]\narm\nx86\n"),
    (3, "all:\n  hosts:\n    lone:\n      ansible_host: 10.0.0.9\n  vars: &v\n    ansible_user: lab\n  children:\n    lab:\n      vars: *v\n      children:\n        arm:\n          hosts:\n            arm[01:02]:\n              ansible_port: 2222\n        x86:\n          hosts:\n            x1: {ansible_host: 10.0.0.5, labperf_remote_dir: /scratch/lp}\n"),
];

/// The largest input the config target takes (hosts files and configs of a few KiB, some
/// room for ranges and aliases).
const CONFIG_MAX_LEN: u64 = 16 << 10;

/// Writes the config target's seeds into `fuzz/corpus/config/seed-N`.
fn config_seeds() -> anyhow::Result<()> {
    let dir = root().join("fuzz/corpus/config");
    std::fs::create_dir_all(&dir)?;
    for (n, (pick, text)) in CONFIG_SEEDS.iter().enumerate() {
        let mut b = vec![*pick];
        b.extend_from_slice(text.as_bytes());
        std::fs::write(dir.join(format!("seed-{n}")), b)?;
    }
    Ok(())
}

/// Fuzzes `target` for `runs` executions (or `seconds`) in `jobs` processes; fails on any
/// crash.
pub fn fuzz(target: &str, runs: u64, seconds: Option<u64>, jobs: u64) -> anyhow::Result<Outcome> {
    let sh = Shell::new()?;
    let dir = root().join("fuzz");
    sh.change_dir(&dir);
    for j in 0..jobs {
        let _ = std::fs::remove_file(dir.join(format!("fuzz-{j}.log")));
    }
    let mut extra = Vec::new();
    if target == "import" {
        import_seeds(&sh)?;
        extra.push(format!("-max_len={IMPORT_MAX_LEN}"));
    }
    if target == "config" {
        config_seeds()?;
        extra.push(format!("-max_len={CONFIG_MAX_LEN}"));
    }
    let limit = match seconds {
        Some(s) => format!("-max_total_time={s}"),
        None => format!("-runs={}", runs.div_ceil(jobs)),
    };
    let (j, w) = (format!("-jobs={jobs}"), format!("-workers={jobs}"));
    // The release profile (-O), as labperf ships: no debug assertions or overflow checks.
    // No sanitizer: the code under test is safe Rust, and without ASan it runs about 7
    // times faster.
    let out = cmd!(
        sh,
        "cargo +nightly fuzz run -O -s none {target} -- {limit} {j} {w} {extra...}"
    )
    .ignore_status()
    .output()?;
    let mut total = Outcome {
        runs: 0,
        seconds: 0,
    };
    let mut failed = !out.status.success();
    if failed {
        eprint!("{}", String::from_utf8_lossy(&out.stderr));
    }
    for job in 0..jobs {
        let log = std::fs::read_to_string(dir.join(format!("fuzz-{job}.log")))
            .with_context(|| format!("fuzz job {job} wrote no log"))?;
        match log.lines().rev().find(|l| l.starts_with("Done ")) {
            Some(done) => {
                // "Done 5000000 runs in 812 second(s)"
                let w: Vec<&str> = done.split_whitespace().collect();
                total.runs += w.get(1).and_then(|n| n.parse().ok()).unwrap_or(0);
                let s = w.get(4).and_then(|n| n.parse().ok()).unwrap_or(0);
                total.seconds = total.seconds.max(s);
            }
            None => {
                failed = true;
                eprint!(
                    "{}",
                    log.lines()
                        .rev()
                        .take(30)
                        .collect::<Vec<_>>()
                        .into_iter()
                        .rev()
                        .map(|l| format!("{l}\n"))
                        .collect::<String>()
                );
            }
        }
    }
    if failed {
        bail!("the fuzzer found a failure (the log is above; the input is under fuzz/artifacts/{target}/)");
    }
    Ok(total)
}

pub fn run(a: &Args, s: &mut Summary) {
    let jobs = a
        .jobs
        .unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get() as u64));
    let targets: Vec<&str> = match a.target.as_str() {
        "all" => TARGETS.to_vec(),
        t if TARGETS.contains(&t) => vec![t],
        t => {
            s.step("fuzz", || {
                bail!("unknown target '{t}': use decode, import, config or all")
            });
            return;
        }
    };
    for t in targets {
        let what = match t {
            "decode" => "fuzz decode: the decoder and every report",
            "config" => "fuzz config: the ssh config, hosts files and inventories",
            _ => "fuzz import: labperf import of mutated perf.data",
        };
        s.step(what, || {
            let o = fuzz(t, a.runs, a.seconds, jobs)?;
            let line = format!(
                "{} executions in {} s on {jobs} jobs, no failure",
                o.runs, o.seconds
            );
            println!("BENCH fuzz {t}: {line}");
            Ok(line)
        });
    }
}
