//! The local binary cache (`$XDG_CACHE_HOME/labperf/binaries`): ELF files fetched from lab
//! machines, stored under names labperf makes, never under a name a record file gives, and
//! the index of which lab machine each fetched record file came from.
//!
//! Entries (who writes them, and what is checked before use: docs/security.md):
//! - `<root>/<build-id hex>/elf` (a GNU build-id of 4 to 64 bytes) and beside it `debug`,
//!   its separate debug file: shared by every recording that names that build-id;
//! - `<root>/by-host/<SHA-256 of the machine's SSH host key>/<SHA-256 of the path>/elf`
//!   (and `debug`): one lab machine's own copy of a file, for a mapping without build-id
//!   or when its file differs from the shared entry of its build-id; keyed by the key of
//!   the machine labperf contacted, never by anything a record file says;
//! - `<root>/recordings/<size>-<SHA-256 of the record file>`: which machine (host key,
//!   name, architecture) a fetched record file came from, so that a report reads that
//!   machine's `by-host` entries for it and no other's. At most [`MAX_RECORDINGS`];
//! - `<root>/perf-maps/<size>-<SHA-256 of the record file>/<pid>.map`: the JIT map files
//!   (`/tmp/perf-PID.map`) of that recording's processes, fetched with its binaries and
//!   read for that record file only. At most [`MAX_RECORDINGS`] recordings' maps.
//!
//! [`debuginfod`] is another root of the same layout: `<build-id>/elf` and `<build-id>/debug`
//! as debuginfod servers gave them.
//!
//! Entries are written through a new temporary file (`O_EXCL | O_NOFOLLOW`) renamed into a
//! directory that is checked to be a real directory inside the root, so no path from a lab
//! machine and no symbolic link can make a write land outside the cache.

use sha2::{Digest, Sha256};
use std::io::Write;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};

/// The cache directory: `$XDG_CACHE_HOME/labperf`, or `~/.cache/labperf`.
pub fn labperf_cache() -> PathBuf {
    std::env::var_os("XDG_CACHE_HOME")
        .filter(|v| !v.is_empty())
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cache")))
        .unwrap_or_else(|| PathBuf::from(".cache"))
        .join("labperf")
}

/// The binary cache of [`labperf_cache`].
pub fn binaries() -> PathBuf {
    labperf_cache().join("binaries")
}

/// Where files fetched from debuginfod servers are kept: `debuginfod/<build-id>/elf` and
/// `debug` in [`labperf_cache`], apart from what lab machines gave.
pub fn debuginfod() -> PathBuf {
    labperf_cache().join("debuginfod")
}

/// Lower-case hex.
pub fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

/// Base64 without padding (OpenSSH's fingerprint spelling).
pub fn b64(data: &[u8]) -> String {
    const A: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut s = String::new();
    for c in data.chunks(3) {
        let n = (u32::from(c[0]) << 16)
            | (u32::from(*c.get(1).unwrap_or(&0)) << 8)
            | u32::from(*c.get(2).unwrap_or(&0));
        for i in 0..c.len() + 1 {
            s.push(A[(n >> (18 - 6 * i)) as usize & 63] as char);
        }
    }
    s
}

/// Build-ids are hashes of 4 to 64 bytes (GNU ld: 20, lld fast: 8, md5: 16).
pub fn valid_build_id(id: &[u8]) -> bool {
    (4..=64).contains(&id.len())
}

/// The entry of a file with build-id `id`, if the id is a plausible one.
pub fn by_build_id(root: &Path, id: &[u8]) -> Option<PathBuf> {
    valid_build_id(id).then(|| root.join(hex(id)).join("elf"))
}

/// One lab machine's own copy of the file at `path` there: keyed by the SHA-256 of the
/// machine's SSH host key (as labperf saw it when it connected) and a hash of the path.
pub fn by_host(root: &Path, host_key: &[u8], path: &str) -> PathBuf {
    root.join("by-host")
        .join(hex(host_key))
        .join(hex(&Sha256::digest(path.as_bytes())))
        .join("elf")
}

