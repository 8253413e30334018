//! `record --off-cpu`: each thread's time off the CPU written as perf's `offcpu-time`
//! samples, pure (no system calls): a sample where the thread left the CPU, its period the
//! nanoseconds until the thread ran again.
//!
//! Where the thread left the CPU comes from the software event `context-switches`, sampled
//! at every switch (period 1) with the thread's user stack, which the kernel gives only to
//! an event that may count in kernel mode (`sys::kernel_allowed`). Without that privilege
//! the thread's `PERF_RECORD_SWITCH` out records stand in for it: the time is the same,
//! the stack is not known (ip 0). When it ran again comes from `PERF_RECORD_SWITCH` in
//! records (`context_switch` on the side-band event).
//!
//! Records of different CPUs' rings arrive in any order, so a thread's switches are
//! paired only once every ring was drained past them (`settle`, after each round of
//! draining: each record older than the round's start is in by then), in time order. What
//! waits is one round's switches and, per thread, the switch-out still without its
//! switch-in.

use crate::prelude::*;
use alloc::collections::BTreeMap;
use labperf_common::Sample;

/// The header's name of the event, perf's (`perf record --off-cpu`): the period of each
/// of its samples is the ns its thread stayed off the CPU from the sample's time.
pub const EVENT_NAME: &str = "offcpu-time";
pub const PERF_RECORD_SWITCH: u32 = 14;
pub const PERF_RECORD_SWITCH_CPU_WIDE: u32 = 15;
const MISC_SWITCH_OUT: u16 = 1 << 13;
/// Attr flag bits (the word at offset 40) that perf-event-open-sys's plan has no field for.
pub const ATTR_SAMPLE_ID_ALL: u64 = 1 << 18;
pub const ATTR_EXCLUDE_CALLCHAIN_KERNEL: u64 = 1 << 21;
pub const ATTR_CONTEXT_SWITCH: u64 = 1 << 26;
/// Kernel addresses have the top bit set (x86_64 and aarch64).
const KERNEL_BIT: u64 = 1 << 63;
/// Threads whose exit is remembered, so that a switch-out after it is not counted.
const EXITED_KEPT: usize = 1024;

/// A `PERF_RECORD_SWITCH` or `PERF_RECORD_SWITCH_CPU_WIDE`: who left or took the CPU, when.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Switch {
    pub pid: u32,
    pub tid: u32,
    pub time: u64,
    pub cpu: u32,
    pub out: bool,
}

/// The switch record `rec` (header included), its `sample_id` read with the ring's
/// `sample_type`; `None` for another kind or a record too short for its fields.
pub fn switch_of(rec: &[u8], sample_type: u64) -> Option<Switch> {
    use crate::perf::{SAMPLE_CPU, SAMPLE_ID, SAMPLE_STREAM_ID, SAMPLE_TID, SAMPLE_TIME};
    let ty = u32::from_ne_bytes(rec.get(0..4)?.try_into().ok()?);
    let misc = u16::from_ne_bytes(rec.get(4..6)?.try_into().ok()?);
    let mut c = crate::convert::Cur::new(rec.get(8..)?);
    match ty {
        PERF_RECORD_SWITCH => {}
        PERF_RECORD_SWITCH_CPU_WIDE => {
            c.u64()?; // next_prev_pid, next_prev_tid: the other task
        }
        _ => return None,
    }
    let mut s = Switch {
        pid: 0,
        tid: 0,
        time: 0,
        cpu: 0,
        out: misc & MISC_SWITCH_OUT != 0,
    };
    if sample_type & SAMPLE_TID != 0 {
        s.pid = c.u32()?;
        s.tid = c.u32()?;
    } else {
        return None; // whose switch it is cannot be known
    }
    if sample_type & SAMPLE_TIME != 0 {
        s.time = c.u64()?;
    } else {
        return None;
    }
    if sample_type & SAMPLE_ID != 0 {
        c.u64()?;
    }
    if sample_type & SAMPLE_STREAM_ID != 0 {
        c.u64()?;
    }
    if sample_type & SAMPLE_CPU != 0 {
        s.cpu = c.u32()?;
    }
    Some(s)
}

/// One thread's switches not yet settled.
#[derive(Debug, Default)]
struct Thread {
    /// Switch-outs (samples) and switch-ins (times) not settled, each by time.
    outs: Vec<Sample>,
    ins: Vec<u64>,
    /// The settled switch-out still waiting for its switch-in.
    waiting: Option<Sample>,
}

/// Pairs each switch-out with the same thread's next switch-in, in time order once every
/// ring was drained past both.
#[derive(Debug, Default)]
pub struct Pairer {
    /// The header's index of `offcpu-time`.
    pub event: u32,
    /// Switch-outs come from the event's samples (with stacks); otherwise from the switch
    /// records.
    pub stacks: bool,
    threads: BTreeMap<u32, Thread>,
    /// Threads that exited (the latest [`EXITED_KEPT`]), with the exit's time.
    exited: Vec<(u32, u64)>,
    /// Switch-outs that got their switch-in (samples written).
    pub paired: u64,
    /// Switch-outs whose switch-in never came (a record lost).
    pub unpaired: u64,
}

