//! The plain view: samples aggregated by perf's sort keys (symbol, mapped file, process
//! name, pid, address, source line; combinable), of one recording or of several merged
//! (`--by host|run` keeps them apart).

use crate::record::events::{Joined, Names, Select};
use crate::record::filter::Filter;
use crate::record::load::{self, FileInfo, LoadError};
pub use crate::render::table::Format;
use crate::render::table::{Cell, Column, LeftOut, Table};
use crate::symbolize::stacks::StackTable;
use crate::symbolize::symbols::{label, Location, Search, Symbolizer};
use serde::Serialize;
use serde_json::json;
use std::collections::HashMap;

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum By {
    /// Per function (perf's `sym`).
    #[value(alias = "sym")]
    Symbol,
    Dso,
    Pc,
    /// Per recording machine (the header's hostname) and symbol.
    Host,
    /// Per recording (the file's name) and symbol.
    Run,
    /// Per source line (`file:line`) in the sampled function (for inlined code, the line
    /// that calls it), from the binary's DWARF or its separate debug file; the function's
    /// name where there is none.
    Srcline,
    /// Per process name (the main thread's `comm`: its program's name after exec).
    Comm,
    /// Per process id.
    Pid,
    /// Per thread id (`--by comm,tid`: with its process's name).
    Tid,
}

impl By {
    /// The keys of `--by A,B,...` in order, each once: symbol when none is given, and
    /// after `host`/`run` alone (they group the functions).
    pub fn keys(given: &[By]) -> Vec<By> {
        let mut v: Vec<By> = Vec::new();
        for &b in given {
            if !v.contains(&b) {
                v.push(b);
            }
        }
        if v.iter().all(|b| matches!(b, By::Host | By::Run)) {
            v.push(By::Symbol);
        }
        v
    }

    /// Whether this key names code within a file (the row then shows the file too).
    fn in_file(self) -> bool {
        matches!(self, By::Symbol | By::Srcline | By::Pc)
    }
}

/// One output row.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct Row {
    /// Its event: an index into [`Report::events`].
    pub event: usize,
    /// The values of the report's keys, in order.
    pub keys: Vec<String>,
    pub dso: String,
    pub samples: u64,
    pub period: u64,
    /// Share of its event's period, percent (of its samples where no sample has a period).
    pub percent: f64,
}

/// One sampled event of a report: its name (joined across recordings) and totals.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct EventTotal {
    pub name: String,
    pub samples: u64,
    pub period: u64,
}

/// A finished report.
#[derive(Debug)]
pub struct Report {
    /// Every event with samples, in the order of the recordings' headers.
    pub events: Vec<EventTotal>,
    pub total_samples: u64,
    /// The sum of every event's periods (meaningful with one event only).
    pub total_period: u64,
    /// Event by event, the heaviest first.
    pub rows: Vec<Row>,
    pub info: FileInfo,
    pub warnings: Vec<String>,
    /// The keys rows are grouped by ([`By::keys`]).
    pub by: Vec<By>,
    /// More recordings merged into this one: their names and what they say of themselves.
    pub others: Vec<(String, FileInfo)>,
    /// Per event, the rows [`Report::keep`] left out and their samples.
    pub left_out: Vec<(u64, u64)>,
    /// A filtered report's heading line and JSON ([`Filter::account`]).
    pub filtered: Option<(String, serde_json::Value)>,
}

/// Reads `src` and aggregates its samples (of the event `event` picks, or each event apart).
pub fn build(
    src: &load::Source,
    by: &[By],
    search: Search,
    event: Option<&Select>,
    filter: &Filter,
) -> Result<Report, LoadError> {
    build_many(std::slice::from_ref(src), by, search, event, filter)
}

/// The run name of a recording: its file name without the extension.
pub fn run_name(src: &load::Source) -> String {
    src.name.file_stem().map_or_else(
        || src.name.display().to_string(),
        |s| s.to_string_lossy().into_owned(),
    )
}

/// Reads each of `srcs` and aggregates their samples together, event by event (the same
/// event name joins across files; `event` keeps one); each file's addresses are named with
/// its own side-band records and recording machine.
pub fn build_many(
    srcs: &[load::Source],
    by: &[By],
    search: Search,
    event: Option<&Select>,
    filter: &Filter,
) -> Result<Report, LoadError> {
    let by = By::keys(by);
    // LABPERF_THREADS caps the decoding threads (default: one per CPU).
    let threads = std::env::var("LABPERF_THREADS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get()));
    let mut merged = Merged {
        filter: filter.clone(),
        ..Merged::default()
    };
    let mut infos: Vec<(String, FileInfo)> = Vec::new();
    let mut warnings = Vec::new();
    for src in srcs {
        let (info, mut w) = merged.add_file(src, &by, &search, event, threads)?;
        warnings.append(&mut w);
        infos.push((src.name.display().to_string(), info));
    }
    let (total, total_period) = (merged.total, merged.total_period);
    let filtered = filter
        .is_active()
        .then(|| filter.account(merged.all_samples, merged.in_time, merged.total));
    let (events, rows) = merged.rows();
    // (Filtered, an event may have samples the filters left out.)
    if event.is_none() && !filter.is_active() {
        warnings.extend(silent_events(
            infos.iter().filter_map(|(_, i)| i.header.as_ref()),
            &events,
        ));
    }
    for (_, i) in &infos {
        if let Some(h) = &i.header {
            warnings.extend(crate::record::group::notes(h, i.header_ext.as_ref(), event));
        }
    }
    warnings.sort();
    warnings.dedup();
    let (_, info) = infos.remove(0);
    Ok(Report {
        events,
        total_samples: total,
        total_period,
        rows,
        warnings,
        info,
        by,
        others: infos,
        left_out: Vec::new(),
        filtered,
    })
}

/// A warning for each sampling event (a group's leader or an event alone) of the `headers`
/// that opened but gave no sample: its counter never reached the period (a PMU that does
/// not count, as QEMU's Alpha, or a period longer than the run), said rather than left to
/// a report without its table. `events` are the events with samples.
fn silent_events<'a>(
    headers: impl Iterator<Item = &'a labperf_common::Header>,
    events: &[EventTotal],
) -> Vec<String> {
    let mut out = Vec::new();
    for h in headers {
        for e in h.events.iter().filter(|e| e.leader.is_none()) {
            if !events.iter().any(|t| t.name == e.name) {
                out.push(format!(
                    "warning: event '{}' opened but produced no sample: its counter never reached the period (a PMU that does not count, as under an emulator, or a period longer than the run)",
                    crate::text::show(&e.name)
                ));
            }
        }
    }
    out
}

/// A row's key while files are merged: (event, keys, dso).
type Key = (u32, Vec<String>, std::rc::Rc<str>);

