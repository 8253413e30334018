//! `--call-graph dwarf`: each sample's user stack unwound on the host with its binaries'
//! DWARF CFI (`.eh_frame`, `.eh_frame_hdr`, `.debug_frame`) through `framehop`, for
//! x86_64 and aarch64 recordings on any host. Binaries are found as symbols are (the
//! binary cache, `--symfs`, the path itself); the vDSO from the image the agent recorded.

use crate::symbols::{Symbolizer, MAX_ELF};
use framehop::aarch64::{CacheAarch64, UnwindRegsAarch64, UnwinderAarch64};
use framehop::x86_64::{CacheX86_64, UnwindRegsX86_64, UnwinderX86_64};
use framehop::{ExplicitModuleSectionInfo, FrameAddress, Module, Unwinder};
use labperf_common::{Arch, Header, HeaderExt, Mmap2, Record, Sample};
use std::collections::HashMap;
use std::sync::Arc;

/// Most frames one stack unwinds to (perf's default `kernel.perf_event_max_stack`).
pub const MAX_FRAMES: usize = 127;

/// PERF_SAMPLE_STACK_USER.
const SAMPLE_STACK_USER: u64 = 1 << 13;

type Data = Arc<[u8]>;

/// A binary as a recording names it: its path and build-id.
type BinaryKey = (String, Option<Vec<u8>>);

/// One binary's unwind sections, read once however many processes map it.
struct Sections {
    text: Option<(std::ops::Range<u64>, Data)>,
    eh_frame: Option<(std::ops::Range<u64>, Data)>,
    eh_frame_hdr: Option<(std::ops::Range<u64>, Data)>,
    debug_frame: Option<Data>,
    got: Option<std::ops::Range<u64>>,
}

impl Sections {
    fn read(bytes: &[u8]) -> Option<Sections> {
        use object::{Object, ObjectSection};
        let f = object::File::parse(bytes).ok()?;
        let sec = |name: &str| -> Option<(std::ops::Range<u64>, Data)> {
            let s = f.section_by_name(name)?;
            let d = s.data().ok()?;
            Some((s.address()..s.address() + s.size(), Arc::from(d)))
        };
        Some(Sections {
            text: sec(".text"),
            eh_frame: sec(".eh_frame"),
            eh_frame_hdr: sec(".eh_frame_hdr"),
            debug_frame: sec(".debug_frame").map(|s| s.1),
            got: sec(".got").map(|s| s.0),
        })
    }

    fn info(&self) -> ExplicitModuleSectionInfo<Data> {
        ExplicitModuleSectionInfo {
            base_svma: 0,
            text_svma: self.text.as_ref().map(|t| t.0.clone()),
            text: self.text.as_ref().map(|t| t.1.clone()),
            got_svma: self.got.clone(),
            eh_frame_svma: self.eh_frame.as_ref().map(|t| t.0.clone()),
            eh_frame: self.eh_frame.as_ref().map(|t| t.1.clone()),
            eh_frame_hdr_svma: self.eh_frame_hdr.as_ref().map(|t| t.0.clone()),
            eh_frame_hdr: self.eh_frame_hdr.as_ref().map(|t| t.1.clone()),
            debug_frame: self.debug_frame.clone(),
            ..Default::default()
        }
    }
}

enum Machine {
    X86_64 {
        bp: usize,
        sp: usize,
        ip: usize,
        procs: HashMap<u32, UnwinderX86_64<Data>>,
        cache: Box<CacheX86_64>,
    },
    Aarch64 {
        fp: usize,
        lr: usize,
        sp: usize,
        pc: usize,
        procs: HashMap<u32, UnwinderAarch64<Data>>,
        cache: Box<CacheAarch64>,
    },
}

/// The unwinder of one recording: its processes' modules, from the mappings it lists.
pub struct Unwind {
    machine: Machine,
    maps: HashMap<u32, Vec<Mmap2>>,
    parent: HashMap<u32, u32>,
    sections: HashMap<BinaryKey, Option<Arc<Sections>>>,
    vdso: Option<Arc<Sections>>,
    /// Samples whose stack unwound past the sampled function, and those that did not.
    pub unwound: u64,
    pub stuck: u64,
}

