//! `--call-graph dwarf`: each sample's user stack unwound on the host with its binaries'
//! DWARF CFI (`.eh_frame`, `.eh_frame_hdr`, `.debug_frame`) through `framehop`, for
//! x86_64 and aarch64 recordings on any host. Binaries are found as symbols are (the
//! binary cache, `--symfs`, the path itself); the vDSO from the image the agent recorded.

use crate::symbolize::quality::{End, Quality, Stop};
use crate::symbolize::symbols::{Elf, Placement, Symbolizer, MAX_ELF};
use framehop::aarch64::{CacheAarch64, UnwindRegsAarch64, UnwinderAarch64};
use framehop::x86_64::{CacheX86_64, UnwindRegsX86_64, UnwinderX86_64};
use framehop::{ExplicitModuleSectionInfo, FrameAddress, Module, Unwinder};
use labperf_common::{Arch, Header, HeaderExt, Mmap2, Record, Sample};
use std::collections::HashMap;
use std::sync::Arc;

/// Most frames one stack unwinds to: [`crate::symbolize::quality::MAX_FRAMES`], where the tally says it.
pub use crate::symbolize::quality::MAX_FRAMES;

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

    /// Whether the file has unwind tables.
    fn has_cfi(&self) -> bool {
        self.eh_frame.is_some() || self.debug_frame.is_some()
    }

    /// The sections for framehop, their addresses counted from `base` (the file's lowest
    /// segment address).
    fn info(&self, base: u64) -> ExplicitModuleSectionInfo<Data> {
        ExplicitModuleSectionInfo {
            base_svma: base,
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

/// Whether a mapped file's unwind tables are used.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    Used,
    NotFound,
    Misplaced,
    NoUnwindInfo,
    /// Anonymous executable memory: JIT-compiled code, no file.
    Jit,
}

/// One mapping of a process, as the unwinder took it.
#[derive(Debug, Clone)]
struct Mapped {
    range: std::ops::Range<u64>,
    path: Arc<str>,
    state: State,
    /// The file and the mapping's load bias, for naming functions.
    elf: Option<(Arc<Elf>, u64)>,
}

/// The unwinder of one recording: its processes' modules, from the mappings it lists.
pub struct Unwind {
    machine: Machine,
    maps: HashMap<u32, Vec<Mmap2>>,
    parent: HashMap<u32, u32>,
    sections: HashMap<BinaryKey, Option<Arc<Sections>>>,
    vdso: Option<Arc<Sections>>,
    /// Each process's mappings, sorted by address.
    mapped: HashMap<u32, Vec<Mapped>>,
    /// The bytes of stack an event copies (the largest), for telling a stack that ran out.
    stack_bytes: u64,
    /// How far the stacks unwound so far reached.
    pub quality: Quality,
    /// Files without usable unwind tables that frames landed in, said once each.
    pub warnings: Vec<String>,
    warned: std::collections::HashSet<Arc<str>>,
    /// The files' CFI, for telling a frame whose code no entry covers.
    cfi: crate::symbolize::fpchain::Files,
    /// Each (process, address)'s CFI judgment ([`Unwind::covered`]), made once: judging
    /// one parses the file's `.eh_frame_hdr` and evaluates its CIE and FDE, which cost
    /// more than the rest of a sample's unwinding when done for every frame of every stack.
    judged: HashMap<(u32, u64), Option<bool>, Fx>,
}

type Fx = std::hash::BuildHasherDefault<crate::fxhash::FxHasher>;

/// Most (process, address) judgments kept ([`Unwind::judged`]): a hostile file's distinct
/// addresses cannot grow it past this (it starts again empty, 32 MiB at most).
const MAX_JUDGED: usize = 1 << 20;

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
        let quality = Quality::of_header(Some(h))?;
        Some(Unwind {
            machine,
            maps: HashMap::new(),
            parent: HashMap::new(),
            sections: HashMap::new(),
            vdso: ext
                .and_then(|x| x.vdso.as_deref())
                .and_then(Sections::read)
                .map(Arc::new),
            mapped: HashMap::new(),
            stack_bytes: quality.stack_bytes,
            quality,
            warnings: Vec::new(),
            warned: Default::default(),
            cfi: Default::default(),
            judged: HashMap::default(),
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

    /// Mapping `m` as the unwinder takes it, and its framehop module when the file is
    /// found and fits the mapping.
    fn module(&mut self, sym: &mut Symbolizer, m: &Mmap2) -> (Mapped, Option<Module<Data>>) {
        let range = m.addr..m.addr.saturating_add(m.len);
        let mut out = Mapped {
            range: range.clone(),
            path: m.path.as_str().into(),
            state: if crate::symbolize::perfmap::anonymous(&m.path) {
                State::Jit
            } else {
                State::NotFound
            },
            elf: None,
        };
        // The vDSO's from the image the agent recorded (the symbolizer has it too).
        let Some(elf) = sym.binary(&m.path, m.build_id.as_deref()) else {
            return (out, None);
        };
        let place = Placement::from(m);
        let Some(bias) = elf.bias(&place) else {
            sym.warn_misplaced(&m.path, &place);
            out.state = State::Misplaced;
            return (out, None);
        };
        out.elf = Some((elf.clone(), bias));
        let s = if m.path == "[vdso]" {
            self.vdso.clone()
        } else {
            let key = (m.path.clone(), m.build_id.clone());
            match self.sections.get(&key) {
                Some(s) => s.clone(),
                None => {
                    let s = elf
                        .file
                        .as_ref()
                        .and_then(|f| crate::files::mapped::map_regular_id(f, MAX_ELF).ok())
                        .and_then(|(d, _)| Sections::read((*d).as_ref()))
                        .map(Arc::new);
                    self.sections.insert(key, s.clone());
                    s
                }
            }
        };
        let Some(s) = s.filter(|s| s.has_cfi()) else {
            out.state = State::NoUnwindInfo;
            return (out, None);
        };
        out.state = State::Used;
        // framehop counts addresses from the file's lowest segment: a prelinked library
        // loaded below its link address has a bias that wraps, its base does not.
        let base = elf.base_vaddr();
        let module = Module::new(m.path.clone(), range, bias.wrapping_add(base), s.info(base));
        (out, Some(module))
    }

    /// The modules of process `pid` (or of the ancestor it was forked from), and its
    /// mappings (kept for [`Unwind::end`]).
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
        let mut mapped = Vec::new();
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
            // Code only: a data mapping (perf records them for `--call-graph dwarf`) holds
            // no frame. Protection 0 is unknown (an old PERF_RECORD_MMAP): code.
            if m.prot != 0 && m.prot & 4 == 0 {
                continue;
            }
            let (info, module) = self.module(sym, &m);
            mapped.push(info);
            out.extend(module);
        }
        mapped.sort_by_key(|m| m.range.start);
        self.mapped.insert(pid, mapped);
        out
    }

    /// The mapping of process `pid` that holds `addr`.
    fn mapping(&self, pid: u32, addr: u64) -> Option<&Mapped> {
        let v = self.mapped.get(&pid)?;
        let i = v
            .partition_point(|m| m.range.start <= addr)
            .checked_sub(1)?;
        v.get(i).filter(|m| addr < m.range.end)
    }

    /// The first of `frames` (the sampled address, then return addresses) whose code no
    /// entry of its file's CFI covers (hand-written assembly, or a C library built
    /// without unwind tables, as musl's is): framehop unwound its caller from the frame
    /// pointer, which such code may use for anything.
    fn uncovered(&mut self, pid: u32, frames: &[u64], from: usize) -> Option<usize> {
        (from..frames.len()).find(|&i| {
            let at = if i == 0 {
                frames[i]
            } else {
                frames[i].saturating_sub(1)
            };
            self.covered(pid, at) == Some(false)
        })
    }

    /// Whether an entry of the CFI of the file process `pid` maps at `at` covers it:
    /// `None` outside a used mapping of a file, or when the file has no CFI. Each (process,
    /// address) is judged once: its mappings are all read before the first sample.
    fn covered(&mut self, pid: u32, at: u64) -> Option<bool> {
        if let Some(&c) = self.judged.get(&(pid, at)) {
            return c;
        }
        let c = self
            .mapping(pid, at)
            .filter(|m| m.state == State::Used)
            .and_then(|m| m.elf.clone())
            .and_then(|(elf, bias)| {
                self.cfi
                    .code(&elf)
                    .and_then(|c| c.covers(at.wrapping_sub(bias)))
            });
        if self.judged.len() >= MAX_JUDGED {
            self.judged.clear();
        }
        self.judged.insert((pid, at), c);
        c
    }

    /// Whether `ret` may be the return address of a sampled function at `ip` whose code no
    /// CFI covers: code that has not touched the stack yet (hand-written leaf functions:
    /// musl's memcpy and memset) returns to the link register (aarch64) or to the word at
    /// the stack pointer (x86_64). Taken when that address is right after a call, in code
    /// the CFI covers.
    fn leaf_returns_to(&mut self, pid: u32, ip: u64, ret: u64) -> bool {
        if self.uncovered(pid, &[ip], 0).is_none() || ret == 0 {
            return false;
        }
        let at = ret.saturating_sub(1);
        let Some((elf, bias)) = self
            .mapping(pid, at)
            .filter(|m| m.state == State::Used)
            .and_then(|m| m.elf.clone())
        else {
            return false;
        };
        self.covered(pid, at) == Some(true)
            && self
                .cfi
                .code(&elf)
                .is_some_and(|c| c.after_call(ret.wrapping_sub(bias)))
    }

    /// Where a stack unwound to `frames` (the sampled address, then return addresses)
    /// ended, given how the unwinder finished (`None`: at the frame limit), the stack copy
    /// it read (from `sp`, `len` bytes), and the frame whose code no CFI covers (where the
    /// stack was cut). Files without usable unwind tables that a frame lands in are named
    /// in [`Unwind::warnings`].
    fn end(
        &mut self,
        pid: u32,
        frames: &[u64],
        fin: Option<Result<(), framehop::Error>>,
        sp: u64,
        len: u64,
        uncovered: Option<usize>,
    ) -> End {
        // Each frame's address as it is looked up: a return address one byte back.
        let at = |i: usize, a: u64| if i == 0 { a } else { a.saturating_sub(1) };
        let outer = frames.len().saturating_sub(1);
        let last = frames.last().map(|&a| at(outer, a)).unwrap_or(0);
        let entry = self.mapping(pid, last).is_some_and(|m| {
            m.elf
                .as_ref()
                .and_then(|(e, bias)| e.symbol(last.wrapping_sub(*bias)))
                .is_some_and(crate::symbolize::quality::is_entry)
        });
        if entry {
            return End::Outermost;
        }
        if let Some(i) = uncovered {
            let file = self
                .mapping(pid, at(i, frames[i]))
                .map_or_else(|| "[unknown]".to_string(), |m| m.path.to_string());
            return End::Stopped {
                stop: Stop::NoUnwindInfo,
                file,
                leaf: i == 0,
            };
        }
        // The first frame unwound without the file's tables (framehop then follows frame
        // pointers, which may be anything): the stack is trusted up to there.
        let bad = frames
            .iter()
            .enumerate()
            .find_map(|(i, &a)| match self.mapping(pid, at(i, a)) {
                None => Some((i, Stop::NoFile, Arc::<str>::from("[unknown]"))),
                Some(m) => match m.state {
                    State::Used => None,
                    State::NotFound => Some((i, Stop::NotFound, m.path.clone())),
                    State::Misplaced => Some((i, Stop::Misplaced, m.path.clone())),
                    State::NoUnwindInfo => Some((i, Stop::NoUnwindInfo, m.path.clone())),
                    State::Jit => Some((i, Stop::Jit, m.path.clone())),
                },
            });
        match (fin, bad) {
            (Some(Ok(())), None) => End::Outermost,
            (None, None) => End::CutFrames,
            (_, Some((i, stop, file))) => {
                if stop == Stop::NoUnwindInfo && self.warned.insert(file.clone()) {
                    self.warnings.push(format!(
                        "warning: {} has no unwind tables (.eh_frame, .debug_frame): stacks through it are followed by frame pointers, which it may not keep",
                        crate::text::show(&file)
                    ));
                }
                End::Stopped {
                    stop,
                    file: file.to_string(),
                    leaf: i == 0,
                }
            }
            (Some(Err(e)), None) => {
                if let framehop::Error::CouldNotReadStack(a) = e {
                    // Past the copy, and the copy is the whole size asked (a shorter one
                    // is the whole stack, to its top).
                    if a >= sp.saturating_add(len) && len + 8 > self.stack_bytes {
                        return End::CutBytes;
                    }
                }
                let why = match e {
                    framehop::Error::CouldNotReadStack(_) => "a frame outside the copied stack",
                    framehop::Error::FramepointerUnwindingMovedBackwards => {
                        "the frame pointer moved backwards"
                    }
                    framehop::Error::DidNotAdvance => "a frame did not advance",
                    framehop::Error::IntegerOverflow => "an address overflowed",
                    framehop::Error::ReturnAddressIsNull => "a null return address",
                };
                let file = self
                    .mapping(pid, last)
                    .map_or_else(|| "[unknown]".to_string(), |m| m.path.to_string());
                End::Stopped {
                    stop: Stop::Failed(why),
                    file,
                    leaf: frames.len() <= 1,
                }
            }
        }
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
        // The sampled address, its stack pointer, and where a function that has not touched
        // the stack returns to (the link register; the word at the stack pointer).
        let (ip, sp, leaf_ret) = match &self.machine {
            Machine::X86_64 { sp, ip, .. } => {
                let (ip, sp) = (reg(*ip), reg(*sp));
                (ip, sp, sp.and_then(|sp| read(sp).ok()))
            }
            Machine::Aarch64 { lr, sp, pc, .. } => (reg(*pc), reg(*sp), reg(*lr)),
        };
        let (Some(ip), Some(sp)) = (ip, sp) else {
            self.quality.without += 1;
            return Vec::new();
        };
        let leaf = leaf_ret.filter(|&r| self.leaf_returns_to(s.pid, ip, r));
        // Every frame, the sampled address first, and how the walk finished (`None`: at
        // the frame limit).
        let mut frames: Vec<u64> = vec![ip];
        let start = match leaf {
            Some(r) => {
                frames.push(r);
                FrameAddress::from_return_address(r).expect("not 0")
            }
            None => FrameAddress::from_instruction_pointer(ip),
        };
        let fin = match &mut self.machine {
            Machine::X86_64 {
                bp, procs, cache, ..
            } => {
                let Some(bp) = reg(*bp) else {
                    self.quality.without += 1;
                    return Vec::new();
                };
                let mut regs = match leaf {
                    Some(r) => UnwindRegsX86_64::new(r, sp + 8, bp),
                    None => UnwindRegsX86_64::new(ip, sp, bp),
                };
                walk(
                    &procs[&s.pid],
                    start,
                    &mut regs,
                    cache,
                    &mut read,
                    &mut frames,
                )
            }
            Machine::Aarch64 {
                fp,
                lr,
                procs,
                cache,
                ..
            } => {
                let (Some(fp), Some(lr)) = (reg(*fp), reg(*lr)) else {
                    self.quality.without += 1;
                    return Vec::new();
                };
                let mut regs = UnwindRegsAarch64::new(lr, sp, fp);
                walk(
                    &procs[&s.pid],
                    start,
                    &mut regs,
                    cache,
                    &mut read,
                    &mut frames,
                )
            }
        };
        // Frames past code without CFI are the frame pointer's guesses: not kept.
        let uncovered = self.uncovered(s.pid, &frames, if leaf.is_some() { 1 } else { 0 });
        if let Some(i) = uncovered {
            frames.truncate(i + 1);
        }
        let end = self.end(s.pid, &frames, fin, u.sp, u.data.len() as u64, uncovered);
        self.quality.add(&end, 1);
        // The return addresses: every frame but the sampled one. A sample taken in the
        // kernel (a page fault, a system call) has its user registers where the kernel
        // entered: that user address is the innermost user frame, which the kernel's
        // callchain does not hold (perf's dwarf mode records its kernel part only). It is
        // kept as the address one past it, so that `call_site`'s one byte back names
        // exactly the interrupted instruction.
        if let Some(&user_ip) = frames.first() {
            if user_ip == s.ip || s.callchain.contains(&user_ip) {
                frames.remove(0);
            } else {
                frames[0] = user_ip.wrapping_add(1);
            }
        }
        frames
    }
}

/// Unwinds from `at` (the sampled address, or a leaf's return address) with `regs`,
/// appending each return address to `frames`; how the walk finished (`None`: at
/// [`MAX_FRAMES`]).
fn walk<U: Unwinder>(
    un: &U,
    mut at: FrameAddress,
    regs: &mut U::UnwindRegs,
    cache: &mut U::Cache,
    read: &mut impl FnMut(u64) -> Result<u64, ()>,
    frames: &mut Vec<u64>,
) -> Option<Result<(), framehop::Error>> {
    while frames.len() < MAX_FRAMES {
        match un.unwind_frame(at, regs, cache, read) {
            Ok(Some(r)) => match FrameAddress::from_return_address(r) {
                Some(a) => {
                    frames.push(r);
                    at = a;
                }
                None => return Some(Err(framehop::Error::ReturnAddressIsNull)),
            },
            Ok(None) => return Some(Ok(())),
            Err(e) => return Some(Err(e)),
        }
    }
    None
}
