//! The agent's runtime over libc: files, directories, errors, clocks, arguments, the
//! environment and printing, the few things it took from `std` (the agent is `no_std`: the
//! standard library's panic and backtrace machinery was 45 % of its bytes, issue 28).
//!
//! Every call is the libc call `std` makes on Linux, with `std`'s flags (files opened
//! `O_CLOEXEC`; files created only new, 0600, never through a link: `File::create_new`) and `std`'s messages (an OS error reads
//! `"No such file or directory (os error 2)"`), so the agent behaves and speaks as before.

use alloc::borrow::Cow;
use alloc::ffi::CString;
use alloc::string::String;
use alloc::vec::Vec;
use core::fmt;
use core::time::Duration;

/// An OS error: the errno of a failed call (`std::io::Error`'s OS form), or [`NOT_UTF8`].
#[derive(Clone, Copy, PartialEq, Eq)]
pub struct Error(i32);

/// [`read_to_string`] of a file that is not UTF-8 (no errno: `std`'s `InvalidData`).
const NOT_UTF8: Error = Error(-1);

impl Error {
    /// The error of the last failed call on this thread.
    pub fn last_os_error() -> Error {
        // SAFETY: errno is thread-local and always readable.
        Error(unsafe { *libc::__errno_location() })
    }

    pub fn from_raw_os_error(e: i32) -> Error {
        Error(e)
    }

    pub fn raw_os_error(&self) -> Option<i32> {
        (*self != NOT_UTF8).then_some(self.0)
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if *self == NOT_UTF8 {
            return f.write_str("stream did not contain valid UTF-8");
        }
        let mut buf = [0u8; 128];
        // SAFETY: strerror_r writes at most buf.len() bytes, NUL included.
        let msg = unsafe {
            libc::strerror_r(self.0, buf.as_mut_ptr().cast(), buf.len());
            core::ffi::CStr::from_ptr(buf.as_ptr().cast())
        };
        write!(f, "{} (os error {})", msg.to_string_lossy(), self.0)
    }
}

impl fmt::Debug for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(self, f)
    }
}

pub type Result<T> = core::result::Result<T, Error>;

/// A path for a call: refused with EINVAL if it holds a NUL byte, as `std` refuses it.
fn c_path(path: &str) -> Result<CString> {
    CString::new(path).map_err(|_| Error(libc::EINVAL))
}

/// Retries a call interrupted by a signal (the agent's SIGINT/SIGTERM handlers only note
/// the signal), as `std` retries `read` and `write`.
fn retry(mut f: impl FnMut() -> isize) -> Result<usize> {
    loop {
        let n = f();
        if n >= 0 {
            return Ok(n as usize);
        }
        let e = Error::last_os_error();
        if e.0 != libc::EINTR {
            return Err(e);
        }
    }
}

/// An open file descriptor, closed when dropped.
pub struct File {
    fd: i32,
}

impl File {
    fn open_with(path: &str, flags: i32) -> Result<File> {
        let c = c_path(path)?;
        // SAFETY: a NUL-terminated path; the mode is read only with O_CREAT.
        let fd =
            retry(|| unsafe { libc::open(c.as_ptr(), flags | libc::O_CLOEXEC, 0o600) } as isize)?;
        Ok(File { fd: fd as i32 })
    }

    /// A new file at `path` (a temporary: `FILE.part`, `STATUS.tmp`), write-only, created
    /// 0600 with `O_EXCL|O_NOFOLLOW`: whatever the name holds already (a killed run's file,
    /// or a link or FIFO another user planted) is removed first, never opened, so nothing
    /// is written through a link or into a file someone else made (a name planted again
    /// in between is refused: EEXIST).
    pub fn create_new(path: &str) -> Result<File> {
        match remove_file(path) {
            Err(e) if e.0 != libc::ENOENT => return Err(e),
            _ => {}
        }
        File::open_with(
            path,
            libc::O_WRONLY | libc::O_CREAT | libc::O_EXCL | libc::O_NOFOLLOW,
        )
    }

