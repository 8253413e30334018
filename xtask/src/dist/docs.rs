//! The dist tree's manual pages and shell completions: written by the tree's own labperf
//! (`labperf man`, `labperf completions`, both generated from its CLI definition) under
//! `share/`, and read back as a user reads them (`man` through MANPATH, bash's completion).

use anyhow::{bail, Context};
use std::path::Path;
use std::process::Command;

/// Where the manual pages go, under the tree (`MANPATH=TREE/share/man` finds them).
pub const MAN_DIR: &str = "share/man/man1";

/// Each shell's completion script and where it goes under the tree: where each shell's
/// own packages put theirs under a prefix (bash-completion, zsh's site-functions, fish's
/// vendor_completions.d).
pub const COMPLETIONS: [(&str, &str); 3] = [
    ("bash", "share/bash-completion/completions/labperf"),
    ("zsh", "share/zsh/site-functions/_labperf"),
    ("fish", "share/fish/vendor_completions.d/labperf.fish"),
];

/// Writes the manual pages and completion scripts of `labperf` (a built labperf) into
/// `tree`; returns how many manual pages were written.
pub fn write(labperf: &Path, tree: &Path) -> anyhow::Result<usize> {
    let man = tree.join(MAN_DIR);
    let o = Command::new(labperf)
        .arg("-q")
        .arg("man")
        .arg(&man)
        .output()
        .with_context(|| format!("cannot run {}", labperf.display()))?;
    if !o.status.success() {
        bail!("labperf man: {}", String::from_utf8_lossy(&o.stderr));
    }
    for (shell, to) in COMPLETIONS {
        let o = Command::new(labperf)
            .args(["completions", shell])
            .output()?;
        if !o.status.success() || o.stdout.is_empty() {
            bail!(
                "labperf completions {shell}: {}",
                String::from_utf8_lossy(&o.stderr)
            );
        }
        let to = tree.join(to);
        std::fs::create_dir_all(to.parent().unwrap())?;
        std::fs::write(&to, &o.stdout).with_context(|| format!("cannot write {}", to.display()))?;
    }
    Ok(std::fs::read_dir(&man)?
        .filter(|e| {
            e.as_ref()
                .is_ok_and(|e| e.file_name().to_string_lossy().ends_with(".1"))
        })
        .count())
}

/// A command with an empty environment but for PATH (/usr/bin:/bin) and HOME: what a user's
/// shell gives, without anything of cargo's.
fn clean(program: &str, home: &Path) -> Command {
    let mut c = Command::new(program);
    c.env_clear()
        .env("PATH", "/usr/bin:/bin")
        .env("HOME", home)
        .env("LC_ALL", "C");
    c
}

/// `man -P cat PAGE` with MANPATH at the tree's share/man, 200 columns wide: the page as
/// text (man's own formatting, so a page that groff cannot read fails here).
pub fn man(tree: &Path, home: &Path, page: &str) -> anyhow::Result<String> {
    let o = clean("man", home)
        .env("MANPATH", tree.join("share/man"))
        .env("MANWIDTH", "200")
        .args(["-P", "cat", page])
        .output()
        .context("cannot run man (package man-db: `cargo xtask setup --for dist`)")?;
    if !o.status.success() {
        bail!(
            "man {page} with MANPATH={}: {}",
            tree.join("share/man").display(),
            String::from_utf8_lossy(&o.stderr)
        );
    }
    Ok(String::from_utf8_lossy(&o.stdout).into_owned())
}