/// The name of a fetched record file of `size` bytes and SHA-256 `sha256` (hex) in the
/// index and in `perf-maps/`.
pub fn recording_key(size: u64, sha256: &str) -> String {
    format!("{size}-{sha256}")
}

/// The JIT map file of process `pid` of the fetched record file `key` ([`recording_key`]).
pub fn perf_map(root: &Path, key: &str, pid: u32) -> PathBuf {
    root.join("perf-maps").join(key).join(format!("{pid}.map"))
}

/// Most record files the index remembers (each entry is under 1 KiB); past it, the
/// oldest entries go (their recordings then read only shared and local files).
pub const MAX_RECORDINGS: usize = 10_000;

/// A lab machine as labperf reached it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Machine {
    /// SHA-256 of its SSH host key (the key checked against known_hosts).
    pub host_key: Vec<u8>,
    /// The name it was reached by (for messages).
    pub name: String,
    /// Its `uname -m`.
    pub arch: String,
}

impl Machine {
    /// Its host key's fingerprint as OpenSSH spells it: `SHA256:<base64>`.
    pub fn fingerprint(&self) -> String {
        format!("SHA256:{}", b64(&self.host_key))
    }
}

/// Where a record file came from, as the index says.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Origin {
    /// Fetched by labperf from this machine.
    Fetched(Machine),
    /// Fetched from two machines with different host keys (the same bytes): neither's
    /// own entries are used for it.
    Conflict,
    /// Not fetched by labperf, as far as the index knows (a recording made here, or one
    /// copied by other means): no machine's own entries are used for it.
    Unknown,
}

/// The index entry of a record file of `size` bytes and SHA-256 `sha256` (hex).
fn recording_entry(root: &Path, size: u64, sha256: &str) -> PathBuf {
    root.join("recordings").join(recording_key(size, sha256))
}

/// The entry's text: a version line, then `host-key`, `name`, `arch` and `since` lines.
fn entry_text(m: Option<(&Machine, u64)>) -> String {
    match m {
        Some((m, since)) => format!(
            "labperf-recording 2\nhost-key {}\nname {}\narch {}\nsince {since}\n",
            hex(&m.host_key),
            one_line(&m.name),
            one_line(&m.arch)
        ),
        None => "labperf-recording 2\nhost-key conflict\n".into(),
    }
}

/// When the file at `path` came to be on this machine, in ns since the epoch by this
/// machine's clock: its birth time where the file system keeps one (statx), else its
/// status change time (which only the kernel sets: to now). A copy is born when it is
/// made; a file's birth time never goes back.
pub fn made_at(path: &Path) -> Option<u64> {
    use std::os::unix::ffi::OsStrExt;
    let c = std::ffi::CString::new(path.as_os_str().as_bytes()).ok()?;
    // SAFETY: statx of a NUL-terminated path into a zeroed struct of its own type.
    let mut st: libc::statx = unsafe { std::mem::zeroed() };
    let r = unsafe {
        libc::statx(
            libc::AT_FDCWD,
            c.as_ptr(),
            0,
            libc::STATX_BTIME | libc::STATX_CTIME,
            &mut st,
        )
    };
    if r != 0 {
        return None;
    }
    let t = if st.stx_mask & libc::STATX_BTIME != 0 {
        st.stx_btime
    } else {
        st.stx_ctime
    };
    u64::try_from(t.tv_sec)
        .ok()?
        .checked_mul(1_000_000_000)?
        .checked_add(u64::from(t.tv_nsec))
}

fn now_ns() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as u64)
}

/// `s` on one line: control characters become `?`.
fn one_line(s: &str) -> String {
    s.chars()
        .map(|c| if c.is_control() { '?' } else { c })
        .collect()
}

