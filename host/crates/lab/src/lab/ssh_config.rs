//! `~/.ssh/config` (or `--ssh-config`) read as OpenSSH reads it, for the options labperf
//! applies: `Host` patterns (`*`, `?`, `!` negation) and simple `Match` blocks (`all`,
//! `host`, `originalhost`, each negatable), first value wins, HostName (`%h`), User, Port,
//! IdentityFile (all of them), ProxyJump and ProxyCommand (whichever comes first).
//!
//! Every other option of a block that applies to the host is named in
//! [`Lookup::unapplied`], unless it is in [`HARMLESS`]: labperf never ignores one silently.

use std::path::{Path, PathBuf};

/// Options labperf does not apply but whose absence changes neither where it connects, nor
/// which keys it trusts, nor how it logs in with keys (`-q` silences nothing of these).
pub const HARMLESS: &[&str] = &[
    "addkeystoagent",
    "batchmode",
    "challengeresponseauthentication",
    "checkhostip",
    "compression",
    "connectionattempts",
    "controlmaster",
    "controlpath",
    "controlpersist",
    "escapechar",
    "exitonforwardfailure",
    "forwardagent",
    "forwardx11",
    "forwardx11trusted",
    "gssapiauthentication",
    "gssapidelegatecredentials",
    "hashknownhosts",
    "ignoreunknown",
    "kbdinteractiveauthentication",
    "loglevel",
    "passwordauthentication",
    "preferredauthentications",
    "pubkeyauthentication",
    "requesttty",
    "serveralivecountmax",
    "serveraliveinterval",
    "tcpkeepalive",
    "updatehostkeys",
    "usekeychain",
    "visualhostkey",
];

/// How the connection to a host is made, by its config.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Proxy {
    /// `ProxyJump`: the hops, in order, each `[user@]host[:port]` (or `ssh://` form).
    Jump(Vec<String>),
    /// `ProxyCommand`, its tokens not yet expanded.
    Command(String),
    /// `ProxyJump none` or `ProxyCommand none`: directly.
    None,
}

/// What the config says for one host.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Lookup {
    pub host_name: Option<String>,
    pub user: Option<String>,
    pub port: Option<u16>,
    pub identities: Vec<PathBuf>,
    pub proxy: Option<Proxy>,
    /// Options of blocks applying to this host that labperf does not apply, each as
    /// (`FILE line N: Keyword` or the `Match` line, why or nothing), to be said once.
    pub unapplied: Vec<(String, &'static str)>,
    /// The lines HostName, User and the ProxyJump or ProxyCommand came from (0: none), for
    /// a message about their value.
    pub host_name_line: usize,
    pub user_line: usize,
    pub proxy_line: usize,
}

struct Line {
    number: usize,
    keyword: String,
    /// The keyword as written, for messages.
    spelled: String,
    args: Vec<String>,
    /// The text after the keyword and its separator, as written (ProxyCommand's value).
    rest: String,
    /// The line is not UTF-8: read with U+FFFD for its bad bytes, refused if applied.
    lossy: bool,
}

/// A parsed config file.
pub struct Config {
    path: PathBuf,
    lines: Vec<Line>,
}

/// Splits a line's arguments as OpenSSH's `argv_split`: blanks separate, single and double
/// quotes group, a backslash escapes a quote or backslash, an unquoted `#` starting a word
/// ends the line.
fn split_args(s: &str) -> Result<Vec<String>, String> {
    let mut out = Vec::new();
    let mut chars = s.chars().peekable();
    loop {
        while chars.peek().is_some_and(|c| c.is_whitespace()) {
            chars.next();
        }
        match chars.peek() {
            None | Some('#') => return Ok(out),
            _ => {}
        }
        let mut word = String::new();
        let mut quote: Option<char> = None;
        while let Some(&c) = chars.peek() {
            if quote.is_none() && c.is_whitespace() {
                break;
            }
            chars.next();
            match (c, quote) {
                ('\\', _) if matches!(chars.peek(), Some('\'' | '"' | '\\')) => {
                    word.push(chars.next().unwrap_or('\\'));
                }
                ('\'' | '"', None) => quote = Some(c),
                (q, Some(open)) if q == open => quote = None,
                _ => word.push(c),
            }
        }
        if quote.is_some() {
            return Err("unterminated quote".into());
        }
        out.push(word);
    }
}

