//! `labperf dump`'s text: one line per record, like `perf report -D`, every string from the
//! file escaped so that it cannot drive a terminal.

use crate::text::show;
use labperf_common::Record;

/// The trailer's USAGE item in one line: `scope=workload user_ns=... system_ns=...`.
pub fn usage_line(u: &labperf_common::Usage) -> String {
    let scope = match u.scope {
        labperf_common::UsageScope::Workload => "workload".to_string(),
        labperf_common::UsageScope::Process => "process".to_string(),
        labperf_common::UsageScope::Thread => "thread".to_string(),
        labperf_common::UsageScope::Cpus { cpus, idle_ns } => {
            format!("cpus cpus={cpus} idle_ns={idle_ns}")
        }
    };
    format!(
        "scope={scope} user_ns={} system_ns={} minor_faults={} major_faults={} resolution_ns={}",
        u.user_ns, u.system_ns, u.minor_faults, u.major_faults, u.resolution_ns
    )
}

/// The seed's `perf report -D` lines for a ProfileMe payload (each line indented).
pub fn profileme_lines(p: &labperf_common::profileme::Payload) -> String {
    format!(
        "\n         ProfileMe PMPC:\t{:016x} {} trap {}{}\
         \n         ProfileMe I_STAT:\t{:016x} TRP {} MIS {} LSO {} TrapType {} ICM {} OVR {}\
         \n         ProfileMe PCTR_CTL:\t{:016x} VAL {} TAK {} Stalled {} Killed {} SL0 {} SL1 {} PCTR0 {} PCTR1 {} ({})",
        p.pmpc,
        p.pc_class(),
        p.dump_trap_name(),
        if p.mispredicted() { " mispredicted" } else { "" },
        p.i_stat,
        p.trp(),
        p.mis(),
        p.lso(),
        p.trap_type(),
        p.icm(),
        p.ovr(),
        p.pctr_ctl,
        p.val(),
        p.tak(),
        p.stalled(),
        p.killed(),
        p.sl0(),
        p.sl1(),
        p.pctr0(),
        p.pctr1(),
        labperf_common::profileme::PCTR1_NAMES[p.sl1() as usize]
    )
}

pub fn line(r: &Record) -> String {
    match r {
        Record::Sample(s) => {
            let mut l = format!(
                "SAMPLE ev={} pid={} tid={} cpu={} time={} ip={:#x} period={}",
                s.event, s.pid, s.tid, s.cpu, s.time, s.ip, s.period
            );
            if !s.values.is_empty() {
                l += &format!(" values={:?}", s.values);
            }
            if !s.callchain.is_empty() {
                l += &format!(
                    " callchain=[{}]",
                    s.callchain
                        .iter()
                        .map(|a| format!("{a:#x}"))
                        .collect::<Vec<_>>()
                        .join(",")
                );
            }
            if let Some(u) = &s.user_stack {
                l += &format!(
                    " ustack=[sp={:#x} {} bytes regs={}]",
                    u.sp,
                    u.data.len(),
                    u.regs
                        .iter()
                        .map(|a| format!("{a:#x}"))
                        .collect::<Vec<_>>()
                        .join(",")
                );
            }
            if let Some(raw) = &s.raw {
                l += &format!(
                    " raw={}",
                    raw.iter().map(|b| format!("{b:02x}")).collect::<String>()
                );
            }
            if let Some(d) = s.data_src {
                l += &format!(" data_src={d:#x}");
            }
            if let Some(a) = s.addr {
                l += &format!(" addr={a:#x}");
            }
            l
        }
        Record::Mmap2(m) => format!(
            "MMAP2 pid={} tid={} [{:#x}({:#x}) @ {:#x}] prot={} flags={:#x} build_id={} {}",
            m.pid,
            m.tid,
            m.addr,
            m.len,
            m.pgoff,
            m.prot,
            m.flags,
            m.build_id
                .as_ref()
                .map(|b| b.iter().map(|x| format!("{x:02x}")).collect::<String>())
                .unwrap_or_else(|| "-".into()),
            show(&m.path)
        ),
        Record::Comm(c) => format!(
            "COMM{} pid={} tid={} {}",
            if c.exec { " (exec)" } else { "" },
            c.pid,
            c.tid,
            show(&c.comm)
        ),
        Record::Fork(t) => format!(
            "FORK pid={} ppid={} tid={} ptid={} time={}",
            t.pid, t.ppid, t.tid, t.ptid, t.time
        ),
        Record::Exit(t) => format!(
            "EXIT pid={} ppid={} tid={} ptid={} time={}",
            t.pid, t.ppid, t.tid, t.ptid, t.time
        ),
        Record::Lost(l) => format!("LOST ev={} lost={}", l.event, l.lost),
        Record::Throttle(t) => format!(
            "{} ev={} time={}",
            if t.throttle { "THROTTLE" } else { "UNTHROTTLE" },
            t.event,
            t.time
        ),
        Record::Interval(i) => format!(
            "INTERVAL time={} tid={} {} {}",
            i.time,
            i.tid.map(|t| t.to_string()).unwrap_or_else(|| "-".into()),
            if i.delta { "delta" } else { "total" },
            i.counts
                .iter()
                .map(|c| format!(
                    "ev{}={} (enabled {} running {})",
                    c.event, c.value, c.time_enabled, c.time_running
                ))
                .collect::<Vec<_>>()
                .join(" ")
        ),
        Record::KernelSymbols(k) => format!(
            "KSYMS {} symbols{}{}",
            k.syms.len(),
            k.hidden
                .map(|v| format!(" hidden (kptr_restrict={v})"))
                .unwrap_or_default(),
            k.syms
                .iter()
                .map(|s| format!(
                    " {:#x}..{:#x} {}{}",
                    s.start,
                    s.end,
                    crate::text::show(&s.name),
                    s.module
                        .as_deref()
                        .map(|m| format!(" [{}]", crate::text::show(m)))
                        .unwrap_or_default()
                ))
                .collect::<String>()
        ),
    }
}
