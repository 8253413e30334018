//! Where a file the agent writes goes (the record file, `stat -o`, `--status-file`), the
//! host's rule (`host/src/output.rs`): a character or block device or a FIFO is written
//! straight through (never created, truncated, renamed over or removed); a regular file, or
//! a name not there yet, is replaced through a temporary beside it, renamed when complete; a
//! symbolic link is followed to what it names (a link to a device is a device, a link to a
//! regular file stays and the file it names is replaced); anything else (a directory, a
//! socket, a link to nothing, a link another user owns) is refused. `/dev/stdout`,
//! `/dev/stderr`, `/dev/fd/N` and `/proc/self/fd/N` are written through that descriptor (its
//! offset and append mode kept; the file behind it never replaced). A device or FIFO is
//! opened without creating anything; a temporary is always a new file, 0600 (`rt.rs`).

use crate::prelude::*;

/// Longest path handled (PATH_MAX).
const MAX: usize = 4096;

/// `stat` of `path` (0), its symbolic link's target read into `out` (1), or its canonical
/// path, links resolved, into `out` (2): (file type, length written), or the errno. Plain
/// libc calls (the agent links them anyway) on stack buffers keep the agent within its
/// size budget.
fn sys(path: &str, call: u8, out: &mut [u8; MAX]) -> Result<(u32, usize), i32> {
    let mut c = [0u8; MAX + 1];
    // A path from the command line holds no NUL.
    if path.len() >= MAX {
        return Err(libc::ENAMETOOLONG);
    }
    c[..path.len()].copy_from_slice(path.as_bytes());
    let (c, o) = (c.as_ptr().cast(), out.as_mut_ptr().cast());
    // SAFETY: a NUL-terminated path, and buffers of the sizes the calls expect.
    unsafe {
        let mut st: libc::stat = core::mem::zeroed();
        let n = match call {
            0 => libc::stat(c, &mut st) as isize,
            1 => libc::readlink(c, o, MAX - 1),
            _ => -(libc::realpath(c, o).is_null() as isize),
        };
        if n < 0 {
            return Err(*libc::__errno_location());
        }
        Ok((st.st_mode & libc::S_IFMT, n as usize))
    }
}

/// Why the file type `t` cannot be written; `None` when it can.
fn refused(t: u32) -> Option<&'static str> {
    match t {
        libc::S_IFREG | libc::S_IFCHR | libc::S_IFBLK | libc::S_IFIFO => None,
        libc::S_IFDIR => Some("it is a directory: name a file, a device or a FIFO"),
        libc::S_IFSOCK => Some("it is a socket: name a file, a device or a FIFO"),
        _ => Some("it is not a file, a device or a FIFO"),
    }
}

/// The descriptor `path` names (`/dev/stdout`, `/dev/stderr`, `/dev/fd/N`,
/// `/proc/self/fd/N`), written through as it is.
pub fn descriptor(path: &str) -> Option<i32> {
    let n = match path {
        "/dev/stdout" => return Some(1),
        "/dev/stderr" => return Some(2),
        _ => path
            .strip_prefix("/dev/fd/")
            .or_else(|| path.strip_prefix("/proc/self/fd/"))?,
    };
    n.parse()
        .ok()
        .filter(|_| n.bytes().all(|b| b.is_ascii_digit()))
}

/// Opens `path` for `what` by the rule above: (the file, the name written, and the file it
/// is renamed to once complete: `None` for a device, a FIFO or a descriptor).
pub fn open(
    path: &str,
    suffix: &str,
    what: &str,
) -> Result<(crate::rt::File, String, Option<String>), (crate::rt::Error, String)> {
    use crate::rt::{Error, File};
    let fail = |e: Error, at: &str| (e, format!("cannot write {what} '{at}': {e}"));
    if let Some(fd) = descriptor(path) {
        return Ok((File::dup(fd).map_err(|e| fail(e, path))?, path.into(), None));
    }
    let (at, then) = resolve(path, suffix, what).map_err(|m| (Error::from_raw_os_error(0), m))?;
    let f = match then {
        Some(_) => File::create_new(&at),
        None => File::open_stream(&at),
    };
    Ok((f.map_err(|e| fail(e, &at))?, at, then))
}

