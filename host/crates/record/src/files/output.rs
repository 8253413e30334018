//! Where a file labperf was asked to write (`-o`) goes, one rule for every writer: `-` is
//! standard output; `/dev/stdout`, `/dev/stderr`, `/dev/fd/N` and `/proc/self/fd/N` are
//! written through that open descriptor (its offset and append mode kept: a `>>` log keeps
//! its lines; the file behind it is never replaced); a character or block device or a FIFO
//! is written straight through (never created, truncated, renamed over or removed); a
//! regular file, or a name not there yet, is replaced whole through a new temporary file
//! beside it (`O_EXCL|O_NOFOLLOW`, 0600, or the mode of the file it replaces when that is
//! this user's; removed if a signal ends labperf), renamed when complete; a symbolic link
//! is followed to what it names (a link to a device is a device; a link to a regular file
//! stays a link and the file it names is replaced); anything else (a directory, a socket, a
//! link to nothing, a link another user owns) is refused with the reason. The agents apply
//! the same rule (`agents/labperf-agent/src/dest.rs`, `agents/alpha/lib.c` `lp_dest`).

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
    /// `/dev/stdout`, `/dev/stderr`, `/dev/fd/N`, `/proc/self/fd/N`: that open descriptor,
    /// written through a copy of it.
    Descriptor(i32),
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
    /// `link` (the output or a directory on its way) is a symbolic link another user owns.
    #[error("cannot write {}: {} is a symbolic link another user owns (it could point anywhere): name the file itself", .path.display(), .link.display())]
    PlantedLink { path: PathBuf, link: PathBuf },
    /// A FIFO another user owns in a sticky directory, as the kernel's protected_fifos refuses.
    #[error("cannot write {}: it is a FIFO another user owns in a shared (sticky) directory, which would pass what labperf writes to them: remove it or name another file", .path.display())]
    PlantedFifo { path: PathBuf },
    // The OS error in the message, not as a source: said once in anyhow's chain.
    #[error("cannot write {}: {err}", .path.display())]
    Io { path: PathBuf, err: std::io::Error },
}

