//! The documentation's shape: README.md a front door (short, the first own-program example
//! early, no CI run or commit hash, the test command CI runs), ARCHITECTURE.md short with
//! every path it names present, and every relative link of the markdown files resolving.

use labperf_tests::root;
use std::collections::BTreeSet;
use std::path::Path;

fn read(name: &str) -> String {
    std::fs::read_to_string(root().join(name)).unwrap()
}

/// Words of 7 to 40 hexadecimal digits with a digit and a letter: what a commit hash looks like.
fn hash_like(text: &str) -> Vec<String> {
    text.split(|c: char| !c.is_ascii_alphanumeric())
        .filter(|w| {
            (7..=40).contains(&w.len())
                && w.chars()
                    .all(|c| c.is_ascii_digit() || ('a'..='f').contains(&c))
                && w.chars().any(|c| c.is_ascii_digit())
                && w.chars().any(|c| c.is_ascii_alphabetic())
        })
        .map(str::to_string)
        .collect()
}

/// `CI` followed by a digit: a CI run's name.
fn ci_runs(text: &str) -> Vec<String> {
    text.match_indices("CI")
        .filter(|(i, _)| text[i + 2..].starts_with(|c: char| c.is_ascii_digit()))
        .map(|(i, _)| text[i..].chars().take(6).collect())
        .collect()
}

#[test]
fn the_readme_is_a_front_door() {
    let readme = read("README.md");
    let lines: Vec<&str> = readme.lines().collect();
    assert!(
        lines.len() <= 300,
        "README.md has {} lines (300 at most)",
        lines.len()
    );
    let first = lines
        .iter()
        .position(|l| l.starts_with("$ labperf record"))
        .expect("README.md has no `$ labperf record` example");
    assert!(
        first < 60,
        "the first own-program example is at line {}",
        first + 1
    );
    assert_eq!(
        hash_like(&readme),
        Vec::<String>::new(),
        "commit hashes in README.md"
    );
    assert_eq!(
        ci_runs(&readme),
        Vec::<String>::new(),
        "CI runs in README.md"
    );
    // CI (`.ci/run`) runs the README's test command: the first `cargo xtask` command of the
    // README that names test or ci, as the before-stop hook finds it.
    let cmd = readme
        .lines()
        .filter_map(|l| l.find("cargo xtask ").map(|i| &l[i..]))
        .map(|c| c.split('`').next().unwrap().trim_end())
        .find(|c| c.contains("test") || c.contains("ci"))
        .expect("README.md names no test command");
    assert_eq!(cmd, "cargo xtask test");
    assert!(
        read(".ci/run").lines().any(|l| l.trim() == cmd),
        ".ci/run does not run `{cmd}`"
    );
}

#[test]
fn the_checks_see_hashes_and_ci_runs() {
    assert_eq!(
        hash_like("at 4272f93, not 2796000000 or deadbeef"),
        ["4272f93"]
    );
    assert_eq!(ci_runs("CI7 and CI110, not CI alone"), ["CI7 an", "CI110,"]);
}

/// Every file and directory of the tree but `target/` and `.git/`, relative to the root.
fn tree(dir: &Path, out: &mut BTreeSet<String>) {
    for e in std::fs::read_dir(dir).unwrap() {
        let p = e.unwrap().path();
        let rel = p.strip_prefix(root()).unwrap().display().to_string();
        if rel == "target" || rel == ".git" {
            continue;
        }
        if p.is_dir() {
            out.insert(format!("{rel}/"));
            tree(&p, out);
        } else {
            out.insert(rel);
        }
    }
}

/// What the text names in backticks that reads as a path of this tree: no blank, no
/// placeholder (`<`, `*`, `…`), no Rust path (`::`), not an option or an absolute or home
/// path; with a `/`, or a file name with one of the tree's extensions.
fn named_paths(text: &str) -> Vec<String> {
    const EXT: &[&str] = &[
        ".rs", ".c", ".h", ".md", ".toml", ".patch", ".config", ".svg", ".ld",
    ];
    text.split('`')
        .skip(1)
        .step_by(2)
        .filter(|t| {
            !t.is_empty()
                && !t.contains([' ', '<', '*', '…', '(', '{', '|', '='])
                && !t.contains("::")
                && !t.starts_with(['-', '~', '/', '$', '.'])
                && !t.starts_with("target/")
                && (t.contains('/') || EXT.iter().any(|e| t.ends_with(e)))
        })
        .map(str::to_string)
        .collect()
}

/// Whether a named path exists: with a `/`, from the root, from `host/src/` or from a host
/// crate's `host/crates/NAME/src/` (the host's folders are named as the library names them);
/// a bare file name, anywhere in the tree.
fn exists(name: &str, tree: &BTreeSet<String>) -> bool {
    let crates = tree.iter().filter(|p| {
        p.starts_with("host/crates/") && p.ends_with("/src/") && p.matches('/').count() == 4
    });
    if name.contains('/') {
        ["", "host/src/"]
            .into_iter()
            .chain(crates.map(String::as_str))
            .any(|base| {
                let p = format!("{base}{name}");
                tree.contains(&p) || tree.contains(&format!("{p}/"))
            })
    } else {
        tree.iter()
            .any(|p| p == name || p.ends_with(&format!("/{name}")))
    }
}

#[test]
fn architecture_is_short_and_names_only_paths_that_exist() {
    let text = read("ARCHITECTURE.md");
    let n = text.lines().count();
    assert!(n < 200, "ARCHITECTURE.md has {n} lines (under 200)");
    let mut files = BTreeSet::new();
    tree(&root(), &mut files);
    let named = named_paths(&text);
    assert!(
        named.len() > 50,
        "only {} paths found: {named:?}",
        named.len()
    );
    let missing: Vec<&String> = named.iter().filter(|p| !exists(p, &files)).collect();
    assert!(
        missing.is_empty(),
        "ARCHITECTURE.md names paths that do not exist: {missing:?}"
    );
    // The scan reads what it must, and a missing file is missed.
    assert_eq!(
        named_paths(
            "`host/src/cmd/` `lab/push.rs` `sys.rs` `--by` `a::b.rs` `<x>/y.rs` `Cargo.toml`"
        ),
        ["host/src/cmd/", "lab/push.rs", "sys.rs", "Cargo.toml"]
    );
    assert!(!exists("host/src/cmd/nothing.rs", &files) && !exists("nothing.rs", &files));
}

#[test]
fn every_relative_link_of_the_markdown_resolves() {
    let mut docs: Vec<String> = ["README.md", "ARCHITECTURE.md", "CHANGELOG.md"]
        .map(String::from)
        .to_vec();
    for e in std::fs::read_dir(root().join("docs")).unwrap() {
        let p = e.unwrap().path();
        if p.extension().is_some_and(|x| x == "md") {
            docs.push(p.strip_prefix(root()).unwrap().display().to_string());
        }
    }
    let mut broken = Vec::new();
    for d in &docs {
        let text = read(d);
        let dir = root().join(d).parent().unwrap().to_path_buf();
        for part in text.split("](").skip(1) {
            let target = part.split(')').next().unwrap().split('#').next().unwrap();
            if target.is_empty() || target.contains("://") {
                continue;
            }
            if !dir.join(target).exists() {
                broken.push(format!("{d}: {target}"));
            }
        }
    }
    assert!(broken.is_empty(), "links to nothing: {broken:?}");
}
