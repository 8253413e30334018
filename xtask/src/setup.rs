//! `cargo xtask setup`: installs what a command needs ([`Need`]) and nothing else: rustup
//! targets and components, Debian packages, cargo tools, the Python venv, binfmt. Each entry
//! of the tables ([`PROGRAMS`], [`FILES`], [`CARGO_TOOLS`]) says which needs it serves and
//! why; `--check` lists what is missing without installing. apt never removes a package.

use crate::util::{host_musl, is_root, Summary};
use anyhow::{bail, Context};
use std::path::Path;
use xshell::{cmd, Shell};

mod apt;
mod lock;

#[derive(clap::Args, Default)]
pub struct Args {
    /// Also install cargo-fuzz and the nightly toolchain it needs (what `fuzz` needs).
    #[arg(long)]
    pub fuzz: bool,
    /// List what is missing and why it is needed, install nothing; exit 1 when something is.
    #[arg(long)]
    pub check: bool,
    /// Set up (or check) for one command's need only; the default is the full set, what
    /// `test` needs.
    #[arg(long = "for", value_enum, default_value_t)]
    pub need: Need,
}

/// What a command needs set up. Every xtask command sets up its own need before it runs:
/// `demo` the least (the musl target, and what labperf's build needs), `test` the full set.
#[derive(clap::ValueEnum, Clone, Copy, PartialEq, Eq, Debug, Default)]
pub enum Need {
    /// `demo` and `hwcheck`: this machine's musl agent and bench, and labperf, built.
    Demo,
    /// `demo --lab`: demo's and the lab's, and the aarch64 musl target (the lab machine's
    /// agent and bench).
    DemoLab,
    /// `build-agents`: every agent (Rust for x86_64 and aarch64, C for Alpha and x86_64),
    /// checked (labperf and file(1)).
    Agents,
    /// `dist`: the agents and labperf, packed (with the manual pages and completions).
    Dist,
    /// `man`: labperf built, and man and bash to read its pages and completions back.
    Man,
    /// `bless`: labperf, the C agent and the views' C program, built.
    Bless,
    /// `lab`: the emulated Arm and Alpha machines (their images, kernels, qemu, ssh).
    Lab,
    /// `bench`: the agents, perf and inferno, private sshd instances, the lab machine.
    Bench,
    /// `fuzz`: the nightly toolchain, cargo-fuzz, libFuzzer's C++ build, perf's seeds.
    Fuzz,
    /// `test`, `corpus-table` and `setup` alone: every table entry (all but fuzz's nightly
    /// and cargo-fuzz).
    #[default]
    Test,
}

impl Need {
    /// The name `--for` takes.
    pub fn name(self) -> String {
        use clap::ValueEnum;
        self.to_possible_value()
            .map(|v| v.get_name().to_string())
            .unwrap_or_default()
    }

    /// The xtask commands that set up this need.
    pub fn commands(self) -> &'static str {
        match self {
            Demo => "`cargo xtask demo` (and hwcheck)",
            DemoLab => "`cargo xtask demo --lab`",
            Agents => "`cargo xtask build-agents`",
            Dist => "`cargo xtask dist`",
            Man => "`cargo xtask man` (and dist)",
            Bless => "`cargo xtask bless`",
            Lab => "`cargo xtask lab`",
            Bench => "`cargo xtask bench`",
            Fuzz => "`cargo xtask fuzz` (and bench's fuzz run)",
            Test => "`cargo xtask test` (and corpus-table, and setup alone)",
        }
    }

    /// The needs this one takes in: its own, and those of what the command builds on.
    pub fn covers(self) -> &'static [Need] {
        match self {
            Demo => &[Demo],
            DemoLab => &[DemoLab, Demo, Lab],
            Agents => &[Agents, Demo],
            Dist => &[Dist, Agents, Demo, Man],
            Man => &[Man, Demo],
            Bless => &[Bless, Demo],
            Lab => &[Lab],
            Bench => &[Bench, Agents, Demo, Lab],
            Fuzz => &[Fuzz],
            Test => &[Test, Demo, DemoLab, Agents, Dist, Man, Bless, Lab, Bench],
        }
    }

    /// Whether an entry tagged `why` is installed for this need: `test` takes every entry.
    pub fn wants(self, why: &Why) -> bool {
        self == Need::Test || why.needs.iter().any(|n| self.covers().contains(n))
    }
}

/// Why a table entry is installed: the needs it serves (the smallest: a command's need
/// covers others, [`Need::covers`]) and the reason, printed before installing it.
#[derive(Clone, Copy, Debug)]
pub struct Why {
    pub needs: &'static [Need],
    pub why: &'static str,
}

const fn why(needs: &'static [Need], why: &'static str) -> Why {
    Why { needs, why }
}

use Need::{Agents, Bench, Bless, Demo, DemoLab, Dist, Fuzz, Lab, Man, Test};

