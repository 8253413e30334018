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
pub fn crc32(data: &[u8]) -> u32 {
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
    }
}
