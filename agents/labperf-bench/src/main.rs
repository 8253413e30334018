//! labperf-bench: the known-answer workload. Each behaviour class is its own non-inlined function
//! with a stable (unmangled) name; the run rotates through them for a given time split.

use std::hint::black_box;
use std::time::{Duration, Instant};

mod blocking;
mod classes;

const USAGE: &str = "labperf-bench: rotates through behaviour classes, one named function each

USAGE: labperf-bench [--duration SECS] [--classes LIST | --calls | --blocking LIST]
                     [--slice-ms MS] [--threads N] [--list]

  --duration SECS   how long to run in total (default 2; fractions allowed)
  --classes LIST    comma-separated classes with optional weights, e.g.
                    int_divider_stalls=2,nops=1 (default: all, weight 1)
  --slice-ms MS     CPU time per weight unit in each round (default 5)
  --calls           a fixed call tree instead of --classes, with known inclusive
                    shares: main -> calls_a -> {int_divider_stalls, nops} and
                    main -> calls_b -> {nops, fp_divider_stalls}, each leaf 1/4 of the time
                    (calls_a 50%, calls_b 50%, nops 50%; calls_b calls through an inlined
                    function, calls_b_inlined); built with frame pointers and line tables
  --threads N       run the rotation in N threads (main and N-1 more, named bench-1...),
                    each with its own random slices; the split holds in each (default 1)
  --blocking LIST   rotate through blocking classes instead, with optional weights
                    (block_sleep, block_mutex, block_pipe, block_file, spin_wall, or
                    'all'): each slice lasts weight x slice-ms of WALL-CLOCK time, spent
                    off the CPU but for spin_wall (and block_file's copying); a helper
                    thread, bench-helper, holds the mutex and answers the pipe
  --list            print the classes and their function names

The split of the bench's CPU time is weight / sum(weights) per class (CPU
time, not wall time, so preemption does not skew it). Each round starts at the
next class and each slice's length varies randomly around its mean, so slices
never line up with a sampling period or a timer tick.

THE KNOWN ANSWER: the asked split holds on average only (the slices are random, the
seed fixed). At exit, in every mode, the bench prints to stderr the CPU time each
class actually took, measured with the thread's CPU clock, one line per thread and
call path, then the process's CPU time:

  labperf-bench: cpu thread=NAME tid=TID path=F1;F2;...;CLASS ns=NANOSECONDS
  labperf-bench: cpu-process ns=NANOSECONDS

The path lists the bench's functions from the rotation down to the class function:
'CLASS' for --classes, 'calls_a;CLASS' and 'calls_b;calls_b_inlined;CLASS' for --calls,
'calibrate;CLASS' for the calibration main runs before the rotation. Threads are
'main' and 'bench-N'. cpu-process is CLOCK_PROCESS_CPUTIME_ID at exit (set-up, the
calibration, every thread and the clock reads included).

With --blocking the bench also prints each class's wall-clock time, and the
rotation's, measured around each call (a class's off-CPU time is its wall time
less its CPU time):

  labperf-bench: wall thread=main tid=TID path=CLASS ns=NANOSECONDS
  labperf-bench: wall-rotation thread=main tid=TID ns=NANOSECONDS

EXAMPLES: labperf-bench --duration 3 --classes fp_divider_stalls=3,dcache_miss=1
          labperf-bench --duration 2 --blocking block_sleep=2,block_mutex,spin_wall";

