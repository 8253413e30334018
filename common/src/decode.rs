//! The streaming decoder: bytes in, header/records/trailer/damage out, never a panic.

use crate::delta::DeltaState;
pub use crate::error::DecodeError;
use crate::frame::{self, FrameError, FrameHeader};
use crate::model::*;
use crate::ustack;
use crate::varint::{get_i64, get_u64};
use crate::wire::{
    ext_item, sample_flag as sf, stack_budget, tag, trailer_item, FRAME_HEADER, FRAME_HEADER_EXT,
    FRAME_HEADER_LEN, FRAME_RECORDS, FRAME_SYNC, FRAME_TRAILER, MAGIC, MAX_CALLCHAIN, MAX_KSYMS,
    MAX_VALUES, MAX_VDSO, PRELUDE_LEN,
};
use alloc::boxed::Box;
use alloc::collections::VecDeque;
use alloc::string::String;
use alloc::sync::Arc;
use alloc::vec::Vec;
use core::fmt;

/// What kind of damage was found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DamageReason {
    /// The first 12 bytes are not a labperf prelude.
    BadPrelude,
    /// Bytes that are not an intact frame (bad sync or header checksum).
    Garbage,
    /// A frame with an intact header but a wrong payload checksum.
    BadPayload,
    /// The input ended inside a frame.
    Truncated,
    /// A frame passed its checksum but its records could not be decoded
    /// (a writer bug, or a record tag this decoder does not know).
    BadRecords(&'static str),
    /// Frames are missing between two intact frames (their bytes were cut out).
    MissingFrames,
    /// The input ended without a trailer; what came after the last frame is unknown.
    NoTrailer,
    /// The header frame is missing or damaged: event names are unknown.
    NoHeader,
}

/// One damaged region and what it cost.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Damage {
    /// Absolute file offset of the first damaged byte.
    pub offset: u64,
    /// Damaged bytes (0 for conditions with no bytes, like a missing trailer).
    pub len: u64,
    pub reason: DamageReason,
    /// Frames known to be lost.
    pub frames_lost: u32,
    /// Records known to be lost; `None` when it cannot be known.
    pub records_lost: Option<u64>,
}

impl fmt::Display for Damage {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let what = match &self.reason {
            DamageReason::BadPrelude => "not a labperf prelude (bad magic)",
            DamageReason::Garbage => "unreadable bytes (bad frame header)",
            DamageReason::BadPayload => "frame payload checksum mismatch",
            DamageReason::Truncated => "file truncated inside a frame",
            DamageReason::BadRecords(w) => w,
            DamageReason::MissingFrames => "frames missing",
            DamageReason::NoTrailer => "no trailer: the recording did not finish cleanly",
            DamageReason::NoHeader => "header frame missing or damaged",
        };
        write!(f, "{what} at byte {} ({} bytes)", self.offset, self.len)?;
        if self.frames_lost > 0 {
            write!(f, ", {} frame(s) lost", self.frames_lost)?;
        }
        match self.records_lost {
            Some(0) => Ok(()),
            Some(n) => write!(f, ", {n} record(s) lost"),
            None => write!(f, ", an unknown number of records lost"),
        }
    }
}

/// Totals of all damage seen.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Losses {
    pub damaged_bytes: u64,
    pub frames_lost: u32,
    /// Records known lost.
    pub records_lost: u64,
    /// Whether some losses could not be counted (e.g. a truncated file without trailer).
    pub unknown_loss: bool,
    /// Long records skipped because their tag is newer than this decoder.
    pub unknown_records: u64,
    pub regions: u32,
}

impl Losses {
    /// Nothing was lost or skipped.
    pub fn is_clean(&self) -> bool {
        *self == Losses::default()
    }
    /// Counts one more damaged region.
    pub fn add(&mut self, d: &Damage) {
        self.regions += 1;
        self.damaged_bytes += d.len;
        self.frames_lost += d.frames_lost;
        match d.records_lost {
            Some(n) => self.records_lost += n,
            None => self.unknown_loss = true,
        }
    }
}

/// One decoded item.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Event {
    /// The prelude was read: the file's wire version.
    Version(u16),
    /// Boxed: headers are large and rare, records small and many.
    Header(Box<Header>),
    /// The header-extension frame (wire version 2 on).
    HeaderExt(Box<HeaderExt>),
    Record(Record),
    Trailer(Box<Trailer>),
    /// The trailer's extension items (right after [`Event::Trailer`], when it has any).
    TrailerExt(Box<TrailerExt>),
    Damage(Damage),
}

/// A push-style streaming decoder.
#[derive(Default)]
///
/// Feed bytes with [`Decoder::push`], take items with [`Decoder::poll`] until it
/// returns `None` (more input needed), and call [`Decoder::finish`] at the end of
/// input to learn about truncation. Damage is reported in-line as
/// [`Event::Damage`] and decoding resumes at the next intact frame.
pub struct Decoder {
    buf: Vec<u8>,
    /// File offset of `buf[0]`.
    base: u64,
    pos: usize,
    prelude_done: bool,
    finished: bool,
    done: bool,
    pending: VecDeque<Event>,
    /// Start of the region being skipped while resynchronising.
    garbage_from: Option<u64>,
    next_seq: u32,
    next_record: u64,
    saw_header: bool,
    saw_trailer: bool,
    saw_frame: bool,
    losses: Losses,
    /// The records frame being read.
    cur: Option<RecordReader>,
    /// The whole input, for [`Decoder::whole`].
    shared: Option<Shared>,
}

