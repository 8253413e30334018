//! The event names `-e` takes without a PMU, this machine's PMUs as sysfs lists them,
//! and the check of `-e` values before anything runs: an unknown name is refused with the
//! nearest known one ("did you mean cpu-clock?") and `labperf list`.

use labperf::text::show;
use std::path::Path;

/// Where this machine's PMUs are.
pub const SYSFS: &str = "/sys/bus/event_source/devices";

/// The hardware events (PERF_TYPE_HARDWARE), with perf's aliases: the agent's table
/// (`agents/labperf-agent/src/events.rs`, `HW`), by config.
pub const HARDWARE: &[&[&str]] = &[
    &["cpu-cycles", "cycles"],
    &["instructions"],
    &["cache-references"],
    &["cache-misses"],
    &["branch-instructions", "branches"],
    &["branch-misses"],
    &["bus-cycles"],
    &["stalled-cycles-frontend"],
    &["stalled-cycles-backend"],
    &["ref-cycles"],
];

/// The software events (PERF_TYPE_SOFTWARE): the agent's `SW` table, by config.
pub const SOFTWARE: &[&[&str]] = &[
    &["cpu-clock"],
    &["task-clock"],
    &["page-faults", "faults"],
    &["context-switches", "cs"],
    &["cpu-migrations", "migrations"],
    &["minor-faults"],
    &["major-faults"],
    &["alignment-faults"],
    &["emulation-faults"],
];

/// Every name the agents take without a PMU.
fn generic_names() -> impl Iterator<Item = &'static str> {
    HARDWARE
        .iter()
        .chain(SOFTWARE)
        .flat_map(|n| n.iter().copied())
}

/// A machine's PMUs as `probe` reads them: (name, type, events, format terms).
pub type Pmus = Vec<(String, String, Vec<String>, Vec<String>)>;

/// This machine's PMUs, from sysfs (`root`: /sys/bus/event_source/devices).
pub fn local_pmus(root: &Path) -> Pmus {
    let names = |dir: &Path| -> Vec<String> {
        let mut v: Vec<String> = std::fs::read_dir(dir)
            .map(|d| {
                d.flatten()
                    .map(|e| e.file_name().to_string_lossy().into_owned())
                    .collect()
            })
            .unwrap_or_default();
        v.sort();
        v
    };
    names(root)
        .into_iter()
        .map(|p| {
            let dir = root.join(&p);
            let ty = std::fs::read_to_string(dir.join("type")).unwrap_or_default();
            let (events, format) = (names(&dir.join("events")), names(&dir.join("format")));
            (p, ty.trim().to_string(), events, format)
        })
        .collect()
}

/// The edit distance between two names (Levenshtein, by characters).
fn distance(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut row: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.chars().enumerate() {
        let mut diag = row[0];
        row[0] = i + 1;
        for (j, cb) in b.iter().enumerate() {
            let next = (row[j + 1] + 1)
                .min(row[j] + 1)
                .min(diag + usize::from(ca != *cb));
            diag = row[j + 1];
            row[j + 1] = next;
        }
    }
    row[b.len()]
}

/// The known name nearest `name` within a third of its length (at least 1, at most 3
/// edits): the generic names, and this machine's PMU events as `pmu/event/`.
fn nearest(name: &str, pmus: &Pmus) -> Option<String> {
    let limit = (name.chars().count() / 3).clamp(1, 3);
    let pmu_events = pmus
        .iter()
        .flat_map(|(p, _, ev, _)| ev.iter().map(move |e| (e.as_str(), format!("{p}/{e}/"))));
    generic_names()
        .map(|n| (n, n.to_string()))
        .chain(pmu_events)
        .map(|(n, full)| (distance(name, n), full))
        .filter(|(d, _)| *d <= limit)
        .min_by_key(|(d, _)| *d)
        .map(|(_, full)| full)
}

