//! Symbolization: ELF symtab/dynsym via `object`, load bias from mmap2 records, the binary
//! search path (`--symfs`, this machine's file, the binary cache), build-id and machine
//! checks, demangling.
//!
//! Every file named by a recording is untrusted input: only regular files of bounded size
//! are read (never a device or a FIFO), each file is parsed once however many names it
//! has, and addresses resolve through a per-process interval index, so the work is
//! O((mappings + distinct addresses) log mappings).

use labperf_common::{Mmap2, Record};
use object::{Object, ObjectSection, ObjectSegment, ObjectSymbol, ObjectSymbolTable, SymbolKind};
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

pub use crate::symbolize::intervals::Intervals;

/// Largest ELF file read for symbols.
pub const MAX_ELF: u64 = 2 << 30;

/// One loaded ELF file.
#[derive(Debug, Default)]
pub struct Elf {
    pub build_id: Option<Vec<u8>>,
    /// The machine it is for, as `uname -m` names it ([`elf_machine`]).
    pub machine: Option<&'static str>,
    /// The loadable segments (PT_LOAD), in file order.
    segments: Vec<Segment>,
    /// Function symbols sorted by address: (addr, size, mangled name); names are
    /// demangled only when a sample hits them.
    syms: Vec<(u64, u64, Box<str>)>,
    /// Whether the file has a full symbol table (`.symtab`), not only the dynamic one.
    pub has_symtab: bool,
    /// `.gnu_debuglink`: the separate debug file's name and its CRC-32.
    pub debuglink: Option<(String, u32)>,
    /// Whether the file has DWARF (`.debug_info`).
    pub has_dwarf: bool,
    /// The file it was read from (the binary itself, not its debug file).
    pub file: Option<PathBuf>,
    /// The file whose DWARF gives this one's source lines and inlined functions: the file
    /// itself, or its separate debug file (set when they are found).
    pub dwarf: Option<PathBuf>,
}

impl Elf {
    pub fn parse(data: &[u8]) -> Result<Elf, object::Error> {
        let f = object::File::parse(data)?;
        let build_id = f.build_id().ok().flatten().map(<[u8]>::to_vec);
        let segments = f
            .segments()
            .map(|s| {
                let (offset, filesz) = s.file_range();
                Segment {
                    offset,
                    vaddr: s.address(),
                    filesz,
                    flags: match s.flags() {
                        object::SegmentFlags::Elf { p_flags, .. } => p_flags.0,
                        _ => 0,
                    },
                }
            })
            .collect();
        let has_symtab = f.symbols().any(|s| s.kind() == SymbolKind::Text);
        let debuglink = f
            .gnu_debuglink()
            .ok()
            .flatten()
            .and_then(|(name, crc)| Some((std::str::from_utf8(name).ok()?.to_string(), crc)));
        // Aliases at one address: the name perf picks (its choose_best_symbol).
        let mut ranked: Vec<(u64, Rank, u64, Box<str>, bool)> = Vec::new();
        for table in [
            f.symbols().collect::<Vec<_>>(),
            f.dynamic_symbols().collect::<Vec<_>>(),
        ] {
            if !ranked.is_empty() {
                break;
            }
            for s in table {
                let label = is_code_label(&f, &s);
                if (s.kind() == SymbolKind::Text || label) && s.address() != 0 {
                    if let Ok(name) = s.name() {
                        let rank = Rank::of(s.size(), s.is_weak(), s.is_global(), name);
                        // A symbol without a size (`_init`, hand-written assembly) reaches
                        // the next symbol, but never past its own section: `_init` does not
                        // swallow the PLT stubs after .init.
                        let size = match (s.size(), s.section_index()) {
                            (0, Some(i)) => f
                                .section_by_index(i)
                                .ok()
                                .map(|sec| (sec.address() + sec.size()).saturating_sub(s.address()))
                                .filter(|&z| z > 0)
                                .unwrap_or(0),
                            (z, _) => z,
                        };
                        ranked.push((s.address(), rank, size, name.into(), label));
                    }
                }
            }
        }
        ranked.sort_by(|a, b| (a.0, &a.1).cmp(&(b.0, &b.1)));
        ranked.dedup_by_key(|s| s.0);
        // A label inside a function with a size (a branch target that hand-written
        // assembly names) does not split that function.
        let mut covered = 0u64;
        ranked.retain(|(a, rank, size, _, label)| {
            if *label && *a < covered {
                return false;
            }
            if !rank.0 {
                covered = covered.max(a.saturating_add(*size));
            }
            true
        });
        let mut syms: Vec<(u64, u64, Box<str>)> = ranked
            .into_iter()
            .map(|(a, _, z, n, _)| (a, z, n))
            .collect();
        // The PLT's stubs, named `sym@plt` as perf and objdump name them; a symbol the
        // file has at a stub's address is kept.
        let stubs = plt_stubs(&f, &syms);
        if !stubs.is_empty() {
            syms.extend(stubs);
            syms.sort_by_key(|s| s.0);
            syms.dedup_by_key(|s| s.0);
        }
        let has_dwarf = f.section_by_name(".debug_info").is_some();
        Ok(Elf {
            build_id,
            machine: elf_machine(data),
            segments,
            syms,
            has_symtab,
            debuglink,
            has_dwarf,
            dwarf: None,
            file: None,
        })
    }

    /// This file with the symbols of its separate debug file (which has the full symbol
    /// table a stripped file lacks); segments stay this file's.
    pub fn with_debug(&self, debug: &Elf) -> Elf {
        // The debug file's choice first at each address (a stable sort keeps it first).
        let mut syms = debug.syms.clone();
        syms.extend(self.syms.iter().cloned());
        syms.sort_by_key(|s| s.0);
        syms.dedup_by_key(|s| s.0);
        Elf {
            build_id: self.build_id.clone(),
            machine: self.machine,
            segments: self.segments.clone(),
            syms,
            has_symtab: true,
            debuglink: None,
            has_dwarf: self.has_dwarf || debug.has_dwarf,
            dwarf: debug.dwarf.clone().or_else(|| self.dwarf.clone()),
            file: self.file.clone(),
        }
    }

