//! `labperf diff BASE NEW`: two reports of the same view joined row by row (on their text
//! columns: symbol, file, host...), each numeric column as its baseline and its change, as
//! perf diff shows Baseline and Delta. Works on the table model, so every view diffs alike.

use crate::render::table::{Cell, Column, Report, Table};
use serde_json::Value;
use std::collections::{HashMap, HashSet};

#[derive(Debug, thiserror::Error)]
pub enum DiffError {
    #[error("the two files are shown in different views ({base} and {new}): pass the same --view to both")]
    Views {
        base: &'static str,
        new: &'static str,
    },
}

/// A cell's number, if it is one (a share as its fraction, as JSON has it).
fn number(c: &Cell) -> Option<f64> {
    match c {
        Cell::Int(n) => Some(*n as f64),
        Cell::Float { value, .. } | Cell::Percent { value, .. } => Some(*value),
        Cell::Share { num, den } => (*den > 0).then(|| *num as f64 / *den as f64),
        Cell::Shown {
            value: Value::Number(n),
            ..
        } => n.as_f64(),
        Cell::Painted(inner, _) => number(inner),
        _ => None,
    }
}

/// Whether a column is text (a key of the join): its first non-empty cell says.
fn is_key(t: &Table, col: usize) -> bool {
    t.rows
        .iter()
        .filter_map(|r| r.get(col))
        .find(|c| !matches!(c, Cell::Empty))
        .is_some_and(|c| {
            matches!(c, Cell::Text(_))
                || matches!(
                    c,
                    Cell::Shown {
                        value: Value::String(_),
                        ..
                    }
                )
        })
}

/// Whether a missing row means zero in this column (counts and shares), rather than
/// nothing to compare (ratios such as CPI).
fn missing_is_zero(c: &Cell) -> bool {
    matches!(c, Cell::Int(_) | Cell::Percent { .. } | Cell::Share { .. })
}

fn places(c: &Cell) -> usize {
    match c {
        Cell::Float { places, .. } | Cell::Percent { places, .. } => *places,
        Cell::Share { .. } => 1,
        Cell::Painted(inner, _) => places(inner),
        _ => 0,
    }
}

fn key_text(c: &Cell) -> String {
    match c {
        Cell::Text(s) => s.clone(),
        Cell::Shown {
            value: Value::String(s),
            ..
        } => s.clone(),
        _ => String::new(),
    }
}

/// One table of each report, joined. (A table's `event` column is the same on every row:
/// tables are matched by event, rows by their other text columns.)
fn diff_table(base: &Table, new: &Table) -> Table {
    let j = Join::of(base, new);
    let rows = j.rows();
    j.table(rows)
}

/// How two tables join: the key columns of each, the numeric columns compared.
struct Join<'a> {
    base: &'a Table,
    new: &'a Table,
    /// The new table's key (text) columns.
    keys: Vec<usize>,
    /// The same columns in the base table.
    base_keys: Vec<usize>,
    /// The new table's numeric columns that the base has too.
    nums: Vec<usize>,
    /// The base's column index of each of `nums`.
    base_col: Vec<usize>,
    /// Joined row by row (no text columns: a time series).
    by_position: bool,
}

