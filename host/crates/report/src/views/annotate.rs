//! `labperf annotate`: one sampled function's instructions (disassembled by binutils'
//! objdump, [`crate::symbolize::disasm`]), each with its share of the function's samples,
//! and between them the source lines the binary's DWARF gives, as `perf annotate --stdio`.

use crate::record::events::{self, Names, Select};
use crate::record::load::{self, LoadError};
use crate::symbolize::disasm::{self, DisasmError, Insn};
use crate::symbolize::symbols::{Elf, Lines, Search, Symbolizer, MAX_ELF};
use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// What to annotate.
#[derive(Debug, Clone)]
pub struct Options {
    /// The function, as reports name it; `None`: the busiest one that can be annotated.
    pub symbol: Option<String>,
    pub search: Search,
    /// The event whose samples count; `None`: the first event (in the header's order)
    /// with samples.
    pub event: Option<Select>,
}

/// Why a function could not be annotated.
#[derive(Debug, thiserror::Error)]
pub enum AnnotateError {
    #[error(transparent)]
    Load(#[from] LoadError),
    #[error(transparent)]
    Event(#[from] events::NoSuchEvent),
    #[error(transparent)]
    Disasm(#[from] DisasmError),
    #[error(transparent)]
    Metrics(#[from] crate::views::metrics::MetricsError),
    #[error("{file} has no sample in a named function{of}")]
    NoSamples { file: String, of: String },
    #[error("{file} has no sample in a function named '{symbol}'{hint}")]
    NoSymbol {
        file: String,
        symbol: String,
        hint: String,
    },
    #[error("cannot annotate {symbol}: {why}")]
    Cannot { symbol: String, why: String },
    /// No sampled function can be annotated here: the busiest one's reason, and the samples
    /// in files not found here (`; N of its samples are in …`).
    #[error("no sampled function can be annotated here ({first}){missing}")]
    Nothing { first: String, missing: String },
}

/// One line of an annotation.
#[derive(Debug, Clone, PartialEq)]
pub enum Line {
    /// A source line the next instructions come from: its file (as DWARF names it), its
    /// number and its text (`None` where the file is not on this machine).
    Source {
        file: Arc<str>,
        line: u32,
        text: Option<String>,
    },
    /// An instruction, with the samples (and their period) at its address.
    Insn {
        addr: u64,
        text: String,
        samples: u64,
        period: u64,
    },
}

/// One function annotated.
#[derive(Debug, Clone)]
pub struct Annotation {
    /// The function as reports name it.
    pub name: String,
    /// The mapped file the recording names, and the file here it was read from.
    pub dso: String,
    pub file: PathBuf,
    pub machine: &'static str,
    /// Its addresses in the file's own address space: `start..end`.
    pub start: u64,
    pub end: u64,
    /// The event counted, and the function's samples and their period.
    pub event: String,
    pub samples: u64,
    pub period: u64,
    pub lines: Vec<Line>,
    /// What the reader should know: other functions of the name, samples left out.
    /// A strobed recording's windows per instruction (`None`: not strobed).
    pub strobed: Option<Strobed>,
    pub notes: Vec<String>,
}

/// A sampled function while samples are gathered: its samples per address.
#[derive(Debug, Default)]
struct Sampled {
    dso: Arc<str>,
    name: Arc<str>,
    /// Address (the file's own) → (samples, period).
    at: BTreeMap<u64, (u64, u64)>,
    samples: u64,
    period: u64,
    /// A sample of its heaviest address: (pid, ip, its samples), to find its file.
    probe: (u32, u64, u64),
}

/// The sampled functions of the events `picked` takes, the busiest first (as reports rank
/// them); and the samples of files not found here, by file, whose functions are unknown.
fn gather(
    counts: &crate::record::counts::Counts,
    sym: &mut Symbolizer,
    picked: impl Fn(u32) -> bool,
) -> (Vec<Sampled>, BTreeMap<Arc<str>, u64>) {
    let mut groups: HashMap<(Arc<str>, Arc<str>), Sampled> = HashMap::new();
    let mut missing: BTreeMap<Arc<str>, u64> = BTreeMap::new();
    for (&(pid, _, ip, ev), &(n, period)) in &counts.by_ip {
        if !picked(ev) {
            continue;
        }
        let loc = sym.resolve(pid, ip);
        let Some(name) = loc.sym else {
            if !loc.dso.starts_with('[') && sym.found(pid, ip) == Some(false) {
                *missing.entry(loc.dso).or_default() += n;
            }
            continue;
        };
        let g = groups.entry((loc.dso.clone(), name.clone())).or_default();
        g.dso = loc.dso;
        g.name = name;
        let a = g.at.entry(loc.vaddr).or_default();
        a.0 += n;
        a.1 = a.1.saturating_add(period);
        g.samples += n;
        g.period = g.period.saturating_add(period);
        if a.0 > g.probe.2 {
            g.probe = (pid, ip, a.0);
        }
    }
    let mut groups: Vec<Sampled> = groups.into_values().collect();
    groups.sort_by(|a, b| {
        (b.period, b.samples)
            .cmp(&(a.period, a.samples))
            .then_with(|| a.name.cmp(&b.name))
            .then_with(|| a.dso.cmp(&b.dso))
    });
    (groups, missing)
}

/// What an error names of the recording: its file, the event asked for (` of event E`),
/// and the file not found here with the most samples (`; N of its samples …`).
struct Asked<'a> {
    file: &'a str,
    of: String,
    missing: String,
}

impl Asked<'_> {
    /// Says which file not found here holds the most samples (none: "").
    fn missing(missing: &BTreeMap<Arc<str>, u64>) -> String {
        let Some((path, n)) = missing
            .iter()
            .max_by_key(|(p, n)| (**n, std::cmp::Reverse(*p)))
        else {
            return String::new();
        };
        format!(
            "; {n} of its samples are in a file whose functions are unknown: {}",
            not_found(path)
        )
    }
}

/// Why a file's functions cannot be read: it is not here.
fn not_found(path: &str) -> String {
    format!("{path} is not found here with the recorded build-id, nor in labperf's binary cache: pass --symfs DIR holding it")
}

/// Where a function is: its file here, its range and its source lines.
struct Located {
    elf: Arc<Elf>,
    file: PathBuf,
    start: u64,
    end: u64,
}

/// A recording's sampled functions, read once: what [`annotate`] and [`busiest`] choose from.
struct Read {
    info: load::FileInfo,
    sym: Symbolizer,
    /// The busiest first.
    groups: Vec<Sampled>,
    file: String,
    event: String,
    /// ` of event E` where --event names one, for errors.
    of: String,
    /// The file not found here with the most samples, for errors ([`Asked::missing`]).
    missing: String,
    notes: Vec<String>,
}

/// Annotates the function `o` names (or the busiest one) of the recording `src`.
pub fn annotate(src: &load::Source, o: &Options) -> Result<Annotation, AnnotateError> {
    let mut r = read(src, o)?;
    let asked = Asked {
        file: &r.file,
        of: r.of.clone(),
        missing: r.missing.clone(),
    };
    let (g, at) = choose(
        &mut r.sym,
        &r.groups,
        o.symbol.as_deref(),
        &asked,
        &mut r.notes,
    )?;
    let mut a = finish(src, o, (&r.info, &r.event), (g, at), &mut r.sym)?;
    r.notes.append(&mut a.notes);
    a.notes = r.notes;
    Ok(a)
}

/// The `n` busiest functions of the recording `src` that can be annotated, annotated (for
/// the HTML page; the others are left out without a word).
pub fn busiest(
    src: &load::Source,
    o: &Options,
    n: usize,
) -> Result<Vec<Annotation>, AnnotateError> {
    let mut r = read(src, o)?;
    let mut out = Vec::new();
    // A bounded search: a recording of many files not found here names none.
    for g in r.groups.iter().take(n.saturating_mul(8)) {
        if out.len() == n {
            break;
        }
        let Ok(at) = locate(&mut r.sym, g) else {
            continue;
        };
        if let Ok(a) = finish(src, o, (&r.info, &r.event), (g, at), &mut r.sym) {
            out.push(a);
        }
    }
    Ok(out)
}

/// Reads the samples of `src` that `o` asks for, by function.
fn read(src: &load::Source, o: &Options) -> Result<Read, AnnotateError> {
    let threads = std::env::var("LABPERF_THREADS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get()));
    let mut counts = crate::record::counts::sample_counts(src, threads, false, None)?;
    let file = src.name.display().to_string();
    let names = Names::of(counts.info.header.as_ref());
    if let Some(s) = &o.event {
        events::check(s, [(file.clone(), &names)])?;
    }
    // `--event MEMBER` of a group recording: the member's reads, as report counts them.
    counts.add_group_reads(src, o.event.as_ref(), false, None)?;
    let info = &counts.info;
    let mut sym = Symbolizer::new(o.search.clone());
    sym.recorded_on(src, info.header.as_ref(), info.header_ext.as_ref());
    for r in counts.others.iter().cloned() {
        sym.observe(&r.record());
    }
    // The events counted: --event's, else the first with samples.
    let first = counts.by_ip.keys().map(|k| k.3).min();
    let picked = |ev: u32| match &o.event {
        Some(s) => s.picks(&names, ev),
        None => Some(ev) == first,
    };
    let event = match (&o.event, first) {
        (Some(s), _) if s.0 == events::WALL => events::WALL.to_string(),
        (Some(s), _) => (0..names.cap())
            .find(|&i| s.picks(&names, i))
            .map_or_else(|| s.0.clone(), |i| names.name(i).into_owned()),
        (None, Some(ev)) => names.name(ev).into_owned(),
        (None, None) => events::UNKNOWN.to_string(),
    };
    let mut notes = Vec::new();
    let sampled: std::collections::BTreeSet<u32> = counts.by_ip.keys().map(|k| k.3).collect();
    if o.event.is_none() && sampled.len() > 1 {
        notes.push(format!(
            "note: {file} has samples of {} events; these are {event}'s (--event NAME picks another)",
            sampled.len()
        ));
    }
    let (groups, missing) = gather(&counts, &mut sym, picked);
    Ok(Read {
        info: counts.info,
        sym,
        groups,
        file,
        of: match &o.event {
            Some(_) => format!(" of event {event}"),
            None => String::new(),
        },
        event,
        missing: Asked::missing(&missing),
        notes,
    })
}

/// The annotation of `g`, found at `at`, of the recording `src` (its `info`, the `event`
/// counted).
fn finish(
    src: &load::Source,
    o: &Options,
    (info, event): (&load::FileInfo, &str),
    (g, at): (&Sampled, Located),
    sym: &mut Symbolizer,
) -> Result<Annotation, AnnotateError> {
    let mut notes = Vec::new();
    let insns = disasm::disassemble(
        &at.file,
        at.elf.machine.unwrap_or("unknown"),
        at.start,
        at.end,
    )?;
    let (lines, outside) = listing(&insns, g, at.elf.dwarf.as_deref());
    let strobed = strobed(src, &o.search, info, &g.name, &insns)?;
    if outside > 0 {
        notes.push(format!(
            "note: {outside} of {}'s samples are outside its range {:#x}..{:#x} and are left out",
            g.name, at.start, at.end
        ));
    }
    let kept: u64 = lines
        .iter()
        .map(|l| match l {
            Line::Insn { samples, .. } => *samples,
            Line::Source { .. } => 0,
        })
        .sum();
    let period = lines
        .iter()
        .map(|l| match l {
            Line::Insn { period, .. } => *period,
            Line::Source { .. } => 0,
        })
        .fold(0u64, u64::saturating_add);
    notes.extend(std::mem::take(&mut sym.warnings));
    Ok(Annotation {
        name: g.name.to_string(),
        dso: g.dso.to_string(),
        file: at.file,
        machine: at.elf.machine.unwrap_or("unknown"),
        start: at.start,
        end: at.end,
        event: event.to_string(),
        samples: kept,
        period,
        lines,
        strobed,
        notes,
    })
}

/// The function to annotate of `groups` (busiest first) and where it is: the one named
/// `symbol` (the busiest of that name, others noted), or the busiest whose file is here.
fn choose<'a>(
    sym: &mut Symbolizer,
    groups: &'a [Sampled],
    symbol: Option<&str>,
    asked: &Asked<'_>,
    notes: &mut Vec<String>,
) -> Result<(&'a Sampled, Located), AnnotateError> {
    let cannot = |g: &Sampled, why: String| AnnotateError::Cannot {
        symbol: g.name.to_string(),
        why,
    };
    let Some(symbol) = symbol else {
        let mut first_err: Option<AnnotateError> = None;
        for g in groups {
            match locate(sym, g) {
                Ok(at) => {
                    if let Some(e) = &first_err {
                        notes.push(format!(
                            "note: {e}; annotating the busiest function that can be, {}",
                            g.name
                        ));
                    }
                    if !asked.missing.is_empty() {
                        notes.push(format!("note: {}", asked.missing.trim_start_matches("; ")));
                    }
                    return Ok((g, at));
                }
                Err(why) => {
                    first_err.get_or_insert_with(|| cannot(g, why));
                }
            }
        }
        return Err(match first_err {
            // What the files not found here hold is said too: the busiest may be there.
            Some(e) if !asked.missing.is_empty() => AnnotateError::Nothing {
                first: e.to_string(),
                missing: asked.missing.clone(),
            },
            Some(e) => e,
            None => AnnotateError::NoSamples {
                file: asked.file.to_string(),
                of: format!("{}{}", asked.of, asked.missing),
            },
        });
    };
    let named: Vec<&Sampled> = groups.iter().filter(|g| &*g.name == symbol).collect();
    let Some(g) = named.first() else {
        let like: Vec<&str> = groups
            .iter()
            .map(|g| &*g.name)
            .filter(|n| n.contains(symbol))
            .take(5)
            .collect();
        let hint = match like[..] {
            [] if !asked.missing.is_empty() => asked.missing.clone(),
            [] => format!(
                ": `labperf report {}` lists the sampled functions",
                asked.file
            ),
            _ => format!("; sampled functions named like it: {}", like.join(", ")),
        };
        return Err(AnnotateError::NoSymbol {
            file: asked.file.to_string(),
            symbol: symbol.to_string(),
            hint: format!("{}{hint}", asked.of),
        });
    };
    for other in &named[1..] {
        notes.push(format!(
            "note: {symbol} of {} has samples too ({}); these are of {}",
            other.dso, other.samples, g.dso
        ));
    }
    let at = locate(sym, g).map_err(|why| cannot(g, why))?;
    Ok((g, at))
}

/// The file here of `g` and its range in it; else why not (naming the recorded path).
fn locate(sym: &mut Symbolizer, g: &Sampled) -> Result<Located, String> {
    let dso = &*g.dso;
    if dso.starts_with('[') {
        return Err(format!(
            "it is in {dso}, whose code labperf does not read (it annotates functions of files on disk)"
        ));
    }
    let (pid, ip, _) = g.probe;
    let (elf, vaddr) = sym
        .file_at(pid, ip)
        .ok_or_else(|| format!("its file {}", not_found(dso)))?;
    let file = elf
        .file
        .clone()
        .ok_or_else(|| format!("its file {dso} was not read from disk"))?;
    // A stripped file's functions are its debug file's.
    let range = elf.function(vaddr).map(|(s, e, _)| (s, e)).or_else(|| {
        let d = elf.dwarf.as_deref()?;
        let data = crate::files::mapped::map_regular(d, MAX_ELF).ok()?;
        let debug = Elf::parse((*data).as_ref()).ok()?;
        debug.function(vaddr).map(|(s, e, _)| (s, e))
    });
    let (start, end) = range.ok_or_else(|| {
        format!(
            "{} has no symbol for {vaddr:#x} (a stripped file without its debug file)",
            file.display()
        )
    })?;
    Ok(Located {
        elf,
        file,
        start,
        end,
    })
}

/// The lines of the annotation of `g`'s instructions `insns`: each instruction with the
/// samples at its address (an address between two instructions counts for the one before
/// it), a source line before each run of instructions from one line (from the DWARF of
/// file `dwarf`); and the samples outside the instructions' range.
fn listing(insns: &[Insn], g: &Sampled, dwarf: Option<&Path>) -> (Vec<Line>, u64) {
    let mut at = vec![(0u64, 0u64); insns.len()];
    let mut outside = 0;
    let end = insns.last().map_or(0, |i| i.addr + 16);
    for (&a, &(n, p)) in &g.at {
        match insns.partition_point(|i| i.addr <= a).checked_sub(1) {
            Some(k) if a < end => {
                at[k].0 += n;
                at[k].1 = at[k].1.saturating_add(p);
            }
            _ => outside += n,
        }
    }
    let lines = dwarf.and_then(|d| {
        let data = crate::files::mapped::map_regular(d, MAX_ELF).ok()?;
        Lines::parse((*data).as_ref())
    });
    let mut texts = SourceTexts::default();
    let mut out = Vec::new();
    let mut last = None;
    for (i, (n, p)) in insns.iter().zip(at) {
        let here = lines.as_ref().and_then(|l| l.location(i.addr));
        if let Some((file, line)) = here.clone().filter(|h| Some(h) != last.as_ref()) {
            out.push(Line::Source {
                text: texts.line(&file, line),
                file,
                line,
            });
        }
        last = here;
        out.push(Line::Insn {
            addr: i.addr,
            text: i.text.clone(),
            samples: n,
            period: p,
        });
    }
    (out, outside)
}

/// Source files read for their lines, each once (`None`: not here, or too large).
#[derive(Default)]
struct SourceTexts {
    files: HashMap<Arc<str>, Option<Vec<String>>>,
}

impl SourceTexts {
    /// Largest source file read.
    const MAX: u64 = 16 << 20;

    /// Line `line` (from 1) of `file`, without its end of line.
    fn line(&mut self, file: &Arc<str>, line: u32) -> Option<String> {
        let lines = self.files.entry(file.clone()).or_insert_with(|| {
            let p = Path::new(&**file);
            if std::fs::metadata(p).ok()?.len() > Self::MAX {
                return None;
            }
            let bytes = std::fs::read(p).ok()?;
            Some(
                String::from_utf8_lossy(&bytes)
                    .lines()
                    .map(str::to_string)
                    .collect(),
            )
        });
        lines
            .as_ref()?
            .get((line as usize).checked_sub(1)?)
            .map(|l| l.trim().to_string())
    }
}

impl Annotation {
    /// The share of the function's samples of `samples` with `period`, percent: of its
    /// period (perf's `local period`), of its samples where no sample has a period.
    pub fn percent(&self, samples: u64, period: u64) -> f64 {
        crate::views::report::share(samples, period, self.samples, self.period)
    }

    /// The `perf annotate --stdio` text: a heading, then each source line (`: LINE TEXT`,
    /// its file named where it changes) and each instruction with its percent of the
    /// function's samples (`samples`: their number instead, as perf's `-n`); a strobed
    /// recording's instructions with their windows' columns after it ([`Strobed::columns`]).
    pub fn render(&self, samples: bool) -> String {
        use std::fmt::Write;
        let mut s = String::new();
        let basis = if self.period > 0 { "period" } else { "hits" };
        let column = if samples { "Samples" } else { "Percent" };
        let names = self
            .strobed
            .as_ref()
            .map(Strobed::names)
            .unwrap_or_default();
        let blank = " ".repeat(names.len());
        let _ = writeln!(
            s,
            " {column}{names} |\tSource code & Disassembly of {} for {} ({} samples, percent: local {basis})",
            self.name, self.event, self.samples
        );
        let _ = writeln!(s, "{}", "-".repeat(100));
        let _ = writeln!(
            s,
            "        {blank} : Disassembly of {} ({})",
            self.file.display(),
            self.machine
        );
        let _ = writeln!(s, "        {blank} : {:016x} <{}>:", self.start, self.name);
        let mut shown: Option<&str> = None;
        for l in &self.lines {
            match l {
                Line::Source { file, line, text } => {
                    let at = match shown {
                        Some(f) if f == &**file => line.to_string(),
                        _ => format!("{}:{line}", crate::text::file_name(file)),
                    };
                    shown = Some(file);
                    let l = format!(
                        "        {blank} : {at:<4} {}",
                        text.as_deref().unwrap_or("")
                    );
                    let _ = writeln!(s, "{}", l.trim_end());
                }
                Line::Insn {
                    addr,
                    text,
                    samples: n,
                    period,
                } => {
                    let value = match samples {
                        true => format!("{n:>8}"),
                        false => format!("{:>8.2}", self.percent(*n, *period)),
                    };
                    let cells = self
                        .strobed
                        .as_ref()
                        .map(|st| st.cells(*addr))
                        .unwrap_or_default();
                    let _ = writeln!(s, "{value}{cells} :   {addr:x}:   {text}");
                }
            }
        }
        s
    }
}

/// The windows of a strobed recording (`record --metrics`) per instruction of the
/// annotated function: those whose end sample is at it, as `report`'s metrics view counts
/// them per function (a window whose start and end functions differ is discarded).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Strobed {
    /// Which counts the recording has: cycles, instructions, branch-misses,
    /// cache-references, cache-misses.
    pub have: [bool; 5],
    /// Instruction address → (windows ending there, of them discarded, the kept ones'
    /// summed counts in the order of `have`).
    pub at: BTreeMap<u64, (u64, u64, [u64; 5])>,
}

impl Strobed {
    /// The columns shown: windows kept, and those of CPI, branch-misses and cache-misses
    /// per 1000 instructions the recording's counts give.
    fn columns(&self) -> Vec<&'static str> {
        let h = self.have;
        let mut v = vec!["Windows"];
        for (name, on) in [
            ("CPI", h[0] && h[1]),
            ("BM/KI", h[2] && h[1]),
            ("CM/KI", h[4] && h[1]),
        ] {
            if on {
                v.push(name);
            }
        }
        v
    }

