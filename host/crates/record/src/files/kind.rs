//! What a file is, from its first bytes: a labperf recording, perf's perf.data, or one of
//! the files people hand a profiler by mistake (gzip, zstd, a pprof profile, JSON, an ELF
//! program), so that `report` and `import` can name it instead of calling it damaged.

use std::io::Read;
use std::path::Path;

/// A kind of file, as far as its first bytes tell.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// A labperf record file (it starts with the LABPERF magic).
    Labperf,
    /// perf's perf.data (PERFILE2, either byte order).
    PerfData,
    /// gzip around a perf.data.
    GzipPerfData,
    /// gzip around a labperf record file.
    GzipLabperf,
    /// pprof's profile.proto, gzipped (what `labperf export --format pprof` and Go write).
    Pprof,
    /// Any other gzip data.
    Gzip,
    /// zstd-compressed data (a whole file, not perf's `-z` records inside a perf.data).
    Zstd,
    /// JSON text.
    Json,
    /// An ELF file: a program or library, not a recording of one.
    Elf,
}

impl Kind {
    /// What it is, as a sentence's object: "gzip-compressed data".
    pub fn what(self) -> &'static str {
        match self {
            Kind::Labperf => "a labperf record file",
            Kind::PerfData => "perf's perf.data",
            Kind::GzipPerfData => "a gzip-compressed perf.data",
            Kind::GzipLabperf => "a gzip-compressed labperf record file",
            Kind::Pprof => "a pprof profile (gzipped protobuf, as `labperf export --format pprof` and Go's pprof write)",
            Kind::Gzip => "gzip-compressed data",
            Kind::Zstd => "zstd-compressed data",
            Kind::Json => "JSON text",
            Kind::Elf => "an ELF program or library, not a recording",
        }
    }

    /// What to do with it instead, for a command that reads `path` (`report` or `import`).
    pub fn remedy(self, path: &str) -> String {
        match self {
            Kind::Labperf => format!("`labperf report {path}` reads it as it is"),
            Kind::PerfData => format!("`labperf import {path}` makes a labperf recording of it"),
            Kind::GzipPerfData => format!(
                "decompress it first (`zcat {path} > perf.data`), then `labperf report perf.data` or `labperf import perf.data`"
            ),
            Kind::GzipLabperf => format!(
                "decompress it first (`zcat {path} > labperf.lpr`), then `labperf report labperf.lpr`"
            ),
            Kind::Pprof => format!(
                "labperf writes pprof but does not read it: `go tool pprof -top {path}` reads it"
            ),
            Kind::Gzip => format!(
                "it holds neither a perf.data nor a labperf recording (`zcat {path} | head -c 64 | od -c` shows its start)"
            ),
            Kind::Zstd => format!(
                "decompress it first (`zstd -d {path} -o FILE`); labperf reads perf.data and labperf record files"
            ),
            Kind::Json => "labperf reads record files, not JSON (its own `--format json` reports are output only)".into(),
            // A name without a slash is looked up in PATH as a command: `./NAME` runs the
            // file in the current directory, as the shell would.
            Kind::Elf if path.contains('/') => format!("record it: `labperf record {path}`"),
            Kind::Elf => format!("record it: `labperf record ./{path}`"),
        }
    }
}

/// The first bytes read to tell a file's kind (and the first decompressed bytes of gzip).
const HEAD: usize = 4096;

/// The kind of the file at `path`, or `None` when it cannot be read or is none of these.
pub fn of_file(path: &Path) -> Option<Kind> {
    let f = std::fs::File::open(path).ok()?;
    let mut head = Vec::with_capacity(HEAD);
    f.take(HEAD as u64).read_to_end(&mut head).ok()?;
    of_bytes(&head)
}

/// The kind of a file that starts with `head`.
pub fn of_bytes(head: &[u8]) -> Option<Kind> {
    if head.starts_with(&labperf_common::MAGIC) {
        return Some(Kind::Labperf);
    }
    if head.starts_with(b"PERFILE2") || head.starts_with(b"2ELIFREP") {
        return Some(Kind::PerfData);
    }
    if head.starts_with(&[0x1f, 0x8b]) {
        return Some(gzip(head));
    }
    if head.starts_with(&[0x28, 0xb5, 0x2f, 0xfd]) {
        return Some(Kind::Zstd);
    }
    if head.starts_with(b"\x7fELF") {
        return Some(Kind::Elf);
    }
    let text = head.trim_ascii_start();
    if text.starts_with(b"{") || text.starts_with(b"[") {
        // Text to the end of what was read (a character cut at the end is no matter).
        let valid = match std::str::from_utf8(text) {
            Ok(_) => true,
            Err(e) => e.error_len().is_none(),
        };
        if valid {
            return Some(Kind::Json);
        }
    }
    None
}