impl fmt::Debug for Decoder {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Decoder")
            .field("offset", &(self.base + self.pos as u64))
            .field("losses", &self.losses)
            .finish_non_exhaustive()
    }
}

fn is_sync_at(buf: &[u8], i: usize) -> bool {
    buf.len() >= i + 4 && buf[i..i + 4] == FRAME_SYNC
}

impl Decoder {
    pub fn new() -> Self {
        Self::default()
    }

    /// A decoder over a complete input that it shares with the frame readers
    /// it hands out: nothing is copied. It takes no further input.
    pub fn whole(data: Shared) -> Self {
        Decoder {
            shared: Some(data),
            finished: true,
            ..Self::default()
        }
    }

    /// Appends input bytes (ignored by a [`Decoder::whole`] decoder).
    pub fn push(&mut self, bytes: &[u8]) {
        if self.shared.is_some() {
            return;
        }
        if self.pos > 0 && self.pos >= self.buf.len() / 2 {
            self.buf.drain(..self.pos);
            self.base += self.pos as u64;
            self.pos = 0;
        }
        self.buf.extend_from_slice(bytes);
    }

    /// Marks the end of input; the following polls report truncation.
    pub fn finish(&mut self) {
        self.finished = true;
    }

    /// Totals of the damage reported so far.
    pub fn losses(&self) -> &Losses {
        &self.losses
    }

    fn abs(&self, at: usize) -> u64 {
        self.base + at as u64
    }

    fn damage(&mut self, d: Damage) {
        self.losses.add(&d);
        self.pending.push_back(Event::Damage(d));
    }

    /// The next decoded item, or `None` when more input is needed (or, after
    /// [`Decoder::finish`], when everything has been reported).
    pub fn poll(&mut self) -> Option<Event> {
        loop {
            if let Some(e) = self.pending.pop_front() {
                return Some(e);
            }
            if let Some(rr) = &mut self.cur {
                match rr.next::<Whole>() {
                    Some(Ok(r)) => return Some(Event::Record(r)),
                    Some(Err(e)) => {
                        let d = rr.damage(e);
                        self.losses.unknown_records += rr.unknown;
                        self.cur = None;
                        self.damage(d);
                        continue;
                    }
                    None => {
                        self.losses.unknown_records += rr.unknown;
                        self.cur = None;
                    }
                }
            }
            if self.done {
                return None;
            }
            if !self.step() {
                return self.pending.pop_front();
            }
        }
    }

    /// Like [`Decoder::poll`], but a records frame comes whole, as a
    /// [`RecordReader`], so that frames can be decoded on other threads. The
    /// caller reports a reader's errors ([`RecordReader::damage`]) and unknown
    /// records itself.
    pub fn poll_frame(&mut self) -> Option<FrameEvent> {
        loop {
            if let Some(e) = self.pending.pop_front() {
                return Some(FrameEvent::Event(e));
            }
            if let Some(rr) = self.cur.take() {
                return Some(FrameEvent::Records(rr));
            }
            if self.done {
                return None;
            }
            if !self.step() {
                return self.pending.pop_front().map(FrameEvent::Event);
            }
        }
    }

    /// Makes progress; returns false when blocked on input.
    fn step(&mut self) -> bool {
        if let Some(sh) = self.shared.clone() {
            return self.step_on((*sh).as_ref(), Some(&sh));
        }
        let buf = core::mem::take(&mut self.buf);
        let r = self.step_on(&buf, None);
        self.buf = buf;
        r
    }

    /// One step over `buf`: the prelude, then one frame (or one damaged stretch).
    fn step_on(&mut self, buf: &[u8], shared: Option<&Shared>) -> bool {
        let avail = buf.len() - self.pos;
        if !self.prelude_done {
            return self.prelude(buf, avail);
        }
        if avail == 0 && !self.finished {
            return false;
        }
        match frame::parse(&buf[self.pos..]) {
            Ok((h, _, used)) => {
                self.intact_frame(buf, shared, h, used);
                // Records are decoded lazily, one per poll: stop here so they come out in order.
                true
            }
            Err(FrameError::BadPayload(h)) => {
                self.bad_payload(&h);
                true
            }
            Err(FrameError::UnexpectedEof { header }) => {
                if !self.finished {
                    return false;
                }
                self.partial_frame(buf, avail, header)
            }
            Err(FrameError::BadHeader) => self.resync(buf),
        }
    }

    /// Reads the 12-byte prelude (or reports it truncated or missing).
    fn prelude(&mut self, buf: &[u8], avail: usize) -> bool {
        if avail < PRELUDE_LEN {
            if !self.finished {
                return false;
            }
            self.prelude_done = true;
            if avail > 0 || !self.saw_frame {
                self.damage(Damage {
                    offset: 0,
                    len: avail as u64,
                    reason: DamageReason::Truncated,
                    frames_lost: 0,
                    records_lost: None,
                });
            }
            self.pos = buf.len();
            return self.end(buf.len());
        }
        self.prelude_done = true;
        let p = &buf[self.pos..self.pos + PRELUDE_LEN];
        if p[..8] == MAGIC {
            let v = u16::from_le_bytes([p[8], p[9]]);
            self.pending.push_back(Event::Version(v));
            self.pos += PRELUDE_LEN;
        } else {
            // Not a prelude: maybe a damaged one; look for frames anyway.
            self.damage(Damage {
                offset: 0,
                len: 0,
                reason: DamageReason::BadPrelude,
                frames_lost: 0,
                records_lost: Some(0),
            });
        }
        true
    }

