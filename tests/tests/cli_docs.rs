//! labperf's manual pages and shell completions (issue 48): `labperf completions SHELL`
//! loaded by the shell and completing verbs and options, `labperf man DIR` read by man.

use labperf_tests::{bin, scratch};
use std::process::{Command, Output};

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

fn ok(o: Output, what: &str) -> String {
    assert!(o.status.success(), "{what}: {}", text(&o.stderr));
    text(&o.stdout)
}

/// bash loads `labperf completions bash` as a user's shell does (`source <(…)`), says the
/// function it completes labperf with, and completes a verb, an option and a value.
#[test]
fn bash_sources_the_completions_and_completes_verbs_options_and_values() {
    let labperf = bin("labperf");
    let script = format!(
        r#"source <('{}' completions bash)
complete -p labperf
comp() {{ COMP_WORDS=("$@"); COMP_CWORD=$(($# - 1)); COMP_LINE="$*"; COMP_POINT=${{#COMP_LINE}}; COMPREPLY=()
  _labperf labperf "${{COMP_WORDS[COMP_CWORD]}}" "${{COMP_WORDS[COMP_CWORD-1]}}"; echo "${{COMPREPLY[*]}}"; }}
comp labperf rec
comp labperf record --call-
comp labperf report --format c
comp labperf completions ''"#,
        labperf.display()
    );
    let out = ok(
        Command::new("bash")
            .arg("-c")
            .arg(&script)
            .output()
            .unwrap(),
        "bash",
    );
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(lines.len(), 5, "{out}");
    assert!(
        lines[0].starts_with("complete ") && lines[0].ends_with(" -F _labperf labperf"),
        "{out}"
    );
    assert_eq!(lines[1], "record");
    assert_eq!(lines[2], "--call-graph");
    assert_eq!(lines[3], "csv");
    assert_eq!(
        lines[4],
        "-q -v -h --quiet --verbose --help bash elvish fish powershell zsh"
    );
}

/// zsh's and fish's scripts are theirs (neither shell is installed here to load them): the
/// `#compdef` line zsh's compinit reads, fish's `complete -c labperf` lines naming the verbs.
#[test]
fn zsh_and_fish_scripts_name_labperf_and_its_verbs() {
    let zsh = ok(
        Command::new(bin("labperf"))
            .args(["completions", "zsh"])
            .output()
            .unwrap(),
        "zsh",
    );
    assert_eq!(zsh.lines().next(), Some("#compdef labperf"));
    assert!(zsh.contains("'record:Record a workload"), "{zsh}");
    let fish = ok(
        Command::new(bin("labperf"))
            .args(["completions", "fish"])
            .output()
            .unwrap(),
        "fish",
    );
    for verb in ["record", "report", "export", "import", "completions", "man"] {
        assert!(
            fish.lines()
                .any(|l| l.starts_with("complete -c labperf ")
                    && l.contains(&format!(" -a \"{verb}\""))),
            "fish names no {verb}:\n{fish}"
        );
    }
    let o = Command::new(bin("labperf"))
        .args(["completions", "tcsh"])
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(2));
}

/// `labperf man DIR` writes a page per verb that man formats: `man -l` of record's page
/// names its options, and MANPATH finds `labperf-report` by name.
#[test]
fn labperf_man_writes_pages_that_man_reads() {
    let dir = scratch("labperf_man_writes_pages");
    let man1 = dir.join("man/man1");
    let o = Command::new(bin("labperf"))
        .arg("man")
        .arg(&man1)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", text(&o.stderr));
    assert_eq!(
        text(&o.stderr),
        format!("labperf: 20 manual pages written to {}\n", man1.display())
    );
    assert!(man1.join("labperf-annotate.1").is_file());
    let page = ok(
        Command::new("man")
            .env("MANWIDTH", "200")
            .env("LC_ALL", "C")
            .args(["-P", "cat", "-l"])
            .arg(man1.join("labperf-record.1"))
            .output()
            .unwrap(),
        "man -l",
    );
    assert!(
        page.contains("labperf-record - Record a workload with the agent, then print its profile"),
        "{page}"
    );
    for opt in ["-e, --event", "-F, --freq", "--call-graph", "--host"] {
        assert!(page.contains(opt), "{opt}:\n{page}");
    }
    let page = ok(
        Command::new("man")
            .env("MANPATH", dir.join("man"))
            .env("MANWIDTH", "200")
            .env("LC_ALL", "C")
            .args(["-P", "cat", "labperf-report"])
            .output()
            .unwrap(),
        "man labperf-report",
    );
    assert!(page.contains("--children"), "{page}");
}