    /// The load bias of a mapping of this file: an address in the mapping less the bias
    /// is the file's own (ELF) virtual address. It comes from the loadable segment
    /// (PT_LOAD) the mapping was made of, as loaders map them (the kernel for an
    /// executable and its interpreter, `ld.so` for shared libraries): a segment at file
    /// offset `o` and address `v` is mapped from the page holding `o` (`pgoff`, with `o`
    /// less than a page in) at the page holding `bias + v`, so `bias = addr - (v + (pgoff -
    /// o))`. The segment is the one whose file range starts in the mapping's first bytes
    /// (or, for a mapping that starts inside a segment, holds its offset) and whose
    /// permissions are the mapping's (the same page of the file can start a read-only
    /// segment and end a writable one). `None` when no segment fits: the file is not the
    /// one that was mapped.
    ///
    /// This holds for PIE and non-PIE executables, shared libraries, static binaries,
    /// prelinked libraries (a bias of 0, or one that wraps) and the vDSO alike: it reads
    /// the file's own layout, never assuming one. Every address of a recording is turned
    /// into a file's address here (symbols, source lines, unwinding).
    pub fn bias(&self, m: &Placement) -> Option<u64> {
        const PF_X: u32 = 1;
        const PF_W: u32 = 2;
        // A mapping without its protection (an old PERF_RECORD_MMAP): perf records
        // executable mappings unless asked for data ones.
        let exec = m.prot & PROT_EXEC != 0 || m.prot == 0;
        let write = m.prot & PROT_WRITE != 0;
        let end = m.pgoff.saturating_add(m.len.max(1));
        self.segments
            .iter()
            .filter(|s| s.filesz > 0)
            .filter_map(|s| {
                let starts = m.pgoff <= s.offset && s.offset < end;
                let holds = s.offset <= m.pgoff && m.pgoff < s.offset.saturating_add(s.filesz);
                if !(starts || holds) {
                    return None;
                }
                let matching = u8::from((s.flags & PF_X != 0) == exec)
                    + u8::from((s.flags & PF_W != 0) == write);
                let rank = (
                    std::cmp::Reverse(matching),
                    !starts,
                    s.offset.abs_diff(m.pgoff),
                );
                Some((rank, s))
            })
            .min_by_key(|(rank, _)| *rank)
            .map(|(_, s)| {
                m.addr
                    .wrapping_sub(s.vaddr.wrapping_add(m.pgoff.wrapping_sub(s.offset)))
            })
    }

    /// The lowest address of the file's loadable segments (0 for PIE and shared
    /// libraries, the link address for others).
    pub fn base_vaddr(&self) -> u64 {
        self.segments.iter().map(|s| s.vaddr).min().unwrap_or(0)
    }

    /// The (mangled) name of the function containing `vaddr`.
    pub fn symbol(&self, vaddr: u64) -> Option<&str> {
        self.symbol_at(vaddr).map(|(_, name)| name)
    }

    /// [`Elf::symbol`] with the function's start.
    pub fn symbol_at(&self, vaddr: u64) -> Option<(u64, &str)> {
        let i = self.syms.partition_point(|s| s.0 <= vaddr).checked_sub(1)?;
        let (a, size, name) = &self.syms[i];
        (*size == 0 || vaddr < a.saturating_add(*size)).then_some((*a, &**name))
    }

    /// The start and end of the function of (mangled) name `name`, the first of that name
    /// in address order.
    pub fn function_named(&self, name: &str) -> Option<(u64, u64)> {
        let s = self.syms.iter().find(|s| &*s.2 == name)?;
        self.function(s.0).map(|(start, end, _)| (start, end))
    }

    /// The function containing `vaddr`: its start, its end (at most the next symbol's
    /// start) and its (mangled) name.
    pub fn function(&self, vaddr: u64) -> Option<(u64, u64, &str)> {
        let i = self.syms.partition_point(|s| s.0 <= vaddr).checked_sub(1)?;
        let (a, size, name) = &self.syms[i];
        let next = self.syms.get(i + 1).map_or(u64::MAX, |s| s.0);
        let end = if *size == 0 {
            next
        } else {
            a.saturating_add(*size).min(next)
        };
        (vaddr < end).then_some((*a, end, &**name))
    }
}

/// The stubs of the procedure linkage table, each `(address, size, "sym@plt")`, named as
/// objdump labels them and perf names the ones it knows (its
/// `dso__synthesize_plt_symbols`): each stub is read to find the GOT slot it jumps through,
/// and named after the symbol the dynamic linker writes there. A slot of an ifunc of the
/// file itself (`IRELATIVE`: no symbol, the resolver's address) is named after the
/// file's symbol at that address (libc's `strlen@plt`), else as objdump names it
/// (`*ABS*+0x9f1c0@plt`). The first stub (it calls the dynamic linker) and stubs of slots
/// without a relocation stay unnamed. Other machines, and files without the sections
/// (static binaries, separate debug files, malformed ones): none. `syms` are the file's
/// own symbols, sorted by address.
fn plt_stubs(f: &object::File<'_>, syms: &[(u64, u64, Box<str>)]) -> Vec<(u64, u64, Box<str>)> {
    let (found, types): (Vec<(u64, u64, u64)>, [u32; 3]) = match f.architecture() {
        object::Architecture::X86_64 => (
            x86_64_plt_stubs(f),
            [R_X86_64_JUMP_SLOT, R_X86_64_IRELATIVE, R_X86_64_GLOB_DAT],
        ),
        object::Architecture::Aarch64 => (
            aarch64_plt_stubs(f),
            [R_AARCH64_JUMP_SLOT, R_AARCH64_IRELATIVE, R_AARCH64_GLOB_DAT],
        ),
        _ => return Vec::new(),
    };
    if found.is_empty() {
        return Vec::new();
    }
    let mut by_slot: HashMap<u64, Target> = HashMap::new();
    for sec in [".rela.plt", ".rela.dyn"] {
        by_slot.extend(slots(f, sec, &types));
    }
    found
        .into_iter()
        .filter_map(|(at, size, slot)| {
            let name = match by_slot.get(&slot)? {
                Target::Symbol(name) => format!("{name}@plt"),
                Target::Ifunc(resolver) => {
                    let i = syms.partition_point(|s| s.0 < *resolver);
                    match syms.get(i).filter(|s| s.0 == *resolver) {
                        Some((_, _, name)) => format!("{name}@plt"),
                        None => format!("*ABS*+{resolver:#x}@plt"),
                    }
                }
            };
            Some((at, size, name.into()))
        })
        .collect()
}

