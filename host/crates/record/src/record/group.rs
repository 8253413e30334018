//! The members of an event group read in each sample of their leader (`record -e
//! '{cpu-clock,page-faults}'`, perf's `:S`), turned into samples of their own as perf
//! delivers them, so that reports count them per function.

use crate::record::events::{Names, Select};
use labperf_common::{Header, HeaderExt, Recipe, Sample};
use std::collections::HashMap;

type Fx = std::hash::BuildHasherDefault<crate::fxhash::FxHasher>;

/// A group recording (`record -e '{cpu-clock,page-faults}'`, perf's `:S`): the leader
/// samples, each sample reads the members' counts. As perf delivers them, each member
/// counts in each leader sample the increase of its count since that thread's (or, of a
/// whole-machine recording, that CPU's) previous sample, as a sample of its own at the
/// leader sample's stack, its period that increase (none where it is 0).
pub struct GroupReads {
    /// Each event's members by header index, in group order (the order of the values).
    members: Vec<Vec<u32>>,
    /// Counters per CPU (`record -a`/`-C`), not per thread.
    per_cpu: bool,
    /// The last count read of (thread or CPU, member).
    last: HashMap<(u32, u32), u64, Fx>,
    /// Members that sample themselves too (a crafted file): their own samples are theirs,
    /// their reads are not made samples.
    sampling: Vec<u32>,
}

impl GroupReads {
    /// The group reads of a recording whose recipe is sampling with group reads, where
    /// `--event` picks a member (`sel`); without it, a report is its leaders' samples, one
    /// table a group, as perf's group view.
    pub fn of(
        h: Option<&Header>,
        x: Option<&HeaderExt>,
        sel: Option<&Select>,
    ) -> Option<GroupReads> {
        let reads = matches!(
            x.and_then(|x| x.recipe.as_ref()),
            Some(Recipe::Sample { group_read: true })
        );
        let (h, sel) = (h.filter(|_| reads)?, sel?);
        let names = Names::of(Some(h));
        let mut members = vec![Vec::new(); h.events.len()];
        let mut picked = false;
        for (i, e) in h.events.iter().enumerate() {
            if let Some(l) = e.leader.filter(|&l| (l as usize) < members.len()) {
                members[l as usize].push(i as u32);
                picked |= sel.picks(&names, i as u32);
            }
        }
        if !picked {
            return None;
        }
        Some(GroupReads {
            members,
            per_cpu: h.command.first().is_some_and(|c| c == "-a" || c == "-C"),
            last: HashMap::default(),
            sampling: Vec::new(),
        })
    }

    /// Members with samples of their own (`samples_of(event)` > 0) keep them alone.
    pub fn leave_sampling(&mut self, samples_of: impl Fn(u32) -> u64) {
        self.sampling = self
            .members
            .iter()
            .flatten()
            .copied()
            .filter(|&m| samples_of(m) > 0)
            .collect();
    }

    /// The members' samples of leader sample `s`.
    pub fn samples(&mut self, s: &Sample) -> Vec<Sample> {
        let Some(members) = self.members.get(s.event as usize) else {
            return Vec::new();
        };
        let key = if self.per_cpu { s.cpu } else { s.tid };
        let mut v = Vec::new();
        // values[0] is the leader's own count.
        for (&m, &count) in members.iter().zip(s.values.iter().skip(1)) {
            let last = self.last.insert((key, m), count).unwrap_or(0);
            let period = count.saturating_sub(last);
            if period > 0 && !self.sampling.contains(&m) {
                v.push(Sample {
                    event: m,
                    period,
                    values: Vec::new(),
                    ..s.clone()
                });
            }
        }
        v
    }
}

/// The notes of a report of `h`'s events: without `--event` (`sel`), each group member
/// read in its leader's samples and the option that shows it per function; with `--event
/// MEMBER`, what its samples are.
pub fn notes(h: &Header, x: Option<&HeaderExt>, sel: Option<&Select>) -> Vec<String> {
    let reads = matches!(
        x.and_then(|x| x.recipe.as_ref()),
        Some(Recipe::Sample { group_read: true })
    );
    let names = Names::of(Some(h));
    h.events
        .iter()
        .enumerate()
        .filter(|_| reads)
        .filter_map(|(i, e)| {
            let l = crate::text::show(&h.events.get(e.leader? as usize)?.name).into_owned();
            let m = names.name(i as u32);
            let m = crate::text::show(&m);
            match sel {
                None => Some(format!(
                    "note: {m} is read in each sample of {l} (its group's leader): `--event {m}` shows its counts per function"
                )),
                Some(s) if s.picks(&names, i as u32) => Some(format!(
                    "note: {m} was read in each sample of {l} (its group's leader): a row's samples are those of {l} in which {m}'s count grew, its period by how much"
                )),
                Some(_) => None,
            }
        })
        .collect()
}
