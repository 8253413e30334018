//! The one stack model: samples per recording, event and distinct stack (the sampled
//! function, then its callers), each frame (a name and its file) held once and a stack a run
//! of frame ids in one list ([`StackTable`]); how a sample's stack is read (its callchain,
//! or its user stack unwound in `--call-graph dwarf` recordings: [`UserStacks`],
//! [`return_addresses`]) and named (the sampled function, then each return address looked
//! up one byte back: [`call_site`]). `report --children` and `--call-graph`, the callers of
//! metrics and TopDown rows, every export and the HTML flame graphs read stacks here.

use crate::record::events::{Joined, Names, RunEvents, Select};
use crate::record::filter::{Filter, Window};
use crate::record::load::{self, LoadError, Peek, Source};
use crate::symbolize::executable::Executable;
use crate::symbolize::facts::Run;
use crate::symbolize::quality::Quality;
use crate::symbolize::symbols::{label, Search, Symbolizer};
use crate::symbolize::unwind::Unwind;
use labperf_common::{Record, Sample};
use std::collections::HashMap;

/// One function of a stack.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Frame {
    /// The function, or `file+0xADDRESS` when unknown (see [`label`]); the outermost frame
    /// of a stack is its thread's name, with an empty `dso`.
    pub name: String,
    /// The mapped file.
    pub dso: String,
}

/// The samples of one recording and one event with one stack; its frames are
/// [`StackTable::path`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Stack {
    /// Index into [`StackTable::runs`].
    pub run: u32,
    /// Index into [`StackTable::events`]' names.
    pub event: u32,
    /// Its frames: `len` ids of [`StackTable::arena`] from `start`.
    start: usize,
    len: u32,
    pub samples: u64,
    /// The sum of the samples' periods.
    pub period: u64,
    /// How many frames at the end of the path DWARF says were inlined into the sampled
    /// function at the sampled address: the sampled function, where Self goes (as perf's
    /// Self goes to the symbol), is the frame before them ([`StackTable::self_frame`]).
    pub inlined: u16,
}

/// A sampled thread of one recording, and the event its samples are of (a thread
/// sampled for several events is one per event: a track of the Firefox profile weighs one
/// event).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Thread {
    /// Index into [`StackTable::runs`].
    pub run: u32,
    pub pid: u32,
    pub tid: u32,
    /// Index into [`StackTable::events`]' names.
    pub event: u32,
}

/// One sample, kept when asked for (the exports that need each sample): 32 bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SampleRow {
    /// Index into [`StackTable::threads`].
    pub thread: u32,
    /// Index into [`StackTable::events`]' names.
    pub event: u32,
    /// Index into [`StackTable::stacks`].
    pub stack: u32,
    /// Nanoseconds on the recording's clock.
    pub time: u64,
    pub period: u64,
}

/// Samples aggregated per recording and distinct stack. Each frame (a name and its file) is
/// held once, and a stack is a run of frame ids in one list: memory in proportion to the
/// file's callchain entries, however long the names.
#[derive(Debug, Default)]
pub struct StackTable {
    pub frames: Vec<Frame>,
    /// Each frame's occurrences: bit 0 seen inlined (DWARF's inlined function at an
    /// address), bit 1 seen as a function of its own ([`StackTable::only_inlined`]).
    kinds: Vec<u8>,
    /// Most samples first.
    pub stacks: Vec<Stack>,
    /// Every stack's frames, each stack a run of it (see [`StackTable::path`]).
    arena: Vec<u32>,
    /// Every sample in file order, file by file (empty unless asked for).
    pub samples: Vec<SampleRow>,
    /// The threads of [`StackTable::samples`].
    pub threads: Vec<Thread>,
    pub runs: Vec<Run>,
    /// The recordings' event names, joined by name (a stack's `event` indexes them); only
    /// some have samples ([`StackTable::sampled_events`]).
    pub events: Joined,
    pub total_samples: u64,
    pub warnings: Vec<String>,
    /// What the report filters left (`None` unfiltered).
    pub filtered: Option<Filtered>,
}

/// What the filters of a [`StackTable`] kept of its recordings' samples.
#[derive(Debug, Default, Clone)]
pub struct Filtered {
    /// Samples of the events read, all of them, and those in `--time`'s window.
    pub all: u64,
    pub in_time: u64,
    /// Per event ([`StackTable::events`]' index), the samples and period in the window
    /// before the other filters: perf's `--percentage absolute` weighs rows against them.
    pub base: Vec<(u64, u64)>,
}

type Fx = std::hash::BuildHasherDefault<crate::fxhash::FxHasher>;

/// The user stacks of a `--call-graph dwarf` recording: the unwinder, which knows every
/// mapping before the first sample (read in a pass of its own, samples cut to their head), and the symbolizer it reads
/// binaries with.
pub struct UserStacks {
    pub unwind: Unwind,
    sym: Symbolizer,
}

