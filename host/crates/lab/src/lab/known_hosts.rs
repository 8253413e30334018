//! known_hosts as OpenSSH reads it (parsed with the `ssh-key` crate, one line at a time):
//! which host key algorithms to ask for, whether a presented key is known, new, changed
//! or revoked, and appending a new host the way `StrictHostKeyChecking=accept-new` does.
//!
//! The rules follow OpenSSH's client: the host is looked up as `host` on port 22 and as
//! `[host]:port` elsewhere; patterns are comma lists with `*`, `?` and `!` negation,
//! matched without regard to case, or a hashed name (`|1|salt|hash`, HMAC-SHA1); a line
//! that does not parse is skipped and never hides the lines after it; `@revoked` keys are
//! refused even when another line lists them; `@cert-authority` lines say nothing about a
//! plain host key; a key is "changed" only against a known key of its own type, and the
//! algorithms of the known keys are negotiated first, so a host known only by its RSA or
//! ECDSA key is checked against that key; off port 22, a key a plain `host` line lists is
//! known too. `tests/known_hosts.rs` checks every rule against the real OpenSSH client.

use hmac::{Hmac, Mac};
use ssh_key::known_hosts::{Entry, HostPatterns, Marker};
use ssh_key::PublicKey;
use std::path::Path;

/// Largest known_hosts file read (a real one is a few KiB to a few MiB).
pub const MAX_FILE: u64 = 64 << 20;

/// The name a host is listed under: `host` on port 22, `[host]:port` elsewhere.
pub fn lookup_name(host: &str, port: u16) -> String {
    if port == 22 {
        host.to_string()
    } else {
        format!("[{host}]:{port}")
    }
}

/// The entries of a known_hosts text that parse; lines that do not are skipped (and
/// counted), as OpenSSH skips them.
pub fn parse(text: &str) -> (Vec<Entry>, usize) {
    let mut entries = Vec::new();
    let mut skipped = 0;
    for line in text.lines() {
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        // Fields are separated by any run of blanks; ssh-key splits on single spaces.
        let fields: Vec<&str> = line.split_whitespace().collect();
        match fields.join(" ").parse::<Entry>() {
            Ok(e) => entries.push(e),
            Err(_) => skipped += 1,
        }
    }
    (entries, skipped)
}

/// Reads a known_hosts file (missing: empty), bounded by [`MAX_FILE`].
pub fn read(path: &Path) -> std::io::Result<Vec<Entry>> {
    use std::io::Read;
    let f = match std::fs::File::open(path) {
        Ok(f) => f,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(e),
    };
    let mut text = Vec::new();
    f.take(MAX_FILE + 1).read_to_end(&mut text)?;
    if text.len() as u64 > MAX_FILE {
        return Err(std::io::Error::other(format!(
            "larger than {} MiB",
            MAX_FILE >> 20
        )));
    }
    Ok(parse(&String::from_utf8_lossy(&text)).0)
}

/// OpenSSH's wildcard match: `*` any run, `?` one character, case-insensitive.
fn glob(pattern: &[u8], name: &[u8]) -> bool {
    let (mut p, mut n) = (0, 0);
    let (mut star, mut mark) = (None, 0);
    while n < name.len() {
        if p < pattern.len() && (pattern[p] == b'?' || pattern[p].eq_ignore_ascii_case(&name[n])) {
            p += 1;
            n += 1;
        } else if p < pattern.len() && pattern[p] == b'*' {
            star = Some(p);
            mark = n;
            p += 1;
        } else if let Some(s) = star {
            p = s + 1;
            mark += 1;
            n = mark;
        } else {
            return false;
        }
    }
    pattern[p..].iter().all(|&c| c == b'*')
}

/// Whether `patterns` name `name` (a lookup name, see [`lookup_name`]).
pub fn matches(patterns: &HostPatterns, name: &str) -> bool {
    match patterns {
        HostPatterns::Patterns(list) => {
            let mut positive = false;
            for p in list {
                match p.strip_prefix('!') {
                    Some(neg) if glob(neg.as_bytes(), name.as_bytes()) => return false,
                    Some(_) => {}
                    None => positive |= glob(p.as_bytes(), name.as_bytes()),
                }
            }
            positive
        }
        HostPatterns::HashedName { salt, hash } => {
            let Ok(mut mac) = Hmac::<sha1::Sha1>::new_from_slice(salt) else {
                return false;
            };
            mac.update(name.as_bytes());
            mac.verify_slice(hash).is_ok()
        }
    }
}

