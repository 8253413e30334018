//! How far a recording's call stacks reach: of the samples with a stack (`-g` callchains or
//! `--call-graph dwarf` user stacks), how many reached their thread's first function, how
//! many were cut at the stack-size limit, and how many stopped early, why and in which file.
//! One tally ([`Quality`]), filled where stacks are read (`unwind.rs` for user stacks,
//! [`FpEnds`] for callchains) and said the same way by every report, `info` and the HTML page.

use crate::symbolize::symbols::Symbolizer;
use labperf_common::Header;
use serde_json::{json, Value};
use std::collections::BTreeMap;

/// Most frames one stack unwinds to (perf's default `kernel.perf_event_max_stack`).
pub const MAX_FRAMES: usize = 127;

/// How a recording's stacks were taken.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    /// The kernel's callchains, by frame pointers (`-g`, `--call-graph fp`).
    Fp,
    /// User stacks copied and unwound here with the binaries' CFI (`--call-graph dwarf`).
    Dwarf,
}

/// Why a stack stopped before its thread's first function.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Stop {
    /// The function keeps no frame pointer: the kernel's walk ends there (`-g`).
    FramePointer,
    /// The file has no unwind tables (`.eh_frame`, `.debug_frame`), or none for the code
    /// the frame is in.
    NoUnwindInfo,
    /// The file is not found here (nor in `--symfs` or the binary cache), or the
    /// recording holds no image of the vDSO.
    NotFound,
    /// The file here fits not the recorded mapping: another build of it.
    Misplaced,
    /// The address lies in no mapped file (generated code, or a return address read from
    /// a frame that was not one).
    NoFile,
    /// JIT-compiled code (anonymous executable memory): no unwind tables, and a frame
    /// pointer only where the JIT keeps one.
    Jit,
    /// The unwind tables led nowhere (the unwinder's reason).
    Failed(&'static str),
}

impl Stop {
    pub fn text(self) -> String {
        match self {
            Stop::FramePointer => "frame pointer missing".into(),
            Stop::NoUnwindInfo => "no unwind info".into(),
            Stop::NotFound => "binary not found".into(),
            Stop::Misplaced => "binary differs from the recorded one".into(),
            Stop::NoFile => "at an address in no mapped file".into(),
            Stop::Jit => "in JIT-compiled code".into(),
            Stop::Failed(why) => format!("unwinding failed ({why})"),
        }
    }
}

/// Where one sample's stack ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum End {
    /// At its thread's first function (`_start`, `__libc_start_main`, `clone`, a thread's
    /// start), or where the unwind tables say the stack ends.
    Outermost,
    /// `--call-graph dwarf`: the copied stack ran out (its size is the limit).
    CutBytes,
    /// At the most frames a stack holds (the kernel's `perf_event_max_stack`, or ours).
    CutFrames,
    /// Before: why, in which file (its path), and whether at the sampled function itself
    /// (no caller at all).
    Stopped {
        stop: Stop,
        file: String,
        leaf: bool,
    },
}

/// Functions a thread's stack starts in: the C libraries' process and thread entries
/// (glibc, musl), the dynamic loader's, and the kernel's for a new task.
const ENTRIES: &[&str] = &[
    "_start",
    "__libc_start_main",
    "__libc_start_main_impl",
    "__libc_start_main_alias_2",
    "__libc_start_call_main",
    "_start_c",
    "libc_start_main_stage2",
    "_dl_start",
    "_dl_start_user",
    "clone",
    "clone3",
    "__clone",
    "__clone3",
    "__clone_internal",
    "start_thread",
    // glibc's aarch64 clone: the child's first function.
    "thread_start",
    "start",
    "start_c11",
    "ret_from_fork",
    "ret_from_fork_asm",
];

/// Whether `name` is a function a thread's stack starts in (a symbol version such as
/// `@@GLIBC_2.34` aside).
pub fn is_entry(name: &str) -> bool {
    let name = name.split('@').next().unwrap_or(name);
    ENTRIES.contains(&name)
}

