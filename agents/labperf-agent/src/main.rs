//! labperf-agent: the static on-target agent. Parses its command line and dispatches to record, stat or list.
//!
//! The agent built for lab machines (`--profile agent`, panic = "abort") is `no_std` and
//! `no_main`: musl's C runtime calls [`main`], [`rt`] stands in for what it took from
//! `std`. Built with unwinding (the workspace's `cargo clippy`, `cargo test`) it is an
//! ordinary `std` program running the same code: only the entry point and the panic
//! handler differ.

#![cfg_attr(all(not(test), panic = "abort"), no_std)]
#![cfg_attr(all(not(test), panic = "abort"), no_main)]

extern crate alloc;

/// `print!`, `println!` and `eprintln!` over [`rt::print`] (they shadow `std`'s where the
/// agent is built with `std`, so both builds print the same way).
macro_rules! print {
    ($($t:tt)*) => { $crate::rt::print(1, format_args!($($t)*)) };
}
macro_rules! println {
    ($($t:tt)*) => { $crate::rt::print(1, format_args!("{}\n", format_args!($($t)*))) };
}
macro_rules! eprintln {
    ($($t:tt)*) => { $crate::rt::print(2, format_args!("{}\n", format_args!($($t)*))) };
}

mod prelude;
use opts::{Opts, VERSION};
use prelude::*;

mod arch;
mod convert;
mod dest;
mod events;
mod offcpu;
mod opts;
mod out;
mod perf;
mod plan;
mod record;
mod rt;
mod stat;
mod status;
mod strobe;
mod sys;
mod topdown;
mod usage;
mod workload;

const USAGE: &str = "labperf-agent: records perf events into labperf record files

USAGE:
  labperf-agent record|stat [OPTIONS] (-- CMD [ARGS] | -p PID | -t TID | -a | -C LIST)
  labperf-agent list [PMU] | plan (record|stat) [OPTIONS] | strobe-probe | --version
  labperf-agent replay RINGFILE [OPTIONS] -o FILE

