//! Where a file labperf was asked to write (`-o`) goes, one rule for every writer: `-` is
//! standard output; a character or block device or a FIFO is written straight through
//! (never created, truncated, renamed over or removed); a regular file, or a name not there
//! yet, is replaced whole through a new temporary file beside it, renamed when complete;
//! a symbolic link is followed to what it names (a link to a device is a device; a link to
//! a regular file stays a link and the file it names is replaced); anything else (a
//! directory, a socket, a link to nothing) is refused with the reason. The agents apply the same rule
//! (`agents/labperf-agent/src/dest.rs`, `agents/alpha/lib.c` `lp_dest`).

use std::fs::File;
use std::io::{BufWriter, Write};
use std::os::unix::fs::{FileTypeExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};

/// What an output path is, once resolved.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Dest {
    /// `-`: standard output.
    Stdout,
    /// A character or block device or a FIFO (perhaps through symbolic links): written
    /// straight through the path given.
    Stream(PathBuf),
    /// A regular file or a name not there yet, symbolic links resolved: replaced whole
    /// through a temporary file beside it.
    File(PathBuf),
}

impl Dest {
    /// The regular file written, which can be read back once complete (none for
    /// standard output, a device or a FIFO).
    pub fn file(&self) -> Option<&Path> {
        match self {
            Dest::File(p) => Some(p),
            _ => None,
        }
    }
}

/// Why an output could not be written.
#[derive(Debug, thiserror::Error)]
pub enum OutputError {
    #[error("cannot write {}: it is {what}; name a regular file, a device or a FIFO (or `-` for standard output where the format streams)", .path.display())]
    Refused { path: PathBuf, what: &'static str },
    #[error("cannot write {}: {source}", .path.display())]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
}

fn io_err(path: &Path) -> impl FnOnce(std::io::Error) -> OutputError + '_ {
    move |source| OutputError::Io {
        path: path.into(),
        source,
    }
}

/// Whether `path` is `-`, standard output.
pub fn is_stdout(path: &Path) -> bool {
    path.as_os_str() == "-"
}

/// What the file type `t` is when it cannot be written (`None`: a regular file, a device
/// or a FIFO, which can).
fn refused(t: std::fs::FileType) -> Option<&'static str> {
    if t.is_dir() {
        Some("a directory")
    } else if t.is_socket() {
        Some("a socket")
    } else if t.is_file() || t.is_char_device() || t.is_block_device() || t.is_fifo() {
        None
    } else {
        Some("neither a regular file, a device nor a FIFO")
    }
}

/// Resolves `path` by the rule above; refuses a directory, a socket (also through links)
/// and a link to nothing (a planted link would make a file where it points).
pub fn resolve(path: &Path) -> Result<Dest, OutputError> {
    if is_stdout(path) {
        return Ok(Dest::Stdout);
    }
    // What the path names, links followed by the kernel's own walk (so its rules on links
    // in sticky directories apply, and /dev/stdout's /proc/self/fd/1 counts as what that
    // descriptor is).
    match std::fs::metadata(path) {
        Ok(m) => match refused(m.file_type()) {
            Some(what) => Err(OutputError::Refused {
                path: path.into(),
                what,
            }),
            // A link's file is replaced where it is: its canonical path (a /proc fd link to
            // a deleted file has none: an error).
            None if m.is_file() => Ok(Dest::File(
                std::fs::canonicalize(path).map_err(io_err(path))?,
            )),
            None => Ok(Dest::Stream(path.into())),
        },
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            match std::fs::symlink_metadata(path) {
                Ok(m) if m.file_type().is_symlink() => Err(OutputError::Refused {
                    path: path.into(),
                    what: "a symbolic link to nothing (name the file itself)",
                }),
                _ => Ok(Dest::File(path.into())),
            }
        }
        Err(e) => Err(io_err(path)(e)),
    }
}

/// perf's habit before a recording replaces its file: a regular file at `path` that is
/// not empty (links followed, as the writer follows them) is kept as `<file>.old`, an older
/// `.old` file (or link) replaced; nothing is kept for `-`, a device, a FIFO or a name not
/// there yet, and a `.old` that is a directory, a device or a FIFO is refused, never
/// removed. The file itself stays where it is (a hard link, or a copy where the file
/// system has none) until the new recording replaces it whole. Returns the `.old` path.
pub fn keep_previous(path: &Path) -> Result<Option<PathBuf>, OutputError> {
    let Dest::File(file) = resolve(path)? else {
        return Ok(None);
    };
    match std::fs::symlink_metadata(&file) {
        Ok(m) if m.is_file() && m.len() > 0 => {}
        _ => return Ok(None),
    }
    let mut name = file.file_name().unwrap_or_default().to_os_string();
    name.push(".old");
    let old = file.with_file_name(name);
    match std::fs::symlink_metadata(&old) {
        Ok(m) if m.is_file() || m.file_type().is_symlink() => {
            std::fs::remove_file(&old).map_err(io_err(&old))?
        }
        Ok(m) => {
            return Err(OutputError::Refused {
                path: old,
                what: refused(m.file_type()).unwrap_or("a device or a FIFO"),
            })
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => return Err(io_err(&old)(e)),
    }
    if std::fs::hard_link(&file, &old).is_err() {
        std::fs::copy(&file, &old).map_err(io_err(&old))?;
    }
    Ok(Some(old))
}

/// Where the bytes go.
enum Sink {
    Stdout(std::io::Stdout),
    File(File),
}

impl Write for Sink {
    fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
        match self {
            Sink::Stdout(o) => o.write(b),
            Sink::File(f) => f.write(b),
        }
    }
    fn flush(&mut self) -> std::io::Result<()> {
        match self {
            Sink::Stdout(o) => o.flush(),
            Sink::File(f) => f.flush(),
        }
    }
}

