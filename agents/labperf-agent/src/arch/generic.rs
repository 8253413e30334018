//! Any other architecture: identity from the first lines of /proc/cpuinfo.

use crate::prelude::*;

use labperf_common::{Arch, CpuId};

pub const ARCH: Arch = Arch::Other(String::new());

/// `--call-graph dwarf` is refused here: no register layout is known.
pub const DWARF_REGS: u64 = 0;
pub const DWARF_SP: usize = 0;

pub fn cpu_id() -> CpuId {
    let info = crate::rt::read_lossy("/proc/cpuinfo").unwrap_or_default();
    CpuId::Unknown {
        cpuinfo: info.lines().take(8).collect::<Vec<_>>().join("\n"),
    }
}