OPTIONS (`labperf record --help` and `labperf stat --help` say more):
  -e LIST        events (repeatable): a,b,{leader,member}:u; name, rHEX, pmu/event/
  -c N | -F HZ   sample every N events (ns for the clocks) | about HZ times a second
  -g | --call-graph fp|dwarf[,SIZE]
  --off-cpu      also each thread's time off the CPU (offcpu-time, with stacks)
  -o FILE        record file (default labperf.lpr; stat only with -o)
  -p PID | -t TID  attach; -a | -C 0,2-3: every task on the CPUs; --duration SECS
  -I MS          stat: counts every MS ms
  --mmap-pages N --no-inherit --progress --flush-ms MS --status-file F
  --discard      record: read the rings, keep no record (the kernel's own cost)
  -q             record: no \"wrote N samples\" line at the end
  --metrics --window N --jitter --strobe MODE --topdown --level N --per-thread
  --sample-type HEX --read-format HEX (replay)
ENVIRONMENT: LABPERF_SYSFS (default /sys)

EXAMPLES:
  labperf-agent record -c 100000 -o run.lpr -- ./my-prog arg
  labperf-agent stat -I 500 -- ./my-prog arg

Exit status: the workload's (128+N: signal N); 125 agent failure; 127 CMD not run; 2 usage";

/// Most ring-buffer data pages per CPU (256 MiB of 4 KiB pages).
const MAX_MMAP_PAGES: usize = 1 << 16;

/// The stack bytes of `--call-graph dwarf,SIZE` (perf's default 8192): a multiple of 8,
/// at most the kernel's 65528.
fn dwarf_size(size: Option<&str>) -> Result<u32, String> {
    let Some(s) = size else { return Ok(8192) };
    match s.parse::<u32>() {
        Ok(n) if (8..=65528).contains(&n) => Ok(n & !7),
        _ => Err(format!(
            "--call-graph dwarf,SIZE takes 8 to 65528 bytes of stack, not '{s}'"
        )),
    }
}

fn num<T: core::str::FromStr>(flag: &str, v: Option<String>) -> Result<T, String> {
    let v = v.ok_or_else(|| format!("{flag} needs a value"))?;
    v.parse()
        .map_err(|_| format!("{flag} expects a number, got '{v}'"))
}

/// The most ms of `-I`, `--duration` and `--flush-ms`, as the C agent's `MAX_MS`: perf's
/// `-I` is an unsigned int of ms (49.7 days); the C agent's ns and poll's int timeout hold it.
pub const MAX_MS: u64 = u32::MAX as u64;

/// A number of ms from `least` to [`MAX_MS`].
fn ms_arg(flag: &str, v: Option<String>, least: u64) -> Result<u64, String> {
    let v = v.ok_or_else(|| format!("{flag} needs a value"))?;
    match v.parse() {
        Ok(ms) if (least..=MAX_MS).contains(&ms) => Ok(ms),
        _ => Err(format!("{flag} takes {least} to {MAX_MS} ms, not '{v}'")),
    }
}

fn hex(flag: &str, v: Option<String>) -> Result<u64, String> {
    let v = v.ok_or_else(|| format!("{flag} needs a value"))?;
    u64::from_str_radix(v.trim_start_matches("0x"), 16)
        .map_err(|_| format!("{flag} expects a hexadecimal number, got '{v}'"))
}

impl Opts {
    /// The workload's argv as text (for messages and the file header; non-UTF-8 bytes
    /// are shown as U+FFFD there, and passed on exactly to the workload).
    pub fn command_text(&self) -> Vec<String> {
        self.command
            .iter()
            .map(|a| a.to_string_lossy().into_owned())
            .collect()
    }
}

fn parse_opts(args: Vec<crate::rt::OsString>) -> Result<Opts, String> {
    let mut o = Opts {
        mmap_pages: 128,
        flush_ms: 1000,
        window: 300,
        strobe: "auto".into(),
        level: 1,
        ..Default::default()
    };
    let mut it = args.into_iter();
    while let Some(raw) = it.next() {
        // Options are text; the workload's arguments (after `--`) are kept as bytes.
        let Some(a) = raw.to_str().map(str::to_string) else {
            if raw.as_bytes().starts_with(b"-") {
                return Err(format!("option {raw:?} is not valid UTF-8"));
            }
            o.command.push(raw);
            o.command.extend(it.by_ref());
            break;
        };
        let (flag, inline) = match a.split_once('=') {
            Some((f, v)) if f.starts_with("--") => (f.to_string(), Some(v.to_string())),
            _ => (a.clone(), None),
        };
        // An option's value is text too: one that is not UTF-8 is refused below, not
        // changed (a file name `-o` would otherwise write to another name).
        let not_utf8 = core::cell::Cell::new(None);
        let mut val = || {
            inline.clone().or_else(|| {
                it.next().map(|v| {
                    if v.to_str().is_none() {
                        not_utf8.set(Some(v.clone()));
                    }
                    v.to_string_lossy().into_owned()
                })
            })
        };
        match flag.as_str() {
            "--" => {
                o.command = it.by_ref().collect();
                break;
            }
            "--status-file" => {
                o.status_file = Some(val().ok_or("--status-file needs a file name")?)
            }
            "--sample-type" => o.sample_type = Some(hex(&flag, val())?),
            "--read-format" => o.read_format = Some(hex(&flag, val())?),
            // perf's spelling: a comma list of events and {…} groups, one item each.
            "-e" | "--event" => {
                let v = val().ok_or("--event needs a value")?;
                let items = labperf_common::evlist::items(&v)?;
                o.events.extend(items.into_iter().map(String::from));
            }
            "-c" | "--period" => o.period = Some(num(&flag, val())?),
            "-F" | "--freq" => o.freq = Some(num(&flag, val())?),
            "-g" => o.call_graph = true,
            "--call-graph" => call_graph(
                &mut o,
                val().ok_or("--call-graph needs a mode: fp or dwarf[,SIZE]")?,
            )?,
            "-o" | "--output" => o.output = Some(val().ok_or("--output needs a file name")?),
            "-p" | "--pid" => o.pid = Some(num(&flag, val())?),
            "-t" | "--tid" => o.tid = Some(num(&flag, val())?),
            // Before the workload (which keeps its own --help): the usage.
            "-h" | "--help" => {
                println!("{USAGE}");
                crate::rt::exit(0)
            }
            "--no-summary" => o.no_summary = true,
            "-q" | "--quiet" => o.quiet = true,
            "-a" | "--all-cpus" => o.cpus = Some(o.cpus.take().unwrap_or_default()),
            "-C" | "--cpu" => o.cpus = Some(cpu_list(&val().unwrap_or_default())?),
            "--duration" => o.duration_ms = Some(millis(&val().unwrap_or_default())?),
            "-I" | "--interval" => o.interval_ms = Some(ms_arg(&flag, val(), 1)?),
            "--mmap-pages" => o.mmap_pages = num(&flag, val())?,
            "--flush-ms" => o.flush_ms = ms_arg(&flag, val(), 0)?,
            "--no-inherit" => o.no_inherit = true,
            "--discard" => o.discard = true,
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
            "--off-cpu" => o.off_cpu = true,
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
                o.command.push(raw);
                o.command.extend(it.by_ref());
                break;
            }
        }
        if let Some(v) = not_utf8.take() {
            return Err(format!("the value of {flag} is not valid UTF-8: {v:?}"));
        }
    }
    check(o)
}

