//! `record --host … --push FILE|DIR`: the workload's files put on the lab machine by content
//! hash (as the agent is), checked for the machine's architecture before anything is
//! uploaded, the command pointed at them, and their local copies kept as the symbol source.

use crate::files::cache;
use crate::lab::deploy::{ensure_file, Placed};
use crate::lab::remote::{Remote, RemoteError};
use crate::text::show;
use sha2::{Digest, Sha256};
use std::ffi::OsString;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

/// Most files one `--push DIR` holds, and the most bytes all pushes hold together.
pub const MAX_FILES: usize = 4096;
pub const MAX_BYTES: u64 = 2 << 30;

#[derive(Debug, thiserror::Error)]
pub enum PushError {
    #[error("cannot push {path}: {why}")]
    Local { path: PathBuf, why: String },
    #[error("cannot push {path}: it is an ELF file for {elf}, and {host} is {arch}")]
    WrongArch {
        path: PathBuf,
        elf: String,
        host: String,
        arch: String,
    },
    #[error(transparent)]
    Remote(#[from] RemoteError),
}

/// One file of a push: its path under the push's remote directory, its bytes, whether it
/// runs (any execute bit, or an ELF executable), and for an ELF file its machine.
pub struct File {
    pub rel: String,
    pub local: PathBuf,
    pub data: Vec<u8>,
    pub exec: bool,
    pub machine: Option<&'static str>,
}

/// One `--push` argument: a file, or a directory and everything under it.
pub struct Push {
    /// As given on the command line.
    pub given: PathBuf,
    /// The file's or directory's name: where it lands under the push's remote directory.
    pub name: String,
    pub is_dir: bool,
    pub files: Vec<File>,
    /// SHA-256 over every file's relative path and bytes: the remote directory's name.
    pub hash: String,
}

pub use crate::symbolize::symbols::elf_machine;

/// Whether `machine` (from [`elf_machine`]) runs on a host whose `uname -m` is `arch`.
fn runs_on(machine: &str, arch: &str) -> bool {
    machine == arch || (machine == "aarch64" && arch == "arm64")
}

/// Reads every `--push` argument (bounded: [`MAX_FILES`] per directory, [`MAX_BYTES`] in
/// all). Symbolic links are refused: what is pushed is what is named.
pub fn read(paths: &[PathBuf]) -> Result<Vec<Push>, PushError> {
    let mut total = 0u64;
    let mut out = Vec::new();
    for given in paths {
        let bad = |why: String| PushError::Local {
            path: given.clone(),
            why,
        };
        let meta = std::fs::symlink_metadata(given).map_err(|e| bad(e.to_string()))?;
        let name = given
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .filter(|n| n != ".." && n != ".")
            .ok_or_else(|| bad("it has no file name (name the directory itself)".into()))?;
        let mut files = Vec::new();
        if meta.is_dir() {
            let mut stack = vec![(given.clone(), name.clone())];
            while let Some((dir, rel)) = stack.pop() {
                let mut entries: Vec<_> = std::fs::read_dir(&dir)
                    .map_err(|e| bad(format!("{}: {e}", dir.display())))?
                    .collect::<Result<_, _>>()
                    .map_err(|e| bad(format!("{}: {e}", dir.display())))?;
                entries.sort_by_key(|e| e.file_name());
                for e in entries {
                    let p = e.path();
                    let r = format!("{rel}/{}", e.file_name().to_string_lossy());
                    let m = std::fs::symlink_metadata(&p).map_err(|e| bad(e.to_string()))?;
                    if m.is_dir() {
                        stack.push((p, r));
                    } else if m.is_file() {
                        if files.len() >= MAX_FILES {
                            return Err(bad(format!("it holds over {MAX_FILES} files")));
                        }
                        files.push(read_file(&p, r, &m, &mut total).map_err(bad)?);
                    } else {
                        return Err(bad(format!(
                            "{} is not a regular file or a directory",
                            p.display()
                        )));
                    }
                }
            }
        } else if meta.is_file() {
            files.push(read_file(given, name.clone(), &meta, &mut total).map_err(bad)?);
        } else {
            return Err(bad(
                "not a regular file or a directory (a symbolic link is not followed)".into(),
            ));
        }
        let mut h = Sha256::new();
        for f in &files {
            h.update((f.rel.len() as u64).to_le_bytes());
            h.update(f.rel.as_bytes());
            h.update((f.data.len() as u64).to_le_bytes());
            h.update(&f.data);
            h.update([u8::from(f.exec)]);
        }
        let hash = h.finalize().iter().map(|b| format!("{b:02x}")).collect();
        out.push(Push {
            given: given.clone(),
            name,
            is_dir: meta.is_dir(),
            files,
            hash,
        });
    }
    Ok(out)
}

fn read_file(
    p: &Path,
    rel: String,
    m: &std::fs::Metadata,
    total: &mut u64,
) -> Result<File, String> {
    *total = total.saturating_add(m.len());
    if *total > MAX_BYTES {
        return Err(format!("over {} GiB to push", MAX_BYTES >> 30));
    }
    let data = std::fs::read(p).map_err(|e| format!("{}: {e}", p.display()))?;
    let machine = elf_machine(&data);
    Ok(File {
        rel,
        local: p.into(),
        exec: m.permissions().mode() & 0o111 != 0 || machine.is_some(),
        data,
        machine,
    })
}

/// Refuses any ELF file of `pushes` that does not run on a host of architecture `arch`.
pub fn check_arch(pushes: &[Push], host: &str, arch: &str) -> Result<(), PushError> {
    for p in pushes {
        for f in &p.files {
            if let Some(m) = f.machine.filter(|m| !runs_on(m, arch)) {
                return Err(PushError::WrongArch {
                    path: f.local.clone(),
                    elf: m.into(),
                    host: show(host).into_owned(),
                    arch: arch.into(),
                });
            }
        }
    }
    Ok(())
}

/// Where a push lives on the lab machine: `<remote_dir>/push/<hash>`.
fn base(remote_dir: &str, p: &Push) -> String {
    format!("{remote_dir}/push/{}", &p.hash[..32])
}

/// Puts every push on the lab machine (each file skipped when it is there byte for byte);
/// returns, per push, its remote path and whether anything was uploaded.
pub fn upload(
    r: &Remote,
    pushes: &[Push],
    remote_dir: &str,
) -> Result<Vec<(String, bool)>, PushError> {
    let mut out = Vec::new();
    for p in pushes {
        let dir = base(remote_dir, p);
        let mut uploaded = false;
        for f in &p.files {
            let Placed { uploaded: u, .. } = ensure_file(r, &f.data, &dir, &f.rel, f.exec)?;
            uploaded |= u;
        }
        out.push((format!("{dir}/{}", p.name), uploaded));
    }
    Ok(out)
}

/// The workload's command with its program pointed at the pushed copy: when `argv[0]` is
/// a pushed file's name or path as given, or a path under a pushed directory's name or
/// path as given. Arguments are left as they are.
pub fn rewrite(command: &[OsString], pushes: &[Push], remote_dir: &str) -> Vec<OsString> {
    let mut cmd = command.to_vec();
    let Some(prog) = cmd.first().map(|p| p.as_bytes().to_vec()) else {
        return cmd;
    };
    for p in pushes {
        let given = p.given.as_os_str().as_bytes();
        let target = format!("{}/{}", base(remote_dir, p), p.name);
        let hit = if p.is_dir {
            [p.name.as_bytes(), given].iter().find_map(|d| {
                let d = d.strip_suffix(b"/").unwrap_or(d);
                prog.strip_prefix(d)
                    .and_then(|rest| rest.strip_prefix(b"/"))
                    .map(|rest| format!("{target}/{}", String::from_utf8_lossy(rest)))
            })
        } else {
            (prog == p.name.as_bytes() || prog == given).then(|| target.clone())
        };
        if let Some(t) = hit {
            cmd[0] = t.into();
            break;
        }
    }
    cmd
}

/// Stores each pushed ELF file with a build-id in the binary cache under that build-id
/// (replacing what another wrote there), so the report reads the local copy (the very
/// bytes that ran) and nothing is fetched back for it. Returns warnings.
pub fn seed_cache(pushes: &[Push], root: &Path) -> Vec<String> {
    let mut warnings = Vec::new();
    for f in pushes.iter().flat_map(|p| &p.files) {
        if f.machine.is_none() {
            continue;
        }
        let Ok(elf) = crate::symbolize::symbols::Elf::parse(&f.data) else {
            continue;
        };
        let Some(id) = elf.build_id.as_deref() else {
            continue;
        };
        let Some(dest) = cache::by_build_id(root, id) else {
            continue;
        };
        // Your own file is what the entry holds, whoever wrote it first.
        if crate::files::mapped::map_regular(&dest, f.data.len() as u64)
            .is_ok_and(|d| (*d).as_ref() == f.data.as_slice())
        {
            continue;
        }
        // Another file was there: its debug file is not this one's.
        if dest.exists() {
            let _ = std::fs::remove_file(dest.with_file_name("debug"));
        }
        let stored = cache::Pending::new(root).and_then(|mut p| {
            p.write(&f.data)?;
            p.store(&dest)
        });
        if let Err(e) = stored {
            warnings.push(format!("{}: {e}", f.local.display()));
        }
    }
    warnings
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn elf_machines_are_named_as_uname_names_them() {
        let mut h = vec![0u8; 64];
        h[..4].copy_from_slice(b"\x7fELF");
        h[5] = 1;
        h[18] = 62;
        assert_eq!(elf_machine(&h), Some("x86_64"));
        h[18] = 183;
        assert_eq!(elf_machine(&h), Some("aarch64"));
        h[18..20].copy_from_slice(&0x9026u16.to_le_bytes());
        assert_eq!(elf_machine(&h), Some("alpha"));
        assert_eq!(elf_machine(b"#!/bin/sh\n"), None);
        assert!(runs_on("aarch64", "arm64") && !runs_on("aarch64", "x86_64"));
    }

    #[test]
    fn the_program_is_pointed_at_its_pushed_copy() {
        let push = |given: &str, is_dir: bool| Push {
            given: given.into(),
            name: Path::new(given)
                .file_name()
                .unwrap()
                .to_string_lossy()
                .into(),
            is_dir,
            files: Vec::new(),
            hash: "ab".repeat(32),
        };
        let ps = [push("./target/rel/my-prog", false), push("tools/", true)];
        let os = |v: &[&str]| v.iter().map(OsString::from).collect::<Vec<_>>();
        let base = format!("/r/push/{}", "ab".repeat(16));
        assert_eq!(
            rewrite(&os(&["my-prog", "my-prog", "x"]), &ps, "/r"),
            os(&[&format!("{base}/my-prog"), "my-prog", "x"])
        );
        assert_eq!(
            rewrite(&os(&["./target/rel/my-prog"]), &ps, "/r"),
            os(&[&format!("{base}/my-prog")])
        );
        assert_eq!(
            rewrite(&os(&["tools/bin/run", "a"]), &ps, "/r"),
            os(&[&format!("{base}/tools/bin/run"), "a"])
        );
        assert_eq!(
            rewrite(&os(&["ls", "my-prog"]), &ps, "/r"),
            os(&["ls", "my-prog"])
        );
    }
}
