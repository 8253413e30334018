//! Regular files opened and memory-mapped, bounded: never a device or a FIFO, never over a size limit; record files and the binaries they name alike.

use labperf_common::Shared;
use std::fs::File;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// Why a regular file could not be opened or mapped.
#[derive(Debug, thiserror::Error)]
pub enum FileError {
    #[error("cannot open the record file {path}")]
    Open {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("cannot read the record file {path}")]
    Read {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("{path} is not a regular file (a device, FIFO or directory): labperf reads record and binary files only")]
    NotRegular { path: PathBuf },
    #[error("{path} is {size} bytes, over the {max}-byte limit")]
    TooLarge { path: PathBuf, size: u64, max: u64 },
}

/// A read-only, pre-faulted memory map of a whole file.
struct Mmap {
    ptr: *const u8,
    len: usize,
}

// SAFETY: the mapping is read-only and private; it is only unmapped on drop.
unsafe impl Send for Mmap {}
// SAFETY: as above.
unsafe impl Sync for Mmap {}

impl AsRef<[u8]> for Mmap {
    fn as_ref(&self) -> &[u8] {
        // SAFETY: ptr..ptr+len is mapped for the life of self.
        unsafe { std::slice::from_raw_parts(self.ptr, self.len) }
    }
}

impl Drop for Mmap {
    fn drop(&mut self) {
        // SAFETY: unmapping our own mapping.
        unsafe { libc::munmap(self.ptr as *mut libc::c_void, self.len) };
    }
}

/// Opens `path` for reading only if it is a regular file of at most `max` bytes: never
/// blocks on a FIFO (opened non-blocking) and never reads a device. Returns the file, its
/// size and its (device, inode).
pub fn open_regular(path: &Path, max: u64) -> Result<(File, u64, (u64, u64)), FileError> {
    use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
    let file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK)
        .open(path)
        .map_err(|source| FileError::Open {
            path: path.into(),
            source,
        })?;
    let m = file.metadata().map_err(|source| FileError::Read {
        path: path.into(),
        source,
    })?;
    if !m.is_file() {
        return Err(FileError::NotRegular { path: path.into() });
    }
    if m.len() > max {
        return Err(FileError::TooLarge {
            path: path.into(),
            size: m.len(),
            max,
        });
    }
    Ok((file, m.len(), (m.dev(), m.ino())))
}

/// The whole regular file `path` (see [`open_regular`]) as shared input: a populated
/// memory map (no copy), or its bytes where it cannot be mapped; and its (device, inode).
pub fn map_regular_id(path: &Path, max: u64) -> Result<(Shared, (u64, u64)), FileError> {
    use std::os::fd::AsRawFd;
    let (file, len, id) = open_regular(path, max)?;
    let len = usize::try_from(len).map_err(|_| FileError::TooLarge {
        path: path.into(),
        size: len,
        max,
    })?;
    if len > 0 {
        // SAFETY: mapping a regular file we opened, read-only and private.
        let p = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ,
                libc::MAP_PRIVATE | libc::MAP_POPULATE,
                file.as_raw_fd(),
                0,
            )
        };
        if p != libc::MAP_FAILED {
            return Ok((
                Arc::new(Mmap {
                    ptr: p as *const u8,
                    len,
                }),
                id,
            ));
        }
    }
    let mut bytes = Vec::new();
    file.take(len as u64)
        .read_to_end(&mut bytes)
        .map_err(|source| FileError::Read {
            path: path.into(),
            source,
        })?;
    Ok((Arc::new(bytes), id))
}

/// [`map_regular_id`] without the id.
pub fn map_regular(path: &Path, max: u64) -> Result<Shared, FileError> {
    map_regular_id(path, max).map(|(d, _)| d)
}

/// A record file as shared input (see [`map_regular`]; record files have no size limit:
/// they are mapped, not copied).
pub fn map_file(path: &Path) -> Result<Shared, FileError> {
    map_regular(path, u64::MAX)
}
