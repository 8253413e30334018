//! The ways to a lab machine that is not dialed directly: a jump host's `direct-tcpip`
//! channel (ProxyJump) pumped to one end of a socket pair on a thread of its own, or a
//! ProxyCommand whose standard input and output are one end of a socket pair. The other
//! end is the socket libssh2 speaks SSH over, as it would a TCP connection.

use crate::interrupt::{register_group as register, unregister_group as unregister};
use ssh2::{Channel, Session};
use std::io::{Read, Write};
use std::os::fd::{AsRawFd, OwnedFd};
use std::os::unix::net::UnixStream;
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// What keeps a tunnel going: dropped after the session that speaks over it.
pub enum Keep {
    /// A jump host's channel pumped by a thread; the jump host's own way there after it.
    Pump {
        stop: Arc<AtomicBool>,
        thread: Option<std::thread::JoinHandle<()>>,
        below: Box<Option<Keep>>,
    },
    /// A ProxyCommand, killed and reaped when the connection ends.
    Command(Child),
}

impl Drop for Keep {
    fn drop(&mut self) {
        match self {
            Keep::Pump { stop, thread, .. } => {
                stop.store(true, Ordering::Relaxed);
                if let Some(t) = thread.take() {
                    let _ = t.join();
                }
            }
            Keep::Command(child) => {
                let pid = child.id() as libc::pid_t;
                // SAFETY: signalling the process group of our own child (its own group).
                unsafe { libc::kill(-pid, libc::SIGHUP) };
                // Done when the whole group is gone: the command (reaped) and whatever it
                // started, which may ignore SIGHUP (and hold labperf's standard error
                // open: a `2>&1 | tail` would wait for it). The group's id stays the
                // leader's while any member lives, so it names no other process.
                let t = Instant::now();
                let mut reaped = false;
                while t.elapsed() < Duration::from_secs(1) {
                    reaped = reaped || !matches!(child.try_wait(), Ok(None));
                    // SAFETY: signal 0 only asks whether a member of the group is left.
                    if reaped && unsafe { libc::kill(-pid, 0) } == -1 {
                        unregister(pid);
                        return;
                    }
                    std::thread::sleep(Duration::from_millis(10));
                }
                // SAFETY: as above; members that outlived SIGHUP.
                unsafe { libc::kill(-pid, libc::SIGKILL) };
                if !reaped {
                    let _ = child.wait();
                }
                unregister(pid);
            }
        }
    }
}

/// Starts `sh -c command` (tokens already expanded) with its standard input and output
/// one end of a socket pair, in a process group of its own (killed with it), its standard
/// error labperf's; returns the other end.
pub fn command(command: &str) -> std::io::Result<(UnixStream, Keep)> {
    use std::os::unix::process::CommandExt;
    let (ours, theirs) = UnixStream::pair()?;
    let theirs: OwnedFd = theirs.into();
    let child = Command::new("sh")
        .arg("-c")
        .arg(command)
        .stdin(Stdio::from(theirs.try_clone()?))
        .stdout(Stdio::from(theirs))
        .stderr(Stdio::inherit())
        .process_group(0)
        .spawn()?;
    register(child.id() as i32);
    Ok((ours, Keep::Command(child)))
}

/// Writes to the socket without SIGPIPE.
fn send(fd: &UnixStream, b: &[u8]) -> std::io::Result<usize> {
    // SAFETY: a valid buffer and our own socket.
    let n = unsafe {
        libc::send(
            fd.as_raw_fd(),
            b.as_ptr() as *const libc::c_void,
            b.len(),
            libc::MSG_NOSIGNAL,
        )
    };
    if n < 0 {
        Err(std::io::Error::last_os_error())
    } else {
        Ok(n as usize)
    }
}

const EAGAIN: ssh2::ErrorCode = ssh2::ErrorCode::Session(-37);