impl UserStacks {
    /// `src`'s, when its events take user stacks (`peek`: its header); `None` otherwise.
    /// Reads `src` once for its mappings.
    pub fn of(src: &Source, peek: &Peek, search: &Search) -> Result<Option<UserStacks>, LoadError> {
        let Some(mut unwind) = Unwind::of(peek.header.as_ref(), peek.header_ext.as_ref()) else {
            return Ok(None);
        };
        let mut sym = Symbolizer::new(search.clone());
        sym.recorded_on(src, peek.header.as_ref(), peek.header_ext.as_ref());
        load::stream_side_band(src, |r| unwind.observe(r))?;
        Ok(Some(UserStacks { unwind, sym }))
    }
}

/// The addresses `s`'s sampled function returns to, innermost first, into `out`: its
/// callchain's ([`crate::symbolize::quality::callers`]: the leading sampled address stripped, ended
/// where the kernel's user walk read a word that is no return address), then, with `user`,
/// its user stack unwound (`--call-graph dwarf`). Empty for a sample without a stack or in
/// a thread's first function.
pub fn return_addresses(user: Option<&mut UserStacks>, s: &Sample, out: &mut Vec<u64>) {
    out.clear();
    out.extend_from_slice(crate::symbolize::quality::callers(s));
    if let (Some(u), Some(_)) = (user, &s.user_stack) {
        out.extend(u.unwind.unwind(&mut u.sym, s));
    }
}

/// The sampled function at `ip` of process `pid`: the symbol table's (as every flat report
/// names it, so that Self agrees with them).
pub fn sampled_frame(sym: &mut Symbolizer, pid: u32, ip: u64) -> Frame {
    let l = sym.resolve(pid, ip);
    Frame {
        name: label(&l.dso, l.sym.as_deref(), l.vaddr),
        dso: l.dso.to_string(),
    }
}

/// The frames at return address `ret` of process `pid`, looked up one byte back (inside
/// its call instruction): the function that holds the call site, then the functions inlined
/// there (from DWARF where the binary has it), innermost last.
pub fn call_site(sym: &mut Symbolizer, pid: u32, ret: u64) -> Vec<Frame> {
    frames_with_inlined(sym, pid, ret.saturating_sub(1))
}

/// The frames sampled at `ip` of process `pid`: the symbol table's function (as every flat
/// report names it, so that Self agrees with them), then the functions DWARF says were
/// inlined there, innermost last (perf's callchains expand them at the sampled address
/// too).
pub fn sampled_frames(sym: &mut Symbolizer, pid: u32, ip: u64) -> Vec<Frame> {
    frames_with_inlined(sym, pid, ip)
}

/// The function at `at` and the functions inlined there (none with `--no-inline`).
fn frames_with_inlined(sym: &mut Symbolizer, pid: u32, at: u64) -> Vec<Frame> {
    let l = sym.resolve(pid, at);
    let mut frames = vec![Frame {
        name: label(&l.dso, l.sym.as_deref(), l.vaddr),
        dso: l.dso.to_string(),
    }];
    if sym.search.no_inline {
        return frames;
    }
    for name in sym.source(pid, at).inlined.iter().rev() {
        frames.push(Frame {
            name: name.to_string(),
            dso: l.dso.to_string(),
        });
    }
    frames
}

/// A distinct stack of one recording while it is read: its process, its thread's name, its
/// event, and a run of [`StackTable::arena`]: a slot for the thread's name, then its
/// addresses' ids, outermost first (made frame ids in place once every side-band record is
/// known).
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

/// Adds a raw stack of `ids` (the arena's run of it) for process `pid`, thread's name
/// `comm` and event `event`; returns its index.
fn push_raw(
    raw: &mut Vec<Raw>,
    arena: &mut Vec<u32>,
    (pid, comm, event): (u32, u32, u32),
    ids: &[u32],
) -> u32 {
    raw.push(Raw {
        pid,
        comm,
        event,
        start: arena.len(),
        len: ids.len() as u32,
        samples: 0,
        period: 0,
    });
    arena.extend_from_slice(ids);
    raw.len() as u32 - 1
}

/// Reads `src` and aggregates its samples per stack (see [`collect_many`]).
pub fn collect(src: &Source, search: Search) -> Result<StackTable, LoadError> {
    collect_many(std::slice::from_ref(src), search, false)
}

/// Reads each recording and aggregates its samples per stack, each address named by the
/// symbolizer; `samples` keeps every sample too. Return addresses (callers) are looked up
/// one byte back, inside their call instruction.
pub fn collect_many(
    srcs: &[Source],
    search: Search,
    samples: bool,
) -> Result<StackTable, LoadError> {
    collect_events(srcs, search, samples, None)
}

/// [`collect_many`] of the samples of one event (`event`: its name or index), or of every
/// event, each stack keeping its event.
pub fn collect_events(
    srcs: &[Source],
    search: Search,
    samples: bool,
    event: Option<&Select>,
) -> Result<StackTable, LoadError> {
    collect_filtered(srcs, search, samples, event, &Filter::default(), None)
}

