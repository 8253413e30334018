//! JIT code named from perf's map files (`/tmp/perf-PID.map`, lines `START SIZE name` in hex, as node `--perf-basic-prof`, Java's `-XX:+DumpPerfMapAtExit` and `python3.12 -X perf` write them): untrusted text read within bounds, the latest line for an address winning.

use crate::symbolize::intervals::Intervals;
use std::path::Path;
use std::sync::Arc;

/// Largest map file read.
pub const MAX_MAP: u64 = 256 << 20;
/// Longest line taken (a longer one is counted as malformed).
pub const MAX_LINE: usize = 4096;
/// Most functions kept from one file (each costs about 60 bytes beside the file's own).
pub const MAX_ENTRIES: usize = 4_000_000;

/// The functions of one map file: its text, and each function's name as a place in it.
#[derive(Debug, Default)]
pub struct PerfMap {
    index: Intervals,
    text: Vec<u8>,
    /// Each function's name: its offset in `text` and its length.
    names: Vec<(u32, u16)>,
    /// Lines taken.
    pub entries: usize,
}

/// What a map file held that was not taken.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Skipped {
    /// Lines that are not `START SIZE name` (or longer than [`MAX_LINE`]).
    pub malformed: u64,
    /// The first of them: its number (from 1) and its start.
    pub first: Option<(u64, String)>,
    /// Lines past [`MAX_ENTRIES`].
    pub over: u64,
}

impl PerfMap {
    /// Parses a map file's bytes (at most [`MAX_MAP`]: the names are kept as places in
    /// them): each line `START SIZE name` (START and SIZE in hex, with or without `0x`, as
    /// perf reads them); an address covered by several lines gets the last one's name (JIT
    /// code is freed and its memory reused: the latest line is the newest code). Lines of
    /// size 0 name nothing.
    pub fn parse(mut text: Vec<u8>) -> (PerfMap, Skipped) {
        text.truncate(MAX_MAP as usize);
        let mut index = Intervals::default();
        let mut names = Vec::new();
        let mut skipped = Skipped::default();
        let mut at = 0usize;
        for (n, whole) in text.split(|&b| b == b'\n').enumerate() {
            let line_at = at;
            at += whole.len() + 1;
            let line = whole.strip_suffix(b"\r").unwrap_or(whole);
            if line.is_empty() {
                continue;
            }
            let Some((start, size, name)) = fields(line).filter(|_| line.len() <= MAX_LINE) else {
                skipped.malformed += 1;
                if skipped.first.is_none() {
                    let head = &line[..line.len().min(80)];
                    skipped.first = Some((
                        n as u64 + 1,
                        crate::text::show(&String::from_utf8_lossy(head)).into_owned(),
                    ));
                }
                continue;
            };
            if size == 0 {
                continue;
            }
            if names.len() >= MAX_ENTRIES {
                skipped.over += 1;
                continue;
            }
            // The name ends the line: its offset is the line's end less its length.
            let off = line_at + line.len() - name.len();
            index.insert(start, start.saturating_add(size), names.len() as u32);
            names.push((off as u32, name.len() as u16));
        }
        let entries = names.len();
        let map = PerfMap {
            index,
            text,
            names,
            entries,
        };
        (map, skipped)
    }

    /// The function at `ip`.
    pub fn find(&self, ip: u64) -> Option<Arc<str>> {
        let &(off, len) = self.names.get(self.index.find(ip)? as usize)?;
        let name = self.text.get(off as usize..off as usize + len as usize)?;
        Some(Arc::from(String::from_utf8_lossy(name).as_ref()))
    }
}

/// A line's START, SIZE and name.
fn fields(line: &[u8]) -> Option<(u64, u64, &[u8])> {
    let hex = |w: &[u8]| {
        let w = w
            .strip_prefix(b"0x")
            .or_else(|| w.strip_prefix(b"0X"))
            .unwrap_or(w);
        if w.is_empty() || w.len() > 16 {
            return None;
        }
        u64::from_str_radix(std::str::from_utf8(w).ok()?, 16).ok()
    };
    let mut parts = line.splitn(3, |&b| b == b' ');
    let start = hex(parts.next()?)?;
    let size = hex(parts.next()?)?;
    let name = parts.next().filter(|n| !n.trim_ascii().is_empty())?;
    Some((start, size, name))
}

/// Whether a mapping of this name is anonymous memory that JIT compilers put code in (perf's
/// `is_anon_memory` and `is_no_dso_memory`, and a name given by `PR_SET_VMA_ANON_NAME`):
/// samples there are named by the process's map file.
pub fn anonymous(path: &str) -> bool {
    path.is_empty()
        || path == "//anon"
        || path == "[heap]"
        || path.starts_with("[anon:")
        || path.starts_with("[stack")
        || path.starts_with("/dev/zero")
        || path.starts_with("/anon_hugepage")
        || path.starts_with("/SYSV")
}

/// The map file a process of pid `pid` writes on its machine (the name perf gives its
/// samples' file too).
pub fn path_of(pid: u32) -> String {
    format!("/tmp/perf-{pid}.map")
}

