//! perf's `-e` spelling, shared by the host and the Rust agent: a value is a comma list of
//! events and `{…}` groups (`-e task-clock,page-faults` or `-e '{cpu-clock,page-faults}:u'`),
//! each event with optional `:` modifiers.
//!
//! The host splits every `-e` value into its items ([`items`]) and hands each to an agent as
//! one `-e` argument, so that every agent (the C agent too) only ever sees one event or one
//! group per argument; the Rust agent splits its own `-e` values the same way for direct use.

use alloc::format;
use alloc::string::String;
use alloc::vec::Vec;

/// The modifier letters the agents take after an event's `:` (perf's subset): `u` user mode,
/// `k` kernel mode; `S` (a group's leader samples, the others are read in each sample) is
/// what a labperf group always does; `h` (hypervisor) and `p`/`P` (precise) are taken and
/// change nothing: the agents open every event with exclude_hv and precise_ip 0.
pub const MODIFIERS: &str = "ukhpPS";

/// An event's name and its modifiers (`cycles:u` → (`cycles`, `u`)); a `:` followed by
/// anything other than modifier letters belongs to the name.
pub fn split_modifiers(event: &str) -> (&str, &str) {
    match event.rfind(':') {
        Some(i) if event[i + 1..].chars().all(|c| MODIFIERS.contains(c)) => {
            (&event[..i], &event[i + 1..])
        }
        _ => (event, ""),
    }
}

/// The items of one `-e` value as perf reads it: its events and `{…}` groups (a group with
/// its modifiers, `{a,b}:u`), split at the commas outside a group and outside a `pmu/…/`'s
/// terms. An empty item, an unclosed `{` or `pmu/`, a group inside a group or text after a
/// group's `}` other than `:` and modifiers is an error that names the value.
pub fn items(value: &str) -> Result<Vec<&str>, String> {
    let bad = |why: &str| format!("event list '{value}': {why}");
    let mut out = Vec::new();
    let (mut start, mut group, mut pmu, mut closed) = (0, false, false, None);
    for (i, c) in value.char_indices() {
        match c {
            '/' => pmu = !pmu,
            '{' if !pmu => {
                if group || closed.is_some() || !value[start..i].trim().is_empty() {
                    return Err(bad(
                        "a '{' starts a group only at the start of an item, and groups do not nest",
                    ));
                }
                group = true;
            }
            '}' if !pmu => {
                if !group {
                    return Err(bad("a '}' without its '{'"));
                }
                group = false;
                closed = Some(i);
            }
            ',' if !pmu && !group => {
                out.push(item(value, &value[start..i], closed.map(|c| c - start))?);
                start = i + 1;
                closed = None;
            }
            _ => {}
        }
    }
    if group {
        return Err(bad("a group's '{' has no closing '}'"));
    }
    if pmu {
        return Err(bad(
            "a PMU event is written pmu/terms/ and needs the closing '/'",
        ));
    }
    out.push(item(value, &value[start..], closed.map(|c| c - start))?);
    Ok(out)
}

/// One item of `value`, trimmed: not empty, and a group's `}` followed by modifiers only.
fn item<'a>(value: &str, s: &'a str, closed: Option<usize>) -> Result<&'a str, String> {
    if let Some(c) = closed {
        let after = &s[c + 1..];
        let mods = after.trim_end().strip_prefix(':');
        if !after.trim().is_empty()
            && !mods.is_some_and(|m| m.chars().all(|c| MODIFIERS.contains(c)))
        {
            return Err(format!(
                "event list '{value}': after a group's '}}' only ':' and modifiers ({MODIFIERS}) may follow, not '{}'",
                after.trim()
            ));
        }
    }
    let s = s.trim();
    if s.is_empty() {
        return Err(format!(
            "event list '{value}' has an empty item: events are separated by single commas"
        ));
    }
    Ok(s)
}

/// The events of one item of [`items`] and whether it is a group: a group `{a,b:u}:k` gives
/// its members with the group's modifiers added to each (`a:k`, `b:uk`), a single event
/// itself. An empty group is an error.
pub fn members(item: &str) -> Result<(Vec<String>, bool), String> {
    let Some(inner) = item.trim().strip_prefix('{') else {
        return Ok((alloc::vec![String::from(item.trim())], false));
    };
    let (inner, mods) = inner
        .rsplit_once('}')
        .ok_or_else(|| format!("event group '{item}' has no closing '}}'"))?;
    let mods = mods.trim().trim_start_matches(':');
    let mut v = Vec::new();
    // The members are a comma list without groups: `items` splits it.
    for m in items(inner)
        .map_err(|_| format!("event group '{item}' is malformed: {{a,b}}, each member an event"))?
    {
        if m.starts_with('{') {
            return Err(format!("event group '{item}': groups do not nest"));
        }
        let (name, own) = split_modifiers(m);
        v.push(match (own, mods) {
            (_, "") => String::from(m),
            ("", _) => format!("{name}:{mods}"),
            _ => format!("{name}:{own}{mods}"),
        });
    }
    Ok((v, true))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_value_is_split_into_events_and_groups() {
        assert_eq!(items("cycles").unwrap(), ["cycles"]);
        assert_eq!(
            items("task-clock,page-faults,cycles").unwrap(),
            ["task-clock", "page-faults", "cycles"]
        );
        assert_eq!(
            items("{cpu-clock,page-faults}:u,cycles:k, r003c").unwrap(),
            ["{cpu-clock,page-faults}:u", "cycles:k", "r003c"]
        );
        assert_eq!(
            items("cpu/event=1,umask=2/,instructions").unwrap(),
            ["cpu/event=1,umask=2/", "instructions"]
        );
        assert_eq!(
            items("{cpu/event=1,umask=2/,instructions:k},cs").unwrap(),
            ["{cpu/event=1,umask=2/,instructions:k}", "cs"]
        );
        for (bad, why) in [
            ("a,,b", "empty item"),
            ("a,", "empty item"),
            ("", "empty item"),
            ("{a,b", "no closing '}'"),
            ("a}", "without its '{'"),
            ("{a,{b}}", "do not nest"),
            ("a{b}", "start of an item"),
            ("{a,b}x", "only ':' and modifiers"),
            ("{a,b}:q", "only ':' and modifiers"),
            ("cpu/event=1", "closing '/'"),
        ] {
            let e = items(bad).unwrap_err();
            assert!(e.contains(why), "{bad}: {e}");
        }
    }

    #[test]
    fn a_group_s_modifiers_go_to_each_member() {
        assert_eq!(
            members("cycles:u").unwrap(),
            (alloc::vec!["cycles:u".into()], false)
        );
        assert_eq!(
            members("{a,b:u}:k").unwrap(),
            (alloc::vec!["a:k".into(), "b:uk".into()], true)
        );
        assert_eq!(
            members("{cpu/event=1,umask=2/,c}").unwrap(),
            (alloc::vec!["cpu/event=1,umask=2/".into(), "c".into()], true)
        );
        assert!(members("{}").unwrap_err().contains("malformed"));
        assert_eq!(split_modifiers("cycles:ppS"), ("cycles", "ppS"));
        assert_eq!(split_modifiers("a:b"), ("a:b", ""));
    }
}
