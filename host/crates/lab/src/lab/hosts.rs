//! The hosts file: named lab machines and groups of them, in TOML
//! (`~/.config/labperf/hosts.toml` or `--hosts-file`) or an Ansible inventory (INI or YAML).
//!
//! ```toml
//! [hosts.arm1]
//! address = "root@127.0.0.1:10022"          # [user@]host[:port], or an ~/.ssh/config name
//! identity = "target/lab/aarch64/id_ed25519"  # optional
//! known_hosts = "target/lab/aarch64/known_hosts"  # optional
//! remote_dir = ".cache/labperf"              # optional
//!
//! [groups]
//! arm = ["arm1"]                             # optional: --host @arm
//! ```
//!
//! An Ansible inventory (`.yml`/`.yaml`, or INI: any other name whose text is not a TOML
//! hosts file) gives each host's address from `ansible_host` (else its name),
//! `ansible_user` and `ansible_port`, its key from `ansible_ssh_private_key_file`, and
//! `labperf_remote_dir` / `labperf_known_hosts` when set; group `vars` apply to their hosts
//! (outer groups first, the host's own last), `children` nest groups, and `all` holds
//! every host. Other variables are left alone.

use crate::lab::names;
use crate::text::show;
use serde::Deserialize;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

#[derive(Debug, Clone, Default, Deserialize, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct HostEntry {
    pub address: String,
    pub identity: Option<PathBuf>,
    pub known_hosts: Option<PathBuf>,
    pub remote_dir: Option<String>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct HostsFile {
    #[serde(default)]
    pub hosts: BTreeMap<String, HostEntry>,
    /// Group name → its hosts (`--host @group`); `all` is every host.
    #[serde(default)]
    pub groups: BTreeMap<String, Vec<String>>,
}

impl HostsFile {
    /// `@group` as its hosts (sorted); `None` for an unknown group.
    pub fn group(&self, name: &str) -> Option<Vec<String>> {
        if name == "all" && !self.groups.contains_key("all") {
            return Some(self.hosts.keys().cloned().collect());
        }
        self.groups.get(name).cloned()
    }
}

/// Variables in the order given (later ones win), each with the line it is on (0: not known).
type Vars = Vec<(String, String, usize)>;

/// The most hosts a hosts file or inventory names (its ranges expanded): a lab far larger
/// than labperf records on at once, and an inventory read in milliseconds.
pub const MAX_HOSTS: usize = 4_096;
/// The most (group, host) memberships an inventory's groups add up to, children included.
pub const MAX_MEMBERSHIPS: usize = 1 << 22;
/// The largest hosts file read.
pub const MAX_FILE: u64 = 16 << 20;
/// What a YAML inventory may weigh once its aliases are expanded: 32 bytes a node plus its
/// text (a YAML alias repeats its anchor's whole node: a "billion laughs" file of 1 KiB
/// would otherwise take gigabytes).
pub const MAX_YAML_WEIGHT: usize = 64 << 20;

/// An inventory read into plain maps before the hosts are resolved.
#[derive(Default)]
struct Inventory {
    /// Host → its own variables (in the order seen; later ones win).
    host_vars: BTreeMap<String, Vars>,
    /// Host → the line it is first named on (0: not known).
    host_line: BTreeMap<String, usize>,
    /// Group → (its hosts, its variables, its child groups).
    groups: BTreeMap<String, (Vec<String>, Vars, Vec<String>)>,
    /// (group, host) pairs already listed: each host once per group, found in constant time.
    listed: std::collections::HashSet<(String, String)>,
}

impl Inventory {
    fn host(&mut self, group: &str, name: &str, vars: Vars, line: usize) -> Result<(), String> {
        if !self.host_vars.contains_key(name) && self.host_vars.len() >= MAX_HOSTS {
            return Err(format!(
                "{}over {MAX_HOSTS} hosts: a hosts file names at most {MAX_HOSTS}",
                at_line(line)
            ));
        }
        self.host_vars.entry(name.into()).or_default().extend(vars);
        self.host_line.entry(name.into()).or_insert(line);
        let g = self.groups.entry(group.into()).or_default();
        if self.listed.insert((group.into(), name.into())) {
            g.0.push(name.into());
        }
        Ok(())
    }

    /// Every host of `g` and its children (each once, sorted), cycles cut.
    fn members(&self, g: &str, seen: &mut std::collections::HashSet<String>) -> Vec<String> {
        if !seen.insert(g.to_string()) {
            return Vec::new();
        }
        let Some((hosts, _, children)) = self.groups.get(g) else {
            return Vec::new();
        };
        let mut out = hosts.clone();
        for c in children {
            out.extend(self.members(c, seen));
        }
        out.sort();
        out.dedup();
        out
    }