/// [`collect_events`] of the samples `filter` keeps (`--time` and the threads as they are
/// read, the thread's name, the sampled function and its file once named), each stack
/// cut to its `max_stack` innermost addresses (perf's `--max-stack`).
pub fn collect_filtered(
    srcs: &[Source],
    search: Search,
    samples: bool,
    event: Option<&Select>,
    filter: &Filter,
    max_stack: Option<usize>,
) -> Result<StackTable, LoadError> {
    let mut st = StackTable::default();
    if filter.is_active() {
        st.filtered = Some(Filtered::default());
    }
    let mut index: HashMap<Frame, u32> = HashMap::new();
    for (n, src) in srcs.iter().enumerate() {
        let narrow = Narrow {
            filter,
            window: match &filter.time {
                Some(t) => Some(t.window(src)?),
                None => None,
            },
            max_stack,
        };
        st.collect_one(
            n as u32,
            src,
            search.clone(),
            samples,
            &mut index,
            event,
            &narrow,
        )?;
    }
    let mut frames: Vec<(u32, Frame)> = index.into_iter().map(|(f, i)| (i, f)).collect();
    frames.sort_unstable_by_key(|f| f.0);
    st.frames = frames.into_iter().map(|f| f.1).collect();
    // The filters of names: the thread's (each stack's root), the sampled function's and
    // its file's.
    let keep: Vec<bool> = st
        .stacks
        .iter()
        .map(|s| {
            if !filter.by_name() {
                return true;
            }
            let root = st
                .path(s)
                .first()
                .map(|&f| st.frames[f as usize].name.as_str());
            let leaf = st.self_frame(s).map(|f| &st.frames[f as usize]);
            filter.keeps_comm(root.unwrap_or_default())
                && filter.keeps_dso(leaf.map_or("", |f| f.dso.as_str()))
                && filter.keeps_symbol(leaf.map_or("", |f| f.name.as_str()))
        })
        .collect();
    if let Some(f) = st.filtered.as_mut() {
        for s in &st.stacks {
            if f.base.len() <= s.event as usize {
                f.base.resize(s.event as usize + 1, (0, 0));
            }
            let b = &mut f.base[s.event as usize];
            b.0 += s.samples;
            b.1 = b.1.saturating_add(s.period);
        }
    }
    let dropped: u64 = st
        .stacks
        .iter()
        .zip(&keep)
        .filter(|(_, &k)| !k)
        .map(|(s, _)| s.samples)
        .sum();
    st.total_samples -= dropped;
    // Most samples first, then by names: the same order on every run.
    let names = |s: &Stack| {
        st.path(s)
            .iter()
            .map(|&i| st.frames[i as usize].name.as_str())
    };
    let mut order: Vec<u32> = (0..st.stacks.len() as u32)
        .filter(|&k| keep[k as usize])
        .collect();
    order.sort_by(|&a, &b| {
        let (a, b) = (&st.stacks[a as usize], &st.stacks[b as usize]);
        b.samples
            .cmp(&a.samples)
            .then_with(|| names(a).cmp(names(b)))
            .then(a.run.cmp(&b.run))
            .then(a.event.cmp(&b.event))
    });
    let mut new_of = vec![u32::MAX; st.stacks.len()];
    for (new, &old) in order.iter().enumerate() {
        new_of[old as usize] = new as u32;
    }
    st.stacks = order.iter().map(|&o| st.stacks[o as usize]).collect();
    for s in &mut st.samples {
        s.stack = new_of[s.stack as usize];
    }
    st.samples.retain(|s| s.stack != u32::MAX);
    // Each warning once (the unwinder's symbolizer and the namer's find the same files).
    let mut seen = std::collections::HashSet::new();
    st.warnings.retain(|w| seen.insert(w.clone()));
    Ok(st)
}

impl StackTable {
    /// The frames of `s`: indexes into [`StackTable::frames`], outermost (the thread's name)
    /// first.
    pub fn path(&self, s: &Stack) -> &[u32] {
        &self.arena[s.start..s.start + s.len as usize]
    }

    /// The sampled function of `s` (where its Self goes): the frame before those inlined
    /// at the sampled address.
    pub fn self_frame(&self, s: &Stack) -> Option<u32> {
        let p = self.path(s);
        p.len().checked_sub(1 + s.inlined as usize).map(|i| p[i])
    }

