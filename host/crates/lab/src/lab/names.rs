//! Host and user names checked before any use (a ProxyCommand's `%h`/`%r`/`%n`, a
//! known_hosts line, a hosts file or inventory, `--host`, `-J`), as OpenSSH's client checks
//! them since CVE-2023-51385 (`valid_hostname`, `valid_ruser` in its `ssh.c`): no shell
//! metacharacter, blank or control character, no leading `-`. Host names are held to the
//! characters a DNS name or an IP address has; a refusal says which character, where.

use crate::text::show;

/// The longest host name taken (DNS names are at most 253 characters; an IPv6 address
/// with a zone fits too).
pub const MAX_HOST: usize = 255;
/// The longest user name taken.
pub const MAX_USER: usize = 255;

/// Characters a host name may hold besides ASCII letters and digits: DNS's `-` and `.`,
/// `_` (used in internal names), `:` of an IPv6 address and `%` of its zone.
const HOST_EXTRA: &str = "-._:%";

/// Characters a user name may not hold (besides blanks and control characters): OpenSSH's
/// shell metacharacters, and the glob and history characters a shell also reads.
const USER_REFUSED: &str = "'`\"$\\;&<>|(){}[]*?!#~";

/// A name refused, and why.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("the {what} '{shown}' {problem}", shown = show(name))]
pub struct BadName {
    /// "host name" or "user name".
    pub what: &'static str,
    pub name: String,
    /// What is wrong: the character and its position, or the length.
    pub problem: String,
}

fn bad(what: &'static str, name: &str, problem: String) -> BadName {
    BadName {
        what,
        name: name.to_string(),
        problem,
    }
}

/// `c` at 1-based character position `pos`, said unambiguously (controls escaped).
fn at(c: char, pos: usize) -> String {
    let shown = match c {
        ' ' => "a space".to_string(),
        '\t' => "a tab".to_string(),
        c if c.is_control() => format!("the control character {:?}", c),
        c => format!("'{}'", show(&c.to_string())),
    };
    format!("has {shown} at character {pos}")
}

/// A host name as labperf connects to it: ASCII letters, digits and `-._:%`, not starting
/// with `-`, at most [`MAX_HOST`] characters.
pub fn check_host(name: &str) -> Result<(), BadName> {
    // One ':' is no IPv6 address (they have two at least): [`split_spec`] left a port that
    // is no number from 1 to 65535 in the name.
    if let Some((_, port)) = name.split_once(':').filter(|(_, p)| !p.contains(':')) {
        return Err(bad(
            "host name",
            name,
            format!("has the port ':{port}', which is no number from 1 to 65535"),
        ));
    }
    check(
        "host name",
        name,
        |c| c.is_ascii_alphanumeric() || HOST_EXTRA.contains(c),
        "a host name holds ASCII letters, digits, '-', '.', '_', and ':' and '%' of an IPv6 address (OpenSSH refuses shell metacharacters in names the same way)",
        MAX_HOST,
    )
}

/// A user name to log in as: no blank, control character or character of
/// [`USER_REFUSED`], not starting with `-`, at most [`MAX_USER`] characters.
pub fn check_user(name: &str) -> Result<(), BadName> {
    check(
        "user name",
        name,
        |c| !(c.is_whitespace() || c.is_control() || USER_REFUSED.contains(c)),
        &format!("a user name holds no blank, control character or shell metacharacter ({USER_REFUSED}), as OpenSSH requires"),
        MAX_USER,
    )
}

/// The rule both names follow: not empty, each character `allowed` (else `rule` says why),
/// not starting with `-`, at most `max` characters.
fn check(
    what: &'static str,
    name: &str,
    allowed: impl Fn(char) -> bool,
    rule: &str,
    max: usize,
) -> Result<(), BadName> {
    if name.is_empty() {
        return Err(bad(what, name, "is empty".into()));
    }
    if let Some((i, c)) = name.chars().enumerate().find(|&(_, c)| !allowed(c)) {
        return Err(bad(what, name, format!("{}: {rule}", at(c, i + 1))));
    }
    if name.starts_with('-') {
        return Err(bad(
            what,
            name,
            "starts with '-' (a program would read it as an option)".into(),
        ));
    }
    if name.chars().count() > max {
        return Err(bad(what, name, format!("is longer than {max} characters")));
    }
    Ok(())
}

