//! `cargo xtask lab up|down|ssh alpha`: an emulated Alpha lab machine with a real Alpha
//! kernel.
//!
//! `qemu-system-alpha -M clipper` (one EV67, 256 MiB, QEMU's PALcode) boots the 6.1 kernel
//! of [`KERNEL`] (Debian's `linux-source-6.1`, `xtask/kernel/alpha/`'s three build fixes and
//! config) with an initramfs of Debian's busybox and dropbear, both cross-built for Alpha
//! from Debian's source packages (`apt-get source`, cached per user by [`super::cache`]),
//! with the cross C library's shared objects, the lab's SSH key, and the static C agent
//! and bench in `/root`. The NIC is an e1000 on QEMU's user-mode network, its SSH port
//! forwarded to a local one.
//!
//! Busybox and dropbear link the C library dynamically: Debian's glibc 2.36 for Alpha makes
//! static programs that die with SIGSEGV before `main` (the thread pointer reads 0 in
//! `__ctype_init`, on this kernel and under qemu-alpha alike), dynamic ones run.

mod userland;

use super::kernel::{self, Recipe};
use crate::util::{agents_dir, target_dir};
use anyhow::{bail, Context};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};
use xshell::{cmd, Shell};

/// The Alpha lab kernel: tinyconfig plus what clipper, the init, dropbear and the agent need.
pub const KERNEL: Recipe = Recipe {
    name: "alpha",
    arch: "alpha",
    cross: "alpha-linux-gnu-",
    patch: "alpha.patch",
    target: "vmlinux",
    built: "vmlinux",
    file: "vmlinux",
    about: "about 14 min",
};

/// The Alpha C agent's and bench's directory name under target/agents.
const AGENTS: &str = crate::build_agents::ALPHA;
/// The cross C library's shared objects busybox and dropbear load, and where they are.
const LIBS: &[&str] = &["ld-linux.so.2", "libc.so.6.1", "libresolv.so.2.1"];
const LIB_DIR: &str = "/usr/alpha-linux-gnu/lib";

pub fn dir() -> PathBuf {
    target_dir().join("lab/alpha")
}

pub const DEFAULT_PORT: u16 = 10024;

const INIT: &str = r#"#!/bin/busybox sh
/bin/busybox --install -s /bin
export PATH=/bin:/usr/sbin
mkdir -p /proc /sys /dev /tmp /run /var/log /etc/dropbear
mount -t proc proc /proc
mount -t sysfs sysfs /sys
mount -t devtmpfs devtmpfs /dev
mkdir -p /dev/pts && mount -t devpts devpts /dev/pts
mount -t tmpfs tmpfs /tmp
ip link set lo up
ip link set eth0 up
ip addr add 10.0.2.15/24 dev eth0
ip route add default via 10.0.2.2
hostname labalpha
/usr/sbin/dropbear -R -p 22
echo "labperf-lab: ready"
while true; do sleep 3600; done
"#;

/// Writes `d/initrd.gz`: busybox, dropbear and their C library, the init, the lab's key,
/// the agent and bench.
fn build_image(sh: &Shell, d: &Path, userland: &Path) -> anyhow::Result<()> {
    let agents = agents_dir(AGENTS);
    if !agents.join("labperf-agent").is_file() || !agents.join("labperf-bench").is_file() {
        crate::build_agents::build_c("alpha-linux-gnu-gcc", "arch_alpha.c", AGENTS)?;
    }
    let root = d.join("root");
    let _ = std::fs::remove_dir_all(&root);
    for sub in ["bin", "lib", "usr/sbin", "etc", "root/.ssh"] {
        std::fs::create_dir_all(root.join(sub))?;
    }
    for lib in LIBS {
        std::fs::copy(Path::new(LIB_DIR).join(lib), root.join("lib").join(lib)).with_context(
            || format!("{LIB_DIR}/{lib} is missing: run `cargo xtask setup --for lab`"),
        )?;
    }
    std::fs::copy(userland.join("busybox"), root.join("bin/busybox"))?;
    std::fs::copy(userland.join("dropbear"), root.join("usr/sbin/dropbear"))?;
    for f in ["labperf-agent", "labperf-bench"] {
        std::fs::copy(agents.join(f), root.join("root").join(f))?;
    }
    super::authorize_key(sh, d, &root)?;
    std::fs::write(root.join("etc/passwd"), "root:x:0:0:root:/root:/bin/sh\n")?;
    std::fs::write(root.join("etc/group"), "root:x:0:\n")?;
    std::fs::write(root.join("etc/shells"), "/bin/sh\n")?;
    std::fs::write(root.join("init"), INIT)?;
    cmd!(
        sh,
        "chmod 755 {root}/init {root}/bin/busybox {root}/usr/sbin/dropbear"
    )
    .run()?;
    super::pack_initrd(sh, d, &root)
}

/// Whether the Alpha machine is running.
pub fn is_up() -> bool {
    super::running(&dir()).is_some()
}

/// Boots the Alpha machine (building its kernel and userland first, once per user).
pub fn up(port: Option<u16>) -> anyhow::Result<String> {
    let port = port.unwrap_or(DEFAULT_PORT);
    let sh = Shell::new()?;
    let d = dir();
    std::fs::create_dir_all(&d)?;
    if let Some(pid) = super::running(&d) {
        return Ok(format!("already up (qemu pid {pid})"));
    }
    let kernel = kernel::image(&sh, &KERNEL)?;
    let userland = userland::build(&sh)?;
    build_image(&sh, &d, &userland)?;
    let _ = std::fs::remove_file(d.join("known_hosts"));
    let serial = d.join("serial.log");
    let _ = std::fs::remove_file(&serial);
    let (initrd, pidfile) = (d.join("initrd.gz"), d.join("qemu.pid"));
    let fwd = format!("user,id=n0,hostfwd=tcp:127.0.0.1:{port}-:22");
    let serial_arg = format!("file:{}", serial.display());
    let append = "console=ttyS0 rdinit=/init";
    // No option ROM for the NIC: Alpha's PALcode runs none, and QEMU would want iPXE's.
    let nic = "e1000,netdev=n0,romfile=";
    let t = Instant::now();
    cmd!(sh, "qemu-system-alpha -M clipper -m 256 -vga none -display none -serial {serial_arg} -kernel {kernel} -initrd {initrd} -append {append} -netdev {fwd} -device {nic} -daemonize -pidfile {pidfile}")
        .run()
        .with_context(|| format!("qemu-system-alpha did not start (is port {port} free? pass --port)"))?;
    std::fs::write(d.join("port"), port.to_string())?;
    loop {
        let ready = std::fs::read_to_string(&serial)
            .unwrap_or_default()
            .contains("labperf-lab: ready");
        if ready {
            let args = super::ssh_args_in(&d, "alpha")?;
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
                "the Alpha lab machine did not come up within 180 s; see {}",
                serial.display()
            );
        }
        std::thread::sleep(Duration::from_millis(250));
    }
    Ok(format!(
        "up in {:.1} s: `cargo xtask lab ssh alpha`, or ssh -i {} -p {port} root@127.0.0.1",
        t.elapsed().as_secs_f64(),
        d.join("id_ed25519").display()
    ))
}

pub fn down() -> anyhow::Result<String> {
    super::stop(&dir())
}
