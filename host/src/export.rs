//! `labperf export`: recordings' samples as stacks (the sampled function, then its callers
//! where the recording has callchains) in formats other tools read: folded stacks and SVG
//! flame graphs (via `inferno`), pprof's gzipped `profile.proto` (messages below, with
//! `prost`; no `protoc`), the Firefox Profiler's processed format (`fxprof-processed-profile`)
//! and Parquet tables (the `parquet` crate; schema in [`parquet_schema`]). Several recordings
//! export as one: each sample keeps its recording's host, architecture and run.

use crate::load::{self, FileInfo, LoadError, Source};
use crate::symbols::{label, Search, Symbolizer};
use labperf_common::Record;
use std::collections::HashMap;
use std::io::Write;

/// The formats `labperf export` writes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Format {
    /// Brendan Gregg's collapsed stacks: `outer;…;leaf WEIGHT` per line.
    Folded,
    /// An SVG flame graph (searchable, works offline).
    Svg,
    /// The Firefox Profiler's processed format, JSON (profiler.firefox.com, samply's viewer).
    Firefox,
    /// pprof's profile.proto, gzipped (`go tool pprof`, Pyroscope, Parca).
    Pprof,
    /// Parquet: one row per sample, and a stacks table beside it (DuckDB, Spark, pandas).
    Parquet,
}

impl Format {
    /// Whether the format needs every sample (its time and thread), not only the stacks.
    pub fn per_sample(self) -> bool {
        matches!(self, Format::Firefox | Format::Parquet)
    }
}

/// One function of a stack.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Frame {
    /// The function, or `file+0xADDRESS` when unknown (see [`label`]); the outermost frame
    /// of a stack is its thread's name, with an empty `dso`.
    pub name: String,
    /// The mapped file.
    pub dso: String,
}

/// One exported recording.
#[derive(Debug, Default)]
pub struct Run {
    /// The file's name without its extension (pprof's `run` label, Parquet's `run`).
    pub name: String,
    /// The header's hostname and architecture ("unknown" without a header).
    pub host: String,
    pub arch: String,
    /// The header's event names, in sample `event` order.
    pub events: Vec<String>,
    pub info: FileInfo,
    /// How far its call stacks reach; `None` when its events take none.
    pub stacks: Option<crate::quality::Quality>,
}

/// The samples of one recording with one stack.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Stack {
    /// Index into [`Stacks::runs`].
    pub run: u32,
    /// Indexes into [`Stacks::frames`], outermost (the thread's name) first.
    pub frames: Vec<u32>,
    pub samples: u64,
    /// The sum of the samples' periods.
    pub period: u64,
}

/// One sample, kept when the format needs each ([`Format::per_sample`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SampleRow {
    pub run: u32,
    pub event: u32,
    pub pid: u32,
    pub tid: u32,
    /// Nanoseconds on the recording's clock.
    pub time: u64,
    pub period: u64,
    /// Index into [`Stacks::stacks`].
    pub stack: u32,
}

/// Samples aggregated per recording and distinct stack.
#[derive(Debug, Default)]
pub struct Stacks {
    pub frames: Vec<Frame>,
    /// Most samples first.
    pub stacks: Vec<Stack>,
    /// Every sample in file order, file by file (empty unless asked for).
    pub samples: Vec<SampleRow>,
    pub runs: Vec<Run>,
    pub total_samples: u64,
    pub warnings: Vec<String>,
}

/// A process, its thread's name and its stack's addresses, leaf first.
type RawStack = (u32, u32, Vec<u64>);
type Fx = std::hash::BuildHasherDefault<load::FxHasher>;

/// Reads `src` and aggregates its samples per stack (see [`collect_many`]).
pub fn collect(src: &Source, search: Search) -> Result<Stacks, LoadError> {
    collect_many(std::slice::from_ref(src), search, false)
}

/// Reads each recording and aggregates its samples per stack, each address named by the
/// symbolizer; `samples` keeps every sample too. Return addresses (callers) are looked up
/// one byte back, inside their call instruction.
pub fn collect_many(srcs: &[Source], search: Search, samples: bool) -> Result<Stacks, LoadError> {
    let mut st = Stacks::default();
    let mut index: HashMap<Frame, u32> = HashMap::new();
    for (n, src) in srcs.iter().enumerate() {
        st.collect_one(n as u32, src, search.clone(), samples, &mut index)?;
    }
    let mut frames: Vec<(u32, Frame)> = index.into_iter().map(|(f, i)| (i, f)).collect();
    frames.sort_unstable_by_key(|f| f.0);
    st.frames = frames.into_iter().map(|f| f.1).collect();
    // Most samples first, then by names: the same order on every run.
    let frames = &st.frames;
    let names = |s: &Stack| -> Vec<&str> {
        s.frames
            .iter()
            .map(|&i| frames[i as usize].name.as_str())
            .collect()
    };
    let mut order: Vec<u32> = (0..st.stacks.len() as u32).collect();
    order.sort_by(|&a, &b| {
        let (a, b) = (&st.stacks[a as usize], &st.stacks[b as usize]);
        b.samples
            .cmp(&a.samples)
            .then_with(|| names(a).cmp(&names(b)))
            .then(a.run.cmp(&b.run))
    });
    let mut new_of = vec![0u32; order.len()];
    for (new, &old) in order.iter().enumerate() {
        new_of[old as usize] = new as u32;
    }
    let mut old: Vec<Option<Stack>> = std::mem::take(&mut st.stacks)
        .into_iter()
        .map(Some)
        .collect();
    st.stacks = order
        .iter()
        .map(|&o| old[o as usize].take().expect("each stack once"))
        .collect();
    for s in &mut st.samples {
        s.stack = new_of[s.stack as usize];
    }
    // Each warning once (the unwinder's symbolizer and the namer's find the same files).
    let mut seen = std::collections::HashSet::new();
    st.warnings.retain(|w| seen.insert(w.clone()));
    Ok(st)
}

