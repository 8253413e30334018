//! The caller of a sample, for the views that expand their rows by caller (`report
//! --call-graph callee` on metrics and TopDown recordings): the function its call stack
//! returns to, from the kernel's callchain (`-g`) or its user stack unwound (`--call-graph
//! dwarf`), named as `report --children` names that frame.

use crate::record::load::{self, LoadError};
use crate::symbolize::stacks::{call_site, UserStacks};
use crate::symbolize::symbols::{Search, Symbolizer};
use labperf_common::Sample;
use std::collections::HashMap;

/// The caller of a sample whose stack ends in the sampled function (a thread's first
/// function) or that has no stack.
pub const NO_CALLER: &str = "[no caller]";

/// Names callers; one per recording.
pub struct Callers {
    /// `--call-graph dwarf` recordings: their user stacks.
    user: Option<UserStacks>,
    /// Frames named per caller path, outermost last (`--depth`, at least 1).
    depth: usize,
    /// (pid, return address) → the frames at that call site, innermost first.
    frames: HashMap<(u32, u64), Vec<String>>,
    /// Samples with a stack, and all samples asked about.
    pub stacked: u64,
    pub asked: u64,
}

/// Separates the frames of a caller path, innermost first: `run_slice <- calls_a`.
pub const SEPARATOR: &str = " <- ";

impl Callers {
    /// The callers of `src`'s samples, `depth` frames up (0 counts as 1). A recording of
    /// user stacks is read once here for its mappings (the unwinder needs each process's
    /// modules before its first sample).
    pub fn of(src: &load::Source, search: &Search, depth: usize) -> Result<Callers, LoadError> {
        let peek = load::peek(src)?;
        Ok(Callers {
            user: UserStacks::of(src, &peek, search)?,
            depth: depth.max(1),
            frames: HashMap::new(),
            stacked: 0,
            asked: 0,
        })
    }

    /// The caller path of `s` (see `name`); `sym` knows the recording's mappings.
    pub fn caller(&mut self, sym: &mut Symbolizer, s: &Sample) -> String {
        let rets = self.return_addresses(s);
        self.name(sym, s.pid, &rets)
    }

    /// The addresses `s`'s sampled function returns to, innermost first and at most
    /// `depth` of them, from its callchain or its user stack unwound; empty for a sample
    /// without a stack or in a thread's first function.
    pub fn return_addresses(&mut self, s: &Sample) -> Vec<u64> {
        self.asked += 1;
        // A sample whose callchain names callers is not unwound: its callers are the
        // callchain's.
        let user = self
            .user
            .as_mut()
            .filter(|_| crate::symbolize::quality::callers(s).is_empty());
        let mut rets = Vec::new();
        crate::symbolize::stacks::return_addresses(user, s, &mut rets);
        rets.truncate(self.depth);
        self.stacked += u64::from(!rets.is_empty());
        rets
    }

    /// The caller path at return addresses `rets` of process `pid`, `depth` frames, joined
    /// by [`SEPARATOR`]: at each call site the functions inlined there (innermost first,
    /// where DWARF says so), then the function holding it, as `report --children` names
    /// frames. `sym` knows the recording's mappings.
    pub fn name(&mut self, sym: &mut Symbolizer, pid: u32, rets: &[u64]) -> String {
        if rets.is_empty() {
            return NO_CALLER.into();
        }
        let mut path: Vec<&str> = Vec::with_capacity(self.depth);
        for &ret in rets {
            // Innermost first: the functions inlined at the call site, then its function.
            self.frames.entry((pid, ret)).or_insert_with(|| {
                let frames = call_site(sym, pid, ret);
                frames.into_iter().rev().map(|f| f.name).collect()
            });
        }
        for &ret in rets {
            for n in &self.frames[&(pid, ret)] {
                if path.len() < self.depth {
                    path.push(n);
                }
            }
        }
        path.join(SEPARATOR)
    }

    /// A note when the recording has no stacks to expand rows with.
    pub fn note(&self) -> Option<String> {
        (self.asked > 0 && self.stacked == 0).then(|| {
            "note: no sample has a call stack (record with -g, or --call-graph dwarf): every row's caller is [no caller]".to_string()
        })
    }
}
