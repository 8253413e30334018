//! `labperf dump FILE`: every record decoded, one per line, like `perf report -D`.

use anyhow::{Context, Result};
use labperf_common::Record;
use std::io::Write;
use std::path::PathBuf;

/// Print every record of a file, decoded.
#[derive(Debug, clap::Args)]
#[command(
    after_help = "EXAMPLES:\n  labperf dump labperf.lpr | less\n  labperf dump bench.lpr | grep MMAP2"
)]
pub struct Args {
    #[arg(default_value = "labperf.lpr")]
    pub file: PathBuf,
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
            m.path
        ),
        Record::Comm(c) => format!(
            "COMM{} pid={} tid={} {}",
            if c.exec { " (exec)" } else { "" },
            c.pid,
            c.tid,
            c.comm
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
    }
}

pub fn run(a: &Args) -> Result<()> {
    let stdout = std::io::stdout();
    let mut out = std::io::BufWriter::new(stdout.lock());
    let mut n = 0u64;
    let mut err = None;
    let mut pm = labperf::profileme::Skipped::default();
    let mut pm_decoded = 0u64;
    let mut types: Option<Vec<u32>> = None;
    let info = labperf::load::stream_with_header(&a.file, |h, r| {
        n += 1;
        if err.is_some() {
            return;
        }
        let mut text = line(r);
        // Alpha recordings: decode each sample's ProfileMe payload as `perf report -D` does.
        if let (Some(h), Record::Sample(s)) = (h, r) {
            if h.arch == labperf_common::Arch::Alpha {
                let t =
                    types.get_or_insert_with(|| h.events.iter().map(|e| e.attr.type_).collect());
                match labperf::profileme::payload(t, s) {
                    Ok(p) => {
                        pm_decoded += 1;
                        text += &profileme_lines(&p);
                    }
                    Err(e) => pm.add(e),
                }
            }
        }
        if let Err(e) = writeln!(out, "{n:>8} {text}") {
            err = Some(e);
        }
    })
    .with_context(|| format!("cannot dump {}", a.file.display()))?;
    match err {
        Some(e) if e.kind() == std::io::ErrorKind::BrokenPipe => return Ok(()),
        Some(e) => return Err(e).context("cannot write to stdout"),
        None => {}
    }
    if info
        .header
        .as_ref()
        .is_some_and(|h| h.arch == labperf_common::Arch::Alpha)
    {
        writeln!(
            out,
            "PROFILEME decoded={pm_decoded} skipped={} (short={} version={} not_cpu_pmu={})",
            pm.total(),
            pm.short,
            pm.version,
            pm.not_cpu_pmu
        )
        .ok();
    }
    out.flush().ok();
    for d in &info.damage {
        writeln!(out, "DAMAGE {d}").ok();
    }
    Ok(())
}
