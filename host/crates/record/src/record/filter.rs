//! Report filters as perf spells them (`--comm`, `--pid`, `--tid`, `--dsos`, `--symbols`,
//! `--time`): which samples a report keeps, applied where samples are read (the flat
//! counts, `record::counts`, and the stack model, `symbolize::stacks`), so that every view,
//! export and page built on them gets them; and how a filtered report says so.

use crate::record::load::{LoadError, Source};
use labperf_common::{Decoder, FrameEvent, Light};

/// The samples a report keeps. Empty lists keep everything.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Filter {
    /// Process names (`--by comm`'s: the main thread's name; in call stacks, the thread's).
    pub comms: Vec<String>,
    pub pids: Vec<u32>,
    pub tids: Vec<u32>,
    /// Mapped files, by path or by file name.
    pub dsos: Vec<String>,
    /// Sampled functions, by name as the reports show them.
    pub symbols: Vec<String>,
    /// `--time`: the windows, as given.
    pub time: Option<Times>,
    /// Shares of the kept samples (`--percentage relative`) instead of perf's default,
    /// of every sample the time window holds (`absolute`).
    pub relative: bool,
}

/// `--time`: windows of the recording's clock, absolute or in percent of its samples' span.
#[derive(Debug, Clone, PartialEq)]
pub struct Times {
    /// As given, for the heading.
    pub text: String,
    pub spans: Vec<Span>,
}

/// One window of `--time`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Span {
    /// Nanoseconds on the recording's clock, inclusive; `None`: open.
    Abs(Option<u64>, Option<u64>),
    /// Fractions (0 to 1) of the span from the first sample to the last, as perf's
    /// `10%/4` (the fourth tenth) and `0%-10%`.
    Pct(f64, f64),
}

/// `--time`'s windows resolved for one recording: inclusive nanosecond ranges.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Window(pub Vec<(u64, u64)>);

impl Window {
    pub fn keeps(&self, t: u64) -> bool {
        self.0.iter().any(|&(a, b)| a <= t && t <= b)
    }
}

/// Seconds as perf writes them (`1234.567891`) in nanoseconds, exactly.
fn secs_ns(s: &str) -> Result<u64, String> {
    let bad = || {
        format!("'{s}' is not a time in seconds (perf's seconds.nanoseconds, as `perf script` prints them)")
    };
    let (int, frac) = s.split_once('.').unwrap_or((s, ""));
    if (int.is_empty() && frac.is_empty())
        || !int.bytes().all(|b| b.is_ascii_digit())
        || !frac.bytes().all(|b| b.is_ascii_digit())
        || frac.len() > 9
    {
        return Err(bad());
    }
    let i: u64 = if int.is_empty() {
        0
    } else {
        int.parse().map_err(|_| bad())?
    };
    let f: u64 = if frac.is_empty() {
        0
    } else {
        format!("{frac:0<9}").parse().map_err(|_| bad())?
    };
    i.checked_mul(1_000_000_000)
        .and_then(|n| n.checked_add(f))
        .ok_or_else(bad)
}

/// A percentage `N%` as a fraction.
fn pct(s: &str) -> Result<f64, String> {
    let v: f64 = s
        .strip_suffix('%')
        .and_then(|n| n.trim().parse().ok())
        .ok_or_else(|| format!("'{s}' is not a percentage (N%)"))?;
    if !(0.0..=100.0).contains(&v) {
        return Err(format!("'{s}' is not a percentage from 0% to 100%"));
    }
    Ok(v / 100.0)
}

