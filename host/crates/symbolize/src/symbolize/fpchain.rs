//! `-g` callchains whose sampled function had no frame of its own where it was sampled. The
//! kernel's frame-pointer walk starts from the frame pointer register, which such a function
//! left as its caller's: the walk reads the caller's frame, and the caller is missing from
//! the chain (its caller's return address comes right after the sampled address). gcc builds
//! leaf functions without a frame even with `-fno-omit-frame-pointer` (before gcc 14,
//! `-mno-omit-leaf-frame-pointer` too), and every function is without one at its first and
//! last instructions. Found from the function's CFI at the sampled address (x86_64: the
//! canonical frame address is not counted from the frame pointer; aarch64: the link register
//! is not saved); the caller is restored when the instruction before the next return address
//! is a direct call (it names the caller; a call of a PLT stub names it when the sampled
//! function's file defines the stub's symbol), and counted as missed otherwise (an indirect
//! call: a thread's start, a function pointer; a stub into another file). Where no CFI covers the sampled place
//! (hand-written assembly), the caller is restored only when that call names a function of
//! the same file that calls the sampled one directly.

use crate::symbolize::symbols::{Elf, Symbolizer, MAX_ELF};
use gimli::{LittleEndian, UnwindSection};
use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::Arc;

/// What became of a callchain's sampled function's caller.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Leaf {
    /// The function had its frame where it was sampled (the chain is whole), or nothing is
    /// known of it (no CFI, no file here, no next return address).
    Whole,
    /// Its caller was missing; restored at this return address (the call site in the caller).
    Restored(u64),
    /// Its caller is missing and could not be found (called through a pointer, or through
    /// a PLT stub into another file than the sampled function's).
    Missed,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Isa {
    X86_64,
    Aarch64,
}

/// A file's code and CFI, as the file's own addresses find them.
pub struct Code {
    data: labperf_common::Shared,
    isa: Isa,
    /// Sections with code or CFI: (address, file offset, size).
    sections: Vec<(u64, u64, u64)>,
    eh_frame: Option<(u64, u64, u64)>,
    eh_frame_hdr: Option<(u64, u64, u64)>,
    debug_frame: Option<(u64, u64, u64)>,
    text: u64,
}

impl Code {
    fn read(elf: &Elf) -> Option<Code> {
        use object::{Object, ObjectSection};
        let path = elf.file.as_ref()?;
        let data = crate::files::mapped::map_regular(path, MAX_ELF).ok()?;
        let f = object::File::parse((*data).as_ref()).ok()?;
        let isa = match f.architecture() {
            object::Architecture::X86_64 => Isa::X86_64,
            object::Architecture::Aarch64 => Isa::Aarch64,
            _ => return None,
        };
        let range = |s: &object::Section| Some((s.address(), s.file_range()?.0, s.size()));
        let sec = |n: &str| f.section_by_name(n).and_then(|s| range(&s));
        let sections = f
            .sections()
            .filter(|s| s.kind() == object::SectionKind::Text)
            .filter_map(|s| range(&s))
            .collect();
        let (eh_frame, eh_frame_hdr, debug_frame) =
            (sec(".eh_frame"), sec(".eh_frame_hdr"), sec(".debug_frame"));
        let text = sec(".text").map_or(0, |t| t.0);
        drop(f);
        Some(Code {
            data,
            isa,
            sections,
            eh_frame,
            eh_frame_hdr,
            debug_frame,
            text,
        })
    }

    fn bytes(&self, (_, off, size): (u64, u64, u64)) -> Option<&[u8]> {
        let d: &[u8] = (*self.data).as_ref();
        d.get(usize::try_from(off).ok()?..usize::try_from(off.checked_add(size)?).ok()?)
    }

