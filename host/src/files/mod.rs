//! Files on this machine: regular files opened and mapped within a limit, where every `-o` writes, a run's private scratch directory, and the binary cache.

pub mod cache;
pub mod mapped;
pub mod output;
pub mod private;