/// OpenSSH's `match_pattern`: `*` any run, `?` one character; case-sensitive as `Host`
/// lines match the name given (`Host lab1` does not match `LAB1`), ASCII case-insensitive
/// when `fold`, as `Match host` and `Match originalhost` match (OpenSSH's `match_hostname`).
pub fn glob(pattern: &str, name: &str, fold: bool) -> bool {
    // Iterative, back to the last `*` only: at most pattern × name steps and no recursion
    // (a pattern of many stars, or a long one, costs no more and overflows no stack).
    let (pattern, name) = (pattern.as_bytes(), name.as_bytes());
    let eq = |c: u8, d: u8| c == d || fold && c.eq_ignore_ascii_case(&d);
    let (mut p, mut n) = (0, 0);
    let (mut star, mut mark) = (None, 0);
    while n < name.len() {
        if p < pattern.len() && pattern[p] == b'*' {
            star = Some(p);
            mark = n;
            p += 1;
        } else if p < pattern.len() && (pattern[p] == b'?' || eq(pattern[p], name[n])) {
            p += 1;
            n += 1;
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

/// A pattern list as `Host` takes it (and `Match host`, comma-separated, with `fold`):
/// matches when one pattern matches and no negated (`!`) one does.
pub fn pattern_list_matches<'a>(
    patterns: impl IntoIterator<Item = &'a str>,
    name: &str,
    fold: bool,
) -> bool {
    let mut hit = false;
    for p in patterns {
        if let Some(neg) = p.strip_prefix('!') {
            if glob(neg, name, fold) {
                return false;
            }
        } else if glob(p, name, fold) {
            hit = true;
        }
    }
    hit
}

impl Config {
    /// Reads `path`; `None` when there is no such file.
    pub fn read(path: &Path) -> Result<Option<Config>, String> {
        if !path.is_file() {
            return Ok(None);
        }
        use std::io::Read;
        let mut bytes = Vec::new();
        std::fs::File::open(path)
            .and_then(|f| f.take(1 << 20).read_to_end(&mut bytes))
            .map_err(|e| e.to_string())?;
        Config::parse_bytes(&bytes, path).map(Some)
    }

    pub fn parse(text: &str, path: &Path) -> Result<Config, String> {
        Config::parse_bytes(text.as_bytes(), path)
    }

    /// The config's bytes, as OpenSSH reads them: a line that is not UTF-8 (a comment in
    /// Latin-1, another host's block) is no error unless labperf applies it to the host.
    pub fn parse_bytes(bytes: &[u8], path: &Path) -> Result<Config, String> {
        let mut lines = Vec::new();
        for (i, raw) in bytes.split(|b| *b == b'\n').enumerate() {
            let raw = raw.strip_suffix(b"\r").unwrap_or(raw);
            let text = String::from_utf8_lossy(raw);
            let lossy = matches!(text, std::borrow::Cow::Owned(_));
            let s = text.trim();
            if s.is_empty() || s.starts_with('#') {
                continue;
            }
            let end = s
                .find(|c: char| c.is_whitespace() || c == '=')
                .unwrap_or(s.len());
            let (spelled, after) = s.split_at(end);
            let after = after.trim_start();
            let after = after.strip_prefix('=').unwrap_or(after).trim_start();
            let args = split_args(after).map_err(|e| format!("line {}: {e}", i + 1))?;
            lines.push(Line {
                number: i + 1,
                keyword: spelled.to_ascii_lowercase(),
                spelled: spelled.to_string(),
                args,
                rest: after.to_string(),
                lossy,
            });
        }
        Ok(Config {
            path: path.to_path_buf(),
            lines,
        })
    }

    /// Whether a `Match` line applies (`Some`), or cannot be applied (`None`: a criterion
    /// labperf does not evaluate). `host` is the host name so far (HostName, else the
    /// name), `original` the name given.
    fn match_applies(args: &[String], host: &str, original: &str) -> Option<bool> {
        let mut all = true;
        let mut i = 0;
        if args.is_empty() {
            return None;
        }
        while i < args.len() {
            let (neg, crit) = match args[i].strip_prefix('!') {
                Some(c) => (true, c.to_ascii_lowercase()),
                None => (false, args[i].to_ascii_lowercase()),
            };
            let hit = match crit.as_str() {
                "all" => true,
                "host" | "originalhost" => {
                    let list = args.get(i + 1)?;
                    i += 1;
                    let name = if crit == "host" { host } else { original };
                    pattern_list_matches(list.split(','), name, true)
                }
                _ => return None,
            };
            all &= hit != neg;
            i += 1;
        }
        Some(all)
    }

    /// The options for `name` (the name given, before HostName).
    pub fn lookup(&self, name: &str) -> Result<Lookup, String> {
        let mut l = Lookup::default();
        let mut active = true;
        // `ProxyJump none` seen: later ProxyJumps pass, a later ProxyCommand still applies
        // (OpenSSH 9's `ssh -G`); `ProxyCommand none` ends both.
        let mut jump_none = false;
        let file = self.path.display();
        let bad =
            |line: &Line, why: &str| format!("{file} line {}: {} {why}", line.number, line.spelled);
        for line in &self.lines {
            let first = line.args.first().map(String::as_str);
            match line.keyword.as_str() {
                "host" => {
                    active =
                        pattern_list_matches(line.args.iter().map(String::as_str), name, false);
                    continue;
                }
                "match" => {
                    let host = l.host_name.as_deref().unwrap_or(name);
                    active = match Self::match_applies(&line.args, host, name) {
                        Some(a) => a,
                        None => {
                            l.unapplied.push((
                                format!(
                                    "{file} line {}: the block `Match {}`",
                                    line.number, line.rest
                                ),
                                ": labperf evaluates only `Match all`, `host` and `originalhost`",
                            ));
                            false
                        }
                    };
                    continue;
                }
                _ if !active => continue,
                _ => {}
            }
            let Some(value) = first else {
                return Err(bad(line, "has no value"));
            };
            let applied = matches!(
                line.keyword.as_str(),
                "hostname" | "user" | "port" | "identityfile" | "proxyjump" | "proxycommand"
            );
            if line.lossy && applied {
                return Err(bad(
                    line,
                    "is not UTF-8 text (labperf takes this option's value as UTF-8): write it in UTF-8",
                ));
            }
            match line.keyword.as_str() {
                "hostname" => {
                    if l.host_name.is_none() {
                        let v = value.replace("%%", "\u{0}").replace("%h", name);
                        l.host_name = Some(v.replace('\u{0}', "%"));
                        l.host_name_line = line.number;
                    }
                }
                "user" => {
                    if l.user.is_none() {
                        l.user = Some(value.to_string());
                        l.user_line = line.number;
                    }
                }
                "port" => {
                    if l.port.is_none() {
                        let p = value
                            .parse::<u16>()
                            .ok()
                            .filter(|p| *p > 0)
                            .ok_or_else(|| bad(line, "is not a port number"))?;
                        l.port = Some(p);
                    }
                }
                "identityfile" => l.identities.push(PathBuf::from(value)),
                "proxyjump" => {
                    if l.proxy.is_none() && !jump_none {
                        if value.eq_ignore_ascii_case("none") {
                            jump_none = true;
                        } else {
                            l.proxy =
                                Some(Proxy::Jump(value.split(',').map(str::to_string).collect()));
                            l.proxy_line = line.number;
                        }
                    }
                }
                "proxycommand" => {
                    if l.proxy.is_none() {
                        l.proxy_line = line.number;
                        l.proxy = Some(if value.eq_ignore_ascii_case("none") {
                            Proxy::None
                        } else {
                            Proxy::Command(line.rest.clone())
                        });
                    }
                }
                "include" => l.unapplied.push((
                    format!("{file} line {}: {}", line.number, line.spelled),
                    ": labperf does not read included files, nor finds the hosts they define",
                )),
                k if HARMLESS.contains(&k) => {}
                _ => l
                    .unapplied
                    .push((format!("{file} line {}: {}", line.number, line.spelled), "")),
            }
        }
        if jump_none && l.proxy.is_none() {
            l.proxy = Some(Proxy::None);
        }
        Ok(l)
    }
}

impl Lookup {
    /// The host to connect to: HostName, else the name given; lowercased as OpenSSH
    /// lowercases it once the config is read.
    pub fn host(&self, name: &str) -> String {
        self.host_name
            .as_deref()
            .unwrap_or(name)
            .to_ascii_lowercase()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cfg(text: &str) -> Config {
        Config::parse(text, Path::new("cfg")).unwrap()
    }

    #[test]
    fn patterns_negation_and_first_value_wins() {
        let c = cfg("Host !bad *.lab lab?\n  User first\n  Port=2200\nHost *\n  User second\n  Port 22\n  IdentityFile a\nHost lab1\n  IdentityFile b\n");
        let l = c.lookup("x.lab").unwrap();
        assert_eq!((l.user.as_deref(), l.port), (Some("first"), Some(2200)));
        let l = c.lookup("lab1").unwrap();
        assert_eq!(l.user.as_deref(), Some("first"));
        assert_eq!(l.identities, vec![PathBuf::from("a"), PathBuf::from("b")]);
        let l = c.lookup("lab12").unwrap();
        assert_eq!(l.user.as_deref(), Some("second"));
        let c = cfg("Host !bad *\n  User u\n");
        assert_eq!(c.lookup("bad").unwrap().user, None);
        assert!(glob("LAB*", "lab1", true) && !glob("LAB*", "lab1", false));
        assert!(!glob("a?c", "ac", false));
        assert!(glob("*a*b", "xaxxb", false) && !glob("*a*b", "xaxxbc", false));
        assert!(glob("**", "", false) && glob("a*", "a", false) && !glob("?", "", false));
        // Many stars and a long name: a few million steps, not an exponential search.
        let t = std::time::Instant::now();
        assert!(!glob(
            &format!("{}b", "*a".repeat(40)),
            &"a".repeat(30_000),
            false
        ));
        assert!(glob(&"a".repeat(200_000), &"a".repeat(200_000), false));
        assert!(
            t.elapsed() < std::time::Duration::from_secs(5),
            "{:?}",
            t.elapsed()
        );
    }

    #[test]
    fn proxies_first_wins_and_none() {
        let c = cfg("Host t\n  ProxyJump a,me@b:2222\n  ProxyCommand nc %h %p\nHost c\n  ProxyCommand exec nc -q0 \"%h\" %p # not a comment here\n  ProxyJump x\nHost d\n  ProxyJump none\nHost *\n  ProxyJump z\n");
        assert_eq!(
            c.lookup("t").unwrap().proxy,
            Some(Proxy::Jump(vec!["a".into(), "me@b:2222".into()]))
        );
        assert_eq!(
            c.lookup("c").unwrap().proxy,
            Some(Proxy::Command(
                "exec nc -q0 \"%h\" %p # not a comment here".into()
            ))
        );
        assert_eq!(c.lookup("d").unwrap().proxy, Some(Proxy::None));
        assert_eq!(
            c.lookup("e").unwrap().proxy,
            Some(Proxy::Jump(vec!["z".into()]))
        );
    }

    #[test]
    fn match_blocks_and_unapplied_options() {
        let c = cfg("Host t\n  HostName %h.example\n  Ciphers aes128-ctr\n  ServerAliveInterval 5 # harmless\nMatch host *.example\n  User m\nMatch !originalhost t\n  Port 7\nMatch exec \"true\"\n  Port 8\nMatch all\n  Port 9\nHost other\n  UserKnownHostsFile /x\n");
        let l = c.lookup("t").unwrap();
        assert_eq!(l.host_name.as_deref(), Some("t.example"));
        assert_eq!((l.user.as_deref(), l.port), (Some("m"), Some(9)));
        assert_eq!(l.unapplied.len(), 2, "{:?}", l.unapplied);
        assert_eq!(l.unapplied[0], ("cfg line 3: Ciphers".into(), ""));
        assert_eq!(
            l.unapplied[1].0,
            "cfg line 9: the block `Match exec \"true\"`"
        );
        let l = c.lookup("u").unwrap();
        assert_eq!(l.port, Some(7));
        let l = cfg("Include config.d/*\nHost a\n").lookup("a").unwrap();
        assert!(l.unapplied[0].1.contains("does not read included files"));
        assert!(Config::parse("Host a\n  User \"x\n", Path::new("c")).is_err());
        assert!(cfg("Host a\n Port 0\n").lookup("a").is_err());
    }

    /// Configs as people write them, and the names asked of each.
    const CORPUS: &[(&str, &[&str])] = &[
        (
            "# defaults first, then blocks\nHost *.corp\n  User corpuser\nhost=alpha beta \"gamma\"\n\tHostName\t%h.example.org\n\tuser = bob\nHost LAB1\n  Port 2022\nMatch originalhost BETA\n  Port 3000\nMatch host beta.example.org\n  User never\n  Port 4000\nMatch host *.example.org !originalhost alpha\n  IdentityFile ~/.ssh/m_%h\nHost delta\n  HostName 10.0.0.%h\n  Hostname second\nHost *\n  User last\n  ProxyJump bastion\n",
            &["alpha", "beta", "gamma", "lab1", "LAB1", "delta", "x.corp", "Alpha", "Beta"],
        ),
        (
            "Host *\n\tUser defuser\nHOST lab-* Lab?\n  hostname %h.lab.example\n  PORT=2200\n  ProxyJump me@gw:2222,[::1]:2022\nHost gw\n  User gwuser\n  Port 2201\n  IdentityFile ~/.ssh/gw_%r_%h\n  IdentityFile ~/.ssh/gw_%r_%h\nMatch host *.LAB.example\n  User matched\nHost c1\n  ProxyCommand ssh -W %h:%p bastion\nHost v6\n  ProxyJump u@[::1]:23\nHost = FOO\n  HostName FOO.Example.ORG\n",
            &["lab-1", "LAB-2", "Labx", "gw", "c1", "v6", "FOO", "foo"],
        ),
        (
            "Host a\n ProxyJump none\n ProxyCommand foo\nHost b\n ProxyCommand none\n ProxyJump x\nHost c\n ProxyJump y\n ProxyCommand z\nHost d\n ProxyJump none\n ProxyJump e\nHost f\n ProxyCommand exec nc -q0 \"%h\" %p # kept\nHost !a !b *\n ProxyCommand last %h\n",
            &["a", "b", "c", "d", "f", "g"],
        ),
        (
            "Host bastion\n  HostName bastion.example.org\n  User me\nHost lab-*\n  ProxyJump bastion\n  User root\nHost lab-arm1\n  HostName 10.0.0.21\n",
            &["bastion", "lab-arm1", "lab-x86"],
        ),
    ];

    /// What `ssh -G -F FILE NAME` says: (keyword, value) lines.
    fn ssh_g(file: &Path, name: &str) -> Vec<(String, String)> {
        let o = std::process::Command::new("ssh")
            .arg("-G")
            .arg("-F")
            .arg(file)
            .arg(name)
            .stdin(std::process::Stdio::null())
            .output()
            .expect("ssh (openssh-client)");
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        String::from_utf8_lossy(&o.stdout)
            .lines()
            .filter_map(|l| l.split_once(' '))
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    /// labperf's reading of each config of [`CORPUS`] is OpenSSH's own (`ssh -G`, an
    /// exact oracle): HostName, User, Port, IdentityFile, ProxyJump, ProxyCommand.
    #[test]
    fn resolution_equals_ssh_g_on_a_corpus() {
        let dir = std::env::temp_dir().join(format!("labperf-ssh-g-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let mut wrong = Vec::new();
        for (n, (text, names)) in CORPUS.iter().enumerate() {
            let file = dir.join(format!("config{n}"));
            std::fs::write(&file, text).unwrap();
            let c = Config::parse(text, &file).unwrap();
            for name in *names {
                let g = ssh_g(&file, name);
                let one = |k: &str| g.iter().find(|(gk, _)| gk == k).map(|(_, v)| v.clone());
                let l = c.lookup(name).unwrap();
                let mut ids: Vec<String> = Vec::new();
                for f in &l.identities {
                    let f = f.to_string_lossy().into_owned();
                    if !ids.contains(&f) {
                        ids.push(f);
                    }
                }
                let gids: Vec<String> = g
                    .iter()
                    .filter(|(k, _)| k == "identityfile")
                    .map(|(_, v)| v.clone())
                    .filter(|v| !(l.identities.is_empty() && v.starts_with("~/.ssh/id_")))
                    .collect();
                let ours = (
                    l.host(name),
                    l.user.clone().or(one("user").filter(|_| l.user.is_none())),
                    l.port.unwrap_or(22).to_string(),
                    ids,
                    match &l.proxy {
                        Some(Proxy::Jump(h)) => Some(("proxyjump", h.join(","))),
                        Some(Proxy::Command(c)) => Some(("proxycommand", c.clone())),
                        _ => None,
                    },
                );
                let theirs = (
                    one("hostname").unwrap_or_default(),
                    one("user"),
                    one("port").unwrap_or_default(),
                    gids,
                    one("proxyjump")
                        .map(|v| ("proxyjump", v))
                        .or(one("proxycommand").map(|v| ("proxycommand", v))),
                );
                if ours != theirs {
                    wrong.push(format!(
                        "config{n} {name}:\n  labperf {ours:?}\n  ssh -G  {theirs:?}"
                    ));
                }
            }
        }
        let _ = std::fs::remove_dir_all(&dir);
        assert!(wrong.is_empty(), "{}", wrong.join("\n"));
    }

    /// One byte that is not UTF-8 (a Latin-1 comment, another host's value) fails no
    /// host it does not apply to, as OpenSSH reads the file; applied to a host, the line
    /// is named.
    #[test]
    fn a_byte_that_is_not_utf8_fails_only_the_host_it_applies_to() {
        let d = std::env::temp_dir().join(format!("lp-latin1-{}", std::process::id()));
        std::fs::create_dir_all(&d).unwrap();
        let p = d.join("config");
        let mut text = b"# caf\xe9 lab\r\nHost lab1\n  HostName 10.0.0.1\n  User bench\n".to_vec();
        text.extend_from_slice(b"Host other\n  HostName m\xfcnchen.example\n");
        std::fs::write(&p, &text).unwrap();
        let c = Config::read(&p).unwrap().unwrap();
        let l = c.lookup("lab1").unwrap();
        assert_eq!(
            (l.host_name.as_deref(), l.user.as_deref()),
            (Some("10.0.0.1"), Some("bench"))
        );
        assert_eq!(
            c.lookup("other").unwrap_err(),
            format!(
                "{} line 6: HostName is not UTF-8 text (labperf takes this option's value as UTF-8): write it in UTF-8",
                p.display()
            )
        );
        std::fs::remove_dir_all(d).unwrap();
    }
}