/// The plain report's rows as files are merged into it.
#[derive(Default)]
struct Merged {
    /// (event, keys, dso) → (samples, period): each file name held once (a file can name a
    /// new address in a few bytes, so what is kept per address is what memory is).
    acc: HashMap<Key, (u64, u64)>,
    dsos: std::collections::HashSet<std::rc::Rc<str>>,
    total: u64,
    total_period: u64,
    joined: Joined,
    /// Per joined event: (samples, period).
    per_event: Vec<(u64, u64)>,
    filter: Filter,
    /// Per joined event, the samples in `--time`'s window before the other filters
    /// (perf's `--percentage absolute` weighs rows against them).
    base_per_event: Vec<(u64, u64)>,
    /// Samples of the events shown, all of them, and those in `--time`'s window.
    all_samples: u64,
    in_time: u64,
}

impl Merged {
    /// Adds the samples of `src` (those of the event `event` picks), grouped by `by`; its
    /// file's facts and its symbolizer's warnings.
    fn add_file(
        &mut self,
        src: &load::Source,
        by: &[By],
        search: &Search,
        event: Option<&Select>,
        threads: usize,
    ) -> Result<(FileInfo, Vec<String>), LoadError> {
        let window = match &self.filter.time {
            Some(t) => Some(t.window(src)?),
            None => None,
        };
        let per_thread = by.contains(&By::Tid) || !self.filter.tids.is_empty();
        let mut counts =
            crate::record::counts::sample_counts(src, threads, per_thread, window.as_ref())?;
        counts.add_group_reads(src, event, per_thread, window.as_ref())?;
        // Addresses are resolved once every side-band record (mmap2, fork) is known.
        let mut sym = Symbolizer::new(search.clone());
        let info = &counts.info;
        sym.recorded_on(src, info.header.as_ref(), info.header_ext.as_ref());
        let mut parents = HashMap::new();
        for r in counts.others.iter().cloned() {
            if let crate::record::sideband::Side::Fork { pid, ppid } = r {
                parents.insert(pid, ppid);
            }
            sym.observe(&r.record());
        }
        let file = FileKeys {
            by,
            host: info
                .header
                .as_ref()
                .map_or_else(|| "unknown".to_string(), |h| h.hostname.clone()),
            run: run_name(src),
            counts: &counts,
            parents: &parents,
        };
        let events = self.joined.of_run(&Names::of(info.header.as_ref()), event);
        // Every sample of the events shown, in the window or not.
        let all: u64 = info
            .per_event
            .iter()
            .enumerate()
            .filter(|&(i, _)| events.id(i as u32).is_some())
            .map(|(_, t)| t.samples)
            .sum();
        let in_time_before = self.in_time;
        for (&(pid, tid, ip, ev), &(n, period)) in &counts.by_ip {
            let Some(ev) = events.id(ev) else {
                continue;
            };
            self.in_time += n;
            if self.base_per_event.len() <= ev as usize {
                self.base_per_event.resize(ev as usize + 1, (0, 0));
            }
            let b = &mut self.base_per_event[ev as usize];
            b.0 += n;
            b.1 = b.1.saturating_add(period);
            if self.filter.by_name() && !file.keeps(&self.filter, &mut sym, (pid, tid, ip)) {
                continue;
            }
            let (keys, dso) = file.keys(&mut sym, pid, tid, ip);
            // The file is a column only beside code within it.
            let dso: &str = if by.iter().any(|k| k.in_file()) {
                &dso
            } else {
                ""
            };
            self.add(ev, keys, dso, n, period);
        }
        self.all_samples += all.max(self.in_time - in_time_before);
        Ok((counts.info, std::mem::take(&mut sym.warnings)))
    }

    /// Counts `n` samples of `period` in the row of event `ev`, `keys` and file `dso`.
    fn add(&mut self, ev: u32, keys: Vec<String>, dso: &str, n: u64, period: u64) {
        let dso = match self.dsos.get(dso) {
            Some(d) => d.clone(),
            None => {
                let d: std::rc::Rc<str> = dso.into();
                self.dsos.insert(d.clone());
                d
            }
        };
        let e = self.acc.entry((ev, keys, dso)).or_default();
        e.0 += n;
        e.1 = e.1.saturating_add(period);
        self.total += n;
        self.total_period = self.total_period.saturating_add(period);
        if self.per_event.len() <= ev as usize {
            self.per_event.resize(ev as usize + 1, (0, 0));
        }
        let t = &mut self.per_event[ev as usize];
        t.0 += n;
        t.1 = t.1.saturating_add(period);
    }

    /// The events with samples, numbered in order, and the rows, event by event, the
    /// heaviest first.
    fn rows(self) -> (Vec<EventTotal>, Vec<Row>) {
        let Merged {
            acc,
            dsos,
            joined,
            per_event,
            filter,
            base_per_event,
            ..
        } = self;
        // perf's `--percentage absolute` (its default): a row's share of every sample in the
        // window, kept or not.
        let absolute = filter.by_name() && !filter.relative;
        drop(dsos);
        let mut events = Vec::new();
        let mut number = vec![usize::MAX; per_event.len()];
        for (id, &(samples, period)) in per_event.iter().enumerate() {
            if samples > 0 {
                number[id] = events.len();
                events.push(EventTotal {
                    name: joined.names[id].clone(),
                    samples,
                    period,
                });
            }
        }
        let mut rows: Vec<Row> = acc
            .into_iter()
            .map(|((ev, keys, dso), (samples, period))| {
                let event = number[ev as usize];
                let t = &events[event];
                let (ts, tp) = match base_per_event.get(ev as usize) {
                    Some(&b) if absolute => b,
                    _ => (t.samples, t.period),
                };
                Row {
                    event,
                    keys,
                    dso: dso.to_string(),
                    samples,
                    period,
                    percent: share(samples, period, ts, tp),
                }
            })
            .collect();
        rows.sort_by(|a, b| {
            a.event
                .cmp(&b.event)
                .then(b.period.cmp(&a.period))
                .then(b.samples.cmp(&a.samples))
                .then_with(|| a.keys.cmp(&b.keys))
                .then_with(|| a.dso.cmp(&b.dso))
        });
        (events, rows)
    }
}

/// What one file's rows are keyed by: `by`'s keys, with its host, run and processes.
struct FileKeys<'a> {
    by: &'a [By],
    host: String,
    run: String,
    counts: &'a crate::record::counts::Counts,
    parents: &'a HashMap<u32, u32>,
}

