//! A multiplicative hasher for the hot hash maps keyed by addresses and stacks (FxHash): SipHash costs more than decoding a sample.

use std::hash::Hasher;

/// A multiplicative hasher for (pid, ip) keys: SipHash costs more than decoding a sample.
#[derive(Default, Clone, Copy)]
pub struct FxHasher(u64);

impl Hasher for FxHasher {
    fn write(&mut self, bytes: &[u8]) {
        // Eight bytes a step (a stack's addresses are hashed as their bytes).
        let mut c = bytes.chunks_exact(8);
        for w in &mut c {
            self.write_u64(u64::from_le_bytes(w.try_into().expect("8 bytes")));
        }
        for &b in c.remainder() {
            self.write_u64(u64::from(b));
        }
    }
    fn write_u32(&mut self, i: u32) {
        self.write_u64(u64::from(i));
    }
    fn write_u64(&mut self, i: u64) {
        self.0 = (self.0.rotate_left(5) ^ i).wrapping_mul(0x517c_c1b7_2722_0a95);
    }
    fn finish(&self) -> u64 {
        self.0
    }
}
