//! A file's DWARF read for source lines and inlined functions (the `addr2line` crate), within a size budget: the innermost line of an address and the functions inlined there.

use crate::symbolize::demangle::demangle_as;
use std::sync::Arc;

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
pub(crate) fn qualified(mut names: Vec<(String, bool)>) -> Vec<Arc<str>> {
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
