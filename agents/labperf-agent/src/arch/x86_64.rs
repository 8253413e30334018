//! x86_64: CPU identity from CPUID and the default event.

use crate::prelude::*;

use labperf_common::{Arch, CpuId};

pub const ARCH: Arch = Arch::X86_64;

/// `--call-graph dwarf`: the user registers sampled (PERF_REG_X86_BP, SP, IP: bits 6, 7, 8)
/// and the stack pointer's place among them (ascending bit order).
pub const DWARF_REGS: u64 = (1 << 6) | (1 << 7) | (1 << 8);
pub const DWARF_SP: usize = 1;

/// CPUID vendor, display family/model/stepping and brand string.
#[allow(unused_unsafe)] // __cpuid became safe in Rust 1.87.
pub fn cpu_id() -> CpuId {
    use core::arch::x86_64::__cpuid;
    // SAFETY: CPUID exists on every x86_64 CPU.
    let l0 = unsafe { __cpuid(0) };
    let mut vendor = Vec::with_capacity(12);
    for r in [l0.ebx, l0.edx, l0.ecx] {
        vendor.extend_from_slice(&r.to_le_bytes());
    }
    // SAFETY: as above.
    let l1 = unsafe { __cpuid(1) };
    let base_family = (l1.eax >> 8) & 0xf;
    let base_model = (l1.eax >> 4) & 0xf;
    let family = if base_family == 0xf {
        base_family + ((l1.eax >> 20) & 0xff)
    } else {
        base_family
    };
    let model = if base_family == 0x6 || base_family == 0xf {
        base_model | (((l1.eax >> 16) & 0xf) << 4)
    } else {
        base_model
    };
    let mut brand = Vec::new();
    // SAFETY: as above; leaf 0x8000_0000 reports the highest extended leaf.
    if unsafe { __cpuid(0x8000_0000) }.eax >= 0x8000_0004 {
        for leaf in 0x8000_0002u32..=0x8000_0004 {
            // SAFETY: leaf checked above.
            let r = unsafe { __cpuid(leaf) };
            for v in [r.eax, r.ebx, r.ecx, r.edx] {
                brand.extend_from_slice(&v.to_le_bytes());
            }
        }
    }
    CpuId::X86 {
        vendor: String::from_utf8_lossy(&vendor).into_owned(),
        family,
        model,
        stepping: l1.eax & 0xf,
        model_name: String::from_utf8_lossy(&brand)
            .trim_matches(char::from(0))
            .trim()
            .to_string(),
    }
}