impl Stacks {
    fn collect_one(
        &mut self,
        run: u32,
        src: &Source,
        search: Search,
        keep: bool,
        index: &mut HashMap<Frame, u32>,
    ) -> Result<(), LoadError> {
        // Distinct (pid, addresses) first, numbered: the side-band records a name needs
        // may come after the samples that need it.
        let mut raw: HashMap<RawStack, (u64, u64, u32), Fx> = HashMap::default();
        // The key a stacked sample is looked up by, reused: a stack already seen costs
        // no allocation.
        let mut probe: RawStack = (0, 0, Vec::new());
        // Samples without callchains (most recordings): keyed without an allocation.
        let mut flat: HashMap<(u32, u32, u64), (u64, u64, u32), Fx> = HashMap::default();
        let mut next_id = 0u32;
        let mut rows: Vec<SampleRow> = Vec::new();
        let mut side: Vec<Record> = Vec::new();
        // Each thread's name as of the sample (perf script's comm): Comm records name a
        // thread, a fork passes the parent's name on. Names are numbered in `comms`.
        let mut comms: Vec<String> = Vec::new();
        let mut comm_of: HashMap<u32, u32, Fx> = HashMap::default();
        // `--call-graph dwarf` recordings: every mapping first (a pass of its own), then
        // each sample's user stack unwound as it is read.
        let peek = load::peek(src)?;
        let mut unwind = crate::unwind::Unwind::of(peek.header.as_ref(), peek.header_ext.as_ref());
        let mut usym = Symbolizer::new(search.clone());
        if let Some(u) = unwind.as_mut() {
            usym.recorded_on(peek.header.as_ref(), peek.header_ext.as_ref());
            load::stream(src, |r| u.observe(r))?;
        }
        // How far the stacks reach: user stacks as they are unwound, callchains (`-g`)
        // once every mapping is known, from the samples of each distinct stack
        // (`fp_samples`, by stack number).
        let mut quality = crate::quality::Quality::of_header(peek.header.as_ref());
        let mut fp_samples: Vec<u64> = Vec::new();
        let info = load::stream(src, |r| match r {
            Record::Comm(c) => {
                let i = match comms.iter().position(|n| *n == c.comm) {
                    Some(i) => i as u32,
                    None => {
                        comms.push(c.comm.clone());
                        comms.len() as u32 - 1
                    }
                };
                comm_of.insert(c.tid, i);
                side.push(r.clone());
            }
            Record::Fork(t) => {
                if let Some(&i) = comm_of.get(&t.ptid) {
                    comm_of.insert(t.tid, i);
                }
                side.push(r.clone());
            }
            Record::Sample(s) => {
                let comm = comm_of
                    .get(&s.tid)
                    .or_else(|| comm_of.get(&s.pid))
                    .copied()
                    .unwrap_or(u32::MAX);
                let (unwound, fp) = match unwind.as_mut() {
                    Some(u) if s.user_stack.is_some() => (u.unwind(&mut usym, s), false),
                    _ => {
                        if s.callchain.is_empty() {
                            if let Some(q) = quality.as_mut() {
                                q.without += 1;
                            }
                        }
                        (Vec::new(), !s.callchain.is_empty())
                    }
                };
                let bump = |e: &mut (u64, u64, u32)| {
                    e.0 += 1;
                    e.1 = e.1.saturating_add(s.period);
                    e.2
                };
                let id = if (s.callchain.is_empty() || s.callchain == [s.ip]) && unwound.is_empty()
                {
                    bump(flat.entry((s.pid, comm, s.ip)).or_insert_with(|| {
                        next_id += 1;
                        (0, 0, next_id - 1)
                    }))
                } else {
                    probe.0 = s.pid;
                    probe.1 = comm;
                    let addrs = &mut probe.2;
                    addrs.clear();
                    addrs.push(s.ip);
                    let callers = match s.callchain.first() {
                        Some(&first) if first == s.ip => &s.callchain[1..],
                        _ => &s.callchain[..],
                    };
                    addrs.extend_from_slice(callers);
                    addrs.extend_from_slice(&unwound);
                    match raw.get_mut(&probe) {
                        Some(e) => bump(e),
                        None => {
                            next_id += 1;
                            let mut e = (0, 0, next_id - 1);
                            let id = bump(&mut e);
                            raw.insert(probe.clone(), e);
                            id
                        }
                    }
                };
                if fp {
                    if fp_samples.len() <= id as usize {
                        fp_samples.resize(id as usize + 1, 0);
                    }
                    fp_samples[id as usize] += 1;
                }
                if keep {
                    rows.push(SampleRow {
                        run,
                        event: s.event,
                        pid: s.pid,
                        tid: s.tid,
                        time: s.time,
                        period: s.period,
                        stack: id,
                    });
                }
            }
            other => side.push(other.clone()),
        })?;
        let mut sym = Symbolizer::new(search);
        sym.recorded_on(info.header.as_ref(), info.header_ext.as_ref());
        // The kernel addresses the stacks name: the kernel functions kept are theirs.
        let mut kernel: Vec<u64> = flat
            .keys()
            .map(|k| k.2)
            .chain(raw.keys().flat_map(|k| k.2.iter().copied()))
            .filter(|a| a >> 63 == 1)
            .collect();
        // A return address is looked up one byte back.
        let back: Vec<u64> = kernel.iter().map(|a| a.saturating_sub(1)).collect();
        kernel.extend(back);
        kernel.sort_unstable();
        kernel.dedup();
        for r in &mut side {
            if let Record::KernelSymbols(k) = r {
                load::keep_sampled(k, &kernel);
            }
            sym.observe(r);
        }
        drop(kernel);
        drop(side);
        let counted = |id: u32| fp_samples.get(id as usize).copied().unwrap_or(0);
        let mut raw: Vec<_> = raw.into_iter().collect();
        if let Some(q) = quality.as_mut() {
            if let Some(u) = &unwind {
                q.merge(&u.quality);
                self.warnings.extend(u.warnings.iter().cloned());
            }
            let max = q.max_frames;
            let mut ends = crate::quality::FpEnds::default();
            for ((pid, _, ip), v) in &flat {
                if counted(v.2) > 0 {
                    let e = ends.end(&mut sym, *pid, std::slice::from_ref(ip), max);
                    q.add(&e, counted(v.2));
                }
            }
            // Callchains (`-g`) whose sampled function had no frame of its own: the caller
            // the kernel's walk skipped, put back where its call instruction names it.
            let mut chains = crate::fpchain::FpChains::default();
            for ((pid, _, addrs), v) in &mut raw {
                if counted(v.2) > 0 {
                    let e = ends.end(&mut sym, *pid, addrs, max);
                    q.add(&e, counted(v.2));
                    q.add_leaf(chains.fix(&mut sym, *pid, addrs), counted(v.2));
                }
            }
        }
        drop(fp_samples);
        let mut merged: HashMap<Vec<u32>, u32> = HashMap::new();
        let mut stack_of = vec![0u32; next_id as usize];
        // In address order, so that frame numbering is the same on every run; each frame is
        // held once, by `index` (made a list when every file is read).
        let mut flat: Vec<_> = flat.into_iter().collect();
        flat.sort_unstable_by_key(|e| e.0);
        raw.sort_unstable_by(|a, b| a.0.cmp(&b.0));
        let mut intern = |f: Frame| -> u32 {
            let next = index.len() as u32;
            *index.entry(f).or_insert(next)
        };
        let all = flat
            .iter()
            .map(|((pid, comm, ip), v)| (*pid, *comm, std::slice::from_ref(ip), *v))
            .chain(
                raw.iter()
                    .map(|((pid, comm, a), v)| (*pid, *comm, &a[..], *v)),
            );
        for (pid, comm, addrs, (n, period, id)) in all {
            // Leaf first: the sampled function (the symbol table's, as every flat report
            // names it, so Self agrees with them), then at each return address the
            // functions inlined at that call site (innermost first, from DWARF where the
            // binary has it) and the function that holds them.
            let mut stack: Vec<u32> = Vec::with_capacity(addrs.len() + 1);
            for (i, &a) in addrs.iter().enumerate() {
                let at = if i == 0 { a } else { a.saturating_sub(1) };
                let l = sym.resolve(pid, at);
                let inlined = if i == 0 {
                    Vec::new()
                } else {
                    sym.source(pid, at).inlined
                };
                for name in inlined {
                    stack.push(intern(Frame {
                        name: name.to_string(),
                        dso: l.dso.to_string(),
                    }));
                }
                stack.push(intern(Frame {
                    name: label(&l.dso, l.sym.as_deref(), l.vaddr),
                    dso: l.dso.to_string(),
                }));
            }
            // The outermost frame: the thread's name (perf's flame graphs start there too).
            // A sample read before its process's name (from another CPU's ring) takes the
            // name the process has at the end.
            let root = Frame {
                name: comms
                    .get(comm as usize)
                    .or_else(|| comm_of.get(&pid).and_then(|&c| comms.get(c as usize)))
                    .cloned()
                    .unwrap_or_else(|| format!("pid {pid}")),
                dso: String::new(),
            };
            stack.push(intern(root));
            stack.reverse();
            let slot = *merged.entry(stack).or_insert_with(|| {
                self.stacks.push(Stack {
                    run,
                    frames: Vec::new(),
                    samples: 0,
                    period: 0,
                });
                self.stacks.len() as u32 - 1
            });
            let s = &mut self.stacks[slot as usize];
            s.samples += n;
            s.period = s.period.saturating_add(period);
            self.total_samples += n;
            stack_of[id as usize] = slot;
        }
        drop((flat, raw));
        // Each stack's frames, held by `merged` until now.
        for (frames, slot) in merged {
            self.stacks[slot as usize].frames = frames;
        }
        for r in &mut rows {
            r.stack = stack_of[r.stack as usize];
        }
        self.samples.append(&mut rows);
        self.warnings.append(&mut sym.warnings);
        let h = info.header.as_ref();
        self.runs.push(Run {
            name: src
                .name
                .file_stem()
                .map_or("run".into(), |s| s.to_string_lossy().into_owned()),
            host: h.map_or("unknown".into(), |h| h.hostname.clone()),
            arch: h.map_or("unknown".into(), |h| h.arch.name().to_string()),
            events: h.map_or_else(Vec::new, |h| {
                h.events.iter().map(|e| e.name.clone()).collect()
            }),
            info,
            stacks: quality,
        });
        Ok(())
    }

