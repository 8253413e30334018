//! Reading a record file through the streaming decoder, with progress and clear errors.

use crate::progress::Progress;
use labperf_common::{Damage, Decoder, Event, Header, Losses, Record, Trailer};
use std::fs::File;
use std::io::Read;
use std::path::{Path, PathBuf};

#[derive(Debug, thiserror::Error)]
pub enum LoadError {
    #[error("Cannot open the record file {path}: {source}.")]
    Open {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("Cannot read the record file {path}: {source}.")]
    Read {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("{path} is not a labperf record file (it does not start with the LABPERF magic and holds no labperf frames).")]
    NotLabperf { path: PathBuf },
}

/// The non-record parts of a file, gathered while records are streamed to a callback.
#[derive(Debug, Default)]
pub struct FileInfo {
    pub wire_version: Option<u16>,
    pub header: Option<Header>,
    pub trailer: Option<Trailer>,
    pub damage: Vec<Damage>,
    pub losses: Losses,
    pub bytes: u64,
    pub records: u64,
}

/// Streams every record of `path` to `f`, in file order.
pub fn stream(path: &Path, mut f: impl FnMut(&Record)) -> Result<FileInfo, LoadError> {
    let mut file = File::open(path).map_err(|source| LoadError::Open {
        path: path.into(),
        source,
    })?;
    let total = file.metadata().map(|m| m.len()).unwrap_or(0);
    let mut dec = Decoder::new();
    let mut info = FileInfo {
        bytes: total,
        ..Default::default()
    };
    let mut buf = vec![0u8; 1 << 20];
    let mut done = 0u64;
    let mut progress = Progress::new("reading");
    let mut handle = |e: Event, info: &mut FileInfo| match e {
        Event::Version(v) => info.wire_version = Some(v),
        Event::Header(h) => info.header = Some(h),
        Event::Record(r) => {
            info.records += 1;
            f(&r)
        }
        Event::Trailer(t) => info.trailer = Some(t),
        Event::Damage(d) => info.damage.push(d),
    };
    loop {
        let n = file.read(&mut buf).map_err(|source| LoadError::Read {
            path: path.into(),
            source,
        })?;
        if n == 0 {
            break;
        }
        done += n as u64;
        progress.update(done, total);
        dec.push(&buf[..n]);
        while let Some(e) = dec.poll() {
            handle(e, &mut info);
        }
    }
    dec.finish();
    while let Some(e) = dec.poll() {
        handle(e, &mut info);
    }
    info.losses = dec.losses().clone();
    if info.wire_version.is_none()
        && info.header.is_none()
        && info.records == 0
        && info.trailer.is_none()
    {
        return Err(LoadError::NotLabperf { path: path.into() });
    }
    Ok(info)
}

impl FileInfo {
    /// One-paragraph warning about damage, or `None` when the file is intact.
    pub fn damage_warning(&self) -> Option<String> {
        if self.losses.is_clean() {
            return None;
        }
        let mut s = format!(
            "warning: the file is damaged: {}.",
            labperf_common::decode::describe_losses(&self.losses)
        );
        for d in self.damage.iter().take(5) {
            s.push_str(&format!("\n  - {d}"));
        }
        if self.damage.len() > 5 {
            s.push_str(&format!("\n  - ... and {} more", self.damage.len() - 5));
        }
        s.push_str("\n  Everything intact was decoded; `labperf info` lists all damage.");
        Some(s)
    }
}
