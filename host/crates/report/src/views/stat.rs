//! `labperf stat`'s summary in `perf stat`'s layout: the whole run's totals of one or
//! several runs of a `stat` recording (`-r N`), task-clock and cpu-clock in msec with
//! "CPUs utilized", per-second rates, GHz and insn per cycle as perf derives them, the
//! multiplexing share only under 100 %, `-r`'s mean and "+- x.xx%" (perf's relative
//! standard error of the mean), the elapsed, user and system times.

use crate::record::load::{self, LoadError};
use labperf_common::{Count, Record};
use std::fmt::Write;

/// One run of `stat`, read from its record file.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Run {
    /// The counted events' names, in the file's order.
    pub names: Vec<String>,
    /// The whole run's totals (the file's last cumulative interval), one per event.
    pub totals: Vec<Count>,
    /// ns from the counters' start to the end of the run.
    pub elapsed_ns: u64,
    /// How many `-I` intervals the file holds.
    pub intervals: u64,
    /// The workload's user and system CPU time in ns, when the agent reaped it.
    pub times: Option<(u64, u64)>,
    /// The events this machine lacks, which the agent left out (its header's notes `'NAME'
    /// is not supported here (…): left out`, both agents' words): perf's `<not supported>`.
    pub unsupported: Vec<String>,
}

/// The event a header note of an agent names as left out for want of a PMU or event.
fn unsupported(note: &str) -> Option<&str> {
    let rest = note.strip_prefix('\'')?;
    let (name, tail) = rest.split_once("' is not supported here")?;
    tail.ends_with("left out").then_some(name)
}

/// Reads a `stat` recording's totals. A file without them (a killed agent's) is an error
/// that says so.
pub fn read(src: &load::Source) -> Result<Option<Run>, LoadError> {
    let mut run = Run::default();
    let mut found = false;
    load::stream_with_header(src, |h, _, r| {
        if run.names.is_empty() {
            if let Some(h) = h {
                run.names = h.events.iter().map(|e| e.name.clone()).collect();
                run.unsupported = h
                    .notes
                    .iter()
                    .filter_map(|n| unsupported(n))
                    .map(str::to_string)
                    .collect();
            }
        }
        let Record::Interval(i) = r else { return };
        if i.delta {
            run.intervals += 1;
        } else if i.tid.is_none() {
            found = true;
            run.elapsed_ns = i.time;
            run.totals = i.counts.clone();
        }
    })?;
    Ok(found.then_some(run))
}

/// What was counted, as perf names it in its heading.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Target {
    /// A command and its arguments.
    Command(Vec<String>),
    Pid(String),
    Tid(String),
    /// `-a`.
    System,
    /// `-C LIST`, the list as given.
    Cpus(String),
}

/// How the summary is written.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Style {
    /// Thousands separators (perf's `--big-num`, on unless the locale is C or POSIX).
    pub big_num: bool,
    /// The run printed `-I` intervals: the summary says it is the total.
    pub intervals: bool,
}

/// perf's default: separators unless `LC_ALL`, else `LC_NUMERIC`, else `LANG` names the C
/// or POSIX locale (or none is set), as its `%'` format does.
pub fn big_num_from_env() -> bool {
    let var = ["LC_ALL", "LC_NUMERIC", "LANG"]
        .iter()
        .find_map(|v| std::env::var(v).ok().filter(|s| !s.is_empty()))
        .unwrap_or_default();
    let base = var.split(['.', '@']).next().unwrap_or("");
    !(base.is_empty() || base == "C" || base == "POSIX")
}

/// `v` with `places` decimals, its integer part grouped by thousands when `big`.
pub fn number(v: f64, places: usize, big: bool) -> String {
    let s = format!("{v:.places$}");
    if !big {
        return s;
    }
    let (sign, rest) = s.strip_prefix('-').map_or(("", s.as_str()), |r| ("-", r));
    let (int, frac) = rest
        .split_once('.')
        .map_or((rest, None), |(i, f)| (i, Some(f)));
    let mut out = String::from(sign);
    for (i, c) in int.chars().enumerate() {
        if i > 0 && (int.len() - i) % 3 == 0 {
            out.push(',');
        }
        out.push(c);
    }
    if let Some(f) = frac {
        out.push('.');
        out.push_str(f);
    }
    out
}