    /// The first recording's header, if any.
    fn header(&self) -> Option<&labperf_common::Header> {
        self.runs.first().and_then(|r| r.info.header.as_ref())
    }

    /// The first recording's first event (what the weights count).
    fn event(&self) -> Option<&str> {
        self.runs
            .first()
            .and_then(|r| r.events.first())
            .map(String::as_str)
    }

    /// Whether the weights are nanoseconds (cpu-clock and task-clock periods).
    fn weights_are_ns(&self) -> bool {
        matches!(self.event(), Some("cpu-clock" | "task-clock"))
    }

    /// A sample's wall-clock time in ns since the Unix epoch: its recording's clock mapped
    /// through the header's start (the clock's own value without a header).
    pub fn wall_ns(&self, s: &SampleRow) -> u64 {
        match self
            .runs
            .get(s.run as usize)
            .and_then(|r| r.info.header.as_ref())
        {
            Some(h) => h
                .start_realtime_ns
                .saturating_add(s.time.saturating_sub(h.start_time_ns)),
            None => s.time,
        }
    }
}

/// A command with its program's file name only (titles).
fn short_command(argv: &[String]) -> String {
    let mut v: Vec<&str> = argv.iter().map(String::as_str).collect();
    if let Some(p) = v.first_mut() {
        *p = p.rsplit('/').next().unwrap_or(p);
    }
    v.join(" ")
}

