//! Strobing: a short counting window (~300 cycles) after each long sample period, so that
//! group counts belong to one function. Chooses among the kernel's alternating-period ABIs
//! (verified by sampling, never trusted on open), in-agent decimation, and a fixed period.

use crate::prelude::*;

use crate::perf::{AttrExt, AttrPlan};
use labperf_common::Sample;

/// How windows are produced: the format's [`labperf_common::StrobeMode`], which the
/// header's recipe carries.
pub use labperf_common::StrobeMode as Mode;

/// The strobing request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Strobe {
    pub period: u64,
    pub window: u64,
    pub jitter: bool,
}

/// Bit of RFC v2's `jitter_alternate_period` in the attr flag word (after `sigtrap`).
pub const RFC_V2_JITTER_BIT: u64 = 1 << 38;
/// Bits of randomness asked of v4's `hf_sample_rand` with --jitter.
pub const V4_RAND_BITS: u64 = 4;

/// Checks the options as the kernel series does: no jitter with --freq, the window must
/// be non-zero, a window equal to the period means no strobing, jitter needs a window.
pub fn validate(s: &Strobe, freq: bool) -> Result<Option<Strobe>, String> {
    if freq {
        return Err("--metrics strobes a fixed period: it cannot be used with --freq".into());
    }
    if s.window == 0 {
        return Err(if s.jitter {
            "--jitter needs a window: give --window N (N > 0)".into()
        } else {
            "--window must be greater than 0".into()
        });
    }
    if s.window > s.period {
        return Err(format!(
            "--window ({}) must not exceed --period ({})",
            s.window, s.period
        ));
    }
    if s.window == s.period {
        return Ok(None); // as the kernel does: equal periods switch alternation off
    }
    Ok(Some(*s))
}

/// The sampler's attr changes for a mode.
pub fn apply(mode: Mode, s: &Strobe, plan: &mut AttrPlan, driver_shift: u32) {
    plan.ext = AttrExt::default();
    plan.freq = false;
    match mode {
        Mode::KernelRfcV2 => {
            plan.period = s.period;
            plan.ext = AttrExt {
                at136: Some(s.window),
                flag_bits: if s.jitter { RFC_V2_JITTER_BIT } else { 0 },
            };
        }
        Mode::KernelV4 => {
            plan.period = s.period;
            let rand = if s.jitter { V4_RAND_BITS } else { 0 };
            plan.ext = AttrExt {
                at136: Some((s.window & 0xffff_ffff) | (rand << 32)),
                flag_bits: 0,
            };
        }
        Mode::DriverTerm => {
            plan.period = s.period;
            plan.spec.config2 |= (s.window & 0xffff_ffff) << driver_shift;
        }
        Mode::Decimate | Mode::Fixed => plan.period = s.window,
    }
}

/// Whether sampled periods alternate long/short as configured (jitter tolerated).
pub fn alternates(periods: &[u64], s: &Strobe) -> bool {
    if periods.len() < 4 {
        return false;
    }
    let short = |p: u64| p <= s.window * 2 + 16;
    let long = |p: u64| p + s.window + 16 >= s.period && p <= s.period + 16;
    let kinds: Vec<Option<bool>> = periods
        .iter()
        .map(|&p| {
            if short(p) {
                Some(true)
            } else if long(p) {
                Some(false)
            } else {
                None
            }
        })
        .collect();
    kinds.iter().all(Option::is_some) && kinds.windows(2).all(|w| w[0] != w[1])
}

