//! Text from lab machines and record files made safe to print: control characters and
//! terminal escape sequences become visible escapes, so a hostile hostname, path or
//! stderr line cannot drive the user's terminal.

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
