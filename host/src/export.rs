//! `labperf export`: a recording's samples as stacks (the sampled function, then its callers
//! where the recording has callchains) in formats other tools read: folded stacks and SVG
//! flame graphs (via `inferno`), and pprof's gzipped `profile.proto` (messages below, with
//! `prost`; no `protoc`).

use crate::load::{self, FileInfo, LoadError, Source};
use crate::symbols::{label, Search, Symbolizer};
use labperf_common::Record;
use std::collections::HashMap;
use std::io::Write;

/// The formats `labperf export` writes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Format {
    /// Brendan Gregg's collapsed stacks: `outer;…;leaf COUNT` per line (samples).
    Folded,
    /// An SVG flame graph (searchable, works offline).
    Svg,
    /// pprof's profile.proto, gzipped (`go tool pprof`, Pyroscope, Parca).
    Pprof,
}

/// One function of a stack.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Frame {
    /// The function, or `file+0xADDRESS` when unknown (see [`label`]).
    pub name: String,
    /// The mapped file.
    pub dso: String,
}

/// Samples aggregated per distinct stack.
#[derive(Debug)]
pub struct Stacks {
    pub frames: Vec<Frame>,
    /// (frame indexes, outermost first; samples; sum of periods), most samples first.
    pub stacks: Vec<(Vec<u32>, u64, u64)>,
    pub total_samples: u64,
    pub info: FileInfo,
    pub warnings: Vec<String>,
}

/// A process, its thread's name and its stack's addresses, leaf first.
type RawStack = (u32, u32, Vec<u64>);

/// Reads `src` and aggregates its samples per stack, each address named by the symbolizer.
/// Return addresses (callers) are looked up one byte back, inside their call instruction.
pub fn collect(src: &Source, search: Search) -> Result<Stacks, LoadError> {
    // Distinct (pid, addresses) first: the side-band records a name needs may come after
    // the samples that need it.
    let mut raw: HashMap<RawStack, (u64, u64)> = HashMap::new();
    // Samples without callchains (most recordings): keyed without an allocation.
    type Fx = std::hash::BuildHasherDefault<load::FxHasher>;
    let mut flat: HashMap<(u32, u32, u64), (u64, u64), Fx> = HashMap::default();
    let mut side: Vec<Record> = Vec::new();
    // Each thread's name as of the sample (perf script's comm): Comm records name a
    // thread, a fork passes the parent's name on. Names are numbered in `comms`.
    let mut comms: Vec<String> = Vec::new();
    let mut comm_of: HashMap<u32, u32> = HashMap::new();
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
        Record::Sample(s) if s.callchain.is_empty() || s.callchain == [s.ip] => {
            let comm = comm_of
                .get(&s.tid)
                .or_else(|| comm_of.get(&s.pid))
                .copied()
                .unwrap_or(u32::MAX);
            let e = flat.entry((s.pid, comm, s.ip)).or_default();
            e.0 += 1;
            e.1 = e.1.saturating_add(s.period);
        }
        Record::Sample(s) => {
            let mut addrs = Vec::with_capacity(1 + s.callchain.len());
            addrs.push(s.ip);
            let callers = match s.callchain.first() {
                Some(&first) if first == s.ip => &s.callchain[1..],
                _ => &s.callchain[..],
            };
            addrs.extend_from_slice(callers);
            let comm = comm_of
                .get(&s.tid)
                .or_else(|| comm_of.get(&s.pid))
                .copied()
                .unwrap_or(u32::MAX);
            let e = raw.entry((s.pid, comm, addrs)).or_default();
            e.0 += 1;
            e.1 = e.1.saturating_add(s.period);
        }
        other => side.push(other.clone()),
    })?;
    let mut sym = Symbolizer::new(search);
    sym.recorded_on(info.header.as_ref(), info.header_ext.as_ref());
    for r in &side {
        sym.observe(r);
    }
    drop(side);
    let mut frames: Vec<Frame> = Vec::new();
    let mut index: HashMap<Frame, u32> = HashMap::new();
    let mut merged: HashMap<Vec<u32>, (u64, u64)> = HashMap::new();
    let mut total = 0u64;
    // In address order, so that frame numbering and the output are the same on every run.
    let mut raw: Vec<(RawStack, (u64, u64))> = raw.into_iter().collect();
    raw.extend(
        flat.into_iter()
            .map(|((pid, comm, ip), v)| ((pid, comm, vec![ip]), v)),
    );
    raw.sort_unstable_by(|a, b| a.0.cmp(&b.0));
    for ((pid, comm, addrs), (n, period)) in raw {
        let mut stack: Vec<u32> = addrs
            .iter()
            .enumerate()
            .map(|(i, &a)| {
                let at = if i == 0 { a } else { a.wrapping_sub(1) };
                let l = sym.resolve(pid, at);
                let f = Frame {
                    name: label(&l.dso, l.sym.as_deref(), l.vaddr),
                    dso: l.dso.to_string(),
                };
                *index.entry(f.clone()).or_insert_with(|| {
                    frames.push(f);
                    frames.len() as u32 - 1
                })
            })
            .collect();
        // The outermost frame: the thread's name (perf's flame graphs start there too).
        let root = Frame {
            name: comms
                .get(comm as usize)
                .cloned()
                .unwrap_or_else(|| format!("pid {pid}")),
            dso: String::new(),
        };
        stack.push(*index.entry(root.clone()).or_insert_with(|| {
            frames.push(root);
            frames.len() as u32 - 1
        }));
        stack.reverse();
        let e = merged.entry(stack).or_default();
        e.0 += n;
        e.1 = e.1.saturating_add(period);
        total += n;
    }
    let mut stacks: Vec<(Vec<u32>, u64, u64)> =
        merged.into_iter().map(|(s, (n, p))| (s, n, p)).collect();
    let names = |s: &[u32]| -> Vec<&str> {
        s.iter()
            .map(|&i| frames[i as usize].name.as_str())
            .collect()
    };
    stacks.sort_by(|a, b| b.1.cmp(&a.1).then_with(|| names(&a.0).cmp(&names(&b.0))));
    Ok(Stacks {
        frames,
        stacks,
        total_samples: total,
        warnings: std::mem::take(&mut sym.warnings),
        info,
    })
}

