//! labperf-report: the host's report layers, what a recording is turned into for people and
//! for other tools.
//!
//! It owns, lowest first: [`render`] (the table model and its renderers: text, CSV, JSON,
//! HTML, SVG flame graphs), [`views`] (a recording's views: report, annotate, metrics,
//! TopDown, ProfileMe, intervals, stat, dump, diff, script) and [`export`] (folded stacks,
//! SVG, pprof, the Firefox Profiler's format, Parquet). It may use `labperf-symbolize` and
//! `labperf-record` (re-exported here, so that `crate::symbolize::…` and `crate::record::…`
//! paths resolve) and outside crates; not `labperf-import` (no report needs it) nor any
//! higher host crate. Inside it, `views` may use `render`, and `export` both
//! (`tests/tests/tidy.rs` keeps that order).

pub use labperf_record::{files, fxhash, interrupt, progress, record, text};
pub use labperf_symbolize::symbolize;

pub mod export;
pub mod render;
pub mod views;
