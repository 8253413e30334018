//! Alpha ProfileMe test material: payloads and bit fields written by hand from the seed's
//! header and macros (not from the code under test), kernel-layout ring-buffer records
//! for the C agent's replay mode, and the built Alpha bench's symbols.

use object::{Object, ObjectSection, ObjectSymbol};
use std::path::PathBuf;

// I_STAT bits (seed: I_STAT_* macros).
pub const TRP: u64 = 1 << 39;
pub const MIS: u64 = 1 << 40;
pub const LSO: u64 = 1 << 38;
pub const ICM: u64 = 1 << 33;
pub const fn trap_type(t: u64) -> u64 {
    t << 34
}
pub const fn ovr(x: u64) -> u64 {
    x << 30
}
// PCTR_CTL bits (seed: PCTR_CTL_* macros).
pub const TAK: u64 = 1;
pub const VAL: u64 = 1 << 1;
pub const fn sl1(x: u64) -> u64 {
    x << 2
}
pub const SL0: u64 = 1 << 4;
pub const fn pctr1(x: u64) -> u64 {
    x << 6
}
pub const KILLED: u64 = 1 << 26;
pub const STALLED: u64 = 1 << 27;
pub const fn pctr0(x: u64) -> u64 {
    x << 28
}

/// `struct alpha_profileme_sample`: u32 version, then packed u64 pmpc, i_stat, pctr_ctl,
/// little-endian, 28 bytes.
pub fn payload(version: u32, pmpc: u64, i_stat: u64, ctl: u64) -> Vec<u8> {
    let mut v = Vec::with_capacity(28);
    v.extend_from_slice(&version.to_le_bytes());
    v.extend_from_slice(&pmpc.to_le_bytes());
    v.extend_from_slice(&i_stat.to_le_bytes());
    v.extend_from_slice(&ctl.to_le_bytes());
    v
}

// perf_event.h constants the ring records use.
pub const PERF_RECORD_MMAP2: u32 = 10;
pub const PERF_RECORD_COMM: u32 = 3;
pub const PERF_RECORD_SAMPLE: u32 = 9;
pub const SAMPLE_IP: u64 = 1 << 0;
pub const SAMPLE_TID: u64 = 1 << 1;
pub const SAMPLE_TIME: u64 = 1 << 2;
pub const SAMPLE_ADDR: u64 = 1 << 3;
pub const SAMPLE_CPU: u64 = 1 << 7;
pub const SAMPLE_PERIOD: u64 = 1 << 8;
pub const SAMPLE_RAW: u64 = 1 << 10;
pub const SAMPLE_DATA_SRC: u64 = 1 << 15;
/// The sample_type of `labperf-agent record --profileme` (and of `perf record -R`).
pub const PROFILEME_SAMPLE_TYPE: u64 =
    SAMPLE_IP | SAMPLE_TID | SAMPLE_TIME | SAMPLE_CPU | SAMPLE_PERIOD | SAMPLE_RAW;
/// The sample_type of `labperf-agent record --mem`.
pub const MEM_SAMPLE_TYPE: u64 = PROFILEME_SAMPLE_TYPE | SAMPLE_ADDR | SAMPLE_DATA_SRC;

// perf_mem_data_src (include/uapi/linux/perf_event.h): mem_op at bit 0, mem_dtlb at bit 26.
pub const MEM_OP_LOAD: u64 = 0x02;
pub const MEM_OP_STORE: u64 = 0x04;
pub const MEM_OP_PFETCH: u64 = 0x08;
pub const MEM_TLB_HIT: u64 = 0x02 << 26;
pub const MEM_TLB_MISS: u64 = 0x04 << 26;

/// Kernel-layout ring-buffer records, as the C agent's `--dump-ring` saves them.
#[derive(Default)]
pub struct Ring {
    pub bytes: Vec<u8>,
}