/// Loads the tree's bash completion in a fresh bash, prints `complete -p labperf`, then
/// what it completes each of `words` to (the word under the cursor last), one line per
/// case: the candidates joined by spaces.
pub fn bash_complete(tree: &Path, home: &Path, cases: &[&[&str]]) -> anyhow::Result<String> {
    let mut script = format!(
        ". '{}'\ncomplete -p labperf\n",
        tree.join(COMPLETIONS[0].1).display()
    );
    for words in cases {
        let quoted: Vec<String> = words.iter().map(|w| format!("'{w}'")).collect();
        let (cur, prev) = (words[words.len() - 1], words[words.len() - 2]);
        script.push_str(&format!(
            "COMP_WORDS=({}); COMP_CWORD={}; COMP_LINE='{}'; COMP_POINT=${{#COMP_LINE}}; COMPREPLY=()\n\
             _labperf labperf '{cur}' '{prev}'; echo \"${{COMPREPLY[*]}}\"\n",
            quoted.join(" "),
            words.len() - 1,
            words.join(" ")
        ));
    }
    let o = clean("bash", home).arg("-c").arg(&script).output()?;
    if !o.status.success() {
        bail!("bash: {}", String::from_utf8_lossy(&o.stderr));
    }
    Ok(String::from_utf8_lossy(&o.stdout).into_owned())
}

/// Reads the tree's manual and completions as a user would: `man labperf-record` names
/// record's options, `man labperf` its verbs, bash completes `labperf rec` and `--call-`.
pub fn check(tree: &Path, home: &Path) -> anyhow::Result<String> {
    let record = man(tree, home, "labperf-record")?;
    for want in [
        "labperf-record - Record a workload with the agent, then print its profile",
        "--call-graph",
    ] {
        if !record.contains(want) {
            bail!("man labperf-record does not say {want:?}:\n{record}");
        }
    }
    // With the tree's bin/ on PATH, as after unpacking it into a prefix, man finds the
    // pages with no MANPATH (man-db looks in BIN/../share/man of each PATH directory).
    let o = clean("man", home)
        .env(
            "PATH",
            format!("{}:/usr/bin:/bin", tree.join("bin").display()),
        )
        .args(["-w", "labperf-record"])
        .output()?;
    let found = String::from_utf8_lossy(&o.stdout);
    let want = tree.join(MAN_DIR).join("labperf-record.1");
    if found.trim() != want.to_string_lossy() {
        bail!(
            "man -w labperf-record with {}/bin on PATH found {found:?}, not {}: {}",
            tree.display(),
            want.display(),
            String::from_utf8_lossy(&o.stderr)
        );
    }
    let top = man(tree, home, "labperf")?;
    if !top.contains("labperf-report(1)") {
        bail!("man labperf does not name labperf-report(1):\n{top}");
    }
    let got = bash_complete(
        tree,
        home,
        &[&["labperf", "rec"], &["labperf", "record", "--call-"]],
    )?;
    let lines: Vec<&str> = got.lines().collect();
    if lines.len() != 3
        || !lines[0].starts_with("complete ")
        || !lines[0].contains(" -F _labperf ")
        || !lines[0].ends_with(" labperf")
        || lines[1] != "record"
        || lines[2] != "--call-graph"
    {
        bail!("bash's completion of labperf: {got}");
    }
    Ok(
        "man labperf-record found through MANPATH and with bin/ on PATH; bash completes labperf's verbs and options"
            .into(),
    )
}

/// `cargo xtask man`: the pages and completions `dist` packs, written into a tree here.
#[derive(clap::Args)]
pub struct Args {
    /// The tree to write into (share/man/man1, share/bash-completion/…).
    #[arg(long, value_name = "DIR", default_value_os_t = crate::util::target_dir().join("man-tree"))]
    pub out: std::path::PathBuf,
}

/// Builds the debug labperf and writes its pages and completions into `a.out`, checked as
/// `dist` checks its archive's.
pub fn run(a: &Args) -> anyhow::Result<String> {
    let sh = xshell::Shell::new()?;
    sh.change_dir(crate::util::root());
    xshell::cmd!(sh, "cargo build --quiet -p labperf").run()?;
    let labperf = crate::util::target_dir().join("debug/labperf");
    let n = write(&labperf, &a.out)?;
    let home = a.out.join(".home");
    std::fs::create_dir_all(&home)?;
    let checked = check(&a.out, &home)?;
    std::fs::remove_dir_all(&home)?;
    Ok(format!(
        "{n} manual pages in {} and completions under {}: {checked}",
        a.out.join(MAN_DIR).display(),
        a.out.join("share").display()
    ))
}