    /// The descriptor `fd` (standard output, `/dev/fd/N`) written through a copy of it:
    /// its open file's offset and append mode are the ones used, nothing reopened.
    pub fn dup(fd: i32) -> Result<File> {
        // SAFETY: F_DUPFD_CLOEXEC makes a new descriptor or fails.
        let fd = retry(|| unsafe { libc::fcntl(fd, libc::F_DUPFD_CLOEXEC, 3) } as isize)?;
        Ok(File { fd: fd as i32 })
    }

    /// Before this new file replaces `target`: the mode of `target` when it is a regular
    /// file this user owns (else the file stays 0600, perf's mode for a recording).
    pub fn keep_mode_of(&self, target: &str) {
        let Ok(c) = c_path(target) else { return };
        // SAFETY: lstat fills a plain-data struct; fchmod of our own descriptor.
        unsafe {
            let mut st: libc::stat = core::mem::zeroed();
            if libc::lstat(c.as_ptr(), &mut st) == 0
                && st.st_mode & libc::S_IFMT == libc::S_IFREG
                && st.st_uid == libc::geteuid()
            {
                libc::fchmod(self.fd, st.st_mode & 0o777);
            }
        }
    }

    pub fn open(path: &str) -> Result<File> {
        File::open_with(path, libc::O_RDONLY)
    }

    /// An existing device or FIFO opened for writing (nothing created or truncated); a
    /// regular file there now (it changed since it was looked at) is refused. A FIFO with
    /// no reader blocks the open: SIGINT or SIGTERM ([`SIGNALLED`]) ends
    /// the wait (EINTR) instead of the open starting again, so Ctrl-C ends such a run.
    pub fn open_stream(path: &str) -> Result<File> {
        use core::sync::atomic::Ordering;
        let c = c_path(path)?;
        let fd = loop {
            if SIGNALLED.load(Ordering::SeqCst) != 0 {
                return Err(Error(libc::EINTR));
            }
            // SAFETY: a NUL-terminated path; no O_CREAT.
            let fd = unsafe {
                libc::open(
                    c.as_ptr(),
                    libc::O_WRONLY | libc::O_NOCTTY | libc::O_CLOEXEC,
                )
            };
            if fd >= 0 {
                break fd;
            }
            let e = Error::last_os_error();
            if e.0 != libc::EINTR {
                return Err(e);
            }
        };
        let f = File { fd };
        // SAFETY: fstat of our own descriptor into a plain-data struct.
        let t = unsafe {
            let mut st: libc::stat = core::mem::zeroed();
            libc::fstat(f.fd, &mut st);
            st.st_mode & libc::S_IFMT
        };
        match t {
            libc::S_IFCHR | libc::S_IFBLK | libc::S_IFIFO => Ok(f),
            _ => Err(Error(libc::EINVAL)),
        }
    }

    pub fn write_all(&mut self, mut b: &[u8]) -> Result<()> {
        write_fd(self.fd, &mut b)
    }

    pub fn sync_all(&self) -> Result<()> {
        // SAFETY: fsync of our own descriptor.
        retry(|| unsafe { libc::fsync(self.fd) } as isize).map(drop)
    }

    /// Everything left to read, appended to `out`.
    pub fn read_to_end(&mut self, out: &mut Vec<u8>) -> Result<()> {
        loop {
            if out.capacity() - out.len() < 4096 {
                out.reserve(out.len().max(4096));
            }
            let spare = out.spare_capacity_mut();
            // SAFETY: reading into the vector's spare capacity, then counting what came.
            let n =
                retry(|| unsafe { libc::read(self.fd, spare.as_mut_ptr().cast(), spare.len()) })?;
            if n == 0 {
                return Ok(());
            }
            // SAFETY: read initialised n more bytes.
            unsafe { out.set_len(out.len() + n) };
        }
    }
}

impl Drop for File {
    fn drop(&mut self) {
        // SAFETY: closing the descriptor this File owns, once.
        unsafe { libc::close(self.fd) };
    }
}

/// Writes all of `b` to `fd`, retried after EINTR and short writes.
fn write_fd(fd: i32, b: &mut &[u8]) -> Result<()> {
    while !b.is_empty() {
        // SAFETY: writing from a live slice.
        let n = retry(|| unsafe { libc::write(fd, b.as_ptr().cast(), b.len()) })?;
        if n == 0 {
            return Err(Error(libc::EIO));
        }
        *b = &b[n..];
    }
    Ok(())
}

