//! `labperf import perf.data -o x.lpr`: a plain `perf record` recording as a labperf file.

use anyhow::{Context, Result};
use std::path::PathBuf;

/// Convert a perf.data file (from `perf record`) into a labperf record file.
#[derive(Debug, clap::Args)]
#[command(
    mut_arg("output", super::opts::help("The labperf record file to write (`-`: standard output; a device or FIFO is written straight through, a symbolic link's file is replaced)")),
    after_help = "Samples (with their callchains), mappings with their build-ids, comm, fork, exit, \
lost and throttle records are kept; other records are counted and left out. Kernel addresses \
are named as perf names them: from the kallsyms copy perf keeps in its build-id cache \
(~/.debug/[kernel.kallsyms]/<build-id>/kallsyms), or from /proc/kallsyms when this machine runs \
the recorded kernel at the same address. The result gets \
every labperf view and export. Binaries are found as for any recording (--symfs, the binary \
cache, the recorded paths).

EXAMPLES:
  perf record -e cpu-clock -c 250000 -o perf.data -- ./my-prog
  labperf import perf.data -o my-prog.lpr
  labperf report my-prog.lpr
  labperf export my-prog.lpr --format svg -o my-prog.svg"
)]
pub struct Args {
    /// The perf.data file.
    #[arg(default_value = "perf.data")]
    pub perf_data: PathBuf,
    #[command(flatten)]
    pub file: super::opts::RecordFileOpt,
}

pub fn run(a: &Args) -> Result<()> {
    // A directory or a socket is refused before anything is read.
    labperf::files::output::resolve(&a.file.output)?;
    let (f, _, _) = labperf::files::mapped::open_regular(&a.perf_data, u64::MAX)
        .with_context(|| format!("cannot open {}", a.perf_data.display()))?;
    // `-o` naming the input itself would replace the recording with its import.
    if let (Ok(i), Ok(o)) = (f.metadata(), std::fs::metadata(&a.file.output)) {
        use std::os::unix::fs::MetadataExt;
        if (i.dev(), i.ino()) == (o.dev(), o.ino()) {
            anyhow::bail!(
                "cannot import {} into itself: -o names the perf.data file being read; give \
                 another path (for example {}.lpr)",
                a.perf_data.display(),
                a.perf_data.display()
            );
        }
    }
    // perf.data is untrusted input read by another crate's parser: a panic there is a
    // malformed file, said as such (the release build unwinds too: see Cargo.toml), and
    // leaves no output behind (import's `.part` guard is dropped while unwinding).
    let out = a.file.output.clone();
    let r = std::panic::catch_unwind(move || labperf::import::import(f, &out));
    let got = match r {
        Ok(r) => r.with_context(|| format!("cannot import {}", a.perf_data.display()))?,
        Err(_) => anyhow::bail!(
            "cannot import {}: the perf.data parser failed on it (a malformed file)",
            a.perf_data.display()
        ),
    };
    for (feature, why) in &got.left_out {
        eprintln!(
            "labperf: warning: {}'s {feature} feature is damaged ({}): left out",
            labperf::text::show(&a.perf_data.display().to_string()),
            labperf::text::show(why)
        );
    }
    if let Some(k) = &got.kernel {
        eprintln!("labperf: {k}");
    }
    let mut notes = String::new();
    if got.skipped > 0 {
        notes += &format!(
            "; {} records of kinds labperf does not keep left out",
            got.skipped
        );
    }
    if got.cut_callchains > 0 {
        notes += &format!(
            "; {} callchains cut to their innermost {} frames",
            got.cut_callchains,
            labperf_common::MAX_CALLCHAIN
        );
    }
    if got.damaged > 0 {
        notes += &format!("; {} damaged records left out", got.damaged);
    }
    eprintln!(
        "labperf: {} records ({} samples) written to {}{notes}",
        got.records,
        got.samples,
        if labperf::files::output::is_stdout(&a.file.output) {
            "standard output".into()
        } else {
            a.file.output.display().to_string()
        },
    );
    Ok(())
}
