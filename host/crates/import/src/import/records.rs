//! perf.data's records checked on their way to `linux-perf-data`, one record at a time: the
//! lengths the parser would allocate from (AUX data, zstd-compressed records) bounded, the
//! records labperf does not keep counted, and in pipe mode (`perf record -o -`, read as a
//! stream) the records the parser cannot read or need not hold trimmed.
//!
//! A file's data section passes unchanged (its length is in the header): an AUXTRACE
//! record's data must lie within the section. A pipe's stream has no length: AUX data and
//! tracing data are skipped here (counted, never given to the parser), features labperf
//! does not read are dropped and those it reads checked as `checked.rs` checks a file's,
//! and a round boundary (FINISHED_ROUND) is added after every [`ROUND_BYTES`] of records
//! without one, so the parser never holds more than about two of them at a time.

use super::features::{self, read_up_to, Endian};
use std::collections::BTreeMap;
use std::io::Read;

/// perf's record types this module reads (`enum perf_user_event_type`).
const HEADER_TRACING_DATA: u32 = 66;
const FINISHED_ROUND: u32 = 68;
const AUXTRACE: u32 = 71;
const HEADER_FEATURE: u32 = 80;
const COMPRESSED: u32 = 81;
const COMPRESSED2: u32 = 83;

/// In a pipe, the most record bytes between two round boundaries before one is added; in
/// both modes, the most that zstd-compressed records may decompress to between two round
/// boundaries (and in one record), each record counted at [`RECORD_COST`] more than its size.
pub const ROUND_BYTES: u64 = 32 << 20;

/// What the parser holds per record beyond its bytes (its sort key, the pending record and
/// the queues' slack: about 200 bytes measured on 8-byte records, rounded up), so that a
/// round of tiny decompressed records is bounded by memory, not by bytes alone.
pub const RECORD_COST: u64 = 256;

/// The most bytes zstd-compressed records may decompress to: this many times their own
/// size, plus [`ZSTD_SLACK`]. perf's records compress about 5 to 30 times (measured here:
/// `perf record -z` of the bench, 6.5 times without callchains, 17 with `-g`); a stream
/// that decompresses to more is refused as a zstd bomb rather than held.
pub const ZSTD_RATIO: u64 = 256;
pub const ZSTD_SLACK: u64 = 16 << 20;

/// What the records told on their way through.
#[derive(Debug, Default)]
pub struct Seen {
    /// AUXTRACE records (Intel PT, Arm SPE/CoreSight trace data) and their data's bytes.
    pub aux: (u64, u64),
    /// Bytes of zstd-compressed records, and what they decompressed to.
    pub compressed: (u64, u64),
    /// Pipe mode: features left out because their contents are damaged: (name, why).
    pub left_out: Vec<(&'static str, String)>,
    /// Pipe mode: round boundaries added.
    pub rounds_added: u64,
    /// Pipe mode: tracing data skipped (bytes).
    pub tracing_data: u64,
    /// Why the records were refused (a damaged length), said as the import's error.
    pub refused: Option<String>,
    /// Where the input ends inside a record (a stream cut off): the records before it are
    /// imported, and this said.
    pub cut: Option<String>,
    /// Record types left out of the stream given to the parser, by perf's name.
    pub dropped: BTreeMap<&'static str, u64>,
}

/// The state of the records passing through: the bytes of the record being handed out,
/// and what of the input is still to pass unread or be skipped.
pub struct Guard {
    e: Endian,
    pipe: bool,
    /// File mode: the data section's bytes not yet read.
    left: Option<u64>,
    out: Vec<u8>,
    out_at: usize,
    /// Bytes of the input to hand on unread (a record body not inspected, AUX data).
    pass: u64,
    /// Record bytes since the last round boundary (pipe mode).
    round: u64,
    zstd: Option<zstd_safe::DCtx<'static>>,
    scratch: Vec<u8>,
    /// The decompressed records' headers as they come, across compressed records.
    walk: Walk,
    /// What decompressed records cost (bytes plus [`RECORD_COST`] each) since the last
    /// round boundary: what the parser holds of them.
    held: u64,
    pub seen: Seen,
}

/// The record headers of a decompressed stream, found as its bytes come in chunks.
#[derive(Default)]
struct Walk {
    header: [u8; 8],
    have: usize,
    /// Bytes of the current record's body still to come.
    skip: u64,
}

impl Walk {
    /// Takes `b`, the next decompressed bytes; returns how many records begin in them.
    fn feed(&mut self, e: Endian, mut b: &[u8]) -> u64 {
        let mut records = 0;
        while !b.is_empty() {
            if self.skip > 0 {
                let n = b
                    .len()
                    .min(usize::try_from(self.skip).unwrap_or(usize::MAX));
                self.skip -= n as u64;
                b = &b[n..];
                continue;
            }
            let n = b.len().min(8 - self.have);
            self.header[self.have..self.have + n].copy_from_slice(&b[..n]);
            self.have += n;
            b = &b[n..];
            if self.have == 8 {
                self.have = 0;
                records += 1;
                let h = &self.header;
                let size = u16::from_le_bytes(if e.le { [h[6], h[7]] } else { [h[7], h[6]] });
                // A size under 8 stops the parser (it says why): counted as a header.
                self.skip = u64::from(size).saturating_sub(8);
            }
        }
        records
    }
}

fn refused(why: String) -> std::io::Error {
    std::io::Error::new(std::io::ErrorKind::InvalidData, why)
}

impl Guard {
    /// A guard of a pipe's stream (after its 16-byte header), or of a file's data section of
    /// `data_size` bytes.
    pub fn new(e: Endian, data_size: Option<u64>) -> Self {
        Self {
            e,
            pipe: data_size.is_none(),
            left: data_size,
            out: Vec::new(),
            out_at: 0,
            pass: 0,
            round: 0,
            zstd: None,
            scratch: Vec::new(),
            walk: Walk::default(),
            held: 0,
            seen: Seen::default(),
        }
    }

