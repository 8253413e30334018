//! A private scratch directory of this process (mode 0700, a fresh name in the temporary
//! directory), for the files a local run passes between labperf and the agent (the status
//! file, `stat`'s counts): no other user can plant a link or a FIFO there, nor read it.

use std::path::{Path, PathBuf};

/// A directory made 0700 by this process, removed with what it holds when dropped.
pub struct PrivateDir {
    path: PathBuf,
}

impl PrivateDir {
    /// Makes `$TMPDIR/labperf-<pid>-<n>-<ns>` with mode 0700; a name already there (made
    /// by someone else) is never used: another name is tried.
    pub fn new() -> std::io::Result<PrivateDir> {
        use std::os::unix::fs::DirBuilderExt;
        static N: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
        let base = std::env::temp_dir();
        let mut last = None;
        for _ in 0..16 {
            let nanos = std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |d| d.as_nanos());
            let path = base.join(format!(
                "labperf-{}-{}-{nanos}",
                std::process::id(),
                N.fetch_add(1, std::sync::atomic::Ordering::Relaxed)
            ));
            // mkdir makes a new directory or fails: never one planted before.
            match std::fs::DirBuilder::new().mode(0o700).create(&path) {
                Ok(()) => return Ok(PrivateDir { path }),
                Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => last = Some(e),
                Err(e) => return Err(e),
            }
        }
        Err(last.unwrap_or_else(|| std::io::Error::other("no free name")))
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// A name in the directory.
    pub fn join(&self, name: &str) -> PathBuf {
        self.path.join(name)
    }
}

impl Drop for PrivateDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.path);
    }
}

/// Reads a small regular file (a status line) without following a link or waiting on a
/// FIFO: anything but a regular file reads as nothing.
pub fn read_regular(path: &Path, max: u64) -> String {
    use std::io::Read;
    use std::os::unix::fs::OpenOptionsExt;
    let Ok(f) = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK)
        .open(path)
    else {
        return String::new();
    };
    if !f.metadata().is_ok_and(|m| m.is_file()) {
        return String::new();
    }
    let mut s = String::new();
    let _ = f.take(max).read_to_string(&mut s);
    s
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    #[test]
    fn a_private_directory_is_0700_new_and_removed() {
        let d = PrivateDir::new().unwrap();
        let m = std::fs::symlink_metadata(d.path()).unwrap();
        assert!(m.is_dir());
        assert_eq!(m.permissions().mode() & 0o777, 0o700);
        std::fs::write(d.join("status"), "ok 0\n").unwrap();
        assert_eq!(read_regular(&d.join("status"), 64), "ok 0\n");
        // A FIFO reads as nothing, at once (never waits for a writer).
        let fifo = d.join("fifo");
        let c = std::ffi::CString::new(fifo.to_str().unwrap()).unwrap();
        // SAFETY: mkfifo of a NUL-terminated path in this test's directory.
        assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
        assert_eq!(read_regular(&fifo, 64), "");
        std::os::unix::fs::symlink(d.join("status"), d.join("link")).unwrap();
        assert_eq!(read_regular(&d.join("link"), 64), "");
        let p = d.path().to_path_buf();
        let other = PrivateDir::new().unwrap();
        assert_ne!(other.path(), p);
        drop(d);
        assert!(!p.exists());
    }
}