    /// Takes the intact frame `h` of `used` bytes at the read position.
    fn intact_frame(&mut self, buf: &[u8], shared: Option<&Shared>, h: FrameHeader, used: usize) {
        let at = self.pos;
        self.close_garbage(at, Some(&h));
        let range = at + FRAME_HEADER_LEN..at + used;
        let payload = match shared {
            Some(sh) => Payload::Shared(sh.clone(), range),
            None => Payload::Owned(buf[range].to_vec()),
        };
        self.pos += used;
        self.frame(h, payload, at);
    }

    /// Skips the frame at the read position, whose payload fails its checksum.
    fn bad_payload(&mut self, h: &FrameHeader) {
        let at = self.pos;
        self.close_garbage(at, Some(h));
        let len = FRAME_HEADER_LEN as u64 + u64::from(h.payload_len);
        self.pos += len as usize;
        self.account(h);
        if h.kind == FRAME_HEADER {
            self.damage(Damage {
                offset: self.abs(at),
                len,
                reason: DamageReason::NoHeader,
                frames_lost: 1,
                records_lost: Some(0),
            });
        } else {
            self.damage(Damage {
                offset: self.abs(at),
                len,
                reason: DamageReason::BadPayload,
                frames_lost: 1,
                records_lost: Some(u64::from(h.nrecords)),
            });
        }
    }

    /// At the end of input, a partial frame (or nothing) is left: reports it with what
    /// its header says, and ends.
    fn partial_frame(&mut self, buf: &[u8], avail: usize, header: Option<FrameHeader>) -> bool {
        let at = self.pos;
        if avail == 0 {
            return self.end(buf.len());
        }
        if self.garbage_from.is_none() {
            self.garbage_from = Some(self.abs(at));
        }
        // The tail is a partial frame: report it with what its header says.
        let from = self.garbage_from.take().unwrap_or(self.abs(at));
        let len = self.abs(buf.len()) - from;
        let (frames_lost, records_lost) = match header {
            Some(h) if h.kind == FRAME_RECORDS => (1, Some(u64::from(h.nrecords))),
            Some(_) => (1, Some(0)),
            None => (0, None),
        };
        self.damage(Damage {
            offset: from,
            len,
            reason: DamageReason::Truncated,
            frames_lost,
            records_lost,
        });
        if let Some(h) = header {
            self.account(&h);
        }
        self.pos = buf.len();
        self.end(buf.len())
    }

    /// No intact frame header at the read position: skips to the next sync word.
    fn resync(&mut self, buf: &[u8]) -> bool {
        if self.garbage_from.is_none() {
            self.garbage_from = Some(self.abs(self.pos));
        }
        // Scan for the next sync word.
        let start = self.pos + 1;
        let found = (start..buf.len()).find(|&i| {
            is_sync_at(buf, i) || (buf.len() - i < 4 && FRAME_SYNC.starts_with(&buf[i..]))
        });
        match found {
            Some(i) if is_sync_at(buf, i) => {
                self.pos = i;
                true
            }
            Some(i) => {
                // A possible sync word cut by the end of the input.
                self.pos = i;
                if self.finished {
                    self.pos = buf.len();
                    return self.garbage_to_end(buf.len());
                }
                false
            }
            None => {
                self.pos = buf.len();
                if self.finished {
                    return self.garbage_to_end(buf.len());
                }
                false
            }
        }
    }

    /// Reports the stretch being skipped, up to the end of input, as garbage, and ends.
    fn garbage_to_end(&mut self, buf_len: usize) -> bool {
        self.garbage_from.get_or_insert(0);
        self.end(buf_len)
    }

    /// Called at the end of input once everything is consumed.
    fn end(&mut self, buf_len: usize) -> bool {
        if let Some(from) = self.garbage_from.take() {
            let len = self.abs(buf_len) - from;
            self.damage(Damage {
                offset: from,
                len,
                reason: DamageReason::Garbage,
                frames_lost: 0,
                records_lost: None,
            });
        }
        if !self.saw_trailer {
            let at = self.abs(buf_len);
            self.damage(Damage {
                offset: at,
                len: 0,
                reason: DamageReason::NoTrailer,
                frames_lost: 0,
                records_lost: None,
            });
        }
        self.done = true;
        true
    }