    /// Reads from `inner` (positioned where the guard stands) into `buf`, as the parser
    /// would read `inner`, less what pipe mode trims.
    pub fn read_from(&mut self, inner: &mut impl Read, buf: &mut [u8]) -> std::io::Result<usize> {
        if buf.is_empty() {
            return Ok(0);
        }
        loop {
            if self.out_at < self.out.len() {
                let n = buf.len().min(self.out.len() - self.out_at);
                buf[..n].copy_from_slice(&self.out[self.out_at..self.out_at + n]);
                self.out_at += n;
                return Ok(n);
            }
            if self.pass > 0 {
                let want = buf
                    .len()
                    .min(usize::try_from(self.pass).unwrap_or(usize::MAX));
                let n = inner.read(&mut buf[..want])?;
                if n == 0 {
                    self.seen.cut = Some(format!(
                        "the input ends {} bytes short of a record's end",
                        self.pass
                    ));
                    return Ok(0);
                }
                self.pass -= n as u64;
                self.take(n as u64);
                return Ok(n);
            }
            if self.left == Some(0) {
                return Ok(0);
            }
            if !self.next_record(inner)? {
                return Ok(0);
            }
        }
    }

    fn take(&mut self, n: u64) {
        if let Some(l) = &mut self.left {
            *l = l.saturating_sub(n);
        }
    }