impl<'a> Join<'a> {
    fn of(base: &'a Table, new: &'a Table) -> Join<'a> {
        // The text columns, as the side with rows shows them.
        let keyed = if new.rows.is_empty() && base.columns.len() == new.columns.len() {
            base
        } else {
            new
        };
        let mut keys: Vec<usize> = (0..new.columns.len())
            .filter(|&i| new.columns[i].key != "event" && is_key(keyed, i))
            .collect();
        // A table without text columns (a time series: TopDown or stat intervals) is joined
        // row by row, its first column (the time) shown as the new file's.
        let by_position = keys.is_empty() && !new.columns.is_empty();
        if by_position {
            keys.push(0);
        }
        let nums: Vec<usize> = (0..new.columns.len())
            .filter(|&i| {
                !keys.contains(&i)
                    && new.columns[i].key != "event"
                    && base.columns.iter().any(|c| c.key == new.columns[i].key)
            })
            .collect();
        let base_col: Vec<usize> = nums
            .iter()
            .map(|&i| {
                base.columns
                    .iter()
                    .position(|c| c.key == new.columns[i].key)
                    .unwrap_or(i)
            })
            .collect();
        let base_keys: Vec<usize> = keys
            .iter()
            .filter_map(|&i| {
                base.columns
                    .iter()
                    .position(|c| c.key == new.columns[i].key)
            })
            .collect();
        Join {
            base,
            new,
            keys,
            base_keys,
            nums,
            base_col,
            by_position,
        }
    }

    /// Row `n`'s join key: its cells in `cols`, or its position.
    fn key_of(&self, n: usize, r: &[Cell], cols: &[usize]) -> Vec<String> {
        if self.by_position {
            return vec![n.to_string()];
        }
        cols.iter()
            .map(|&i| r.get(i).map(key_text).unwrap_or_default())
            .collect()
    }

    /// The key columns, then each numeric column as its base and its change.
    fn columns(&self) -> Vec<Column> {
        let new = self.new;
        let mut columns: Vec<Column> = self.keys.iter().map(|&i| new.columns[i].clone()).collect();
        for &i in &self.nums {
            let c = &new.columns[i];
            columns.push(Column::right(
                format!("{}_base", c.key),
                &format!("{} base", c.title),
                c.title.len() + 5,
            ));
            columns.push(Column::right(
                format!("{}_delta", c.key),
                &format!("Δ{}", c.title),
                c.title.len() + 1,
            ));
        }
        columns
    }

    /// The joined rows, each with its sort magnitude: the new table's rows in order, then
    /// the base's rows the new one lacks; ranked by change when the new table is ranked.
    fn rows(&self) -> Vec<(f64, Vec<Cell>)> {
        let (base, new) = (self.base, self.new);
        let mut base_rows: HashMap<Vec<String>, &Vec<Cell>> = HashMap::new();
        for (n, r) in base.rows.iter().enumerate() {
            base_rows
                .entry(self.key_of(n, r, &self.base_keys))
                .or_insert(r);
        }
        let mut rows: Vec<(f64, Vec<Cell>)> = Vec::new();
        let mut seen: HashSet<Vec<String>> = HashSet::new();
        for (n, r) in new.rows.iter().enumerate() {
            let k = self.key_of(n, r, &self.keys);
            let b = base_rows.get(&k).copied();
            seen.insert(k);
            rows.push(self.row(
                b,
                Some(r),
                self.keys.iter().map(|&i| r[i].clone()).collect(),
            ));
        }
        for (n, r) in base.rows.iter().enumerate() {
            let k = self.key_of(n, r, &self.base_keys);
            if seen.contains(&k) {
                continue;
            }
            rows.push(self.row(
                Some(r),
                None,
                self.base_keys.iter().map(|&i| r[i].clone()).collect(),
            ));
        }
        if new.ranked && !self.by_position {
            rows.sort_by(|a, b| b.0.total_cmp(&a.0));
        }
        rows
    }

    /// One joined row: `key_cells`, then each numeric column's base (`b`'s cell) and change
    /// to `n`'s; with the magnitude of its first change, to sort by.
    fn row(
        &self,
        b: Option<&Vec<Cell>>,
        n: Option<&Vec<Cell>>,
        key_cells: Vec<Cell>,
    ) -> (f64, Vec<Cell>) {
        let mut row = key_cells;
        let mut sort = None;
        for (j, &i) in self.nums.iter().enumerate() {
            let nc = n.and_then(|r| r.get(i));
            let bc = b.and_then(|r| r.get(self.base_col[j]));
            let template = nc.or(bc).unwrap_or(&Cell::Empty);
            let zero = missing_is_zero(template);
            let value = |c: Option<&Cell>, present: bool| match c.and_then(number) {
                Some(v) => Some(v),
                None if !present && zero => Some(0.0),
                None => None,
            };
            let (bv, nv) = (value(bc, b.is_some()), value(nc, n.is_some()));
            row.push(match bc {
                Some(c) if b.is_some() => c.clone(),
                _ if zero => Cell::Float {
                    value: 0.0,
                    places: places(template),
                },
                _ => Cell::Empty,
            });
            let delta = bv.zip(nv).map(|(b, n)| n - b);
            if sort.is_none() {
                sort = delta.map(f64::abs);
            }
            row.push(match (delta, template) {
                // A share's change: percentage points in the table, the fraction in JSON.
                (Some(d), Cell::Share { .. }) => Cell::Shown {
                    text: format!("{:+.1}%", 100.0 * d),
                    value: serde_json::json!(d),
                },
                (d, Cell::Int(_)) => Cell::opt_float(d, 0),
                (d, _) => Cell::opt_float(d, places(template).max(2)),
            });
        }
        (sort.unwrap_or(0.0), row)
    }

    /// The joined table: its title (both when they differ), its rows, and the event they
    /// count (a hidden first column) when the tables are one event's of several.
    fn table(&self, rows: Vec<(f64, Vec<Cell>)>) -> Table {
        let (base, new) = (self.base, self.new);
        let mut t = Table::new(&new.name, self.columns());
        t.title = match (&base.title, &new.title) {
            (Some(b), Some(n)) if b != n => Some(format!(
                "# {} vs {}",
                b.trim_start_matches("# "),
                n.trim_start_matches("# ")
            )),
            (b, n) => n.clone().or_else(|| b.clone()),
        };
        t.ranked = new.ranked;
        t.rows = rows.into_iter().map(|(_, r)| r).collect();
        // A table of one event of several: its rows say which (CSV, JSON), as the reports' do.
        if let Some(e) = new
            .summary
            .get("event")
            .or_else(|| base.summary.get("event"))
        {
            t.summary.insert("event".into(), e.clone());
            t.columns.insert(0, Column::left("event", "Event", 0));
            t.hidden.push("event");
            for r in &mut t.rows {
                r.insert(0, Cell::Text(e.as_str().unwrap_or_default().to_string()));
            }
        }
        t
    }
}

