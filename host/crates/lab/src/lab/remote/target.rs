//! Where a lab machine is and how to reach it: `~/.ssh/config` applied to a name (host, user, port, identities), OpenSSH's `%` tokens quoted for ProxyCommand's shell, and the route (direct, ProxyCommand, jump hosts).

use super::error::RemoteError;
use super::shell::shell_quote;
use crate::lab::names;
use crate::lab::ssh_config;
use crate::text::show;
use std::path::{Path, PathBuf};

/// Where and as whom to connect, after `~/.ssh/config`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Target {
    /// The name the user gave (used in messages and file names).
    pub name: String,
    pub host: String,
    pub user: String,
    pub port: u16,
    pub identities: Vec<PathBuf>,
    /// How the connection is made: directly, through a ProxyCommand, or through jump hosts.
    pub route: Route,
    /// The config's options for this host (and its jump hosts) that labperf does not
    /// apply, one line each naming option, file, line and host: said once by the caller.
    pub unapplied: Vec<String>,
}

/// How a connection to a [`Target`] is made.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub enum Route {
    /// TCP to `host:port`.
    #[default]
    Direct,
    /// `sh -c` of this ProxyCommand (tokens expanded); SSH over its standard input and output.
    Command(String),
    /// Through these jump hosts in order (ProxyJump, `-J`): each reached through the
    /// previous one's `direct-tcpip` channel, the first directly or by its ProxyCommand
    /// (its own `route`), the target through the last.
    Jump(Vec<Target>),
}

pub(super) fn home() -> PathBuf {
    std::env::var_os("HOME")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("/"))
}

pub(super) fn local_user() -> String {
    std::env::var("USER").unwrap_or_else(|_| "root".into())
}

/// Expands OpenSSH's `%` tokens of `s` for `t`: `%h` host name, `%p` port, `%r` remote
/// user, `%n` the name given, `%d` home, `%u` local user, `%%`; others stay as written.
/// With `shell` (a ProxyCommand, which `sh -c` runs) every value is quoted for where it
/// stands in the shell text: outside quotes single-quoted, inside double quotes its `$`,
/// `` ` ``, `"` and `\` escaped, inside single quotes each `'` closed and reopened; so a
/// name reads as one literal word, whatever it holds and however the command quotes it
/// (`nc %h %p`, `nc "%h" %p`, `'%h'`). A backslash before a token means what it would
/// have meant before the first character of the name (names start with a letter or digit).
pub(super) fn expand_tokens(s: &str, t: &Target, shell: bool) -> String {
    #[derive(Clone, Copy, PartialEq)]
    enum Q {
        Out,
        Single,
        Double,
    }
    let mut q = Q::Out;
    // The last character pushed is a backslash that escapes the next one (outside single quotes).
    let mut escaped = false;
    let mut out = String::new();
    let plain = |out: &mut String, c: char, q: &mut Q, escaped: &mut bool| {
        out.push(c);
        if !shell {
            return;
        }
        if std::mem::take(escaped) {
            return;
        }
        match (*q, c) {
            (Q::Out | Q::Double, '\\') => *escaped = true,
            (Q::Out, '\'') => *q = Q::Single,
            (Q::Out, '"') => *q = Q::Double,
            (Q::Single, '\'') | (Q::Double, '"') => *q = Q::Out,
            _ => {}
        }
    };
    let mut chars = s.chars();
    while let Some(c) = chars.next() {
        if c != '%' {
            plain(&mut out, c, &mut q, &mut escaped);
            continue;
        }
        let value = match chars.next() {
            Some('h') => t.host.clone(),
            Some('p') => t.port.to_string(),
            Some('r') => t.user.clone(),
            Some('n') => t.name.clone(),
            Some('d') => home().to_string_lossy().into_owned(),
            Some('u') => local_user(),
            Some('%') => {
                plain(&mut out, '%', &mut q, &mut escaped);
                continue;
            }
            Some(o) => {
                plain(&mut out, '%', &mut q, &mut escaped);
                plain(&mut out, o, &mut q, &mut escaped);
                continue;
            }
            None => {
                plain(&mut out, '%', &mut q, &mut escaped);
                continue;
            }
        };
        if !shell {
            out.push_str(&value);
            continue;
        }
        match q {
            Q::Out => {
                // `\%h` is the name's first character escaped: the name itself.
                if std::mem::take(&mut escaped) {
                    out.pop();
                }
                out.push_str(&shell_quote(&value));
            }
            Q::Double => {
                // `"\%h"` keeps its backslash (OpenSSH's shell sees `\h`): a literal one.
                if std::mem::take(&mut escaped) {
                    out.push('\\');
                }
                for c in value.chars() {
                    if matches!(c, '$' | '`' | '"' | '\\') {
                        out.push('\\');
                    }
                    out.push(c);
                }
            }
            Q::Single => out.push_str(&value.replace('\'', "'\\''")),
        }
    }
    out
}