/// `--call-graph MODE`: `fp`, or `dwarf[,SIZE]` where this architecture's registers are known.
fn call_graph(o: &mut Opts, mode: String) -> Result<(), String> {
    let mut parts = mode.splitn(2, ',');
    match (parts.next().unwrap_or(""), parts.next()) {
        ("fp", None) => o.call_graph = true,
        ("dwarf", size) => {
            if crate::arch::DWARF_REGS == 0 {
                return Err("--call-graph dwarf: no register layout is known for this architecture; use --call-graph fp".into());
            }
            o.dwarf = Some(dwarf_size(size)?);
        }
        ("lbr", _) => {
            return Err(
                "--call-graph lbr: this agent unwinds by frame pointers (fp) or DWARF (dwarf)"
                    .into(),
            )
        }
        _ => {
            return Err(format!(
                "--call-graph takes fp or dwarf[,SIZE], not '{mode}'"
            ))
        }
    }
    Ok(())
}

/// The rules between options, once all are read: what excludes what, the ranges, and
/// the workload each kind of target needs.
fn check(o: Opts) -> Result<Opts, String> {
    if o.period.is_some() && o.freq.is_some() {
        return Err("--period and --freq exclude each other: give one".into());
    }
    if o.period == Some(0) || o.freq == Some(0) {
        return Err("--period and --freq must be greater than 0".into());
    }
    if !o.mmap_pages.is_power_of_two() || o.mmap_pages > MAX_MMAP_PAGES {
        return Err(format!(
            "--mmap-pages must be a power of two from 1 to {MAX_MMAP_PAGES}, got {}",
            o.mmap_pages
        ));
    }
    if o.pid.is_some() && o.tid.is_some() {
        return Err("give --pid or --tid, not both".into());
    }
    let mut o = o;
    if o.off_cpu {
        if o.metrics || o.topdown {
            return Err("--off-cpu samples every event the usual way: it does not go with --metrics or --topdown".into());
        }
        // Where a thread blocked is its stack (perf's --off-cpu always takes it).
        o.call_graph |= o.dwarf.is_none();
    }
    let attached = o.pid.or(o.tid);
    if let Some(p) = attached {
        if p <= 0 {
            return Err(format!("--pid/--tid take an id greater than 0, got {p}"));
        }
    }
    if o.cpus.is_some() {
        if attached.is_some() {
            return Err("-a/-C record every task on the CPUs: --pid does not go with them".into());
        }
        if o.command.is_empty() && o.duration_ms.is_none() {
            return Err("-a/-C need --duration SECS or a command after --".into());
        }
        return Ok(o);
    }
    if o.duration_ms.is_some() && attached.is_none() {
        return Err(
            "--duration goes with -a, -C or --pid (a command ends the recording itself)".into(),
        );
    }
    match (attached.is_some(), o.command.is_empty()) {
        (true, false) => return Err("give either --pid or a command after --, not both".into()),
        (false, true) => return Err("no workload: give a command after -- or --pid PID".into()),
        _ => {}
    }
    Ok(o)
}

/// `--duration SECS` (`2`, `0.5`) in ms, without the float code (the agent's size budget).
fn millis(v: &str) -> Result<u64, String> {
    let (int, frac) = v.split_once('.').unwrap_or((v, ""));
    let mut ms = match int.parse::<u64>() {
        Ok(s) if s <= MAX_MS / 1000 && frac.len() <= 3 => Some(s * 1000),
        _ => None,
    };
    for (b, unit) in frac.bytes().zip([100, 10, 1]) {
        ms = ms
            .filter(|_| b.is_ascii_digit())
            .map(|m| m + u64::from(b - b'0') * unit);
    }
    match ms {
        Some(ms) if ms > 0 && ms <= MAX_MS => Ok(ms),
        _ => Err(format!(
            "--duration takes 0.001 to 4294967.295 seconds (2, 0.5), not '{v}'"
        )),
    }
}