    /// Reports a skipped region that ends at `at`, where intact frame `h` starts,
    /// with the frames and records the sequence numbers say are missing.
    fn close_garbage(&mut self, at: usize, h: Option<&FrameHeader>) {
        let from = self.garbage_from.take();
        let (mut frames_lost, mut records_lost) = (0u32, Some(0u64));
        if let Some(h) = h {
            if h.seq > self.next_seq {
                frames_lost = h.seq - self.next_seq;
                records_lost = Some(h.first_record.saturating_sub(self.next_record));
                if self.next_seq == 0 && !self.saw_header {
                    // The header frame is among the lost ones.
                    let offset = from.unwrap_or(self.abs(at));
                    self.damage(Damage {
                        offset,
                        len: 0,
                        reason: DamageReason::NoHeader,
                        frames_lost: 1,
                        records_lost: Some(0),
                    });
                    frames_lost -= 1;
                }
            }
        }
        if from.is_none() && frames_lost == 0 {
            return;
        }
        let offset = from.unwrap_or(self.abs(at));
        let len = self.abs(at) - offset;
        let reason = if from.is_some() {
            DamageReason::Garbage
        } else {
            DamageReason::MissingFrames
        };
        if len == 0 && frames_lost == 0 {
            return;
        }
        self.damage(Damage {
            offset,
            len,
            reason,
            frames_lost,
            records_lost,
        });
    }

    fn account(&mut self, h: &FrameHeader) {
        self.saw_frame = true;
        self.next_seq = h.seq.wrapping_add(1);
        if h.kind == FRAME_RECORDS {
            self.next_record = h.first_record.saturating_add(u64::from(h.nrecords));
        }
    }

    fn frame(&mut self, h: FrameHeader, payload: Payload, at: usize) {
        self.account(&h);
        match h.kind {
            FRAME_HEADER => match postcard::from_bytes::<Header>(payload.bytes()) {
                Ok(hd) => {
                    self.saw_header = true;
                    self.pending.push_back(Event::Header(Box::new(hd)));
                }
                Err(_) => self.damage(Damage {
                    offset: self.abs(at),
                    len: payload.bytes().len() as u64,
                    reason: DamageReason::NoHeader,
                    frames_lost: 1,
                    records_lost: Some(0),
                }),
            },
            FRAME_TRAILER => match postcard::take_from_bytes::<Trailer>(payload.bytes()) {
                Ok((t, rest)) => {
                    self.saw_trailer = true;
                    self.pending.push_back(Event::Trailer(Box::new(t)));
                    if !rest.is_empty() {
                        let (x, ok) = decode_trailer_ext(rest);
                        if !ok {
                            self.damage(Damage {
                                offset: self.abs(at),
                                len: payload.bytes().len() as u64,
                                reason: DamageReason::BadRecords(
                                    "undecodable trailer-extension item",
                                ),
                                frames_lost: 0,
                                records_lost: Some(0),
                            });
                        }
                        self.pending.push_back(Event::TrailerExt(Box::new(x)));
                    }
                }
                Err(_) => self.damage(Damage {
                    offset: self.abs(at),
                    len: payload.bytes().len() as u64,
                    reason: DamageReason::BadRecords("undecodable trailer"),
                    frames_lost: 0,
                    records_lost: Some(0),
                }),
            },
            FRAME_RECORDS => {
                self.cur = Some(RecordReader::in_frame(payload, h.nrecords, self.abs(at)))
            }
            FRAME_HEADER_EXT => {
                let (x, ok) = decode_header_ext(payload.bytes());
                if !ok {
                    self.damage(Damage {
                        offset: self.abs(at),
                        len: payload.bytes().len() as u64,
                        reason: DamageReason::BadRecords("undecodable header-extension item"),
                        frames_lost: 0,
                        records_lost: Some(0),
                    });
                }
                self.pending.push_back(Event::HeaderExt(Box::new(x)));
            }
            _ => {} // A newer frame kind: skipped by design.
        }
    }
}

/// The next `varint tag | varint len | body` item of an extension payload at `pos`.
fn next_item<'a>(p: &'a [u8], pos: &mut usize) -> Result<(u64, &'a [u8]), DecodeError> {
    let tag = get_u64(p, pos)?;
    let len = usize::try_from(get_u64(p, pos)?)
        .map_err(|_| DecodeError::Malformed("item length too large"))?;
    let end = pos
        .checked_add(len)
        .filter(|&e| e <= p.len())
        .ok_or(DecodeError::UnexpectedEof)?;
    let body = &p[*pos..end];
    *pos = end;
    Ok((tag, body))
}

/// Decodes the items after a trailer's postcard body; `false` when an item was cut or did
/// not decode (the items before it are kept).
pub fn decode_trailer_ext(p: &[u8]) -> (TrailerExt, bool) {
    let mut x = TrailerExt::default();
    let mut pos = 0;
    while pos < p.len() {
        let Ok((tag, body)) = next_item(p, &mut pos) else {
            return (x, false);
        };
        match tag {
            trailer_item::USAGE => match postcard::from_bytes::<Usage>(body) {
                Ok(u) => x.usage = Some(u),
                Err(_) => return (x, false),
            },
            _ => x.unknown_items = x.unknown_items.saturating_add(1),
        }
    }
    (x, true)
}

