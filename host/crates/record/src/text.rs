//! Text from lab machines and record files made safe to print: control characters and
//! terminal escape sequences become visible escapes, so a hostile hostname, path or
//! stderr line cannot drive the user's terminal. Also the words around numbers: plurals
//! ("1 sample") and signal names ("killed by SIGSEGV").

use std::borrow::Cow;

/// `s` as one printable line: every control character (newlines included) escaped.
pub fn show(s: &str) -> Cow<'_, str> {
    escape(s, false)
}

/// `s` as printable text: control characters escaped except newline and tab.
pub fn show_text(s: &str) -> Cow<'_, str> {
    escape(s, true)
}

/// Bytes (not always UTF-8) as printable text, newlines and tabs kept.
pub fn show_bytes(b: &[u8]) -> String {
    escape(&String::from_utf8_lossy(b), true).into_owned()
}

fn escape(s: &str, keep_lines: bool) -> Cow<'_, str> {
    let bad =
        |c: char| (c.is_control() && !(keep_lines && (c == '\n' || c == '\t'))) || c == '\u{7f}';
    if !s.chars().any(bad) {
        return Cow::Borrowed(s);
    }
    let mut out = String::with_capacity(s.len() + 8);
    for c in s.chars() {
        if bad(c) {
            match c {
                '\n' => out.push_str("\\n"),
                '\r' => out.push_str("\\r"),
                '\t' => out.push_str("\\t"),
                c if (c as u32) < 0x100 => out.push_str(&format!("\\x{:02x}", c as u32)),
                c => out.push_str(&format!("\\u{{{:x}}}", c as u32)),
            }
        } else {
            out.push(c);
        }
    }
    Cow::Owned(out)
}

/// The file name of a path (a DSO's, say).
pub fn file_name(path: &str) -> &str {
    path.rsplit('/').next().unwrap_or(path)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn escapes_what_a_terminal_would_obey() {
        assert_eq!(show("lab1"), "lab1");
        assert_eq!(show("a\x1b[2Jb"), "a\\x1b[2Jb");
        assert_eq!(show("x\ny"), "x\\ny");
        assert_eq!(show_text("x\ny\tz\r"), "x\ny\tz\\r");
        assert_eq!(show("\u{9b}31m"), "\\x9b31m");
        assert_eq!(show_bytes(b"ok\xff\x07\n"), "ok\u{fffd}\\x07\n");
    }
}

/// What a recording recorded, from its header's command, for a title: the workload's words,
/// or "process N" / "thread N" for an attached recording (the header's `--pid N`,
/// `--tid N`), which is no command line.
pub fn recorded(command: &[String]) -> String {
    match command {
        [flag, n] if flag == "--pid" => format!("process {n}"),
        [flag, n] if flag == "--tid" => format!("thread {n}"),
        _ => command.join(" "),
    }
}

/// `n` and its noun, singular for 1: `plural(1, "sample", "samples")` is "1 sample".
pub fn plural(n: u64, one: &str, many: &str) -> String {
    format!("{n} {}", if n == 1 { one } else { many })
}

/// The name of Linux signal `n` where its number is the one x86_64, aarch64 and the other
/// architectures of the generic numbering use (not Alpha's, MIPS's, SPARC's or PA-RISC's):
/// `signal_name(11)` is "SIGSEGV".
pub fn signal_name(n: i32) -> Option<&'static str> {
    const NAMES: [&str; 31] = [
        "SIGHUP",
        "SIGINT",
        "SIGQUIT",
        "SIGILL",
        "SIGTRAP",
        "SIGABRT",
        "SIGBUS",
        "SIGFPE",
        "SIGKILL",
        "SIGUSR1",
        "SIGSEGV",
        "SIGUSR2",
        "SIGPIPE",
        "SIGALRM",
        "SIGTERM",
        "SIGSTKFLT",
        "SIGCHLD",
        "SIGCONT",
        "SIGSTOP",
        "SIGTSTP",
        "SIGTTIN",
        "SIGTTOU",
        "SIGURG",
        "SIGXCPU",
        "SIGXFSZ",
        "SIGVTALRM",
        "SIGPROF",
        "SIGWINCH",
        "SIGIO",
        "SIGPWR",
        "SIGSYS",
    ];
    usize::try_from(n)
        .ok()
        .and_then(|n| n.checked_sub(1))
        .and_then(|i| NAMES.get(i))
        .copied()
}

/// How a workload ended, from the status the agents pass on (128 + N for signal N, as a
/// shell says it): "was killed by SIGSEGV" or "exited with status 3". `generic`: the
/// machine numbers its signals as x86_64 and aarch64 do (else a signal is said by number).
pub fn workload_end(status: i32, generic: bool) -> String {
    let sig = status - 128;
    match signal_name(sig) {
        Some(name) if status > 128 && generic => format!("was killed by {name}"),
        _ if status > 128 && sig < 65 => format!("was killed by signal {sig}"),
        _ => format!("exited with status {status}"),
    }
}

/// A realtime clock reading (nanoseconds since 1970, UTC) as an ISO 8601 date and time:
/// `2026-12-03T07:22:18.042Z` (milliseconds, truncated).
pub fn utc_date(ns: u64) -> String {
    let secs = ns / 1_000_000_000;
    let ms = ns / 1_000_000 % 1000;
    let (days, rem) = (secs / 86_400, secs % 86_400);
    // Days since 1970-01-01 as a civil date (Howard Hinnant's days_from_civil inverse).
    let z = days as i64 + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    format!(
        "{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}.{ms:03}Z",
        rem / 3600,
        rem / 60 % 60,
        rem % 60
    )
}

#[cfg(test)]
mod words {
    use super::*;

    #[test]
    fn an_attached_recording_is_named_as_what_it_recorded() {
        let w = |c: &[&str]| recorded(&c.iter().map(|s| s.to_string()).collect::<Vec<_>>());
        assert_eq!(w(&["--pid", "4242"]), "process 4242");
        assert_eq!(w(&["--tid", "7"]), "thread 7");
        assert_eq!(w(&["./prog", "--pid", "1"]), "./prog --pid 1");
        assert_eq!(w(&["-a", "--duration", "1.000"]), "-a --duration 1.000");
    }

    #[test]
    fn dates_plurals_and_signals() {
        assert_eq!(utc_date(0), "1970-01-01T00:00:00.000Z");
        // `date -u -d @1796282538` (a leap year's end, and a date past February).
        assert_eq!(
            utc_date(1_796_282_538_042_000_000),
            "2026-12-03T07:22:18.042Z"
        );
        assert_eq!(
            utc_date(951_782_400_000_000_000),
            "2000-02-29T00:00:00.000Z"
        );
        assert_eq!(
            utc_date(4_107_542_399_999_999_999),
            "2100-02-28T23:59:59.999Z"
        );
        assert_eq!(plural(1, "sample", "samples"), "1 sample");
        assert_eq!(plural(0, "sample", "samples"), "0 samples");
        assert_eq!(signal_name(11), Some("SIGSEGV"));
        assert_eq!(signal_name(0), None);
        assert_eq!(signal_name(32), None);
        assert_eq!(workload_end(139, true), "was killed by SIGSEGV");
        assert_eq!(workload_end(139, false), "was killed by signal 11");
        assert_eq!(workload_end(3, true), "exited with status 3");
        assert_eq!(workload_end(255, true), "exited with status 255");
    }
}