/// The mean of `v` and perf's noise: the standard error of the mean (the sample
/// standard deviation over √n), 0 for one value.
pub fn mean_and_error(v: &[f64]) -> (f64, f64) {
    let n = v.len() as f64;
    if v.is_empty() {
        return (0.0, 0.0);
    }
    let mean = v.iter().sum::<f64>() / n;
    if v.len() < 2 {
        return (mean, 0.0);
    }
    let var = v.iter().map(|x| (x - mean) * (x - mean)).sum::<f64>() / (n - 1.0);
    (mean, (var / n).sqrt())
}

/// The name without its `:u`/`:k` modifiers.
fn base(name: &str) -> &str {
    name.split(':').next().unwrap_or(name)
}

fn is_clock(name: &str) -> bool {
    matches!(base(name), "task-clock" | "cpu-clock")
}

/// perf's `convert_unit_double`: K, M or G and the value divided accordingly.
fn per_second(v: f64) -> (f64, &'static str) {
    let mut v = v;
    let mut unit = "/sec";
    for u in ["K/sec", "M/sec", "G/sec"] {
        if v > 1000.0 {
            v /= 1000.0;
            unit = u;
        }
    }
    (v, unit)
}

/// perf's metric column (`METRIC_LEN` 35): ` # ` the value, its unit; blank without one.
fn metric(value: Option<(String, &str)>) -> String {
    match value {
        Some((v, unit)) => {
            let head = format!(" # {v}");
            format!(
                "{head} {unit:<w$}",
                w = 35usize.saturating_sub(head.len() + 1)
            )
        }
        None => " ".repeat(35),
    }
}

/// perf's relative noise column, `  ( +- x.xx% )`.
fn noise(error: f64, mean: f64) -> String {
    let pct = if mean != 0.0 {
        100.0 * error / mean
    } else {
        0.0
    };
    format!("  ( +-{pct:6.2}% )")
}

/// The heading's "for ..." part.
fn target_text(t: &Target) -> String {
    match t {
        Target::Command(c) => format!("'{}'", c.join(" ")),
        Target::Pid(p) => format!("process id '{p}'"),
        Target::Tid(p) => format!("thread id '{p}'"),
        Target::System => "'system wide'".into(),
        Target::Cpus(c) => format!("'CPU(s) {c}'"),
    }
}