/// Hands `channel` (of the jump host's `session`, whose socket is `fd`) to a thread that
/// copies bytes both ways between it and one end of a socket pair; returns the other end.
/// The session is non-blocking from here on; `below` is what keeps the jump host's own
/// connection going, dropped after the thread ends.
pub fn pump(
    session: Session,
    fd: std::os::fd::RawFd,
    channel: Channel,
    below: Option<Keep>,
) -> std::io::Result<(UnixStream, Keep)> {
    let (ours, theirs) = UnixStream::pair()?;
    theirs.set_nonblocking(true)?;
    let stop = Arc::new(AtomicBool::new(false));
    let stop2 = stop.clone();
    session.set_blocking(false);
    let thread = std::thread::Builder::new()
        .name("labperf-jump".into())
        .spawn(move || run_pump(&session, fd, channel, &theirs, &stop2))?;
    Ok((
        ours,
        Keep::Pump {
            stop,
            thread: Some(thread),
            below: Box::new(below),
        },
    ))
}

/// The pump's loop: channel to socket and socket to channel, each through a buffer, until
/// both directions have ended, either side fails, or `stop`. Waits in poll() on both.
fn run_pump(
    session: &Session,
    fd: std::os::fd::RawFd,
    mut ch: Channel,
    local: &UnixStream,
    stop: &AtomicBool,
) {
    let mut down: Vec<u8> = Vec::new(); // from the channel, to the local socket
    let mut up: Vec<u8> = Vec::new(); // from the local socket, to the channel
    let (mut local_eof, mut remote_eof, mut eof_sent) = (false, false, false);
    let mut buf = vec![0u8; 32768];
    let mut last_keepalive = Instant::now();
    while !stop.load(Ordering::Relaxed) {
        let mut progressed = false;
        if down.is_empty() && !remote_eof {
            match ch.read(&mut buf) {
                Ok(0) if ch.eof() => {
                    remote_eof = true;
                    let _ = local.shutdown(std::net::Shutdown::Write);
                }
                Ok(0) => {}
                Ok(n) => {
                    down.extend_from_slice(&buf[..n]);
                    progressed = true;
                }
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {}
                Err(_) => break,
            }
        }
        if !down.is_empty() {
            match send(local, &down) {
                Ok(n) => {
                    down.drain(..n);
                    progressed = true;
                }
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {}
                Err(_) => break,
            }
        }
        if up.is_empty() && !local_eof {
            match (&*local).read(&mut buf) {
                Ok(0) => local_eof = true,
                Ok(n) => {
                    up.extend_from_slice(&buf[..n]);
                    progressed = true;
                }
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {}
                Err(_) => break,
            }
        }
        if !up.is_empty() {
            match ch.write(&up) {
                Ok(n) => {
                    up.drain(..n);
                    progressed = true;
                }
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {}
                Err(_) => break,
            }
        }
        if local_eof && up.is_empty() && !eof_sent {
            match ch.send_eof() {
                Ok(()) => eof_sent = true,
                Err(e) if e.code() == EAGAIN => {}
                Err(_) => break,
            }
        }
        if eof_sent && remote_eof && down.is_empty() {
            break;
        }
        if progressed {
            continue;
        }
        if last_keepalive.elapsed() > Duration::from_secs(15) {
            last_keepalive = Instant::now();
            let _ = session.keepalive_send();
        }
        let mut sess_events = libc::POLLIN;
        if session.block_directions() != ssh2::BlockDirections::None
            && session.block_directions() != ssh2::BlockDirections::Inbound
        {
            sess_events |= libc::POLLOUT;
        }
        let mut local_events = 0;
        if up.is_empty() && !local_eof {
            local_events |= libc::POLLIN;
        }
        if !down.is_empty() {
            local_events |= libc::POLLOUT;
        }
        let mut fds = [
            libc::pollfd {
                fd,
                events: sess_events,
                revents: 0,
            },
            libc::pollfd {
                fd: local.as_raw_fd(),
                events: local_events,
                revents: 0,
            },
        ];
        // SAFETY: two valid pollfds, a session socket and our own socket.
        unsafe { libc::poll(fds.as_mut_ptr(), 2, 100) };
    }
    let _ = local.shutdown(std::net::Shutdown::Both);
    // The channel's close goes out before the session is left (a moment at most).
    let t = Instant::now();
    while matches!(ch.close(), Err(e) if e.code() == EAGAIN)
        && t.elapsed() < Duration::from_millis(200)
    {
        std::thread::sleep(Duration::from_millis(5));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_proxy_command_speaks_through_its_socket_and_is_reaped_with_its_keep() {
        let (mut s, keep) = command("read -r line; echo \"got $line\"; exec sleep 30").unwrap();
        let Keep::Command(c) = &keep else {
            panic!("not a command")
        };
        let pid = c.id() as libc::pid_t;
        s.write_all(b"hello\n").unwrap();
        let mut got = [0u8; 10];
        s.read_exact(&mut got).unwrap();
        assert_eq!(&got, b"got hello\n");
        let t = Instant::now();
        drop(keep);
        assert!(
            t.elapsed() < Duration::from_millis(900),
            "{:?}",
            t.elapsed()
        );
        // Reaped: the pid is no process of ours any more.
        // SAFETY: signal 0 only asks whether the process exists.
        assert_eq!(unsafe { libc::kill(pid, 0) }, -1);
        let mut rest = Vec::new();
        s.read_to_end(&mut rest).unwrap();
        assert!(rest.is_empty());
    }

    /// The live (not zombie) processes of process group `pgid`, by /proc.
    fn live_members(pgid: i32) -> Vec<i32> {
        std::fs::read_dir("/proc")
            .unwrap()
            .flatten()
            .filter_map(|e| {
                let pid: i32 = e.file_name().to_str()?.parse().ok()?;
                let stat = std::fs::read_to_string(e.path().join("stat")).ok()?;
                let after = stat.rsplit_once(')')?.1.to_string();
                let f: Vec<&str> = after.split_whitespace().collect();
                let pgrp: i32 = f.get(2)?.parse().ok()?;
                (pgrp == pgid && f[0] != "Z").then_some(pid)
            })
            .collect()
    }

    /// A ProxyCommand whose children ignore SIGHUP (the command itself ends on it): they
    /// are killed with it, within the second the group is given.
    #[test]
    fn children_that_ignore_sighup_are_killed_with_the_proxy_command() {
        let (_s, keep) = command("(trap '' HUP; exec sleep 30) & wait").unwrap();
        let Keep::Command(c) = &keep else {
            panic!("not a command")
        };
        let pid = c.id() as libc::pid_t;
        // The child has set its trap once it runs sleep.
        let t = Instant::now();
        while !std::fs::read_dir("/proc").unwrap().flatten().any(|e| {
            std::fs::read_to_string(e.path().join("stat")).is_ok_and(|s| {
                s.contains("(sleep)")
                    && s.rsplit_once(')').and_then(|(_, a)| {
                        a.split_whitespace().nth(2).map(|g| g == pid.to_string())
                    }) == Some(true)
            })
        }) {
            assert!(t.elapsed() < Duration::from_secs(5), "no sleep started");
            std::thread::sleep(Duration::from_millis(5));
        }
        let t = Instant::now();
        drop(keep);
        let took = t.elapsed();
        // A killed orphan is a zombie until init reaps it: only live members count.
        std::thread::sleep(Duration::from_millis(50));
        let left = live_members(pid);
        for p in &left {
            // SAFETY: the test's own leftover process.
            unsafe { libc::kill(*p, libc::SIGKILL) };
        }
        assert!(
            left.is_empty(),
            "a child outlived its ProxyCommand: {left:?}"
        );
        assert!(took < Duration::from_millis(1500), "{took:?}");
    }
}
