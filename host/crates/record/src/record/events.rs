//! Which event a sample counts for: each recording's events named as reports show them,
//! the same name joined across recordings, and `--event NAME|INDEX`. A recording of
//! several sampling events is reported event by event, as perf does: periods of different
//! events (nanoseconds, page faults) never add up.

use labperf_common::Header;
use std::borrow::Cow;
use std::collections::HashMap;

/// The name of samples whose event the header does not list.
pub const UNKNOWN: &str = "unknown event";

/// How many events a message lists (a crafted file can name thousands).
pub const LISTED: usize = 20;

/// A file without a header: event indexes below this stay apart (`event N`), the others
/// are [`UNKNOWN`]. (A header bounds them by its own list.)
pub const MAX_NAMELESS: u32 = 16;

/// One recording's events as reports name them, by the `event` index samples carry.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Names {
    names: Vec<String>,
    header: bool,
}

impl Names {
    /// The header's events: each its name, or `NAME#INDEX` where an earlier event of the
    /// same recording has that name already.
    pub fn of(h: Option<&Header>) -> Names {
        let Some(h) = h else {
            return Names::default();
        };
        let mut names: Vec<String> = Vec::with_capacity(h.events.len());
        // The names given so far (a header may list thousands of events).
        let mut given: std::collections::HashSet<&str> = Default::default();
        for (i, e) in h.events.iter().enumerate() {
            let n = if e.name.is_empty() {
                format!("event {i}")
            } else if !given.insert(e.name.as_str()) {
                format!("{}#{i}", e.name)
            } else {
                e.name.clone()
            };
            names.push(n);
        }
        Names {
            names,
            header: true,
        }
    }

    /// The index every sample index at or above is counted as ([`Names::name`] gives them
    /// one name): a file cannot make more events than its header lists.
    pub fn cap(&self) -> u32 {
        if self.header {
            self.names.len().min(u32::MAX as usize) as u32
        } else {
            MAX_NAMELESS
        }
    }

    /// The name samples of event `idx` are reported under.
    pub fn name(&self, idx: u32) -> Cow<'_, str> {
        match self.names.get(idx as usize) {
            Some(n) => Cow::Borrowed(n),
            None if !self.header && idx < MAX_NAMELESS => Cow::Owned(format!("event {idx}")),
            None => Cow::Borrowed(UNKNOWN),
        }
    }

    /// The events the header lists, `NAME (INDEX)`, for messages: the first [`LISTED`],
    /// then how many more.
    pub fn list(&self) -> String {
        if !self.header {
            return "none named (the header is lost)".into();
        }
        let mut l: Vec<String> = self
            .names
            .iter()
            .enumerate()
            .take(LISTED)
            .map(|(i, n)| format!("{n} ({i})"))
            .collect();
        if self.names.len() > l.len() {
            l.push(format!("and {} more", self.names.len() - l.len()));
        }
        l.join(", ")
    }

    /// Whether an event of the header is named `name`.
    pub fn contains(&self, name: &str) -> bool {
        self.names.iter().any(|n| n == name)
    }

    /// Whether `sel` can pick one of these events.
    fn has(&self, sel: &Select) -> bool {
        let n = self.cap().max(1);
        (0..n).any(|i| sel.picks(self, i))
    }
}

/// The off-CPU event (`record --off-cpu`, and perf's `--off-cpu`): each sample the stack a
/// thread left the CPU in, its period the nanoseconds until the thread ran again.
pub const OFF_CPU: &str = "offcpu-time";

/// `--wall`: the on-CPU clock events (cpu-clock, task-clock) and [`OFF_CPU`] reported as one
/// event of this name, whose periods are all nanoseconds: on- and off-CPU time together,
/// the wall-clock time of each thread.
pub const WALL: &str = "wall-time";

/// `--event NAME|INDEX`: the samples of one event (its name, or its index in the header's
/// list of events); [`WALL`] picks the clocks and the off-CPU event together.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Select(pub String);

impl Select {
    /// Whether samples of event `idx` of a recording with these `names` are picked.
    pub fn picks(&self, names: &Names, idx: u32) -> bool {
        let n = names.name(idx);
        if self.0 == WALL {
            return is_ns(&n);
        }
        n == self.0.as_str() || self.0.parse::<u32>() == Ok(idx)
    }

    /// The name a picked event's samples are reported under.
    fn joined<'a>(&self, name: Cow<'a, str>) -> Cow<'a, str> {
        match self.0 == WALL {
            true => Cow::Borrowed(WALL),
            false => name,
        }
    }
}

#[derive(Debug, thiserror::Error)]
#[error("{file} has no event {event}: its events are {list}; pass one of them to --event (a name, or its index){hint}")]
pub struct NoSuchEvent {
    pub event: String,
    pub file: String,
    pub list: String,
    /// What records the event asked for, when labperf names it.
    pub hint: &'static str,
}

/// Checks that `sel` names an event of each recording (`names`: the file's name and its
/// events).
pub fn check<'a>(
    sel: &Select,
    names: impl IntoIterator<Item = (String, &'a Names)>,
) -> Result<(), NoSuchEvent> {
    for (file, n) in names {
        if !n.has(sel) {
            return Err(NoSuchEvent {
                event: crate::text::show(&sel.0).into_owned(),
                file: crate::text::show(&file).into_owned(),
                list: crate::text::show(&n.list()).into_owned(),
                hint: match sel.0.as_str() {
                    OFF_CPU => "; time off the CPU is recorded by `labperf record --off-cpu` (or `perf record --off-cpu`)",
                    WALL => "; --wall needs a clock event (cpu-clock, task-clock) or `record --off-cpu`'s offcpu-time",
                    _ => "",
                },
            });
        }
    }
    Ok(())
}

