//! The Firefox Profiler's processed format (`fxprof-processed-profile`): a process per
//! recording and pid, a thread per tid (per event with several), its busiest threads and
//! stack nodes within a budget.

use super::facts::StackFacts;
use crate::symbolize::stacks::{SampleRow, StackTable};
use fxprof_processed_profile as fx;
use std::collections::HashMap;
use std::io::Write;

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
    /// Per thread of [`StackTable::threads`]: its recording, its own index or [`OTHERS`], and
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
    fn of(st: &StackTable) -> Firefox {
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
    fn body<'a>(&self, st: &'a StackTable, s: &SampleRow) -> &'a [u32] {
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
    fn depth(&self, st: &StackTable) -> Option<usize> {
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

/// The Firefox profile as it is built, a sample at a time in track order: each process,
/// thread, stack and name made once.
struct Builder<'a> {
    st: &'a StackTable,
    ff: Firefox,
    p: fx::Profile,
    /// The earliest sample's wall-clock time, ns: the profile's zero.
    reference: u64,
    /// Whether several recordings are exported (a process says which).
    several: bool,
    processes: HashMap<(u32, u32, u32), fx::ProcessHandle>,
    threads: HashMap<(u32, u32, u32), fx::ThreadHandle>,
    handles: HashMap<(fx::ThreadHandle, u32), Option<fx::StackHandle>>,
    strings: HashMap<(u32, u32), fx::StringHandle>,
    /// The profile's sampling interval, ns: the unit of time-weighted samples' weights.
    interval_ns: u64,
    /// Per thread track, the ns of time-weighted samples not yet a whole interval (carried
    /// to its next sample, so a thread's total is its time to within one interval).
    carry: HashMap<fx::ThreadHandle, u64>,
}

/// Where a sample goes: its track, and what the track's process and thread are named.
struct Track<'a> {
    run: u32,
    /// Its thread's index, or [`OTHERS`].
    key: u32,
    /// Its event with several (0 in [`OTHERS`]).
    ev: u32,
    pid: u32,
    tid: u32,
    thread_name: &'a str,
    event: &'a str,
    at: fx::Timestamp,
}

