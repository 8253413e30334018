//! One ELF file read for symbols: its functions (symtab, dynsym, PLT stubs), its code
//! segments and how a mapping places them, its machine; bounded, as every file a recording
//! names is untrusted input.

use labperf_common::Mmap2;
use object::{Object, ObjectSection, ObjectSegment, ObjectSymbol, ObjectSymbolTable, SymbolKind};
use std::collections::HashMap;
use std::path::PathBuf;

/// Largest ELF file read for symbols.
pub const MAX_ELF: u64 = 2 << 30;

/// One loaded ELF file.
#[derive(Debug, Default)]
pub struct Elf {
    pub build_id: Option<Vec<u8>>,
    /// The machine it is for, as `uname -m` names it ([`elf_machine`]).
    pub machine: Option<&'static str>,
    /// The loadable segments (PT_LOAD), in file order.
    pub(crate) segments: Vec<Segment>,
    /// Function symbols sorted by address: (addr, size, mangled name); names are
    /// demangled only when a sample hits them.
    pub(crate) syms: Vec<(u64, u64, Box<str>)>,
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
pub(crate) struct Segment {
    pub(crate) offset: u64,
    pub(crate) vaddr: u64,
    pub(crate) filesz: u64,
    /// `p_flags`: PF_X (1), PF_W (2), PF_R (4).
    pub(crate) flags: u32,
}

/// `PROT_WRITE` and `PROT_EXEC` of a mapping's protection.
const PROT_WRITE: u32 = 2;
pub(crate) const PROT_EXEC: u32 = 4;

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
