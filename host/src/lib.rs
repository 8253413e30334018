//! labperf host library: reading record files, symbolization, aggregation and output formats.

pub mod cache;
pub mod deploy;
pub mod hosts;
pub mod interrupt;
pub mod known_hosts;
pub mod load;
pub mod metrics;
pub mod profileme;
pub mod progress;
pub mod remote;
pub mod report;
pub mod symbols;
pub mod text;
pub mod topdown;