/// The relocation types (`r_type`) of the GOT slots a stub jumps through (the ELF psABIs).
const R_X86_64_GLOB_DAT: u32 = 6;
const R_X86_64_JUMP_SLOT: u32 = 7;
const R_X86_64_IRELATIVE: u32 = 37;
const R_AARCH64_GLOB_DAT: u32 = 1025;
const R_AARCH64_JUMP_SLOT: u32 = 1026;
const R_AARCH64_IRELATIVE: u32 = 1032;

/// What the dynamic linker writes in a GOT slot.
enum Target<'d> {
    /// The address of this dynamic symbol.
    Symbol(&'d str),
    /// What the file's ifunc resolver at this address returns.
    Ifunc(u64),
}

/// The relocations (`Elf64_Rela`: offset, symbol << 32 | type, addend) of section `name`
/// of the types `types`: each slot's address and what is written there.
fn slots<'d>(f: &object::File<'d>, name: &str, types: &[u32]) -> Vec<(u64, Target<'d>)> {
    let Some(rela) = f.section_by_name(name) else {
        return Vec::new();
    };
    let Ok(data) = rela.data() else {
        return Vec::new();
    };
    let dynsym = f.dynamic_symbol_table();
    let little = f.is_little_endian();
    let word = |b: &[u8]| {
        let b: [u8; 8] = b.try_into().unwrap_or_default();
        if little {
            u64::from_le_bytes(b)
        } else {
            u64::from_be_bytes(b)
        }
    };
    data.chunks_exact(24)
        .filter_map(|r| {
            let (offset, info, addend) = (word(&r[..8]), word(&r[8..16]), word(&r[16..]));
            if !types.contains(&(info as u32)) {
                return None;
            }
            if info >> 32 == 0 {
                let ifunc = matches!(info as u32, R_X86_64_IRELATIVE | R_AARCH64_IRELATIVE);
                return ifunc.then_some((offset, Target::Ifunc(addend)));
            }
            let sym = dynsym
                .as_ref()?
                .symbol_by_index(object::SymbolIndex((info >> 32) as usize))
                .ok()?;
            let name = sym.name().ok().filter(|n| !n.is_empty())?;
            Some((offset, Target::Symbol(name)))
        })
        .collect()
}

/// x86_64's stubs as `(address, size, GOT slot)`: a stub is `jmp *slot(%rip)` (`ff 25` and
/// a 32-bit displacement), after an `endbr64` and a `bnd` prefix where the file has them.
/// They are in `.plt` (16 bytes each, after the first), in `.plt.sec` when the file is
/// built for indirect-branch tracking (`.plt`'s stubs then push and jump: they are left
/// unnamed, as objdump leaves them), and in `.plt.got` (8 bytes, 16 with `endbr64`),
/// which calls of functions whose address is also taken go through (`GLOB_DAT` slots).
fn x86_64_plt_stubs(f: &object::File<'_>) -> Vec<(u64, u64, u64)> {
    const ENDBR64: [u8; 4] = [0xf3, 0x0f, 0x1e, 0xfa];
    let mut stubs = Vec::new();
    for name in [".plt", ".plt.sec", ".plt.got"] {
        let Some(sec) = f.section_by_name(name) else {
            continue;
        };
        let Ok(code) = sec.data() else { continue };
        let entry = if name == ".plt.got" && !code.starts_with(&ENDBR64) {
            8
        } else {
            16
        };
        for (i, stub) in code.chunks_exact(entry).enumerate() {
            let at = sec.address().saturating_add((i * entry) as u64);
            let mut k = if stub.starts_with(&ENDBR64) { 4 } else { 0 };
            if stub.get(k) == Some(&0xf2) {
                k += 1;
            }
            let Some([0xff, 0x25, d0, d1, d2, d3]) = stub.get(k..k + 6) else {
                continue;
            };
            let disp = i32::from_le_bytes([*d0, *d1, *d2, *d3]);
            let slot = at
                .wrapping_add(k as u64 + 6)
                .wrapping_add_signed(i64::from(disp));
            stubs.push((at, entry as u64, slot));
        }
    }
    stubs
}

/// aarch64's stubs as `(address, size, GOT slot)`: a stub loads its slot with `adrp x16,
/// page` and `ldr x17, [x16, #offset]`, after a `bti c` where the file has one, and ends
/// where the next begins (16 bytes, 24 with `-z pac-plt` or a non-PIE BTI build; perf
/// 6.1 assumes 16 and misnames the latter). The first stub loads a slot no relocation
/// fills, and stays unnamed.
fn aarch64_plt_stubs(f: &object::File<'_>) -> Vec<(u64, u64, u64)> {
    const BTI_C: u32 = 0xd503_245f;
    let Some(plt) = f.section_by_name(".plt") else {
        return Vec::new();
    };
    let Ok(code) = plt.data() else {
        return Vec::new();
    };
    let words: Vec<u32> = code
        .chunks_exact(4)
        .map(|w| u32::from_le_bytes([w[0], w[1], w[2], w[3]]))
        .collect();
    let mut found: Vec<(u64, u64)> = Vec::new();
    for (i, pair) in words.windows(2).enumerate() {
        let (adrp, ldr) = (pair[0], pair[1]);
        // `adrp x16, #imm` and `ldr x17, [x16, #imm12 * 8]`.
        if adrp & 0x9f00_001f != 0x9000_0010 || ldr & 0xffc0_03ff != 0xf940_0211 {
            continue;
        }
        let pc = plt.address().wrapping_add(4 * i as u64);
        let imm = (((adrp >> 5) & 0x7_ffff) << 2) | ((adrp >> 29) & 3);
        // Sign-extended from 21 bits, in pages.
        let pages = (i64::from(imm) << 43) >> 43;
        let page = (pc & !0xfff).wrapping_add_signed(pages << 12);
        let slot = page.wrapping_add(u64::from((ldr >> 10) & 0xfff) * 8);
        let start = if i > 0 && words[i - 1] == BTI_C {
            pc - 4
        } else {
            pc
        };
        found.push((start, slot));
    }
    let end = plt.address().saturating_add(plt.size());
    (0..found.len())
        .map(|i| {
            let (at, slot) = found[i];
            let next = found.get(i + 1).map_or(end, |n| n.0);
            (at, next.saturating_sub(at), slot)
        })
        .filter(|s| s.1 > 0)
        .collect()
}

