//! How far a recording's call stacks reach, measured: its samples' user stacks unwound and its callchains' ends found, tallied in one [`Quality`].

use crate::record::load::{self, LoadError, Source};
use crate::symbolize::quality::{chain, FpEnds, Quality};
use crate::symbolize::symbols::{Search, Symbolizer};
use labperf_common::Record;

/// The call stacks of `src`, tallied; `None` when its events take none. Reads the file
/// twice: its side band (the mappings, before the first unwind; samples cut to their
/// head), then the samples.
pub fn measure(src: &Source, search: &Search) -> Result<Option<Quality>, LoadError> {
    let peek = load::peek(src)?;
    let Some(mut q) = Quality::of_header(peek.header.as_ref()) else {
        return Ok(None);
    };
    let mut sym = Symbolizer::new(search.clone());
    sym.recorded_on(src, peek.header.as_ref(), peek.header_ext.as_ref());
    let mut unwind =
        crate::symbolize::unwind::Unwind::of(peek.header.as_ref(), peek.header_ext.as_ref());
    load::stream_side_band(src, |r| {
        sym.observe(r);
        if let Some(u) = unwind.as_mut() {
            u.observe(r);
        }
    })?;
    let mut addrs: Vec<u64> = Vec::new();
    let mut ends = FpEnds::default();
    let mut chains = crate::symbolize::fpchain::FpChains::default();
    let max = q.max_frames;
    load::stream(src, |r| {
        let Record::Sample(s) = r else { return };
        match unwind.as_mut() {
            Some(u) if s.user_stack.is_some() => {
                u.unwind(&mut sym, s);
            }
            _ if !s.callchain.is_empty() => {
                chain(&mut addrs, s);
                let e = ends.end(&mut sym, s.pid, &addrs, max);
                q.add(&e, 1);
                q.add_leaf(chains.leaf(&mut sym, s.pid, &addrs), 1);
            }
            _ => q.without += 1,
        }
    })?;
    if let Some(u) = &unwind {
        q.merge(&u.quality);
    }
    Ok(Some(q))
}