    /// `len` bytes of code at file address `at`.
    fn code(&self, at: u64, len: u64) -> Option<&[u8]> {
        let s = *self
            .sections
            .iter()
            .find(|s| s.0 <= at && at.saturating_add(len) <= s.0.saturating_add(s.2))?;
        let b = self.bytes(s)?;
        let from = usize::try_from(at - s.0).ok()?;
        b.get(from..from.checked_add(usize::try_from(len).ok()?)?)
    }

    /// Whether the function at file address `at` has its own frame there, by its CFI: on
    /// x86_64 the canonical frame address is counted from the frame pointer (rbp), on
    /// aarch64 the link register (x30) is saved. `None` without CFI for `at`.
    fn framed(&self, at: u64) -> Option<bool> {
        self.row(at, |isa, row| match isa {
            Isa::X86_64 => {
                matches!(row.cfa(), gimli::CfaRule::RegisterAndOffset { register, .. } if *register == gimli::X86_64::RBP)
            }
            Isa::Aarch64 => matches!(
                row.register(gimli::AArch64::X30),
                Some(gimli::RegisterRule::Offset(_))
            ),
        })
        .ok()
    }

    /// Whether an entry of the file's CFI covers file address `at`: `None` when the file
    /// has no CFI, or it cannot be read.
    pub fn covers(&self, at: u64) -> Option<bool> {
        if self.eh_frame.is_none() && self.debug_frame.is_none() {
            return None;
        }
        match self.row(at, |_, _| ()) {
            Ok(()) => Some(true),
            Err(gimli::Error::NoUnwindInfoForAddress) => Some(false),
            Err(_) => None,
        }
    }

    /// `judge` of the CFI's row for file address `at` (`.eh_frame` through its header's
    /// table where it has one, then `.debug_frame`).
    fn row<T>(
        &self,
        at: u64,
        judge: impl Fn(Isa, &gimli::UnwindTableRow<usize>) -> T,
    ) -> Result<T, gimli::Error> {
        let bases = gimli::BaseAddresses::default()
            .set_text(self.text)
            .set_eh_frame(self.eh_frame.map_or(0, |s| s.0))
            .set_eh_frame_hdr(self.eh_frame_hdr.map_or(0, |s| s.0));
        let mut ctx = gimli::UnwindContext::new();
        let judge = |row: &gimli::UnwindTableRow<usize>| judge(self.isa, row);
        if let Some(eh) = self.eh_frame.and_then(|s| self.bytes(s)) {
            let eh = gimli::EhFrame::new(eh, LittleEndian);
            let hdr = self.eh_frame_hdr.and_then(|s| self.bytes(s)).and_then(|h| {
                gimli::EhFrameHdr::new(h, LittleEndian)
                    .parse(&bases, 8)
                    .ok()
            });
            let row = match hdr.as_ref().and_then(|h| h.table()) {
                Some(t) => t
                    .unwind_info_for_address(&eh, &bases, &mut ctx, at, |s, b, o| {
                        s.cie_from_offset(b, o)
                    })
                    .map(judge),
                None => eh
                    .unwind_info_for_address(&bases, &mut ctx, at, gimli::EhFrame::cie_from_offset)
                    .map(judge),
            };
            // Code that .eh_frame leaves out may be in .debug_frame.
            match (row, self.debug_frame) {
                (Err(gimli::Error::NoUnwindInfoForAddress), Some(_)) => {}
                (row, _) => return row,
            }
        }
        let Some(df) = self.debug_frame.and_then(|s| self.bytes(s)) else {
            return Err(gimli::Error::NoUnwindInfoForAddress);
        };
        gimli::DebugFrame::new(df, LittleEndian)
            .unwind_info_for_address(&bases, &mut ctx, at, gimli::DebugFrame::cie_from_offset)
            .map(judge)
    }

