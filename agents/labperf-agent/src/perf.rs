//! perf_event_open: building attrs, opening with clear errors, the mmap ring buffer, kernel record parsing.

use crate::prelude::*;

use crate::events::EventSpec;
use core::sync::atomic::{fence, Ordering};
use labperf_common::Attr;
use perf_event_open_sys as sys;
use perf_event_open_sys::bindings::{perf_event_attr, perf_event_mmap_page};

pub const SAMPLE_IP: u64 = 1 << 0;
pub const SAMPLE_TID: u64 = 1 << 1;
pub const SAMPLE_TIME: u64 = 1 << 2;
pub const SAMPLE_ADDR: u64 = 1 << 3;
pub const SAMPLE_READ: u64 = 1 << 4;
pub const SAMPLE_CALLCHAIN: u64 = 1 << 5;
pub const SAMPLE_ID: u64 = 1 << 6;
pub const SAMPLE_CPU: u64 = 1 << 7;
pub const SAMPLE_PERIOD: u64 = 1 << 8;
pub const SAMPLE_STREAM_ID: u64 = 1 << 9;
pub const SAMPLE_RAW: u64 = 1 << 10;
pub const SAMPLE_REGS_USER: u64 = 1 << 12;
pub const SAMPLE_STACK_USER: u64 = 1 << 13;
pub const SAMPLE_WEIGHT: u64 = 1 << 14;
pub const SAMPLE_DATA_SRC: u64 = 1 << 15;
pub const SAMPLE_IDENTIFIER: u64 = 1 << 16;

pub const FORMAT_TOTAL_TIME_ENABLED: u64 = 1 << 0;
pub const FORMAT_TOTAL_TIME_RUNNING: u64 = 1 << 1;
pub const FORMAT_ID: u64 = 1 << 2;
pub const FORMAT_GROUP: u64 = 1 << 3;

/// The attr size labperf passes: VER8 (136 bytes), accepted by every kernel
/// since 6.3 and by older ones that ignore zero tails. Size 144 (with config4)
/// gets E2BIG on 6.1.
pub const ATTR_SIZE: u32 = 136;

/// What to open, before it becomes a kernel attr.
#[derive(Debug, Clone)]
pub struct AttrPlan {
    pub spec: EventSpec,
    pub period: u64,
    pub freq: bool,
    pub sample_type: u64,
    pub read_format: u64,
    pub disabled: bool,
    pub enable_on_exec: bool,
    pub inherit: bool,
    /// Side-band records (mmap2, comm, task) are asked of one event only.
    pub sideband: bool,
    pub build_id: bool,
    pub watermark: u32,
    /// `--call-graph dwarf`: the user registers and the bytes of user stack each sample
    /// copies (PERF_SAMPLE_REGS_USER, PERF_SAMPLE_STACK_USER).
    pub regs_user: u64,
    pub stack_user: u32,
    /// Out-of-tree alternating-period ABIs: a value at attr offset 136 (then size 144)
    /// and extra flag bits; see `strobe.rs`.
    pub ext: AttrExt,
}

/// Attr fields beyond what perf-event-open-sys names for this purpose.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct AttrExt {
    pub at136: Option<u64>,
    pub flag_bits: u64,
}

impl AttrPlan {
    /// A disabled, non-inherited counting plan for `spec`; callers change what they need.
    pub fn new(spec: EventSpec) -> Self {
        AttrPlan {
            spec,
            period: 0,
            freq: false,
            sample_type: 0,
            read_format: 0,
            disabled: true,
            enable_on_exec: false,
            inherit: false,
            sideband: false,
            build_id: false,
            watermark: 0,
            regs_user: 0,
            stack_user: 0,
            ext: AttrExt::default(),
        }
    }

