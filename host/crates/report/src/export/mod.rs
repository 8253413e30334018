//! `labperf export`: recordings' samples as stacks ([`crate::symbolize::stacks`]: the sampled
//! function, then its callers where the recording has callchains) in formats other tools
//! read, a file per format: folded stacks and SVG flame graphs ([`folded`], drawn by
//! [`crate::render::flame`] through `inferno`), pprof's gzipped `profile.proto` ([`pprof`]), the
//! Firefox Profiler's processed format ([`firefox`]) and Parquet tables ([`parquet_schema`]).
//! Several recordings export as one: each sample keeps its recording's host, architecture
//! and run. This file: the formats, and what several of them say of the recordings.

mod facts;
mod firefox;
mod folded;
mod parquet;
pub mod pprof;

pub use self::parquet::{parquet_schema, ToParquet};
pub use firefox::{ToFirefox, FIREFOX_NODES, FIREFOX_THREADS};
pub use folded::{folded_name, ToFolded};
pub use pprof::{ToPprof, PPROF_EVENTS};

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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::symbolize::facts::Run;
    use crate::symbolize::stacks::{Frame, StackTable};

    fn stacks() -> StackTable {
        let f = |n: &str| Frame {
            name: n.into(),
            dso: "/bin/x".into(),
        };
        let mut st = StackTable::default();
        st.frames = vec![f("main"), f("a;b c"), f("leaf")];
        st.runs = vec![Run {
            name: "run1".into(),
            host: "unknown".into(),
            arch: "unknown".into(),
            ..Run::default()
        }];
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
