//! The encoder: turns records into frames (no I/O; the caller writes the bytes).

use crate::delta::DeltaState;
use crate::frame;
use crate::model::*;
use crate::ustack;
use crate::varint::{put_i64, put_u64};
use crate::wire::{
    ext_item, prelude, sample_flag as sf, tag, trailer_item, FRAME_HEADER, FRAME_HEADER_EXT,
    FRAME_RECORDS, FRAME_TRAILER, PRELUDE_LEN, WIRE_VERSION,
};
use alloc::vec::Vec;

/// Builds a record file frame by frame.
///
/// ```
/// # use labperf_common::*;
/// let mut enc = Encoder::new();
/// let mut file = Vec::new();
/// file.extend_from_slice(&Encoder::prelude());
/// # let header = Header { agent_version: "x".into(), arch: Arch::X86_64, endian: Endian::Little,
/// #   kernel_release: "6".into(), cpu: CpuId::Unknown { cpuinfo: "".into() }, hostname: "h".into(),
/// #   command: vec![], clock_id: 1, start_time_ns: 0, start_realtime_ns: 0, events: vec![],
/// #   mode: "sample".into(), notes: vec![] };
/// file.extend_from_slice(&enc.header_frame(&header));
/// enc.push(&Record::Sample(Sample { pid: 1, tid: 1, ip: 0x1000, time: 5, ..Default::default() }));
/// file.extend_from_slice(&enc.flush().unwrap());
/// file.extend_from_slice(&enc.trailer_frame(&Trailer::default()));
/// let d = decode_all(&file);
/// assert_eq!(d.records.len(), 1);
/// assert!(d.losses.is_clean());
/// ```
#[derive(Debug, Default)]
pub struct Encoder {
    seq: u32,
    records_before: u64,
    chunk: Vec<u8>,
    chunk_records: u32,
    threads: Vec<(u32, u32)>,
    last_thread: usize,
    st: DeltaState,
    frames: u32,
}

impl Encoder {
    /// A new encoder; its first frame should be [`Encoder::header_frame`].
    pub fn new() -> Self {
        Self::default()
    }

    /// The prelude for the current wire version.
    pub fn prelude() -> [u8; PRELUDE_LEN] {
        prelude(WIRE_VERSION)
    }

    /// The header frame (seq 0).
    pub fn header_frame(&mut self, h: &Header) -> Vec<u8> {
        let payload = to_vec(h);
        let f = frame::build(FRAME_HEADER, self.seq, 0, 0, &payload);
        self.seq += 1;
        f
    }

    /// The header-extension frame (kind 4), written right after the header frame.
    pub fn header_ext_frame(&mut self, x: &HeaderExt) -> Vec<u8> {
        let payload = encode_header_ext(x);
        let f = frame::build(FRAME_HEADER_EXT, self.seq, 0, 0, &payload);
        self.seq += 1;
        f
    }

    /// Bytes buffered in the open records frame.
    pub fn pending_bytes(&self) -> usize {
        self.chunk.len()
    }

    /// Records buffered in the open records frame.
    pub fn pending_records(&self) -> u32 {
        self.chunk_records
    }

    /// Records frames produced so far.
    pub fn frames(&self) -> u32 {
        self.frames
    }

    /// Records pushed so far (flushed or not).
    pub fn records(&self) -> u64 {
        self.records_before + u64::from(self.chunk_records)
    }

    fn thread_index(&mut self, pid: u32, tid: u32) -> u32 {
        if self.threads.get(self.last_thread) == Some(&(pid, tid)) {
            return self.last_thread as u32;
        }
        let i = match self.threads.iter().position(|&t| t == (pid, tid)) {
            Some(i) => i,
            None => {
                self.chunk.push(tag::THREAD);
                put_u64(&mut self.chunk, pid.into());
                put_u64(&mut self.chunk, tid.into());
                self.threads.push((pid, tid));
                self.threads.len() - 1
            }
        };
        self.last_thread = i;
        i as u32
    }