/// What `dist` prints: where the manual and completions are, and how to use them.
pub fn notes(top: &str) -> String {
    format!(
        "with {top}/bin on PATH, `man labperf-record` finds its pages (share/man/man1; else \
         MANPATH=DIR/share/man, or man -l DIR/{MAN_DIR}/labperf-record.1); bash: `source DIR/{}` \
         in ~/.bashrc, or copy it into ~/.local/share/bash-completion/completions/; zsh: DIR/share/zsh/site-functions in $fpath; fish: \
         DIR/share/fish/vendor_completions.d",
        COMPLETIONS[0].1
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::util::target_dir;

    /// The labperf the tests run: `$LABPERF_LABPERF` (`cargo xtask test` sets it), else the
    /// debug build.
    fn labperf() -> std::path::PathBuf {
        let p = std::env::var_os("LABPERF_LABPERF")
            .map(std::path::PathBuf::from)
            .unwrap_or_else(|| target_dir().join("debug/labperf"));
        assert!(
            p.is_file(),
            "{} is not built: cargo build -p labperf (or set LABPERF_LABPERF)",
            p.display()
        );
        p
    }

    fn run(c: &mut Command) -> String {
        let o = c.output().unwrap();
        assert!(
            o.status.success(),
            "{c:?}: {}",
            String::from_utf8_lossy(&o.stderr)
        );
        String::from_utf8_lossy(&o.stdout).into_owned()
    }

    /// The pages and completions written as `dist` writes them, packed and unpacked as
    /// `dist` packs them, and read there as a user reads them: `man labperf-record` through
    /// MANPATH and `man -l`, bash's completion (the same check dist makes of its archive).
    #[test]
    fn man_labperf_record_works_in_an_unpacked_tree_written_as_dist_writes_it() {
        let dir = target_dir().join("xtask-tests/dist-docs");
        let _ = std::fs::remove_dir_all(&dir);
        let (tree, home, unpacked) = (dir.join("labperf-t"), dir.join("home"), dir.join("u"));
        // dist's tree has bin/labperf; man looks beside each PATH directory.
        for d in [&tree.join("bin"), &home, &unpacked] {
            std::fs::create_dir_all(d).unwrap();
        }
        assert_eq!(write(&labperf(), &tree).unwrap(), 20);
        let tarball = dir.join("t.tar.gz");
        run(Command::new("tar")
            .arg("-C")
            .arg(&dir)
            .arg("-czf")
            .arg(&tarball)
            .arg("labperf-t"));
        run(Command::new("tar")
            .arg("-C")
            .arg(&unpacked)
            .arg("-xzf")
            .arg(&tarball));
        let top = unpacked.join("labperf-t");
        let mut pages: Vec<String> = std::fs::read_dir(top.join(MAN_DIR))
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        pages.sort();
        let verbs = [
            "agents",
            "annotate",
            "completions",
            "deploy",
            "diff",
            "dump",
            "export",
            "hosts",
            "hosts-check",
            "hosts-list",
            "import",
            "info",
            "list",
            "man",
            "probe",
            "record",
            "report",
            "script",
            "stat",
        ];
        let mut want: Vec<String> = verbs.iter().map(|v| format!("labperf-{v}.1")).collect();
        want.push("labperf.1".into());
        want.sort();
        assert_eq!(pages, want);
        check(&top, &home).unwrap();
        // man -l reads the file itself, as a user who did not install it would.
        let page = top.join(MAN_DIR).join("labperf-report.1");
        let text = run(clean("man", &home)
            .env("MANWIDTH", "200")
            .args(["-P", "cat", "-l"])
            .arg(&page));
        assert!(
            text.contains("labperf-report - Print a report of a record file"),
            "{text}"
        );
        for (shell, path) in COMPLETIONS {
            let s = std::fs::read_to_string(top.join(path)).unwrap();
            let head = match shell {
                "bash" => "_labperf() {",
                "zsh" => "#compdef labperf",
                _ => "complete -c labperf ",
            };
            assert!(s.contains(head), "{shell}: {path} has no {head:?}");
        }
    }
}
