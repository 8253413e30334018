//! A network namespace of its own for a test: a machine the test cannot reach itself but
//! through a veth pair to one address (`ip netns`, `ip link`; the tests run as root).

use std::net::TcpListener;
use std::process::Command;

/// A network namespace `name` with its loopback up and a veth pair: `host_addr` on this
/// side, `ns_addr` inside (a /30 of 10.0.0.0/8 no interface here uses). Removed on drop.
pub struct Netns {
    pub name: String,
    pub host_addr: String,
    pub ns_addr: String,
    veth: String,
}

fn ip(args: &[&str]) -> Result<(), String> {
    let o = Command::new("ip")
        .args(args)
        .output()
        .map_err(|e| format!("ip (iproute2, installed by `cargo xtask setup`): {e}"))?;
    if o.status.success() {
        Ok(())
    } else {
        Err(format!(
            "ip {}: {}",
            args.join(" "),
            String::from_utf8_lossy(&o.stderr).trim()
        ))
    }
}

impl Netns {
    /// A fresh namespace (its name unique to this process and call); panics with the
    /// reason when `ip netns` cannot make one.
    pub fn new() -> Netns {
        static N: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
        let n = N.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let pid = std::process::id();
        let used = Command::new("ip")
            .args(["-o", "addr", "show"])
            .output()
            .map(|o| String::from_utf8_lossy(&o.stdout).into_owned())
            .expect("ip (iproute2, installed by `cargo xtask setup`)");
        // 64 /30 subnets per /24, over 10.100.0.0 to 10.163.255.255.
        let mut slot = (pid as usize * 7 + n as usize * 13) % 4096;
        let (host_addr, ns_addr) = loop {
            let (a, b) = (100 + slot / 64, (slot % 64) * 4);
            let h = format!("10.{a}.{b}.{}", b + 1);
            if !used.contains(&format!("inet {h}/")) {
                break (h, format!("10.{a}.{b}.{}", b + 2));
            }
            slot = (slot + 1) % 4096;
        };
        // Interface names have at most 15 bytes.
        let tag = format!("{:x}x{n}", pid);
        let ns = Netns {
            name: format!("labperf-{tag}"),
            host_addr,
            ns_addr,
            veth: format!("lpv{tag}"),
        };
        let peer = format!("lpp{tag}");
        let steps: Vec<Vec<&str>> = vec![
            vec!["netns", "add", &ns.name],
            vec!["-n", &ns.name, "link", "set", "lo", "up"],
            vec![
                "link", "add", &ns.veth, "type", "veth", "peer", "name", &peer, "netns", &ns.name,
            ],
        ];
        for s in steps {
            ip(&s).unwrap_or_else(|e| panic!("a network namespace for the test: {e}"));
        }
        let host_cidr = format!("{}/30", ns.host_addr);
        let ns_cidr = format!("{}/30", ns.ns_addr);
        for s in [
            vec!["addr", "add", &host_cidr, "dev", &ns.veth],
            vec!["link", "set", &ns.veth, "up"],
            vec!["-n", &ns.name, "addr", "add", &ns_cidr, "dev", &peer],
            vec!["-n", &ns.name, "link", "set", &peer, "up"],
        ] {
            ip(&s).unwrap_or_else(|e| panic!("a network namespace for the test: {e}"));
        }
        ns
    }

    /// A TCP listener bound inside the namespace (made on a thread that entered it; the
    /// socket stays the namespace's wherever it is used).
    pub fn listen(&self, addr: &str) -> TcpListener {
        let path = format!("/var/run/netns/{}", self.name);
        let addr = addr.to_string();
        std::thread::spawn(move || {
            use std::os::fd::AsRawFd;
            let f = std::fs::File::open(&path).expect("the namespace's file");
            // SAFETY: this thread's own network namespace changes, to a namespace file we hold open.
            let r = unsafe { libc::setns(f.as_raw_fd(), libc::CLONE_NEWNET) };
            assert_eq!(r, 0, "setns: {}", std::io::Error::last_os_error());
            TcpListener::bind(addr).expect("bind in the namespace")
        })
        .join()
        .unwrap()
    }
}

impl Default for Netns {
    fn default() -> Self {
        Self::new()
    }
}

impl Drop for Netns {
    fn drop(&mut self) {
        // Deleting the namespace removes its end of the pair, and with it this one.
        let _ = ip(&["link", "del", &self.veth]);
        let _ = ip(&["netns", "del", &self.name]);
    }
}
