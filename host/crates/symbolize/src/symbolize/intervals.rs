//! Address ranges as non-overlapping intervals, a later range replacing what it covers: a process's mappings (`symbols.rs`, the lab fetch's `files_hit`) and a JIT map's functions (`perfmap.rs`).

use std::collections::BTreeMap;

/// Ranges as non-overlapping intervals (a later range replaces what it covers), sorted:
/// (start, end, an index into the owner's table).
#[derive(Debug, Default)]
pub struct Intervals {
    tree: BTreeMap<u64, (u64, u32)>,
}

impl Intervals {
    pub fn insert(&mut self, start: u64, end: u64, idx: u32) {
        if end <= start {
            return;
        }
        let hit: Vec<(u64, u64, u32)> = self
            .tree
            .range(..end)
            .rev()
            .take_while(|(_, (e, _))| *e > start)
            .map(|(&s, &(e, i))| (s, e, i))
            .collect();
        for (s, e, i) in hit {
            self.tree.remove(&s);
            if s < start {
                self.tree.insert(s, (start, i));
            }
            if e > end {
                self.tree.insert(end, (e, i));
            }
        }
        self.tree.insert(start, (end, idx));
    }

    pub fn find(&self, ip: u64) -> Option<u32> {
        let (_, &(end, idx)) = self.tree.range(..=ip).next_back()?;
        (ip < end).then_some(idx)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn later_mappings_replace_what_they_cover() {
        let mut t = Intervals::default();
        t.insert(0x1000, 0x5000, 0);
        t.insert(0x2000, 0x3000, 1);
        t.insert(0x4800, 0x6000, 2);
        let got: Vec<Option<u32>> = [
            0xfff, 0x1000, 0x2000, 0x2fff, 0x3000, 0x47ff, 0x4800, 0x5fff, 0x6000,
        ]
        .iter()
        .map(|&ip| t.find(ip))
        .collect();
        assert_eq!(
            got,
            [
                None,
                Some(0),
                Some(1),
                Some(1),
                Some(0),
                Some(0),
                Some(2),
                Some(2),
                None
            ]
        );
        t.insert(0, u64::MAX, 3);
        assert_eq!(t.tree.len(), 1);
    }
}
