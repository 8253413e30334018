//! pprof's gzipped profile.proto (github.com/google/pprof, proto/profile.proto): the
//! fields labperf writes, as `prost` messages (no `protoc`), and the profile of a
//! [`StackTable`], its samples written one by one.

use super::facts::StackFacts;
use crate::symbolize::stacks::StackTable;
use std::collections::HashMap;
use std::io::Write;

/// The most events a pprof profile has a sample type for: each sample holds a value per
/// sample type (a crafted file can name thousands of events).
pub const PPROF_EVENTS: usize = 64;

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

/// pprof's format of a [`StackTable`] (a trait: `StackTable` is labperf-symbolize's, and a
/// type's inherent methods belong to its own crate).
pub trait ToPprof {
    fn pprof(&self, w: impl Write) -> std::io::Result<()>;
}

impl ToPprof for StackTable {
    /// pprof's profile.proto, gzipped. Values: samples, then the sum of periods of each
    /// event, a sample type per event named after it (`cpu-clock/nanoseconds`,
    /// `page-faults/count`: nanoseconds for cpu-clock and task-clock, events otherwise), a
    /// stack's samples counting in its own event's only. Every sample carries its
    /// recording's labels `host`, `arch` and `run`, and with several events `event`.
    fn pprof(&self, w: impl Write) -> std::io::Result<()> {
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
        let (sample_type, value_of) = self.pprof_sample_types(&mut strings, &sampled);
        let period_type = sample_type[1].clone();
        let (mapping, function, location) = self.pprof_frames(&mut strings);
        let labels = Labels {
            runs: self
                .runs
                .iter()
                .map(|r| {
                    vec![
                        Label::str(strings.id("host"), strings.id(&r.host)),
                        Label::str(strings.id("arch"), strings.id(&r.arch)),
                        Label::str(strings.id("run"), strings.id(&r.name)),
                    ]
                })
                .collect(),
            event_key: strings.id("event"),
            events: self.events.names.iter().map(|n| strings.id(n)).collect(),
            several: sampled.len() > 1,
        };
        let header = self.header();
        // The samples are written one by one between the sample types (field 1) and the
        // tables (fields 3 on): the fields in order, and never the whole profile in memory.
        let sample_type_len = sample_type.len();
        let head = Profile {
            sample_type,
            ..Profile::default()
        };
        let tail = Profile {
            mapping,
            location,
            function,
            string_table: strings.table,
            time_nanos: header.map_or(0, |h| h.start_realtime_ns.min(i64::MAX as u64) as i64),
            duration_nanos: 0,
            default_sample_type: period_type.r#type,
            period_type: Some(period_type),
            period: self.pprof_period(),
            ..Profile::default()
        };
        // Gzip's fastest level, as Go's runtime/pprof writes profiles.
        let mut gz = flate2::write::GzEncoder::new(w, flate2::Compression::fast());
        gz.write_all(&prost::Message::encode_to_vec(&head))?;
        self.pprof_samples(&mut gz, sample_type_len, &value_of, &labels)?;
        gz.write_all(&prost::Message::encode_to_vec(&tail))?;
        gz.finish()?;
        Ok(())
    }
}

/// What [`ToPprof`] builds a profile from.
trait PprofParts {
    fn pprof_sample_types(
        &self,
        strings: &mut Strings,
        sampled: &[(u32, u64, u64)],
    ) -> (Vec<ValueType>, HashMap<u32, usize>);
    fn pprof_frames(&self, strings: &mut Strings) -> (Vec<Mapping>, Vec<Function>, Vec<Location>);
    fn pprof_period(&self) -> i64;
    fn pprof_samples(
        &self,
        gz: &mut impl Write,
        sample_types: usize,
        value_of: &HashMap<u32, usize>,
        labels: &Labels,
    ) -> std::io::Result<()>;
}