    pub fn to_kernel(&self) -> perf_event_attr {
        // SAFETY: perf_event_attr is plain data; all-zero is its documented default.
        let mut a: perf_event_attr = unsafe { core::mem::zeroed() };
        a.type_ = self.spec.type_;
        a.size = ATTR_SIZE;
        a.config = self.spec.config;
        a.__bindgen_anon_3.config1 = self.spec.config1;
        a.__bindgen_anon_4.config2 = self.spec.config2;
        a.__bindgen_anon_1.sample_period = self.period;
        a.set_freq(self.freq as u64);
        a.sample_type = self.sample_type;
        a.read_format = self.read_format;
        a.set_disabled(self.disabled as u64);
        a.set_enable_on_exec(self.enable_on_exec as u64);
        a.set_inherit(self.inherit as u64);
        a.set_exclude_kernel((!self.spec.kernel) as u64);
        a.set_exclude_hv(1);
        a.set_exclude_user((!self.spec.user) as u64);
        if self.sample_type & SAMPLE_CALLCHAIN != 0 && !self.spec.kernel {
            // A user-only event's stacks: the kernel part would only be the interrupt path.
            a.set_exclude_callchain_kernel(1);
        }
        if self.sample_type & SAMPLE_STACK_USER != 0 {
            a.sample_regs_user = self.regs_user;
            a.sample_stack_user = self.stack_user;
        }
        a.set_use_clockid(1);
        a.clockid = libc::CLOCK_MONOTONIC;
        if self.sideband {
            a.set_mmap(1);
            a.set_mmap2(1);
            a.set_comm(1);
            a.set_comm_exec(1);
            a.set_task(1);
            a.set_build_id(self.build_id as u64);
        }
        if self.watermark > 0 {
            a.set_watermark(1);
            a.__bindgen_anon_2.wakeup_watermark = self.watermark;
        }
        if let Some(v) = self.ext.at136 {
            a.size = 144;
            a.config4 = v; // offset 136: alternative_sample_period (RFC v2) or hf_sample (v4)
        }
        if self.ext.flag_bits != 0 {
            // SAFETY: the bitfield word is the plain u64 at offset 40.
            unsafe {
                let p = (&mut a as *mut perf_event_attr as *mut u8).add(40) as *mut u64;
                p.write_unaligned(p.read_unaligned() | self.ext.flag_bits);
            }
        }
        a
    }
}

/// The portable form of a kernel attr, for the file header.
pub fn portable(a: &perf_event_attr) -> Attr {
    // SAFETY: reading plain-data unions and the bitfield word at offset 40.
    unsafe {
        let bytes = core::slice::from_raw_parts(
            a as *const _ as *const u8,
            core::mem::size_of::<perf_event_attr>(),
        );
        let mut w = [0u8; 8];
        w.copy_from_slice(&bytes[40..48]);
        let flags = u64::from_ne_bytes(w);
        Attr {
            type_: a.type_,
            size: a.size,
            config: a.config,
            sample_period_or_freq: a.__bindgen_anon_1.sample_period,
            sample_type: a.sample_type,
            read_format: a.read_format,
            flags,
            wakeup_events_or_watermark: a.__bindgen_anon_2.wakeup_events,
            bp_type: a.bp_type,
            config1: a.__bindgen_anon_3.config1,
            config2: a.__bindgen_anon_4.config2,
            branch_sample_type: a.branch_sample_type,
            sample_regs_user: a.sample_regs_user,
            sample_stack_user: a.sample_stack_user,
            clockid: a.clockid,
            sample_regs_intr: a.sample_regs_intr,
            aux_watermark: a.aux_watermark,
            sample_max_stack: a.sample_max_stack,
            aux_sample_size: a.aux_sample_size,
            sig_data: a.sig_data,
            config3: a.config3,
        }
    }
}

/// An open perf event fd.
#[derive(Debug)]
pub struct Fd(pub i32);

impl Drop for Fd {
    fn drop(&mut self) {
        // SAFETY: we own the fd.
        unsafe { libc::close(self.0) };
    }
}