/// A frame's name as one folded-stack element: `;` separates frames, so it may not appear
/// in a name; control characters are escaped. As `inferno-collapse-perf` writes them, a
/// function's spaces stay (readers split the count off at the last space: `<A as B>::next`)
/// and a thread's name (`thread`) has its spaces made `_`.
fn folded_name(name: &str, thread: bool) -> String {
    crate::text::show_text(name)
        .chars()
        .map(|c| {
            if c == ';' || (thread && c == ' ') {
                '_'
            } else {
                c
            }
        })
        .collect()
}

impl Stacks {
    /// Folded stacks, one line per distinct stack (recordings merged):
    /// `thread;outer;…;leaf PERIOD` (the sum of the samples' periods, as
    /// `perf script | inferno-collapse-perf` weighs them).
    pub fn folded(&self) -> String {
        self.folded_by(|s| s.period)
    }

    /// Folded stacks weighed by `weight` (a stack's period, or its samples).
    fn folded_by(&self, weight: impl Fn(&Stack) -> u64) -> String {
        let names: Vec<String> = self
            .frames
            .iter()
            .map(|f| folded_name(&f.name, f.dso.is_empty()))
            .collect();
        // Recordings merged by path, in the order the paths first come.
        let mut line_of: HashMap<&[u32], usize> = HashMap::new();
        let mut lines: Vec<(&[u32], u64)> = Vec::new();
        for s in &self.stacks {
            match line_of.get(&s.frames[..]) {
                Some(&i) => lines[i].1 = lines[i].1.saturating_add(weight(s)),
                None => {
                    line_of.insert(&s.frames, lines.len());
                    lines.push((&s.frames, weight(s)));
                }
            }
        }
        let mut out = String::new();
        for (stack, n) in lines {
            let path: Vec<&str> = stack.iter().map(|&i| names[i as usize].as_str()).collect();
            out.push_str(&path.join(";"));
            out.push(' ');
            out.push_str(&n.to_string());
            out.push('\n');
        }
        out
    }

    /// An SVG flame graph of the folded stacks, titled with the recorded command.
    pub fn svg(&self, w: impl Write) -> std::io::Result<()> {
        // inferno adds the weights up in a usize: periods whose sum would overflow it (a
        // damaged or crafted file) are drawn by samples instead.
        let total: u128 = self.stacks.iter().map(|s| u128::from(s.period)).sum();
        let by_period = total <= (usize::MAX / 2) as u128;
        let folded = if by_period {
            self.folded()
        } else {
            self.folded_by(|s| s.samples)
        };
        let mut o = inferno::flamegraph::Options::default();
        o.title = match (self.runs.len(), self.header()) {
            (1, Some(h)) => format!(
                "labperf: {} on {} ({} samples)",
                crate::text::show_text(&short_command(&h.command)),
                crate::text::show_text(&h.hostname),
                self.total_samples
            ),
            (n, _) if n > 1 => {
                format!("labperf: {n} recordings ({} samples)", self.total_samples)
            }
            _ => format!("labperf ({} samples)", self.total_samples),
        };
        o.count_name = if !by_period {
            "samples".into()
        } else if self.weights_are_ns() {
            "ns".into()
        } else {
            "events".into()
        };
        inferno::flamegraph::from_lines(&mut o, folded.lines(), w)
    }