fn main() {
    let Some(args) = parse_args() else { return };
    if let Some(sel) = &args.blocking {
        run_blocking(&args, sel);
        return;
    }
    let (sel, path) = entries(args.sel, args.calls);
    let state = classes::State::new(
        sel.iter()
            .any(|&(i, _)| classes::CLASSES[i].name == "dcache_miss"),
    );
    // Calibrate: work units per ~BLOCK_US block for each class, so the clock is read rarely.
    // The CPU time it takes is part of the known answer (each class function runs in it).
    let (blocks, calibration): (Vec<u64>, Vec<Duration>) = sel
        .iter()
        .map(|&(i, _)| {
            let t0 = thread_cpu_time();
            let b = calibrate(&state, i);
            (b, thread_cpu_time().saturating_sub(t0))
        })
        .unzip();
    let end = Instant::now() + Duration::from_secs_f64(args.duration);
    let plan = Plan {
        state: &state,
        sel: &sel,
        path: &path,
        blocks: &blocks,
        slice_ms: args.slice_ms,
        end,
    };
    // The main thread rotates too; each other thread runs the same rotation with its own
    // random slices, and returns the CPU time each entry's slices took in it.
    let per_thread = std::thread::scope(|sc| {
        let others: Vec<_> = (1..args.threads)
            .map(|t| {
                let plan = &plan;
                std::thread::Builder::new()
                    .name(format!("bench-{t}"))
                    .spawn_scoped(sc, move || (gettid(), rotate(plan, t)))
                    .unwrap_or_else(|e| fail(format!("cannot start a thread: {e}")))
            })
            .collect();
        let mut all = vec![("main".to_string(), gettid(), rotate(&plan, 0))];
        for (t, h) in others.into_iter().enumerate() {
            let (tid, spent) = h.join().expect("a bench thread panicked");
            all.push((format!("bench-{}", t + 1), tid, spent));
        }
        all
    });
    print_known_answer(&sel, &path, &calibration, &per_thread);
}

/// A usage error: the reason and the usage, exit status 2.
fn fail(m: String) -> ! {
    eprintln!("labperf-bench: {m}\n\n{USAGE}");
    std::process::exit(2)
}

/// The command line.
struct Args {
    duration: f64,
    slice_ms: f64,
    /// `--classes`: (index into CLASSES, weight), in the order given.
    sel: Vec<(usize, u32)>,
    calls: bool,
    threads: usize,
    /// `--blocking`: (index into BLOCKING, weight), in the order given.
    blocking: Option<Vec<(usize, u32)>>,
}

/// Reads the command line (exits 2 on a usage error); `None` when it asked for the
/// class list or the help, printed here.
fn parse_args() -> Option<Args> {
    let mut a = Args {
        duration: 2.0,
        slice_ms: 5.0,
        sel: Vec::new(),
        calls: false,
        threads: 1,
        blocking: None,
    };
    let args: Vec<String> = std::env::args().skip(1).collect();
    let mut i = 0;
    while i < args.len() {
        let val = |i: usize| {
            args.get(i + 1)
                .cloned()
                .unwrap_or_else(|| fail(format!("{} needs a value", args[i])))
        };
        match args[i].as_str() {
            "--calls" => {
                a.calls = true;
                i += 1;
                continue;
            }
            "--duration" => {
                a.duration = val(i)
                    .parse()
                    .unwrap_or_else(|_| fail("--duration expects seconds".into()))
            }
            "--threads" => {
                a.threads = val(i)
                    .parse()
                    .ok()
                    .filter(|&n: &usize| (1..=64).contains(&n))
                    .unwrap_or_else(|| fail("--threads expects 1 to 64".into()))
            }
            "--slice-ms" => {
                a.slice_ms = val(i)
                    .parse()
                    .unwrap_or_else(|_| fail("--slice-ms expects milliseconds".into()))
            }
            "--classes" => {
                let names: Vec<&str> = classes::CLASSES.iter().map(|c| c.name).collect();
                a.sel.extend(weights(&val(i), &names));
            }
            "--blocking" => {
                let names: Vec<&str> = blocking::BLOCKING.iter().map(|c| c.name).collect();
                let v = val(i);
                a.blocking = Some(if v == "all" {
                    (0..names.len()).map(|i| (i, 1)).collect()
                } else {
                    weights(&v, &names)
                });
            }
            "--list" => {
                for c in classes::CLASSES {
                    println!("{:<20} {}", c.name, c.what);
                }
                for c in blocking::BLOCKING {
                    println!("{:<20} {} (--blocking)", c.name, c.what);
                }
                return None;
            }
            "-h" | "--help" => {
                println!("{USAGE}");
                return None;
            }
            o => fail(format!("unknown argument '{o}'")),
        }
        i += 2;
    }
    if !(a.duration > 0.0 && a.slice_ms > 0.0) {
        fail("--duration and --slice-ms must be positive".into());
    }
    if a.calls && !a.sel.is_empty() {
        fail("--calls runs its own classes: drop --classes".into());
    }
    if a.blocking.is_some() && (a.calls || !a.sel.is_empty() || a.threads > 1) {
        fail(
            "--blocking runs on the main thread alone: drop --classes, --calls and --threads"
                .into(),
        );
    }
    if a.blocking
        .as_ref()
        .is_some_and(|b| b.iter().all(|&(_, w)| w == 0))
    {
        fail("--blocking needs a class with a weight above 0".into());
    }
    Some(a)
}