// labperf's build (every command builds it): libssh2, zlib and zstd come as C sources that
// the `cc` crate compiles and archives; OpenSSL is the system's, found by openssl-sys with
// pkg-config. The musl agents link with rust-lld (.cargo/config.toml): no C toolchain.
const HOST_C: Why = why(
    &[Demo, Fuzz],
    "labperf's build compiles its C dependencies (libssh2, zlib, zstd) with it",
);
const HOST_SSL: Why = why(
    &[Demo],
    "labperf's SSH library (libssh2) links OpenSSL; openssl-sys finds it with pkg-config",
);
const LIBC_DEV: Why = why(
    &[Demo, Fuzz],
    "the C library's headers: labperf's C dependencies, the tests' C programs (PIE, non-PIE, shared, static); only a Recommends of gcc",
);
const C_AGENT: Why = why(
    &[Agents, Bless],
    "the freestanding C agent's x86_64 build, and the C programs of bless views and the tests",
);
const ALPHA_AGENT: Why = why(
    &[Agents],
    "the Alpha C agent (its kernel headers are only a Recommends of gcc-alpha-linux-gnu)",
);
const AGENT_CHECK: Why = why(&[Agents], "build-agents checks that every agent is static");
const CORPUS: Why = why(
    &[Test],
    "the corpus programs are built as people build them (tests/tests/corpus.rs)",
);
const DEBIAN_CORPUS: Why = why(
    &[Test],
    "Debian's own programs recorded against perf on the same samples (tests/tests/debian.rs)",
);
const MUSL_CC: Why = why(
    &[Test, Dist],
    "the corpus programs are built as people build them; dist's static labperf compiles its C dependencies (OpenSSL, libssh2, zlib, zstd, mimalloc) for musl with it",
);
const DIST_SSL: Why = why(
    &[Dist],
    "dist's static labperf builds OpenSSL from source (openssl-src: its Configure is Perl)",
);
const FUZZ_CXX: Why = why(&[Fuzz], "cargo-fuzz compiles libFuzzer (C++)");
const QEMU_USER: Why = why(
    &[Test],
    "qemu-user runs the Alpha agent and bench, and the Arm corpus programs, in the tests",
);
const LAB_QEMU: Why = why(&[Lab], "the emulated Arm lab machine");
const LAB_ALPHA: Why = why(
    &[Lab],
    "the emulated Alpha lab machine: qemu-system-alpha and its PALcode, its kernel, and busybox and dropbear cross-built from Debian's source packages (xtask/src/lab/alpha.rs)",
);
const SSH_LAB: Why = why(
    &[Lab, Bench],
    "ssh reaches the lab machine with its own key; the tests and bench talk to their own sshd",
);
const SSHD: Why = why(
    &[Bench],
    "the tests and bench start their own sshd, as a lab machine runs",
);
const NETNS: Why = why(
    &[Test],
    "the bastion tests put the target machine in a network namespace (tests/tests/bastion.rs)",
);
const SSH_TESTS: Why = why(
    &[Test],
    "the SSH tests: a terminal (script) and an ssh-agent",
);
const PERF: Why = why(
    &[Bench, Fuzz],
    "the reference profiler of the tests and the benchmarks; fuzz records its seeds with it",
);
const SYMBOLS: Why = why(&[Test], "the symbol tests' workloads and tools");
const ANNOTATE: Why = why(
    &[Test],
    "`labperf annotate` disassembles with binutils' objdump of the binary's machine, as perf annotate does (tests/tests/annotate.rs: x86_64, aarch64 and Alpha)",
);
const JIT: Why = why(
    &[Test],
    "JIT compilers that write perf's map files, run by tests/tests/jit.rs",
);
const DEBUGINFOD: Why = why(
    &[Test],
    "elfutils' debuginfod server gives labperf debug files and binaries by build-id, and OpenSSL's TLS server the same over HTTPS (tests/tests/debuginfod.rs)",
);
const PPROF: Why = why(
    &[Test],
    "a real pprof client reads `labperf export --format pprof` (tests/tests/export.rs)",
);
const CHROMIUM: Why = why(
    &[Test],
    "headless Chromium loads `labperf report --format html` (tests/tests/views.rs)",
);
const TIME: Why = why(
    &[Bench],
    "bench: the recorders' own CPU time and peak memory",
);
const LAB_IMAGE: Why = why(&[Lab], "the lab image, made of Debian's arm64 packages");
const LAB_KERNEL: Why = why(
    &[Lab],
    "the altperiod lab kernel, built from Debian's source (xtask/src/lab/kernel.rs)",
);
const MAKE: Why = why(
    &[Lab, Dist],
    "building the altperiod lab kernel, and OpenSSL for dist's static labperf",
);
const PACK: Why = why(
    &[Dist, Lab],
    "packing releases (dist), unpacking the lab kernel's source",
);
const MANUAL: Why = why(
    &[Man],
    "`man` and dist read the manual pages back with man (man-db) and load the bash completion, as a user would (xtask/src/dist/docs.rs)",
);
const PERF_LIBS: Why = why(
    &[Bench],
    "bench sizes the distribution's perf and its libraries",
);
const PROCESS: Why = why(&[Test], "the tests' process and mount tools");
const PROCESS_LAB: Why = why(
    &[Lab, Bench],
    "process tools of the tests, bench and the lab",
);
const BASE: Why = why(
    &[Lab, Bench, Fuzz],
    "coreutils and the shell: the tests, bench, fuzz and the lab image's build run them (and the host, through the tests' sshd, as on a lab machine)",
);
const DEBUG_LIBC: Why = why(
    &[Test],
    "the symbol tests read libc's separate debug file, as a user's machine has it",
);
const ARM_LIBC: Why = why(
    &[Test],
    "the corpus programs built for the emulated Arm machine (only a Recommends of gcc-aarch64-linux-gnu)",
);
const VENV_MODULE: Why = why(
    &[Test],
    "the Python venv of the tests' DuckDB is made with Debian's python3 and its venv module",
);
const FLAMEGRAPH: Why = why(
    &[Bench],
    "the reference flame-graph pipeline of the test and the benchmark (perf script | inferno-collapse-perf | inferno-flamegraph)",
);

