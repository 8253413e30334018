//! labperf host library: reading record files, symbolization, aggregation and output formats.

pub mod load;
pub mod progress;
pub mod report;
pub mod symbols;