/// A list of `name[=weight]` items, each name one of `names`: (index, weight) in the
/// order given (exits 2 on an unknown name or a weight that is not a whole number).
fn weights(list: &str, names: &[&str]) -> Vec<(usize, u32)> {
    list.split(',')
        .filter(|p| !p.is_empty())
        .map(|part| {
            let (name, w) = part.split_once('=').unwrap_or((part, "1"));
            let idx = names
                .iter()
                .position(|c| *c == name)
                .unwrap_or_else(|| fail(format!("unknown class '{name}'")));
            let w: u32 = w
                .parse()
                .unwrap_or_else(|_| fail(format!("weight of '{name}' must be a whole number")));
            (idx, w)
        })
        .collect()
}

/// `--blocking`: the main thread rotates through the blocking classes for the duration,
/// each slice `weight × slice-ms × a random factor` of wall-clock time, and prints each
/// class's CPU and wall-clock time, measured around its calls (see USAGE).
fn run_blocking(args: &Args, sel: &[(usize, u32)]) {
    let sel: Vec<(usize, u32)> = sel.iter().copied().filter(|&(_, w)| w > 0).collect();
    let with_file = sel
        .iter()
        .any(|&(i, _)| blocking::BLOCKING[i].name == "block_file");
    let waits = blocking::Waits::new(with_file)
        .unwrap_or_else(|e| fail(format!("cannot set up the blocking classes: {e}")));
    let n = sel.len();
    let (mut cpu, mut wall) = (vec![Duration::ZERO; n], vec![Duration::ZERO; n]);
    let mut rng = Rng::new(0);
    let mut sink = 0u64;
    let start = Instant::now();
    let end = start + Duration::from_secs_f64(args.duration);
    let mut round = 0;
    'run: loop {
        for k in 0..n {
            if Instant::now() >= end {
                break 'run;
            }
            let j = (k + round) % n;
            let (idx, w) = sel[j];
            let slice = Duration::from_secs_f64(args.slice_ms * w as f64 * rng.factor() / 1000.0);
            let (c0, t0) = (thread_cpu_time(), Instant::now());
            sink = sink.wrapping_add((blocking::BLOCKING[idx].run)(&waits, slice));
            wall[j] += t0.elapsed();
            cpu[j] += thread_cpu_time().saturating_sub(c0);
        }
        round += 1;
    }
    let rotation = start.elapsed();
    black_box(sink);
    let tid = gettid();
    let mut out = String::new();
    for (j, &(idx, _)) in sel.iter().enumerate() {
        let name = blocking::BLOCKING[idx].name;
        out += &format!(
            "labperf-bench: cpu thread=main tid={tid} path={name} ns={}\n",
            cpu[j].as_nanos()
        );
        out += &format!(
            "labperf-bench: wall thread=main tid={tid} path={name} ns={}\n",
            wall[j].as_nanos()
        );
    }
    out += &format!(
        "labperf-bench: wall-rotation thread=main tid={tid} ns={}\n",
        rotation.as_nanos()
    );
    out += &format!(
        "labperf-bench: cpu-process ns={}\n",
        cpu_time(libc::CLOCK_PROCESS_CPUTIME_ID).as_nanos()
    );
    drop(waits);
    use std::io::Write;
    let _ = std::io::stderr().lock().write_all(out.as_bytes());
}

/// The slices' random factors: xorshift64, a fixed seed per thread.
struct Rng(u64);

impl Rng {
    fn new(t: usize) -> Rng {
        Rng(0x2545_F491_4F6C_DD1Du64 ^ (t as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15))
    }

    /// A factor in [0.5, 1.5).
    fn factor(&mut self) -> f64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        0.5 + (self.0 >> 11) as f64 / (1u64 << 53) as f64
    }
}

