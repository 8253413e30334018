//! A Rust program as `cargo build --release` makes one (here `rustc -C opt-level=2`, with
//! and without debuginfo): its own functions, the standard library's generic code (sort,
//! HashMap, formatting) monomorphized into them, and a closure.
//!   main -> checksum
//!        -> collatz_longest
//!        -> sort_names -> slice::sort (std, generic)
//!        -> count_words -> HashMap
//!        -> render -> fmt::write (std)
//! Each timed function adds its CPU time (callees included) from CLOCK_PROCESS_CPUTIME_ID.
//! argv[1]: rounds. Prints "split total T name t ...".
use std::collections::HashMap;
use std::hint::black_box;

#[repr(C)]
struct Timespec {
    sec: i64,
    nsec: i64,
}

extern "C" {
    fn clock_gettime(clock: i32, t: *mut Timespec) -> i32;
    #[cfg(target_env = "gnu")]
    fn mallopt(param: i32, value: i32) -> i32;
}

/// The process's CPU time in seconds.
fn now() -> f64 {
    let mut t = Timespec { sec: 0, nsec: 0 };
    // SAFETY: a valid out-pointer; CLOCK_PROCESS_CPUTIME_ID is 2.
    unsafe { clock_gettime(2, &mut t) };
    t.sec as f64 + t.nsec as f64 / 1e9
}

/// Runs `f`, adding its CPU time to `slot`.
#[inline(always)]
fn timed<T>(slot: &mut f64, f: impl FnOnce() -> T) -> T {
    let t0 = now();
    let r = f();
    *slot += now() - t0;
    r
}

#[inline(never)]
fn checksum(data: &[u8], slot: &mut f64) -> u64 {
    timed(slot, || {
        let mut h = 0xcbf29ce484222325u64;
        for _ in 0..24 {
            for &b in data {
                h = (h ^ b as u64).wrapping_mul(0x100000001b3);
            }
        }
        h
    })
}

#[inline(never)]
fn collatz_longest(limit: u64, slot: &mut f64) -> u64 {
    timed(slot, || {
        (1..limit)
            .map(|mut n| {
                let mut steps = 0u64;
                while n != 1 {
                    n = if n % 2 == 0 { n / 2 } else { 3 * n + 1 };
                    steps += 1;
                }
                steps
            })
            .max()
            .unwrap_or(0)
    })
}

#[inline(never)]
fn sort_names(names: &[String], slot: &mut f64) -> usize {
    timed(slot, || {
        let mut v = names.to_vec();
        v.sort_unstable_by(|a, b| a.len().cmp(&b.len()).then_with(|| a.cmp(b)));
        v.sort();
        v[0].len() + v[v.len() - 1].len()
    })
}

#[inline(never)]
fn count_words(names: &[String], slot: &mut f64) -> usize {
    timed(slot, || {
        let mut m: HashMap<&str, u32> = HashMap::new();
        for w in names {
            *m.entry(w.as_str()).or_default() += 1;
        }
        m.len()
    })
}

#[inline(never)]
fn render(values: &[u64], slot: &mut f64) -> usize {
    timed(slot, || {
        let mut s = String::new();
        for v in values {
            use std::fmt::Write;
            let _ = write!(s, "{v:>12} {:.3}|", *v as f64 / 7.0);
        }
        s.len()
    })
}

fn main() {
    // glibc's malloc keeps what is freed (no trimming, no mmap per large block): each round
    // would otherwise give its heap back and fault it in again, kernel time that user-mode
    // samples do not see but the CPU clock counts.
    // SAFETY: mallopt takes plain integers (M_TRIM_THRESHOLD -1, M_MMAP_THRESHOLD -3).
    #[cfg(target_env = "gnu")]
    unsafe {
        mallopt(-1, i32::MAX);
        mallopt(-3, i32::MAX);
    }
    let start = now();
    let rounds: usize = std::env::args()
        .nth(1)
        .and_then(|a| a.parse().ok())
        .unwrap_or(10);
    let data: Vec<u8> = (0..65536u32).map(|i| (i * 31) as u8).collect();
    let names: Vec<String> = (0..20000u64)
        .map(|i| format!("n{}", i.wrapping_mul(2654435761) % 7919))
        .collect();
    let values: Vec<u64> = (0..4000u64).map(|i| i * i).collect();
    let (mut t_sum, mut t_collatz, mut t_sort, mut t_count, mut t_render) = (0.0, 0.0, 0.0, 0.0, 0.0);
    let mut x = 0u64;
    for _ in 0..rounds {
        x += checksum(black_box(&data), &mut t_sum);
        x += collatz_longest(black_box(12000), &mut t_collatz);
        x += sort_names(black_box(&names), &mut t_sort) as u64;
        x += count_words(black_box(&names), &mut t_count) as u64;
        x += render(black_box(&values), &mut t_render) as u64;
    }
    black_box(x);
    println!(
        "split total {:.6} checksum {t_sum:.6} collatz_longest {t_collatz:.6} sort_names {t_sort:.6} count_words {t_count:.6} render {t_render:.6}",
        now() - start
    );
}
