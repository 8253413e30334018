//! Facts about the running system: uname, hostname, clocks, rusage, sysfs reads.

use crate::prelude::*;

use labperf_common::{Arch, Endian};

/// `uname -r`, `uname -m` and the node name.
pub struct Uname {
    pub release: String,
    pub machine: String,
    pub nodename: String,
}

fn cstr(b: &[libc::c_char]) -> String {
    let bytes: Vec<u8> = b
        .iter()
        .take_while(|&&c| c != 0)
        .map(|&c| c as u8)
        .collect();
    String::from_utf8_lossy(&bytes).into_owned()
}

pub fn uname() -> Uname {
    // SAFETY: utsname is plain data; uname fills it.
    let mut u: libc::utsname = unsafe { core::mem::zeroed() };
    // SAFETY: valid pointer to a utsname.
    unsafe { libc::uname(&mut u) };
    Uname {
        release: cstr(&u.release),
        machine: cstr(&u.machine),
        nodename: cstr(&u.nodename),
    }
}

pub fn arch() -> Arch {
    match crate::arch::ARCH {
        Arch::Other(_) => Arch::from_uname(&uname().machine),
        a => a,
    }
}

pub fn endian() -> Endian {
    if cfg!(target_endian = "little") {
        Endian::Little
    } else {
        Endian::Big
    }
}

/// The agent's own CPU time (ns) and peak RSS (KiB). The peak is /proc/self/status's
/// VmHWM, the high-water mark of the agent's own address space: getrusage's ru_maxrss also
/// holds that of the process that started it (fork copies the mark, exec keeps it in
/// ru_maxrss): 15,452 KiB for an agent of 300 KiB started from python3.
pub fn self_usage() -> (u64, u64) {
    let (user, sys, rss) = usage(libc::RUSAGE_SELF);
    let hwm = crate::rt::read_lossy("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines().find_map(|l| {
                l.strip_prefix("VmHWM:")?
                    .trim()
                    .strip_suffix("kB")?
                    .trim()
                    .parse()
                    .ok()
            })
        });
    (user + sys, hwm.unwrap_or(rss))
}

/// `getrusage(who)`: user and system CPU time in ns, and the peak RSS in KiB.
pub fn usage(who: i32) -> (u64, u64, u64) {
    // SAFETY: rusage is plain data; getrusage fills it.
    let mut ru: libc::rusage = unsafe { core::mem::zeroed() };
    // SAFETY: valid pointer.
    unsafe { libc::getrusage(who, &mut ru) };
    let tv = |t: libc::timeval| t.tv_sec as u64 * 1_000_000_000 + t.tv_usec as u64 * 1000;
    (tv(ru.ru_utime), tv(ru.ru_stime), ru.ru_maxrss as u64)
}

/// `kernel.perf_event_paranoid`, if readable.
pub fn paranoid() -> Option<i32> {
    crate::rt::read_to_string("/proc/sys/kernel/perf_event_paranoid")
        .ok()?
        .trim()
        .parse()
        .ok()
}

/// Online CPU numbers from `/sys/devices/system/cpu/online` (e.g. `0-3,6`).
pub fn online_cpus() -> Vec<i32> {
    let s = crate::rt::read_to_string("/sys/devices/system/cpu/online").unwrap_or_default();
    let mut v = Vec::new();
    for part in s.trim().split(',').filter(|p| !p.is_empty()) {
        let mut it = part.splitn(2, '-');
        let a: i32 = it.next().and_then(|x| x.parse().ok()).unwrap_or(0);
        let b: i32 = it.next().and_then(|x| x.parse().ok()).unwrap_or(a);
        v.extend(a..=b);
    }
    if v.is_empty() {
        // SAFETY: sysconf is always safe to call.
        let n = unsafe { libc::sysconf(libc::_SC_NPROCESSORS_ONLN) }.max(1);
        v.extend(0..n as i32);
    }
    v
}

/// A pidfd of our child `pid` (Linux 5.3+): readable once it exits, so the drain loop's
/// poll wakes at once instead of at its next timeout.
pub fn pidfd(pid: i32) -> Option<i32> {
    // SAFETY: pidfd_open takes a pid and flags; the result is an fd or -1.
    let fd = unsafe { libc::syscall(libc::SYS_pidfd_open, pid, 0) };
    (fd >= 0).then_some(fd as i32)
}

