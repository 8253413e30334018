//! Files on this machine: regular files opened and mapped within a limit, where every `-o` writes, and the binary cache.

pub mod cache;
pub mod mapped;
pub mod output;
