//! `labperf import perf.data`: a recording made with plain `perf record` (read with the
//! `linux-perf-data` crate) re-encoded as a labperf record file, so every view and export
//! reads it.

use labperf_common::{
    Arch, Attr, Comm, CpuId, Encoder, Endian, EventDesc, Header, HeaderExt, Lost, Mmap2, Recipe,
    Record, Sample, Task, Throttle, Trailer, MAX_CALLCHAIN,
};
use linux_perf_data::linux_perf_event_reader::{
    EventRecord, HardwareEventId, Mmap2FileId, PerfEventType, SamplingPolicy, SoftwareCounterType,
};
use linux_perf_data::{PerfFileReader, PerfFileRecord};
use std::io::Write;

mod checked;

#[derive(Debug, thiserror::Error)]
pub enum ImportError {
    #[error("not a perf.data file perf can write ({0})")]
    Parse(#[from] linux_perf_data::Error),
    #[error(transparent)]
    Io(#[from] std::io::Error),
    /// A section outside the file, or a count its bytes cannot hold (checked before the
    /// parser reads it: see `checked.rs`).
    #[error("a damaged perf.data file: {0}")]
    Sections(String),
}

impl From<checked::CheckError> for ImportError {
    fn from(e: checked::CheckError) -> Self {
        match e {
            checked::CheckError::Io(e) => Self::Io(e),
            checked::CheckError::Damaged(why) => Self::Sections(why),
        }
    }
}

/// What an import found.
#[derive(Debug, Default)]
pub struct Imported {
    pub records: u64,
    pub samples: u64,
    /// perf's records labperf has no record for (context switches, aux...), by count.
    pub skipped: u64,
    /// Records whose contents the parser cannot take (an MMAP2 build-id of more than 20
    /// bytes, which the parser asserts against), left out.
    pub damaged: u64,
    /// Samples whose callchain was cut to labperf's [`MAX_CALLCHAIN`] innermost frames.
    pub cut_callchains: u64,
    /// Features of the file left out because their contents are damaged: (name, why).
    pub left_out: Vec<(&'static str, String)>,
}

/// Callchain context markers (PERF_CONTEXT_*) are the top 4095 values.
const CONTEXT_MAX: u64 = u64::MAX - 4095;
const PERF_CONTEXT_USER: u64 = u64::MAX - 511;

fn attr_of(a: &linux_perf_data::linux_perf_event_reader::PerfEventAttr) -> Attr {
    let (type_, config) = match a.type_ {
        PerfEventType::Hardware(id, _) => (
            0,
            match id {
                HardwareEventId::CpuCycles => 0,
                HardwareEventId::Instructions => 1,
                _ => u64::MAX,
            },
        ),
        PerfEventType::Software(t) => (
            1,
            match t {
                SoftwareCounterType::CpuClock => 0,
                SoftwareCounterType::TaskClock => 1,
                _ => u64::MAX,
            },
        ),
        PerfEventType::Tracepoint(id) => (2, id),
        _ => (u32::MAX, u64::MAX),
    };
    let (period, freq) = match a.sampling_policy {
        SamplingPolicy::NoSampling => (0, 0),
        SamplingPolicy::Period(p) => (p.get(), 0),
        SamplingPolicy::Frequency(f) => (f, 1 << 10),
    };
    Attr {
        type_,
        size: 0,
        config,
        sample_period_or_freq: period,
        sample_type: a.sample_format.bits(),
        read_format: a.read_format.bits(),
        flags: a.flags.bits() | freq,
        ..Default::default()
    }
}

/// The vDSO image perf saved in its build-id cache when it recorded the file
/// (`$PERF_BUILDID_DIR` or `~/.debug`, `[vdso]/<build-id>/vdso`), so that labperf names
/// `[vdso]` samples as perf does; `None` when the file names no vDSO or the image is not
/// on this machine. Only a regular file of at most 1 MiB whose build-id matches is taken.
fn vdso_image(perf_file: &linux_perf_data::PerfFile) -> Option<Vec<u8>> {
    let ids = perf_file.build_ids().ok()?;
    let info = ids.get(&linux_perf_data::DsoKey::Vdso64)?;
    let hex: String = info.build_id.iter().map(|b| format!("{b:02x}")).collect();
    let dir = std::env::var_os("PERF_BUILDID_DIR")
        .map(std::path::PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| std::path::Path::new(&h).join(".debug")))?;
    let path = dir.join("[vdso]").join(&hex).join("vdso");
    let data = crate::load::map_regular(&path, 1 << 20).ok()?;
    let bytes: &[u8] = (*data).as_ref();
    let elf = crate::symbols::Elf::parse(bytes).ok()?;
    (elf.build_id.as_deref() == Some(&info.build_id[..])).then(|| bytes.to_vec())
}

/// `out.part` while it is written: removed when dropped before [`Part::done`], so no error
/// (nor a panic, which unwinds in every build of the host) leaves it behind.
struct Part {
    path: std::path::PathBuf,
    done: bool,
}

impl Part {
    fn done(mut self) {
        self.done = true;
    }
}

impl Drop for Part {
    fn drop(&mut self) {
        if !self.done {
            let _ = std::fs::remove_file(&self.path);
        }
    }
}

/// Reads `perf_data` and writes the labperf recording `out` (through `out.part`, which no
/// error leaves behind).
pub fn import(
    perf_data: impl std::io::Read + std::io::Seek,
    out: &std::path::Path,
) -> Result<Imported, ImportError> {
    let mut part = out.as_os_str().to_owned();
    part.push(".part");
    let part = Part {
        path: part.into(),
        done: false,
    };
    let mut w = std::io::BufWriter::new(std::fs::File::create(&part.path)?);
    let got = import_to(perf_data, &mut w)?;
    w.into_inner().map_err(|e| e.into_error())?.sync_all()?;
    std::fs::rename(&part.path, out)?;
    part.done();
    Ok(got)
}

/// Reads `perf_data` and writes the labperf recording to `w`: the header and the features
/// checked first (`checked.rs`), so the parser never allocates more than the file holds.
pub fn import_to(
    perf_data: impl std::io::Read + std::io::Seek,
    w: &mut impl Write,
) -> Result<Imported, ImportError> {
    let mut checked = checked::Checked::new(perf_data)?;
    let left_out = std::mem::take(&mut checked.left_out);
    let PerfFileReader {
        mut perf_file,
        mut record_iter,
    } = PerfFileReader::parse_file(std::io::BufReader::new(checked))?;
    let arch = match perf_file.arch()?.unwrap_or("") {
        "x86_64" => Arch::X86_64,
        "aarch64" | "arm64" => Arch::Aarch64,
        "alpha" => Arch::Alpha,
        other => Arch::Other(other.to_string()),
    };
    let events: Vec<EventDesc> = perf_file
        .event_attributes()
        .iter()
        .map(|d| EventDesc {
            name: d.name().unwrap_or("event").to_string(),
            attr: attr_of(&d.attr),
            leader: None,
        })
        .collect();
    let header = Header {
        agent_version: format!(
            "perf {} (labperf import)",
            perf_file.perf_version()?.unwrap_or("?")
        ),
        arch,
        endian: Endian::Little,
        kernel_release: perf_file.os_release()?.unwrap_or("").to_string(),
        cpu: CpuId::Unknown {
            cpuinfo: perf_file.cpu_desc()?.unwrap_or("").to_string(),
        },
        hostname: perf_file.hostname()?.unwrap_or("").to_string(),
        command: perf_file
            .cmdline()?
            .unwrap_or_default()
            .iter()
            .map(|s| s.to_string())
            .collect(),
        clock_id: 1,
        start_time_ns: 0,
        start_realtime_ns: 0,
        events,
        mode: Recipe::Sample { group_read: false }.mode_string(),
        notes: vec!["imported from perf.data".into()],
    };
    let mut got = write_records(&mut perf_file, &mut record_iter, &header, w)?;
    got.left_out = left_out;
    Ok(got)
}

/// PERF_RECORD_MMAP2, and its misc bit saying it carries a build-id (instead of the
/// device and inode).
const MMAP2: u32 = 10;
const MISC_MMAP_BUILD_ID: u16 = 1 << 14;

/// An MMAP2 record whose build-id length (the byte after pid, tid, addr, len and pgoff)
/// is over 20: `linux-perf-event-reader` asserts against it.
fn bad_mmap2_build_id(r: &linux_perf_data::linux_perf_event_reader::RawEventRecord) -> bool {
    r.record_type.0 == MMAP2
        && r.misc & MISC_MMAP_BUILD_ID != 0
        && r.data.get(32..33).is_some_and(|b| b.as_slice()[0] > 20)
}

/// The labperf file's frames, from the header to the trailer.
fn write_records<R: std::io::Read + std::io::Seek>(
    perf_file: &mut linux_perf_data::PerfFile,
    record_iter: &mut linux_perf_data::PerfRecordIter<R>,
    header: &Header,
    w: &mut impl Write,
) -> Result<Imported, ImportError> {
    let vdso = vdso_image(perf_file);
    let period_of: Vec<u64> = header
        .events
        .iter()
        .map(|e| e.attr.sample_period_or_freq)
        .collect();
    let mut e = Encoder::new();
    w.write_all(&Encoder::prelude())?;
    w.write_all(&e.header_frame(header))?;
    w.write_all(&e.header_ext_frame(&HeaderExt {
        recipe: Some(Recipe::Sample { group_read: false }),
        vdso,
        ..Default::default()
    }))?;
    let mut got = Imported::default();
    let mut lost = 0u64;
    let (mut first, mut last) = (None::<u64>, 0u64);
    while let Some(r) = record_iter.next_record(perf_file)? {
        let PerfFileRecord::EventRecord { attr_index, record } = r else {
            continue;
        };
        if bad_mmap2_build_id(&record) {
            got.damaged += 1;
            continue;
        }
        let Ok(parsed) = record.parse() else {
            got.damaged += 1;
            continue;
        };
        let rec = match parsed {
            EventRecord::Sample(s) => {
                let mut callchain: Vec<u64> = Vec::new();
                if let Some(cc) = &s.callchain {
                    let all: Vec<u64> = (0..cc.len()).filter_map(|i| cc.get(i)).collect();
                    // The user part: after PERF_CONTEXT_USER when marked, without markers.
                    let user = all
                        .iter()
                        .position(|&a| a == PERF_CONTEXT_USER)
                        .map_or(&all[..], |i| &all[i + 1..]);
                    callchain = user.iter().copied().filter(|&a| a < CONTEXT_MAX).collect();
                    // A labperf sample holds the innermost MAX_CALLCHAIN frames (a perf
                    // record of 64 KiB holds up to 8,190).
                    if callchain.len() > MAX_CALLCHAIN {
                        callchain.truncate(MAX_CALLCHAIN);
                        got.cut_callchains += 1;
                    }
                }
                if let Some(t) = s.timestamp {
                    first.get_or_insert(t);
                    last = last.max(t);
                }
                got.samples += 1;
                Record::Sample(Sample {
                    event: attr_index as u32,
                    pid: s.pid.unwrap_or(0) as u32,
                    tid: s.tid.unwrap_or(0) as u32,
                    ip: s.ip.unwrap_or(0),
                    time: s.timestamp.unwrap_or(0),
                    period: s
                        .period
                        .unwrap_or(period_of.get(attr_index).copied().unwrap_or(1)),
                    cpu: s.cpu.unwrap_or(0),
                    callchain,
                    addr: s.addr,
                    ..Default::default()
                })
            }
            EventRecord::Mmap2(m) => Record::Mmap2(Mmap2 {
                pid: m.pid as u32,
                tid: m.tid as u32,
                addr: m.address,
                len: m.length,
                pgoff: m.page_offset,
                prot: m.protection,
                flags: m.flags,
                build_id: match &m.file_id {
                    Mmap2FileId::BuildId(b) => Some(b.clone()),
                    Mmap2FileId::InodeAndVersion(_) => None,
                },
                path: String::from_utf8_lossy(&m.path.as_slice()).into_owned(),
            }),
            EventRecord::Mmap(m) => Record::Mmap2(Mmap2 {
                pid: m.pid as u32,
                tid: m.tid as u32,
                addr: m.address,
                len: m.length,
                pgoff: m.page_offset,
                prot: if m.is_executable { 5 } else { 1 },
                flags: 2,
                build_id: None,
                path: String::from_utf8_lossy(&m.path.as_slice()).into_owned(),
            }),
            EventRecord::Comm(c) => Record::Comm(Comm {
                pid: c.pid as u32,
                tid: c.tid as u32,
                comm: String::from_utf8_lossy(&c.name.as_slice()).into_owned(),
                exec: c.is_execve,
            }),
            EventRecord::Fork(f) | EventRecord::Exit(f) => {
                let t = Task {
                    pid: f.pid as u32,
                    ppid: f.ppid as u32,
                    tid: f.tid as u32,
                    ptid: f.ptid as u32,
                    time: f.timestamp,
                };
                if matches!(record.record_type.0, 4) {
                    Record::Exit(t)
                } else {
                    Record::Fork(t)
                }
            }
            EventRecord::Lost(l) => {
                lost += l.count;
                Record::Lost(Lost {
                    event: attr_index as u32,
                    lost: l.count,
                })
            }
            EventRecord::Throttle(t) | EventRecord::Unthrottle(t) => Record::Throttle(Throttle {
                time: t.timestamp,
                event: attr_index as u32,
                throttle: record.record_type.0 == 5,
            }),
            _ => {
                got.skipped += 1;
                continue;
            }
        };
        e.push(&rec);
        got.records += 1;
        if e.pending_bytes() >= 64 * 1024 {
            if let Some(f) = e.flush() {
                w.write_all(&f)?;
            }
        }
    }
    if let Some(f) = e.flush() {
        w.write_all(&f)?;
    }
    let frames = e.frames();
    w.write_all(&e.trailer_frame(&Trailer {
        records: got.records,
        frames,
        samples: got.samples,
        lost,
        duration_ns: last.saturating_sub(first.unwrap_or(last)),
        ..Default::default()
    }))?;
    w.flush()?;
    Ok(got)
}
