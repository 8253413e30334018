//! `labperf script`: every sample as perf 6.1's `perf script` prints it (its default line
//! `comm tid [cpu] time: period event: ip sym+off (dso)`, the callchain one frame a line
//! under it for `-g` recordings), in time order; the fields `-F` picks ([`Fields`]).

use crate::record::filter::{Filter, Window};
use crate::record::load::{self, LoadError, Source};
use crate::symbolize::symbols::{Search, Spot, Symbolizer};
use crate::symbolize::unwind::Unwind;
use labperf_common::{Header, Record, Sample};
use std::collections::HashMap;
use std::fmt::Write as _;

/// perf's PERF_SAMPLE_* bits the fields need.
const SAMPLE_IP: u64 = 1;
const SAMPLE_TID: u64 = 1 << 1;
const SAMPLE_TIME: u64 = 1 << 2;
const SAMPLE_ADDR: u64 = 1 << 3;
const SAMPLE_CALLCHAIN: u64 = 1 << 5;
/// PERF_SAMPLE_STACK_USER: labperf's `--call-graph dwarf` recordings carry the user stack
/// alone (perf's also a callchain, for the kernel's frames).
const SAMPLE_STACK_USER: u64 = 1 << 13;
const SAMPLE_CPU: u64 = 1 << 7;

/// The fields labperf prints, as perf's `-F` names them, in the order perf prints them.
pub const FIELDS: &[(&str, u32)] = &[
    ("comm", COMM),
    ("tid", TID),
    ("pid", PID),
    ("time", TIME),
    ("cpu", CPU),
    ("period", PERIOD),
    ("event", EVENT),
    ("ip", IP),
    ("sym", SYM),
    ("symoff", SYMOFF),
    ("dso", DSO),
];

const COMM: u32 = 1;
const TID: u32 = 1 << 1;
const PID: u32 = 1 << 2;
const TIME: u32 = 1 << 3;
const CPU: u32 = 1 << 4;
const PERIOD: u32 = 1 << 5;
const EVENT: u32 = 1 << 6;
const IP: u32 = 1 << 7;
const SYM: u32 = 1 << 8;
const SYMOFF: u32 = 1 << 9;
const DSO: u32 = 1 << 10;

/// perf's other `-F` fields, which labperf does not print: named as such in the error.
const PERF_ONLY: &[&str] = &[
    "trace",
    "addr",
    "srcline",
    "iregs",
    "uregs",
    "brstack",
    "brstacksym",
    "flags",
    "data_src",
    "weight",
    "bpf-output",
    "brstackinsn",
    "brstackinsnlen",
    "brstackoff",
    "callindent",
    "insn",
    "insnlen",
    "synth",
    "phys_addr",
    "metric",
    "misc",
    "srccode",
    "ipc",
    "tod",
    "data_page_size",
    "code_page_size",
    "ins_lat",
    "machine_pid",
    "vcpu",
];

/// The fields to print: perf's default set, or what `-F` makes of it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Fields {
    set: u32,
    /// The fields `-F` named (a recording whose samples lack one is an error, where a
    /// default field is left out quietly, as perf does).
    named: u32,
}

impl Default for Fields {
    /// perf's default for sampled events: comm, tid, cpu, time, period, event, ip, sym,
    /// symoff, dso.
    fn default() -> Fields {
        Fields {
            set: COMM | TID | CPU | TIME | PERIOD | EVENT | IP | SYM | SYMOFF | DSO,
            named: 0,
        }
    }
}

/// The names of the fields labperf prints, comma-separated (for messages and help).
pub fn field_names() -> String {
    FIELDS.iter().map(|f| f.0).collect::<Vec<_>>().join(",")
}

impl Fields {
    /// `-F`'s value, as perf reads it: `f1,f2` (these fields only), or `+f1,-f2` (the
    /// default set with fields added or taken away). An event type's prefix (`sw:`) is
    /// refused: the fields apply to every event.
    pub fn parse(spec: &str) -> Result<Fields, String> {
        Fields::default().then(spec)
    }