/// A loadable segment (PT_LOAD) of an ELF file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Segment {
    offset: u64,
    vaddr: u64,
    filesz: u64,
    /// `p_flags`: PF_X (1), PF_W (2), PF_R (4).
    flags: u32,
}

/// `PROT_WRITE` and `PROT_EXEC` of a mapping's protection.
const PROT_WRITE: u32 = 2;
const PROT_EXEC: u32 = 4;

/// Where a file is mapped, as a mapping record says: its start address, length, the
/// offset in the file it maps from, and its protection (`PROT_*`; 0 when unknown).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Placement {
    pub addr: u64,
    pub len: u64,
    pub pgoff: u64,
    pub prot: u32,
}

impl From<&Mmap2> for Placement {
    fn from(m: &Mmap2) -> Placement {
        Placement {
            addr: m.addr,
            len: m.len,
            pgoff: m.pgoff,
            prot: m.prot,
        }
    }
}

/// The `uname -m` name of an ELF file's machine (e_machine), or None when `data` is not
/// ELF; `Some("unknown")` for machines labperf has no agent for.
pub fn elf_machine(data: &[u8]) -> Option<&'static str> {
    if data.len() < 20 || &data[..4] != b"\x7fELF" {
        return None;
    }
    let m = match data[5] {
        2 => u16::from_be_bytes([data[18], data[19]]),
        _ => u16::from_le_bytes([data[18], data[19]]),
    };
    Some(match m {
        62 => "x86_64",
        183 => "aarch64",
        0x9026 | 41 => "alpha",
        _ => "unknown",
    })
}

/// A recording's architecture as [`elf_machine`] names ELF machines.
pub fn arch_name(a: &labperf_common::Arch) -> &'static str {
    match labperf_common::Arch::from_uname(a.name()) {
        labperf_common::Arch::X86_64 => "x86_64",
        labperf_common::Arch::Aarch64 => "aarch64",
        labperf_common::Arch::Alpha => "alpha",
        labperf_common::Arch::Other(_) => "unknown",
    }
}

/// Whether `s` is a label in code: a symbol of no type (`STT_NOTYPE`, as hand-written
/// assembly defines `_start` in the dynamic loader and in musl's static binaries) in an
/// executable section, visible (not hidden or internal), and not an Arm mapping symbol
/// (`$x`, `$d`). perf names such places after the label; a function symbol is preferred at
/// one address.
fn is_code_label<'d>(f: &object::File<'d>, s: &object::Symbol<'d, '_>) -> bool {
    if s.kind() != SymbolKind::Unknown || !s.is_definition() {
        return false;
    }
    if s.name()
        .map_or(true, |n| n.is_empty() || n.starts_with('$'))
    {
        return false;
    }
    if matches!(
        s.flags().elf_visibility(),
        Some(object::elf::STV_HIDDEN | object::elf::STV_INTERNAL)
    ) {
        return false;
    }
    let Some(i) = s.section_index() else {
        return false;
    };
    f.section_by_index(i).is_ok_and(|sec| {
        matches!(sec.flags(), object::SectionFlags::Elf { sh_flags, .. } if sh_flags.0 & object::elf::SHF_EXECINSTR.0 != 0)
    })
}

/// How perf chooses among symbols at one address, best first: one with a size, a
/// non-weak one, a global one, fewer leading underscores, the longer name.
#[derive(Debug, PartialEq, Eq, PartialOrd, Ord)]
struct Rank(bool, bool, bool, usize, std::cmp::Reverse<usize>);

impl Rank {
    fn of(size: u64, weak: bool, global: bool, name: &str) -> Rank {
        let underscores = name.len() - name.trim_start_matches('_').len();
        Rank(
            size == 0,
            weak,
            !global,
            underscores,
            std::cmp::Reverse(name.len()),
        )
    }
}

/// Demangles Rust (legacy and v0) and C++ names; others are returned as they are.
pub fn demangle(name: &str) -> String {
    demangle_as(name, false)
}

/// A symbol's name for people, as perf shows it: C++ names without their parameter lists
/// and return types (`std::map<K, V>::operator[]`; template arguments stay, so that two
/// instances stay two functions), Rust names without their hash; `full`: the whole C++
/// signature (`--full-names`, perf's `-v`).
pub fn demangle_as(name: &str, full: bool) -> String {
    // A PLT stub's name: its symbol demangled, as perf shows it.
    if let Some(sym) = name.strip_suffix("@plt") {
        return format!("{}@plt", demangle_as(sym, full));
    }
    if let Ok(d) = rustc_demangle::try_demangle(name) {
        return format!("{d:#}");
    }
    if name.starts_with("_Z") && name.len() < 4096 {
        if let Ok(s) = cpp_demangle::Symbol::new(name) {
            let o = cpp_demangle::DemangleOptions::default();
            let o = if full {
                o
            } else {
                o.no_params().no_return_type()
            };
            if let Ok(d) = s.demangle(&o) {
                return d;
            }
        }
    }
    name.to_string()
}

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

/// Most bytes a file's DWARF sections take once read (after decompression), together.
pub const MAX_DWARF_SECTION: u64 = 1 << 30;

type Slice = gimli::EndianArcSlice<gimli::RunTimeEndian>;

/// A file's DWARF, for source lines and inlined functions (the `addr2line` crate).
pub struct Lines {
    ctx: addr2line::Context<Slice>,
}

impl std::fmt::Debug for Lines {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Lines")
    }
}

