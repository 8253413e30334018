//! Running the agent on a lab machine over SSH: pick and upload the agent by content hash,
//! run the workload, fetch the record file and the binaries its samples need.

use crate::remote::{shell_quote, Remote, RemoteError};
use labperf_common::Record;
use sha2::{Digest, Sha256};
use std::path::{Path, PathBuf};

/// The local cache: `$XDG_CACHE_HOME/labperf` or `~/.cache/labperf`.
pub fn local_cache() -> PathBuf {
    std::env::var_os("XDG_CACHE_HOME")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cache")))
        .unwrap_or_else(|| PathBuf::from(".cache"))
        .join("labperf")
}

/// `uname -m` of the target.
pub fn arch(r: &Remote) -> Result<String, RemoteError> {
    Ok(
        String::from_utf8_lossy(&r.check("uname -m", "uname -m", None)?)
            .trim()
            .to_string(),
    )
}

/// Makes sure the agent `local` is on the target under `<remote_dir>/agents/<sha256>/`,
/// uploading it only when it is not there yet. Returns its remote path.
pub fn ensure_agent(
    r: &Remote,
    local: &Path,
    remote_dir: &str,
) -> Result<(String, bool), RemoteError> {
    let data = std::fs::read(local).map_err(|e| RemoteError::Config {
        path: local.into(),
        why: e.to_string(),
    })?;
    let hash: String = Sha256::digest(&data)
        .iter()
        .take(16)
        .map(|b| format!("{b:02x}"))
        .collect();
    let dir = format!("{remote_dir}/agents/{hash}");
    let path = format!("{dir}/labperf-agent");
    if r.run(&format!("test -x {}", shell_quote(&path)), None, |_| {})?
        .status
        == 0
    {
        return Ok((path, false));
    }
    let o = r.run(&format!("mkdir -p {}", shell_quote(&dir)), None, |_| {})?;
    if o.status != 0 {
        return Err(RemoteError::NotWritable {
            host: r.target.name.clone(),
            path: dir,
            stderr: String::from_utf8_lossy(&o.stderr).trim().into(),
        });
    }
    r.upload(&data, &path, "755")?;
    Ok((path, true))
}

/// Runs `agent record <agent_args> -o <run file> -- <command>` on the target; stderr is
/// streamed to `on_stderr`. Returns the remote record file and the agent's exit status.
pub fn run_agent(
    r: &Remote,
    agent: &str,
    remote_dir: &str,
    verb: &str,
    agent_args: &[String],
    command: &[String],
    on_stderr: impl FnMut(&[u8]),
) -> Result<(String, i32), RemoteError> {
    let runs = format!("{remote_dir}/runs");
    let file = format!(
        "{runs}/{}-{}.lpr",
        std::process::id(),
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos())
            .unwrap_or(0)
    );
    let o = r.run(
        &format!(
            "mkdir -p {} && test -w {}",
            shell_quote(&runs),
            shell_quote(&runs)
        ),
        None,
        |_| {},
    )?;
    if o.status != 0 {
        return Err(RemoteError::NotWritable {
            host: r.target.name.clone(),
            path: runs,
            stderr: String::from_utf8_lossy(&o.stderr).trim().into(),
        });
    }
    let mut cmd = format!(
        "exec {} {verb} -o {}",
        shell_quote(agent),
        shell_quote(&file)
    );
    for a in agent_args {
        cmd.push(' ');
        cmd.push_str(&shell_quote(a));
    }
    cmd.push_str(" --");
    for a in command {
        cmd.push(' ');
        cmd.push_str(&shell_quote(a));
    }
    let o = r.run(&cmd, None, on_stderr)?;
    let err = String::from_utf8_lossy(&o.stderr);
    if err.contains("No space left on device") {
        return Err(RemoteError::DiskFull {
            host: r.target.name.clone(),
            path: file,
        });
    }
    Ok((file, o.status))
}

/// Fetches the remote record file into `local` (a temporary name, then a rename) and removes it remotely.
pub fn fetch_record(r: &Remote, remote: &str, local: &Path) -> Result<(), RemoteError> {
    let data = r.fetch(remote)?;
    let tmp = local.with_extension("lpr.part");
    let write = || -> std::io::Result<()> {
        std::fs::write(&tmp, &data)?;
        std::fs::rename(&tmp, local)
    };
    if let Err(e) = write() {
        let _ = std::fs::remove_file(&tmp);
        return Err(RemoteError::Config {
            path: local.into(),
            why: e.to_string(),
        });
    }
    let _ = r.run(&format!("rm -f {}", shell_quote(remote)), None, |_| {});
    Ok(())
}

/// Fetches the ELF files that the recording's mmap records name into the local
/// binary cache: `<cache>/<build-id>/elf`, or `<cache>/hosts/<host>/<path>` without a
/// build-id. Returns the symfs directories to report with, and warnings.
pub fn fetch_binaries(r: &Remote, file: &Path, cache: &Path) -> (Vec<PathBuf>, Vec<String>) {
    let mut maps: Vec<(String, Option<Vec<u8>>)> = Vec::new();
    let _ = crate::load::stream(file, |rec| {
        if let Record::Mmap2(m) = rec {
            if m.path.starts_with('/') && !maps.iter().any(|(p, _)| *p == m.path) {
                maps.push((m.path.clone(), m.build_id.clone()));
            }
        }
    });
    let by_path = cache
        .join("hosts")
        .join(format!("{}_{}", r.target.host, r.target.port));
    let mut warnings = Vec::new();
    for (path, build_id) in maps {
        let dest = match &build_id {
            Some(b) => cache
                .join(b.iter().map(|x| format!("{x:02x}")).collect::<String>())
                .join("elf"),
            None => by_path.join(path.trim_start_matches('/')),
        };
        if dest.is_file() && build_id.is_some() {
            continue;
        }
        match r.fetch(&path) {
            Ok(data) => {
                if let (Some(want), Some(have)) = (
                    &build_id,
                    crate::symbols::Elf::parse(&data)
                        .ok()
                        .and_then(|e| e.build_id),
                ) {
                    if *want != have {
                        warnings.push(format!("{path} on {} changed since the recording (build-id differs): its symbols were not cached", r.target.name));
                        continue;
                    }
                }
                let tmp = dest.with_extension("part");
                let ok = dest
                    .parent()
                    .map(std::fs::create_dir_all)
                    .transpose()
                    .is_ok()
                    && std::fs::write(&tmp, &data).is_ok()
                    && std::fs::rename(&tmp, &dest).is_ok();
                if !ok {
                    let _ = std::fs::remove_file(&tmp);
                    warnings.push(format!(
                        "cannot write {} into the binary cache",
                        dest.display()
                    ));
                }
            }
            Err(e) => warnings.push(format!("cannot fetch {path} for symbols: {e}")),
        }
    }
    (vec![cache.to_path_buf(), by_path], warnings)
}