    /// The target (a file address) of the direct call that ends right before file address
    /// `ret`, if that instruction is one.
    fn call_before(&self, ret: u64) -> Option<u64> {
        match self.isa {
            Isa::X86_64 => {
                let b = self.code(ret.checked_sub(5)?, 5)?;
                (b[0] == 0xe8).then(|| {
                    let rel = i32::from_le_bytes(b[1..5].try_into().expect("4 bytes"));
                    ret.wrapping_add(rel as i64 as u64)
                })
            }
            Isa::Aarch64 => {
                let at = ret.checked_sub(4)?;
                let i = u32::from_le_bytes(self.code(at, 4)?.try_into().ok()?);
                bl_target(at, i)
            }
        }
    }

    /// Whether the instruction before file address `ret` is a call (direct or through a
    /// register or memory): `ret` may be a return address.
    pub fn after_call(&self, ret: u64) -> bool {
        match self.isa {
            Isa::X86_64 => {
                let byte = |back: u64| {
                    ret.checked_sub(back)
                        .and_then(|a| self.code(a, 1))
                        .map(|b| b[0])
                };
                // e8 rel32; ff /2 with a register (2 bytes), a base (3: disp8 or SIB), rip or
                // disp32 (6), SIB and disp32 (7).
                let ff2 = |back: u64| {
                    byte(back) == Some(0xff) && byte(back - 1).is_some_and(|m| m & 0x38 == 0x10)
                };
                byte(5) == Some(0xe8) || ff2(2) || ff2(3) || ff2(6) || ff2(7)
            }
            Isa::Aarch64 => ret
                .checked_sub(4)
                .and_then(|a| self.code(a, 4))
                .map(|b| u32::from_le_bytes(b.try_into().expect("4 bytes")))
                .is_some_and(|i| bl_target(0, i).is_some() || i & 0xffff_fc1f == 0xd63f_0000),
        }
    }

    /// The return address (a file address) of the first direct call to `target` in the
    /// code between `start` and `end`.
    fn call_site(&self, start: u64, end: u64, target: u64) -> Option<u64> {
        let len = end.checked_sub(start)?.min(1 << 20);
        let code = self.code(start, len)?;
        match self.isa {
            Isa::X86_64 => code.windows(5).enumerate().find_map(|(i, w)| {
                let ret = start + i as u64 + 5;
                let rel = i32::from_le_bytes(w[1..5].try_into().expect("4 bytes"));
                (w[0] == 0xe8 && ret.wrapping_add(rel as i64 as u64) == target).then_some(ret)
            }),
            Isa::Aarch64 => code.chunks_exact(4).enumerate().find_map(|(i, w)| {
                let at = start + 4 * i as u64;
                let insn = u32::from_le_bytes(w.try_into().expect("4 bytes"));
                (bl_target(at, insn) == Some(target)).then_some(at + 4)
            }),
        }
    }
}

/// An aarch64 `bl` instruction's target.
fn bl_target(at: u64, insn: u32) -> Option<u64> {
    (insn & 0xfc00_0000 == 0x9400_0000).then(|| {
        // imm26, sign-extended, in instructions.
        let imm = ((insn << 6) as i32 >> 6) as i64 * 4;
        at.wrapping_add(imm as u64)
    })
}

/// Files' code and CFI, each file read once.
#[derive(Default)]
pub struct Files {
    files: HashMap<PathBuf, Option<Arc<Code>>>,
}

impl Files {
    /// `elf`'s code and CFI (`None` for a file of another architecture, or not readable).
    pub fn code(&mut self, elf: &Elf) -> Option<Arc<Code>> {
        let path = elf.file.clone()?;
        self.files
            .entry(path)
            .or_insert_with(|| Code::read(elf).map(Arc::new))
            .clone()
    }
}

/// Callchains' sampled functions judged, each file read once and each place judged once.
#[derive(Default)]
pub struct FpChains {
    files: Files,
    judged: HashMap<(u32, u64, u64), Leaf>,
}

impl FpChains {
    fn code(&mut self, elf: &Elf) -> Option<Arc<Code>> {
        self.files.code(elf)
    }