/// An output being written (buffered): [`Output::commit`] completes it; dropped before
/// that, a temporary file is removed and the path keeps what it had.
pub struct Output {
    dest: Dest,
    given: PathBuf,
    w: Option<BufWriter<Sink>>,
    /// The temporary file of a [`Dest::File`], until renamed.
    tmp: Option<PathBuf>,
    bytes: u64,
}

impl Output {
    /// Opens `path` for writing by the rule above (a FIFO waits for its reader here).
    pub fn create(path: &Path) -> Result<Output, OutputError> {
        let dest = resolve(path)?;
        let (sink, tmp) = match &dest {
            Dest::Stdout => (Sink::Stdout(std::io::stdout()), None),
            Dest::Stream(p) => {
                let f = std::fs::OpenOptions::new()
                    .write(true)
                    .custom_flags(libc::O_NOCTTY)
                    .open(p)
                    .map_err(io_err(path))?;
                // It changed since it was resolved: never write into a file unannounced.
                let t = f.metadata().map_err(io_err(path))?.file_type();
                if t.is_file() || refused(t).is_some() {
                    return Err(OutputError::Io {
                        path: path.into(),
                        source: std::io::Error::other("it changed while being opened"),
                    });
                }
                (Sink::File(f), None)
            }
            Dest::File(p) => {
                let (f, tmp) = temporary_beside(p)?;
                (Sink::File(f), Some(tmp))
            }
        };
        Ok(Output {
            dest,
            given: path.into(),
            w: Some(BufWriter::with_capacity(1 << 20, sink)),
            tmp,
            bytes: 0,
        })
    }

    /// What the output is.
    pub fn dest(&self) -> &Dest {
        &self.dest
    }

    /// Flushes, and for a regular file syncs it and renames it into place (keeping the
    /// permissions of the file it replaces); returns the bytes written.
    pub fn commit(mut self) -> Result<u64, OutputError> {
        let w = self.w.take().expect("open until committed");
        let sink = w
            .into_inner()
            .map_err(|e| io_err(&self.given)(e.into_error()))?;
        match (sink, &self.dest, &self.tmp) {
            (Sink::File(f), Dest::File(p), Some(tmp)) => {
                f.sync_all().map_err(io_err(&self.given))?;
                if let Ok(old) = std::fs::metadata(p) {
                    let mode = old.permissions().mode() & 0o777;
                    let _ = f.set_permissions(std::fs::Permissions::from_mode(mode));
                }
                drop(f);
                std::fs::rename(tmp, p).map_err(io_err(&self.given))?;
                self.tmp = None;
            }
            (Sink::Stdout(mut o), ..) => o.flush().map_err(io_err(&self.given))?,
            _ => {}
        }
        Ok(self.bytes)
    }
}

impl Write for Output {
    fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
        let n = self.w.as_mut().expect("open until committed").write(b)?;
        self.bytes += n as u64;
        Ok(n)
    }
    fn flush(&mut self) -> std::io::Result<()> {
        self.w.as_mut().expect("open until committed").flush()
    }
}

impl Drop for Output {
    fn drop(&mut self) {
        if let Some(tmp) = self.tmp.take() {
            drop(self.w.take());
            let _ = std::fs::remove_file(tmp);
        }
    }
}

/// A new file beside `file`, `.NAME.<unique>.part`, never through a symbolic link.
fn temporary_beside(file: &Path) -> Result<(File, PathBuf), OutputError> {
    static N: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let name = file
        .file_name()
        .map_or_else(|| "out".into(), |n| n.to_string_lossy().into_owned());
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.subsec_nanos());
    let tmp = file.with_file_name(format!(
        ".{name}.{}-{}-{nanos}.part",
        std::process::id(),
        N.fetch_add(1, std::sync::atomic::Ordering::Relaxed)
    ));
    let f = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .custom_flags(libc::O_NOFOLLOW)
        .open(&tmp)
        .map_err(io_err(&tmp))?;
    Ok((f, tmp))
}

/// Where an unfinished recording for `path` is kept (an agent's `FILE.part`): beside the
/// regular file `path` names, links resolved; none for standard output, a device or a FIFO
/// (an agent writes those straight through).
pub fn partial(path: &Path) -> Option<PathBuf> {
    let Ok(Dest::File(p)) = resolve(path) else {
        return None;
    };
    let mut s = p.into_os_string();
    s.push(".part");
    Some(s.into())
}

