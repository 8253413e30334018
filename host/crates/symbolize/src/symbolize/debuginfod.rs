//! debuginfod: separate debug files and binaries fetched by build-id from the servers `DEBUGINFOD_URLS` names (`URL/buildid/HEX/debuginfo`, `/executable`), kept in labperf's cache (`debuginfod/<build-id>/debug`, `elf`); nothing is asked when the variable is unset.
//!
//! A server's answer is untrusted: it is streamed into a new file of the cache within a size
//! and a time limit (elfutils' `DEBUGINFOD_MAXSIZE`, `DEBUGINFOD_MAXTIME` and
//! `DEBUGINFOD_TIMEOUT` are honoured), and kept only when the caller's check accepts it (an
//! ELF file of the build-id asked for and of the recording's machine). Each build-id is asked
//! for once per process, and a server that cannot be reached is not asked again.

use crate::files::cache;
use std::collections::HashSet;
use std::path::{Path, PathBuf};
use std::sync::Mutex;
#[cfg(feature = "remote")]
use std::time::Duration;

/// What is asked for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Kind {
    /// The separate debug file (`/debuginfo`).
    Debuginfo,
    /// The binary itself (`/executable`).
    Executable,
}

impl Kind {
    fn url_part(self) -> &'static str {
        match self {
            Kind::Debuginfo => "debuginfo",
            Kind::Executable => "executable",
        }
    }

    /// Its entry's name in the cache.
    fn entry(self) -> &'static str {
        match self {
            Kind::Debuginfo => "debug",
            Kind::Executable => "elf",
        }
    }

    fn what(self) -> &'static str {
        match self {
            Kind::Debuginfo => "debug file",
            Kind::Executable => "binary",
        }
    }
}

/// The servers of `DEBUGINFOD_URLS` (space-separated, as elfutils reads it); empty when it is
/// unset.
pub fn urls_from_env() -> Vec<String> {
    std::env::var("DEBUGINFOD_URLS")
        .map(|v| v.split_whitespace().map(str::to_string).collect())
        .unwrap_or_default()
}

/// The cache entry of build-id `id` and `kind` under `root` (`None` for an implausible id).
pub fn entry(root: &Path, id: &[u8], kind: Kind) -> Option<PathBuf> {
    cache::by_build_id(root, id).map(|e| e.with_file_name(kind.entry()))
}

/// What this process asked: build-ids (with the kind asked for), and servers found
/// unreachable.
#[derive(Default)]
struct Asked {
    ids: HashSet<(Vec<u8>, Kind)>,
    down: HashSet<String>,
}

static ASKED: Mutex<Option<Asked>> = Mutex::new(None);

/// The file of build-id `id` and `kind`: the cache's entry under `root` when `fits` accepts
/// it, else (the first time in this process) each server of `urls` asked in turn until one
/// gives a file `fits` accepts, which is then kept in the cache. `about` names the file in
/// the note; a file over `limit` bytes (or `DEBUGINFOD_MAXSIZE`) is not taken. Returns the
/// file, and a one-line note of what the servers said when one was asked.
pub fn find(
    urls: &[String],
    root: &Path,
    id: &[u8],
    (kind, about): (Kind, &str),
    limit: u64,
    fits: &dyn Fn(&Path) -> Result<(), String>,
) -> (Option<PathBuf>, Option<String>) {
    let Some(dest) = entry(root, id, kind) else {
        return (None, None);
    };
    if dest.is_file() && fits(&dest).is_ok() {
        return (Some(dest), None);
    }
    if urls.is_empty() {
        return (None, None);
    }
    let down = {
        let mut g = ASKED.lock().unwrap_or_else(|e| e.into_inner());
        let a = g.get_or_insert_with(Asked::default);
        if !a.ids.insert((id.to_vec(), kind)) {
            return (None, None);
        }
        a.down.clone()
    };
    let mut said = Vec::new();
    let mut got = None;
    for url in urls {
        if down.contains(url) {
            continue;
        }
        let base = url.trim_end_matches('/');
        let shown = crate::text::show(base);
        if !(base.starts_with("http://") || base.starts_with("https://")) {
            said.push(format!("{shown}: not an http:// or https:// URL, skipped"));
            continue;
        }
        let at = format!("{base}/buildid/{}/{}", cache::hex(id), kind.url_part());
        match fetch(&at, root, (&dest, limit), fits) {
            Ok(size) => {
                said.push(format!(
                    "{shown}: {} bytes, kept in {}",
                    size,
                    dest.display()
                ));
                got = Some(dest.clone());
                break;
            }
            Err(Failure::Said(why)) => said.push(format!("{shown}: {why}")),
            Err(Failure::Unreachable(why)) => {
                said.push(format!("{shown}: {why} (not asked again)"));
                let mut g = ASKED.lock().unwrap_or_else(|e| e.into_inner());
                g.get_or_insert_with(Asked::default)
                    .down
                    .insert(url.clone());
            }
        }
    }
    let note = (!said.is_empty()).then(|| {
        format!(
            "note: debuginfod: the {} of {} (build-id {}): {}",
            kind.what(),
            crate::text::show(about),
            cache::hex(id),
            said.join("; ")
        )
    });
    (got, note)
}