/// The source of one address: the innermost function's file and line, and the functions
/// inlined there, innermost first (empty when none is inlined).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Source {
    /// The line in the function the symbol table names (for code inlined into it, the
    /// line that calls the outermost inlined function): the file as DWARF names it (joined
    /// to its directory), and the line; `None` where the file has no line for the address.
    pub line: Option<(Arc<str>, u32)>,
    /// The inlined functions' names (demangled), innermost first; the function that
    /// contains them all is the symbol table's.
    pub inlined: Vec<Arc<str>>,
}

impl Lines {
    /// Reads the DWARF of an ELF file's bytes. Compressed sections are inflated only while
    /// all of them stay within [`MAX_DWARF_SECTION`] and each within 64 times its
    /// compressed size; a section that does not is read as empty (no lines from it).
    pub fn parse(data: &[u8]) -> Option<Lines> {
        use object::{Object, ObjectSection};
        let f = object::File::parse(data).ok()?;
        let endian = if f.is_little_endian() {
            gimli::RunTimeEndian::Little
        } else {
            gimli::RunTimeEndian::Big
        };
        // What compressed sections may inflate to, together: a crafted file (the binary
        // cache holds what lab machines send) states any size.
        let mut budget = MAX_DWARF_SECTION;
        let load = |id: gimli::SectionId| -> Result<Slice, gimli::Error> {
            let bytes: Arc<[u8]> = match f.section_by_name(id.name()) {
                Some(sec) => {
                    let fits = sec.compressed_data().is_ok_and(|c| {
                        let n = c.uncompressed_size;
                        // zlib and zstd reach about 1000:1 on crafted input; debug
                        // sections compress 3 to 10 times.
                        let sane = n <= 64u64.saturating_mul(c.data.len() as u64) + (1 << 20);
                        let ok = n <= budget && sane;
                        if ok {
                            budget -= n;
                        }
                        ok
                    });
                    match (fits, sec.uncompressed_data()) {
                        (true, Ok(d)) => Arc::from(d.as_ref()),
                        _ => Arc::from(&[][..]),
                    }
                }
                None => Arc::from(&[][..]),
            };
            Ok(gimli::EndianArcSlice::new(bytes, endian))
        };
        let dwarf = gimli::Dwarf::load(load).ok()?;
        let ctx = addr2line::Context::from_dwarf(dwarf).ok()?;
        Some(Lines { ctx })
    }

    /// The innermost source line of `vaddr` (the file's own address): for code inlined
    /// there, the inlined function's own line, as `objdump -S` and `perf annotate` show it.
    pub fn location(&self, vaddr: u64) -> Option<(Arc<str>, u32)> {
        let l = self.ctx.find_location(vaddr).ok()??;
        Some((Arc::from(l.file?), l.line?))
    }

    /// The source of `vaddr` (the file's own address); `full`: inlined functions' names
    /// with their parameter lists ([`demangle_as`]).
    pub fn source(&self, vaddr: u64, full: bool) -> Source {
        let mut out = Source::default();
        let Ok(mut frames) = self.ctx.find_frames(vaddr).skip_all_loads() else {
            return out;
        };
        // Each frame's name, innermost first, and whether it is a C++ name without its
        // scope (DWARF's DW_AT_name where no linkage name was kept: `operator()` of a
        // lambda, `vector`, `~vector`), which alone would join unrelated functions.
        let mut names: Vec<(String, bool)> = Vec::new();
        // Bounded: a crafted file could nest inlined functions without end.
        for _ in 0..256 {
            let Ok(Some(f)) = frames.next() else { break };
            // The last frame's location wins: the line in the function that holds the
            // inlined ones (the call site of the outermost inlined function).
            out.line = f
                .location
                .as_ref()
                .and_then(|l| Some((Arc::from(l.file?), l.line?)));
            let name = f
                .function
                .as_ref()
                .and_then(|n| n.raw_name().ok())
                .map(|n| demangle_as(&n, full))
                .unwrap_or_else(|| "[inlined]".into());
            let cxx = f
                .function
                .as_ref()
                .and_then(|n| n.language)
                .is_some_and(|l| {
                    matches!(
                        l,
                        gimli::DW_LANG_C_plus_plus
                            | gimli::DW_LANG_C_plus_plus_03
                            | gimli::DW_LANG_C_plus_plus_11
                            | gimli::DW_LANG_C_plus_plus_14
                    )
                });
            let bare = cxx && !name.contains("::");
            names.push((name, bare));
        }
        out.inlined = qualified(names);
        out
    }
}

/// The names of the functions inlined at an address (`names`: innermost first, the last
/// the function they are inlined into), a C++ name without its scope told apart by the
/// function it is inlined into: `operator() [in apply]`.
fn qualified(mut names: Vec<(String, bool)>) -> Vec<Arc<str>> {
    let Some((outer, _)) = names.pop() else {
        return Vec::new();
    };
    let mut out: Vec<Arc<str>> = vec![Arc::from(""); names.len()];
    let mut into = outer;
    for (k, (name, bare)) in names.into_iter().enumerate().rev() {
        let shown = if bare {
            format!("{name} [in {into}]")
        } else {
            name
        };
        out[k] = Arc::from(shown.as_str());
        into = shown;
    }
    out
}

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
mod tests {
    use super::*;

