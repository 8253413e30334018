//! `labperf agents`: the agent binaries labperf can deploy, checked with `object` (machine, static, size).

use anyhow::{bail, Context, Result};
use object::Object;
use std::path::{Path, PathBuf};

/// The agent's target triple for a `uname -m` architecture.
pub fn triple_for(arch: &str) -> Option<&'static str> {
    match arch {
        "x86_64" => Some("x86_64-unknown-linux-musl"),
        "aarch64" | "arm64" => Some("aarch64-unknown-linux-musl"),
        "alpha" => Some("alpha-unknown-linux-gnu"),
        _ => None,
    }
}

/// Where labperf looks for the agents, in order: `$LABPERF_AGENTS_DIR` (that one only);
/// the `<prefix>/lib/labperf/agents` of an installed `cargo xtask dist` tree (labperf in
/// `<prefix>/bin`); the `agents` directory beside the binary; the agents of the build tree
/// it runs from (`<target>/agents` for a labperf in `<target>/debug` or `release`); and the
/// `target/agents` of the source tree this `labperf` was built from (so `cargo install
/// --path host` finds what `cargo xtask build-agents` built). No other directory above the
/// binary: a labperf copied to `/tmp` does not take `/tmp/agents`. Whatever is found there
/// is used only when [`check_trusted`] takes it.
pub fn agents_candidates() -> Vec<PathBuf> {
    if let Some(d) = std::env::var_os("LABPERF_AGENTS_DIR").filter(|d| !d.is_empty()) {
        // Named by the user: that one only, so a wrong path is said, not passed over.
        return vec![d.into()];
    }
    let mut candidates = Vec::new();
    if let Some(bin) = std::env::current_exe()
        .ok()
        .and_then(|e| e.parent().map(Path::to_path_buf))
    {
        // Parents taken, not `..` joined: the paths said to the user have no `..` in them.
        if let Some(prefix) = bin.parent() {
            candidates.push(prefix.join("lib/labperf/agents"));
        }
        candidates.push(bin.join("agents"));
        if bin
            .file_name()
            .is_some_and(|n| n == "debug" || n == "release")
        {
            if let Some(target) = bin.parent() {
                candidates.push(target.join("agents"));
            }
        }
    }
    let host = Path::new(env!("CARGO_MANIFEST_DIR"));
    candidates.push(host.parent().unwrap_or(host).join("target/agents"));
    candidates
}

/// Refuses `path` (an agent or bench labperf runs here or uploads to lab machines) when
/// another user could have put it there or could replace it: the file or any directory
/// above it owned by a user other than root and you, or writable by group or others (a
/// world-writable directory with the sticky bit, as `/tmp`, protects what it holds: the
/// entry below it is checked instead). Returns the file's real path (links resolved),
/// which is what labperf then reads.
pub fn check_trusted(path: &Path) -> Result<PathBuf> {
    use std::os::unix::fs::MetadataExt;
    let real = std::fs::canonicalize(path)
        .with_context(|| format!("{}: cannot read the agent", path.display()))?;
    // SAFETY: geteuid has no preconditions.
    let me = unsafe { libc::geteuid() };
    let shown = if real == path {
        path.display().to_string()
    } else {
        format!("{} ({})", path.display(), real.display())
    };
    let fix = "labperf runs and uploads agents only from where you or root put them: move \
               them to a directory only you or root can write (and name it with \
               LABPERF_AGENTS_DIR), or rebuild them with `cargo xtask build-agents`";
    // A link another user owns on the way (made in a sticky directory such as /tmp, where
    // anyone may add a name): it could point at any program of root's.
    if let Some(l) = labperf::files::output::planted_link(path) {
        use std::os::unix::fs::MetadataExt;
        let uid = std::fs::symlink_metadata(&l).map_or(0, |m| m.uid());
        bail!(
            "refusing the agent {shown}: the symbolic link {} belongs to user {uid} (neither you nor root), who could point it at any program. {fix}",
            l.display()
        );
    }
    for (i, p) in real.ancestors().enumerate() {
        let m = std::fs::metadata(p).with_context(|| format!("cannot read {}", p.display()))?;
        let what = if i == 0 { "the file" } else { "the directory" };
        if m.uid() != 0 && m.uid() != me {
            bail!(
                "refusing the agent {shown}: {what} {} belongs to user {} (neither you nor root), who could have put anything there. {fix}",
                p.display(),
                m.uid()
            );
        }
        let mode = m.mode() & 0o7777;
        let sticky_dir = i > 0 && m.is_dir() && mode & 0o1000 != 0;
        if mode & 0o022 != 0 && !sticky_dir {
            let who = match (mode & 0o020 != 0, mode & 0o002 != 0) {
                (true, true) => "its group and every user",
                (true, false) => "its group",
                _ => "every user",
            };
            bail!(
                "refusing the agent {shown}: {what} {} is writable by {who} (mode {mode:04o}), who could replace the agent that labperf runs as you and uploads to lab machines. `chmod go-w {}`, or: {fix}",
                p.display(),
                p.display()
            );
        }
    }
    Ok(real)
}