/// One line on sampled periods: whether they alternate, their long and short ranges, and
/// with jitter how many distinct short periods were seen.
pub fn describe(periods: &[u64], s: &Strobe) -> String {
    let range = |short: bool| {
        let v: Vec<u64> = periods
            .iter()
            .copied()
            .filter(|&p| (p <= s.window * 2 + 16) == short)
            .collect();
        let (lo, hi) = (v.iter().min().copied(), v.iter().max().copied());
        let mut distinct = v.clone();
        distinct.sort_unstable();
        distinct.dedup();
        (
            lo.zip(hi)
                .map_or("none".into(), |(a, b)| format!("{a}..{b}")),
            distinct.len(),
        )
    };
    let ((long, _), (short, kinds)) = (range(false), range(true));
    let verdict = if alternates(periods, s) {
        "verified"
    } else {
        "NOT alternating"
    };
    let jitter = if s.jitter {
        if kinds > 1 {
            format!("; jittered: {kinds} distinct short periods")
        } else {
            "; jitter asked but the short periods did not vary".into()
        }
    } else {
        String::new()
    };
    format!(
        "{verdict}: {} sampled periods, long {long}, short {short}{jitter}",
        periods.len()
    )
}

/// Without jitter, the RFC v2 and v4 attrs are the same bytes (the window at offset 136,
/// the period in `sample_period`); the sampled long periods tell them apart: RFC v2
/// samples the whole period, v4 cuts the window out of it.
fn classify(tried: Mode, periods: &[u64], s: &Strobe) -> Mode {
    if !matches!(tried, Mode::KernelRfcV2 | Mode::KernelV4) {
        return tried;
    }
    let longs: Vec<u64> = periods
        .iter()
        .copied()
        .filter(|&p| p > s.window * 2 + 16)
        .collect();
    let mean = longs.iter().sum::<u64>() / longs.len().max(1) as u64;
    if mean.abs_diff(s.period - s.window) < mean.abs_diff(s.period) {
        Mode::KernelV4
    } else {
        Mode::KernelRfcV2
    }
}

/// What the probe needs from the kernel: open a sampler configured by `plan` on the
/// agent itself, run a little, and return the PERIOD of each sample (or the errno).
pub trait ProbeSys {
    fn sample_periods(&mut self, plan: &AttrPlan) -> Result<Vec<u64>, i32>;
}

/// Picks the mode: each kernel ABI in turn, trusted only if samples really alternate
/// (upstream kernels take a size-144 attr as `config4` and ignore it), then decimation.
pub fn choose(
    sys: &mut dyn ProbeSys,
    base: &AttrPlan,
    s: &Strobe,
    driver_shift: Option<u32>,
    notes: &mut Vec<String>,
) -> Mode {
    let mut candidates = vec![Mode::KernelRfcV2, Mode::KernelV4];
    if driver_shift.is_some() {
        candidates.insert(0, Mode::DriverTerm);
    }
    for m in candidates {
        let mut plan = base.clone();
        apply(m, s, &mut plan, driver_shift.unwrap_or(0));
        match sys.sample_periods(&plan) {
            Ok(p) if alternates(&p, s) => return classify(m, &p, s),
            Ok(p) => {
                let first: Vec<String> = p.iter().take(6).map(u64::to_string).collect();
                notes.push(format!("{}: the attr opened but sampled periods did not alternate ({} samples: {}...); not used", m.name(), p.len(), first.join(", ")));
            }
            Err(e) => notes.push(format!(
                "{}: not available ({})",
                m.name(),
                crate::rt::Error::from_raw_os_error(e)
            )),
        }
    }
    Mode::Decimate
}

/// In-agent decimation: samples arrive every `window` cycles; a window is a pair of
/// consecutive samples of one thread. Pairs about `period` cycles apart are kept, the
/// start sample rewritten as a long one, and the rest dropped. `values[0]` is the
/// sampler's own count.
///
/// Spacing is measured in time, converted with the cycle rate seen across windows:
/// the kernel throttles a 300-cycle sampler, and a throttled sampler stops counting,
/// so its own count would space windows far wider than asked.
pub struct Decimator {
    s: Strobe,
    last: Vec<(u32, Sample)>,
    /// (tid, time of the last kept window end)
    last_kept: Vec<(u32, u64)>,
    /// Cycles per ns, from the windows seen (0 until the first one).
    rate: f64,
    rng: u64,
    target: u64,
}

