//! The emulated lab machines the lab tests talk to (`cargo xtask lab up aarch64
//! [--kernel altperiod]`, `cargo xtask lab up alpha`): ssh, uploads, fetches, and `labperf`
//! commands aimed at them.

use crate::{bin, root, BenchClock};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

/// One lab machine: its directory holds `port`, `id_ed25519` and `known_hosts`; its agent
/// and benches are `files` of target/agents/`triple`.
pub struct Lab {
    dir: PathBuf,
    triple: &'static str,
    files: &'static [&'static str],
}

const ARM_FILES: &[&str] = &["labperf-agent", "labperf-bench", "labperf-bench-nofp"];

impl Lab {
    /// The machine with Debian's kernel (`$LABPERF_LAB_DIR`, set by `cargo xtask test`).
    pub fn debian() -> Lab {
        Lab::from_env("LABPERF_LAB_DIR", "target/lab/aarch64")
    }

    /// The machine with the altperiod kernel (`$LABPERF_ALTPERIOD_LAB_DIR`).
    pub fn altperiod() -> Lab {
        Lab::from_env("LABPERF_ALTPERIOD_LAB_DIR", "target/lab/aarch64-altperiod")
    }

    /// The emulated Alpha machine (`$LABPERF_ALPHA_LAB_DIR`): the C agent and bench.
    pub fn alpha() -> Lab {
        Lab {
            triple: "alpha-unknown-linux-gnu",
            files: &["labperf-agent", "labperf-bench"],
            ..Lab::from_env("LABPERF_ALPHA_LAB_DIR", "target/lab/alpha")
        }
    }

