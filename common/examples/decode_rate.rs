//! The decoder alone on a record file: bytes per second on one core, samples cut to their head (what `report` counts with) and whole records (what stacks need); `cargo run --release -p labperf-common --example decode_rate -- FILE [REPS]`.

use labperf_common::{Decoder, FrameEvent, Light, Shared};
use std::sync::Arc;
use std::time::Instant;

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let Some(path) = args.get(1) else {
        eprintln!("usage: decode_rate FILE [REPS]");
        std::process::exit(2);
    };
    let reps: usize = args.get(2).and_then(|r| r.parse().ok()).unwrap_or(7);
    let bytes = std::fs::read(path).unwrap_or_else(|e| {
        eprintln!("decode_rate: cannot read {path}: {e}");
        std::process::exit(1)
    });
    let data: Shared = Arc::new(bytes);
    let len = (*data).as_ref().len() as f64;
    let median = |f: &dyn Fn() -> u64| {
        let mut t: Vec<(f64, u64)> = (0..reps)
            .map(|_| {
                let s = Instant::now();
                let n = f();
                (s.elapsed().as_secs_f64(), n)
            })
            .collect();
        t.sort_by(|a, b| a.0.total_cmp(&b.0));
        t[t.len() / 2]
    };
    let heads = || {
        let mut n = 0u64;
        let mut d = Decoder::whole(data.clone());
        while let Some(e) = d.poll_frame() {
            if let FrameEvent::Records(mut rr) = e {
                rr.for_each_light(|l| n += matches!(l, Light::Sample(_)) as u64);
            }
        }
        n
    };
    let whole = || {
        let mut n = 0u64;
        let mut d = Decoder::whole(data.clone());
        while let Some(e) = d.poll() {
            n += matches!(
                e,
                labperf_common::Event::Record(labperf_common::Record::Sample(_))
            ) as u64;
        }
        n
    };
    for (what, f) in [("heads", &heads as &dyn Fn() -> u64), ("whole", &whole)] {
        let (t, n) = median(f);
        println!(
            "{what}: {n} samples, {:.1} MB in {:.2} ms: {:.0} MB/s, {:.1} M samples/s (one core, median of {reps})",
            len / 1e6,
            t * 1e3,
            len / t / 1e6,
            n as f64 / t / 1e6
        );
    }
}
