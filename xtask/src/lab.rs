//! `cargo xtask lab up|down|ssh aarch64`: an emulated Arm lab machine with a real PMU.
//!
//! The image is built from Debian's arm64 packages (kernel, busybox-static, dropbear and
//! its libraries), cached under `target/lab/aarch64/`, and booted with
//! `qemu-system-aarch64 -M virt -cpu max -icount shift=0`: the PMU (`armv8_pmuv3`) counts
//! for real and, under `-icount`, cycles equal instructions exactly.

use crate::util::{is_root, target_dir, Summary};
use anyhow::{bail, Context};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};
use xshell::{cmd, Shell};

#[derive(clap::Args)]
pub struct Args {
    #[command(subcommand)]
    pub action: Action,
}

#[derive(clap::Subcommand)]
pub enum Action {
    /// Build (once) and boot the lab machine; prints how to reach it.
    Up {
        /// Which machine (only aarch64 is emulated).
        #[arg(default_value = "aarch64")]
        machine: String,
        /// Local port forwarded to its SSH server.
        #[arg(long, default_value_t = 10022)]
        port: u16,
    },
    /// Stop the lab machine.
    Down {
        #[arg(default_value = "aarch64")]
        machine: String,
    },
    /// Open a shell on the lab machine, or run a command there.
    Ssh {
        #[arg(default_value = "aarch64")]
        machine: String,
        /// The command to run (after --).
        #[arg(last = true)]
        command: Vec<String>,
    },
}

/// Debian arm64 packages the image is made of (the kernel is found by name).
const PACKAGES: &[&str] = &[
    "busybox-static:arm64",
    "dropbear-bin:arm64",
    "libc6:arm64",
    "libcrypt1:arm64",
    "libtomcrypt1:arm64",
    "libtommath1:arm64",
    "libgmp10:arm64",
    "zlib1g:arm64",
];
const MODULES: &[&str] = &[
    "net/core/failover",
    "drivers/net/net_failover",
    "drivers/virtio/virtio_mmio",
    "drivers/net/virtio_net",
];

const INIT: &str = r#"#!/bin/busybox sh
/bin/busybox --install -s /bin
export PATH=/bin:/usr/bin:/usr/sbin
mkdir -p /proc /sys /dev /tmp /run /var/log /etc/dropbear
mount -t proc proc /proc
mount -t sysfs sysfs /sys
mount -t devtmpfs devtmpfs /dev
mkdir -p /dev/pts && mount -t devpts devpts /dev/pts
mount -t tmpfs tmpfs /tmp
for m in failover net_failover virtio_mmio virtio_net; do insmod /lib/modules/$m.ko; done
ip link set lo up
ip link set eth0 up
ip addr add 10.0.2.15/24 dev eth0
ip route add default via 10.0.2.2
hostname labarm
/usr/sbin/dropbear -R -E -p 22
echo "labperf-lab: ready"
while true; do sleep 3600; done
"#;

pub fn dir() -> PathBuf {
    target_dir().join("lab/aarch64")
}

/// The ssh command line for the running lab machine.
pub fn ssh_args() -> anyhow::Result<Vec<String>> {
    let d = dir();
    let port = std::fs::read_to_string(d.join("port"))
        .context("the lab is not up: run `cargo xtask lab up aarch64`")?;
    Ok(vec![
        "-o".into(),
        format!("UserKnownHostsFile={}", d.join("known_hosts").display()),
        "-o".into(),
        "StrictHostKeyChecking=accept-new".into(),
        "-o".into(),
        "BatchMode=yes".into(),
        "-o".into(),
        "ConnectTimeout=5".into(),
        "-i".into(),
        d.join("id_ed25519").display().to_string(),
        "-p".into(),
        port.trim().to_string(),
        "root@127.0.0.1".into(),
    ])
}

/// The image is made of arm64 packages: dpkg must know the arm64 architecture. The
/// programs it runs (qemu-system-aarch64, cpio, ssh, ...) come from `cargo xtask setup`.
fn ensure_arm64(sh: &Shell) -> anyhow::Result<()> {
    let foreign = cmd!(sh, "dpkg --print-foreign-architectures").read()?;
    if !foreign.lines().any(|l| l.trim() == "arm64") {
        if !is_root() {
            bail!("not root: run `sudo dpkg --add-architecture arm64 && sudo apt-get update`");
        }
        cmd!(sh, "dpkg --add-architecture arm64").run()?;
        cmd!(sh, "apt-get update -qq").run()?;
    }
    Ok(())
}

