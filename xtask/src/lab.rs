//! `cargo xtask lab up|down|ssh aarch64 [--kernel debian|altperiod]`: an emulated Arm lab
//! machine with a real PMU.
//!
//! The image is built from Debian's arm64 packages (kernel, busybox-static, dropbear and
//! its libraries), cached under `target/lab/aarch64/`, and booted with
//! `qemu-system-aarch64 -M virt -cpu max -icount shift=0`: the PMU (`armv8_pmuv3`) counts
//! for real and, under `-icount`, cycles equal instructions exactly. `--kernel altperiod`
//! boots the same initramfs on the patched kernel of [`kernel`] (alternating sample
//! periods), as a second machine with its own directory and port. `lab up alpha` boots
//! the emulated Alpha machine of [`alpha`].

pub mod alpha;
mod cache;
mod kernel;

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
        /// Which machine: aarch64 or alpha (x86_64 is this machine).
        #[arg(default_value = "aarch64")]
        machine: String,
        /// Local port forwarded to its SSH server [default: 10022, altperiod 10023, alpha 10024].
        #[arg(long)]
        port: Option<u16>,
        #[arg(long, value_enum, default_value_t)]
        kernel: Kernel,
    },
    /// Stop the lab machine.
    Down {
        #[arg(default_value = "aarch64")]
        machine: String,
        #[arg(long, value_enum, default_value_t)]
        kernel: Kernel,
    },
    /// Open a shell on the lab machine, or run a command there.
    Ssh {
        #[arg(default_value = "aarch64")]
        machine: String,
        #[arg(long, value_enum, default_value_t)]
        kernel: Kernel,
        /// The command to run (after --).
        #[arg(last = true)]
        command: Vec<String>,
    },
}

/// The lab machine's kernel: each is a machine of its own (directory, port), both booting
/// the same initramfs.
#[derive(clap::ValueEnum, Clone, Copy, Default, PartialEq, Eq, Debug)]
pub enum Kernel {
    /// Debian's arm64 kernel package (6.1: no alternating sample periods).
    #[default]
    Debian,
    /// Debian's linux-source-6.1 with xtask/kernel/altperiod/'s patch: seed 004's
    /// alternating sample periods (RFC v2), built once (about 4 min) and cached.
    Altperiod,
}

impl Kernel {
    pub fn dir(self) -> PathBuf {
        match self {
            Kernel::Debian => target_dir().join("lab/aarch64"),
            Kernel::Altperiod => target_dir().join("lab/aarch64-altperiod"),
        }
    }

    pub fn default_port(self) -> u16 {
        match self {
            Kernel::Debian => 10022,
            Kernel::Altperiod => 10023,
        }
    }
}

/// The altperiod kernel: arm64 tinyconfig plus `xtask/kernel/altperiod/`.
const ALTPERIOD: kernel::Recipe = kernel::Recipe {
    name: "altperiod",
    arch: "arm64",
    cross: "aarch64-linux-gnu-",
    patch: "altperiod.patch",
    target: "Image",
    built: "arch/arm64/boot/Image",
    file: "Image",
    about: "about 4 min",
};

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
# Debian's kernel has virtio as modules; the altperiod kernel has them built in (no modules).
if [ -e /proc/modules ]; then
  for m in failover net_failover virtio_mmio virtio_net; do insmod /lib/modules/$m.ko; done
fi
ip link set lo up
ip link set eth0 up
ip addr add 10.0.2.15/24 dev eth0
ip route add default via 10.0.2.2
hostname labarm
/usr/sbin/dropbear -R -E -p 22
echo "labperf-lab: ready"
while true; do sleep 3600; done
"#;

/// The ssh command line for the running lab machine.
pub fn ssh_args(k: Kernel) -> anyhow::Result<Vec<String>> {
    ssh_args_in(&k.dir(), &format!("aarch64 --kernel {}", k.name()))
}

/// The ssh command line for the lab machine of directory `d` (`lab up {up}` boots it).
fn ssh_args_in(d: &Path, up: &str) -> anyhow::Result<Vec<String>> {
    let port = std::fs::read_to_string(d.join("port"))
        .with_context(|| format!("the lab is not up: run `cargo xtask lab up {up}`"))?;
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
    // Rebuilt when the init script changed.
    let same_init = std::fs::read_to_string(d.join("root/init")).is_ok_and(|i| i == INIT);
    if d.join("initrd.gz").is_file() && d.join("vmlinuz").is_file() && same_init {
        return Ok(());
    }
    let x = unpack_packages(sh, d)?;
    let release = std::fs::read_dir(x.join("lib/modules"))?
        .flatten()
        .next()
        .context("the kernel package has no modules")?
        .file_name()
        .to_string_lossy()
        .into_owned();
    let root = d.join("root");
    let _ = std::fs::remove_dir_all(&root);
    fill_root(sh, &x, &root, &release)?;
    authorize_key(sh, d, &root)?;
    write_etc(sh, &root)?;
    pack_initrd(sh, d, &root)?;
    std::fs::copy(x.join(format!("boot/vmlinuz-{release}")), d.join("vmlinuz"))?;
    std::fs::write(d.join("kernel-release"), &release)?;
    Ok(())
}