    /// Whether frame `f` was only ever seen inlined (text views mark it `(inlined)`, as
    /// perf does).
    pub fn only_inlined(&self, f: u32) -> bool {
        self.kinds.get(f as usize) == Some(&1)
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
            inlined: 0,
        });
        self.arena.extend_from_slice(path);
        self.total_samples += samples;
        self.stacks.len() as u32 - 1
    }

    /// Reads recording `src` (number `run`) into the table: after the peek (and a pass for
    /// the mappings of `--call-graph dwarf` recordings, [`UserStacks::of`]), a pass of the
    /// samples into distinct raw stacks of addresses and one of the side band those
    /// addresses need; then each stack is named and merged with the stacks that name the
    /// same frames. `keep`: every sample is kept too; `narrow`: the filters read with the
    /// samples.
    #[allow(clippy::too_many_arguments)]
    fn collect_one(
        &mut self,
        run: u32,
        src: &Source,
        search: Search,
        keep: bool,
        index: &mut HashMap<Frame, u32>,
        event: Option<&Select>,
        narrow: &Narrow,
    ) -> Result<(), LoadError> {
        let peek = load::peek(src)?;
        // Each sample's event by name, joined with the other recordings'; those `event`
        // leaves out are not read.
        let events = self.events.of_run(&Names::of(peek.header.as_ref()), event);
        // `--call-graph dwarf` recordings: every mapping first (a pass of its own), then
        // each sample's user stack unwound as it is read.
        let mut user = UserStacks::of(src, &peek, &search)?;
        // How far the stacks reach: user stacks as they are unwound, callchains (`-g`)
        // once every mapping is known, from the samples of each distinct stack.
        let mut quality = Quality::of_header(peek.header.as_ref());
        // `--max-stack N` cuts callchains as the kernel's limit does (which counts its
        // context markers too): a chain it cut is said to be cut, not to stop short.
        if let (Some(q), Some(n)) = (quality.as_mut(), narrow.max_stack) {
            if n as u64 + 2 < q.max_frames {
                q.max_frames = n as u64 + 2;
                q.max_stack = Some(n as u64);
            }
        }
        let mut raws = RawStacks::new(run, keep, events);
        raws.groups = crate::record::group::GroupReads::of(
            peek.header.as_ref(),
            peek.header_ext.as_ref(),
            event,
        );
        if let Some(g) = raws.groups.as_mut() {
            // (A pass of its own, with --event MEMBER of a group recording only.)
            let mut own: HashMap<u32, u64> = HashMap::new();
            load::stream(src, |r| {
                if let Record::Sample(s) = r {
                    *own.entry(s.event).or_default() += 1;
                }
            })?;
            g.leave_sampling(|m| own.get(&m).copied().unwrap_or(0));
        }
        let (arena, threads) = (&mut self.arena, &mut self.threads);
        let info = load::stream(src, |r| {
            raws.record(r, (user.as_mut(), narrow), &mut quality, arena, threads)
        })?;
        if let Some(f) = self.filtered.as_mut() {
            f.all += raws.read.0;
            f.in_time += raws.read.1;
            for (ev, &(n, p)) in raws.dropped.iter().enumerate() {
                if f.base.len() <= ev {
                    f.base.resize(ev + 1, (0, 0));
                }
                f.base[ev].0 += n;
                f.base[ev].1 = f.base[ev].1.saturating_add(p);
            }
        }
        raws.forget_lookups();
        let mut sym = Symbolizer::new(search);
        sym.recorded_on(src, info.header.as_ref(), info.header_ext.as_ref());
        raws.read_side_band(src, &mut sym)?;
        if let Some(q) = quality.as_mut() {
            if let Some(u) = &user {
                q.merge(&u.unwind.quality);
                self.warnings.extend(u.unwind.warnings.iter().cloned());
            }
            raws.tally_callchains(&mut self.arena, &mut sym, q);
        }
        raws.fp_samples = Vec::new();
        let stack_of = self.name_stacks(run, &mut raws, &mut sym, index);
        let mut rows = std::mem::take(&mut raws.rows);
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
        let mut facts = Run::of(src, info, quality);
        facts.executable = std::mem::take(&mut raws.executable).finish();
        self.runs.push(facts);
        Ok(())
    }

    /// Names the raw stacks of recording `run` (made frame ids in the arena) and adds each
    /// to the stack of its event that names the same frames; returns each raw stack's
    /// stack. In address order (leaf first), so that frame numbering is the same on every
    /// run.
    fn name_stacks(
        &mut self,
        run: u32,
        raws: &mut RawStacks,
        sym: &mut Symbolizer,
        index: &mut HashMap<Frame, u32>,
    ) -> Vec<u32> {
        let order = raws.order(&self.arena);
        let raw = std::mem::take(&mut raws.raw);
        let mut kinds = std::mem::take(&mut self.kinds);
        let mut namer = Namer {
            sym,
            index,
            kinds: &mut kinds,
            named: Vec::new(),
            name_of: HashMap::default(),
            roots: HashMap::default(),
        };
        // Raw stacks of one event that name the same frames are one stack (found by
        // content).
        let mut merged: hashbrown::HashTable<u32> = hashbrown::HashTable::new();
        let mut stack_of = vec![0u32; raw.len()];
        let mut path: Vec<u32> = Vec::new();
        for &id in &order {
            let r = raw[id as usize];
            let inlined = namer.path(&r, raws, &self.arena, &mut path);
            let start = self.place(&r, &path);
            stack_of[id as usize] = self.merge(run, &r, (start, inlined), &path, &mut merged);
        }
        drop((raw, order, merged, namer));
        self.kinds = kinds;
        stack_of
    }

    /// Writes the named `path` of raw stack `r` over its addresses when as long (no
    /// inlined frames), else at the arena's end; returns where it starts.
    fn place(&mut self, r: &Raw, path: &[u32]) -> usize {
        let n = r.len as usize;
        if path.len() == n {
            self.arena[r.start..r.start + n].copy_from_slice(path);
            r.start
        } else {
            self.arena.extend_from_slice(path);
            self.arena.len() - path.len()
        }
    }

    /// Adds the samples of raw stack `r`, named `path` (at `start` in the arena), to the
    /// stack of recording `run` and its event with the same frames (`merged` finds it by
    /// content), a new one if none; returns that stack's index.
    fn merge(
        &mut self,
        run: u32,
        r: &Raw,
        (start, inlined): (usize, u16),
        path: &[u32],
        merged: &mut hashbrown::HashTable<u32>,
    ) -> u32 {
        let h = hash_ids(run, u32::from(inlined), r.event, path);
        let (stacks, arena) = (&mut self.stacks, &self.arena);
        let at = |s: &Stack| &arena[s.start..s.start + s.len as usize];
        let same = |&i: &u32| {
            let s = &stacks[i as usize];
            s.event == r.event && s.inlined == inlined && at(s) == path
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
                    inlined,
                });
                let i = stacks.len() as u32 - 1;
                merged.insert_unique(h, i, |&i| {
                    let s = &stacks[i as usize];
                    hash_ids(run, u32::from(s.inlined), s.event, at(s))
                });
                i
            }
        };
        let s = &mut stacks[slot as usize];
        s.samples += r.samples;
        s.period = s.period.saturating_add(r.period);
        self.total_samples += r.samples;
        slot
    }

    /// The events with samples, in the order of the recordings' headers: (index into
    /// [`StackTable::events`], samples, sum of periods).
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