impl Pairer {
    pub fn new(event: u32, stacks: bool) -> Pairer {
        Pairer {
            event,
            stacks,
            ..Default::default()
        }
    }

    /// A sample of the `offcpu-time` event: the thread left the CPU there (the idle task,
    /// tid 0 of every CPU, is no thread that waits: left out).
    pub fn out(&mut self, mut s: Sample) {
        if s.tid == 0 {
            return;
        }
        user_view(&mut s);
        let outs = &mut self.threads.entry(s.tid).or_default().outs;
        let at = outs.partition_point(|q| q.time <= s.time);
        outs.insert(at, s);
    }

    /// A switch record: a switch-in, or a switch-out that stands for a sample when there
    /// are no stacks.
    pub fn switch(&mut self, w: Switch) {
        if w.out {
            if !self.stacks {
                self.out(Sample {
                    event: self.event,
                    pid: w.pid,
                    tid: w.tid,
                    time: w.time,
                    cpu: w.cpu,
                    ..Default::default()
                });
            }
            return;
        }
        let ins = &mut self.threads.entry(w.tid).or_default().ins;
        let at = ins.partition_point(|&t| t <= w.time);
        ins.insert(at, w.time);
    }

    /// A thread exited at `time`: a switch-out of it after that is its last one.
    pub fn exit(&mut self, tid: u32, time: u64) {
        if self.exited.len() == EXITED_KEPT {
            self.exited.remove(0);
        }
        self.exited.push((tid, time));
    }

    fn dead(&self, s: &Sample) -> bool {
        self.exited
            .iter()
            .any(|&(t, at)| t == s.tid && at <= s.time)
    }

    /// Every ring was drained after `before`: the switches before it are all known, so
    /// each thread's are paired in time order (a switch-out with the next switch-in); the
    /// samples to write.
    pub fn settle(&mut self, before: u64) -> Vec<Sample> {
        let mut done = Vec::new();
        let mut lost = 0;
        for th in self.threads.values_mut() {
            let no = th.outs.partition_point(|s| s.time < before);
            let ni = th.ins.partition_point(|&t| t < before);
            let mut outs = th.outs.drain(..no).peekable();
            let mut ins = th.ins.drain(..ni).peekable();
            loop {
                match (outs.peek(), ins.peek()) {
                    (Some(o), Some(&i)) if o.time < i => {
                        lost += u64::from(th.waiting.is_some());
                        th.waiting = outs.next();
                    }
                    (Some(_), None) => {
                        lost += u64::from(th.waiting.is_some());
                        th.waiting = outs.next();
                    }
                    (_, Some(&i)) => {
                        ins.next();
                        // A switch-in with no switch-out before it: the thread's first run.
                        if let Some(mut s) = th.waiting.take() {
                            s.period = i.saturating_sub(s.time);
                            done.push(s);
                        }
                    }
                    (None, None) => break,
                }
            }
        }
        self.threads
            .retain(|_, t| t.waiting.is_some() || !t.outs.is_empty() || !t.ins.is_empty());
        self.paired += done.len() as u64;
        self.unpaired += lost;
        done.retain(|s| !self.dead(s));
        done
    }

    /// The recording ended at `end`: every switch settled, and the threads still off the
    /// CPU (not exited) were so until then.
    pub fn finish(&mut self, end: u64) -> Vec<Sample> {
        let mut done = self.settle(u64::MAX);
        let threads = core::mem::take(&mut self.threads);
        for (_, t) in threads {
            if let Some(mut s) = t.waiting {
                if s.time < end && !self.dead(&s) {
                    s.period = end - s.time;
                    self.paired += 1;
                    done.push(s);
                }
            }
        }
        done
    }
}