impl<'a> Builder<'a> {
    /// An empty profile of `st`'s samples, from the earliest's wall-clock time.
    fn new(st: &'a StackTable) -> Builder<'a> {
        let ff = Firefox::of(st);
        let reference = st.samples.iter().map(|s| st.wall_ns(s)).min().unwrap_or(0);
        let ns = st.weights_are_ns();
        let interval_ns = st
            .header()
            .and_then(|h| h.events.first())
            .filter(|e| e.attr.flags & (1 << 10) == 0 && ns)
            .map_or(1_000_000, |e| e.attr.sample_period_or_freq.max(1));
        let interval = fx::SamplingInterval::from_nanos(interval_ns);
        let mut p = fx::Profile::new(
            "labperf",
            fx::ReferenceTimestamp::from_duration_since_unix_epoch(
                std::time::Duration::from_nanos(reference),
            ),
            interval,
        );
        // Every frame is a name already: nothing for the profiler to look up.
        p.set_symbolicated(true);
        Builder {
            st,
            ff,
            p,
            reference,
            several: st.runs.len() > 1,
            processes: HashMap::new(),
            threads: HashMap::new(),
            handles: HashMap::new(),
            strings: HashMap::new(),
            interval_ns,
            carry: HashMap::new(),
        }
    }

    /// The weight of a sample of `ns` (off-CPU time, or `--wall`'s) on `thread`: whole
    /// intervals, the rest carried to the thread's next sample.
    fn time_weight(&mut self, thread: fx::ThreadHandle, ns: u64) -> i32 {
        let c = self.carry.entry(thread).or_default();
        let total = c.saturating_add(ns);
        *c = total % self.interval_ns;
        i32::try_from(total / self.interval_ns).unwrap_or(i32::MAX)
    }

    /// The samples' indexes: each thread's samples in time order, threads by recording,
    /// pid, tid and event.
    fn order(&self) -> Vec<u32> {
        let st = self.st;
        let mut order: Vec<u32> = (0..st.samples.len() as u32).collect();
        order.sort_by_key(|&i| {
            let s = &st.samples[i as usize];
            let t = st.threads[s.thread as usize];
            match self.ff.track(s) {
                (_, OTHERS, _) => (t.run, OTHERS, OTHERS, 0, s.time),
                (_, _, ev) => (t.run, t.pid, t.tid, ev, s.time),
            }
        });
        order
    }

    /// Adds sample `s` to its thread's track.
    fn add(&mut self, s: &SampleRow) {
        let st = self.st;
        let at = fx::Timestamp::from_nanos_since_reference(st.wall_ns(s) - self.reference);
        let path = st.path(&st.stacks[s.stack as usize]);
        let (run, key, ev) = self.ff.track(s);
        let t = st.threads[s.thread as usize];
        let own = key != OTHERS;
        let track = Track {
            run,
            key,
            // One [other threads] track per recording, whatever the events.
            ev: if own { ev } else { 0 },
            pid: if own { t.pid } else { 0 },
            tid: if own { t.tid } else { 0 },
            thread_name: if own {
                path.first()
                    .map_or("", |&i| st.frames[i as usize].name.as_str())
            } else {
                OTHER_THREADS
            },
            event: &st.events.names[s.event as usize],
            at,
        };
        let process = self.process(&track);
        let thread = self.thread(&track, process);
        let handle = self.stack(s, own, thread);
        use crate::record::events::{is_ns, OFF_CPU, WALL};
        // Time off the CPU is no CPU time: its samples weigh their duration (in the
        // profile's intervals, as a sample of the clock does), with no CPU delta; so do
        // `--wall`'s, whose on- and off-CPU samples are one event there.
        let (cpu, weight) = match track.event {
            OFF_CPU | WALL => (fx::CpuDelta::ZERO, self.time_weight(thread, s.period)),
            e if is_ns(e) => (fx::CpuDelta::from_nanos(s.period), 1),
            _ => (fx::CpuDelta::ZERO, 1),
        };
        self.p.add_sample(thread, at, handle, cpu, weight);
    }

    /// The process of a track. With several events, each its own process track (`prog
    /// (page-faults)`): a thread's samples, and their weights, are of one event.
    fn process(&mut self, k: &Track) -> fx::ProcessHandle {
        let own = k.key != OTHERS;
        let id = (k.run, if own { k.pid } else { OTHERS }, k.ev);
        if let Some(&h) = self.processes.get(&id) {
            return h;
        }
        let r = &self.st.runs[k.run as usize];
        let thread_name = k.thread_name;
        let mut name = if self.several {
            format!("{thread_name} ({}, {})", r.host, r.name)
        } else {
            thread_name.to_string()
        };
        if self.ff.several_events {
            name = format!("{name} ({})", k.event);
        }
        let h = self.p.add_process(&name, k.pid, k.at);
        self.processes.insert(id, h);
        h
    }

    /// The thread of a track, in its process.
    fn thread(&mut self, k: &Track, process: fx::ProcessHandle) -> fx::ThreadHandle {
        if let Some(&h) = self.threads.get(&(k.run, k.key, k.ev)) {
            return h;
        }
        let th = self.p.add_thread(process, k.tid, k.at, k.tid == k.pid);
        if self.ff.several_events {
            self.p
                .set_thread_name(th, &format!("{} ({})", k.thread_name, k.event));
        } else {
            self.p.set_thread_name(th, k.thread_name);
        }
        self.threads.insert((k.run, k.key, k.ev), th);
        th
    }

    /// The stack of sample `s` in `thread` (its own thread's track: `own`), cut to the
    /// profile's depth.
    fn stack(
        &mut self,
        s: &SampleRow,
        own: bool,
        thread: fx::ThreadHandle,
    ) -> Option<fx::StackHandle> {
        if let Some(&h) = self.handles.get(&(thread, s.stack)) {
            return h;
        }
        let (st, ff) = (self.st, &self.ff);
        let body = ff.body(st, s);
        let (outer, leaf) = match ff.depth {
            Some(d) if body.len() > d => (&body[..d], body.last()),
            _ => (body, None),
        };
        let category = fx::CategoryHandle::OTHER.into();
        let (strings, p) = (&mut self.strings, &mut self.p);
        // Each name interned once (a deep stack names the same functions again);
        // with several events, a stack of [other threads] is under `THREAD (EVENT)`.
        let mut label = |frame: u32, of_event: Option<u32>| {
            let key = (frame, of_event.unwrap_or(u32::MAX));
            let name = *strings.entry(key).or_insert_with(|| {
                let name = st
                    .frames
                    .get(frame as usize)
                    .map_or(LEFT_OUT, |f| f.name.as_str());
                match of_event {
                    Some(e) => {
                        p.intern_string(&format!("{name} ({})", st.events.names[e as usize]))
                    }
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
        let h = p.intern_stack_frames(thread, frames.into_iter());
        self.handles.insert((thread, s.stack), h);
        h
    }

    /// The notes of what the profile had to leave out.
    fn notes(&self) -> Option<String> {
        let ff = &self.ff;
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
        (!notes.is_empty()).then(|| notes.join("\n"))
    }
}

/// The Firefox Profiler's format of a [`StackTable`] (a trait: `StackTable` is
/// labperf-symbolize's, and a type's inherent methods belong to its own crate).
pub trait ToFirefox {
    fn firefox(&self, w: impl Write) -> serde_json::Result<Option<String>>;
}

impl ToFirefox for StackTable {
    /// The Firefox Profiler's processed profile (needs [`StackTable::samples`]): a process per
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
    fn firefox(&self, w: impl Write) -> serde_json::Result<Option<String>> {
        let mut b = Builder::new(self);
        for i in b.order() {
            b.add(&self.samples[i as usize]);
        }
        serde_json::to_writer(w, &b.p)?;
        Ok(b.notes())
    }
}
