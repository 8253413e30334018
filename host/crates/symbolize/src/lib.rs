//! labperf-symbolize: the host's symbolize layer, names and stacks for a recording's samples.
//!
//! It owns [`symbolize`]: symbols from ELF and debug files (DWARF lines, inlined frames),
//! debuginfod (feature `remote`), JIT perf maps, DWARF unwinding, frame-pointer chains, the
//! stack model (`StackTable`) and how far stacks reach. It may use `labperf-record` (the base,
//! `files`, `record`), re-exported here so that `crate::record::…` paths resolve, and outside
//! crates; no higher host crate.

pub use labperf_record::{files, fxhash, interrupt, progress, record, text};

pub mod symbolize;