impl Decimator {
    pub fn new(s: Strobe) -> Self {
        Decimator {
            s,
            last: Vec::new(),
            last_kept: Vec::new(),
            rate: 0.0,
            rng: 0x9E37_79B9_7F4A_7C15,
            target: s.period,
        }
    }

    fn next_target(&mut self) -> u64 {
        if !self.s.jitter {
            return self.s.period;
        }
        self.rng ^= self.rng << 13;
        self.rng ^= self.rng >> 7;
        self.rng ^= self.rng << 17;
        self.s.period - self.s.window / 2 + self.rng % self.s.window.max(1)
    }

    /// After a throttle or unthrottle no sample continues a window.
    pub fn break_windows(&mut self) {
        self.last.clear();
    }

    /// Takes one sample; returns the samples to write (none, or a long + window pair).
    pub fn push(&mut self, s: Sample) -> Vec<Sample> {
        let Some(&c) = s.values.first() else {
            return vec![s];
        };
        let tid = s.tid;
        let prev = self
            .last
            .iter()
            .position(|(t, _)| *t == tid)
            .map(|i| self.last.swap_remove(i).1);
        let mut out = Vec::new();
        if let Some(p) = prev
            .filter(|p| c.wrapping_sub(p.values[0]) <= 2 * self.s.window + 64 && s.time > p.time)
        {
            let dc = c - p.values[0];
            let r = dc as f64 / (s.time - p.time) as f64;
            self.rate = if self.rate == 0.0 {
                r
            } else {
                0.9 * self.rate + 0.1 * r
            };
            let kept_at = self.last_kept.iter().find(|(t, _)| *t == tid).map(|k| k.1);
            let since = kept_at.map_or(u64::MAX, |k| {
                ((s.time.saturating_sub(k)) as f64 * self.rate) as u64
            });
            if since >= self.target {
                let mut long = p.clone();
                long.period = since.min(p.values[0].max(self.target));
                let mut win = s.clone();
                win.period = dc;
                out.push(long);
                out.push(win);
                match self.last_kept.iter_mut().find(|(t, _)| *t == tid) {
                    Some(k) => k.1 = s.time,
                    None => self.last_kept.push((tid, s.time)),
                }
                self.target = self.next_target();
            }
        }
        self.last.push((tid, s));
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::events;

    fn base() -> AttrPlan {
        AttrPlan::new(events::parse("cycles").unwrap())
    }

    const S: Strobe = Strobe {
        period: 1_000_000,
        window: 300,
        jitter: false,
    };

    /// A simulated kernel: which ABI it implements, and what an upstream kernel does
    /// with a size-144 attr (accepts it as config4 and ignores it).
    struct Fake {
        rfc: bool,
        v4: bool,
        driver: bool,
        upstream_config4: bool,
        size144_e2big: bool,
        tried: Vec<(u32, Option<u64>, u64)>,
    }

    impl ProbeSys for Fake {
        fn sample_periods(&mut self, p: &AttrPlan) -> Result<Vec<u64>, i32> {
            let a = p.to_kernel();
            self.tried.push((a.size, p.ext.at136, p.spec.config2));
            let alt = |long: u64, short: u64| {
                (0..8)
                    .map(|i| if i % 2 == 0 { long } else { short })
                    .collect()
            };
            if a.size == 144 && self.size144_e2big {
                return Err(libc::E2BIG);
            }
            if let Some(v) = p.ext.at136 {
                if self.rfc && p.period == S.period && v == S.window {
                    return Ok(alt(S.period, S.window));
                }
                if self.v4 && v & 0xffff_ffff == S.window {
                    return Ok(alt(S.period - S.window, S.window));
                }
                if self.upstream_config4 {
                    return Ok(vec![p.period; 8]); // opened, but nothing alternates
                }
                return Err(libc::EINVAL);
            }
            if p.spec.config2 != 0 && self.driver {
                return Ok(alt(S.period, S.window + 7));
            }
            Ok(vec![p.period; 8])
        }
    }

    fn fake() -> Fake {
        Fake {
            rfc: false,
            v4: false,
            driver: false,
            upstream_config4: false,
            size144_e2big: false,
            tried: vec![],
        }
    }

    #[test]
    fn each_abi_is_used_when_it_really_alternates() {
        let mut notes = vec![];
        let mut f = Fake {
            rfc: true,
            ..fake()
        };
        assert_eq!(
            choose(&mut f, &base(), &S, None, &mut notes),
            Mode::KernelRfcV2
        );
        let mut f = Fake { v4: true, ..fake() };
        assert_eq!(
            choose(&mut f, &base(), &S, None, &mut notes),
            Mode::KernelV4,
            "told apart by the sampled long period"
        );
        assert_eq!(
            f.tried,
            vec![(144, Some(300), 0)],
            "v4 puts the window in hf_sample_period"
        );
        let mut f = Fake {
            driver: true,
            ..fake()
        };
        assert_eq!(
            choose(&mut f, &base(), &S, Some(0), &mut notes),
            Mode::DriverTerm
        );
        assert_eq!(f.tried[0].2, 300, "strobe_period goes into config2:0-31");
    }

    #[test]
    fn silent_acceptance_falls_through_to_decimation() {
        // An upstream kernel: size 144 opens (config4), periods never alternate.
        let mut notes = vec![];
        let mut f = Fake {
            upstream_config4: true,
            ..fake()
        };
        assert_eq!(
            choose(&mut f, &base(), &S, None, &mut notes),
            Mode::Decimate
        );
        assert_eq!(notes.len(), 2);
        assert!(
            notes.iter().all(|n| n.contains("did not alternate")),
            "{notes:?}"
        );
        // Debian's 6.1: size 144 is E2BIG.
        let mut notes = vec![];
        let mut f = Fake {
            size144_e2big: true,
            ..fake()
        };
        assert_eq!(
            choose(&mut f, &base(), &S, None, &mut notes),
            Mode::Decimate
        );
        assert!(notes[0].contains("Argument list too long"), "{notes:?}");
    }

    #[test]
    fn jitter_and_window_rules() {
        assert!(validate(&S, true).unwrap_err().contains("--freq"));
        assert!(validate(
            &Strobe {
                window: 0,
                jitter: true,
                ..S
            },
            false
        )
        .unwrap_err()
        .contains("--jitter needs a window"));
        assert_eq!(
            validate(
                &Strobe {
                    window: S.period,
                    ..S
                },
                false
            )
            .unwrap(),
            None
        );
        assert!(validate(
            &Strobe {
                window: S.period + 1,
                ..S
            },
            false
        )
        .is_err());
        let mut p = base();
        apply(Mode::KernelRfcV2, &Strobe { jitter: true, ..S }, &mut p, 0);
        let a = p.to_kernel();
        assert_eq!((a.size, a.config4, p.period), (144, 300, 1_000_000));
        assert_ne!(crate::perf::portable(&a).flags & RFC_V2_JITTER_BIT, 0);
        apply(Mode::KernelV4, &Strobe { jitter: true, ..S }, &mut p, 0);
        assert_eq!(p.to_kernel().config4, 300 | (4 << 32));
        apply(Mode::Decimate, &S, &mut p, 0);
        assert_eq!((p.period, p.to_kernel().size), (300, 136));
    }

    #[test]
    fn describe_says_what_the_probe_saw() {
        let s = Strobe {
            period: 1000,
            window: 10,
            jitter: true,
        };
        assert_eq!(
            describe(&[1000, 10, 1003, 12, 1001, 10], &s),
            "verified: 6 sampled periods, long 1000..1003, short 10..12; jittered: 2 distinct short periods"
        );
        assert_eq!(
            describe(&[1000, 10, 1000, 10], &s),
            "verified: 4 sampled periods, long 1000..1000, short 10..10; jitter asked but the short periods did not vary"
        );
        assert_eq!(
            describe(&[10, 10, 10, 10], &Strobe { jitter: false, ..s }),
            "NOT alternating: 4 sampled periods, long none, short 10..10"
        );
    }

    #[test]
    fn alternation_check() {
        assert!(alternates(
            &[1_000_000, 300, 1_000_000, 310, 999_990, 300],
            &S
        ));
        assert!(!alternates(&[1_000_000, 1_000_000, 300, 300], &S));
        assert!(!alternates(&[300, 300, 300, 300], &S));
        assert!(!alternates(&[1_000_000, 300], &S));
    }

    /// One cycle per ns, as under qemu's -icount shift=0.
    fn sample(tid: u32, cycles: u64, ip: u64) -> Sample {
        Sample {
            tid,
            pid: tid,
            ip,
            time: cycles,
            values: vec![cycles, cycles],
            period: 300,
            ..Default::default()
        }
    }

    #[test]
    fn decimation_keeps_one_window_per_period() {
        let s = Strobe {
            period: 3000,
            window: 300,
            jitter: false,
        };
        let mut d = Decimator::new(s);
        let mut out = Vec::new();
        for i in 1..=100u64 {
            out.extend(d.push(sample(7, i * 300, 0x1000 + i)));
        }
        // 30000 cycles at one window per 3000 cycles: the first window, then one every 3000.
        assert_eq!(out.len(), 2 * 10);
        for pair in out.chunks(2) {
            assert_eq!(pair[1].period, 300);
            assert!(
                pair[0].period >= 3000 - 300,
                "the start sample reads as a long one: {}",
                pair[0].period
            );
            assert_eq!(pair[1].ip, pair[0].ip + 1, "consecutive samples");
        }
        for w in out.chunks(2).collect::<Vec<_>>().windows(2) {
            assert_eq!(w[1][1].time - w[0][1].time, 3000);
        }
        // The kernel throttles a 300-cycle sampler: it stops the counter (its count stands
        // still) while time runs on, and restarts it at the next tick. Here bursts of four
        // samples 300 cycles (= 300 ns) apart, one burst every 2000 ns, of which only the
        // burst is counted; a throttle record ends each burst. Spacing windows by time
        // keeps the first window of every other burst (4000 ns >= the 3000-cycle period at
        // 1 cycle/ns); spacing them by the stopped count would keep 8, at other places.
        let mut d = Decimator::new(s);
        let mut kept = Vec::new();
        for burst in 0..20u64 {
            for i in 0..4u64 {
                let mut x = sample(3, burst * 1200 + i * 300, i);
                x.time = burst * 2000 + i * 300;
                kept.extend(d.push(x));
            }
            d.break_windows();
        }
        let ends: Vec<u64> = kept.chunks(2).map(|w| w[1].time).collect();
        assert_eq!(ends, (0..10).map(|k| k * 4000 + 300).collect::<Vec<_>>());
        // A gap (throttling) never forms a window.
        let mut d = Decimator::new(s);
        assert!(d.push(sample(1, 3000, 1)).is_empty());
        assert!(
            d.push(sample(1, 9000, 2)).is_empty(),
            "6000 cycles apart is not a window"
        );
        assert_eq!(d.push(sample(1, 9300, 3)).len(), 2);
        d.break_windows();
        assert!(
            d.push(sample(1, 12600, 4)).is_empty(),
            "nothing continues across a throttle"
        );
        // Threads are kept apart.
        let mut d = Decimator::new(s);
        d.push(sample(1, 3000, 1));
        assert!(d.push(sample(2, 3300, 2)).is_empty());
    }
}