/// Splits `[user@]host[:port]` (or `ssh://[user@]host[:port]`, as ProxyJump takes it); an
/// IPv6 address with a port is bracketed, `[::1]:2222`, and comes out without its brackets.
pub fn split_spec(spec: &str) -> (Option<String>, String, Option<u16>) {
    let spec = spec.strip_prefix("ssh://").unwrap_or(spec);
    let (user, rest) = match spec.rsplit_once('@') {
        Some((u, r)) => (Some(u.to_string()), r),
        None => (None, spec),
    };
    if let Some((h, after)) = rest.strip_prefix('[').and_then(|r| r.split_once(']')) {
        match after.strip_prefix(':').map(str::parse::<u16>) {
            Some(Ok(p)) if p > 0 => return (user, h.to_string(), Some(p)),
            None if after.is_empty() => return (user, h.to_string(), None),
            _ => {}
        }
    }
    match rest.rsplit_once(':') {
        Some((h, p)) if !h.contains(':') && p.parse::<u16>().is_ok_and(|p| p > 0) => {
            (user, h.to_string(), p.parse().ok())
        }
        _ => (user, rest.to_string(), None),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_port_that_is_no_port_is_said_as_such() {
        for spec in ["x.example:99999", "j:abc", "root@lab1:0", "lab1:"] {
            let (_, host, port) = split_spec(spec);
            assert_eq!(port, None, "{spec}");
            let e = check_host(&host).unwrap_err();
            assert!(
                e.problem.starts_with("has the port ':")
                    && e.problem.ends_with("which is no number from 1 to 65535"),
                "{spec}: {e:?}"
            );
        }
        assert_eq!(
            split_spec("root@lab1:2222"),
            (Some("root".into()), "lab1".into(), Some(2222))
        );
        assert!(check_host("fe80::1%eth0").is_ok());
    }

    #[test]
    fn host_names_as_openssh_takes_them() {
        for ok in [
            "lab1",
            "node-3.lab.example",
            "10.0.0.5",
            "::1",
            "fe80::1%eth0",
            "build_host",
        ] {
            assert_eq!(check_host(ok), Ok(()), "{ok}");
        }
        let e = check_host("node$(touch /tmp/pwned).lab.example").unwrap_err();
        assert_eq!(
            e.to_string(),
            "the host name 'node$(touch /tmp/pwned).lab.example' has '$' at character 5: a host name holds ASCII letters, digits, '-', '.', '_', and ':' and '%' of an IPv6 address (OpenSSH refuses shell metacharacters in names the same way)"
        );
        assert!(check_host("*,evil.lab.example")
            .unwrap_err()
            .problem
            .starts_with("has '*' at character 1"));
        assert!(check_host("a b")
            .unwrap_err()
            .problem
            .starts_with("has a space at character 2"));
        assert!(check_host("a\nb")
            .unwrap_err()
            .problem
            .starts_with("has the control character '\\n' at character 2"));
        assert!(check_host("-oProxyCommand=x").is_err());
        assert!(check_host("-x")
            .unwrap_err()
            .problem
            .starts_with("starts with '-'"));
        assert_eq!(check_host("").unwrap_err().problem, "is empty");
        assert!(check_host(&"a".repeat(256)).is_err());
        assert!(check_host("lab`id`").is_err() && check_host("lab;id").is_err());
        assert!(check_host("lab,other").is_err() && check_host("lab?").is_err());
    }

    #[test]
    fn user_names_as_openssh_takes_them() {
        for ok in ["root", "first.last@corp.example", "svc-lab_1", "Ünïcode"] {
            assert_eq!(check_user(ok), Ok(()), "{ok}");
        }
        let e = check_user("root$(touch x)").unwrap_err();
        assert!(e.problem.starts_with("has '$' at character 5"), "{e}");
        for bad in ["a b", "a;b", "a|b", "`id`", "a'b", "a\"b", "a\\", "-l", ""] {
            assert!(check_user(bad).is_err(), "{bad}");
        }
    }
}
