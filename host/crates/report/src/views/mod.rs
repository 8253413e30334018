//! The views a recording's recipe picks, each turning records into the table model: the pipeline (`view`), report, annotate (one function's instructions), metrics, TopDown, ProfileMe, intervals, dump, and diff of two reports; and `stat`'s summary in perf's layout.

pub mod annotate;
pub mod diff;
pub mod dump;
pub mod intervals;
pub mod metrics;
pub mod profileme;
pub mod report;
pub mod script;
pub mod stat;
pub mod topdown;
pub mod view;