/// The first of [`agents_candidates`] that is a directory.
pub fn agents_dir() -> Option<PathBuf> {
    agents_candidates().into_iter().find(|d| d.is_dir())
}

/// The directories [`agents_candidates`] names, for an error that says where labperf looked.
fn looked_in() -> String {
    agents_candidates()
        .iter()
        .map(|d| d.display().to_string())
        .collect::<Vec<_>>()
        .join(", ")
}

/// The agent for architecture `arch`: $LABPERF_AGENT (for this machine's), or from [`agents_dir`].
pub fn agent_for(arch: &str) -> Result<PathBuf> {
    shipped_for(arch, "labperf-agent", "LABPERF_AGENT")
}

/// The known-answer workload `labperf-bench` for architecture `arch`: $LABPERF_BENCH (for
/// this machine's), or from [`agents_dir`] beside the agent.
pub fn bench_for(arch: &str) -> Result<PathBuf> {
    shipped_for(arch, "labperf-bench", "LABPERF_BENCH")
}

/// The program `name` built for architecture `arch`: $`env` (for this machine's), or
/// `<triple>/<name>` under [`agents_dir`].
/// Whichever way it is found, it is used only when [`check_trusted`] takes it.
fn shipped_for(arch: &str, name: &str, env: &str) -> Result<PathBuf> {
    if arch == std::env::consts::ARCH {
        if let Some(p) = std::env::var_os(env) {
            return check_trusted(Path::new(&p));
        }
    }
    let triple = triple_for(arch).with_context(|| {
        format!(
            "labperf has no {name} for the {} architecture (it has x86_64, aarch64 and alpha)",
            labperf::text::show(arch)
        )
    })?;
    let p = agents_dir()
        .map(|d| d.join(triple).join(name))
        .filter(|p| p.is_file());
    let p = p.with_context(|| {
        format!(
            "cannot find the {triple} {name} (looked under {}): build it with `cargo xtask \
             build-agents --target {arch}`, set LABPERF_AGENTS_DIR to the directory holding \
             {triple}/{name}, or set {env}=/path/to/{name}",
            looked_in()
        )
    })?;
    check_trusted(&p)
}

/// The agent for this machine.
pub fn find_agent() -> Result<PathBuf> {
    agent_for(std::env::consts::ARCH)
}

/// List the agents labperf can deploy, and check each is a static ELF of its target.
#[derive(Debug, clap::Args)]
#[command(after_help = "EXAMPLES:\n  labperf agents\n  labperf agents --dir target/agents --check")]
pub struct Args {
    /// Directory holding <triple>/labperf-agent (default: the first of $LABPERF_AGENTS_DIR,
    /// <prefix>/lib/labperf/agents, the `agents` directory beside labperf, the agents of
    /// the build tree it runs from, the target/agents of the source tree labperf was built
    /// from).
    #[arg(long)]
    pub dir: Option<PathBuf>,
    /// Exit 1 unless every binary is static and of its directory's architecture.
    #[arg(long)]
    pub check: bool,
}