impl FileKeys<'_> {
    /// Whether `filter` keeps the samples at `ip` of thread `tid` of process `pid` (`tid`
    /// is counted when the filter names threads).
    fn keeps(
        &self,
        filter: &Filter,
        sym: &mut Symbolizer,
        (pid, tid, ip): (u32, u32, u64),
    ) -> bool {
        if !filter.keeps_thread(pid, tid) {
            return false;
        }
        if !filter.comms.is_empty() && !filter.keeps_comm(&self.counts.comm(pid, self.parents)) {
            return false;
        }
        if filter.dsos.is_empty() && filter.symbols.is_empty() {
            return true;
        }
        let Location { dso, sym: s, vaddr } = sym.resolve(pid, ip);
        filter.keeps_dso(&dso) && filter.keeps_symbol(&label(&dso, s.as_deref(), vaddr))
    }

    /// The values of the keys for the samples at `ip` of thread `tid` of process `pid`, and
    /// its file.
    fn keys(
        &self,
        sym: &mut Symbolizer,
        pid: u32,
        tid: u32,
        ip: u64,
    ) -> (Vec<String>, std::sync::Arc<str>) {
        let Location { dso, sym: s, vaddr } = sym.resolve(pid, ip);
        let keys = self
            .by
            .iter()
            .map(|k| match k {
                By::Host => self.host.clone(),
                By::Run => self.run.clone(),
                By::Comm => self.counts.comm(pid, self.parents),
                By::Pid => pid.to_string(),
                By::Tid => tid.to_string(),
                By::Symbol => label(&dso, s.as_deref(), vaddr),
                By::Dso => dso.to_string(),
                By::Srcline => match sym.source(pid, ip).line {
                    Some((file, line)) => {
                        format!("{}:{line}", crate::text::file_name(&file))
                    }
                    None => label(&dso, s.as_deref(), vaddr),
                },
                By::Pc => format!(
                    "{vaddr:#x}{}",
                    s.as_ref().map(|n| format!(" <{n}>")).unwrap_or_default()
                ),
            })
            .collect();
        (keys, dso)
    }
}

/// A row's share of its event, percent: of the event's period (perf's Overhead), or of its
/// samples when no sample has a period.
pub fn share(samples: u64, period: u64, total_samples: u64, total_period: u64) -> f64 {
    if total_period > 0 {
        100.0 * period as f64 / total_period as f64
    } else if total_samples > 0 {
        100.0 * samples as f64 / total_samples as f64
    } else {
        0.0
    }
}

/// One event's weights: shares are of its period (perf's), or of its samples where no
/// sample has a period.
#[derive(Debug, Clone, Copy)]
struct Weigh {
    total_samples: u64,
    total_period: u64,
}

impl Weigh {
    /// What a (samples, period) pair weighs.
    fn of(self, samples: u64, period: u64) -> u64 {
        if self.total_period > 0 {
            period
        } else {
            samples
        }
    }
    fn total(self) -> u64 {
        self.of(self.total_samples, self.total_period)
    }
    fn pct(self, w: u64) -> Cell {
        let total = self.total();
        Cell::Percent {
            value: if total > 0 {
                100.0 * w as f64 / total as f64
            } else {
                0.0
            },
            places: 2,
        }
    }
}

/// One row of the `--children` table: (frame, children samples, self samples, children
/// weight, self weight).
type ChildRow = (usize, u64, u64, u64, u64);

/// `report --children`: per function (symbol and file), the samples whose stack holds it
/// (Children: itself and its callees, each sample once however often the function recurs)
/// and those sampled in it (Self), as shares of its event's period (perf's Children and
/// Self), a table per event; the busiest `top` rows (0: all). The stacks are the one stack
/// model's ([`crate::symbolize::stacks`]): the same names as every export, one frame per return
/// address.
pub fn children(
    srcs: &[load::Source],
    search: Search,
    top: usize,
    graph: Option<Graph>,
    event: Option<&Select>,
    (filter, max_stack, by): (&Filter, Option<usize>, &[By]),
) -> Result<crate::render::table::Report, LoadError> {
    // `--by KEYS` other than the function alone: rows of those keys.
    let keyed = !by.is_empty() && by != [By::Symbol];
    let by = By::keys(by);
    let runs: Vec<String> = srcs.iter().map(run_name).collect();
    let st =
        crate::symbolize::stacks::collect_filtered(srcs, search, false, event, filter, max_stack)?;
    // perf's `--percentage absolute` (its default): shares of every sample in the window.
    let absolute = filter.by_name() && !filter.relative;
    let sampled = st.sampled_events();
    let several = sampled.len() > 1;
    let mut tables = Vec::new();
    let mut stacked_all = 0u64;
    let mut events_json = Vec::new();
    // One table (and call graph) per event; one empty table without samples.
    let parts: Vec<Option<(u32, u64, u64)>> = if sampled.is_empty() {
        vec![None]
    } else {
        sampled.iter().copied().map(Some).collect()
    };
    let parts_len = parts.len().max(1);
    // The shallowest cut of every event's call graph: (function, depth, why).
    let mut cuts: Option<Cut> = None;
    let mut tally = Tally::of(&st);
    for part in parts {
        let (ev, total_samples, total_period) = part.unwrap_or((u32::MAX, 0, 0));
        let (ts, tp) = match st.filtered.as_ref().and_then(|f| f.base.get(ev as usize)) {
            Some(&b) if absolute => b,
            _ => (total_samples, total_period),
        };
        let weigh = Weigh {
            total_samples: ts,
            total_period: tp,
        };
        let range = tally.of_event(&st, ev);
        let (mut t, mut tree, stacked) = if keyed {
            let stacks = &tally.by_event[range];
            let (t, stacked) = keyed_table(&st, stacks, (&by, &runs), weigh, top);
            (t, None, stacked)
        } else {
            let (rows, stacked) = tally.rows(&st, range.clone(), weigh, top);
            let stacks = &tally.by_event[range];
            // The call graphs of every event share one budget.
            let budget = GRAPH_BUDGET / parts_len as u64;
            let tree = graph.map(|g| {
                let (t, cut) = call_graph(&st, stacks, &rows, g, weigh, budget);
                if let Some(c) = cut {
                    if cuts.as_ref().is_none_or(|k| k.1 > c.1) {
                        cuts = Some(c);
                    }
                }
                t
            });
            let mut t = functions_table(&st, rows, weigh);
            t.left_out = tally.left_out;
            (t, tree, stacked)
        };
        stacked_all += stacked;
        let name = part.map(|_| st.events.names[ev as usize].clone());
        if let Some(n) = &name {
            events_json.push(serde_json::json!({
                "name": n, "samples": total_samples, "period": total_period, "stacked_samples": stacked
            }));
        }
        if several {
            let n = name.clone().unwrap_or_default();
            t.title = Some(format!(
                "# {} of event '{n}', total period {total_period}, {stacked} with a call stack",
                crate::text::plural(total_samples, "sample", "samples")
            ));
            of_event(&mut t, tree.as_mut(), &n, weigh);
        }
        tables.push(t);
        tables.extend(tree);
    }
    let warnings = children_warnings(&st, cuts, stacked_all);
    let total = st.total_samples;
    let stacks: Vec<(String, Option<crate::symbolize::quality::Quality>)> = srcs
        .iter()
        .map(|s| s.name.display().to_string())
        .zip(st.runs.iter().map(|r| r.stacks.clone()))
        .collect();
    let mut runs = st.runs.into_iter().map(|r| r.info);
    let info = runs.next().unwrap_or_default();
    let others: Vec<(String, FileInfo)> = srcs
        .iter()
        .skip(1)
        .map(|s| s.name.display().to_string())
        .zip(runs)
        .collect();
    let (heading, summary) = children_summary(
        (&events_json, total, stacked_all, srcs.len()),
        st.filtered.as_ref(),
        filter,
    );
    let mut r = crate::render::table::Report {
        heading,
        summary,
        tables,
        ..crate::render::table::Report::of_file("plain", &info, warnings)
    };
    for (name, i) in &others {
        r.add_account(name, i);
    }
    crate::render::table::annotate(&mut r, &stacks);
    Ok(r)
}