/// `std::fs::read`.
pub fn read(path: impl AsRef<str>) -> Result<Vec<u8>> {
    let mut v = Vec::new();
    File::open(path.as_ref())?.read_to_end(&mut v)?;
    Ok(v)
}

/// `std::fs::read_to_string`: a file that is not UTF-8 is an error, worded as `std`'s.
pub fn read_to_string(path: impl AsRef<str>) -> Result<String> {
    String::from_utf8(read(path)?).map_err(|_| NOT_UTF8)
}

/// A file as text, each byte that is not UTF-8 as U+FFFD: the /proc files that hold
/// names a process chose (its comm in `stat`, `status` and `comm`, the paths in `maps`),
/// which are bytes.
pub fn read_lossy(path: impl AsRef<str>) -> Result<String> {
    let b = read(path)?;
    Ok(match String::from_utf8(b) {
        Ok(s) => s,
        Err(e) => String::from_utf8_lossy(e.as_bytes()).into_owned(),
    })
}

/// What `std` does before `main` on Linux: each of standard input, output and error that
/// is closed is opened on /dev/null, so that no file the agent opens later (its record
/// file, a perf event) takes descriptor 0, 1 or 2 and receives its messages.
#[cfg_attr(not(all(not(test), panic = "abort")), allow(dead_code))]
pub fn open_standard_fds() {
    for fd in 0..3 {
        // SAFETY: F_GETFD on a descriptor number; open of a NUL-terminated path.
        unsafe {
            if libc::fcntl(fd, libc::F_GETFD) == -1
                && *libc::__errno_location() == libc::EBADF
                && libc::open(c"/dev/null".as_ptr(), libc::O_RDWR) == -1
            {
                libc::_exit(125);
            }
        }
    }
}

pub fn rename(from: impl AsRef<str>, to: impl AsRef<str>) -> Result<()> {
    let (a, b) = (c_path(from.as_ref())?, c_path(to.as_ref())?);
    // SAFETY: two NUL-terminated paths.
    retry(|| unsafe { libc::rename(a.as_ptr(), b.as_ptr()) } as isize).map(drop)
}

pub fn remove_file(path: impl AsRef<str>) -> Result<()> {
    let c = c_path(path.as_ref())?;
    // SAFETY: a NUL-terminated path.
    retry(|| unsafe { libc::unlink(c.as_ptr()) } as isize).map(drop)
}

/// The names in a directory (not `.` and `..`), as text (lossy).
pub fn read_dir(path: impl AsRef<str>) -> Result<Vec<String>> {
    let c = c_path(path.as_ref())?;
    // SAFETY: a NUL-terminated path; the stream is read until NULL and closed.
    unsafe {
        let d = libc::opendir(c.as_ptr());
        if d.is_null() {
            return Err(Error::last_os_error());
        }
        let mut names = Vec::new();
        loop {
            let e = libc::readdir(d);
            if e.is_null() {
                break;
            }
            let name = core::ffi::CStr::from_ptr((*e).d_name.as_ptr()).to_bytes();
            if name != b"." && name != b".." {
                names.push(String::from_utf8_lossy(name).into_owned());
            }
        }
        libc::closedir(d);
        Ok(names)
    }
}

/// The type of what `path` names, links followed (`None`: nothing there).
fn file_type(path: &str) -> Option<u32> {
    let c = c_path(path).ok()?;
    // SAFETY: stat fills the plain-data struct for a NUL-terminated path.
    unsafe {
        let mut st: libc::stat = core::mem::zeroed();
        (libc::stat(c.as_ptr(), &mut st) == 0).then_some(st.st_mode & libc::S_IFMT)
    }
}

/// `Path::is_dir`.
pub fn is_dir(path: &str) -> bool {
    file_type(path) == Some(libc::S_IFDIR)
}

/// `Path::is_file`.
pub fn is_file(path: &str) -> bool {
    file_type(path) == Some(libc::S_IFREG)
}

/// The last SIGINT/SIGTERM received (0 if none); `workload.rs` routes the signals here.
pub static SIGNALLED: core::sync::atomic::AtomicI32 = core::sync::atomic::AtomicI32::new(0);