impl std::str::FromStr for Times {
    type Err = String;
    /// perf's `--time`: `START,END` in seconds (either may be left out; several separated by
    /// spaces), or percent slices `A%/N` (the Nth slice of A%) and `A%-B%`, comma-separated.
    fn from_str(s: &str) -> Result<Times, String> {
        let mut spans = Vec::new();
        if s.contains('%') {
            for part in s.split(',').map(str::trim).filter(|p| !p.is_empty()) {
                if let Some((size, n)) = part.split_once('/') {
                    let size = pct(size)?;
                    let n: u32 = n.trim().parse().ok().filter(|&n| n > 0).ok_or_else(|| {
                        format!("'{part}': the slice's number after / counts from 1")
                    })?;
                    let (a, b) = (size * f64::from(n - 1), size * f64::from(n));
                    if size <= 0.0 || b > 1.0 + 1e-9 {
                        return Err(format!(
                            "'{part}': there is no slice {n} of {}% (the slices end at 100%)",
                            size * 100.0
                        ));
                    }
                    spans.push(Span::Pct(a, b.min(1.0)));
                } else if let Some((a, b)) = part.split_once('-') {
                    let (a, b) = (pct(a)?, pct(b)?);
                    if a > b {
                        return Err(format!("'{part}': the start is after the end"));
                    }
                    spans.push(Span::Pct(a, b));
                } else {
                    return Err(format!(
                        "'{part}': percent windows are A%/N (the Nth slice of A%) or A%-B%"
                    ));
                }
            }
        } else {
            for part in s.split_whitespace() {
                let Some((a, b)) = part.split_once(',') else {
                    return Err(format!(
                        "'{part}': a window is START,END in seconds (either may be left out: START, or ,END), or percent slices as 10%/4 or 0%-10%"
                    ));
                };
                let a = (!a.is_empty()).then(|| secs_ns(a)).transpose()?;
                let b = (!b.is_empty()).then(|| secs_ns(b)).transpose()?;
                if let (Some(a), Some(b)) = (a, b) {
                    if a > b {
                        return Err(format!("'{part}': the start is after the end"));
                    }
                }
                spans.push(Span::Abs(a, b));
            }
        }
        if spans.is_empty() {
            return Err(
                "--time takes START,END in seconds, or percent slices as 10%/4 or 0%-10%".into(),
            );
        }
        Ok(Times {
            text: s.to_string(),
            spans,
        })
    }
}

impl Times {
    /// The windows of `src`: percent slices of its first to last sample time (perf's
    /// rounding: each slice but the last ends a nanosecond before the next starts, so the
    /// slices part the samples). Reads `src` for its samples' times when a slice is in
    /// percent.
    pub fn window(&self, src: &Source) -> Result<Window, LoadError> {
        let range = if self.spans.iter().any(|s| matches!(s, Span::Pct(..))) {
            sample_times(src)?
        } else {
            None
        };
        let mut w = Vec::new();
        for s in &self.spans {
            match *s {
                Span::Abs(a, b) => w.push((a.unwrap_or(0), b.unwrap_or(u64::MAX))),
                Span::Pct(a, b) => {
                    let Some((first, last)) = range else {
                        continue;
                    };
                    let total = (last - first) as f64;
                    let start = first + (a * total).round() as u64;
                    let mut end = first + (b * total).round() as u64;
                    if end > start && b < 1.0 {
                        end -= 1;
                    }
                    w.push((start, end));
                }
            }
        }
        Ok(Window(w))
    }
}

/// The first and last sample times of `src` (`None` without samples).
pub fn sample_times(src: &Source) -> Result<Option<(u64, u64)>, LoadError> {
    let mut dec = Decoder::whole(src.data()?);
    let mut range: Option<(u64, u64)> = None;
    while let Some(e) = dec.poll_frame() {
        if let FrameEvent::Records(mut rr) = e {
            let _ = rr.for_each_light(|l| {
                if let Light::Sample(s) = l {
                    range = Some(match range {
                        None => (s.time, s.time),
                        Some((a, b)) => (a.min(s.time), b.max(s.time)),
                    });
                }
            });
        }
    }
    Ok(range)
}

/// A comma-separated list of names, the commas within `<>`, `()` or `[]` kept (C++ names:
/// `std::map<int, int>::find,main` is two).
pub fn split_names(s: &str) -> Vec<String> {
    let (mut out, mut cur, mut depth) = (Vec::new(), String::new(), 0i32);
    for c in s.chars() {
        match c {
            '<' | '(' | '[' => depth += 1,
            '>' | ')' | ']' => depth -= 1,
            ',' if depth <= 0 => {
                out.push(std::mem::take(&mut cur));
                continue;
            }
            _ => {}
        }
        cur.push(c);
    }
    out.push(cur);
    out.retain(|n| !n.is_empty());
    out
}

impl Filter {
    /// Whether anything is filtered.
    pub fn is_active(&self) -> bool {
        self.by_name() || self.time.is_some()
    }

    /// Whether samples are filtered by what they are (all but `--time`, which only narrows
    /// the recording).
    pub fn by_name(&self) -> bool {
        !(self.comms.is_empty()
            && self.pids.is_empty()
            && self.tids.is_empty()
            && self.dsos.is_empty()
            && self.symbols.is_empty())
    }