/// Where register `bit` of `mask` sits among the sampled registers (ascending bits).
fn reg_index(mask: u64, bit: u32) -> Option<usize> {
    (mask >> bit & 1 == 1).then(|| (mask & ((1u64 << bit) - 1)).count_ones() as usize)
}

impl Unwind {
    /// An unwinder for a recording whose events copy user stacks; `None` when none does,
    /// or its architecture is not one framehop unwinds.
    pub fn of(h: Option<&Header>, ext: Option<&HeaderExt>) -> Option<Unwind> {
        let h = h?;
        let e = h
            .events
            .iter()
            .find(|e| e.attr.sample_type & SAMPLE_STACK_USER != 0)?;
        let mask = e.attr.sample_regs_user;
        let machine = match h.arch {
            Arch::X86_64 => Machine::X86_64 {
                bp: reg_index(mask, 6)?,
                sp: reg_index(mask, 7)?,
                ip: reg_index(mask, 8)?,
                procs: HashMap::new(),
                cache: Box::new(CacheX86_64::new()),
            },
            Arch::Aarch64 => Machine::Aarch64 {
                fp: reg_index(mask, 29)?,
                lr: reg_index(mask, 30)?,
                sp: reg_index(mask, 31)?,
                pc: reg_index(mask, 32)?,
                procs: HashMap::new(),
                cache: Box::new(CacheAarch64::new()),
            },
            _ => return None,
        };
        Some(Unwind {
            machine,
            maps: HashMap::new(),
            parent: HashMap::new(),
            sections: HashMap::new(),
            vdso: ext
                .and_then(|x| x.vdso.as_deref())
                .and_then(Sections::read)
                .map(Arc::new),
            unwound: 0,
            stuck: 0,
        })
    }

    /// Takes in a mapping or a fork (other records are ignored). Every mapping is read
    /// before the first sample is unwound.
    pub fn observe(&mut self, r: &Record) {
        match r {
            Record::Mmap2(m) => self.maps.entry(m.pid).or_default().push(m.clone()),
            Record::Fork(t) if t.pid != t.ppid => {
                self.parent.insert(t.pid, t.ppid);
            }
            _ => {}
        }
    }

    fn sections(&mut self, sym: &mut Symbolizer, m: &Mmap2) -> Option<(Arc<Sections>, u64)> {
        if m.path == "[vdso]" {
            // The vDSO is mapped from its first byte: its vaddrs start at 0 (or at its
            // stated base, which its first segment gives).
            return self.vdso.clone().map(|s| (s, m.addr));
        }
        let elf = sym.binary(&m.path, m.build_id.as_deref())?;
        // The load bias from the middle of the mapping: at its first page, the end of the
        // segment before (which shares that page of the file) would answer.
        let mid = m.len / 2;
        let vaddr = elf
            .offset_to_vaddr(m.pgoff.checked_add(mid)?)?
            .checked_sub(mid)?;
        let key = (m.path.clone(), m.build_id.clone());
        let s = match self.sections.get(&key) {
            Some(s) => s.clone(),
            None => {
                let s = elf
                    .file
                    .as_ref()
                    .and_then(|f| crate::load::map_regular_id(f, MAX_ELF).ok())
                    .and_then(|(d, _)| Sections::read((*d).as_ref()))
                    .map(Arc::new);
                self.sections.insert(key, s.clone());
                s
            }
        }?;
        Some((s, m.addr.wrapping_sub(vaddr)))
    }