    /// pprof's profile.proto, gzipped. Values: samples, then the sum of periods (in
    /// nanoseconds for cpu-clock and task-clock, events otherwise). Every sample carries
    /// its recording's labels `host`, `arch` and `run`.
    pub fn pprof(&self, w: impl Write) -> std::io::Result<()> {
        use pprof::*;
        let mut strings = Strings::default();
        let event = self.event().unwrap_or("samples").to_string();
        let unit = if self.weights_are_ns() {
            "nanoseconds"
        } else {
            "count"
        };
        let period_type = ValueType {
            r#type: strings.id(&event),
            unit: strings.id(unit),
        };
        let sample_type = vec![
            ValueType {
                r#type: strings.id("samples"),
                unit: strings.id("count"),
            },
            period_type.clone(),
        ];
        // One mapping per file, one function and one location per frame (ids from 1).
        let mut mappings: Vec<Mapping> = Vec::new();
        let mut mapping_of: HashMap<&str, u64> = HashMap::new();
        let mut function = Vec::with_capacity(self.frames.len());
        let mut location = Vec::with_capacity(self.frames.len());
        for (i, f) in self.frames.iter().enumerate() {
            let id = i as u64 + 1;
            let next = mappings.len() as u64 + 1;
            let mapping_id = *mapping_of.entry(f.dso.as_str()).or_insert_with(|| {
                mappings.push(Mapping {
                    id: next,
                    filename: strings.id(&f.dso),
                    has_functions: true,
                    ..Mapping::default()
                });
                next
            });
            let name = strings.id(&f.name);
            function.push(Function {
                id,
                name,
                system_name: name,
                filename: strings.id(&f.dso),
                start_line: 0,
            });
            location.push(Location {
                id,
                mapping_id,
                address: 0,
                line: vec![Line {
                    function_id: id,
                    line: 0,
                }],
                is_folded: false,
            });
        }
        let labels: Vec<Vec<Label>> = self
            .runs
            .iter()
            .map(|r| {
                vec![
                    Label::str(strings.id("host"), strings.id(&r.host)),
                    Label::str(strings.id("arch"), strings.id(&r.arch)),
                    Label::str(strings.id("run"), strings.id(&r.name)),
                ]
            })
            .collect();
        let sample = self
            .stacks
            .iter()
            .map(|s| Sample {
                // Leaf first.
                location_id: s.frames.iter().rev().map(|&i| i as u64 + 1).collect(),
                value: vec![s.samples as i64, s.period.min(i64::MAX as u64) as i64],
                label: labels.get(s.run as usize).cloned().unwrap_or_default(),
            })
            .collect();
        let header = self.header();
        let p = Profile {
            sample_type,
            sample,
            mapping: mappings,
            location,
            function,
            string_table: strings.table,
            time_nanos: header.map_or(0, |h| h.start_realtime_ns.min(i64::MAX as u64) as i64),
            duration_nanos: 0,
            period_type: Some(period_type),
            // The fixed period (none with a frequency: flag bit 10).
            period: header
                .and_then(|h| h.events.first())
                .filter(|e| e.attr.flags & (1 << 10) == 0)
                .map_or(0, |e| {
                    e.attr.sample_period_or_freq.min(i64::MAX as u64) as i64
                }),
        };
        let mut gz = flate2::write::GzEncoder::new(w, flate2::Compression::default());
        gz.write_all(&prost::Message::encode_to_vec(&p))?;
        gz.finish()?;
        Ok(())
    }

    /// The Firefox Profiler's processed profile (needs [`Stacks::samples`]): a process per
    /// recording and pid, a thread per tid, each sample at its wall-clock time with its
    /// stack's function names embedded (no symbol server needed). For cpu-clock and
    /// task-clock the sample's period is its CPU time.
    pub fn firefox(&self, w: impl Write) -> serde_json::Result<()> {
        use fxprof_processed_profile as fx;
        let reference = self
            .samples
            .iter()
            .map(|s| self.wall_ns(s))
            .min()
            .unwrap_or(0);
        let ns = self.weights_are_ns();
        let interval = self
            .header()
            .and_then(|h| h.events.first())
            .filter(|e| e.attr.flags & (1 << 10) == 0 && ns)
            .map_or(fx::SamplingInterval::from_millis(1), |e| {
                fx::SamplingInterval::from_nanos(e.attr.sample_period_or_freq.max(1))
            });
        let mut p = fx::Profile::new(
            "labperf",
            fx::ReferenceTimestamp::from_duration_since_unix_epoch(
                std::time::Duration::from_nanos(reference),
            ),
            interval,
        );
        // Every frame is a name already: nothing for the profiler to look up.
        p.set_symbolicated(true);
        let mut processes: HashMap<(u32, u32), fx::ProcessHandle> = HashMap::new();
        let mut threads: HashMap<(u32, u32, u32), fx::ThreadHandle> = HashMap::new();
        let mut handles: HashMap<(fx::ThreadHandle, u32), Option<fx::StackHandle>> = HashMap::new();
        // Each thread's samples in time order.
        let mut order: Vec<&SampleRow> = self.samples.iter().collect();
        order.sort_by_key(|s| (s.run, s.pid, s.tid, s.time));
        let category = fx::CategoryHandle::OTHER.into();
        for s in order {
            let at = fx::Timestamp::from_nanos_since_reference(self.wall_ns(s) - reference);
            let stack = &self.stacks[s.stack as usize];
            let thread_name = stack
                .frames
                .first()
                .map_or("", |&i| self.frames[i as usize].name.as_str());
            let run = &self.runs[s.run as usize];
            let several = self.runs.len() > 1;
            let process = *processes.entry((s.run, s.pid)).or_insert_with(|| {
                let name = if several {
                    format!("{thread_name} ({}, {})", run.host, run.name)
                } else {
                    thread_name.to_string()
                };
                p.add_process(&name, s.pid, at)
            });
            let thread = *threads.entry((s.run, s.pid, s.tid)).or_insert_with(|| {
                let t = p.add_thread(process, s.tid, at, s.tid == s.pid);
                p.set_thread_name(t, thread_name);
                t
            });
            let handle = *handles.entry((thread, s.stack)).or_insert_with(|| {
                // Without the thread's name, which the profiler shows as the thread.
                let frames: Vec<fx::FrameInfo> = stack.frames[1..]
                    .iter()
                    .map(|&i| fx::FrameInfo {
                        frame: fx::Frame::Label(p.intern_string(&self.frames[i as usize].name)),
                        category_pair: category,
                        flags: fx::FrameFlags::empty(),
                    })
                    .collect();
                p.intern_stack_frames(thread, frames.into_iter())
            });
            let cpu = if ns {
                fx::CpuDelta::from_nanos(s.period)
            } else {
                fx::CpuDelta::ZERO
            };
            p.add_sample(thread, at, handle, cpu, 1);
        }
        serde_json::to_writer(w, &p)
    }

