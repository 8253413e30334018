//! The kernel functions a recording's samples name: kernel addresses seen on the way to
//! the file, matched against the text of `/proc/kallsyms` (KSYMS records). The agent does
//! it when a recording ends; `labperf import` with the kallsyms perf kept of the kernel a
//! perf.data was recorded on.

use crate::model::{KernelSymbol, KernelSymbols};
use crate::wire::MAX_KSYMS;
use alloc::string::String;
use alloc::vec;
use alloc::vec::Vec;

/// Most distinct kernel addresses kept (8 MiB); beyond, new addresses go unnamed.
const MAX_ADDRS: usize = 1 << 20;

/// Whether `a` is a kernel address: the top bit is set on x86_64, aarch64 and Alpha.
#[inline]
pub fn is_kernel(a: u64) -> bool {
    a >> 63 == 1
}

/// The distinct kernel addresses seen, sorted and deduplicated now and then.
#[derive(Default)]
pub struct Seen {
    addrs: Vec<u64>,
    sorted: usize,
}

// `#[inline]` throughout: the agent compiles these as its own code, as when they lived in
// the agent (left to cross-crate LTO, its x86_64 build came out 700 bytes larger, over its
// 512 KiB budget).
impl Seen {
    #[inline]
    pub fn add(&mut self, a: u64) {
        if !is_kernel(a) {
            return;
        }
        // The last address again (a hot kernel function): nothing to do.
        if self.addrs.last() == Some(&a) {
            return;
        }
        if self.addrs.len() >= 2 * self.sorted.max(4096) {
            self.compact();
            if self.addrs.len() >= MAX_ADDRS {
                return;
            }
        }
        self.addrs.push(a);
    }

    #[inline]
    fn compact(&mut self) {
        self.addrs.sort_unstable();
        self.addrs.dedup();
        self.sorted = self.addrs.len();
    }

    #[inline]
    pub fn is_empty(&self) -> bool {
        self.addrs.is_empty()
    }

    /// The records naming the functions that hold the addresses seen, from the text of
    /// `/proc/kallsyms`; `kptr_restrict` is reported when every address reads as 0.
    #[inline]
    pub fn symbols(mut self, kallsyms: &[u8], kptr_restrict: Option<u32>) -> Vec<KernelSymbols> {
        self.compact();
        // Text symbols (t, T, w, W) as (address, line): name and module are cut out only
        // for the functions kept.
        let mut syms: Vec<(u64, usize)> = Vec::new();
        let mut any = false;
        let mut at = 0usize;
        for line in kallsyms.split(|&b| b == b'\n') {
            let start = at;
            at += line.len() + 1;
            let mut f = line.split(|&b| b == b' ' || b == b'\t');
            let (Some(addr), Some(kind)) = (f.next(), f.next()) else {
                continue;
            };
            any = true;
            if !matches!(kind, b"t" | b"T" | b"w" | b"W") {
                continue;
            }
            if let Some(a) = core::str::from_utf8(addr)
                .ok()
                .and_then(|s| u64::from_str_radix(s, 16).ok())
            {
                syms.push((a, start));
            }
        }
        if any && syms.iter().all(|s| s.0 == 0) {
            return vec![KernelSymbols {
                syms: Vec::new(),
                hidden: Some(kptr_restrict.unwrap_or(0)),
            }];
        }
        // By address, then by line: aliases at one address stay in kallsyms' order.
        syms.sort_unstable();
        let mut kept: Vec<KernelSymbol> = Vec::new();
        for &a in &self.addrs {
            let i = syms.partition_point(|s| s.0 <= a);
            let Some(&(start, _)) = i.checked_sub(1).and_then(|i| syms.get(i)) else {
                continue;
            };
            // Of aliases at one address, the last kallsyms lists, as perf names it: perf
            // ends each symbol where the next starts, so all but the last alias are empty,
            // and of symbols at one address it keeps the one that is not (`symbols__fixup_end`,
            // then `symbols__fixup_duplicate`): `__x86_indirect_thunk_rax`, not the
            // `__pi___x86_indirect_thunk_rax` or `__x86_indirect_thunk_array` listed before it.
            let line = syms[i - 1].1;
            if kept.last().is_some_and(|k| k.start == start) {
                continue;
            }
            // The function ends where the next address starts (aliases share one).
            let end = syms[i..]
                .iter()
                .map(|s| s.0)
                .find(|&s| s > start)
                .unwrap_or(u64::MAX);
            let text = &kallsyms[line..];
            let text = &text[..text.iter().position(|&b| b == b'\n').unwrap_or(text.len())];
            let mut f = text
                .split(|&b| b == b' ' || b == b'\t')
                .filter(|w| !w.is_empty());
            let name = f.nth(2).map(|n| String::from_utf8_lossy(n).into_owned());
            let module = f.next().map(|m| {
                let m = m.strip_prefix(b"[").unwrap_or(m);
                String::from_utf8_lossy(m.strip_suffix(b"]").unwrap_or(m)).into_owned()
            });
            if let Some(name) = name {
                kept.push(KernelSymbol {
                    start,
                    end,
                    name,
                    module,
                });
            }
        }
        kept.chunks(MAX_KSYMS)
            .map(|c| KernelSymbols {
                syms: c.to_vec(),
                hidden: None,
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const KALLSYMS: &[u8] = b"ffffffff81000000 T _stext\n\
ffffffff81000000 T startup_64\n\
ffffffff81001000 t do_one\n\
ffffffff81001000 t do_one_alias\n\
ffffffff81002000 D some_data\n\
ffffffff81003000 T do_two\n\
ffffffffc0000000 t mod_fn\t[kvm]\n";

    fn seen(a: &[u64]) -> Seen {
        let mut s = Seen::default();
        for &x in a {
            s.add(x);
        }
        s
    }

    #[test]
    fn sampled_addresses_name_their_functions_with_the_next_symbol_as_end() {
        let r = seen(&[
            0xffffffff81001010,
            0xffffffff81001fff,
            0xffffffff81003004,
            0xffffffffc0000010,
            0x401000,
        ])
        .symbols(KALLSYMS, Some(0));
        assert_eq!(r.len(), 1);
        let names: Vec<(u64, u64, &str, Option<&str>)> = r[0]
            .syms
            .iter()
            .map(|s| (s.start, s.end, s.name.as_str(), s.module.as_deref()))
            .collect();
        assert_eq!(
            names,
            [
                // Two names at one address: the last listed, as perf's.
                (0xffffffff81001000, 0xffffffff81003000, "do_one_alias", None),
                (0xffffffff81003000, 0xffffffffc0000000, "do_two", None),
                (0xffffffffc0000000, u64::MAX, "mod_fn", Some("kvm")),
            ]
        );
    }

    #[test]
    fn kptr_restrict_zeros_say_hidden() {
        let z = b"0000000000000000 T _stext\n0000000000000000 t do_one\n";
        let r = seen(&[0xffffffff81001010]).symbols(z, Some(1));
        assert_eq!(r.len(), 1);
        assert!(r[0].syms.is_empty());
        assert_eq!(r[0].hidden, Some(1));
    }

    #[test]
    fn many_addresses_are_kept_once_each() {
        let mut s = Seen::default();
        for i in 0..100_000u64 {
            s.add(0xffffffff81000000 + (i % 300) * 16);
        }
        s.compact();
        assert_eq!(s.addrs.len(), 300);
    }
}