/// The filters read with the samples: `--time`'s window of this recording, the threads,
/// `--max-stack`.
struct Narrow<'a> {
    filter: &'a Filter,
    window: Option<Window>,
    max_stack: Option<usize>,
}

/// One recording's distinct stacks as its samples are read: (pid, thread's name, event,
/// addresses) numbered, the side-band records a name needs may come after the samples that
/// need it. Each (pid, address) is numbered too (4 bytes an entry), and a stack already
/// seen costs no allocation.
struct RawStacks {
    run: u32,
    /// Whether every sample is kept ([`RawStacks::rows`]).
    keep: bool,
    events: RunEvents,
    raw: Vec<Raw>,
    by_content: hashbrown::HashTable<u32>,
    /// Samples without callchains (most recordings), by process, thread's name, event
    /// and address: found without hashing a list.
    flat: HashMap<(u32, u32, u32, u64), u32, Fx>,
    addr_id: HashMap<(u32, u64), u32, Fx>,
    addrs: Vec<(u32, u64)>,
    probe: Vec<u32>,
    /// A sample's return addresses ([`return_addresses`]).
    rets: Vec<u64>,
    rows: Vec<SampleRow>,
    thread_of: HashMap<(u32, u32, u32), u32, Fx>,
    /// The side band (mappings, kernel functions) is read again once the addresses are
    /// known, only what they need (a file may list millions of mappings); forks now.
    forks: Vec<(u32, u32)>,
    /// Each thread's name as of the sample (perf script's comm): Comm records name a
    /// thread, a fork passes the parent's name on. Names are numbered in `comms`, found by
    /// `comm_id` (a file may name a million threads).
    comms: Vec<String>,
    comm_id: HashMap<String, u32>,
    comm_of: HashMap<u32, u32, Fx>,
    /// The samples of each distinct stack (by raw stack number) read from a callchain
    /// (`-g`): how far they reach is found once every mapping is known.
    fp_samples: Vec<u64>,
    /// The workload's executable ([`Run::executable`]).
    executable: Executable,
    /// Samples of the events read: all, and those in `--time`'s window.
    read: (u64, u64),
    /// Per event, the samples (and period) in the window of the threads the filter leaves
    /// out.
    dropped: Vec<(u64, u64)>,
    /// A group recording's members, read in each sample of their leader.
    groups: Option<crate::record::group::GroupReads>,
}

impl RawStacks {
    fn new(run: u32, keep: bool, events: RunEvents) -> RawStacks {
        RawStacks {
            run,
            keep,
            events,
            raw: Vec::new(),
            by_content: hashbrown::HashTable::new(),
            flat: HashMap::default(),
            addr_id: HashMap::default(),
            addrs: Vec::new(),
            probe: Vec::new(),
            rets: Vec::new(),
            rows: Vec::new(),
            thread_of: HashMap::default(),
            forks: Vec::new(),
            comms: Vec::new(),
            comm_id: HashMap::new(),
            comm_of: HashMap::default(),
            fp_samples: Vec::new(),
            executable: Executable::default(),
            read: (0, 0),
            dropped: Vec::new(),
            groups: None,
        }
    }

