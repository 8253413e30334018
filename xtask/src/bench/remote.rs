//! `cargo xtask bench`'s lab figures through private sshd instances on 127.0.0.1: the time
//! `labperf record --host` adds to a 1 s workload on a warm host against the manual route
//! (`ssh perf record`, `scp`, `perf report`), and wall time against host count with `--jobs`.

use super::median_secs;
use crate::util::{agents_dir, host_musl, target_dir, Summary};
use anyhow::{bail, Context};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// A private sshd: root by key only; the login shell skips root's .bashrc (`SHLVL=1`), as
/// a lab machine without rc-file work would (this machine's own .bashrc may run pyenv and
/// the like, which every ssh command of either route would pay).
struct Sshd {
    port: u16,
    child: Child,
}

impl Drop for Sshd {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn run(c: &mut Command) -> anyhow::Result<()> {
    let o = c.output().with_context(|| format!("{c:?}"))?;
    if !o.status.success() {
        bail!("{c:?} failed: {}", String::from_utf8_lossy(&o.stderr));
    }
    Ok(())
}

fn keygen(path: &Path) -> anyhow::Result<()> {
    let _ = std::fs::remove_file(path);
    let _ = std::fs::remove_file(path.with_extension("pub"));
    run(Command::new("ssh-keygen")
        .args(["-q", "-t", "ed25519", "-N", "", "-f"])
        .arg(path))
}

fn free_port() -> anyhow::Result<u16> {
    Ok(std::net::TcpListener::bind("127.0.0.1:0")?
        .local_addr()?
        .port())
}

/// Starts sshd number `i` in `dir` (host key, authorized client key already there).
fn sshd(dir: &Path, i: usize) -> anyhow::Result<Sshd> {
    let port = free_port()?;
    let _ = std::fs::create_dir_all("/run/sshd");
    let cfg = dir.join(format!("sshd_config.{i}"));
    std::fs::write(
        &cfg,
        format!(
            "Port {port}\nListenAddress 127.0.0.1\nHostKey {d}/host_key\nPidFile {d}/sshd.{i}.pid\nAuthorizedKeysFile {d}/client_key.pub\nPermitRootLogin prohibit-password\nPasswordAuthentication no\nKbdInteractiveAuthentication no\nUsePAM no\nStrictModes no\nSetEnv SHLVL=1\nMaxStartups 100\n",
            d = dir.display()
        ),
    )?;
    let child = Command::new("/usr/sbin/sshd")
        .args(["-D", "-e", "-f"])
        .arg(&cfg)
        .stderr(Stdio::null())
        .spawn()
        .context("sshd (openssh-server; `cargo xtask setup` installs it)")?;
    let t = Instant::now();
    while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
        if t.elapsed() > Duration::from_secs(10) {
            bail!("sshd did not start");
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    Ok(Sshd { port, child })
}

/// The set-up both figures share: keys, a known_hosts naming every sshd, and `labperf`
/// with a home and cache of its own.
struct Lab {
    dir: PathBuf,
    sshds: Vec<Sshd>,
    labperf: PathBuf,
}

impl Lab {
    fn up(n: usize) -> anyhow::Result<Lab> {
        let dir = target_dir().join("bench/remote");
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(dir.join("home"))?;
        keygen(&dir.join("host_key"))?;
        keygen(&dir.join("client_key"))?;
        let sshds = (0..n)
            .map(|i| sshd(&dir, i))
            .collect::<anyhow::Result<Vec<_>>>()?;
        let key = std::fs::read_to_string(dir.join("host_key.pub"))?;
        let key: Vec<&str> = key.split_whitespace().take(2).collect();
        let known: String = sshds
            .iter()
            .map(|s| format!("[127.0.0.1]:{} {}\n", s.port, key.join(" ")))
            .collect();
        std::fs::write(dir.join("known_hosts"), known)?;
        Ok(Lab {
            dir,
            sshds,
            labperf: target_dir().join("release/labperf"),
        })
    }

    fn labperf(&self) -> Command {
        let mut c = Command::new(&self.labperf);
        c.env("HOME", self.dir.join("home"))
            .env("XDG_CACHE_HOME", self.dir.join("cache"))
            .env_remove("SSH_AUTH_SOCK")
            .stdout(Stdio::null());
        c
    }

    /// OpenSSH client options for sshd `i`, as users have them in ~/.ssh/config.
    fn ssh_opts(&self) -> Vec<String> {
        [
            "-o",
            &format!(
                "UserKnownHostsFile={}",
                self.dir.join("known_hosts").display()
            ),
            "-o",
            "BatchMode=yes",
            "-i",
            &self.dir.join("client_key").display().to_string(),
        ]
        .iter()
        .map(|s| s.to_string())
        .collect()
    }
}

/// What `record --host` adds to a 1 s workload on a warm host, against the manual route.
pub fn overhead(reps: usize, s: &mut Summary) {
    s.step("remote: time record --host adds to a 1 s workload on a warm host, against ssh perf record + scp + perf report (goal <= 0.3 s added)", || {
        let lab = Lab::up(1)?;
        let port = lab.sshds[0].port.to_string();
        let bench = agents_dir(&host_musl()).join("labperf-bench");
        // Both routes run the same program from the same place.
        let workload = lab.dir.join("labperf-bench");
        std::fs::copy(&bench, &workload)?;
        let host = format!("root@127.0.0.1:{port}");
        let ssh = lab.ssh_opts();
        let alone = median_secs(reps, || {
            run(Command::new(&workload).args(["--duration", "1"]))
        })?;
        let ssh_true = median_secs(reps, || {
            run(Command::new("ssh").args(&ssh).args(["-p", &port, "root@127.0.0.1", "true"]))
        })?;
        let out = lab.dir.join("r.lpr");
        let record = || {
            let mut c = lab.labperf();
            c.args(["record", "--host", &host, "--identity"])
                .arg(lab.dir.join("client_key"))
                .arg("--known-hosts")
                .arg(lab.dir.join("known_hosts"))
                .args(["-e", "cpu-clock", "--top", "10", "-o"])
                .arg(&out)
                .arg("--")
                .arg(&workload)
                .args(["--duration", "1"]);
            c
        };
        // Warm: the agent is there and the binary cache holds the workload.
        run(&mut record())?;
        let ours = median_secs(reps, || run(&mut record()))?;
        let remote_data = lab.dir.join("remote.data");
        let local_data = lab.dir.join("local.data");
        let manual = median_secs(reps, || {
            run(Command::new("ssh").args(&ssh).args(["-p", &port, "root@127.0.0.1", "perf", "record", "-q", "-e", "cpu-clock", "-o"]).arg(&remote_data).arg("--").arg(&workload).args(["--duration", "1"]))?;
            run(Command::new("scp").arg("-O").args(&ssh).args(["-q", "-P", &port]).arg(format!("root@127.0.0.1:{}", remote_data.display())).arg(&local_data))?;
            run(Command::new("perf").args(["report", "--stdio", "-i"]).arg(&local_data).stdout(Stdio::null()))
        })?;
        let (added, manual_added) = (ours - alone, manual - alone);
        let line = format!(
            "workload alone {alone:.2} s; labperf record --host {ours:.2} s (adds {added:.2} s); manual ssh perf record + scp + perf report {manual:.2} s (adds {manual_added:.2} s); one `ssh true` {ssh_true:.2} s; median of {reps}"
        );
        println!("BENCH remote: {line}");
        if added > 0.3 {
            bail!("{line}: labperf adds more than 0.3 s");
        }
        Ok(line)
    });
}

/// Wall time of `record --host` over 8, 16 and 32 host names (4 sshd, `--jobs 8`), each
/// running a 1 s workload: waves of 8, so time should follow hosts / jobs.
pub fn scale(s: &mut Summary) {
    s.step("remote: wall time against host count, 4 sshd, --jobs 8, a 1 s workload (target: grows no faster than hosts / jobs)", || {
        let lab = Lab::up(4)?;
        let mut hosts = String::new();
        for i in 0..32 {
            hosts.push_str(&format!(
                "[hosts.h{i:02}]\naddress = \"root@127.0.0.1:{}\"\nidentity = \"client_key\"\nknown_hosts = \"known_hosts\"\nremote_dir = \"{}\"\n",
                lab.sshds[i % 4].port,
                lab.dir.join(format!("remote-{}", i % 4)).display()
            ));
        }
        let file = lab.dir.join("hosts.toml");
        std::fs::write(&file, hosts)?;
        let go = |n: usize| {
            let names: Vec<String> = (0..n).map(|i| format!("h{i:02}")).collect();
            run(lab
                .labperf()
                .arg("record")
                .arg("--hosts-file")
                .arg(&file)
                .args(["--host", &names.join(","), "--jobs", "8", "-e", "cpu-clock", "--no-report", "-o"])
                .arg(lab.dir.join("scale.lpr"))
                .args(["--", "/bin/sleep", "1"]))
        };
        // The agents go up once (one per remote directory).
        go(4)?;
        let mut walls = Vec::new();
        for n in [8, 16, 32] {
            let t = Instant::now();
            go(n)?;
            walls.push((n, t.elapsed().as_secs_f64()));
        }
        let base = walls[0].1;
        let parts: Vec<String> = walls
            .iter()
            .map(|(n, w)| format!("{n} hosts {w:.2} s ({:.2}x of 8 hosts; hosts/jobs {})", w / base, n / 8))
            .collect();
        let line = parts.join("; ");
        println!("BENCH remote-scale: {line}");
        if let Some((n, w)) = walls.iter().find(|(n, w)| w / base > (*n as f64 / 8.0) * 1.1) {
            bail!("{line}: {n} hosts took {:.2}x of 8 hosts' time, more than hosts/jobs", w / base);
        }
        Ok(line)
    });
}
