//! Event names → (type, config): generic hardware/software events, raw codes, and sysfs PMU events.

use crate::prelude::*;

use crate::rt as fs;

pub const PERF_TYPE_HARDWARE: u32 = 0;
pub const PERF_TYPE_SOFTWARE: u32 = 1;
pub const PERF_TYPE_RAW: u32 = 4;

const HW: &[(&str, u64)] = &[
    ("cycles", 0),
    ("cpu-cycles", 0),
    ("instructions", 1),
    ("cache-references", 2),
    ("cache-misses", 3),
    ("branches", 4),
    ("branch-instructions", 4),
    ("branch-misses", 5),
    ("bus-cycles", 6),
    ("stalled-cycles-frontend", 7),
    ("stalled-cycles-backend", 8),
    ("ref-cycles", 9),
];

const SW: &[(&str, u64)] = &[
    ("cpu-clock", 0),
    ("task-clock", 1),
    ("page-faults", 2),
    ("faults", 2),
    ("context-switches", 3),
    ("cs", 3),
    ("cpu-migrations", 4),
    ("migrations", 4),
    ("minor-faults", 5),
    ("major-faults", 6),
    ("alignment-faults", 7),
    ("emulation-faults", 8),
];

/// One parsed event.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EventSpec {
    pub name: String,
    pub type_: u32,
    pub config: u64,
    pub config1: u64,
    pub config2: u64,
    /// `:k` given: count kernel mode too.
    pub kernel: bool,
    /// `:u` or nothing: count user mode.
    pub user: bool,
    /// `:u` or `:k` given: the modes are the event's own, not perf's default rule.
    pub modes: bool,
}

impl EventSpec {
    pub fn is_hardware(&self) -> bool {
        self.type_ == PERF_TYPE_HARDWARE || self.type_ == PERF_TYPE_RAW || self.type_ > 5
    }
}

/// The PMUs' sysfs directory: under `$LABPERF_SYSFS` (a recorded tree) or `/sys`.
pub fn sysfs_devices() -> String {
    format!("{}/bus/event_source/devices", crate::sys::sysfs_root())
}

/// Parses one item of a `-e` value (`labperf_common::evlist::items`): a group `{a,b}:mods`
/// (its members, each with the group's modifiers; true) or a single event (false).
pub fn parse_list(s: &str) -> Result<(Vec<EventSpec>, bool), String> {
    let (names, grouped) = labperf_common::evlist::members(s)?;
    let v = names
        .iter()
        .map(|n| parse(n))
        .collect::<Result<Vec<_>, _>>()?;
    Ok((v, grouped))
}

/// Splits on commas that are not inside `pmu/.../`.
fn split_top(s: &str) -> Vec<&str> {
    let mut out = Vec::new();
    let (mut depth, mut start) = (false, 0);
    for (i, c) in s.char_indices() {
        match c {
            '/' => depth = !depth,
            ',' if !depth => {
                out.push(s[start..i].trim());
                start = i + 1;
            }
            _ => {}
        }
    }
    out.push(s[start..].trim());
    out.retain(|p| !p.is_empty());
    out
}

/// Parses one event: `name[:mods]`, `rHEX`, `pmu/event/` or `pmu/term=val,.../`.
pub fn parse(s: &str) -> Result<EventSpec, String> {
    parse_in(&sysfs_devices(), s)
}

