//! Debug files and binaries from debuginfod servers (`DEBUGINFOD_URLS`): elfutils' own
//! `debuginfod` serving a stripped program's debug file and Debian's libc's (this machine's
//! copy hidden), the lab machine's debug file before the server's, and hostile servers'
//! answers refused within bounds. The server runs in a network namespace of its own, on
//! its 127.0.0.1, where labperf reaches it (`ip netns exec`).

use labperf_tests::netns::Netns;
use labperf_tests::{bin, scratch};
use std::collections::BTreeMap;
use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// The server's port in its namespace (nothing else listens there).
const PORT: u16 = 8002;

/// Two functions of known lines, each a loop of its own; a fixed amount of work.
const PROGRAM: &str = r#"#include <stdio.h>
#include <stdlib.h>
__attribute__((noinline)) long spin_alpha(long n) {
    long s = 0;
    for (long i = 0; i < n; i++)
        s = s * 31 + (i ^ (s >> 7));
    return s;
}
__attribute__((noinline)) long spin_beta(long n) {
    long s = 1;
    for (long i = 0; i < n; i++)
        s = s * 17 + (i | (s >> 3));
    return s;
}
int main(int argc, char **argv) {
    long n = argc > 1 ? atol(argv[1]) : 60000000;
    long r = 0;
    for (int k = 0; k < 4; k++) {
        r += spin_alpha(n);
        r += spin_beta(n / 2);
    }
    printf("%ld\n", r);
    return 0;
}
"#;

/// elfutils' debuginfod serving the ELF and debug files under `dir` on 127.0.0.1:[`PORT`]
/// of a network namespace of its own; killed on drop.
struct Server {
    ns: Netns,
    child: Child,
}

impl Server {
    /// Starts it, and waits until it serves each (build-id, `debuginfo`|`executable`) of
    /// `ready` (its first scan of `dir`).
    fn start(dir: &Path, ready: &[(String, &str)]) -> Server {
        let ns = Netns::new();
        let log = std::fs::File::create(dir.with_extension("log")).unwrap();
        let child = Command::new("ip")
            .args([
                "netns",
                "exec",
                &ns.name,
                "debuginfod",
                "-F",
                "-t",
                "0",
                "-g",
                "0",
            ])
            .args(["-p", &PORT.to_string(), "-d"])
            .arg(dir.with_extension("sqlite"))
            .arg(dir)
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .expect("ip (iproute2) and debuginfod are installed by `cargo xtask setup`");
        let s = Server { ns, child };
        let t = Instant::now();
        for (id, kind) in ready {
            while s.status(id, kind) != Some(200) {
                assert!(
                    t.elapsed() < Duration::from_secs(60),
                    "debuginfod does not serve {id}/{kind}: see {}",
                    dir.with_extension("log").display()
                );
                std::thread::sleep(Duration::from_millis(100));
            }
        }
        s
    }

    /// The HTTP status of `/buildid/ID/KIND`, asked through the namespace's veth pair.
    fn status(&self, id: &str, kind: &str) -> Option<u16> {
        let mut c = std::net::TcpStream::connect((self.ns.ns_addr.as_str(), PORT)).ok()?;
        c.set_read_timeout(Some(Duration::from_secs(5))).ok()?;
        write!(c, "GET /buildid/{id}/{kind} HTTP/1.0\r\n\r\n").ok()?;
        let mut head = [0u8; 12];
        c.read_exact(&mut head).ok()?;
        std::str::from_utf8(&head[9..12]).ok()?.parse().ok()
    }

    /// Its URL, as labperf run in its namespace ([`Server::labperf`]) reaches it.
    fn url(&self) -> String {
        format!("http://127.0.0.1:{PORT}")
    }