    /// A further `-F` after these fields (perf takes several, in order): `+f1,-f2` changes
    /// them, a plain list replaces them.
    pub fn then(self, spec: &str) -> Result<Fields, String> {
        if let Some((ty, _)) = spec.split_once(':') {
            return Err(format!(
                "-F {spec}: labperf takes no event type before the fields ('{ty}:'): the fields apply to every event"
            ));
        }
        if spec.trim().is_empty() {
            return Err("-F needs at least one field: ".to_string() + &field_names());
        }
        let modify = spec.contains('+') || spec.contains('-');
        let mut f = if modify {
            self
        } else {
            Fields { set: 0, named: 0 }
        };
        for tok in spec.split(',').filter(|t| !t.is_empty()) {
            let (change, name) = match tok.as_bytes()[0] {
                b'+' => (Some(true), &tok[1..]),
                b'-' => (Some(false), &tok[1..]),
                _ => (None, tok),
            };
            if modify && change.is_none() {
                return Err(format!(
                    "-F {spec}: cannot mix +field or -field with plain fields (perf's rule): add or take away fields with + and -, or list them all"
                ));
            }
            let Some(&(_, bit)) = FIELDS.iter().find(|f| f.0 == name) else {
                if PERF_ONLY.contains(&name) {
                    return Err(format!(
                        "-F {spec}: perf's field '{name}' is not one labperf prints; it prints {}",
                        field_names()
                    ));
                }
                return Err(format!(
                    "-F {spec}: no field '{name}': the fields are {}",
                    field_names()
                ));
            };
            if change == Some(false) {
                f.set &= !bit;
                f.named &= !bit;
            } else {
                f.set |= bit;
                f.named |= bit;
            }
        }
        if f.set & SYMOFF != 0 && f.set & SYM == 0 {
            return Err(format!(
                "-F {spec}: symoff is the offset after the function's name: ask for sym too"
            ));
        }
        Ok(f)
    }

    /// The fields printed for samples of an event whose `sample_type` is `st`: a default
    /// field the samples lack is left out; a named one is an error (perf's checks).
    fn of_event(&self, name: &str, st: u64) -> Result<u32, String> {
        let mut set = self.set;
        let needs = [
            (IP, SAMPLE_IP, "IP"),
            (TID | PID, SAMPLE_TID, "TID"),
            (TIME, SAMPLE_TIME, "TIME"),
            (CPU, SAMPLE_CPU, "CPU"),
            (SYM | SYMOFF | DSO, SAMPLE_IP | SAMPLE_ADDR, "IP"),
        ];
        for (bits, sample, what) in needs {
            if set & bits == 0 || st & sample != 0 {
                continue;
            }
            if let Some(&(field, _)) = FIELDS.iter().find(|f| f.1 & bits & self.named != 0) {
                return Err(format!(
                    "the samples of '{name}' do not carry the {what} attribute: cannot print the '{field}' field (perf's -F takes it only when the recording has it)"
                ));
            }
            set &= !bits;
        }
        Ok(set)
    }
}

/// What `labperf script` prints, and of which samples.
#[derive(Debug, Clone, Default)]
pub struct Options {
    pub fields: Fields,
    /// `-G` (perf's --hide-call-graph): one line per sample even with callchains.
    pub hide_call_graph: bool,
    /// `--ns`: times with 9 decimals (nanoseconds) instead of 6.
    pub ns: bool,
    /// `--max-stack N`: at most N frames of each callchain.
    pub max_stack: Option<usize>,
    pub filter: Filter,
}

/// What [`write`] printed.
#[derive(Debug, Default)]
pub struct Printed {
    /// Samples printed, and the samples of the file.
    pub samples: u64,
    pub all: u64,
    /// The file's and the symbolizer's warnings, each once.
    pub warnings: Vec<String>,
}

/// The state of one pass over the samples: threads' names, the symbolizer, each event's
/// fields.
struct Pass<'a> {
    o: &'a Options,
    sym: Symbolizer,
    /// Each thread's name now (COMM records, inherited at FORK).
    comms: HashMap<u32, String>,
    /// Per event: its name, its fields, whether its samples carry callchains.
    events: Vec<(String, u32, bool)>,
    /// perf's `use_callchain`: some event records callchains and -G is not given.
    use_callchain: bool,
    /// The longest event name (perf pads names to it).
    width: usize,
    window: Option<Window>,
    /// `--call-graph dwarf` recordings: the unwinder of their user stacks.
    unwind: Option<Unwind>,
    /// (time, file order, text) of each sample kept.
    lines: Vec<(u64, u64, String)>,
}

