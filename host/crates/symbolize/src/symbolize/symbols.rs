//! Symbolization: ELF symtab/dynsym via `object`, load bias from mmap2 records, the binary
//! search path (`--symfs`, this machine's file, the binary cache), build-id and machine
//! checks, demangling.
//!
//! Every file named by a recording is untrusted input: only regular files of bounded size
//! are read (never a device or a FIFO), each file is parsed once however many names it
//! has, and addresses resolve through a per-process interval index, so the work is
//! O((mappings + distinct addresses) log mappings).

use labperf_common::{Mmap2, Record};
use object::Object;
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

pub use crate::symbolize::intervals::Intervals;

pub use crate::symbolize::demangle::{demangle, demangle_as};
use crate::symbolize::elf::PROT_EXEC;
pub use crate::symbolize::elf::{arch_name, elf_machine, Elf, Placement, MAX_ELF};
pub use crate::symbolize::lines::{Lines, Source, MAX_DWARF_SECTION};

/// A mapping of a file into a process.
#[derive(Debug, Clone)]
struct Map {
    start: u64,
    end: u64,
    pgoff: u64,
    prot: u32,
    path: Arc<str>,
    build_id: Option<Arc<[u8]>>,
}

/// Where a sample's ip lands.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Location {
    /// The mapped file (or `[unknown]`).
    pub dso: Arc<str>,
    /// The function, when known.
    pub sym: Option<Arc<str>>,
    /// The address in the file's own (ELF) address space, or the raw ip.
    pub vaddr: u64,
}

/// The one label of a place: its function, or `file+0xADDRESS` (the address in the file's
/// own address space) when the function is unknown.
pub fn label(dso: &str, sym: Option<&str>, vaddr: u64) -> String {
    match sym {
        Some(s) => s.to_string(),
        None => format!("{}+{vaddr:#x}", crate::text::file_name(dso)),
    }
}

/// A place with its file, as the DCPI-style tables name it: `file function`, or the one
/// label of an unknown function ([`label`]: `file+0xADDRESS`).
pub fn place(dso: &str, sym: Option<&str>, vaddr: u64) -> String {
    match sym {
        Some(s) => format!("{} {s}", crate::text::file_name(dso)),
        None => label(dso, None, vaddr),
    }
}

/// Where binaries are looked for, in order: each `--symfs` directory
/// (`DIR/<build-id>/elf`, `DIR/<path>`); the path itself on this machine when its build-id
/// is the recorded one; the binary cache: the recording machine's own copy
/// (`by-host/<its host key>/…`, only for a record file labperf fetched from it: see
/// [`crate::files::cache::origin`]), then the entry of the recorded build-id, then perf's
/// build-id cache (`~/.debug/.build-id/xx/rest/elf`, under the same rules); then the path
/// itself on this machine whatever it holds. A cache entry is used only when it is an ELF file of
/// the recording's architecture with the recorded build-id (any build-id for a mapping
/// recorded without one); a mismatched one is never used. A file without a full symbol
/// table gets the symbols of its separate debug file: `DIR/<build-id>/debug`,
/// `/usr/lib/debug/.build-id/xx/rest.debug`, for a file from the cache the `debug` beside
/// it and the cache's `<build-id>/debug`, then its `.gnu_debuglink` name beside it, in
/// `.debug/` beside it and under `/usr/lib/debug`; a debug file must have the binary's
/// build-id (or the debuglink's CRC) and machine. `[vdso]` is named from the image the
/// agent recorded. Last come the debuginfod servers of `DEBUGINFOD_URLS`
/// ([`crate::symbolize::debuginfod`], their files kept in `debuginfod/` of labperf's cache):
/// a stripped file's debug file when a sample needs a name, a binary found nowhere else
/// (or only with another build-id) by its recorded build-id; either must be an ELF file of
/// the recording's machine with that build-id. Samples in anonymous memory are named from
/// the process's JIT map ([`crate::symbolize::perfmap`]): `DIR/tmp/perf-PID.map` of each
/// `--symfs` DIR, for a record file fetched from a lab machine the map fetched with it, else
/// this machine's `/tmp/perf-PID.map`.
#[derive(Debug, Clone, Default)]
pub struct Search {
    pub symfs: Vec<PathBuf>,
    /// The binary cache (see [`crate::files::cache`]); `None` leaves it out.
    pub cache: Option<PathBuf>,
    /// Whether a recording's own paths are read on this machine.
    pub local: bool,
    /// `--no-inline`: stacks name the symbol table's functions only, without the functions
    /// DWARF says were inlined at each address.
    pub no_inline: bool,
    /// `--full-names`: C++ names with their parameter lists and return types.
    pub full_names: bool,
    /// The debuginfod servers asked (`DEBUGINFOD_URLS`); none: no network.
    pub debuginfod: Vec<String>,
    /// Where files from debuginfod servers are kept ([`crate::files::cache::debuginfod`]);
    /// `None` leaves them out.
    pub debuginfod_cache: Option<PathBuf>,
}