impl Fd {
    pub fn id(&self) -> u64 {
        let mut id = 0u64;
        // SAFETY: valid fd and out pointer.
        unsafe { sys::ioctls::ID(self.0, &mut id) };
        id
    }
    pub fn enable(&self) {
        // SAFETY: valid fd.
        unsafe { sys::ioctls::ENABLE(self.0, 0) };
    }
    pub fn disable(&self) {
        // SAFETY: valid fd.
        unsafe { sys::ioctls::DISABLE(self.0, 0) };
    }
    pub fn set_output(&self, to: &Fd) -> Result<(), i32> {
        // SAFETY: valid fds.
        if unsafe { sys::ioctls::SET_OUTPUT(self.0, to.0) } < 0 {
            return Err(crate::sys::errno());
        }
        Ok(())
    }
    /// Reads up to `buf.len()` u64 words; returns how many were read.
    pub fn read_u64s(&self, buf: &mut [u64]) -> usize {
        read_raw(self.0, buf)
    }
}

/// Reads up to `buf.len()` u64 words from a perf fd owned elsewhere.
pub fn read_raw(fd: i32, buf: &mut [u64]) -> usize {
    // SAFETY: buffer valid for its length in bytes.
    let n = unsafe {
        libc::read(
            fd,
            buf.as_mut_ptr() as *mut libc::c_void,
            core::mem::size_of_val(buf),
        )
    };
    if n < 0 {
        0
    } else {
        n as usize / 8
    }
}

/// Enables a perf fd owned elsewhere.
pub fn enable_raw(fd: i32) {
    // SAFETY: an fd number; a stale one only makes the ioctl fail.
    unsafe { sys::ioctls::ENABLE(fd, 0) };
}

/// Why an event did not open, as an errno.
pub struct OpenError {
    pub errno: i32,
}

/// Opens `attr`. A PMU that takes no exclusion bit at all (x86's `msr`: `msr/tsc/`) refuses
/// `exclude_hv` with EINVAL: the open is tried again without it, as perf's fallback does,
/// and `attr` keeps the bit cleared for the event's other opens (hypervisor mode exists
/// only under a hypervisor that gives the PMU to its guests, which labperf does not count).
pub fn open(attr: &mut perf_event_attr, pid: i32, cpu: i32, group: i32) -> Result<Fd, OpenError> {
    // SAFETY: attr points to a valid, fully initialised perf_event_attr.
    let mut fd = unsafe {
        sys::perf_event_open(attr, pid, cpu, group, 8 /* PERF_FLAG_FD_CLOEXEC */)
    };
    if fd < 0 && crate::sys::errno() == libc::EINVAL && attr.exclude_hv() == 1 {
        attr.set_exclude_hv(0);
        // SAFETY: as above.
        fd = unsafe { sys::perf_event_open(attr, pid, cpu, group, 8) };
        if fd < 0 {
            attr.set_exclude_hv(1);
        }
    }
    if fd < 0 {
        return Err(OpenError {
            errno: crate::sys::errno(),
        });
    }
    Ok(Fd(fd))
}

/// A full-sentence explanation of a failed open, with the fix.
pub fn explain(name: &str, plan: &AttrPlan, errno: i32) -> String {
    explain_at(name, plan, errno, crate::sys::paranoid())
}