/// A clock's value in ns.
pub fn clock_ns(clock: libc::clockid_t) -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: valid timespec pointer.
    unsafe { libc::clock_gettime(clock, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

/// A monotonic clock reading (`std::time::Instant`).
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Debug)]
pub struct Instant(Duration);

impl Instant {
    pub fn now() -> Instant {
        let ns = clock_ns(libc::CLOCK_MONOTONIC);
        Instant(Duration::from_nanos(ns))
    }

    pub fn elapsed(&self) -> Duration {
        Instant::now().saturating_duration_since(*self)
    }

    pub fn saturating_duration_since(&self, earlier: Instant) -> Duration {
        self.0.saturating_sub(earlier.0)
    }
}

impl core::ops::Add<Duration> for Instant {
    type Output = Instant;
    fn add(self, d: Duration) -> Instant {
        Instant(self.0 + d)
    }
}

/// A command-line argument or environment value: bytes, not necessarily UTF-8
/// (`std::ffi::OsString` on Unix).
#[derive(Clone, PartialEq, Eq, Default)]
pub struct OsString(Vec<u8>);

impl OsString {
    #[cfg(any(test, not(panic = "abort")))]
    pub fn from_vec(v: Vec<u8>) -> OsString {
        OsString(v)
    }

    pub fn as_bytes(&self) -> &[u8] {
        &self.0
    }

    pub fn to_str(&self) -> Option<&str> {
        core::str::from_utf8(&self.0).ok()
    }

    pub fn to_string_lossy(&self) -> Cow<'_, str> {
        String::from_utf8_lossy(&self.0)
    }
}

impl From<&str> for OsString {
    fn from(s: &str) -> OsString {
        OsString(s.into())
    }
}

impl PartialEq<str> for OsString {
    fn eq(&self, s: &str) -> bool {
        self.0 == s.as_bytes()
    }
}

impl PartialEq<&str> for OsString {
    fn eq(&self, s: &&str) -> bool {
        self.0 == s.as_bytes()
    }
}

/// As `std` shows an `OsStr`: quoted, valid text escaped as `str`'s Debug, each byte
/// that is not UTF-8 as `\xNN`.
impl fmt::Debug for OsString {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("\"")?;
        for chunk in self.0.utf8_chunks() {
            for c in chunk.valid().chars().flat_map(char::escape_debug) {
                fmt::Write::write_char(f, c)?;
            }
            for b in chunk.invalid() {
                write!(f, "\\x{b:02X}")?;
            }
        }
        f.write_str("\"")
    }
}

/// `std::env::args_os` from `main`'s argc and argv: the program's arguments, its name first.
///
/// # Safety
/// `argv` holds `argc` NUL-terminated strings (as the C runtime gives `main`).
#[cfg_attr(not(all(not(test), panic = "abort")), allow(dead_code))]
pub unsafe fn args_os(argc: i32, argv: *const *const libc::c_char) -> Vec<OsString> {
    (0..argc.max(0) as usize)
        .map(|i| OsString(core::ffi::CStr::from_ptr(*argv.add(i)).to_bytes().to_vec()))
        .collect()
}

/// `std::env::var_os`.
pub fn var_os(name: &str) -> Option<OsString> {
    let c = c_path(name).ok()?;
    // SAFETY: getenv with a NUL-terminated name; the value is copied at once (the agent
    // never sets variables).
    unsafe {
        let v = libc::getenv(c.as_ptr());
        (!v.is_null()).then(|| OsString(core::ffi::CStr::from_ptr(v).to_bytes().to_vec()))
    }
}

/// The first error of a write of the agent's own output (standard output or error), 0 if
/// none: [`exit`] turns a success into a failure with it.
static OUTPUT_ERROR: core::sync::atomic::AtomicI32 = core::sync::atomic::AtomicI32::new(0);

