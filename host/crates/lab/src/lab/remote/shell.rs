//! Command lines for a lab machine's POSIX shell: arguments quoted byte for byte, `--remote-dir`, and unique names for run files.

use super::error::RemoteError;
/// A name part no other call in this machine's processes gives: the pid, a per-process
/// counter and the time, for temporary and run files (several hosts run at once).
pub fn unique_id() -> String {
    static N: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    format!(
        "{}-{}-{}",
        std::process::id(),
        N.fetch_add(1, std::sync::atomic::Ordering::Relaxed),
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos())
    )
}

/// Single-quotes `s` for a POSIX shell: every byte stays literal (spaces, quotes, `;$()`, newlines).
pub fn shell_quote(s: &str) -> String {
    format!("'{}'", s.replace('\'', r"'\''"))
}

/// One argument for a POSIX shell, byte for byte: single-quoted when it is UTF-8; else a
/// `printf` of its octal escapes (ssh sends commands as text), with a trailing `.` kept
/// and cut again so that command substitution keeps trailing newlines.
pub fn shell_arg(a: &std::ffi::OsStr) -> String {
    use std::os::unix::ffi::OsStrExt;
    match a.to_str() {
        Some(s) => shell_quote(s),
        None => {
            let octal: String = a.as_bytes().iter().map(|b| format!("\\{b:03o}")).collect();
            format!("\"$(printf '{octal}.')\"")
        }
    }
}

/// A shell command line of arguments, byte for byte (see [`shell_arg`]). Arguments that
/// are not UTF-8 are first put in variables, cut of their guard dot, then expanded.
pub fn shell_words(args: &[std::ffi::OsString]) -> (String, String) {
    let mut prelude = String::new();
    let mut words = Vec::new();
    for (i, a) in args.iter().enumerate() {
        if a.to_str().is_some() {
            words.push(shell_arg(a));
        } else {
            prelude.push_str(&format!("lp{i}={}; lp{i}=\"${{lp{i}%.}}\"; ", shell_arg(a)));
            words.push(format!("\"$lp{i}\""));
        }
    }
    (prelude, words.join(" "))
}

/// `--remote-dir`, as a path the remote shell takes literally: `~/x` (or `~`) is the
/// login directory, where relative paths start anyway; `~user/` is refused.
pub fn remote_dir(dir: &str) -> Result<String, RemoteError> {
    let bad = |why: &str| Err(RemoteError::RemoteDir(dir.into(), why.into()));
    if dir.is_empty() {
        return bad("empty");
    }
    if dir.contains('\0') || dir.contains('\n') {
        return bad("it holds a NUL or newline character");
    }
    if dir == "~" {
        return Ok(".".into());
    }
    if let Some(rest) = dir.strip_prefix("~/") {
        return Ok(if rest.is_empty() {
            ".".into()
        } else {
            rest.into()
        });
    }
    if dir.starts_with('~') {
        return bad("~user/ is not supported: give the path relative to the login directory, or an absolute one");
    }
    Ok(dir.into())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quoting_keeps_every_byte() {
        assert_eq!(shell_quote("a b"), "'a b'");
        assert_eq!(shell_quote("it's"), r"'it'\''s'");
        assert_eq!(shell_quote("$(x);`y`\n"), "'$(x);`y`\n'");
        use std::os::unix::ffi::OsStringExt;
        let bad = std::ffi::OsString::from_vec(vec![b'a', 0xff, b'\n']);
        let (pre, words) = shell_words(&["x y".into(), bad]);
        assert_eq!(
            pre,
            "lp1=\"$(printf '\\141\\377\\012.')\"; lp1=\"${lp1%.}\"; "
        );
        assert_eq!(words, "'x y' \"$lp1\"");
    }

    /// Every token a ProxyCommand expands reaches its program as one literal word, however
    /// the command quotes it: names that hold every shell metacharacter (which
    /// [`names`] refuses before this, as OpenSSH does) run nothing.
    #[test]
    fn remote_dirs() {
        assert_eq!(remote_dir("~/x").unwrap(), "x");
        assert_eq!(remote_dir("~").unwrap(), ".");
        assert_eq!(remote_dir(".cache/labperf").unwrap(), ".cache/labperf");
        assert_eq!(remote_dir("/tmp/lp").unwrap(), "/tmp/lp");
        assert!(remote_dir("~bob/x").is_err());
        assert!(remote_dir("").is_err());
    }
}