/// [`explain`] on a machine whose `perf_event_paranoid` is `paranoid`.
fn explain_at(name: &str, plan: &AttrPlan, errno: i32, paranoid: Option<i32>) -> String {
    let what = crate::rt::Error::from_raw_os_error(errno);
    let p = paranoid
        .map(|v| v.to_string())
        .unwrap_or_else(|| "unknown".into());
    let need = if plan.spec.kernel { 1 } else { 2 };
    let fix = match errno {
        // The setting already allows this: what refuses is access to the target (another
        // user's process, or ptrace's rules), which no sysctl of perf's lifts.
        libc::EACCES | libc::EPERM if paranoid.is_some_and(|v| v <= need) => format!(
            "perf_event_paranoid is {p}, which allows profiling your own processes{}: the target is not yours to profile (another user's process; attaching needs the same user, or root or CAP_PERFMON, and ptrace's consent: kernel.yama.ptrace_scope). Run as the process's user or as root.",
            if plan.spec.kernel { " including kernel mode" } else { " in user mode" }
        ),
        libc::EACCES | libc::EPERM => format!(
            "perf_event_paranoid is {p}; profiling your own processes{} needs it at most {need}. Run as root, grant CAP_PERFMON, or run `sudo sysctl kernel.perf_event_paranoid={need}`.",
            if plan.spec.kernel { " including kernel mode" } else { " in user mode" }
        ),
        libc::ENOENT => "this kernel or PMU does not know the event. Run `labperf list` to see the events this machine has.".into(),
        libc::ENODEV => "no PMU here provides this event type (no hardware PMU, or the PMU driver is not loaded). Use a software event such as cpu-clock, or load the PMU driver.".into(),
        libc::EOPNOTSUPP => format!(
            "the PMU cannot {} this event with these settings (no overflow interrupt, or the exclude bits are not supported). Count it with `labperf-agent stat`, or choose another event.",
            if plan.period > 0 { "sample" } else { "count" }
        ),
        libc::E2BIG => format!("the kernel's perf_event_attr is older than the {}-byte one labperf passed. Upgrade the kernel or report this with `uname -r`.", ATTR_SIZE),
        libc::EMFILE | libc::ENFILE => "too many open files: raise the limit with `ulimit -n 4096`.".into(),
        libc::EINVAL => "the kernel rejected the attr combination (period, sample type, read format or flags). Try fewer options or check `labperf list` for the event's terms.".into(),
        libc::ESRCH => "the target process does not exist (it may have exited).".into(),
        libc::ENOSYS => "perf_event_open is not implemented here: this kernel was built without CONFIG_PERF_EVENTS, or this is an emulator (qemu-user) that does not forward it.".into(),
        _ => "see perf_event_open(2) for this error.".into(),
    };
    format!("cannot open event '{name}': {what}. {fix}")
}

/// Explains an mmap failure of the ring buffer.
pub fn explain_mmap(errno: i32, pages: usize) -> String {
    let what = crate::rt::Error::from_raw_os_error(errno);
    let limit =
        crate::rt::read_to_string("/proc/sys/kernel/perf_event_mlock_kb").unwrap_or_default();
    format!(
        "cannot map the {pages}-page perf ring buffer: {what}. The locked-memory limit for perf buffers (kernel.perf_event_mlock_kb = {} KiB, plus `ulimit -l`) is too small: use --mmap-pages with fewer pages, raise `ulimit -l`, or run `sudo sysctl kernel.perf_event_mlock_kb=2048`.",
        limit.trim()
    )
}

/// An mmapped perf ring buffer: one metadata page plus 2^n data pages.
pub struct Ring {
    base: *mut u8,
    len: usize,
    data_size: u64,
    scratch: Vec<u8>,
}

impl Ring {
    pub fn new(fd: &Fd, data_pages: usize) -> Result<Ring, String> {
        // SAFETY: sysconf is always safe.
        let page = unsafe { libc::sysconf(libc::_SC_PAGESIZE) } as usize;
        let len = page * (1 + data_pages);
        // SAFETY: mapping a perf fd as the kernel documents.
        let p = unsafe {
            libc::mmap(
                core::ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_SHARED,
                fd.0,
                0,
            )
        };
        if p == libc::MAP_FAILED {
            return Err(explain_mmap(crate::sys::errno(), data_pages));
        }
        Ok(Ring {
            base: p as *mut u8,
            len,
            data_size: (page * data_pages) as u64,
            scratch: Vec::new(),
        })
    }

    fn meta(&self) -> *mut perf_event_mmap_page {
        self.base as *mut perf_event_mmap_page
    }

