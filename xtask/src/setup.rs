//! `cargo xtask setup`: installs missing rustup targets and every Debian package that a test,
//! bench or xtask command runs, idempotently. [`PROGRAMS`] is the one table of them.

use crate::util::{is_root, Summary};
use anyhow::{bail, Context};
use std::path::Path;
use xshell::{cmd, Shell};

#[derive(clap::Args, Default)]
pub struct Args {
    /// Also install cargo-fuzz and the nightly toolchain it needs.
    #[arg(long)]
    pub fuzz: bool,
}

/// Every external program that a test, bench or xtask command starts (or that the host
/// runs on a lab machine, which the tests' sshd is), with the Debian package that
/// installs it. `cargo xtask setup` installs the package of each missing program; the
/// tidy test (`tests/tests/tidy.rs`) fails when code starts a program not listed here.
pub const PROGRAMS: &[(&str, &str)] = &[
    // Compilers: the corpus programs are built as people build them (tests/tests/corpus.rs).
    ("gcc", "gcc"),
    ("g++", "g++"),
    ("clang", "clang"),
    ("musl-gcc", "musl-tools"),
    ("alpha-linux-gnu-gcc", "gcc-alpha-linux-gnu"),
    // Emulators: qemu-user for the Alpha agent and bench, the system emulator for the Arm lab.
    ("qemu-alpha", "qemu-user"),
    ("qemu-aarch64", "qemu-user"),
    ("qemu-system-aarch64", "qemu-system-arm"),
    // SSH: the tests start their own sshd and talk to the lab machine with ssh.
    ("sshd", "openssh-server"),
    ("ssh", "openssh-client"),
    ("scp", "openssh-client"),
    ("ssh-keygen", "openssh-client"),
    ("script", "bsdutils"),
    ("ssh-agent", "openssh-client"),
    ("ssh-add", "openssh-client"),
    // The reference profiler of the benchmarks, and the symbol tests' workloads and tools.
    ("perf", "linux-perf"),
    ("python3", "python3"),
    // A real pprof client reads `labperf export --format pprof` (tests/tests/export.rs).
    ("go", "golang-go"),
    // Headless Chromium loads `labperf report --format html` (tests/tests/views.rs).
    ("chromium", "chromium"),
    ("objcopy", "binutils"),
    ("addr2line", "binutils"),
    // `cargo xtask bench`: the recorders' own CPU time and peak memory.
    ("time", "time"),
    // Building the lab image.
    ("cpio", "cpio"),
    ("dpkg-query", "dpkg"),
    // Building the altperiod lab kernel (xtask/src/lab/kernel.rs): its source is in FILES.
    ("aarch64-linux-gnu-gcc", "gcc-aarch64-linux-gnu"),
    ("make", "make"),
    ("patch", "patch"),
    ("xz", "xz-utils"),
    ("flex", "flex"),
    ("bison", "bison"),
    ("bc", "bc"),
    ("gzip", "gzip"),
    ("dpkg", "dpkg"),
    ("dpkg-deb", "dpkg"),
    ("apt-get", "apt"),
    ("apt-cache", "apt"),
    // Checking binaries and packing releases.
    ("file", "file"),
    ("ldd", "libc-bin"),
    ("tar", "tar"),
    // Process and mount tools the tests use.
    ("setpriv", "util-linux"),
    ("unshare", "util-linux"),
    ("hostname", "hostname"),
    ("mount", "mount"),
    ("umount", "mount"),
    ("pgrep", "procps"),
    ("pkill", "procps"),
    ("kill", "procps"),
    ("find", "findutils"),
    ("which", "debianutils"),
    // Coreutils and the shell: run by the tests and, through the tests' sshd, by the host
    // as it would on a lab machine.
    ("sh", "dash"),
    ("id", "coreutils"),
    ("df", "coreutils"),
    ("tail", "coreutils"),
    ("date", "coreutils"),
    ("env", "coreutils"),
    ("cat", "coreutils"),
    ("head", "coreutils"),
    ("chmod", "coreutils"),
    ("chown", "coreutils"),
    ("cp", "coreutils"),
    ("mv", "coreutils"),
    ("rm", "coreutils"),
    ("mkdir", "coreutils"),
    ("uname", "coreutils"),
    ("sha256sum", "coreutils"),
    ("wc", "coreutils"),
    ("sleep", "coreutils"),
    ("true", "coreutils"),
    ("printf", "coreutils"),
    ("ls", "coreutils"),
    ("tr", "coreutils"),
    ("test", "coreutils"),
    ("grep", "grep"),
];