/// The event a table counts: its own (a report of several events), else its report's.
fn event_of<'a>(r: &'a Report, t: &'a Table) -> Option<&'a str> {
    t.summary
        .get("event")
        .or_else(|| r.summary.get("event"))
        .and_then(Value::as_str)
}

/// A report's tables by name and event, for [`diff`]'s join.
struct Tables<'a> {
    /// (name, event) → the first such table.
    by_event: HashMap<(&'a str, Option<&'a str>), usize>,
    /// name → the first table of that name, whatever its event.
    by_name: HashMap<&'a str, usize>,
}

impl<'a> Tables<'a> {
    fn of(r: &'a Report) -> Tables<'a> {
        let mut by_event = HashMap::new();
        let mut by_name = HashMap::new();
        for (i, t) in r.tables.iter().enumerate() {
            by_event
                .entry((t.name.as_str(), event_of(r, t)))
                .or_insert(i);
            by_name.entry(t.name.as_str()).or_insert(i);
        }
        Tables { by_event, by_name }
    }

    /// The first table named `name` of `event`, or without an event; any of that name for
    /// no event.
    fn find(&self, name: &str, event: Option<&str>) -> Option<usize> {
        match event {
            None => self.by_name.get(name).copied(),
            Some(_) => {
                let same = self.by_event.get(&(name, event)).copied();
                let none = self.by_event.get(&(name, None)).copied();
                same.into_iter().chain(none).min()
            }
        }
    }
}

/// A table like `t` without rows: the side of a join where an event has no samples.
fn empty_like(t: &Table) -> Table {
    Table {
        rows: Vec::new(),
        footer: Vec::new(),
        ..t.clone()
    }
}

/// `base` and `new` joined table by table (tables matched by name and event: a recording of
/// several events is joined event by event, an event only one side sampled against
/// nothing). The change is new minus base; ranked tables sort by the size of the first
/// numeric column's change, time series keep their order and are joined interval by
/// interval.
pub fn diff(base: &Report, new: &Report) -> Result<Report, DiffError> {
    if base.view != new.view {
        return Err(DiffError::Views {
            base: base.view,
            new: new.view,
        });
    }
    // Tables are matched by name and event (a table without an event matches any): each
    // side's tables indexed, so that recordings of many events join in linear time.
    let base_of = Tables::of(base);
    let new_of = Tables::of(new);
    let mut tables: Vec<Table> = Vec::new();
    for t in &new.tables {
        match base_of.find(&t.name, event_of(new, t)) {
            Some(b) => tables.push(diff_table(&base.tables[b], t)),
            None => {
                if let Some(e) = event_of(new, t) {
                    let mut d = diff_table(&empty_like(t), t);
                    d.title
                        .get_or_insert_with(|| format!("# event '{e}': new only"));
                    tables.push(d);
                }
            }
        }
    }
    // The events only the base sampled.
    for b in &base.tables {
        if let Some(e) = event_of(base, b) {
            if new_of.find(&b.name, Some(e)).is_none() {
                let mut d = diff_table(b, &empty_like(b));
                d.title
                    .get_or_insert_with(|| format!("# event '{e}': base only"));
                tables.push(d);
            }
        }
    }
    let mut warnings: Vec<String> = base.warnings.iter().map(|w| format!("base: {w}")).collect();
    warnings.extend(new.warnings.iter().map(|w| format!("new: {w}")));
    // How far each side's call stacks reach, as their reports say it.
    let mut summary = serde_json::Map::new();
    let mut stacks = Vec::new();
    for (side, r) in [("base", base), ("new", new)] {
        for h in r
            .heading
            .iter()
            .filter(|h| crate::symbolize::quality::is_line(h))
        {
            stacks.push(format!("# {side}: {}", h.trim_start_matches("# ")));
        }
        if let Some(v) = r.summary.get("stacks") {
            summary.insert(format!("{side}_stacks"), v.clone());
        }
    }
    Ok(Report {
        view: new.view,
        heading: std::iter::once(format!(
            "# {} vs {}: each column's baseline and its change (new - base)",
            base.heading
                .first()
                .map_or("", String::as_str)
                .trim_start_matches("# "),
            new.heading
                .first()
                .map_or("", String::as_str)
                .trim_start_matches("# ")
        ))
        .chain(stacks)
        .collect(),
        summary,
        tables,
        warnings,
        damaged: base.damaged || new.damaged,
        accounts: [("base", base), ("new", new)]
            .into_iter()
            .flat_map(|(side, r)| {
                r.accounts.iter().map(move |(n, a)| {
                    let who = n
                        .as_ref()
                        .map_or(side.to_string(), |n| format!("{side}: {n}"));
                    (Some(who), a.clone())
                })
            })
            .collect(),
    })
}