impl Search {
    /// `--symfs` dirs, then the default binary cache and the local files.
    pub fn new(symfs: Vec<PathBuf>) -> Search {
        Search {
            symfs,
            cache: Some(crate::files::cache::binaries()),
            local: true,
            no_inline: false,
            full_names: false,
            debuginfod: crate::symbolize::debuginfod::urls_from_env(),
            debuginfod_cache: Some(crate::files::cache::debuginfod()),
        }
    }

    /// No file is read at all (every address stays unresolved): for fuzzing.
    pub fn nothing() -> Search {
        Search::default()
    }
}

/// A mapped file as a recording names it: path and build-id.
type FileKey = (Arc<str>, Option<Arc<[u8]>>);

/// Resolves sample ips of one recording.
#[derive(Default)]
pub struct Symbolizer {
    maps: Vec<Map>,
    procs: HashMap<u32, Intervals>,
    parent: HashMap<u32, u32>,
    /// Loaded files by (path, build-id); the same file (device, inode) is parsed once.
    elves: HashMap<FileKey, Option<Arc<Elf>>>,
    by_inode: HashMap<(u64, u64), Option<Arc<Elf>>>,
    paths: HashMap<Arc<str>, ()>,
    pub search: Search,
    pub warnings: Vec<String>,
    unknown: Arc<str>,
    demangled: HashMap<Box<str>, Arc<str>>,
    /// The recording machine's vDSO, from the header extension.
    vdso: Option<Arc<Elf>>,
    /// DWARF line and inline tables, by file, read when first asked for.
    lines: HashMap<PathBuf, Option<Arc<Lines>>>,
    /// The recording machine's kernel functions (KSYMS records), sorted by start once
    /// the first kernel address is resolved.
    kernel: Vec<(u64, u64, Arc<str>, Arc<str>)>,
    kernel_sorted: bool,
    kernel_hidden: Option<u32>,
    /// Files already named in a warning for a mapping that fits none of their segments.
    misplaced: std::collections::HashSet<Arc<str>>,
    /// The recording machine's architecture (`uname -m`, from the header): cache entries
    /// must be ELF files for it.
    arch: Option<&'static str>,
    /// The record file (for its origin in the cache's index).
    recording: Option<PathBuf>,
    /// Where the record file came from, once asked.
    origin: Option<crate::files::cache::Origin>,
    /// A fetched record file's name in the cache ([`crate::files::cache::recording_key`]).
    recording_key: Option<String>,
    /// When the recording started (this machine's JIT maps last written before are not its).
    started: Option<std::time::SystemTime>,
    /// The JIT maps of processes, by pid, read when first needed.
    jit: HashMap<u32, Option<Arc<crate::symbolize::perfmap::PerfMap>>>,
    /// Processes with samples in anonymous memory and no JIT map, said once.
    jit_missing: std::collections::HashSet<u32>,
    /// Files whose debug file debuginfod was asked for.
    debuginfod_asked: std::collections::HashSet<FileKey>,
}

/// Where a candidate binary is: what it must be to be used.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Whence {
    /// `--symfs`: the user's; a wrong build-id is used with a warning when nothing better is found.
    Symfs,
    /// The recorded path on this machine, tried first: only with the recorded build-id.
    LocalSame,
    /// The binary cache: only an ELF file of the recording's machine with the recorded
    /// build-id (any, for a mapping recorded without one); else never.
    Cache,
    /// The recorded path on this machine, last: as `Symfs`.
    Local,
    /// A debuginfod server's (or its cached copy): as `Cache`.
    Debuginfod,
}

/// The file kernel functions are listed under (perf's name for the kernel image).
pub const KERNEL_DSO: &str = "[kernel.kallsyms]";

/// Whether the file at `p` is an ELF file for `machine` (as [`elf_machine`] names it) with
/// build-id `id`; else what it is.
fn elf_fits(p: &Path, id: &[u8], machine: &str) -> Result<(), String> {
    let data = crate::files::mapped::map_regular(p, MAX_ELF).map_err(|e| e.to_string())?;
    let data = (*data).as_ref();
    let m = elf_machine(data).ok_or("not an ELF file")?;
    if m != machine {
        return Err(format!("an ELF file for {m}, not for {machine}"));
    }
    let f = object::File::parse(data).map_err(|_| "a damaged ELF file")?;
    match f.build_id() {
        Ok(Some(b)) if b == id => Ok(()),
        Ok(Some(b)) => Err(format!("of build-id {}", hex(b))),
        _ => Err("without a build-id".into()),
    }
}