    /// Whether the chain `addrs` (the sampled address, then the return addresses as the
    /// kernel walked them, kernel ones first for a sample in the kernel) of process `pid`
    /// missed its sampled user function's caller, and where that caller called it.
    pub fn leaf(&mut self, sym: &mut Symbolizer, pid: u32, addrs: &[u64]) -> Leaf {
        let Some(first) = addrs.iter().position(|a| a >> 63 == 0) else {
            return Leaf::Whole;
        };
        let (Some(&ip), Some(&ret)) = (addrs.get(first), addrs.get(first + 1)) else {
            return Leaf::Whole;
        };
        if let Some(l) = self.judged.get(&(pid, ip, ret)) {
            return *l;
        }
        let l = self.judge(sym, pid, ip, ret);
        self.judged.insert((pid, ip, ret), l);
        l
    }

    fn judge(&mut self, sym: &mut Symbolizer, pid: u32, ip: u64, ret: u64) -> Leaf {
        let Some((elf, at)) = sym.file_at(pid, ip) else {
            return Leaf::Whole;
        };
        let Some(code) = self.code(&elf) else {
            return Leaf::Whole;
        };
        // Without CFI for the sampled place (hand-written assembly: musl's memset), only a
        // caller that calls the sampled function directly, named by the call before the
        // next return address, tells that the walk skipped it.
        let judged = code.framed(at);
        if judged == Some(true) {
            return Leaf::Whole;
        }
        // The caller is missing. The return address after the sampled one is in its
        // caller's caller, right after the call of it: a direct call names it. (Where the
        // frame pointer held an older frame's, that call names an older caller: its
        // Children are still right.)
        let restored = (|| {
            let (relf, rat) = sym.file_at(pid, ret)?;
            let rcode = if relf.file == elf.file {
                code.clone()
            } else {
                self.code(&relf)?
            };
            let callee = rcode.call_before(rat)?;
            let (mut start, mut end, name) = relf.function(callee)?;
            let mut same = relf.file == elf.file;
            // The file's place in the process (its address 0 there), where `ret` says it is.
            let mut base = ret.checked_sub(rat)?;
            let mut ccode = rcode;
            // A call through a PLT stub: the stub names the caller, whose place is known
            // when the sampled function's file defines it (a library's function calling
            // another of its own); elsewhere, the stub's slot is filled at run time.
            if let Some(target) = name.strip_suffix("@plt") {
                (start, end) = elf.function_named(target)?;
                (same, base, ccode) = (true, ip.checked_sub(at)?, code.clone());
            }
            let leaf = elf.function(at).map(|f| f.0);
            if same && leaf == Some(start) {
                return None;
            }
            // At the caller's call of the sampled function when it calls it directly (its
            // source line then), else at the caller's first instruction.
            let site = leaf
                .filter(|_| same)
                .and_then(|l| ccode.call_site(start, end, l));
            if judged.is_none() && site.is_none() {
                return None;
            }
            // A user address only (a file placed below its own addresses, or a sum past
            // the user half, names nothing: the kernel's half would be named as a kernel
            // frame).
            let r = base.checked_add(site.unwrap_or(start + 1))?;
            (r >> 63 == 0).then_some(r)
        })();
        match (restored, judged) {
            (Some(r), _) => Leaf::Restored(r),
            (None, Some(false)) => Leaf::Missed,
            (None, _) => Leaf::Whole,
        }
    }

    /// `addrs` with the missed caller put back (its return address after the sampled user
    /// address), and what became of it.
    pub fn fix(&mut self, sym: &mut Symbolizer, pid: u32, addrs: &mut Vec<u64>) -> Leaf {
        let l = self.leaf(sym, pid, addrs);
        if let Leaf::Restored(site) = l {
            let first = addrs.iter().position(|a| a >> 63 == 0).unwrap_or(0);
            addrs.insert(first + 1, site);
        }
        l
    }
}
