//! labperf-agent: the static on-target agent. Parses its command line and dispatches to record, stat or list.

mod arch;
mod events;
mod out;
mod perf;
mod plan;
mod record;
mod stat;
mod strobe;
mod sys;
mod topdown;
mod workload;

pub const VERSION: &str = concat!("labperf-agent ", env!("CARGO_PKG_VERSION"));

const USAGE: &str = "labperf-agent: records perf events into labperf record files

USAGE:
  labperf-agent record [OPTIONS] (--pid PID | -- CMD [ARGS...])
  labperf-agent stat   [OPTIONS] [-I MS] (--pid PID | -- CMD [ARGS...])
  labperf-agent list   [PMU]
  labperf-agent plan   (record|stat) [OPTIONS] [-- CMD]   print every perf_event_attr it would open
  labperf-agent strobe-probe [-c PERIOD] [--window N]   which strobing mode --metrics uses here
  labperf-agent --version

OPTIONS:
  -e, --event SPEC     event to open; repeatable. SPEC is a name (cycles, cpu-clock, ...),
                       rHEX, pmu/event/ or pmu/term=val,.../, optionally :u/:k, or a group
                       {leader,member,...} sampled with PERF_SAMPLE_READ
  -c, --period N       sample every N events (ns for cpu-clock/task-clock)
  -F, --freq HZ        sample at about HZ samples per second instead
  -o, --output FILE    record file to write (default labperf.lpr; stat writes only with -o)
  -p, --pid PID        attach to a running process instead of starting CMD
  -I, --interval MS    stat: print and record counts every MS milliseconds
      --mmap-pages N   ring buffer data pages per CPU, a power of two (default 128)
      --no-inherit     do not follow the workload's children and threads
      --progress       print progress every second on stderr
      --flush-ms MS    close a record frame at least every MS ms (default 1000)
      --metrics        per-function metrics: {cycles,instructions,branch-misses,
                       cache-references,cache-misses} read over a short window after
                       each long period (strobing); -c is the period (default 1000000)
      --window N       the counting window in cycles (default 300)
      --jitter         jitter the window start (the kernel series' rules apply)
      --strobe MODE    auto (kernel alternating periods if verified, else decimate),
                       kernel, decimate, or fixed (every window: the baseline)
      --topdown        Intel TopDown. stat: the {slots,topdown-*} group per thread (Ice
                       Lake+), or the older events per core system-wide (needs root);
                       record: {slots,SAMPLER,topdown-*} read in each sample (-e SAMPLER:
                       cycles, instructions or ref-cycles)
      --level N        --topdown level 1 (default) or 2 (Sapphire Rapids and later)
      --per-thread     stat --topdown: one line per thread
ENVIRONMENT: LABPERF_SYSFS  the sysfs root to read PMUs from (default /sys)

EXAMPLES:
  labperf-agent record -o bench.lpr -- ./labperf-bench --duration 2
  labperf-agent record -e cpu-clock -c 100000 -- sleep 1
  labperf-agent record -e '{cpu-clock,page-faults}' -- ./my-prog
  labperf-agent stat -I 500 -- ./my-prog arg1 arg2
  labperf-agent stat --topdown -I 1000 -- ./labperf-bench
  labperf-agent record --metrics -c 1000000 --window 300 -- ./labperf-bench
  labperf-agent list armv8_pmuv3_0

Exit status: the workload's (128+N if killed by signal N); 125 when the agent
itself fails; 127 when CMD cannot be run.";

/// Options shared by record and stat.
#[derive(Debug, Default, Clone)]
pub struct Opts {
    pub events: Vec<String>,
    pub period: Option<u64>,
    pub freq: Option<u64>,
    pub output: Option<String>,
    pub pid: Option<i32>,
    pub interval_ms: Option<u64>,
    pub mmap_pages: usize,
    pub no_inherit: bool,
    pub progress: bool,
    pub flush_ms: u64,
    pub command: Vec<String>,
    /// `record --metrics`: the strobed metrics group.
    pub metrics: bool,
    pub window: u64,
    pub jitter: bool,
    /// `--strobe auto|kernel|decimate|fixed`.
    pub strobe: String,
    /// `--topdown`, its `--level` (1 or 2) and `--per-thread`.
    pub topdown: bool,
    pub level: u8,
    pub per_thread: bool,
}

fn num<T: std::str::FromStr>(flag: &str, v: Option<String>) -> Result<T, String> {
    let v = v.ok_or_else(|| format!("{flag} needs a value"))?;
    v.parse()
        .map_err(|_| format!("{flag} expects a number, got '{v}'"))
}

fn parse_opts(args: Vec<String>) -> Result<Opts, String> {
    let mut o = Opts {
        mmap_pages: 128,
        flush_ms: 1000,
        window: 300,
        strobe: "auto".into(),
        level: 1,
        ..Default::default()
    };
    let mut it = args.into_iter();
    while let Some(a) = it.next() {
        let (flag, inline) = match a.split_once('=') {
            Some((f, v)) if f.starts_with("--") => (f.to_string(), Some(v.to_string())),
            _ => (a.clone(), None),
        };
        let mut val = || inline.clone().or_else(|| it.next());
        match flag.as_str() {
            "--" => {
                o.command = it.by_ref().collect();
                break;
            }
            "-e" | "--event" => o.events.push(val().ok_or("--event needs a value")?),
            "-c" | "--period" => o.period = Some(num(&flag, val())?),
            "-F" | "--freq" => o.freq = Some(num(&flag, val())?),
            "-o" | "--output" => o.output = Some(val().ok_or("--output needs a file name")?),
            "-p" | "--pid" => o.pid = Some(num(&flag, val())?),
            "-I" | "--interval" => o.interval_ms = Some(num(&flag, val())?),
            "--mmap-pages" => o.mmap_pages = num(&flag, val())?,
            "--flush-ms" => o.flush_ms = num(&flag, val())?,
            "--no-inherit" => o.no_inherit = true,
            "--metrics" => o.metrics = true,
            "--window" => o.window = num(&flag, val())?,
            "--jitter" => o.jitter = true,
            "--strobe" => {
                o.strobe = val().ok_or("--strobe needs auto, kernel, decimate or fixed")?;
                if !["auto", "kernel", "decimate", "fixed"].contains(&o.strobe.as_str()) {
                    return Err(format!(
                        "--strobe takes auto, kernel, decimate or fixed, not '{}'",
                        o.strobe
                    ));
                }
            }
            "--progress" => o.progress = true,
            "--topdown" => o.topdown = true,
            "--per-thread" => o.per_thread = true,
            "--level" => {
                o.level = num(&flag, val())?;
                if !(1..=2).contains(&o.level) {
                    return Err("--level is 1 or 2".into());
                }
            }
            s if s.starts_with('-') => return Err(format!("unknown option '{s}'")),
            _ => {
                o.command.push(a);
                o.command.extend(it.by_ref());
                break;
            }
        }
    }
    if o.period.is_some() && o.freq.is_some() {
        return Err("--period and --freq exclude each other: give one".into());
    }
    if o.period == Some(0) || o.freq == Some(0) {
        return Err("--period and --freq must be greater than 0".into());
    }
    if !o.mmap_pages.is_power_of_two() {
        return Err(format!(
            "--mmap-pages must be a power of two, got {}",
            o.mmap_pages
        ));
    }
    if o.interval_ms == Some(0) {
        return Err("--interval must be at least 1 ms".into());
    }
    match (o.pid.is_some(), o.command.is_empty()) {
        (true, false) => return Err("give either --pid or a command after --, not both".into()),
        (false, true) => return Err("no workload: give a command after -- or --pid PID".into()),
        _ => {}
    }
    Ok(o)
}

fn main() {
    let mut args: Vec<String> = std::env::args().skip(1).collect();
    if args.is_empty() {
        eprintln!("{USAGE}");
        std::process::exit(2);
    }
    let cmd = args.remove(0);
    let code = match cmd.as_str() {
        "-V" | "--version" | "version" => {
            println!("{VERSION} ({})", sys::arch().name());
            0
        }
        "-h" | "--help" | "help" => {
            println!("{USAGE}");
            0
        }
        "strobe-probe" => match parse_opts(
            args.into_iter()
                .chain(["--".to_string(), "probe".to_string()])
                .collect(),
        ) {
            Ok(o) => record::strobe_probe(&o).unwrap_or_else(|e| {
                eprintln!("labperf-agent: error: {e}");
                125
            }),
            Err(e) => {
                eprintln!("labperf-agent: {e}");
                2
            }
        },
        "plan" => {
            let verb = args.first().cloned().unwrap_or_default();
            let mut rest: Vec<String> = args.into_iter().skip(1).collect();
            if !rest.iter().any(|a| a == "--" || a == "-p" || a == "--pid") {
                rest.extend(["--".to_string(), "CMD".to_string()]);
            }
            match parse_opts(rest).and_then(|o| plan::print(&verb, &o)) {
                Ok(text) => {
                    print!("{text}");
                    0
                }
                Err(e) => {
                    eprintln!("labperf-agent: {e}");
                    2
                }
            }
        }
        "list" => {
            print!("{}", events::list(args.first().map(String::as_str)));
            0
        }
        "record" | "stat" => match parse_opts(args) {
            Err(e) => {
                eprintln!("labperf-agent: {e}\nRun `labperf-agent --help` for usage.");
                2
            }
            Ok(o) => {
                let r = if cmd == "record" {
                    record::run(&o)
                } else {
                    stat::run(&o)
                };
                match r {
                    Ok(code) => code,
                    Err(e) => {
                        eprintln!("labperf-agent: error: {e}");
                        if e.starts_with("cannot run") {
                            127
                        } else {
                            125
                        }
                    }
                }
            }
        },
        other => {
            eprintln!("labperf-agent: unknown command '{other}'\n\n{USAGE}");
            2
        }
    };
    std::process::exit(code);
}

#[cfg(test)]
mod tests {
    use super::*;

    fn s(v: &[&str]) -> Vec<String> {
        v.iter().map(|x| x.to_string()).collect()
    }

    #[test]
    fn options_and_command() {
        let o = parse_opts(s(&[
            "-e",
            "cpu-clock",
            "-c",
            "1000",
            "--output=x.lpr",
            "--",
            "prog",
            "-e",
            "a b",
        ]))
        .unwrap();
        assert_eq!(o.events, ["cpu-clock"]);
        assert_eq!(o.period, Some(1000));
        assert_eq!(o.output.as_deref(), Some("x.lpr"));
        assert_eq!(o.command, ["prog", "-e", "a b"]);
    }

    #[test]
    fn bad_options_are_explained() {
        assert!(parse_opts(s(&["-c", "x", "--", "p"]))
            .unwrap_err()
            .contains("expects a number"));
        assert!(parse_opts(s(&["-c", "1", "-F", "1", "--", "p"]))
            .unwrap_err()
            .contains("exclude"));
        assert!(parse_opts(s(&[])).unwrap_err().contains("no workload"));
        assert!(parse_opts(s(&["--mmap-pages", "3", "--", "p"]))
            .unwrap_err()
            .contains("power of two"));
        assert!(parse_opts(s(&["--pid", "1", "--", "p"]))
            .unwrap_err()
            .contains("not both"));
    }
}