    #[test]
    fn labels_in_code_are_named_unless_inside_a_function() {
        // Hand-written assembly as ld.so's and musl's `_start` are: a label of no type and
        // no size (named, as perf names it), a function with a size and a label inside it
        // (the function's), a hidden label (not named).
        let d = std::env::temp_dir().join(format!("labperf-labels-{}", std::process::id()));
        std::fs::create_dir_all(&d).unwrap();
        std::fs::write(
            d.join("l.s"),
            ".text\n nop\n.globl entry\nentry:\n nop\n nop\n.globl f\n.type f,@function\nf:\n nop\ninner:\n nop\n ret\n.size f, .-f\n.globl hid\n.hidden hid\nhid:\n nop\n",
        )
        .unwrap();
        let st = std::process::Command::new("gcc")
            .args(["-c", "-o"])
            .arg(d.join("l.o"))
            .arg(d.join("l.s"))
            .status()
            .expect("gcc (cargo xtask setup installs it)");
        assert!(st.success());
        let data = std::fs::read(d.join("l.o")).unwrap();
        let _ = std::fs::remove_dir_all(&d);
        let e = Elf::parse(&data).unwrap();
        // A nop at 0, entry at 1, f at 3 (inner at 4, its end at 6), hid at 6.
        assert_eq!(e.symbol(1), Some("entry"), "{:?}", e.syms);
        assert_eq!(e.symbol(2), Some("entry"), "{:?}", e.syms);
        assert_eq!(e.symbol(4), Some("f"), "{:?}", e.syms);
        assert_eq!(e.symbol(5), Some("f"), "{:?}", e.syms);
        assert!(
            e.syms.iter().all(|s| &*s.2 != "inner" && &*s.2 != "hid"),
            "{:?}",
            e.syms
        );
        assert_eq!(e.function(4), Some((3, 6, "f")));
        assert_eq!(e.function(1), Some((1, 3, "entry")));
    }

    #[test]
    fn a_symbol_without_a_size_ends_with_its_section() {
        // A dynamic C program: `_init` (no size) in .init, then the PLT's stubs, which
        // belong to no function (perf shows them apart); they were all named `_init`.
        let d = std::env::temp_dir().join(format!("labperf-plt-{}", std::process::id()));
        std::fs::create_dir_all(&d).unwrap();
        std::fs::write(
            d.join("p.c"),
            "#include <stdio.h>\nint main(void) { puts(\"x\"); return 0; }\n",
        )
        .unwrap();
        let st = std::process::Command::new("gcc")
            .args(["-O1", "-fno-pie", "-no-pie", "-o"])
            .arg(d.join("p"))
            .arg(d.join("p.c"))
            .status()
            .expect("gcc (cargo xtask setup installs it)");
        assert!(st.success());
        let data = std::fs::read(d.join("p")).unwrap();
        let _ = std::fs::remove_dir_all(&d);
        let f = object::File::parse(&*data).unwrap();
        let sec = |n: &str| f.section_by_name(n).unwrap_or_else(|| panic!("no {n}"));
        let (init, plt) = (sec(".init"), sec(".plt"));
        let e = Elf::parse(&data).unwrap();
        assert_eq!(e.symbol(init.address()), Some("_init"));
        // The PLT's first stub (it calls the dynamic linker) is no function's; the next
        // ones are named as perf names them.
        assert_eq!(e.symbol(plt.address()), None);
        assert_eq!(e.symbol(plt.address() + plt.size() - 1), Some("puts@plt"));
    }

    /// Each stub objdump labels `<sym@plt>` in `file` (binutils finds the stubs by
    /// decoding them) has that name here, from its first byte to its last; a stub of an
    /// ifunc objdump labels `<*ABS*+0xADDR@plt>` is named after the function at ADDR.
    /// Returns the names.
    fn assert_stubs_as_objdump(file: &Path, objdump: &str) -> Vec<String> {
        let o = std::process::Command::new(objdump)
            .arg("-d")
            .arg(file)
            .output()
            .unwrap_or_else(|e| panic!("{objdump} (binutils): {e}"));
        // "0000000000001030 <puts@plt>:"
        let labels: Vec<(u64, String)> = String::from_utf8_lossy(&o.stdout)
            .lines()
            .filter_map(|l| {
                let (a, rest) = l.split_once(" <")?;
                let name = rest.strip_suffix(">:")?;
                name.ends_with("@plt")
                    .then(|| Some((u64::from_str_radix(a, 16).ok()?, name.to_string())))?
            })
            .collect();
        let e = Elf::parse(&std::fs::read(file).unwrap()).unwrap();
        let f = file.display();
        let mut names = Vec::new();
        for (a, label) in &labels {
            let want = match label.strip_prefix("*ABS*+0x") {
                Some(ifunc) => {
                    let resolver = u64::from_str_radix(ifunc.trim_end_matches("@plt"), 16).unwrap();
                    let (start, _, name) = e.function(resolver).unwrap();
                    assert_eq!(start, resolver, "{f}: {label}");
                    format!("{name}@plt")
                }
                None => label.clone(),
            };
            let (start, end, n) = e.function(*a).unwrap_or_else(|| panic!("{f}: {a:#x}"));
            assert_eq!((start, n), (*a, want.as_str()), "{f}: {a:#x}");
            assert_eq!(e.symbol(end - 1), Some(want.as_str()), "{f}: {a:#x}");
            if let Some((next, _)) = labels.iter().find(|(b, _)| b > a) {
                assert!(end <= *next, "{f}: {want} at {a:#x} reaches {end:#x}");
            }
            names.push(want);
        }
        names
    }

    /// A C program calling libc through its PLT, built by `cc` with `flags`: its stubs
    /// are named as objdump labels them.
    fn plt_stubs_are_named_as_objdump_labels_them(cc: &str, objdump: &str, flags: &[&str]) {
        let d = std::env::temp_dir().join(format!(
            "labperf-plt-{cc}-{}-{}",
            flags.join(""),
            std::process::id()
        ));
        std::fs::create_dir_all(&d).unwrap();
        std::fs::write(
            d.join("p.c"),
            "#include <stdio.h>\n#include <stdlib.h>\n#include <string.h>\n#include <unistd.h>\n\
             int main(int c, char **v) { puts(v[0]); printf(\"%ld %zu %d\\n\", labs(-c), \
             strlen(v[0]), getpid()); return 0; }\n",
        )
        .unwrap();
        let st = std::process::Command::new(cc)
            .args(["-O1", "-fno-builtin"])
            .args(flags)
            .arg("-o")
            .arg(d.join("p"))
            .arg(d.join("p.c"))
            .status()
            .unwrap_or_else(|e| panic!("{cc} (cargo xtask setup installs it): {e}"));
        assert!(st.success());
        let names = assert_stubs_as_objdump(&d.join("p"), objdump);
        let _ = std::fs::remove_dir_all(&d);
        for want in [
            "puts@plt",
            "printf@plt",
            "labs@plt",
            "strlen@plt",
            "getpid@plt",
        ] {
            assert!(
                names.iter().any(|n| n == want),
                "{cc} {flags:?}: objdump's stubs {names:?}"
            );
        }
    }

