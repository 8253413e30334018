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

/// Variables in the order given (later ones win).
type Vars = Vec<(String, String)>;

/// An inventory read into plain maps before the hosts are resolved.
#[derive(Default)]
struct Inventory {
    /// Host → its own variables (in the order seen; later ones win).
    host_vars: BTreeMap<String, Vec<(String, String)>>,
    /// Group → (its hosts, its variables, its child groups).
    groups: BTreeMap<String, (Vec<String>, Vars, Vec<String>)>,
}

impl Inventory {
    fn host(&mut self, group: &str, name: &str, vars: Vec<(String, String)>) {
        self.host_vars.entry(name.into()).or_default().extend(vars);
        let g = self.groups.entry(group.into()).or_default();
        if !g.0.iter().any(|h| h == name) {
            g.0.push(name.into());
        }
    }

    /// Every host of `g` and its children (each once, sorted), cycles cut.
    fn members(&self, g: &str, seen: &mut Vec<String>) -> Vec<String> {
        if seen.iter().any(|s| s == g) {
            return Vec::new();
        }
        seen.push(g.into());
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

    /// How deep `g` is under the groups nobody lists as a child (`all` at 0).
    fn depth(&self, g: &str, guard: usize) -> usize {
        if g == "all" || guard > 64 {
            return 0;
        }
        self.groups
            .iter()
            .filter(|(_, v)| v.2.iter().any(|c| c == g))
            .map(|(p, _)| 1 + self.depth(p, guard + 1))
            .max()
            .unwrap_or(1)
    }

    fn resolve(self, base: &Path) -> HostsFile {
        let mut groups = BTreeMap::new();
        for g in self.groups.keys() {
            groups.insert(g.clone(), self.members(g, &mut Vec::new()));
        }
        let mut all: Vec<String> = self.host_vars.keys().cloned().collect();
        all.sort();
        groups.insert("all".into(), all);
        let mut hosts = BTreeMap::new();
        for (name, own) in &self.host_vars {
            // Group variables from the outermost group in, then the host's own.
            let mut of: Vec<(usize, &String)> = groups
                .iter()
                .filter(|(_, m)| m.iter().any(|h| h == name))
                .map(|(g, _)| (self.depth(g, 0), g))
                .collect();
            of.sort();
            let mut vars: BTreeMap<&str, &str> = BTreeMap::new();
            for (_, g) in of {
                for (k, v) in self.groups.get(g).map(|x| &x.1[..]).unwrap_or(&[]) {
                    vars.insert(k, v);
                }
            }
            for (k, v) in own {
                vars.insert(k, v);
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
            let mut address = vars
                .get("ansible_host")
                .copied()
                .unwrap_or(name)
                .to_string();
            if let Some(u) = vars.get("ansible_user") {
                address = format!("{u}@{address}");
            }
            if let Some(p) = vars.get("ansible_port") {
                address = format!("{address}:{p}");
            }
            hosts.insert(
                name.clone(),
                HostEntry {
                    address,
                    identity: vars.get("ansible_ssh_private_key_file").map(|v| path(v)),
                    known_hosts: vars.get("labperf_known_hosts").map(|v| path(v)),
                    remote_dir: vars.get("labperf_remote_dir").map(|v| v.to_string()),
                },
            );
        }
        HostsFile { hosts, groups }
    }
}

/// `name[01:03]` (Ansible's numeric ranges, leading zeros kept) as its names.
fn expand_range(pattern: &str) -> Vec<String> {
    let (Some(a), Some(b)) = (pattern.find('['), pattern.find(']')) else {
        return vec![pattern.into()];
    };
    let inner = &pattern[a + 1..b];
    let Some((lo, hi)) = inner.split_once(':') else {
        return vec![pattern.into()];
    };
    let (Ok(l), Ok(h)) = (lo.parse::<u32>(), hi.parse::<u32>()) else {
        return vec![pattern.into()];
    };
    if h < l || h - l > 10_000 {
        return vec![pattern.into()];
    }
    let width = if lo.starts_with('0') { lo.len() } else { 0 };
    (l..=h)
        .flat_map(|n| {
            expand_range(&format!(
                "{}{n:0width$}{}",
                &pattern[..a],
                &pattern[b + 1..]
            ))
        })
        .collect()
}

/// `key=value` words (values may be quoted) of an INI host line or vars section.
fn ini_vars(words: &str) -> Vec<(String, String)> {
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
        out.push((key, value));
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
                let vars = ini_vars(line);
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
                for h in expand_range(pattern) {
                    inv.host(&group, &h, ini_vars(rest));
                }
            }
        }
    }
    Ok(inv)
}