/// Why a server gave nothing.
#[cfg_attr(not(feature = "remote"), allow(dead_code))]
enum Failure {
    /// It answered (not found, an error, a file that does not fit, too large).
    Said(String),
    /// It could not be reached (or took too long): not asked again in this process.
    Unreachable(String),
}

/// Most bytes a server's file may have: `DEBUGINFOD_MAXSIZE`, at most `limit`.
#[cfg(feature = "remote")]
fn max_size(limit: u64) -> u64 {
    env_u64("DEBUGINFOD_MAXSIZE")
        .filter(|&n| n > 0)
        .unwrap_or(limit)
        .min(limit)
}

/// The seconds a server may take to connect, answer or send more bytes
/// (`DEBUGINFOD_TIMEOUT`, elfutils' default 90), and a whole download
/// (`DEBUGINFOD_MAXTIME`, default 600).
#[cfg(feature = "remote")]
fn timeouts() -> (Duration, Duration) {
    let t = env_u64("DEBUGINFOD_TIMEOUT")
        .filter(|&n| n > 0)
        .unwrap_or(90);
    let max = env_u64("DEBUGINFOD_MAXTIME")
        .filter(|&n| n > 0)
        .unwrap_or(600);
    (Duration::from_secs(t), Duration::from_secs(max))
}

#[cfg(feature = "remote")]
fn env_u64(name: &str) -> Option<u64> {
    std::env::var(name).ok()?.trim().parse().ok()
}

/// GETs `url` into a new cache file, kept at `dest` when it has at most `limit` bytes and
/// `fits` accepts it; its size.
#[cfg(feature = "remote")]
fn fetch(
    url: &str,
    root: &Path,
    (dest, limit): (&Path, u64),
    fits: &dyn Fn(&Path) -> Result<(), String>,
) -> Result<u64, Failure> {
    use std::io::Read;
    let (t, max_time) = timeouts();
    let max = max_size(limit);
    let tls = ureq::tls::TlsConfig::builder()
        .provider(ureq::tls::TlsProvider::NativeTls)
        .root_certs(ureq::tls::RootCerts::PlatformVerifier)
        .build();
    let agent: ureq::Agent = ureq::Agent::config_builder()
        .http_status_as_error(false)
        .timeout_global(Some(max_time))
        .timeout_connect(Some(t))
        .timeout_recv_response(Some(t))
        .timeout_per_read(Some(t))
        .max_redirects(8)
        .user_agent(format!("labperf/{}", env!("CARGO_PKG_VERSION")))
        .tls_config(tls)
        .build()
        .into();
    let mut resp = agent.get(url).call().map_err(|e| match e {
        ureq::Error::Timeout(_) => {
            Failure::Unreachable(format!("no answer within {} s", t.as_secs()))
        }
        ureq::Error::Io(_)
        | ureq::Error::HostNotFound
        | ureq::Error::ConnectionFailed
        | ureq::Error::Tls(_)
        | ureq::Error::NativeTls(_)
        | ureq::Error::Protocol(_) => {
            Failure::Unreachable(crate::text::show(&e.to_string()).into_owned())
        }
        e => Failure::Said(crate::text::show(&e.to_string()).into_owned()),
    })?;
    let status = resp.status();
    if status == 404 {
        return Err(Failure::Said("not found (404)".into()));
    }
    if !status.is_success() {
        return Err(Failure::Said(format!("HTTP {}", status.as_u16())));
    }
    let stated = resp
        .headers()
        .get("content-length")
        .and_then(|v| v.to_str().ok()?.trim().parse::<u64>().ok());
    if let Some(n) = stated.filter(|&n| n > max) {
        return Err(Failure::Said(format!(
            "{n} bytes, over {max} bytes (DEBUGINFOD_MAXSIZE): not fetched"
        )));
    }
    let mut pending = cache::Pending::new(root).map_err(|e| Failure::Said(e.to_string()))?;
    let mut reader = resp
        .body_mut()
        .with_config()
        .limit(max.saturating_add(1))
        .reader();
    let mut buf = vec![0u8; 1 << 16];
    let mut size = 0u64;
    let copied = loop {
        if crate::interrupt::aborting() {
            break Err("interrupted".to_string());
        }
        match reader.read(&mut buf) {
            Ok(0) => break Ok(()),
            Ok(n) => {
                size += n as u64;
                if size > max {
                    break Err(format!("over {max} bytes (DEBUGINFOD_MAXSIZE), not kept"));
                }
                if let Err(e) = pending.write(&buf[..n]) {
                    break Err(e.to_string());
                }
            }
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(e) => break Err(format!("the download failed after {size} bytes: {e}")),
        }
    };
    if let Err(why) = copied {
        pending.discard();
        return Err(Failure::Said(crate::text::show(&why).into_owned()));
    }
    if let Err(why) = fits(pending.path()) {
        pending.discard();
        return Err(Failure::Said(format!("{size} bytes, {why}: not used")));
    }
    pending
        .store(dest)
        .map_err(|e| Failure::Said(e.to_string()))?;
    Ok(size)
}

/// Without the `remote` feature (the fuzz targets) nothing is fetched.
#[cfg(not(feature = "remote"))]
fn fetch(
    _url: &str,
    _root: &Path,
    _dest: (&Path, u64),
    _fits: &dyn Fn(&Path) -> Result<(), String>,
) -> Result<u64, Failure> {
    Err(Failure::Unreachable(
        "this labperf was built without network support".into(),
    ))
}