    #[test]
    fn plt_stubs_are_named_sym_at_plt_on_x86_64() {
        if cfg!(not(target_arch = "x86_64")) {
            return;
        }
        for flags in [
            &[][..],
            &["-fno-pie", "-no-pie"],
            &["-Wl,-z,now"],
            // Indirect-branch tracking: the calls go through `.plt.sec`.
            &["-fcf-protection", "-Wl,-z,ibtplt"],
        ] {
            plt_stubs_are_named_as_objdump_labels_them("gcc", "objdump", flags);
        }
        // libc's own stubs are of its ifuncs (`IRELATIVE` slots).
        let libc = Path::new("/lib/x86_64-linux-gnu/libc.so.6");
        let names = assert_stubs_as_objdump(libc, "objdump");
        assert!(names.len() > 10, "{names:?}");
    }

    #[test]
    fn plt_stubs_are_named_sym_at_plt_on_aarch64() {
        for flags in [
            &[][..],
            &["-fno-pie", "-no-pie"],
            // 24-byte stubs: pointer authentication, and BTI in an executable.
            &["-Wl,-z,pac-plt"],
            &[
                "-mbranch-protection=standard",
                "-Wl,-z,force-bti",
                "-fno-pie",
                "-no-pie",
            ],
            &[
                "-mbranch-protection=standard",
                "-Wl,-z,force-bti,-z,pac-plt",
            ],
        ] {
            plt_stubs_are_named_as_objdump_labels_them(
                "aarch64-linux-gnu-gcc",
                "aarch64-linux-gnu-objdump",
                flags,
            );
        }
    }

    #[test]
    fn a_plt_stub_s_symbol_is_demangled() {
        assert_eq!(demangle("_ZdlPv@plt"), "operator delete@plt");
        assert_eq!(
            demangle_as("_ZdlPv@plt", true),
            "operator delete(void*)@plt"
        );
        assert_eq!(demangle("puts@plt"), "puts@plt");
    }

    #[test]
    fn the_load_bias_comes_from_the_segment_a_mapping_maps() {
        // (offset, vaddr, file size, p_flags: X 1, W 2, R 4) of each PT_LOAD.
        let elf = |segs: &[(u64, u64, u64, u32)]| Elf {
            segments: segs
                .iter()
                .map(|&(offset, vaddr, filesz, flags)| Segment {
                    offset,
                    vaddr,
                    filesz,
                    flags,
                })
                .collect(),
            ..Default::default()
        };
        let at = |addr, len, pgoff, prot| Placement {
            addr,
            len,
            pgoff,
            prot,
        };
        // gcc -O2 tiny PIE (-z separate-code): a 0x50d-byte executable segment in one page;
        // the middle of its mapping lies past it (where the unwinder used to look).
        let pie = elf(&[
            (0, 0, 0x6b0, 4),
            (0x1000, 0x1000, 0x50d, 5),
            (0x2000, 0x2000, 0x1f8, 4),
            (0x2dd0, 0x3dd0, 0x258, 6),
        ]);
        let base = 0x5555_5555_4000;
        assert_eq!(pie.bias(&at(base + 0x1000, 0x1000, 0x1000, 5)), Some(base));
        assert_eq!(pie.bias(&at(base, 0x1000, 0, 1)), Some(base));
        assert_eq!(pie.bias(&at(base + 0x2000, 0x1000, 0x2000, 1)), Some(base));
        // The writable segment starts in the read-only one's last page of the file.
        assert_eq!(pie.bias(&at(base + 0x3000, 0x2000, 0x2000, 3)), Some(base));
        // A mapping that starts inside its segment (the writable segment's second page,
        // split from the first by RELRO, as /proc lists it).
        assert_eq!(pie.bias(&at(base + 0x4000, 0x1000, 0x3000, 3)), Some(base));
        // Old ld without separate code, non-PIE: text and data share a page of the file.
        let old = elf(&[(0, 0x40_0000, 0x8f0, 5), (0xdb8, 0x60_0db8, 0x230, 6)]);
        assert_eq!(old.bias(&at(0x40_0000, 0x1000, 0, 5)), Some(0));
        assert_eq!(old.bias(&at(0x60_0000, 0x1000, 0, 3)), Some(0));
        // Protection unknown (an old PERF_RECORD_MMAP): code.
        assert_eq!(old.bias(&at(0x40_0000, 0x1000, 0, 0)), Some(0));
        // A prelinked library loaded below its link address: the bias wraps.
        let pre = elf(&[(0, 0x3a00_0000, 0x5000, 5)]);
        let b = pre.bias(&at(0x1000_0000, 0x5000, 0, 5)).unwrap();
        assert_eq!(0x1000_0123u64.wrapping_sub(b), 0x3a00_0123);
        // A large text mapped in two pieces.
        let big = elf(&[(0x1000, 0x1000, 0x3000, 5)]);
        assert_eq!(big.bias(&at(base + 0x2000, 0x1000, 0x2000, 5)), Some(base));
        // The vDSO: one segment from its first byte.
        let vdso = elf(&[(0, 0, 0x1500, 5)]);
        let v = 0x7fff_f7fc_1000;
        assert_eq!(vdso.bias(&at(v, 0x2000, 0, 5)), Some(v));
        // A static non-PIE binary: no bias.
        let st = elf(&[(0, 0x40_0000, 0x500, 4), (0x1000, 0x40_1000, 0x7_8000, 5)]);
        assert_eq!(st.bias(&at(0x40_1000, 0x7_8000, 0x1000, 5)), Some(0));
        // An offset no segment maps: another file.
        assert_eq!(pie.bias(&at(base + 0x9000, 0x1000, 0x9000, 5)), None);
    }

