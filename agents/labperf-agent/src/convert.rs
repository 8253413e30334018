//! Kernel ring-buffer records (perf_event_open's layout, native byte order) into labperf
//! records: pure, no system calls, so `record`, `replay` and the tests drive the same code.

use crate::prelude::*;

use labperf_common::*;

pub const PERF_RECORD_MMAP2: u32 = 10;
pub const PERF_RECORD_LOST: u32 = 2;
pub const PERF_RECORD_COMM: u32 = 3;
pub const PERF_RECORD_EXIT: u32 = 4;
pub const PERF_RECORD_THROTTLE: u32 = 5;
pub const PERF_RECORD_UNTHROTTLE: u32 = 6;
pub const PERF_RECORD_FORK: u32 = 7;
pub const PERF_RECORD_SAMPLE: u32 = 9;
pub const PERF_RECORD_LOST_SAMPLES: u32 = 13;
const MISC_COMM_EXEC: u16 = 1 << 13;
const MISC_MMAP_BUILD_ID: u16 = 1 << 14;
/// Most group values read in one sample (the C agent has the same limit).
const MAX_READ_VALUES: u64 = 64;
/// Most callchain entries kept from one sample.
const MAX_CALLCHAIN: u64 = 512;

use crate::perf;

/// Little cursor over a kernel record in native byte order.
pub struct Cur<'a> {
    pub b: &'a [u8],
    pub p: usize,
}

impl<'a> Cur<'a> {
    pub fn new(b: &'a [u8]) -> Self {
        Cur { b, p: 0 }
    }
    pub fn u64(&mut self) -> Option<u64> {
        let v = u64::from_ne_bytes(self.b.get(self.p..self.p + 8)?.try_into().ok()?);
        self.p += 8;
        Some(v)
    }
    pub fn u32(&mut self) -> Option<u32> {
        let v = u32::from_ne_bytes(self.b.get(self.p..self.p + 4)?.try_into().ok()?);
        self.p += 4;
        Some(v)
    }
    pub fn bytes(&mut self, n: usize) -> Option<&'a [u8]> {
        let v = self.b.get(self.p..self.p.checked_add(n)?)?;
        self.p += n;
        Some(v)
    }
    /// A NUL-terminated, 8-byte padded string.
    pub fn cstr(&mut self) -> String {
        let rest = &self.b[self.p.min(self.b.len())..];
        let end = rest.iter().position(|&c| c == 0).unwrap_or(rest.len());
        let s = String::from_utf8_lossy(&rest[..end]).into_owned();
        self.p += (end + 8) & !7;
        s
    }
}

/// How the kernel lays out the records of a ring: the sampler's `sample_type` and
/// `read_format`, and which perf event id is which header event.
#[derive(Debug, Clone, Default)]
pub struct Layout {
    pub sample_type: u64,
    pub read_format: u64,
    /// (perf event id, index into the header's events): few enough for a linear search.
    pub id_to_event: Vec<(u64, u32)>,
}

impl Layout {
    fn event_of(&self, id: u64) -> u32 {
        self.id_to_event
            .iter()
            .find(|(i, _)| *i == id)
            .map_or(0, |e| e.1)
    }
}

/// Converts kernel records into labperf records, counting what it saw.
#[derive(Debug, Default)]
pub struct Conv {
    pub layout: Layout,
    /// A user stack's buffer, handed back once its sample is written (`recycle`): one
    /// allocation for the run, not one per sample.
    spare: Vec<u8>,
    /// Samples converted (before any decimation).
    pub samples: u64,
    /// Records the kernel reports lost.
    pub lost: u64,
    pub throttled: u64,
    /// Bit i: event i gave a sample (events past 63 are not tracked).
    pub sampled: u64,
}

impl Conv {
    pub fn new(layout: Layout) -> Conv {
        Conv {
            layout,
            ..Default::default()
        }
    }

    /// Takes back a written record's user-stack buffer for the next sample.
    pub fn recycle(&mut self, r: Record) {
        if let Record::Sample(Sample {
            user_stack: Some(u),
            ..
        }) = r
        {
            self.spare = u.data;
        }
    }

    /// One kernel record (its 8-byte header included) as a labperf record; `None` for
    /// kinds labperf does not keep and for records too short for their kind.
    pub fn convert(&mut self, rec: &[u8]) -> Option<Record> {
        if rec.len() < 8 {
            return None;
        }
        let ty = u32::from_ne_bytes(rec[0..4].try_into().ok()?);
        let misc = u16::from_ne_bytes(rec[4..6].try_into().ok()?);
        let mut c = Cur::new(&rec[8..]);
        Some(match ty {
            PERF_RECORD_SAMPLE => {
                let s = self.sample(&mut c)?;
                self.samples += 1;
                self.sampled |= 1u64.checked_shl(s.event).unwrap_or(0);
                Record::Sample(s)
            }
            PERF_RECORD_MMAP2 => {
                let (pid, tid) = (c.u32()?, c.u32()?);
                let (addr, len, pgoff) = (c.u64()?, c.u64()?, c.u64()?);
                let build_id = if misc & MISC_MMAP_BUILD_ID != 0 {
                    let b = c.bytes(24)?;
                    let n = usize::from(b[0]).min(20);
                    Some(b[4..4 + n].to_vec())
                } else {
                    c.bytes(24)?;
                    None
                };
                let (prot, flags) = (c.u32()?, c.u32()?);
                Record::Mmap2(Mmap2 {
                    pid,
                    tid,
                    addr,
                    len,
                    pgoff,
                    prot,
                    flags,
                    build_id,
                    path: c.cstr(),
                })
            }
            PERF_RECORD_COMM => {
                let (pid, tid) = (c.u32()?, c.u32()?);
                Record::Comm(Comm {
                    pid,
                    tid,
                    comm: c.cstr(),
                    exec: misc & MISC_COMM_EXEC != 0,
                })
            }
            PERF_RECORD_FORK | PERF_RECORD_EXIT => {
                let t = Task {
                    pid: c.u32()?,
                    ppid: c.u32()?,
                    tid: c.u32()?,
                    ptid: c.u32()?,
                    time: c.u64()?,
                };
                if ty == PERF_RECORD_FORK {
                    Record::Fork(t)
                } else {
                    Record::Exit(t)
                }
            }
            PERF_RECORD_LOST => {
                let id = c.u64()?;
                let lost = c.u64()?;
                self.lost += lost;
                Record::Lost(Lost {
                    event: self.layout.event_of(id),
                    lost,
                })
            }
            PERF_RECORD_LOST_SAMPLES => {
                let lost = c.u64()?;
                self.lost += lost;
                Record::Lost(Lost { event: 0, lost })
            }
            PERF_RECORD_THROTTLE | PERF_RECORD_UNTHROTTLE => {
                let time = c.u64()?;
                let id = c.u64()?;
                if ty == PERF_RECORD_THROTTLE {
                    self.throttled += 1;
                }
                Record::Throttle(Throttle {
                    time,
                    event: self.layout.event_of(id),
                    throttle: ty == PERF_RECORD_THROTTLE,
                })
            }
            _ => return None,
        })
    }