/// The summary of `runs` (one or `-r N`'s) of the same events, in `perf stat`'s layout.
pub fn summary(runs: &[Run], target: &Target, style: Style) -> String {
    let mut s = String::new();
    let Some(first) = runs.first() else {
        return s;
    };
    let repeated = runs.len() > 1;
    let _ = write!(
        s,
        "\n Performance counter stats for {}",
        target_text(target)
    );
    if repeated {
        let _ = write!(s, " ({} runs)", runs.len());
    }
    if style.intervals {
        let intervals: u64 = runs.iter().map(|r| r.intervals).sum();
        let _ = write!(
            s,
            ", total of the whole run ({intervals} interval{})",
            if intervals == 1 { "" } else { "s" }
        );
    }
    s.push_str(":\n\n");
    // Each event's values over the runs (scaled for multiplexing), and its shares.
    let series = |i: usize| -> Vec<f64> {
        runs.iter()
            .filter_map(|r| r.totals.get(i))
            .map(|c| c.scaled() as f64)
            .collect()
    };
    let walls: Vec<f64> = runs.iter().map(|r| r.elapsed_ns as f64).collect();
    let (wall, wall_error) = mean_and_error(&walls);
    let clock_ns = first
        .names
        .iter()
        .position(|n| is_clock(n))
        .map(|i| mean_and_error(&series(i)).0);
    let cycles = first
        .names
        .iter()
        .position(|n| base(n) == "cycles")
        .map(|i| mean_and_error(&series(i)).0);
    for (i, name) in first.names.iter().enumerate() {
        let values = series(i);
        if values.is_empty() {
            continue;
        }
        let (mean, error) = mean_and_error(&values);
        let (count, unit, value) = if is_clock(name) {
            let cpus = (wall > 0.0).then(|| (format!("{:8.3}", mean / wall), "CPUs utilized"));
            (number(mean / 1e6, 2, style.big_num), "msec", cpus)
        } else {
            let value = match base(name) {
                "cycles" => clock_ns
                    .filter(|&c| c > 0.0)
                    .map(|c| (format!("{:8.3}", mean / c), "GHz")),
                "instructions" => cycles
                    .filter(|&c| c > 0.0)
                    .map(|c| (format!("{:7.2} ", mean / c), "insn per cycle")),
                _ => clock_ns.filter(|&c| c > 0.0).map(|c| {
                    let (v, unit) = per_second(1e9 * mean / c);
                    (format!("{v:8.3}"), unit)
                }),
            };
            (number(mean, 0, style.big_num), "", value)
        };
        let _ = write!(s, "{count:>18} {unit:<4} {name:<32}{}", metric(value));
        if repeated {
            s.push_str(&noise(error, mean));
        }
        let (enabled, running) =
            runs.iter()
                .filter_map(|r| r.totals.get(i))
                .fold((0u128, 0u128), |(e, r), c| {
                    (
                        e + u128::from(c.time_enabled),
                        r + u128::from(c.time_running),
                    )
                });
        if running < enabled {
            let _ = write!(s, "  ({:.2}%)", 100.0 * running as f64 / enabled as f64);
        }
        s.push('\n');
    }
    not_supported(&mut s, &first.unsupported);
    s.push('\n');
    times(&mut s, first, repeated, (wall, wall_error));
    s
}

/// perf's line of each event the machine cannot count: no count, no metric.
fn not_supported(s: &mut String, names: &[String]) {
    for name in names {
        let _ = writeln!(
            s,
            "{:>18} {:<4} {name:<32}{}",
            "<not supported>",
            "",
            " ".repeat(28)
        );
    }
}

