//! Tidy tests (rust-analyzer style): conventions that no compiler checks. Every external
//! program the code starts has its Debian package in `xtask/src/setup.rs` (so a fresh
//! machine's `cargo xtask setup` installs it), every source file says what it owns, the
//! release `labperf` unwinds on panic while the agents abort, no import cycle in `host/` or
//! `common/`, and no function over 120 lines but the ones [`LONG_FNS`] names.

use labperf_tests::root;
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// A token of Rust source, as far as these checks need: string literals (their value),
/// identifiers and single punctuation characters.
#[derive(Debug, Clone, PartialEq)]
enum Tok {
    Str(String),
    Ident(String),
    Punct(char),
}

/// Splits Rust source into [`Tok`]s, skipping comments, char literals and lifetimes.
fn lex(src: &str) -> Vec<Tok> {
    lex_lines(src).into_iter().map(|(t, _)| t).collect()
}

/// [`lex`], with the line (from 1) each token starts on.
fn lex_lines(src: &str) -> Vec<(Tok, usize)> {
    let c: Vec<char> = src.chars().collect();
    let mut out = Vec::new();
    let mut lines = Vec::new();
    let (mut line, mut counted) = (1, 0);
    let mut i = 0;
    while i < c.len() {
        let ch = c[i];
        let (start, before) = (i, out.len());
        if ch == '/' && c.get(i + 1) == Some(&'/') {
            while i < c.len() && c[i] != '\n' {
                i += 1;
            }
        } else if ch == '/' && c.get(i + 1) == Some(&'*') {
            i += 2;
            while i + 1 < c.len() && !(c[i] == '*' && c[i + 1] == '/') {
                i += 1;
            }
            i += 2;
        } else if ch == '"' {
            let (s, n) = quoted(&c[i + 1..]);
            out.push(Tok::Str(s));
            i += n + 2;
        } else if (ch == 'r' || ch == 'b')
            && !matches!(out.last(), Some(Tok::Ident(_)))
            && raw_start(&c[i..]).is_some()
        {
            let (skip, hashes) = raw_start(&c[i..]).unwrap();
            i += skip;
            let start = i;
            loop {
                if i >= c.len() {
                    break;
                }
                if c[i] == '"'
                    && c[i + 1..]
                        .iter()
                        .take(hashes)
                        .filter(|&&h| h == '#')
                        .count()
                        == hashes
                {
                    break;
                }
                i += 1;
            }
            out.push(Tok::Str(c[start..i.min(c.len())].iter().collect()));
            i += 1 + hashes;
        } else if ch == 'b' && c.get(i + 1) == Some(&'"') {
            let (s, n) = quoted(&c[i + 2..]);
            out.push(Tok::Str(s));
            i += n + 3;
        } else if ch == '\'' {
            // A char literal ('x', '\n', '\'') or a lifetime ('a).
            if c.get(i + 1) == Some(&'\\') {
                i += 2;
                while i < c.len() && c[i] != '\'' {
                    i += 1;
                }
                i += 1;
            } else if c.get(i + 2) == Some(&'\'') {
                i += 3;
            } else {
                i += 1;
            }
        } else if ch.is_alphanumeric() || ch == '_' {
            let start = i;
            while i < c.len() && (c[i].is_alphanumeric() || c[i] == '_') {
                i += 1;
            }
            out.push(Tok::Ident(c[start..i].iter().collect()));
        } else {
            if !ch.is_whitespace() {
                out.push(Tok::Punct(ch));
            }
            i += 1;
        }
        if out.len() > before {
            line += c[counted..start].iter().filter(|&&x| x == '\n').count();
            counted = start;
            lines.push(line);
        }
    }
    out.into_iter().zip(lines).collect()
}

/// The value of a string literal starting after its opening quote, and its length.
fn quoted(c: &[char]) -> (String, usize) {
    let mut s = String::new();
    let mut i = 0;
    while i < c.len() && c[i] != '"' {
        if c[i] == '\\' && i + 1 < c.len() {
            i += 1;
            s.push(match c[i] {
                'n' => '\n',
                't' => '\t',
                '\n' => {
                    // A line continuation: the next line's leading spaces are skipped.
                    while i + 1 < c.len() && c[i + 1].is_whitespace() {
                        i += 1;
                    }
                    i += 1;
                    continue;
                }
                x => x,
            });
        } else {
            s.push(c[i]);
        }
        i += 1;
    }
    (s, i)
}

/// For `r"`, `r#"`, `br#"`: (chars before the contents, number of #).
fn raw_start(c: &[char]) -> Option<(usize, usize)> {
    let mut i = 0;
    if c.first() == Some(&'b') {
        i += 1;
    }
    if c.get(i) != Some(&'r') {
        return None;
    }
    i += 1;
    let mut hashes = 0;
    while c.get(i) == Some(&'#') {
        hashes += 1;
        i += 1;
    }
    (c.get(i) == Some(&'"')).then_some((i + 1, hashes))
}

/// Shell keywords and builtins (dash's): not programs.
const SHELL_WORDS: &[&str] = &[
    "if", "then", "else", "elif", "fi", "case", "esac", "for", "while", "until", "do", "done",
    "in", "exec", "echo", "test", "[", "cd", "set", "shift", "export", "read", "exit", "wait",
    "trap", "local", "return", "eval", "unset", ":", ".", "!", "{", "}", "command", "umask",
    "break", "continue",
];

/// The programs a shell script starts: the first word of every simple command.
fn shell_programs(script: &str) -> Vec<String> {
    // Single-quoted text is data (patterns, arguments): out before anything else.
    let mut s = String::new();
    let mut quoted = false;
    for c in script.chars() {
        match (c, quoted) {
            ('\'', q) => {
                quoted = !q;
                if !q {
                    s.push('Q');
                }
            }
            (_, true) => {}
            (c, false) => s.push(c),
        }
    }
    for sep in ["&&", "||", "$(", "`", "|", ";", "(", ")", "\n"] {
        s = s.replace(sep, "\u{0}");
    }
    let mut out = Vec::new();
    for cmd in s.split('\u{0}') {
        let mut words = cmd.split_whitespace().peekable();
        // Skip assignments (a=b) and redirections before the command word.
        while let Some(w) = words.peek() {
            if w.contains('=') && !w.starts_with('=') || w.contains('>') || w.contains('<') {
                words.next();
            } else {
                break;
            }
        }
        // Keywords and prefixes that a command follows.
        const PREFIX: &[&str] = &[
            "exec", "command", "!", "{", "}", "then", "do", "else", "elif", "if", "while", "until",
            "time",
        ];
        let skip = |x: &str| {
            PREFIX.contains(&x)
                || (x.contains('=') && !x.starts_with('='))
                || x.contains('>')
                || x.contains('<')
        };
        let mut w = words.next();
        while w.is_some_and(skip) {
            w = words.next();
        }
        let Some(w) = w else { continue };
        if SHELL_WORDS.contains(&w) {
            continue;
        }
        // Expansions, quoted words and case patterns are not program names.
        if w.contains(['$', '{', '"', '\'', '*', '\\', '%']) || w.ends_with(')') {
            continue;
        }
        let name = w.rsplit('/').next().unwrap_or(w);
        if name
            .chars()
            .all(|ch| ch.is_ascii_alphanumeric() || "-_.+".contains(ch))
            && name
                .chars()
                .next()
                .is_some_and(|ch| ch.is_ascii_alphabetic())
        {
            out.push(name.to_string());
        }
    }
    out
}