/// A key's type for the "changed" comparison: RSA keys are one type whatever signature
/// algorithm was negotiated; ECDSA keys differ by curve.
fn key_type(k: &PublicKey) -> String {
    k.algorithm().as_str().to_string()
}

/// The host key algorithms OpenSSH 9 asks for, in its default order; a known key type
/// maps to the algorithms that use it.
const DEFAULT_ORDER: &[(&str, &str)] = &[
    ("ssh-ed25519", "ssh-ed25519"),
    ("ecdsa-sha2-nistp256", "ecdsa-sha2-nistp256"),
    ("ecdsa-sha2-nistp384", "ecdsa-sha2-nistp384"),
    ("ecdsa-sha2-nistp521", "ecdsa-sha2-nistp521"),
    ("ssh-rsa", "rsa-sha2-512,rsa-sha2-256"),
];

/// The host key algorithms to negotiate with `name`: those of its known keys first (in
/// OpenSSH's order), then the rest, as OpenSSH orders them for a host it knows.
pub fn algorithms(entries: &[Entry], name: &str) -> String {
    let known: Vec<String> = entries
        .iter()
        .filter(|e| e.marker().is_none() && matches(e.host_patterns(), name))
        .map(|e| key_type(e.public_key()))
        .collect();
    let (mut first, mut rest): (Vec<&str>, Vec<&str>) = (Vec::new(), Vec::new());
    for (ty, algs) in DEFAULT_ORDER {
        if known.iter().any(|k| k == ty) {
            first.push(algs);
        } else {
            rest.push(algs);
        }
    }
    first.extend(rest);
    first.join(",")
}

/// What known_hosts says of a presented key.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    /// A line for the host lists this key.
    Known,
    /// No line for the host has a key of this type.
    New,
    /// The host's known key of this type is another key.
    Changed,
    /// An `@revoked` line lists this key.
    Revoked,
}

/// Checks `key` presented by `host` on `port`. Off port 22, a key that the `[host]:port`
/// lines do not know but a plain `host` line lists is known too (OpenSSH's rule); a
/// different key under the plain name is not a change.
pub fn check_host(entries: &[Entry], host: &str, port: u16, key: &PublicKey) -> Verdict {
    let v = check(entries, &lookup_name(host, port), key);
    if v == Verdict::New && port != 22 && check(entries, host, key) == Verdict::Known {
        return Verdict::Known;
    }
    v
}

/// Checks `key` (the server's) presented under the lookup name `name`.
pub fn check(entries: &[Entry], name: &str, key: &PublicKey) -> Verdict {
    let host: Vec<&Entry> = entries
        .iter()
        .filter(|e| matches(e.host_patterns(), name))
        .collect();
    let same = |e: &Entry| e.public_key().key_data() == key.key_data();
    if host
        .iter()
        .any(|e| e.marker() == Some(&Marker::Revoked) && same(e))
    {
        return Verdict::Revoked;
    }
    let plain = host.iter().filter(|e| e.marker().is_none());
    let mut changed = false;
    for e in plain {
        if same(e) {
            return Verdict::Known;
        }
        if key_type(e.public_key()) == key_type(key) {
            changed = true;
        }
    }
    if changed {
        Verdict::Changed
    } else {
        Verdict::New
    }
}

/// The line `accept-new` appends for a new host, under [`lookup_name`]: only for a host
/// name [`crate::lab::names::check_host`] takes, so that no line written is a pattern
/// (`*`, `?`, `!`, a `,` list) or holds a blank, a newline or a marker.
pub fn line_for(host: &str, port: u16, key: &PublicKey) -> Result<String, String> {
    crate::lab::names::check_host(host).map_err(|e| format!("not written: {e}"))?;
    let mut k = key.clone();
    k.set_comment("");
    let text = k.to_openssh().map_err(|e| e.to_string())?;
    Ok(format!("{} {}\n", lookup_name(host, port), text.trim_end()))
}

/// Appends `line` to the file, creating it (and its directory) when missing, after a
/// newline when the file does not end with one, so the new line never joins the last.
pub fn append(path: &Path, line: &str) -> std::io::Result<()> {
    use std::io::{Read, Seek, SeekFrom, Write};
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir)?;
    }
    let mut f = std::fs::OpenOptions::new()
        .create(true)
        .read(true)
        .append(true)
        .open(path)?;
    let len = f.metadata()?.len();
    let mut text = String::new();
    if len > 0 {
        f.seek(SeekFrom::Start(len - 1))?;
        let mut last = [0u8];
        f.read_exact(&mut last)?;
        if last[0] != b'\n' {
            text.push('\n');
        }
    }
    text.push_str(line);
    f.write_all(text.as_bytes())
}