/// `std::process::exit` (libc's `exit`: the agent keeps no buffered output), except that a
/// run whose own output could not be written does not end in success, as coreutils do not:
/// into a closed pipe it ends by SIGPIPE, quietly (the shell's 141, as `labperf` and perf
/// end: SIGPIPE is ignored while the agent runs, see `main`); otherwise (a full disk) with
/// 125, the agent's failure, saying so. A failing workload's status or the agent's own
/// failure stays what it was.
pub fn exit(code: i32) -> ! {
    let e = OUTPUT_ERROR.load(core::sync::atomic::Ordering::Relaxed);
    let code = match e {
        0 => code,
        _ if code != 0 => code,
        libc::EPIPE => {
            // SAFETY: restoring the default action of SIGPIPE, then raising it here.
            unsafe {
                libc::signal(libc::SIGPIPE, libc::SIG_DFL);
                libc::raise(libc::SIGPIPE);
            }
            128 + libc::SIGPIPE
        }
        _ => {
            print(
                2,
                format_args!(
                    "labperf-agent: error: cannot write its output: {}\n",
                    Error(e)
                ),
            );
            125
        }
    };
    // SAFETY: ends the process.
    unsafe { libc::exit(code) }
}

/// `print!` and `eprint!`: the text written at once. A write that fails is noted for
/// [`exit`] and the run goes on (a recording is not cut short for a message).
pub fn print(fd: i32, args: fmt::Arguments<'_>) {
    let s;
    let mut b: &[u8] = match args.as_str() {
        Some(t) => t.as_bytes(),
        None => {
            s = alloc::fmt::format(args);
            s.as_bytes()
        }
    };
    if let Err(e) = write_fd(fd, &mut b) {
        let _ = OUTPUT_ERROR.compare_exchange(
            0,
            e.0,
            core::sync::atomic::Ordering::Relaxed,
            core::sync::atomic::Ordering::Relaxed,
        );
    }
}

/// The agent's panic: `labperf-agent: panicked at FILE:LINE:COL:` and the message on
/// stderr, written without allocating (the panic may be an allocation's failure), then
/// exit status 125, the agent's own failure.
#[cfg_attr(test, allow(dead_code))]
pub fn panicked(info: &dyn fmt::Display) -> ! {
    let mut w = StackWriter::new();
    let _ = fmt::Write::write_fmt(&mut w, format_args!("labperf-agent: {info}\n"));
    w.flush_to(2);
    // SAFETY: ends the process at once, running nothing else.
    unsafe { libc::_exit(125) }
}

/// Text to stderr without allocating (the panic handler's), cut at the buffer's end.
#[cfg_attr(test, allow(dead_code))]
pub struct StackWriter {
    buf: [u8; 512],
    len: usize,
}

#[cfg_attr(test, allow(dead_code))]
impl StackWriter {
    pub const fn new() -> StackWriter {
        StackWriter {
            buf: [0; 512],
            len: 0,
        }
    }

    pub fn flush_to(&self, fd: i32) {
        let _ = write_fd(fd, &mut &self.buf[..self.len]);
    }
}

impl fmt::Write for StackWriter {
    fn write_str(&mut self, s: &str) -> fmt::Result {
        let n = s.len().min(self.buf.len() - self.len);
        self.buf[self.len..self.len + n].copy_from_slice(&s.as_bytes()[..n]);
        self.len += n;
        Ok(())
    }
}

/// The global allocator: libc's malloc, as `std`'s `System` allocator is on Linux.
pub struct Malloc;

/// malloc's alignment on the agent's targets (x86_64 and aarch64 musl: 16).
const MIN_ALIGN: usize = 16;

// SAFETY: malloc/free/realloc/posix_memalign honour the layouts as `std`'s System does.
unsafe impl core::alloc::GlobalAlloc for Malloc {
    unsafe fn alloc(&self, l: core::alloc::Layout) -> *mut u8 {
        if l.align() <= MIN_ALIGN && l.align() <= l.size() {
            libc::malloc(l.size()).cast()
        } else {
            let mut p = core::ptr::null_mut();
            let align = l.align().max(core::mem::size_of::<usize>());
            if libc::posix_memalign(&mut p, align, l.size()) != 0 {
                return core::ptr::null_mut();
            }
            p.cast()
        }
    }