/// Where a program is started: file and what the code says.
#[derive(Debug, Clone, PartialEq)]
struct Use {
    program: String,
    context: String,
}

fn first_word(s: &str) -> Option<String> {
    let w = s.split_whitespace().next()?;
    if w.starts_with('{') {
        return None; // an interpolated path: a binary this workspace builds or found at run time
    }
    Some(w.rsplit('/').next().unwrap_or(w).to_string())
}

/// Every external program `src` starts: `Command::new("X")`, `cmd!(sh, "X ...")`, the
/// commands of `sh -c` scripts and of `#!/bin/sh` scripts, and (`remote`) the shell
/// commands the host sends through `Remote::run` / `Remote::check`.
fn programs_started(src: &str, remote: bool) -> Vec<Use> {
    let t = lex(src);
    let talks_remote = src.contains("Remote");
    let mut out = Vec::new();
    let ident = |i: usize, s: &str| matches!(t.get(i), Some(Tok::Ident(x)) if x == s);
    let punct = |i: usize, p: char| matches!(t.get(i), Some(Tok::Punct(x)) if *x == p);
    for (i, tok) in t.iter().enumerate() {
        let Tok::Str(s) = tok else { continue };
        let mut add = |program: Option<String>, context: &str| {
            if let Some(program) = program {
                out.push(Use {
                    program,
                    context: format!("{context} {:?}", s.chars().take(60).collect::<String>()),
                });
            }
        };
        // Command::new("X")
        if i >= 5
            && punct(i - 1, '(')
            && ident(i - 2, "new")
            && punct(i - 3, ':')
            && ident(i - 5, "Command")
        {
            add(first_word(s), "Command::new");
        }
        // compile(dir, "X", ...): the tests' compilers (tests/src/known.rs)
        if i >= 4
            && punct(i - 1, ',')
            && matches!(t.get(i - 2), Some(Tok::Ident(_)))
            && punct(i - 3, '(')
            && ident(i - 4, "compile")
        {
            add(first_word(s), "compile");
        }
        // cmd!(sh, "X ...")
        if i >= 5
            && punct(i - 1, ',')
            && punct(i - 3, '(')
            && punct(i - 4, '!')
            && ident(i - 5, "cmd")
        {
            add(first_word(s), "cmd!");
            let words: Vec<&str> = s.split_whitespace().collect();
            if words.len() >= 3
                && words[0].ends_with("sh")
                && words[1] == "-c"
                && !words[2].starts_with('{')
            {
                for p in shell_programs(&words[2..].join(" ")) {
                    add(Some(p), "cmd! sh -c");
                }
            }
        }
        // A script after "-c", or a whole script.
        let after_c = (1..=5).any(|k| i >= k && t[i - k] == Tok::Str("-c".into()));
        let script = after_c || s.starts_with("#!/bin/sh");
        if script {
            let body = s.strip_prefix("#!/bin/sh").unwrap_or(s);
            for p in shell_programs(body) {
                add(Some(p), "shell script");
            }
        }
        // The host's remote commands: remote.run("cmd", ..), .check(what, "cmd", ..), also
        // through format!: the literal after as many commas as the command's argument index.
        if remote {
            let sink = (1..=12).any(|k| {
                if i < k + 1 || !punct(i - k, '(') {
                    return false;
                }
                let commas_before = if ident(i - k - 1, "run") {
                    0
                } else if ident(i - k - 1, "check") {
                    1
                } else {
                    return false;
                };
                let mut depth = 0i32;
                let mut commas = 0;
                for tok in &t[i - k + 1..i] {
                    match tok {
                        Tok::Punct('(') | Tok::Punct('[') => depth += 1,
                        Tok::Punct(')') | Tok::Punct(']') => depth -= 1,
                        Tok::Punct(',') if depth == 0 => commas += 1,
                        _ => {}
                    }
                }
                commas == commas_before && depth >= 0
            });
            // Shell text kept in a constant (`const X: &str = "..."`), in a file that talks
            // to lab machines (others keep CSS or schemas in constants).
            let constant = talks_remote
                && i >= 4
                && s.contains([';', '|', '&', '$'])
                && punct(i - 1, '=')
                && (ident(i - 2, "str") || ident(i - 3, "str"))
                && t[..i]
                    .iter()
                    .rev()
                    .take(8)
                    .any(|x| *x == Tok::Ident("const".into()));
            if (sink || constant) && !script && s.contains(' ') {
                for p in shell_programs(s) {
                    add(Some(p), "remote command");
                }
            }
        }
    }
    out
}

/// (program, package or crate) pairs of `xtask/src/setup.rs`'s PROGRAMS and CARGO_TOOLS,
/// and its TOOLCHAIN.
fn setup_table() -> (Vec<(String, String)>, Vec<String>) {
    let src = std::fs::read_to_string(root().join("xtask/src/setup.rs")).unwrap();
    let t = lex(&src);
    let after = |name: &str| {
        t.iter()
            .position(|x| *x == Tok::Ident(name.into()))
            .unwrap_or_else(|| panic!("setup.rs has no {name}"))
    };
    let mut pairs = Vec::new();
    for table in ["PROGRAMS", "CARGO_TOOLS"] {
        let mut i = after(table);
        while i + 3 < t.len() && t[i] != Tok::Punct(';') {
            if let (Tok::Punct('('), Tok::Str(a), Tok::Punct(','), Tok::Str(b)) =
                (&t[i], &t[i + 1], &t[i + 2], &t[i + 3])
            {
                pairs.push((a.clone(), b.clone()));
            }
            i += 1;
        }
    }
    let mut toolchain = Vec::new();
    let mut i = after("TOOLCHAIN");
    while i < t.len() && t[i] != Tok::Punct(';') {
        if let Tok::Str(s) = &t[i] {
            toolchain.push(s.clone());
        }
        i += 1;
    }
    (pairs, toolchain)
}

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for e in std::fs::read_dir(dir).unwrap().flatten() {
        let p = e.path();
        if p.is_dir() {
            if !p.ends_with("target") && !p.ends_with("data") {
                rust_files(&p, out);
            }
        } else if p.extension().is_some_and(|x| x == "rs") {
            out.push(p);
        }
    }
}

