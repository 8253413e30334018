//! The hosts file: named lab machines in TOML (`~/.config/labperf/hosts.toml` or `--hosts-file`).
//!
//! ```toml
//! [hosts.arm1]
//! address = "root@127.0.0.1:10022"          # [user@]host[:port], or an ~/.ssh/config name
//! identity = "target/lab/aarch64/id_ed25519"  # optional
//! known_hosts = "target/lab/aarch64/known_hosts"  # optional
//! remote_dir = ".cache/labperf"              # optional
//! ```

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
    let mut f: HostsFile = toml::from_str(&text).map_err(|e| HostsError::Parse {
        path: p.clone(),
        why: e.to_string(),
    })?;
    // Relative paths in the file are relative to the file.
    let base = p.parent().map(Path::to_path_buf).unwrap_or_default();
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
}