/// The stacks of one recording, tallied.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Quality {
    pub mode: Mode,
    /// `--call-graph dwarf`: the bytes of stack each sample copies (the largest an event asks).
    pub stack_bytes: u64,
    /// The most frames a stack holds.
    pub max_frames: u64,
    /// `report --max-stack N`: the N frames a stack was cut to here (`max_frames` is then
    /// N + 2, the kernel's count with its context markers); the line states N.
    pub max_stack: Option<u64>,
    /// Samples with a stack.
    pub samples: u64,
    /// Samples without one (a kernel thread's, say).
    pub without: u64,
    pub outermost: u64,
    pub cut_bytes: u64,
    pub cut_frames: u64,
    /// Of the stopped ones, those stopped at the sampled function.
    pub at_leaf: u64,
    /// Stopped stacks by reason and file.
    pub stopped: BTreeMap<(Stop, String), u64>,
    /// `-g`: callchains whose sampled function had no frame of its own where it was
    /// sampled, so that the kernel's walk skipped its caller ([`crate::symbolize::fpchain`]), and of
    /// those the ones whose caller was restored from the call instruction.
    pub skipped_caller: u64,
    pub restored_caller: u64,
}

/// PERF_SAMPLE_CALLCHAIN and PERF_SAMPLE_STACK_USER.
const SAMPLE_CALLCHAIN: u64 = 1 << 5;
const SAMPLE_STACK_USER: u64 = 1 << 13;

/// The kernel's default `perf_event_max_stack`.
pub const KERNEL_MAX_STACK: u64 = 127;

impl Quality {
    /// An empty tally for a recording whose events take stacks; `None` when none does.
    pub fn of_header(h: Option<&Header>) -> Option<Quality> {
        let h = h?;
        let dwarf = h
            .events
            .iter()
            .filter(|e| e.attr.sample_type & SAMPLE_STACK_USER != 0)
            .map(|e| u64::from(e.attr.sample_stack_user))
            .max();
        let fp = h
            .events
            .iter()
            .filter(|e| e.attr.sample_type & SAMPLE_CALLCHAIN != 0)
            .map(|e| match e.attr.sample_max_stack {
                0 => KERNEL_MAX_STACK,
                n => u64::from(n),
            })
            .max();
        let mode = match (dwarf, fp) {
            (Some(_), _) => Mode::Dwarf,
            (None, Some(_)) => Mode::Fp,
            (None, None) => return None,
        };
        Some(Quality {
            mode,
            stack_bytes: dwarf.unwrap_or(0),
            max_frames: fp.unwrap_or(KERNEL_MAX_STACK),
            max_stack: None,
            samples: 0,
            without: 0,
            outermost: 0,
            cut_bytes: 0,
            cut_frames: 0,
            at_leaf: 0,
            stopped: BTreeMap::new(),
            skipped_caller: 0,
            restored_caller: 0,
        })
    }

    /// Counts `n` samples whose stack ended at `e`.
    pub fn add(&mut self, e: &End, n: u64) {
        self.samples += n;
        match e {
            End::Outermost => self.outermost += n,
            End::CutBytes => self.cut_bytes += n,
            End::CutFrames => self.cut_frames += n,
            End::Stopped { stop, file, leaf } => {
                *self.stopped.entry((*stop, file.clone())).or_default() += n;
                if *leaf {
                    self.at_leaf += n;
                }
            }
        }
    }

    /// Counts `n` callchains whose sampled function's caller came out as `l`.
    pub fn add_leaf(&mut self, l: crate::symbolize::fpchain::Leaf, n: u64) {
        match l {
            crate::symbolize::fpchain::Leaf::Whole => {}
            crate::symbolize::fpchain::Leaf::Restored(_) => {
                self.skipped_caller += n;
                self.restored_caller += n;
            }
            crate::symbolize::fpchain::Leaf::Missed => self.skipped_caller += n,
        }
    }

    /// Adds another tally of the same recording (the unwinder's to the callchains').
    pub fn merge(&mut self, o: &Quality) {
        self.samples += o.samples;
        self.without += o.without;
        self.outermost += o.outermost;
        self.cut_bytes += o.cut_bytes;
        self.cut_frames += o.cut_frames;
        self.at_leaf += o.at_leaf;
        self.skipped_caller += o.skipped_caller;
        self.restored_caller += o.restored_caller;
        for (k, v) in &o.stopped {
            *self.stopped.entry(k.clone()).or_default() += v;
        }
    }

    /// The stopped stacks, all reasons together.
    pub fn stopped_total(&self) -> u64 {
        self.stopped.values().sum()
    }