/// A `pub const NAME: &[&str] = &[...]` list of `host/crates/lab/src/lab/remote/mod.rs`.
fn remote_list(name: &str) -> Vec<String> {
    let src =
        std::fs::read_to_string(root().join("host/crates/lab/src/lab/remote/mod.rs")).unwrap();
    let t = lex(&src);
    let at = t
        .iter()
        .position(|x| *x == Tok::Ident(name.into()))
        .unwrap_or_else(|| panic!("host/crates/lab/src/lab/remote/mod.rs has no {name}"));
    t[at..]
        .iter()
        .take_while(|x| **x != Tok::Punct(';'))
        .filter_map(|x| match x {
            Tok::Str(s) => Some(s.clone()),
            _ => None,
        })
        .collect()
}

/// Programs this workspace builds.
const OURS: &[&str] = &["labperf", "labperf-agent", "labperf-bench", "xtask"];

/// Checks `uses` against the table; returns one line per program that has no package.
fn unlisted(
    uses: &[(PathBuf, Use)],
    table: &[(String, String)],
    toolchain: &[String],
) -> Vec<String> {
    uses.iter()
        .filter(|(_, u)| {
            !OURS.contains(&u.program.as_str())
                && !toolchain.contains(&u.program)
                && !table.iter().any(|(p, _)| *p == u.program)
        })
        .map(|(f, u)| format!("{}: {} ({})", f.display(), u.program, u.context))
        .collect()
}

#[test]
fn every_program_started_has_its_package_in_xtask_setup() {
    let (table, toolchain) = setup_table();
    assert!(
        table.len() > 20
            && table
                .iter()
                .any(|(p, k)| p == "sshd" && k == "openssh-server")
    );
    let mut files = Vec::new();
    for d in ["tests", "xtask", "host"] {
        rust_files(&root().join(d), &mut files);
    }
    assert!(files.len() > 20, "{files:?}");
    let mut uses = Vec::new();
    for f in &files {
        let src = std::fs::read_to_string(f).unwrap();
        let remote = f.starts_with(root().join("host"));
        for u in programs_started(&src, remote) {
            uses.push((f.strip_prefix(root()).unwrap().to_path_buf(), u));
        }
    }
    // The scan sees what it must: sshd, ssh-keygen, cpio, qemu and the host's remote commands.
    for must in [
        "sshd",
        "ssh-keygen",
        "qemu-alpha",
        "qemu-system-aarch64",
        "cpio",
        "sha256sum",
        "uname",
        "mkdir",
        "pgrep",
        "head",
    ] {
        assert!(
            uses.iter().any(|(_, u)| u.program == must),
            "the scan missed {must}: {uses:#?}"
        );
    }
    // What the host runs on lab machines is what it says a lab machine needs; the
    // fallbacks are tried only when present, so they need no package here.
    let (lab, fallbacks) = (remote_list("LAB_PROGRAMS"), remote_list("LAB_FALLBACKS"));
    let undeclared: Vec<String> = uses
        .iter()
        .filter(|(_, u)| u.context.starts_with("remote command"))
        .filter(|(_, u)| !lab.contains(&u.program) && !fallbacks.contains(&u.program))
        .map(|(f, u)| format!("{}: {} ({})", f.display(), u.program, u.context))
        .collect();
    assert!(
        undeclared.is_empty(),
        "the host runs programs on lab machines that remote::LAB_PROGRAMS does not list:\n{}",
        undeclared.join("\n")
    );
    let mut needed = uses.clone();
    needed.retain(|(_, u)| !fallbacks.contains(&u.program));
    needed.extend(lab.iter().map(|p| {
        (
            PathBuf::from("host/crates/lab/src/lab/remote/mod.rs"),
            Use {
                program: p.clone(),
                context: "LAB_PROGRAMS".into(),
            },
        )
    }));
    let bad = unlisted(&needed, &table, &toolchain);
    assert!(
        bad.is_empty(),
        "programs started without a Debian package in xtask/src/setup.rs PROGRAMS (a fresh machine lacks them):\n{}",
        bad.join("\n")
    );
}

#[test]
fn the_scan_catches_a_program_without_a_package() {
    let (table, toolchain) = setup_table();
    let src = r##"
        fn f() {
            Command::new("frobnicate").arg("x");
            cmd!(sh, "zork --fast {x}").run();
            Command::new("sh").args(["-c", "cat f | quux -n && sha256sum f"]);
            compile(dir, "frobcc", &["-O2"]);
            const S: &str = r#"#!/bin/sh
case "$X" in
  a*) blorb 1 ;;
esac
"#;
            r.run(&format!("mkdir -p {} && wibble {}", a, b), None, |_| {});
            // Command::new("commented-out")
            let c = '"'; Command::new("cat");
        }
    "##;
    let uses: Vec<(PathBuf, Use)> = programs_started(src, true)
        .into_iter()
        .map(|u| (PathBuf::from("x.rs"), u))
        .collect();
    let names: Vec<&str> = uses.iter().map(|(_, u)| u.program.as_str()).collect();
    for want in [
        "frobnicate",
        "zork",
        "sh",
        "cat",
        "quux",
        "sha256sum",
        "blorb",
        "mkdir",
        "wibble",
        "frobcc",
    ] {
        assert!(names.contains(&want), "{want} not found in {names:?}");
    }
    assert!(!names.contains(&"commented-out"), "{names:?}");
    let bad = unlisted(&uses, &table, &toolchain);
    let bad_names: Vec<&str> = bad
        .iter()
        .map(|l| l.split(": ").nth(1).unwrap().split(' ').next().unwrap())
        .collect();
    assert_eq!(
        bad_names,
        ["frobnicate", "zork", "quux", "frobcc", "blorb", "wibble"],
        "{bad:#?}"
    );
}

