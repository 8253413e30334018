//! Files on this machine: regular files opened and mapped within a limit, what a file is from its first bytes, where every `-o` writes, a run's private scratch directory, and the binary cache.

pub mod cache;
pub mod kind;
pub mod mapped;
pub mod output;
pub mod private;