/// `-C LIST`: CPU numbers and ranges, `0,2-3`.
fn cpu_list(s: &str) -> Result<Vec<i32>, String> {
    let bad = || format!("-C takes CPU numbers and ranges such as 0,2-3, not '{s}'");
    let mut on = [false; 4096];
    for part in s.split(',') {
        let (a, b) = part.split_once('-').unwrap_or((part, part));
        let (a, b): (usize, usize) = (a.parse().map_err(|_| bad())?, b.parse().map_err(|_| bad())?);
        if b < a || b >= on.len() {
            return Err(bad());
        }
        on[a..=b].fill(true);
    }
    Ok((0..on.len() as i32).filter(|&c| on[c as usize]).collect())
}

#[global_allocator]
static MALLOC: rt::Malloc = rt::Malloc;

// The C library, which `std` links for its users: musl's static libc.a for the agents
// (crt-static), the system's libc elsewhere.
#[cfg(all(not(test), panic = "abort"))]
#[cfg_attr(target_feature = "crt-static", link(name = "c", kind = "static"))]
#[cfg_attr(not(target_feature = "crt-static"), link(name = "c"))]
extern "C" {}

/// The precompiled `alloc` (built to unwind) names `_Unwind_Resume` and, on aarch64,
/// `rust_eh_personality` in its cleanup paths. With panic = "abort" no unwind ever starts,
/// so nothing calls them: were one called, the agent stops at once.
#[cfg(all(not(test), panic = "abort"))]
#[no_mangle]
extern "C" fn _Unwind_Resume() -> ! {
    // SAFETY: ends the process.
    unsafe { libc::abort() }
}
#[cfg(all(not(test), panic = "abort"))]
#[no_mangle]
extern "C" fn rust_eh_personality() -> ! {
    // SAFETY: ends the process.
    unsafe { libc::abort() }
}

/// The entry point musl's C runtime calls (the `no_std` agent).
#[cfg(all(not(test), panic = "abort"))]
#[no_mangle]
extern "C" fn main(argc: i32, argv: *const *const libc::c_char) -> i32 {
    rt::open_standard_fds();
    // SAFETY: the C runtime's argc and argv.
    run(unsafe { rt::args_os(argc, argv) })
}

/// A panic is the agent's failure: its message, then exit status 125 (no status file: the
/// host reads a missing one as a killed agent).
#[cfg(all(not(test), panic = "abort"))]
#[panic_handler]
fn panic(info: &core::panic::PanicInfo) -> ! {
    rt::panicked(info)
}

/// The entry point of the agent built with `std` (unwinding profiles: clippy, tests).
#[cfg(all(not(test), not(panic = "abort")))]
fn main() {
    use std::os::unix::ffi::OsStringExt;
    std::panic::set_hook(Box::new(|info| rt::panicked(info)));
    let args = std::env::args_os().map(|a| rt::OsString::from_vec(a.into_vec()));
    run(args.collect())
}