#[test]
fn every_source_file_starts_with_what_it_owns() {
    let mut files = Vec::new();
    for d in ["common", "agents", "host", "xtask", "tests", "fuzz"] {
        rust_files(&root().join(d), &mut files);
    }
    let bad: Vec<String> = files
        .iter()
        .filter(|f| {
            !std::fs::read_to_string(f)
                .unwrap()
                .lines()
                .next()
                .is_some_and(|l| l.starts_with("//! "))
        })
        .map(|f| f.display().to_string())
        .collect();
    assert!(
        bad.is_empty(),
        "files without a leading `//!` line: {bad:?}"
    );
}

/// The release `labperf` unwinds, so `labperf import` turns a panic in the perf.data parser
/// into an error instead of an abort (the tests run a debug build, which always unwinds:
/// only the profiles say what the shipped binary does); the agents abort (their size
/// budget, and build.rs drops their unwind tables).
#[test]
fn the_host_s_release_profile_unwinds_and_the_agents_abort() {
    let read = |p: &str| std::fs::read_to_string(root().join(p)).unwrap();
    let manifest: toml::Table = read("Cargo.toml").parse().unwrap();
    let profile = |name: &str| -> toml::Table {
        manifest["profile"]
            .get(name)
            .and_then(toml::Value::as_table)
            .cloned()
            .unwrap_or_else(|| panic!("Cargo.toml has no [profile.{name}]"))
    };
    let panic_of = |t: &toml::Table| {
        t.get("panic")
            .and_then(toml::Value::as_str)
            .map(String::from)
    };
    let release = profile("release");
    assert!(
        matches!(panic_of(&release).as_deref(), None | Some("unwind")),
        "[profile.release] sets panic = {:?}: the release labperf would abort on a panic that \
         `labperf import` catches (give the agents their own profile)",
        panic_of(&release)
    );
    let agent = profile("agent");
    assert_eq!(
        agent.get("inherits").and_then(toml::Value::as_str),
        Some("release")
    );
    assert_eq!(
        panic_of(&agent).as_deref(),
        Some("abort"),
        "[profile.agent]"
    );
    // The host is built for speed, the agents for size (docs/measurements.md, "The host's release
    // build"): the agent profile says its size settings itself, not through release.
    let get = |t: &toml::Table, k: &str| t.get(k).map(ToString::to_string);
    assert_eq!(
        get(&release, "opt-level").as_deref(),
        Some("3"),
        "[profile.release]"
    );
    assert_eq!(
        get(&agent, "opt-level").as_deref(),
        Some("\"z\""),
        "[profile.agent]"
    );
    assert_eq!(
        get(&agent, "lto").as_deref(),
        Some("true"),
        "[profile.agent]"
    );
    assert_eq!(
        get(&agent, "codegen-units").as_deref(),
        Some("1"),
        "[profile.agent]"
    );
    // No cargo configuration overrides a profile.
    let config: toml::Table = read(".cargo/config.toml").parse().unwrap();
    assert!(
        !config.contains_key("profile"),
        ".cargo/config.toml sets a profile"
    );
    // `cargo xtask build-agents` (so `test`, `demo` and `dist`) builds both with it (the
    // agent; the bench with frame pointers, without, and for glibc).
    let xtask = read("xtask/src/build_agents.rs");
    assert!(xtask.contains("pub const PROFILE: &str = \"agent\";"));
    let builds: Vec<&str> = xtask
        .lines()
        .filter(|l| l.contains("-p labperf-agent") || l.contains("-p labperf-bench"))
        .collect();
    assert_eq!(builds.len(), 4, "{builds:#?}");
    for l in builds {
        assert!(
            l.contains("--profile {PROFILE}") && !l.contains("--release"),
            "{l}"
        );
    }
    // And the host refuses to build with abort at all.
    assert!(read("host/src/main.rs").contains("#[cfg(not(panic = \"unwind\"))]\ncompile_error!"));
}

// ---------------------------------------------------------------------------------------
// Import cycles: which source file uses which, read from `use` items and inline paths.

/// The modules of one crate: module path → the file that holds it (an inline `mod x { }`
/// is held by its file), and each file's own module path.
#[derive(Debug, Default)]
struct Crate {
    modules: BTreeMap<Vec<String>, PathBuf>,
    files: Vec<(PathBuf, Vec<String>)>,
}

/// Tokens that open an inline `mod name {`: the name, if `t[i]` is one.
fn inline_mod(t: &[(Tok, usize)], i: usize) -> Option<&str> {
    match (&t[i].0, t.get(i + 1), t.get(i + 2)) {
        (Tok::Ident(m), Some((Tok::Ident(name), _)), Some((Tok::Punct('{'), _))) if m == "mod" => {
            Some(name)
        }
        _ => None,
    }
}

/// Walks the `mod x;` declarations from the crate root `root` (a file of `src`): `mod x;` in
/// a file that owns folder `d` is `d/x.rs` or `d/x/mod.rs`.
fn crate_modules(src: &Path, root: &str) -> Crate {
    let mut c = Crate::default();
    // (module path, file relative to src, the folder its children live in)
    let mut todo = vec![(Vec::<String>::new(), PathBuf::from(root), PathBuf::new())];
    while let Some((path, file, dir)) = todo.pop() {
        let text = std::fs::read_to_string(src.join(&file)).unwrap();
        let t = lex_lines(&text);
        let mut inline: Vec<(String, usize)> = Vec::new();
        let mut depth = 0;
        c.modules.insert(path.clone(), file.clone());
        for i in 0..t.len() {
            match &t[i].0 {
                Tok::Punct('{') => depth += 1,
                Tok::Punct('}') => {
                    depth -= 1;
                    if inline.last().is_some_and(|(_, d)| *d == depth) {
                        inline.pop();
                    }
                }
                _ => {}
            }
            let names = || inline.iter().map(|(n, _)| n.clone());
            if let Some(name) = inline_mod(&t, i) {
                let mut p = path.clone();
                p.extend(names());
                p.push(name.to_string());
                c.modules.insert(p, file.clone());
                inline.push((name.to_string(), depth));
            } else if let (Tok::Ident(m), Some((Tok::Ident(name), _)), Some((Tok::Punct(';'), _))) =
                (&t[i].0, t.get(i + 1), t.get(i + 2))
            {
                if m != "mod" {
                    continue;
                }
                let mut d = dir.clone();
                d.extend(names());
                let (flat, folder) = (d.join(format!("{name}.rs")), d.join(name).join("mod.rs"));
                let child = if src.join(&flat).exists() {
                    flat
                } else {
                    folder
                };
                assert!(
                    src.join(&child).exists(),
                    "{}: mod {name}; has no file",
                    file.display()
                );
                let mut p = path.clone();
                p.extend(names());
                p.push(name.clone());
                todo.push((p, child, d.join(name)));
            }
        }
        c.files.push((file, path));
    }
    c
}

