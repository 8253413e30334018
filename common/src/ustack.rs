//! User stacks (`--call-graph dwarf`): the USTACK record, each stack coded against its
//! thread's previous one in the records frame. The encoder and the decoder keep the same
//! [`Stacks`], so what one calls "the same bytes" the other holds.

use crate::error::DecodeError;
use crate::model::UserStack;
use crate::varint::{get_i64, get_u64, put_i64, put_u64};
use crate::wire::{tag, MAX_STACK_THREADS, MAX_USER_REGS, MAX_USER_STACK};
use alloc::vec::Vec;

#[derive(Debug, Clone)]
struct Prev {
    tid: u32,
    regs: Vec<u64>,
    sp: u64,
    data: Vec<u8>,
}

/// The threads' previous user stacks in the open records frame.
#[derive(Debug, Default, Clone)]
pub(crate) struct Stacks {
    prev: Vec<Prev>,
    /// Stack bytes rebuilt in this frame.
    pub rebuilt: u64,
    /// The stack being decoded, swapped with its thread's previous one once whole (so
    /// neither is copied, nor a buffer allocated, per sample).
    scratch_regs: Vec<u64>,
    scratch_data: Vec<u8>,
}

impl Stacks {
    fn find(&self, tid: u32) -> Option<&Prev> {
        self.prev.iter().find(|p| p.tid == tid)
    }

    /// Keeps the stack in the scratch buffers at `sp` as `tid`'s newest, swapping buffers
    /// with its previous one (which become the next stack's scratch); the thread held
    /// longest goes when the table is full. `tid`'s stack is then the table's last.
    fn keep_scratch(&mut self, tid: u32, sp: u64) {
        let mut p = if let Some(i) = self.prev.iter().position(|q| q.tid == tid) {
            self.prev.remove(i)
        } else {
            if self.prev.len() >= MAX_STACK_THREADS {
                self.prev.remove(0);
            }
            Prev {
                tid,
                regs: Vec::new(),
                sp,
                data: Vec::new(),
            }
        };
        core::mem::swap(&mut p.regs, &mut self.scratch_regs);
        core::mem::swap(&mut p.data, &mut self.scratch_data);
        p.sp = sp;
        self.prev.push(p);
    }

    /// Keeps `tid`'s newest stack, in the buffers its previous one had (no allocation per
    /// sample); the thread held longest goes when the table is full.
    fn remember(&mut self, tid: u32, regs: &[u64], sp: u64, data: &[u8]) {
        let mut p = if let Some(i) = self.prev.iter().position(|q| q.tid == tid) {
            self.prev.remove(i)
        } else {
            if self.prev.len() >= MAX_STACK_THREADS {
                self.prev.remove(0);
            }
            Prev {
                tid,
                regs: Vec::new(),
                sp,
                data: Vec::new(),
            }
        };
        p.regs.clear();
        p.regs.extend_from_slice(regs);
        p.sp = sp;
        p.data.clear();
        p.data.extend_from_slice(data);
        self.prev.push(p);
    }
}

fn get_len(b: &[u8], pos: &mut usize, max: usize) -> Result<usize, DecodeError> {
    let n = get_u64(b, pos)?;
    usize::try_from(n)
        .ok()
        .filter(|&n| n <= max)
        .ok_or(DecodeError::Malformed("user stack count out of range"))
}