    /// Reads the next record's header (and the body of one this module inspects) into
    /// `out`; false at the end of the input.
    fn next_record(&mut self, inner: &mut impl Read) -> std::io::Result<bool> {
        self.out.clear();
        self.out_at = 0;
        if self.boundary() {
            return Ok(true);
        }
        let mut h = [0u8; 8];
        let got = read_up_to(inner, &mut h)?;
        if got < 8 {
            if got > 0 {
                self.seen.cut = Some(format!("the input ends {got} bytes into a record's header"));
            }
            return Ok(false);
        }
        let kind = self.e.u32(&h, 0).expect("8 bytes");
        let size = u64::from(u16::from_le_bytes(if self.e.le {
            [h[6], h[7]]
        } else {
            [h[7], h[6]]
        }));
        self.take(8);
        let body = size.saturating_sub(8);
        if self.left.is_some_and(|l| body > l) || size < 8 {
            // The parser refuses it (or stops there): passed on as it is.
            self.out.extend_from_slice(&h);
            self.pass = self.left.map_or(0, |l| body.min(l));
            return Ok(true);
        }
        if self.pipe {
            self.round += size;
        }
        if !matches!(
            kind,
            HEADER_TRACING_DATA
                | AUXTRACE
                | HEADER_FEATURE
                | COMPRESSED
                | COMPRESSED2
                | FINISHED_ROUND
        ) {
            self.out.extend_from_slice(&h);
            self.pass = body;
            return Ok(true);
        }
        let mut b = vec![0u8; body as usize];
        let got = read_up_to(inner, &mut b)?;
        if got < b.len() {
            self.seen.cut = Some(format!(
                "the input ends {got} bytes into a {size}-byte {} record",
                features::record_kind(kind)
            ));
            return Ok(false);
        }
        self.take(body);
        match kind {
            FINISHED_ROUND => {
                self.round = 0;
                self.held = 0;
                self.out.extend_from_slice(&h);
                self.out.extend_from_slice(&b);
            }
            AUXTRACE => self.aux(inner, &h, &mut b)?,
            HEADER_TRACING_DATA if self.pipe => {
                // `struct perf_record_header_tracing_data { header; u32 size; u32 pad; }`,
                // then `size` bytes outside the record, which the parser does not expect.
                let n = u64::from(self.e.u32(&b, 0).unwrap_or(0));
                if !self.skip(inner, n, "tracing data")? {
                    return Ok(false);
                }
                self.seen.tracing_data += n;
                *self.seen.dropped.entry("HEADER_TRACING_DATA").or_default() += 1;
            }
            HEADER_FEATURE if self.pipe => self.feature(&h, b)?,
            COMPRESSED | COMPRESSED2 => {
                let before = self.held;
                let cost = self.decompress(kind, &b)?;
                if self.pipe && before > 0 && before + cost > ROUND_BYTES {
                    // The parser ends the round before this record: it never holds more
                    // than ROUND_BYTES of decompressed records at once.
                    self.seen.rounds_added += 1;
                    self.out.extend_from_slice(&self.finished_round());
                    self.held = cost;
                    self.round = size + cost;
                }
                self.out.extend_from_slice(&h);
                self.out.extend_from_slice(&b);
            }
            _ => {
                self.out.extend_from_slice(&h);
                self.out.extend_from_slice(&b);
            }
        }
        Ok(true)
    }

    /// Pipe mode: a round boundary after [`ROUND_BYTES`] of records without one, handed on
    /// between two records; whether there was one.
    fn boundary(&mut self) -> bool {
        if self.pipe && self.round >= ROUND_BYTES {
            self.round = 0;
            self.held = 0;
            self.seen.rounds_added += 1;
            let r = self.finished_round();
            self.out.extend_from_slice(&r);
            return true;
        }
        false
    }

    /// A FINISHED_ROUND record in the input's byte order.
    fn finished_round(&self) -> [u8; 8] {
        let mut r = [0u8; 8];
        let (kind, size) = if self.e.le {
            (FINISHED_ROUND.to_le_bytes(), 8u16.to_le_bytes())
        } else {
            (FINISHED_ROUND.to_be_bytes(), 8u16.to_be_bytes())
        };
        r[..4].copy_from_slice(&kind);
        r[6..].copy_from_slice(&size);
        r
    }

    /// An AUXTRACE record (`size, offset, reference, u32 idx, tid, cpu, reserved`) and the
    /// `size` bytes of trace data after it: counted; in a file they must lie within the
    /// data section, in a pipe they are skipped (the record says 0 bytes).
    fn aux(&mut self, inner: &mut impl Read, h: &[u8; 8], b: &mut [u8]) -> std::io::Result<()> {
        let Some(n) = self.e.u64(b, 0) else {
            self.out.extend_from_slice(h);
            self.out.extend_from_slice(b);
            return Ok(());
        };
        self.seen.aux.0 += 1;
        self.seen.aux.1 += n;
        match self.left {
            Some(left) if n > left => {
                let why = format!(
                    "an AUXTRACE record claims {n} bytes of trace data, {left} bytes are left \
                     in the data section"
                );
                self.seen.refused = Some(why.clone());
                return Err(refused(why));
            }
            Some(_) => self.pass = n,
            None => {
                if !self.skip(inner, n, "AUXTRACE record's trace data")? {
                    return Ok(());
                }
                self.round += n;
                self.e.put_u64(b, 0, 0);
            }
        }
        self.out.extend_from_slice(h);
        self.out.extend_from_slice(b);
        Ok(())
    }