/// The warning for a file whose mapping matches none of its loadable segments.
pub fn misplaced(path: &str, m: &Placement) -> String {
    format!("{}: the mapping at file offset {:#x} ({} bytes) matches none of the file's loadable segments: the file here is not the one the recording mapped, and its addresses are shown as file offsets (and its stacks are not unwound). Pass --symfs DIR holding the recorded binary.", crate::text::show(path), m.pgoff, m.len)
}

/// perf's build-id cache: `$PERF_BUILDID_DIR`, else `~/.debug`.
pub fn perf_buildid_dir() -> Option<PathBuf> {
    std::env::var_os("PERF_BUILDID_DIR")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| Path::new(&h).join(".debug")))
}

fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

impl Symbolizer {
    pub fn new(search: Search) -> Symbolizer {
        Symbolizer {
            search,
            unknown: "[unknown]".into(),
            ..Default::default()
        }
    }

    /// Says which record file is symbolized (the cache's index tells which lab machine
    /// labperf fetched it from, if any: never the file's own content) and its architecture
    /// (cache entries must be for it), and takes the vDSO image its agent recorded.
    pub fn recorded_on(
        &mut self,
        src: &crate::record::load::Source,
        h: Option<&labperf_common::Header>,
        ext: Option<&labperf_common::HeaderExt>,
    ) {
        self.recording = src.file().map(Path::to_path_buf);
        self.origin = None;
        self.arch = h.map(|h| arch_name(&h.arch));
        self.started = h
            .filter(|h| h.start_realtime_ns > 0)
            .map(|h| std::time::UNIX_EPOCH + std::time::Duration::from_nanos(h.start_realtime_ns));
        if let Some(v) = ext.and_then(|x| x.vdso.as_deref()) {
            self.vdso = Elf::parse(v).ok().map(Arc::new);
        }
    }

    /// Takes in the side-band records (mmap2, fork); others are ignored.
    pub fn observe(&mut self, r: &Record) {
        match r {
            Record::Mmap2(m) => self.add_map(m),
            Record::Fork(t) if t.pid != t.ppid => {
                self.parent.insert(t.pid, t.ppid);
            }
            Record::KernelSymbols(k) => {
                if let Some(v) = k.hidden {
                    self.kernel_hidden = Some(v);
                }
                for s in &k.syms {
                    let dso = match &s.module {
                        Some(m) => self.intern(&format!("[{m}]")),
                        None => self.intern(KERNEL_DSO),
                    };
                    let name = self.intern(&s.name);
                    self.kernel.push((s.start, s.end, name, dso));
                }
                self.kernel_sorted = false;
            }
            _ => {}
        }
    }

    fn intern(&mut self, p: &str) -> Arc<str> {
        if let Some((k, _)) = self.paths.get_key_value(p) {
            return k.clone();
        }
        let a: Arc<str> = p.into();
        self.paths.insert(a.clone(), ());
        a
    }

    fn add_map(&mut self, m: &Mmap2) {
        let Ok(idx) = u32::try_from(self.maps.len()) else {
            return;
        };
        let path = self.intern(&m.path);
        let map = Map {
            start: m.addr,
            end: m.addr.saturating_add(m.len),
            pgoff: m.pgoff,
            prot: m.prot,
            path,
            build_id: m.build_id.as_deref().map(Arc::from),
        };
        self.procs
            .entry(m.pid)
            .or_default()
            .insert(map.start, map.end, idx);
        self.maps.push(map);
    }

    fn find_map(&self, pid: u32, ip: u64) -> Option<&Map> {
        let mut p = pid;
        for _ in 0..64 {
            if let Some(i) = self.procs.get(&p).and_then(|v| v.find(ip)) {
                return self.maps.get(i as usize);
            }
            p = *self.parent.get(&p)?;
        }
        None
    }

    /// The lab machine the record file came from, as the cache's index says (computed once).
    fn fetched_from(&mut self) -> Option<crate::files::cache::Machine> {
        use crate::files::cache::Origin;
        if self.origin.is_none() {
            let (o, key) = match (&self.search.cache, &self.recording) {
                (Some(root), Some(file)) => crate::files::cache::origin_and_key(root, file),
                _ => (Origin::Unknown, None),
            };
            self.recording_key = key;
            if o == Origin::Conflict {
                self.warnings.push(format!("{} was fetched from two lab machines with different host keys: neither's own copies of its binaries are used", self.recording.as_deref().unwrap_or(Path::new("?")).display()));
            }
            self.origin = Some(o);
        }
        match &self.origin {
            Some(Origin::Fetched(m)) => Some(m.clone()),
            _ => None,
        }
    }