/// At most this many jump hosts on the way to one machine (a ProxyJump loop stops here).
const MAX_HOPS: usize = 8;

/// Parses `[user@]host[:port]`, applying the matching blocks of `config` (HostName, User,
/// Port, IdentityFile, ProxyJump, ProxyCommand). Explicit parts win over the config.
pub fn parse_target(spec: &str, config: Option<&Path>) -> Result<Target, RemoteError> {
    target_via(spec, "--host", config, None)
}

/// [`parse_target`], with `jump` (`-J`: `[user@]host[:port]`, comma-separated, or `none`)
/// in place of the config's ProxyJump and ProxyCommand for the target, as OpenSSH's `-J`.
/// `origin` says where `spec` came from (`--host`, a hosts file's entry), for a refused
/// name: every host and user name on the way (the spec's, the config's HostName and User,
/// every jump host's) is checked by [`names`] before it is used.
pub fn target_via(
    spec: &str,
    origin: &str,
    config: Option<&Path>,
    jump: Option<&str>,
) -> Result<Target, RemoteError> {
    let path = config
        .map(PathBuf::from)
        .unwrap_or_else(|| home().join(".ssh/config"));
    let cfg = ssh_config::Config::read(&path).map_err(|why| RemoteError::Config {
        path: path.clone(),
        why,
    })?;
    let mut notes = Vec::new();
    let mut t = resolve(spec, origin, cfg.as_ref(), &path, jump, 0, &mut notes)?;
    let mut seen = std::collections::HashSet::new();
    notes.retain(|n| seen.insert(n.clone()));
    t.unapplied = notes;
    Ok(t)
}

/// A name refused, said with where it came from.
pub(super) fn refused(origin: &str) -> impl Fn(names::BadName) -> RemoteError + '_ {
    move |name| RemoteError::BadName {
        origin: origin.to_string(),
        name,
    }
}

