//! aarch64: CPU identity from MIDR_EL1 (sysfs) and /proc/cpuinfo.

use labperf_common::{Arch, CpuId};

pub const ARCH: Arch = Arch::Aarch64;

/// `--call-graph dwarf`: the user registers sampled (PERF_REG_ARM64_X29, LR, SP, PC: bits
/// 29 to 32) and the stack pointer's place among them (ascending bit order).
pub const DWARF_REGS: u64 = 0xf << 29;
pub const DWARF_SP: usize = 2;

fn field(cpuinfo: &str, key: &str) -> u32 {
    cpuinfo
        .lines()
        .find(|l| l.split(':').next().map(str::trim) == Some(key))
        .and_then(|l| l.split(':').nth(1))
        .and_then(|v| {
            let v = v.trim();
            match v.strip_prefix("0x") {
                Some(h) => u32::from_str_radix(h, 16).ok(),
                None => v.parse().ok(),
            }
        })
        .unwrap_or(0)
}

/// MIDR from `/sys/devices/system/cpu/cpu0/regs/identification/midr_el1`, fields from cpuinfo.
pub fn cpu_id() -> CpuId {
    let midr =
        crate::rt::read_to_string("/sys/devices/system/cpu/cpu0/regs/identification/midr_el1")
            .ok()
            .and_then(|s| u64::from_str_radix(s.trim().trim_start_matches("0x"), 16).ok());
    let info = crate::rt::read_lossy("/proc/cpuinfo").unwrap_or_default();
    CpuId::Arm {
        midr,
        implementer: field(&info, "CPU implementer"),
        part: field(&info, "CPU part"),
        variant: field(&info, "CPU variant"),
        revision: field(&info, "CPU revision"),
    }
}