impl PprofParts for StackTable {
    /// The sample types: samples, then each sampled event's periods (the first event's
    /// when none is sampled); and the value index of each event's periods (1 + its place
    /// among the sampled ones).
    fn pprof_sample_types(
        &self,
        strings: &mut Strings,
        sampled: &[(u32, u64, u64)],
    ) -> (Vec<ValueType>, HashMap<u32, usize>) {
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
                unit: strings.id(crate::record::events::unit(name)),
            });
        }
        if sampled.is_empty() {
            let event = self.event().unwrap_or("samples").to_string();
            sample_type.push(ValueType {
                r#type: strings.id(&event),
                unit: strings.id(crate::record::events::unit(&event)),
            });
        }
        (sample_type, value_of)
    }

    /// One mapping per file, the first (pprof's main binary) the workload's executable,
    /// one function and one location per frame (ids from 1); a thread's frame (its name,
    /// no file) has no mapping.
    fn pprof_frames(&self, strings: &mut Strings) -> (Vec<Mapping>, Vec<Function>, Vec<Location>) {
        let mut mappings: Vec<Mapping> = Vec::new();
        let mut mapping_of: HashMap<&str, u64> = HashMap::new();
        let mut function = Vec::with_capacity(self.frames.len());
        let mut location = Vec::with_capacity(self.frames.len());
        // A file's mapping, added when first seen (0: no file).
        fn mapping<'a>(
            mappings: &mut Vec<Mapping>,
            mapping_of: &mut HashMap<&'a str, u64>,
            strings: &mut Strings,
            dso: &'a str,
        ) -> u64 {
            if dso.is_empty() {
                return 0;
            }
            let next = mappings.len() as u64 + 1;
            *mapping_of.entry(dso).or_insert_with(|| {
                mappings.push(Mapping {
                    id: next,
                    filename: strings.id(dso),
                    has_functions: true,
                    ..Mapping::default()
                });
                next
            })
        }
        if let Some(exe) = self.runs.iter().find_map(|r| r.executable.as_deref()) {
            mapping(&mut mappings, &mut mapping_of, strings, exe);
        }
        for (i, f) in self.frames.iter().enumerate() {
            let id = i as u64 + 1;
            let mapping_id = mapping(&mut mappings, &mut mapping_of, strings, &f.dso);
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
        (mappings, function, location)
    }

    /// The fixed period of the first sampled event (none with a frequency: flag bit 10).
    fn pprof_period(&self) -> i64 {
        self.header()
            .and_then(|h| {
                let name = self.event()?;
                h.events.iter().find(|e| e.name == name)
            })
            .filter(|e| e.attr.flags & (1 << 10) == 0)
            .map_or(0, |e| {
                e.attr.sample_period_or_freq.min(i64::MAX as u64) as i64
            })
    }

    /// Writes each stack as a sample (field 2) to `gz`, leaf first, its values at
    /// `value_of` its event's index among `sample_types` values, with its labels.
    fn pprof_samples(
        &self,
        gz: &mut impl Write,
        sample_types: usize,
        value_of: &HashMap<u32, usize>,
        labels: &Labels,
    ) -> std::io::Result<()> {
        let mut buf = Vec::new();
        for s in &self.stacks {
            let mut value = vec![0i64; sample_types];
            value[0] = s.samples as i64;
            value[value_of.get(&s.event).copied().unwrap_or(1)] =
                s.period.min(i64::MAX as u64) as i64;
            let mut label = labels.runs.get(s.run as usize).cloned().unwrap_or_default();
            if labels.several {
                label.push(Label::str(
                    labels.event_key,
                    labels.events[s.event as usize],
                ));
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
        Ok(())
    }
}

/// The labels of the samples: each recording's (`host`, `arch`, `run`), and with several
/// events, `event` (string ids).
struct Labels {
    runs: Vec<Vec<Label>>,
    event_key: i64,
    events: Vec<i64>,
    several: bool,
}
