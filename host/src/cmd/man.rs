//! `labperf man DIR`: labperf's manual pages (`labperf.1`, one `labperf-VERB.1` per
//! subcommand), generated from the CLI definition (clap_mangen), written into a directory.

use anyhow::{Context, Result};
use std::path::{Path, PathBuf};

/// Write labperf's manual pages, labperf.1 and one labperf-VERB.1 per subcommand, into DIR.
#[derive(Debug, clap::Args)]
#[command(
    after_help = "`cargo xtask dist` puts them in the archive's share/man/man1; after `cargo install`,\nwrite them where man looks (manpath(1) lists it).\n\nEXAMPLES:\n  labperf man ~/.local/share/man/man1 && man labperf-record\n  labperf man /tmp/m && man -l /tmp/m/labperf-report.1"
)]
pub struct Args {
    /// The directory (made if missing; pages already there are replaced).
    #[arg(value_name = "DIR")]
    pub dir: PathBuf,
}

/// Writes the pages of `cli` (labperf's whole command line) into `a.dir`.
pub fn run(a: &Args, cli: clap::Command) -> Result<()> {
    let pages = write(cli, &a.dir)?;
    if !super::quiet() {
        eprintln!(
            "labperf: {} written to {}",
            labperf::text::plural(pages.len() as u64, "manual page", "manual pages"),
            labperf::text::show(&a.dir.display().to_string())
        );
    }
    Ok(())
}

/// Writes one page per command and subcommand (hidden ones left out) into `dir`, as
/// `clap_mangen::generate_to` does; returns their file names, in the order written.
pub fn write(cli: clap::Command, dir: &Path) -> Result<Vec<String>> {
    fn each(cmd: &clap::Command, dir: &Path, out: &mut Vec<String>) -> std::io::Result<()> {
        let man = clap_mangen::Man::new(cmd.clone());
        man.generate_to(dir)?;
        out.push(man.get_filename());
        for sub in cmd.get_subcommands().filter(|s| !s.is_hide_set()) {
            each(sub, dir, out)?;
        }
        Ok(())
    }
    std::fs::create_dir_all(dir).with_context(|| format!("cannot make {}", dir.display()))?;
    let mut cli = cli.disable_help_subcommand(true);
    cli.build();
    let mut pages = Vec::new();
    each(&cli, dir, &mut pages)
        .with_context(|| format!("cannot write the manual pages into {}", dir.display()))?;
    Ok(pages)
}
