//! CRC-32 (IEEE 802.3, reflected, polynomial 0xEDB88320), the checksum of every frame.

const fn make_table() -> [u32; 256] {
    let mut t = [0u32; 256];
    let mut i = 0;
    while i < 256 {
        let mut c = i as u32;
        let mut k = 0;
        while k < 8 {
            c = if c & 1 != 0 {
                0xEDB8_8320 ^ (c >> 1)
            } else {
                c >> 1
            };
            k += 1;
        }
        t[i] = c;
        i += 1;
    }
    t
}

static TABLE: [u32; 256] = make_table();

/// CRC-32 of `data` (initial value and final xor `0xFFFF_FFFF`), as zlib's `crc32()`.
/// With the `fast-crc` feature this is `crc32fast` (SIMD where available);
/// otherwise [`crc32_bytewise`], the reference.
pub fn crc32(data: &[u8]) -> u32 {
    #[cfg(feature = "fast-crc")]
    return crc32fast::hash(data);
    #[cfg(not(feature = "fast-crc"))]
    return crc32_bytewise(data);
}

/// The table-driven, byte-at-a-time CRC-32 that a C writer implements (see the format spec).
pub fn crc32_bytewise(data: &[u8]) -> u32 {
    let mut c = 0xFFFF_FFFFu32;
    for &b in data {
        c = TABLE[((c ^ u32::from(b)) & 0xff) as usize] ^ (c >> 8);
    }
    c ^ 0xFFFF_FFFF
}

#[cfg(test)]
mod tests {
    #[test]
    fn check_value() {
        // The standard check value of CRC-32/ISO-HDLC.
        assert_eq!(super::crc32(b"123456789"), 0xCBF4_3926);
        assert_eq!(super::crc32_bytewise(b"123456789"), 0xCBF4_3926);
        let long: std::vec::Vec<u8> = (0..10_000u32).map(|i| (i * 7 + i / 3) as u8).collect();
        assert_eq!(super::crc32(&long), super::crc32_bytewise(&long));
    }
}
