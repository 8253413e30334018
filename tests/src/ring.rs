//! Kernel-layout ring-buffer records (perf_event_open's, little-endian), as an agent's
//! `--dump-ring` saves them and `replay` reads them: written here from `perf_event.h`'s
//! layouts, not from the agents' code.

// perf_event.h constants the ring records use.
pub const PERF_RECORD_LOST: u32 = 2;
pub const PERF_RECORD_COMM: u32 = 3;
pub const PERF_RECORD_EXIT: u32 = 4;
pub const PERF_RECORD_THROTTLE: u32 = 5;
pub const PERF_RECORD_UNTHROTTLE: u32 = 6;
pub const PERF_RECORD_FORK: u32 = 7;
pub const PERF_RECORD_SAMPLE: u32 = 9;
pub const PERF_RECORD_MMAP2: u32 = 10;
pub const PERF_RECORD_LOST_SAMPLES: u32 = 13;
pub const SAMPLE_IP: u64 = 1 << 0;
pub const SAMPLE_TID: u64 = 1 << 1;
pub const SAMPLE_TIME: u64 = 1 << 2;
pub const SAMPLE_ADDR: u64 = 1 << 3;
pub const SAMPLE_READ: u64 = 1 << 4;
pub const SAMPLE_CALLCHAIN: u64 = 1 << 5;
pub const SAMPLE_CPU: u64 = 1 << 7;
pub const SAMPLE_PERIOD: u64 = 1 << 8;
pub const SAMPLE_RAW: u64 = 1 << 10;
pub const SAMPLE_WEIGHT: u64 = 1 << 14;
pub const SAMPLE_DATA_SRC: u64 = 1 << 15;
pub const SAMPLE_IDENTIFIER: u64 = 1 << 16;
pub const FORMAT_TOTAL_TIME_ENABLED: u64 = 1 << 0;
pub const FORMAT_TOTAL_TIME_RUNNING: u64 = 1 << 1;
pub const FORMAT_ID: u64 = 1 << 2;
pub const FORMAT_GROUP: u64 = 1 << 3;
/// The sample_type of `labperf-agent record --profileme` (and of `perf record -R`).
pub const PROFILEME_SAMPLE_TYPE: u64 =
    SAMPLE_IP | SAMPLE_TID | SAMPLE_TIME | SAMPLE_CPU | SAMPLE_PERIOD | SAMPLE_RAW;
/// The sample_type of `labperf-agent record --mem`.
pub const MEM_SAMPLE_TYPE: u64 = PROFILEME_SAMPLE_TYPE | SAMPLE_ADDR | SAMPLE_DATA_SRC;
/// The sample_type of a plain `labperf-agent record`.
pub const PLAIN_SAMPLE_TYPE: u64 =
    SAMPLE_IP | SAMPLE_TID | SAMPLE_TIME | SAMPLE_CPU | SAMPLE_PERIOD;

/// One sample's fields; those `sample_type` does not name are not written.
#[derive(Debug, Clone, Default)]
pub struct KSample {
    pub id: u64,
    pub ip: u64,
    pub pid: u32,
    pub tid: u32,
    pub time: u64,
    pub addr: u64,
    pub cpu: u32,
    pub period: u64,
    /// Group values with their ids (PERF_SAMPLE_READ with PERF_FORMAT_GROUP).
    pub values: Vec<(u64, u64)>,
    pub callchain: Vec<u64>,
    pub raw: Vec<u8>,
    pub weight: u64,
    pub data_src: u64,
}

/// Kernel-layout ring-buffer records, as the C agent's `--dump-ring` saves them.
#[derive(Default)]
pub struct Ring {
    pub bytes: Vec<u8>,
}

impl Ring {
    pub fn record(&mut self, type_: u32, misc: u16, body: &[u8]) {
        let size = 8 + body.len();
        assert_eq!(size % 8, 0, "records are 8-byte multiples");
        self.bytes.extend_from_slice(&type_.to_le_bytes());
        self.bytes.extend_from_slice(&misc.to_le_bytes());
        self.bytes.extend_from_slice(&(size as u16).to_le_bytes());
        self.bytes.extend_from_slice(body);
    }

    pub fn comm(&mut self, pid: u32, comm: &str) {
        let mut b = Vec::new();
        b.extend_from_slice(&pid.to_le_bytes());
        b.extend_from_slice(&pid.to_le_bytes());
        b.extend_from_slice(comm.as_bytes());
        b.push(0);
        while b.len() % 8 != 0 {
            b.push(0);
        }
        self.record(PERF_RECORD_COMM, 1 << 13, &b);
    }

    /// An executable mapping of `path` (file offset 0 at `addr`).
    pub fn mmap2(&mut self, pid: u32, addr: u64, len: u64, path: &str) {
        self.mmap2_with(pid, addr, len, 0, None, path);
    }

    /// An executable mapping, with the kernel's build-id form (PERF_RECORD_MISC_MMAP_BUILD_ID)
    /// when `build_id` is given.
    pub fn mmap2_with(
        &mut self,
        pid: u32,
        addr: u64,
        len: u64,
        pgoff: u64,
        build_id: Option<&[u8]>,
        path: &str,
    ) {
        let mut b = Vec::new();
        b.extend_from_slice(&pid.to_le_bytes());
        b.extend_from_slice(&pid.to_le_bytes());
        b.extend_from_slice(&addr.to_le_bytes());
        b.extend_from_slice(&len.to_le_bytes());
        b.extend_from_slice(&pgoff.to_le_bytes());
        let mut id = [0u8; 24]; // maj, min, ino, ino_generation, or size + build-id
        let mut misc = 2; // USER
        if let Some(bid) = build_id {
            id[0] = bid.len() as u8;
            id[4..4 + bid.len()].copy_from_slice(bid);
            misc |= 1 << 14;
        }
        b.extend_from_slice(&id);
        b.extend_from_slice(&5u32.to_le_bytes()); // PROT_READ|PROT_EXEC
        b.extend_from_slice(&2u32.to_le_bytes()); // MAP_PRIVATE
        b.extend_from_slice(path.as_bytes());
        b.push(0);
        while b.len() % 8 != 0 {
            b.push(0);
        }
        self.record(PERF_RECORD_MMAP2, misc, &b);
    }

