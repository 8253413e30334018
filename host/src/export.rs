//! `labperf export`: recordings' samples as stacks (the sampled function, then its callers
//! where the recording has callchains) in formats other tools read: folded stacks and SVG
//! flame graphs (via `inferno`), pprof's gzipped `profile.proto` (messages below, with
//! `prost`; no `protoc`), the Firefox Profiler's processed format (`fxprof-processed-profile`)
//! and Parquet tables (the `parquet` crate; schema in [`parquet_schema`]). Several recordings
//! export as one: each sample keeps its recording's host, architecture and run.

use crate::events::{Joined, Names, Select};
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

/// The samples of one recording and one event with one stack; its frames are
/// [`Stacks::path`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Stack {
    /// Index into [`Stacks::runs`].
    pub run: u32,
    /// Index into [`Stacks::events`]' names.
    pub event: u32,
    /// Its frames: `len` ids of [`Stacks::arena`] from `start`.
    start: usize,
    len: u32,
    pub samples: u64,
    /// The sum of the samples' periods.
    pub period: u64,
}

/// A sampled thread of one recording, and the event its samples are of (a thread
/// sampled for several events is one per event: a track of the Firefox profile weighs one
/// event).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Thread {
    /// Index into [`Stacks::runs`].
    pub run: u32,
    pub pid: u32,
    pub tid: u32,
    /// Index into [`Stacks::events`]' names.
    pub event: u32,
}

/// One sample, kept when the format needs each ([`Format::per_sample`]): 32 bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SampleRow {
    /// Index into [`Stacks::threads`].
    pub thread: u32,
    /// Index into [`Stacks::events`]' names.
    pub event: u32,
    /// Index into [`Stacks::stacks`].
    pub stack: u32,
    /// Nanoseconds on the recording's clock.
    pub time: u64,
    pub period: u64,
}

/// Samples aggregated per recording and distinct stack. Each frame (a name and its file) is
/// held once, and a stack is a run of frame ids in one list: memory in proportion to the
/// file's callchain entries, however long the names.
#[derive(Debug, Default)]
pub struct Stacks {
    pub frames: Vec<Frame>,
    /// Most samples first.
    pub stacks: Vec<Stack>,
    /// Every stack's frames, each stack a run of it (see [`Stacks::path`]).
    arena: Vec<u32>,
    /// Every sample in file order, file by file (empty unless asked for).
    pub samples: Vec<SampleRow>,
    /// The threads of [`Stacks::samples`].
    pub threads: Vec<Thread>,
    pub runs: Vec<Run>,
    /// The recordings' event names, joined by name (a stack's `event` indexes them); only
    /// some have samples ([`Stacks::sampled_events`]).
    pub events: Joined,
    pub total_samples: u64,
    pub warnings: Vec<String>,
}

type Fx = std::hash::BuildHasherDefault<crate::fxhash::FxHasher>;

/// A distinct stack of one recording while it is read: its process, its thread's name, its
/// event, and a run of [`Stacks::arena`]: a slot for the thread's name, then its addresses'
/// ids, outermost first (made frame ids in place once every side-band record is known).
#[derive(Debug, Clone, Copy)]
struct Raw {
    pid: u32,
    comm: u32,
    event: u32,
    start: usize,
    len: u32,
    samples: u64,
    period: u64,
}

/// The slot a raw stack keeps for its thread's name.
const ROOT: u32 = u32::MAX;

fn hash_ids(pid: u32, comm: u32, event: u32, ids: &[u32]) -> u64 {
    use std::hash::Hasher;
    let mut h = crate::fxhash::FxHasher::default();
    h.write_u32(pid);
    h.write_u32(comm);
    h.write_u32(event);
    for &i in ids {
        h.write_u32(i);
    }
    h.finish()
}

/// Reads `src` and aggregates its samples per stack (see [`collect_many`]).
pub fn collect(src: &Source, search: Search) -> Result<Stacks, LoadError> {
    collect_many(std::slice::from_ref(src), search, false)
}

/// Reads each recording and aggregates its samples per stack, each address named by the
/// symbolizer; `samples` keeps every sample too. Return addresses (callers) are looked up
/// one byte back, inside their call instruction.
pub fn collect_many(srcs: &[Source], search: Search, samples: bool) -> Result<Stacks, LoadError> {
    collect_events(srcs, search, samples, None)
}

/// [`collect_many`] of the samples of one event (`event`: its name or index), or of every
/// event, each stack keeping its event.
pub fn collect_events(
    srcs: &[Source],
    search: Search,
    samples: bool,
    event: Option<&Select>,
) -> Result<Stacks, LoadError> {
    let mut st = Stacks::default();
    let mut index: HashMap<Frame, u32> = HashMap::new();
    for (n, src) in srcs.iter().enumerate() {
        st.collect_one(n as u32, src, search.clone(), samples, &mut index, event)?;
    }
    let mut frames: Vec<(u32, Frame)> = index.into_iter().map(|(f, i)| (i, f)).collect();
    frames.sort_unstable_by_key(|f| f.0);
    st.frames = frames.into_iter().map(|f| f.1).collect();
    // Most samples first, then by names: the same order on every run.
    let names = |s: &Stack| {
        st.path(s)
            .iter()
            .map(|&i| st.frames[i as usize].name.as_str())
    };
    let mut order: Vec<u32> = (0..st.stacks.len() as u32).collect();
    order.sort_by(|&a, &b| {
        let (a, b) = (&st.stacks[a as usize], &st.stacks[b as usize]);
        b.samples
            .cmp(&a.samples)
            .then_with(|| names(a).cmp(names(b)))
            .then(a.run.cmp(&b.run))
            .then(a.event.cmp(&b.event))
    });
    let mut new_of = vec![0u32; order.len()];
    for (new, &old) in order.iter().enumerate() {
        new_of[old as usize] = new as u32;
    }
    st.stacks = order.iter().map(|&o| st.stacks[o as usize]).collect();
    for s in &mut st.samples {
        s.stack = new_of[s.stack as usize];
    }
    // Each warning once (the unwinder's symbolizer and the namer's find the same files).
    let mut seen = std::collections::HashSet::new();
    st.warnings.retain(|w| seen.insert(w.clone()));
    Ok(st)
}