    /// The candidate files for `path` with `build_id`, in search order.
    fn candidates(&mut self, path: &str, build_id: Option<&[u8]>) -> Vec<(PathBuf, Whence)> {
        let mut c = Vec::new();
        let rel = path.trim_start_matches('/');
        for d in &self.search.symfs {
            if let Some(b) = build_id {
                c.push((d.join(hex(b)).join("elf"), Whence::Symfs));
            }
            // Inside DIR only: a path with `..` is not looked up there.
            if !rel.split('/').any(|p| p == "..") && !rel.is_empty() {
                c.push((d.join(rel), Whence::Symfs));
            }
        }
        let local = self.search.local && path.starts_with('/');
        if local && build_id.is_some() {
            c.push((PathBuf::from(path), Whence::LocalSame));
        }
        // Without the recording's architecture nothing in the cache can be checked.
        if let (Some(root), Some(_)) = (self.search.cache.clone(), self.arch) {
            if let Some(m) = self.fetched_from() {
                c.push((
                    crate::files::cache::by_host(&root, &m.host_key, path),
                    Whence::Cache,
                ));
            }
            if let Some(e) = build_id.and_then(|b| crate::files::cache::by_build_id(&root, b)) {
                c.push((e, Whence::Cache));
            }
            // perf's build-id cache, where `perf record` copied the files it mapped
            // (`$PERF_BUILDID_DIR`, else `~/.debug`: `.build-id/xx/rest/elf`), under the
            // same rules as labperf's.
            if let (Some(b), Some(dir)) = (build_id.filter(|b| b.len() > 1), perf_buildid_dir()) {
                let h = hex(b);
                c.push((
                    dir.join(".build-id")
                        .join(&h[..2])
                        .join(&h[2..])
                        .join("elf"),
                    Whence::Cache,
                ));
            }
        }
        if local {
            c.push((PathBuf::from(path), Whence::Local));
        }
        c
    }

    /// Whether a binary from the cache may stand for a mapping recorded with `want`: an
    /// ELF file of the recording's machine with that build-id (any without one); else why not.
    fn cache_entry_fits(&self, e: &Elf, c: &Path, want: Option<&[u8]>) -> Result<(), String> {
        let why = if self.arch.is_none() || e.machine != self.arch {
            "not an ELF file of the recording's machine"
        } else if want.is_some_and(|w| e.build_id.as_deref() != Some(w)) {
            "not of the recorded build-id"
        } else {
            return Ok(());
        };
        Err(format!(
            "the binary cache's {} is {why}: not used",
            c.display()
        ))
    }

    /// Loads `c` (a regular file, at most [`MAX_ELF`] bytes), once per file.
    fn load(&mut self, c: &Path) -> Option<Arc<Elf>> {
        let (data, id) = crate::files::mapped::map_regular_id(c, MAX_ELF).ok()?;
        if let Some(e) = self.by_inode.get(&id) {
            return e.clone();
        }
        let e = Elf::parse((*data).as_ref()).ok().map(|mut e| {
            if e.has_dwarf {
                e.dwarf = Some(c.to_path_buf());
            }
            e.file = Some(c.to_path_buf());
            Arc::new(e)
        });
        self.by_inode.insert(id, e.clone());
        e
    }

    /// The separate debug files that may belong to `elf` (found at `file`), in search order.
    /// The cache's debug files are tried only for a binary from the cache: what a lab
    /// machine sent never names a function of a file read here.
    fn debug_candidates(
        &self,
        elf: &Elf,
        file: &Path,
        recorded: Option<&[u8]>,
        from: Whence,
    ) -> Vec<PathBuf> {
        let mut c = Vec::new();
        if let Some(b) = elf.build_id.as_deref().or(recorded) {
            for d in &self.search.symfs {
                c.push(d.join(hex(b)).join("debug"));
            }
            if self.search.local && b.len() >= 2 {
                c.push(PathBuf::from(format!(
                    "/usr/lib/debug/.build-id/{}/{}.debug",
                    hex(&b[..1]),
                    hex(&b[1..])
                )));
            }
            if from == Whence::Cache {
                c.push(file.with_file_name("debug"));
                if let Some(e) = self
                    .search
                    .cache
                    .as_ref()
                    .and_then(|root| crate::files::cache::by_build_id(root, b))
                {
                    c.push(e.with_file_name("debug"));
                }
            }
        }
        if let Some((link, _)) = &elf.debuglink {
            // A plain file name only: a link with a slash or `..` could point anywhere.
            let plain = !link.contains('/') && link != ".." && link != "." && !link.is_empty();
            if let (true, Some(dir)) = (plain, file.parent()) {
                c.push(dir.join(link));
                c.push(dir.join(".debug").join(link));
                if self.search.local && dir.is_absolute() {
                    c.push(
                        Path::new("/usr/lib/debug")
                            .join(dir.strip_prefix("/").unwrap_or(dir))
                            .join(link),
                    );
                }
            }
        }
        c
    }