/// Every external program that a test, bench or xtask command starts (or that the host
/// runs on a lab machine, which the tests' sshd is), with the Debian package that
/// installs it and why. `cargo xtask setup` installs the package of each missing program
/// that the command's [`Need`] wants; the tidy test (`tests/tests/tidy.rs`) fails when
/// code starts a program not listed here.
pub const PROGRAMS: &[(&str, &str, Why)] = &[
    // labperf's build: a C compiler and archiver for its C dependencies, pkg-config for
    // OpenSSL (FILES has the headers).
    ("cc", "gcc", HOST_C),
    ("ar", "binutils", HOST_C),
    ("pkg-config", "pkgconf", HOST_SSL),
    // Compilers: the C agent's x86_64 build; the corpus programs are built as people
    // build them (tests/tests/corpus.rs); libFuzzer is C++.
    ("gcc", "gcc", C_AGENT),
    ("g++", "g++", CORPUS),
    ("c++", "g++", FUZZ_CXX),
    ("clang", "clang", CORPUS),
    ("musl-gcc", "musl-tools", MUSL_CC),
    ("perl", "perl", DIST_SSL),
    ("alpha-linux-gnu-gcc", "gcc-alpha-linux-gnu", ALPHA_AGENT),
    // Emulators: qemu-user for the Alpha agent and bench, the system emulator for the Arm lab.
    ("qemu-alpha", "qemu-user", QEMU_USER),
    ("qemu-aarch64", "qemu-user", QEMU_USER),
    ("qemu-system-aarch64", "qemu-system-arm", LAB_QEMU),
    ("qemu-system-alpha", "qemu-system-misc", LAB_ALPHA),
    ("dpkg-source", "dpkg-dev", LAB_ALPHA),
    // SSH: the tests start their own sshd and talk to the lab machine with ssh.
    ("sshd", "openssh-server", SSHD),
    ("ssh", "openssh-client", SSH_LAB),
    ("scp", "openssh-client", SSHD),
    ("ssh-keygen", "openssh-client", SSH_LAB),
    ("script", "bsdutils", SSH_TESTS),
    ("ssh-agent", "openssh-client", SSH_TESTS),
    ("ssh-add", "openssh-client", SSH_TESTS),
    ("ip", "iproute2", NETNS),
    // Programs nobody here wrote, recorded as they come (tests/tests/debian.rs).
    ("dd", "coreutils", DEBIAN_CORPUS),
    ("sort", "coreutils", DEBIAN_CORPUS),
    ("bzip2", "bzip2", DEBIAN_CORPUS),
    ("sqlite3", "sqlite3", DEBIAN_CORPUS),
    // The reference profiler of the benchmarks, and the symbol tests' workloads and tools.
    ("perf", "linux-perf", PERF),
    ("python3", "python3", SYMBOLS),
    // A real pprof client reads `labperf export --format pprof` (tests/tests/export.rs).
    ("go", "golang-go", PPROF),
    // Headless Chromium loads `labperf report --format html` (tests/tests/views.rs).
    ("chromium", "chromium", CHROMIUM),
    ("objcopy", "binutils", SYMBOLS),
    ("addr2line", "binutils", SYMBOLS),
    ("objdump", "binutils", ANNOTATE),
    (
        "x86_64-linux-gnu-objdump",
        "binutils-x86-64-linux-gnu",
        ANNOTATE,
    ),
    (
        "aarch64-linux-gnu-objdump",
        "binutils-aarch64-linux-gnu",
        ANNOTATE,
    ),
    (
        "alpha-linux-gnu-objdump",
        "binutils-alpha-linux-gnu",
        ANNOTATE,
    ),
    ("debuginfod", "debuginfod", DEBUGINFOD),
    ("openssl", "openssl", DEBUGINFOD),
    ("node", "nodejs", JIT),
    ("java", "openjdk-17-jdk-headless", JIT),
    ("javac", "openjdk-17-jdk-headless", JIT),
    // `cargo xtask bench`: the recorders' own CPU time and peak memory.
    ("time", "time", TIME),
    // Building the lab image.
    ("cpio", "cpio", LAB_IMAGE),
    ("dpkg-query", "dpkg", LAB_KERNEL),
    // Building the altperiod lab kernel (xtask/src/lab/kernel.rs): its source is in FILES.
    ("aarch64-linux-gnu-gcc", "gcc-aarch64-linux-gnu", LAB_KERNEL),
    ("make", "make", MAKE),
    ("patch", "patch", LAB_KERNEL),
    ("xz", "xz-utils", LAB_KERNEL),
    ("flex", "flex", LAB_KERNEL),
    ("bison", "bison", LAB_KERNEL),
    ("bc", "bc", LAB_KERNEL),
    ("gzip", "gzip", LAB_IMAGE),
    ("dpkg", "dpkg", LAB_IMAGE),
    ("dpkg-deb", "dpkg", LAB_IMAGE),
    ("apt-get", "apt", LAB_IMAGE),
    ("apt-cache", "apt", LAB_IMAGE),
    // Checking binaries and packing releases.
    ("file", "file", AGENT_CHECK),
    ("ldd", "libc-bin", PERF_LIBS),
    ("tar", "tar", PACK),
    ("man", "man-db", MANUAL),
    ("bash", "bash", MANUAL),
    ("chroot", "coreutils", PACK),
    // Process and mount tools the tests use.
    ("setpriv", "util-linux", PROCESS),
    ("unshare", "util-linux", PROCESS),
    ("hostname", "hostname", PROCESS),
    ("mount", "mount", PROCESS),
    ("umount", "mount", PROCESS),
    ("pgrep", "procps", PROCESS),
    ("pkill", "procps", PROCESS),
    ("kill", "procps", PROCESS_LAB),
    ("find", "findutils", PROCESS_LAB),
    ("which", "debianutils", PROCESS_LAB),
    // Coreutils and the shell: run by the tests and, through the tests' sshd, by the host
    // as it would on a lab machine.
    ("sh", "dash", BASE),
    ("id", "coreutils", BASE),
    ("df", "coreutils", BASE),
    ("tail", "coreutils", BASE),
    ("date", "coreutils", BASE),
    ("nice", "coreutils", BASE),
    ("env", "coreutils", BASE),
    ("cat", "coreutils", BASE),
    ("head", "coreutils", BASE),
    ("chmod", "coreutils", BASE),
    ("chown", "coreutils", BASE),
    ("cp", "coreutils", BASE),
    ("mv", "coreutils", BASE),
    ("rm", "coreutils", BASE),
    ("mkdir", "coreutils", BASE),
    ("uname", "coreutils", BASE),
    ("sha256sum", "coreutils", BASE),
    ("wc", "coreutils", BASE),
    ("sleep", "coreutils", BASE),
    ("true", "coreutils", BASE),
    ("printf", "coreutils", BASE),
    ("ls", "coreutils", BASE),
    ("ln", "coreutils", BASE),
    ("mkfifo", "coreutils", BASE),
    ("tr", "coreutils", BASE),
    ("test", "coreutils", BASE),
    ("grep", "grep", BASE),
];