    /// PERF_RECORD_FORK (or EXIT when `exit`).
    pub fn task(&mut self, exit: bool, pid: u32, ppid: u32, tid: u32, ptid: u32, time: u64) {
        let mut b = Vec::new();
        for v in [pid, ppid, tid, ptid] {
            b.extend_from_slice(&v.to_le_bytes());
        }
        b.extend_from_slice(&time.to_le_bytes());
        self.record(
            if exit {
                PERF_RECORD_EXIT
            } else {
                PERF_RECORD_FORK
            },
            0,
            &b,
        );
    }

    pub fn lost(&mut self, id: u64, lost: u64) {
        let mut b = id.to_le_bytes().to_vec();
        b.extend_from_slice(&lost.to_le_bytes());
        self.record(PERF_RECORD_LOST, 0, &b);
    }

    pub fn lost_samples(&mut self, lost: u64) {
        self.record(PERF_RECORD_LOST_SAMPLES, 0, &lost.to_le_bytes());
    }

    pub fn throttle(&mut self, unthrottle: bool, time: u64, id: u64) {
        let mut b = time.to_le_bytes().to_vec();
        b.extend_from_slice(&id.to_le_bytes());
        b.extend_from_slice(&id.to_le_bytes()); // stream_id
        self.record(
            if unthrottle {
                PERF_RECORD_UNTHROTTLE
            } else {
                PERF_RECORD_THROTTLE
            },
            0,
            &b,
        );
    }

    /// A sample in the kernel's field order (perf_output_sample) for `sample_type` and,
    /// with PERF_SAMPLE_READ, `read_format` (a group read).
    pub fn ksample(&mut self, st: u64, rf: u64, s: &KSample) {
        let mut b = Vec::new();
        let u64s = |b: &mut Vec<u8>, v: u64| b.extend_from_slice(&v.to_le_bytes());
        if st & SAMPLE_IDENTIFIER != 0 {
            u64s(&mut b, s.id);
        }
        if st & SAMPLE_IP != 0 {
            u64s(&mut b, s.ip);
        }
        if st & SAMPLE_TID != 0 {
            b.extend_from_slice(&s.pid.to_le_bytes());
            b.extend_from_slice(&s.tid.to_le_bytes());
        }
        if st & SAMPLE_TIME != 0 {
            u64s(&mut b, s.time);
        }
        if st & SAMPLE_ADDR != 0 {
            u64s(&mut b, s.addr);
        }
        if st & SAMPLE_CPU != 0 {
            b.extend_from_slice(&s.cpu.to_le_bytes());
            b.extend_from_slice(&0u32.to_le_bytes());
        }
        if st & SAMPLE_PERIOD != 0 {
            u64s(&mut b, s.period);
        }
        if st & SAMPLE_READ != 0 {
            assert!(rf & FORMAT_GROUP != 0, "only group reads");
            u64s(&mut b, s.values.len() as u64);
            if rf & FORMAT_TOTAL_TIME_ENABLED != 0 {
                u64s(&mut b, 1000);
            }
            if rf & FORMAT_TOTAL_TIME_RUNNING != 0 {
                u64s(&mut b, 900);
            }
            for &(v, id) in &s.values {
                u64s(&mut b, v);
                if rf & FORMAT_ID != 0 {
                    u64s(&mut b, id);
                }
            }
        }
        if st & SAMPLE_CALLCHAIN != 0 {
            u64s(&mut b, s.callchain.len() as u64);
            for &e in &s.callchain {
                u64s(&mut b, e);
            }
        }
        if st & SAMPLE_RAW != 0 {
            // u32 size, then the data padded so that size + data is 8-byte aligned.
            let mut padded = s.raw.clone();
            while !(4 + padded.len()).is_multiple_of(8) {
                padded.push(0);
            }
            b.extend_from_slice(&(padded.len() as u32).to_le_bytes());
            b.extend_from_slice(&padded);
        }
        if st & SAMPLE_WEIGHT != 0 {
            u64s(&mut b, s.weight);
        }
        if st & SAMPLE_DATA_SRC != 0 {
            u64s(&mut b, s.data_src);
        }
        self.record(PERF_RECORD_SAMPLE, 2 /* USER */, &b);
    }

    /// A ProfileMe sample (sample_type [`PROFILEME_SAMPLE_TYPE`], or [`MEM_SAMPLE_TYPE`]
    /// when `mem` is given as (addr, data_src)).
    pub fn sample(&mut self, pid: u32, time: u64, ip: u64, raw: &[u8], mem: Option<(u64, u64)>) {
        let st = if mem.is_some() {
            MEM_SAMPLE_TYPE
        } else {
            PROFILEME_SAMPLE_TYPE
        };
        let (addr, data_src) = mem.unwrap_or((0, 0));
        self.ksample(
            st,
            0,
            &KSample {
                ip,
                pid,
                tid: pid,
                time,
                addr,
                period: 1000,
                raw: raw.to_vec(),
                data_src,
                ..Default::default()
            },
        );
    }
}