/// Programs from crates.io (no Debian package), with the crate `cargo install --locked`
/// installs them from: the reference pipeline of the flame-graph test and benchmark
/// (`perf script | inferno-collapse-perf | inferno-flamegraph`). The tidy test reads it.
pub const CARGO_TOOLS: &[(&str, &str)] = &[
    ("inferno-collapse-perf", "inferno"),
    ("inferno-flamegraph", "inferno"),
];

/// Files (not programs) that tests read, with the Debian package that installs each: the
/// symbol tests need libc's separate debug file, as a user's machine has it; the lab needs
/// the kernel source.
pub const FILES: &[(&str, &str)] = &[
    ("/usr/share/doc/libc6-dbg", "libc6-dbg"),
    // The C library's headers and its static archive: the tests' C programs, built as PIE,
    // non-PIE, shared library and static (`tests/tests/unwinding.rs`); only a Recommends
    // of gcc.
    ("/usr/include/stdio.h", "libc6-dev"),
    // The C library for aarch64 (headers, static archive): the corpus programs built for
    // the emulated Arm machine (tests/tests/corpus.rs); only a Recommends of
    // gcc-aarch64-linux-gnu.
    ("/usr/aarch64-linux-gnu/lib/libc.a", "libc6-dev-arm64-cross"),
    // The Alpha C agent's kernel headers (asm/unistd.h, linux/perf_event.h): only a
    // Recommends of gcc-alpha-linux-gnu, which --no-install-recommends leaves out (a fresh
    // machine could not build the Alpha agent).
    (
        "/usr/alpha-linux-gnu/include/asm/unistd.h",
        "linux-libc-dev-alpha-cross",
    ),
    // The altperiod lab kernel's source (xtask/src/lab/kernel.rs).
    ("/usr/src/linux-source-6.1.tar.xz", "linux-source-6.1"),
    // The Python venv of PYTHON_PACKAGES is made with Debian's python3 and its venv module.
    ("/usr/share/doc/python3-venv", "python3-venv"),
];

/// Python packages (PyPI) that tests import, installed by `cargo xtask setup` into the venv
/// at [`VENV`] (Debian's Python refuses `pip install` outside one): DuckDB reads the
/// Parquet export (tests/tests/export.rs).
pub const PYTHON_PACKAGES: &[&str] = &["duckdb==2.0.1"];

/// The venv of [`PYTHON_PACKAGES`], under the workspace's target directory; tests find its
/// `bin/python` there.
pub const VENV: &str = "target/venv";

/// Programs that come with the Rust toolchain (rustup), the one prerequisite
/// `cargo xtask` cannot install for itself. The tidy test reads this list.
#[allow(dead_code)]
pub const TOOLCHAIN: &[&str] = &["cargo", "rustup", "rustc"];

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

fn apt(sh: &Shell, pkgs: &[&str]) -> anyhow::Result<()> {
    if !is_root() {
        bail!(
            "not root: install them with `sudo apt-get install {}`",
            pkgs.join(" ")
        );
    }
    let _ = cmd!(sh, "apt-get update -qq").run();
    cmd!(
        sh,
        "apt-get install -y -qq --no-install-recommends {pkgs...}"
    )
    .env("DEBIAN_FRONTEND", "noninteractive")
    .run()
    .with_context(|| {
        format!(
            "apt-get failed: run `apt-get install {}` by hand",
            pkgs.join(" ")
        )
    })
}

/// The packages of the programs in `wanted` that are missing, each once, in table order.
pub fn missing_packages(wanted: &[(&str, &str)], have: impl Fn(&str) -> bool) -> Vec<String> {
    let mut missing: Vec<String> = Vec::new();
    for (prog, pkg) in wanted {
        if !have(prog) && !missing.iter().any(|m| m == pkg) {
            missing.push(pkg.to_string());
        }
    }
    missing
}

/// Makes the venv at [`VENV`] (workspace root) and installs [`PYTHON_PACKAGES`] in it,
/// unless each already imports.
fn venv(sh: &Shell) -> anyhow::Result<String> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .context("xtask sits in the workspace")?;
    let dir = root.join(VENV);
    let python = dir.join("bin/python");
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
    let missing: Vec<&str> = PYTHON_PACKAGES
        .iter()
        .copied()
        .filter(|p| !python.exists() || !importable(p))
        .collect();
    if missing.is_empty() {
        return Ok(format!("{} present in {VENV}", PYTHON_PACKAGES.join(" ")));
    }
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

/// The packages of [`PROGRAMS`] and [`FILES`] that are missing.
fn missing() -> Vec<String> {
    let mut m = missing_packages(PROGRAMS, have);
    for p in missing_packages(FILES, |f| Path::new(f).exists()) {
        if !m.contains(&p) {
            m.push(p);
        }
    }
    m
}