/// What `object` says about one binary.
pub struct BinInfo {
    pub arch: &'static str,
    pub interpreter: Option<String>,
    pub dynamic: bool,
    pub size: u64,
}

pub fn inspect(path: &Path) -> Result<BinInfo> {
    let data = std::fs::read(path).with_context(|| format!("cannot read {}", path.display()))?;
    let f = object::File::parse(&*data)
        .with_context(|| format!("{} is not an object file object can read", path.display()))?;
    let arch = match f.architecture() {
        object::Architecture::X86_64 => "x86_64",
        object::Architecture::Aarch64 => "aarch64",
        object::Architecture::Alpha => "alpha",
        _ => "other",
    };
    // PT_INTERP names the dynamic loader; a static binary has none.
    let mut interpreter = None;
    if let object::File::Elf64(e) = &f {
        use object::read::elf::ProgramHeader;
        let endian = e.endian();
        for ph in e.elf_program_headers() {
            if ph.p_type(endian) == object::elf::PT_INTERP {
                if let Ok(b) = ph.data(endian, &*data) {
                    interpreter = Some(
                        String::from_utf8_lossy(b)
                            .trim_end_matches('\0')
                            .to_string(),
                    );
                }
            }
        }
    }
    // Imported symbols mean shared libraries (a static-pie has PT_DYNAMIC but imports nothing).
    let dynamic = f.imports().map(|i| i.count() > 0).unwrap_or(false);
    Ok(BinInfo {
        arch,
        interpreter,
        dynamic,
        size: data.len() as u64,
    })
}

/// The architecture a `target/agents/<dir>` name is for.
fn expected_arch(dir: &str) -> Option<&'static str> {
    ["x86_64", "aarch64", "alpha"]
        .into_iter()
        .find(|a| dir.starts_with(a) || dir.ends_with(a))
}

pub fn run(a: &Args) -> Result<()> {
    let dir = match &a.dir {
        Some(d) => d.clone(),
        None => {
            let d = agents_dir().with_context(|| {
                format!(
                    "no agent directory found (looked in {}): build the agents with `cargo \
                     xtask build-agents`, set LABPERF_AGENTS_DIR, or pass --dir",
                    looked_in()
                )
            })?;
            eprintln!("labperf: the agents in {}", d.display());
            d
        }
    };
    let mut entries: Vec<PathBuf> = std::fs::read_dir(&dir)
        .with_context(|| format!("cannot list {}", dir.display()))?
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.is_dir())
        .collect();
    entries.sort();
    let mut bad = Vec::new();
    // Agents labperf will not run (another user could have put or replaced them): an error
    // with or without --check, as a record with them would be.
    let mut refused = Vec::new();
    println!(
        "{:<30} {:<14} {:<8} {:<7} {:>9}",
        "target", "binary", "machine", "static", "KiB"
    );
    for d in entries {
        let name = d
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        for bin in ["labperf-agent", "labperf-bench"] {
            let p = d.join(bin);
            if !p.is_file() {
                continue;
            }
            if let Err(e) = check_trusted(&p) {
                eprintln!("labperf: {e:#}");
                refused.push(format!("{e:#}"));
                println!("{name:<30} {bin:<14} refused (see above)");
                continue;
            }
            let i = inspect(&p)?;
            let is_static = i.interpreter.is_none() && !i.dynamic;
            println!(
                "{name:<30} {bin:<14} {:<8} {:<7} {:>9.1}",
                i.arch,
                if is_static { "yes" } else { "NO" },
                i.size as f64 / 1024.0
            );
            if !is_static {
                bad.push(format!(
                    "{} is not static (interpreter {:?})",
                    p.display(),
                    i.interpreter
                ));
            }
            if expected_arch(&name).is_some_and(|want| want != i.arch) {
                bad.push(format!(
                    "{} is {} but sits under {name}",
                    p.display(),
                    i.arch
                ));
            }
        }
    }
    if !refused.is_empty() {
        bail!(
            "{} of the agents listed would be refused by record, stat and --host (above)",
            refused.len()
        );
    }
    if a.check && !bad.is_empty() {
        bail!("{}", bad.join("; "));
    }
    Ok(())
}
