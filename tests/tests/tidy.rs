//! Tidy tests (rust-analyzer style): conventions that no compiler checks. Every external
//! program the code starts has its Debian package in `xtask/src/setup.rs` (so a fresh
//! machine's `cargo xtask setup` installs it), every source file says what it owns, and the
//! release `labperf` unwinds on panic while the agents abort.

use labperf_tests::root;
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
    let c: Vec<char> = src.chars().collect();
    let mut out = Vec::new();
    let mut i = 0;
    while i < c.len() {
        let ch = c[i];
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
    }
    out
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

/// A `pub const NAME: &[&str] = &[...]` list of `host/src/remote.rs`.
fn remote_list(name: &str) -> Vec<String> {
    let src = std::fs::read_to_string(root().join("host/src/remote.rs")).unwrap();
    let t = lex(&src);
    let at = t
        .iter()
        .position(|x| *x == Tok::Ident(name.into()))
        .unwrap_or_else(|| panic!("host/src/remote.rs has no {name}"));
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
            PathBuf::from("host/src/remote.rs"),
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
    // No cargo configuration overrides a profile.
    let config: toml::Table = read(".cargo/config.toml").parse().unwrap();
    assert!(
        !config.contains_key("profile"),
        ".cargo/config.toml sets a profile"
    );
    // `cargo xtask build-agents` (so `test`, `demo` and `dist`) builds both with it.
    let xtask = read("xtask/src/build_agents.rs");
    assert!(xtask.contains("pub const PROFILE: &str = \"agent\";"));
    let builds: Vec<&str> = xtask
        .lines()
        .filter(|l| l.contains("-p labperf-agent") || l.contains("-p labperf-bench"))
        .collect();
    assert_eq!(builds.len(), 3, "{builds:#?}");
    for l in builds {
        assert!(
            l.contains("--profile {PROFILE}") && !l.contains("--release"),
            "{l}"
        );
    }
    // And the host refuses to build with abort at all.
    assert!(read("host/src/main.rs").contains("#[cfg(not(panic = \"unwind\"))]\ncompile_error!"));
}
