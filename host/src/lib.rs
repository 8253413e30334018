//! labperf host library: reading record files, symbolization, aggregation and output formats.

pub mod cache;
#[cfg(feature = "remote")]
pub mod deploy;
pub mod diff;
pub mod dump;
pub mod export;
#[cfg(feature = "remote")]
pub mod hosts;
pub mod html;
pub mod import;
pub mod interrupt;
pub mod intervals;
#[cfg(feature = "remote")]
pub mod known_hosts;
pub mod load;
pub mod metrics;
pub mod profileme;
pub mod progress;
#[cfg(feature = "remote")]
pub mod remote;
pub mod report;
pub mod symbols;
pub mod table;
pub mod text;
pub mod topdown;
pub mod view;