/// Decodes a header-extension payload; `false` when an item was cut or did not decode
/// (the items before it are kept).
pub fn decode_header_ext(p: &[u8]) -> (HeaderExt, bool) {
    let mut x = HeaderExt::default();
    let mut pos = 0;
    while pos < p.len() {
        let Ok((tag, body)) = next_item(p, &mut pos) else {
            return (x, false);
        };
        match tag {
            ext_item::RECIPE => match postcard::from_bytes::<Recipe>(body) {
                Ok(r) => x.recipe = Some(r),
                Err(_) => return (x, false),
            },
            ext_item::REPLAYED => x.replayed = true,
            ext_item::VDSO if body.len() <= MAX_VDSO => x.vdso = Some(body.to_vec()),
            ext_item::VDSO => return (x, false),
            _ => x.unknown_items = x.unknown_items.saturating_add(1),
        }
    }
    (x, true)
}

/// A record from [`RecordReader::next_light`]: samples reduced to their head,
/// other (rare) records boxed, so the common case moves 56 bytes, not a `Record`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Light {
    Sample(SampleHead),
    Record(Box<Record>),
}

/// An item from [`Decoder::poll_frame`].
#[derive(Debug)]
pub enum FrameEvent {
    Event(Event),
    Records(RecordReader),
}

/// How a [`RecordReader`] hands out records: whole, or with samples cut to their head.
trait Shape {
    type Item;
    /// Decodes the body of a SAMPLE record.
    fn sample(
        p: &[u8],
        pos: &mut usize,
        st: &mut DeltaState,
        threads: &[(u32, u32)],
    ) -> Result<Self::Item, DecodeError>;
    fn record(r: Record) -> Self::Item;
}

struct Whole;

impl Shape for Whole {
    type Item = Record;
    #[inline(always)]
    fn sample(
        p: &[u8],
        pos: &mut usize,
        st: &mut DeltaState,
        threads: &[(u32, u32)],
    ) -> Result<Record, DecodeError> {
        let mut s = Sample::default();
        let h = decode_sample_into(p, pos, st, threads, Some(&mut s))?;
        if p.get(*pos) == Some(&tag::USTACK) {
            *pos += 1;
            let body = long_body(p, pos)?;
            let budget = stack_budget(p.len());
            s.user_stack = Some(ustack::decode(&mut st.stacks, h.tid, body, budget)?);
        }
        Ok(Record::Sample(Sample {
            event: h.event,
            pid: h.pid,
            tid: h.tid,
            ip: h.ip,
            time: h.time,
            period: h.period,
            cpu: h.cpu,
            ..s
        }))
    }
    #[inline(always)]
    fn record(r: Record) -> Record {
        r
    }
}

struct Heads;

impl Shape for Heads {
    type Item = Light;
    #[inline(always)]
    fn sample(
        p: &[u8],
        pos: &mut usize,
        st: &mut DeltaState,
        threads: &[(u32, u32)],
    ) -> Result<Light, DecodeError> {
        let h = decode_sample_into(p, pos, st, threads, None)?;
        // A head has no user stack, but it is checked as a whole record's is: every
        // reader of a file counts the same samples and the same damage.
        if p.get(*pos) == Some(&tag::USTACK) {
            *pos += 1;
            let body = long_body(p, pos)?;
            ustack::decode_kept(&mut st.stacks, h.tid, body, stack_budget(p.len()))?;
        }
        Ok(Light::Sample(h))
    }
    #[inline(always)]
    fn record(r: Record) -> Light {
        Light::Record(Box::new(r))
    }
}

/// Samples cut to their head and their user stacks skipped, not rebuilt: for a pass that
/// reads the side band only. A later stack of the frame is coded against the ones skipped,
/// so no stack is decoded in such a pass; nor is a skipped stack checked (the pass of
/// samples that follows says its damage).
struct SideBand;

impl Shape for SideBand {
    type Item = Light;
    #[inline(always)]
    fn sample(
        p: &[u8],
        pos: &mut usize,
        st: &mut DeltaState,
        threads: &[(u32, u32)],
    ) -> Result<Light, DecodeError> {
        let h = decode_sample_into(p, pos, st, threads, None)?;
        if p.get(*pos) == Some(&tag::USTACK) {
            *pos += 1;
            long_body(p, pos)?;
        }
        Ok(Light::Sample(h))
    }
    #[inline(always)]
    fn record(r: Record) -> Light {
        Light::Record(Box::new(r))
    }
}

/// Input bytes shared by a [`Decoder::whole`] decoder and the frame readers it
/// hands out (a `Vec`, or a memory-mapped file), so no frame is copied.
pub type Shared = Arc<dyn AsRef<[u8]> + Send + Sync>;

/// A frame payload: copied out of a streaming buffer, or a range of shared input.
enum Payload {
    Owned(Vec<u8>),
    Shared(Shared, core::ops::Range<usize>),
}

impl Payload {
    #[inline]
    fn bytes(&self) -> &[u8] {
        match self {
            Payload::Owned(v) => v,
            Payload::Shared(s, r) => &(**s).as_ref()[r.clone()],
        }
    }
}

impl Default for Payload {
    fn default() -> Self {
        Payload::Owned(Vec::new())
    }
}

impl fmt::Debug for Payload {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Payload({} bytes)", self.bytes().len())
    }
}

/// A records frame of shared input, in 24 bytes (less than the smallest frame's 37).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FrameRef {
    /// Payload start and length in the input.
    pub start: u64,
    pub len: u32,
    pub nrecords: u32,
    /// File offset of the frame (for damage reports).
    pub offset: u64,
}