/// Downloads and unpacks the packages, then writes `vmlinuz` and `initrd.gz`.
fn build_image(sh: &Shell, d: &Path) -> anyhow::Result<()> {
    if d.join("initrd.gz").is_file() && d.join("vmlinuz").is_file() {
        return Ok(());
    }
    let debs = d.join("debs");
    std::fs::create_dir_all(&debs)?;
    let kernels = cmd!(
        sh,
        "apt-cache search --names-only ^linux-image-6\\.1\\.0-[0-9]+-arm64-unsigned$"
    )
    .read()?;
    let mut names: Vec<&str> = kernels
        .lines()
        .filter_map(|l| l.split_whitespace().next())
        .collect();
    names.sort_by_key(|n| {
        n.split('-')
            .nth(4)
            .and_then(|v| v.parse::<u32>().ok())
            .unwrap_or(0)
    });
    let kernel = names.last().context("no linux-image-6.1.0-*-arm64-unsigned in the apt lists (is arm64 added and `apt-get update` run?)")?;
    let kernel_pkg = format!("{kernel}:arm64");
    sh.change_dir(&debs);
    cmd!(sh, "apt-get download {kernel_pkg} {PACKAGES...}")
        .run()
        .context("apt-get download of the arm64 packages failed")?;
    let x = d.join("x");
    let _ = std::fs::remove_dir_all(&x);
    for deb in std::fs::read_dir(&debs)?.flatten() {
        let p = deb.path();
        cmd!(sh, "dpkg-deb -x {p} {x}").run()?;
    }
    let release = std::fs::read_dir(x.join("lib/modules"))?
        .flatten()
        .next()
        .context("the kernel package has no modules")?
        .file_name()
        .to_string_lossy()
        .into_owned();
    let root = d.join("root");
    let _ = std::fs::remove_dir_all(&root);
    for sub in [
        "bin",
        "lib/modules",
        "usr/sbin",
        "usr/bin",
        "etc",
        "root/.ssh",
    ] {
        std::fs::create_dir_all(root.join(sub))?;
    }
    std::fs::copy(x.join("bin/busybox"), root.join("bin/busybox"))?;
    cmd!(sh, "cp -a {x}/lib/aarch64-linux-gnu {root}/lib/").run()?;
    cmd!(sh, "cp -a {x}/lib/ld-linux-aarch64.so.1 {root}/lib/").run()?;
    let (libs, libs_to) = (
        x.join("usr/lib/aarch64-linux-gnu/."),
        root.join("lib/aarch64-linux-gnu/"),
    );
    cmd!(sh, "cp -a {libs} {libs_to}").run()?;
    std::fs::copy(x.join("usr/sbin/dropbear"), root.join("usr/sbin/dropbear"))?;
    std::fs::copy(
        x.join("usr/bin/dropbearkey"),
        root.join("usr/bin/dropbearkey"),
    )?;
    for m in MODULES {
        let name = m.rsplit('/').next().unwrap_or(m);
        std::fs::copy(
            x.join(format!("lib/modules/{release}/kernel/{m}.ko")),
            root.join(format!("lib/modules/{name}.ko")),
        )
        .with_context(|| format!("module {m} missing from {release}"))?;
    }
    let key = d.join("id_ed25519");
    if !key.is_file() {
        let no_passphrase = "";
        cmd!(
            sh,
            "ssh-keygen -q -t ed25519 -N {no_passphrase} -C labperf-lab -f {key}"
        )
        .run()?;
    }
    std::fs::copy(
        d.join("id_ed25519.pub"),
        root.join("root/.ssh/authorized_keys"),
    )?;
    cmd!(sh, "chmod 700 {root}/root/.ssh").run()?;
    cmd!(sh, "chmod 600 {root}/root/.ssh/authorized_keys").run()?;
    std::fs::write(root.join("etc/passwd"), "root:x:0:0:root:/root:/bin/sh\n")?;
    std::fs::write(root.join("etc/group"), "root:x:0:\n")?;
    std::fs::write(root.join("etc/shells"), "/bin/sh\n")?;
    std::fs::write(root.join("init"), INIT)?;
    cmd!(sh, "chmod 755 {root}/init").run()?;
    sh.change_dir(&root);
    // find | cpio > initrd, then gzip it: the file list in sorted order for a stable image.
    let list = cmd!(sh, "find .").read()?;
    let mut names: Vec<&str> = list.lines().collect();
    names.sort_unstable();
    let cpio_out = d.join("initrd");
    let mut cpio = std::process::Command::new("cpio")
        .args(["-o", "-H", "newc", "--quiet"])
        .current_dir(&root)
        .stdin(std::process::Stdio::piped())
        .stdout(std::fs::File::create(&cpio_out)?)
        .spawn()
        .context("cannot run cpio")?;
    {
        use std::io::Write;
        let mut stdin = cpio.stdin.take().context("cpio's stdin")?;
        stdin.write_all(names.join("\n").as_bytes())?;
        stdin.write_all(b"\n")?;
    }
    if !cpio.wait()?.success() {
        bail!("cpio failed to pack {}", root.display());
    }
    cmd!(sh, "gzip -1 -f {cpio_out}").run()?;
    std::fs::copy(x.join(format!("boot/vmlinuz-{release}")), d.join("vmlinuz"))?;
    std::fs::write(d.join("kernel-release"), &release)?;
    Ok(())
}