    fn sample(&mut self, c: &mut Cur) -> Option<Sample> {
        let st = self.layout.sample_type;
        let mut s = Sample::default();
        if st & perf::SAMPLE_IDENTIFIER != 0 {
            s.event = self.layout.event_of(c.u64()?);
        }
        if st & perf::SAMPLE_IP != 0 {
            s.ip = c.u64()?;
        }
        if st & perf::SAMPLE_TID != 0 {
            s.pid = c.u32()?;
            s.tid = c.u32()?;
        }
        if st & perf::SAMPLE_TIME != 0 {
            s.time = c.u64()?;
        }
        if st & perf::SAMPLE_ADDR != 0 {
            s.addr = Some(c.u64()?);
        }
        if st & perf::SAMPLE_ID != 0 {
            c.u64()?;
        }
        if st & perf::SAMPLE_STREAM_ID != 0 {
            c.u64()?;
        }
        if st & perf::SAMPLE_CPU != 0 {
            s.cpu = c.u32()?;
            c.u32()?;
        }
        if st & perf::SAMPLE_PERIOD != 0 {
            s.period = c.u64()?;
        }
        if st & perf::SAMPLE_READ != 0 {
            let rf = self.layout.read_format;
            let nr = c.u64()?;
            if nr > MAX_READ_VALUES {
                return None; // no group is this large: a corrupt record
            }
            if rf & perf::FORMAT_TOTAL_TIME_ENABLED != 0 {
                c.u64()?;
            }
            if rf & perf::FORMAT_TOTAL_TIME_RUNNING != 0 {
                c.u64()?;
            }
            for _ in 0..nr {
                s.values.push(c.u64()?);
                if rf & perf::FORMAT_ID != 0 {
                    c.u64()?;
                }
            }
        }
        if st & perf::SAMPLE_CALLCHAIN != 0 {
            let nr = c.u64()?;
            if nr > MAX_CALLCHAIN {
                return None;
            }
            for _ in 0..nr {
                let e = c.u64()?;
                if e < 0xffff_ffff_ffff_f000 {
                    s.callchain.push(e);
                }
            }
        }
        if st & perf::SAMPLE_RAW != 0 {
            let n = c.u32()? as usize;
            s.raw = Some(c.bytes(n)?.to_vec());
        }
        let mut regs = Vec::new();
        if st & perf::SAMPLE_REGS_USER != 0 {
            // abi 0 (PERF_SAMPLE_REGS_ABI_NONE): a kernel thread, no registers follow.
            if c.u64()? != 0 {
                for _ in 0..crate::arch::DWARF_REGS.count_ones() {
                    regs.push(c.u64()?);
                }
            }
        }
        if st & perf::SAMPLE_STACK_USER != 0 {
            let size = c.u64()? as usize;
            if size > 0 {
                let data = c.bytes(size)?;
                let dyn_size = (c.u64()? as usize).min(size);
                if let Some(&sp) = regs.get(crate::arch::DWARF_SP) {
                    let mut buf = core::mem::take(&mut self.spare);
                    buf.clear();
                    buf.extend_from_slice(&data[..dyn_size]);
                    s.user_stack = Some(labperf_common::UserStack {
                        regs: core::mem::take(&mut regs),
                        sp,
                        data: buf,
                    });
                }
            }
        }
        if st & perf::SAMPLE_WEIGHT != 0 {
            c.u64()?;
        }
        if st & perf::SAMPLE_DATA_SRC != 0 {
            s.data_src = Some(c.u64()?);
        }
        Some(s)
    }
}

/// The records of a ring dump (kernel records back to back, as `--dump-ring` saves
/// them); an error for a record that claims fewer than 8 bytes or runs past the end.
pub fn dump_records(dump: &[u8]) -> impl Iterator<Item = Result<&[u8], String>> {
    let mut at = 0usize;
    core::iter::from_fn(move || {
        if at + 8 > dump.len() {
            return None;
        }
        let size = usize::from(u16::from_ne_bytes([dump[at + 6], dump[at + 7]]));
        if size < 8 || at + size > dump.len() {
            let e = format!("the ring dump is truncated or corrupt at byte {at}");
            at = dump.len();
            return Some(Err(e));
        }
        let r = &dump[at..at + size];
        at += size;
        Some(Ok(r))
    })
}