    /// `elf` with its separate debug file's symbols, when it lacks a full symbol table and
    /// a debug file of the same build-id (or, without one, the debuglink's CRC) is found.
    fn with_debug(
        &mut self,
        elf: Arc<Elf>,
        file: &Path,
        recorded: Option<&[u8]>,
        from: Whence,
    ) -> Arc<Elf> {
        if elf.has_symtab {
            return elf;
        }
        for c in self.debug_candidates(&elf, file, recorded, from) {
            if c == file {
                continue;
            }
            let Ok((data, id)) = crate::files::mapped::map_regular_id(&c, MAX_ELF) else {
                continue;
            };
            if elf_machine((*data).as_ref()) != elf.machine {
                continue;
            }
            let matches = match (elf.build_id.as_deref(), &elf.debuglink) {
                (Some(want), _) => object::File::parse((*data).as_ref())
                    .ok()
                    .and_then(|f| f.build_id().ok().flatten().map(|b| b == want))
                    .unwrap_or(false),
                (None, Some((_, crc))) => crc32fast::hash((*data).as_ref()) == *crc,
                (None, None) => false,
            };
            if !matches {
                continue;
            }
            let debug = match self.by_inode.get(&id) {
                Some(e) => e.clone(),
                None => {
                    let e = Elf::parse((*data).as_ref()).ok().map(|mut e| {
                        if e.has_dwarf {
                            e.dwarf = Some(c.clone());
                        }
                        Arc::new(e)
                    });
                    self.by_inode.insert(id, e.clone());
                    e
                }
            };
            if let Some(d) = debug.filter(|d| d.has_symtab) {
                return Arc::new(elf.with_debug(&d));
            }
        }
        elf
    }

    /// The local file a recording's `path` (with its build-id) is read from, found as for
    /// symbols (`--symfs`, the binary cache, the path itself), with its segments.
    pub fn binary(&mut self, path: &str, build_id: Option<&[u8]>) -> Option<Arc<Elf>> {
        let path = self.intern(path);
        let id = build_id.map(Arc::<[u8]>::from);
        self.elf(&path, id.as_ref())
    }

    fn elf(&mut self, path: &Arc<str>, build_id: Option<&Arc<[u8]>>) -> Option<Arc<Elf>> {
        if &**path == "[vdso]" {
            return self.vdso.clone();
        }
        // Anonymous memory is no file (its JIT code is named by `jit_symbol`).
        if crate::symbolize::perfmap::anonymous(path) {
            return None;
        }
        let key = (path.clone(), build_id.cloned());
        if let Some(e) = self.elves.get(&key) {
            return e.clone();
        }
        let want = build_id.map(|b| &b[..]);
        let mut found: Option<(Arc<Elf>, PathBuf, Whence)> = None;
        let mut mismatch = None;
        let mut refused = None;
        for (c, from) in self.candidates(path, want) {
            let Some(e) = self.load(&c) else { continue };
            match from {
                Whence::LocalSame if want != e.build_id.as_deref() => continue,
                Whence::Cache => {
                    if let Err(why) = self.cache_entry_fits(&e, &c, want) {
                        refused.get_or_insert(why);
                        continue;
                    }
                }
                Whence::Symfs | Whence::Local => {
                    if let (Some(want), Some(have)) = (want, e.build_id.as_deref()) {
                        if want != have {
                            mismatch.get_or_insert_with(|| format!("{} does not match the recording: build-id {} was recorded, the file on disk has {}. Its symbols may be wrong; pass --symfs DIR holding the recorded binary.", c.display(), hex(want), hex(have)));
                            found.get_or_insert((e, c, from));
                            continue;
                        }
                    }
                }
                _ => {}
            }
            found = Some((e, c, from));
            mismatch = None;
            break;
        }
        if found.is_none() || mismatch.is_some() {
            if let Some(got) = want.and_then(|w| self.debuginfod_binary(path, w)) {
                found = Some(got);
                mismatch = None;
            }
        }
        let found = found.map(|(e, c, from)| self.with_debug(e, &c, want, from));
        if let Some(m) = mismatch {
            self.warnings.push(crate::text::show(&m).into_owned());
        }
        if let (None, Some(why)) = (&found, refused) {
            self.warnings.push(crate::text::show(&why).into_owned());
        }
        if found.is_none() && path.starts_with('/') {
            // A file that was deleted or never had a name (memfd, a deleted library) cannot
            // be copied anywhere: said as what it is.
            let gone = path.starts_with("/memfd:") || path.ends_with(" (deleted)");
            self.warnings.push(if gone {
                format!("{} was a deleted or memory-only file on the recording machine: its samples are shown as addresses", crate::text::show(path))
            } else {
                format!("{} was not found or is not an ELF file: its samples are shown as addresses. Copy it here or pass --symfs DIR.", crate::text::show(path))
            });
        }
        self.elves.insert(key, found.clone());
        found
    }