/// Per frame of a stack table: (children, self) in samples and in weight, reset after
/// each event (only the frames it touched); the thread's name (each stack's root) is not a
/// function.
struct Tally {
    /// The stacks of each event together (a file may name many events: each event's table
    /// costs its own stacks and frames, not all of them).
    by_event: Vec<u32>,
    acc: Vec<(u64, u64, u64, u64)>,
    seen: Vec<u32>,
    touched: Vec<u32>,
    /// What the last [`Tally::rows`] left out past `--top`.
    left_out: LeftOut,
}

impl Tally {
    fn of(st: &StackTable) -> Tally {
        let mut by_event: Vec<u32> = (0..st.stacks.len() as u32).collect();
        by_event.sort_by_key(|&k| (st.stacks[k as usize].event, k));
        Tally {
            by_event,
            acc: vec![(0, 0, 0, 0); st.frames.len()],
            seen: vec![u32::MAX; st.frames.len()],
            touched: Vec::new(),
            left_out: LeftOut::default(),
        }
    }

    /// Where the stacks of event `ev` are in [`Tally::by_event`].
    fn of_event(&self, st: &StackTable, ev: u32) -> std::ops::Range<usize> {
        let lo = self
            .by_event
            .partition_point(|&k| st.stacks[k as usize].event < ev);
        let hi = self
            .by_event
            .partition_point(|&k| st.stacks[k as usize].event <= ev);
        lo..hi
    }

    /// The `--children` rows of the stacks of one event (`range` of
    /// [`Tally::by_event`]), heaviest first, the busiest `top` (0: all); and how many of
    /// their samples have a call stack.
    fn rows(
        &mut self,
        st: &StackTable,
        range: std::ops::Range<usize>,
        weigh: Weigh,
        top: usize,
    ) -> (Vec<ChildRow>, u64) {
        let mut stacked = 0u64;
        for k in self.by_event[range].iter().copied() {
            let s = &st.stacks[k as usize];
            let fr = st.path(s).get(1..).unwrap_or_default();
            // Self goes to the sampled function, before the frames inlined there.
            let Some(leaf) = st.self_frame(s).filter(|_| !fr.is_empty()) else {
                continue;
            };
            let w = weigh.of(s.samples, s.period);
            if fr.len() > 1 + usize::from(s.inlined) {
                stacked += s.samples;
            }
            let l = &mut self.acc[leaf as usize];
            l.1 += s.samples;
            l.3 = l.3.saturating_add(w);
            for &f in fr {
                if self.seen[f as usize] != k {
                    self.seen[f as usize] = k;
                    let a = &mut self.acc[f as usize];
                    if a.0 == 0 {
                        self.touched.push(f);
                    }
                    a.0 += s.samples;
                    a.2 = a.2.saturating_add(w);
                }
            }
        }
        let acc = &mut self.acc;
        let mut rows: Vec<ChildRow> = self
            .touched
            .drain(..)
            .map(|f| {
                let a = std::mem::take(&mut acc[f as usize]);
                (f as usize, a.0, a.1, a.2, a.3)
            })
            .filter(|r| r.1 > 0)
            .collect();
        rows.sort_by(|a, b| {
            b.3.cmp(&a.3)
                .then(b.4.cmp(&a.4))
                .then(b.1.cmp(&a.1))
                .then_with(|| st.frames[a.0].name.cmp(&st.frames[b.0].name))
                .then(a.0.cmp(&b.0))
        });
        if top > 0 && rows.len() > top {
            // What `--top` leaves out: rows, and the samples in their functions (self).
            self.left_out = LeftOut {
                rows: (rows.len() - top) as u64,
                samples: rows[top..].iter().map(|r| r.2).sum(),
                total_samples: weigh.total_samples,
                self_samples: true,
            };
            rows.truncate(top);
        } else {
            self.left_out = LeftOut::default();
        }
        (rows, stacked)
    }
}

/// A row's (children samples, self samples, children weight, self weight).
type Tallied = (u64, u64, u64, u64);