/// The paths a `use` tree names, from `t[*i]` to its end (`;`, `,` or `}`), each with
/// `prefix` in front; a trailing `self` names the module itself.
fn use_tree(t: &[(Tok, usize)], i: &mut usize, prefix: Vec<String>, out: &mut Vec<Vec<String>>) {
    let mut path = prefix;
    while let Some((tok, _)) = t.get(*i) {
        match tok {
            Tok::Ident(s) if s == "as" => {
                *i += 2;
                break;
            }
            Tok::Ident(s) if s == "self" && !path.is_empty() => *i += 1,
            Tok::Ident(s) => {
                path.push(s.clone());
                *i += 1;
            }
            Tok::Punct(':') | Tok::Punct('*') => *i += 1,
            Tok::Punct('{') => {
                *i += 1;
                while *i < t.len() && t[*i].0 != Tok::Punct('}') {
                    use_tree(t, i, path.clone(), out);
                    if t.get(*i).is_some_and(|(x, _)| *x == Tok::Punct(',')) {
                        *i += 1;
                    }
                }
                *i += 1;
                return;
            }
            _ => break,
        }
    }
    out.push(path);
}

/// The absolute module path `segs` names from module `here`, or None for another crate's
/// (`std::`, `serde::`): `crate::`, `self::`, `super::`, or a module `here` holds.
fn absolute(segs: &[String], here: &[String], c: &Crate) -> Option<Vec<String>> {
    let first = segs.first()?;
    match first.as_str() {
        "crate" => Some(segs[1..].to_vec()),
        "self" => Some([here, &segs[1..]].concat()),
        "super" => {
            let ups = segs.iter().take_while(|s| *s == "super").count();
            let base = &here[..here.len().checked_sub(ups)?];
            Some([base, &segs[ups..]].concat())
        }
        _ => {
            let p = [here, &segs[..1]].concat();
            c.modules.contains_key(&p).then(|| [here, segs].concat())
        }
    }
}

/// The file that holds what absolute path `p` names: its longest prefix that is a module.
fn file_of<'a>(p: &[String], c: &'a Crate) -> &'a PathBuf {
    (0..=p.len())
        .rev()
        .find_map(|n| c.modules.get(&p[..n]))
        .expect("the crate root is a module")
}

/// The paths `t` uses (in `use` items, `pub use` re-exports and inline `crate::`, `self::`,
/// `super::` or child-module paths), each with its line and the module it is used from.
/// `mod x;` declarations are not uses.
fn paths_used(t: &[(Tok, usize)], file_mod: &[String]) -> Vec<(Vec<String>, Vec<String>, usize)> {
    let mut out = Vec::new();
    let mut inline: Vec<(String, usize)> = Vec::new();
    let (mut depth, mut i) = (0, 0);
    let colons = |k: usize| {
        matches!(t.get(k), Some((Tok::Punct(':'), _)))
            && matches!(t.get(k + 1), Some((Tok::Punct(':'), _)))
    };
    while i < t.len() {
        let here: Vec<String> = file_mod
            .iter()
            .cloned()
            .chain(inline.iter().map(|(n, _)| n.clone()))
            .collect();
        match &t[i].0 {
            Tok::Punct('{') => depth += 1,
            Tok::Punct('}') => {
                depth -= 1;
                if inline.last().is_some_and(|(_, d)| *d == depth) {
                    inline.pop();
                }
            }
            Tok::Ident(u) if u == "use" => {
                let (line, mut leaves) = (t[i].1, Vec::new());
                i += 1;
                use_tree(t, &mut i, Vec::new(), &mut leaves);
                out.extend(leaves.into_iter().map(|l| (l, here.clone(), line)));
                continue;
            }
            Tok::Ident(_) if inline_mod(t, i).is_some() => {
                inline.push((inline_mod(t, i).unwrap().to_string(), depth));
            }
            Tok::Ident(s)
                if colons(i + 1)
                    && !(i >= 2 && colons(i - 2))
                    && !(i >= 1 && t[i - 1].0 == Tok::Punct('.')) =>
            {
                let mut segs = vec![s.clone()];
                let mut k = i + 1;
                while colons(k) {
                    match t.get(k + 2) {
                        Some((Tok::Ident(n), _)) => segs.push(n.clone()),
                        _ => break,
                    }
                    k += 3;
                }
                // In code a path's last segment is an item (a function, type, constant),
                // never a module, even where a module of the same name exists.
                segs.pop();
                out.push((segs, here.clone(), t[i].1));
                i = k;
                continue;
            }
            _ => {}
        }
        i += 1;
    }
    out
}

/// Which file of `src` uses which (files relative to `src`), with the line of the first
/// use; the crates are those rooted at `src/lib.rs` and `src/main.rs`.
fn import_graph(src: &Path) -> BTreeMap<PathBuf, BTreeMap<PathBuf, usize>> {
    let mut g: BTreeMap<PathBuf, BTreeMap<PathBuf, usize>> = BTreeMap::new();
    for root in ["lib.rs", "main.rs"]
        .into_iter()
        .filter(|r| src.join(r).exists())
    {
        let c = crate_modules(src, root);
        for (file, module) in &c.files {
            g.entry(file.clone()).or_default();
            let text = std::fs::read_to_string(src.join(file)).unwrap();
            for (segs, here, line) in paths_used(&lex_lines(&text), module) {
                let Some(abs) = absolute(&segs, &here, &c) else {
                    continue;
                };
                let to = file_of(&abs, &c);
                if to != file {
                    g.get_mut(file).unwrap().entry(to.clone()).or_insert(line);
                }
            }
        }
    }
    g
}

/// The shortest cycle through the graph (first file in name order among the shortest),
/// as the files along it, and every file that is on some cycle.
fn shortest_cycle(
    g: &BTreeMap<PathBuf, BTreeMap<PathBuf, usize>>,
) -> Option<(Vec<PathBuf>, Vec<PathBuf>)> {
    let mut best: Option<Vec<PathBuf>> = None;
    let mut on_cycle = Vec::new();
    for start in g.keys() {
        // Breadth first from `start` until an edge leads back to it.
        let mut from: BTreeMap<&PathBuf, &PathBuf> = BTreeMap::new();
        let mut queue = std::collections::VecDeque::from([start]);
        let mut found = None;
        'bfs: while let Some(n) = queue.pop_front() {
            for m in g[n].keys() {
                if m == start {
                    found = Some(n);
                    break 'bfs;
                }
                if g.contains_key(m) && !from.contains_key(m) {
                    from.insert(m, n);
                    queue.push_back(m);
                }
            }
        }
        let Some(mut n) = found else { continue };
        on_cycle.push(start.clone());
        let mut path = vec![start.clone()];
        while n != start {
            path.insert(1, n.clone());
            n = from[n];
        }
        path.push(start.clone());
        if best.as_ref().is_none_or(|b| path.len() < b.len()) {
            best = Some(path);
        }
    }
    best.map(|b| (b, on_cycle))
}

