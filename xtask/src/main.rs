//! cargo xtask: set-up, cross builds, the demo, the test suite, benchmarks and fuzzing. One module per subcommand.

mod bench;
mod bless;
mod build_agents;
mod corpus_table;
mod demo;
mod dist;
mod fuzz;
mod hwcheck;
mod lab;
mod setup;
mod test;
mod util;

use clap::{Parser, Subcommand};

/// labperf's build and test automation. Every command first sets up what it needs (`setup
/// --for` that command): `demo` only the musl target and what labperf's build links with.
#[derive(Parser)]
#[command(
    name = "cargo xtask",
    after_help = "EXAMPLES:\n  cargo xtask demo                 # profile labperf-bench on this machine\n  cargo xtask demo --lab           # ... on the emulated Arm lab machine, by strobing\n  cargo xtask setup --check --for demo   # what demo would install, and why\n  cargo xtask test                 # everything CI runs\n  cargo xtask bench                # size and speed vs perf, plus a fuzz run\n  cargo xtask build-agents --target all\n  cargo xtask man                  # manual pages and completions into target/man-tree/share\n  cargo xtask bless views          # rewrite the view goldens after a deliberate change\n  cargo xtask hwcheck              # TopDown known answers on this Intel machine (exit 3: none here)"
)]
struct Cli {
    #[command(subcommand)]
    cmd: Cmd,
}

#[derive(Subcommand)]
enum Cmd {
    /// Install what a command needs and is missing (`--for`; the full set, what `test` needs,
    /// by default), or list it (`--check`).
    Setup(setup::Args),
    /// Build the static agents and labperf-bench into target/agents/<triple>/.
    BuildAgents(build_agents::Args),
    /// Build the agent, bench and labperf, and profile labperf-bench here (--lab: on the
    /// emulated Arm lab machine, by strobing).
    Demo(demo::Args),
    /// Build and run the whole test suite (what CI runs).
    Test(test::Args),
    /// Measure file size and report speed against perf, and fuzz the decoder.
    Bench(bench::Args),
    /// Run the corpus tests and print (or --write into docs/measurements.md) their tables.
    CorpusTable(corpus_table::Args),
    /// Fuzz the decoder with cargo-fuzz (nightly).
    Fuzz(fuzz::Args),
    /// Pack labperf and every agent into target/dist/labperf-VERSION-ARCH-linux/ and its
    /// .tar.gz: builds every agent and a static labperf (OpenSSL and zlib from source, about
    /// 12 min of CPU the first time), then records this machine's bench with the unpacked
    /// tree to check it.
    Dist(dist::Args),
    /// Write labperf's manual pages and bash, zsh and fish completions (what dist packs)
    /// into target/man-tree/share/ (--out DIR), and read them back with man and bash.
    Man(dist::docs::Args),
    /// The emulated Arm lab machine: up, down, ssh.
    Lab(lab::Args),
    /// Write the goldens the tests compare against: `views` (rewrite; review the diff),
    /// `golden` (a new wire version's recordings; never rewrites).
    Bless(bless::Args),
    /// Intel TopDown known-answer checks on this machine's PMU (Ice Lake and later); exits
    /// 3 when it has none (nothing checked).
    Hwcheck(hwcheck::Args),
}

fn main() {
    use setup::Need;
    let cli = Cli::parse();
    let mut s = util::Summary::default();
    match cli.cmd {
        // Detection first: a machine without the PMU needs nothing set up or built.
        Cmd::Hwcheck(a) => std::process::exit(hwcheck::run(&a)),
        Cmd::Setup(a) if a.check => {
            let mut code = setup::check(a.need);
            if a.fuzz {
                code |= setup::check(Need::Fuzz);
            }
            std::process::exit(code);
        }
        Cmd::Setup(a) => {
            setup::run(a.need, &mut s);
            if a.fuzz {
                setup::run(Need::Fuzz, &mut s);
            }
        }
        Cmd::BuildAgents(a) => {
            setup::run(Need::Agents, &mut s);
            build_agents::run(&a, &mut s);
        }
        Cmd::Lab(a) => {
            setup::run(Need::Lab, &mut s);
            lab::run(&a, &mut s);
        }
        Cmd::Dist(a) => {
            setup::run(Need::Dist, &mut s);
            dist::run(&a, &mut s);
        }
        Cmd::Man(a) => {
            setup::run(Need::Man, &mut s);
            s.step("man pages and completions", || dist::docs::run(&a));
        }
        Cmd::Demo(a) => {
            setup::run(if a.lab { Need::DemoLab } else { Need::Demo }, &mut s);
            demo::run(&a, &mut s);
        }
        Cmd::Test(a) => {
            setup::run(Need::Test, &mut s);
            test::run(&a, &mut s);
        }
        Cmd::CorpusTable(a) => {
            setup::run(Need::Test, &mut s);
            s.step("corpus table", || corpus_table::run(&a));
        }
        Cmd::Bench(a) => {
            setup::run(Need::Bench, &mut s);
            bench::run(&a, &mut s);
        }
        Cmd::Bless(a) => {
            setup::run(Need::Bless, &mut s);
            bless::run(&a, &mut s);
        }
        Cmd::Fuzz(a) => {
            setup::run(Need::Fuzz, &mut s);
            fuzz::run(&a, &mut s);
        }
    }
    std::process::exit(s.finish());
}