    /// The Parquet tables of [`parquet_schema`] (needs [`Stacks::samples`]): the samples
    /// to `samples`, the stacks to `stacks`. Snappy-compressed, strings dictionary-encoded.
    pub fn parquet(
        &self,
        samples: impl Write + Send,
        stacks: impl Write + Send,
    ) -> Result<(), parquet::errors::ParquetError> {
        pq::write(self, samples, stacks)
    }
}

/// The Parquet schemas `labperf export --format parquet` writes: `OUT` holds one row per
/// sample, `OUT`'s `.stacks.parquet` sibling one row per frame of each stack.
///
/// Samples (`labperf_sample`): `host`, `arch` and `run` (the recording's file name without
/// extension) say where it came from; `event` is the event's name; `pid`, `tid`; `time`
/// is the sample's wall-clock time (UTC, ns: the recording's clock mapped through the
/// header's start); `weight` is the sample's period (ns for cpu-clock and task-clock,
/// events otherwise); `stack_id` joins the stacks table; `symbol` and `dso` name the
/// sampled (leaf) function, as `labperf report` does.
///
/// Stacks (`labperf_stack`): `stack_id`, `depth` (0 = the leaf, the sampled function;
/// callers follow; the greatest depth is the thread's name, with an empty `dso`), `symbol`,
/// `dso`.
///
/// ```sql
/// SELECT host, symbol, sum(weight) FROM 'x.parquet' GROUP BY ALL ORDER BY 3 DESC;
/// ```
pub fn parquet_schema() -> (&'static str, &'static str) {
    (pq::SAMPLES, pq::STACKS)
}

mod pq {
    use super::{SampleRow, Stacks};
    use parquet::basic::Compression;
    use parquet::data_type::{ByteArray, ByteArrayType, Int32Type, Int64Type};
    use parquet::errors::ParquetError;
    use parquet::file::properties::WriterProperties;
    use parquet::file::writer::SerializedFileWriter;
    use std::io::Write;
    use std::sync::Arc;