    /// Takes in one record of the first pass: threads' names, forks, samples (`user`
    /// unwinds user stacks; `quality` counts samples without a stack).
    fn record(
        &mut self,
        r: &Record,
        (user, narrow): (Option<&mut UserStacks>, &Narrow),
        quality: &mut Option<Quality>,
        arena: &mut Vec<u32>,
        threads: &mut Vec<Thread>,
    ) {
        self.executable.record(r);
        match r {
            Record::Comm(c) => {
                let next = self.comms.len() as u32;
                let i = match self.comm_id.get(&c.comm) {
                    Some(&i) => i,
                    None => {
                        self.comms.push(c.comm.clone());
                        self.comm_id.insert(c.comm.clone(), next);
                        next
                    }
                };
                self.comm_of.insert(c.tid, i);
            }
            Record::Fork(t) => {
                // The parent's name, for a child not named yet. The agent writes each CPU's
                // records as they come, so a child's exec (`sh -c sort`: Comm sort) may
                // come before its fork in the file: the fork must not name sort's samples sh.
                if let Some(&i) = self.comm_of.get(&t.ptid) {
                    self.comm_of.entry(t.tid).or_insert(i);
                }
                if t.pid != t.ppid {
                    self.forks.push((t.pid, t.ppid));
                }
            }
            Record::Sample(s) => {
                let members = match self.groups.as_mut() {
                    Some(g) if !s.values.is_empty() => g.samples(s),
                    _ => Vec::new(),
                };
                let mut user = user;
                self.sample(s, (user.as_deref_mut(), narrow), quality, arena, threads);
                // The members' samples count no stack twice in how far the stacks reach.
                for m in &members {
                    self.sample(m, (user.as_deref_mut(), narrow), &mut None, arena, threads);
                }
            }
            _ => {}
        }
    }

    /// Counts sample `s` in its raw stack, found or added.
    fn sample(
        &mut self,
        s: &Sample,
        (user, narrow): (Option<&mut UserStacks>, &Narrow),
        quality: &mut Option<Quality>,
        arena: &mut Vec<u32>,
        threads: &mut Vec<Thread>,
    ) {
        let Some(ev) = self.events.id(s.event) else {
            return;
        };
        self.read.0 += 1;
        if narrow.window.as_ref().is_some_and(|w| !w.keeps(s.time)) {
            return;
        }
        self.read.1 += 1;
        if !narrow.filter.keeps_thread(s.pid, s.tid) {
            if self.dropped.len() <= ev as usize {
                self.dropped.resize(ev as usize + 1, (0, 0));
            }
            let d = &mut self.dropped[ev as usize];
            d.0 += 1;
            d.1 = d.1.saturating_add(s.period);
            return;
        }
        let comm = self
            .comm_of
            .get(&s.tid)
            .or_else(|| self.comm_of.get(&s.pid))
            .copied()
            .unwrap_or(u32::MAX);
        // A user stack is unwound as it is read; a callchain is tallied later.
        let unwinds = user.is_some() && s.user_stack.is_some();
        if !unwinds && s.callchain.is_empty() {
            if let Some(q) = quality.as_mut() {
                q.without += 1;
            }
        }
        let fp = !unwinds && !s.callchain.is_empty() && quality.is_some();
        let mut rets = std::mem::take(&mut self.rets);
        return_addresses(user, s, &mut rets);
        // `--max-stack N`: the sampled address and N - 1 return addresses.
        if let Some(n) = narrow.max_stack {
            rets.truncate(n.saturating_sub(1));
        }
        let id = if (s.callchain.is_empty() || s.callchain == [s.ip]) && rets.is_empty() {
            self.flat_stack(s.pid, comm, ev, s.ip, arena)
        } else {
            self.chain_stack(s, (comm, ev), &rets, arena)
        };
        self.rets = rets;
        if fp {
            if self.fp_samples.len() <= id as usize {
                self.fp_samples.resize(id as usize + 1, 0);
            }
            self.fp_samples[id as usize] += 1;
        }
        let e = &mut self.raw[id as usize];
        e.samples += 1;
        e.period = e.period.saturating_add(s.period);
        if self.keep {
            self.keep_sample(s, ev, id, threads);
        }
    }

    /// The number of address `a` of process `pid`.
    fn number(&mut self, pid: u32, a: u64) -> u32 {
        let next = self.addrs.len() as u32;
        let addrs = &mut self.addrs;
        *self.addr_id.entry((pid, a)).or_insert_with(|| {
            addrs.push((pid, a));
            next
        })
    }

    /// The raw stack of a sample at `ip` without callers.
    fn flat_stack(&mut self, pid: u32, comm: u32, ev: u32, ip: u64, arena: &mut Vec<u32>) -> u32 {
        match self.flat.get(&(pid, comm, ev, ip)) {
            Some(&id) => id,
            None => {
                let a = self.number(pid, ip);
                let id = push_raw(&mut self.raw, arena, (pid, comm, ev), &[ROOT, a]);
                self.flat.insert((pid, comm, ev, ip), id);
                id
            }
        }
    }

