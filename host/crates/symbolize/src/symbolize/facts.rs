//! The recordings' facts: what each recording read says of itself (its name, host,
//! architecture and events, its workload's executable, what its reader found, how far its
//! call stacks reach), as exports, `report --children` and the HTML page state them, and
//! each fact in words (events with their period or frequency, date, duration, losses).

use crate::record::load::{FileInfo, Source};
use crate::symbolize::quality::Quality;

/// One recording read.
#[derive(Debug, Default)]
pub struct Run {
    /// The file's name without its extension (pprof's `run` label, Parquet's `run`).
    pub name: String,
    /// The header's hostname and architecture ("unknown" without a header).
    pub host: String,
    pub arch: String,
    /// The header's event names, in sample `event` order.
    pub events: Vec<String>,
    /// The workload's executable as the recording mapped it (pprof's main mapping): the
    /// first file the process of the recording's first `exec` maps after its last `exec`
    /// (past wrappers such as `env` or a shell script; the last by its latest samples'
    /// times, as the file's order of CPUs' rings need not be: `executable.rs`), else (an
    /// attached process) the first file mapped; `None` when it maps none.
    pub executable: Option<String>,
    pub info: FileInfo,
    /// How far its call stacks reach; `None` when its events take none.
    pub stacks: Option<Quality>,
}

/// `perf_event_attr`'s `freq` flag (bit 10): `sample_period_or_freq` is a frequency.
const ATTR_FREQ: u64 = 1 << 10;

impl Run {
    /// The facts of `src`, read as `info`, its stacks reaching as `stacks` says.
    pub fn of(src: &Source, info: FileInfo, stacks: Option<Quality>) -> Run {
        let h = info.header.as_ref();
        Run {
            name: src
                .name
                .file_stem()
                .map_or("run".into(), |s| s.to_string_lossy().into_owned()),
            host: h.map_or("unknown".into(), |h| h.hostname.clone()),
            arch: h.map_or("unknown".into(), |h| h.arch.name().to_string()),
            events: h.map_or_else(Vec::new, |h| {
                h.events.iter().map(|e| e.name.clone()).collect()
            }),
            executable: None,
            info,
            stacks,
        }
    }

    /// The events as they were opened, each with its period or frequency:
    /// `cpu-clock (period 250000 ns); page-faults (period 1)`, `cycles (frequency 4000 Hz)`,
    /// `task-clock (counted)` for an event that only counts.
    pub fn events_text(&self) -> String {
        let Some(h) = &self.info.header else {
            return "unknown (the header is lost)".into();
        };
        if h.events.is_empty() {
            return "none".into();
        }
        h.events
            .iter()
            .map(|e| {
                let n = e.attr.sample_period_or_freq;
                let how = if e.attr.flags & ATTR_FREQ != 0 {
                    format!("frequency {n} Hz")
                } else if n == 0 {
                    "counted".into()
                } else if e.name == crate::record::events::OFF_CPU {
                    "each switch, weighed by the ns off the CPU".into()
                } else if crate::record::events::is_ns(&e.name) {
                    format!("period {n} ns")
                } else {
                    format!("period {n}")
                };
                format!("{} ({how})", e.name)
            })
            .collect::<Vec<_>>()
            .join("; ")
    }

    /// When recording started, in UTC to the second: `2026-12-03 07:23:30 UTC`.
    pub fn date_text(&self) -> String {
        let ns = self.info.header.as_ref().map_or(0, |h| h.start_realtime_ns);
        if ns == 0 {
            return "unknown".into();
        }
        let secs = i64::try_from(ns / 1_000_000_000).unwrap_or(i64::MAX);
        chrono::DateTime::from_timestamp(secs, 0).map_or_else(
            || "unknown".into(),
            |d| d.format("%Y-%m-%d %H:%M:%S UTC").to_string(),
        )
    }

