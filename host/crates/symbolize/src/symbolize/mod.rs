//! Addresses named and stacks made whole: symbols, disassembly (objdump), DWARF unwinding, frame-pointer chains restored, how far stacks reach, the one stack model and the facts of a recording.

pub mod callers;
pub mod debuginfod;
pub mod demangle;
pub mod disasm;
pub mod elf;
pub mod executable;
pub mod facts;
pub mod fpchain;
pub mod intervals;
pub mod lines;
pub mod measure;
pub mod perfmap;
pub mod quality;
pub mod stacks;
pub mod symbols;
pub mod unwind;