fn running(d: &Path) -> Option<u32> {
    let pid: u32 = std::fs::read_to_string(d.join("qemu.pid"))
        .ok()?
        .trim()
        .parse()
        .ok()?;
    Path::new(&format!("/proc/{pid}")).exists().then_some(pid)
}

/// Whether the lab machine is running.
pub fn is_up() -> bool {
    running(&dir()).is_some()
}

pub fn up(port: u16) -> anyhow::Result<String> {
    let sh = Shell::new()?;
    ensure_arm64(&sh)?;
    let d = dir();
    std::fs::create_dir_all(&d)?;
    if let Some(pid) = running(&d) {
        return Ok(format!("already up (qemu pid {pid})"));
    }
    build_image(&sh, &d)?;
    let _ = std::fs::remove_file(d.join("known_hosts"));
    let serial = d.join("serial.log");
    let _ = std::fs::remove_file(&serial);
    let (kernel, initrd, pidfile) = (d.join("vmlinuz"), d.join("initrd.gz"), d.join("qemu.pid"));
    let fwd = format!("user,id=n0,hostfwd=tcp:127.0.0.1:{port}-:22");
    let serial_arg = format!("file:{}", serial.display());
    let append = "console=ttyAMA0 rdinit=/init quiet";
    cmd!(sh, "qemu-system-aarch64 -M virt -cpu max -icount shift=0 -m 1024 -smp 1 -display none -serial {serial_arg} -kernel {kernel} -initrd {initrd} -append {append} -netdev {fwd} -device virtio-net-device,netdev=n0 -daemonize -pidfile {pidfile}")
        .run()
        .with_context(|| format!("qemu-system-aarch64 did not start (is port {port} free? pass --port)"))?;
    std::fs::write(d.join("port"), port.to_string())?;
    let t = Instant::now();
    loop {
        let ready = std::fs::read_to_string(&serial)
            .unwrap_or_default()
            .contains("labperf-lab: ready");
        if ready {
            let args = ssh_args()?;
            if cmd!(sh, "ssh {args...} true")
                .quiet()
                .ignore_stderr()
                .run()
                .is_ok()
            {
                break;
            }
        }
        if t.elapsed() > Duration::from_secs(180) {
            bail!(
                "the lab machine did not come up within 180 s; see {}",
                serial.display()
            );
        }
        std::thread::sleep(Duration::from_millis(500));
    }
    Ok(format!(
        "up in {:.0} s: `cargo xtask lab ssh aarch64`, or ssh -i {} -p {port} root@127.0.0.1",
        t.elapsed().as_secs_f64(),
        d.join("id_ed25519").display()
    ))
}

pub fn down() -> anyhow::Result<String> {
    let d = dir();
    match running(&d) {
        Some(pid) => {
            let sh = Shell::new()?;
            let p = pid.to_string();
            cmd!(sh, "kill {p}").run()?;
            let _ = std::fs::remove_file(d.join("qemu.pid"));
            let _ = std::fs::remove_file(d.join("port"));
            Ok(format!("stopped qemu pid {pid}"))
        }
        None => Ok("was not running".into()),
    }
}

pub fn run(a: &Args, s: &mut Summary) {
    match &a.action {
        Action::Up { machine, port } => {
            s.step(&format!("lab up {machine}"), || {
                if machine != "aarch64" {
                    bail!("only the aarch64 lab machine is emulated (x86_64 is this machine; Alpha runs its agent under qemu-alpha)");
                }
                up(*port)
            });
        }
        Action::Down { .. } => {
            s.step("lab down", down);
        }
        Action::Ssh { command, .. } => {
            s.step("lab ssh", || {
                let mut c = std::process::Command::new("ssh");
                c.args(ssh_args()?);
                if command.is_empty() {
                    c.arg("-t");
                }
                c.args(command);
                let st = c.status()?;
                if !st.success() {
                    bail!("ssh exited with {st}");
                }
                Ok(String::new())
            });
        }
    }
}
