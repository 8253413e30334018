//! Reading a record file: its header and streaming records, the account of its CPU time, the fast sample counter, the side band samples need, events, report filters and the recording machine's CPU.

pub mod account;
pub mod counts;
pub mod cpu;
pub mod events;
pub mod filter;
pub mod group;
pub mod load;
pub mod sideband;