/// The agent's command line (its name first) → its exit status; never returns.
#[cfg_attr(test, allow(dead_code))]
fn run(args: Vec<rt::OsString>) -> ! {
    // SIGPIPE is ignored, as `std` programs ignore it: a record file, status file or
    // output written into a closed FIFO or pipe is an error the agent reports (EPIPE),
    // not its death. The workload gets the default back (`workload.rs`).
    // SAFETY: setting a signal's disposition.
    unsafe { libc::signal(libc::SIGPIPE, libc::SIG_IGN) };
    let mut args: Vec<rt::OsString> = args.into_iter().skip(1).collect();
    if args.is_empty() {
        eprintln!("{USAGE}");
        crate::rt::exit(2);
    }
    let cmd = args.remove(0).to_string_lossy().into_owned();
    // `list --help` (the other verbs' options see it in `parse_opts`).
    if args.first().is_some_and(|a| a == "-h" || a == "--help") {
        println!("{USAGE}");
        crate::rt::exit(0);
    }
    let code = match cmd.as_str() {
        "-V" | "--version" | "version" => {
            println!("{VERSION} ({})", sys::arch().name());
            0
        }
        "-h" | "--help" | "help" => {
            println!("{USAGE}");
            0
        }
        // The panic path, for tests (tests/tests/agent_errors.rs): message, status 125.
        "__panic" => panic!("asked to panic ({} arguments)", args.len()),
        "strobe-probe" => match parse_opts(
            args.into_iter()
                .chain(["--".into(), "probe".into()])
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
            let verb = args
                .first()
                .map(|v| v.to_string_lossy().into_owned())
                .unwrap_or_default();
            let mut rest: Vec<crate::rt::OsString> = args.into_iter().skip(1).collect();
            if !rest
                .iter()
                .any(|a| ["--", "-p", "--pid", "-t", "--tid"].contains(&a.to_str().unwrap_or("")))
            {
                rest.extend(["--".into(), "CMD".into()]);
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
            print!("{}", events::list(args.first().and_then(|a| a.to_str())));
            0
        }
        "replay" => {
            let ring = args.first().map(|a| a.to_string_lossy().into_owned());
            let rest: Vec<crate::rt::OsString> = args
                .into_iter()
                .skip(1)
                .chain(["--".into(), "replay".into()])
                .collect();
            match (ring, parse_opts(rest)) {
                (Some(ring), Ok(o)) => finish(&o, record::replay(&o, &ring)),
                (None, _) => {
                    eprintln!("labperf-agent: replay needs the ring dump file");
                    2
                }
                (_, Err(e)) => {
                    eprintln!("labperf-agent: {e}");
                    2
                }
            }
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
                finish(&o, r)
            }
        },
        other => {
            eprintln!("labperf-agent: unknown command '{other}'\n\n{USAGE}");
            2
        }
    };
    crate::rt::exit(code);
}