/// The failure message for a cycle in `src`: the cycle, where each file uses the next,
/// and the files on cycles.
fn describe_cycle(
    src: &str,
    g: &BTreeMap<PathBuf, BTreeMap<PathBuf, usize>>,
    (cycle, on_cycle): &(Vec<PathBuf>, Vec<PathBuf>),
) -> String {
    let name = |p: &PathBuf| p.display().to_string();
    let names: Vec<String> = cycle.iter().map(name).collect();
    let mut s = format!("import cycle in {src}: {}\n", names.join(" → "));
    for w in cycle.windows(2) {
        s += &format!(
            "  {}:{} uses {}\n",
            name(&w[0]),
            g[&w[0]][&w[1]],
            name(&w[1])
        );
    }
    let all: Vec<String> = on_cycle.iter().map(name).collect();
    s + &format!("  files on a cycle: {}\n", all.join(", "))
}

#[test]
fn no_import_cycle_in_host_common_or_the_agent() {
    let mut cycles = String::new();
    for (src, at_least) in [
        ("common/src", 15),
        ("host/src", 60),
        ("host/crates/record/src", 20),
        ("host/crates/symbolize/src", 30),
        ("host/crates/import/src", 5),
        ("host/crates/report/src", 40),
        ("host/crates/lab/src", 30),
        ("agents/labperf-agent/src", 30),
    ] {
        let g = import_graph(&root().join(src));
        let edges: usize = g.values().map(BTreeMap::len).sum();
        assert!(
            edges >= at_least,
            "the scan of {src} found {edges} uses: {g:#?}"
        );
        if let Some(c) = shortest_cycle(&g) {
            cycles += &describe_cycle(src, &g, &c);
        }
    }
    assert!(
        cycles.is_empty(),
        "dependencies must run one way (move what both sides need into a lower module):\n{cycles}"
    );
}

/// The host's layers, lowest first, per crate: a file may use its own layer's files and
/// those of layers before it, never one after (`ARCHITECTURE.md`'s "Layers"). In each crate
/// the first, its base, is the files directly in its `src/`. Between crates Cargo keeps the
/// order (a crate cannot use one that depends on it), so a layer that is a crate of its own
/// is checked here only against the other layers of its crate: labperf-record (`host/crates/record/`)
/// holds the base, `files` and `record`; labperf-symbolize (`host/crates/symbolize/`) and
/// labperf-import (`host/crates/import/`) are one layer each, so nothing is checked here;
/// labperf-report (`host/crates/report/`) holds `render`, `views` and `export`; labperf-lab
/// (`host/crates/lab/`) is one layer. The `labperf` library (`host/src/lib.rs`) only re-exports
/// them, and its binary (`main.rs`, `cmd/`) is above all.
const HOST_LAYERS: &[(&str, &[&str])] = &[
    ("host/crates/record/src", &["", "files", "record"]),
    ("host/crates/report/src", &["", "render", "views", "export"]),
];

/// Every use in `src` (a crate's source folder) of a later layer from an earlier one, as "file:line uses file".
fn layer_violations(src: &Path, layers: &[&str]) -> Vec<String> {
    let layer_of = |p: &Path| {
        let folder = match p.components().count() {
            1 => "",
            _ => p.components().next().unwrap().as_os_str().to_str().unwrap(),
        };
        layers.iter().position(|l| *l == folder)
    };
    let mut out = Vec::new();
    for (file, uses) in import_graph(src) {
        let Some(from) = layer_of(&file) else {
            continue;
        };
        for (to, line) in uses {
            if layer_of(&to).is_some_and(|l| l > from) {
                out.push(format!("{}:{line} uses {}", file.display(), to.display()));
            }
        }
    }
    out
}

#[test]
fn host_layers_use_only_the_layers_below_them() {
    let mut problems = String::new();
    for (dir, layers) in HOST_LAYERS {
        let src = root().join(dir);
        for l in &layers[1..] {
            assert!(
                src.join(l).join("mod.rs").is_file(),
                "{dir}/{l}/ is no module folder"
            );
        }
        let bad = layer_violations(&src, layers);
        if !bad.is_empty() {
            problems += &format!(
                "in {dir} (layers, lowest first: base, {}):\n{}\n",
                layers[1..].join(", "),
                bad.join("\n")
            );
        }
    }
    assert!(
        problems.is_empty(),
        "a lower layer uses a higher one:\n{problems}"
    );
}

#[test]
fn the_layer_check_sees_a_lower_folder_using_a_higher_one() {
    let dir = synthetic_tree(
        "layers",
        &[
            ("lib.rs", "pub mod low;\npub mod high;\npub mod util;\n"),
            ("util.rs", "pub fn f() {}\n"),
            ("low/mod.rs", "pub mod a;\n"),
            (
                "low/a.rs",
                "pub fn g() { crate::util::f(); crate::high::b::h(); }\n",
            ),
            ("high/mod.rs", "pub mod b;\n"),
            ("high/b.rs", "pub fn h() { crate::low::a::g(); }\n"),
        ],
    );
    assert_eq!(
        layer_violations(&dir, &["", "low", "high"]),
        ["low/a.rs:1 uses high/b.rs"]
    );
    assert!(layer_violations(&dir, &["", "high", "low"]).len() == 1);
}

/// Writes `files` (path, text) under a fresh temporary folder and returns it.
fn synthetic_tree(name: &str, files: &[(&str, &str)]) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("labperf-tidy-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    for (path, text) in files {
        let p = dir.join(path);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(p, text).unwrap();
    }
    dir
}