    /// How deep each group is under the groups nobody lists as a child (`all` at 0): the
    /// longest chain of parents, found by relaxing every (parent, child) pair at most 64
    /// times (a cycle stops there).
    fn depths(&self) -> BTreeMap<&str, usize> {
        let mut d: BTreeMap<&str, usize> = self
            .groups
            .keys()
            .map(|g| (g.as_str(), usize::from(g != "all")))
            .collect();
        for _ in 0..64 {
            let mut changed = false;
            for (p, (_, _, children)) in &self.groups {
                let dp = d.get(p.as_str()).copied().unwrap_or(1);
                for c in children {
                    if c == "all" {
                        continue;
                    }
                    if let Some(dc) = d.get_mut(c.as_str()) {
                        if *dc < dp + 1 {
                            *dc = dp + 1;
                            changed = true;
                        }
                    }
                }
            }
            if !changed {
                break;
            }
        }
        d
    }

    fn resolve(self, base: &Path) -> Result<HostsFile, String> {
        let mut groups = BTreeMap::new();
        let mut memberships = 0usize;
        for g in self.groups.keys() {
            let m = self.members(g, &mut Default::default());
            memberships += m.len();
            if memberships > MAX_MEMBERSHIPS {
                return Err(format!(
                    "its groups add up to over {MAX_MEMBERSHIPS} (group, host) pairs"
                ));
            }
            groups.insert(g.clone(), m);
        }
        let mut all: Vec<String> = self.host_vars.keys().cloned().collect();
        all.sort();
        groups.insert("all".into(), all);
        let depths = self.depths();
        // Host → its groups, outermost first.
        let mut of: BTreeMap<&str, Vec<(usize, &str)>> = BTreeMap::new();
        for (g, members) in &groups {
            let d = depths.get(g.as_str()).copied().unwrap_or(0);
            for h in members {
                of.entry(h.as_str()).or_default().push((d, g.as_str()));
            }
        }
        let mut hosts = BTreeMap::new();
        for (name, own) in &self.host_vars {
            // Group variables from the outermost group in, then the host's own.
            let mut gs = of.remove(name.as_str()).unwrap_or_default();
            gs.sort();
            let mut vars: BTreeMap<&str, (&str, usize)> = BTreeMap::new();
            for (_, g) in gs {
                for (k, v, l) in self.groups.get(g).map(|x| &x.1[..]).unwrap_or(&[]) {
                    vars.insert(k, (v, *l));
                }
            }
            for (k, v, l) in own {
                vars.insert(k, (v, *l));
            }
            let path = |v: &str| {
                let p = match v.strip_prefix("~/") {
                    Some(rest) => std::env::var_os("HOME")
                        .map(PathBuf::from)
                        .unwrap_or_default()
                        .join(rest),
                    None => PathBuf::from(v),
                };
                if p.is_relative() {
                    base.join(p)
                } else {
                    p
                }
            };
            let host_line = self.host_line.get(name).copied().unwrap_or(0);
            // Each part checked where it came from, before it is put in an address.
            let (address, line, var) = match vars.get("ansible_host") {
                Some((h, l)) => (h.to_string(), *l, "its ansible_host"),
                None => (name.clone(), host_line, "its name"),
            };
            let refused = |line: usize, var: &str, e: names::BadName| {
                format!("{}host '{}', {var}: {e}", at_line(line), show(name))
            };
            names::check_host(&address).map_err(|e| refused(line, var, e))?;
            let mut address = if address.contains(':') {
                format!("[{address}]")
            } else {
                address
            };
            if let Some((u, l)) = vars.get("ansible_user") {
                names::check_user(u).map_err(|e| refused(*l, "its ansible_user", e))?;
                address = format!("{u}@{address}");
            }
            if let Some((p, l)) = vars.get("ansible_port") {
                if !p.parse::<u16>().is_ok_and(|p| p > 0) {
                    return Err(format!(
                        "{}host '{}', its ansible_port '{}' is not a port number",
                        at_line(*l),
                        show(name),
                        show(p)
                    ));
                }
                address = format!("{address}:{p}");
            }
            hosts.insert(
                name.clone(),
                HostEntry {
                    address,
                    identity: vars
                        .get("ansible_ssh_private_key_file")
                        .map(|(v, _)| path(v)),
                    known_hosts: vars.get("labperf_known_hosts").map(|(v, _)| path(v)),
                    remote_dir: vars.get("labperf_remote_dir").map(|(v, _)| v.to_string()),
                },
            );
        }
        Ok(HostsFile { hosts, groups })
    }
}

