//! The one table model every report view fills: a heading, tables of typed cells, notes;
//! rendered here to a text table, CSV or JSON (`render.rs` picks the renderer, HTML
//! included). Text from a recording is escaped in the text table and in CSV (JSON escapes it
//! itself).

use crate::text::{file_name, show};
use labperf_common::topdown::Colour;
use serde_json::{json, Map, Value};
use std::fmt::Write;

/// Output format (the CLI's `--format` maps its own value enum onto it).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    Table,
    Csv,
    Json,
    /// One self-contained page (no network): tables, charts over time; `report` adds the
    /// recording's facts and its flame graph.
    Html,
}

/// How a column's cells sit in the text table.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Align {
    Left,
    Right,
}

/// One column: its key (CSV header, JSON field), its title in the text table, alignment
/// and minimum width there, and what separates it from the column before.
#[derive(Debug, Clone)]
pub struct Column {
    /// `&'static` for the views' own columns; made for derived ones (`diff`'s `_delta`).
    pub key: std::borrow::Cow<'static, str>,
    pub title: String,
    pub align: Align,
    pub width: usize,
    pub gap: &'static str,
}

impl Column {
    pub fn left(
        key: impl Into<std::borrow::Cow<'static, str>>,
        title: &str,
        width: usize,
    ) -> Column {
        Column {
            key: key.into(),
            title: title.into(),
            align: Align::Left,
            width,
            gap: "  ",
        }
    }
    pub fn right(
        key: impl Into<std::borrow::Cow<'static, str>>,
        title: &str,
        width: usize,
    ) -> Column {
        Column {
            key: key.into(),
            title: title.into(),
            align: Align::Right,
            width,
            gap: "  ",
        }
    }
    /// With no gap before it (fixed-width layouts such as perf's TopDown table).
    pub fn tight(mut self) -> Column {
        self.gap = "";
        self
    }
    /// With one space before it.
    pub fn tight_gap(mut self) -> Column {
        self.gap = " ";
        self
    }
}

/// One value.
#[derive(Debug, Clone, PartialEq)]
pub enum Cell {
    /// Text (escaped for terminals in the text table and CSV).
    Text(String),
    Int(u64),
    /// A number shown with `places` decimals in the text table (CSV: at least 4; JSON: exact).
    Float {
        value: f64,
        places: usize,
    },
    /// A percentage: the text table prints `12.34%` with `places` decimals.
    Percent {
        value: f64,
        places: usize,
    },
    /// A share as shown in perf's TopDown tables: `num/den` in tenths of a percent, rounded
    /// half up (the agent prints the same cell); CSV and JSON get the fraction.
    Share {
        num: u64,
        den: u64,
    },
    /// Text already laid out for the text table (a TopDown time, say), and its JSON value.
    Shown {
        text: String,
        value: Value,
    },
    /// Not measured: `-` in the table, empty in CSV, null in JSON.
    Empty,
    /// A cell painted (perf's TopDown colours) in the text table on a terminal.
    Painted(Box<Cell>, Colour),
}

impl Cell {
    pub fn text(s: impl Into<String>) -> Cell {
        Cell::Text(s.into())
    }
    /// A file: its name in the text table, its whole path in CSV and JSON.
    pub fn file(path: &str) -> Cell {
        Cell::Shown {
            text: show(file_name(path)).into_owned(),
            value: Value::String(path.into()),
        }
    }
    pub fn opt_float(v: Option<f64>, places: usize) -> Cell {
        v.map_or(Cell::Empty, |value| Cell::Float { value, places })
    }

    pub(crate) fn table(&self) -> String {
        match self {
            Cell::Text(s) => show(s).into_owned(),
            Cell::Int(n) => n.to_string(),
            Cell::Float { value, places } => format!("{value:.places$}"),
            Cell::Percent { value, places } => format!("{value:.places$}%"),
            Cell::Share { num, den } => labperf_common::topdown::cell(Some(*num), *den),
            Cell::Shown { text, .. } => text.clone(),
            Cell::Empty => "-".into(),
            Cell::Painted(c, _) => c.table(),
        }
    }