/// What gzip data holds: perf.data, a labperf recording, pprof's protobuf, or other.
fn gzip(head: &[u8]) -> Kind {
    let mut inner = Vec::with_capacity(HEAD);
    // A cut stream (only HEAD bytes of the file were read) decompresses as far as it goes.
    let mut d = flate2::read::GzDecoder::new(head);
    let mut buf = [0u8; 512];
    while inner.len() < HEAD {
        match d.read(&mut buf) {
            Ok(0) | Err(_) => break,
            Ok(n) => inner.extend_from_slice(&buf[..n]),
        }
    }
    match of_bytes(&inner) {
        Some(Kind::PerfData) => Kind::GzipPerfData,
        Some(Kind::Labperf) => Kind::GzipLabperf,
        _ if is_profile_proto(&inner) => Kind::Pprof,
        _ => Kind::Gzip,
    }
}

/// Whether `b` starts as pprof's `Profile` message: it opens with `sample_type` (field 1:
/// Go's pprof and labperf write fields in number order, and a profile has one), and every
/// field up to the end of `b` (at least two) has a field number of profile.proto (1 to 14)
/// with its wire type. Two bytes of text (`hi`: field 13, 0x69) are not a profile.
fn is_profile_proto(b: &[u8]) -> bool {
    fn varint(b: &[u8], at: &mut usize) -> Option<u64> {
        let mut v = 0u64;
        for shift in (0..64).step_by(7) {
            let byte = *b.get(*at)?;
            *at += 1;
            v |= u64::from(byte & 0x7f) << shift;
            if byte & 0x80 == 0 {
                return Some(v);
            }
        }
        None
    }
    let mut at = 0;
    let mut fields = 0;
    while at < b.len() {
        let Some(key) = varint(b, &mut at) else {
            break; // cut at the end of what was read
        };
        let (field, wire) = (key >> 3, key & 7);
        if fields == 0 && field != 1 {
            return false;
        }
        // sample_type, sample, mapping, location, function, string_table, period_type:
        // messages or strings; drop_frames, keep_frames, time_nanos, duration_nanos,
        // period, default_sample_type: integers; comment: integers, packed or not.
        let ok = match field {
            1..=6 | 11 => wire == 2,
            7..=10 | 12 | 14 => wire == 0,
            13 => wire == 0 || wire == 2,
            _ => false,
        };
        if !ok {
            return false;
        }
        match wire {
            0 => {
                if varint(b, &mut at).is_none() {
                    break;
                }
            }
            _ => match varint(b, &mut at) {
                Some(n) => at = at.saturating_add(n as usize),
                None => break,
            },
        }
        fields += 1;
    }
    fields >= 2
}

#[cfg(test)]
mod tests {
    use super::*;

    fn gz(b: &[u8]) -> Vec<u8> {
        use std::io::Write;
        let mut e = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
        e.write_all(b).unwrap();
        e.finish().unwrap()
    }

    #[test]
    fn each_kind_is_told_by_its_first_bytes() {
        assert_eq!(of_bytes(b"LABPERF\0\x02\x00"), Some(Kind::Labperf));
        assert_eq!(of_bytes(b"PERFILE2\x68\0\0\0"), Some(Kind::PerfData));
        assert_eq!(of_bytes(b"2ELIFREP"), Some(Kind::PerfData));
        assert_eq!(
            of_bytes(&gz(b"PERFILE2 and the rest")),
            Some(Kind::GzipPerfData)
        );
        assert_eq!(
            of_bytes(&gz(b"LABPERF\0 and the rest")),
            Some(Kind::GzipLabperf)
        );
        assert_eq!(of_bytes(&gz(b"hello, world\n")), Some(Kind::Gzip));
        // Read as protobuf, "hi" is one valid field (13, a varint): still not a profile.
        assert_eq!(of_bytes(&gz(b"hi")), Some(Kind::Gzip));
        // Profile { sample_type: [{type: 1, unit: 2}], string_table: ["", "samples", "count"] }
        let proto = b"\x0a\x04\x08\x01\x10\x02\x32\x00\x32\x07samples\x32\x05count";
        assert_eq!(of_bytes(&gz(proto)), Some(Kind::Pprof));
        assert_eq!(of_bytes(b"\x28\xb5\x2f\xfd\x00"), Some(Kind::Zstd));
        assert_eq!(of_bytes(b"  {\"rows\": []}"), Some(Kind::Json));
        assert_eq!(of_bytes(b"[1, 2"), Some(Kind::Json));
        assert_eq!(of_bytes(b"\x7fELF\x02\x01\x01"), Some(Kind::Elf));
        assert_eq!(of_bytes(b"{\xff\xfe binary"), None);
        assert_eq!(of_bytes(b"plain text"), None);
        assert_eq!(of_bytes(b""), None);
    }
}
