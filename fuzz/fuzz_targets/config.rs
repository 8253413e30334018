//! Fuzz target: the ssh config (`ssh_config::Config`, then a lookup of names it and the
//! fuzzer give), the hosts file in TOML, and Ansible inventories in INI and YAML
//! (`hosts::parse`, names checked as OpenSSH checks them) never panic and hold at most
//! [`LIMIT`] bytes of heap, whatever their text (ranges that name millions of hosts, YAML
//! alias bombs, deep group chains). The first byte picks the parser; the rest is the text.
#![no_main]

use libfuzzer_sys::fuzz_target;
use std::alloc::{GlobalAlloc, Layout, System};
use std::path::Path;
use std::sync::atomic::{AtomicUsize, Ordering::Relaxed};

/// Counts live heap bytes; an allocation past [`LIMIT`] aborts (a crash libFuzzer reports
/// with the input) before any memory is touched.
struct Capped;
static LIVE: AtomicUsize = AtomicUsize::new(0);
static PEAK: AtomicUsize = AtomicUsize::new(0);

/// The most heap a parse may hold: a hosts file holds at most 4,096 hosts and a YAML
/// inventory's aliases expand to at most 64 MiB of nodes and text (`lab::hosts`), whose
/// tree takes a few times that; 512 MiB leaves room and still catches what grows without
/// bound.
const LIMIT: usize = 512 << 20;

fn grow(n: usize) {
    let now = LIVE.fetch_add(n, Relaxed) + n;
    if now > LIMIT {
        eprintln!(
            "config: {n} bytes asked for with {now} live heap bytes, over {LIMIT}, at:\n{}",
            std::backtrace::Backtrace::force_capture()
        );
        std::process::abort();
    }
    PEAK.fetch_max(now, Relaxed);
}

unsafe impl GlobalAlloc for Capped {
    unsafe fn alloc(&self, l: Layout) -> *mut u8 {
        grow(l.size());
        System.alloc(l)
    }
    unsafe fn alloc_zeroed(&self, l: Layout) -> *mut u8 {
        grow(l.size());
        System.alloc_zeroed(l)
    }
    unsafe fn dealloc(&self, p: *mut u8, l: Layout) {
        LIVE.fetch_sub(l.size(), Relaxed);
        System.dealloc(p, l)
    }
    unsafe fn realloc(&self, p: *mut u8, l: Layout, new: usize) -> *mut u8 {
        if new > l.size() {
            grow(new - l.size());
        } else {
            LIVE.fetch_sub(l.size() - new, Relaxed);
        }
        System.realloc(p, l, new)
    }
}

#[global_allocator]
static A: Capped = Capped;

/// The most heap one input used so far (printed when it grows).
static WORST: AtomicUsize = AtomicUsize::new(0);

fuzz_target!(|data: &[u8]| {
    let Some((&pick, text)) = data.split_first() else {
        return;
    };
    let base = LIVE.load(Relaxed);
    PEAK.store(base, Relaxed);
    match pick % 4 {
        0 => {
            use labperf::lab::ssh_config::Config;
            if let Ok(c) = Config::parse_bytes(text, Path::new("config")) {
                // Names the text gives (each word after a keyword), and fixed ones.
                let given = String::from_utf8_lossy(text);
                let words = given
                    .lines()
                    .filter_map(|l| l.split_whitespace().nth(1))
                    .take(8)
                    .map(str::to_string);
                for name in words.chain(["lab1".into(), "x.lab.example".into()]) {
                    if let Ok(l) = c.lookup(&name) {
                        let host = l.host(&name);
                        let _ = labperf::lab::names::check_host(&host);
                        if let Some(u) = &l.user {
                            let _ = labperf::lab::names::check_user(u);
                        }
                    }
                }
            }
        }
        kind => {
            if let Ok(text) = std::str::from_utf8(text) {
                let path = match kind {
                    1 => "hosts.toml",
                    2 => "inventory",
                    _ => "inventory.yml",
                };
                if let Ok(f) = labperf::lab::hosts::parse(text, Path::new(path)) {
                    for g in f.groups.keys() {
                        let _ = f.group(g);
                    }
                }
            }
        }
    }
    let used = PEAK.load(Relaxed) - base;
    if used > WORST.fetch_max(used, Relaxed) {
        eprintln!(
            "config: {used} heap bytes for a {}-byte input (parser {})",
            data.len(),
            pick % 4
        );
    }
});