    pub fn keeps_thread(&self, pid: u32, tid: u32) -> bool {
        (self.pids.is_empty() || self.pids.contains(&pid))
            && (self.tids.is_empty() || self.tids.contains(&tid))
    }

    pub fn keeps_comm(&self, comm: &str) -> bool {
        self.comms.is_empty() || self.comms.iter().any(|c| c == comm)
    }

    /// A file by its path or its file name (perf's short and long DSO names).
    pub fn keeps_dso(&self, dso: &str) -> bool {
        self.dsos.is_empty()
            || self
                .dsos
                .iter()
                .any(|d| d == dso || d == crate::text::file_name(dso))
    }

    pub fn keeps_symbol(&self, name: &str) -> bool {
        self.symbols.is_empty() || self.symbols.iter().any(|s| s == name)
    }

    /// The options as given, for the heading: `--comm yes --time 10%/4`.
    pub fn options(&self) -> String {
        let mut v: Vec<String> = Vec::new();
        let list = |name: &str, items: Vec<String>, v: &mut Vec<String>| {
            if !items.is_empty() {
                v.push(format!("{name} {}", items.join(",")));
            }
        };
        list("--comm", self.comms.clone(), &mut v);
        list(
            "--pid",
            self.pids.iter().map(u32::to_string).collect(),
            &mut v,
        );
        list(
            "--tid",
            self.tids.iter().map(u32::to_string).collect(),
            &mut v,
        );
        list("--dsos", self.dsos.clone(), &mut v);
        list("--symbols", self.symbols.clone(), &mut v);
        if let Some(t) = &self.time {
            v.push(format!("--time '{}'", t.text));
        }
        crate::text::show(&v.join(" ")).into_owned()
    }

    /// The heading line and JSON of a filtered report: `all` samples read (of the events
    /// shown), `in_time` of them in `--time`'s window, `kept` after the other filters.
    pub fn account(&self, all: u64, in_time: u64, kept: u64) -> (String, serde_json::Value) {
        let share = if all > 0 {
            100.0 * kept as f64 / all as f64
        } else {
            0.0
        };
        let (base, of) = if self.relative || !self.by_name() {
            (
                kept,
                if self.by_name() {
                    "the kept samples (--percentage relative)".to_string()
                } else {
                    "the kept samples".to_string()
                },
            )
        } else if self.time.is_some() {
            (
                in_time,
                format!(
                    "the {in_time} samples in the --time window, kept or not (perf's default, --percentage absolute; --percentage relative: of the kept)"
                ),
            )
        } else {
            (
                all,
                format!("all {all} samples, kept or not (perf's default, --percentage absolute; --percentage relative: of the kept)"),
            )
        };
        let line = format!(
            "# filtered by {}: {kept} of the {all} samples kept ({share:.2}%); percentages are of {of}",
            self.options()
        );
        let json = serde_json::json!({
            "options": self.options(),
            "samples": all,
            "in_time_samples": in_time,
            "kept_samples": kept,
            "kept_pct": share,
            "percentage": if self.relative || !self.by_name() { "relative" } else { "absolute" },
            "base_samples": base,
        });
        (line, json)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn times_parse_as_perf_spells_them() {
        let t: Times = "10%/4".parse().unwrap();
        assert_eq!(t.spans.len(), 1);
        match t.spans[0] {
            Span::Pct(a, b) => {
                assert!((a - 0.3).abs() < 1e-12 && (b - 0.4).abs() < 1e-12);
            }
            _ => panic!(),
        }
        let t: Times = "1234.5,1235".parse().unwrap();
        assert_eq!(
            t.spans,
            vec![Span::Abs(Some(1_234_500_000_000), Some(1_235_000_000_000))]
        );
        let t: Times = ",2.000000001 3,".parse().unwrap();
        assert_eq!(
            t.spans,
            vec![
                Span::Abs(None, Some(2_000_000_001)),
                Span::Abs(Some(3_000_000_000), None)
            ]
        );
        assert!("10%/11".parse::<Times>().is_err());
        assert!("2,1".parse::<Times>().is_err());
        assert!("abc".parse::<Times>().is_err());
        assert_eq!(
            split_names("std::map<int, int>::find(int const&) const,main"),
            vec!["std::map<int, int>::find(int const&) const", "main"]
        );
    }
}
