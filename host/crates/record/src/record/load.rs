//! Reading a record file: `Source` (a file or bytes), `peek` at its header, the streaming reader with progress, its `FileInfo` (damage, losses) and clear errors.

use crate::files::mapped::{map_file, open_regular, FileError};
use crate::progress::Progress;
use labperf_common::{
    Damage, Decoder, Event, FrameEvent, Header, HeaderExt, Light, Losses, Record, Shared, Trailer,
    TrailerExt,
};
use std::io::Read;
use std::path::{Path, PathBuf};

#[derive(Debug, thiserror::Error)]
pub enum LoadError {
    #[error(transparent)]
    File(#[from] FileError),
    #[error("cannot read the record file {path}")]
    Read {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("{path} is not a labperf record file (it does not start with the LABPERF magic and holds no labperf frames).{hint}")]
    NotLabperf { path: PathBuf, hint: String },
    #[error("reading {path} was interrupted")]
    Stopped { path: PathBuf },
    #[error("{path} is not a TopDown recording (its header has no slots or topdown-total-slots event): record one with `labperf stat --topdown` or `labperf record --topdown`.")]
    NotTopDown { path: PathBuf },
}

/// The non-record parts of a file, gathered while records are streamed to a callback.
#[derive(Debug, Default)]
pub struct FileInfo {
    pub wire_version: Option<u16>,
    pub header: Option<Header>,
    pub header_ext: Option<HeaderExt>,
    pub trailer: Option<Trailer>,
    /// The trailer's extension: the recorded CPU time by the kernel's accounting.
    pub trailer_ext: Option<TrailerExt>,
    pub damage: Vec<Damage>,
    pub losses: Losses,
    pub bytes: u64,
    pub records: u64,
    /// Samples in the file.
    pub samples: u64,
    /// Records the kernel says it lost (the sum of the LOST records).
    pub kernel_lost: u64,
    /// Each event's samples and periods (by its index in the header), for the account of
    /// the CPU time they cover (`record::account`).
    pub per_event: Vec<EventTime>,
    /// Threads that ended while recorded (EXIT records): each may leave up to one period
    /// of its CPU time unsampled.
    pub exits: u64,
}

/// One event's samples and the sum of their periods: all, in kernel mode (their address
/// in the kernel's half), and in the idle task (pid 0, CPU-wide recordings).
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct EventTime {
    pub samples: u64,
    pub period: u64,
    pub kernel_period: u64,
    pub idle_period: u64,
}

impl FileInfo {
    /// Adds `samples` samples of event `event` of process `pid` at `ip` weighing `period`
    /// to [`FileInfo::per_event`]; an event the header does not have is not tallied.
    pub fn tally(&mut self, event: u32, pid: u32, ip: u64, samples: u64, period: u64) {
        let known = self.header.as_ref().map_or(0, |h| h.events.len());
        let e = event as usize;
        if e >= known {
            return;
        }
        if self.per_event.len() < known {
            self.per_event.resize(known, EventTime::default());
        }
        let t = &mut self.per_event[e];
        t.samples += samples;
        t.period = t.period.saturating_add(period);
        if ip >> 63 == 1 {
            t.kernel_period = t.kernel_period.saturating_add(period);
        }
        if pid == 0 {
            t.idle_period = t.idle_period.saturating_add(period);
        }
    }
}

/// A recording to read: a file (opened when read, or mapped once by [`Source::mapped`]),
/// or bytes already in memory (an import, tests, fuzzing); its name is what messages say.
#[derive(Clone)]
pub struct Source {
    pub name: PathBuf,
    bytes: Option<Shared>,
    /// Whether `name` is the file these bytes are (a mapped file), not a label.
    file: bool,
}

impl Source {
    pub fn path(p: &Path) -> Source {
        Source {
            name: p.into(),
            bytes: None,
            file: true,
        }
    }

    pub fn bytes(name: &str, b: Shared) -> Source {
        Source {
            name: name.into(),
            bytes: Some(b),
            file: false,
        }
    }

    /// The file at `p`, opened and memory-mapped now, once: every later pass over it (the
    /// header's peek, each view's stream) reads this mapping, not the path again.
    pub fn mapped(p: &Path) -> Result<Source, FileError> {
        Ok(Source {
            name: p.into(),
            bytes: Some(map_file(p)?),
            file: true,
        })
    }

    /// The file this source reads, when it is one (not bytes of an import or a test).
    pub fn file(&self) -> Option<&Path> {
        self.file.then_some(self.name.as_path())
    }