/// Reads the records of one records-frame payload one at a time.
#[derive(Debug, Default)]
pub struct RecordReader {
    payload: Payload,
    pos: usize,
    st: DeltaState,
    threads: Vec<(u32, u32)>,
    /// Long records skipped because their tag is unknown.
    pub unknown: u64,
    /// Records returned so far.
    pub decoded: u64,
    /// The frame's `nrecords` and file offset, for damage reports.
    nrecords: u32,
    offset: u64,
}

impl RecordReader {
    pub fn new(payload: Vec<u8>) -> Self {
        Self::with_payload(Payload::Owned(payload))
    }

    fn with_payload(payload: Payload) -> Self {
        RecordReader {
            payload,
            ..Default::default()
        }
    }

    /// A reader for the payload of the frame with `nrecords` records at file `offset`.
    fn in_frame(payload: Payload, nrecords: u32, offset: u64) -> Self {
        RecordReader {
            payload,
            nrecords,
            offset,
            ..Default::default()
        }
    }

    /// The frame this reader reads, in a few words: for a reader over shared input (a
    /// [`Decoder::whole`]), so that many frames can be listed without a reader each and
    /// read later with [`RecordReader::of_frame`]. `None` for a copied payload.
    pub fn frame(&self) -> Option<FrameRef> {
        match &self.payload {
            Payload::Shared(_, r) => Some(FrameRef {
                start: r.start as u64,
                len: (r.end - r.start) as u32,
                nrecords: self.nrecords,
                offset: self.offset,
            }),
            Payload::Owned(_) => None,
        }
    }

    /// A reader of frame `f` of `input` (see [`RecordReader::frame`]); `None` when `f`
    /// does not lie within `input`.
    pub fn of_frame(input: &Shared, f: FrameRef) -> Option<RecordReader> {
        let start = usize::try_from(f.start).ok()?;
        let end = start.checked_add(f.len as usize)?;
        if end > (**input).as_ref().len() {
            return None;
        }
        Some(RecordReader::in_frame(
            Payload::Shared(input.clone(), start..end),
            f.nrecords,
            f.offset,
        ))
    }

    /// Size of the payload, bytes.
    pub fn len(&self) -> usize {
        self.payload.bytes().len()
    }

    /// Whether the payload is empty.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The damage to report after `next_*` returned error `e`: the frame's
    /// records not yet returned are lost.
    pub fn damage(&self, e: DecodeError) -> Damage {
        let why = match e {
            DecodeError::UnexpectedEof => "a record runs past the end of its frame",
            DecodeError::Malformed(w) => w,
        };
        Damage {
            offset: self.offset,
            len: (FRAME_HEADER_LEN + self.payload.bytes().len()) as u64,
            reason: DamageReason::BadRecords(why),
            frames_lost: 0,
            records_lost: Some(u64::from(self.nrecords).saturating_sub(self.decoded)),
        }
    }

    /// The next record; `None` at the end of the payload. After an error the
    /// rest of the payload cannot be read.
    pub fn next_record(&mut self) -> Option<Result<Record, DecodeError>> {
        self.next::<Whole>()
    }

    /// Like [`RecordReader::next_record`], but samples come as [`SampleHead`]s
    /// only: no allocation, for consumers (like reports) that need only ip,
    /// thread, time and period.
    pub fn next_light(&mut self) -> Option<Result<Light, DecodeError>> {
        self.next::<Heads>()
    }

    /// Calls `f` with every remaining record, samples cut to their head (the
    /// fastest way through a frame); returns the error that ended the frame early.
    pub fn for_each_light(&mut self, f: impl FnMut(Light)) -> Option<DecodeError> {
        self.for_each_shaped::<Heads>(f)
    }

    /// Like [`RecordReader::for_each_light`], but user stacks are skipped, not rebuilt (nor
    /// checked): for a pass that reads the side band only, whose reader then decodes no
    /// other stack of this frame.
    pub fn for_each_side_band(&mut self, f: impl FnMut(Light)) -> Option<DecodeError> {
        self.for_each_shaped::<SideBand>(f)
    }

    fn for_each_shaped<S: Shape<Item = Light>>(
        &mut self,
        mut f: impl FnMut(Light),
    ) -> Option<DecodeError> {
        let RecordReader {
            payload,
            pos,
            st,
            threads,
            unknown,
            decoded,
            ..
        } = self;
        let p = payload.bytes();
        loop {
            match read_one::<S>(p, pos, st, threads, unknown) {
                None => return None,
                Some(Ok(r)) => {
                    *decoded += 1;
                    f(r)
                }
                Some(Err(e)) => {
                    *pos = p.len();
                    return Some(e);
                }
            }
        }
    }

    #[inline(always)]
    fn next<S: Shape>(&mut self) -> Option<Result<S::Item, DecodeError>> {
        let RecordReader {
            payload,
            pos,
            st,
            threads,
            unknown,
            decoded,
            ..
        } = self;
        let p = payload.bytes();
        let r = read_one::<S>(p, pos, st, threads, unknown);
        match &r {
            Some(Err(_)) => *pos = p.len(),
            Some(Ok(_)) => *decoded += 1,
            None => {}
        }
        r
    }
}