#[cfg(test)]
mod tests {
    use super::*;

    const ED: &str =
        "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIJrDTs1t3ZHcqRSuSzFyIOMWK1RyFTE4TlYZtyS/s9xX";
    const ED2: &str =
        "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIEy/l9YFPVsP8IjA5eNwgu5FTICoSouXs8COLfTyGPTh";

    fn key(s: &str) -> PublicKey {
        s.parse().unwrap()
    }

    #[test]
    fn names_patterns_and_hashes() {
        assert_eq!(lookup_name("lab1", 22), "lab1");
        assert_eq!(lookup_name("10.0.0.7", 2222), "[10.0.0.7]:2222");
        let p = |s: &str| s.parse::<HostPatterns>().unwrap();
        assert!(matches(&p("lab1,lab2"), "LAB2"));
        assert!(matches(&p("*.lab"), "a.lab"));
        assert!(!matches(&p("*.lab,!b.lab"), "b.lab"));
        assert!(matches(&p("lab?"), "lab7"));
        assert!(!matches(&p("lab?"), "lab77"));
        assert!(matches(&p("[10.0.0.*]:2222"), "[10.0.0.7]:2222"));
        assert!(!matches(&p("10.0.0.7"), "[10.0.0.7]:2222"));
        // `ssh-keygen -H` of "lab1" with this salt.
        let mut mac = Hmac::<sha1::Sha1>::new_from_slice(b"0123456789abcdef0123").unwrap();
        mac.update(b"lab1");
        let hash: [u8; 20] = mac.finalize().into_bytes().into();
        let hp = HostPatterns::HashedName {
            salt: b"0123456789abcdef0123".to_vec(),
            hash,
        };
        assert!(matches(&hp, "lab1") && !matches(&hp, "lab2"));
    }

    #[test]
    fn a_bad_line_never_hides_the_lines_after_it() {
        let long = format!("lab1 ssh-rsa {}", "A".repeat(5000));
        let text = format!(
            "{long}\n@cert-authority\nlab1\nlab1 ssh-rsa AAAA\r\nlab1\t{ED}\r\n# comment\n"
        );
        let (e, skipped) = parse(&text);
        assert_eq!((e.len(), skipped), (1, 4));
        assert_eq!(check(&e, "lab1", &key(ED)), Verdict::Known);
        assert_eq!(check(&e, "lab1", &key(ED2)), Verdict::Changed);
        assert_eq!(check(&e, "lab2", &key(ED2)), Verdict::New);
    }

    #[test]
    fn revoked_and_ca_lines() {
        let (e, _) = parse(&format!(
            "@revoked * {ED}\nlab1 {ED}\n@cert-authority lab2 {ED2}\n"
        ));
        assert_eq!(check(&e, "lab1", &key(ED)), Verdict::Revoked);
        assert_eq!(check(&e, "lab2", &key(ED2)), Verdict::New);
    }

    #[test]
    fn known_types_are_negotiated_first() {
        let rsa = "lab1 ssh-rsa AAAAB3NzaC1yc2EAAAADAQABAAAAgQDQ";
        let (e, _) = parse(&format!("{rsa}\n"));
        // That line's key is cut short: it does not parse, so nothing is known.
        assert!(algorithms(&e, "lab1").starts_with("ssh-ed25519,"));
        let (e, _) = parse(&format!("lab1 {ED}\n"));
        assert!(algorithms(&e, "lab1").starts_with("ssh-ed25519,"));
        assert_eq!(check(&e, "[lab1]:2222", &key(ED)), Verdict::New);
    }

    #[test]
    fn appending_keeps_the_last_line_whole() {
        let d = std::env::temp_dir().join(format!("lp-kh-{}", std::process::id()));
        let f = d.join("sub/known_hosts");
        let _ = std::fs::remove_dir_all(&d);
        append(&f, &line_for("lab1", 22, &key(ED)).unwrap()).unwrap();
        std::fs::write(&f, format!("lab0 {ED2}")).unwrap(); // no final newline
        append(&f, &line_for("lab1", 2222, &key(ED)).unwrap()).unwrap();
        for bad in ["*,evil.lab.example", "a b", "a\nb", "!x", "|1|x"] {
            assert!(line_for(bad, 22, &key(ED)).is_err(), "{bad:?}");
        }
        let (e, skipped) = parse(&std::fs::read_to_string(&f).unwrap());
        assert_eq!((e.len(), skipped), (2, 0));
        assert_eq!(check(&e, "[lab1]:2222", &key(ED)), Verdict::Known);
        std::fs::remove_dir_all(&d).unwrap();
    }
}