    /// Calls `f` with every complete record (header included) now in the buffer,
    /// then releases the space to the kernel.
    pub fn drain(&mut self, mut f: impl FnMut(&[u8])) {
        let meta = self.meta();
        // SAFETY: meta page is mapped; data_head is written by the kernel, read it volatile then fence.
        let head = unsafe { core::ptr::read_volatile(core::ptr::addr_of!((*meta).data_head)) };
        fence(Ordering::Acquire);
        // SAFETY: as above; data_offset is set by the kernel once.
        let (mut tail, off) = unsafe {
            (
                core::ptr::read_volatile(core::ptr::addr_of!((*meta).data_tail)),
                (*meta).data_offset,
            )
        };
        let off = if off == 0 {
            4096.min(self.len as u64 - self.data_size)
        } else {
            off
        };
        // SAFETY: the data area lies within the mapping.
        let data = unsafe {
            core::slice::from_raw_parts(self.base.add(off as usize), self.data_size as usize)
        };
        while tail + 8 <= head {
            let at = (tail % self.data_size) as usize;
            let mut hdr = [0u8; 8];
            for (i, b) in hdr.iter_mut().enumerate() {
                *b = data[(at + i) % data.len()];
            }
            let size = u16::from_ne_bytes([hdr[6], hdr[7]]) as u64;
            if size < 8 || tail + size > head {
                break;
            }
            if at + size as usize <= data.len() {
                f(&data[at..at + size as usize]);
            } else {
                self.scratch.clear();
                self.scratch.extend_from_slice(&data[at..]);
                self.scratch
                    .extend_from_slice(&data[..size as usize - (data.len() - at)]);
                f(&self.scratch);
            }
            tail += size;
        }
        fence(Ordering::Release);
        // SAFETY: writing data_tail hands the space back to the kernel.
        unsafe { core::ptr::write_volatile(core::ptr::addr_of_mut!((*meta).data_tail), tail) };
    }
}

impl Drop for Ring {
    fn drop(&mut self) {
        // SAFETY: unmapping our own mapping.
        unsafe { libc::munmap(self.base as *mut libc::c_void, self.len) };
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn plan(kernel: bool) -> AttrPlan {
        let mut spec = crate::events::parse("cycles").unwrap();
        spec.kernel = kernel;
        AttrPlan {
            period: 1000,
            enable_on_exec: true,
            inherit: true,
            sideband: true,
            build_id: true,
            ..AttrPlan::new(spec)
        }
    }

    #[test]
    fn every_open_error_names_its_fix() {
        let user = plan(false);
        let e = explain_at("cycles", &user, libc::EACCES, Some(3));
        assert!(
            e.starts_with("cannot open event 'cycles': Permission denied"),
            "{e}"
        );
        assert!(
            e.contains("sudo sysctl kernel.perf_event_paranoid=2") && e.contains("CAP_PERFMON"),
            "{e}"
        );
        assert!(explain_at("cycles", &plan(true), libc::EPERM, Some(2))
            .contains("kernel.perf_event_paranoid=1"));
        // Where the setting already allows it, the target is what refuses (another user's
        // process): no sysctl is advised.
        let other = explain_at("cycles", &user, libc::EACCES, Some(2));
        assert!(
            other.contains("another user's process") && !other.contains("sudo sysctl"),
            "{other}"
        );
        assert!(explain("x", &user, libc::ENOENT).contains("labperf list"));
        assert!(explain("x", &user, libc::EOPNOTSUPP).contains("labperf-agent stat"));
        assert!(explain("x", &user, libc::E2BIG).contains("136-byte"));
        assert!(explain("x", &user, libc::ENODEV).contains("cpu-clock"));
        assert!(explain("x", &user, libc::EMFILE).contains("ulimit -n"));
        assert!(explain("x", &user, libc::ENOSYS).contains("qemu-user"));
        assert!(explain_mmap(libc::EPERM, 64).contains("kernel.perf_event_mlock_kb"));
    }
}