    /// The binary of build-id `want` from a debuginfod server (or the copy kept of one): an
    /// ELF file of the recording's machine with that build-id.
    fn debuginfod_binary(
        &mut self,
        path: &str,
        want: &[u8],
    ) -> Option<(Arc<Elf>, PathBuf, Whence)> {
        use crate::symbolize::debuginfod::{find, Kind};
        let root = self.search.debuginfod_cache.clone()?;
        let arch = self.arch?;
        let fits = |p: &Path| elf_fits(p, want, arch);
        let (file, note) = find(
            &self.search.debuginfod,
            &root,
            want,
            (Kind::Executable, path),
            MAX_ELF,
            &fits,
        );
        self.warnings.extend(note);
        let file = file?;
        let e = self.load(&file)?;
        self.cache_entry_fits(&e, &file, Some(want)).ok()?;
        Some((e, file, Whence::Debuginfod))
    }

    /// [`Symbolizer::elf`] for naming its functions: a file without a symbol table (of its
    /// own or from a debug file found here) gets the debug file of its build-id from a
    /// debuginfod server (or the copy kept of one), asked once per file; a debug file must
    /// have that build-id and the file's machine.
    fn named_elf(&mut self, path: &Arc<str>, build_id: Option<&Arc<[u8]>>) -> Option<Arc<Elf>> {
        use crate::symbolize::debuginfod::{find, Kind};
        let elf = self.elf(path, build_id)?;
        if elf.has_symtab || self.search.debuginfod_cache.is_none() {
            return Some(elf);
        }
        let key = (path.clone(), build_id.cloned());
        // A file of another build-id than the recorded one: its debug file names other code.
        let id = match (&elf.build_id, build_id) {
            (Some(have), Some(want)) if **want != **have => return Some(elf),
            (Some(have), _) => have.clone(),
            (None, _) => return Some(elf),
        };
        if !self.debuginfod_asked.insert(key.clone()) {
            return Some(elf);
        }
        let root = self.search.debuginfod_cache.clone()?;
        let machine = elf.machine.unwrap_or("unknown");
        let fits = |p: &Path| elf_fits(p, &id, machine);
        let (file, note) = find(
            &self.search.debuginfod,
            &root,
            &id,
            (Kind::Debuginfo, path),
            MAX_ELF,
            &fits,
        );
        self.warnings.extend(note);
        let debug = file.and_then(|f| {
            let data = crate::files::mapped::map_regular(&f, MAX_ELF).ok()?;
            let mut d = Elf::parse((*data).as_ref()).ok()?;
            if d.has_dwarf {
                d.dwarf = Some(f);
            }
            Some(d)
        });
        match debug.filter(|d| d.has_symtab) {
            Some(d) => {
                let named = Arc::new(elf.with_debug(&d));
                self.elves.insert(key, Some(named.clone()));
                Some(named)
            }
            None => Some(elf),
        }
    }

    /// The function of JIT-compiled code at `ip` of process `pid` (or of the process it was
    /// forked from), from its map file ([`crate::symbolize::perfmap`]). `hint`: a sample in
    /// anonymous executable memory, where a process without a map file is told how to
    /// write one.
    fn jit_symbol(&mut self, pid: u32, ip: u64, hint: bool) -> Option<Location> {
        let mut p = pid;
        let mut any = false;
        for _ in 0..64 {
            if let Some(map) = self.jit_map(p) {
                any = true;
                if let Some(name) = map.find(ip) {
                    return Some(Location {
                        dso: self.intern(&crate::symbolize::perfmap::path_of(p)),
                        sym: Some(name),
                        vaddr: ip,
                    });
                }
            }
            match self.parent.get(&p) {
                Some(&q) => p = q,
                None => break,
            }
        }
        if hint && !any && self.jit_missing.insert(pid) {
            self.warnings.push(format!("note: process {pid} ran code in anonymous memory (JIT-compiled code, as node's, Java's or python3.12's), and no {} names it: run node with --perf-basic-prof, java with -XX:+UnlockDiagnosticVMOptions -XX:+DumpPerfMapAtExit, python3.12 with -X perf", crate::symbolize::perfmap::path_of(pid)));
        }
        None
    }