#[test]
fn the_import_scan_sees_folders_re_exports_and_cycles() {
    let acyclic: &[(&str, &str)] = &[
        ("lib.rs", "//! r\npub mod a;\nmod b;\npub use b::Thing;\nmod tests { use super::*; }\n"),
        // Folder-aware: crate::b::x::helper is b/x.rs, not b/mod.rs.
        (
            "a.rs",
            "//! a\nuse std::fmt;\n// crate::b::Thing in a comment\nfn f() { let s = \"crate::b\"; crate::b::x::helper(); }\n",
        ),
        // A folder's mod.rs declaring its child is no use of it.
        ("b/mod.rs", "//! b\npub mod x;\n#[cfg(test)]\nmod inner {\n    use super::super::LIMIT;\n}\npub struct Thing;\n"),
        ("b/x.rs", "//! x\nuse super::{Thing, self as parent};\npub fn helper() {}\n"),
        ("main.rs", "//! bin\nmod cmd;\nfn main() { cmd::go(); }\n"),
        ("cmd/mod.rs", "//! cmd\nmod go;\npub use self::go::go;\n"),
        ("cmd/go.rs", "//! go\npub fn go() { let _ = x.y::<u8>(); }\n"),
    ];
    let dir = synthetic_tree("acyclic", acyclic);
    let g = import_graph(&dir);
    let edges: Vec<String> = g
        .iter()
        .flat_map(|(a, to)| {
            to.iter()
                .map(move |(b, l)| format!("{}:{l} {}", a.display(), b.display()))
        })
        .collect();
    assert_eq!(
        edges,
        [
            "a.rs:4 b/x.rs",
            "b/mod.rs:5 lib.rs",
            "b/x.rs:2 b/mod.rs",
            "cmd/mod.rs:3 cmd/go.rs",
            "lib.rs:4 b/mod.rs",
            "main.rs:3 cmd/mod.rs",
        ],
        "{g:#?}"
    );
    // b/mod.rs uses crate-root items that lib.rs re-exports from b: a cycle.
    let c = shortest_cycle(&g).expect("lib.rs ↔ b/mod.rs");
    assert_eq!(
        describe_cycle("src", &g, &c),
        "import cycle in src: b/mod.rs → lib.rs → b/mod.rs\n  b/mod.rs:5 uses lib.rs\n  \
         lib.rs:4 uses b/mod.rs\n  files on a cycle: b/mod.rs, lib.rs\n"
    );
    std::fs::remove_dir_all(&dir).unwrap();
    // Without the crate-root item, no cycle; with a use back from b/x.rs to a.rs, a longer one.
    let mut files = acyclic.to_vec();
    files[2].1 = "//! b\npub mod x;\npub struct Thing;\n";
    let dir = synthetic_tree("acyclic2", &files);
    assert_eq!(shortest_cycle(&import_graph(&dir)), None);
    std::fs::remove_dir_all(&dir).unwrap();
    files[3].1 = "//! x\nuse super::Thing;\npub fn helper() { crate::a::g() }\n";
    let dir = synthetic_tree("cyclic", &files);
    let g = import_graph(&dir);
    let (cycle, _) = shortest_cycle(&g).unwrap();
    assert_eq!(
        cycle,
        ["a.rs", "b/x.rs", "a.rs"].map(PathBuf::from),
        "{g:#?}"
    );
    std::fs::remove_dir_all(&dir).unwrap();
}

// ---------------------------------------------------------------------------------------
// Function length: no function over 120 lines, counted from its `fn` (or C definition)
// line to its closing brace.

/// Longest function body allowed, in lines.
const MAX_FN_LINES: usize = 120;

/// Functions still over [`MAX_FN_LINES`]: (file, function, why).
const LONG_FNS: &[(&str, &str, &str)] = &[];

/// The index of the token that closes the bracket opened at `t[open]`.
fn closing(t: &[(Tok, usize)], open: usize) -> usize {
    let mut depth = 0i32;
    for (k, (tok, _)) in t.iter().enumerate().skip(open) {
        match tok {
            Tok::Punct('{') | Tok::Punct('(') | Tok::Punct('[') => depth += 1,
            Tok::Punct('}') | Tok::Punct(')') | Tok::Punct(']') => {
                depth -= 1;
                if depth == 0 {
                    return k;
                }
            }
            _ => {}
        }
    }
    t.len() - 1
}

/// Every Rust function with a body in `src`: (name, lines from `fn` to its closing brace).
fn rust_fn_lengths(src: &str) -> Vec<(String, usize)> {
    let t = lex_lines(src);
    let mut out = Vec::new();
    for i in 0..t.len() {
        let (Tok::Ident(kw), Some((Tok::Ident(name), _))) = (&t[i].0, t.get(i + 1)) else {
            continue;
        };
        if kw != "fn" {
            continue;
        }
        // The body is the first `{` outside brackets; a `;` there means a declaration.
        let mut k = i + 2;
        while k < t.len() {
            match t[k].0 {
                Tok::Punct('(') | Tok::Punct('[') => k = closing(&t, k),
                Tok::Punct('{') | Tok::Punct(';') => break,
                _ => {}
            }
            k += 1;
        }
        if k < t.len() && t[k].0 == Tok::Punct('{') {
            out.push((name.clone(), t[closing(&t, k)].1 - t[i].1 + 1));
        }
    }
    out
}

/// C source with its preprocessor lines blanked, and the `#else`/`#elif` branches of every
/// conditional too (so each function's braces are those of one build).
fn first_branches(src: &str) -> String {
    let mut code = String::new();
    // One entry per open #if: whether this branch is left out.
    let mut skipping: Vec<bool> = Vec::new();
    let mut directive = false;
    for l in src.lines() {
        let d = l.trim_start();
        if !directive && d.starts_with('#') {
            let word = d[1..].trim_start();
            if word.starts_with("if") {
                skipping.push(false);
            } else if word.starts_with("el") {
                *skipping.last_mut().expect("#else without #if") = true;
            } else if word.starts_with("endif") {
                skipping.pop();
            }
            directive = true;
        }
        if !directive && !skipping.contains(&true) {
            code += l;
        }
        directive = directive && l.ends_with('\\');
        code.push('\n');
    }
    code
}

/// Every C function definition in `src`: (name, lines from the line of its name to its
/// closing brace). Preprocessor lines and `#else` branches are left out; a definition is a top-level `{` right
/// after the `)` of `name(...)`.
fn c_fn_lengths(src: &str) -> Vec<(String, usize)> {
    let t = lex_lines(&first_branches(src));
    let mut out = Vec::new();
    let mut i = 0;
    while i < t.len() {
        match t[i].0 {
            Tok::Punct('(') | Tok::Punct('[') => i = closing(&t, i),
            Tok::Punct('{') => {
                let end = closing(&t, i);
                if i >= 1 && t[i - 1].0 == Tok::Punct(')') {
                    let open = (0..i - 1).rev().find(|&o| closing(&t, o) == i - 1).unwrap();
                    if let Some((Tok::Ident(name), line)) = open.checked_sub(1).map(|n| &t[n]) {
                        out.push((name.clone(), t[end].1 - line + 1));
                    }
                }
                i = end;
            }
            _ => {}
        }
        i += 1;
    }
    out
}

