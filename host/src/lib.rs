//! labperf host library: record files read, symbolized, turned into views, rendered and exported, and the lab machines they come from.
//!
//! Layers, each using only those above it in this list (`ARCHITECTURE.md` says what each owns):
//! the base modules (`text`, `progress`, `interrupt`, `fxhash`), [`files`], [`record`],
//! [`symbolize`], [`import`], [`render`], [`views`], [`export`], [`lab`]. The lowest are crates
//! of their own (`host/crates/`), re-exported here, so that Cargo keeps their order:
//! `labperf-record` (the base, `files`, `record`), `labperf-symbolize`, `labperf-import`,
//! `labperf-report` (`render`, `views`, `export`).

// The lowest layers are their own crate; re-exported so that `crate::files::…` paths resolve.
pub use labperf_import::import;
pub use labperf_record::{files, fxhash, interrupt, progress, record, text};
pub use labperf_report::{export, render, views};
pub use labperf_symbolize::symbolize;

pub mod lab;