    fn csv(&self) -> String {
        match self {
            Cell::Text(s) => csv_field(s),
            Cell::Int(n) => n.to_string(),
            Cell::Float { value, places } | Cell::Percent { value, places } => {
                let p = (*places).max(4);
                format!("{value:.p$}")
            }
            Cell::Share { num, den } => format!("{:.6}", share(*num, *den)),
            Cell::Shown { value, text } => match value {
                Value::String(s) => csv_field(s),
                Value::Null => String::new(),
                // A number laid out for the table (a time with its nine decimals) keeps
                // that layout in CSV.
                Value::Number(_) => text.clone(),
                _ => csv_field(text),
            },
            Cell::Empty => String::new(),
            Cell::Painted(c, _) => c.csv(),
        }
    }

    pub(crate) fn json(&self) -> Value {
        match self {
            Cell::Text(s) => Value::String(s.clone()),
            Cell::Int(n) => json!(n),
            Cell::Float { value, .. } | Cell::Percent { value, .. } => json!(value),
            Cell::Share { num, den } => json!(share(*num, *den)),
            Cell::Shown { value, .. } => value.clone(),
            Cell::Empty => Value::Null,
            Cell::Painted(c, _) => c.json(),
        }
    }
}

fn share(num: u64, den: u64) -> f64 {
    if den == 0 {
        0.0
    } else {
        num as f64 / den as f64
    }
}

/// A CSV text field: control characters escaped; a leading `'` when it starts with `=`,
/// `+`, `-`, `@`, a tab or a carriage return, which a spreadsheet would take for a formula
/// (numbers are typed cells, never text, so never prefixed); quoted when it holds a comma,
/// quote or newline.
pub fn csv_field(s: &str) -> String {
    let formula = s.starts_with(['=', '+', '-', '@', '\t', '\r']);
    let s = show(s);
    let s = if formula {
        std::borrow::Cow::Owned(format!("'{s}"))
    } else {
        s
    };
    if s.contains([',', '"', '\n']) {
        format!("\"{}\"", s.replace('"', "\"\""))
    } else {
        s.into_owned()
    }
}

/// One table of a report.
#[derive(Debug, Clone)]
pub struct Table {
    /// Its name: JSON's `name`, CSV's `table` column when a report has several.
    pub name: String,
    /// A line printed above it in the text table.
    pub title: Option<String>,
    pub columns: Vec<Column>,
    pub rows: Vec<Vec<Cell>>,
    /// Rows sorted busiest first: `--top` keeps the first N (time series are not ranked).
    pub ranked: bool,
    /// The text table's header starts with `#` (perf's TopDown tables).
    pub hash_header: bool,
    /// Lines printed below it in the text table (a total line, say), laid out as rows.
    pub footer: Vec<Vec<Cell>>,
    /// Keys of columns left out of the text table (they repeat what another column shows).
    pub hidden: Vec<&'static str>,
    /// Facts about this table alone (JSON's `summary` of the table).
    pub summary: Map<String, Value>,
    /// Rows the view left out before the table was made (its `--top` applied as it was
    /// built), said below the table with those `--top` leaves out of `rows`.
    pub left_out: LeftOut,
}

/// Rows a view left out of a table before it was made: how many, their samples, and the
/// samples of the whole table (0 when the view does not count them).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct LeftOut {
    pub rows: u64,
    pub samples: u64,
    pub total_samples: u64,
    /// The samples are those in the rows' functions themselves (`--children`'s Self).
    pub self_samples: bool,
}

/// What `--top` hid of a table: rows and, where the table counts samples, their share.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct NotShown {
    pub rows: u64,
    /// Percent of the table's samples.
    pub samples_pct: Option<f64>,
    /// Those are samples in the rows' own functions (`--children`'s Self).
    pub self_samples: bool,
}