/// Resolves `path` by the rule above: (the path to write, and the file to rename it to
/// once complete). A device or FIFO is written as it is (no rename); a regular file or a
/// new name, links resolved, is written as that name plus `suffix`, then renamed. The
/// error says why `what` cannot be written there.
pub fn resolve(path: &str, suffix: &str, what: &str) -> Result<(String, Option<String>), String> {
    let why = match walk(path) {
        Ok(None) => return Ok((path.into(), None)),
        Ok(Some(file)) => return Ok((format!("{file}{suffix}"), Some(file))),
        Err(Ok(t)) => t,
        Err(Err(e)) => crate::rt::Error::from_raw_os_error(e).to_string().into(),
    };
    Err(format!("cannot write {what} '{path}': {why}"))
}

/// The regular file `path` names (its canonical path: links resolved; a new name as it
/// is), or `None` for a device or FIFO. The error is a refusal's reason or an errno.
fn walk(path: &str) -> Result<Option<String>, Result<alloc::borrow::Cow<'static, str>, i32>> {
    let mut buf = [0u8; MAX];
    if path == "-" {
        return Err(Ok(
            "standard output is the workload's: name a file, a device or a FIFO".into(),
        ));
    }
    if let Some(link) = planted(path) {
        return Err(Ok(planted_why(&link).into()));
    }
    match sys(path, 0, &mut buf) {
        Ok((t, _)) => {
            if let Some(what) = refused(t) {
                return Err(Ok(what.into()));
            }
            if t == libc::S_IFIFO && planted_fifo(path) {
                return Err(Ok(PLANTED_FIFO.into()));
            }
            if t != libc::S_IFREG {
                return Ok(None);
            }
            // A /proc fd link to a deleted file has no canonical path: an error here.
            sys(path, 2, &mut buf).map_err(Err)?;
            let n = buf.iter().position(|&b| b == 0).unwrap_or(0);
            Ok(Some(String::from_utf8_lossy(&buf[..n]).into_owned()))
        }
        Err(libc::ENOENT) if sys(path, 1, &mut buf).is_ok() => Err(Ok(DANGLING.into())),
        Err(libc::ENOENT) => Ok(Some(path.into())),
        Err(e) => Err(Err(e)),
    }
}

/// `lstat` of `path` (a NUL-free string): (file type, owner), or `None`.
fn lstat(path: &str) -> Option<(u32, u32)> {
    let c = alloc::ffi::CString::new(path).ok()?;
    // SAFETY: lstat into a plain-data struct, on a NUL-terminated path.
    unsafe {
        let mut st: libc::stat = core::mem::zeroed();
        (libc::lstat(c.as_ptr(), &mut st) == 0).then_some((st.st_mode, st.st_uid))
    }
}

/// Whether `uid` is neither this user nor root.
fn another_users(uid: u32) -> bool {
    // SAFETY: geteuid cannot fail.
    uid != 0 && uid != unsafe { libc::geteuid() }
}

/// Whether a symbolic link on the way to what `path` names (the name itself, or a directory
/// above it: `pub/d -> /victim` in `-o pub/d/x`), links followed as the kernel follows them,
/// is owned by neither this user nor root (a link another user planted could point anywhere):
/// that link's path.
fn planted(path: &str) -> Option<String> {
    let mut abs = path.starts_with('/');
    // The walked part (no links in it), and what is left, the next component last.
    let mut done: Vec<String> = Vec::new();
    let mut todo: Vec<String> = path.rsplit('/').map(String::from).collect();
    let mut links = 0;
    while let Some(c) = todo.pop() {
        match c.as_str() {
            "" | "." => {}
            ".." if done.last().is_some_and(|d| d != "..") => drop(done.pop()),
            ".." if abs => {}
            _ => {
                let mut at = String::from(if abs { "/" } else { "" });
                for p in done.iter().chain([&c]) {
                    at.push_str(p);
                    at.push('/');
                }
                at.pop();
                let (mode, uid) = lstat(&at)?;
                if mode & libc::S_IFMT != libc::S_IFLNK {
                    done.push(c);
                    continue;
                }
                if another_users(uid) {
                    return Some(at);
                }
                links += 1;
                let mut buf = [0u8; MAX];
                let cs = alloc::ffi::CString::new(at).ok()?;
                // SAFETY: readlink into a buffer of MAX bytes, on a NUL-terminated path.
                let n = unsafe { libc::readlink(cs.as_ptr(), buf.as_mut_ptr().cast(), MAX - 1) };
                let target = usize::try_from(n)
                    .ok()
                    .filter(|_| links <= 40)
                    .and_then(|n| core::str::from_utf8(&buf[..n]).ok())?;
                if target.starts_with('/') {
                    abs = true;
                    done.clear();
                }
                todo.extend(target.rsplit('/').map(String::from));
            }
        }
    }
    None
}

