//! One module per CLI verb (`<verb>.rs`), the options they share (`opts.rs`), and the two
//! ways the agent runs: on this machine (`local.rs`) and on lab machines (`lab.rs`).

pub mod agents;
pub mod deploy;
pub mod diff;
pub mod dump;
pub mod export;
pub mod hosts;
pub mod import;
pub mod info;
pub mod lab;
pub mod local;
pub mod opts;
pub mod probe;
pub mod record;
pub mod report;
pub mod stat;