impl NotShown {
    /// The line below a text table: `… 307 more rows (12.3% of samples) not shown: --top 0
    /// shows all`.
    pub fn line(&self) -> String {
        let rows = if self.rows == 1 { "row" } else { "rows" };
        let share = self.samples_pct.map_or(String::new(), |p| {
            let of = if self.self_samples {
                "self samples"
            } else {
                "samples"
            };
            format!(" ({p:.1}% of {of})")
        });
        format!(
            "… {} more {rows}{share} not shown: --top 0 shows all",
            self.rows
        )
    }
}

impl Table {
    pub fn new(name: impl Into<String>, columns: Vec<Column>) -> Table {
        Table {
            name: name.into(),
            title: None,
            columns,
            rows: Vec::new(),
            ranked: true,
            hash_header: false,
            footer: Vec::new(),
            hidden: Vec::new(),
            summary: Map::new(),
            left_out: LeftOut::default(),
        }
    }
}

/// A finished report of any view.
#[derive(Debug, Clone, Default)]
pub struct Report {
    /// The view's name (JSON's `view`).
    pub view: &'static str,
    /// Lines above the tables in the text table (`# 11184 samples, ...`).
    pub heading: Vec<String>,
    /// The same facts for JSON.
    pub summary: Map<String, Value>,
    pub tables: Vec<Table>,
    /// What the reader should know (damage, lost samples, missing symbols, notes).
    pub warnings: Vec<String>,
    pub damaged: bool,
    /// Each recording's account of its CPU time (`record::account`): a line under the
    /// heading in the text table, `cpu_time` in JSON's summary (a list when several),
    /// named by file when there are several.
    pub accounts: Vec<(Option<String>, crate::record::account::Account)>,
}

impl Report {
    /// The report of a file in `view`: the file's own warnings first (damage, samples the
    /// kernel lost), then the view's (each said as a `warning: ` unless it is a `note: `),
    /// and whether the file is damaged. The view adds its heading, summary and tables.
    pub fn of_file(
        view: &'static str,
        info: &crate::record::load::FileInfo,
        warnings: impl IntoIterator<Item = String>,
    ) -> Report {
        let mut all = info.warnings();
        let account = crate::record::account::of(info);
        all.extend(account.iter().flat_map(|a| a.warnings.iter().cloned()));
        all.extend(warnings.into_iter().map(|w| {
            if w.starts_with("note: ") || w.starts_with("warning: ") {
                w
            } else {
                format!("warning: {w}")
            }
        }));
        Report {
            view,
            warnings: all,
            damaged: info.damaged(),
            accounts: account.into_iter().map(|a| (None, a)).collect(),
            ..Default::default()
        }
    }

    /// Adds the account of another recording of the report (`name`: its file), its line
    /// and warnings said with its name.
    pub fn add_account(&mut self, name: &str, info: &crate::record::load::FileInfo) {
        let Some(a) = crate::record::account::of(info) else {
            return;
        };
        let name = crate::text::file_name(name).to_string();
        for w in &a.warnings {
            let (kind, rest) = w.split_once(": ").unwrap_or(("warning", w));
            self.warnings.push(format!("{kind}: {name}: {rest}"));
        }
        if let Some(first) = self.accounts.first_mut() {
            first.0.get_or_insert_with(|| "the first file".into());
        }
        self.accounts.push((Some(name), a));
    }

    /// The heading's account lines: `# samples cover ...`, each file's named.
    pub fn account_lines(&self) -> Vec<String> {
        self.accounts
            .iter()
            .map(|(name, a)| match name {
                Some(n) => format!("# {n}: {}", a.line),
                None => format!("# {}", a.line),
            })
            .collect()
    }