    /// Appends one record to the open records frame.
    pub fn push(&mut self, r: &Record) {
        self.chunk_records += 1;
        let (t, body) = match r {
            Record::Sample(s) => return self.push_sample(s),
            Record::Mmap2(m) => (tag::MMAP2, postcard::to_allocvec(m)),
            Record::Comm(c) => (tag::COMM, postcard::to_allocvec(c)),
            Record::Fork(t) => (tag::FORK, postcard::to_allocvec(t)),
            Record::Exit(t) => (tag::EXIT, postcard::to_allocvec(t)),
            Record::Lost(l) => (tag::LOST, postcard::to_allocvec(l)),
            Record::Throttle(t) => (tag::THROTTLE, postcard::to_allocvec(t)),
            Record::Interval(i) => (tag::INTERVAL, postcard::to_allocvec(i)),
            Record::KernelSymbols(k) => (tag::KSYMS, postcard::to_allocvec(k)),
        };
        let body = body.unwrap_or_else(|_| encoding_failed());
        self.chunk.push(t);
        put_u64(&mut self.chunk, body.len() as u64);
        self.chunk.extend_from_slice(&body);
    }

    fn push_sample(&mut self, s: &Sample) {
        let thread = self.thread_index(s.pid, s.tid);
        let mut flags = 0u8;
        if self.st.thread != Some(thread) {
            flags |= sf::THREAD;
        }
        if s.event != self.st.event {
            flags |= sf::EVENT;
        }
        if s.cpu != self.st.cpu {
            flags |= sf::CPU;
        }
        if s.period != self.st.period {
            flags |= sf::PERIOD;
        }
        if !s.values.is_empty() {
            flags |= sf::VALUES;
        }
        if !s.callchain.is_empty() {
            flags |= sf::CALLCHAIN;
        }
        let extra = (if s.raw.is_some() { sf::EXTRA_RAW } else { 0 })
            | (if s.data_src.is_some() {
                sf::EXTRA_DATA_SRC
            } else {
                0
            })
            | (if s.addr.is_some() { sf::EXTRA_ADDR } else { 0 });
        if extra != 0 {
            flags |= sf::EXTRA;
        }
        let c = &mut self.chunk;
        c.push(tag::SAMPLE);
        c.push(flags);
        put_i64(c, s.ip.wrapping_sub(self.st.ip) as i64);
        put_i64(c, s.time.wrapping_sub(self.st.time) as i64);
        if flags & sf::THREAD != 0 {
            put_u64(c, thread.into());
        }
        if flags & sf::EVENT != 0 {
            put_u64(c, s.event.into());
        }
        if flags & sf::CPU != 0 {
            put_u64(c, s.cpu.into());
        }
        if flags & sf::PERIOD != 0 {
            put_i64(c, s.period.wrapping_sub(self.st.period) as i64);
        }
        if flags & sf::VALUES != 0 {
            put_u64(c, s.values.len() as u64);
            for (i, &v) in s.values.iter().enumerate() {
                let prev = self.st.values.get(i).copied().unwrap_or(0);
                put_i64(c, v.wrapping_sub(prev) as i64);
            }
            self.st.values.clear();
            self.st.values.extend_from_slice(&s.values);
        }
        if flags & sf::CALLCHAIN != 0 {
            put_u64(c, s.callchain.len() as u64);
            for &e in &s.callchain {
                put_i64(c, e.wrapping_sub(s.ip) as i64);
            }
        }
        if flags & sf::EXTRA != 0 {
            put_u64(c, extra);
            if let Some(raw) = &s.raw {
                put_u64(c, raw.len() as u64);
                c.extend_from_slice(raw);
            }
            if let Some(d) = s.data_src {
                put_u64(c, d);
            }
            if let Some(a) = s.addr {
                put_i64(c, a.wrapping_sub(self.st.addr) as i64);
                self.st.addr = a;
            }
        }
        self.st.thread = Some(thread);
        self.st.event = s.event;
        self.st.cpu = s.cpu;
        self.st.period = s.period;
        self.st.ip = s.ip;
        self.st.time = s.time;
        if let Some(u) = &s.user_stack {
            ustack::encode(&mut self.st.stacks, s.tid, u, &mut self.chunk);
        }
    }