    /// The modules of process `pid` (or of the ancestor it was forked from).
    fn modules(&mut self, sym: &mut Symbolizer, pid: u32) -> Vec<Module<Data>> {
        let mut p = pid;
        let mut maps = Vec::new();
        for _ in 0..64 {
            if let Some(v) = self.maps.get(&p) {
                maps = v.clone();
                break;
            }
            match self.parent.get(&p) {
                Some(&pp) => p = pp,
                None => break,
            }
        }
        // Later mappings of one range replace earlier ones (an exec, a dlclose). The ranges
        // taken, by start (they never overlap): the one starting last before a range's end
        // is the only one that may overlap it (a file may list a million mappings).
        maps.reverse();
        let mut seen: std::collections::BTreeMap<u64, u64> = std::collections::BTreeMap::new();
        let mut out = Vec::new();
        for m in maps {
            let r = m.addr..m.addr.saturating_add(m.len);
            if seen
                .range(..r.end)
                .next_back()
                .is_some_and(|(_, &end)| r.start < end)
            {
                continue;
            }
            if r.start < r.end {
                seen.insert(r.start, r.end);
            }
            if let Some((s, base)) = self.sections(sym, &m) {
                out.push(Module::new(m.path.clone(), r, base, s.info()));
            }
        }
        out
    }

    /// The return addresses of `s`'s user stack, innermost first (not its ip); empty when
    /// it has no user stack.
    pub fn unwind(&mut self, sym: &mut Symbolizer, s: &Sample) -> Vec<u64> {
        let Some(u) = &s.user_stack else {
            return Vec::new();
        };
        let known = match &self.machine {
            Machine::X86_64 { procs, .. } => procs.contains_key(&s.pid),
            Machine::Aarch64 { procs, .. } => procs.contains_key(&s.pid),
        };
        if !known {
            let modules = self.modules(sym, s.pid);
            match &mut self.machine {
                Machine::X86_64 { procs, .. } => {
                    let mut un = UnwinderX86_64::new();
                    modules.into_iter().for_each(|m| un.add_module(m));
                    procs.insert(s.pid, un);
                }
                Machine::Aarch64 { procs, .. } => {
                    let mut un = UnwinderAarch64::new();
                    modules.into_iter().for_each(|m| un.add_module(m));
                    procs.insert(s.pid, un);
                }
            }
        }
        let mut read = |addr: u64| -> Result<u64, ()> {
            let off = usize::try_from(addr.checked_sub(u.sp).ok_or(())?).map_err(|_| ())?;
            let b = u.data.get(off..off.checked_add(8).ok_or(())?).ok_or(())?;
            Ok(u64::from_le_bytes(b.try_into().map_err(|_| ())?))
        };
        let reg = |i: usize| u.regs.get(i).copied();
        let mut out = Vec::new();
        let mut push = |f: FrameAddress| {
            if let FrameAddress::ReturnAddress(a) = f {
                out.push(a.get());
            }
        };
        match &mut self.machine {
            Machine::X86_64 {
                bp,
                sp,
                ip,
                procs,
                cache,
            } => {
                let (Some(bp), Some(sp), Some(ip)) = (reg(*bp), reg(*sp), reg(*ip)) else {
                    return out;
                };
                let un = &procs[&s.pid];
                let mut it =
                    un.iter_frames(ip, UnwindRegsX86_64::new(ip, sp, bp), cache, &mut read);
                for _ in 0..MAX_FRAMES {
                    match it.next() {
                        Ok(Some(f)) => push(f),
                        _ => break,
                    }
                }
            }
            Machine::Aarch64 {
                fp,
                lr,
                sp,
                pc,
                procs,
                cache,
            } => {
                let (Some(fp), Some(lr), Some(sp), Some(pc)) =
                    (reg(*fp), reg(*lr), reg(*sp), reg(*pc))
                else {
                    return out;
                };
                let un = &procs[&s.pid];
                let mut it =
                    un.iter_frames(pc, UnwindRegsAarch64::new(lr, sp, fp), cache, &mut read);
                for _ in 0..MAX_FRAMES {
                    match it.next() {
                        Ok(Some(f)) => push(f),
                        _ => break,
                    }
                }
            }
        }
        if out.is_empty() {
            self.stuck += 1;
        } else {
            self.unwound += 1;
        }
        out
    }
}