    #[test]
    fn a_cxx_name_without_its_scope_is_told_apart_by_the_function_it_is_inlined_into() {
        let names = |v: &[(&str, bool)]| -> Vec<String> {
            qualified(v.iter().map(|(n, b)| (n.to_string(), *b)).collect())
                .iter()
                .map(|n| n.to_string())
                .collect()
        };
        // Two lambdas' operator(), each inlined into its own apply<>: two names.
        assert_eq!(
            names(&[("operator()", true), ("apply<a::<lambda> >", false)]),
            ["operator() [in apply<a::<lambda> >]"]
        );
        assert_eq!(
            names(&[("operator()", true), ("apply<b::<lambda> >", false)]),
            ["operator() [in apply<b::<lambda> >]"]
        );
        // A chain: each bare name by its own outer one; qualified names and C stay.
        assert_eq!(
            names(&[
                ("vector", true),
                ("std::map<int, int>::operator[]", false),
                ("mix", false),
                ("main", false)
            ]),
            [
                "vector [in std::map<int, int>::operator[]]",
                "std::map<int, int>::operator[]",
                "mix"
            ]
        );
        assert!(names(&[]).is_empty());
    }

    #[test]
    fn demangles_rust_and_cpp() {
        assert_eq!(
            demangle("_ZN4core3fmt5write17h0123456789abcdefE"),
            "core::fmt::write"
        );
        // As perf shows them: no parameter list, no return type; the whole with `full`.
        assert_eq!(demangle("_ZN3foo3barEv"), "foo::bar");
        assert_eq!(demangle_as("_ZN3foo3barEv", true), "foo::bar()");
        assert_eq!(
            demangle("_Z11sum_squaresIlET_RKSt6vectorIS0_SaIS0_EERd"),
            "sum_squares<long>"
        );
        assert_eq!(
            demangle_as("_Z11sum_squaresIlET_RKSt6vectorIS0_SaIS0_EERd", true),
            "long sum_squares<long>(std::vector<long, std::allocator<long> > const&, double&)"
        );
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
        let mut s = Symbolizer::new(Search::new(vec![]));
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
        let mut s = Symbolizer::new(Search::new(vec![]));
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
        // Devices and FIFOs named by a recording are never read.
        for p in ["/dev/zero", "/dev/urandom"] {
            let mut s = Symbolizer::new(Search::new(vec![]));
            s.observe(&Record::Mmap2(Mmap2 {
                pid: 1,
                addr: 0,
                len: 1 << 20,
                path: p.into(),
                ..Default::default()
            }));
            assert_eq!(s.resolve(1, 0x10).sym, None);
        }
    }

    fn header(arch: labperf_common::Arch) -> labperf_common::Header {
        labperf_common::Header {
            agent_version: "test".into(),
            arch,
            endian: labperf_common::Endian::Little,
            kernel_release: String::new(),
            cpu: labperf_common::CpuId::Unknown {
                cpuinfo: String::new(),
            },
            hostname: "this-very-machine".into(),
            command: vec![],
            clock_id: 1,
            start_time_ns: 0,
            start_realtime_ns: 0,
            events: vec![],
            mode: "sample".into(),
            notes: vec![],
        }
    }

    #[test]
    fn cache_entries_are_used_only_with_the_recorded_build_id_and_machine() {
        let d = std::env::temp_dir().join(format!("lp-sym-cache-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        let root = d.join("binaries");
        let real = std::fs::read("/bin/true").unwrap();
        let id = Elf::parse(&real)
            .unwrap()
            .build_id
            .expect("/bin/true has a build-id");
        let entry = crate::files::cache::by_build_id(&root, &id).unwrap();
        std::fs::create_dir_all(entry.parent().unwrap()).unwrap();
        let src = crate::record::load::Source::bytes("mem.lpr", Arc::new(Vec::<u8>::new()));
        // What a recording of `arch` (None: no header) resolves "/lab/only/true" of build-id `id` to.
        let resolve = |arch: Option<labperf_common::Arch>| {
            let mut s = Symbolizer::new(Search {
                symfs: vec![],
                cache: Some(root.clone()),
                local: true,
                ..Default::default()
            });
            let h = arch.map(header);
            s.recorded_on(&src, h.as_ref(), None);
            let e = s.binary("/lab/only/true", Some(&id));
            (e.map(|e| e.build_id.clone()), s.warnings)
        };
        std::fs::write(&entry, &real).unwrap();
        assert_eq!(
            resolve(Some(labperf_common::Arch::X86_64)).0,
            Some(Some(id.clone()))
        );
        // Another machine's recording, or one whose machine is unknown: not used.
        let (e, w) = resolve(Some(labperf_common::Arch::Aarch64));
        assert_eq!(e, None);
        assert!(
            w.iter()
                .any(|w| w.contains("not an ELF file of the recording's machine")),
            "{w:?}"
        );
        assert_eq!(resolve(None).0, None);
        // The same bytes claiming another machine (e_machine aarch64): not used.
        let mut arm = real.clone();
        arm[18..20].copy_from_slice(&183u16.to_le_bytes());
        std::fs::write(&entry, &arm).unwrap();
        assert_eq!(resolve(Some(labperf_common::Arch::X86_64)).0, None);
        // Another file under that build-id's name: never used, not even as a last resort.
        std::fs::write(&entry, std::fs::read("/bin/ls").unwrap()).unwrap();
        let (e, w) = resolve(Some(labperf_common::Arch::X86_64));
        assert_eq!(e, None);
        assert!(
            w.iter().any(|w| w.contains("not of the recorded build-id")),
            "{w:?}"
        );
        // A local file with the recorded build-id comes before the cache: a copy in the
        // cache that fits (another file claiming that build-id) does not change what
        // /bin/true resolves to.
        let mut claimed = real.clone();
        claimed.push(0);
        std::fs::write(&entry, &claimed).unwrap();
        assert_eq!(
            resolve(Some(labperf_common::Arch::X86_64)).0,
            Some(Some(id.clone()))
        );
        let mut s = Symbolizer::new(Search {
            symfs: vec![],
            cache: Some(root.clone()),
            local: true,
            ..Default::default()
        });
        let h = header(labperf_common::Arch::X86_64);
        s.recorded_on(&src, Some(&h), None);
        let e = s.binary("/bin/true", Some(&id)).unwrap();
        assert_eq!(e.file.as_deref(), Some(Path::new("/bin/true")));
        std::fs::remove_dir_all(&d).unwrap();
    }
}