    /// The JIT map of process `pid` (read once): `DIR/tmp/perf-PID.map` of each `--symfs`
    /// DIR, then for a record file fetched from a lab machine the map fetched with it, else
    /// (a recording of this machine's, as far as the cache's index knows) `/tmp/perf-PID.map`
    /// here.
    fn jit_map(&mut self, pid: u32) -> Option<Arc<crate::symbolize::perfmap::PerfMap>> {
        use crate::symbolize::perfmap;
        if let Some(m) = self.jit.get(&pid) {
            return m.clone();
        }
        let name = perfmap::path_of(pid);
        let mut cands: Vec<(PathBuf, bool)> = self
            .search
            .symfs
            .iter()
            .map(|d| (d.join(name.trim_start_matches('/')), false))
            .collect();
        if self.fetched_from().is_some() {
            if let (Some(root), Some(key)) = (&self.search.cache, &self.recording_key) {
                cands.push((crate::files::cache::perf_map(root, key, pid), false));
            }
        } else if self.search.local && self.origin == Some(crate::files::cache::Origin::Unknown) {
            cands.push((PathBuf::from(&name), true));
        }
        let mut found = None;
        for (c, local) in cands {
            match perfmap::read(&c, local, self.started) {
                None => continue,
                Some(Err(why)) => self.warnings.push(why),
                Some(Ok((map, warnings))) => {
                    self.warnings.extend(warnings);
                    found = Some(Arc::new(map));
                    break;
                }
            }
        }
        self.jit.insert(pid, found.clone());
        found
    }

    /// The source line of `ip` of process `pid` and the functions inlined there, from the
    /// DWARF of its file or of the file's separate debug file (none where neither has it).
    pub fn source(&mut self, pid: u32, ip: u64) -> Source {
        let Some(m) = self.find_map(pid, ip).cloned() else {
            return Source::default();
        };
        let Some(elf) = self.named_elf(&m.path, m.build_id.as_ref()) else {
            return Source::default();
        };
        let Some(path) = elf.dwarf.clone() else {
            return Source::default();
        };
        let Some(vaddr) = self.file_vaddr(&m, &elf, ip) else {
            return Source::default();
        };
        let lines = match self.lines.get(&path) {
            Some(l) => l.clone(),
            None => {
                let l = crate::files::mapped::map_regular_id(&path, MAX_ELF)
                    .ok()
                    .and_then(|(data, _)| Lines::parse((*data).as_ref()))
                    .map(Arc::new);
                self.lines.insert(path, l.clone());
                l
            }
        };
        let full = self.search.full_names;
        lines.map(|l| l.source(vaddr, full)).unwrap_or_default()
    }

    /// The file's own address of `ip` in mapping `m` of `elf` ([`Elf::bias`]); `None`
    /// (said once per file in the warnings) when the mapping matches none of the file's
    /// segments.
    fn file_vaddr(&mut self, m: &Map, elf: &Elf, ip: u64) -> Option<u64> {
        let place = Placement {
            addr: m.start,
            len: m.end - m.start,
            pgoff: m.pgoff,
            prot: m.prot,
        };
        match elf.bias(&place) {
            Some(b) => Some(ip.wrapping_sub(b)),
            None => {
                self.warn_misplaced(&m.path, &place);
                None
            }
        }
    }

    /// Says once per file that mapping `m` of `path` matches none of its segments.
    pub fn warn_misplaced(&mut self, path: &str, m: &Placement) {
        let path = self.intern(path);
        if self.misplaced.insert(path.clone()) {
            self.warnings.push(misplaced(&path, m));
        }
    }

    /// The file mapped at `ip` of process `pid`, when it is found here and fits the
    /// mapping, and `ip` as the file's own address.
    pub fn file_at(&mut self, pid: u32, ip: u64) -> Option<(Arc<Elf>, u64)> {
        let m = self.find_map(pid, ip)?.clone();
        let elf = self.elf(&m.path, m.build_id.as_ref())?;
        let vaddr = self.file_vaddr(&m, &elf, ip)?;
        Some((elf, vaddr))
    }

    /// Whether `ip` of process `pid` is in anonymous executable memory: JIT-compiled code.
    pub fn in_jit_code(&self, pid: u32, ip: u64) -> bool {
        self.find_map(pid, ip).is_some_and(|m| {
            (m.prot & PROT_EXEC != 0 || m.prot == 0)
                && crate::symbolize::perfmap::anonymous(&m.path)
        })
    }

    /// Whether the file mapped at `ip` of process `pid` is found here: `None` when no
    /// file is mapped there.
    pub fn found(&mut self, pid: u32, ip: u64) -> Option<bool> {
        let m = self.find_map(pid, ip)?.clone();
        Some(self.elf(&m.path, m.build_id.as_ref()).is_some())
    }

