//! The behaviour classes: one `#[no_mangle]` function each, so reports show stable names.

use std::hint::black_box;

pub struct State {
    /// A single random cycle through this many slots (Sattolo), for pointer chasing.
    chain: Vec<u32>,
    /// Random bytes for unpredictable branches.
    noise: Vec<u8>,
}

impl State {
    pub fn new(with_chain: bool) -> State {
        let mut x = 0x2545_F491_4F6C_DD1Du64;
        let mut rnd = move || {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x
        };
        // 32 MiB of u32 slots: far larger than any cache on the lab machines.
        let n = if with_chain { 8 << 20 } else { 1 };
        let mut chain: Vec<u32> = (0..n as u32).collect();
        for i in (1..n).rev() {
            let j = (rnd() % i as u64) as usize;
            chain.swap(i, j);
        }
        let noise = (0..65536).map(|_| rnd() as u8).collect();
        State { chain, noise }
    }
}

pub struct Class {
    pub name: &'static str,
    pub what: &'static str,
    pub run: fn(&State, u64) -> u64,
}

pub const CLASSES: &[Class] = &[
    Class {
        name: "int_divider_stalls",
        what: "dependent 64-bit integer divides",
        run: |_, n| int_divider_stalls(n),
    },
    Class {
        name: "fp_divider_stalls",
        what: "dependent double-precision divides",
        run: |_, n| fp_divider_stalls(n),
    },
    Class {
        name: "branch_mispredicts",
        what: "branches on random data",
        run: |s, n| branch_mispredicts(&s.noise, n),
    },
    Class {
        name: "dcache_miss",
        what: "pointer chasing through 32 MiB",
        run: |s, n| dcache_miss(&s.chain, n),
    },
    Class {
        name: "double_to_int",
        what: "double to integer conversions",
        run: |_, n| double_to_int(n),
    },
    Class {
        name: "nops",
        what: "runs of nop instructions",
        run: |_, n| nops(n),
    },
    Class {
        name: "serializing",
        what: "a serializing instruction (cpuid on x86_64, isb on aarch64)",
        run: |_, n| serializing(n),
    },
];

#[no_mangle]
#[inline(never)]
pub fn int_divider_stalls(n: u64) -> u64 {
    let mut x = black_box(0xFFFF_FFFF_FFFFu64);
    let d = black_box(7u64);
    for _ in 0..n * 16 {
        x = (x / d) | 0xFFFF_FFFF_FFFF;
    }
    x
}

#[no_mangle]
#[inline(never)]
pub fn fp_divider_stalls(n: u64) -> u64 {
    let mut x = black_box(1.0e300f64);
    let d = black_box(1.000_001f64);
    for _ in 0..n * 16 {
        x /= d;
    }
    x.to_bits()
}

#[no_mangle]
#[inline(never)]
pub fn branch_mispredicts(noise: &[u8], n: u64) -> u64 {
    let mut acc = 0u64;
    let mut i = black_box(0usize);
    for _ in 0..n * 16 {
        let b = noise[i & (noise.len() - 1)];
        i = i.wrapping_add(1);
        if b & 1 != 0 {
            acc = black_box(acc.wrapping_mul(3).wrapping_add(1));
        } else {
            acc = black_box(acc ^ 0x55);
        }
    }
    acc
}

#[no_mangle]
#[inline(never)]
pub fn dcache_miss(chain: &[u32], n: u64) -> u64 {
    let mut p = black_box(0u32);
    for _ in 0..n {
        p = chain[p as usize];
    }
    u64::from(p)
}

#[no_mangle]
#[inline(never)]
pub fn double_to_int(n: u64) -> u64 {
    let mut f = black_box(1.5f64);
    let mut acc = 0i64;
    for _ in 0..n * 16 {
        let i = f as i64;
        acc = acc.wrapping_add(i);
        f = black_box(i as f64 + 1.25);
    }
    acc as u64
}

#[no_mangle]
#[inline(never)]
pub fn nops(n: u64) -> u64 {
    for _ in 0..n {
        // SAFETY: nops have no effect.
        unsafe {
            core::arch::asm!(
                "nop", "nop", "nop", "nop", "nop", "nop", "nop", "nop", "nop", "nop", "nop", "nop",
                "nop", "nop", "nop", "nop"
            )
        };
    }
    n
}

#[no_mangle]
#[inline(never)]
pub fn serializing(n: u64) -> u64 {
    for _ in 0..n {
        cfg_if::cfg_if! {
            if #[cfg(target_arch = "x86_64")] {
                // SAFETY: lfence only orders execution; cpuid would trap to the hypervisor in VMs.
                unsafe { core::arch::asm!("lfence") };
            } else if #[cfg(target_arch = "aarch64")] {
                // SAFETY: isb only flushes the pipeline.
                unsafe { core::arch::asm!("isb") };
            } else {
                core::sync::atomic::fence(core::sync::atomic::Ordering::SeqCst);
            }
        }
    }
    n
}