    /// How long it recorded, from its trailer: `1.503 s`.
    pub fn duration_text(&self) -> String {
        match &self.info.trailer {
            Some(t) => format!("{:.3} s", t.duration_ns as f64 / 1e9),
            None => "unknown (no trailer: the agent did not finish)".into(),
        }
    }

    /// What was lost: samples the kernel lost (and their share), throttling, samples the
    /// agent dropped, a missing trailer, damage; `none`.
    pub fn losses_text(&self) -> String {
        let i = &self.info;
        let mut losses = Vec::new();
        if i.kernel_lost > 0 {
            let all = i.samples.saturating_add(i.kernel_lost);
            losses.push(format!(
                "{} samples lost by the kernel ({:.1}% of the {all} it produced)",
                i.kernel_lost,
                100.0 * i.kernel_lost as f64 / all as f64
            ));
        }
        if let Some(t) = &i.trailer {
            if t.throttled > 0 {
                losses.push(format!("{} throttled", t.throttled));
            }
            if t.dropped > 0 {
                losses.push(format!("{} dropped by the agent", t.dropped));
            }
        } else {
            losses.push("no trailer: the agent did not finish".into());
        }
        if !i.losses.is_clean() {
            losses.push(format!(
                "damaged: {}",
                labperf_common::decode::describe_losses(&i.losses)
            ));
        }
        if losses.is_empty() {
            losses.push("none".into());
        }
        losses.join("; ")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use labperf_common::{Arch, Attr, CpuId, Endian, EventDesc, Header, Trailer};

    fn event(name: &str, n: u64, flags: u64) -> EventDesc {
        EventDesc {
            name: name.into(),
            attr: Attr {
                sample_period_or_freq: n,
                flags,
                ..Attr::default()
            },
            leader: None,
        }
    }

    fn run(events: Vec<EventDesc>, realtime_ns: u64) -> Run {
        let header = Header {
            agent_version: String::new(),
            arch: Arch::X86_64,
            endian: Endian::Little,
            kernel_release: String::new(),
            cpu: CpuId::Unknown {
                cpuinfo: String::new(),
            },
            hostname: String::new(),
            command: vec![],
            clock_id: 1,
            start_time_ns: 0,
            start_realtime_ns: realtime_ns,
            events,
            mode: String::new(),
            notes: vec![],
        };
        Run {
            info: FileInfo {
                header: Some(header),
                trailer: Some(Trailer {
                    duration_ns: 1_503_400_000,
                    ..Trailer::default()
                }),
                samples: 900,
                ..FileInfo::default()
            },
            ..Run::default()
        }
    }

    #[test]
    fn each_fact_in_words() {
        let mut r = run(
            vec![
                event("cpu-clock", 250_000, 0),
                event("cycles", 4000, ATTR_FREQ),
                event("page-faults", 1, 0),
                event("task-clock", 0, 0),
            ],
            // 2026-12-03 07:23:30.86 UTC.
            1_796_282_610_859_562_615,
        );
        assert_eq!(
            r.events_text(),
            "cpu-clock (period 250000 ns); cycles (frequency 4000 Hz); page-faults (period 1); task-clock (counted)"
        );
        assert_eq!(r.date_text(), "2026-12-03 07:23:30 UTC");
        assert_eq!(r.duration_text(), "1.503 s");
        assert_eq!(r.losses_text(), "none");
        r.info.kernel_lost = 100;
        if let Some(t) = r.info.trailer.as_mut() {
            t.throttled = 2;
        }
        assert_eq!(
            r.losses_text(),
            "100 samples lost by the kernel (10.0% of the 1000 it produced); 2 throttled"
        );
        r.info.trailer = None;
        r.info.header.as_mut().unwrap().start_realtime_ns = 0;
        assert_eq!(r.date_text(), "unknown");
        assert_eq!(
            r.duration_text(),
            "unknown (no trailer: the agent did not finish)"
        );
        assert!(r
            .losses_text()
            .ends_with("no trailer: the agent did not finish"));
    }
}