    /// The summary with the accounts' figures as `cpu_time` (a list when several).
    pub fn summary_with_accounts(&self) -> Map<String, Value> {
        let mut m = self.summary.clone();
        let js: Vec<Value> = self
            .accounts
            .iter()
            .map(|(name, a)| {
                let mut j = a.json.clone();
                if let (Some(n), Some(o)) = (name, j.as_object_mut()) {
                    o.insert("file".into(), json!(n));
                }
                j
            })
            .collect();
        match js.len() {
            0 => {}
            1 => {
                m.insert("cpu_time".into(), js.into_iter().next().expect("one"));
            }
            _ => {
                m.insert("cpu_time".into(), Value::Array(js));
            }
        }
        m
    }
}

/// The widest a left-aligned column followed by text columns is padded to: a longer cell
/// (a C++ template instance's name runs to hundreds of characters) pushes the rest of its
/// own row right instead of widening every row of the table to its length.
const MAX_PADDED: usize = 64;

fn pad(s: &mut String, text: &str, col: &Column, width: usize, last: bool) {
    let w = text.chars().count();
    let fill = width.saturating_sub(w);
    match col.align {
        Align::Right => {
            s.extend(std::iter::repeat_n(' ', fill));
            s.push_str(text);
        }
        Align::Left if last => s.push_str(text),
        Align::Left => {
            s.push_str(text);
            s.extend(std::iter::repeat_n(' ', fill));
        }
    }
}

fn paint(text: String, c: Colour, colour: bool) -> String {
    match (colour, c) {
        (true, Colour::Green) => format!("\x1b[32m{text}\x1b[0m"),
        (true, Colour::Red) => format!("\x1b[31m{text}\x1b[0m"),
        _ => text,
    }
}

impl Table {
    /// How many of its rows the table shows: the first `top` of a ranked table (0 = all).
    pub fn shown_rows(&self, top: usize) -> usize {
        if self.ranked && top > 0 {
            top.min(self.rows.len())
        } else {
            self.rows.len()
        }
    }

    /// What the table does not show with `--top top`: the rows its view left out and those
    /// past the first `top`, with their share of the samples when the table has a
    /// `samples` column or its view counted them; `None` when it shows every row.
    pub fn not_shown(&self, top: usize) -> Option<NotShown> {
        let shown = self.shown_rows(top);
        let rows = self.left_out.rows + (self.rows.len() - shown) as u64;
        if rows == 0 {
            return None;
        }
        let col = self.columns.iter().position(|c| c.key == "samples");
        let sum = |rows: &[Vec<Cell>]| -> Option<u64> {
            let i = col?;
            rows.iter().try_fold(0u64, |acc, r| match r.get(i) {
                Some(Cell::Int(n)) => Some(acc.saturating_add(*n)),
                _ => None,
            })
        };
        let (hidden, total) = if self.left_out.total_samples > 0 {
            let hidden = sum(&self.rows[shown..]).unwrap_or(0);
            (
                Some(hidden + self.left_out.samples),
                Some(self.left_out.total_samples),
            )
        } else if self.left_out.rows == 0 {
            (sum(&self.rows[shown..]), sum(&self.rows))
        } else {
            (None, None)
        };
        let samples_pct = match (hidden, total) {
            (Some(h), Some(t)) if t > 0 => Some(100.0 * h as f64 / t as f64),
            _ => None,
        };
        Some(NotShown {
            rows,
            samples_pct,
            self_samples: self.left_out.self_samples,
        })
    }
}