impl Ring {
    fn record(&mut self, type_: u32, misc: u16, body: &[u8]) {
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
        let mut b = Vec::new();
        b.extend_from_slice(&pid.to_le_bytes());
        b.extend_from_slice(&pid.to_le_bytes());
        b.extend_from_slice(&addr.to_le_bytes());
        b.extend_from_slice(&len.to_le_bytes());
        b.extend_from_slice(&0u64.to_le_bytes()); // pgoff
        b.extend_from_slice(&[0u8; 24]); // maj, min, ino, ino_generation
        b.extend_from_slice(&5u32.to_le_bytes()); // PROT_READ|PROT_EXEC
        b.extend_from_slice(&2u32.to_le_bytes()); // MAP_PRIVATE
        b.extend_from_slice(path.as_bytes());
        b.push(0);
        while b.len() % 8 != 0 {
            b.push(0);
        }
        self.record(PERF_RECORD_MMAP2, 2 /* USER */, &b);
    }

    /// A ProfileMe sample (sample_type [`PROFILEME_SAMPLE_TYPE`], or [`MEM_SAMPLE_TYPE`]
    /// when `mem` is given as (addr, data_src)).
    pub fn sample(&mut self, pid: u32, time: u64, ip: u64, raw: &[u8], mem: Option<(u64, u64)>) {
        let mut b = Vec::new();
        b.extend_from_slice(&ip.to_le_bytes());
        b.extend_from_slice(&pid.to_le_bytes());
        b.extend_from_slice(&pid.to_le_bytes());
        b.extend_from_slice(&time.to_le_bytes());
        if let Some((addr, _)) = mem {
            b.extend_from_slice(&addr.to_le_bytes());
        }
        b.extend_from_slice(&0u32.to_le_bytes()); // cpu
        b.extend_from_slice(&0u32.to_le_bytes()); // res
        b.extend_from_slice(&1000u64.to_le_bytes()); // period
                                                     // RAW: u32 size, then the data padded so that size field + data is 8-byte aligned.
        let mut padded = raw.to_vec();
        while !(4 + padded.len()).is_multiple_of(8) {
            padded.push(0);
        }
        b.extend_from_slice(&(padded.len() as u32).to_le_bytes());
        b.extend_from_slice(&padded);
        if let Some((_, src)) = mem {
            b.extend_from_slice(&src.to_le_bytes());
        }
        self.record(PERF_RECORD_SAMPLE, 2 /* USER */, &b);
    }
}