impl Stacks {
    /// The frames of `s`: indexes into [`Stacks::frames`], outermost (the thread's name)
    /// first.
    pub fn path(&self, s: &Stack) -> &[u32] {
        &self.arena[s.start..s.start + s.len as usize]
    }

    /// Adds a stack of `path` (frame ids, outermost first) of the first event; returns its
    /// index.
    pub fn push(&mut self, run: u32, path: &[u32], samples: u64, period: u64) -> u32 {
        self.stacks.push(Stack {
            run,
            event: 0,
            start: self.arena.len(),
            len: path.len() as u32,
            samples,
            period,
        });
        self.arena.extend_from_slice(path);
        self.total_samples += samples;
        self.stacks.len() as u32 - 1
    }

    fn collect_one(
        &mut self,
        run: u32,
        src: &Source,
        search: Search,
        keep: bool,
        index: &mut HashMap<Frame, u32>,
        event: Option<&Select>,
    ) -> Result<(), LoadError> {
        // Distinct (pid, thread name, addresses) first, numbered: the side-band records a
        // name needs may come after the samples that need it. Each (pid, address) is
        // numbered too (4 bytes an entry), and a stack already seen costs no allocation.
        let mut raw: Vec<Raw> = Vec::new();
        let mut by_content: hashbrown::HashTable<u32> = hashbrown::HashTable::new();
        // Samples without callchains (most recordings), by process, thread's name, event
        // and address: found without hashing a list.
        let mut flat: HashMap<(u32, u32, u32, u64), u32, Fx> = HashMap::default();
        let mut addr_id: HashMap<(u32, u64), u32, Fx> = HashMap::default();
        let mut addrs: Vec<(u32, u64)> = Vec::new();
        let mut probe: Vec<u32> = Vec::new();
        let mut rows: Vec<SampleRow> = Vec::new();
        let mut thread_of: HashMap<(u32, u32, u32), u32, Fx> = HashMap::default();
        // The side band (mappings, kernel functions) is read again once the addresses are
        // known, only what they need (a file may list millions of mappings); forks now.
        let mut forks: Vec<(u32, u32)> = Vec::new();
        // Each thread's name as of the sample (perf script's comm): Comm records name a
        // thread, a fork passes the parent's name on. Names are numbered in `comms`,
        // found by `comm_id` (a file may name a million threads).
        let mut comms: Vec<String> = Vec::new();
        let mut comm_id: HashMap<String, u32> = HashMap::new();
        let mut comm_of: HashMap<u32, u32, Fx> = HashMap::default();
        // `--call-graph dwarf` recordings: every mapping first (a pass of its own), then
        // each sample's user stack unwound as it is read.
        let peek = load::peek(src)?;
        // Each sample's event by name, joined with the other recordings'; those `event`
        // leaves out are not read.
        let events = self.events.of_run(&Names::of(peek.header.as_ref()), event);
        let mut unwind = crate::unwind::Unwind::of(peek.header.as_ref(), peek.header_ext.as_ref());
        let mut usym = Symbolizer::new(search.clone());
        if let Some(u) = unwind.as_mut() {
            usym.recorded_on(src, peek.header.as_ref(), peek.header_ext.as_ref());
            load::stream(src, |r| u.observe(r))?;
        }
        // How far the stacks reach: user stacks as they are unwound, callchains (`-g`)
        // once every mapping is known, from the samples of each distinct stack
        // (`fp_samples`, by stack number).
        let mut quality = crate::quality::Quality::of_header(peek.header.as_ref());
        let mut fp_samples: Vec<u64> = Vec::new();
        let (arena, threads) = (&mut self.arena, &mut self.threads);
        let info = load::stream(src, |r| match r {
            Record::Comm(c) => {
                let next = comms.len() as u32;
                let i = match comm_id.get(&c.comm) {
                    Some(&i) => i,
                    None => {
                        comms.push(c.comm.clone());
                        comm_id.insert(c.comm.clone(), next);
                        next
                    }
                };
                comm_of.insert(c.tid, i);
            }
            Record::Fork(t) => {
                if let Some(&i) = comm_of.get(&t.ptid) {
                    comm_of.insert(t.tid, i);
                }
                if t.pid != t.ppid {
                    forks.push((t.pid, t.ppid));
                }
            }
            Record::Sample(s) => {
                let Some(ev) = events.id(s.event) else {
                    return;
                };
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
                let mut number = |a: u64| -> u32 {
                    let next = addrs.len() as u32;
                    *addr_id.entry((s.pid, a)).or_insert_with(|| {
                        addrs.push((s.pid, a));
                        next
                    })
                };
                let new_raw = |raw: &mut Vec<Raw>, arena: &mut Vec<u32>, ids: &[u32]| -> u32 {
                    raw.push(Raw {
                        pid: s.pid,
                        comm,
                        event: ev,
                        start: arena.len(),
                        len: ids.len() as u32,
                        samples: 0,
                        period: 0,
                    });
                    arena.extend_from_slice(ids);
                    raw.len() as u32 - 1
                };
                let id = if (s.callchain.is_empty() || s.callchain == [s.ip]) && unwound.is_empty()
                {
                    match flat.get(&(s.pid, comm, ev, s.ip)) {
                        Some(&id) => id,
                        None => {
                            let id = new_raw(&mut raw, arena, &[ROOT, number(s.ip)]);
                            flat.insert((s.pid, comm, ev, s.ip), id);
                            id
                        }
                    }
                } else {
                    probe.clear();
                    probe.push(ROOT);
                    let callers = crate::quality::callers(s);
                    probe.extend(unwound.iter().rev().map(|&a| number(a)));
                    probe.extend(callers.iter().rev().map(|&a| number(a)));
                    probe.push(number(s.ip));
                    let h = hash_ids(s.pid, comm, ev, &probe);
                    let same = |&i: &u32| {
                        let r = &raw[i as usize];
                        r.pid == s.pid
                            && r.comm == comm
                            && r.event == ev
                            && arena[r.start..r.start + r.len as usize] == probe[..]
                    };
                    match by_content.find(h, same).copied() {
                        Some(id) => id,
                        None => {
                            let id = new_raw(&mut raw, arena, &probe);
                            by_content.insert_unique(h, id, |&i| {
                                let r = &raw[i as usize];
                                hash_ids(
                                    r.pid,
                                    r.comm,
                                    r.event,
                                    &arena[r.start..r.start + r.len as usize],
                                )
                            });
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
                let e = &mut raw[id as usize];
                e.samples += 1;
                e.period = e.period.saturating_add(s.period);
                if keep {
                    let thread = *thread_of.entry((s.pid, s.tid, ev)).or_insert_with(|| {
                        threads.push(Thread {
                            run,
                            pid: s.pid,
                            tid: s.tid,
                            event: ev,
                        });
                        threads.len() as u32 - 1
                    });
                    rows.push(SampleRow {
                        thread,
                        event: ev,
                        stack: id,
                        time: s.time,
                        period: s.period,
                    });
                }
            }
            _ => {}
        })?;
        drop((by_content, flat, addr_id, probe, comm_id));
        let mut sym = Symbolizer::new(search);
        sym.recorded_on(src, info.header.as_ref(), info.header_ext.as_ref());
        // The mappings and kernel functions the addresses land in; a return address is
        // looked up one byte back.
        let sampled: Vec<(u32, u64)> = addrs
            .iter()
            .flat_map(|&(pid, a)| [(pid, a), (pid, a.saturating_sub(1))])
            .collect();
        for r in crate::sideband::side_band_of(src, &forks, &sampled)? {
            sym.observe(&r.record());
        }
        drop((sampled, forks));
        if let Some(q) = quality.as_mut() {
            if let Some(u) = &unwind {
                q.merge(&u.quality);
                self.warnings.extend(u.warnings.iter().cloned());
            }
            let max = q.max_frames;
            let mut ends = crate::quality::FpEnds::default();
            // Callchains (`-g`) whose sampled function had no frame of its own: the caller
            // the kernel's walk skipped, put back where its call instruction names it.
            let mut chains = crate::fpchain::FpChains::default();
            let mut chain: Vec<u64> = Vec::new();
            for (id, &n) in fp_samples.iter().enumerate() {
                if n == 0 {
                    continue;
                }
                // The stack's addresses innermost first (the arena holds them outermost
                // first, after the root).
                let r = raw[id];
                chain.clear();
                chain.extend(
                    self.arena[r.start + 1..r.start + r.len as usize]
                        .iter()
                        .rev()
                        .map(|&i| addrs[i as usize].1),
                );
                let e = ends.end(&mut sym, r.pid, &chain, max);
                q.add(&e, n);
                let leaf = chains.fix(&mut sym, r.pid, &mut chain);
                q.add_leaf(leaf, n);
                if let crate::fpchain::Leaf::Restored(site) = leaf {
                    // The restored return address goes between the sampled user address
                    // and the next return address: the stack is written again at the
                    // arena's end, one frame longer.
                    let at = 1 + chain.iter().position(|&a| a >> 63 == 0).unwrap_or(0);
                    let (start, len) = (r.start, r.len as usize);
                    let site_id = addrs.len() as u32;
                    addrs.push((r.pid, site));
                    let new_start = self.arena.len();
                    // Innermost-first index `at` is arena index `len - at` after the root.
                    let split = start + len - at;
                    self.arena.extend_from_within(start..split);
                    self.arena.push(site_id);
                    self.arena.extend_from_within(split..start + len);
                    raw[id].start = new_start;
                    raw[id].len += 1;
                }
            }
        }
        drop(fp_samples);
        // In address order (leaf first), so that frame numbering is the same on every run.
        let mut order: Vec<u32> = (0..raw.len() as u32).collect();
        {
            let arena = &self.arena;
            let leaf_first = |r: &Raw| {
                arena[r.start + 1..r.start + r.len as usize]
                    .iter()
                    .rev()
                    .map(|&i| addrs[i as usize].1)
            };
            order.sort_unstable_by(|&a, &b| {
                let (a, b) = (&raw[a as usize], &raw[b as usize]);
                (a.pid, a.comm)
                    .cmp(&(b.pid, b.comm))
                    .then_with(|| leaf_first(a).cmp(leaf_first(b)))
                    .then(a.event.cmp(&b.event))
            });
        }
        // Each (pid and address, leaf or caller) named once: its frames outermost first, a run
        // of `named`. The sampled function is the symbol table's (as every flat report
        // names it, so Self agrees with them); at a return address, the function that holds
        // the call site, then the functions inlined there (from DWARF where the binary has
        // it), innermost last.
        let mut named: Vec<u32> = Vec::new();
        let mut name_of: HashMap<(u32, bool), (u32, u32), Fx> = HashMap::default();
        let mut roots: HashMap<(u32, u32), u32, Fx> = HashMap::default();
        let mut intern = |f: Frame| -> u32 {
            let next = index.len() as u32;
            *index.entry(f).or_insert(next)
        };
        // Raw stacks of one event that name the same frames are one stack (found by
        // content).
        let mut merged: hashbrown::HashTable<u32> = hashbrown::HashTable::new();
        let mut stack_of = vec![0u32; raw.len()];
        let mut path: Vec<u32> = Vec::new();
        for &id in &order {
            let r = raw[id as usize];
            path.clear();
            // The outermost frame: the thread's name (perf's flame graphs start there too).
            // A sample read before its process's name (from another CPU's ring) takes the
            // name the process has at the end.
            path.push(*roots.entry((r.pid, r.comm)).or_insert_with(|| {
                intern(Frame {
                    name: comms
                        .get(r.comm as usize)
                        .or_else(|| comm_of.get(&r.pid).and_then(|&c| comms.get(c as usize)))
                        .cloned()
                        .unwrap_or_else(|| format!("pid {}", r.pid)),
                    dso: String::new(),
                })
            }));
            let n = r.len as usize;
            for k in 1..n {
                let leaf = k == n - 1;
                let a = self.arena[r.start + k];
                let (from, len) = *name_of.entry((a, leaf)).or_insert_with(|| {
                    let from = named.len() as u32;
                    let addr = addrs[a as usize].1;
                    let at = if leaf { addr } else { addr.saturating_sub(1) };
                    let l = sym.resolve(r.pid, at);
                    named.push(intern(Frame {
                        name: label(&l.dso, l.sym.as_deref(), l.vaddr),
                        dso: l.dso.to_string(),
                    }));
                    if !leaf {
                        for name in sym.source(r.pid, at).inlined.iter().rev() {
                            named.push(intern(Frame {
                                name: name.to_string(),
                                dso: l.dso.to_string(),
                            }));
                        }
                    }
                    (from, named.len() as u32 - from)
                });
                path.extend_from_slice(&named[from as usize..(from + len) as usize]);
            }
            // Written over the addresses when as long (no inlined frames), else at the end.
            let start = if path.len() == n {
                self.arena[r.start..r.start + n].copy_from_slice(&path);
                r.start
            } else {
                self.arena.extend_from_slice(&path);
                self.arena.len() - path.len()
            };
            let h = hash_ids(run, 0, r.event, &path);
            let (stacks, arena) = (&mut self.stacks, &self.arena);
            let at = |s: &Stack| &arena[s.start..s.start + s.len as usize];
            let same = |&i: &u32| {
                let s = &stacks[i as usize];
                s.event == r.event && at(s) == &path[..]
            };
            let slot = match merged.find(h, same) {
                Some(&i) => i,
                None => {
                    stacks.push(Stack {
                        run,
                        event: r.event,
                        start,
                        len: path.len() as u32,
                        samples: 0,
                        period: 0,
                    });
                    let i = stacks.len() as u32 - 1;
                    merged.insert_unique(h, i, |&i| {
                        let s = &stacks[i as usize];
                        hash_ids(run, 0, s.event, at(s))
                    });
                    i
                }
            };
            let s = &mut stacks[slot as usize];
            s.samples += r.samples;
            s.period = s.period.saturating_add(r.period);
            self.total_samples += r.samples;
            stack_of[id as usize] = slot;
        }
        drop((raw, order, merged, name_of, named));
        for r in &mut rows {
            r.stack = stack_of[r.stack as usize];
        }
        // Moved, not copied, when it is the first recording's.
        if self.samples.is_empty() {
            self.samples = rows;
        } else {
            self.samples.append(&mut rows);
        }
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

    /// The first event with samples (what the weights count), else the first recording's
    /// first event.
    fn event(&self) -> Option<&str> {
        match self.sampled_events().first() {
            Some(e) => Some(self.events.names[e.0 as usize].as_str()),
            None => self
                .runs
                .first()
                .and_then(|r| r.events.first())
                .map(String::as_str),
        }
    }

    /// Whether the weights are nanoseconds (cpu-clock and task-clock periods).
    fn weights_are_ns(&self) -> bool {
        self.event().is_some_and(crate::events::is_ns)
    }

    /// The events with samples, in the order of the recordings' headers: (index into
    /// [`Stacks::events`], samples, sum of periods).
    pub fn sampled_events(&self) -> Vec<(u32, u64, u64)> {
        let mut t: Vec<(u64, u64)> = vec![(0, 0); self.events.names.len()];
        for s in &self.stacks {
            if let Some(e) = t.get_mut(s.event as usize) {
                e.0 += s.samples;
                e.1 = e.1.saturating_add(s.period);
            }
        }
        t.into_iter()
            .enumerate()
            .filter(|(_, e)| e.0 > 0)
            .map(|(i, e)| (i as u32, e.0, e.1))
            .collect()
    }

    /// A sample's wall-clock time in ns since the Unix epoch: its recording's clock mapped
    /// through the header's start (the clock's own value without a header).
    pub fn wall_ns(&self, s: &SampleRow) -> u64 {
        match self
            .runs
            .get(self.threads[s.thread as usize].run as usize)
            .and_then(|r| r.info.header.as_ref())
        {
            Some(h) => h
                .start_realtime_ns
                .saturating_add(s.time.saturating_sub(h.start_time_ns)),
            None => s.time,
        }
    }
}

/// The most events a pprof profile has a sample type for: each sample holds a value per
/// sample type (a crafted file can name thousands of events).
pub const PPROF_EVENTS: usize = 64;

/// The most stack nodes a Firefox profile holds (about 100 bytes each in the Firefox
/// Profiler's tables that `fxprof-processed-profile` builds).
pub const FIREFOX_NODES: u64 = 300_000;

/// The most threads a Firefox profile shows as their own (each costs about 3 KiB in the
/// Firefox Profiler's tables): the busiest.
pub const FIREFOX_THREADS: usize = 1000;

/// The frame that stands for the frames a Firefox profile leaves out of a deep stack.
const LEFT_OUT: &str = "[deeper frames left out]";

/// The track (thread) of the Firefox profile that stands for the threads beyond the
/// busiest ones.
const OTHERS: u32 = u32::MAX;

/// The name of that track.
const OTHER_THREADS: &str = "[other threads]";

/// The Firefox profile's tracks (the busiest threads, each event apart, and the others of
/// each recording as one, their stacks under `THREAD (EVENT)` with several events), and how
/// deep its stacks go.
struct Firefox {
    /// Per thread of [`Stacks::threads`]: its recording, its own index or [`OTHERS`], and
    /// its event when the recordings sampled several (else 0; in [`OTHERS`], the event
    /// keeps its stacks apart, under their own root).
    tracks: Vec<(u32, u32, u32)>,
    /// The threads in [`OTHERS`].
    others: usize,
    /// The outer frames a stack keeps (`None`: all).
    depth: Option<usize>,
    /// Whether the recordings sampled several events (a track per thread and event).
    several_events: bool,
}

impl Firefox {
    fn of(st: &Stacks) -> Firefox {
        let mut count = vec![0u64; st.threads.len()];
        for s in &st.samples {
            count[s.thread as usize] += 1;
        }
        let several_events = st.sampled_events().len() > 1;
        let mut tracks: Vec<(u32, u32, u32)> = st
            .threads
            .iter()
            .enumerate()
            .map(|(i, t)| (t.run, i as u32, if several_events { t.event } else { 0 }))
            .collect();
        let mut others = 0;
        if tracks.len() > FIREFOX_THREADS {
            let mut by: Vec<u32> = (0..tracks.len() as u32).collect();
            by.sort_unstable_by_key(|&t| (std::cmp::Reverse(count[t as usize]), t));
            for &t in &by[FIREFOX_THREADS..] {
                tracks[t as usize].1 = OTHERS;
            }
            others = tracks.len() - FIREFOX_THREADS;
        }
        let mut ff = Firefox {
            tracks,
            others,
            depth: None,
            several_events,
        };
        ff.depth = ff.depth(st);
        ff
    }

    /// A sample's track: its recording, its thread or [`OTHERS`], and its event (0 with
    /// one event).
    fn track(&self, s: &SampleRow) -> (u32, u32, u32) {
        self.tracks[s.thread as usize]
    }

    /// The frames of a sample's stack in its track: without the thread's name in a
    /// thread's own track (the profiler shows it as the thread), with it in [`OTHERS`].
    fn body<'a>(&self, st: &'a Stacks, s: &SampleRow) -> &'a [u32] {
        let path = st.path(&st.stacks[s.stack as usize]);
        match self.track(s).1 {
            OTHERS => path,
            _ => path.get(1..).unwrap_or_default(),
        }
    }

    /// How many outer frames of a stack the profile keeps so that its stack tables (a tree
    /// of each track's stacks, a node per distinct prefix) have at most about
    /// [`FIREFOX_NODES`] nodes; `None`: all. Counted from each track's distinct stacks in
    /// order: a stack adds the frames it does not share with the one before.
    fn depth(&self, st: &Stacks) -> Option<usize> {
        // A sample of each (track, stack).
        let mut pairs: Vec<((u32, u32, u32), u32)> = st
            .samples
            .iter()
            .enumerate()
            .map(|(i, s)| (self.track(s), i as u32))
            .collect();
        pairs.sort_unstable_by_key(|p| (p.0, st.samples[p.1 as usize].stack));
        pairs.dedup_by_key(|p| (p.0, st.samples[p.1 as usize].stack));
        let body = |p: &((u32, u32, u32), u32)| self.body(st, &st.samples[p.1 as usize]);
        pairs.sort_unstable_by(|a, b| a.0.cmp(&b.0).then_with(|| body(a).cmp(body(b))));
        // Each stack's length, and the frames it shares with the one before.
        let shape: Vec<(u32, u32)> = pairs
            .iter()
            .enumerate()
            .map(|(k, p)| {
                let b = body(p);
                let shared = match k.checked_sub(1).map(|j| &pairs[j]) {
                    Some(q) if q.0 == p.0 => {
                        b.iter().zip(body(q)).take_while(|(x, y)| x == y).count()
                    }
                    _ => 0,
                };
                (b.len() as u32, shared as u32)
            })
            .collect();
        drop(pairs);
        // Cut at d: the outer d frames, then the mark and the sampled function.
        let nodes = |d: u32| -> u64 {
            shape
                .iter()
                .map(|&(len, shared)| {
                    u64::from(len.min(d) - shared.min(d)) + 2 * u64::from(len > d)
                })
                .sum()
        };
        let max = shape.iter().map(|s| s.0).max().unwrap_or(0);
        if nodes(max) <= FIREFOX_NODES {
            return None;
        }
        let (mut lo, mut hi) = (1u32, max);
        while lo + 1 < hi {
            let mid = lo + (hi - lo) / 2;
            if nodes(mid) <= FIREFOX_NODES {
                lo = mid;
            } else {
                hi = mid;
            }
        }
        Some(lo as usize)
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

/// A frame's name as one folded-stack element: the one place a name becomes folded text.
/// `;` separates frames and a newline lines, so neither may appear in it: control
/// characters (newlines included) are escaped (`\n`) and `;` made `_`. As
/// `inferno-collapse-perf` writes them, a function's spaces stay (readers split the count off
/// at the last space: `<A as B>::next`) and a thread's name (`thread`) has its spaces made
/// `_`; a last word that reads as a number has its space made `_` too (`f 42 7` would read
/// as a differential line of counts 42 and 7).
pub fn folded_name(name: &str, thread: bool) -> String {
    let mut s: String = crate::text::show(name)
        .chars()
        .map(|c| {
            if c == ';' || (thread && c == ' ') {
                '_'
            } else {
                c
            }
        })
        .collect();
    if let Some(i) = s.rfind(' ') {
        if s[i + 1..].bytes().all(|b| b.is_ascii_digit() || b == b'.') {
            s.replace_range(i..=i, "_");
        }
    }
    s
}

impl Stacks {
    /// Each frame's name as folded text ([`folded_name`]).
    fn folded_names(&self) -> Vec<String> {
        self.frames
            .iter()
            .map(|f| folded_name(&f.name, f.dso.is_empty()))
            .collect()
    }

    /// The distinct paths, recordings merged, in the order they first come, each with the
    /// sum of `weight` over its stacks (a stack's period, or its samples); of the stacks of
    /// one event when `event` says which (index into [`Stacks::events`]).
    fn lines(&self, event: Option<u32>, weight: impl Fn(&Stack) -> u64) -> Vec<(&[u32], u64)> {
        let mut line_of: HashMap<&[u32], usize> = HashMap::new();
        let mut lines: Vec<(&[u32], u64)> = Vec::new();
        for s in &self.stacks {
            if event.is_some_and(|e| e != s.event) {
                continue;
            }
            let path = self.path(s);
            match line_of.get(path) {
                Some(&i) => lines[i].1 = lines[i].1.saturating_add(weight(s)),
                None => {
                    line_of.insert(path, lines.len());
                    lines.push((path, weight(s)));
                }
            }
        }
        lines
    }

    /// Writes folded stacks to `w`, one line per distinct stack (recordings merged), as it
    /// goes: `thread;outer;…;leaf PERIOD` (the sum of the samples' periods, as
    /// `perf script | inferno-collapse-perf` weighs them).
    pub fn write_folded(&self, mut w: impl Write) -> std::io::Result<()> {
        let names = self.folded_names();
        for (path, n) in self.lines(None, |s| s.period) {
            for (k, &f) in path.iter().enumerate() {
                if k > 0 {
                    w.write_all(b";")?;
                }
                w.write_all(names[f as usize].as_bytes())?;
            }
            writeln!(w, " {n}")?;
        }
        Ok(())
    }

    /// The folded stacks of [`Stacks::write_folded`] as one string.
    pub fn folded(&self) -> String {
        let mut v = Vec::new();
        self.write_folded(&mut v).expect("writing to memory");
        String::from_utf8(v).expect("folded names are text")
    }

    /// An SVG flame graph of the folded stacks, titled with the recorded command, drawn
    /// within [`crate::flame::BUDGET`]; returns a note when narrow frames had to be left out.
    pub fn svg(&self, w: impl Write) -> std::io::Result<Option<String>> {
        self.svg_of(None, w)
    }

    /// [`Stacks::svg`] of the stacks of one event (`Some`: its index into
    /// [`Stacks::events`]; its periods never add up with another's), or of all.
    pub fn svg_of(&self, event: Option<u32>, mut w: impl Write) -> std::io::Result<Option<String>> {
        let mut o = inferno::flamegraph::Options::default();
        let samples: u64 = match event {
            None => self.total_samples,
            Some(e) => self
                .stacks
                .iter()
                .filter(|s| s.event == e)
                .map(|s| s.samples)
                .sum(),
        };
        let of_event = event
            .map(|e| {
                format!(
                    ", event '{}'",
                    crate::text::show_text(&self.events.names[e as usize])
                )
            })
            .unwrap_or_default();
        o.title = match (self.runs.len(), self.header()) {
            (1, Some(h)) => format!(
                "labperf: {} on {} ({samples} samples{of_event})",
                crate::text::show_text(&short_command(&h.command)),
                crate::text::show_text(&h.hostname),
            ),
            (n, _) if n > 1 => {
                format!("labperf: {n} recordings ({samples} samples{of_event})")
            }
            _ => format!("labperf ({samples} samples{of_event})"),
        };
        let names = self.folded_names();
        // By period; by samples when the periods, as inferno reads them from the lines, do
        // not add up in a usize (a damaged or crafted file), or are all 0.
        let periods = self.lines(event, |s| s.period);
        let mut drawn = Err(crate::flame::Error::Overflow);
        if periods.iter().any(|l| l.1 > 0) {
            let ns = match event {
                Some(e) => crate::events::is_ns(&self.events.names[e as usize]),
                None => self.weights_are_ns(),
            };
            o.count_name = if ns { "ns" } else { "events" }.into();
            drawn = crate::flame::draw(&mut o, &names, &periods, &mut w);
        }
        drop(periods);
        if let Err(crate::flame::Error::Overflow) = drawn {
            o.count_name = "samples".into();
            drawn = crate::flame::draw(&mut o, &names, &self.lines(event, |s| s.samples), &mut w);
        }
        match drawn {
            Ok(None) => Ok(None),
            Ok(Some(width)) => Ok(Some(format!(
                "note: the flame graph draws frames of at least {width}% of the {} only (a graph of every frame would be too large)",
                o.count_name
            ))),
            Err(crate::flame::Error::Io(e)) => Err(e),
            Err(crate::flame::Error::Overflow) => Err(std::io::Error::new(
                std::io::ErrorKind::InvalidData,
                "the samples do not add up",
            )),
        }
    }
    /// pprof's profile.proto, gzipped. Values: samples, then the sum of periods of each
    /// event, a sample type per event named after it (`cpu-clock/nanoseconds`,
    /// `page-faults/count`: nanoseconds for cpu-clock and task-clock, events otherwise), a
    /// stack's samples counting in its own event's only. Every sample carries its
    /// recording's labels `host`, `arch` and `run`, and with several events `event`.
    pub fn pprof(&self, w: impl Write) -> std::io::Result<()> {
        use pprof::*;
        let mut strings = Strings::default();
        let sampled = self.sampled_events();
        if sampled.len() > PPROF_EVENTS {
            return Err(std::io::Error::new(
                std::io::ErrorKind::InvalidInput,
                format!(
                    "the recordings hold samples of {} events, and pprof gives every sample a value for each: export at most {PPROF_EVENTS} at once (--event NAME keeps one)",
                    sampled.len()
                ),
            ));
        }
        // The value index of each event's periods (1 + its place among the sampled ones).
        let mut value_of: HashMap<u32, usize> = HashMap::new();
        let mut sample_type = vec![ValueType {
            r#type: strings.id("samples"),
            unit: strings.id("count"),
        }];
        for (k, &(e, _, _)) in sampled.iter().enumerate() {
            let name = &self.events.names[e as usize];
            value_of.insert(e, k + 1);
            sample_type.push(ValueType {
                r#type: strings.id(name),
                unit: strings.id(crate::events::unit(name)),
            });
        }
        if sampled.is_empty() {
            let event = self.event().unwrap_or("samples").to_string();
            sample_type.push(ValueType {
                r#type: strings.id(&event),
                unit: strings.id(crate::events::unit(&event)),
            });
        }
        let period_type = sample_type[1].clone();
        let several = sampled.len() > 1;
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
        let event_key = strings.id("event");
        let event_labels: Vec<i64> = self.events.names.iter().map(|n| strings.id(n)).collect();
        let header = self.header();
        // The samples are written one by one between the sample types (field 1) and the
        // tables (fields 3 on): the fields in order, and never the whole profile in memory.
        let sample_type_len = sample_type.len();
        let head = Profile {
            sample_type,
            ..Profile::default()
        };
        let tail = Profile {
            mapping: mappings,
            location,
            function,
            string_table: strings.table,
            time_nanos: header.map_or(0, |h| h.start_realtime_ns.min(i64::MAX as u64) as i64),
            duration_nanos: 0,
            default_sample_type: period_type.r#type,
            period_type: Some(period_type),
            // The fixed period of the first sampled event (none with a frequency: flag
            // bit 10).
            period: header
                .and_then(|h| {
                    let name = self.event()?;
                    h.events.iter().find(|e| e.name == name)
                })
                .filter(|e| e.attr.flags & (1 << 10) == 0)
                .map_or(0, |e| {
                    e.attr.sample_period_or_freq.min(i64::MAX as u64) as i64
                }),
            ..Profile::default()
        };
        // Gzip's fastest level, as Go's runtime/pprof writes profiles.
        let mut gz = flate2::write::GzEncoder::new(w, flate2::Compression::fast());
        gz.write_all(&prost::Message::encode_to_vec(&head))?;
        let mut buf = Vec::new();
        for s in &self.stacks {
            let mut value = vec![0i64; sample_type_len];
            value[0] = s.samples as i64;
            value[value_of.get(&s.event).copied().unwrap_or(1)] =
                s.period.min(i64::MAX as u64) as i64;
            let mut label = labels.get(s.run as usize).cloned().unwrap_or_default();
            if several {
                label.push(Label::str(event_key, event_labels[s.event as usize]));
            }
            let sample = Sample {
                // Leaf first.
                location_id: self.path(s).iter().rev().map(|&i| i as u64 + 1).collect(),
                value,
                label,
            };
            buf.clear();
            prost::encoding::message::encode(2, &sample, &mut buf);
            gz.write_all(&buf)?;
        }
        gz.write_all(&prost::Message::encode_to_vec(&tail))?;
        gz.finish()?;
        Ok(())
    }

    /// The Firefox Profiler's processed profile (needs [`Stacks::samples`]): a process per
    /// recording and pid, a thread per tid, each sample at its wall-clock time with its
    /// stack's function names embedded (no symbol server needed). For cpu-clock and
    /// task-clock the sample's period is its CPU time. With several events, a process per
    /// pid and event, its threads named `THREAD (EVENT)`: a track's samples are of one
    /// event. Its tables cost about 3 KiB a thread
    /// and 100 bytes a stack node: the [`FIREFOX_THREADS`] busiest threads are their own,
    /// the others one thread per recording, `[other threads]` (each stack under its
    /// thread's name); and it holds at most about [`FIREFOX_NODES`] stack nodes (deeper
    /// stacks keep their outermost frames, then `[deeper frames left out]` and the sampled
    /// function). Returns a note when either had to be done.
    pub fn firefox(&self, w: impl Write) -> serde_json::Result<Option<String>> {
        use fxprof_processed_profile as fx;
        let ff = Firefox::of(self);
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
        let mut processes: HashMap<(u32, u32, u32), fx::ProcessHandle> = HashMap::new();
        let mut threads: HashMap<(u32, u32, u32), fx::ThreadHandle> = HashMap::new();
        let mut handles: HashMap<(fx::ThreadHandle, u32), Option<fx::StackHandle>> = HashMap::new();
        let mut strings: HashMap<(u32, u32), fx::StringHandle> = HashMap::new();
        // Each thread's samples in time order, threads by recording, pid, tid and event.
        let mut order: Vec<u32> = (0..self.samples.len() as u32).collect();
        order.sort_by_key(|&i| {
            let s = &self.samples[i as usize];
            let t = self.threads[s.thread as usize];
            match ff.track(s) {
                (_, OTHERS, _) => (t.run, OTHERS, OTHERS, 0, s.time),
                (_, _, ev) => (t.run, t.pid, t.tid, ev, s.time),
            }
        });
        let category = fx::CategoryHandle::OTHER.into();
        let several = self.runs.len() > 1;
        for i in order {
            let s = &self.samples[i as usize];
            let at = fx::Timestamp::from_nanos_since_reference(self.wall_ns(s) - reference);
            let path = self.path(&self.stacks[s.stack as usize]);
            let (run, key, ev) = ff.track(s);
            let t = self.threads[s.thread as usize];
            let own = key != OTHERS;
            // One [other threads] track per recording, whatever the events.
            let ev = if own { ev } else { 0 };
            let thread_name = if own {
                path.first()
                    .map_or("", |&i| self.frames[i as usize].name.as_str())
            } else {
                OTHER_THREADS
            };
            // With several events, each its own process track (`prog (page-faults)`): a
            // thread's samples, and their weights, are of one event.
            let event = &self.events.names[s.event as usize];
            let pid = if own { t.pid } else { 0 };
            let process = *processes
                .entry((run, if own { pid } else { OTHERS }, ev))
                .or_insert_with(|| {
                    let r = &self.runs[run as usize];
                    let mut name = if several {
                        format!("{thread_name} ({}, {})", r.host, r.name)
                    } else {
                        thread_name.to_string()
                    };
                    if ff.several_events {
                        name = format!("{name} ({event})");
                    }
                    p.add_process(&name, pid, at)
                });
            let thread = *threads.entry((run, key, ev)).or_insert_with(|| {
                let tid = if own { t.tid } else { 0 };
                let th = p.add_thread(process, tid, at, tid == pid);
                if ff.several_events {
                    p.set_thread_name(th, &format!("{thread_name} ({event})"));
                } else {
                    p.set_thread_name(th, thread_name);
                }
                th
            });
            let handle = *handles.entry((thread, s.stack)).or_insert_with(|| {
                let body = ff.body(self, s);
                let (outer, leaf) = match ff.depth {
                    Some(d) if body.len() > d => (&body[..d], body.last()),
                    _ => (body, None),
                };
                // Each name interned once (a deep stack names the same functions again);
                // with several events, a stack of [other threads] is under `THREAD (EVENT)`.
                let mut label = |frame: u32, of_event: Option<u32>| {
                    let key = (frame, of_event.unwrap_or(u32::MAX));
                    let name = *strings.entry(key).or_insert_with(|| {
                        let name = self
                            .frames
                            .get(frame as usize)
                            .map_or(LEFT_OUT, |f| f.name.as_str());
                        match of_event {
                            Some(e) => p.intern_string(&format!(
                                "{name} ({})",
                                self.events.names[e as usize]
                            )),
                            None => p.intern_string(name),
                        }
                    });
                    fx::FrameInfo {
                        frame: fx::Frame::Label(name),
                        category_pair: category,
                        flags: fx::FrameFlags::empty(),
                    }
                };
                let root_event = (!own && ff.several_events).then_some(s.event);
                let mut frames: Vec<fx::FrameInfo> = outer
                    .iter()
                    .enumerate()
                    .map(|(k, &i)| label(i, if k == 0 { root_event } else { None }))
                    .collect();
                if let Some(&leaf) = leaf {
                    frames.push(label(u32::MAX, None));
                    frames.push(label(leaf, None));
                }
                p.intern_stack_frames(thread, frames.into_iter())
            });
            let cpu = if crate::events::is_ns(event) {
                fx::CpuDelta::from_nanos(s.period)
            } else {
                fx::CpuDelta::ZERO
            };
            p.add_sample(thread, at, handle, cpu, 1);
        }
        serde_json::to_writer(w, &p)?;
        let mut notes = Vec::new();
        if ff.others > 0 {
            notes.push(format!(
                "note: the Firefox profile shows the {FIREFOX_THREADS} busiest threads; the samples of the {} others are one thread per recording, {OTHER_THREADS}, each stack under its thread's name",
                ff.others
            ));
        }
        if let Some(d) = ff.depth {
            notes.push(format!(
                "note: the Firefox profile keeps the {d} outermost frames of deeper stacks, then {LEFT_OUT} and the sampled function (every frame would make its stack tables too large)"
            ));
        }
        Ok((!notes.is_empty()).then(|| notes.join("\n")))
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
        // Each sample's event by name, as reports name it (joined across recordings).
        let events: Vec<ByteArray> = st.events.names.iter().map(|e| text(e)).collect();
        let unknown_event = text(crate::events::UNKNOWN);
        let names: Vec<(ByteArray, ByteArray)> = st
            .frames
            .iter()
            .map(|f| (text(&f.name), text(&f.dso)))
            .collect();
        let schema = Arc::new(parquet::schema::parser::parse_message_type(SAMPLES)?);
        let mut w = SerializedFileWriter::new(samples, schema, props())?;
        // The sampled function: the innermost frame.
        let leaf = |s: &SampleRow| -> usize {
            st.path(&st.stacks[s.stack as usize])
                .last()
                .map_or(0, |&f| f as usize)
        };
        let th = |s: &SampleRow| st.threads[s.thread as usize];
        for chunk in st.samples.chunks(GROUP) {
            let bytes =
                |f: &dyn Fn(&SampleRow) -> ByteArray| Values::Bytes(chunk.iter().map(f).collect());
            let columns = vec![
                bytes(&|s| runs[th(s).run as usize][0].clone()),
                bytes(&|s| runs[th(s).run as usize][1].clone()),
                bytes(&|s| runs[th(s).run as usize][2].clone()),
                bytes(&|s| {
                    events
                        .get(s.event as usize)
                        .unwrap_or(&unknown_event)
                        .clone()
                }),
                Values::I32(chunk.iter().map(|s| th(s).pid as i32).collect()),
                Values::I32(chunk.iter().map(|s| th(s).tid as i32).collect()),
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
        // The stacks table, leaf (depth 0) first, a row group at a time.
        let schema = Arc::new(parquet::schema::parser::parse_message_type(STACKS)?);
        let mut w = SerializedFileWriter::new(stacks, schema, props())?;
        let mut rows: Vec<(i32, i32, usize)> = Vec::with_capacity(GROUP);
        let flush = |w: &mut SerializedFileWriter<_>, rows: &mut Vec<(i32, i32, usize)>| {
            let columns = vec![
                Values::I32(rows.iter().map(|r| r.0).collect()),
                Values::I32(rows.iter().map(|r| r.1).collect()),
                Values::Bytes(rows.iter().map(|r| names[r.2].0.clone()).collect()),
                Values::Bytes(rows.iter().map(|r| names[r.2].1.clone()).collect()),
            ];
            rows.clear();
            write_group(w, columns)
        };
        for (id, s) in st.stacks.iter().enumerate() {
            for (depth, &f) in st.path(s).iter().rev().enumerate() {
                rows.push((id as i32, depth as i32, f as usize));
                if rows.len() == GROUP {
                    flush(&mut w, &mut rows)?;
                }
            }
        }
        if !rows.is_empty() {
            flush(&mut w, &mut rows)?;
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
        /// The sample type a viewer shows first (a string id): the first event's, as
        /// `period_type`; without it `go tool pprof` opens on the last one.
        #[prost(int64, tag = "14")]
        pub default_sample_type: i64,
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
        let mut st = Stacks {
            frames: vec![f("main"), f("a;b c"), f("leaf")],
            runs: vec![Run {
                name: "run1".into(),
                host: "unknown".into(),
                arch: "unknown".into(),
                ..Run::default()
            }],
            ..Stacks::default()
        };
        st.push(0, &[0, 2], 7, 70);
        st.push(0, &[0, 1, 2], 3, 30);
        st
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
    fn a_folded_name_is_one_element_of_one_line() {
        // Control characters escaped, `;` made `_`: one line, one frame.
        assert_eq!(folded_name("a\nb;c\td\r", false), "a\\nb_c\\td\\r");
        // A last word that reads as a count is joined to the name.
        assert_eq!(
            folded_name("f 18446744073709551615", false),
            "f_18446744073709551615"
        );
        assert_eq!(folded_name("f 1.5", false), "f_1.5");
        assert_eq!(folded_name("f ", false), "f_");
        // Other spaces stay in a function, as inferno-collapse-perf keeps them.
        assert_eq!(folded_name("<A as B>::next", false), "<A as B>::next");
        assert_eq!(folded_name("operator new 2x", false), "operator new 2x");
        assert_eq!(folded_name("my thread 7", true), "my_thread_7");
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