    /// The whole input, shared (the file memory-mapped).
    pub fn data(&self) -> Result<Shared, LoadError> {
        match &self.bytes {
            Some(b) => Ok(b.clone()),
            None => Ok(map_file(&self.name)?),
        }
    }
}

impl From<&Path> for Source {
    fn from(p: &Path) -> Source {
        Source::path(p)
    }
}

/// Streams every record of `src` to `f`, in file order.
pub fn stream(src: &Source, mut f: impl FnMut(&Record)) -> Result<FileInfo, LoadError> {
    let path = &src.name;
    let info = read(src, |dec, info| {
        while let Some(e) = dec.poll() {
            info.take(e, &mut f);
        }
    })?;
    check_labperf(path, &info)?;
    Ok(info)
}

/// Every record of `src` but its samples, in file order, for a pass that needs only the
/// side band (the mappings an unwinder needs before the first sample): samples are decoded
/// to their head, as [`crate::record::sideband`] reads them, their user stacks skipped
/// (not rebuilt). Damage is not said here: such a pass is
/// followed by a full one ([`stream`]), which says it.
pub fn stream_side_band(src: &Source, mut f: impl FnMut(&Record)) -> Result<(), LoadError> {
    let mut dec = Decoder::whole(src.data()?);
    while let Some(e) = dec.poll_frame() {
        match e {
            FrameEvent::Records(mut rr) => {
                let _ = rr.for_each_side_band(|l| {
                    if let Light::Record(r) = l {
                        f(&r)
                    }
                });
            }
            FrameEvent::Event(Event::Record(r)) => f(&r),
            FrameEvent::Event(_) => {}
        }
    }
    Ok(())
}

/// Like [`stream`], but gives up ([`LoadError::Stopped`]) as soon as `stop` says so: it
/// is asked before each MiB read.
pub fn stream_until(
    src: &Source,
    stop: &dyn Fn() -> bool,
    mut f: impl FnMut(&Record),
) -> Result<FileInfo, LoadError> {
    let path = &src.name;
    let info = read_until(src, stop, |dec, info| {
        while let Some(e) = dec.poll() {
            info.take(e, &mut f);
        }
    })?;
    check_labperf(path, &info)?;
    Ok(info)
}

/// Like [`stream`], and `f` also sees the header and its extension once they have been
/// read (they precede every record in an intact file).
pub fn stream_with_header(
    src: &Source,
    mut f: impl FnMut(Option<&Header>, Option<&HeaderExt>, &Record),
) -> Result<FileInfo, LoadError> {
    let path = &src.name;
    let info = read(src, |dec, info| {
        while let Some(e) = dec.poll() {
            match e {
                Event::Record(r) => {
                    info.records += 1;
                    info.count(&r);
                    f(info.header.as_ref(), info.header_ext.as_ref(), &r)
                }
                other => info.take(other, &mut |_| {}),
            }
        }
    })?;
    check_labperf(path, &info)?;
    Ok(info)
}

/// What a file says it is: its header and header extension, read from its start only
/// (they precede every record in an intact file). `None` where they are lost.
pub struct Peek {
    pub header: Option<Header>,
    pub header_ext: Option<HeaderExt>,
}

/// Reads the start of `src` until the first record: enough to know what the file is.
/// At most 64 MiB are read (a header is far smaller; damage before it is skipped).
pub fn peek(src: &Source) -> Result<Peek, LoadError> {
    const MAX: u64 = 64 << 20;
    let path = &src.name;
    let mut file: Box<dyn Read + '_> = match &src.bytes {
        Some(b) => {
            let v: &[u8] = (**b).as_ref();
            Box::new(v)
        }
        None => Box::new(open_regular(path, u64::MAX)?.0.take(MAX)),
    };
    let mut dec = Decoder::new();
    let mut p = Peek {
        header: None,
        header_ext: None,
    };
    let mut buf = vec![0u8; 64 << 10];
    let (mut done, mut read) = (false, 0u64);
    let mut labperf = false;
    while !done {
        let n = file.read(&mut buf).map_err(|source| LoadError::Read {
            path: path.into(),
            source,
        })?;
        read += n as u64;
        if n == 0 || read > MAX {
            dec.finish();
            done = true;
        } else {
            dec.push(&buf[..n]);
        }
        while let Some(e) = dec.poll() {
            match e {
                Event::Version(_) => labperf = true,
                Event::Header(h) => {
                    labperf = true;
                    p.header = Some(*h)
                }
                Event::HeaderExt(x) => p.header_ext = Some(*x),
                Event::Record(_) | Event::Trailer(_) | Event::TrailerExt(_) => {
                    labperf = true;
                    done = true;
                }
                Event::Damage(_) => {}
            }
            if done {
                break;
            }
        }
    }
    if !labperf {
        return Err(not_labperf(path));
    }
    Ok(p)
}