/// What is wrong with `found` (file, function, lines) against the allow list: functions
/// over the limit it does not name, and entries that are no longer over it.
fn long_fn_problems(
    found: &[(String, String, usize)],
    allow: &[(&str, &str, &str)],
) -> Vec<String> {
    let long = |f: &str, n: &str| {
        found
            .iter()
            .any(|(file, name, lines)| file == f && name == n && *lines > MAX_FN_LINES)
    };
    let mut bad: Vec<String> = found
        .iter()
        .filter(|(f, n, lines)| {
            *lines > MAX_FN_LINES && !allow.iter().any(|a| a.0 == f && a.1 == n)
        })
        .map(|(f, n, lines)| format!("{f}: fn {n} is {lines} lines (split it along its steps)"))
        .collect();
    bad.extend(allow.iter().filter(|(f, n, _)| !long(f, n)).map(|(f, n, _)| {
        format!("{f}: fn {n} is allowed to be long but is not over {MAX_FN_LINES} lines: take it off LONG_FNS")
    }));
    bad
}

/// Every function of the host, common, the agents and xtask (their sources, not tests):
/// (file relative to the root, name, lines).
fn all_fn_lengths() -> Vec<(String, String, usize)> {
    let mut files = Vec::new();
    for d in [
        "host/src",
        "host/crates",
        "common/src",
        "agents/labperf-agent/src",
        "agents/labperf-bench/src",
        "xtask/src",
    ] {
        rust_files(&root().join(d), &mut files);
    }
    for e in std::fs::read_dir(root().join("agents/alpha"))
        .unwrap()
        .flatten()
    {
        if e.path().extension().is_some_and(|x| x == "c" || x == "h") {
            files.push(e.path());
        }
    }
    let mut out = Vec::new();
    for f in files {
        let src = std::fs::read_to_string(&f).unwrap();
        let rel = f.strip_prefix(root()).unwrap().display().to_string();
        let fns = if rel.ends_with(".rs") {
            rust_fn_lengths(&src)
        } else {
            c_fn_lengths(&src)
        };
        out.extend(fns.into_iter().map(|(n, l)| (rel.clone(), n, l)));
    }
    out
}

#[test]
fn no_function_over_120_lines() {
    let found = all_fn_lengths();
    assert!(
        found.len() > 1000,
        "the scan found {} functions",
        found.len()
    );
    for (f, n) in [
        ("common/src/varint.rs", "put_u64"),
        ("agents/alpha/agent.c", "parse_event"),
    ] {
        assert!(
            found.iter().any(|x| x.0 == f && x.1 == n),
            "the scan missed {f} {n}"
        );
    }
    let bad = long_fn_problems(&found, LONG_FNS);
    assert!(bad.is_empty(), "{}", bad.join("\n"));
}

#[test]
fn the_length_scan_counts_from_fn_to_its_closing_brace() {
    let body = |n: usize| "    x += 1;\n".repeat(n);
    let rust = format!(
        "//! x\ntrait T {{ fn decl(&self) -> [u8; 4]; }}\n\
         pub(crate) const unsafe fn long<T: Fn(u8) -> u8>(\n    f: fn(u8) -> u8,\n) -> [u8; 4]\nwhere\n    T: Copy,\n{{\n\
         {}    let s = \"}}\"; let c = '}}'; // }}\n    fn inner() {{ /* }} */ }}\n}}\n\
         fn exact() {{\n{}}}\n",
        body(113),
        body(118)
    );
    let got = rust_fn_lengths(&rust);
    assert_eq!(
        got,
        [
            ("long".into(), 122),
            ("inner".into(), 1),
            ("exact".into(), 120)
        ]
    );
    let c = format!(
        "#include <x.h>\n#define OPEN {{ \\\n  {{\nstruct s {{ int a; }};\nstatic int t[2] = {{ 1, 2 }};\n\
         static long\nrecord(const char *s, int n) {{\n#ifdef A\n    if (n) {{\n#else\n    if (!n) {{\n#endif\n\
         {}    }}\n    return '}}' + \"{{\";\n}}\nint tiny(void) {{ return 0; }}\n",
        body(200)
    );
    assert_eq!(
        c_fn_lengths(&c),
        [("record".into(), 209), ("tiny".into(), 1)]
    );
    let found: Vec<(String, String, usize)> = [
        ("a.rs", "long", 123),
        ("a.rs", "short", 5),
        ("b.c", "record", 121),
    ]
    .map(|(f, n, l)| (f.into(), n.into(), l))
    .into();
    assert_eq!(
        long_fn_problems(&found, &[("a.rs", "long", "why"), ("a.rs", "short", "why")]),
        [
            "b.c: fn record is 121 lines (split it along its steps)",
            "a.rs: fn short is allowed to be long but is not over 120 lines: take it off LONG_FNS",
        ]
    );
}

/// `package [features]` lines of `cargo tree` over `args`: each package built, with its features.
fn feature_lines(args: &[&str]) -> BTreeSet<String> {
    let out = std::process::Command::new(env!("CARGO"))
        .args(["tree", "--frozen", "--prefix", "none", "-f", "{p} [{f}]"])
        .args(args)
        .current_dir(root())
        .output()
        .expect("cargo runs");
    assert!(
        out.status.success(),
        "cargo tree {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout)
        .lines()
        // `(*)` marks a package listed before; `(proc-macro)` is part of {p}.
        .map(|l| l.trim_end_matches(" (*)").trim().to_string())
        .filter(|l| !l.is_empty())
        .collect()
}

#[test]
fn labperf_builds_with_the_features_of_the_test_build() {
    // `cargo xtask test` builds `labperf` (`cargo build -p labperf`), then the tests
    // (`cargo nextest run --workspace`, which adds every dev-dependency). Every package of the
    // first build must be built with the same features in the second, or the second compiles
    // labperf again (resolver 2 unifies a dev-dependency's features only where it is built).
    let alone = feature_lines(&["-p", "labperf", "-e", "normal,build"]);
    let tests = feature_lines(&["--workspace", "-e", "normal,build,dev"]);
    let differ: Vec<&String> = alone.difference(&tests).collect();
    assert!(
        differ.is_empty(),
        "built by `cargo build -p labperf` with features the test build does not use \
         (it lists them otherwise; ask for them in host/Cargo.toml, as for bitflags):\n{differ:#?}"
    );
}