    unsafe fn alloc_zeroed(&self, l: core::alloc::Layout) -> *mut u8 {
        if l.align() <= MIN_ALIGN && l.align() <= l.size() {
            libc::calloc(l.size(), 1).cast()
        } else {
            let p = self.alloc(l);
            if !p.is_null() {
                core::ptr::write_bytes(p, 0, l.size());
            }
            p
        }
    }

    unsafe fn dealloc(&self, p: *mut u8, _: core::alloc::Layout) {
        libc::free(p.cast())
    }

    unsafe fn realloc(&self, p: *mut u8, l: core::alloc::Layout, size: usize) -> *mut u8 {
        if l.align() <= MIN_ALIGN && l.align() <= size {
            libc::realloc(p.cast(), size).cast()
        } else {
            let new = self.alloc(core::alloc::Layout::from_size_align_unchecked(
                size,
                l.align(),
            ));
            if !new.is_null() {
                core::ptr::copy_nonoverlapping(p, new, l.size().min(size));
                self.dealloc(p, l);
            }
            new
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use alloc::format;
    use alloc::string::ToString;

    #[test]
    fn errors_read_as_std_s() {
        assert_eq!(
            Error::from_raw_os_error(libc::ENOENT).to_string(),
            std::io::Error::from_raw_os_error(libc::ENOENT).to_string()
        );
        assert_eq!(
            read_to_string("/nonexistent/x").unwrap_err().to_string(),
            std::fs::read_to_string("/nonexistent/x")
                .unwrap_err()
                .to_string()
        );
    }

    #[test]
    fn files_round_trip_and_directories_list() {
        let d = std::env::temp_dir().join(format!("labperf-agent-rt-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(&d).unwrap();
        let p = |s: &str| d.join(s).to_str().unwrap().to_string();
        // Larger than one read, so read_to_end loops.
        let big: Vec<u8> = (0..100_000u32).map(|i| i as u8).collect();
        File::create_new(&p("a")).unwrap().write_all(&big).unwrap();
        assert_eq!(read(p("a")).unwrap(), big);
        // Created 0600, and only new: a link there is removed, never written through.
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(p("a")).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o600);
        std::fs::write(d.join("target"), "kept").unwrap();
        std::os::unix::fs::symlink(d.join("target"), d.join("l")).unwrap();
        File::create_new(&p("l"))
            .unwrap()
            .write_all(b"new")
            .unwrap();
        assert_eq!(std::fs::read(d.join("target")).unwrap(), b"kept");
        assert_eq!(std::fs::read(d.join("l")).unwrap(), b"new");
        std::fs::remove_file(d.join("target")).unwrap();
        std::fs::remove_file(d.join("l")).unwrap();
        rename(p("a"), p("b")).unwrap();
        assert_eq!(read_dir(d.to_str().unwrap()).unwrap(), ["b"]);
        std::fs::write(d.join("t"), b"x\xffy").unwrap();
        assert_eq!(
            read_to_string(p("t")).unwrap_err().to_string(),
            std::fs::read_to_string(d.join("t"))
                .unwrap_err()
                .to_string()
        );
        assert_eq!(read_lossy(p("t")).unwrap(), "x\u{fffd}y");
        remove_file(p("b")).unwrap();
        assert_eq!(
            remove_file(p("b")).unwrap_err().raw_os_error(),
            Some(libc::ENOENT)
        );
        assert_eq!(read("a\0b").unwrap_err().raw_os_error(), Some(libc::EINVAL));
        std::fs::remove_dir_all(&d).unwrap();
    }

    #[test]
    fn os_strings_show_as_std_s() {
        let v = [b'x', 0xff, b'"', b'y'];
        let std_s = <std::ffi::OsStr as std::os::unix::ffi::OsStrExt>::from_bytes(&v);
        assert_eq!(
            format!("{:?}", OsString::from_vec(v.to_vec())),
            format!("{std_s:?}")
        );
        assert_eq!(
            OsString::from_vec(v.to_vec()).to_string_lossy(),
            std_s.to_string_lossy()
        );
    }

    #[test]
    fn instants_move_forward() {
        let t = Instant::now();
        std::thread::sleep(std::time::Duration::from_millis(2));
        assert!(t.elapsed() >= Duration::from_millis(2));
        assert_eq!(t.saturating_duration_since(Instant::now()), Duration::ZERO);
    }
}