/// Waits until `fd` (a pidfd) is readable, `wait` has passed (`None`: no limit) or a
/// signal arrives, with the signal mask `open` for the wait only (`ppoll`'s: the caller
/// blocks SIGINT and SIGTERM, so none lands between its check and this wait).
pub fn wait_readable(fd: Option<i32>, wait: Option<core::time::Duration>, open: &libc::sigset_t) {
    let mut p = libc::pollfd {
        fd: fd.unwrap_or(-1),
        events: libc::POLLIN,
        revents: 0,
    };
    let ts = wait.map(|w| libc::timespec {
        tv_sec: w.as_secs() as _,
        tv_nsec: w.subsec_nanos() as _,
    });
    // SAFETY: one valid pollfd (a negative fd is ignored), a timespec or null, a mask.
    unsafe {
        libc::ppoll(
            &mut p,
            1,
            ts.as_ref().map_or(core::ptr::null(), |t| t),
            open,
        )
    };
}

/// SIGINT and SIGTERM blocked; the mask before.
pub fn block_signals() -> libc::sigset_t {
    // SAFETY: sigset_t is plain data, filled by sigemptyset/sigaddset.
    unsafe {
        let mut old: libc::sigset_t = core::mem::zeroed();
        let mut s = old;
        libc::sigemptyset(&mut s);
        libc::sigaddset(&mut s, libc::SIGINT);
        libc::sigaddset(&mut s, libc::SIGTERM);
        libc::sigprocmask(libc::SIG_BLOCK, &s, &mut old);
        old
    }
}

/// `0,2-3`: the CPUs of `-C` as text.
pub fn cpu_list_text(c: &[i32]) -> String {
    let v: Vec<String> = c.iter().map(i32::to_string).collect();
    v.join(",")
}

/// `kernel.perf_event_paranoid` (2 when unreadable) and whether this process has
/// CAP_PERFMON or CAP_SYS_ADMIN in its effective set.
pub fn paranoid_and_caps() -> (i32, bool) {
    let caps = crate::rt::read_lossy("/proc/self/status")
        .unwrap_or_default()
        .lines()
        .find_map(|l| l.strip_prefix("CapEff:"))
        .and_then(|v| u64::from_str_radix(v.trim(), 16).ok())
        .unwrap_or(0);
    (paranoid().unwrap_or(2), caps & (1 << 38 | 1 << 21) != 0)
}

/// perf's rule for an event without `:u`/`:k`: kernel mode is counted too, unless
/// `perf_event_paranoid` is above 1 and the process lacks CAP_PERFMON and CAP_SYS_ADMIN.
pub fn kernel_allowed() -> bool {
    let (paranoid, caps) = paranoid_and_caps();
    caps || paranoid <= 1
}

/// Whether CPU-wide events may be opened here: with CAP_PERFMON or CAP_SYS_ADMIN (root),
/// or `kernel.perf_event_paranoid` at 0 or below; else what to change.
pub fn may_record_cpus() -> Result<(), String> {
    let (paranoid, caps) = paranoid_and_caps();
    if caps || paranoid <= 0 {
        return Ok(());
    }
    Err(format!("-a/-C record every task on the CPUs: that needs CAP_PERFMON (or root), or kernel.perf_event_paranoid at 0 or below, and it is {paranoid} here. Run as root, give the agent the capability (setcap cap_perfmon+ep labperf-agent), or run `sysctl -w kernel.perf_event_paranoid=0`; nothing was recorded"))
}

pub fn errno() -> i32 {
    crate::rt::Error::last_os_error()
        .raw_os_error()
        .unwrap_or(0)
}

/// The vDSO image the kernel maps into this process (and every process of its ABI), as
/// `/proc/self/maps` bounds it; None when there is none or it is over
/// [`labperf_common::MAX_VDSO`] bytes. The host names `[vdso]` samples from it.
pub fn vdso_image() -> Option<Vec<u8>> {
    let maps = crate::rt::read_lossy("/proc/self/maps").ok()?;
    let line = maps.lines().find(|l| l.ends_with("[vdso]"))?;
    let range = line.split_whitespace().next()?;
    let (a, b) = range.split_once('-')?;
    let start = usize::from_str_radix(a, 16).ok()?;
    let end = usize::from_str_radix(b, 16).ok()?;
    let len = end.checked_sub(start)?;
    if len == 0 || len > labperf_common::MAX_VDSO {
        return None;
    }
    // SAFETY: the kernel maps the vDSO readable for the life of the process, at the
    // bounds /proc/self/maps gives; the bytes are copied out at once.
    let image = unsafe { core::slice::from_raw_parts(start as *const u8, len) };
    image.starts_with(b"\x7fELF").then(|| image.to_vec())
}

/// The sysfs root: `$LABPERF_SYSFS` (tests point it at a recorded tree; the PMUs and TopDown are read there) or `/sys`.
pub fn sysfs_root() -> String {
    crate::rt::var_os("LABPERF_SYSFS")
        .map_or_else(|| "/sys".into(), |v| v.to_string_lossy().into_owned())
}