/// An Ansible YAML inventory.
fn from_yaml(text: &str) -> Result<Inventory, String> {
    use yaml_rust2::Yaml;
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
    let vars_of = |y: &Yaml| -> Vec<(String, String)> {
        y.as_hash()
            .map(|h| {
                h.iter()
                    .filter_map(|(k, v)| Some((scalar(k)?, scalar(v)?)))
                    .collect()
            })
            .unwrap_or_default()
    };
    fn walk(
        inv: &mut Inventory,
        name: &str,
        node: &Yaml,
        depth: usize,
        scalar: &dyn Fn(&Yaml) -> Option<String>,
        vars_of: &dyn Fn(&Yaml) -> Vec<(String, String)>,
    ) -> Result<(), String> {
        if depth > 64 {
            return Err("groups nest deeper than 64".into());
        }
        inv.groups.entry(name.into()).or_default();
        if let Some(hosts) = node["hosts"].as_hash() {
            for (h, v) in hosts {
                let h = scalar(h).ok_or("a host name that is not text")?;
                for n in expand_range(&h) {
                    inv.host(name, &n, vars_of(v));
                }
            }
        }
        let vars = vars_of(&node["vars"]);
        inv.groups.entry(name.into()).or_default().1.extend(vars);
        if let Some(children) = node["children"].as_hash() {
            for (c, v) in children {
                let c = scalar(c).ok_or("a group name that is not text")?;
                inv.groups.entry(name.into()).or_default().2.push(c.clone());
                walk(inv, &c, v, depth + 1, scalar, vars_of)?;
            }
        }
        Ok(())
    }
    for doc in &docs {
        let Some(top) = doc.as_hash() else {
            return Err("the top level is not a mapping of groups".into());
        };
        for (g, node) in top {
            let g = scalar(g).ok_or("a group name that is not text")?;
            walk(&mut inv, &g, node, 0, &scalar, &vars_of)?;
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

/// Reads a hosts file; a missing default file is an empty one.
pub fn load(path: Option<&Path>) -> Result<HostsFile, HostsError> {
    let (p, explicit) = match path {
        Some(p) => (p.to_path_buf(), true),
        None => (default_path(), false),
    };
    let text = match std::fs::read_to_string(&p) {
        Ok(t) => t,
        Err(e) if !explicit && e.kind() == std::io::ErrorKind::NotFound => {
            return Ok(HostsFile::default())
        }
        Err(source) => return Err(HostsError::Read { path: p, source }),
    };
    // Relative paths in the file are relative to the file.
    let base = p.parent().map(Path::to_path_buf).unwrap_or_default();
    let parse = |why: String| HostsError::Parse {
        path: p.clone(),
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
            from_yaml(&text)
        } else {
            from_ini(&text)
        }
        .map_err(parse)?;
        return Ok(inv.resolve(&base));
    }
    let mut f: HostsFile = toml::from_str(&text).map_err(|e| parse(e.to_string()))?;
    for h in f.hosts.values_mut() {
        for q in [&mut h.identity, &mut h.known_hosts].into_iter().flatten() {
            if q.is_relative() {
                *q = base.join(&*q);
            }
        }
    }
    Ok(f)
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
}