    /// A kernel address's function, from the file's KSYMS records.
    fn kernel_symbol(&mut self, ip: u64) -> Option<(Location, u64)> {
        if !self.kernel_sorted {
            self.kernel.sort_by_key(|k| (k.0, k.1));
            self.kernel.dedup_by_key(|k| k.0);
            self.kernel_sorted = true;
        }
        let i = self.kernel.partition_point(|k| k.0 <= ip).checked_sub(1)?;
        let (start, end, name, dso) = &self.kernel[i];
        (ip < *end || *end <= *start).then(|| {
            let l = Location {
                dso: dso.clone(),
                sym: Some(name.clone()),
                vaddr: ip,
            };
            (l, *start)
        })
    }

    /// Resolves `ip` of process `pid`.
    pub fn resolve(&mut self, pid: u32, ip: u64) -> Location {
        self.spot(pid, ip).loc
    }

    /// [`Symbolizer::resolve`] with what `perf script` prints of the place besides: the
    /// start of its function and the address in its mapped file ([`Spot`]).
    pub fn spot(&mut self, pid: u32, ip: u64) -> Spot {
        let Some(m) = self.find_map(pid, ip).cloned() else {
            if ip >> 63 == 1 {
                if let Some((loc, start)) = self.kernel_symbol(ip) {
                    return Spot {
                        loc,
                        start: Some(start),
                        in_map: None,
                    };
                }
                if let Some(v) = self.kernel_hidden.take() {
                    self.warnings.push(if v == 0 {
                        // kptr_restrict 0 still hides them from a user without CAP_SYSLOG
                        // where perf_event_paranoid is above 1 (kallsyms_show_value).
                        "note: kernel functions are shown as addresses: the recording machine's /proc/kallsyms hid them from the agent (kernel.kptr_restrict is 0, but with kernel.perf_event_paranoid above 1 a user without CAP_SYSLOG sees no kernel addresses); record as root, or give the agent CAP_SYSLOG".to_string()
                    } else {
                        format!("note: kernel functions are shown as addresses: the recording machine's /proc/kallsyms hid them (kernel.kptr_restrict = {v}); record as root, or run `sysctl kernel.kptr_restrict=0` there")
                    });
                }
                return Spot::of(Location {
                    dso: self.intern(KERNEL_DSO),
                    sym: None,
                    vaddr: ip,
                });
            }
            if let Some(l) = self.jit_symbol(pid, ip, false) {
                return Spot::of(l);
            }
            return Spot::of(Location {
                dso: self.unknown.clone(),
                sym: None,
                vaddr: ip,
            });
        };
        let exec = m.prot & PROT_EXEC != 0 || m.prot == 0;
        if exec && crate::symbolize::perfmap::anonymous(&m.path) {
            if let Some(l) = self.jit_symbol(pid, ip, true) {
                return Spot::of(l);
            }
        }
        let off = ip.wrapping_sub(m.start).wrapping_add(m.pgoff);
        match self.named_elf(&m.path, m.build_id.as_ref()) {
            Some(elf) => {
                let vaddr = self.file_vaddr(&m, &elf, ip).unwrap_or(off);
                let found = elf.symbol_at(vaddr);
                let start = found.map(|(a, _)| a);
                let sym = found.map(|(_, raw)| {
                    if let Some(d) = self.demangled.get(raw) {
                        return d.clone();
                    }
                    let d: Arc<str> = demangle_as(raw, self.search.full_names).into();
                    self.demangled.insert(raw.into(), d.clone());
                    d
                });
                Spot {
                    loc: Location {
                        sym,
                        dso: m.path,
                        vaddr,
                    },
                    start,
                    in_map: Some(off),
                }
            }
            None => Spot {
                loc: Location {
                    dso: m.path,
                    sym: None,
                    vaddr: off,
                },
                start: None,
                in_map: Some(off),
            },
        }
    }
}

/// Where an address lands, as `perf script` prints it ([`Symbolizer::spot`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Spot {
    pub loc: Location,
    /// The start of its function, in the address space of `loc.vaddr` (the offset perf
    /// prints after the name is `loc.vaddr - start`); `None` when unnamed, or named from a
    /// JIT map.
    pub start: Option<u64>,
    /// In a mapped file: the address as perf's map gives it, `ip - map start + pgoff` (the
    /// offset into the file), which `perf script` prints for a callchain's user frames.
    pub in_map: Option<u64>,
}

impl Spot {
    /// A place without a function start or a mapped file.
    fn of(loc: Location) -> Spot {
        Spot {
            loc,
            start: None,
            in_map: None,
        }
    }
}

#[cfg(test)]
mod tests;