/// `--children --by KEYS`: one event's rows keyed by `by` (function, file, thread's name,
/// recording machine, file name): each sample counted once under every row its stack
/// passes through (Children) and under its sampled function's row (Self), as perf's
/// `--children --sort KEYS`; heaviest first, the busiest `top` (0: all). Returns the table
/// and how many of the samples have a call stack.
fn keyed_table(
    st: &StackTable,
    stacks: &[u32],
    (by, runs): (&[By], &[String]),
    weigh: Weigh,
    top: usize,
) -> (Table, u64) {
    // A function is named with its file unless the file is a key of its own.
    let with_dso = by.contains(&By::Symbol) && !by.contains(&By::Dso);
    let key = |s: &crate::symbolize::stacks::Stack, f: u32| -> Vec<String> {
        let frame = &st.frames[f as usize];
        let mut k: Vec<String> = by
            .iter()
            .map(|b| match b {
                By::Symbol => frame.name.clone(),
                By::Dso => frame.dso.clone(),
                By::Comm => st
                    .path(s)
                    .first()
                    .map(|&r| st.frames[r as usize].name.clone())
                    .unwrap_or_default(),
                By::Host => st
                    .runs
                    .get(s.run as usize)
                    .and_then(|r| r.info.header.as_ref())
                    .map_or_else(|| "unknown".to_string(), |h| h.hostname.clone()),
                By::Run => runs.get(s.run as usize).cloned().unwrap_or_default(),
                // Refused before (`views::view`): stacks do not keep them.
                By::Pid | By::Tid | By::Pc | By::Srcline => String::new(),
            })
            .collect();
        if with_dso {
            k.push(frame.dso.clone());
        }
        k
    };
    // Per key: (children samples, self samples, children weight, self weight).
    let mut acc: HashMap<Vec<String>, Tallied> = HashMap::new();
    let mut stacked = 0u64;
    let mut seen: std::collections::HashSet<Vec<String>> = std::collections::HashSet::new();
    for &k in stacks {
        let s = &st.stacks[k as usize];
        let fr = st.path(s).get(1..).unwrap_or_default();
        let Some(leaf) = st.self_frame(s).filter(|_| !fr.is_empty()) else {
            continue;
        };
        let w = weigh.of(s.samples, s.period);
        if fr.len() > 1 + usize::from(s.inlined) {
            stacked += s.samples;
        }
        let l = acc.entry(key(s, leaf)).or_default();
        l.1 += s.samples;
        l.3 = l.3.saturating_add(w);
        seen.clear();
        for &f in fr {
            let kf = key(s, f);
            if seen.insert(kf.clone()) {
                let a = acc.entry(kf).or_default();
                a.0 += s.samples;
                a.2 = a.2.saturating_add(w);
            }
        }
    }
    let mut rows: Vec<(Vec<String>, Tallied)> = acc.into_iter().collect();
    rows.sort_by(|a, b| {
        b.1 .2
            .cmp(&a.1 .2)
            .then(b.1 .3.cmp(&a.1 .3))
            .then(b.1 .0.cmp(&a.1 .0))
            .then_with(|| a.0.cmp(&b.0))
    });
    let mut columns = vec![
        Column::right("children_pct", "Children", 8),
        Column::right("self_pct", "Self", 8),
        Column::right("children", "Samples", 9),
        Column::right("self", "Self samples", 9),
    ];
    for b in by {
        columns.push(match b {
            By::Symbol => Column::left("name", "Symbol", 40),
            By::Dso => Column::left("dso", "DSO", 24),
            By::Comm => Column::left("comm", "Command", 16),
            By::Host => Column::left("host", "Host", 12),
            By::Run => Column::left("run", "Run", 12),
            By::Pid | By::Tid | By::Pc | By::Srcline => Column::left("key", "Key", 0),
        });
    }
    if with_dso {
        columns.push(Column::left("dso", "DSO", 0));
    }
    let mut t = Table::new("functions", columns);
    t.hidden = vec!["self"];
    if top > 0 && rows.len() > top {
        t.left_out = LeftOut {
            rows: (rows.len() - top) as u64,
            samples: rows[top..].iter().map(|r| r.1 .1).sum(),
            total_samples: weigh.total_samples,
            self_samples: true,
        };
        rows.truncate(top);
    }
    t.rows = rows
        .into_iter()
        .map(|(keys, (c, s, cw, sw))| {
            let mut row = vec![weigh.pct(cw), weigh.pct(sw), Cell::Int(c), Cell::Int(s)];
            let n = keys.len();
            for (i, v) in keys.into_iter().enumerate() {
                let file = (with_dso && i + 1 == n) || by.get(i) == Some(&By::Dso);
                row.push(if file { Cell::file(&v) } else { Cell::text(v) });
            }
            row
        })
        .collect();
    (t, stacked)
}

/// A frame's name: marked `(inlined)` in the text table when the function was only ever
/// seen inlined (as perf marks it); the name alone in CSV and JSON, beside their `inlined`
/// column.
fn name_cell(st: &StackTable, f: u32) -> Cell {
    let name = &st.frames[f as usize].name;
    if st.only_inlined(f) {
        Cell::Shown {
            text: format!("{} (inlined)", crate::text::show(name)),
            value: serde_json::Value::String(name.clone()),
        }
    } else {
        Cell::text(name.clone())
    }
}

/// Whether frame `f` was only ever seen inlined, for CSV and JSON (`true`/`false`): the
/// text table says it in the name.
fn inlined_cell(st: &StackTable, f: u32) -> Cell {
    let i = st.only_inlined(f);
    Cell::Shown {
        text: i.to_string(),
        value: serde_json::Value::Bool(i),
    }
}

/// The `functions` table of one event's `--children` rows.
fn functions_table(st: &StackTable, rows: Vec<ChildRow>, weigh: Weigh) -> Table {
    let mut t = Table::new(
        "functions",
        vec![
            Column::right("children_pct", "Children", 8),
            Column::right("self_pct", "Self", 8),
            Column::right("children", "Samples", 9),
            Column::right("self", "Self samples", 9),
            Column::left("name", "Symbol", 40),
            Column::left("dso", "DSO", 0),
            Column::left("inlined", "Inlined", 0),
        ],
    );
    t.hidden = vec!["self", "inlined"];
    t.rows = rows
        .into_iter()
        .map(|(i, c, s, cw, sw)| {
            let f = &st.frames[i];
            vec![
                weigh.pct(cw),
                weigh.pct(sw),
                Cell::Int(c),
                Cell::Int(s),
                name_cell(st, i as u32),
                Cell::file(&f.dso),
                inlined_cell(st, i as u32),
            ]
        })
        .collect();
    t
}

/// Marks the tables of event `n` (of several): an `event` column and its totals in the
/// summary, and the call graph's title says the event.
fn of_event(t: &mut Table, tree: Option<&mut Table>, n: &str, weigh: Weigh) {
    let mut tree = tree;
    for t in std::iter::once(&mut *t).chain(tree.as_deref_mut()) {
        t.columns.insert(0, Column::left("event", "Event", 0));
        for r in &mut t.rows {
            r.insert(0, Cell::text(n.to_string()));
        }
        t.hidden.push("event");
        t.summary.insert("event".into(), serde_json::json!(n));
        t.summary.insert(
            "total_samples".into(),
            serde_json::json!(weigh.total_samples),
        );
        t.summary
            .insert("total_period".into(), serde_json::json!(weigh.total_period));
    }
    if let Some(tr) = tree {
        tr.title = tr.title.take().map(|x| format!("{x}, event '{n}'"));
    }
}

/// The warnings of a `--children` report: the stacks', where the call graph stopped
/// (`cuts`), and that no sample has a stack.
fn children_warnings(st: &StackTable, cuts: Option<Cut>, stacked_all: u64) -> Vec<String> {
    let mut warnings: Vec<String> = st.warnings.clone();
    warnings.extend(cuts.map(|(f, depth, why)| {
        format!(
            "note: the call graph stops at {} levels (under {}), as deep as {why} allows; --depth N shows fewer",
            depth + 1,
            crate::text::show(&f)
        )
    }));
    if st.total_samples > 0 && stacked_all == 0 {
        warnings.push("note: no sample has a call stack (record with -g, or --call-graph fp): Children equals Self".into());
    }
    warnings
}

