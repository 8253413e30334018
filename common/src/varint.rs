//! LEB128 varints and zigzag mapping, bit-compatible with postcard's integer encoding.

/// Largest encoded size of a `u64` varint.
pub const MAX_VARINT_LEN: usize = 10;

/// Appends `v` as an unsigned LEB128 varint (7 bits per byte, low group first,
/// high bit set on every byte but the last).
pub fn put_u64(out: &mut alloc::vec::Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        out.push((v as u8) | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

/// Appends `v` zigzag-mapped (`0,-1,1,-2,...` → `0,1,2,3,...`) then as a varint.
pub fn put_i64(out: &mut alloc::vec::Vec<u8>, v: i64) {
    put_u64(out, zigzag(v));
}

/// Zigzag-maps a signed value.
pub const fn zigzag(v: i64) -> u64 {
    ((v << 1) ^ (v >> 63)) as u64
}

/// Inverse of [`zigzag`].
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
pub fn get_u64(buf: &[u8], pos: &mut usize) -> Result<u64, VarintError> {
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
    fn rejects_overlong() {
        let mut p = 0;
        assert_eq!(get_u64(&[0xff; 11], &mut p), Err(VarintError::Overflow));
        assert_eq!(get_u64(&[0x80, 0x80], &mut p), Err(VarintError::Eof));
    }
}