/// The built Alpha agents directory.
pub fn agents_dir() -> PathBuf {
    std::env::var_os("LABPERF_AGENTS_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| crate::root().join("target/agents"))
        .join("alpha-unknown-linux-gnu")
}

pub fn alpha_agent() -> PathBuf {
    let p = agents_dir().join("labperf-agent");
    assert!(
        p.is_file(),
        "{} is not built: run `cargo xtask build-agents --target alpha`",
        p.display()
    );
    p
}

pub fn alpha_bench() -> PathBuf {
    let p = agents_dir().join("labperf-bench");
    assert!(
        p.is_file(),
        "{} is not built: run `cargo xtask build-agents --target alpha`",
        p.display()
    );
    p
}

/// (address, size) of function `name` in the Alpha bench.
pub fn bench_symbol(name: &str) -> (u64, u64) {
    let data = std::fs::read(alpha_bench()).unwrap();
    let f = object::File::parse(&*data).unwrap();
    let s = f
        .symbols()
        .find(|s| s.name() == Ok(name))
        .unwrap_or_else(|| panic!("{name} is not in the Alpha bench's symbols"));
    (s.address(), s.size())
}

/// The first conditional branch (opcodes 0x38-0x3f: BLBC … BGT) of function `name`.
pub fn first_conditional_branch(name: &str) -> u64 {
    let (addr, size) = bench_symbol(name);
    let data = std::fs::read(alpha_bench()).unwrap();
    let f = object::File::parse(&*data).unwrap();
    let text = f.section_by_name(".text").unwrap();
    let bytes = text.data().unwrap();
    let base = text.address();
    (addr..addr + size)
        .step_by(4)
        .find(|&pc| {
            let o = (pc - base) as usize;
            let insn = u32::from_le_bytes(bytes[o..o + 4].try_into().unwrap());
            (0x38..=0x3f).contains(&(insn >> 26))
        })
        .unwrap_or_else(|| panic!("{name} has no conditional branch"))
}

/// The bench's executable segment: (start, length), for the MMAP2 record.
pub fn bench_text_mapping() -> (u64, u64) {
    let data = std::fs::read(alpha_bench()).unwrap();
    let f = object::File::parse(&*data).unwrap();
    let text = f.section_by_name(".text").unwrap();
    // The first PT_LOAD starts at the image base, file offset 0 (see readelf -l).
    let base = text.address() & !0x1fff;
    (base, 0x10000)
}

/// The seed's experiment: a loop whose branch tests random data (or sorted data).
/// 1000 samples on the branch (`mispredicted` of them with TRP+MIS), 500 on the rest of
/// branch_mispredicts and 300 in nops, as the kernel lays them out in the ring.
pub fn branch_ring(mispredicted_per_100: u64) -> Ring {
    let bench = alpha_bench();
    let (base, len) = bench_text_mapping();
    let branch = first_conditional_branch("branch_mispredicts");
    let (bm, bm_size) = bench_symbol("branch_mispredicts");
    let (nops, _) = bench_symbol("nops");
    let mut r = Ring::default();
    r.comm(4242, "labperf-bench");
    r.mmap2(4242, base, len, bench.to_str().unwrap());
    let mut t = 1_000_000u64;
    for i in 0..1000u64 {
        let mis = if (i * 37) % 100 < mispredicted_per_100 {
            TRP | MIS
        } else {
            0
        };
        t += 1000;
        r.sample(
            4242,
            t,
            branch,
            &payload(1, branch, mis, VAL | (i & 1) | pctr1(20)),
            None,
        );
        if i % 2 == 0 {
            let pc = bm + 4 * ((i / 2) % (bm_size / 4));
            let pc = if pc == branch { pc + 4 } else { pc };
            r.sample(4242, t + 1, pc, &payload(1, pc, 0, VAL | pctr1(10)), None);
        }
        if i % 10 < 3 {
            r.sample(
                4242,
                t + 2,
                nops + 4,
                &payload(1, nops + 4, 0, VAL | pctr1(1)),
                None,
            );
        }
    }
    r
}

/// Makes sure this machine runs Alpha binaries through qemu-alpha by binfmt_misc (root
/// only; `cargo xtask setup` does the same): mounts binfmt_misc and registers Debian's
/// qemu-alpha entry when missing.
pub fn ensure_binfmt_alpha() -> Result<(), String> {
    let dir = std::path::Path::new("/proc/sys/fs/binfmt_misc");
    if dir.join("qemu-alpha").exists() {
        return Ok(());
    }
    if !dir.join("register").exists() {
        let st = std::process::Command::new("mount")
            .args(["-t", "binfmt_misc", "binfmt_misc"])
            .arg(dir)
            .status()
            .map_err(|e| format!("cannot run mount: {e}"))?;
        if !st.success() {
            return Err("cannot mount binfmt_misc (this needs root)".into());
        }
    }
    let conf = std::fs::read("/usr/lib/binfmt.d/qemu-alpha.conf")
        .map_err(|e| format!("no /usr/lib/binfmt.d/qemu-alpha.conf (qemu-user-binfmt): {e}"))?;
    std::fs::write(dir.join("register"), conf)
        .or_else(|e| {
            // Another test may have registered it meanwhile.
            if dir.join("qemu-alpha").exists() {
                Ok(())
            } else {
                Err(e)
            }
        })
        .map_err(|e| format!("cannot register qemu-alpha with binfmt_misc: {e}"))
}