/// An entry: where the recording came from, and (fetched) since when a file of its bytes
/// may be that recording. Entries of version 1 (before `since`) give no machine.
fn parse_entry(text: &str) -> (Origin, u64) {
    let mut lines = text.lines();
    let version = lines.next();
    if version != Some("labperf-recording 2") && version != Some("labperf-recording 1") {
        return (Origin::Unknown, 0);
    }
    let (mut key, mut name, mut arch, mut since) = (None, String::new(), String::new(), None);
    for l in lines {
        match l.split_once(' ') {
            Some(("host-key", "conflict")) => return (Origin::Conflict, 0),
            Some(("since", t)) => since = t.parse::<u64>().ok(),
            Some(("host-key", k)) if k.len() == 64 => {
                key = (0..32)
                    .map(|i| u8::from_str_radix(&k[2 * i..2 * i + 2], 16).ok())
                    .collect::<Option<Vec<u8>>>();
            }
            Some(("name", n)) => name = n.to_string(),
            Some(("arch", a)) => arch = a.to_string(),
            _ => {}
        }
    }
    match (key, since) {
        (Some(host_key), Some(since)) => (
            Origin::Fetched(Machine {
                host_key,
                name,
                arch,
            }),
            since,
        ),
        _ => (Origin::Unknown, 0),
    }
}

/// Notes in the index that the record file of `size` bytes and SHA-256 `sha256` (hex, as
/// the fetch computed it over the bytes received), written to `fetched`, came from `m`:
/// for files of those bytes made since `fetched` was ([`made_at`]), that file and its later
/// copies. A file of the same bytes that was on this machine before (a local recording
/// whose bytes a lab machine sent back) never takes `m` for its origin. The same bytes
/// from another machine make the entry a conflict. Past [`MAX_RECORDINGS`] entries the
/// oldest are removed.
pub fn note_recording(
    root: &Path,
    size: u64,
    sha256: &str,
    m: &Machine,
    fetched: &Path,
) -> Result<(), CacheError> {
    let entry = recording_entry(root, size, sha256);
    let since = made_at(fetched).unwrap_or_else(now_ns);
    let text = match read_entry(&entry) {
        Some((Origin::Fetched(old), _)) if old.host_key == m.host_key => return Ok(()),
        Some((Origin::Conflict, _)) => return Ok(()),
        Some((Origin::Fetched(_), _)) => entry_text(None),
        _ => entry_text(Some((m, since))),
    };
    let mut p = Pending::new(root)?;
    p.write(text.as_bytes())?;
    p.store(&entry)?;
    prune(&root.join("recordings"), MAX_RECORDINGS);
    Ok(())
}

/// Removes the oldest entries of `dir` past `max` (down to 90% of it).
fn prune(dir: &Path, max: usize) {
    let Ok(rd) = std::fs::read_dir(dir) else {
        return;
    };
    let mut all: Vec<(std::time::SystemTime, PathBuf)> = rd
        .flatten()
        .filter_map(|e| {
            let m = e.metadata().ok()?;
            Some((m.modified().ok()?, e.path()))
        })
        .collect();
    if all.len() <= max {
        return;
    }
    all.sort();
    let drop = all.len() - max * 9 / 10;
    for (_, p) in all.into_iter().take(drop) {
        // A directory of labperf's (perf-maps/), never a link followed.
        match std::fs::symlink_metadata(&p) {
            Ok(m) if m.is_dir() => {
                let _ = std::fs::remove_dir_all(&p);
            }
            _ => {
                let _ = std::fs::remove_file(&p);
            }
        }
    }
}

/// Removes the oldest recordings' map files past [`MAX_RECORDINGS`].
pub fn prune_perf_maps(root: &Path) {
    prune(&root.join("perf-maps"), MAX_RECORDINGS);
}

/// An index entry's content (a regular file, at most 4 KiB read).
fn read_entry(path: &Path) -> Option<(Origin, u64)> {
    use std::io::Read;
    let f = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK)
        .open(path)
        .ok()?;
    if !f.metadata().ok()?.is_file() {
        return None;
    }
    let mut text = String::new();
    f.take(4096).read_to_string(&mut text).ok()?;
    Some(parse_entry(&text))
}

/// Where the record file `file` came from: the index entry of its size and SHA-256. The
/// file is hashed only when the index holds an entry of its size.
pub fn origin(root: &Path, file: &Path) -> Origin {
    origin_and_key(root, file).0
}