/// Reports a run's result (its status file, its error) and gives the exit code.
fn finish(o: &Opts, r: Result<i32, status::Fail>) -> i32 {
    if let Some(f) = &o.status_file {
        status::write(f, &r, o.no_summary);
    }
    match r {
        Ok(code) => code,
        Err(e) => {
            eprintln!("labperf-agent: error: {e}");
            e.exit_code()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn s(v: &[&str]) -> Vec<rt::OsString> {
        v.iter().map(|&x| x.into()).collect()
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
        // perf's comma lists: one event or group per item, -e repeated or not.
        let listed = parse_opts(s(&[
            "-e",
            "task-clock,{cs,page-faults}:u",
            "--event=cycles",
            "--",
            "p",
        ]))
        .unwrap();
        assert_eq!(
            listed.events,
            ["task-clock", "{cs,page-faults}:u", "cycles"]
        );
        assert!(parse_opts(s(&["-e", "a,,b", "--", "p"]))
            .unwrap_err()
            .contains("empty item"));
        assert_eq!(o.period, Some(1000));
        assert_eq!(o.output.as_deref(), Some("x.lpr"));
        assert_eq!(o.command, ["prog", "-e", "a b"]);
        // Workload arguments are bytes: non-UTF-8 ones pass through untouched.
        let bad = rt::OsString::from_vec(vec![b'x', 0xff, b'y']);
        let mut args = s(&["--", "prog"]);
        args.push(bad.clone());
        assert_eq!(parse_opts(args).unwrap().command[1], bad);
        let mut args = s(&["-e", "cpu-clock"]);
        args.push(bad.clone());
        assert_eq!(
            parse_opts(args).unwrap().command,
            core::slice::from_ref(&bad)
        );
        // An option's value is text: refused, not changed.
        let mut args = s(&["-o"]);
        args.push(bad.clone());
        args.extend(s(&["--", "prog"]));
        assert_eq!(
            parse_opts(args).unwrap_err(),
            "the value of -o is not valid UTF-8: \"x\\xFFy\""
        );
    }

    #[test]
    fn call_graph_takes_perf_s_spellings_and_refuses_other_unwinders() {
        for flags in [&["-g"][..], &["--call-graph", "fp"], &["--call-graph=fp"]] {
            let mut a = s(flags);
            a.extend(s(&["--", "p"]));
            assert!(parse_opts(a).unwrap().call_graph, "{flags:?}");
        }
        assert!(!parse_opts(s(&["--", "p"])).unwrap().call_graph);
        // dwarf: perf's default stack size, or the one given (a multiple of 8).
        let d = |f: &[&str]| {
            let mut a = s(f);
            a.extend(s(&["--", "p"]));
            parse_opts(a).map(|o| o.dwarf)
        };
        assert_eq!(d(&["--call-graph", "dwarf"]), Ok(Some(8192)));
        assert_eq!(d(&["--call-graph", "dwarf,4100"]), Ok(Some(4096)));
        assert_eq!(d(&["--call-graph", "fp"]), Ok(None));
        for bad in ["dwarf,0", "dwarf,65536", "dwarf,x"] {
            assert!(d(&["--call-graph", bad])
                .unwrap_err()
                .contains("8 to 65528"));
        }
        assert!(d(&["--call-graph", "lbr"]).unwrap_err().contains("lbr"));
        assert!(parse_opts(s(&["--call-graph", "x", "--", "p"]))
            .unwrap_err()
            .contains("takes fp or dwarf"));
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
        for bad in ["0", "-1"] {
            assert!(parse_opts(s(&["--pid", bad]))
                .unwrap_err()
                .contains("greater than 0"));
        }
        assert!(
            parse_opts(s(&["--mmap-pages", "1073741824", "--", "p"]))
                .unwrap_err()
                .contains("up to 65536")
                || parse_opts(s(&["--mmap-pages", "1073741824", "--", "p"]))
                    .unwrap_err()
                    .contains("from 1 to 65536")
        );
        assert!(parse_opts(s(&["--mmap-pages", "65536", "--", "p"])).is_ok());
    }

    #[test]
    fn whole_machine_options() {
        let o = parse_opts(s(&["-a", "--duration", "1.5"])).unwrap();
        assert_eq!(millis("0.025"), Ok(25));
        assert_eq!(millis("3"), Ok(3000));
        assert_eq!(millis("4294967.295"), Ok(MAX_MS));
        for bad in ["0", "0.0001", "-1", "x", "1.x", "1.x5", ""] {
            assert!(millis(bad).is_err(), "{bad}");
        }
        assert_eq!((o.cpus, o.duration_ms), (Some(vec![]), Some(1500)));
        let o = parse_opts(s(&["-C", "3,0-1,1", "--", "p"])).unwrap();
        assert_eq!(o.cpus, Some(vec![0, 1, 3]));
        // A running process or one thread of it, for a while (perf's -p/-t).
        let o = parse_opts(s(&["-t", "7", "--duration", "0.5"])).unwrap();
        assert_eq!((o.pid, o.tid, o.duration_ms), (None, Some(7), Some(500)));
        let o = parse_opts(s(&["--pid=8", "--duration", "2"])).unwrap();
        assert_eq!((o.pid, o.tid, o.duration_ms), (Some(8), None, Some(2000)));
        for (args, why) in [
            (&["-a"][..], "need --duration"),
            (&["-a", "--pid", "1"], "--pid does not go"),
            (&["-C", "0", "-t", "1"], "--pid does not go"),
            (&["-p", "1", "-t", "2"], "not both"),
            (&["-t", "0"], "greater than 0"),
            (&["-t", "3", "--", "p"], "not both"),
            (&["--duration", "1", "--", "p"], "goes with -a"),
            (&["-a", "--duration", "0"], "0.001 to 4294967.295 seconds"),
            (
                &["-a", "--duration", "4294967.296"],
                "0.001 to 4294967.295 seconds",
            ),
            (
                &["-a", "-I", "4294967296", "--duration", "1"],
                "1 to 4294967295 ms",
            ),
            (&["-C", "2-1", "--duration", "1"], "ranges"),
            (&["-C", "x", "--duration", "1"], "ranges"),
        ] {
            assert!(parse_opts(s(args)).unwrap_err().contains(why), "{args:?}");
        }
    }
}

// The agent is built with panic = "abort" (`cargo xtask build-agents`: the `agent` profile):
// build.rs drops the unwind tables of its optimized musl builds, which only abort can do
// without. (At the end of the file, so that no panic location's line moves.)
#[cfg(all(target_env = "musl", not(debug_assertions), not(panic = "abort")))]
compile_error!(
    "build the agent with `cargo xtask build-agents` (cargo's `--profile agent`, panic = \"abort\")"
);