/// The heading lines and summary of a `--children` report: its events' totals
/// (`events_json`), samples, samples with a stack and files; what the filters kept.
fn children_summary(
    (events_json, total, stacked_all, files): (&[serde_json::Value], u64, u64, usize),
    filtered: Option<&crate::symbolize::stacks::Filtered>,
    filter: &Filter,
) -> (Vec<String>, serde_json::Map<String, serde_json::Value>) {
    let mut summary = serde_json::Map::new();
    summary.insert("total_samples".into(), serde_json::json!(total));
    summary.insert("stacked_samples".into(), serde_json::json!(stacked_all));
    summary.insert("files".into(), serde_json::json!(files));
    let mut heading = vec![children_heading(
        &mut summary,
        events_json,
        total,
        stacked_all,
    )];
    if let Some(f) = filtered {
        let (line, j) = filter.account(f.all, f.in_time, total);
        heading.push(line);
        summary.insert("filter".into(), j);
    }
    (heading, summary)
}

/// The heading of a `--children` report (`events_json`: each sampled event's totals),
/// its event or events put in `summary`.
fn children_heading(
    summary: &mut serde_json::Map<String, serde_json::Value>,
    events_json: &[serde_json::Value],
    total: u64,
    stacked_all: u64,
) -> String {
    match events_json {
        [one] => {
            summary.insert("event".into(), one["name"].clone());
            format!(
                "# {} of event '{}', {stacked_all} with a call stack; Children: the function and its callees",
                crate::text::plural(total, "sample", "samples"),
                one["name"].as_str().unwrap_or_default()
            )
        }
        [] => format!(
            "# {}, {stacked_all} with a call stack; Children: the function and its callees",
            crate::text::plural(total, "sample", "samples")
        ),
        many => {
            summary.insert("events".into(), serde_json::json!(many));
            format!(
                "# {total} samples of {} events ({}), each event in its own table, {stacked_all} with a call stack; Children: the function and its callees",
                many.len(),
                many.iter()
                    .map(|e| e["name"].as_str().unwrap_or_default())
                    .collect::<Vec<_>>()
                    .join(", ")
            )
        }
    }
}

/// Which way `report --call-graph` walks the stacks from each listed function.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Order {
    /// Down: the functions it calls, and theirs (perf's `caller`).
    Caller,
    /// Up: the functions that call it, and theirs, to the thread's first function (perf's
    /// `callee`).
    Callee,
}

/// `report --call-graph ORDER --depth N`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Graph {
    pub order: Order,
    /// Levels of each listed function's tree, its own row the first (0: all, at most
    /// [`GRAPH_MAX_DEPTH`]): `--depth 3` is the function, what it calls (or its callers) and
    /// theirs.
    pub depth: usize,
}

/// Branches under this share of the event's period (of its samples where no sample has a
/// period) are left out of a call graph (perf's default `--call-graph graph,0.5`).
pub const GRAPH_PERCENT_LIMIT: f64 = 0.5;

/// The most levels of a call graph, the listed function's own row the first (perf's
/// default `--max-stack`, which counts the sampled function too).
pub const GRAPH_MAX_DEPTH: usize = 127;

/// What the `call_graph` tables may hold, in bytes of their rows (estimated: each row's
/// names, its indent and its cells), shared evenly by the events and, within an event's
/// table, by the listed functions: a tree that would hold more stops at the level before (a
/// note says where).
pub const GRAPH_BUDGET: u64 = 8 << 20;

/// Where a call graph stopped short: under which function, at what depth, and why.
type Cut = (String, usize, &'static str);

/// The `call_graph` table of one event's stacks (`stacks`: their indexes): under each of `rows` (the
/// listed functions, busiest first), the tree of the paths its samples take, callees
/// (`Caller`) or callers (`Callee`), each node with the samples that pass through it and
/// their share of the event's weight. A sample counts under a function once, at the
/// function's outermost frame (recursion does not count it twice); siblings are heaviest
/// first, then by name. A tree is built a level at a time from the stacks through its
/// function, branches under [`GRAPH_PERCENT_LIMIT`] left out as they come: its memory is
/// that of the stacks and the rows it shows. `budget` (this event's share of
/// [`GRAPH_BUDGET`]) is shared by the rows. Returns the shallowest cut when a tree was cut
/// short of `g.depth` ([`GRAPH_MAX_DEPTH`], the budget).
fn call_graph(
    st: &StackTable,
    stacks: &[u32],
    rows: &[ChildRow],
    g: Graph,
    weigh: Weigh,
    budget: u64,
) -> (Table, Option<Cut>) {
    let grow = Grow {
        st,
        g,
        weigh,
        limit: ((GRAPH_PERCENT_LIMIT / 100.0 * weigh.total() as f64).ceil() as u64).max(1),
        // The levels under the function's own row.
        levels: match g.depth {
            0 => GRAPH_MAX_DEPTH,
            d => d.min(GRAPH_MAX_DEPTH),
        } - 1,
        budget: budget / rows.len().max(1) as u64,
    };
    let mut cut: Option<Cut> = None;
    let mut t = graph_table(g);
    for &(top, children, _, weight, _) in rows {
        let top = top as u32;
        let (nodes, c) = grow.tree(stacks, top, children, weight);
        if let Some(c) = c {
            if cut.as_ref().is_none_or(|k| k.1 > c.1) {
                cut = Some(c);
            }
        }
        grow.rows(&mut t, &nodes, top);
    }
    t.summary.insert(
        "order".into(),
        serde_json::json!(match g.order {
            Order::Caller => "caller",
            Order::Callee => "callee",
        }),
    );
    t.summary.insert("depth".into(), serde_json::json!(g.depth));
    t.summary.insert(
        "percent_limit".into(),
        serde_json::json!(GRAPH_PERCENT_LIMIT),
    );
    (t, cut)
}

/// The empty `call_graph` table of order `g.order`.
fn graph_table(g: Graph) -> Table {
    let mut t = Table::new(
        "call_graph",
        vec![
            Column::left("function", "Function", 0),
            Column::right("depth", "Depth", 5),
            Column::right("percent", "Percent", 8),
            Column::right("samples", "Samples", 9),
            Column::left("tree", "Call graph", 40),
            Column::left("name", "Symbol", 0),
            Column::left("dso", "DSO", 0),
            Column::left("inlined", "Inlined", 0),
        ],
    );
    t.ranked = false;
    t.hidden = vec!["function", "depth", "name", "inlined"];
    t.title = Some(match g.order {
        Order::Caller => "Call graph (caller): the functions each one calls".into(),
        Order::Callee => "Call graph (callee): the functions that call each one".into(),
    });
    t
}

/// A node of a call graph's tree.
struct Node {
    frame: u32,
    samples: u64,
    weight: u64,
    kids: Vec<usize>,
}

/// The stacks through a node: (stack, where the node's frame is in it).
type Members = Vec<(u32, u32)>;

/// A node of the level being built: (parent, frame, samples, weight, its stacks).
type Next = (usize, u32, u64, u64, Members);

/// How one event's call-graph trees grow.
struct Grow<'a> {
    st: &'a StackTable,
    g: Graph,
    weigh: Weigh,
    /// The least weight a branch shown has.
    limit: u64,
    /// The most levels under a function.
    levels: usize,
    /// What each function's tree may hold, in bytes of its rows.
    budget: u64,
}