/// The error for a file that holds no labperf frames, with what it is and the remedy when
/// its first bytes tell (perf's perf.data, gzip, pprof, JSON…).
fn not_labperf(path: &Path) -> LoadError {
    use crate::files::kind::{of_file, Kind};
    let regular = std::fs::metadata(path).is_ok_and(|m| m.is_file());
    let hint = match of_file(path).filter(|_| regular) {
        // A labperf file without a frame that decodes is damaged from its start: the
        // error says what it lacks.
        None | Some(Kind::Labperf) => String::new(),
        Some(k) => format!(
            " It is {}: {}.",
            k.what(),
            k.remedy(&crate::text::show(&path.display().to_string()))
        ),
    };
    LoadError::NotLabperf {
        path: path.into(),
        hint,
    }
}

pub(crate) fn check_labperf(path: &Path, info: &FileInfo) -> Result<(), LoadError> {
    if info.wire_version.is_none()
        && info.header.is_none()
        && info.records == 0
        && info.trailer.is_none()
    {
        return Err(not_labperf(path));
    }
    Ok(())
}

/// Reads `src` in 1 MiB pieces into a decoder; `drain` takes out what is decodable.
fn read(
    src: &Source,
    drain: impl FnMut(&mut Decoder, &mut FileInfo),
) -> Result<FileInfo, LoadError> {
    read_until(src, &|| false, drain)
}

fn read_until(
    src: &Source,
    stop: &dyn Fn() -> bool,
    mut drain: impl FnMut(&mut Decoder, &mut FileInfo),
) -> Result<FileInfo, LoadError> {
    let path = &src.name;
    let (mut file, total): (Box<dyn Read + '_>, u64) = match &src.bytes {
        Some(b) => {
            let v: &[u8] = (**b).as_ref();
            (Box::new(v), v.len() as u64)
        }
        None => {
            let (file, total, _) = open_regular(path, u64::MAX)?;
            // Read no further than the size the file had when opened, even if it grows.
            (Box::new(file.take(total)), total)
        }
    };
    let mut dec = Decoder::new();
    let mut info = FileInfo {
        bytes: total,
        ..Default::default()
    };
    let mut buf = vec![0u8; (total as usize).clamp(4096, 1 << 20)];
    let mut done = 0u64;
    let mut progress = Progress::new("reading");
    loop {
        if stop() {
            return Err(LoadError::Stopped { path: path.into() });
        }
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
        drain(&mut dec, &mut info);
    }
    dec.finish();
    drain(&mut dec, &mut info);
    info.losses = dec.losses().clone();
    if info.wire_version.is_none()
        && info.header.is_none()
        && info.records == 0
        && info.trailer.is_none()
    {
        return Err(not_labperf(path));
    }
    Ok(info)
}

impl FileInfo {
    pub fn take(&mut self, e: Event, f: &mut impl FnMut(&Record)) {
        match e {
            Event::Version(v) => self.wire_version = Some(v),
            Event::Header(h) => self.header = Some(*h),
            Event::HeaderExt(x) => self.header_ext = Some(*x),
            Event::Record(r) => {
                self.records += 1;
                self.count(&r);
                f(&r)
            }
            Event::Trailer(t) => self.trailer = Some(*t),
            Event::TrailerExt(x) => self.trailer_ext = Some(*x),
            Event::Damage(d) => self.damage.push(d),
        }
    }

    fn count(&mut self, r: &Record) {
        match r {
            Record::Sample(s) => {
                self.samples += 1;
                self.tally(s.event, s.pid, s.ip, 1, s.period);
            }
            Record::Exit(_) => self.exits += 1,
            Record::Lost(l) => self.kernel_lost = self.kernel_lost.saturating_add(l.lost),
            _ => {}
        }
    }

    /// What a reader should know before trusting a report of this file: damage, and
    /// samples the kernel lost (with their share of all the samples it produced).
    pub fn warnings(&self) -> Vec<String> {
        let mut w: Vec<String> = self.damage_warning().into_iter().collect();
        if self.kernel_lost > 0 {
            let all = self.samples.saturating_add(self.kernel_lost);
            w.push(format!(
                "warning: the kernel lost {} samples, {:.1}% of the {all} it produced (its ring buffer filled): the shares below leave them out; record with a longer period or more --mmap-pages",
                self.kernel_lost,
                100.0 * self.kernel_lost as f64 / all as f64
            ));
        }
        w
    }

    /// Whether anything of the file was lost or could not be decoded.
    pub fn damaged(&self) -> bool {
        !self.losses.is_clean()
    }

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
