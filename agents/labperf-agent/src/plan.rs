//! `plan`: every perf_event_attr `record` or `stat` would open, one line each, without
//! opening anything (perf's `tests/attr` method: tests compare the lines with files).

use crate::prelude::*;

use crate::opts::Opts;
use crate::perf::{self, AttrPlan};
use crate::topdown::{self, Kind};
use crate::{events, record, stat, sys};
use core::fmt::Write;
use labperf_common::ATTR_FLAG_NAMES;

fn line(s: &mut String, p: &AttrPlan, leader: Option<usize>, target: &str) {
    let a = perf::portable(&p.to_kernel());
    let flags: Vec<&str> = ATTR_FLAG_NAMES
        .iter()
        .enumerate()
        .filter(|(i, _)| a.flags >> i & 1 != 0)
        .map(|(_, n)| *n)
        .collect();
    let _ = writeln!(
        s,
        "event={} leader={} {target} type={} size={} config={:#x} config1={:#x} config2={:#x} {}={} sample_type={:#x} read_format={:#x} flags={}",
        p.spec.name,
        leader.map_or("-".into(), |l| l.to_string()),
        a.type_,
        a.size,
        a.config,
        a.config1,
        a.config2,
        if p.freq { "sample_freq" } else { "sample_period" },
        a.sample_period_or_freq,
        a.sample_type,
        a.read_format,
        flags.join(",")
    );
}

/// The lines of `plan VERB` for these options.
pub fn print(verb: &str, o: &Opts) -> Result<String, String> {
    let spawned = o.pid.or(o.tid).is_none();
    let inherit = !o.no_inherit;
    let mut s = String::new();
    match verb {
        "record" => {
            let specs = record::asked_specs(o)?;
            let (plans, _, _) = record::base_plans(o, &specs, spawned, inherit, true);
            for (p, (_, l)) in plans.iter().zip(&specs) {
                line(&mut s, p, *l, "pid=CMD cpu=each");
            }
        }
        "stat" if o.topdown => {
            let r = topdown::detect(&topdown::sysfs_root(), o.level)?;
            let target = match r.kind {
                Kind::Metrics => "pid=CMD cpu=-1",
                Kind::Legacy => "pid=-1 cpu=each",
            };
            for (p, l) in topdown::stat_plans(&r, spawned, inherit) {
                line(&mut s, &p, l, target);
            }
            for n in &r.notes {
                let _ = writeln!(s, "# {n}");
            }
        }
        "stat" => {
            let mut index = 0;
            for n in stat::names(o) {
                // A group's members open into its leader's group, enabled with it.
                let (members, grouped) = labperf_common::evlist::members(&n)?;
                let leader = index;
                for (i, m) in members.iter().enumerate() {
                    let mut spec = events::parse(m)?;
                    spec.kernel |= sys::kernel_allowed() && !spec.modes;
                    let mut p = stat::plan_for(spec, spawned, inherit);
                    let member = grouped && i > 0;
                    if member {
                        (p.disabled, p.enable_on_exec) = (false, false);
                    }
                    line(&mut s, &p, member.then_some(leader), "pid=CMD cpu=-1");
                    index += 1;
                }
            }
        }
        _ => return Err("plan takes record or stat, then their options".into()),
    }
    Ok(s)
}