/// Installs the Debian packages of the missing programs of [`PROGRAMS`] and files of [`FILES`].
fn packages(sh: &Shell) -> anyhow::Result<String> {
    let missing = missing();
    if missing.is_empty() {
        return Ok(format!(
            "all {} programs and {} files present",
            PROGRAMS.len(),
            FILES.len()
        ));
    }
    eprintln!("installing {}", missing.join(" "));
    let refs: Vec<&str> = missing.iter().map(String::as_str).collect();
    apt(sh, &refs)?;
    let still = self::missing();
    if !still.is_empty() {
        bail!(
            "installed, but still missing the programs of: {}",
            still.join(" ")
        );
    }
    Ok(format!("installed {}", missing.join(" ")))
}

pub fn run(a: &Args, s: &mut Summary) {
    let sh = Shell::new().expect("a shell");
    s.step("setup: rustup targets", || {
        let have = cmd!(sh, "rustup target list --installed")
            .read()
            .context("rustup is missing: install Rust with rustup (https://rustup.rs)")?;
        let mut added = Vec::new();
        for want in ["x86_64-unknown-linux-musl", "aarch64-unknown-linux-musl"] {
            if !have.lines().any(|l| l.trim() == want) {
                eprintln!("installing rustup target {want}");
                cmd!(sh, "rustup target add {want}")
                    .run()
                    .with_context(|| format!("run `rustup target add {want}` by hand"))?;
                added.push(want);
            }
        }
        Ok(if added.is_empty() {
            "x86_64 and aarch64 musl present".into()
        } else {
            format!("added {}", added.join(", "))
        })
    });
    s.step("setup: clippy and rustfmt", || {
        let have = cmd!(sh, "rustup component list --installed").read()?;
        let mut added = Vec::new();
        for want in ["clippy", "rustfmt"] {
            if !have.lines().any(|l| l.starts_with(want)) {
                cmd!(sh, "rustup component add {want}")
                    .run()
                    .with_context(|| format!("run `rustup component add {want}` by hand"))?;
                added.push(want);
            }
        }
        Ok(if added.is_empty() {
            "present".into()
        } else {
            format!("added {}", added.join(", "))
        })
    });
    s.step(
        "setup: Debian packages (compilers, qemu, sshd, perf, tools)",
        || packages(&sh),
    );
    s.step("setup: cargo tools (inferno)", || {
        let missing = missing_packages(CARGO_TOOLS, have);
        for krate in &missing {
            eprintln!("installing {krate} with cargo install");
            cmd!(sh, "cargo install --locked {krate}")
                .run()
                .with_context(|| format!("run `cargo install --locked {krate}` by hand"))?;
        }
        Ok(if missing.is_empty() {
            "present".into()
        } else {
            format!("installed {}", missing.join(" "))
        })
    });
    s.step("setup: Python venv (duckdb)", || venv(&sh));
    s.step("setup: binfmt_misc runs Alpha binaries (qemu-alpha)", || {
        let conf = Path::new("/usr/lib/binfmt.d/qemu-alpha.conf");
        let mut did = Vec::new();
        if !conf.exists() {
            apt(&sh, &["qemu-user-binfmt"])?;
            did.push("installed qemu-user-binfmt");
        }
        let dir = Path::new("/proc/sys/fs/binfmt_misc");
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
    });
    if a.fuzz {
        s.step("setup: cargo-fuzz", || {
            if cmd!(sh, "rustup toolchain list")
                .read()?
                .lines()
                .all(|l| !l.starts_with("nightly"))
            {
                cmd!(sh, "rustup toolchain install nightly --profile minimal")
                    .run()
                    .context("run `rustup toolchain install nightly` by hand")?;
            }
            if cmd!(sh, "cargo fuzz --version")
                .quiet()
                .ignore_stdout()
                .ignore_stderr()
                .run()
                .is_ok()
            {
                return Ok("cargo-fuzz present".into());
            }
            cmd!(sh, "cargo install --locked cargo-fuzz")
                .run()
                .context("run `cargo install cargo-fuzz` by hand")?;
            Ok("cargo-fuzz installed".into())
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_missing_program_names_its_package_once() {
        let have = |p: &str| !["sshd", "ssh", "ssh-keygen"].contains(&p);
        let m = missing_packages(PROGRAMS, have);
        assert_eq!(m, ["openssh-server", "openssh-client"]);
        assert!(missing_packages(PROGRAMS, |_| true).is_empty());
    }
}