/// `line N: ` for a message (nothing when the line is not known).
fn at_line(line: usize) -> String {
    if line == 0 {
        String::new()
    } else {
        format!("line {line}: ")
    }
}

/// `name[01:03]` (Ansible's numeric ranges, leading zeros kept, several in one name) as its
/// names, adding them to `out`; refused past [`MAX_HOSTS`] names in all.
fn expand_range(pattern: &str, out: &mut Vec<String>, line: usize) -> Result<(), String> {
    let too_many = || {
        format!(
            "{}the host pattern '{}' names over {MAX_HOSTS} hosts: a hosts file names at most {MAX_HOSTS}",
            at_line(line),
            show(pattern)
        )
    };
    let (Some(a), Some(b)) = (pattern.find('['), pattern.find(']')) else {
        if out.len() >= MAX_HOSTS {
            return Err(too_many());
        }
        out.push(pattern.into());
        return Ok(());
    };
    let one = |out: &mut Vec<String>| {
        if out.len() >= MAX_HOSTS {
            return Err(too_many());
        }
        out.push(pattern.into());
        Ok(())
    };
    if b < a {
        return one(out);
    }
    // Ansible's ranges: `[01:50]` (leading zeros kept), `[a:f]` (letters), either with a
    // step (`[0:10:2]`), bounds included.
    let inner = &pattern[a + 1..b];
    let parts: Vec<&str> = inner.split(':').collect();
    if !(2..=3).contains(&parts.len()) {
        return one(out);
    }
    let bad = |why: &str| {
        format!(
            "{}the host pattern '{}': {why}",
            at_line(line),
            show(pattern)
        )
    };
    let step = match parts.get(2) {
        None => 1,
        Some(s) => match s.parse::<u32>() {
            Ok(0) => return Err(bad("its range's step is 0")),
            Ok(n) => n,
            Err(_) => return Err(bad("its range's step is not a number")),
        },
    };
    let (lo, hi) = (parts[0], parts[1]);
    let letter = |s: &str| {
        let mut c = s.chars();
        match (c.next(), c.next()) {
            (Some(l), None) if l.is_ascii_alphabetic() => Some(l as u32),
            _ => None,
        }
    };
    let (l, h, letters) = match (lo.parse::<u32>(), hi.parse::<u32>()) {
        (Ok(l), Ok(h)) => (l, h, false),
        _ => match (letter(lo), letter(hi)) {
            (Some(l), Some(h))
                if (l as u8).is_ascii_lowercase() == (h as u8).is_ascii_lowercase() =>
            {
                (l, h, true)
            }
            _ => {
                return Err(bad(
                    "a range is [FIRST:LAST] or [FIRST:LAST:STEP] of numbers or of single letters of one case",
                ))
            }
        },
    };
    if h < l {
        return Err(bad(&format!("its range runs backwards ({lo} after {hi})")));
    }
    if (h - l) / step >= MAX_HOSTS as u32 {
        return Err(too_many());
    }
    let width = if lo.starts_with('0') { lo.len() } else { 0 };
    for n in (l..=h).step_by(step as usize) {
        let mid = match letters {
            true => char::from_u32(n).unwrap_or('?').to_string(),
            false => format!("{n:0width$}"),
        };
        expand_range(
            &format!("{}{mid}{}", &pattern[..a], &pattern[b + 1..]),
            out,
            line,
        )
        .map_err(|e| {
            if e.contains("names over") {
                too_many()
            } else {
                e
            }
        })?;
    }
    Ok(())
}

/// `key=value` words (values may be quoted) of an INI host line or vars section.
fn ini_vars(words: &str, line: usize) -> Vars {
    let mut out = Vec::new();
    let mut rest = words.trim();
    while let Some(eq) = rest.find('=') {
        let key = rest[..eq].trim().to_string();
        let after = rest[eq + 1..].trim_start();
        let (value, next) = match after.chars().next() {
            Some(q @ ('"' | '\'')) => {
                let end = after[1..].find(q).map_or(after.len(), |i| i + 1);
                (
                    after[1..end].to_string(),
                    after.get(end + 1..).unwrap_or(""),
                )
            }
            _ => {
                let end = after.find(char::is_whitespace).unwrap_or(after.len());
                (after[..end].to_string(), &after[end..])
            }
        };
        out.push((key, value, line));
        rest = next.trim_start();
    }
    out
}