/// The text table's lines of one table: its title's line aside, the column titles, its
/// first `rows` rows and its footer, `colour` painting the painted cells.
fn write_text_table(s: &mut String, t: &Table, rows: usize, colour: bool) {
    // The columns the text table shows, by index.
    let visible: Vec<usize> = (0..t.columns.len())
        .filter(|&i| !t.hidden.contains(&t.columns[i].key.as_ref()))
        .collect();
    let columns: Vec<&Column> = visible.iter().map(|&i| &t.columns[i]).collect();
    let ncol = columns.len();
    let cells: Vec<Vec<&Cell>> = t.rows[..rows]
        .iter()
        .chain(&t.footer)
        .map(|r| visible.iter().filter_map(|&i| r.get(i)).collect())
        .collect();
    let shown: Vec<Vec<String>> = cells
        .iter()
        .map(|r| r.iter().map(|c| c.table()).collect())
        .collect();
    // Each column as wide as its widest cell, at least its set width; a left-aligned
    // column followed by text columns only (Symbol before DSO) at most MAX_PADDED wide
    // (or its set width); one followed by numbers keeps them aligned.
    let widths: Vec<usize> = columns
        .iter()
        .enumerate()
        .map(|(i, c)| {
            let widest = shown
                .iter()
                .filter_map(|r| r.get(i))
                .map(|x| x.chars().count())
                .chain([c.width, c.title.chars().count()])
                .max()
                .unwrap_or(0);
            match c.align {
                Align::Left
                    if i + 1 < ncol && columns[i + 1..].iter().all(|c| c.align == Align::Left) =>
                {
                    widest.min(MAX_PADDED.max(c.width).max(c.title.chars().count()))
                }
                _ => widest,
            }
        })
        .collect();
    let mut line = String::new();
    for (i, c) in columns.iter().enumerate() {
        if i > 0 {
            line.push_str(c.gap);
        }
        pad(&mut line, &c.title, c, widths[i], i + 1 == ncol);
    }
    if t.hash_header && !line.is_empty() {
        line.replace_range(..1, "#");
    }
    let _ = writeln!(s, "{}", line.trim_end());
    for (r, texts) in cells.iter().zip(&shown) {
        let mut line = String::new();
        for (i, (c, cell)) in columns.iter().zip(r).enumerate() {
            if i > 0 {
                line.push_str(c.gap);
            }
            let mut text = String::new();
            pad(&mut text, &texts[i], c, widths[i], i + 1 == ncol);
            match cell {
                Cell::Painted(_, col) => line.push_str(&paint(text, *col, colour)),
                _ => line.push_str(&text),
            }
        }
        let _ = writeln!(s, "{}", line.trim_end());
    }
}

impl Report {
    /// The report as a text table; `top` keeps the first N rows of ranked tables (0 = all);
    /// `colour` paints it. [`Report::render`] picks this for [`Format::Table`].
    pub fn to_text(&self, top: usize, colour: bool) -> String {
        let mut s = String::new();
        for h in self.heading.iter().chain(&self.account_lines()) {
            let _ = writeln!(s, "{}", show(h));
        }
        for (n, t) in self.tables.iter().enumerate() {
            if n > 0 || (!self.heading.is_empty() && t.title.is_some()) {
                s.push('\n');
            }
            if let Some(title) = &t.title {
                let _ = writeln!(s, "{}", show(title));
            }
            write_text_table(&mut s, t, t.shown_rows(top), colour);
            if let Some(n) = t.not_shown(top) {
                let _ = writeln!(s, "{}", n.line());
            }
        }
        s
    }

    /// The report as CSV (a `table` column first when it has several tables); `top` as for
    /// [`Report::to_text`].
    pub fn to_csv(&self, top: usize) -> String {
        let mut s = String::new();
        let several = self.tables.len() > 1;
        let mut last_header = String::new();
        for t in &self.tables {
            let mut header: Vec<&str> = t.columns.iter().map(|c| c.key.as_ref()).collect();
            if several {
                header.insert(0, "table");
            }
            let header = header.join(",");
            if header != last_header {
                let _ = writeln!(s, "{header}");
                last_header = header;
            }
            for r in t.rows[..t.shown_rows(top)].iter().chain(&t.footer) {
                let mut cells: Vec<String> = r.iter().map(Cell::csv).collect();
                if several {
                    cells.insert(0, csv_field(&t.name));
                }
                let _ = writeln!(s, "{}", cells.join(","));
            }
        }
        s
    }

    /// The report as JSON; `top` as for [`Report::to_text`].
    pub fn to_json(&self, top: usize) -> String {
        // Serialized as it goes (keys in sorted order, as a JSON map has them): a
        // report of a million rows never becomes a million JSON value trees.
        let tables: Vec<JsonTable> = self
            .tables
            .iter()
            .map(|t| JsonTable {
                t,
                n: t.shown_rows(top),
                top,
            })
            .collect();
        let j = JsonReport { r: self, tables };
        let mut s = serde_json::to_string_pretty(&j).expect("JSON values serialize");
        s.push('\n');
        s
    }
}

