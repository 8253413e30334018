//! Folded stacks (`thread;outer;…;leaf WEIGHT` per line, [`folded_name`] the one place a
//! name becomes folded text) and the SVG flame graph of them, drawn by [`crate::render::flame`].

use super::facts::StackFacts;
use crate::symbolize::stacks::{Stack, StackTable};
use std::collections::HashMap;
use std::io::Write;

/// A command with its program's file name only (titles).
fn short_command(argv: &[String]) -> String {
    if matches!(argv.first().map(String::as_str), Some("--pid" | "--tid")) {
        return crate::text::recorded(argv);
    }
    let mut v: Vec<&str> = argv.iter().map(String::as_str).collect();
    if let Some(p) = v.first_mut() {
        *p = crate::text::file_name(p);
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

/// Folded stacks and SVG flame graphs of a [`StackTable`] (a trait: `StackTable` is
/// labperf-symbolize's, and a type's inherent methods belong to its own crate).
pub trait ToFolded {
    fn write_folded(&self, w: impl Write) -> std::io::Result<()>;
    fn folded(&self) -> String;
    fn svg(&self, w: impl Write) -> std::io::Result<Option<String>>;
    fn svg_of(
        &self,
        event: Option<u32>,
        direction: inferno::flamegraph::Direction,
        w: impl Write,
    ) -> std::io::Result<Option<String>>;
}

/// What [`ToFolded`] builds its lines from.
trait FoldedParts {
    fn folded_names(&self) -> Vec<String>;
    fn lines(&self, event: Option<u32>, weight: impl Fn(&Stack) -> u64) -> Vec<(&[u32], u64)>;
}

impl FoldedParts for StackTable {
    /// Each frame's name as folded text ([`folded_name`]).
    fn folded_names(&self) -> Vec<String> {
        self.frames
            .iter()
            .map(|f| folded_name(&f.name, f.dso.is_empty()))
            .collect()
    }

    /// The distinct paths, recordings merged, in the order they first come, each with the
    /// sum of `weight` over its stacks (a stack's period, or its samples); of the stacks of
    /// one event when `event` says which (index into [`StackTable::events`]).
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
}

impl ToFolded for StackTable {
    /// Writes folded stacks to `w`, one line per distinct stack (recordings merged), as it
    /// goes: `thread;outer;…;leaf PERIOD` (the sum of the samples' periods, as
    /// `perf script | inferno-collapse-perf` weighs them).
    fn write_folded(&self, mut w: impl Write) -> std::io::Result<()> {
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

    /// The folded stacks of [`ToFolded::write_folded`] as one string.
    fn folded(&self) -> String {
        let mut v = Vec::new();
        self.write_folded(&mut v).expect("writing to memory");
        String::from_utf8(v).expect("folded names are text")
    }

    /// An SVG flame graph of the folded stacks, titled with the recorded command, drawn
    /// within [`crate::render::flame::BUDGET`]; returns a note when narrow frames had to be left out.
    fn svg(&self, w: impl Write) -> std::io::Result<Option<String>> {
        self.svg_of(None, inferno::flamegraph::Direction::Straight, w)
    }

    /// [`ToFolded::svg`] of the stacks of one event (`Some`: its index into
    /// [`StackTable::events`]; its periods never add up with another's), or of all, the
    /// root at the bottom (`Straight`) or on top (`Inverted`, an icicle: the HTML page's,
    /// whose first screen then shows the root row however deep the stacks).
    fn svg_of(
        &self,
        event: Option<u32>,
        direction: inferno::flamegraph::Direction,
        mut w: impl Write,
    ) -> std::io::Result<Option<String>> {
        let mut o = inferno::flamegraph::Options::default();
        o.direction = direction;
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
        let mut drawn = Err(crate::render::flame::Error::Overflow);
        if periods.iter().any(|l| l.1 > 0) {
            let ns = match event {
                Some(e) => crate::record::events::is_ns(&self.events.names[e as usize]),
                None => self.weights_are_ns(),
            };
            o.count_name = if ns { "ns" } else { "events" }.into();
            drawn = crate::render::flame::draw(&mut o, &names, &periods, &mut w);
        }
        drop(periods);
        if let Err(crate::render::flame::Error::Overflow) = drawn {
            o.count_name = "samples".into();
            drawn = crate::render::flame::draw(
                &mut o,
                &names,
                &self.lines(event, |s| s.samples),
                &mut w,
            );
        }
        match drawn {
            Ok(None) => Ok(None),
            Ok(Some(width)) => Ok(Some(format!(
                "note: the flame graph draws frames of at least {width}% of the {} only (a graph of every frame would be too large)",
                o.count_name
            ))),
            Err(crate::render::flame::Error::Io(e)) => Err(e),
            Err(crate::render::flame::Error::Overflow) => Err(std::io::Error::new(
                std::io::ErrorKind::InvalidData,
                "the samples do not add up",
            )),
        }
    }
}