/// Downloads the newest 6.1 arm64 kernel and [`PACKAGES`] into `d/debs` and unpacks them
/// all into `d/x`, which it returns.
fn unpack_packages(sh: &Shell, d: &Path) -> anyhow::Result<PathBuf> {
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
    Ok(x)
}

/// Copies into the image's `root` what it runs from the unpacked packages `x`: busybox,
/// the C libraries, dropbear and the kernel modules of `release`.
fn fill_root(sh: &Shell, x: &Path, root: &Path, release: &str) -> anyhow::Result<()> {
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
    Ok(())
}

/// Makes the lab's SSH key `d/id_ed25519` (once) and lets it log in as root in the image.
fn authorize_key(sh: &Shell, d: &Path, root: &Path) -> anyhow::Result<()> {
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
    Ok(())
}

/// Writes the image's user database and its init script.
fn write_etc(sh: &Shell, root: &Path) -> anyhow::Result<()> {
    std::fs::write(root.join("etc/passwd"), "root:x:0:0:root:/root:/bin/sh\n")?;
    std::fs::write(root.join("etc/group"), "root:x:0:\n")?;
    std::fs::write(root.join("etc/shells"), "/bin/sh\n")?;
    std::fs::write(root.join("init"), INIT)?;
    cmd!(sh, "chmod 755 {root}/init").run()?;
    Ok(())
}

/// Packs `root` into `d/initrd.gz`.
fn pack_initrd(sh: &Shell, d: &Path, root: &Path) -> anyhow::Result<()> {
    sh.change_dir(root);
    // find | cpio > initrd, then gzip it: the file list in sorted order for a stable image.
    let list = cmd!(sh, "find .").read()?;
    let mut names: Vec<&str> = list.lines().collect();
    names.sort_unstable();
    let cpio_out = d.join("initrd");
    let mut cpio = std::process::Command::new("cpio")
        .args(["-o", "-H", "newc", "--quiet"])
        .current_dir(root)
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

impl Kernel {
    pub fn name(self) -> &'static str {
        match self {
            Kernel::Debian => "debian",
            Kernel::Altperiod => "altperiod",
        }
    }
}

/// Whether the lab machine is running.
pub fn is_up(k: Kernel) -> bool {
    running(&k.dir()).is_some()
}

/// Boots the lab machine with kernel `k` (building what it needs first).
pub fn up(k: Kernel, port: Option<u16>) -> anyhow::Result<String> {
    let port = port.unwrap_or(k.default_port());
    let sh = Shell::new()?;
    ensure_arm64(&sh)?;
    let d = k.dir();
    std::fs::create_dir_all(&d)?;
    if let Some(pid) = running(&d) {
        return Ok(format!("already up (qemu pid {pid})"));
    }
    // The initramfs and the SSH key are Debian's machine's, shared by both kernels.
    let base = Kernel::Debian.dir();
    std::fs::create_dir_all(&base)?;
    build_image(&sh, &base)?;
    let kernel = match k {
        Kernel::Debian => base.join("vmlinuz"),
        Kernel::Altperiod => {
            for f in ["id_ed25519", "id_ed25519.pub"] {
                std::fs::copy(base.join(f), d.join(f))?;
            }
            kernel::image(&sh, &ALTPERIOD)?
        }
    };
    let _ = std::fs::remove_file(d.join("known_hosts"));
    let serial = d.join("serial.log");
    let _ = std::fs::remove_file(&serial);
    let (initrd, pidfile) = (base.join("initrd.gz"), d.join("qemu.pid"));
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
            let args = ssh_args(k)?;
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
        "up in {:.0} s: `cargo xtask lab ssh aarch64 --kernel {}`, or ssh -i {} -p {port} root@127.0.0.1",
        t.elapsed().as_secs_f64(),
        k.name(),
        d.join("id_ed25519").display()
    ))
}

pub fn down(k: Kernel) -> anyhow::Result<String> {
    stop(&k.dir())
}

/// Stops the qemu of the lab machine of directory `d`.
fn stop(d: &Path) -> anyhow::Result<String> {
    match running(d) {
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
        Action::Up {
            machine,
            port,
            kernel,
        } => {
            if machine == "alpha" {
                s.step("lab up alpha", || alpha::up(*port));
                return;
            }
            s.step(&format!("lab up {machine} --kernel {}", kernel.name()), || {
                if machine != "aarch64" {
                    bail!("the emulated lab machines are aarch64 and alpha (x86_64 is this machine)");
                }
                up(*kernel, *port)
            });
        }
        Action::Down { machine, kernel } => {
            if machine == "alpha" {
                s.step("lab down alpha", alpha::down);
                return;
            }
            s.step(&format!("lab down --kernel {}", kernel.name()), || {
                down(*kernel)
            });
        }
        Action::Ssh {
            command,
            kernel,
            machine,
        } => {
            s.step("lab ssh", || {
                let mut c = std::process::Command::new("ssh");
                if machine == "alpha" {
                    c.args(ssh_args_in(&alpha::dir(), "alpha")?);
                } else {
                    c.args(ssh_args(*kernel)?);
                }
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