/// The entries the rotation runs, (class index, weight) with a weight above 0, and each
/// one's caller: 0 main itself, 1 calls_a, 2 calls_b (`--calls`' tree). Every class once
/// when none was asked.
fn entries(mut sel: Vec<(usize, u32)>, calls: bool) -> (Vec<(usize, u32)>, Vec<u8>) {
    let mut path: Vec<u8> = Vec::new();
    if calls {
        let class = |n: &str| {
            classes::CLASSES
                .iter()
                .position(|c| c.name == n)
                .expect("a class of the call tree")
        };
        sel = vec![
            (class("int_divider_stalls"), 1),
            (class("nops"), 1),
            (class("nops"), 1),
            (class("fp_divider_stalls"), 1),
        ];
        path = vec![1, 1, 2, 2];
    }
    if sel.is_empty() {
        sel = (0..classes::CLASSES.len()).map(|i| (i, 1)).collect();
    }
    path.resize(sel.len(), 0);
    sel.into_iter()
        .zip(path)
        .filter(|&((_, w), _)| w > 0)
        .unzip()
}

/// The known answer, as it happened: one line per thread and path (see USAGE), written
/// to stderr at once.
fn print_known_answer(
    sel: &[(usize, u32)],
    path: &[u8],
    calibration: &[Duration],
    per_thread: &[(String, i64, Vec<Duration>)],
) {
    let mut out = String::new();
    let path_of = |j: usize| match path[j] {
        1 => "calls_a;",
        2 => "calls_b;calls_b_inlined;",
        _ => "",
    };
    let (main_name, main_tid, _) = &per_thread[0];
    for (j, &(idx, _)) in sel.iter().enumerate() {
        out += &format!(
            "labperf-bench: cpu thread={main_name} tid={main_tid} path=calibrate;{} ns={}\n",
            classes::CLASSES[idx].name,
            calibration[j].as_nanos()
        );
    }
    for (name, tid, spent) in per_thread {
        for (j, &(idx, _)) in sel.iter().enumerate() {
            out += &format!(
                "labperf-bench: cpu thread={name} tid={tid} path={}{} ns={}\n",
                path_of(j),
                classes::CLASSES[idx].name,
                spent[j].as_nanos()
            );
        }
    }
    out += &format!(
        "labperf-bench: cpu-process ns={}\n",
        cpu_time(libc::CLOCK_PROCESS_CPUTIME_ID).as_nanos()
    );
    // One write, so the lines stay whole next to whatever else writes to stderr.
    use std::io::Write;
    let _ = std::io::stderr().lock().write_all(out.as_bytes());
}

/// This thread's id (what the kernel's samples name as tid).
fn gettid() -> i64 {
    // SAFETY: gettid has no preconditions.
    unsafe { libc::syscall(libc::SYS_gettid) }
}

/// What each thread rotates through, until `end`.
struct Plan<'a> {
    state: &'a classes::State,
    sel: &'a [(usize, u32)],
    /// Each entry's caller: 0 main itself, 1 calls_a, 2 calls_b.
    path: &'a [u8],
    blocks: &'a [u64],
    slice_ms: f64,
    end: Instant,
}

/// One thread's rotation through the plan's classes (thread `t` starts at entry `t` with
/// its own random slices); the CPU time each entry's slices took. Every thread's stack
/// goes through here (the frame `--threads` stacks share below the tree).
#[inline(never)]
fn rotate(p: &Plan, t: usize) -> Vec<Duration> {
    let n = p.sel.len();
    let mut round = t;
    let mut sink = 0u64;
    // Each slice lasts weight × slice-ms × a random factor in [0.5, 1.5): the split holds
    // on average, and no timer or sampling period can stay in step with the slices.
    let mut rng = Rng::new(t);
    let mut spent = vec![Duration::ZERO; n];
    while Instant::now() < p.end {
        for k in 0..n {
            let j = (k + round) % n;
            let (idx, w) = p.sel[j];
            let slice = Duration::from_secs_f64(p.slice_ms * w as f64 * rng.factor() / 1000.0);
            let t0 = thread_cpu_time();
            sink = sink.wrapping_add(match p.path[j] {
                1 => calls_a(p.state, idx, p.blocks[j], slice),
                2 => calls_b(p.state, idx, p.blocks[j], slice),
                _ => run_slice(p.state, idx, p.blocks[j], slice),
            });
            spent[j] += thread_cpu_time().saturating_sub(t0);
            if Instant::now() >= p.end {
                break;
            }
        }
        round += 1;
    }
    black_box(sink);
    spent
}