/// An Ansible INI inventory.
fn from_ini(text: &str) -> Result<Inventory, String> {
    let mut inv = Inventory::default();
    let (mut group, mut kind) = ("ungrouped".to_string(), "hosts");
    for (n, raw) in text.lines().enumerate() {
        let line = raw.trim();
        if line.is_empty() || line.starts_with('#') || line.starts_with(';') {
            continue;
        }
        if let Some(inner) = line.strip_prefix('[').and_then(|l| l.strip_suffix(']')) {
            (group, kind) = match inner.rsplit_once(':') {
                Some((g, "vars")) => (g.to_string(), "vars"),
                Some((g, "children")) => (g.to_string(), "children"),
                _ => (inner.to_string(), "hosts"),
            };
            inv.groups.entry(group.clone()).or_default();
            continue;
        }
        match kind {
            "vars" => {
                let vars = ini_vars(line, n + 1);
                if vars.is_empty() {
                    return Err(format!("line {}: not key=value in [{group}:vars]", n + 1));
                }
                inv.groups.entry(group.clone()).or_default().1.extend(vars);
            }
            "children" => {
                let child = line.split_whitespace().next().unwrap_or("").to_string();
                inv.groups.entry(child.clone()).or_default();
                inv.groups.entry(group.clone()).or_default().2.push(child);
            }
            _ => {
                let (pattern, rest) = line.split_once(char::is_whitespace).unwrap_or((line, ""));
                let mut names = Vec::new();
                expand_range(pattern, &mut names, n + 1)?;
                let vars = ini_vars(rest, n + 1);
                for h in names {
                    inv.host(&group, &h, vars.clone(), n + 1)?;
                }
            }
        }
    }
    Ok(inv)
}

/// The weight of a YAML text once its aliases are expanded ([`MAX_YAML_WEIGHT`]), found
/// from the parser's events before anything is built; and the line each scalar is first
/// seen on, for messages.
fn yaml_weigh(text: &str) -> Result<std::collections::HashMap<String, usize>, String> {
    use yaml_rust2::parser::{Event, MarkedEventReceiver, Parser};
    use yaml_rust2::scanner::Marker;
    struct Weigh {
        /// The open collections' weights so far.
        stack: Vec<(usize, usize)>,
        /// Anchor id → its node's weight.
        anchors: std::collections::HashMap<usize, usize>,
        total: usize,
        over: bool,
        lines: std::collections::HashMap<String, usize>,
    }
    impl Weigh {
        fn add(&mut self, w: usize, anchor: usize) {
            if anchor > 0 {
                self.anchors.insert(anchor, w);
            }
            match self.stack.last_mut() {
                Some((sum, _)) => *sum = sum.saturating_add(w),
                None => self.total = self.total.saturating_add(w),
            }
            let open: usize = self
                .stack
                .iter()
                .fold(self.total, |a, (s, _)| a.saturating_add(*s));
            if open > MAX_YAML_WEIGHT {
                self.over = true;
            }
        }
    }
    impl MarkedEventReceiver for Weigh {
        fn on_event(&mut self, ev: Event, mark: Marker) {
            if self.over {
                return;
            }
            match ev {
                Event::SequenceStart(anchor, _) | Event::MappingStart(anchor, _) => {
                    self.stack.push((32, anchor))
                }
                Event::SequenceEnd | Event::MappingEnd => {
                    if let Some((w, anchor)) = self.stack.pop() {
                        self.add(w, anchor);
                    }
                }
                Event::Scalar(v, _, anchor, _) => {
                    let w = 32 + v.len();
                    if self.lines.len() < MAX_HOSTS * 4 {
                        self.lines.entry(v).or_insert(mark.line());
                    }
                    self.add(w, anchor);
                }
                Event::Alias(id) => {
                    let w = self.anchors.get(&id).copied().unwrap_or(32);
                    self.add(w, 0);
                }
                _ => {}
            }
        }
    }
    let mut w = Weigh {
        stack: Vec::new(),
        anchors: Default::default(),
        total: 0,
        over: false,
        lines: Default::default(),
    };
    let mut parser = Parser::new_from_str(text);
    parser.load(&mut w, true).map_err(|e| e.to_string())?;
    if w.over {
        return Err(format!(
            "its aliases expand to over {} MiB (an alias repeats its anchor's whole node): refused",
            MAX_YAML_WEIGHT >> 20
        ));
    }
    Ok(w.lines)
}

