//! Symbolization: ELF symtab/dynsym via `object`, load bias from mmap2 records, build-id checks, demangling.

use labperf_common::{Mmap2, Record};
use object::{Object, ObjectSegment, ObjectSymbol, SymbolKind};
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// One loaded ELF file.
#[derive(Debug, Default)]
pub struct Elf {
    pub build_id: Option<Vec<u8>>,
    /// (file offset, vaddr, file size) of each loadable segment.
    segments: Vec<(u64, u64, u64)>,
    /// Function symbols sorted by address: (addr, size, mangled name); names are
    /// demangled only when a sample hits them.
    syms: Vec<(u64, u64, Box<str>)>,
}

impl Elf {
    pub fn parse(data: &[u8]) -> Result<Elf, object::Error> {
        let f = object::File::parse(data)?;
        let build_id = f.build_id().ok().flatten().map(<[u8]>::to_vec);
        let segments = f
            .segments()
            .map(|s| {
                let (off, size) = s.file_range();
                (off, s.address(), size)
            })
            .collect();
        let mut syms: Vec<(u64, u64, Box<str>)> = Vec::new();
        for table in [
            f.symbols().collect::<Vec<_>>(),
            f.dynamic_symbols().collect::<Vec<_>>(),
        ] {
            if !syms.is_empty() {
                break;
            }
            for s in table {
                if s.kind() == SymbolKind::Text && s.address() != 0 {
                    if let Ok(name) = s.name() {
                        syms.push((s.address(), s.size(), name.into()));
                    }
                }
            }
        }
        syms.sort_by_key(|s| (s.0, std::cmp::Reverse(s.1)));
        syms.dedup_by_key(|s| s.0);
        Ok(Elf {
            build_id,
            segments,
            syms,
        })
    }

    /// File offset → ELF virtual address, through the loadable segments.
    pub fn offset_to_vaddr(&self, off: u64) -> Option<u64> {
        self.segments
            .iter()
            .find(|(o, _, sz)| off >= *o && off < o + sz)
            .map(|(o, v, _)| off - o + v)
    }

    /// The (mangled) name of the function containing `vaddr`.
    pub fn symbol(&self, vaddr: u64) -> Option<&str> {
        let i = self.syms.partition_point(|s| s.0 <= vaddr).checked_sub(1)?;
        let (a, size, name) = &self.syms[i];
        (*size == 0 || vaddr < a + size).then_some(name)
    }
}

/// Demangles Rust (legacy and v0) and C++ names; others are returned as they are.
pub fn demangle(name: &str) -> String {
    if let Ok(d) = rustc_demangle::try_demangle(name) {
        return format!("{d:#}");
    }
    if name.starts_with("_Z") {
        if let Ok(s) = cpp_demangle::Symbol::new(name) {
            if let Ok(d) = s.demangle(&cpp_demangle::DemangleOptions::default()) {
                return d;
            }
        }
    }
    name.to_string()
}

#[derive(Debug, Clone)]
struct Map {
    start: u64,
    end: u64,
    pgoff: u64,
    path: Arc<str>,
    build_id: Option<Vec<u8>>,
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

/// Resolves sample ips of one recording.
#[derive(Default)]
pub struct Symbolizer {
    maps: HashMap<u32, Vec<Map>>,
    parent: HashMap<u32, u32>,
    elves: HashMap<Arc<str>, Option<Arc<Elf>>>,
    /// Directories searched first for binaries: `DIR/<build-id hex>/elf`, then `DIR/<path>`.
    pub symfs: Vec<PathBuf>,
    pub warnings: Vec<String>,
    unknown: Arc<str>,
    demangled: HashMap<Box<str>, Arc<str>>,
}

fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

impl Symbolizer {
    pub fn new(symfs: Vec<PathBuf>) -> Symbolizer {
        Symbolizer {
            symfs,
            unknown: "[unknown]".into(),
            ..Default::default()
        }
    }

    /// Takes in the side-band records (mmap2, fork); others are ignored.
    pub fn observe(&mut self, r: &Record) {
        match r {
            Record::Mmap2(m) => self.add_map(m),
            Record::Fork(t) if t.pid != t.ppid => {
                self.parent.insert(t.pid, t.ppid);
            }
            _ => {}
        }
    }

    fn add_map(&mut self, m: &Mmap2) {
        self.maps.entry(m.pid).or_default().push(Map {
            start: m.addr,
            end: m.addr.saturating_add(m.len),
            pgoff: m.pgoff,
            path: m.path.as_str().into(),
            build_id: m.build_id.clone(),
        });
    }

    fn find_map(&self, pid: u32, ip: u64) -> Option<&Map> {
        let mut p = pid;
        for _ in 0..64 {
            if let Some(m) = self
                .maps
                .get(&p)
                .and_then(|v| v.iter().rev().find(|m| ip >= m.start && ip < m.end))
            {
                return Some(m);
            }
            p = *self.parent.get(&p)?;
        }
        None
    }