    /// The raw stack of sample `s` (its thread's name and event `(comm, ev)`) returning to
    /// `rets` (innermost first), found by content.
    fn chain_stack(
        &mut self,
        s: &Sample,
        (comm, ev): (u32, u32),
        rets: &[u64],
        arena: &mut Vec<u32>,
    ) -> u32 {
        let mut probe = std::mem::take(&mut self.probe);
        probe.clear();
        probe.push(ROOT);
        for &a in rets.iter().rev() {
            let id = self.number(s.pid, a);
            probe.push(id);
        }
        let leaf = self.number(s.pid, s.ip);
        probe.push(leaf);
        let h = hash_ids(s.pid, comm, ev, &probe);
        let raw = &self.raw;
        let same = |&i: &u32| {
            let r = &raw[i as usize];
            r.pid == s.pid
                && r.comm == comm
                && r.event == ev
                && arena[r.start..r.start + r.len as usize] == probe[..]
        };
        let id = match self.by_content.find(h, same).copied() {
            Some(id) => id,
            None => {
                let id = push_raw(&mut self.raw, arena, (s.pid, comm, ev), &probe);
                let (raw, arena) = (&self.raw, &*arena);
                self.by_content.insert_unique(h, id, |&i| {
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
        };
        self.probe = probe;
        id
    }

    /// Keeps sample `s` (of event `ev`, in raw stack `id`) and its thread.
    fn keep_sample(&mut self, s: &Sample, ev: u32, id: u32, threads: &mut Vec<Thread>) {
        let run = self.run;
        let thread = *self.thread_of.entry((s.pid, s.tid, ev)).or_insert_with(|| {
            threads.push(Thread {
                run,
                pid: s.pid,
                tid: s.tid,
                event: ev,
            });
            threads.len() as u32 - 1
        });
        self.rows.push(SampleRow {
            thread,
            event: ev,
            stack: id,
            time: s.time,
            period: s.period,
        });
    }

    /// Frees what found a stack, an address or a name again: the samples are read.
    fn forget_lookups(&mut self) {
        self.by_content = hashbrown::HashTable::new();
        self.flat = HashMap::default();
        self.addr_id = HashMap::default();
        self.probe = Vec::new();
        self.rets = Vec::new();
        self.comm_id = HashMap::new();
        self.thread_of = HashMap::default();
    }

    /// Reads the side band again, what the addresses need only (the mappings and kernel
    /// functions they land in); a return address is looked up one byte back.
    fn read_side_band(&mut self, src: &Source, sym: &mut Symbolizer) -> Result<(), LoadError> {
        let sampled: Vec<(u32, u64)> = self
            .addrs
            .iter()
            .flat_map(|&(pid, a)| [(pid, a), (pid, a.saturating_sub(1))])
            .collect();
        for r in crate::record::sideband::side_band_of(src, &self.forks, &sampled)? {
            sym.observe(&r.record());
        }
        drop((sampled, std::mem::take(&mut self.forks)));
        Ok(())
    }

    /// Tallies in `q` how far the callchains (`-g`) reach, each distinct stack's samples
    /// at once; a callchain whose sampled function had no frame of its own gets the caller
    /// the kernel's walk skipped, put back where its call instruction names it.
    fn tally_callchains(&mut self, arena: &mut Vec<u32>, sym: &mut Symbolizer, q: &mut Quality) {
        let max = q.max_frames;
        let mut ends = crate::symbolize::quality::FpEnds::default();
        let mut chains = crate::symbolize::fpchain::FpChains::default();
        let mut chain: Vec<u64> = Vec::new();
        let fp_samples = std::mem::take(&mut self.fp_samples);
        for (id, &n) in fp_samples.iter().enumerate() {
            if n == 0 {
                continue;
            }
            // The stack's addresses innermost first (the arena holds them outermost
            // first, after the root).
            let r = self.raw[id];
            chain.clear();
            chain.extend(
                arena[r.start + 1..r.start + r.len as usize]
                    .iter()
                    .rev()
                    .map(|&i| self.addrs[i as usize].1),
            );
            let e = ends.end(sym, r.pid, &chain, max);
            q.add(&e, n);
            let leaf = chains.fix(sym, r.pid, &mut chain);
            q.add_leaf(leaf, n);
            if let crate::symbolize::fpchain::Leaf::Restored(site) = leaf {
                self.restore(id, site, &chain, arena);
            }
        }
    }

    /// Puts the restored return address `site` of raw stack `id` (its addresses
    /// innermost first: `chain`) between the sampled user address and the next return
    /// address: the stack is written again at the arena's end, one frame longer.
    fn restore(&mut self, id: usize, site: u64, chain: &[u64], arena: &mut Vec<u32>) {
        let at = 1 + chain.iter().position(|&a| a >> 63 == 0).unwrap_or(0);
        let r = self.raw[id];
        let (start, len) = (r.start, r.len as usize);
        let site_id = self.addrs.len() as u32;
        self.addrs.push((r.pid, site));
        let new_start = arena.len();
        // Innermost-first index `at` is arena index `len - at` after the root.
        let split = start + len - at;
        arena.extend_from_within(start..split);
        arena.push(site_id);
        arena.extend_from_within(split..start + len);
        self.raw[id].start = new_start;
        self.raw[id].len += 1;
    }

    /// The raw stacks in address order (leaf first), by process and thread's name, then
    /// event: the same frame numbering on every run.
    fn order(&self, arena: &[u32]) -> Vec<u32> {
        let raw = &self.raw;
        let mut order: Vec<u32> = (0..raw.len() as u32).collect();
        let leaf_first = |r: &Raw| {
            arena[r.start + 1..r.start + r.len as usize]
                .iter()
                .rev()
                .map(|&i| self.addrs[i as usize].1)
        };
        order.sort_unstable_by(|&a, &b| {
            let (a, b) = (&raw[a as usize], &raw[b as usize]);
            (a.pid, a.comm)
                .cmp(&(b.pid, b.comm))
                .then_with(|| leaf_first(a).cmp(leaf_first(b)))
                .then(a.event.cmp(&b.event))
        });
        order
    }
}

/// Names raw stacks: each (pid and address, leaf or caller) named once, its frames
/// outermost first a run of `named`. The sampled function is the symbol table's (as every
/// flat report names it, so Self agrees with them); at a return address, the function that
/// holds the call site, then the functions inlined there (from DWARF where the binary has
/// it), innermost last.
struct Namer<'a> {
    sym: &'a mut Symbolizer,
    /// Every frame's id.
    index: &'a mut HashMap<Frame, u32>,
    /// Each frame's occurrences, by id ([`StackTable::kinds`]).
    kinds: &'a mut Vec<u8>,
    named: Vec<u32>,
    name_of: HashMap<(u32, At), (u32, u32), Fx>,
    roots: HashMap<(u32, u32), u32, Fx>,
}

impl Namer<'_> {
    /// The id of frame `f`; `inlined`: this occurrence is a function inlined at its address.
    fn intern(&mut self, f: Frame, inlined: bool) -> u32 {
        let next = self.index.len() as u32;
        let id = *self.index.entry(f).or_insert(next);
        if self.kinds.len() <= id as usize {
            self.kinds.resize(id as usize + 1, 0);
        }
        self.kinds[id as usize] |= if inlined { 1 } else { 2 };
        id
    }

    /// The frames of raw stack `r` (of `raws`, its addresses in `arena`) into `path`;
    /// returns how many at its end are inlined at the sampled address.
    fn path(&mut self, r: &Raw, raws: &RawStacks, arena: &[u32], path: &mut Vec<u32>) -> u16 {
        path.clear();
        path.push(self.root(r, raws));
        let n = r.len as usize;
        let mut inlined = 0;
        for k in 1..n {
            let leaf = k == n - 1;
            let at = match (leaf, n > 2) {
                (false, _) => At::Caller,
                (true, true) => At::Sampled,
                (true, false) => At::SampledAlone,
            };
            let a = arena[r.start + k];
            let (from, len) = self.frames_at(a, at, r.pid, raws.addrs[a as usize].1);
            path.extend_from_slice(&self.named[from as usize..(from + len) as usize]);
            if leaf {
                inlined = u16::try_from(len.saturating_sub(1)).unwrap_or(u16::MAX);
            }
        }
        inlined
    }

    /// The outermost frame: the thread's name (perf's flame graphs start there too). A
    /// sample read before its process's name (from another CPU's ring) takes the name the
    /// process has at the end.
    fn root(&mut self, r: &Raw, raws: &RawStacks) -> u32 {
        if let Some(&id) = self.roots.get(&(r.pid, r.comm)) {
            return id;
        }
        let name = raws
            .comms
            .get(r.comm as usize)
            .or_else(|| {
                raws.comm_of
                    .get(&r.pid)
                    .and_then(|&c| raws.comms.get(c as usize))
            })
            .cloned()
            .unwrap_or_else(|| format!("pid {}", r.pid));
        let id = self.intern(
            Frame {
                name,
                dso: String::new(),
            },
            false,
        );
        self.roots.insert((r.pid, r.comm), id);
        id
    }

    /// The run of `named` that names address `a` (`addr` of process `pid`), as a return
    /// address ([`At::Caller`]) or the sampled one, alone or with the functions inlined
    /// there.
    fn frames_at(&mut self, a: u32, at: At, pid: u32, addr: u64) -> (u32, u32) {
        if let Some(&run) = self.name_of.get(&(a, at)) {
            return run;
        }
        let from = self.named.len() as u32;
        let frames = match at {
            At::Caller => call_site(self.sym, pid, addr),
            At::Sampled => sampled_frames(self.sym, pid, addr),
            At::SampledAlone => vec![sampled_frame(self.sym, pid, addr)],
        };
        // At most u16::MAX frames inlined at one address (DWARF's nesting is bounded far
        // below that: `Lines::source`).
        for (k, f) in frames.into_iter().enumerate().take(usize::from(u16::MAX)) {
            let id = self.intern(f, k > 0);
            self.named.push(id);
        }
        let run = (from, self.named.len() as u32 - from);
        self.name_of.insert((a, at), run);
        run
    }
}

/// How an address of a raw stack is named ([`Namer::frames_at`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
enum At {
    /// A return address: the call site's function and those inlined there.
    Caller,
    /// The sampled address of a stack with callers: the function and those inlined there,
    /// as perf's callchains expand it.
    Sampled,
    /// The sampled address of a sample without a stack: the symbol table's function alone
    /// (perf expands no inlined function where there is no callchain).
    SampledAlone,
}