    /// The stops, most first: (reason, file, samples).
    fn stops(&self) -> Vec<(Stop, &str, u64)> {
        let mut v: Vec<(Stop, &str, u64)> = self
            .stopped
            .iter()
            .map(|((s, f), n)| (*s, f.as_str(), *n))
            .collect();
        v.sort_by(|a, b| b.2.cmp(&a.2).then(a.0.cmp(&b.0)).then(a.1.cmp(b.1)));
        v
    }

    /// The mode as the line says it.
    fn mode_text(&self) -> String {
        match self.mode {
            Mode::Fp => "fp".into(),
            Mode::Dwarf => format!("dwarf, {} bytes copied", self.stack_bytes),
        }
    }

    /// The one line every report, `info` and the HTML page state:
    /// `call stacks (fp): 1523 samples, 51 reached the outermost frame, 0 cut at the
    /// 127-frame limit, 1472 stopped (1472 frame pointer missing in tiny, 1472 of them at
    /// the sampled function)`.
    pub fn line(&self) -> String {
        let mut s = format!(
            "call stacks ({}): {} samples, {} reached the outermost frame, ",
            self.mode_text(),
            self.samples,
            self.outermost
        );
        match self.mode {
            Mode::Dwarf => {
                s += &format!("{} cut at the stack-size limit", self.cut_bytes);
                if self.cut_frames > 0 {
                    s += &format!(", {} at the {}-frame limit", self.cut_frames, MAX_FRAMES);
                }
            }
            Mode::Fp => match self.max_stack {
                Some(n) => s += &format!("{} cut at --max-stack {n}", self.cut_frames),
                None => {
                    s += &format!(
                        "{} cut at the {}-frame limit",
                        self.cut_frames, self.max_frames
                    )
                }
            },
        }
        let stopped = self.stopped_total();
        s += &format!(", {stopped} stopped");
        if stopped > 0 {
            let stops = self.stops();
            let mut parts: Vec<String> = stops
                .iter()
                .take(5)
                .map(|(stop, file, n)| match stop {
                    Stop::NoFile => format!("{n} {}", stop.text()),
                    _ => format!("{n} {} in {}", stop.text(), crate::text::file_name(file)),
                })
                .collect();
            if stops.len() > 5 {
                parts.push(format!("{} more places", stops.len() - 5));
            }
            s += &format!(" ({}", parts.join(", "));
            if self.at_leaf > 0 {
                s += &format!(", {} of them at the sampled function", self.at_leaf);
            }
            s.push(')');
        }
        if self.skipped_caller > 0 {
            s += &format!(
                "; {} skipped the caller of a function sampled without its frame, {} of them restored from the call",
                self.skipped_caller, self.restored_caller
            );
        }
        if self.without > 0 {
            let n = self.without;
            s += &format!(
                "; {n} sample{} without a stack",
                if n == 1 { "" } else { "s" }
            );
        }
        s
    }