/// A report as JSON: `damaged`, `summary`, `tables`, `view`, `warnings`.
struct JsonReport<'a> {
    r: &'a Report,
    tables: Vec<JsonTable<'a>>,
}

impl serde::Serialize for JsonReport<'_> {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeMap;
        let mut m = s.serialize_map(Some(5))?;
        m.serialize_entry("damaged", &self.r.damaged)?;
        m.serialize_entry("summary", &self.r.summary_with_accounts())?;
        m.serialize_entry("tables", &self.tables)?;
        m.serialize_entry("view", self.r.view)?;
        m.serialize_entry("warnings", &self.r.warnings)?;
        m.end()
    }
}

/// A table as JSON, its first `n` rows: `columns`, `name`, `rows`, then `summary`, `title`,
/// `not_shown` (what `--top` hid: rows and their percent of the samples) and `total` where
/// it has them.
struct JsonTable<'a> {
    t: &'a Table,
    n: usize,
    top: usize,
}

impl serde::Serialize for JsonTable<'_> {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeMap;
        let t = self.t;
        // Each row's cells in key order; a key twice keeps its last cell, as a map would.
        let mut order: Vec<usize> = (0..t.columns.len()).collect();
        order.sort_by(|&a, &b| t.columns[a].key.cmp(&t.columns[b].key).then(b.cmp(&a)));
        order.dedup_by(|a, b| t.columns[*a].key == t.columns[*b].key);
        let keys: Vec<&str> = t.columns.iter().map(|c| c.key.as_ref()).collect();
        let mut m = s.serialize_map(None)?;
        m.serialize_entry("columns", &keys)?;
        m.serialize_entry("name", &t.name)?;
        fn rows<'a>(t: &'a Table, rows: &'a [Vec<Cell>], order: &'a [usize]) -> Vec<JsonRow<'a>> {
            rows.iter().map(|r| JsonRow { t, r, order }).collect()
        }
        m.serialize_entry("rows", &rows(t, &t.rows[..self.n], &order))?;
        if !t.summary.is_empty() {
            m.serialize_entry("summary", &t.summary)?;
        }
        if let Some(title) = &t.title {
            m.serialize_entry("title", title)?;
        }
        if let Some(n) = t.not_shown(self.top) {
            m.serialize_entry(
                "not_shown",
                &if n.self_samples {
                    json!({"rows": n.rows, "self_samples_pct": n.samples_pct})
                } else {
                    json!({"rows": n.rows, "samples_pct": n.samples_pct})
                },
            )?;
        }
        if !t.footer.is_empty() {
            m.serialize_entry("total", &rows(t, &t.footer, &order))?;
        }
        m.end()
    }
}

/// One row as a JSON object, keyed by its columns.
struct JsonRow<'a> {
    t: &'a Table,
    r: &'a [Cell],
    order: &'a [usize],
}

impl serde::Serialize for JsonRow<'_> {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeMap;
        let mut m = s.serialize_map(None)?;
        for &i in self.order {
            if let Some(c) = self.r.get(i) {
                m.serialize_entry(self.t.columns[i].key.as_ref(), &c.json())?;
            }
        }
        m.end()
    }
}