/// Programs from crates.io (no Debian package), with the crate `cargo install --locked`
/// installs them from: the reference pipeline of the flame-graph test and benchmark
/// (`perf script | inferno-collapse-perf | inferno-flamegraph`). The tidy test reads it.
pub const CARGO_TOOLS: &[(&str, &str, Why)] = &[
    ("inferno-collapse-perf", "inferno", FLAMEGRAPH),
    ("inferno-flamegraph", "inferno", FLAMEGRAPH),
];

/// Files (not programs) that a build or the tests read, with the Debian package that
/// installs each: labperf's build needs the C library's and OpenSSL's headers, the symbol
/// tests libc's separate debug file, the lab the kernel source.
pub const FILES: &[(&str, &str, Why)] = &[
    ("/usr/include/stdio.h", "libc6-dev", LIBC_DEV),
    ("/usr/include/openssl/ssl.h", "libssl-dev", HOST_SSL),
    ("/usr/share/doc/libc6-dbg", "libc6-dbg", DEBUG_LIBC),
    // The C library for aarch64 (headers, static archive): the corpus programs built for
    // the emulated Arm machine (tests/tests/corpus.rs); only a Recommends of
    // gcc-aarch64-linux-gnu.
    (
        "/usr/aarch64-linux-gnu/lib/libc.a",
        "libc6-dev-arm64-cross",
        ARM_LIBC,
    ),
    // The Alpha C agent's kernel headers (asm/unistd.h, linux/perf_event.h): only a
    // Recommends of gcc-alpha-linux-gnu, which --no-install-recommends leaves out (a fresh
    // machine could not build the Alpha agent).
    (
        "/usr/alpha-linux-gnu/include/asm/unistd.h",
        "linux-libc-dev-alpha-cross",
        ALPHA_AGENT,
    ),
    // The altperiod lab kernel's source (xtask/src/lab/kernel.rs).
    (
        "/usr/src/linux-source-6.1.tar.xz",
        "linux-source-6.1",
        LAB_KERNEL,
    ),
    // The Alpha lab machine: QEMU's PALcode for clipper (only a Recommends of
    // qemu-system-misc), and the C library busybox and dropbear link and load.
    (
        "/usr/share/qemu/palcode-clipper",
        "qemu-system-data",
        LAB_ALPHA,
    ),
    (
        "/usr/alpha-linux-gnu/lib/libc.a",
        "libc6.1-dev-alpha-cross",
        LAB_ALPHA,
    ),
    (
        "/usr/alpha-linux-gnu/lib/libc.so.6.1",
        "libc6.1-alpha-cross",
        LAB_ALPHA,
    ),
    // The Python venv of PYTHON_PACKAGES is made with Debian's python3 and its venv module.
    ("/usr/share/doc/python3-venv", "python3-venv", VENV_MODULE),
];

/// Python packages (PyPI) that tests import, installed by `cargo xtask setup` into the venv
/// at [`VENV`] (Debian's Python refuses `pip install` outside one): DuckDB reads the
/// Parquet export (tests/tests/export.rs). Only `test` wants them.
pub const PYTHON_PACKAGES: &[&str] = &["duckdb==2.0.1"];

/// The venv of [`PYTHON_PACKAGES`], under the workspace's target directory; tests find its
/// `bin/python` there.
pub const VENV: &str = "target/venv";

/// Programs that come with the Rust toolchain (rustup), the one prerequisite
/// `cargo xtask` cannot install for itself. The tidy test reads this list.
#[allow(dead_code)]
pub const TOOLCHAIN: &[&str] = &["cargo", "rustup", "rustc"];

/// The musl targets: this machine's builds its agent and bench (`demo`); `build-agents`
/// builds both.
const MUSL_TARGETS: [&str; 2] = ["x86_64-unknown-linux-musl", "aarch64-unknown-linux-musl"];

/// The rustup components `test` runs (`cargo fmt --check`, `cargo clippy`).
const COMPONENTS: [&str; 2] = ["clippy", "rustfmt"];