/// [`origin`], and for a fetched record file its [`recording_key`].
pub fn origin_and_key(root: &Path, file: &Path) -> (Origin, Option<String>) {
    let unknown = (Origin::Unknown, None);
    let Ok(meta) = std::fs::metadata(file) else {
        return unknown;
    };
    let prefix = format!("{}-", meta.len());
    let sized = std::fs::read_dir(root.join("recordings")).is_ok_and(|rd| {
        rd.flatten()
            .any(|e| e.file_name().to_string_lossy().starts_with(&prefix))
    });
    if !sized {
        return unknown;
    }
    let Ok(data) = crate::files::mapped::map_file(file) else {
        return unknown;
    };
    let (size, sha) = (
        (*data).as_ref().len() as u64,
        hex(&Sha256::digest((*data).as_ref())),
    );
    match read_entry(&recording_entry(root, size, &sha)) {
        // Only a file made since the fetch: the fetched file, or a copy of it.
        Some((o @ Origin::Fetched(_), since)) if made_at(file).is_some_and(|t| t >= since) => {
            (o, Some(recording_key(size, &sha)))
        }
        Some((Origin::Fetched(_), _)) => unknown,
        Some((o, _)) => (o, None),
        None => unknown,
    }
}

/// Why a file could not be stored.
#[derive(Debug, thiserror::Error)]
pub enum CacheError {
    #[error("{0} is not a directory of labperf's cache (a symbolic link or another file is in its place): remove it")]
    NotADirectory(PathBuf),
    #[error("the cache entry {0} is not one labperf names")]
    OutsideCache(PathBuf),
    #[error("cannot write the binary cache at {path}: {source}")]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
}

fn io(path: &Path) -> impl FnOnce(std::io::Error) -> CacheError + '_ {
    move |source| CacheError::Io {
        path: path.into(),
        source,
    }
}

/// Makes `dir` a real directory (not a symbolic link), creating it when missing.
fn real_dir(dir: &Path) -> Result<(), CacheError> {
    match std::fs::symlink_metadata(dir) {
        Ok(m) if m.is_dir() => Ok(()),
        Ok(_) => Err(CacheError::NotADirectory(dir.into())),
        Err(_) => {
            std::fs::create_dir(dir).or_else(|e| {
                if e.kind() == std::io::ErrorKind::AlreadyExists {
                    Ok(())
                } else {
                    Err(io(dir)(e))
                }
            })?;
            match std::fs::symlink_metadata(dir) {
                Ok(m) if m.is_dir() => Ok(()),
                _ => Err(CacheError::NotADirectory(dir.into())),
            }
        }
    }
}

/// A file being written into the cache: a new temporary file in the root.
pub struct Pending {
    file: std::fs::File,
    tmp: PathBuf,
    root: PathBuf,
}

impl Pending {
    /// Starts a new file in `root` (created when missing; it must be a real directory).
    pub fn new(root: &Path) -> Result<Pending, CacheError> {
        if let Some(parent) = root.parent() {
            std::fs::create_dir_all(parent).map_err(io(parent))?;
        }
        real_dir(root)?;
        for n in 0u32.. {
            let tmp = root.join(format!(".tmp.{}.{n}", std::process::id()));
            match std::fs::OpenOptions::new()
                .write(true)
                .create_new(true)
                .custom_flags(libc::O_NOFOLLOW)
                .mode(0o600)
                .open(&tmp)
            {
                Ok(file) => {
                    return Ok(Pending {
                        file,
                        tmp,
                        root: root.into(),
                    })
                }
                Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => continue,
                Err(e) => return Err(io(&tmp)(e)),
            }
        }
        unreachable!("u32 names run out only after 4 billion stale temporary files")
    }

    /// The temporary file's path (to read what was written back, e.g. to check it).
    pub fn path(&self) -> &Path {
        &self.tmp
    }

    pub fn write(&mut self, b: &[u8]) -> Result<(), CacheError> {
        self.file.write_all(b).map_err(io(&self.tmp))
    }