/// One host of a route: its config, then its own way there (unless `jump` replaces it).
pub(super) fn resolve(
    spec: &str,
    origin: &str,
    cfg: Option<&ssh_config::Config>,
    path: &Path,
    jump: Option<&str>,
    depth: usize,
    notes: &mut Vec<String>,
) -> Result<Target, RemoteError> {
    use ssh_config::Proxy;
    let config = |why| RemoteError::Config {
        path: path.to_path_buf(),
        why,
    };
    if depth > MAX_HOPS {
        return Err(config(format!(
            "the way to {} takes over {MAX_HOPS} jump hosts (a ProxyJump loop?)",
            show(spec)
        )));
    }
    let (user, name, port) = names::split_spec(spec);
    names::check_host(&name).map_err(refused(origin))?;
    if let Some(u) = &user {
        names::check_user(u).map_err(refused(origin))?;
    }
    let l = match cfg {
        Some(c) => c.lookup(&name).map_err(config)?,
        None => Default::default(),
    };
    let at = |keyword: &str, line: usize| {
        format!(
            "{keyword} for {} in {} line {line}",
            show(&name),
            path.display()
        )
    };
    notes.extend(
        l.unapplied
            .iter()
            .map(|(u, why)| format!("{u} (for {}) is not applied{why}", show(&name))),
    );
    let mut t = Target {
        name: name.clone(),
        host: l.host(&name),
        user: match user {
            Some(u) => u,
            None => match &l.user {
                Some(u) => {
                    names::check_user(u).map_err(refused(&at("User", l.user_line)))?;
                    u.clone()
                }
                None => {
                    let u = local_user();
                    names::check_user(&u).map_err(refused("$USER (the local user)"))?;
                    u
                }
            },
        },
        port: port.or(l.port).unwrap_or(22),
        identities: Vec::new(),
        route: Route::Direct,
        unapplied: Vec::new(),
    };
    if l.host_name.is_some() {
        names::check_host(&t.host).map_err(refused(&at("HostName", l.host_name_line)))?;
    }
    t.identities = l
        .identities
        .iter()
        .map(|f| {
            let f = f.to_string_lossy();
            match f.strip_prefix("~/") {
                Some(rest) => home().join(expand_tokens(rest, &t, false)),
                None => PathBuf::from(expand_tokens(&f, &t, false)),
            }
        })
        .collect();
    let (proxy, hops_from) = match jump {
        Some(j) if j.eq_ignore_ascii_case("none") => (Proxy::None, String::new()),
        Some(j) => (
            Proxy::Jump(j.split(',').map(str::to_string).collect()),
            "-J".to_string(),
        ),
        None => (
            l.proxy.unwrap_or(Proxy::None),
            at("ProxyJump", l.proxy_line),
        ),
    };
    t.route = match proxy {
        Proxy::None => Route::Direct,
        Proxy::Command(c) => Route::Command(expand_tokens(&c, &t, true)),
        Proxy::Jump(hops) => jump_chain(&hops, &hops_from, cfg, path, &name, depth, notes)?,
    };
    Ok(t)
}

/// The jump hosts of a ProxyJump (or `-J`) to `name`, in order: the first by its own
/// config (its own way there included), the others reached through the one before them,
/// as OpenSSH's `ssh -J` reaches them; each name checked as said by `origin`.
pub(super) fn jump_chain(
    hops: &[String],
    origin: &str,
    cfg: Option<&ssh_config::Config>,
    path: &Path,
    name: &str,
    depth: usize,
    notes: &mut Vec<String>,
) -> Result<Route, RemoteError> {
    let config = |why| RemoteError::Config {
        path: path.to_path_buf(),
        why,
    };
    let hops: Vec<&str> = hops
        .iter()
        .map(|h| h.trim())
        .filter(|h| !h.is_empty())
        .collect();
    let Some(first) = hops.first() else {
        return Err(config(format!("an empty ProxyJump for {}", show(name))));
    };
    let mut first = resolve(first, origin, cfg, path, None, depth + 1, notes)?;
    let mut chain = match std::mem::take(&mut first.route) {
        Route::Jump(before) => before,
        r => {
            first.route = r;
            Vec::new()
        }
    };
    chain.push(first);
    for h in &hops[1..] {
        chain.push(resolve(
            h,
            origin,
            cfg,
            path,
            Some("none"),
            depth + 1,
            notes,
        )?);
    }
    if chain.len() > MAX_HOPS {
        return Err(config(format!(
            "the way to {} takes over {MAX_HOPS} jump hosts",
            show(name)
        )));
    }
    Ok(Route::Jump(chain))
}

/// How host keys are checked.
#[derive(Debug, Clone)]
pub struct HostKeys {
    pub file: PathBuf,
    /// Record unknown hosts (OpenSSH's `StrictHostKeyChecking=accept-new`); changed keys are always refused.
    pub accept_new: bool,
}