/// Adds the stacks' figures to a report: the line in its heading (each file's, named,
/// when there are several), `stacks` in its summary (a list when several), and their
/// warnings.
pub fn annotate(r: &mut Report, runs: &[(String, Option<crate::symbolize::quality::Quality>)]) {
    let with: Vec<&(String, Option<crate::symbolize::quality::Quality>)> =
        runs.iter().filter(|r| r.1.is_some()).collect();
    if with.is_empty() {
        return;
    }
    let several = runs.len() > 1;
    let mut js = Vec::new();
    for (name, q) in with {
        let q = q.as_ref().expect("filtered");
        let who = if several {
            format!("{}: ", crate::text::file_name(name))
        } else {
            String::new()
        };
        r.heading.push(format!("# {who}{}", q.line()));
        for w in q.warnings() {
            let (kind, rest) = w.split_once(": ").unwrap_or(("warning", &w));
            r.warnings.push(format!("{kind}: {who}{rest}"));
        }
        let mut j = q.json();
        if several {
            j["file"] = json!(name);
        }
        js.push(j);
    }
    let v = if several {
        Value::Array(js)
    } else {
        js.remove(0)
    };
    r.summary.insert("stacks".into(), v);
}

#[cfg(test)]
mod tests {
    use super::*;

    fn report() -> Report {
        let mut t = Table::new(
            "functions",
            vec![
                Column::right("percent", "Overhead", 8),
                Column::left("name", "Symbol", 12),
                Column::left("dso", "DSO", 0),
            ],
        );
        t.rows.push(vec![
            Cell::Percent {
                value: 62.5,
                places: 2,
            },
            Cell::text("std::map<int, int>::find(int) const"),
            Cell::text("a.out"),
        ]);
        t.rows
            .push(vec![Cell::Empty, Cell::text("esc\x1b[2J"), Cell::text("b")]);
        Report {
            view: "plain",
            heading: vec!["# 8 samples".into()],
            tables: vec![t],
            ..Default::default()
        }
    }

    /// A ranked table of `samples` rows, a `samples` column each.
    fn ranked(samples: &[u64]) -> Table {
        let mut t = Table::new(
            "functions",
            vec![
                Column::right("samples", "Samples", 8),
                Column::left("name", "Symbol", 0),
            ],
        );
        for (i, &n) in samples.iter().enumerate() {
            t.rows.push(vec![Cell::Int(n), Cell::text(format!("f{i}"))]);
        }
        t
    }

    #[test]
    fn top_says_what_it_hid_of_a_whole_table_and_of_one_its_view_cut() {
        // Rows cut here, by --top: their samples out of the table's.
        let t = ranked(&[50, 30, 15, 5]);
        assert_eq!(t.not_shown(0), None);
        assert_eq!(t.not_shown(4), None);
        let n = t.not_shown(2).unwrap();
        assert_eq!((n.rows, n.samples_pct), (2, Some(20.0)));
        assert_eq!(
            n.line(),
            "… 2 more rows (20.0% of samples) not shown: --top 0 shows all"
        );
        assert_eq!(
            t.not_shown(3).unwrap().line(),
            "… 1 more row (5.0% of samples) not shown: --top 0 shows all"
        );
        // A time series is never cut.
        let mut series = ranked(&[1, 2, 3]);
        series.ranked = false;
        assert_eq!(series.not_shown(1), None);
        // Rows its view left out before: their samples out of the view's total.
        let mut t = ranked(&[50, 30]);
        t.left_out = LeftOut {
            rows: 2,
            samples: 20,
            total_samples: 100,
            self_samples: false,
        };
        let n = t.not_shown(2).unwrap();
        assert_eq!((n.rows, n.samples_pct), (2, Some(20.0)));
        let n = t.not_shown(1).unwrap();
        assert_eq!((n.rows, n.samples_pct), (3, Some(50.0)));
        // Rows without a samples column and no total: the count alone.
        let mut t = Table::new("t", vec![Column::left("name", "Name", 0)]);
        t.rows = vec![vec![Cell::text("a")], vec![Cell::text("b")]];
        let n = t.not_shown(1).unwrap();
        assert_eq!((n.rows, n.samples_pct), (1, None));
        assert_eq!(n.line(), "… 1 more row not shown: --top 0 shows all");
        // In the report: below the table in text, a field in JSON, nothing in CSV.
        let r = Report {
            tables: vec![ranked(&[50, 30, 15, 5])],
            ..Default::default()
        };
        let text = r.render(Format::Table, 2, false);
        assert!(
            text.ends_with(
                "     30  f1\n… 2 more rows (20.0% of samples) not shown: --top 0 shows all\n"
            ),
            "{text}"
        );
        let j: Value = serde_json::from_str(&r.render(Format::Json, 2, false)).unwrap();
        assert_eq!(
            j["tables"][0]["not_shown"],
            json!({"rows": 2, "samples_pct": 20.0})
        );
        assert_eq!(
            r.render(Format::Csv, 2, false),
            "samples,name\n50,f0\n30,f1\n"
        );
    }