/// Writes `bytes` to `path` by the rule above; returns what was written to.
pub fn write(path: &Path, bytes: &[u8]) -> Result<Dest, OutputError> {
    let mut o = Output::create(path)?;
    o.write_all(bytes).map_err(io_err(path))?;
    let dest = o.dest().clone();
    o.commit()?;
    Ok(dest)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keep_previous_keeps_a_regular_file_and_nothing_else() {
        let d = std::env::temp_dir().join(format!("labperf-keep-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(&d).unwrap();
        let f = d.join("r.lpr");
        // Nothing there yet, or an empty file: nothing to keep.
        assert_eq!(keep_previous(&f).unwrap(), None);
        std::fs::write(&f, "").unwrap();
        assert_eq!(keep_previous(&f).unwrap(), None);
        assert_eq!(keep_previous(Path::new("-")).unwrap(), None);
        // A file: kept beside it, and still there itself.
        std::fs::write(&f, "first").unwrap();
        let old = d.join("r.lpr.old");
        assert_eq!(keep_previous(&f).unwrap(), Some(old.clone()));
        assert_eq!(std::fs::read(&old).unwrap(), b"first");
        assert_eq!(std::fs::read(&f).unwrap(), b"first");
        // Replaced whole as a writer replaces it: the .old keeps the first bytes.
        write(&f, b"second").unwrap();
        assert_eq!(std::fs::read(&old).unwrap(), b"first");
        // A .old that is a link gives way (the file it names untouched).
        std::fs::write(d.join("other"), "other").unwrap();
        std::fs::remove_file(&old).unwrap();
        std::os::unix::fs::symlink("other", &old).unwrap();
        keep_previous(&f).unwrap();
        assert_eq!(std::fs::read(&old).unwrap(), b"second");
        assert!(!std::fs::symlink_metadata(&old).unwrap().is_symlink());
        assert_eq!(std::fs::read(d.join("other")).unwrap(), b"other");
        // A .old that is a directory is refused, and left.
        std::fs::remove_file(&old).unwrap();
        std::fs::create_dir(&old).unwrap();
        let e = keep_previous(&f).unwrap_err().to_string();
        assert!(e.contains("r.lpr.old: it is a directory"), "{e}");
        assert!(old.is_dir());
        let _ = std::fs::remove_dir_all(&d);
    }

    #[test]
    fn resolves_links_files_and_refuses_directories() {
        let d = std::env::temp_dir().join(format!("labperf-output-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(d.join("sub")).unwrap();
        assert_eq!(resolve(Path::new("-")).unwrap(), Dest::Stdout);
        let new = d.join("new.txt");
        assert_eq!(resolve(&new).unwrap(), Dest::File(new.clone()));
        std::fs::write(d.join("sub/real"), "old").unwrap();
        std::os::unix::fs::symlink("sub/real", d.join("link")).unwrap();
        std::os::unix::fs::symlink("link", d.join("link2")).unwrap();
        assert_eq!(
            resolve(&d.join("link2")).unwrap(),
            Dest::File(d.join("sub/real"))
        );
        // A link to nothing is refused: a planted link would make a file where it points.
        std::os::unix::fs::symlink("sub/made", d.join("dangling")).unwrap();
        let e = write(&d.join("dangling"), b"x").unwrap_err().to_string();
        assert!(e.contains("a symbolic link to nothing"), "{e}");
        assert!(!d.join("sub/made").exists());
        // Through the two links: the link stays, the file is replaced, its mode kept.
        std::fs::set_permissions(d.join("sub/real"), std::fs::Permissions::from_mode(0o600))
            .unwrap();
        write(&d.join("link2"), b"new").unwrap();
        assert_eq!(std::fs::read(d.join("sub/real")).unwrap(), b"new");
        let m = std::fs::metadata(d.join("sub/real")).unwrap();
        assert_eq!(m.permissions().mode() & 0o777, 0o600);
        assert!(std::fs::symlink_metadata(d.join("link"))
            .unwrap()
            .file_type()
            .is_symlink());
        std::os::unix::fs::symlink("sub", d.join("dirlink")).unwrap();
        for p in [d.join("sub"), d.join("dirlink")] {
            let e = resolve(&p).unwrap_err().to_string();
            assert!(e.contains("it is a directory"), "{e}");
        }
        std::os::unix::fs::symlink("loop", d.join("loop")).unwrap();
        assert!(resolve(&d.join("loop")).is_err());
        // A failed write leaves the file as it was and no temporary.
        let o = Output::create(&d.join("sub/real")).unwrap();
        drop(o);
        assert_eq!(std::fs::read(d.join("sub/real")).unwrap(), b"new");
        assert_eq!(std::fs::read_dir(d.join("sub")).unwrap().count(), 1);
        std::fs::remove_dir_all(&d).unwrap();
    }
}