    /// What the reader should do about these stacks, if anything.
    pub fn warnings(&self) -> Vec<String> {
        let mut w = Vec::new();
        let n = self.samples;
        if n == 0 {
            return w;
        }
        let pct = |k: u64| 100.0 * k as f64 / n as f64;
        if self.mode == Mode::Fp && 2 * self.at_leaf > n {
            let file = self
                .stops()
                .first()
                .map(|s| crate::text::file_name(s.1).to_string())
                .unwrap_or_default();
            w.push(format!(
                "warning: {} of {n} call stacks ({:.1}%) stop at the sampled function: its frame pointer does not lead to its caller ({file} was built without frame pointers, as -O2 builds are by default), so Children and callers miss most of the time. Record with --call-graph dwarf, or rebuild with -fno-omit-frame-pointer.",
                self.at_leaf,
                pct(self.at_leaf)
            ));
            return w;
        }
        let missed = self.skipped_caller - self.restored_caller;
        // 5%, as below.
        if 20 * missed > n {
            w.push(format!(
                "warning: {missed} of {n} call stacks ({:.1}%) lack the caller of the sampled function: it had no frame of its own where it was sampled (gcc builds leaf functions without one even with -fno-omit-frame-pointer, and every function is without one at its first and last instructions), so the kernel's walk skipped to the caller's caller, and the call instruction did not name the caller (a call through a pointer: a thread's start function, a callback; or through a PLT stub into another library than the sampled function's): that caller's Children are low. Record with --call-graph dwarf.",
                pct(missed)
            ));
        }
        let short = self.cut_bytes + self.cut_frames + self.stopped_total();
        // 5%: a profile whose stacks miss more than that has callers' shares off by as much.
        if 20 * short > n {
            let mut why: Vec<String> = Vec::new();
            if self.cut_bytes > 0 {
                why.push(format!("{} ran out of copied stack: record with a larger copy (--call-graph dwarf,SIZE, up to 65528 bytes)", self.cut_bytes));
            }
            if self.cut_frames > 0 {
                why.push(match self.max_stack {
                    Some(m) => format!("{} reached --max-stack {m}", self.cut_frames),
                    None => format!("{} reached the frame limit", self.cut_frames),
                });
            }
            for (stop, file, k) in self.stops().into_iter().take(3) {
                let fix = match stop {
                    Stop::FramePointer => ": record with --call-graph dwarf, or rebuild it with -fno-omit-frame-pointer",
                    Stop::NotFound | Stop::Misplaced => ": pass --symfs DIR holding the recorded binary",
                    Stop::NoUnwindInfo => ": no .eh_frame or .debug_frame entry covers its code there (built without unwind tables, as musl's C library is); record with -g if it keeps frame pointers",
                    Stop::Jit => ": JIT-compiled code has no unwind tables; record with -g where the JIT keeps frame pointers (node; java -XX:+PreserveFramePointer)",
                    Stop::NoFile | Stop::Failed(_) => "",
                };
                why.push(format!(
                    "{k} stopped in {}: {}{fix}",
                    crate::text::show(file),
                    stop.text()
                ));
            }
            w.push(format!(
                "warning: {short} of {n} call stacks ({:.1}%) do not reach their thread's first function, so their callers' Children shares are low: {}",
                pct(short),
                why.join("; ")
            ));
        }
        w
    }

    /// The same figures for JSON.
    pub fn json(&self) -> Value {
        json!({
            "mode": match self.mode { Mode::Fp => "fp", Mode::Dwarf => "dwarf" },
            "stack_bytes": self.stack_bytes,
            "max_frames": self.max_frames,
            "samples": self.samples,
            "without_stack": self.without,
            "outermost": self.outermost,
            "cut_at_stack_size": self.cut_bytes,
            "cut_at_frame_limit": self.cut_frames,
            "stopped": self.stopped_total(),
            "stopped_at_sampled_function": self.at_leaf,
            "skipped_caller": self.skipped_caller,
            "restored_caller": self.restored_caller,
            "stops": self.stops().iter().map(|(s, f, n)| json!({
                "reason": s.text(),
                "file": f,
                "samples": n,
            })).collect::<Vec<_>>(),
        })
    }
}

/// What [`FpEnds`] needs of one address of a process: whether a file is mapped there
/// (and found here), whether its function is a thread's first, and the file.
#[derive(Debug, Clone)]
struct Place {
    found: Option<bool>,
    /// In anonymous executable memory: JIT-compiled code.
    jit: bool,
    entry: bool,
    file: std::sync::Arc<str>,
}

/// Where callchains (`-g`) ended, each address looked up once.
#[derive(Debug, Default)]
pub struct FpEnds {
    places: std::collections::HashMap<(u32, u64), Place>,
}

impl FpEnds {
    fn place(&mut self, sym: &mut Symbolizer, pid: u32, at: u64) -> &Place {
        self.places.entry((pid, at)).or_insert_with(|| {
            let found = sym.found(pid, at);
            let l = sym.resolve(pid, at);
            Place {
                found,
                jit: sym.in_jit_code(pid, at),
                entry: l.sym.as_deref().is_some_and(is_entry),
                file: l.dso,
            }
        })
    }