/// What setup installs for a need, in its order; each entry with why.
#[derive(Debug)]
pub struct Plan {
    /// rustup targets, with why.
    pub targets: Vec<(String, &'static str)>,
    /// rustup components.
    pub components: Vec<&'static str>,
    /// (program or file, Debian package, why) of [`PROGRAMS`] and [`FILES`].
    pub packages: Vec<(&'static str, &'static str, Why)>,
    /// (program, crate, why) of [`CARGO_TOOLS`].
    pub cargo_tools: Vec<(&'static str, &'static str, Why)>,
    /// The venv of [`PYTHON_PACKAGES`].
    pub venv: bool,
    /// qemu-alpha registered with binfmt_misc (the tests run Alpha binaries).
    pub binfmt: bool,
    /// A deb-src entry: the Alpha lab's busybox and dropbear come from Debian's sources.
    pub deb_src: bool,
    /// The nightly toolchain and cargo-fuzz.
    pub fuzz: bool,
}

/// What `need` wants installed.
pub fn plan(need: Need) -> Plan {
    let mut targets = Vec::new();
    if need.covers().contains(&Demo) {
        targets.push((
            host_musl(),
            "this machine's agent and bench are static musl binaries",
        ));
    }
    if need.covers().contains(&DemoLab) {
        targets.push((
            "aarch64-unknown-linux-musl".into(),
            "demo --lab builds the lab machine's agent and bench for aarch64",
        ));
    }
    if need.covers().contains(&Agents) {
        for t in MUSL_TARGETS {
            if !targets.iter().any(|(have, _)| have == t) {
                targets.push((
                    t.into(),
                    "build-agents builds the agents of both musl targets",
                ));
            }
        }
    }
    let take = |table: &[(&'static str, &'static str, Why)]| {
        table
            .iter()
            .filter(|(_, _, w)| need.wants(w))
            .copied()
            .collect::<Vec<_>>()
    };
    let mut packages = take(PROGRAMS);
    packages.extend(take(FILES));
    Plan {
        targets,
        components: if need == Test {
            COMPONENTS.to_vec()
        } else {
            Vec::new()
        },
        packages,
        cargo_tools: take(CARGO_TOOLS),
        venv: need == Test,
        binfmt: need == Test,
        deb_src: need.covers().contains(&Lab),
        fuzz: need == Fuzz,
    }
}

/// Whether `bin` is installed: on PATH, or in the sbin directories (not on a user's PATH).
fn have(bin: &str) -> bool {
    let path = std::env::var_os("PATH").unwrap_or_default();
    std::env::split_paths(&path)
        .chain(["/usr/sbin", "/sbin", "/usr/bin", "/bin"].map(Into::into))
        .any(|d| is_executable(&d.join(bin)))
}

fn is_executable(p: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt;
    std::fs::metadata(p).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
}

/// Whether a table entry is there: a file (an absolute path) exists, a program is installed.
fn present(what: &str) -> bool {
    if what.starts_with('/') {
        Path::new(what).exists()
    } else {
        have(what)
    }
}

/// A package to install, with what of it is missing and why each is wanted.
#[derive(Debug, PartialEq)]
pub struct Missing {
    pub package: String,
    pub reasons: Vec<(String, String)>,
}

impl Missing {
    /// `pkg-config: openssl-sys finds OpenSSL with it; ...`
    pub fn why(&self) -> String {
        self.reasons
            .iter()
            .map(|(what, why)| format!("{what}: {why}"))
            .collect::<Vec<_>>()
            .join("; ")
    }
}

/// The packages of the entries of `wanted` that are not `present`, each once, in table
/// order, with what is missing of each and why.
pub fn missing_packages(
    wanted: &[(&str, &str, Why)],
    present: impl Fn(&str) -> bool,
) -> Vec<Missing> {
    let mut missing: Vec<Missing> = Vec::new();
    for (what, pkg, why) in wanted {
        if present(what) {
            continue;
        }
        let reason = (what.to_string(), why.why.to_string());
        match missing.iter_mut().find(|m| m.package == *pkg) {
            Some(m) => m.reasons.push(reason),
            None => missing.push(Missing {
                package: pkg.to_string(),
                reasons: vec![reason],
            }),
        }
    }
    missing
}

/// The Python packages of [`PYTHON_PACKAGES`] that the venv at [`VENV`] lacks (all when
/// there is no venv), and the venv's python.
fn venv_missing(sh: &Shell) -> (Vec<&'static str>, std::path::PathBuf) {
    let python = crate::util::root().join(VENV).join("bin/python");
    let module = |p: &str| p.split("==").next().unwrap_or(p).to_string();
    let importable = |p: &str| {
        let m = module(p);
        cmd!(sh, "{python} -c 'import '{m}")
            .quiet()
            .ignore_stdout()
            .ignore_stderr()
            .run()
            .is_ok()
    };
    let missing = PYTHON_PACKAGES
        .iter()
        .copied()
        .filter(|p| !python.exists() || !importable(p))
        .collect();
    (missing, python)
}

/// Makes the venv at [`VENV`] (workspace root) and installs [`PYTHON_PACKAGES`] in it,
/// unless each already imports.
fn venv(sh: &Shell) -> anyhow::Result<String> {
    let (missing, python) = venv_missing(sh);
    if missing.is_empty() {
        return Ok(format!("{} present in {VENV}", PYTHON_PACKAGES.join(" ")));
    }
    eprintln!(
        "setup: pip will install {} in {VENV}: DuckDB reads labperf's Parquet export in the tests",
        missing.join(" ")
    );
    let dir = crate::util::root().join(VENV);
    if !python.exists() {
        cmd!(sh, "/usr/bin/python3 -m venv {dir}").run().context(
            "cannot make the venv: install python3-venv (`apt-get install python3-venv`)",
        )?;
    }
    let pkgs = missing.clone();
    cmd!(
        sh,
        "{python} -m pip install --quiet --disable-pip-version-check {pkgs...}"
    )
    .run()
    .with_context(|| {
        format!(
            "pip could not install {}: check the network, or run `{} -m pip install {}`",
            missing.join(" "),
            python.display(),
            missing.join(" ")
        )
    })?;
    Ok(format!("installed {} in {VENV}", missing.join(" ")))
}

/// The rustup targets of `plan` that are not installed.
fn missing_targets(sh: &Shell, plan: &Plan) -> anyhow::Result<Vec<(String, &'static str)>> {
    let have = cmd!(sh, "rustup target list --installed")
        .quiet()
        .read()
        .context("rustup is missing: install Rust with rustup (https://rustup.rs)")?;
    Ok(plan
        .targets
        .iter()
        .filter(|(t, _)| !have.lines().any(|l| l.trim() == t))
        .cloned()
        .collect())
}

/// The rustup components of `plan` that are not installed.
fn missing_components(sh: &Shell, plan: &Plan) -> anyhow::Result<Vec<&'static str>> {
    if plan.components.is_empty() {
        return Ok(Vec::new());
    }
    let have = cmd!(sh, "rustup component list --installed")
        .quiet()
        .read()?;
    Ok(plan
        .components
        .iter()
        .copied()
        .filter(|c| !have.lines().any(|l| l.starts_with(c)))
        .collect())
}

/// Where qemu-user-binfmt describes qemu-alpha, and where binfmt_misc lists it once
/// registered.
const BINFMT_CONF: &str = "/usr/lib/binfmt.d/qemu-alpha.conf";
const BINFMT_MISC: &str = "/proc/sys/fs/binfmt_misc";

fn have_nightly(sh: &Shell) -> bool {
    cmd!(sh, "rustup toolchain list")
        .quiet()
        .read()
        .is_ok_and(|l| l.lines().any(|l| l.starts_with("nightly")))
}

fn have_cargo_fuzz(sh: &Shell) -> bool {
    cmd!(sh, "cargo fuzz --version")
        .quiet()
        .ignore_stdout()
        .ignore_stderr()
        .run()
        .is_ok()
}

/// One thing a need wants: whether it is there, what it is, and why it is wanted.
type Checked = (bool, String, String);