    fn elf(&mut self, path: &Arc<str>, build_id: Option<&[u8]>) -> Option<Arc<Elf>> {
        if let Some(e) = self.elves.get(path) {
            return e.clone();
        }
        let mut candidates: Vec<PathBuf> = Vec::new();
        for d in &self.symfs {
            if let Some(b) = build_id {
                candidates.push(d.join(hex(b)).join("elf"));
            }
            candidates.push(d.join(path.trim_start_matches('/')));
        }
        if path.starts_with('/') {
            candidates.push(PathBuf::from(&**path));
        }
        let mut found = None;
        let mut mismatch = None;
        for c in candidates {
            let Ok(data) = crate::load::map_file(&c) else {
                continue;
            };
            match Elf::parse((*data).as_ref()) {
                Ok(e) => {
                    if let (Some(want), Some(have)) = (build_id, e.build_id.as_deref()) {
                        if want != have {
                            mismatch = Some(format!("{} does not match the recording: build-id {} was recorded, the file on disk has {}. Its symbols may be wrong; pass --symfs DIR holding the recorded binary.", c.display(), hex(want), hex(have)));
                            found.get_or_insert(Arc::new(e));
                            continue;
                        }
                    }
                    found = Some(Arc::new(e));
                    mismatch = None;
                    break;
                }
                Err(_) => continue,
            }
        }
        if let Some(m) = mismatch {
            self.warnings.push(m);
        }
        if found.is_none() && path.starts_with('/') {
            self.warnings.push(format!("{path} was not found or is not an ELF file: its samples are shown as addresses. Copy it here or pass --symfs DIR."));
        }
        self.elves.insert(path.clone(), found.clone());
        found
    }

    /// Resolves `ip` of process `pid`.
    pub fn resolve(&mut self, pid: u32, ip: u64) -> Location {
        let Some(m) = self.find_map(pid, ip).cloned() else {
            return Location {
                dso: self.unknown.clone(),
                sym: None,
                vaddr: ip,
            };
        };
        let off = ip - m.start + m.pgoff;
        match self.elf(&m.path, m.build_id.as_deref()) {
            Some(elf) => {
                let vaddr = elf.offset_to_vaddr(off).unwrap_or(off);
                let sym = elf.symbol(vaddr).map(|raw| {
                    if let Some(d) = self.demangled.get(raw) {
                        return d.clone();
                    }
                    let d: Arc<str> = demangle(raw).into();
                    self.demangled.insert(raw.into(), d.clone());
                    d
                });
                Location {
                    sym,
                    dso: m.path,
                    vaddr,
                }
            }
            None => Location {
                dso: m.path,
                sym: None,
                vaddr: off,
            },
        }
    }
}

/// Reads the build-id of an ELF file on disk.
pub fn file_build_id(path: &Path) -> Option<Vec<u8>> {
    let data = std::fs::read(path).ok()?;
    Elf::parse(&data).ok()?.build_id
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn demangles_rust_and_cpp() {
        assert_eq!(
            demangle("_ZN4core3fmt5write17h0123456789abcdefE"),
            "core::fmt::write"
        );
        assert_eq!(demangle("_ZN3foo3barEv"), "foo::bar()");
        assert_eq!(demangle("int_divider_stalls"), "int_divider_stalls");
    }

    #[test]
    fn resolves_own_binary_through_its_mapping() {
        // Map this test binary as the kernel would and resolve a real function's address.
        let exe = std::env::current_exe().unwrap();
        let data = std::fs::read(&exe).unwrap();
        let elf = Elf::parse(&data).unwrap();
        let f = object::File::parse(&*data).unwrap();
        let sym = f
            .symbols()
            .find(|s| {
                s.name()
                    .is_ok_and(|n| n.contains("resolves_own_binary_through_its_mapping"))
                    && s.kind() == SymbolKind::Text
            })
            .unwrap();
        let seg = f
            .segments()
            .find(|s| s.address() <= sym.address() && sym.address() < s.address() + s.size())
            .unwrap();
        let (seg_off, _) = seg.file_range();
        let bias = 0x5555_5555_0000u64;
        let mut s = Symbolizer::new(vec![]);
        s.observe(&Record::Mmap2(Mmap2 {
            pid: 7,
            tid: 7,
            addr: (seg.address() + bias) & !0xfff,
            len: seg.size() + 0x1000,
            pgoff: seg_off & !0xfff,
            path: exe.to_string_lossy().into(),
            build_id: elf.build_id.clone(),
            ..Default::default()
        }));
        let loc = s.resolve(7, sym.address() + bias + 1);
        assert!(
            loc.sym
                .as_deref()
                .unwrap()
                .contains("resolves_own_binary_through_its_mapping"),
            "{loc:?}"
        );
        assert_eq!(loc.vaddr, sym.address() + 1);
        // A forked child shares its parent's mappings.
        s.observe(&Record::Fork(labperf_common::Task {
            pid: 8,
            ppid: 7,
            tid: 8,
            ptid: 7,
            time: 0,
        }));
        assert_eq!(s.resolve(8, sym.address() + bias + 1).sym, loc.sym);
        assert!(s.warnings.is_empty(), "{:?}", s.warnings);
        // A wrong recorded build-id is reported.
        let mut s = Symbolizer::new(vec![]);
        s.observe(&Record::Mmap2(Mmap2 {
            pid: 7,
            addr: 0,
            len: 1 << 40,
            path: exe.to_string_lossy().into(),
            build_id: Some(vec![1; 20]),
            ..Default::default()
        }));
        let _ = s.resolve(7, 0x1000);
        assert!(
            s.warnings.iter().any(|w| w.contains("does not match")),
            "{:?}",
            s.warnings
        );
    }
}
