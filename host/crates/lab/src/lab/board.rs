//! The live display of a run on several lab machines: one line per host (its phase, what
//! the agent says as it records), redrawn in place on a terminal, or the same facts as
//! plain lines; everything else printed meanwhile goes above it.

use std::io::Write;
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// How the hosts' progress is shown.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Progress {
    /// Live lines on a terminal (stderr), plain lines otherwise.
    Auto,
    /// One line per host, redrawn in place.
    Live,
    /// A line each time a host's phase changes (and every few seconds while it runs).
    Plain,
}

/// Where a host is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Phase {
    Waiting,
    Connecting,
    Uploading,
    Running,
    Fetching,
    Done,
    Failed,
}

impl Phase {
    pub fn name(self) -> &'static str {
        match self {
            Phase::Waiting => "waiting",
            Phase::Connecting => "connecting",
            Phase::Uploading => "uploading",
            Phase::Running => "running",
            Phase::Fetching => "fetching",
            Phase::Done => "done",
            Phase::Failed => "failed",
        }
    }
}

/// One host's line.
#[derive(Debug, Clone)]
pub struct Line {
    pub host: String,
    pub phase: Phase,
    /// What goes after the phase: the agent's progress, the file, the error.
    pub detail: String,
    since: Instant,
    plain_said: Option<Instant>,
}

impl Line {
    /// The text of the line, `width` the widest host name.
    pub fn text(&self, width: usize, now: Instant) -> String {
        let mut phase = self.phase.name().to_string();
        if self.phase == Phase::Running {
            phase = format!("running {} s", now.duration_since(self.since).as_secs());
        }
        let mut s = format!("{:<width$}  {:<14}", self.host, phase);
        if !self.detail.is_empty() {
            s.push_str("  ");
            s.push_str(&self.detail);
        }
        s.trim_end().to_string()
    }
}

struct State {
    lines: Vec<Line>,
    /// Lines of the board on screen now (live mode).
    drawn: usize,
    finished: bool,
}

/// The board: shared by the hosts' workers.
pub struct Board {
    live: bool,
    width: usize,
    state: Mutex<State>,
}

/// Plain mode repeats a running host's progress this often.
const PLAIN_EVERY: Duration = Duration::from_secs(5);

impl Board {
    /// A board for `hosts` (names shown as given, escaped); `live` redraws in place.
    pub fn new(hosts: &[String], progress: Progress, stderr_is_terminal: bool) -> Board {
        let live = match progress {
            Progress::Live => true,
            Progress::Plain => false,
            Progress::Auto => stderr_is_terminal,
        };
        let now = Instant::now();
        let lines: Vec<Line> = hosts
            .iter()
            .map(|h| Line {
                host: crate::text::show(h).into_owned(),
                phase: Phase::Waiting,
                detail: String::new(),
                since: now,
                plain_said: None,
            })
            .collect();
        Board {
            live,
            width: lines
                .iter()
                .map(|l| l.host.chars().count())
                .max()
                .unwrap_or(0),
            state: Mutex::new(State {
                lines,
                drawn: 0,
                finished: false,
            }),
        }
    }