/// The apt packages of `plan`, each once, with its programs and files, present or not.
fn checked_packages(plan: &Plan) -> Vec<Checked> {
    let absent = missing_packages(&plan.packages, present);
    let mut out = Vec::new();
    let mut seen: Vec<&str> = Vec::new();
    for (_, pkg, _) in &plan.packages {
        if seen.contains(pkg) {
            continue;
        }
        seen.push(pkg);
        let whats: Vec<&str> = plan
            .packages
            .iter()
            .filter(|(_, p, _)| p == pkg)
            .map(|(w, _, _)| *w)
            .collect();
        let m = absent.iter().find(|m| m.package == *pkg);
        out.push((
            m.is_none(),
            format!("apt package {pkg} ({})", whats.join(", ")),
            m.map(Missing::why).unwrap_or_default(),
        ));
    }
    out
}

/// Everything `plan` wants, present or not, in setup's order.
fn checked(sh: &Shell, plan: &Plan) -> Vec<Checked> {
    let mut out: Vec<Checked> = Vec::new();
    match missing_targets(sh, plan) {
        Ok(m) => out.extend(plan.targets.iter().map(|(t, why)| {
            let ok = !m.iter().any(|(x, _)| x == t);
            (ok, format!("rustup target {t}"), why.to_string())
        })),
        Err(e) => out.push((false, "rustup".into(), format!("{e:#}"))),
    }
    let comps = missing_components(sh, plan).unwrap_or_else(|_| plan.components.clone());
    out.extend(plan.components.iter().map(|c| {
        let why = "`cargo xtask test` runs cargo fmt --check and clippy".to_string();
        (!comps.contains(c), format!("rustup component {c}"), why)
    }));
    out.extend(checked_packages(plan));
    let tools = missing_packages(&plan.cargo_tools, have);
    let mut seen: Vec<&str> = Vec::new();
    for (_, krate, why) in &plan.cargo_tools {
        if !seen.contains(krate) {
            seen.push(krate);
            let ok = !tools.iter().any(|m| m.package == *krate);
            out.push((ok, format!("cargo install {krate}"), why.why.into()));
        }
    }
    if plan.venv {
        let (m, _) = venv_missing(sh);
        out.extend(PYTHON_PACKAGES.iter().map(|p| {
            let why = "DuckDB reads labperf's Parquet export in the tests".to_string();
            (!m.contains(p), format!("pip {p} in {VENV}"), why)
        }));
    }
    if plan.binfmt {
        out.push((
            Path::new(BINFMT_MISC).join("qemu-alpha").exists(),
            "qemu-alpha registered with binfmt_misc (qemu-user-binfmt)".into(),
            "the tests run the Alpha agent and bench as programs".into(),
        ));
    }
    if plan.fuzz {
        let why = "cargo-fuzz builds with nightly".to_string();
        out.push((have_nightly(sh), "rustup toolchain nightly".into(), why));
        let why = "the fuzz targets run under cargo-fuzz".to_string();
        out.push((have_cargo_fuzz(sh), "cargo install cargo-fuzz".into(), why));
    }
    out
}

/// `cargo xtask setup --check [--for NEED]`: prints what `need` wants, each present or
/// missing with why; installs nothing. Returns the exit code: 1 when something is missing.
pub fn check(need: Need) -> i32 {
    let sh = Shell::new().expect("a shell");
    let n = need.name();
    println!("setup --check --for {n}: what {} needs", need.commands());
    let all = checked(&sh, &plan(need));
    for (ok, what, why) in &all {
        if *ok {
            println!("  ok       {what}");
        } else {
            println!("  MISSING  {what}: {why}");
        }
    }
    let missing = all.iter().filter(|c| !c.0).count();
    if missing == 0 {
        println!("nothing missing for {n} ({} checked)", all.len());
        0
    } else {
        println!("{missing} missing for {n}: `cargo xtask setup --for {n}` installs them");
        1
    }
}

/// Installs the missing rustup targets of `plan`, saying why.
fn targets(sh: &Shell, plan: &Plan) -> anyhow::Result<String> {
    let missing = missing_targets(sh, plan)?;
    for (want, why) in &missing {
        eprintln!("setup: installing rustup target {want}: {why}");
        cmd!(sh, "rustup target add {want}")
            .run()
            .with_context(|| format!("run `rustup target add {want}` by hand"))?;
    }
    let all: Vec<&str> = plan.targets.iter().map(|(t, _)| t.as_str()).collect();
    let added: Vec<&str> = missing.iter().map(|(t, _)| t.as_str()).collect();
    Ok(if missing.is_empty() {
        format!("{} present", all.join(", "))
    } else {
        format!("added {}", added.join(", "))
    })
}

/// Installs the missing rustup components of `plan`.
fn components(sh: &Shell, plan: &Plan) -> anyhow::Result<String> {
    let missing = missing_components(sh, plan)?;
    for want in &missing {
        eprintln!("setup: installing rustup component {want}: `cargo xtask test` runs it");
        cmd!(sh, "rustup component add {want}")
            .run()
            .with_context(|| format!("run `rustup component add {want}` by hand"))?;
    }
    Ok(if missing.is_empty() {
        "present".into()
    } else {
        format!("added {}", missing.join(", "))
    })
}

/// Installs the missing [`CARGO_TOOLS`] of `plan` with `cargo install`, saying why.
fn cargo_tools(sh: &Shell, plan: &Plan) -> anyhow::Result<String> {
    let missing = missing_packages(&plan.cargo_tools, have);
    for m in &missing {
        let krate = &m.package;
        eprintln!("setup: cargo install {krate}: {}", m.why());
        cmd!(sh, "cargo install --locked {krate}")
            .run()
            .with_context(|| format!("run `cargo install --locked {krate}` by hand"))?;
    }
    let names: Vec<&str> = missing.iter().map(|m| m.package.as_str()).collect();
    Ok(if missing.is_empty() {
        "present".into()
    } else {
        format!("installed {}", names.join(" "))
    })
}

