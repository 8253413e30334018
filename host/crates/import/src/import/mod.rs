//! `labperf import perf.data`: a recording made with plain `perf record` (read with the
//! `linux-perf-data` crate) re-encoded as a labperf record file, so every view and export
//! reads it. Kernel addresses are named as perf names them: from the copy of kallsyms perf
//! kept in its build-id cache for the recorded kernel, or from this machine's when it runs
//! that kernel with the same layout.

use labperf_common::{
    Arch, Attr, Comm, CpuId, Encoder, Endian, EventDesc, Header, HeaderExt, Lost, Mmap2, Recipe,
    Record, Sample, Task, Throttle, Trailer, MAX_CALLCHAIN,
};
use linux_perf_data::linux_perf_event_reader::{
    EventRecord, HardwareEventId, Mmap2FileId, PerfEventType, SampleRecord, SamplingPolicy,
    SoftwareCounterType,
};
use linux_perf_data::{PerfFileReader, PerfFileRecord};
use std::io::Write;

mod checked;
mod features;
pub use features::record_kind;
mod records;
pub use records::ROUND_BYTES;

#[derive(Debug, thiserror::Error)]
pub enum ImportError {
    /// The parser's refusal, said once (not also as a source, which error chains would
    /// print again).
    #[error("not a perf.data file perf can write: {0}")]
    Parse(linux_perf_data::Error),
    /// The input ends inside perf's header or a record.
    #[error("the perf.data ends too soon (inside its header or a record): was it cut short?")]
    Short,
    #[error(transparent)]
    Io(#[from] std::io::Error),
    /// A section outside the file, or a count its bytes cannot hold (checked before the
    /// parser reads it: see `checked.rs`).
    #[error("a damaged perf.data file: {0}")]
    Sections(String),
    #[error(transparent)]
    Output(#[from] crate::files::output::OutputError),
    /// A file perf reads that labperf does not read yet.
    #[error("{0}")]
    Unsupported(String),
}

impl From<linux_perf_data::Error> for ImportError {
    fn from(e: linux_perf_data::Error) -> Self {
        match e {
            linux_perf_data::Error::IoError(io)
                if io.kind() == std::io::ErrorKind::UnexpectedEof =>
            {
                Self::Short
            }
            e => Self::Parse(e),
        }
    }
}

impl From<checked::CheckError> for ImportError {
    fn from(e: checked::CheckError) -> Self {
        match e {
            checked::CheckError::Io(e) => Self::Io(e),
            checked::CheckError::Damaged(why) => Self::Sections(why),
            checked::CheckError::Unsupported(why) => Self::Unsupported(why),
        }
    }
}

/// What an import found.
#[derive(Debug, Default)]
pub struct Imported {
    pub records: u64,
    pub samples: u64,
    /// perf's records labperf has no record for (context switches, AUX, perf's own
    /// metadata...): how many of each kind, by perf's name (`PERF_RECORD_` left off).
    pub skipped: std::collections::BTreeMap<&'static str, u64>,
    /// Samples that carried a branch stack (`perf record -b`/`-j`): imported without it
    /// (a labperf sample holds no branch stack).
    pub branch_stacks: u64,
    /// AUX area trace data (Intel PT, Arm SPE, CoreSight): AUXTRACE records and their bytes,
    /// left out (labperf decodes no trace).
    pub aux: (u64, u64),
    /// zstd-compressed records (`perf record -z`): their bytes and what they decompressed to.
    pub compressed: (u64, u64),
    /// Whether the input was a `perf record -o -` stream (pipe mode).
    pub pipe: bool,
    /// Pipe mode: round boundaries added to a stream that had none for long.
    pub rounds_added: u64,
    /// Where the input ends inside a record (a stream cut off): what came before is
    /// imported.
    pub cut: Option<String>,
    /// Where the kernel addresses the samples name were named from, or why they were not;
    /// `None` when no sample names a kernel address.
    pub kernel: Option<String>,
    /// Records whose contents the parser cannot take (an MMAP2 build-id of more than 20
    /// bytes, which the parser asserts against), left out.
    pub damaged: u64,
    /// Samples whose callchain was cut to labperf's [`MAX_CALLCHAIN`] innermost frames.
    pub cut_callchains: u64,
    /// Features of the file left out because their contents are damaged: (name, why).
    pub left_out: Vec<(&'static str, String)>,
}

/// Callchain context markers (PERF_CONTEXT_*) are the top 4095 values, from PERF_CONTEXT_MAX
/// (-4095) up.
const CONTEXT_MAX: u64 = -4095i64 as u64;

/// The context markers perf knows (PERF_CONTEXT_HV, KERNEL, USER, GUEST, GUEST_KERNEL,
/// GUEST_USER: -32, -128, -512, -2048, -2176, -2560).
const CONTEXTS: [u64; 6] = [
    -32i64 as u64,
    -128i64 as u64,
    -512i64 as u64,
    -2048i64 as u64,
    -2176i64 as u64,
    -2560i64 as u64,
];

/// Most bytes of a kallsyms text read (this machine's is about 5 MiB with every module).
const MAX_KALLSYMS: u64 = 64 << 20;

/// PERF_SAMPLE_STACK_USER.
const SAMPLE_STACK_USER: u64 = 1 << 13;

/// The user registers the host's unwinder reads (`unwind.rs`), as perf numbers them:
/// x86_64 bp, sp, ip; aarch64 x29, x30, sp, pc. An imported user stack keeps these alone.
fn unwind_regs(arch: &Arch) -> u64 {
    match arch {
        Arch::X86_64 => 1 << 6 | 1 << 7 | 1 << 8,
        Arch::Aarch64 => 0xf << 29,
        _ => 0,
    }
}

/// The stack pointer's number among perf's user registers.
fn sp_reg(arch: &Arch) -> Option<u64> {
    match arch {
        Arch::X86_64 => Some(7),
        Arch::Aarch64 => Some(31),
        _ => None,
    }
}

fn attr_of(a: &linux_perf_data::linux_perf_event_reader::PerfEventAttr, arch: &Arch) -> Attr {
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
    // `--call-graph dwarf`: the registers kept (those perf took of the unwinder's) and
    // the stack size asked.
    let sample_type = a.sample_format.bits();
    let (regs, stack) = if sample_type & SAMPLE_STACK_USER != 0 {
        let want = unwind_regs(arch);
        if want != 0 && a.sample_regs_user & want == want {
            (want, a.sample_stack_user)
        } else {
            (0, 0)
        }
    } else {
        (0, 0)
    };
    Attr {
        type_,
        size: 0,
        config,
        sample_period_or_freq: period,
        sample_type: if regs == 0 {
            sample_type & !SAMPLE_STACK_USER
        } else {
            sample_type
        },
        read_format: a.read_format.bits(),
        flags: a.flags.bits() | freq,
        sample_regs_user: regs,
        sample_stack_user: stack,
        sample_max_stack: a.sample_max_stack,
        ..Default::default()
    }
}

/// The vDSO image perf saved in its build-id cache when it recorded the file
/// (`$PERF_BUILDID_DIR` or `~/.debug`, `[vdso]/<build-id>/vdso`), so that labperf names
/// `[vdso]` samples as perf does; else this process's own vDSO when it is the recorded one:
/// of the recorded build-id, or, for a file that lists no build-ids (a `perf record -o -`
/// stream, `-B`), when this machine runs the recorded kernel release (perf's own choice).
/// `None` when the file names no vDSO image this machine has. Only an image of at most
/// 1 MiB whose build-id matches is taken.
fn vdso_image(perf_file: &linux_perf_data::PerfFile) -> Option<Vec<u8>> {
    let ids = perf_file.build_ids().ok().unwrap_or_default();
    let Some(info) = ids.get(&linux_perf_data::DsoKey::Vdso64) else {
        let release = perf_file.os_release().ok().flatten()?;
        let running = std::fs::read_to_string("/proc/sys/kernel/osrelease").ok()?;
        return (ids.is_empty() && running.trim() == release)
            .then(running_vdso)
            .flatten();
    };
    let hex: String = info.build_id.iter().map(|b| format!("{b:02x}")).collect();
    let build_id_of = |bytes: &[u8]| {
        crate::symbolize::symbols::Elf::parse(bytes)
            .ok()
            .and_then(|elf| elf.build_id)
    };
    let cached = crate::symbolize::symbols::perf_buildid_dir()
        .map(|dir| dir.join("[vdso]").join(&hex).join("vdso"))
        .and_then(|path| crate::files::mapped::map_regular(&path, 1 << 20).ok())
        .map(|data| {
            let bytes: &[u8] = (*data).as_ref();
            bytes.to_vec()
        });
    cached
        .into_iter()
        .chain(running_vdso())
        .find(|bytes| build_id_of(bytes).as_deref() == Some(&info.build_id[..]))
}

/// This process's vDSO image (the `[vdso]` mapping of /proc/self/maps, read through
/// /proc/self/mem), at most 1 MiB.
fn running_vdso() -> Option<Vec<u8>> {
    use std::io::{Read, Seek};
    let maps = std::fs::read_to_string("/proc/self/maps").ok()?;
    let line = maps.lines().find(|l| l.ends_with("[vdso]"))?;
    let (start, end) = line.split_whitespace().next()?.split_once('-')?;
    let (start, end) = (
        u64::from_str_radix(start, 16).ok()?,
        u64::from_str_radix(end, 16).ok()?,
    );
    if end <= start || end - start > 1 << 20 {
        return None;
    }
    let mut mem = std::fs::File::open("/proc/self/mem").ok()?;
    mem.seek(std::io::SeekFrom::Start(start)).ok()?;
    let mut image = vec![0u8; (end - start) as usize];
    mem.read_exact(&mut image).ok()?;
    Some(image)
}

/// The recorded kernel's build-id, as perf listed it (`perf buildid-list`).
fn kernel_build_id(perf_file: &linux_perf_data::PerfFile) -> Option<Vec<u8>> {
    let ids = perf_file.build_ids().ok()?;
    ids.get(&linux_perf_data::DsoKey::Kernel)
        .map(|i| i.build_id.clone())
}

/// The running kernel's build-id: the GNU build-id note of `/sys/kernel/notes`.
fn running_kernel_build_id() -> Option<Vec<u8>> {
    use std::io::Read;
    let mut b = Vec::new();
    std::fs::File::open("/sys/kernel/notes")
        .ok()?
        .take(64 << 10)
        .read_to_end(&mut b)
        .ok()?;
    // ELF notes: namesz, descsz, type (native endian), the name and the desc, each padded
    // to 4 bytes; the build-id is type 3 (NT_GNU_BUILD_ID) named "GNU".
    let mut at = 0usize;
    let u32_at = |at: usize| -> Option<usize> {
        Some(u32::from_ne_bytes(b.get(at..at + 4)?.try_into().ok()?) as usize)
    };
    while at + 12 <= b.len() {
        let (namesz, descsz, kind) = (u32_at(at)?, u32_at(at + 4)?, u32_at(at + 8)?);
        let name = at + 12;
        let desc = name + namesz.div_ceil(4) * 4;
        let end = desc + descsz.div_ceil(4) * 4;
        if kind == 3 && b.get(name..name + namesz)? == b"GNU\0" {
            return b.get(desc..desc + descsz).map(<[u8]>::to_vec);
        }
        at = end;
    }
    None
}

/// The address kallsyms text gives `_text` (where the kernel image starts).
fn text_address(kallsyms: &[u8]) -> Option<u64> {
    kallsyms.split(|&c| c == b'\n').find_map(|l| {
        let mut w = l.split(|&c| c == b' ' || c == b'\t');
        let (a, _, name) = (w.next()?, w.next()?, w.next()?);
        (name == b"_text")
            .then(|| u64::from_str_radix(std::str::from_utf8(a).ok()?, 16).ok())
            .flatten()
    })
}

/// At most [`MAX_KALLSYMS`] bytes of the file at `path` (a regular file, or /proc's).
fn read_bounded(path: &std::path::Path) -> Option<Vec<u8>> {
    use std::io::Read;
    let f = std::fs::File::open(path).ok()?;
    if !f.metadata().ok()?.is_file() {
        return None;
    }
    let mut b = Vec::new();
    f.take(MAX_KALLSYMS).read_to_end(&mut b).ok()?;
    Some(b)
}

/// The kallsyms text that names the recorded kernel's addresses, and where it came from;
/// else why there is none. perf's own choice, in its order: the copy perf record kept in
/// its build-id cache (`$PERF_BUILDID_DIR` or `~/.debug`, `[kernel.kallsyms]/<build-id>/
/// kallsyms`), then this machine's `/proc/kallsyms` when it runs the recorded kernel (the
/// same build-id). Either must put `_text` where the recording's kernel map starts
/// (`text`), so a kernel relocated otherwise (KASLR, another boot) names nothing wrongly.
fn kallsyms_for(
    perf_file: &linux_perf_data::PerfFile,
    text: Option<u64>,
) -> Result<(Vec<u8>, String), String> {
    let Some(id) = kernel_build_id(perf_file) else {
        // A stream (`perf record -o -`), `-z` or `-B` recording lists no build-ids: this
        // machine's kallsyms when it runs a kernel of the recorded release with `_text`
        // where the recording's kernel map starts.
        let release = perf_file.os_release().ok().flatten().unwrap_or("");
        let running = std::fs::read_to_string("/proc/sys/kernel/osrelease").unwrap_or_default();
        if release.is_empty() || running.trim() != release {
            return Err(format!(
                "the file names no kernel build-id, and this machine runs another kernel \
                 than its {release:?}"
            ));
        }
        return match read_bounded(std::path::Path::new("/proc/kallsyms")) {
            Some(bytes) => match (text_address(&bytes), text) {
                (Some(a), Some(t)) if a == t && a != 0 => {
                    Ok((bytes, "/proc/kallsyms (the recorded kernel release)".into()))
                }
                _ => Err(
                    "the file names no kernel build-id, and /proc/kallsyms puts _text \
                     elsewhere than the recording's kernel map"
                        .into(),
                ),
            },
            None => {
                Err("the file names no kernel build-id, and /proc/kallsyms is not there".into())
            }
        };
    };
    let hex: String = id.iter().map(|b| format!("{b:02x}")).collect();
    let dir = crate::symbolize::symbols::perf_buildid_dir();
    let cached = dir.map(|d| d.join("[kernel.kallsyms]").join(&hex).join("kallsyms"));
    let mut tried = Vec::new();
    let mut candidates: Vec<(std::path::PathBuf, bool)> = Vec::new();
    if let Some(c) = cached {
        candidates.push((c, true));
    }
    let running = running_kernel_build_id();
    candidates.push(("/proc/kallsyms".into(), running.as_deref() == Some(&id[..])));
    for (path, same_kernel) in candidates {
        if !same_kernel {
            tried.push(format!(
                "{}: this machine runs another kernel",
                path.display()
            ));
            continue;
        }
        let Some(bytes) = read_bounded(&path) else {
            tried.push(format!("{}: not there", path.display()));
            continue;
        };
        match (text_address(&bytes), text) {
            (Some(a), Some(t)) if a != t => tried.push(format!(
                "{}: its _text is at {a:#x}, the recording's kernel at {t:#x}",
                path.display()
            )),
            (None, _) | (Some(0), _) => tried.push(format!(
                "{}: no address for _text (kptr_restrict?)",
                path.display()
            )),
            _ => return Ok((bytes, path.display().to_string())),
        }
    }
    Err(format!(
        "no kallsyms of kernel build-id {hex}: {}",
        tried.join("; ")
    ))
}

/// How a perf.data input starts: a whole file's header, or a pipe's 16-byte one.
fn is_pipe_header(head: &[u8]) -> bool {
    let size = match head.get(..8) {
        Some(b"PERFILE2") => head
            .get(8..16)
            .map(|b| u64::from_le_bytes(b.try_into().unwrap())),
        Some(b"2ELIFREP") => head
            .get(8..16)
            .map(|b| u64::from_be_bytes(b.try_into().unwrap())),
        _ => None,
    };
    size == Some(16)
}

/// Reads `perf_data` and writes the labperf recording `out` (by [`crate::files::output`]'s rule:
/// a regular file through a temporary beside it, `-` standard output, a device or FIFO
/// straight through).
pub fn import(
    perf_data: impl std::io::Read + std::io::Seek,
    out: &std::path::Path,
) -> Result<Imported, ImportError> {
    // Dropped on an error (or a panic unwinding), its temporary file is removed.
    let mut w = crate::files::output::Output::create(out)?;
    let got = import_to(perf_data, &mut w)?;
    w.commit()?;
    Ok(got)
}

/// [`import`] of a stream that cannot seek (standard input): a `perf record -o -` stream,
/// read as it comes.
pub fn import_stream(
    perf_data: impl std::io::Read,
    out: &std::path::Path,
) -> Result<Imported, ImportError> {
    let mut w = crate::files::output::Output::create(out)?;
    let got = import_pipe_to(perf_data, &mut w)?;
    w.commit()?;
    Ok(got)
}

/// Reads `perf_data` and writes the labperf recording to `w`: a whole file's header and
/// features checked first (`checked.rs`), so the parser never allocates more than the file
/// holds; a pipe's stream (`perf record -o -` saved to a file) read as a stream.
pub fn import_to(
    mut perf_data: impl std::io::Read + std::io::Seek,
    w: &mut impl Write,
) -> Result<Imported, ImportError> {
    let mut head = [0u8; 16];
    let n = features::read_up_to(&mut perf_data, &mut head)?;
    perf_data.seek(std::io::SeekFrom::Start(0))?;
    if is_pipe_header(&head[..n]) {
        return import_pipe_to(perf_data, w);
    }
    let mut checked = checked::Checked::new(perf_data)?;
    let left_out = std::mem::take(&mut checked.left_out);
    let guard = checked.guard.clone();
    let PerfFileReader {
        mut perf_file,
        mut record_iter,
    } = PerfFileReader::parse_file(std::io::BufReader::new(checked))?;
    let header = header_of(&perf_file)?;
    let got = write_records(&mut perf_file, &mut record_iter, &header, w);
    finish(got, &guard, left_out, false)
}

/// Reads a `perf record -o -` stream from `perf_data` (its records checked and trimmed on the
/// way by `records::Guard`) and writes the labperf recording to `w`.
pub fn import_pipe_to(
    mut perf_data: impl std::io::Read,
    w: &mut impl Write,
) -> Result<Imported, ImportError> {
    let mut head = vec![0u8; 16];
    let n = features::read_up_to(&mut perf_data, &mut head)?;
    head.truncate(n);
    let le = match head.get(..8) {
        Some(b"PERFILE2") => true,
        Some(b"2ELIFREP") => false,
        _ => {
            // What it is, when its first bytes tell (gzip, a labperf recording, JSON…).
            return Err(match crate::files::kind::of_bytes(&head) {
                Some(k) => ImportError::Unsupported(format!(
                    "it is {}, not a `perf record -o -` stream",
                    k.what()
                )),
                None => {
                    ImportError::Sections("its magic number is not perf.data's PERFILE2".into())
                }
            });
        }
    };
    if !is_pipe_header(&head) {
        return Err(ImportError::Unsupported(
            "it is a whole perf.data file, not a `perf record -o -` stream: a file is read \
             from its path (`labperf import FILE`), not from standard input"
                .into(),
        ));
    }
    let guard = std::rc::Rc::new(std::cell::RefCell::new(records::Guard::new(
        features::Endian { le },
        None,
    )));
    let piped = records::Piped {
        head,
        at: 0,
        inner: perf_data,
        guard: guard.clone(),
    };
    let parsed = PerfFileReader::parse_pipe(std::io::BufReader::new(piped));
    let PerfFileReader {
        mut perf_file,
        mut record_iter,
    } = match parsed {
        Ok(p) => p,
        Err(e) => return finish(Err(e.into()), &guard, Vec::new(), true),
    };
    let header = header_of(&perf_file)?;
    let got = write_records(&mut perf_file, &mut record_iter, &header, w);
    finish(got, &guard, Vec::new(), true)
}

/// The import's figures with what the records' guard saw; its refusal (a damaged length)
/// as the error, rather than the parser's word for the read that failed.
fn finish(
    got: Result<Imported, ImportError>,
    guard: &std::rc::Rc<std::cell::RefCell<records::Guard>>,
    mut left_out: Vec<(&'static str, String)>,
    pipe: bool,
) -> Result<Imported, ImportError> {
    let g = guard.borrow();
    let seen = &g.seen;
    if let Some(why) = &seen.refused {
        return Err(ImportError::Sections(why.clone()));
    }
    let mut got = got?;
    left_out.extend(seen.left_out.iter().cloned());
    got.left_out = left_out;
    got.aux = seen.aux;
    got.compressed = seen.compressed;
    got.pipe = pipe;
    got.rounds_added = seen.rounds_added;
    got.cut = seen.cut.clone();
    for (kind, n) in &seen.dropped {
        *got.skipped.entry(kind).or_default() += n;
    }
    Ok(got)
}

/// The labperf header of `perf_file`'s recording.
fn header_of(perf_file: &linux_perf_data::PerfFile) -> Result<Header, ImportError> {
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
            attr: attr_of(&d.attr, &arch),
            leader: None,
        })
        .collect();
    Ok(Header {
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
    })
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

/// PERF_SAMPLE_BRANCH_STACK.
const SAMPLE_BRANCH_STACK: u64 = 1 << 11;

/// The labperf file's frames, from the header to the trailer.
fn write_records<R: std::io::Read>(
    perf_file: &mut linux_perf_data::PerfFile,
    record_iter: &mut linux_perf_data::PerfRecordIter<R>,
    header: &Header,
    w: &mut impl Write,
) -> Result<Imported, ImportError> {
    let branches: Vec<bool> = perf_file
        .event_attributes()
        .iter()
        .map(|d| d.attr.sample_format.bits() & SAMPLE_BRANCH_STACK != 0)
        .collect();
    let mut wr = Writer::begin(perf_file, header, w)?;
    while let Some(r) = record_iter.next_record(perf_file)? {
        let (attr_index, record) = match r {
            PerfFileRecord::EventRecord { attr_index, record } => (attr_index, record),
            // perf's own records (the parser decompresses COMPRESSED ones): named and
            // counted, but the round boundaries, which only order the others.
            PerfFileRecord::UserRecord(u) => {
                let kind = u.record_type.record_type().0;
                if kind != 68 {
                    *wr.got.skipped.entry(record_kind(kind)).or_default() += 1;
                }
                continue;
            }
        };
        if bad_mmap2_build_id(&record) {
            wr.got.damaged += 1;
            continue;
        }
        let kind = record.record_type.0;
        let Ok(parsed) = record.parse() else {
            wr.got.damaged += 1;
            continue;
        };
        if kind == 9 && branches.get(attr_index).copied().unwrap_or(false) {
            wr.got.branch_stacks += 1;
        }
        let Some(rec) = wr.convert(parsed, kind, attr_index) else {
            continue;
        };
        wr.push(&rec, w)?;
    }
    wr.finish(perf_file, w)
}

/// The import's encoder and what it has counted: the `Imported` figures, the kernel
/// addresses samples name, the recording's span and its lost records for the trailer.
struct Writer<'h> {
    header: &'h Header,
    /// Each event's sample period (or frequency), for samples that do not carry theirs.
    period_of: Vec<u64>,
    e: Encoder,
    got: Imported,
    /// The kernel addresses the samples name (the callchain's return addresses one byte
    /// back too, as reports look them up).
    kernel: labperf_common::kallsyms::Seen,
    /// Where the recording's kernel map starts.
    kernel_text: Option<u64>,
    lost: u64,
    first: Option<u64>,
    last: u64,
    /// The build-ids perf listed for the files it mapped (its `HEADER_BUILD_ID`), by path:
    /// a mapping recorded without one gets its file's, so that the file a report reads is
    /// checked against it and found by it (`--symfs DIR/<build-id>/elf`, perf's build-id
    /// cache) when the file here was rebuilt since.
    build_ids: std::collections::HashMap<Vec<u8>, Vec<u8>>,
}

impl<'h> Writer<'h> {
    /// Writes the prelude, the header and its extension (with the recorded vDSO).
    fn begin(
        perf_file: &linux_perf_data::PerfFile,
        header: &'h Header,
        w: &mut impl Write,
    ) -> Result<Writer<'h>, ImportError> {
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
        Ok(Writer {
            header,
            period_of,
            e,
            got: Imported::default(),
            kernel: labperf_common::kallsyms::Seen::default(),
            kernel_text: None,
            lost: 0,
            first: None,
            last: 0,
            build_ids: perf_file
                .build_ids()
                .ok()
                .unwrap_or_default()
                .into_iter()
                .filter(|(k, i)| {
                    matches!(k, linux_perf_data::DsoKey::User { .. })
                        && (4..=64).contains(&i.build_id.len())
                })
                .map(|(_, i)| (i.path, i.build_id))
                .collect(),
        })
    }

    /// perf's record (of type `kind`) as a labperf record; `None` for one labperf has no
    /// record for (counted as skipped).
    fn convert(&mut self, parsed: EventRecord, kind: u32, attr_index: usize) -> Option<Record> {
        Some(match parsed {
            EventRecord::Sample(s) => self.sample(&s, attr_index),
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
                    Mmap2FileId::InodeAndVersion(_) => {
                        self.build_ids.get(&*m.path.as_slice()).cloned()
                    }
                },
                path: String::from_utf8_lossy(&m.path.as_slice()).into_owned(),
            }),
            EventRecord::Mmap(m) => {
                // perf's map of the kernel image: "[kernel.kallsyms]_text", at _text.
                if m.path.as_slice().starts_with(b"[kernel.kallsyms]") {
                    self.kernel_text = Some(m.page_offset);
                }
                Record::Mmap2(Mmap2 {
                    pid: m.pid as u32,
                    tid: m.tid as u32,
                    addr: m.address,
                    len: m.length,
                    pgoff: m.page_offset,
                    prot: if m.is_executable { 5 } else { 1 },
                    flags: 2,
                    build_id: self.build_ids.get(&*m.path.as_slice()).cloned(),
                    path: String::from_utf8_lossy(&m.path.as_slice()).into_owned(),
                })
            }
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
                if matches!(kind, 4) {
                    Record::Exit(t)
                } else {
                    Record::Fork(t)
                }
            }
            EventRecord::Lost(l) => {
                self.lost += l.count;
                Record::Lost(Lost {
                    event: attr_index as u32,
                    lost: l.count,
                })
            }
            EventRecord::Throttle(t) | EventRecord::Unthrottle(t) => Record::Throttle(Throttle {
                time: t.timestamp,
                event: attr_index as u32,
                throttle: kind == 5,
            }),
            _ => {
                *self.got.skipped.entry(record_kind(kind)).or_default() += 1;
                return None;
            }
        })
    }

    /// A sample: its callchain without context markers and cut to [`MAX_CALLCHAIN`], its
    /// kernel addresses noted, its user stack kept.
    fn sample(&mut self, s: &SampleRecord, attr_index: usize) -> Record {
        let mut callchain: Vec<u64> = Vec::new();
        if let Some(cc) = &s.callchain {
            // Kernel and user parts, without the context markers: as the agent
            // keeps them.
            callchain = (0..cc.len())
                .filter_map(|i| cc.get(i))
                .filter(|&a| a < CONTEXT_MAX)
                .collect();
            // A word in the markers' range that names no context (the kernel's walk read
            // garbage): perf takes the chain as corrupted and discards it all.
            if (0..cc.len())
                .filter_map(|i| cc.get(i))
                .any(|a| a >= CONTEXT_MAX && !CONTEXTS.contains(&a))
            {
                callchain.clear();
            }
            // A labperf sample holds the innermost MAX_CALLCHAIN frames (a perf
            // record of 64 KiB holds up to 8,190).
            if callchain.len() > MAX_CALLCHAIN {
                callchain.truncate(MAX_CALLCHAIN);
                self.got.cut_callchains += 1;
            }
        }
        self.kernel.add(s.ip.unwrap_or(0));
        for &a in callchain.iter().skip(1) {
            self.kernel.add(a);
            self.kernel.add(a.saturating_sub(1));
        }
        let user_stack = user_stack_of(s, attr_index, self.header);
        if let Some(t) = s.timestamp {
            self.first.get_or_insert(t);
            self.last = self.last.max(t);
        }
        self.got.samples += 1;
        Record::Sample(Sample {
            event: attr_index as u32,
            pid: s.pid.unwrap_or(0) as u32,
            tid: s.tid.unwrap_or(0) as u32,
            ip: s.ip.unwrap_or(0),
            time: s.timestamp.unwrap_or(0),
            period: s
                .period
                .unwrap_or(self.period_of.get(attr_index).copied().unwrap_or(1)),
            cpu: s.cpu.unwrap_or(0),
            callchain,
            addr: s.addr,
            user_stack,
            ..Default::default()
        })
    }

    /// Encodes `rec`; a frame closes on its size, and on the user stack it would have a
    /// reader rebuild (the agent's rule: a reader rebuilds at most `stack_budget` per frame).
    fn push(&mut self, rec: &Record, w: &mut impl Write) -> Result<(), ImportError> {
        let e = &mut self.e;
        e.push(rec);
        self.got.records += 1;
        let stacks = e.pending_stack_bytes();
        if e.pending_bytes() >= 64 * 1024
            || stacks >= labperf_common::STACK_FRAME_FLUSH
            || stacks >= labperf_common::STACK_FLUSH_PER_BYTE * e.pending_bytes() as u64
        {
            if let Some(f) = e.flush() {
                w.write_all(&f)?;
            }
        }
        Ok(())
    }

    /// The kernel functions the samples name (KSYMS), the last frame and the trailer.
    fn finish(
        mut self,
        perf_file: &linux_perf_data::PerfFile,
        w: &mut impl Write,
    ) -> Result<Imported, ImportError> {
        let (e, got) = (&mut self.e, &mut self.got);
        if !self.kernel.is_empty() {
            match kallsyms_for(perf_file, self.kernel_text) {
                Ok((text, from)) => {
                    for k in self.kernel.symbols(&text, None) {
                        e.push(&Record::KernelSymbols(k));
                    }
                    got.kernel = Some(format!("kernel functions named from {from}"));
                }
                Err(why) => got.kernel = Some(format!("kernel addresses left unnamed: {why}")),
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
            lost: self.lost,
            duration_ns: self.last.saturating_sub(self.first.unwrap_or(self.last)),
            ..Default::default()
        }))?;
        w.flush()?;
        Ok(self.got)
    }
}

/// The user stack perf copied (`--call-graph dwarf`), with the registers the unwinder
/// reads; `None` without them.
fn user_stack_of(
    s: &SampleRecord,
    attr_index: usize,
    header: &Header,
) -> Option<labperf_common::UserStack> {
    match (&s.user_regs, &s.user_stack) {
        (Some(regs), Some((data, dyn_size))) => {
            let mask = header
                .events
                .get(attr_index)
                .map_or(0, |e| e.attr.sample_regs_user);
            let values: Option<Vec<u64>> = (0..64u64)
                .filter(|b| mask >> b & 1 == 1)
                .map(|b| regs.get(b))
                .collect();
            let sp = sp_reg(&header.arch).and_then(|r| regs.get(r));
            match (values, sp) {
                (Some(regs), Some(sp)) if mask != 0 => {
                    let bytes = data.as_slice();
                    let n = (*dyn_size as usize)
                        .min(bytes.len())
                        .min(labperf_common::MAX_USER_STACK);
                    Some(labperf_common::UserStack {
                        regs,
                        sp,
                        data: bytes[..n].to_vec(),
                    })
                }
                _ => None,
            }
        }
        _ => None,
    }
}