    /// The columns' heading, each 8 wide.
    fn names(&self) -> String {
        self.columns().iter().map(|c| format!(" {c:>7}")).collect()
    }

    /// The columns of the instruction at `addr` (`-` where it ends no kept window).
    fn cells(&self, addr: u64) -> String {
        let (windows, discarded, sums) = self.at.get(&addr).copied().unwrap_or_default();
        let kept = windows - discarded;
        let per = |v: u64, scale: f64| match sums[1] {
            0 => "-".to_string(),
            i => format!("{:.2}", scale * v as f64 / i as f64),
        };
        self.columns()
            .iter()
            .map(|c| {
                let v = match *c {
                    "Windows" => kept.to_string(),
                    "CPI" => per(sums[0], 1.0),
                    "BM/KI" => per(sums[2], 1000.0),
                    _ => per(sums[4], 1000.0),
                };
                format!(" {v:>7}")
            })
            .collect()
    }
}

/// The windows of the strobed recording `src` (`None`: it is not one) that end in the
/// function `name`, per instruction of `insns` (an address between two counts for the one
/// before it).
fn strobed(
    src: &load::Source,
    search: &Search,
    info: &load::FileInfo,
    name: &str,
    insns: &[Insn],
) -> Result<Option<Strobed>, AnnotateError> {
    use crate::views::metrics;
    let Some(h) = info.header.as_ref() else {
        return Ok(None);
    };
    if metrics::strobe_of(h, info.header_ext.as_ref()).is_none() {
        return Ok(None);
    }
    let c = metrics::Columns::from_header(h);
    let have = [
        c.cycles,
        c.instructions,
        c.branch_misses,
        c.cache_refs,
        c.cache_misses,
    ]
    .map(|i| i.is_some());
    let (m, _) = metrics::by_address(src, search.clone(), metrics::DiscardMode::Discard)?;
    let mut at = BTreeMap::new();
    for r in m.callers.iter().flatten().filter(|r| r.symbol == name) {
        let addr = r.caller.as_deref().and_then(|c| c.strip_prefix("0x"));
        let Some(a) = addr.and_then(|a| u64::from_str_radix(a, 16).ok()) else {
            continue;
        };
        let Some(k) = insns.partition_point(|i| i.addr <= a).checked_sub(1) else {
            continue;
        };
        let e = at.entry(insns[k].addr).or_insert((0, 0, [0u64; 5]));
        e.0 += r.samples;
        e.1 += r.discarded;
        for (s, v) in e.2.iter_mut().zip(r.sums) {
            *s = s.saturating_add(v);
        }
    }
    Ok(Some(Strobed { have, at }))
}