/// CPU time consumed by this thread. Slices are measured in CPU time, so the
/// split holds however often the bench is preempted (as cpu-clock samples it).
fn thread_cpu_time() -> Duration {
    cpu_time(libc::CLOCK_THREAD_CPUTIME_ID)
}

/// The CPU-time clock `clock` (this thread's or this process's).
fn cpu_time(clock: libc::clockid_t) -> Duration {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: valid timespec pointer; both CPU-time clocks exist on every Linux.
    unsafe { libc::clock_gettime(clock, &mut ts) };
    Duration::new(ts.tv_sec as u64, ts.tv_nsec as u32)
}

/// `--calls`: the first inner node of the call tree. Its result is used after the call,
/// so the call is not a tail jump (the frame stays on the stack), and its constant
/// differs from calls_b's, so the two are not merged into one function.
#[inline(never)]
fn calls_a(state: &classes::State, idx: usize, block: u64, slice: Duration) -> u64 {
    let r = run_slice(state, idx, block, slice);
    black_box(r) ^ 0xa
}

/// `--calls`: the second inner node of the call tree. It calls through `calls_b_inlined`,
/// which is inlined into it: a frame only DWARF knows (the known answer for inlined frames).
#[inline(never)]
fn calls_b(state: &classes::State, idx: usize, block: u64, slice: Duration) -> u64 {
    let r = calls_b_inlined(state, idx, block, slice);
    black_box(r) ^ 0xb0
}

/// `--calls`: inlined into calls_b (never a frame of its own on the stack).
#[inline(always)]
fn calls_b_inlined(state: &classes::State, idx: usize, block: u64, slice: Duration) -> u64 {
    let r = run_slice(state, idx, block, slice);
    black_box(r).rotate_left(3)
}

/// Runs class `idx` in blocks until `slice` of CPU time has passed. It stops where the
/// next block would end further past the slice's end than this one ends before it, so a
/// slice lasts `slice` on average whatever a class's block costs (no class gains time by
/// overshooting).
#[inline(never)]
fn run_slice(state: &classes::State, idx: usize, block: u64, slice: Duration) -> u64 {
    let mut now = thread_cpu_time();
    let end = now + slice;
    let mut acc = 0u64;
    loop {
        acc = acc.wrapping_add((classes::CLASSES[idx].run)(state, block));
        let t = thread_cpu_time();
        let last = t.saturating_sub(now);
        now = t;
        if now + last / 2 >= end {
            return acc;
        }
    }
}

/// CPU time of one block of work between clock reads. Each read of the thread's CPU clock is
/// a system call: kernel time, which no user-mode sample sees, and dearer after a class that
/// thrashes the caches and TLB (dcache_miss): the likely reason a loaded CI machine once gave
/// that class 7% of the samples for 10% of the CPU time with 50 µs blocks. At 200 µs the
/// reads are a quarter as many; `run_slice` ends slices without bias whatever the block.
const BLOCK_US: f64 = 200.0;

/// Work units per ~BLOCK_US of CPU time for class `idx`. Measured in thread CPU time, so
/// a preemption during calibration cannot shrink the block (a tiny block would spend
/// the slice in `clock_gettime`, in the kernel, where user-only sampling sees nothing);
/// the fastest of three tries wins, for the same reason. A frame of its own (the path
/// `calibrate;CLASS` of the known answer).
#[inline(never)]
fn calibrate(state: &classes::State, idx: usize) -> u64 {
    let mut best = 1u64;
    for _ in 0..3 {
        let mut n = 16u64;
        loop {
            let t = thread_cpu_time();
            black_box((classes::CLASSES[idx].run)(state, n));
            let e = thread_cpu_time().saturating_sub(t);
            if e >= Duration::from_micros(200) || n >= 1 << 30 {
                let per = (n as f64 * BLOCK_US / e.as_secs_f64().max(1e-9) / 1e6).max(1.0) as u64;
                best = best.max(per);
                break;
            }
            n *= 2;
        }
    }
    best
}
