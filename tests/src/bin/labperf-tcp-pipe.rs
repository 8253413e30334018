//! `labperf-tcp-pipe HOST PORT`: connects to HOST:PORT and copies standard input to the
//! connection and the connection to standard output, as `nc` would: a ProxyCommand for the
//! bastion tests (`ip netns exec NS labperf-tcp-pipe 127.0.0.1 %p`) that needs no netcat.

use std::io::{Read, Write};
use std::net::{Shutdown, TcpStream};

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let [host, port] = &args[..] else {
        eprintln!("usage: labperf-tcp-pipe HOST PORT");
        std::process::exit(2);
    };
    let port: u16 = port.parse().unwrap_or_else(|_| {
        eprintln!("labperf-tcp-pipe: bad port {port}");
        std::process::exit(2)
    });
    let up = TcpStream::connect((host.as_str(), port)).unwrap_or_else(|e| {
        eprintln!("labperf-tcp-pipe: {host}:{port}: {e}");
        std::process::exit(1)
    });
    let down = up.try_clone().expect("socket clone");
    let t = std::thread::spawn(move || {
        let mut up = up;
        let mut buf = [0u8; 32768];
        let mut stdin = std::io::stdin().lock();
        while let Ok(n) = stdin.read(&mut buf) {
            if n == 0 || up.write_all(&buf[..n]).is_err() {
                break;
            }
        }
        let _ = up.shutdown(Shutdown::Write);
    });
    let mut down = down;
    let mut buf = [0u8; 32768];
    let mut stdout = std::io::stdout().lock();
    while let Ok(n) = down.read(&mut buf) {
        if n == 0
            || stdout
                .write_all(&buf[..n])
                .and_then(|_| stdout.flush())
                .is_err()
        {
            break;
        }
    }
    drop(t);
}