/// The sample as the thread's own code sees it: its ip the user address where it entered
/// the kernel (the callchain's first user entry, or the user registers' pc with
/// `--call-graph dwarf`, the highest register of both architectures' sets), the callchain
/// the user's frames only.
fn user_view(s: &mut Sample) {
    s.callchain.retain(|&a| a & KERNEL_BIT == 0);
    if let Some(&ip) = s.callchain.first() {
        s.ip = ip;
    } else if let Some(&pc) = s.user_stack.as_ref().and_then(|u| u.regs.last()) {
        s.ip = pc;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn out(tid: u32, time: u64) -> Sample {
        Sample {
            event: 1,
            pid: 7,
            tid,
            time,
            period: 1,
            ip: 0xffff_ffff_8100_0000,
            callchain: vec![0xffff_ffff_8100_0000, 0x401000, 0x402000],
            ..Default::default()
        }
    }
    fn sw(tid: u32, time: u64, out: bool) -> Switch {
        Switch {
            pid: 7,
            tid,
            time,
            cpu: 0,
            out,
        }
    }

    #[test]
    fn a_switch_out_weighs_the_time_to_its_own_threads_next_switch_in_in_any_order() {
        let mut p = Pairer::new(1, true);
        // Thread 10: out 100, in 350, out 1000, in 1600; thread 11: in 200. The second
        // pair's switch-in drained first (another CPU's ring), and the first pair's
        // switch-in after the second pair's switch-out.
        p.switch(sw(10, 1600, false));
        p.out(out(10, 1000));
        p.out(out(10, 100));
        p.switch(sw(11, 200, false));
        p.switch(sw(10, 1700, true)); // with stacks the samples say out
        assert_eq!(p.settle(50), vec![], "nothing before 50");
        p.switch(sw(10, 350, false));
        let got = p.settle(2000);
        assert_eq!(got.len(), 2);
        let s = &got[0];
        assert_eq!((s.tid, s.time, s.period, s.ip), (10, 100, 250, 0x401000));
        assert_eq!(s.callchain, vec![0x401000, 0x402000]);
        assert_eq!((got[1].time, got[1].period), (1000, 600));
        assert_eq!((p.paired, p.unpaired), (2, 0));
    }

    #[test]
    fn a_pair_waits_until_every_ring_was_drained_past_it() {
        let mut p = Pairer::new(1, true);
        p.out(out(10, 100));
        p.switch(sw(10, 900, false));
        // The rings were drained from 500 on: the switch-in at 900 may yet have a switch-out
        // of the same thread before it (at 600, say) in a ring read later.
        assert_eq!(p.settle(500), vec![]);
        p.out(out(10, 600));
        p.switch(sw(10, 400, false));
        let got = p.settle(1000);
        let v: Vec<(u64, u64)> = got.iter().map(|s| (s.time, s.period)).collect();
        assert_eq!(v, vec![(100, 300), (600, 300)]);
    }

    #[test]
    fn a_thread_still_off_the_cpu_at_the_end_counts_to_the_end_and_an_exit_not_at_all() {
        let mut p = Pairer::new(1, true);
        p.out(out(10, 100));
        p.out(out(12, 150));
        p.exit(12, 140);
        p.out(out(13, 300));
        p.exit(13, 290);
        let end = p.finish(1000);
        assert_eq!(end.len(), 1);
        assert_eq!((end[0].tid, end[0].period), (10, 900));
    }

    #[test]
    fn without_stacks_the_switch_out_records_are_the_samples() {
        let mut p = Pairer::new(3, false);
        p.switch(sw(10, 100, true));
        p.switch(sw(10, 180, false));
        let s = &p.settle(200)[0];
        assert_eq!(
            (s.event, s.pid, s.tid, s.time, s.period, s.ip),
            (3, 7, 10, 100, 80, 0)
        );
    }

    #[test]
    fn a_switch_out_without_its_switch_in_is_counted_and_the_next_one_pairs() {
        let mut p = Pairer::new(1, true);
        // A thread's first run (a switch-in first), then a switch-in lost after 100.
        p.switch(sw(10, 50, false));
        p.out(out(10, 100));
        p.out(out(10, 200));
        p.switch(sw(10, 230, false));
        let got = p.settle(300);
        assert_eq!(got.len(), 1);
        assert_eq!((got[0].time, got[0].period), (200, 30));
        assert_eq!((p.paired, p.unpaired), (1, 1));
    }

    #[test]
    fn switch_records_read_their_sample_id_by_the_rings_sample_type() {
        use crate::perf::{SAMPLE_CPU, SAMPLE_IDENTIFIER, SAMPLE_IP, SAMPLE_TID, SAMPLE_TIME};
        let st = SAMPLE_IP | SAMPLE_TID | SAMPLE_TIME | SAMPLE_CPU | SAMPLE_IDENTIFIER;
        let mut r = Vec::new();
        r.extend(PERF_RECORD_SWITCH_CPU_WIDE.to_ne_bytes());
        r.extend((MISC_SWITCH_OUT | 1).to_ne_bytes());
        r.extend(48u16.to_ne_bytes());
        r.extend([9u32, 9].iter().flat_map(|v| v.to_ne_bytes())); // next_prev pid, tid
        for w in [5u32, 6] {
            r.extend(w.to_ne_bytes()); // pid, tid
        }
        r.extend(777u64.to_ne_bytes());
        r.extend([3u32, 0].iter().flat_map(|v| v.to_ne_bytes()));
        r.extend(42u64.to_ne_bytes());
        let w = switch_of(&r[..], st).unwrap();
        assert_eq!(
            w,
            Switch {
                pid: 5,
                tid: 6,
                time: 777,
                cpu: 3,
                out: true
            }
        );
        assert_eq!(switch_of(&r[..20], st), None, "cut short");
    }
}