pub fn parse_in(sysfs: &str, s: &str) -> Result<EventSpec, String> {
    let (body, mods) = labperf_common::evlist::split_modifiers(s);
    let kernel = mods.contains('k');
    let user = mods.contains('u') || !kernel;
    let mut e = EventSpec {
        name: body.to_string(),
        type_: 0,
        config: 0,
        config1: 0,
        config2: 0,
        kernel,
        user,
        modes: mods.contains(['u', 'k']),
    };
    if let Some(&(_, c)) = HW.iter().find(|(n, _)| *n == body) {
        e.config = c;
        return Ok(e);
    }
    if let Some(&(_, c)) = SW.iter().find(|(n, _)| *n == body) {
        e.type_ = PERF_TYPE_SOFTWARE;
        e.config = c;
        return Ok(e);
    }
    if let Some(hex) = body.strip_prefix('r') {
        if !hex.is_empty() && hex.chars().all(|c| c.is_ascii_hexdigit()) {
            e.type_ = PERF_TYPE_RAW;
            e.config = u64::from_str_radix(hex, 16)
                .map_err(|_| format!("raw event '{body}' does not fit 64 bits"))?;
            return Ok(e);
        }
    }
    if let Some((pmu, rest)) = body.split_once('/') {
        let terms = rest.strip_suffix('/').ok_or_else(|| {
            format!("event '{body}': a PMU event is written pmu/terms/ and needs the closing '/'")
        })?;
        let dir = format!("{sysfs}/{pmu}");
        let ty = fs::read_to_string(format!("{dir}/type")).map_err(|_| format!("event '{body}': this machine has no PMU named '{pmu}' ({sysfs}/{pmu} is missing); run `labperf list`"))?;
        e.type_ = ty
            .trim()
            .parse()
            .map_err(|_| format!("{sysfs}/{pmu}/type is not a number"))?;
        for term in split_top(terms).into_iter().flat_map(|t| t.split(',')) {
            let term = term.trim();
            if term.is_empty() {
                continue;
            }
            let terms_text;
            let expanded: Vec<&str> = if term.contains('=') {
                vec![term]
            } else {
                // A named event alias: its sysfs file holds the terms.
                terms_text = fs::read_to_string(format!("{dir}/events/{term}")).map_err(|_| format!("event '{body}': PMU '{pmu}' has no event '{term}'; run `labperf list {pmu}`"))?;
                terms_text.trim().split(',').collect()
            };
            for t in expanded {
                let (k, v) = t.split_once('=').unwrap_or((t, "1"));
                let v = parse_num(v.trim())
                    .ok_or_else(|| format!("event '{body}': term '{t}' has no number"))?;
                apply_format(&dir, &mut e, k.trim(), v)
                    .map_err(|m| format!("event '{body}': {m}"))?;
            }
        }
        return Ok(e);
    }
    Err(format!(
        "unknown event '{s}'. Known: {}, rHEX, pmu/event/ (see `labperf list`)",
        HW.iter()
            .chain(SW)
            .map(|(n, _)| *n)
            .collect::<Vec<_>>()
            .join(", ")
    ))
}

fn parse_num(s: &str) -> Option<u64> {
    match s.strip_prefix("0x") {
        Some(h) => u64::from_str_radix(h, 16).ok(),
        None => s.parse().ok(),
    }
}

/// Places `v` into config/config1/config2 as `format/<term>` says (e.g. `config:0-15`).
fn apply_format(dir: &str, e: &mut EventSpec, term: &str, v: u64) -> Result<(), String> {
    let (field, bits) = match term {
        "config" | "config1" | "config2" => (term.to_string(), "0-63".to_string()),
        _ => {
            let f = fs::read_to_string(format!("{dir}/format/{term}"))
                .map_err(|_| format!("the PMU has no format term '{term}'"))?;
            let (field, bits) = f
                .trim()
                .split_once(':')
                .ok_or_else(|| format!("format term '{term}' is not field:bits"))?;
            (field.to_string(), bits.to_string())
        }
    };
    let target = match field.as_str() {
        "config" => &mut e.config,
        "config1" => &mut e.config1,
        "config2" => &mut e.config2,
        f => return Err(format!("format field '{f}' is not supported")),
    };
    let mut shift = 0;
    for range in bits.split(',') {
        let (lo, hi) = range.split_once('-').unwrap_or((range, range));
        let lo: u32 = lo.parse().map_err(|_| format!("bad bit range '{bits}'"))?;
        let hi: u32 = hi.parse().map_err(|_| format!("bad bit range '{bits}'"))?;
        if hi < lo || hi > 63 {
            return Err(format!("bad bit range '{bits}'"));
        }
        let width = hi - lo + 1;
        let mask = if width == 64 {
            u64::MAX
        } else {
            (1u64 << width) - 1
        };
        let part = (v >> shift) & mask;
        *target = (*target & !(mask << lo)) | (part << lo);
        shift += width;
    }
    Ok(())
}

/// The low bit of Arm's out-of-tree `strobe_period` driver term (`config2:lo-hi`), when
/// the PMU that takes `spec` (or, for generic hardware events, any PMU) has one.
pub fn strobe_term_shift(spec: &EventSpec) -> Option<u32> {
    strobe_term_shift_in(&sysfs_devices(), spec)
}