    /// Pipe mode: a HEADER_FEATURE record (`u64 feature`, then its section) kept when it is
    /// one labperf reads and its contents hold what they claim (checked as a file's are).
    fn feature(&mut self, h: &[u8; 8], b: Vec<u8>) -> std::io::Result<()> {
        let f = self.e.u64(&b, 0).unwrap_or(u64::MAX);
        let Some(f) = u32::try_from(f).ok().filter(|f| features::KEPT.contains(f)) else {
            *self.seen.dropped.entry("HEADER_FEATURE").or_default() += 1;
            return Ok(());
        };
        match features::check_feature(f, self.e, &b[8..]) {
            Ok(()) => {
                self.out.extend_from_slice(h);
                self.out.extend_from_slice(&b);
            }
            Err(why) if f == features::EVENT_DESC => {
                let why = format!(
                    "its EVENT_DESC feature (the events' attributes and names) is damaged: {why}"
                );
                self.seen.refused = Some(why.clone());
                return Err(refused(why));
            }
            Err(why) => self
                .seen
                .left_out
                .push((features::feature_name(f).unwrap_or("?"), why)),
        }
        Ok(())
    }

    /// Reads and drops `n` bytes of `inner` (`what`); false, and the cut noted, when the
    /// input ends first.
    fn skip(&mut self, inner: &mut impl Read, n: u64, what: &str) -> std::io::Result<bool> {
        let got = std::io::copy(&mut inner.take(n), &mut std::io::sink())?;
        if got < n {
            self.seen.cut = Some(format!(
                "the input ends {got} bytes into {n} bytes of {what}"
            ));
        }
        Ok(got == n)
    }

    /// A compressed record's zstd data decompressed and counted against the budgets (the
    /// parser decompresses it again; the stream is one zstd stream across records): the
    /// whole file's (a ratio), one record's and, in a file, one round's ([`ROUND_BYTES`],
    /// counting [`RECORD_COST`] per record). Returns what its records cost the parser.
    fn decompress(&mut self, kind: u32, b: &[u8]) -> std::io::Result<u64> {
        let data = if kind == COMPRESSED {
            b
        } else {
            // COMPRESSED2: `u64 data_size`, the data, padding to 8 bytes.
            match self.e.u64(b, 0) {
                Some(n) if n <= b.len() as u64 - 8 => &b[8..8 + n as usize],
                _ => return Ok(0),
            }
        };
        let mut cost = 0;
        self.seen.compressed.0 += data.len() as u64;
        let dctx = self.zstd.get_or_insert_with(zstd_safe::DCtx::create);
        if self.scratch.is_empty() {
            self.scratch = vec![0u8; 1 << 20];
        }
        let mut input = zstd_safe::InBuffer::around(data);
        loop {
            let mut output = zstd_safe::OutBuffer::around(&mut self.scratch[..]);
            if dctx.decompress_stream(&mut output, &mut input).is_err() {
                // The parser says why.
                return Ok(cost);
            }
            let n = output.pos();
            self.seen.compressed.1 += n as u64;
            let records = self.walk.feed(self.e, &self.scratch[..n]);
            let c = n as u64 + RECORD_COST * records;
            cost += c;
            self.held += c;
            if self.pipe {
                self.round += c;
            }
            let budget = ZSTD_SLACK + ZSTD_RATIO * self.seen.compressed.0;
            if self.seen.compressed.1 > budget {
                let why = format!(
                    "its zstd-compressed records decompress to more than {budget} bytes, {} \
                     times their {} bytes: refused as a zstd bomb",
                    ZSTD_RATIO, self.seen.compressed.0
                );
                self.seen.refused = Some(why.clone());
                return Err(refused(why));
            }
            // One record: a pipe's round boundary can only come between records. A file's
            // round ends where perf wrote FINISHED_ROUND (after each pass over its ring
            // buffers, which one compressed record never exceeds).
            let (what, over) = if cost > ROUND_BYTES {
                ("one zstd-compressed record's records", cost)
            } else if !self.pipe && self.held > ROUND_BYTES {
                (
                    "its zstd-compressed records between two round boundaries",
                    self.held,
                )
            } else {
                ("", 0)
            };
            if over > 0 {
                let why = format!(
                    "{what} take more than {} MiB as the parser holds them ({over} bytes or \
                     more, counting {RECORD_COST} bytes per record): refused as a zstd bomb",
                    ROUND_BYTES >> 20
                );
                self.seen.refused = Some(why.clone());
                return Err(refused(why));
            }
            if n < self.scratch.len() && input.pos() == data.len() {
                return Ok(cost);
            }
        }
    }
}

/// A pipe's stream as the parser reads it: the 16-byte header as read, then the records
/// through a [`Guard`], whose findings stay readable through `seen`.
pub struct Piped<R> {
    pub head: Vec<u8>,
    pub at: usize,
    pub inner: R,
    pub guard: std::rc::Rc<std::cell::RefCell<Guard>>,
}

impl<R: Read> Read for Piped<R> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        if self.at < self.head.len() {
            let n = buf.len().min(self.head.len() - self.at);
            buf[..n].copy_from_slice(&self.head[self.at..self.at + n]);
            self.at += n;
            return Ok(n);
        }
        self.guard.borrow_mut().read_from(&mut self.inner, buf)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const LE: Endian = Endian { le: true };