/// Reads the record at `pos` of payload `p` (THREAD definitions and unknown long
/// records are taken in on the way); `None` at the end of the payload.
#[inline(always)]
fn read_one<S: Shape>(
    p: &[u8],
    pos: &mut usize,
    st: &mut DeltaState,
    threads: &mut Vec<(u32, u32)>,
    unknown: &mut u64,
) -> Option<Result<S::Item, DecodeError>> {
    loop {
        let t = *p.get(*pos)?;
        *pos += 1;
        let r = match t {
            tag::SAMPLE => S::sample(p, pos, st, threads),
            tag::THREAD => match get_u32(p, pos).and_then(|pid| Ok((pid, get_u32(p, pos)?))) {
                Ok(_) if threads.len() >= 1 << 20 => {
                    Err(DecodeError::Malformed("thread table too large"))
                }
                Ok(th) => {
                    threads.push(th);
                    continue;
                }
                Err(e) => Err(e),
            },
            t if t < tag::FIRST_LONG => {
                Err(DecodeError::Malformed("unknown fixed-layout record tag"))
            }
            t => match long_record(p, pos, t) {
                Ok(Some(r)) => Ok(S::record(r)),
                Ok(None) => {
                    *unknown += 1;
                    continue;
                }
                Err(e) => Err(e),
            },
        };
        return Some(r);
    }
}

/// The body of the length-prefixed record at `pos` (after its tag).
fn long_body<'a>(p: &'a [u8], pos: &mut usize) -> Result<&'a [u8], DecodeError> {
    let len = get_u64(p, pos)?;
    let end = usize::try_from(len)
        .ok()
        .and_then(|l| pos.checked_add(l))
        .ok_or(DecodeError::Malformed("record length too large"))?;
    let body = p.get(*pos..end).ok_or(DecodeError::UnexpectedEof)?;
    *pos = end;
    Ok(body)
}

fn long_record(p: &[u8], pos: &mut usize, t: u8) -> Result<Option<Record>, DecodeError> {
    let body = long_body(p, pos)?;
    let bad = |_| DecodeError::Malformed("record body does not decode");
    Ok(Some(match t {
        tag::MMAP2 => Record::Mmap2(postcard::from_bytes(body).map_err(bad)?),
        tag::COMM => Record::Comm(postcard::from_bytes(body).map_err(bad)?),
        tag::FORK => Record::Fork(postcard::from_bytes(body).map_err(bad)?),
        tag::EXIT => Record::Exit(postcard::from_bytes(body).map_err(bad)?),
        tag::LOST => Record::Lost(postcard::from_bytes(body).map_err(bad)?),
        tag::THROTTLE => Record::Throttle(postcard::from_bytes(body).map_err(bad)?),
        tag::INTERVAL => Record::Interval(postcard::from_bytes(body).map_err(bad)?),
        tag::USTACK => {
            return Err(DecodeError::Malformed(
                "a user stack not right after its sample",
            ))
        }
        tag::KSYMS => {
            let k: KernelSymbols = postcard::from_bytes(body).map_err(bad)?;
            if k.syms.len() > MAX_KSYMS {
                return Err(DecodeError::Malformed(
                    "more kernel symbols than a record carries",
                ));
            }
            Record::KernelSymbols(k)
        }
        _ => return Ok(None),
    }))
}

/// Decodes the records of one records-frame payload into `out`. On error, `out`
/// holds the records before the bad one. Unknown long records are skipped and counted.
pub fn decode_records(
    p: &[u8],
    out: &mut Vec<Record>,
    unknown: &mut u64,
) -> Result<(), DecodeError> {
    let mut rr = RecordReader::new(p.to_vec());
    let r = loop {
        match rr.next_record() {
            None => break Ok(()),
            Some(Ok(r)) => out.push(r),
            Some(Err(e)) => break Err(e),
        }
    };
    *unknown += rr.unknown;
    r
}

fn get_u32(p: &[u8], pos: &mut usize) -> Result<u32, DecodeError> {
    u32::try_from(get_u64(p, pos)?)
        .map_err(|_| DecodeError::Malformed("value does not fit 32 bits"))
}

fn get_len(p: &[u8], pos: &mut usize) -> Result<usize, DecodeError> {
    let n = get_u64(p, pos)?;
    // Every element takes at least one byte: a longer count cannot be real.
    if n > (p.len() - *pos) as u64 {
        return Err(DecodeError::Malformed("element count exceeds the frame"));
    }
    Ok(n as usize)
}

/// The fixed part of a sample: what a report needs, without allocation.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct SampleHead {
    pub event: u32,
    pub pid: u32,
    pub tid: u32,
    pub ip: u64,
    pub time: u64,
    pub period: u64,
    pub cpu: u32,
}

