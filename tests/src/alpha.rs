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

pub use crate::ring::*;

// perf_mem_data_src (include/uapi/linux/perf_event.h): mem_op at bit 0, mem_dtlb at bit 26.
pub const MEM_OP_LOAD: u64 = 0x02;
pub const MEM_OP_STORE: u64 = 0x04;
pub const MEM_OP_PFETCH: u64 = 0x08;
pub const MEM_TLB_HIT: u64 = 0x02 << 26;
pub const MEM_TLB_MISS: u64 = 0x04 << 26;

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

/// A precondition: this machine runs Alpha binaries through qemu-alpha by binfmt_misc.
/// `cargo xtask setup` registers it; a test never does it itself, so a broken set-up
/// fails here, with the fix.
pub fn require_binfmt_alpha() -> Result<(), String> {
    let entry = std::path::Path::new("/proc/sys/fs/binfmt_misc/qemu-alpha");
    match std::fs::read_to_string(entry) {
        Ok(s) if s.lines().next() == Some("enabled") => Ok(()),
        Ok(s) => Err(format!(
            "binfmt_misc has qemu-alpha but it is not enabled ({}): run `cargo xtask setup`",
            s.lines().next().unwrap_or("")
        )),
        Err(_) => Err(
            "this machine does not run Alpha binaries through qemu-alpha (no binfmt_misc entry): run `cargo xtask setup`, which installs qemu-user-binfmt and registers it"
                .into(),
        ),
    }
}