/// The elapsed time (`-r`'s mean and noise) and, for one run, the workload's user and
/// system times.
fn times(s: &mut String, first: &Run, repeated: bool, (wall, wall_error): (f64, f64)) {
    if repeated {
        let sd = wall_error / 1e9;
        // perf: two digits more than the deviation's first significant one.
        let places = if sd > 1.0 || sd <= 0.0 {
            2
        } else {
            (-sd.log10()).ceil() as usize + 2
        };
        let _ = write!(
            s,
            " {:17.places$} +- {sd:.places$} seconds time elapsed",
            wall / 1e9
        );
        s.push_str(&noise(wall_error, wall));
        s.push_str("\n\n");
    } else {
        let _ = writeln!(s, " {:17.9} seconds time elapsed", wall / 1e9);
        if let Some((user, sys)) = first.times {
            let _ = write!(
                s,
                "\n {:17.9} seconds user\n {:17.9} seconds sys\n\n",
                user as f64 / 1e9,
                sys as f64 / 1e9
            );
        }
        s.push('\n');
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn count(event: u32, value: u64) -> Count {
        Count {
            event,
            value,
            time_enabled: 1000,
            time_running: 1000,
        }
    }

    fn run(clock: u64, cs: u64, wall: u64) -> Run {
        Run {
            names: vec!["task-clock".into(), "context-switches".into()],
            totals: vec![count(0, clock), count(1, cs)],
            elapsed_ns: wall,
            intervals: 0,
            times: Some((2_464_000, 0)),
            unsupported: Vec::new(),
        }
    }

    #[test]
    fn numbers_are_grouped_by_thousands_as_perf_groups_them() {
        assert_eq!(number(33775.0, 0, true), "33,775");
        assert_eq!(number(1234567.891, 2, true), "1,234,567.89");
        assert_eq!(number(999.0, 0, true), "999");
        assert_eq!(number(1234567.0, 0, false), "1234567");
        assert_eq!(number(0.5, 2, true), "0.50");
    }

    #[test]
    fn the_error_is_perfs_standard_error_of_the_mean() {
        // Values 1, 2, 3: sample variance 1, standard error 1/√3.
        let (m, e) = mean_and_error(&[1.0, 2.0, 3.0]);
        assert_eq!(m, 2.0);
        assert!((e - (1.0f64 / 3.0).sqrt()).abs() < 1e-12);
        assert_eq!(mean_and_error(&[5.0]), (5.0, 0.0));
    }

    #[test]
    fn one_run_is_laid_out_in_perfs_columns() {
        // perf 6.1 on `sleep 0.1`: 1.23 msec, 2 context switches, 0.102537860 s.
        let s = summary(
            &[run(1_233_000, 2, 102_537_860)],
            &Target::Command(vec!["sleep".into(), "0.1".into()]),
            Style {
                big_num: false,
                intervals: false,
            },
        );
        let want = concat!(
            "\n Performance counter stats for 'sleep 0.1':\n\n",
            "              1.23 msec task-clock                       #    0.012 CPUs utilized          \n",
            "                 2      context-switches                 #    1.622 K/sec                  \n",
            "\n       0.102537860 seconds time elapsed\n",
            "\n       0.002464000 seconds user\n       0.000000000 seconds sys\n\n\n",
        );
        assert_eq!(s, want);
        // An event the machine lacks: perf 6.1's line for it (`perf stat -e
        // task-clock,cycles` without a hardware PMU), 84 characters.
        let mut r = run(1_233_000, 2, 102_537_860);
        r.unsupported = vec!["cycles".into()];
        let s = summary(
            &[r],
            &Target::Command(vec!["true".into()]),
            Style {
                big_num: false,
                intervals: false,
            },
        );
        let l = s.lines().find(|l| l.contains("<not supported>")).unwrap();
        assert_eq!(
            l,
            format!("   <not supported>      cycles{}", " ".repeat(54))
        );
        assert_eq!(
            unsupported(
                "'cycles' is not supported here (no such event on this machine's PMU): left out"
            ),
            Some("cycles")
        );
        assert_eq!(unsupported("kernel mode not counted"), None);
    }

    #[test]
    fn repeated_runs_show_the_mean_and_its_noise_and_shares_under_100_percent() {
        let mut r = vec![
            run(1_000_000, 1, 50_000_000),
            run(1_200_000, 1, 52_000_000),
            run(1_100_000, 1, 54_000_000),
        ];
        r[0].totals[1].time_running = 500;
        let s = summary(
            &r,
            &Target::System,
            Style {
                big_num: true,
                intervals: false,
            },
        );
        let lines: Vec<&str> = s.lines().collect();
        assert_eq!(
            lines[1],
            " Performance counter stats for 'system wide' (3 runs):"
        );
        // Mean 1.10 msec; standard error 0.0577 of 1.1: 5.25 %.
        assert!(
            lines[3].starts_with("              1.10 msec task-clock ")
                && lines[3].ends_with("  ( +-  5.25% )"),
            "{s}"
        );
        // The first run counted half the time: scaled to 2, so 2, 1, 1: mean 4/3,
        // standard error 1/3 (25 %); it ran 2500 of 3000 units: 83.33 %.
        assert!(lines[4].ends_with("  ( +- 25.00% )  (83.33%)"), "{s}");
        // 52 ms +- 1.1547 ms: perf's precision, two digits past the error's first.
        assert_eq!(
            lines[6],
            format!(
                " {:>17} +- 0.00115 seconds time elapsed  ( +-  2.22% )",
                "0.05200"
            )
        );
        assert!(!s.contains("user"), "no user/sys lines with -r: {s}");
    }
}
