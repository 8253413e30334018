//! Fuzz target: the decoder must never panic, and must account for what it cannot decode.
#![no_main]

use labperf_common::{decode_all, Decoder, Event};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let whole = decode_all(data);
    // Streaming in odd pieces gives the same records as decoding the whole.
    let mut d = Decoder::new();
    let mut n = 0usize;
    for piece in data.chunks(7) {
        d.push(piece);
        while let Some(e) = d.poll() {
            n += matches!(e, Event::Record(_)) as usize;
        }
    }
    d.finish();
    while let Some(e) = d.poll() {
        n += matches!(e, Event::Record(_)) as usize;
    }
    assert_eq!(n, whole.records.len());
    // The whole-input decoder (the report's path) agrees with the streaming one.
    let mut d = Decoder::whole(std::sync::Arc::new(data.to_vec()));
    let mut m = 0usize;
    while let Some(e) = d.poll() {
        m += matches!(e, Event::Record(_)) as usize;
    }
    assert_eq!(m, whole.records.len());
    assert_eq!(d.losses(), &whole.losses);
});