/// Reads the map file at `path` (a regular file of at most [`MAX_MAP`] bytes). `local`:
/// a file of this machine's `/tmp`, used only when it is owned by this user or root (anyone
/// may write there, as perf checks) and was last written no earlier than `since` (a file
/// older than the recording is an earlier process's of the same pid). Returns the map and
/// the warnings about it, or why it is not used (`None`: there is no file).
pub fn read(
    path: &Path,
    local: bool,
    since: Option<std::time::SystemTime>,
) -> Option<Result<(PerfMap, Vec<String>), String>> {
    use std::io::Read;
    use std::os::unix::fs::MetadataExt;
    let shown = path.display();
    let (file, _, _) = match crate::files::mapped::open_regular(path, MAX_MAP) {
        Ok(f) => f,
        Err(crate::files::mapped::FileError::Open { source, .. }) => {
            return (source.kind() != std::io::ErrorKind::NotFound).then(|| {
                Err(format!(
                    "cannot read {shown}: {source}: its JIT code is not named"
                ))
            })
        }
        Err(e) => return Some(Err(format!("{e}: its JIT code is not named"))),
    };
    // What is checked is the file opened (not a name another user may swap meanwhile).
    let meta = file.metadata().ok()?;
    if local {
        // SAFETY: geteuid has no preconditions.
        let me = unsafe { libc::geteuid() };
        if meta.uid() != me && meta.uid() != 0 {
            return Some(Err(format!("{shown} is owned by user {}, not by you or root: not read (anyone may write in /tmp; copy it under --symfs DIR/tmp/ if you trust it)", meta.uid())));
        }
        if let (Some(since), Ok(m)) = (since, meta.modified()) {
            if m + std::time::Duration::from_secs(1) < since {
                return Some(Err(format!("{shown} was last written before the recording started: another process's of the same pid, not used")));
            }
        }
    }
    let mut data = Vec::new();
    if let Err(e) = file.take(MAX_MAP).read_to_end(&mut data) {
        return Some(Err(format!(
            "cannot read {shown}: {e}: its JIT code is not named"
        )));
    }
    let (map, skipped) = PerfMap::parse(data);
    let mut warnings = Vec::new();
    if let Some((n, head)) = &skipped.first {
        warnings.push(format!(
            "{shown}: {} not `START SIZE name` (line {n}: \"{head}\"): skipped",
            crate::text::plural(skipped.malformed, "line is", "lines are")
        ));
    }
    if skipped.over > 0 {
        warnings.push(format!(
            "{shown}: over {MAX_ENTRIES} functions: the last {} lines were not read",
            skipped.over
        ));
    }
    Some(Ok((map, warnings)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_are_read_as_perf_reads_them() {
        // node's (no 0x), Java's (0x, padded), python's; a later line wins where they overlap.
        let text = b"35e06440b186 2d JS:~hot /tmp/x.js:1:24\n\
            0x00007fc6f4f18120 0x00000000000000d8 long Hot.hotLoopJava(long)\n\
            7f9a216c0785 b py::f:<string>\r\n\
            1000 100 old\n\
            1080 10 new\n\
            2000 0 empty\n";
        let (m, skipped) = PerfMap::parse(text.to_vec());
        assert_eq!(skipped, Skipped::default());
        assert_eq!(m.entries, 5);
        let name = |ip| m.find(ip).map(|s| s.to_string());
        assert_eq!(
            name(0x35e06440b186).as_deref(),
            Some("JS:~hot /tmp/x.js:1:24")
        );
        assert_eq!(
            name(0x35e06440b186 + 0x2c).as_deref(),
            Some("JS:~hot /tmp/x.js:1:24")
        );
        assert_eq!(name(0x35e06440b186 + 0x2d), None);
        assert_eq!(
            name(0x7fc6f4f18120 + 0xd7).as_deref(),
            Some("long Hot.hotLoopJava(long)")
        );
        assert_eq!(name(0x7f9a216c0785).as_deref(), Some("py::f:<string>"));
        assert_eq!(name(0x107f).as_deref(), Some("old"));
        assert_eq!(name(0x1080).as_deref(), Some("new"));
        assert_eq!(name(0x1090).as_deref(), Some("old"));
        assert_eq!(name(0x2000), None);
    }

    #[test]
    fn malformed_lines_are_counted_never_trusted() {
        let long = format!("1000 10 {}\n", "x".repeat(MAX_LINE));
        let text = [
            b"zz 10 f\n".as_slice(),
            b"1000\n",
            b"1000 10\n",
            b"1000 10  \n",
            b"10000000000000000 1 huge\n",
            b"\xff\xfe 1 f\n",
            long.as_bytes(),
            b"3000 10 \xffname\n",
        ]
        .concat();
        let (m, skipped) = PerfMap::parse(text);
        assert_eq!(skipped.malformed, 7);
        assert_eq!(skipped.first.as_ref().map(|f| f.0), Some(1));
        assert_eq!(m.entries, 1);
        assert_eq!(
            m.find(0x3000).map(|s| s.to_string()).as_deref(),
            Some("\u{fffd}name")
        );
        // A range past the end of the address space ends there.
        let (m, _) = PerfMap::parse(b"ffffffffffffff00 1000 top\n".to_vec());
        assert_eq!(
            m.find(u64::MAX - 1).map(|s| s.to_string()).as_deref(),
            Some("top")
        );
    }

    #[test]
    fn functions_past_the_limit_are_counted_not_kept() {
        let text = b"1 1 a\n".repeat(MAX_ENTRIES + 10);
        let (m, skipped) = PerfMap::parse(text);
        assert_eq!(
            (m.entries, skipped.over, skipped.malformed),
            (MAX_ENTRIES, 10, 0)
        );
        // Past the size limit nothing is read (lines of size 0 name nothing).
        let mut text = b"1 0 a\n".repeat((MAX_MAP as usize) / 6);
        text.extend_from_slice(b"2 1 past\n");
        let (m, _) = PerfMap::parse(text);
        assert_eq!(m.find(2), None);
    }

    #[test]
    fn anonymous_memory_is_told_from_files() {
        for a in ["//anon", "", "[anon:v8]", "[heap]", "/dev/zero (deleted)"] {
            assert!(anonymous(a), "{a}");
        }
        for f in ["/usr/bin/node", "[vdso]", "/tmp/perf-1.map"] {
            assert!(!anonymous(f), "{f}");
        }
    }
}