impl Grow<'_> {
    /// Frames of a stack after its thread's name, outermost first.
    fn body(&self, s: u32) -> &[u32] {
        let st = self.st;
        st.path(&st.stacks[s as usize]).get(1..).unwrap_or_default()
    }

    /// The next frame of stack `s` from its frame `at`, the way the graph walks.
    fn step(&self, s: u32, at: u32) -> Option<(u32, u32)> {
        let fr = self.body(s);
        let next = match self.g.order {
            Order::Caller => at.checked_add(1)?,
            Order::Callee => at.checked_sub(1)?,
        };
        fr.get(next as usize).map(|&f| (f, next))
    }

    /// What a row of function `top` costs: its names (the function's, the node's twice),
    /// its file, its indent, its cells.
    fn row_cost(&self, top: u32, frame: u32, depth: usize) -> u64 {
        let name = &self.st.frames[top as usize].name;
        let f = &self.st.frames[frame as usize];
        (name.len() + 2 * f.name.len() + f.dso.len() + 3 * depth + 200) as u64
    }

    /// The tree of the paths through function `top` (`children` samples of `weight`);
    /// node 0 is the function itself. Returns where it was cut short, if it was.
    fn tree(
        &self,
        stacks: &[u32],
        top: u32,
        children: u64,
        weight: u64,
    ) -> (Vec<Node>, Option<Cut>) {
        let name = &self.st.frames[top as usize].name;
        let mut cut: Option<Cut> = None;
        let mut cost = self.row_cost(top, top, 0);
        let mut nodes = vec![Node {
            frame: top,
            samples: children,
            weight,
            kids: Vec::new(),
        }];
        // The stacks through each node of the level being built: (stack, where in it).
        let mut level: Vec<(usize, Members)> = vec![(
            0,
            stacks
                .iter()
                .filter_map(|&s| Some((s, self.body(s).iter().position(|&f| f == top)? as u32)))
                .collect(),
        )];
        for depth in 1.. {
            let next = self.next_level(&level);
            if next.is_empty() {
                break;
            }
            let more: u64 = next.iter().map(|n| self.row_cost(top, n.1, depth)).sum();
            let why = if depth > self.levels {
                // As deep as asked, or as perf's --max-stack.
                (self.g.depth == 0 || self.g.depth > GRAPH_MAX_DEPTH)
                    .then_some("perf's --max-stack")
            } else if cost + more > self.budget {
                Some("the call graph's size")
            } else {
                None
            };
            if depth > self.levels || why.is_some() {
                if let Some(why) = why {
                    if cut.as_ref().is_none_or(|c| c.1 > depth - 1) {
                        cut = Some((name.clone(), depth - 1, why));
                    }
                }
                break;
            }
            cost += more;
            level = next
                .into_iter()
                .map(|(parent, frame, samples, weight, members)| {
                    nodes.push(Node {
                        frame,
                        samples,
                        weight,
                        kids: Vec::new(),
                    });
                    let n = nodes.len() - 1;
                    nodes[parent].kids.push(n);
                    (n, members)
                })
                .collect();
        }
        (nodes, cut)
    }

    /// Each node's children: the next frame of each of its stacks; branches too narrow to
    /// show left out, with their stacks.
    fn next_level(&self, level: &[(usize, Members)]) -> Vec<Next> {
        let mut next: Vec<Next> = Vec::new();
        for (parent, members) in level {
            let mut kid_of: HashMap<u32, usize> = HashMap::new();
            let first = next.len();
            for &(s, at) in members {
                let Some((f, at)) = self.step(s, at) else {
                    continue;
                };
                let k = *kid_of.entry(f).or_insert_with(|| {
                    next.push((*parent, f, 0, 0, Vec::new()));
                    next.len() - 1
                });
                let stack = &self.st.stacks[s as usize];
                next[k].2 += stack.samples;
                next[k].3 = next[k]
                    .3
                    .saturating_add(self.weigh.of(stack.samples, stack.period));
                next[k].4.push((s, at));
            }
            // Branches too narrow to show go now, with their stacks.
            let mut k = first;
            for j in first..next.len() {
                if next[j].3 >= self.limit {
                    next.swap(k, j);
                    k += 1;
                }
            }
            next.truncate(k);
        }
        next
    }

    /// The rows of function `top`'s tree `nodes`: depth first, busiest child first.
    fn rows(&self, t: &mut Table, nodes: &[Node], top: u32) {
        let st = self.st;
        let name = &st.frames[top as usize].name;
        let mut todo: Vec<(usize, usize, String)> = vec![(0, 0, String::new())];
        while let Some((n, depth, indent)) = todo.pop() {
            let node = &nodes[n];
            let f = &st.frames[node.frame as usize];
            let mark = if st.only_inlined(node.frame) {
                " (inlined)"
            } else {
                ""
            };
            let tree = if depth == 0 {
                format!("{}{mark}", f.name)
            } else {
                format!("{indent}└─ {}{mark}", f.name)
            };
            t.rows.push(vec![
                Cell::text(name.clone()),
                Cell::Int(depth as u64),
                self.weigh.pct(node.weight),
                Cell::Int(node.samples),
                Cell::text(tree),
                Cell::text(f.name.clone()),
                Cell::file(&f.dso),
                inlined_cell(st, node.frame),
            ]);
            let mut kids = node.kids.clone();
            kids.sort_by(|&a, &b| {
                nodes[b].weight.cmp(&nodes[a].weight).then_with(|| {
                    st.frames[nodes[a].frame as usize]
                        .name
                        .cmp(&st.frames[nodes[b].frame as usize].name)
                })
            });
            let inner = if depth == 0 {
                String::new()
            } else {
                format!("{indent}   ")
            };
            for &k in kids.iter().rev() {
                todo.push((k, depth + 1, inner.clone()));
            }
        }
    }
}

impl Report {
    /// Keeps the `top` busiest rows of each event (0: all); totals and shares stay those of
    /// every row.
    pub fn keep(mut self, top: usize) -> Report {
        if top > 0 {
            let mut kept = vec![0usize; self.events.len()];
            let left_out = &mut self.left_out;
            left_out.resize(self.events.len(), (0, 0));
            self.rows.retain(|r| {
                kept[r.event] += 1;
                if kept[r.event] > top {
                    left_out[r.event].0 += 1;
                    left_out[r.event].1 += r.samples;
                }
                kept[r.event] <= top
            });
            self.rows.shrink_to_fit();
        }
        self
    }