    pub const SAMPLES: &str = "message labperf_sample {
  required binary host (STRING);
  required binary arch (STRING);
  required binary run (STRING);
  required binary event (STRING);
  required int32 pid (INTEGER(32,false));
  required int32 tid (INTEGER(32,false));
  required int64 time (TIMESTAMP(NANOS,true));
  required int64 weight;
  required int32 stack_id;
  required binary symbol (STRING);
  required binary dso (STRING);
}";

    pub const STACKS: &str = "message labperf_stack {
  required int32 stack_id;
  required int32 depth;
  required binary symbol (STRING);
  required binary dso (STRING);
}";

    /// Rows per row group: bounded memory while writing, large enough to compress well.
    const GROUP: usize = 1 << 17;

    fn props() -> Arc<WriterProperties> {
        Arc::new(
            WriterProperties::builder()
                .set_compression(Compression::SNAPPY)
                .set_created_by(concat!("labperf ", env!("CARGO_PKG_VERSION")).into())
                .build(),
        )
    }

    /// One column's values for a row group.
    enum Values {
        Bytes(Vec<ByteArray>),
        I32(Vec<i32>),
        I64(Vec<i64>),
    }

    fn write_group<W: Write + Send>(
        w: &mut SerializedFileWriter<W>,
        columns: Vec<Values>,
    ) -> Result<(), ParquetError> {
        let mut rg = w.next_row_group()?;
        let mut columns = columns.into_iter();
        while let Some(mut c) = rg.next_column()? {
            match columns.next() {
                Some(Values::Bytes(v)) => {
                    c.typed::<ByteArrayType>().write_batch(&v, None, None)?;
                }
                Some(Values::I32(v)) => {
                    c.typed::<Int32Type>().write_batch(&v, None, None)?;
                }
                Some(Values::I64(v)) => {
                    c.typed::<Int64Type>().write_batch(&v, None, None)?;
                }
                None => return Err(ParquetError::General("a column without values".into())),
            }
            c.close()?;
        }
        rg.close()?;
        Ok(())
    }

    pub fn write(
        st: &Stacks,
        samples: impl Write + Send,
        stacks: impl Write + Send,
    ) -> Result<(), ParquetError> {
        let text = |s: &str| ByteArray::from(s.as_bytes().to_vec());
        // Each distinct string once (ByteArray clones share it).
        let runs: Vec<[ByteArray; 3]> = st
            .runs
            .iter()
            .map(|r| [text(&r.host), text(&r.arch), text(&r.name)])
            .collect();
        let events: Vec<Vec<ByteArray>> = st
            .runs
            .iter()
            .map(|r| r.events.iter().map(|e| text(e)).collect())
            .collect();
        let unknown_event = text("unknown");
        let names: Vec<(ByteArray, ByteArray)> = st
            .frames
            .iter()
            .map(|f| (text(&f.name), text(&f.dso)))
            .collect();
        let schema = Arc::new(parquet::schema::parser::parse_message_type(SAMPLES)?);
        let mut w = SerializedFileWriter::new(samples, schema, props())?;
        // The sampled function: the innermost frame.
        let leaf = |s: &SampleRow| -> usize {
            st.stacks[s.stack as usize]
                .frames
                .last()
                .map_or(0, |&f| f as usize)
        };
        for chunk in st.samples.chunks(GROUP) {
            let bytes =
                |f: &dyn Fn(&SampleRow) -> ByteArray| Values::Bytes(chunk.iter().map(f).collect());
            let columns = vec![
                bytes(&|s| runs[s.run as usize][0].clone()),
                bytes(&|s| runs[s.run as usize][1].clone()),
                bytes(&|s| runs[s.run as usize][2].clone()),
                bytes(&|s| {
                    events[s.run as usize]
                        .get(s.event as usize)
                        .unwrap_or(&unknown_event)
                        .clone()
                }),
                Values::I32(chunk.iter().map(|s| s.pid as i32).collect()),
                Values::I32(chunk.iter().map(|s| s.tid as i32).collect()),
                Values::I64(
                    chunk
                        .iter()
                        .map(|s| st.wall_ns(s).min(i64::MAX as u64) as i64)
                        .collect(),
                ),
                Values::I64(
                    chunk
                        .iter()
                        .map(|s| s.period.min(i64::MAX as u64) as i64)
                        .collect(),
                ),
                Values::I32(chunk.iter().map(|s| s.stack as i32).collect()),
                bytes(&|s| names[leaf(s)].0.clone()),
                bytes(&|s| names[leaf(s)].1.clone()),
            ];
            write_group(&mut w, columns)?;
        }
        w.close()?;
        // The stacks table, leaf (depth 0) first.
        let schema = Arc::new(parquet::schema::parser::parse_message_type(STACKS)?);
        let mut w = SerializedFileWriter::new(stacks, schema, props())?;
        let rows: Vec<(i32, i32, usize)> = st
            .stacks
            .iter()
            .enumerate()
            .flat_map(|(id, s)| {
                s.frames
                    .iter()
                    .rev()
                    .enumerate()
                    .map(move |(depth, &f)| (id as i32, depth as i32, f as usize))
            })
            .collect();
        for chunk in rows.chunks(GROUP) {
            let columns = vec![
                Values::I32(chunk.iter().map(|r| r.0).collect()),
                Values::I32(chunk.iter().map(|r| r.1).collect()),
                Values::Bytes(chunk.iter().map(|r| names[r.2].0.clone()).collect()),
                Values::Bytes(chunk.iter().map(|r| names[r.2].1.clone()).collect()),
            ];
            write_group(&mut w, columns)?;
        }
        w.close()?;
        Ok(())
    }
}

/// pprof's profile.proto (github.com/google/pprof, proto/profile.proto), the fields labperf
/// writes, as prost messages.
pub mod pprof {
    use std::collections::HashMap;

    #[derive(Clone, PartialEq, prost::Message)]
    pub struct Profile {
        #[prost(message, repeated, tag = "1")]
        pub sample_type: Vec<ValueType>,
        #[prost(message, repeated, tag = "2")]
        pub sample: Vec<Sample>,
        #[prost(message, repeated, tag = "3")]
        pub mapping: Vec<Mapping>,
        #[prost(message, repeated, tag = "4")]
        pub location: Vec<Location>,
        #[prost(message, repeated, tag = "5")]
        pub function: Vec<Function>,
        #[prost(string, repeated, tag = "6")]
        pub string_table: Vec<String>,
        #[prost(int64, tag = "9")]
        pub time_nanos: i64,
        #[prost(int64, tag = "10")]
        pub duration_nanos: i64,
        #[prost(message, optional, tag = "11")]
        pub period_type: Option<ValueType>,
        #[prost(int64, tag = "12")]
        pub period: i64,
    }

    #[derive(Clone, PartialEq, prost::Message)]
    pub struct ValueType {
        #[prost(int64, tag = "1")]
        pub r#type: i64,
        #[prost(int64, tag = "2")]
        pub unit: i64,
    }

    #[derive(Clone, PartialEq, prost::Message)]
    pub struct Sample {
        #[prost(uint64, repeated, tag = "1")]
        pub location_id: Vec<u64>,
        #[prost(int64, repeated, tag = "2")]
        pub value: Vec<i64>,
        #[prost(message, repeated, tag = "3")]
        pub label: Vec<Label>,
    }

    #[derive(Clone, PartialEq, prost::Message)]
    pub struct Label {
        #[prost(int64, tag = "1")]
        pub key: i64,
        #[prost(int64, tag = "2")]
        pub str: i64,
        #[prost(int64, tag = "3")]
        pub num: i64,
        #[prost(int64, tag = "4")]
        pub num_unit: i64,
    }

    impl Label {
        pub fn str(key: i64, value: i64) -> Label {
            Label {
                key,
                str: value,
                num: 0,
                num_unit: 0,
            }
        }
    }