/// Whether `path`, a FIFO, is another user's in a sticky directory (/tmp): the kernel's
/// protected_fifos=1 refuses it to an O_CREAT open; where it is 0 the owner reads what is
/// written, or blocks the writer for ever.
fn planted_fifo(path: &str) -> bool {
    let mut buf = [0u8; MAX];
    let Ok(_) = sys(path, 2, &mut buf) else {
        return false;
    };
    let n = buf.iter().position(|&b| b == 0).unwrap_or(0);
    let real = String::from_utf8_lossy(&buf[..n]).into_owned();
    let dir = match real.rfind('/') {
        Some(0) => "/",
        Some(i) => &real[..i],
        None => ".",
    };
    matches!(lstat(&real), Some((m, uid)) if m & libc::S_IFMT == libc::S_IFIFO && another_users(uid))
        && lstat(dir).is_some_and(|(m, _)| m & libc::S_ISVTX != 0)
}

/// Why another user's FIFO in a sticky directory is refused.
const PLANTED_FIFO: &str =
    "it is a FIFO another user owns in a shared (sticky) directory: remove it or name another file";

/// Why a link another user owns, `link` (the output's or a directory's on its way), is refused.
fn planted_why(link: &str) -> String {
    format!("'{link}' is a symbolic link another user owns (it could point anywhere): name the file itself")
}

/// Why a link to nothing is refused (a planted link would make a file where it points).
const DANGLING: &str = "it is a symbolic link to nothing: name the file itself";

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn resolves_as_the_host_does() {
        let d = std::env::temp_dir().join(format!("labperf-agent-dest-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(d.join("sub")).unwrap();
        let p = |s: &str| d.join(s).to_str().unwrap().to_string();
        let file = |f: &str| Ok((p(f) + ".part", Some(p(f))));
        assert_eq!(resolve(&p("new"), ".part", ""), file("new"));
        std::fs::write(d.join("sub/real"), "x").unwrap();
        std::os::unix::fs::symlink("sub/real", d.join("link")).unwrap();
        assert_eq!(resolve(&p("link"), ".part", ""), file("sub/real"));
        std::os::unix::fs::symlink("link", d.join("link2")).unwrap();
        assert_eq!(resolve(&p("link2"), ".part", ""), file("sub/real"));
        std::os::unix::fs::symlink("sub/none", d.join("dangling")).unwrap();
        assert_eq!(
            resolve(&p("dangling"), ".part", "x"),
            Err(format!("cannot write x '{}': {DANGLING}", p("dangling")))
        );
        assert!(resolve(&p("sub"), "", "")
            .unwrap_err()
            .contains("is a directory"));
        assert!(resolve("-", "", "").is_err());
        // A link another user owns (the tests run as root) is refused, also at the end of
        // a chain; root's own links are followed.
        std::os::unix::fs::symlink("sub/real", d.join("theirs")).unwrap();
        std::os::unix::fs::lchown(d.join("theirs"), Some(65534), Some(65534)).unwrap();
        std::os::unix::fs::symlink("theirs", d.join("mine")).unwrap();
        for l in ["theirs", "mine"] {
            assert_eq!(
                resolve(&p(l), ".part", "x"),
                Err(format!(
                    "cannot write x '{}': {}",
                    p(l),
                    planted_why(&p("theirs"))
                ))
            );
        }
        assert_eq!(
            (descriptor("/dev/stdout"), descriptor("/dev/stderr")),
            (Some(1), Some(2))
        );
        assert_eq!(
            (descriptor("/dev/fd/7"), descriptor("/proc/self/fd/12")),
            (Some(7), Some(12))
        );
        assert_eq!(
            (descriptor("/dev/fd/+7"), descriptor("/dev/fd")),
            (None, None)
        );
        std::fs::remove_dir_all(&d).unwrap();
    }
}