    fn from_env(var: &str, default: &str) -> Lab {
        Lab {
            dir: std::env::var_os(var)
                .map(PathBuf::from)
                .unwrap_or_else(|| root().join(default)),
            triple: "aarch64-unknown-linux-musl",
            files: ARM_FILES,
        }
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The forwarded SSH port, or a panic saying how to boot the machine.
    pub fn port(&self) -> String {
        std::fs::read_to_string(self.dir.join("port"))
            .unwrap_or_else(|_| {
                panic!(
                    "the lab machine of {} is not up: run `cargo xtask lab up aarch64` (with --kernel altperiod for that one), or `cargo xtask lab up alpha`",
                    self.dir.display()
                )
            })
            .trim()
            .to_string()
    }

    /// `root@127.0.0.1:PORT`, as `labperf --host` takes it.
    pub fn host(&self) -> String {
        format!("root@127.0.0.1:{}", self.port())
    }

    /// ssh to the machine, without the command.
    pub fn ssh(&self) -> Command {
        let port = self.port();
        let mut c = Command::new("ssh");
        c.arg("-o").arg(format!(
            "UserKnownHostsFile={}",
            self.dir.join("known_hosts").display()
        ));
        c.args([
            "-o",
            "StrictHostKeyChecking=accept-new",
            "-o",
            "BatchMode=yes",
            "-i",
        ])
        .arg(self.dir.join("id_ed25519"));
        c.args(["-p", &port, "root@127.0.0.1"]);
        c
    }

    /// Runs a shell command there; panics with its stderr if it fails; returns stderr.
    pub fn run(&self, cmd: &str) -> String {
        let o = self.ssh().arg(cmd).output().unwrap();
        assert!(
            o.status.success(),
            "`{cmd}` failed on the lab machine: {}",
            String::from_utf8_lossy(&o.stderr)
        );
        String::from_utf8_lossy(&o.stderr).into_owned()
    }

    /// Runs a shell command there and returns (success, stdout, stderr).
    pub fn output(&self, cmd: &str) -> (bool, String, String) {
        let o = self.ssh().arg(cmd).output().unwrap();
        (
            o.status.success(),
            String::from_utf8_lossy(&o.stdout).into_owned(),
            String::from_utf8_lossy(&o.stderr).into_owned(),
        )
    }

    pub fn upload(&self, local: &Path, remote: &str) {
        // Through a temporary name: a still-running copy would make `cat >` fail with ETXTBSY.
        let st = self
            .ssh()
            .arg(format!(
                "cat > {remote}.tmp && chmod +x {remote}.tmp && mv -f {remote}.tmp {remote}"
            ))
            .stdin(std::fs::File::open(local).unwrap())
            .status()
            .unwrap();
        assert!(st.success());
    }

    pub fn fetch(&self, remote: &str, local: &Path) -> Vec<u8> {
        let o = self
            .ssh()
            .arg(format!("cat {remote}"))
            .stderr(Stdio::inherit())
            .output()
            .unwrap();
        assert!(o.status.success());
        std::fs::write(local, &o.stdout).unwrap();
        o.stdout
    }

    /// Puts the machine's agent and benches in /root, uploading each only when the
    /// machine's copy differs (the machine's tests run one at a time and share one upload:
    /// about 5 MB through the emulated network otherwise); returns their local directory.
    pub fn deploy(&self) -> PathBuf {
        let agents = std::env::var_os("LABPERF_AGENTS_DIR")
            .map(PathBuf::from)
            .unwrap_or_else(|| root().join("target/agents"))
            .join(self.triple);
        let names = self.files;
        let remote: Vec<String> = names.iter().map(|n| format!("/root/{n}")).collect();
        let (_, there, _) = self.output(&format!("sha256sum {} 2>/dev/null", remote.join(" ")));
        let local = Command::new("sha256sum")
            .args(names.iter().map(|n| agents.join(n)))
            .output()
            .unwrap();
        assert!(
            local.status.success(),
            "sha256sum of the {} agents failed",
            self.triple
        );
        let sums = |out: &str| -> Vec<Option<String>> {
            names
                .iter()
                .map(|n| {
                    out.lines().find_map(|l| {
                        let (sum, path) = l.split_once(char::is_whitespace)?;
                        path.trim_start_matches([' ', '*'])
                            .ends_with(&format!("/{n}"))
                            .then(|| sum.to_string())
                    })
                })
                .collect()
        };
        let (have, want) = (sums(&there), sums(&String::from_utf8_lossy(&local.stdout)));
        for (i, n) in names.iter().enumerate() {
            if want[i].is_none() || have[i] != want[i] {
                self.upload(&agents.join(n), &remote[i]);
            }
        }
        agents
    }

    /// `labperf record --host <this machine>` with its key and known_hosts, isolated under `d`.
    pub fn record_host(&self, d: &Path) -> Command {
        let mut c = Command::new(bin("labperf"));
        c.env("HOME", d)
            .env("XDG_CACHE_HOME", d.join("cache"))
            .env_remove("SSH_AUTH_SOCK");
        c.args(["record", "--host", &self.host(), "--identity"]);
        c.arg(self.dir.join("id_ed25519"))
            .arg("--known-hosts")
            .arg(self.dir.join("known_hosts"));
        c
    }

    /// `labperf probe <this machine>`: (success, stdout, stderr).
    pub fn probe(&self, d: &Path) -> (bool, String, String) {
        let o = Command::new(bin("labperf"))
            .env("HOME", d)
            .env_remove("SSH_AUTH_SOCK")
            .args(["probe", &self.host(), "--accept-new-host-key", "--identity"])
            .arg(self.dir.join("id_ed25519"))
            .arg("--known-hosts")
            .arg(self.dir.join("known_hosts"))
            .output()
            .unwrap();
        (
            o.status.success(),
            String::from_utf8_lossy(&o.stdout).into_owned(),
            String::from_utf8_lossy(&o.stderr).into_owned(),
        )
    }
}

/// `labperf record --host … --metrics --no-report` of the bench with `classes` on the lab
/// machine, then a separate `labperf report FILE` with no view option (the header names
/// the metrics view, the binary cache the record filled gives the names); returns the JSON
/// report and the bench's own account of its CPU time. The file is `<scratch name>/m.lpr`.
pub fn metrics_run(
    lab: &Lab,
    name: &str,
    strobe: &str,
    period: &str,
    secs: &str,
    classes: &str,
) -> (serde_json::Value, BenchClock) {
    let (j, out, clock) = metrics_record(
        lab,
        name,
        &["--strobe", strobe, "-c", period],
        secs,
        classes,
    );
    if strobe == "fixed" {
        let t = labperf_common::decode_all(&std::fs::read(&out).unwrap()).trailer;
        assert_eq!(t.unwrap().dropped, 0);
    }
    (j, clock)
}

/// [`metrics_run`] with any record options; returns the JSON report, the file and the
/// bench's own account (its lines come back on `record --host`'s stderr, each prefixed
/// with the machine's name).
pub fn metrics_record(
    lab: &Lab,
    name: &str,
    opts: &[&str],
    secs: &str,
    classes: &str,
) -> (serde_json::Value, PathBuf, BenchClock) {
    lab.deploy();
    let d = crate::scratch(name);
    let out = d.join("m.lpr");
    let o = lab
        .record_host(&d)
        .args(["--accept-new-host-key", "--metrics", "--no-report"])
        .args(opts)
        .arg("-o")
        .arg(&out)
        .args([
            "--",
            "/root/labperf-bench",
            "--duration",
            secs,
            "--classes",
            classes,
        ])
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let clock = BenchClock::parse(&o.stderr);
    // The trailer counts the samples the file holds, whatever the strobing mode (a kept
    // window is two samples); samples + dropped are the samples the kernel gave.
    let dec = labperf_common::decode_all(&std::fs::read(&out).unwrap());
    let in_file = dec
        .records
        .iter()
        .filter(|r| matches!(r, labperf_common::Record::Sample(_)))
        .count() as u64;
    let t = dec.trailer.expect("a complete recording");
    assert_eq!(t.samples, in_file, "{opts:?}: trailer {t:?}");
    assert!(o.stdout.is_empty(), "--no-report prints no report");
    let home = out.parent().unwrap();
    let j = crate::report_json(&out, 0, |c| {
        c.env("HOME", home)
            .env("XDG_CACHE_HOME", home.join("cache"));
    });
    assert_eq!(j["view"], "metrics", "the header names the view");
    (j, out, clock)
}

/// Asserts that each of `names`' share of their instructions (%I) in the metrics report `j`
/// is within `tol` points of its share of their CPU time by the bench's clock: under
/// `-icount` a nanosecond of the guest's CPU time is an instruction.
pub fn assert_instr_split(j: &serde_json::Value, clock: &BenchClock, names: &[&str], tol: f64) {
    let got: std::collections::BTreeMap<String, f64> = names
        .iter()
        .map(|f| (f.to_string(), instr_pct(j, f).max(0.0)))
        .collect();
    crate::assert_split(&got, clock, names, tol);
}

/// A function's %I (share of instructions) in a metrics report (-100 when it has no row).
pub fn instr_pct(j: &serde_json::Value, f: &str) -> f64 {
    j["tables"][0]["rows"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["symbol"] == f)
        .and_then(|r| r["instr_pct"].as_f64())
        .unwrap_or(-100.0)
}
