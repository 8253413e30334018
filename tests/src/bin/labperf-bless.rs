//! `labperf-bless`: writes the goldens the tests only compare against; what `cargo xtask
//! bless` runs. A program, not a test: nextest never counts it, and no test writes
//! `tests/data/`.
//!
//! `labperf-bless views`: rewrites `tests/data/views/` with what labperf renders today
//! (review the diff before committing it).
//! `labperf-bless golden`: writes the golden recordings that do not exist yet (a new wire
//! version's); never rewrites one.

use labperf_tests::{root, scratch};

const USAGE: &str = "usage: labperf-bless views|golden...
  views    rewrite tests/data/views/ (the view goldens) as labperf renders them today
  golden   write the golden recordings of tests/data/ that do not exist yet (never rewrites)
It runs the labperf of $LABPERF_LABPERF (else target/debug/labperf) and, for golden, the C
agent under $LABPERF_AGENTS_DIR (else target/agents). `cargo xtask bless` builds both.";

fn main() {
    let what: Vec<String> = std::env::args().skip(1).collect();
    if what.is_empty() || what.iter().any(|w| w != "views" && w != "golden") {
        eprintln!("{USAGE}");
        std::process::exit(2);
    }
    for w in &what {
        if w == "views" {
            let d = scratch("bless-views");
            let dir = labperf_tests::views::views();
            let mut changed = 0;
            for (name, text) in labperf_tests::views::rendered(&d) {
                let p = dir.join(&name);
                if std::fs::read_to_string(&p).ok().as_deref() != Some(text.as_str()) {
                    std::fs::write(&p, &text).unwrap();
                    println!("rewrote {}", p.display());
                    changed += 1;
                }
            }
            println!("views: {changed} golden(s) changed (review `git diff tests/data/views`)");
            let _ = std::fs::remove_dir_all(&d);
        } else {
            let agents = std::env::var_os("LABPERF_AGENTS_DIR")
                .map(std::path::PathBuf::from)
                .unwrap_or_else(|| root().join("target/agents"));
            let written = labperf_tests::golden::write_missing(&agents);
            for d in &written {
                println!("wrote {}", d.display());
            }
            println!(
                "golden: {} new director{} (existing ones are never rewritten)",
                written.len(),
                if written.len() == 1 { "y" } else { "ies" }
            );
        }
    }
}