impl<'a> Pass<'a> {
    /// From the file's header; `Err` when `-F` names a field its samples lack.
    fn new(o: &'a Options, sym: Symbolizer, h: &Header) -> Result<Pass<'a>, String> {
        let events = h
            .events
            .iter()
            .map(|e| {
                let st = e.attr.sample_type;
                Ok((
                    e.name.clone(),
                    o.fields.of_event(&e.name, st)?,
                    st & (SAMPLE_CALLCHAIN | SAMPLE_STACK_USER) != 0,
                ))
            })
            .collect::<Result<Vec<_>, String>>()?;
        Ok(Pass {
            o,
            sym,
            comms: HashMap::new(),
            use_callchain: !o.hide_call_graph && events.iter().any(|e| e.2),
            width: h.events.iter().map(|e| e.name.len()).max().unwrap_or(0),
            events,
            window: None,
            unwind: None,
            lines: Vec::new(),
        })
    }

    /// Takes in a record in file order: names of threads, and samples.
    fn take(&mut self, r: &Record, seq: u64) {
        match r {
            Record::Comm(c) => {
                self.comms.insert(c.tid, c.comm.clone());
            }
            Record::Fork(t) if t.tid != t.ptid => {
                if let Some(c) = self.comms.get(&t.ptid).cloned() {
                    self.comms.insert(t.tid, c);
                }
            }
            Record::Sample(s) => {
                if let Some(text) = self.sample(s) {
                    self.lines.push((s.time, seq, text));
                }
            }
            _ => {}
        }
    }

    /// The thread's name as perf names it: its last COMM, `swapper` for the idle task,
    /// else `:TID`.
    fn comm(&self, tid: u32) -> String {
        match self.comms.get(&tid) {
            Some(c) => c.clone(),
            None if tid == 0 => "swapper".into(),
            None => format!(":{tid}"),
        }
    }

    /// The text of sample `s` (its lines, each ended), or `None` when the filters drop it.
    fn sample(&mut self, s: &Sample) -> Option<String> {
        let f = &self.o.filter;
        if !f.keeps_thread(s.pid, s.tid) || self.window.as_ref().is_some_and(|w| !w.keeps(s.time)) {
            return None;
        }
        let comm = self.comm(s.tid);
        if !f.keeps_comm(&comm) {
            return None;
        }
        let (ev, set, has_chain) = match self.events.get(s.event as usize) {
            Some(e) => (e.0.clone(), e.1, e.2),
            None => ("[unknown]".to_string(), Fields::default().set, false),
        };
        let mut leaf = self.sym.spot(s.pid, s.ip);
        anonymous_as_perf(&mut leaf, s.pid);
        if (!f.dsos.is_empty() && !f.keeps_dso(&leaf.loc.dso))
            || (!f.symbols.is_empty()
                && !leaf.loc.sym.as_deref().is_some_and(|n| f.keeps_symbol(n)))
        {
            return None;
        }
        let chain = set & IP != 0 && has_chain && self.use_callchain;
        let mut t = String::new();
        head(&mut t, s, set, (&comm, chain, &ev, self.width, self.o.ns));
        if set & IP != 0 {
            if chain {
                t.push('\n');
                self.frames(&mut t, s, set);
            } else {
                let _ = write!(t, " {:16x}", s.ip);
                place(&mut t, &leaf, set);
            }
        }
        t.push('\n');
        Some(t)
    }

    /// The callchain's frames, innermost first, one a line: the kernel's, then the user's
    /// (an address after the first user one is looked up in the process, as perf's
    /// PERF_CONTEXT_USER part is, whatever its top bit).
    fn frames(&mut self, t: &mut String, s: &Sample, set: u32) {
        let mut user = false;
        let max = self.o.max_stack.unwrap_or(usize::MAX);
        let mut addrs: Vec<u64> = s.callchain.clone();
        // A sample in the kernel with no callchain (labperf's `--call-graph dwarf` records
        // the user stack alone): its own address first, the user's frames under it.
        if addrs.is_empty() && s.ip >> 63 == 1 {
            addrs.push(s.ip);
        }
        // `--call-graph dwarf`: the user stack unwound, from the interrupted user address
        // (its callers one byte back, inside their call, as perf's libdw unwinder gives
        // them). The unwinder gives a kernel sample's interrupted user address one byte
        // on, as a return address.
        if let (Some(un), Some(_)) = (self.unwind.as_mut(), &s.user_stack) {
            if s.ip >> 63 == 0 && addrs.last() != Some(&s.ip) {
                addrs.push(s.ip);
            }
            let rets = un.unwind(&mut self.sym, s);
            addrs.extend(rets.into_iter().map(|r| r.wrapping_sub(1)));
        }
        for &a in addrs.iter().take(max) {
            user |= a >> 63 == 0;
            let spot = if user && a >> 63 == 1 {
                Spot {
                    loc: crate::symbolize::symbols::Location {
                        dso: "[unknown]".into(),
                        sym: None,
                        vaddr: a,
                    },
                    start: None,
                    in_map: None,
                }
            } else {
                let mut spot = self.sym.spot(s.pid, a);
                anonymous_as_perf(&mut spot, s.pid);
                spot
            };
            let _ = write!(t, "\t{:16x}", spot.in_map.unwrap_or(a));
            place(t, &spot, set);
            t.push('\n');
        }
    }
}

/// A sample's fields before its address: `comm tid [cpu] time: period event: `.
fn head(
    t: &mut String,
    s: &Sample,
    set: u32,
    (comm, chain, ev, width, ns): (&str, bool, &str, usize, bool),
) {
    if set & COMM != 0 {
        if chain {
            let _ = write!(t, "{comm} ");
        } else {
            let _ = write!(t, "{comm:>16} ");
        }
    }
    match (set & PID != 0, set & TID != 0) {
        (true, true) => {
            let _ = write!(t, "{:5}/{:<5} ", s.pid as i32, s.tid as i32);
        }
        (true, false) => {
            let _ = write!(t, "{:5} ", s.pid as i32);
        }
        (false, true) => {
            let _ = write!(t, "{:5} ", s.tid as i32);
        }
        (false, false) => {}
    }
    if set & CPU != 0 {
        let _ = write!(t, "[{:03}] ", s.cpu);
    }
    if set & TIME != 0 {
        let (secs, nsecs) = (s.time / 1_000_000_000, s.time % 1_000_000_000);
        if ns {
            let _ = write!(t, "{secs:5}.{nsecs:09}: ");
        } else {
            let _ = write!(t, "{:>12}: ", format!("{secs}.{:06}", nsecs / 1000));
        }
    }
    if set & PERIOD != 0 {
        let _ = write!(t, "{:10} ", s.period);
    }
    if set & EVENT != 0 {
        let _ = write!(t, "{ev:>width$}: ");
    }
}

/// perf's naming of code in memory without a file (its `is_anon_memory` and
/// `is_no_dso_memory`): the process's JIT map file `/tmp/perf-PID.map`, addresses as they
/// are (not offsets into a file).
fn anonymous_as_perf(spot: &mut Spot, pid: u32) {
    let d = &*spot.loc.dso;
    let anon = ["//anon", "/dev/zero", "/anon_hugepage", "[stack", "/SYSV"]
        .iter()
        .any(|p| d.starts_with(p))
        || d == "[heap]";
    if anon {
        spot.loc.dso = crate::symbolize::perfmap::path_of(pid).into();
        spot.in_map = None;
    }
}

/// ` sym+0xOFF (dso)` of a place, as the fields ask.
fn place(t: &mut String, spot: &Spot, set: u32) {
    if set & SYM != 0 {
        match (&spot.loc.sym, spot.start) {
            (Some(n), Some(start)) if set & SYMOFF != 0 => {
                let _ = write!(t, " {n}+{:#x}", spot.loc.vaddr.wrapping_sub(start));
            }
            (Some(n), _) => {
                let _ = write!(t, " {n}");
            }
            (None, _) => t.push_str(" [unknown]"),
        }
    }
    if set & DSO != 0 {
        let _ = write!(t, " ({})", spot.loc.dso);
    }
}

#[derive(Debug, thiserror::Error)]
pub enum ScriptError {
    #[error(transparent)]
    Load(#[from] LoadError),
    #[error("{0}")]
    Fields(String),
    #[error("cannot write: {0}")]
    Write(#[from] std::io::Error),
}

/// Prints the samples of `src` that `o.filter` keeps to `out` as `perf script` does, in
/// time order (samples of one time in file order, as perf's ordered events). Mappings and
/// kernel functions are read first, in a pass of their own; threads' names as the samples
/// come.
pub fn write(
    src: &Source,
    search: Search,
    o: &Options,
    out: &mut dyn std::io::Write,
) -> Result<Printed, ScriptError> {
    let peek = load::peek(src)?;
    let Some(header) = peek.header.clone() else {
        return Err(ScriptError::Fields(format!(
            "{}: its header (the events recorded) is lost: nothing to name the samples by",
            src.name.display()
        )));
    };
    let mut sym = Symbolizer::new(search);
    sym.recorded_on(src, peek.header.as_ref(), peek.header_ext.as_ref());
    let mut unwind = Unwind::of(peek.header.as_ref(), peek.header_ext.as_ref());
    load::stream_side_band(src, |r| {
        sym.observe(r);
        if let Some(u) = unwind.as_mut() {
            u.observe(r);
        }
    })?;
    let mut pass = Pass::new(o, sym, &header).map_err(ScriptError::Fields)?;
    pass.unwind = unwind;
    if let Some(t) = &o.filter.time {
        pass.window = Some(t.window(src)?);
    }
    let mut seq = 0u64;
    let info = load::stream(src, |r| {
        seq += 1;
        pass.take(r, seq);
    })?;
    let mut lines = std::mem::take(&mut pass.lines);
    lines.sort_by_key(|l| (l.0, l.1));
    for (_, _, text) in &lines {
        out.write_all(text.as_bytes())?;
    }
    let mut warnings = info.warnings();
    warnings.append(&mut pass.sym.warnings);
    let mut seen = std::collections::HashSet::new();
    warnings.retain(|w| seen.insert(w.clone()));
    Ok(Printed {
        samples: lines.len() as u64,
        all: info.samples,
        warnings,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// IP, TID, TIME, PERIOD: a `perf record` of one task (no CPU).
    const TASK: u64 = SAMPLE_IP | SAMPLE_TID | SAMPLE_TIME | 1 << 8;

    #[test]
    fn fields_are_perf_s_default_set_or_what_f_makes_of_it() {
        let d = Fields::default();
        assert_eq!(
            d.set,
            COMM | TID | CPU | TIME | PERIOD | EVENT | IP | SYM | SYMOFF | DSO
        );
        assert_eq!(Fields::parse("comm,tid").unwrap().set, COMM | TID);
        assert_eq!(Fields::parse("+pid").unwrap().set, d.set | PID);
        assert_eq!(
            Fields::parse("-cpu,-period").unwrap().set,
            d.set & !(CPU | PERIOD)
        );
        for (spec, err) in [
            ("comm,+tid", "cannot mix"),
            ("symoff", "ask for sym too"),
            ("sw:comm", "no event type"),
            ("iregs", "perf's field 'iregs' is not one labperf prints"),
            ("tim", "no field 'tim'"),
            ("", "at least one field"),
        ] {
            let e = Fields::parse(spec).unwrap_err();
            assert!(e.contains(err), "{spec}: {e}");
        }
    }

    #[test]
    fn a_field_the_samples_lack_is_left_out_unless_named() {
        // perf's default leaves out the CPU of a recording without it, quietly.
        let set = Fields::default().of_event("cpu-clock", TASK).unwrap();
        assert_eq!(set & CPU, 0);
        assert_eq!(set & TIME, TIME);
        // Named, it is an error; with the CPU recorded, it is printed.
        let named = Fields::parse("comm,cpu").unwrap();
        let e = named.of_event("cpu-clock", TASK).unwrap_err();
        assert!(
            e.contains("'cpu-clock' do not carry the CPU attribute"),
            "{e}"
        );
        assert_eq!(
            named.of_event("cpu-clock", TASK | SAMPLE_CPU).unwrap(),
            COMM | CPU
        );
    }
}