impl Default for HostKeys {
    fn default() -> Self {
        HostKeys {
            file: home().join(".ssh/known_hosts"),
            accept_new: false,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn proxycommand_tokens_are_quoted_for_where_they_stand() {
        let d = std::env::temp_dir().join(format!("lp-tokens-{}", std::process::id()));
        std::fs::create_dir_all(&d).unwrap();
        let f = d.join("pwned");
        let evil = format!(
            "a$(touch {})'\"`touch {}`\\b; touch {} #",
            f.display(),
            f.display(),
            f.display()
        );
        let t = Target {
            name: format!("n{evil}"),
            host: format!("h{evil}"),
            user: format!("u{evil}"),
            port: 2222,
            identities: Vec::new(),
            route: Route::Direct,
            unapplied: Vec::new(),
        };
        let (h, u, n) = (&t.host, &t.user, &t.name);
        for (cmd, want) in [
            ("printf '%%s|' %h %r %n %p", format!("{h}|{u}|{n}|2222|")),
            ("printf '%%s|' \"%h\" \"x%r:%p\"", format!("{h}|x{u}:2222|")),
            ("printf '%%s|' '%h' 'x%n'", format!("{h}|x{n}|")),
            ("printf '%%s|' \\%h \"\\%h\"", format!("{h}|\\{h}|")),
            ("printf '%%s|' %h%%%x", format!("{h}%%x|")),
        ] {
            let line = expand_tokens(cmd, &t, true);
            let out = std::process::Command::new("sh")
                .arg("-c")
                .arg(&line)
                .output()
                .unwrap();
            assert_eq!(
                String::from_utf8_lossy(&out.stdout),
                want,
                "{cmd} as {line}"
            );
            assert!(!f.exists(), "{cmd} as {line} ran a name");
        }
        // Not for a shell (IdentityFile): the values as they are.
        assert_eq!(expand_tokens("k-%r", &t, false), format!("k-{u}"));
        std::fs::remove_dir_all(d).unwrap();
    }

    #[test]
    fn names_are_refused_with_where_they_came_from() {
        let d = std::env::temp_dir().join(format!("lp-badnames-{}", std::process::id()));
        std::fs::create_dir_all(&d).unwrap();
        let cfg = d.join("config");
        std::fs::write(&cfg, "Host bad-hn\n  HostName x$(id)\nHost bad-user\n  User r;id\nHost bad-jump\n  ProxyJump ok,j`id`\nHost ok\n  HostName 10.0.0.1\n").unwrap();
        let e = |spec: &str, jump: Option<&str>| {
            target_via(spec, "--host", Some(&cfg), jump)
                .unwrap_err()
                .to_string()
        };
        assert!(e("a$(touch x)", None)
            .starts_with("--host: the host name 'a$(touch x)' has '$' at character 2"));
        assert!(
            e("r$(x)@ok", None).starts_with("--host: the user name 'r$(x)' has '$' at character 2")
        );
        let cfgs = cfg.display();
        assert!(e("bad-hn", None).starts_with(&format!(
            "HostName for bad-hn in {cfgs} line 2: the host name 'x$(id)'"
        )));
        assert!(e("bad-user", None).starts_with(&format!(
            "User for bad-user in {cfgs} line 4: the user name 'r;id'"
        )));
        assert!(e("bad-jump", None).starts_with(&format!(
            "ProxyJump for bad-jump in {cfgs} line 6: the host name 'j`id`'"
        )));
        assert!(
            e("ok", Some("j|id,ok")).starts_with("-J: the host name 'j|id' has '|' at character 2")
        );
        assert!(e("ok", Some("ok,*")).starts_with("-J: the host name '*' has '*' at character 1"));
        assert!(target_via("ok", "--host", Some(&cfg), None).is_ok());
        std::fs::remove_dir_all(d).unwrap();
    }

    #[test]
    fn targets_and_ssh_config() {
        let d = std::env::temp_dir().join(format!("lp-sshcfg-{}", std::process::id()));
        std::fs::create_dir_all(&d).unwrap();
        let cfg = d.join("config");
        std::fs::write(&cfg, "Host lab1\n  HostName 10.1.2.3\n  User bench\n  Port 2200\n  IdentityFile /keys/lab1\n\nHost *\n  User fallback\n").unwrap();
        let t = parse_target("lab1", Some(&cfg)).unwrap();
        assert_eq!(
            (t.host.as_str(), t.user.as_str(), t.port),
            ("10.1.2.3", "bench", 2200)
        );
        assert_eq!(t.identities, vec![PathBuf::from("/keys/lab1")]);
        let t = parse_target("me@lab1:2222", Some(&cfg)).unwrap();
        assert_eq!((t.user.as_str(), t.port), ("me", 2222));
        let t = parse_target("other", Some(&cfg)).unwrap();
        assert_eq!(
            (t.host.as_str(), t.user.as_str(), t.port),
            ("other", "fallback", 22)
        );
        std::fs::remove_dir_all(d).unwrap();
    }

    #[test]
    fn routes_through_jump_hosts_as_openssh_builds_them() {
        let d = std::env::temp_dir().join(format!("lp-sshjump-{}", std::process::id()));
        std::fs::create_dir_all(&d).unwrap();
        let cfg = d.join("config");
        std::fs::write(&cfg, "Host t\n  HostName 10.0.0.9\n  ProxyJump a,me@b:2200\nHost a\n  ProxyJump c\n  Port 2201\nHost b\n  ProxyJump ignored\n  HostName 10.0.0.2\nHost c\n  HostName gw\n  User u\n  ProxyCommand exec nc %h %p # as %r%%\nHost l1\n  ProxyJump l2\nHost l2\n  ProxyJump l1\n").unwrap();
        let t = parse_target("t", Some(&cfg)).unwrap();
        let Route::Jump(hops) = &t.route else {
            panic!("{t:?}")
        };
        let names: Vec<(&str, &str, u16)> = hops
            .iter()
            .map(|h| (h.name.as_str(), h.host.as_str(), h.port))
            .collect();
        assert_eq!(
            names,
            [("c", "gw", 22), ("a", "a", 2201), ("b", "10.0.0.2", 2200)]
        );
        assert_eq!(
            hops[0].route,
            Route::Command("exec nc 'gw' '22' # as 'u'%".into())
        );
        assert!(hops[1..].iter().all(|h| h.route == Route::Direct));
        assert_eq!(hops[2].user, "me");
        // -J replaces the config's way; `none` goes directly.
        let t = target_via("t", "-", Some(&cfg), Some("root@x:1")).unwrap();
        let Route::Jump(hops) = &t.route else {
            panic!("{t:?}")
        };
        assert_eq!(
            (hops.len(), hops[0].user.as_str(), hops[0].port),
            (1, "root", 1)
        );
        assert_eq!(
            target_via("t", "-", Some(&cfg), Some("none"))
                .unwrap()
                .route,
            Route::Direct
        );
        // IPv6 hops and targets, bracketed with a port (`ssh -J` takes them so).
        let t = target_via(
            "u@[::1]:2200",
            "-",
            Some(&cfg),
            Some("me@[fe80::2]:2022,[::3]"),
        )
        .unwrap();
        assert_eq!(
            (t.host.as_str(), t.user.as_str(), t.port),
            ("::1", "u", 2200)
        );
        let Route::Jump(hops) = &t.route else {
            panic!("{t:?}")
        };
        let hops: Vec<(&str, &str, u16)> = hops
            .iter()
            .map(|h| (h.host.as_str(), h.user.as_str(), h.port))
            .collect();
        assert_eq!(hops[0], ("fe80::2", "me", 2022));
        assert_eq!((hops[1].0, hops[1].2), ("::3", 22));
        assert_eq!(names::split_spec("::1"), (None, "::1".into(), None));
        // A loop is refused, not followed for ever.
        let e = parse_target("l1", Some(&cfg)).unwrap_err().to_string();
        assert!(e.contains("jump hosts"), "{e}");
        std::fs::remove_dir_all(d).unwrap();
    }
}
