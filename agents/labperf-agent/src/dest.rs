//! Where a file the agent writes goes (the record file, `stat -o`, `--status-file`), the
//! host's rule (`host/src/output.rs`): a character or block device or a FIFO is written
//! straight through (never created, truncated, renamed over or removed); a regular file, or
//! a name not there yet, is replaced through a temporary beside it, renamed when complete; a
//! symbolic link is followed to what it names (a link to a device is a device, a link to a
//! regular file stays and the file it names is replaced); anything else (a directory, a
//! socket, a link to nothing) is refused. A device or FIFO is opened as a file is created:
//! the kernel ignores O_CREAT and O_TRUNC there.

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

/// Resolves `path` by the rule above: (the path to write, and the file to rename it to
/// once complete). A device or FIFO is written as it is (no rename); a regular file or a
/// new name, links resolved, is written as that name plus `suffix`, then renamed. The
/// error says why `what` cannot be written there.
pub fn resolve(path: &str, suffix: &str, what: &str) -> Result<(String, Option<String>), String> {
    let why = match walk(path) {
        Ok(None) => return Ok((path.into(), None)),
        Ok(Some(file)) => return Ok((format!("{file}{suffix}"), Some(file))),
        Err(Ok(t)) => alloc::borrow::Cow::Borrowed(t),
        Err(Err(e)) => crate::rt::Error::from_raw_os_error(e).to_string().into(),
    };
    Err(format!("cannot write {what} '{path}': {why}"))
}

/// The regular file `path` names (its canonical path: links resolved; a new name as it
/// is), or `None` for a device or FIFO. The error is a refusal's reason or an errno.
fn walk(path: &str) -> Result<Option<String>, Result<&'static str, i32>> {
    let mut buf = [0u8; MAX];
    if path == "-" {
        return Err(Ok(
            "standard output is the workload's: name a file, a device or a FIFO",
        ));
    }
    match sys(path, 0, &mut buf) {
        Ok((t, _)) => {
            if let Some(what) = refused(t) {
                return Err(Ok(what));
            }
            if t != libc::S_IFREG {
                return Ok(None);
            }
            // A /proc fd link to a deleted file has no canonical path: an error here.
            sys(path, 2, &mut buf).map_err(Err)?;
            let n = buf.iter().position(|&b| b == 0).unwrap_or(0);
            Ok(Some(String::from_utf8_lossy(&buf[..n]).into_owned()))
        }
        Err(libc::ENOENT) if sys(path, 1, &mut buf).is_ok() => Err(Ok(DANGLING)),
        Err(libc::ENOENT) => Ok(Some(path.into())),
        Err(e) => Err(Err(e)),
    }
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
        std::fs::remove_dir_all(&d).unwrap();
    }
}