/// Event names joined across recordings: each distinct name one number, in the order
/// first met.
#[derive(Debug, Clone, Default)]
pub struct Joined {
    pub names: Vec<String>,
    index: HashMap<String, u32>,
}

impl Joined {
    /// The number of `name`.
    pub fn id(&mut self, name: &str) -> u32 {
        if let Some(&i) = self.index.get(name) {
            return i;
        }
        let i = self.names.len() as u32;
        self.names.push(name.to_string());
        self.index.insert(name.to_string(), i);
        i
    }

    /// One recording's map from its samples' event index to the joined number, `None` for
    /// events `sel` leaves out; the header's events are numbered in its order.
    pub fn of_run(&mut self, names: &Names, sel: Option<&Select>) -> RunEvents {
        let cap = names.cap();
        let ids = (0..=cap)
            .map(|i| match sel {
                Some(s) if !s.picks(names, i) => None,
                Some(s) => Some(self.id(&s.joined(names.name(i)))),
                None => Some(self.id(&names.name(i))),
            })
            .collect();
        RunEvents { ids, cap }
    }
}

/// One recording's event index → joined number (see [`Joined::of_run`]).
#[derive(Debug, Clone)]
pub struct RunEvents {
    ids: Vec<Option<u32>>,
    cap: u32,
}

impl RunEvents {
    /// The joined number of a sample of event `idx`, `None` when not selected.
    pub fn id(&self, idx: u32) -> Option<u32> {
        self.ids[idx.min(self.cap) as usize]
    }
}

/// Whether an event's periods are nanoseconds (cpu-clock and task-clock, with or without
/// modifiers, the off-CPU time and `--wall`'s sum of them); other events count occurrences.
pub fn is_ns(name: &str) -> bool {
    let base = name.split([':', '#']).next().unwrap_or(name);
    matches!(base, "cpu-clock" | "task-clock" | OFF_CPU | WALL)
}

/// The unit of an event's periods, as pprof names units.
pub fn unit(name: &str) -> &'static str {
    if is_ns(name) {
        "nanoseconds"
    } else {
        "count"
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use labperf_common::{Arch, CpuId, Endian, EventDesc};

    fn header(names: &[&str]) -> Header {
        Header {
            agent_version: String::new(),
            arch: Arch::X86_64,
            endian: Endian::Little,
            kernel_release: String::new(),
            cpu: CpuId::Unknown {
                cpuinfo: String::new(),
            },
            hostname: String::new(),
            command: vec![],
            clock_id: 1,
            start_time_ns: 0,
            start_realtime_ns: 0,
            events: names
                .iter()
                .map(|n| EventDesc {
                    name: n.to_string(),
                    attr: Default::default(),
                    leader: None,
                })
                .collect(),
            mode: String::new(),
            notes: vec![],
        }
    }

    #[test]
    fn events_are_named_from_the_header_and_joined_by_name() {
        let a = Names::of(Some(&header(&["cpu-clock", "page-faults", "cpu-clock"])));
        assert_eq!(a.name(0), "cpu-clock");
        assert_eq!(a.name(2), "cpu-clock#2");
        assert_eq!(a.name(3), UNKNOWN);
        assert_eq!(a.name(u32::MAX), UNKNOWN);
        let none = Names::of(None);
        assert_eq!(none.name(3), "event 3");
        assert_eq!(none.name(MAX_NAMELESS), UNKNOWN);
        let b = Names::of(Some(&header(&["page-faults", "cpu-clock"])));
        let mut j = Joined::default();
        let ra = j.of_run(&a, None);
        let rb = j.of_run(&b, None);
        assert_eq!(rb.id(0), ra.id(1));
        assert_eq!(rb.id(1), ra.id(0));
        assert_eq!(ra.id(9), ra.id(3));
        // By name or by index.
        let sel = Select("page-faults".into());
        let r = Joined::default().of_run(&a, Some(&sel));
        assert!(r.id(0).is_none() && r.id(1).is_some());
        assert!(Select("2".into()).picks(&a, 2));
        assert!(check(&Select("1".into()), [("x".to_string(), &a)]).is_ok());
        let e = check(&Select("cycles".into()), [("x.lpr".to_string(), &a)])
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("cpu-clock (0), page-faults (1), cpu-clock#2 (2)"),
            "{e}"
        );
        assert!(is_ns("cpu-clock:u") && is_ns("task-clock") && !is_ns("page-faults"));
    }

    #[test]
    fn wall_joins_the_clocks_and_the_off_cpu_time_as_one_event() {
        let a = Names::of(Some(&header(&["cpu-clock", "page-faults", OFF_CPU])));
        let b = Names::of(Some(&header(&[OFF_CPU, "task-clock:u"])));
        let wall = Select(WALL.into());
        let mut j = Joined::default();
        let (ra, rb) = (j.of_run(&a, Some(&wall)), j.of_run(&b, Some(&wall)));
        assert_eq!(j.names, vec![WALL.to_string()]);
        assert_eq!((ra.id(0), ra.id(1), ra.id(2)), (Some(0), None, Some(0)));
        assert_eq!((rb.id(0), rb.id(1)), (Some(0), Some(0)));
        assert!(check(&wall, [("x".to_string(), &a)]).is_ok());
        let faults = Names::of(Some(&header(&["page-faults"])));
        assert!(check(&wall, [("f".to_string(), &faults)]).is_err());
        // --off-cpu is the off-CPU event by its name.
        let r = Joined::default().of_run(&a, Some(&Select(OFF_CPU.into())));
        assert_eq!((r.id(0), r.id(2)), (None, Some(0)));
    }
}