/// Decodes one SAMPLE body. With `out`, the variable parts (values, callchain,
/// extras) are stored into `out`; without, they are only stepped over.
#[inline(always)]
fn decode_sample_into(
    p: &[u8],
    pos: &mut usize,
    st: &mut DeltaState,
    threads: &[(u32, u32)],
    mut out: Option<&mut Sample>,
) -> Result<SampleHead, DecodeError> {
    let flags = *p.get(*pos).ok_or(DecodeError::UnexpectedEof)?;
    *pos += 1;
    if flags & 0x80 != 0 {
        return Err(DecodeError::Malformed("reserved sample flag set"));
    }
    let ip = st.ip.wrapping_add(get_i64(p, pos)? as u64);
    let time = st.time.wrapping_add(get_i64(p, pos)? as u64);
    if flags & sf::THREAD != 0 {
        st.thread = Some(get_u32(p, pos)?);
    }
    if flags & sf::EVENT != 0 {
        st.event = get_u32(p, pos)?;
    }
    if flags & sf::CPU != 0 {
        st.cpu = get_u32(p, pos)?;
    }
    if flags & sf::PERIOD != 0 {
        st.period = st.period.wrapping_add(get_i64(p, pos)? as u64);
    }
    if flags & sf::VALUES != 0 {
        let n = get_len(p, pos)?;
        if n > MAX_VALUES {
            return Err(DecodeError::Malformed(
                "more group values than a sample can carry",
            ));
        }
        st.values.resize(st.values.len().max(n), 0);
        for i in 0..n {
            st.values[i] = st.values[i].wrapping_add(get_i64(p, pos)? as u64);
        }
        st.values.truncate(n);
        if let Some(o) = out.as_deref_mut() {
            o.values.extend_from_slice(&st.values);
        }
    }
    if flags & sf::CALLCHAIN != 0 {
        let n = get_len(p, pos)?;
        if n > MAX_CALLCHAIN {
            return Err(DecodeError::Malformed(
                "longer callchain than a sample can carry",
            ));
        }
        if let Some(o) = out.as_deref_mut() {
            o.callchain.reserve(n);
        }
        for _ in 0..n {
            let e = ip.wrapping_add(get_i64(p, pos)? as u64);
            if let Some(o) = out.as_deref_mut() {
                o.callchain.push(e);
            }
        }
    }
    if flags & sf::EXTRA != 0 {
        let x = get_u64(p, pos)?;
        if x & !(sf::EXTRA_RAW | sf::EXTRA_DATA_SRC | sf::EXTRA_ADDR) != 0 {
            return Err(DecodeError::Malformed("unknown sample extra flag"));
        }
        if x & sf::EXTRA_RAW != 0 {
            let n = get_len(p, pos)?;
            if let Some(o) = out.as_deref_mut() {
                o.raw = Some(p[*pos..*pos + n].to_vec());
            }
            *pos += n;
        }
        if x & sf::EXTRA_DATA_SRC != 0 {
            let d = get_u64(p, pos)?;
            if let Some(o) = out.as_deref_mut() {
                o.data_src = Some(d);
            }
        }
        if x & sf::EXTRA_ADDR != 0 {
            st.addr = st.addr.wrapping_add(get_i64(p, pos)? as u64);
            if let Some(o) = out {
                o.addr = Some(st.addr);
            }
        }
    }
    let thread = st
        .thread
        .ok_or(DecodeError::Malformed("sample before any thread was named"))?;
    let &(pid, tid) = threads
        .get(thread as usize)
        .ok_or(DecodeError::Malformed("sample names an undefined thread"))?;
    st.ip = ip;
    st.time = time;
    Ok(SampleHead {
        event: st.event,
        pid,
        tid,
        ip,
        time,
        period: st.period,
        cpu: st.cpu,
    })
}

/// Everything decoded from a whole file.
#[derive(Debug, Default, Clone)]
pub struct Decoded {
    pub wire_version: Option<u16>,
    pub header: Option<Header>,
    pub header_ext: Option<HeaderExt>,
    pub records: Vec<Record>,
    pub trailer: Option<Trailer>,
    pub trailer_ext: Option<TrailerExt>,
    pub damage: Vec<Damage>,
    pub losses: Losses,
}

impl Decoded {
    /// Whether the input looked like a labperf file at all.
    pub fn is_labperf(&self) -> bool {
        self.wire_version.is_some()
            || self.header.is_some()
            || !self.records.is_empty()
            || self.trailer.is_some()
    }
}

/// Decodes a whole file held in memory.
pub fn decode_all(bytes: &[u8]) -> Decoded {
    let mut d = Decoder::new();
    d.push(bytes);
    d.finish();
    let mut out = Decoded::default();
    while let Some(e) = d.poll() {
        match e {
            Event::Version(v) => out.wire_version = Some(v),
            Event::Header(h) => out.header = Some(*h),
            Event::HeaderExt(x) => out.header_ext = Some(*x),
            Event::Record(r) => out.records.push(r),
            Event::Trailer(t) => out.trailer = Some(*t),
            Event::TrailerExt(x) => out.trailer_ext = Some(*x),
            Event::Damage(dm) => out.damage.push(dm),
        }
    }
    out.losses = d.losses().clone();
    out
}

/// Human-readable summary of [`Losses`].
pub fn describe_losses(l: &Losses) -> String {
    use core::fmt::Write;
    let mut s = String::new();
    if l.is_clean() {
        s.push_str("no damage");
        return s;
    }
    let _ = write!(
        s,
        "{} damaged region(s), {} bytes, {} frame(s) and {} record(s) lost",
        l.regions, l.damaged_bytes, l.frames_lost, l.records_lost
    );
    if l.unknown_loss {
        s.push_str(", plus an unknown number after the last intact frame");
    }
    if l.unknown_records > 0 {
        let _ = write!(
            s,
            "; {} record(s) of newer kinds skipped",
            l.unknown_records
        );
    }
    s
}