    /// Puts the file at `dest`, an entry of [`by_build_id`] or [`by_host`] (or their
    /// `debug`), of the recordings index or of [`perf_map`], under the root.
    pub fn store(self, dest: &Path) -> Result<(), CacheError> {
        let rel = dest
            .strip_prefix(&self.root)
            .map_err(|_| CacheError::OutsideCache(dest.into()))?;
        let parts: Vec<&str> = rel.iter().filter_map(|p| p.to_str()).collect();
        let hexname = |s: &str| !s.is_empty() && s.chars().all(|c| c.is_ascii_hexdigit());
        let recording = |s: &str| {
            s.split_once('-').is_some_and(|(n, h)| {
                !n.is_empty()
                    && n.bytes().all(|c| c.is_ascii_digit())
                    && h.len() == 64
                    && hexname(h)
            })
        };
        let pid_map = |s: &str| {
            s.strip_suffix(".map")
                .is_some_and(|p| !p.is_empty() && p.bytes().all(|c| c.is_ascii_digit()))
        };
        let ok = match parts.as_slice() {
            [id, "elf" | "debug"] => hexname(id),
            ["perf-maps", rec, map] => recording(rec) && pid_map(map),
            ["by-host", key, id, "elf" | "debug"] => hexname(key) && hexname(id),
            ["recordings", name] => recording(name),
            _ => false,
        } && parts.len() == rel.iter().count();
        if !ok {
            self.discard();
            return Err(CacheError::OutsideCache(dest.into()));
        }
        let mut dir = self.root.clone();
        for p in &parts[..parts.len() - 1] {
            dir.push(p);
            if let Err(e) = real_dir(&dir) {
                self.discard();
                return Err(e);
            }
        }
        self.file.sync_all().map_err(io(&self.tmp))?;
        // rename replaces whatever is at dest (a link included) without following it.
        std::fs::rename(&self.tmp, dest).map_err(|e| {
            let _ = std::fs::remove_file(&self.tmp);
            io(dest)(e)
        })
    }