/// Appends the USTACK record of `u` (thread `tid`) to `out`.
pub(crate) fn encode(st: &mut Stacks, tid: u32, u: &UserStack, out: &mut Vec<u8>) {
    let regs = &u.regs[..u.regs.len().min(MAX_USER_REGS)];
    let data = &u.data[..u.data.len().min(MAX_USER_STACK)];
    let prev = st.find(tid);
    let mut b = Vec::with_capacity(32 + data.len() / 8);
    put_u64(&mut b, regs.len() as u64);
    for (i, &r) in regs.iter().enumerate() {
        let p = prev.and_then(|p| p.regs.get(i).copied()).unwrap_or(0);
        put_i64(&mut b, r.wrapping_sub(p) as i64);
    }
    put_i64(&mut b, u.sp.wrapping_sub(prev.map_or(0, |p| p.sp)) as i64);
    put_u64(&mut b, data.len() as u64);
    let words = data.len() / 8;
    // Word i repeats when the previous stack holds its address (8 bytes at offset
    // `delta + 8 i`) with the same bytes: plain loads and compares, the agent's hot loop.
    let load = |b: &[u8], o: usize| u64::from_ne_bytes(b[o..o + 8].try_into().unwrap_or([0; 8]));
    let (pdata, delta): (&[u8], i64) = match prev {
        // Stacks farther apart than any stack is long share nothing.
        Some(p) if u.sp.abs_diff(p.sp) <= MAX_USER_STACK as u64 => {
            (&p.data[..], u.sp.wrapping_sub(p.sp) as i64)
        }
        _ => (&[], 0),
    };
    let same = |i: usize| -> bool {
        let d = delta + 8 * i as i64;
        d >= 0 && (d as usize) + 8 <= pdata.len() && load(data, 8 * i) == load(pdata, d as usize)
    };
    let mut i = 0;
    while i < words {
        let s0 = i;
        while i < words && same(i) {
            i += 1;
        }
        let l0 = i;
        while i < words && !same(i) {
            i += 1;
        }
        put_u64(&mut b, (l0 - s0) as u64);
        put_u64(&mut b, (i - l0) as u64);
        b.extend_from_slice(&data[8 * l0..8 * i]);
    }
    b.extend_from_slice(&data[8 * words..]);
    out.push(tag::USTACK);
    put_u64(out, b.len() as u64);
    out.extend_from_slice(&b);
    st.rebuilt += data.len() as u64;
    st.remember(tid, regs, u.sp, data);
}

/// Decodes a USTACK body of thread `tid`; `budget` is the most stack bytes the frame
/// may rebuild.
pub(crate) fn decode(
    st: &mut Stacks,
    tid: u32,
    b: &[u8],
    budget: u64,
) -> Result<UserStack, DecodeError> {
    decode_kept(st, tid, b, budget)?;
    let p = st.prev.last().expect("the stack just kept");
    Ok(UserStack {
        regs: p.regs.clone(),
        sp: p.sp,
        data: p.data.clone(),
    })
}