    /// `labperf` in the server's namespace.
    fn labperf(&self) -> Command {
        let mut c = Command::new("ip");
        c.args(["netns", "exec", &self.ns.name]).arg(bin("labperf"));
        c
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

fn build_id(p: &Path) -> Vec<u8> {
    use object::Object;
    let data = std::fs::read(p).unwrap();
    object::File::parse(&*data)
        .unwrap()
        .build_id()
        .unwrap()
        .unwrap()
        .to_vec()
}

fn run(c: &mut Command) -> std::process::Output {
    let o = c.output().unwrap();
    assert!(
        o.status.success(),
        "{c:?}: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    o
}

/// `labperf report --format json --top 0 FILE ARGS` as `c` runs it, with `home` as `$HOME`
/// and its `cache` as labperf's cache: the JSON and the messages.
fn report(mut c: Command, file: &Path, home: &Path, args: &[&str]) -> (serde_json::Value, String) {
    c.args(["report", "--format", "json", "--top", "0"])
        .arg(file)
        .args(args)
        .env("HOME", home)
        .env("XDG_CACHE_HOME", home.join("cache"));
    let o = run(&mut c);
    (
        serde_json::from_slice(&o.stdout).unwrap(),
        String::from_utf8_lossy(&o.stderr).into_owned(),
    )
}

/// The rows of file `dso` (its last path component): (name, samples).
fn rows_of(j: &serde_json::Value, dso: &str) -> Vec<(String, u64)> {
    j["tables"][0]["rows"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|r| r["dso"].as_str().unwrap().rsplit('/').next() == Some(dso))
        .map(|r| {
            (
                r["name"].as_str().unwrap().to_string(),
                r["samples"].as_u64().unwrap(),
            )
        })
        .collect()
}

/// binutils' addr2line of `addrs` in `file`: each address's function and `file:line` (the
/// file's last component, without a discriminator).
fn addr2line(file: &Path, addrs: &[u64]) -> Vec<(String, String)> {
    let o = run(Command::new("addr2line")
        .arg("-f")
        .arg("-e")
        .arg(file)
        .args(addrs.iter().map(|a| format!("{a:#x}"))));
    let text = String::from_utf8_lossy(&o.stdout);
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines.len(), 2 * addrs.len(), "{text}");
    lines
        .chunks(2)
        .map(|p| {
            let line = p[1].split(" (").next().unwrap();
            (
                p[0].to_string(),
                line.rsplit('/').next().unwrap().to_string(),
            )
        })
        .collect()
}

/// Builds [`PROGRAM`] (`gcc -g -O1`) as `full`, then its debug file `debug` and the
/// stripped program `stripped` (which keeps its build-id), as distributions ship them.
fn build(d: &Path, full: &Path, debug: &Path, stripped: &Path) {
    std::fs::write(d.join("p.c"), PROGRAM).unwrap();
    run(Command::new("gcc")
        .args(["-g", "-O1", "-o"])
        .arg(full)
        .arg(d.join("p.c")));
    run(Command::new("objcopy")
        .arg("--only-keep-debug")
        .arg(full)
        .arg(debug));
    run(Command::new("objcopy")
        .arg("--strip-all")
        .arg(full)
        .arg(stripped));
}

/// Records `cmd` with the agent, cpu-clock every 200 µs, into `out`.
fn record(out: &Path, cmd: &[&dyn AsRef<std::ffi::OsStr>]) {
    run(Command::new(bin("labperf-agent"))
        .args(["record", "-e", "cpu-clock", "-c", "200000", "-o"])
        .arg(out)
        .arg("--")
        .args(cmd.iter().map(|a| a.as_ref())));
}

/// Checks the `--by pc` rows of `prog` against addr2line of the unstripped build: every
/// sampled address carries addr2line's function; returns the samples per `file:line`
/// addr2line gives.
fn check_pcs(j: &serde_json::Value, prog: &str, full: &Path) -> BTreeMap<String, u64> {
    let rows = rows_of(j, prog);
    // "0x115f <spin_alpha>"
    let addrs: Vec<u64> = rows
        .iter()
        .map(|(n, _)| {
            let a = n.split_whitespace().next().unwrap();
            u64::from_str_radix(a.trim_start_matches("0x"), 16).unwrap()
        })
        .collect();
    let truth = addr2line(full, &addrs);
    let mut lines = BTreeMap::new();
    for ((name, n), (func, line)) in rows.iter().zip(&truth) {
        // A PLT stub is no function of the file's: addr2line says `??`, labperf (as perf
        // and objdump) `sym@plt`.
        let ok = match func.as_str() {
            "??" => name.ends_with("@plt>"),
            f => name.ends_with(&format!(" <{f}>")),
        };
        assert!(ok, "{name}: addr2line says {func}");
        // Where DWARF has no line (crt1.o's start-up code, the PLT), `--by srcline` gives
        // the function's name.
        let key = match line.starts_with("??") {
            true => name[name.find('<').unwrap() + 1..name.len() - 1].to_string(),
            false => line.clone(),
        };
        *lines.entry(key).or_insert(0) += n;
    }
    let hot: u64 = rows
        .iter()
        .filter(|(n, _)| n.contains("<spin_"))
        .map(|r| r.1)
        .sum();
    let all: u64 = rows.iter().map(|r| r.1).sum();
    assert!(hot * 10 >= all * 9 && all > 200, "{rows:?}");
    lines
}

#[test]
fn a_stripped_program_is_named_through_a_debuginfod_server() {
    let d = scratch("dbgd-program");
    let srv = d.join("srv");
    std::fs::create_dir_all(&srv).unwrap();
    let (full, prog) = (d.join("full"), d.join("prog"));
    build(&d, &full, &srv.join("prog.debug"), &prog);
    let id = hex(&build_id(&prog));
    assert_eq!(id, hex(&build_id(&srv.join("prog.debug"))));
    let lpr = d.join("run.lpr");
    record(&lpr, &[&prog]);
    let home = d.join("home");
    // Without DEBUGINFOD_URLS: addresses, and no server asked.
    let (j, err) = report(Command::new(bin("labperf")), &lpr, &home, &["--by", "pc"]);
    assert!(rows_of(&j, "prog").iter().all(|(n, _)| !n.contains('<')));
    assert!(!err.contains("debuginfod"), "{err}");
    // The server: the debug file and (for the next step) the stripped program.
    std::fs::copy(&prog, srv.join("prog")).unwrap();
    let s = Server::start(
        &srv,
        &[(id.clone(), "debuginfo"), (id.clone(), "executable")],
    );
    let mut c = s.labperf();
    c.env("DEBUGINFOD_URLS", format!("http://127.0.0.1:1 {}", s.url()));
    let (j, err) = report(c, &lpr, &home, &["--by", "pc"]);
    let lines = check_pcs(&j, "prog", &full);
    // One line says what each server said: the first is not listening.
    let size = std::fs::metadata(srv.join("prog.debug")).unwrap().len();
    let note = err
        .lines()
        .find(|l| l.starts_with("note: debuginfod: the debug file of"))
        .unwrap_or_else(|| panic!("{err}"));
    assert!(
        note.contains(&id)
            && note.contains("http://127.0.0.1:1: ")
            && note.contains(&format!("{}: {size} bytes", s.url())),
        "{note}"
    );
    let kept = home
        .join("cache/labperf/debuginfod")
        .join(&id)
        .join("debug");
    assert_eq!(
        std::fs::read(&kept).unwrap(),
        std::fs::read(srv.join("prog.debug")).unwrap()
    );
    // Source lines from the same DWARF: addr2line's lines, with the same samples, and the
    // file kept is read without asking again.
    let mut c = s.labperf();
    c.env("DEBUGINFOD_URLS", s.url());
    let (j, err) = report(c, &lpr, &home, &["--by", "srcline"]);
    let by_line: BTreeMap<String, u64> = rows_of(&j, "prog").into_iter().collect();
    assert_eq!(by_line, lines);
    // (Files without symbols the server does not have, ld.so's say, are asked for again.)
    assert!(!err.contains(&id), "{err}");
    // The program gone from here: the binary too comes from the server (a fresh cache).
    std::fs::rename(&prog, d.join("elsewhere")).unwrap();
    let home2 = d.join("home2");
    let mut c = s.labperf();
    c.env("DEBUGINFOD_URLS", s.url());
    let (j, err) = report(c, &lpr, &home2, &["--by", "pc"]);
    assert_eq!(check_pcs(&j, "prog", &full), lines);
    assert!(
        err.contains(&format!(
            "note: debuginfod: the binary of {} (build-id {id}): {}: {} bytes",
            prog.display(),
            s.url(),
            std::fs::metadata(srv.join("prog")).unwrap().len()
        )),
        "{err}"
    );
    // The server gone, what was kept still names the samples.
    drop(s);
    let mut c = Command::new(bin("labperf"));
    c.env("DEBUGINFOD_URLS", "http://127.0.0.1:1");
    let (j, err) = report(c, &lpr, &home2, &["--by", "pc"]);
    assert_eq!(check_pcs(&j, "prog", &full), lines);
    assert!(!err.contains(&id), "{err}");
}

/// A python3 workload that spends its time in libc's memmove, memchr, memcmp and memset,
/// local symbols that only libc's debug file names.
const PY: &str = r#"
b = bytearray(4_000_000)
for i in range(100):
    c = bytes(b)
    c.find(b"x")
    c == bytes(b)
    b"\x01" * 2_000_000
"#;

#[test]
fn debian_s_libc_is_named_through_debuginfod_where_its_debug_file_is_not_installed() {
    let libc = PathBuf::from(format!(
        "/lib/{}-linux-gnu/libc.so.6",
        std::env::consts::ARCH
    ));
    let id = build_id(&libc);
    let installed = PathBuf::from(format!(
        "/usr/lib/debug/.build-id/{}/{}.debug",
        hex(&id[..1]),
        hex(&id[1..])
    ));
    assert!(
        installed.is_file(),
        "{} is missing: `cargo xtask setup` installs libc6-dbg",
        installed.display()
    );
    let d = scratch("dbgd-libc");
    std::fs::write(d.join("w.py"), PY).unwrap();
    let lpr = d.join("py.lpr");
    // Debian's python3 (not a wrapper of another installation's that PATH may name).
    record(&lpr, &[&"/usr/bin/python3", &d.join("w.py")]);
    // The truth: libc named with its installed debug file (as tests/symbols.rs checks
    // against perf).
    let home = d.join("home");
    let (j, _) = report(Command::new(bin("labperf")), &lpr, &home, &[]);
    let truth = rows_of(&j, "libc.so.6");
    assert!(
        truth.iter().filter(|(n, _)| n.starts_with("__mem")).count() >= 2,
        "{truth:?}"
    );
    // A machine without libc6-dbg: /usr/lib/debug hidden (an empty tmpfs over it in a
    // mount namespace of labperf's own).
    let srv = d.join("srv");
    std::fs::create_dir_all(&srv).unwrap();
    std::fs::copy(&installed, srv.join("libc.debug")).unwrap();
    let s = Server::start(&srv, &[(hex(&id), "debuginfo")]);
    let hidden = |urls: Option<&str>, home: &Path| {
        let mut c = Command::new("ip");
        c.args([
            "netns",
            "exec",
            &s.ns.name,
            "unshare",
            "--mount",
            "--propagation",
            "private",
            "--",
            "sh",
            "-c",
        ])
        .arg("mount -t tmpfs labperf-test /usr/lib/debug && exec \"$@\"")
        .arg("sh")
        .arg(bin("labperf"));
        if let Some(u) = urls {
            c.env("DEBUGINFOD_URLS", u);
        }
        report(c, &lpr, home, &[])
    };
    let (j, _) = hidden(None, &d.join("home-none"));
    let bare = rows_of(&j, "libc.so.6");
    assert!(
        bare.iter().all(|(n, _)| !n.starts_with("__mem")),
        "libc named without its debug file: {bare:?}"
    );
    let (j, err) = hidden(Some(&s.url()), &d.join("home-dbgd"));
    assert_eq!(rows_of(&j, "libc.so.6"), truth, "{err}");
    let size = std::fs::metadata(&installed).unwrap().len();
    assert!(
        err.lines()
            .any(|l| l.starts_with("note: debuginfod: the debug file of /")
                && l.contains(&format!(
                    "/libc.so.6 (build-id {}): {}: {size} bytes",
                    hex(&id),
                    s.url()
                ))),
        "{err}"
    );
}

#[test]
fn the_lab_machine_s_debug_file_comes_before_the_server_s() {
    let d = scratch("dbgd-order");
    let (full, prog) = (d.join("full"), d.join("prog"));
    build(&d, &full, &d.join("prog.debug"), &prog);
    let id = build_id(&prog);
    // Another build with the same build-id (ld's --build-id=0x…) and other names: what a
    // server would give for a build-id it has wrong.
    let srv = d.join("srv");
    std::fs::create_dir_all(&srv).unwrap();
    std::fs::write(
        d.join("q.c"),
        PROGRAM
            .replace("spin_alpha", "other_alpha")
            .replace("spin_beta", "other_beta"),
    )
    .unwrap();
    run(Command::new("gcc")
        .args(["-g", "-O1", &format!("-Wl,--build-id=0x{}", hex(&id)), "-o"])
        .arg(d.join("q"))
        .arg(d.join("q.c")));
    run(Command::new("objcopy")
        .arg("--only-keep-debug")
        .arg(d.join("q"))
        .arg(srv.join("q.debug")));
    assert_eq!(build_id(&srv.join("q.debug")), id);
    let lpr = d.join("run.lpr");
    record(&lpr, &[&prog]);
    // As `record --host` leaves it: the program in the binary cache with its debug file
    // from the lab machine, and gone from its recorded path here.
    let home = d.join("home");
    let entry = home.join("cache/labperf/binaries").join(hex(&id));
    std::fs::create_dir_all(&entry).unwrap();
    std::fs::rename(&prog, entry.join("elf")).unwrap();
    std::fs::copy(d.join("prog.debug"), entry.join("debug")).unwrap();
    let s = Server::start(&srv, &[(hex(&id), "debuginfo")]);
    let names = |home: &Path| {
        let mut c = s.labperf();
        c.env("DEBUGINFOD_URLS", s.url());
        let (j, err) = report(c, &lpr, home, &[]);
        let rows = rows_of(&j, "prog");
        (
            rows.into_iter().take(2).map(|r| r.0).collect::<Vec<_>>(),
            err,
        )
    };
    let (top, err) = names(&home);
    assert_eq!(top, ["spin_alpha", "spin_beta"], "{err}");
    assert!(!err.contains(&hex(&id)), "the server was asked: {err}");
    // Without the lab machine's debug file the server's is used (the names say whose).
    std::fs::remove_file(entry.join("debug")).unwrap();
    let (top, err) = names(&home);
    assert_eq!(top, ["other_alpha", "other_beta"], "{err}");
}

/// What a hostile server sends for every request.
type Answer = fn(&mut std::net::TcpStream);

/// A hostile debuginfod server on 127.0.0.1 (a port of its own): `answer` writes what it
/// sends for every request. Its URL.
fn hostile(answer: Answer) -> String {
    let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}", l.local_addr().unwrap());
    std::thread::spawn(move || {
        for c in l.incoming() {
            let Ok(mut c) = c else { continue };
            // Each request of the connection (a client keeps it for the next) answered
            // once its head is read.
            std::thread::spawn(move || {
                let mut head = Vec::new();
                let mut b = [0u8; 4096];
                loop {
                    match c.read(&mut b) {
                        Ok(0) | Err(_) => return,
                        Ok(n) => head.extend_from_slice(&b[..n]),
                    }
                    if head.windows(4).any(|w| w == b"\r\n\r\n") {
                        head.clear();
                        answer(&mut c);
                    }
                }
            });
        }
    });
    url
}

#[test]
fn hostile_servers_answers_are_refused_within_bounds() {
    let d = scratch("dbgd-hostile");
    let (full, prog) = (d.join("full"), d.join("prog"));
    build(&d, &full, &d.join("prog.debug"), &prog);
    let id = hex(&build_id(&prog));
    let lpr = d.join("run.lpr");
    record(&lpr, &[&prog]);
    let answers: [(&str, Answer, &str); 6] = [
        // Another ELF file (this machine's /bin/true): not the build-id asked for.
        (
            "another file",
            |c| {
                let b = std::fs::read("/bin/true").unwrap();
                let _ = write!(c, "HTTP/1.1 200 OK\r\nContent-Length: {}\r\n\r\n", b.len());
                let _ = c.write_all(&b);
            },
            "bytes, of build-id",
        ),
        // Endless bytes past DEBUGINFOD_MAXSIZE.
        (
            "too large",
            |c| {
                let _ = write!(
                    c,
                    "HTTP/1.1 200 OK\r\nContent-Length: 1000000000000\r\n\r\n"
                );
                while c.write_all(&[0x7f; 65536]).is_ok() {}
            },
            "over 100000 bytes",
        ),
        // Nothing at all (DEBUGINFOD_TIMEOUT=2).
        (
            "silent",
            |_| std::thread::sleep(Duration::from_secs(60)),
            "no answer within 2 s",
        ),
        // Not HTTP.
        (
            "garbage",
            |c| {
                let _ = c.write_all(b"\x00\xff\x1b[2J not http\r\n\r\n");
            },
            "not asked again",
        ),
        // A redirect to itself, for ever.
        (
            "redirect loop",
            |c| {
                let _ = write!(
                    c,
                    "HTTP/1.1 302 Found\r\nLocation: /again\r\nContent-Length: 0\r\n\r\n"
                );
            },
            "redirect",
        ),
        // A server error.
        (
            "error",
            |c| {
                let _ = write!(c, "HTTP/1.1 503 Busy\r\nContent-Length: 0\r\n\r\n");
            },
            "HTTP 503",
        ),
    ];
    for (what, answer, said) in answers {
        let home = d.join(what.replace(' ', "-"));
        let url = hostile(answer);
        let t = Instant::now();
        let mut c = Command::new(bin("labperf"));
        c.env("DEBUGINFOD_URLS", &url)
            .env("DEBUGINFOD_MAXSIZE", "100000")
            .env("DEBUGINFOD_TIMEOUT", "2");
        let (j, err) = report(c, &lpr, &home, &[]);
        let took = t.elapsed();
        let note = err
            .lines()
            .find(|l| l.contains(&id))
            .unwrap_or_else(|| panic!("{what}: {err}"));
        assert!(
            note.starts_with("note: debuginfod: the debug file of")
                && note.contains(&url)
                && note.contains(said),
            "{what}: {note}"
        );
        // Addresses, not a wrong name; nothing kept; and soon (each file is asked once).
        let rows = rows_of(&j, "prog");
        assert!(
            rows.iter().all(|(n, _)| n.starts_with("prog+0x")),
            "{what}: {rows:?}"
        );
        assert!(
            !home.join("cache/labperf/debuginfod").join(&id).exists(),
            "{what}"
        );
        assert!(took < Duration::from_secs(30), "{what}: {took:?}");
    }
}

/// OpenSSL's own TLS server (`openssl s_server -WWW`: files under its directory, by the
/// request's path) on 127.0.0.1; killed on drop.
struct TlsServer(Child);

impl Drop for TlsServer {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

#[test]
fn https_servers_are_asked_with_their_certificate_checked() {
    let d = scratch("dbgd-https");
    let (full, prog) = (d.join("full"), d.join("prog"));
    let www = d.join("www");
    let id = {
        build(&d, &full, &d.join("prog.debug"), &prog);
        hex(&build_id(&prog))
    };
    std::fs::create_dir_all(www.join("buildid").join(&id)).unwrap();
    std::fs::copy(
        d.join("prog.debug"),
        www.join("buildid").join(&id).join("debuginfo"),
    )
    .unwrap();
    let lpr = d.join("run.lpr");
    record(&lpr, &[&prog]);
    // A certificate of its own for 127.0.0.1, which only SSL_CERT_FILE makes trusted.
    run(Command::new("openssl")
        .args([
            "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2",
        ])
        .args([
            "-subj",
            "/CN=127.0.0.1",
            "-addext",
            "subjectAltName=IP:127.0.0.1",
        ])
        .arg("-keyout")
        .arg(d.join("key.pem"))
        .arg("-out")
        .arg(d.join("cert.pem")));
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let _server = TlsServer(
        Command::new("openssl")
            .args([
                "s_server",
                "-WWW",
                "-quiet",
                "-accept",
                &format!("127.0.0.1:{port}"),
            ])
            .arg("-cert")
            .arg(d.join("cert.pem"))
            .arg("-key")
            .arg(d.join("key.pem"))
            .current_dir(&www)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("openssl is installed by `cargo xtask setup`"),
    );
    let t = Instant::now();
    while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
        assert!(
            t.elapsed() < Duration::from_secs(20),
            "s_server did not start"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    let url = format!("https://127.0.0.1:{port}");
    let top = |trust: bool, home: &Path| {
        let mut c = Command::new(bin("labperf"));
        c.env("DEBUGINFOD_URLS", &url);
        if trust {
            c.env("SSL_CERT_FILE", d.join("cert.pem"));
        }
        let (j, err) = report(c, &lpr, home, &[]);
        let names: Vec<String> = rows_of(&j, "prog")
            .into_iter()
            .take(2)
            .map(|r| r.0)
            .collect();
        let note = err.lines().find(|l| l.contains(&id)).map(str::to_string);
        (names, note.unwrap_or_else(|| panic!("{err}")))
    };
    // Not trusted: refused, and said.
    let (names, note) = top(false, &d.join("home1"));
    assert!(names.iter().all(|n| n.starts_with("prog+0x")), "{names:?}");
    assert!(note.contains("certificate verify failed"), "{note}");
    // Trusted: the debug file comes over TLS.
    let (names, note) = top(true, &d.join("home2"));
    assert_eq!(names, ["spin_alpha", "spin_beta"], "{note}");
    let size = std::fs::metadata(d.join("prog.debug")).unwrap().len();
    assert!(note.contains(&format!("{url}: {size} bytes")), "{note}");
}