    /// Where a callchain ended: `addrs` is the sampled address, then the return addresses
    /// as the kernel walked them (kernel ones first, for a sample in the kernel); `sym`
    /// knows the recording's mappings. Its outermost user frame in a mapped file (any after
    /// it were read from frames that were none: the walk's last step) names where it ended:
    /// a thread's first function, or one whose frame pointer is missing.
    pub fn end(&mut self, sym: &mut Symbolizer, pid: u32, addrs: &[u64], max_frames: u64) -> End {
        // The chain with its context markers (one or two) reached the kernel's limit.
        if addrs.len() as u64 + 2 >= max_frames {
            return End::CutFrames;
        }
        let Some(first) = addrs.iter().position(|a| a >> 63 == 0) else {
            // A kernel thread's stack (the kernel walks its own to the task's start).
            return End::Outermost;
        };
        // The sampled address (or, for a sample in the kernel, the user one) is looked up
        // as it is; a return address one byte back, in its call instruction.
        let mut last = None;
        for (i, &a) in addrs.iter().enumerate().skip(first).rev() {
            if a >> 63 == 1 {
                continue;
            }
            let at = if i == first { a } else { a.saturating_sub(1) };
            let p = self.place(sym, pid, at);
            if p.found.is_some() {
                last = Some((i, p.clone()));
                break;
            }
        }
        let Some((i, p)) = last else {
            return End::Stopped {
                stop: Stop::NoFile,
                file: "[unknown]".into(),
                leaf: true,
            };
        };
        if p.entry {
            return End::Outermost;
        }
        End::Stopped {
            stop: if p.found == Some(true) {
                Stop::FramePointer
            } else if p.jit {
                Stop::Jit
            } else {
                Stop::NotFound
            },
            file: p.file.to_string(),
            leaf: i == first,
        }
    }
}

/// A sample's callchain as [`FpEnds::end`] reads it: its address, then the return addresses.
pub fn chain(out: &mut Vec<u64>, s: &labperf_common::Sample) {
    out.clear();
    out.push(s.ip);
    out.extend_from_slice(callers(s));
}

/// The return addresses of `s`'s callchain (without the sampled address the kernel puts
/// first), as far as the walk went right. Kernel frames (the top bit set, on every
/// architecture labperf records) come before user frames; a "kernel" address after a user
/// one is the kernel's frame-pointer walk of the user stack reading a word that is no
/// return address (a frame pointer that a function without one left, seen as
/// 0xffffff00007fef98 under dd): the chain ends before it, as perf's user part would name
/// it nothing.
pub fn callers(s: &labperf_common::Sample) -> &[u64] {
    let chain = match s.callchain.first() {
        Some(&first) if first == s.ip => &s.callchain[1..],
        _ => &s.callchain[..],
    };
    let user = if s.ip >> 63 == 0 {
        Some(0)
    } else {
        chain.iter().position(|&a| a >> 63 == 0)
    };
    match user {
        Some(u) => {
            // It ends at a kernel address, or at a word no code can return to: the zero
            // that ends a chain whose outermost frame pointer is null (glibc's `_start`),
            // or anything in the first page.
            let end = chain[u..]
                .iter()
                .position(|&a| a >> 63 == 1 || a < 4096)
                .map_or(chain.len(), |k| u + k);
            &chain[..end]
        }
        None => chain,
    }
}

/// Whether a report's heading line is a call-stack line of [`annotate`].
pub fn is_line(h: &str) -> bool {
    h.starts_with("# ") && h.contains("call stacks (")
}

#[cfg(test)]
mod tests {
    use super::callers;
    use labperf_common::Sample;

    fn sample(ip: u64, callchain: &[u64]) -> Sample {
        Sample {
            ip,
            callchain: callchain.to_vec(),
            ..Default::default()
        }
    }

    #[test]
    fn a_kernel_looking_word_after_the_user_frames_ends_the_chain() {
        let (k1, k2) = (0xffff_ffff_81d7_d6bf, 0xffff_ffff_8100_0130);
        let (u1, u2) = (0x7fef_9827_f350, 0x5555_5555_1234);
        // dd under cpu-clock:k -g: the user walk read 0xffffff00007fef98 after libc's frame.
        let bad = 0xffff_ff00_007f_ef98;
        let s = sample(k1, &[k1, k2, u1, bad, u2]);
        assert_eq!(callers(&s), &[k2, u1]);
        // A user sample: the first kernel-looking word ends it.
        let s = sample(u1, &[u1, u2, bad]);
        assert_eq!(callers(&s), &[u2]);
        // Whole chains are kept whole; a chain without the sampled address first too.
        assert_eq!(callers(&sample(k1, &[k1, k2, u1, u2])), &[k2, u1, u2]);
        assert_eq!(callers(&sample(k1, &[k2, u1])), &[k2, u1]);
        assert_eq!(callers(&sample(k1, &[k1, k2])), &[k2]);
    }
}