/// Decodes a USTACK body of thread `tid` as [`decode`] does, keeping it as the thread's
/// previous stack only (a reader that wants the sample's head, not its stack: the next
/// stacks are coded against it).
pub(crate) fn decode_kept(
    st: &mut Stacks,
    tid: u32,
    b: &[u8],
    budget: u64,
) -> Result<(), DecodeError> {
    let bad = DecodeError::Malformed;
    let mut pos = 0usize;
    let Stacks {
        prev,
        rebuilt,
        scratch_regs: regs,
        scratch_data: data,
    } = st;
    let prev = prev.iter().find(|p| p.tid == tid);
    let n = get_len(b, &mut pos, MAX_USER_REGS)?;
    regs.clear();
    for i in 0..n {
        let p = prev.and_then(|p| p.regs.get(i).copied()).unwrap_or(0);
        regs.push(p.wrapping_add(get_i64(b, &mut pos)? as u64));
    }
    let sp = prev
        .map_or(0, |p| p.sp)
        .wrapping_add(get_i64(b, &mut pos)? as u64);
    let len = get_len(b, &mut pos, MAX_USER_STACK)?;
    if rebuilt.saturating_add(len as u64) > budget {
        return Err(bad("more user stack than a frame may rebuild"));
    }
    let words = len / 8;
    data.clear();
    data.reserve(len);
    while data.len() < 8 * words {
        let left = words - data.len() / 8;
        let same = get_len(b, &mut pos, left)?;
        let lit = get_len(b, &mut pos, left - same)?;
        if same + lit == 0 {
            return Err(bad("an empty run in a user stack"));
        }
        if same > 0 {
            let a = sp.wrapping_add(data.len() as u64);
            let run = prev
                .and_then(|p| {
                    let off = usize::try_from(a.checked_sub(p.sp)?).ok()?;
                    p.data.get(off..off.checked_add(8 * same)?)
                })
                .ok_or(bad(
                    "a user stack repeats bytes its thread's previous stack does not hold",
                ))?;
            data.extend_from_slice(run);
        }
        let lit = b
            .get(pos..pos + 8 * lit)
            .ok_or(DecodeError::Malformed("user stack shorter than it says"))?;
        data.extend_from_slice(lit);
        pos += lit.len();
    }
    let tail = b
        .get(pos..pos + len % 8)
        .ok_or(DecodeError::Malformed("user stack shorter than it says"))?;
    data.extend_from_slice(tail);
    pos += tail.len();
    if pos != b.len() {
        return Err(bad("bytes after a user stack"));
    }
    *rebuilt += len as u64;
    st.keep_scratch(tid, sp);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use alloc::vec;

    fn stack(sp: u64, len: usize) -> UserStack {
        // Each word holds its own address: the same address, the same bytes.
        let data = (0..len)
            .map(|j| (sp.wrapping_add(j as u64) / 8).to_le_bytes()[j % 8])
            .collect();
        UserStack {
            regs: vec![sp + 16, sp, 0x40_1000],
            sp,
            data,
        }
    }

    fn body(rec: &[u8]) -> &[u8] {
        let mut pos = 1;
        let n = get_u64(rec, &mut pos).unwrap() as usize;
        &rec[pos..pos + n]
    }

    #[test]
    fn a_stack_that_moved_repeats_what_it_shares_with_the_previous_one() {
        let (mut enc, mut dec) = (Stacks::default(), Stacks::default());
        let a = stack(0x7ffd_0000_2000, 8192);
        let mut out = Vec::new();
        encode(&mut enc, 5, &a, &mut out);
        assert!(out.len() > 8192, "the first is literal: {}", out.len());
        assert_eq!(decode(&mut dec, 5, body(&out), u64::MAX).unwrap(), a);
        // 64 bytes deeper, 2 words changed near the top of the new stack.
        let mut b = stack(0x7ffd_0000_2000 - 64, 8192);
        b.data[8] ^= 0xff;
        b.data[100] ^= 0xff;
        out.clear();
        encode(&mut enc, 5, &b, &mut out);
        // The 8 new words (64 bytes), the 2 changed words, the tail that the previous
        // stack did not reach (64 bytes), and a few varints.
        assert!(out.len() < 64 + 16 + 64 + 40, "{} bytes", out.len());
        assert_eq!(decode(&mut dec, 5, body(&out), u64::MAX).unwrap(), b);
        // Another thread's stack is its own: literal again.
        out.clear();
        encode(&mut enc, 6, &b, &mut out);
        assert!(out.len() > 8192);
        assert_eq!(decode(&mut dec, 6, body(&out), u64::MAX).unwrap(), b);
        assert_eq!(enc.rebuilt, dec.rebuilt);
    }

    #[test]
    fn repeats_without_a_previous_stack_runs_that_never_end_and_budgets_are_malformed() {
        let mut out = Vec::new();
        let mut enc = Stacks::default();
        let a = stack(0x7ffd_0000_2000, 64);
        encode(&mut enc, 5, &a, &mut out);
        encode(&mut enc, 5, &a, &mut out);
        // The second record, decoded without the first: its repeats have nothing to repeat.
        let first_len = {
            let mut pos = 1;
            let n = get_u64(&out, &mut pos).unwrap() as usize;
            pos + n
        };
        let second = &out[first_len..];
        let mut dec = Stacks::default();
        assert!(matches!(
            decode(&mut dec, 5, body(second), u64::MAX),
            Err(DecodeError::Malformed(_))
        ));
        // A run of 0 and 0 words.
        let mut bad = Vec::new();
        put_u64(&mut bad, 0);
        put_i64(&mut bad, 0x1000);
        put_u64(&mut bad, 16);
        put_u64(&mut bad, 0);
        put_u64(&mut bad, 0);
        assert!(matches!(
            decode(&mut Stacks::default(), 5, &bad, u64::MAX),
            Err(DecodeError::Malformed(_))
        ));
        // Over the frame's budget.
        assert!(matches!(
            decode(&mut Stacks::default(), 5, body(&out), 63),
            Err(DecodeError::Malformed(_))
        ));
    }
}