    /// A little-endian record of `size` bytes of type `kind`.
    fn record(kind: u32, size: u16) -> Vec<u8> {
        let mut r = kind.to_le_bytes().to_vec();
        r.extend(0u16.to_le_bytes());
        r.extend(size.to_le_bytes());
        r.resize(size as usize, 0);
        r
    }

    /// Everything a guard hands on of `input`.
    fn through(g: &mut Guard, input: &[u8]) -> Vec<u8> {
        let (mut out, mut buf, mut r) = (Vec::new(), [0u8; 1000], input);
        loop {
            let n = g.read_from(&mut r, &mut buf).unwrap();
            if n == 0 {
                return out;
            }
            out.extend_from_slice(&buf[..n]);
        }
    }

    #[test]
    fn a_stream_without_round_boundaries_gets_one_every_round_bytes() {
        let one = record(9, 4096);
        let n = (ROUND_BYTES / 4096 + 10) as usize;
        let input: Vec<u8> = one.iter().copied().cycle().take(one.len() * n).collect();
        let mut g = Guard::new(LE, None);
        let out = through(&mut g, &input);
        assert_eq!(g.seen.rounds_added, 1);
        // The records as they were, with one FINISHED_ROUND (8 bytes) after the record
        // that reached ROUND_BYTES.
        assert_eq!(out.len(), input.len() + 8);
        let at = ROUND_BYTES as usize;
        assert_eq!(&out[at..at + 8], &record(FINISHED_ROUND, 8)[..]);
        // A file's data section passes unchanged.
        let mut g = Guard::new(LE, Some(input.len() as u64));
        assert_eq!(through(&mut g, &input), input);
        assert_eq!(g.seen.rounds_added, 0);
    }

    #[test]
    fn a_stream_s_aux_data_and_unread_features_are_skipped_and_counted() {
        let mut aux = record(AUXTRACE, 48);
        aux[8..16].copy_from_slice(&5u64.to_le_bytes());
        let mut input = aux.clone();
        input.extend(b"12345");
        let mut feature = record(HEADER_FEATURE, 24);
        feature[8..16].copy_from_slice(&13u64.to_le_bytes()); // CPU_TOPOLOGY
        input.extend(&feature);
        input.extend(record(9, 16));
        let mut g = Guard::new(LE, None);
        let out = through(&mut g, &input);
        let mut want = record(AUXTRACE, 48);
        want.extend(record(9, 16));
        assert_eq!(out, want);
        assert_eq!(g.seen.aux, (1, 5));
        assert_eq!(g.seen.dropped.get("HEADER_FEATURE"), Some(&1));
        assert_eq!(g.seen.cut, None);
        // Cut inside the trace data: said, and nothing of that record handed on.
        let mut g = Guard::new(LE, None);
        assert_eq!(through(&mut g, &input[..50]), Vec::<u8>::new());
        assert!(g
            .seen
            .cut
            .as_deref()
            .unwrap()
            .contains("2 bytes into 5 bytes"));
    }
}