    #[derive(Clone, PartialEq, prost::Message)]
    pub struct Mapping {
        #[prost(uint64, tag = "1")]
        pub id: u64,
        #[prost(uint64, tag = "2")]
        pub memory_start: u64,
        #[prost(uint64, tag = "3")]
        pub memory_limit: u64,
        #[prost(uint64, tag = "4")]
        pub file_offset: u64,
        #[prost(int64, tag = "5")]
        pub filename: i64,
        #[prost(int64, tag = "6")]
        pub build_id: i64,
        #[prost(bool, tag = "7")]
        pub has_functions: bool,
        #[prost(bool, tag = "8")]
        pub has_filenames: bool,
        #[prost(bool, tag = "9")]
        pub has_line_numbers: bool,
        #[prost(bool, tag = "10")]
        pub has_inline_frames: bool,
    }

    #[derive(Clone, PartialEq, prost::Message)]
    pub struct Location {
        #[prost(uint64, tag = "1")]
        pub id: u64,
        #[prost(uint64, tag = "2")]
        pub mapping_id: u64,
        #[prost(uint64, tag = "3")]
        pub address: u64,
        #[prost(message, repeated, tag = "4")]
        pub line: Vec<Line>,
        #[prost(bool, tag = "5")]
        pub is_folded: bool,
    }

    #[derive(Clone, PartialEq, prost::Message)]
    pub struct Line {
        #[prost(uint64, tag = "1")]
        pub function_id: u64,
        #[prost(int64, tag = "2")]
        pub line: i64,
    }

    #[derive(Clone, PartialEq, prost::Message)]
    pub struct Function {
        #[prost(uint64, tag = "1")]
        pub id: u64,
        #[prost(int64, tag = "2")]
        pub name: i64,
        #[prost(int64, tag = "3")]
        pub system_name: i64,
        #[prost(int64, tag = "4")]
        pub filename: i64,
        #[prost(int64, tag = "5")]
        pub start_line: i64,
    }

    /// The string table: index 0 is "", each string once.
    pub struct Strings {
        pub table: Vec<String>,
        index: HashMap<String, i64>,
    }

    impl Default for Strings {
        fn default() -> Strings {
            Strings {
                table: vec![String::new()],
                index: HashMap::from([(String::new(), 0)]),
            }
        }
    }

    impl Strings {
        pub fn id(&mut self, s: &str) -> i64 {
            if let Some(&i) = self.index.get(s) {
                return i;
            }
            let i = self.table.len() as i64;
            self.table.push(s.to_string());
            self.index.insert(s.to_string(), i);
            i
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn stacks() -> Stacks {
        let f = |n: &str| Frame {
            name: n.into(),
            dso: "/bin/x".into(),
        };
        let st = |frames: Vec<u32>, samples, period| Stack {
            run: 0,
            frames,
            samples,
            period,
        };
        Stacks {
            frames: vec![f("main"), f("a;b c"), f("leaf")],
            stacks: vec![st(vec![0, 2], 7, 70), st(vec![0, 1, 2], 3, 30)],
            runs: vec![Run {
                name: "run1".into(),
                host: "unknown".into(),
                arch: "unknown".into(),
                ..Run::default()
            }],
            total_samples: 10,
            ..Stacks::default()
        }
    }

    #[test]
    fn folded_lines_are_outermost_first_with_separators_replaced() {
        // Weighed by period, as inferno-collapse-perf weighs perf script.
        // A function keeps its spaces, as inferno-collapse-perf keeps them.
        assert_eq!(stacks().folded(), "main;leaf 70\nmain;a_b c;leaf 30\n");
        // A thread's name (no file) has its spaces made `_`, as inferno makes them.
        let mut st = stacks();
        st.frames[0] = Frame {
            name: "my thread".into(),
            dso: String::new(),
        };
        assert_eq!(st.folded(), "my_thread;leaf 70\nmy_thread;a_b c;leaf 30\n");
    }

    #[test]
    fn a_flame_graph_of_periods_too_large_to_add_up_is_drawn_by_samples() {
        // Found by the fuzzer: inferno adds the weights in a usize and overflowed.
        let mut st = stacks();
        for s in &mut st.stacks {
            s.period = u64::MAX - 1;
        }
        let mut svg = Vec::new();
        st.svg(&mut svg).unwrap();
        let svg = String::from_utf8(svg).unwrap();
        assert!(
            svg.contains("<title>leaf (7 samples, 70.00%)</title>"),
            "{svg}"
        );
        // Periods that add up are drawn as periods.
        let mut svg = Vec::new();
        stacks().svg(&mut svg).unwrap();
        assert!(String::from_utf8(svg)
            .unwrap()
            .contains("<title>leaf (70 events, 70.00%)</title>"));
    }

    #[test]
    fn pprof_round_trips_through_prost_with_leaf_first_locations() {
        use prost::Message;
        let mut gz = Vec::new();
        stacks().pprof(&mut gz).unwrap();
        let mut raw = Vec::new();
        std::io::Read::read_to_end(&mut flate2::read::GzDecoder::new(&gz[..]), &mut raw).unwrap();
        let p = pprof::Profile::decode(&raw[..]).unwrap();
        let s = |i: i64| p.string_table[i as usize].as_str();
        assert_eq!(p.string_table[0], "");
        assert_eq!(p.sample.len(), 2);
        assert_eq!(p.sample[1].location_id, [3, 2, 1]);
        assert_eq!(p.sample[1].value, [3, 30]);
        let f = &p.function[p.location[1].line[0].function_id as usize - 1];
        assert_eq!(s(f.name), "a;b c");
        let labels: Vec<(&str, &str)> = p.sample[0]
            .label
            .iter()
            .map(|l| (s(l.key), s(l.str)))
            .collect();
        assert_eq!(
            labels,
            [("host", "unknown"), ("arch", "unknown"), ("run", "run1")]
        );
    }
}
