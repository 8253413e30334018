//! `labperf import perf.data -o x.lpr`: a plain `perf record` recording (a file or a stream)
//! as a labperf file; `source`, the on-the-fly import `report`, `export` and `diff` use.

use anyhow::{Context, Result};
use std::path::{Path, PathBuf};

/// Convert a perf.data file (from `perf record`) into a labperf record file.
#[derive(Debug, clap::Args)]
#[command(
    mut_arg("output", super::opts::help("The labperf record file to write (default: the input's name with .lpr, in the current directory: perf.data → perf.lpr; perf.lpr for standard input). An existing file there is kept as FILE.old, as perf keeps perf.data.old. `-`: standard output; a device or FIFO is written straight through, a symbolic link's file is replaced")),
    after_help = "Reads every perf.data perf writes: a whole file, or a `perf record -o -` stream (saved \
to a file, or on standard input as `-`, read as it comes), zstd-compressed records (`perf record \
-z`), every header version since perf 3.x, 32-bit targets. Samples (with their callchains and \
`--call-graph dwarf` user stacks), mappings with their build-ids, comm, fork, exit, lost and \
throttle records are kept; other records are counted and named by kind; samples' branch stacks \
(`-b`) and AUX trace data (Intel PT, Arm SPE, CoreSight) are left out and counted. Kernel \
addresses are named as perf names them: from the kallsyms copy perf keeps in its build-id cache \
(~/.debug/[kernel.kallsyms]/<build-id>/kallsyms), or from /proc/kallsyms when this machine runs \
the recorded kernel at the same address. The result gets every labperf view and export. \
Binaries are found as for any recording (--symfs, the binary cache, the recorded paths). \
`labperf report`, `export` and `diff` of a perf.data import it on the fly.

EXAMPLES:
  perf record -e cpu-clock -c 250000 -o perf.data -- ./my-prog
  labperf import perf.data                 # writes perf.lpr
  labperf import perf.data -o my-prog.lpr
  perf record -g -o - -- ./my-prog | labperf import - -o my-prog.lpr
  labperf report my-prog.lpr
  labperf export my-prog.lpr --format svg -o my-prog.svg"
)]
pub struct Args {
    /// The perf.data file: a whole file (`perf record -o FILE`) or a stream saved to a file
    /// (`perf record -o - > FILE`); `-`: a `perf record -o -` stream on standard input.
    #[arg(default_value = "perf.data")]
    pub perf_data: PathBuf,
    #[command(flatten)]
    pub file: super::opts::OutputOpt,
}

/// The record file an import writes without `-o`: the input's name with `.lpr` for its
/// extension, in the current directory (`perf.lpr` for standard input).
fn default_output(input: &Path) -> PathBuf {
    if input == Path::new("-") {
        return "perf.lpr".into();
    }
    let name = input
        .file_name()
        .map_or_else(|| PathBuf::from("perf"), PathBuf::from);
    name.with_extension("lpr")
}

/// perf's habit: an existing regular file at `out` is kept as `out.old` (linked, so that it
/// stays at `out` too until the import replaces it); returns the `.old` path.
fn keep_old(out: &Path) -> Result<Option<PathBuf>> {
    match std::fs::symlink_metadata(out) {
        Ok(m) if m.is_file() => {}
        _ => return Ok(None),
    }
    let mut old = out.as_os_str().to_owned();
    old.push(".old");
    let old = PathBuf::from(old);
    match std::fs::symlink_metadata(&old) {
        Ok(m) if m.is_file() || m.file_type().is_symlink() => std::fs::remove_file(&old)
            .with_context(|| format!("cannot replace {}", old.display()))?,
        Ok(_) => anyhow::bail!(
            "cannot keep {} as {}: that is not a regular file; move it away or name another \
             output with -o",
            out.display(),
            old.display()
        ),
        Err(_) => {}
    }
    if std::fs::hard_link(out, &old).is_err() {
        std::fs::copy(out, &old)
            .with_context(|| format!("cannot keep {} as {}", out.display(), old.display()))?;
    }
    Ok(Some(old))
}

/// Refuses a file whose first bytes say it is something else than perf.data (a labperf
/// recording, gzip, pprof, JSON…), naming what it is and what reads it.
fn not_perf_data(path: &Path) -> Result<()> {
    use labperf::files::kind::{of_file, Kind};
    match of_file(path) {
        None | Some(Kind::PerfData) => Ok(()),
        Some(k) => {
            let shown = labperf::text::show(&path.display().to_string()).into_owned();
            anyhow::bail!(
                "cannot import {shown}: it is {}, not perf's perf.data; {}",
                k.what(),
                k.remedy(&shown)
            )
        }
    }
}