/// An Ansible YAML inventory.
fn from_yaml(text: &str) -> Result<Inventory, String> {
    use yaml_rust2::Yaml;
    let lines = yaml_weigh(text)?;
    let docs = yaml_rust2::YamlLoader::load_from_str(text).map_err(|e| e.to_string())?;
    let mut inv = Inventory::default();
    let scalar = |y: &Yaml| -> Option<String> {
        match y {
            Yaml::String(s) | Yaml::Real(s) => Some(s.clone()),
            Yaml::Integer(i) => Some(i.to_string()),
            Yaml::Boolean(b) => Some(b.to_string()),
            _ => None,
        }
    };
    let line_of = |v: &str| lines.get(v).copied().unwrap_or(0);
    let vars_of = |y: &Yaml| -> Vars {
        y.as_hash()
            .map(|h| {
                h.iter()
                    .filter_map(|(k, v)| {
                        let v = scalar(v)?;
                        let l = line_of(&v);
                        Some((scalar(k)?, v, l))
                    })
                    .collect()
            })
            .unwrap_or_default()
    };
    struct Ctx<'a> {
        scalar: &'a dyn Fn(&Yaml) -> Option<String>,
        vars_of: &'a dyn Fn(&Yaml) -> Vars,
        line_of: &'a dyn Fn(&str) -> usize,
    }
    fn walk(
        inv: &mut Inventory,
        name: &str,
        node: &Yaml,
        depth: usize,
        c: &Ctx,
    ) -> Result<(), String> {
        if depth > 64 {
            return Err("groups nest deeper than 64".into());
        }
        inv.groups.entry(name.into()).or_default();
        if let Some(hosts) = node["hosts"].as_hash() {
            for (h, v) in hosts {
                let h = (c.scalar)(h).ok_or("a host name that is not text")?;
                let line = (c.line_of)(&h);
                let mut names = Vec::new();
                expand_range(&h, &mut names, line)?;
                let vars = (c.vars_of)(v);
                for n in names {
                    inv.host(name, &n, vars.clone(), line)?;
                }
            }
        }
        let vars = (c.vars_of)(&node["vars"]);
        inv.groups.entry(name.into()).or_default().1.extend(vars);
        if let Some(children) = node["children"].as_hash() {
            for (ch, v) in children {
                let ch = (c.scalar)(ch).ok_or("a group name that is not text")?;
                inv.groups
                    .entry(name.into())
                    .or_default()
                    .2
                    .push(ch.clone());
                walk(inv, &ch, v, depth + 1, c)?;
            }
        }
        Ok(())
    }
    let ctx = Ctx {
        scalar: &scalar,
        vars_of: &vars_of,
        line_of: &line_of,
    };
    for doc in &docs {
        let Some(top) = doc.as_hash() else {
            return Err("the top level is not a mapping of groups".into());
        };
        for (g, node) in top {
            let g = scalar(g).ok_or("a group name that is not text")?;
            walk(&mut inv, &g, node, 0, &ctx)?;
        }
    }
    Ok(inv)
}

#[derive(Debug, thiserror::Error)]
pub enum HostsError {
    #[error("cannot read the hosts file {path}: {source}")]
    Read {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("the hosts file {path} is not valid: {why}")]
    Parse { path: PathBuf, why: String },
}

/// The default hosts file: `$XDG_CONFIG_HOME/labperf/hosts.toml` or `~/.config/labperf/hosts.toml`.
pub fn default_path() -> PathBuf {
    std::env::var_os("XDG_CONFIG_HOME")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".config")))
        .unwrap_or_default()
        .join("labperf/hosts.toml")
}

/// Reads a hosts file (at most [`MAX_FILE`] bytes); a missing default file is an empty one.
pub fn load(path: Option<&Path>) -> Result<HostsFile, HostsError> {
    use std::io::Read;
    let (p, explicit) = match path {
        Some(p) => (p.to_path_buf(), true),
        None => (default_path(), false),
    };
    let mut bytes = Vec::new();
    match std::fs::File::open(&p).and_then(|f| f.take(MAX_FILE + 1).read_to_end(&mut bytes)) {
        Ok(_) => {}
        Err(e) if !explicit && e.kind() == std::io::ErrorKind::NotFound => {
            return Ok(HostsFile::default())
        }
        Err(source) => return Err(HostsError::Read { path: p, source }),
    }
    let parse_err = |why: String| HostsError::Parse {
        path: p.clone(),
        why,
    };
    if bytes.len() as u64 > MAX_FILE {
        return Err(parse_err(format!(
            "it is over {} MiB: a hosts file is read whole, up to that",
            MAX_FILE >> 20
        )));
    }
    let text = String::from_utf8(bytes).map_err(|e| {
        let line = 1 + e.as_bytes()[..e.utf8_error().valid_up_to()]
            .iter()
            .filter(|b| **b == b'\n')
            .count();
        parse_err(format!("line {line}: not UTF-8 text"))
    })?;
    parse(&text, &p)
}