/// Installs the nightly toolchain and cargo-fuzz when missing.
fn nightly_and_cargo_fuzz(sh: &Shell) -> anyhow::Result<String> {
    let mut did = Vec::new();
    if !have_nightly(sh) {
        eprintln!("setup: installing the nightly toolchain: cargo-fuzz builds with it");
        cmd!(sh, "rustup toolchain install nightly --profile minimal")
            .run()
            .context("run `rustup toolchain install nightly` by hand")?;
        did.push("nightly installed");
    }
    if !have_cargo_fuzz(sh) {
        eprintln!("setup: cargo install cargo-fuzz: the fuzz targets run under it");
        cmd!(sh, "cargo install --locked cargo-fuzz")
            .run()
            .context("run `cargo install cargo-fuzz` by hand")?;
        did.push("cargo-fuzz installed");
    }
    Ok(if did.is_empty() {
        "nightly and cargo-fuzz present".into()
    } else {
        did.join(", ")
    })
}

/// Installs what `need` wants and is missing, as steps of `s`: each says what it installs
/// and why; a step with nothing missing installs nothing (no apt-get run at all).
pub fn run(need: Need, s: &mut Summary) {
    let sh = Shell::new().expect("a shell");
    let plan = plan(need);
    let n = need.name();
    if !plan.targets.is_empty() {
        s.step(&format!("setup for {n}: rustup targets"), || {
            targets(&sh, &plan)
        });
    }
    if !plan.components.is_empty() {
        s.step(&format!("setup for {n}: clippy and rustfmt"), || {
            components(&sh, &plan)
        });
    }
    if !plan.packages.is_empty() {
        s.step(&format!("setup for {n}: Debian packages"), || {
            packages(&sh, &plan)
        });
    }
    if !plan.cargo_tools.is_empty() {
        s.step(&format!("setup for {n}: cargo tools (inferno)"), || {
            cargo_tools(&sh, &plan)
        });
    }
    if plan.venv {
        s.step(&format!("setup for {n}: Python venv (duckdb)"), || {
            venv(&sh)
        });
    }
    if plan.binfmt {
        s.step(
            &format!("setup for {n}: binfmt_misc runs Alpha binaries (qemu-alpha)"),
            || binfmt(&sh),
        );
    }
    if plan.deb_src {
        s.step(
            &format!("setup for {n}: Debian source packages (deb-src)"),
            || deb_src(&sh),
        );
    }
    if plan.fuzz {
        s.step(&format!("setup for {n}: nightly and cargo-fuzz"), || {
            nightly_and_cargo_fuzz(&sh)
        });
    }
}

/// Installs the Debian packages of the plan's missing programs and files.
fn packages(sh: &Shell, plan: &Plan) -> anyhow::Result<String> {
    let missing = missing_packages(&plan.packages, present);
    if missing.is_empty() {
        return Ok(format!(
            "all {} programs and files present",
            plan.packages.len()
        ));
    }
    apt::install(sh, &missing)?;
    let still = missing_packages(&plan.packages, present);
    if !still.is_empty() {
        let names: Vec<&str> = still.iter().map(|m| m.package.as_str()).collect();
        bail!(
            "installed, but still missing the programs of: {}",
            names.join(" ")
        );
    }
    let names: Vec<&str> = missing.iter().map(|m| m.package.as_str()).collect();
    Ok(format!("installed {}", names.join(" ")))
}

/// Where [`deb_src`] reads the machine's Debian archives and writes their source entries.
const DEB_SOURCES: &str = "/etc/apt/sources.list.d/debian.sources";
const DEB_SRC: &str = "/etc/apt/sources.list.d/labperf-deb-src.sources";

/// Makes Debian's source packages known to apt (the Alpha lab's busybox and dropbear are
/// built from them): when apt knows none, a deb-src twin of each `Types: deb` entry of
/// [`DEB_SOURCES`], then `apt-get update`.
fn deb_src(sh: &Shell) -> anyhow::Result<String> {
    let known = cmd!(sh, "apt-cache showsrc --only-source dropbear")
        .ignore_stderr()
        .read()
        .unwrap_or_default();
    if known.contains("Version:") {
        return Ok("apt knows Debian's source packages".into());
    }
    let deb = std::fs::read_to_string(DEB_SOURCES).with_context(|| {
        format!("no {DEB_SOURCES}: add a deb-src line for your Debian mirror to apt's sources, then `apt-get update`")
    })?;
    let src = deb_src_entries(&deb);
    if src.is_empty() {
        bail!("{DEB_SOURCES} has no `Types: deb` entry to make a deb-src entry of");
    }
    if !is_root() {
        bail!("not root: write a deb-src entry (`Types: deb-src`) beside {DEB_SOURCES} and run `sudo apt-get update`");
    }
    std::fs::write(DEB_SRC, src)?;
    cmd!(sh, "apt-get update -qq").run()?;
    Ok(format!("wrote {DEB_SRC}"))
}

