//! LEB128 varints and zigzag mapping, bit-compatible with postcard's integer encoding.

/// Largest encoded size of a `u64` varint.
pub const MAX_VARINT_LEN: usize = 10;

/// Appends `v` as an unsigned LEB128 varint (7 bits per byte, low group first,
/// high bit set on every byte but the last).
#[inline]
pub fn put_u64(out: &mut alloc::vec::Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        out.push((v as u8) | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

/// Appends `v` zigzag-mapped (`0,-1,1,-2,...` → `0,1,2,3,...`) then as a varint.
#[inline]
pub fn put_i64(out: &mut alloc::vec::Vec<u8>, v: i64) {
    put_u64(out, zigzag(v));
}

/// Zigzag-maps a signed value.
#[inline]
pub const fn zigzag(v: i64) -> u64 {
    ((v << 1) ^ (v >> 63)) as u64
}

/// Inverse of [`zigzag`].
#[inline]
pub const fn unzigzag(v: u64) -> i64 {
    ((v >> 1) as i64) ^ -((v & 1) as i64)
}

/// Why a varint could not be read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum VarintError {
    /// The input ended inside the varint.
    Eof,
    /// More than ten bytes, or bits beyond 64.
    Overflow,
}

/// Reads a varint from the front of `buf`, advancing `pos`.
#[inline]
pub fn get_u64(buf: &[u8], pos: &mut usize) -> Result<u64, VarintError> {
    // Most deltas fit one byte.
    if let Some(&b) = buf.get(*pos) {
        if b < 0x80 {
            *pos += 1;
            return Ok(u64::from(b));
        }
    }
    // Up to 8 bytes (56 bits) at once, without a data-dependent loop.
    if let Some(chunk) = buf.get(*pos..*pos + 8) {
        let x = u64::from_le_bytes([
            chunk[0], chunk[1], chunk[2], chunk[3], chunk[4], chunk[5], chunk[6], chunk[7],
        ]);
        let stop = !x & 0x8080_8080_8080_8080;
        if stop != 0 {
            let bits = stop.trailing_zeros() + 1; // up to and including the last byte's top bit
            let x = if bits >= 64 {
                x
            } else {
                x & ((1u64 << bits) - 1)
            };
            let mut v = x & 0x7f;
            v |= (x >> 1) & (0x7f << 7);
            v |= (x >> 2) & (0x7f << 14);
            v |= (x >> 3) & (0x7f << 21);
            v |= (x >> 4) & (0x7f << 28);
            v |= (x >> 5) & (0x7f << 35);
            v |= (x >> 6) & (0x7f << 42);
            v |= (x >> 7) & (0x7f << 49);
            *pos += (bits / 8) as usize;
            return Ok(v);
        }
    }
    let mut v: u64 = 0;
    for i in 0..MAX_VARINT_LEN {
        let Some(&b) = buf.get(*pos + i) else {
            return Err(VarintError::Eof);
        };
        if i == 9 && b > 1 {
            return Err(VarintError::Overflow);
        }
        v |= u64::from(b & 0x7f) << (7 * i);
        if b & 0x80 == 0 {
            *pos += i + 1;
            return Ok(v);
        }
    }
    Err(VarintError::Overflow)
}

/// Reads a zigzag varint.
#[inline]
pub fn get_i64(buf: &[u8], pos: &mut usize) -> Result<i64, VarintError> {
    get_u64(buf, pos).map(unzigzag)
}

#[cfg(test)]
mod tests {
    use super::*;
    use alloc::vec::Vec;

    #[test]
    fn matches_postcard() {
        for v in [0u64, 1, 127, 128, 300, u32::MAX as u64, u64::MAX] {
            let mut ours = Vec::new();
            put_u64(&mut ours, v);
            assert_eq!(ours, postcard::to_allocvec(&v).unwrap());
            let mut p = 0;
            assert_eq!(get_u64(&ours, &mut p), Ok(v));
            assert_eq!(p, ours.len());
        }
        for v in [0i64, -1, 1, -64, 64, i64::MIN, i64::MAX] {
            let mut ours = Vec::new();
            put_i64(&mut ours, v);
            assert_eq!(ours, postcard::to_allocvec(&v).unwrap());
            let mut p = 0;
            assert_eq!(get_i64(&ours, &mut p), Ok(v));
        }
    }

    #[test]
    fn fast_and_slow_paths_agree() {
        // Every length from 1 to 10 bytes, at the end of the buffer and followed by padding.
        let mut vals = Vec::new();
        for shift in 0..64 {
            vals.push(1u64 << shift);
            vals.push((1u64 << shift) - 1);
            vals.push(0x5555_5555_5555_5555 >> shift);
        }
        vals.push(u64::MAX);
        for &v in &vals {
            for pad in [0usize, 1, 3, 9] {
                let mut b = Vec::new();
                put_u64(&mut b, v);
                let n = b.len();
                b.extend(core::iter::repeat_n(0xff, pad));
                let mut p = 0;
                assert_eq!(get_u64(&b, &mut p), Ok(v), "value {v:#x} pad {pad}");
                assert_eq!(p, n);
            }
        }
    }

    #[test]
    fn rejects_overlong() {
        let mut p = 0;
        assert_eq!(get_u64(&[0xff; 11], &mut p), Err(VarintError::Overflow));
        assert_eq!(get_u64(&[0x80, 0x80], &mut p), Err(VarintError::Eof));
    }
}