    /// The report in the table model: a column per key (`name` for the code key, or for
    /// the file when it is the only key, as before keys combined), then the file beside
    /// code keys. A recording of several events has a table per event, each titled with
    /// its event and totals, its rows with an `event` column (not in the text table).
    pub fn table(self) -> crate::render::table::Report {
        let several = self.events.len() > 1;
        let (columns, file_column) = self.columns();
        let merged = if self.others.is_empty() {
            String::new()
        } else {
            format!(", {} files merged", 1 + self.others.len())
        };
        // One table per event (one, empty, without samples).
        let mut tables: Vec<Table> = (0..self.events.len().max(1))
            .map(|e| {
                let mut t = Table::new("functions", columns.clone());
                if let (Some(&(rows, samples)), Some(ev)) =
                    (self.left_out.get(e), self.events.get(e))
                {
                    t.left_out = LeftOut {
                        rows,
                        samples,
                        total_samples: ev.samples,
                        self_samples: false,
                    };
                }
                if several {
                    let ev = &self.events[e];
                    t.hidden = vec!["event"];
                    t.title = Some(event_title(ev));
                    t.summary.insert("event".into(), json!(ev.name));
                    t.summary.insert("total_samples".into(), json!(ev.samples));
                    t.summary.insert("total_period".into(), json!(ev.period));
                }
                t
            })
            .collect();
        let by = self.by.clone();
        for r in self.rows {
            let mut row = vec![
                Cell::Percent {
                    value: r.percent,
                    places: 2,
                },
                Cell::Int(r.samples),
                Cell::Int(r.period),
            ];
            if several {
                row.insert(0, Cell::text(self.events[r.event].name.clone()));
            }
            for (k, v) in by.iter().zip(r.keys) {
                row.push(match k {
                    By::Pid | By::Tid => v.parse().map_or(Cell::Text(v), Cell::Int),
                    By::Dso => Cell::file(&v),
                    _ => Cell::Text(v),
                });
            }
            if file_column {
                row.push(Cell::file(&r.dso));
            }
            tables[r.event].rows.push(row);
        }
        let mut summary = serde_json::Map::new();
        summary.insert("total_samples".into(), json!(self.total_samples));
        let heading = heading(
            &mut summary,
            &self.events,
            self.total_samples,
            self.total_period,
            &merged,
        );
        let mut headings = vec![heading];
        if let Some((line, j)) = &self.filtered {
            headings.push(line.clone());
            summary.insert("filter".into(), j.clone());
        }
        if !self.others.is_empty() {
            summary.insert("files".into(), json!(1 + self.others.len()));
        }
        // Each merged file's own warnings (damage, losses), said with its name.
        let mut warnings: Vec<String> = Vec::new();
        let mut damaged = false;
        for (name, info) in &self.others {
            damaged |= info.damaged();
            for w in info.warnings() {
                let (kind, rest) = w.split_once(": ").unwrap_or(("warning", &w));
                warnings.push(format!("{kind}: {}: {rest}", crate::text::show(name)));
            }
        }
        warnings.extend(self.warnings);
        if self.total_samples == 0 && self.filtered.is_some() {
            warnings.push(
                "note: the filters keep no sample (the heading says what they were given)".into(),
            );
        } else if self.total_samples == 0 {
            // An attached process may have slept throughout: cpu-clock counts time on a CPU.
            let attached = self.info.header.as_ref().and_then(|h| {
                match h.command.first().map(String::as_str) {
                    Some("--pid") => Some("process"),
                    Some("--tid") => Some("thread"),
                    _ => None,
                }
            });
            warnings.push(match attached {
                Some(what) => format!("note: the file holds no samples (did the {what} run on a CPU while recorded, or was the period too long?)"),
                None => "note: the file holds no samples (was the workload too short, or the period too long?)".into(),
            });
        }
        let mut report = crate::render::table::Report {
            heading: headings,
            summary,
            tables,
            damaged: self.info.damaged() || damaged,
            ..crate::render::table::Report::of_file("plain", &self.info, warnings)
        };
        for (name, info) in &self.others {
            report.add_account(name, info);
        }
        report
    }

    /// The report's columns: an event's (with several), the weights, a column per key,
    /// then the file beside code keys (then `true`).
    fn columns(&self) -> (Vec<Column>, bool) {
        let only_dso = self.by == [By::Dso];
        let mut columns = vec![
            Column::right("percent", "Overhead", 8),
            Column::right("samples", "Samples", 9),
            Column::right("period", "Period", 12),
        ];
        if self.events.len() > 1 {
            columns.insert(0, Column::left("event", "Event", 0));
        }
        for k in &self.by {
            columns.push(match k {
                By::Host => Column::left("host", "Host", 12),
                By::Run => Column::left("run", "Run", 12),
                By::Comm => Column::left("comm", "Command", 16),
                By::Pid => Column::right("pid", "Pid", 7),
                By::Tid => Column::right("tid", "Tid", 7),
                By::Dso if only_dso => Column::left("name", "DSO", 40),
                By::Dso => Column::left("dso", "DSO", 24),
                By::Symbol => Column::left("name", "Symbol", 40),
                By::Srcline => Column::left("name", "Source line", 40),
                By::Pc => Column::left("name", "PC", 40),
            });
        }
        let file_column = self.by.iter().any(|k| k.in_file()) && !self.by.contains(&By::Dso);
        if file_column {
            columns.push(Column::left("dso", "DSO", 0));
        }
        (columns, file_column)
    }
}

/// The heading of a plain report of `events` (`merged`: how many files, or empty), its
/// totals and event or events put in `summary`.
fn heading(
    summary: &mut serde_json::Map<String, serde_json::Value>,
    events: &[EventTotal],
    total_samples: u64,
    total_period: u64,
    merged: &str,
) -> String {
    match events {
        [one] => {
            summary.insert("total_period".into(), json!(total_period));
            summary.insert("event".into(), json!(one.name));
            format!("{}{merged}", event_title(one))
        }
        [] => {
            summary.insert("total_period".into(), json!(total_period));
            format!(
                "# {}, total period {total_period}{merged}",
                crate::text::plural(total_samples, "sample", "samples")
            )
        }
        many => {
            summary.insert("events".into(), json!(many));
            format!(
                "# {} samples of {} events ({}), each event in its own table{merged}",
                total_samples,
                many.len(),
                many.iter()
                    .map(|e| e.name.as_str())
                    .collect::<Vec<_>>()
                    .join(", ")
            )
        }
    }
}

/// perf's heading of an event's table: `# 1234 samples of event 'cpu-clock', total period N`.
pub fn event_title(e: &EventTotal) -> String {
    format!(
        "# {} of event '{}', total period {}",
        crate::text::plural(e.samples, "sample", "samples"),
        e.name,
        e.period
    )
}