    #[test]
    fn a_long_name_pushes_its_own_row_not_every_row() {
        let long = format!("void std::__introsort_loop<{}>(long)", "x".repeat(200));
        let mut t = Table::new(
            "functions",
            vec![
                Column::right("percent", "Overhead", 8),
                Column::left("name", "Symbol", 40),
                Column::left("dso", "DSO", 0),
            ],
        );
        for (pct, name) in [(90.0, long.as_str()), (10.0, "main")] {
            t.rows.push(vec![
                Cell::Percent {
                    value: pct,
                    places: 2,
                },
                Cell::text(name),
                Cell::text("tmpl"),
            ]);
        }
        let r = Report {
            view: "plain",
            tables: vec![t],
            ..Default::default()
        };
        let text = r.render(Format::Table, 0, false);
        let lines: Vec<&str> = text.lines().collect();
        let pad = " ".repeat(MAX_PADDED - "Symbol".len());
        assert_eq!(lines[0], format!("Overhead  Symbol{pad}  DSO"));
        // The long name whole, then the gap and its DSO.
        assert_eq!(lines[1], format!("  90.00%  {long}  tmpl"));
        // The short name's row as wide as the title's: MAX_PADDED, not the long name's.
        let pad = " ".repeat(MAX_PADDED - "main".len());
        assert_eq!(lines[2], format!("  10.00%  main{pad}  tmpl"));
        // The last column is never padded, however long.
        let mut t = r.tables[0].clone();
        t.columns.swap(1, 2);
        for row in &mut t.rows {
            row.swap(1, 2);
        }
        let r = Report {
            view: "plain",
            tables: vec![t],
            ..Default::default()
        };
        let text = r.render(Format::Table, 0, false);
        assert_eq!(text.lines().nth(2), Some("  10.00%  tmpl  main"));
        // Numbers after the name (the metrics view) stay aligned under their titles.
        let mut t = r.tables[0].clone();
        t.columns.swap(0, 2);
        for row in &mut t.rows {
            row.swap(0, 2);
        }
        let r = Report {
            view: "plain",
            tables: vec![t],
            ..Default::default()
        };
        let text = r.render(Format::Table, 0, false);
        let ends: Vec<usize> = text.lines().map(|l| l.len()).collect();
        assert_eq!(ends[0], ends[1]);
        assert_eq!(ends[1], ends[2]);
    }

    #[test]
    fn one_model_three_formats() {
        let r = report();
        assert_eq!(
            r.render(Format::Table, 0, false),
            "# 8 samples\nOverhead  Symbol                               DSO\n  62.50%  std::map<int, int>::find(int) const  a.out\n       -  esc\\x1b[2J                           b\n"
        );
        // A C++ name with commas round-trips through CSV.
        let csv = r.render(Format::Csv, 0, false);
        assert_eq!(
            csv,
            "percent,name,dso\n62.5000,\"std::map<int, int>::find(int) const\",a.out\n,esc\\x1b[2J,b\n"
        );
        let j: Value = serde_json::from_str(&r.render(Format::Json, 1, false)).unwrap();
        assert_eq!(
            j["tables"][0]["rows"][0]["name"],
            "std::map<int, int>::find(int) const"
        );
        assert_eq!(
            j["tables"][0]["rows"].as_array().unwrap().len(),
            1,
            "--top 1"
        );
        assert_eq!(j["view"], "plain");
    }
}