    /// User-stack bytes the open records frame rebuilds: a writer closes the frame once
    /// they reach [`crate::STACK_FRAME_FLUSH`], or [`crate::STACK_FLUSH_PER_BYTE`] per
    /// pending byte.
    pub fn pending_stack_bytes(&self) -> u64 {
        self.st.stacks.rebuilt
    }

    /// Closes the open records frame and returns it, or `None` if it is empty.
    pub fn flush(&mut self) -> Option<Vec<u8>> {
        if self.chunk_records == 0 {
            return None;
        }
        let f = frame::build(
            FRAME_RECORDS,
            self.seq,
            self.records_before,
            self.chunk_records,
            &self.chunk,
        );
        self.seq += 1;
        self.frames += 1;
        self.records_before += u64::from(self.chunk_records);
        self.chunk.clear();
        self.chunk_records = 0;
        self.threads.clear();
        self.last_thread = 0;
        self.st = DeltaState::default();
        Some(f)
    }

    /// Flushes whatever is open, then returns it followed by the trailer frame.
    /// `t.records` and `t.frames` are filled in from the encoder's counts.
    pub fn trailer_frame(&mut self, t: &Trailer) -> Vec<u8> {
        self.trailer_frame_ext(t, &TrailerExt::default())
    }

    /// [`Encoder::trailer_frame`] with the trailer extension's items after the trailer.
    pub fn trailer_frame_ext(&mut self, t: &Trailer, x: &TrailerExt) -> Vec<u8> {
        let mut out = self.flush().unwrap_or_default();
        let mut t = t.clone();
        t.records = self.records_before;
        t.frames = self.frames;
        let mut payload = to_vec(&t);
        payload.extend_from_slice(&encode_trailer_ext(x));
        out.extend_from_slice(&frame::build(
            FRAME_TRAILER,
            self.seq,
            self.records_before,
            0,
            &payload,
        ));
        self.seq += 1;
        out
    }
}

/// The payload of a header-extension frame: its items, `varint tag | varint len | body`.
pub fn encode_header_ext(x: &HeaderExt) -> Vec<u8> {
    let mut p = Vec::new();
    let mut item = |tag: u64, body: &[u8]| {
        put_u64(&mut p, tag);
        put_u64(&mut p, body.len() as u64);
        p.extend_from_slice(body);
    };
    if let Some(r) = &x.recipe {
        item(ext_item::RECIPE, &to_vec(r));
    }
    if x.replayed {
        item(ext_item::REPLAYED, &[]);
    }
    if let Some(v) = &x.vdso {
        item(ext_item::VDSO, v);
    }
    p
}

/// The items a trailer frame carries after its [`Trailer`]: `varint tag | varint len | body`.
pub fn encode_trailer_ext(x: &TrailerExt) -> Vec<u8> {
    let mut p = Vec::new();
    if let Some(u) = &x.usage {
        let body = to_vec(u);
        put_u64(&mut p, trailer_item::USAGE);
        put_u64(&mut p, body.len() as u64);
        p.extend_from_slice(&body);
    }
    p
}

/// Postcard into a `Vec` fails only on allocation failure, which aborts first. The error
/// is not formatted: that keeps postcard's `Debug` out of the agents.
#[cold]
fn encoding_failed() -> ! {
    panic!("postcard encoding into a Vec cannot fail")
}

fn to_vec<T: serde::Serialize + ?Sized>(v: &T) -> Vec<u8> {
    postcard::to_allocvec(v).unwrap_or_else(|_| encoding_failed())
}