/// The deb822 stanzas of `sources` whose type is `deb`, as `deb-src` stanzas.
fn deb_src_entries(sources: &str) -> String {
    sources
        .split("\n\n")
        .filter(|st| st.lines().any(|l| l.trim() == "Types: deb"))
        .map(|st| {
            let lines: Vec<String> = st
                .lines()
                .filter(|l| !l.starts_with('#'))
                .map(|l| {
                    if l.trim() == "Types: deb" {
                        "Types: deb-src".to_string()
                    } else {
                        l.to_string()
                    }
                })
                .collect();
            lines.join("\n") + "\n"
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// Registers qemu-alpha with binfmt_misc (installing qemu-user-binfmt when its description
/// is missing), so the tests run Alpha binaries as programs.
fn binfmt(sh: &Shell) -> anyhow::Result<String> {
    let conf = Path::new(BINFMT_CONF);
    let mut did = Vec::new();
    if !conf.exists() {
        apt::install(
            sh,
            &[Missing {
                package: "qemu-user-binfmt".into(),
                reasons: vec![(
                    BINFMT_CONF.into(),
                    "binfmt_misc runs the Alpha agent and bench with qemu-alpha in the tests"
                        .into(),
                )],
            }],
        )?;
        did.push("installed qemu-user-binfmt");
    }
    let dir = Path::new(BINFMT_MISC);
    if dir.join("qemu-alpha").exists() {
        did.push("qemu-alpha registered");
        return Ok(did.join(", "));
    }
    if !dir.join("register").exists() {
        cmd!(sh, "mount -t binfmt_misc binfmt_misc {dir}")
            .run()
            .context("cannot mount binfmt_misc: run `sudo mount -t binfmt_misc binfmt_misc /proc/sys/fs/binfmt_misc`")?;
    }
    std::fs::write(dir.join("register"), std::fs::read(conf)?).context(
        "cannot register qemu-alpha: run `sudo systemctl restart systemd-binfmt` (or as root: cat /usr/lib/binfmt.d/qemu-alpha.conf > /proc/sys/fs/binfmt_misc/register)",
    )?;
    did.push("registered qemu-alpha");
    Ok(did.join(", "))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn deb_src_entries_are_the_deb_entries_as_sources() {
        let deb = "Types: deb\n# a comment\nURIs: http://deb.debian.org/debian\nSuites: bookworm\nComponents: main\n\nTypes: deb-src\nURIs: http://x\n\nTypes: deb\nURIs: http://deb.debian.org/debian-security\nSuites: bookworm-security\n";
        assert_eq!(
            deb_src_entries(deb),
            "Types: deb-src\nURIs: http://deb.debian.org/debian\nSuites: bookworm\nComponents: main\n\nTypes: deb-src\nURIs: http://deb.debian.org/debian-security\nSuites: bookworm-security\n"
        );
    }

    pub(super) fn packages_of(need: Need) -> Vec<&'static str> {
        let mut v: Vec<&str> = plan(need).packages.iter().map(|(_, p, _)| *p).collect();
        v.sort();
        v.dedup();
        v
    }

    #[test]
    fn a_missing_program_names_its_package_once() {
        let have = |p: &str| !["sshd", "ssh", "ssh-keygen"].contains(&p);
        let m = missing_packages(PROGRAMS, have);
        let names: Vec<&str> = m.iter().map(|m| m.package.as_str()).collect();
        assert_eq!(names, ["openssh-server", "openssh-client"]);
        assert_eq!(m[1].reasons.len(), 2, "{m:?}");
        assert_eq!(
            m[1].reasons[0],
            ("ssh".to_string(), SSH_LAB.why.to_string())
        );
        assert!(missing_packages(PROGRAMS, |_| true).is_empty());
    }

    #[test]
    fn demo_needs_its_musl_target_and_what_labperf_links_with_only() {
        let p = plan(Need::Demo);
        assert_eq!(
            p.targets
                .iter()
                .map(|(t, _)| t.as_str())
                .collect::<Vec<_>>(),
            [host_musl().as_str()]
        );
        // A C compiler and archiver, the C library's and OpenSSL's headers, pkg-config:
        // each installed only when missing (a machine that builds xtask has the first).
        assert_eq!(
            packages_of(Need::Demo),
            ["binutils", "gcc", "libc6-dev", "libssl-dev", "pkgconf"]
        );
        let whats: Vec<&str> = p.packages.iter().map(|(w, _, _)| *w).collect();
        assert_eq!(
            whats,
            [
                "cc",
                "ar",
                "pkg-config",
                "/usr/include/stdio.h",
                "/usr/include/openssl/ssl.h"
            ]
        );
        assert!(p.components.is_empty() && p.cargo_tools.is_empty());
        assert!(!p.venv && !p.binfmt && !p.fuzz);
        for not in [
            "chromium",
            "golang-go",
            "qemu-user",
            "qemu-system-arm",
            "linux-source-6.1",
            "linux-perf",
            "gcc-alpha-linux-gnu",
        ] {
            assert!(!packages_of(Need::Demo).contains(&not), "{not}");
        }
    }

    #[test]
    fn test_wants_the_full_set_and_the_others_less() {
        let t = plan(Need::Test);
        assert_eq!(t.packages.len(), PROGRAMS.len() + FILES.len());
        assert_eq!(t.cargo_tools.len(), CARGO_TOOLS.len());
        assert!(t.targets.len() >= 2 && t.components.len() == 2);
        assert!(t.venv && t.binfmt && !t.fuzz);
        // Every need's entries are test's, and each need serves a command.
        for n in [Demo, Agents, Dist, Man, Bless, Lab, Bench, Fuzz] {
            assert!(packages_of(n).len() < packages_of(Test).len(), "{n:?}");
            assert!(n.covers()[0] == n && Test.covers().contains(&n) != (n == Fuzz));
        }
        let lab = packages_of(Lab);
        for want in [
            "qemu-system-arm",
            "linux-source-6.1",
            "gcc-aarch64-linux-gnu",
            "cpio",
        ] {
            assert!(lab.contains(&want), "lab lacks {want}");
        }
        assert!(!lab.contains(&"chromium") && !lab.contains(&"libssl-dev"));
        let agents = packages_of(Agents);
        for want in [
            "gcc-alpha-linux-gnu",
            "linux-libc-dev-alpha-cross",
            "file",
            "libssl-dev",
        ] {
            assert!(agents.contains(&want), "agents lack {want}");
        }
        assert_eq!(plan(Agents).targets.len(), 2);
        assert!(plan(Lab).targets.is_empty() && plan(Fuzz).targets.is_empty());
        // demo --lab: demo's and the lab's, and the lab machine's musl target.
        let demo_lab = packages_of(DemoLab);
        assert!(packages_of(Demo).iter().all(|p| demo_lab.contains(p)));
        assert!(packages_of(Lab).iter().all(|p| demo_lab.contains(p)));
        assert!(!demo_lab.contains(&"chromium") && !demo_lab.contains(&"gcc-alpha-linux-gnu"));
        let targets: Vec<String> = plan(DemoLab).targets.into_iter().map(|t| t.0).collect();
        assert!(
            targets.contains(&"aarch64-unknown-linux-musl".to_string()),
            "{targets:?}"
        );
        let fuzz = plan(Fuzz);
        assert!(fuzz.fuzz && packages_of(Fuzz).contains(&"g++"));
        assert!(packages_of(Fuzz).contains(&"linux-perf"));
        let bench = plan(Bench);
        assert!(bench.cargo_tools.len() == 2 && !bench.venv);
        assert!(packages_of(Bench).contains(&"qemu-system-arm"));
        assert!(!packages_of(Bench).contains(&"chromium"));
    }
}