pub fn run(a: &Args) -> Result<()> {
    let output = a
        .file
        .output
        .clone()
        .unwrap_or_else(|| default_output(&a.perf_data));
    // A directory or a socket is refused before anything is read.
    labperf::files::output::resolve(&output)?;
    let stdin = a.perf_data == Path::new("-");
    let file = if stdin {
        None
    } else {
        let (f, _, _) = labperf::files::mapped::open_regular(&a.perf_data, u64::MAX)
            .with_context(|| format!("cannot open {}", a.perf_data.display()))?;
        not_perf_data(&a.perf_data)?;
        // `-o` naming the input itself would replace the recording with its import.
        if let (Ok(i), Ok(o)) = (f.metadata(), std::fs::metadata(&output)) {
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
        Some(f)
    };
    let old = if labperf::files::output::is_stdout(&output) {
        None
    } else {
        keep_old(&output)?
    };
    // perf.data is untrusted input read by another crate's parser: a panic there is a
    // malformed file, said as such (the release build unwinds too: see Cargo.toml), and
    // leaves no output behind (import's `.part` guard is dropped while unwinding).
    let out = output.clone();
    let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(move || match file {
        Some(f) => labperf::import::import(f, &out),
        None => labperf::import::import_stream(std::io::stdin().lock(), &out),
    }));
    let input = if stdin {
        "standard input".to_string()
    } else {
        a.perf_data.display().to_string()
    };
    let got = match r {
        Ok(r) => r.with_context(|| format!("cannot import {input}"))?,
        Err(_) => anyhow::bail!(
            "cannot import {input}: the perf.data parser failed on it (a malformed file)"
        ),
    };
    for (feature, why) in &got.left_out {
        eprintln!(
            "labperf: warning: {}'s {feature} feature is damaged ({}): left out",
            labperf::text::show(&input),
            labperf::text::show(why)
        );
    }
    if let Some(cut) = &got.cut {
        eprintln!(
            "labperf: warning: {} is cut off: {cut}; the records before it are imported",
            labperf::text::show(&input)
        );
    }
    if super::quiet() {
        return Ok(());
    }
    if let Some(k) = &got.kernel {
        eprintln!("labperf: {k}");
    }
    let (head, notes) = summary(&got);
    eprintln!(
        "labperf: {head} written to {}{}{}{notes}",
        if labperf::files::output::is_stdout(&output) {
            "standard output".into()
        } else {
            output.display().to_string()
        },
        if got.pipe {
            " (from a `perf record -o -` stream)"
        } else {
            ""
        },
        old.map_or(String::new(), |o| format!(
            "; the file it replaced kept as {}",
            o.display()
        ))
    );
    Ok(())
}

/// "N records (M samples)", and what was left out of them, by kind.
fn summary(got: &labperf::import::Imported) -> (String, String) {
    let plural = |n: u64, one: &str, many: &str| format!("{n} {}", if n == 1 { one } else { many });
    let head = format!(
        "{} ({})",
        plural(got.records, "record", "records"),
        plural(got.samples, "sample", "samples")
    );
    let mut s = String::new();
    if got.compressed.0 > 0 {
        s += &format!(
            "; zstd-compressed records: {} bytes, {} decompressed",
            got.compressed.0, got.compressed.1
        );
    }
    if got.branch_stacks > 0 {
        s += &format!(
            "; {} kept without their branch stacks (labperf keeps none)",
            plural(got.branch_stacks, "sample was", "samples were")
        );
    }
    if got.aux.0 > 0 {
        s += &format!(
            "; {} of AUX trace data (Intel PT, Arm SPE or CoreSight; labperf decodes none) \
             left out",
            plural(got.aux.1, "byte", "bytes")
        );
    }
    if !got.skipped.is_empty() {
        let kinds: Vec<String> = got
            .skipped
            .iter()
            .map(|(k, n)| format!("{n} {k}"))
            .collect();
        s += &format!(
            "; records of kinds labperf does not keep left out: {}",
            kinds.join(", ")
        );
    }
    if got.cut_callchains > 0 {
        s += &format!(
            "; {} cut to their innermost {} frames",
            plural(got.cut_callchains, "callchain", "callchains"),
            labperf_common::MAX_CALLCHAIN
        );
    }
    if got.damaged > 0 {
        s += &format!(
            "; {} left out",
            plural(got.damaged, "damaged record", "damaged records")
        );
    }
    if got.rounds_added > 0 {
        s += &format!(
            "; {} added to a stream that had none for {} MiB",
            plural(got.rounds_added, "round boundary", "round boundaries"),
            labperf::import::ROUND_BYTES >> 20
        );
    }
    (head, s)
}

/// The record file `path` as `report`, `export` and `diff` read it: a labperf recording as
/// it is; perf's perf.data (a whole file or a saved `perf record -o -` stream) imported in
/// memory first, said on standard error with the command that keeps the import.
///
/// The file is opened and mapped once, here: the views' passes over it read the mapping. A
/// file that cannot be mapped (missing, a directory, a FIFO) is left for the view to open,
/// whose error says why.
pub fn source(path: &Path) -> Result<labperf::record::load::Source> {
    let Ok(src) = labperf::record::load::Source::mapped(path) else {
        return Ok(path.into());
    };
    let data = src.data()?;
    let bytes: &[u8] = (*data).as_ref();
    let perf = bytes.starts_with(b"PERFILE2") || bytes.starts_with(b"2ELIFREP");
    if !perf {
        return Ok(src);
    }
    let mut lpr = Vec::new();
    let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        labperf::import::import_to(std::io::Cursor::new(bytes), &mut lpr)
    }));
    let name = path.display().to_string();
    let shown = labperf::text::show(&name);
    let got = match r {
        Ok(r) => r.with_context(|| format!("{shown} is perf's perf.data: cannot import it"))?,
        Err(_) => anyhow::bail!(
            "{shown} is perf's perf.data: cannot import it: the perf.data parser failed on it \
             (a malformed file)"
        ),
    };
    let (head, notes) = summary(&got);
    // -q: the import goes unsaid (its warnings are the report's, said there).
    if !super::quiet() {
        eprintln!(
            "labperf: {shown} is perf's perf.data: imported for this command ({head}{notes}); \
             `labperf import {shown}` keeps the import"
        );
    }
    Ok(labperf::record::load::Source::bytes(
        &path.display().to_string(),
        std::sync::Arc::new(lpr),
    ))
}