    pub fn is_live(&self) -> bool {
        self.live
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Host `i` is now in `phase`, with `detail`.
    pub fn set(&self, i: usize, phase: Phase, detail: impl Into<String>) {
        let mut st = self.lock();
        let Some(l) = st.lines.get_mut(i) else { return };
        let detail = crate::text::show_text(&detail.into()).into_owned();
        let changed = l.phase != phase;
        if changed {
            l.since = Instant::now();
        }
        l.phase = phase;
        l.detail = detail;
        if self.live {
            self.redraw(&mut st);
        } else {
            let now = Instant::now();
            let l = &mut st.lines[i];
            let due = l
                .plain_said
                .is_none_or(|t| now.duration_since(t) >= PLAIN_EVERY);
            if changed || phase != Phase::Running || due {
                l.plain_said = Some(now);
                let text = l.text(0, now);
                let _ = writeln!(
                    std::io::stderr(),
                    "[{}] {}",
                    l.host,
                    text[l.host.len()..].trim_start()
                );
            }
        }
    }

    /// Host `i` failed with `error` (its whole message, said once here): live, its line
    /// says `failed` and the error goes above the board, whole (a board line is cut to the
    /// terminal's width); plain, one line `[host] failed: error`.
    pub fn fail(&self, i: usize, error: &str) {
        let error = crate::text::show_text(error).into_owned();
        if self.live {
            let host = self.lock().lines.get(i).map(|l| l.host.clone());
            if let Some(h) = host {
                self.println(&format!("[{h}] error: {error}"), false);
            }
            self.set(i, Phase::Failed, "");
            return;
        }
        let mut st = self.lock();
        let Some(l) = st.lines.get_mut(i) else { return };
        l.phase = Phase::Failed;
        l.detail = error.clone();
        l.plain_said = Some(Instant::now());
        let _ = writeln!(std::io::stderr(), "[{}] failed: {error}", l.host);
    }

    /// The agent's progress line while host `i` runs.
    pub fn progress(&self, i: usize, detail: &str) {
        self.set(i, Phase::Running, detail);
    }

    /// Redraws the board (live mode), as the running times move.
    pub fn tick(&self) {
        if self.live {
            let mut st = self.lock();
            if !st.finished {
                self.redraw(&mut st);
            }
        }
    }

    /// Prints `text` (a whole line, without its newline) above the board, on stderr or stdout.
    pub fn println(&self, text: &str, stdout: bool) {
        let mut st = self.lock();
        if self.live {
            Self::erase(&mut st);
        }
        if stdout {
            let mut o = std::io::stdout().lock();
            let _ = writeln!(o, "{text}");
            let _ = o.flush();
        } else {
            let _ = writeln!(std::io::stderr(), "{text}");
        }
        if self.live && !st.finished {
            self.redraw(&mut st);
        }
    }

    fn erase(st: &mut State) {
        if st.drawn > 0 {
            let _ = write!(std::io::stderr(), "\x1b[{}A\x1b[J", st.drawn);
            st.drawn = 0;
        }
    }

    fn redraw(&self, st: &mut State) {
        Self::erase(st);
        let now = Instant::now();
        let cols = terminal_columns();
        let mut out = String::new();
        for l in &st.lines {
            // A line wider than the terminal would wrap and the board would not go back
            // over all of it.
            let text = l.text(self.width, now);
            match cols {
                Some(c) if text.chars().count() >= c => {
                    out.extend(text.chars().take(c.saturating_sub(1)))
                }
                _ => out.push_str(&text),
            }
            out.push_str("\x1b[K\n");
        }
        let _ = write!(std::io::stderr(), "{out}");
        let _ = std::io::stderr().flush();
        st.drawn = st.lines.len();
    }

    /// The last drawing (live mode), left on screen; nothing is redrawn after it.
    pub fn finish(&self) {
        let mut st = self.lock();
        if self.live && !st.finished {
            self.redraw(&mut st);
        }
        st.finished = true;
    }

    /// The lines as they are now.
    pub fn lines(&self) -> Vec<Line> {
        self.lock().lines.clone()
    }
}

/// The width of the terminal on stderr, when it says.
fn terminal_columns() -> Option<usize> {
    // SAFETY: TIOCGWINSZ fills a winsize; stderr may not be a terminal (then it fails).
    let mut ws: libc::winsize = unsafe { std::mem::zeroed() };
    let ok = unsafe { libc::ioctl(2, libc::TIOCGWINSZ, &mut ws) } == 0;
    (ok && ws.ws_col > 0).then_some(usize::from(ws.ws_col))
}

/// The agent's `--progress` line (`labperf-agent: 3 s, 1200 samples, 40 KiB written, 0
/// lost`) as the board shows it, or `None` for any other line.
pub fn agent_progress(line: &str) -> Option<String> {
    let rest = line.strip_prefix("labperf-agent: ")?;
    let mut parts = rest.split(", ");
    let secs = parts.next()?.strip_suffix(" s")?;
    let samples = parts.next()?.strip_suffix(" samples")?;
    let _written = parts.next()?.strip_suffix(" KiB written")?;
    let lost = parts.next()?.strip_suffix(" lost")?;
    if parts.next().is_some()
        || ![secs, samples, lost]
            .iter()
            .all(|n| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()))
    {
        return None;
    }
    Some(format!("{samples} samples, {lost} lost"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_agents_progress_line_is_read_and_nothing_else() {
        assert_eq!(
            agent_progress("labperf-agent: 3 s, 1200 samples, 40 KiB written, 2 lost").as_deref(),
            Some("1200 samples, 2 lost")
        );
        for other in [
            "labperf-agent: wrote 5 samples (100 bytes) to x.lpr",
            "labperf-agent: x s, 1 samples, 1 KiB written, 0 lost",
            "my-prog: 3 s, 1200 samples, 40 KiB written, 2 lost",
            "labperf-agent: 3 s, 1200 samples, 40 KiB written, 2 lost, more",
        ] {
            assert_eq!(agent_progress(other), None, "{other}");
        }
    }

    #[test]
    fn a_line_says_the_phase_and_how_long_it_runs() {
        let b = Board::new(&["arm1".into(), "x86-long".into()], Progress::Plain, false);
        b.set(0, Phase::Running, "1200 samples, 0 lost");
        let lines = b.lines();
        let t = lines[0].since + Duration::from_secs(3);
        assert_eq!(
            lines[0].text(8, t),
            "arm1      running 3 s     1200 samples, 0 lost"
        );
        assert_eq!(lines[1].text(8, t), "x86-long  waiting");
    }
}