    /// Drops the file.
    pub fn discard(self) {
        let _ = std::fs::remove_file(&self.tmp);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn entries_are_named_by_labperf_only() {
        let d = std::env::temp_dir().join(format!("lp-cache-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        let root = d.join("binaries");
        assert_eq!(
            by_build_id(&root, &[1, 2]),
            None,
            "too short for a build-id"
        );
        let e = by_build_id(&root, &[0xab; 20]).unwrap();
        let mut p = Pending::new(&root).unwrap();
        p.write(b"\x7fELF").unwrap();
        p.store(&e).unwrap();
        assert_eq!(std::fs::read(&e).unwrap(), b"\x7fELF");
        let bp = by_host(&root, &[7; 32], "/../../../../etc/passwd");
        assert!(bp.starts_with(root.join("by-host")) && !bp.to_string_lossy().contains(".."));
        let mut p = Pending::new(&root).unwrap();
        p.write(b"\x7fELF").unwrap();
        p.store(&bp).unwrap();
        assert_ne!(bp, by_host(&root, &[8; 32], "/../../../../etc/passwd"));
        // A destination that is not a cache entry is refused, and leaves nothing behind.
        let p = Pending::new(&root).unwrap();
        let tmp = p.path().to_path_buf();
        assert!(p.store(&root.join("../escape")).is_err());
        assert!(!tmp.exists() && !d.join("escape").exists());
        // A symbolic link where an entry's directory should be is never written through.
        let outside = d.join("outside");
        std::fs::create_dir_all(&outside).unwrap();
        let id = [0xcd; 20];
        std::os::unix::fs::symlink(&outside, root.join(hex(&id))).unwrap();
        let mut p = Pending::new(&root).unwrap();
        p.write(b"x").unwrap();
        let err = p.store(&by_build_id(&root, &id).unwrap()).unwrap_err();
        assert!(err.to_string().contains("symbolic link"), "{err}");
        assert_eq!(std::fs::read_dir(&outside).unwrap().count(), 0);
        std::fs::remove_dir_all(&d).unwrap();
    }

    #[test]
    fn the_index_says_which_machine_a_recording_came_from() {
        let d = std::env::temp_dir().join(format!("lp-cache-index-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        let root = d.join("binaries");
        std::fs::create_dir_all(&d).unwrap();
        let rec = d.join("run.lpr");
        std::fs::write(&rec, b"a recording's bytes").unwrap();
        let sha = hex(&Sha256::digest(b"a recording's bytes"));
        let m = |k: u8| Machine {
            host_key: vec![k; 32],
            name: format!("lab {k}"),
            arch: "x86_64".into(),
        };
        // A file of the same bytes that was here before the fetch (a local recording a lab
        // machine sent back): never that machine's.
        let local = d.join("local.lpr");
        std::fs::write(&local, b"a recording's bytes").unwrap();
        std::thread::sleep(std::time::Duration::from_millis(20));
        std::fs::remove_file(&rec).unwrap();
        std::fs::write(&rec, b"a recording's bytes").unwrap();
        // Never fetched: no machine.
        assert_eq!(origin(&root, &rec), Origin::Unknown);
        note_recording(&root, 19, &sha, &m(1), &rec).unwrap();
        assert_eq!(origin(&root, &rec), Origin::Fetched(m(1)));
        assert_eq!(origin(&root, &local), Origin::Unknown);
        let copy = d.join("copy.lpr");
        std::fs::copy(&rec, &copy).unwrap();
        assert_eq!(origin(&root, &copy), Origin::Fetched(m(1)));
        // Moved or copied: the same bytes, the same machine.
        let moved = d.join("moved.lpr");
        std::fs::rename(&rec, &moved).unwrap();
        assert_eq!(origin(&root, &moved), Origin::Fetched(m(1)));
        // Changed (same size): no machine.
        std::fs::write(&rec, b"a recording's bytez").unwrap();
        assert_eq!(origin(&root, &rec), Origin::Unknown);
        // The same bytes from another machine: neither's.
        note_recording(&root, 19, &sha, &m(1), &moved).unwrap();
        assert_eq!(origin(&root, &moved), Origin::Fetched(m(1)));
        note_recording(&root, 19, &sha, &m(2), &moved).unwrap();
        assert_eq!(origin(&root, &moved), Origin::Conflict);
        note_recording(&root, 19, &sha, &m(1), &moved).unwrap();
        assert_eq!(origin(&root, &moved), Origin::Conflict);
        // A damaged entry, or a link in its place, says nothing.
        let entry = recording_entry(&root, 19, &sha);
        std::fs::write(&entry, "labperf-recording 2\nhost-key 12\n").unwrap();
        assert_eq!(origin(&root, &moved), Origin::Unknown);
        // An entry of before `since` gives no machine.
        let v1 = format!(
            "labperf-recording 1\nhost-key {}\nname x\narch x86_64\n",
            hex(&[1; 32])
        );
        std::fs::write(&entry, v1).unwrap();
        assert_eq!(origin(&root, &moved), Origin::Unknown);
        std::fs::remove_file(&entry).unwrap();
        std::os::unix::fs::symlink("/etc/passwd", &entry).unwrap();
        assert_eq!(origin(&root, &moved), Origin::Unknown);
        // A name cannot add lines to its entry.
        let forged = Machine {
            name: format!("lab\nhost-key {}", hex(&[9; 32])),
            ..m(4)
        };
        note_recording(&root, 7, &"7".repeat(64), &forged, &d.join("none")).unwrap();
        let Some((Origin::Fetched(got), _)) =
            read_entry(&recording_entry(&root, 7, &"7".repeat(64)))
        else {
            panic!("no entry")
        };
        assert_eq!(got.host_key, vec![4; 32]);
        // Bounded: past the limit the oldest entries go.
        let dir = root.join("recordings");
        assert_eq!(std::fs::read_dir(&dir).unwrap().count(), 2);
        for i in 0..12u64 {
            note_recording(&root, i, &format!("{i:064x}"), &m(3), &rec).unwrap();
        }
        prune(&dir, 10);
        let left = std::fs::read_dir(&dir).unwrap().count();
        assert_eq!(left, 9);
        assert!(recording_entry(&root, 11, &format!("{:064x}", 11)).is_file());
        std::fs::remove_dir_all(&d).unwrap();
    }
}
