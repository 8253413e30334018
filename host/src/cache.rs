//! The local binary cache (`$XDG_CACHE_HOME/labperf/binaries`): ELF files fetched from lab
//! machines, stored under names labperf makes, never under a name a record file gives.
//!
//! An entry is `<root>/<build-id hex>/elf` (a GNU build-id of 4 to 64 bytes; beside it,
//! `debug`, its separate debug file of the same build-id), or, for a file without one, `<root>/by-path/<sha256 of "hostname\0path" hex>/elf`. Entries are
//! written through a new temporary file (`O_EXCL | O_NOFOLLOW`) renamed into a directory
//! that is checked to be a real directory inside the root, so no path from a lab machine
//! and no symbolic link can make a write land outside the cache.

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

/// Lower-case hex.
pub fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

/// Build-ids are hashes of 4 to 64 bytes (GNU ld: 20, lld fast: 8, md5: 16).
pub fn valid_build_id(id: &[u8]) -> bool {
    (4..=64).contains(&id.len())
}

/// The entry of a file with build-id `id`, if the id is a plausible one.
pub fn by_build_id(root: &Path, id: &[u8]) -> Option<PathBuf> {
    valid_build_id(id).then(|| root.join(hex(id)).join("elf"))
}

/// The entry of a file without a build-id: keyed by a hash of the machine's name and the path.
pub fn by_path(root: &Path, hostname: &str, path: &str) -> PathBuf {
    let mut h = Sha256::new();
    h.update(hostname.as_bytes());
    h.update([0]);
    h.update(path.as_bytes());
    root.join("by-path").join(hex(&h.finalize())).join("elf")
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

    /// Puts the file at `dest`, an entry of [`by_build_id`] or [`by_path`] under the root.
    pub fn store(self, dest: &Path) -> Result<(), CacheError> {
        let rel = dest
            .strip_prefix(&self.root)
            .map_err(|_| CacheError::OutsideCache(dest.into()))?;
        let parts: Vec<&str> = rel.iter().filter_map(|p| p.to_str()).collect();
        let hexname = |s: &str| !s.is_empty() && s.chars().all(|c| c.is_ascii_hexdigit());
        let ok = match parts.as_slice() {
            [id, "elf" | "debug"] => hexname(id),
            ["by-path", id, "elf"] => hexname(id),
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
        let bp = by_path(&root, "lab1", "/../../../../etc/passwd");
        assert!(bp.starts_with(root.join("by-path")) && !bp.to_string_lossy().contains(".."));
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
}