/// A hosts file's text, read as `path` (its extension: `.toml`, `.yml`/`.yaml`, else TOML
/// when it looks like a labperf hosts file, else an INI inventory), relative paths in it
/// taken from `path`'s directory. Every host's address is checked by [`names`]: a host or
/// user name OpenSSH would refuse is refused here, with its line.
pub fn parse(text: &str, p: &Path) -> Result<HostsFile, HostsError> {
    // Relative paths in the file are relative to the file.
    let base = p.parent().map(Path::to_path_buf).unwrap_or_default();
    let parse = |why: String| HostsError::Parse {
        path: p.to_path_buf(),
        why,
    };
    let ext = p.extension().and_then(|e| e.to_str()).unwrap_or("");
    let toml_text = ext == "toml"
        || (!matches!(ext, "yml" | "yaml")
            && text
                .lines()
                .any(|l| l.trim_start().starts_with("[hosts.") || l.trim() == "[groups]"));
    if !toml_text {
        let inv = if matches!(ext, "yml" | "yaml") {
            from_yaml(text)
        } else {
            from_ini(text)
        }
        .map_err(parse)?;
        return inv.resolve(&base).map_err(parse);
    }
    /// The TOML form as written, with where each address is.
    #[derive(Deserialize)]
    #[serde(deny_unknown_fields)]
    struct Spanned {
        #[serde(default)]
        hosts: BTreeMap<String, SpannedEntry>,
        #[serde(default)]
        groups: BTreeMap<String, Vec<String>>,
    }
    #[derive(Deserialize)]
    #[serde(deny_unknown_fields)]
    struct SpannedEntry {
        address: toml::Spanned<String>,
        identity: Option<PathBuf>,
        known_hosts: Option<PathBuf>,
        remote_dir: Option<String>,
    }
    let f: Spanned = toml::from_str(text).map_err(|e| parse(e.to_string()))?;
    if f.hosts.len() > MAX_HOSTS {
        return Err(parse(format!(
            "over {MAX_HOSTS} hosts: a hosts file names at most {MAX_HOSTS}"
        )));
    }
    let mut hosts = BTreeMap::new();
    for (name, h) in f.hosts {
        let line = 1 + text.as_bytes()[..h.address.span().start.min(text.len())]
            .iter()
            .filter(|b| **b == b'\n')
            .count();
        let address = h.address.into_inner();
        let (user, host, _) = names::split_spec(&address);
        let refused = |e: names::BadName| {
            parse(format!(
                "line {line}: host '{}', its address: {e}",
                show(&name)
            ))
        };
        names::check_host(&host).map_err(refused)?;
        if let Some(u) = &user {
            names::check_user(u).map_err(refused)?;
        }
        let rel = |q: Option<PathBuf>| q.map(|q| if q.is_relative() { base.join(q) } else { q });
        hosts.insert(
            name,
            HostEntry {
                address,
                identity: rel(h.identity),
                known_hosts: rel(h.known_hosts),
                remote_dir: h.remote_dir,
            },
        );
    }
    Ok(HostsFile {
        hosts,
        groups: f.groups,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_and_resolves_relative_paths() {
        let d = std::env::temp_dir().join(format!("lp-hosts-{}", std::process::id()));
        std::fs::create_dir_all(&d).unwrap();
        let p = d.join("hosts.toml");
        std::fs::write(&p, "[hosts.arm1]\naddress = \"root@127.0.0.1:10022\"\nidentity = \"keys/id\"\n\n[hosts.x]\naddress = \"lab-x\"\n").unwrap();
        let f = load(Some(&p)).unwrap();
        assert_eq!(f.hosts["arm1"].address, "root@127.0.0.1:10022");
        assert_eq!(
            f.hosts["arm1"].identity.as_deref(),
            Some(d.join("keys/id").as_path())
        );
        assert_eq!(f.hosts["x"].remote_dir, None);
        std::fs::write(&p, "[hosts.bad]\nadress = \"typo\"\n").unwrap();
        assert!(load(Some(&p))
            .unwrap_err()
            .to_string()
            .contains("is not valid"));
        assert!(load(Some(&d.join("missing.toml"))).is_err());
        std::fs::remove_dir_all(d).unwrap();
    }

    /// The same lab as an INI and a YAML inventory: the same hosts, addresses and groups.
    #[test]
    fn ansible_inventories_in_ini_and_yaml_give_hosts_and_groups() {
        let d = std::env::temp_dir().join(format!("lp-inv-{}", std::process::id()));
        std::fs::create_dir_all(&d).unwrap();
        let ini = d.join("inventory");
        std::fs::write(
            &ini,
            "# the lab\nlone ansible_host=10.0.0.9\n\n[arm]\narm[01:02] ansible_port=2222\n\n[x86]\nx1 ansible_host=10.0.0.5 ansible_user=bob labperf_remote_dir='/scratch/lp'\n\n[arm:vars]\nansible_user=root\nansible_ssh_private_key_file=keys/arm\n\n[lab:children]\narm\nx86\n\n[lab:vars]\nansible_user=lab\n",
        )
        .unwrap();
        let yaml = d.join("inventory.yml");
        std::fs::write(
            &yaml,
            "all:\n  hosts:\n    lone:\n      ansible_host: 10.0.0.9\n  children:\n    lab:\n      vars:\n        ansible_user: lab\n      children:\n        arm:\n          hosts:\n            arm[01:02]:\n              ansible_port: 2222\n          vars:\n            ansible_user: root\n            ansible_ssh_private_key_file: keys/arm\n        x86:\n          hosts:\n            x1:\n              ansible_host: 10.0.0.5\n              ansible_user: bob\n              labperf_remote_dir: /scratch/lp\n",
        )
        .unwrap();
        for p in [&ini, &yaml] {
            let f = load(Some(p)).unwrap();
            let addr: Vec<(&str, &str)> = f
                .hosts
                .iter()
                .map(|(n, h)| (n.as_str(), h.address.as_str()))
                .collect();
            assert_eq!(
                addr,
                [
                    ("arm01", "root@arm01:2222"),
                    ("arm02", "root@arm02:2222"),
                    ("lone", "10.0.0.9"),
                    ("x1", "bob@10.0.0.5"),
                ],
                "{}",
                p.display()
            );
            assert_eq!(
                f.hosts["arm01"].identity.as_deref(),
                Some(d.join("keys/arm").as_path())
            );
            assert_eq!(f.hosts["x1"].remote_dir.as_deref(), Some("/scratch/lp"));
            assert_eq!(f.group("arm").unwrap(), ["arm01", "arm02"]);
            assert_eq!(f.group("lab").unwrap(), ["arm01", "arm02", "x1"]);
            assert_eq!(f.group("all").unwrap().len(), 4);
            assert_eq!(f.group("nope"), None);
        }
        std::fs::write(d.join("bad.yml"), "all: [unclosed").unwrap();
        assert!(load(Some(&d.join("bad.yml")))
            .unwrap_err()
            .to_string()
            .contains("is not valid"));
        std::fs::remove_dir_all(d).unwrap();
    }

    /// A name that would run as a shell command, or become a known_hosts pattern, is
    /// refused where it is written: the file, the line, the host and the variable.
    #[test]
    fn names_openssh_refuses_are_refused_with_their_line() {
        let d = std::env::temp_dir().join(format!("lp-inv-bad-{}", std::process::id()));
        std::fs::create_dir_all(&d).unwrap();
        let cases = [
            (
                "inventory",
                "[lab]\nok1 ansible_host=10.0.0.1\nnode1 ansible_host='node$(touch /tmp/pwned).lab.example'\n",
                "line 3: host 'node1', its ansible_host: the host name 'node$(touch /tmp/pwned).lab.example' has '$' at character 5",
            ),
            (
                "inventory",
                "[lab]\nnode1\n\n[lab:vars]\nansible_user='root$(id)'\n",
                "line 5: host 'node1', its ansible_user: the user name 'root$(id)' has '$' at character 5",
            ),
            (
                "inv.yml",
                "all:\n  hosts:\n    node1:\n      ansible_host: '*,evil.lab.example'\n",
                "line 4: host 'node1', its ansible_host: the host name '*,evil.lab.example' has '*' at character 1",
            ),
            (
                "inventory",
                "[lab]\nx;id\n",
                "line 2: host 'x;id', its name: the host name 'x;id' has ';' at character 2",
            ),
            (
                "inventory",
                "[lab]\nn ansible_port=22;id\n",
                "line 2: host 'n', its ansible_port '22;id' is not a port number",
            ),
            (
                "hosts.toml",
                "[hosts.a]\naddress = \"10.0.0.1\"\n\n[hosts.b]\naddress = \"me@b`id`.lab\"\n",
                "line 5: host 'b', its address: the host name 'b`id`.lab' has '`' at character 2",
            ),
        ];
        for (file, text, want) in cases {
            let p = d.join(file);
            std::fs::write(&p, text).unwrap();
            let e = load(Some(&p)).unwrap_err().to_string();
            assert_eq!(
                e,
                format!(
                    "the hosts file {} is not valid: {want}{}",
                    p.display(),
                    if want.contains("port number") {
                        ""
                    } else if want.contains("user name") {
                        ": a user name holds no blank, control character or shell metacharacter ('`\"$\\;&<>|(){}[]*?!#~), as OpenSSH requires"
                    } else {
                        ": a host name holds ASCII letters, digits, '-', '.', '_', and ':' and '%' of an IPv6 address (OpenSSH refuses shell metacharacters in names the same way)"
                    }
                ),
                "{file}: {text}"
            );
        }
        // IPv6 addresses keep their port apart.
        std::fs::write(
            d.join("v6"),
            "[lab]\nv6 ansible_host=fe80::1%eth0 ansible_user=me ansible_port=2222\n",
        )
        .unwrap();
        assert_eq!(
            load(Some(&d.join("v6"))).unwrap().hosts["v6"].address,
            "me@[fe80::1%eth0]:2222"
        );
        std::fs::remove_dir_all(d).unwrap();
    }

    /// Nested ranges and YAML alias bombs are refused within a bound of memory and time.
    #[test]
    fn letter_and_step_ranges_expand_as_ansible_expands_them() {
        let d = std::env::temp_dir().join(format!("lp-inv-ranges-{}", std::process::id()));
        std::fs::create_dir_all(&d).unwrap();
        std::fs::write(
            d.join("inv"),
            "[lab]\nweb[a:c].lab ansible_user=root\ndb[01:09:4]\n",
        )
        .unwrap();
        let f = load(Some(&d.join("inv"))).unwrap();
        let names: Vec<&String> = f.hosts.keys().collect();
        assert_eq!(
            names,
            ["db01", "db05", "db09", "weba.lab", "webb.lab", "webc.lab"],
            "{:?}",
            f.hosts
        );
        std::fs::remove_dir_all(d).unwrap();
    }

    #[test]
    fn range_and_alias_bombs_are_refused() {
        let d = std::env::temp_dir().join(format!("lp-inv-bomb-{}", std::process::id()));
        std::fs::create_dir_all(&d).unwrap();
        let t = std::time::Instant::now();
        std::fs::write(d.join("ranges"), "[lab]\nh[0:9999]x[0:9999]\n").unwrap();
        let e = load(Some(&d.join("ranges"))).unwrap_err().to_string();
        assert!(e.ends_with("line 2: the host pattern 'h[0:9999]x[0:9999]' names over 4096 hosts: a hosts file names at most 4096"), "{e}");
        // A backwards range and a zero step say so, with their line.
        for (pattern, why) in [
            ("h[9:1]", "its range runs backwards (9 after 1)"),
            ("h[0:9:0]", "its range's step is 0"),
            ("h[a:Z]", "a range is [FIRST:LAST] or [FIRST:LAST:STEP]"),
        ] {
            std::fs::write(d.join("ranges"), format!("[lab]\n{pattern}\n")).unwrap();
            let e = load(Some(&d.join("ranges"))).unwrap_err().to_string();
            assert!(
                e.contains(&format!("line 2: the host pattern '{pattern}': {why}")),
                "{e}"
            );
        }
        std::fs::write(
            d.join("ranges.yml"),
            "lab:\n  hosts:\n    h[0:70]x[0:70]:\n",
        )
        .unwrap();
        let e = load(Some(&d.join("ranges.yml"))).unwrap_err().to_string();
        assert!(
            e.contains("line 3: the host pattern 'h[0:70]x[0:70]' names over 4096 hosts"),
            "{e}"
        );
        // Each level repeats the one before nine times: 9^9 nodes (387 million) expanded.
        let mut bomb = String::from("all:\n  vars:\n    a0: &a0 [\"lol\"]\n");
        for i in 1..10 {
            let prev = format!("*a{}", i - 1);
            bomb.push_str(&format!("    a{i}: &a{i} [{}]\n", vec![prev; 9].join(",")));
        }
        bomb.push_str("  hosts:\n    h1:\n");
        std::fs::write(d.join("bomb.yml"), &bomb).unwrap();
        let e = load(Some(&d.join("bomb.yml"))).unwrap_err().to_string();
        assert!(e.contains("its aliases expand to over 64 MiB"), "{e}");
        // A group chain's depth is found without following every path (2^60 here).
        let mut chain = String::new();
        for i in 0..60 {
            chain.push_str(&format!("[g{i}:children]\ng{}\nh{}\n", i + 1, i + 1));
            chain.push_str(&format!("[h{i}:children]\ng{}\nh{}\n", i + 1, i + 1));
        }
        chain.push_str("[g60]\nhost1\n");
        std::fs::write(d.join("chain"), &chain).unwrap();
        let f = load(Some(&d.join("chain"))).unwrap();
        assert_eq!(f.hosts["host1"].address, "host1");
        assert!(
            t.elapsed() < std::time::Duration::from_secs(10),
            "{:?}",
            t.elapsed()
        );
        std::fs::remove_dir_all(d).unwrap();
    }
}