pub fn strobe_term_shift_in(sysfs: &str, spec: &EventSpec) -> Option<u32> {
    for d in fs::read_dir(sysfs).ok()? {
        let ty: u32 = fs::read_to_string(format!("{sysfs}/{d}/type"))
            .ok()?
            .trim()
            .parse()
            .ok()?;
        if spec.type_ != PERF_TYPE_HARDWARE && spec.type_ != PERF_TYPE_RAW && ty != spec.type_ {
            continue;
        }
        if let Ok(f) = fs::read_to_string(format!("{sysfs}/{d}/format/strobe_period")) {
            let (field, bits) = f.trim().split_once(':')?;
            if field == "config2" {
                return bits.split('-').next()?.parse().ok();
            }
        }
    }
    None
}

/// The PMUs of this machine with their type, formats and events, for `list`.
pub fn list(filter: Option<&str>) -> String {
    let mut out = String::new();
    let sysfs = sysfs_devices();
    let mut pmus: Vec<String> = fs::read_dir(&sysfs).unwrap_or_default();
    pmus.sort();
    out.push_str("Generic hardware events (need a hardware PMU):\n  ");
    out.push_str(&HW.iter().map(|(n, _)| *n).collect::<Vec<_>>().join(" "));
    out.push_str("\nSoftware events (always available):\n  ");
    out.push_str(&SW.iter().map(|(n, _)| *n).collect::<Vec<_>>().join(" "));
    out.push('\n');
    for p in pmus {
        if filter.is_some_and(|f| f != p) {
            continue;
        }
        let dir = format!("{sysfs}/{p}");
        let ty = fs::read_to_string(format!("{dir}/type")).unwrap_or_default();
        out.push_str(&format!("\nPMU {p} (type {})\n", ty.trim()));
        for sub in ["format", "events"] {
            let mut names: Vec<(String, String)> = fs::read_dir(format!("{dir}/{sub}"))
                .unwrap_or_default()
                .into_iter()
                .map(|n| {
                    let v = fs::read_to_string(format!("{dir}/{sub}/{n}")).unwrap_or_default();
                    let v = v.trim().to_string();
                    (n, v)
                })
                .collect();
            if names.is_empty() {
                continue;
            }
            names.sort();
            out.push_str(&format!("  {sub}:\n"));
            for (n, v) in names {
                if !n.ends_with(".scale") && !n.ends_with(".unit") {
                    out.push_str(&format!("    {p}/{n}/  {v}\n"));
                }
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::fs;

    #[test]
    fn generic_and_raw() {
        assert_eq!(parse("cycles").unwrap().type_, PERF_TYPE_HARDWARE);
        let e = parse("cpu-clock:u").unwrap();
        assert_eq!((e.type_, e.config, e.user, e.kernel), (1, 0, true, false));
        assert_eq!(parse("r11").unwrap().config, 0x11);
        assert!(parse("nonsense").is_err());
        let (g, grouped) = parse_list("{cpu-clock,page-faults}").unwrap();
        assert!(grouped);
        assert_eq!(g.len(), 2);
    }

    #[test]
    fn sysfs_pmu_terms() {
        let d = std::env::temp_dir().join(format!("lp-sysfs-{}", std::process::id()));
        let pmu = d.join("armv8_pmuv3_0");
        fs::create_dir_all(pmu.join("format")).unwrap();
        fs::create_dir_all(pmu.join("events")).unwrap();
        fs::write(pmu.join("type"), "8\n").unwrap();
        fs::write(pmu.join("format/event"), "config:0-15\n").unwrap();
        fs::write(pmu.join("format/strobe_period"), "config2:0-31\n").unwrap();
        fs::write(pmu.join("events/cpu_cycles"), "event=0x0011\n").unwrap();
        let e = parse_in(
            d.to_str().unwrap(),
            "armv8_pmuv3_0/cpu_cycles,strobe_period=300/",
        )
        .unwrap();
        assert_eq!((e.type_, e.config, e.config2), (8, 0x11, 300));
        assert!(parse_in(d.to_str().unwrap(), "nopmu/x/")
            .unwrap_err()
            .contains("no PMU"));
        assert_eq!(
            strobe_term_shift_in(d.to_str().unwrap(), &parse("cycles").unwrap()),
            Some(0)
        );
        assert_eq!(
            strobe_term_shift_in(d.to_str().unwrap(), &parse("cpu-clock").unwrap()),
            None
        );
        fs::remove_dir_all(d).unwrap();
    }
}