/// A frame's name as one folded-stack element: `;` separates frames and the last space
/// separates the count, so neither may appear in a name; control characters are escaped.
fn folded_name(name: &str) -> String {
    crate::text::show_text(name)
        .chars()
        .map(|c| if c == ';' || c == ' ' { '_' } else { c })
        .collect()
}

impl Stacks {
    /// Folded stacks, one line per distinct stack: `thread;outer;…;leaf PERIOD` (the sum of
    /// the samples' periods, as `perf script | inferno-collapse-perf` weighs them).
    pub fn folded(&self) -> String {
        let names: Vec<String> = self.frames.iter().map(|f| folded_name(&f.name)).collect();
        let mut out = String::new();
        for (stack, _, n) in &self.stacks {
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
        let folded = self.folded();
        let mut o = inferno::flamegraph::Options::default();
        o.title = match &self.info.header {
            Some(h) => format!(
                "labperf: {} on {} ({} samples)",
                crate::text::show_text(&h.command.join(" ")),
                crate::text::show_text(&h.hostname),
                self.total_samples
            ),
            None => format!("labperf ({} samples)", self.total_samples),
        };
        o.count_name = match self.info.header.as_ref().and_then(|h| h.events.first()) {
            Some(e) if matches!(e.name.as_str(), "cpu-clock" | "task-clock") => "ns".into(),
            _ => "events".into(),
        };
        inferno::flamegraph::from_lines(&mut o, folded.lines(), w)
    }

    /// pprof's profile.proto, gzipped. Values: samples, then the sum of periods (in
    /// nanoseconds for cpu-clock and task-clock, events otherwise). Every sample carries
    /// the labels `host`, `arch` and `run`.
    pub fn pprof(&self, run: &str) -> std::io::Result<Vec<u8>> {
        use pprof::*;
        let mut strings = Strings::default();
        let (host, arch, event) = match &self.info.header {
            Some(h) => (
                h.hostname.clone(),
                h.arch.name().to_string(),
                h.events
                    .first()
                    .map_or("samples".into(), |e| e.name.clone()),
            ),
            None => ("unknown".into(), "unknown".into(), "samples".into()),
        };
        let unit = if matches!(event.as_str(), "cpu-clock" | "task-clock") {
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
        let labels = vec![
            Label::str(strings.id("host"), strings.id(&host)),
            Label::str(strings.id("arch"), strings.id(&arch)),
            Label::str(strings.id("run"), strings.id(run)),
        ];
        let sample = self
            .stacks
            .iter()
            .map(|(stack, n, period)| Sample {
                // Leaf first.
                location_id: stack.iter().rev().map(|&i| i as u64 + 1).collect(),
                value: vec![*n as i64, (*period).min(i64::MAX as u64) as i64],
                label: labels.clone(),
            })
            .collect();
        let header = self.info.header.as_ref();
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
        let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
        gz.write_all(&prost::Message::encode_to_vec(&p))?;
        gz.finish()
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
        Stacks {
            frames: vec![f("main"), f("a;b c"), f("leaf")],
            stacks: vec![(vec![0, 2], 7, 70), (vec![0, 1, 2], 3, 30)],
            total_samples: 10,
            info: FileInfo::default(),
            warnings: vec![],
        }
    }

    #[test]
    fn folded_lines_are_outermost_first_with_separators_replaced() {
        // Weighed by period, as inferno-collapse-perf weighs perf script.
        assert_eq!(stacks().folded(), "main;leaf 70\nmain;a_b_c;leaf 30\n");
    }

    #[test]
    fn pprof_round_trips_through_prost_with_leaf_first_locations() {
        use prost::Message;
        let gz = stacks().pprof("run1").unwrap();
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
