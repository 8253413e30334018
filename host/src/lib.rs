//! labperf host library: record files read, symbolized, turned into views, rendered and exported, and the lab machines they come from.
//!
//! Layers, each using only those above it in this list (`ARCHITECTURE.md` says what each owns):
//! the base modules (`text`, `progress`, `interrupt`, `fxhash`), [`files`], [`record`],
//! [`symbolize`], [`import`], [`render`], [`views`], [`export`], [`lab`]. Each is in a crate of
//! its own under `host/crates/`, so that Cargo keeps their order: `labperf-record` (the base,
//! `files`, `record`), `labperf-symbolize`, `labperf-import`, `labperf-report` (`render`,
//! `views`, `export`) and `labperf-lab`. This library only re-exports their modules, under
//! the paths the binary (`main.rs`, `cmd/`) and the fuzz targets use.

pub use labperf_import::import;
pub use labperf_lab::lab;
pub use labperf_record::{files, fxhash, interrupt, progress, record, text};
pub use labperf_report::{export, render, views};
pub use labperf_symbolize::symbolize;