fn io_err(path: &Path) -> impl FnOnce(std::io::Error) -> OutputError + '_ {
    move |err| OutputError::Io {
        path: path.into(),
        err,
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

/// The descriptor `path` names: `/dev/stdout`, `/dev/stderr`, `/dev/fd/N`,
/// `/proc/self/fd/N` (opening those would make a new open file of what is behind them,
/// neither appending nor at the descriptor's offset, and renaming over them replaces it).
pub fn descriptor(path: &Path) -> Option<i32> {
    let s = path.to_str()?;
    let n = match s {
        "/dev/stdout" => return Some(1),
        "/dev/stderr" => return Some(2),
        _ => s
            .strip_prefix("/dev/fd/")
            .or_else(|| s.strip_prefix("/proc/self/fd/"))?,
    };
    n.parse()
        .ok()
        .filter(|_| n.bytes().all(|b| b.is_ascii_digit()))
}

/// Whether `uid` is neither this user nor root: another user, who could have planted it.
fn another_users(uid: u32) -> bool {
    // SAFETY: geteuid cannot fail.
    uid != 0 && uid != unsafe { libc::geteuid() }
}

/// The first symbolic link another user owns on the way to what `path` names: the name
/// itself, or a directory above it (`pub/d -> /victim/dir` in `-o pub/d/x`), links followed
/// as the kernel follows them (a link another user owns could point anywhere; the kernel's
/// protected_symlinks refuses only some of them, and only where it is set).
pub fn planted_link(path: &Path) -> Option<PathBuf> {
    use std::os::unix::fs::MetadataExt;
    use std::path::Component;
    let mut cur = if path.is_absolute() {
        PathBuf::from("/")
    } else {
        std::env::current_dir().ok()?
    };
    // What is left to walk, the next component last.
    let mut todo: Vec<PathBuf> = path
        .components()
        .rev()
        .map(|c| c.as_os_str().into())
        .collect();
    let mut links = 0;
    while let Some(c) = todo.pop() {
        match Path::new(&c).components().next() {
            Some(Component::RootDir) => cur = PathBuf::from("/"),
            Some(Component::ParentDir) => {
                cur.pop();
            }
            Some(Component::Normal(n)) => {
                let next = cur.join(n);
                let m = std::fs::symlink_metadata(&next).ok()?;
                if !m.file_type().is_symlink() {
                    cur = next;
                    continue;
                }
                if another_users(m.uid()) {
                    // Named as the user named it where it is the path's own component.
                    return Some(next);
                }
                links += 1;
                let to = std::fs::read_link(&next).ok().filter(|_| links <= 40)?;
                todo.extend(to.components().rev().map(|c| c.as_os_str().into()));
            }
            _ => {}
        }
    }
    None
}

/// Whether `path` (a FIFO) is another user's in a sticky directory (/tmp): the kernel's
/// protected_fifos=1 refuses to open such a FIFO for writing with O_CREAT, and where it is
/// 0 (or without O_CREAT) the owner reads what is written, or blocks the writer for ever.
fn planted_fifo(path: &Path, m: &std::fs::Metadata) -> bool {
    use std::os::unix::fs::MetadataExt;
    if !m.file_type().is_fifo() || !another_users(m.uid()) {
        return false;
    }
    let dir = std::fs::canonicalize(path)
        .ok()
        .and_then(|p| p.parent().map(Path::to_path_buf));
    dir.and_then(|d| std::fs::metadata(d).ok())
        .is_some_and(|d| d.mode() & libc::S_ISVTX != 0)
}

/// Resolves `path` by the rule above; refuses a directory, a socket (also through links),
/// a link to nothing (a planted link would make a file where it points) and a link another
/// user owns.
pub fn resolve(path: &Path) -> Result<Dest, OutputError> {
    if is_stdout(path) {
        return Ok(Dest::Stdout);
    }
    if let Some(fd) = descriptor(path) {
        return Ok(Dest::Descriptor(fd));
    }
    if let Some(link) = planted_link(path) {
        return Err(OutputError::PlantedLink {
            path: path.into(),
            link,
        });
    }
    // What the path names, links followed by the kernel's own walk (so its rules on links
    // in sticky directories apply, and /dev/stdout's /proc/self/fd/1 counts as what that
    // descriptor is).
    match std::fs::metadata(path) {
        Ok(m) if planted_fifo(path, &m) => Err(OutputError::PlantedFifo { path: path.into() }),
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
    // link(2) makes a new name or fails (EEXIST: something was put there since it was
    // removed): never written through. Where the file system has no hard links, the copy
    // goes into a new file made with O_EXCL|O_NOFOLLOW, as racing for the name fails too.
    match std::fs::hard_link(&file, &old) {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {
            return Err(io_err(&old)(e));
        }
        Err(_) => {
            let mut to = std::fs::OpenOptions::new()
                .write(true)
                .create_new(true)
                .mode(0o600)
                .custom_flags(libc::O_NOFOLLOW)
                .open(&old)
                .map_err(io_err(&old))?;
            let mut from = std::fs::File::open(&file).map_err(io_err(&file))?;
            if let Ok(m) = from.metadata() {
                keep_mode(&to, &m);
            }
            std::io::copy(&mut from, &mut to).map_err(io_err(&old))?;
        }
    }
    Ok(Some(old))
}

/// Gives `f` (a new file of this user) the mode of `target`, when `target` is this user's
/// (a file another user owns, or none, leaves it 0600).
fn keep_mode(f: &File, target: &std::fs::Metadata) {
    use std::os::unix::fs::MetadataExt;
    // SAFETY: geteuid cannot fail.
    if target.is_file() && target.uid() == unsafe { libc::geteuid() } {
        let _ = f.set_permissions(std::fs::Permissions::from_mode(target.mode() & 0o777));
    }
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
    /// Its slot among the temporaries a signal removes (`interrupt.rs`).
    slot: Option<usize>,
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
                        err: std::io::Error::other("it changed while being opened"),
                    });
                }
                (Sink::File(f), None)
            }
            Dest::Descriptor(fd) => {
                use std::os::fd::FromRawFd;
                // What labperf printed there before comes first.
                let _ = std::io::stdout().flush();
                // SAFETY: F_DUPFD_CLOEXEC makes a new descriptor this File then owns.
                let d = unsafe { libc::fcntl(*fd, libc::F_DUPFD_CLOEXEC, 3) };
                if d < 0 {
                    return Err(io_err(path)(std::io::Error::last_os_error()));
                }
                // SAFETY: `d` is a descriptor of ours, owned by this File alone.
                (Sink::File(unsafe { File::from_raw_fd(d) }), None)
            }
            Dest::File(p) => {
                let (f, tmp, slot) = temporary_beside(p).map_err(io_err(path))?;
                (Sink::File(f), Some((tmp, slot)))
            }
        };
        let (tmp, slot) = tmp.map_or((None, None), |(t, s)| (Some(t), s));
        Ok(Output {
            dest,
            given: path.into(),
            w: Some(BufWriter::with_capacity(1 << 20, sink)),
            tmp,
            slot,
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
                if let Ok(old) = std::fs::symlink_metadata(p) {
                    keep_mode(&f, &old);
                }
                drop(f);
                std::fs::rename(tmp, p).map_err(io_err(&self.given))?;
                self.tmp = None;
                if let Some(s) = self.slot.take() {
                    crate::interrupt::unregister_temporary(s);
                }
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
        if let Some(s) = self.slot.take() {
            crate::interrupt::unregister_temporary(s);
        }
    }
}

/// A new file beside `file`, `.NAME.<unique>.part`, 0600, never through a symbolic link.
/// A new temporary file beside `file`, and its slot among the temporaries a signal removes:
/// registered before it is created, so a signal at any moment leaves none behind.
fn temporary_beside(file: &Path) -> std::io::Result<(File, PathBuf, Option<usize>)> {
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
    let slot = crate::interrupt::register_temporary(&tmp);
    let f = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .custom_flags(libc::O_NOFOLLOW)
        .open(&tmp)
        .inspect_err(|_| {
            if let Some(s) = slot {
                crate::interrupt::unregister_temporary(s);
            }
        })?;
    Ok((f, tmp, slot))
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
    fn a_link_raced_in_at_the_old_name_is_never_written_through() {
        // Before: `.old` was removed, then hard-linked, and copied where the link failed;
        // a link put at `.old` in between (EEXIST) made the copy write where it pointed.
        let d = std::env::temp_dir().join(format!("labperf-old-race-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(&d).unwrap();
        let (f, old, target) = (d.join("r.lpr"), d.join("r.lpr.old"), d.join("target"));
        std::fs::write(&f, "recording").unwrap();
        std::fs::write(&target, "kept").unwrap();
        let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let racer = {
            let (stop, old, target) = (stop.clone(), old.clone(), target.clone());
            std::thread::spawn(move || {
                while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                    let _ = std::os::unix::fs::symlink(&target, &old);
                }
            })
        };
        let t = std::time::Instant::now();
        let mut refused = 0;
        while t.elapsed() < std::time::Duration::from_secs(2) && refused < 50 {
            if keep_previous(&f).is_err() {
                refused += 1;
            }
        }
        stop.store(true, std::sync::atomic::Ordering::Relaxed);
        racer.join().unwrap();
        assert_eq!(std::fs::read(&target).unwrap(), b"kept");
        std::fs::remove_dir_all(&d).unwrap();
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
