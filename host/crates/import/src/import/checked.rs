//! perf.data's header and feature sections checked before `linux-perf-data` reads them: every
//! length the parser allocates from is bounded by the bytes the file holds, and the parser
//! reads the file through [`Checked`], which shows it only the features labperf reads.
//!
//! The layout is perf's (`tools/perf/Documentation/perf.data-file-format.txt`): a 104-byte
//! header (magic, header size, attr size, the attrs, data and event types sections as
//! `{u64 offset, u64 size}`, then a 256-bit feature bitmap), and after the data section one
//! `{offset, size}` per feature bit set, in bit order.

use super::features::*;
use super::records;
use std::io::{Read, Seek, SeekFrom};

/// The header's size (`struct perf_file_header`).
const HEADER: usize = 104;

/// Why a file is refused: a section outside the file, or a count its bytes cannot hold.
#[derive(Debug, thiserror::Error)]
pub enum CheckError {
    #[error(transparent)]
    Io(#[from] std::io::Error),
    #[error("{0}")]
    Damaged(String),
    /// A file perf reads that labperf does not read yet (a stream, compressed records).
    #[error("{0}")]
    Unsupported(String),
}

fn damaged(why: String) -> CheckError {
    CheckError::Damaged(why)
}

/// The file as the parser reads it: the file's own bytes, except the header (event types
/// section emptied, only the kept features' bits set) and the feature table (only the kept
/// features' entries), which are checked copies.
pub struct Checked<R> {
    inner: R,
    pos: u64,
    len: u64,
    header: [u8; HEADER],
    table_at: u64,
    table: Vec<u8>,
    /// Features left out because their contents are damaged: (name, why).
    pub left_out: Vec<(&'static str, String)>,
    /// The data section: offset and size.
    data: (u64, u64),
    e: Endian,
    /// Whether the parser reads the records (from its seek to the data section on).
    records: bool,
    /// The records' guard, whose findings the import reads.
    pub guard: std::rc::Rc<std::cell::RefCell<records::Guard>>,
}

impl<R: Read + Seek> Checked<R> {
    /// Reads and checks the header, the feature table and the kept features of `inner`:
    /// an error names the first section that lies outside the file or asks for more bytes
    /// than its section holds. A damaged string feature (names, the command line) is left
    /// out and listed in `left_out`; damaged event descriptions refuse the file.
    pub fn new(mut inner: R) -> Result<Self, CheckError> {
        let (len, mut h, e) = read_header(&mut inner)?;
        let (data_off, data_size, set) = sections(e, &h, len)?;
        let table_at = data_off + data_size;
        let kept = kept_features(&mut inner, e, len, &set, table_at)?;
        let Shown {
            left_out,
            bits: new_bits,
            table,
        } = check_kept(&mut inner, e, kept)?;
        // The parser takes the event types section for attrs with id lists of their own
        // (unbounded ones) when EVENT_DESC is absent; perf writes it empty.
        e.put_u64(&mut h, 56, 0);
        e.put_u64(&mut h, 64, 0);
        for (i, w) in new_bits.iter().enumerate() {
            e.put_u64(&mut h, 72 + 8 * i, *w);
        }
        inner.seek(SeekFrom::Start(0))?;
        Ok(Self {
            inner,
            pos: 0,
            len,
            header: h,
            table_at,
            table,
            left_out,
            data: (data_off, data_size),
            e,
            records: false,
            guard: std::rc::Rc::new(std::cell::RefCell::new(records::Guard::new(
                e,
                Some(data_size),
            ))),
        })
    }
}

/// The file's length, its header (checked to be perf.data's, a whole file's and not a
/// pipe's stream) and its byte order.
fn read_header(inner: &mut (impl Read + Seek)) -> Result<(u64, [u8; HEADER], Endian), CheckError> {
    let len = inner.seek(SeekFrom::End(0))?;
    inner.seek(SeekFrom::Start(0))?;
    let mut h = [0u8; HEADER];
    let got = read_up_to(inner, &mut h)?;
    let le = match &h[..8] {
        b"PERFILE2" => true,
        b"2ELIFREP" => false,
        _ if got < 8 => return Err(damaged("shorter than perf.data's magic number".into())),
        m => {
            return Err(damaged(format!(
                "its magic number is {:?}, not perf.data's PERFILE2",
                String::from_utf8_lossy(m)
            )))
        }
    };
    let e = Endian { le };
    if got < HEADER {
        return Err(damaged(format!(
            "shorter ({got} bytes) than perf.data's {HEADER}-byte header"
        )));
    }
    // A `perf record -o -` stream has a 16-byte header and no sections: `import_to` reads
    // those as streams (`is_pipe_header`) before this file's checks.
    if e.u64(&h, 8) == Some(16) {
        return Err(CheckError::Unsupported(
            "a `perf record -o -` stream where a perf.data file was expected".into(),
        ));
    }
    Ok((len, h, e))
}

/// An error unless the `what` section (`size` bytes at `off`) lies within the file's `len`.
fn inside(len: u64, what: &str, off: u64, size: u64) -> Result<(), CheckError> {
    if off.checked_add(size).is_none_or(|end| end > len) {
        Err(damaged(format!(
            "its {what} section ({size} bytes at {off}) ends past the file's {len} bytes"
        )))
    } else {
        Ok(())
    }
}

/// Checks the header's sections (attrs, data, event types) against the file's `len`;
/// returns where the feature table starts and the features the header's bits set.
fn sections(e: Endian, h: &[u8; HEADER], len: u64) -> Result<(u64, u64, Vec<u32>), CheckError> {
    let at = |o: usize| e.u64(h, o).expect("within the header");
    let attr_size = at(16);
    let (attrs_off, attrs_size) = (at(24), at(32));
    inside(len, "attrs", attrs_off, attrs_size)?;
    // The parser divides the attrs section by the attr size and reserves that many.
    if !(ATTR_MIN..=len.max(ATTR_MIN)).contains(&attr_size) {
        return Err(damaged(format!(
            "its attr size ({attr_size}) is not a perf_event_attr's (at least {ATTR_MIN}, at \
             most the file)"
        )));
    }
    let (data_off, data_size) = (at(40), at(48));
    inside(len, "data", data_off, data_size)?;
    inside(len, "event types", at(56), at(64))?;
    let bits: [u64; 4] = std::array::from_fn(|i| at(72 + 8 * i));
    let set: Vec<u32> = (0..256u32)
        .filter(|&f| bits[(f / 64) as usize] & (1 << (f % 64)) != 0)
        .collect();
    // The data section's records are read through `records::Guard` and not through the
    // header this module rewrites: perf never writes one that overlaps it.
    if data_size > 0 && data_off < HEADER as u64 {
        return Err(damaged(format!(
            "its data section ({data_size} bytes at {data_off}) overlaps the {HEADER}-byte header"
        )));
    }
    Ok((data_off, data_size, set))
}

/// Reads the feature table at `table_at` (an entry per feature of `set`), checks every
/// section it lists lies within the file, and returns the kept features' (feature,
/// offset, size), none overlapping the header or the table.
fn kept_features(
    inner: &mut (impl Read + Seek),
    e: Endian,
    len: u64,
    set: &[u32],
    table_at: u64,
) -> Result<Vec<(u32, u64, u64)>, CheckError> {
    inside(len, "feature table", table_at, set.len() as u64 * 16)?;
    let mut t = vec![0u8; set.len() * 16];
    inner.seek(SeekFrom::Start(table_at))?;
    inner.read_exact(&mut t)?;
    let mut kept = Vec::new();
    for (k, &f) in set.iter().enumerate() {
        let (off, size) = (
            e.u64(&t, 16 * k).expect("in the table"),
            e.u64(&t, 16 * k + 8).expect("in the table"),
        );
        let name = feature_name(f).map_or(format!("feature {f}"), |n| format!("{n} feature"));
        inside(len, &name, off, size)?;
        if KEPT.contains(&f) {
            // The parser reads a kept section through the header and the table this
            // module rewrites: one that overlaps them would read other bytes than the
            // ones checked here (a fuzzer's find). perf never writes one.
            let overlaps =
                |start: u64, len: u64| size > 0 && off < start + len && start < off + size;
            for (what, start, len) in [
                ("header", 0, HEADER as u64),
                ("feature table", table_at, t.len() as u64),
            ] {
                if overlaps(start, len) {
                    return Err(damaged(format!(
                        "its {name} ({size} bytes at {off}) overlaps the {what} ({len} bytes at {start})"
                    )));
                }
            }
            kept.push((f, off, size));
        }
    }
    // Sections do not overlap in a file perf writes: the kept ones, which the parser
    // reads into memory, hold at most the file.
    let total: u64 = kept.iter().map(|k| k.2).sum();
    if total > len {
        return Err(damaged(format!(
            "its features claim {total} bytes in all, more than the file's {len}"
        )));
    }
    Ok(kept)
}

/// The kept features the parser is shown, and those left out.
struct Shown {
    /// Features left out because their contents are damaged: (name, why).
    left_out: Vec<(&'static str, String)>,
    /// The header's feature bits: the features shown.
    bits: [u64; 4],
    /// The feature table the parser reads: an entry per feature shown.
    table: Vec<u8>,
}

/// Reads and checks each kept feature (an EVENT_DESC that fails refuses the file, any
/// other is left out).
fn check_kept(
    inner: &mut (impl Read + Seek),
    e: Endian,
    kept: Vec<(u32, u64, u64)>,
) -> Result<Shown, CheckError> {
    let mut left_out = Vec::new();
    let mut new_bits = [0u64; 4];
    let mut table = Vec::new();
    for (f, off, size) in kept {
        let mut b = vec![0u8; size as usize];
        inner.seek(SeekFrom::Start(off))?;
        inner.read_exact(&mut b)?;
        match check_feature(f, e, &b) {
            Ok(()) => {}
            Err(why) if f == EVENT_DESC => {
                return Err(damaged(format!(
                    "its EVENT_DESC feature (the events' attributes and names) is damaged: \
                     {why}"
                )))
            }
            Err(why) => {
                left_out.push((feature_name(f).unwrap_or("?"), why));
                continue;
            }
        }
        new_bits[(f / 64) as usize] |= 1 << (f % 64);
        let mut entry = [0u8; 16];
        e.put_u64(&mut entry, 0, off);
        e.put_u64(&mut entry, 8, size);
        table.extend_from_slice(&entry);
    }
    Ok(Shown {
        left_out,
        bits: new_bits,
        table,
    })
}

/// Copies the part of `patch` (placed at file offset `at`) that overlaps `buf` (at `pos`).
fn overlay(buf: &mut [u8], pos: u64, at: u64, patch: &[u8]) {
    let (start, end) = (
        pos.max(at),
        (pos + buf.len() as u64).min(at + patch.len() as u64),
    );
    if start < end {
        buf[(start - pos) as usize..(end - pos) as usize]
            .copy_from_slice(&patch[(start - at) as usize..(end - at) as usize]);
    }
}

impl<R: Read> Read for Checked<R> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let (off, size) = self.data;
        if self.records && (off..off + size).contains(&self.pos) {
            let mut section = (&mut self.inner).take(off + size - self.pos);
            let n = self.guard.borrow_mut().read_from(&mut section, buf)?;
            self.pos += n as u64;
            return Ok(n);
        }
        let n = self.inner.read(buf)?;
        overlay(&mut buf[..n], self.pos, 0, &self.header);
        overlay(&mut buf[..n], self.pos, self.table_at, &self.table);
        self.pos += n as u64;
        Ok(n)
    }
}

impl<R: Seek> Seek for Checked<R> {
    fn seek(&mut self, to: SeekFrom) -> std::io::Result<u64> {
        let target = match to {
            SeekFrom::Start(o) => Some(o),
            SeekFrom::Current(d) => self.pos.checked_add_signed(d),
            SeekFrom::End(d) => self.len.checked_add_signed(d),
        }
        .ok_or_else(|| std::io::Error::from(std::io::ErrorKind::InvalidInput))?;
        self.pos = self.inner.seek(SeekFrom::Start(target))?;
        // The parser reads the records from the data section's start, once.
        self.records = self.pos == self.data.0;
        if self.records {
            *self.guard.borrow_mut() = records::Guard::new(self.e, Some(self.data.1));
        }
        Ok(self.pos)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const E: Endian = Endian { le: true };

    fn string(s: &[u8], len: u32) -> Vec<u8> {
        let mut v = len.to_le_bytes().to_vec();
        v.extend_from_slice(s);
        v
    }

    #[test]
    fn a_string_must_hold_the_bytes_it_claims_and_be_utf8() {
        assert_eq!(header_string(E, &string(b"x86_64\0\0", 8), 0, "s"), Ok(12));
        assert!(header_string(E, &string(b"x86_64\0\0", 9), 0, "s").is_err());
        assert!(header_string(E, &string(b"x86_64\0\0", u32::MAX), 0, "s").is_err());
        assert!(header_string(E, &string(b"\xff\0\0\0", 4), 0, "s").is_err());
        // Bytes after the NUL are padding: not checked, as the parser does not read them.
        assert_eq!(header_string(E, &string(b"a\0\xff\xff", 4), 0, "s"), Ok(8));
        assert!(header_string(E, &[1, 0], 0, "s").is_err());
    }

    #[test]
    fn a_string_list_s_count_is_bounded_by_its_bytes() {
        let mut l = 2u32.to_le_bytes().to_vec();
        l.extend(string(b"ls\0\0", 4));
        l.extend(string(b"-l\0\0", 4));
        assert_eq!(string_list(E, &l), Ok(()));
        l[..4].copy_from_slice(&3u32.to_le_bytes());
        assert!(string_list(E, &l).is_err());
        l[..4].copy_from_slice(&0x4000_0000u32.to_le_bytes());
        let e = string_list(E, &l).unwrap_err();
        assert!(e.contains("1073741824 strings claimed in 16 bytes"), "{e}");
    }

    /// EVENT_DESC of `nr` events but one there: an attr of `attr_size` bytes (its own size
    /// field saying so), one id, the name "cycles".
    fn one_event(nr: u32, attr_size: u32) -> Vec<u8> {
        let mut v = nr.to_le_bytes().to_vec();
        v.extend(attr_size.to_le_bytes());
        let mut attr = vec![0u8; attr_size as usize];
        if let Some(f) = attr.get_mut(4..8) {
            f.copy_from_slice(&attr_size.to_le_bytes());
        }
        v.extend(attr);
        v.extend(1u32.to_le_bytes());
        v.extend(string(b"cycles\0\0", 8));
        v.extend(7u64.to_le_bytes());
        v
    }

    #[test]
    fn event_descriptions_are_bounded_by_their_bytes() {
        assert_eq!(event_desc(E, &one_event(1, 64)), Ok(()));
        // Counts the parser would reserve before reading a byte.
        let e = event_desc(E, &one_event(0x7fff_ffff, 64)).unwrap_err();
        assert!(e.contains("2147483647 events"), "{e}");
        assert!(event_desc(E, &one_event(2, 64)).is_err());
        let mut v = one_event(1, 64);
        v[72..76].copy_from_slice(&0xffff_ffffu32.to_le_bytes());
        let e = event_desc(E, &v).unwrap_err();
        assert!(e.contains("4294967295 ids claimed"), "{e}");
        let mut v = one_event(1, 64);
        v[76..80].copy_from_slice(&0xffff_fff0u32.to_le_bytes());
        assert!(event_desc(E, &v).unwrap_err().contains("name"));
        // An attr size below perf's smallest: the parser's reservation is not bounded.
        assert!(event_desc(E, &one_event(1, 0)).is_err());
    }

    #[test]
    fn an_attr_s_own_size_must_be_one_the_parser_reads_whole() {
        let with_size = |size: u32| {
            let mut v = one_event(1, 64);
            v[12..16].copy_from_slice(&size.to_le_bytes());
            v
        };
        assert_eq!(event_desc(E, &with_size(64)), Ok(()));
        let e = event_desc(E, &with_size(0)).unwrap_err();
        assert!(e.contains("event 0: its attr's size 0"), "{e}");
        // Past the attr size; between VER0 (64) and VER1 (72): the parser reads 64 bytes
        // and skips 63, one short (a fuzzer's find: the name's length then comes from the
        // wrong bytes).
        assert!(event_desc(E, &with_size(65)).is_err());
        let mut v = one_event(1, 136);
        v[12..16].copy_from_slice(&127u32.to_le_bytes());
        assert!(event_desc(E, &v).is_err());
        // Past VER7 the parser reads the whole size.
        let mut v = one_event(1, 136);
        v[12..16].copy_from_slice(&129u32.to_le_bytes());
        assert_eq!(event_desc(E, &v), Ok(()));
    }

    #[test]
    fn the_overlay_replaces_exactly_the_patched_bytes() {
        let mut b = [0u8; 8];
        overlay(&mut b, 10, 12, &[1, 2, 3]);
        assert_eq!(b, [0, 0, 1, 2, 3, 0, 0, 0]);
        let mut b = [0u8; 4];
        overlay(&mut b, 10, 8, &[1, 2, 3, 4]);
        assert_eq!(b, [3, 4, 0, 0]);
        let mut b = [0u8; 4];
        overlay(&mut b, 10, 20, &[1]);
        assert_eq!(b, [0; 4]);
    }
}
