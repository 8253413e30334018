//! `labperf completions SHELL`: the shell's completion script for labperf, generated from
//! the CLI definition (clap_complete), on standard output.

use anyhow::Result;

/// Print the completion script of labperf for a shell (bash, zsh, fish, elvish, powershell).
#[derive(Debug, clap::Args)]
#[command(
    after_help = "Where each shell reads it (the dist archive installs the first three under share/):\n  bash  ~/.local/share/bash-completion/completions/labperf (or source it from ~/.bashrc)\n  zsh   a directory of $fpath, as _labperf\n  fish  ~/.config/fish/completions/labperf.fish\n\nEXAMPLES:\n  labperf completions bash > ~/.local/share/bash-completion/completions/labperf\n  source <(labperf completions bash)        # this shell only\n  labperf completions zsh > ~/.zfunc/_labperf\n  labperf completions fish > ~/.config/fish/completions/labperf.fish"
)]
pub struct Args {
    /// The shell.
    #[arg(value_enum)]
    pub shell: clap_complete::Shell,
}

/// Writes the script of `a.shell` for `cli` (labperf's whole command line) to standard output.
pub fn run(a: &Args, mut cli: clap::Command) -> Result<()> {
    // Written whole (clap_complete panics on a failed write; `| head` is no error).
    let mut script = Vec::new();
    clap_complete::generate(a.shell, &mut cli, "labperf", &mut script);
    let mut out = std::io::stdout().lock();
    std::io::Write::write_all(&mut out, &script)?;
    std::io::Write::flush(&mut out)?;
    Ok(())
}