/// `-e`'s value parser: perf's spelling (`labperf_common::evlist`: a comma list of events
/// and `{…}` groups), each event a name the agents take, `rHEX` or `pmu/…/` (the agent
/// checks those against the machine it runs on); an unknown name is refused before
/// anything runs, with the nearest known one. The value is kept as given: [`agent_args`]
/// splits it.
pub fn event_spec(spec: &str) -> Result<String, String> {
    use labperf_common::evlist;
    for item in evlist::items(spec)? {
        for m in evlist::members(item)?.0 {
            let (body, _) = evlist::split_modifiers(&m);
            let raw = body
                .strip_prefix('r')
                .is_some_and(|h| !h.is_empty() && h.chars().all(|c| c.is_ascii_hexdigit()));
            if body.contains('/') || raw || generic_names().any(|n| n == body) {
                continue;
            }
            let hint = match nearest(body, &local_pmus(Path::new(SYSFS))) {
                Some(n) => format!("did you mean {n}? "),
                None => String::new(),
            };
            return Err(format!(
                "unknown event '{}': {hint}`labperf list` lists this machine's events (`labperf list --host HOST` a lab machine's); rHEX and pmu/event/ name others",
                show(body)
            ));
        }
    }
    Ok(spec.to_string())
}

/// The agents' `-e` arguments of the values [`event_spec`] took: one `-e` per event or
/// group, so that every agent (the C agent, which takes one name per `-e`, too) gets perf's
/// comma lists (`-e task-clock,page-faults` is `-e task-clock -e page-faults`).
pub fn agent_args(values: &[String]) -> Vec<String> {
    values
        .iter()
        .flat_map(|v| labperf_common::evlist::items(v).unwrap_or_else(|_| vec![v.as_str()]))
        .flat_map(|i| ["-e".to_string(), i.to_string()])
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn distance_counts_edits() {
        assert_eq!(distance("cpu-clok", "cpu-clock"), 1);
        assert_eq!(distance("cycels", "cycles"), 2);
        assert_eq!(distance("", "cs"), 2);
        assert_eq!(distance("task-clock", "task-clock"), 0);
    }

    #[test]
    fn names_are_checked_and_the_nearest_suggested() {
        let none = Pmus::new();
        for ok in [
            "cpu-clock",
            "cycles:u",
            "r003c",
            "cpu/event=0x3c/",
            "{cpu-clock,page-faults}",
            "{cpu-clock,page-faults}:u",
            "{cpu/event=1,umask=2/,instructions:k}",
        ] {
            assert_eq!(event_spec(ok).as_deref(), Ok(ok), "{ok}");
        }
        let e = event_spec("cpu-clok").unwrap_err();
        assert!(e.contains("did you mean cpu-clock?"), "{e}");
        assert!(e.contains("`labperf list`"), "{e}");
        assert!(!e.contains("labperf-agent"), "{e}");
        assert!(event_spec("{cpu-clock,page-fault}")
            .unwrap_err()
            .contains("did you mean page-faults?"));
        assert!(event_spec("task-clock,page-fault")
            .unwrap_err()
            .contains("did you mean page-faults?"));
        assert!(event_spec("task-clock,,cs")
            .unwrap_err()
            .contains("empty item"));
        assert_eq!(
            agent_args(&["task-clock,{cs,page-faults}:u".into(), "cycles".into()]),
            [
                "-e",
                "task-clock",
                "-e",
                "{cs,page-faults}:u",
                "-e",
                "cycles"
            ]
        );
        assert_eq!(
            nearest("instrctions", &none).as_deref(),
            Some("instructions")
        );
        assert_eq!(nearest("zzz", &none), None);
        let pmus = vec![(
            "msr".to_string(),
            "9".to_string(),
            vec!["tsc".to_string()],
            Vec::new(),
        )];
        assert_eq!(nearest("tsc", &pmus).as_deref(), Some("msr/tsc/"));
    }
}
