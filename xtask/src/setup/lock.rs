//! Setup's wait for apt's and dpkg's locks: another apt-get, dpkg or unattended-upgrades at
//! work makes every simulation read a half-installed system, so setup waits (bounded, said)
//! until none holds them before it simulates or installs anything.

use std::path::Path;
use std::time::{Duration, Instant};

/// The locks apt and dpkg take (fcntl write locks, as apt's `GetLock` takes them): the
/// frontend lock first, as apt-get takes it.
pub const APT_LOCKS: [&str; 4] = [
    "/var/lib/dpkg/lock-frontend",
    "/var/lib/dpkg/lock",
    "/var/lib/apt/lists/lock",
    "/var/cache/apt/archives/lock",
];

/// How long setup waits for another apt or dpkg before it gives up: an unattended upgrade
/// of a whole point release takes minutes.
pub const WAIT: Duration = Duration::from_secs(600);

/// The process that holds a write lock on `path` (fcntl `F_GETLK`, as apt and dpkg lock),
/// or `None` when the file is missing or nothing holds it. A lock this process holds is not
/// seen (fcntl locks are per process), nor is it ever in the way of its own apt-get.
pub fn holder(path: &Path) -> Option<i32> {
    use std::os::unix::io::AsRawFd;
    let f = std::fs::File::open(path).ok()?;
    // SAFETY: a zeroed flock is a valid argument; F_GETLK only writes into it.
    let mut fl: libc::flock = unsafe { std::mem::zeroed() };
    fl.l_type = libc::F_WRLCK as libc::c_short;
    fl.l_whence = libc::SEEK_SET as libc::c_short;
    // SAFETY: `f` is open for the call's duration and `fl` is a valid flock.
    let r = unsafe { libc::fcntl(f.as_raw_fd(), libc::F_GETLK, &mut fl) };
    (r == 0 && fl.l_type != libc::F_UNLCK as libc::c_short).then_some(fl.l_pid)
}

/// `PID (COMMAND)`, from /proc where it can be read.
fn who(pid: i32) -> String {
    match std::fs::read_to_string(format!("/proc/{pid}/comm")) {
        Ok(c) => format!("PID {pid} ({})", c.trim()),
        Err(_) => format!("PID {pid}"),
    }
}

/// Waits until no process holds any of `locks`, for at most `max`, checking every `poll`;
/// `say` gets a line when the wait starts, every 30 s while it lasts, and when it ends.
/// After `max` the error names the lock, its holder and what to do.
pub fn wait_for(
    locks: &[&str],
    max: Duration,
    poll: Duration,
    mut say: impl FnMut(&str),
) -> anyhow::Result<()> {
    let start = Instant::now();
    let mut said: Option<Instant> = None;
    loop {
        let held = locks
            .iter()
            .find_map(|l| holder(Path::new(l)).map(|pid| (*l, pid)));
        let Some((lock, pid)) = held else {
            if said.is_some() {
                say(&format!(
                    "setup: apt's and dpkg's locks are free after {:.0} s; going on",
                    start.elapsed().as_secs_f64()
                ));
            }
            return Ok(());
        };
        let waited = start.elapsed();
        if waited >= max {
            anyhow::bail!(
                "{lock} is still held by {} after {:.0} s: another apt-get, dpkg or \
                 unattended-upgrades is installing. Nothing was simulated or installed; let it \
                 finish (`ps -p {pid} -o args`) and run setup again",
                who(pid),
                waited.as_secs_f64()
            );
        }
        if said.is_none_or(|t| t.elapsed() >= Duration::from_secs(30)) {
            say(&format!(
                "setup: waiting for {lock}, held by {} (another apt or dpkg at work), up to {} s \
                 in all ({:.0} s so far)",
                who(pid),
                max.as_secs(),
                waited.as_secs_f64()
            ));
            said = Some(Instant::now());
        }
        std::thread::sleep(poll);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::{BufRead, BufReader};
    use std::process::{Command, Stdio};

    /// A second process (python3's fcntl.lockf: a fcntl write lock, as apt's) holding a
    /// lock on `path` until its stdin closes; returns once the lock is taken.
    fn hold(path: &Path) -> std::process::Child {
        let script = path.with_extension("py");
        std::fs::write(
            &script,
            "import fcntl, sys\nf = open(sys.argv[1], 'w')\nfcntl.lockf(f, fcntl.LOCK_EX)\n\
             print('held', flush=True)\nsys.stdin.read()\n",
        )
        .unwrap();
        let mut c = Command::new("python3")
            .arg(&script)
            .arg(path)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .expect("python3");
        let mut line = String::new();
        BufReader::new(c.stdout.as_mut().unwrap())
            .read_line(&mut line)
            .unwrap();
        assert_eq!(line.trim(), "held");
        c
    }

    fn scratch(name: &str) -> std::path::PathBuf {
        let p = std::env::temp_dir().join(format!("xtask-lock-{name}-{}", std::process::id()));
        std::fs::write(&p, b"").unwrap();
        p
    }

    #[test]
    fn a_held_lock_is_waited_for_and_said_until_its_holder_lets_go() {
        let p = scratch("wait");
        let mut h = hold(&p);
        assert_eq!(holder(&p), Some(h.id() as i32));
        let pid = h.id();
        let t = std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(1500));
            drop(h.stdin.take());
            h.wait().unwrap();
        });
        let ps = p.to_str().unwrap().to_string();
        let start = Instant::now();
        let mut lines = Vec::new();
        wait_for(&[&ps], WAIT, Duration::from_millis(50), |l| {
            lines.push(l.to_string())
        })
        .unwrap();
        t.join().unwrap();
        assert!(
            start.elapsed() >= Duration::from_millis(1400),
            "did not wait"
        );
        assert_eq!(lines.len(), 2, "{lines:?}");
        assert!(
            lines[0].contains(&format!("held by PID {pid} (python3)")),
            "{lines:?}"
        );
        assert!(lines[1].contains("free after"), "{lines:?}");
        assert_eq!(holder(&p), None);
        let _ = std::fs::remove_file(&p);
        let _ = std::fs::remove_file(p.with_extension("py"));
    }

    #[test]
    fn a_lock_held_past_the_bound_is_an_error_naming_its_holder() {
        let p = scratch("bound");
        let mut h = hold(&p);
        let ps = p.to_str().unwrap().to_string();
        let e = wait_for(
            &[&ps],
            Duration::from_millis(300),
            Duration::from_millis(50),
            |_| {},
        )
        .unwrap_err()
        .to_string();
        drop(h.stdin.take());
        h.wait().unwrap();
        assert!(
            e.contains(&format!("still held by PID {} (python3)", h.id())),
            "{e}"
        );
        assert!(e.contains("Nothing was simulated or installed"), "{e}");
        let _ = std::fs::remove_file(&p);
        let _ = std::fs::remove_file(p.with_extension("py"));
    }

    #[test]
    fn free_or_missing_locks_are_no_wait() {
        let p = scratch("free");
        let ps = p.to_str().unwrap().to_string();
        let mut n = 0;
        wait_for(
            &[&ps, "/nonexistent/lock"],
            Duration::ZERO,
            Duration::ZERO,
            |_| n += 1,
        )
        .unwrap();
        assert_eq!(n, 0);
        let _ = std::fs::remove_file(&p);
        let _ = std::fs::remove_file(p.with_extension("py"));
    }
}
