//! `--format html`: a report as one self-contained page (no network): the recordings'
//! facts (events with period or frequency, date, duration, losses, how far the stacks
//! reach), the flame graph as an icicle (the root on top, in a scrolling box), every
//! time-series table as a chart over time, then the view's tables. The table model ([`crate::render::table`]) is rendered here, as it is to text,
//! CSV and JSON there.

use crate::render::table::{Align, Cell, Report, Table};
use crate::symbolize::facts::Run;
use labperf_common::topdown::Colour;
use std::fmt::Write;

/// Text as HTML: `&`, `<`, `>` and quotes escaped; control characters shown escaped.
pub fn escape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in crate::text::show_text(s).chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}

const STYLE: &str = "
body { font-family: system-ui, sans-serif; margin: 1.5em; color: #222; }
h1 { font-size: 1.4em; } h2 { font-size: 1.15em; margin-top: 1.6em; }
table.labperf { border-collapse: collapse; font-size: 0.9em; }
table.labperf th, table.labperf td { padding: 2px 8px; border-bottom: 1px solid #ddd; }
table.labperf th { background: #f0f0f0; text-align: left; }
table.labperf td.num { text-align: right; font-variant-numeric: tabular-nums; }
table.labperf td.green { color: #070; } table.labperf td.red { color: #b00; }
table.facts th { text-align: right; background: none; color: #555; }
.warnings li { color: #a40; }
.heading { font-family: monospace; color: #444; }
.flame-box { max-height: 80vh; overflow-y: auto; border: 1px solid #eee; }
.flame-box > svg { width: 100%; height: auto; display: block; }
svg.chart { border: 1px solid #ccc; background: #fff; }
svg.chart text { font-family: system-ui, sans-serif; font-size: 11px; }
";

/// Line colours of a chart's series.
const PALETTE: &[&str] = &[
    "#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f",
    "#bcbd22", "#17becf",
];

/// Series per chart and points per series, at most: a page stays light whatever the file.
const MAX_SERIES: usize = 10;
const MAX_POINTS: usize = 2000;

/// The most flame graphs a page draws (one per event): each is an SVG of its own, with its
/// script, and a crafted file can name thousands of events.
pub const MAX_FLAMES: usize = 16;

/// One flame graph of a page: its event's name (`None` when the recordings sampled one
/// event) and the SVG.
pub struct Flame {
    pub event: Option<String>,
    pub svg: String,
}

/// How many functions a page annotates (the busiest whose binaries are found).
pub const MAX_ANNOTATED: usize = 3;

/// One function of a page annotated: its name and `labperf annotate`'s text of it.
pub struct Annotated {
    pub name: String,
    pub text: String,
}

/// What a page shows besides the report: `runs` give the header facts (empty: none),
/// `flames` the SVG flame graphs, one per event, `annotated` the busiest functions'
/// instructions.
#[derive(Default)]
pub struct Extras {
    pub runs: Vec<Run>,
    pub flames: Vec<Flame>,
    pub annotated: Vec<Annotated>,
}

/// The whole page of `r` and its `extras`.
pub fn page(r: &Report, extras: &Extras, top: usize) -> String {
    let (runs, flames) = (&extras.runs, &extras.flames);
    let mut s = String::new();
    let title = runs
        .first()
        .and_then(|r| r.info.header.as_ref())
        .map_or_else(
            || format!("labperf {} report", r.view),
            |h| format!("labperf: {}", crate::text::recorded(&h.command)),
        );
    let _ = write!(
        s,
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\
         <meta name=\"generator\" content=\"labperf {}\"><title>{}</title><style>{STYLE}</style></head><body>\n",
        env!("CARGO_PKG_VERSION"),
        escape(&title)
    );
    let _ = writeln!(s, "<h1>{}</h1>", escape(&title));
    if !runs.is_empty() {
        s.push_str("<section id=\"recording\"><h2>Recording</h2>");
        s.push_str(&facts(runs));
        s.push_str("</section>\n");
    }
    if !r.warnings.is_empty() {
        s.push_str("<section id=\"warnings\"><ul class=\"warnings\">");
        for w in &r.warnings {
            let _ = write!(s, "<li>{}</li>", escape(w));
        }
        s.push_str("</ul></section>\n");
    }
    for (i, f) in flames.iter().enumerate() {
        // The first keeps the id it always had; each has its event's name in its heading
        // and its `data-event`.
        let id = if i == 0 {
            "flamegraph".to_string()
        } else {
            format!("flamegraph-{i}")
        };
        match &f.event {
            Some(e) => {
                let _ = writeln!(
                    s,
                    "<section id=\"{id}\" class=\"flamegraph\" data-event=\"{}\"><h2>Flame graph: {}</h2>",
                    escape(e),
                    escape(e)
                );
            }
            None => {
                let _ = writeln!(s, "<section id=\"{id}\"><h2>Flame graph</h2>");
            }
        }
        // An icicle (the root on top) in a box of at most most of a screen: a deep graph
        // shows its first rows, the rest scrolls within, and the tables stay near.
        s.push_str("<div class=\"flame-box\">");
        s.push_str(inline_svg(&f.svg));
        s.push_str("</div>\n</section>\n");
    }
    let charts: Vec<String> = r.tables.iter().flat_map(charts).collect();
    if !charts.is_empty() {
        s.push_str("<section id=\"charts\"><h2>Over time</h2>\n");
        for c in charts {
            s.push_str(&c);
        }
        s.push_str("</section>\n");
    }
    let _ = write!(
        s,
        "<section id=\"report\"><h2>Report ({} view)</h2>\n{}</section>\n",
        escape(r.view),
        tables(r, top)
    );
    if !extras.annotated.is_empty() {
        s.push_str(
            "<section id=\"annotate\"><h2>Busiest functions, instruction by instruction</h2>\n",
        );
        for a in &extras.annotated {
            let _ = writeln!(
                s,
                "<details class=\"annotate\"><summary>{}</summary><pre>{}</pre></details>",
                escape(&a.name),
                escape(&a.text)
            );
        }
        s.push_str("</section>\n");
    }
    s.push_str("</body></html>\n");
    s
}

/// A standalone SVG document as an element of the page: its XML prolog and doctype go.
fn inline_svg(svg: &str) -> &str {
    svg.find("<svg").map_or("", |i| &svg[i..])
}

/// One column per recording: first what a reader of the graph needs (the command, the
/// events with their period or frequency, the date (UTC), the duration, samples, losses and
/// how far the call stacks reach, as the text report's heading says it), then the machine.
fn facts(runs: &[Run]) -> String {
    let mut rows: Vec<(&str, Vec<String>)> = vec![
        ("run", vec![]),
        ("command", vec![]),
        ("events", vec![]),
        ("date", vec![]),
        ("duration", vec![]),
        ("samples", vec![]),
        ("losses", vec![]),
        ("CPU time", vec![]),
        ("call stacks", vec![]),
        ("host", vec![]),
        ("architecture", vec![]),
        ("CPU", vec![]),
        ("kernel", vec![]),
        ("mode", vec![]),
    ];
    for run in runs {
        let h = run.info.header.as_ref();
        let v = [
            run.name.clone(),
            h.map_or("unknown".into(), |h| h.command.join(" ")),
            run.events_text(),
            run.date_text(),
            run.duration_text(),
            run.info.samples.to_string(),
            run.losses_text(),
            crate::record::account::of(&run.info).map_or_else(
                || "no account (a counting run, or a recording of no clock without one)".into(),
                |a| a.line,
            ),
            // The row says "call stacks": the line without its first words.
            run.stacks.as_ref().map_or_else(
                || "none recorded".into(),
                |q| {
                    let l = q.line();
                    l.strip_prefix("call stacks ")
                        .map_or(l.clone(), str::to_string)
                },
            ),
            run.host.clone(),
            run.arch.clone(),
            h.map_or("unknown".into(), |h| crate::record::cpu::cpu_name(&h.cpu)),
            h.map_or("unknown".into(), |h| h.kernel_release.clone()),
            h.map_or("unknown".into(), |h| h.mode.clone()),
        ];
        for (row, v) in rows.iter_mut().zip(v) {
            row.1.push(v);
        }
    }
    let mut s = String::from("<table class=\"labperf facts\">");
    for (k, vs) in rows {
        let _ = write!(s, "<tr><th>{k}</th>");
        for v in vs {
            let _ = write!(
                s,
                "<td class=\"fact-{}\">{}</td>",
                k.to_lowercase().replace(' ', "-"),
                escape(&v)
            );
        }
        s.push_str("</tr>");
    }
    s.push_str("</table>");
    s
}

fn cell_html(c: &Cell, align: Align) -> String {
    let (text, class) = match c {
        Cell::Painted(inner, Colour::Green) => (inner.table(), "green"),
        Cell::Painted(inner, Colour::Red) => (inner.table(), "red"),
        c => (c.table(), ""),
    };
    let num = if align == Align::Right { "num" } else { "" };
    let class = [num, class]
        .iter()
        .filter(|c| !c.is_empty())
        .copied()
        .collect::<Vec<_>>()
        .join(" ");
    if class.is_empty() {
        format!("<td>{}</td>", escape(&text))
    } else {
        format!("<td class=\"{class}\">{}</td>", escape(&text))
    }
}

/// The report's heading and tables as HTML (`top` as in the text table).
pub fn tables(r: &Report, top: usize) -> String {
    let mut s = String::new();
    for h in &r.heading {
        let _ = writeln!(s, "<p class=\"heading\">{}</p>", escape(h));
    }
    let mut ids: std::collections::HashMap<&str, usize> = Default::default();
    for t in &r.tables {
        if let Some(title) = &t.title {
            let _ = writeln!(s, "<h3>{}</h3>", escape(title));
        }
        let visible: Vec<usize> = (0..t.columns.len())
            .filter(|&i| !t.hidden.contains(&t.columns[i].key.as_ref()))
            .collect();
        // Each id once: a second table of the same name (another event's) is `-2`, ...
        let n = ids.entry(t.name.as_str()).or_default();
        *n += 1;
        let suffix = if *n > 1 {
            format!("-{n}")
        } else {
            String::new()
        };
        let event = t
            .summary
            .get("event")
            .and_then(|e| e.as_str())
            .map(|e| format!(" data-event=\"{}\"", escape(e)))
            .unwrap_or_default();
        let _ = write!(
            s,
            "<table class=\"labperf\" id=\"table-{}{suffix}\"{event}><thead><tr>",
            escape(&t.name)
        );
        for &i in &visible {
            let c = &t.columns[i];
            let _ = write!(
                s,
                "<th data-key=\"{}\">{}</th>",
                escape(&c.key),
                escape(&c.title)
            );
        }
        s.push_str("</tr></thead>\n<tbody>\n");
        let n = t.shown_rows(top);
        let row = |s: &mut String, r: &Vec<Cell>| {
            s.push_str("<tr>");
            for &i in &visible {
                if let Some(c) = r.get(i) {
                    s.push_str(&cell_html(c, t.columns[i].align));
                }
            }
            s.push_str("</tr>\n");
        };
        for r in &t.rows[..n] {
            row(&mut s, r);
        }
        s.push_str("</tbody>");
        if !t.footer.is_empty() {
            s.push_str("<tfoot>");
            for r in &t.footer {
                row(&mut s, r);
            }
            s.push_str("</tfoot>");
        }
        s.push_str("</table>\n");
    }
    s
}

/// What a cell holds, for grouping columns into charts.
fn cell_kind(c: &Cell) -> &'static str {
    match c {
        Cell::Share { .. } => "share",
        Cell::Percent { .. } => "percent",
        Cell::Painted(inner, _) => cell_kind(inner),
        _ => "number",
    }
}

/// A time series: its name and (seconds, value) points.
struct Series {
    name: String,
    points: Vec<(f64, f64)>,
}

/// The charts of a time-series table (unranked, first column `time_s`): one per numeric
/// column, one line per distinct value of its text columns (the event, the thread); one
/// chart per line where their magnitudes differ more than 20 times.
fn charts(t: &Table) -> Vec<String> {
    if t.ranked || t.columns.first().is_none_or(|c| c.key != "time_s") {
        return Vec::new();
    }
    let visible: Vec<usize> = (1..t.columns.len())
        .filter(|&i| !t.hidden.contains(&t.columns[i].key.as_ref()))
        .collect();
    let numeric = numeric_columns(t, &visible);
    let keys: Vec<usize> = visible
        .iter()
        .copied()
        .filter(|i| !numeric.contains(i))
        .collect();
    // A `kind` column says which rows are totals (a stat's last line): not points in time.
    let kind = t.columns.iter().position(|c| c.key == "kind");
    if keys.is_empty() {
        return charts_by_kind(t, &numeric);
    }
    let mut out = Vec::new();
    for &col in &numeric {
        let series = series_of_column(t, col, &keys, kind);
        if series.is_empty() {
            continue;
        }
        column_charts(t, col, series, &mut out);
    }
    out
}

/// A cell's value on a chart's axis.
fn axis_value(c: &Cell) -> Option<f64> {
    c.json().as_f64()
}

/// The columns of `visible` to chart: numbers in every row that has them (a thread id is
/// not one).
fn numeric_columns(t: &Table, visible: &[usize]) -> Vec<usize> {
    visible
        .iter()
        .copied()
        .filter(|&i| t.columns[i].key != "tid")
        .filter(|&i| {
            let mut any = false;
            for r in &t.rows {
                match r.get(i) {
                    Some(Cell::Empty) | None => {}
                    Some(c) if axis_value(c).is_some() => any = true,
                    Some(_) => return false,
                }
            }
            any
        })
        .collect()
}

/// A table without text columns: one line per numeric column; columns of the same kind
/// (TopDown's shares) share a chart.
fn charts_by_kind(t: &Table, numeric: &[usize]) -> Vec<String> {
    let kind_of = |i: usize| {
        t.rows
            .iter()
            .filter_map(|r| r.get(i))
            .find(|c| **c != Cell::Empty)
            .map_or("number", cell_kind)
    };
    let mut kinds: Vec<&str> = numeric.iter().map(|&i| kind_of(i)).collect();
    kinds.dedup();
    let mut out = Vec::new();
    for kind in kinds {
        let series: Vec<Series> = numeric
            .iter()
            .filter(|&&i| kind_of(i) == kind)
            .map(|&i| Series {
                name: t.columns[i].title.clone(),
                points: t
                    .rows
                    .iter()
                    .filter_map(|r| Some((axis_value(r.first()?)?, axis_value(r.get(i)?)?)))
                    .collect(),
            })
            .collect();
        let title = if series.len() == 1 {
            series[0].name.clone()
        } else {
            series
                .iter()
                .map(|s| s.name.as_str())
                .collect::<Vec<_>>()
                .join(", ")
        };
        out.push(chart(&format!("{}-{kind}", t.name), &title, &series));
    }
    out
}

/// Column `col` over time: a series per distinct value of the `keys` columns (totals, by
/// the `kind` column, left out).
fn series_of_column(t: &Table, col: usize, keys: &[usize], kind: Option<usize>) -> Vec<Series> {
    let mut series: Vec<Series> = Vec::new();
    // Each series found by its name (a recording may count 100,000 threads).
    let mut series_of: std::collections::HashMap<String, usize> = Default::default();
    for r in &t.rows {
        if kind.and_then(|k| r.get(k)) == Some(&Cell::text("total")) {
            continue;
        }
        let (Some(x), Some(y)) = (
            r.first().and_then(axis_value),
            r.get(col).and_then(axis_value),
        ) else {
            continue;
        };
        let name = keys
            .iter()
            .filter_map(|&k| r.get(k).map(|c| (k, c)))
            .filter(|(_, c)| **c != Cell::Empty)
            .map(|(k, c)| {
                if t.columns[k].key == "tid" {
                    format!("thread {}", c.table())
                } else {
                    c.table()
                }
            })
            .collect::<Vec<_>>()
            .join(", ");
        match series_of.get(&name) {
            Some(&i) => series[i].points.push((x, y)),
            None => {
                series_of.insert(name.clone(), series.len());
                series.push(Series {
                    name,
                    points: vec![(x, y)],
                });
            }
        }
    }
    series
}

/// The chart of column `col` (its busiest series), or a chart per series where their
/// magnitudes differ more than 20 times.
fn column_charts(t: &Table, col: usize, mut series: Vec<Series>, out: &mut Vec<String>) {
    // The busiest series, when there are too many to tell apart.
    let total = |s: &Series| s.points.iter().map(|p| p.1.abs()).sum::<f64>();
    series.sort_by(|a, b| total(b).total_cmp(&total(a)));
    series.truncate(MAX_SERIES);
    let c = &t.columns[col];
    let id = format!("{}-{}", t.name, c.key);
    // Series of different magnitudes (events' counts) each get their own axis.
    let peak = |s: &Series| s.points.iter().map(|p| p.1).fold(0.0f64, f64::max);
    let (lo, hi) = series
        .iter()
        .map(peak)
        .fold((f64::INFINITY, 0.0f64), |(l, h), p| (l.min(p), h.max(p)));
    if series.len() > 1 && hi > 20.0 * lo {
        for (n, se) in series.iter().enumerate() {
            let title = format!("{} of {}", c.title, se.name);
            out.push(chart(
                &format!("{id}-{n}"),
                &title,
                std::slice::from_ref(se),
            ));
        }
    } else {
        out.push(chart(&id, &c.title, &series));
    }
}

/// A line chart as inline SVG: time on x (s), the value on y from 0, a legend below.
fn chart(id: &str, title: &str, series: &[Series]) -> String {
    let (w, h, left, right, top, bottom) = (820.0, 260.0, 70.0, 20.0, 28.0, 36.0);
    let xs = series.iter().flat_map(|s| s.points.iter().map(|p| p.0));
    let (x0, x1) = xs.fold((f64::INFINITY, f64::NEG_INFINITY), |(a, b), x| {
        (a.min(x), b.max(x))
    });
    let ys = series.iter().flat_map(|s| s.points.iter().map(|p| p.1));
    let y1 = ys.fold(0.0f64, f64::max);
    let y1 = if y1 > 0.0 { y1 } else { 1.0 };
    let span = if x1 > x0 { x1 - x0 } else { 1.0 };
    let px = |x: f64| left + (x - x0) / span * (w - left - right);
    let py = |y: f64| top + (1.0 - y / y1) * (h - top - bottom);
    let legend_h = 16.0 * series.len() as f64;
    let mut s = String::new();
    let _ = write!(
        s,
        "<figure><svg class=\"chart\" id=\"chart-{}\" xmlns=\"http://www.w3.org/2000/svg\" width=\"{w}\" height=\"{}\" viewBox=\"0 0 {w} {}\" role=\"img\" aria-label=\"{} over time\">",
        escape(id),
        h + legend_h,
        h + legend_h,
        escape(title)
    );
    let _ = write!(
        s,
        "<text x=\"{left}\" y=\"18\" font-weight=\"bold\">{} over time</text>",
        escape(title)
    );
    // Axes, with their ends labelled.
    let _ = write!(
        s,
        "<line x1=\"{left}\" y1=\"{top}\" x2=\"{left}\" y2=\"{b}\" stroke=\"#888\"/>\
         <line x1=\"{left}\" y1=\"{b}\" x2=\"{r}\" y2=\"{b}\" stroke=\"#888\"/>\
         <text x=\"{lx}\" y=\"{ty}\" text-anchor=\"end\">{ymax}</text>\
         <text x=\"{lx}\" y=\"{b}\" text-anchor=\"end\">0</text>\
         <text x=\"{left}\" y=\"{tx}\">{x0:.3} s</text>\
         <text x=\"{r}\" y=\"{tx}\" text-anchor=\"end\">{x1:.3} s</text>",
        b = h - bottom,
        r = w - right,
        lx = left - 6.0,
        ty = top + 4.0,
        tx = h - bottom + 16.0,
        ymax = short(y1),
    );
    for (i, se) in series.iter().enumerate() {
        let colour = PALETTE[i % PALETTE.len()];
        let step = se.points.len().div_ceil(MAX_POINTS).max(1);
        let pts: Vec<String> = se
            .points
            .iter()
            .step_by(step)
            .map(|&(x, y)| format!("{:.1},{:.1}", px(x), py(y)))
            .collect();
        let _ = write!(
            s,
            "<polyline class=\"series\" data-series=\"{name}\" fill=\"none\" stroke=\"{colour}\" stroke-width=\"1.5\" points=\"{}\"><title>{name}</title></polyline>",
            pts.join(" "),
            name = escape(&se.name)
        );
        let ly = h + 12.0 + 16.0 * i as f64 - 4.0;
        let _ = write!(
            s,
            "<rect x=\"{left}\" y=\"{}\" width=\"12\" height=\"3\" fill=\"{colour}\"/><text x=\"{}\" y=\"{ly}\">{}</text>",
            ly - 4.0,
            left + 18.0,
            escape(&se.name)
        );
    }
    s.push_str("</svg></figure>\n");
    s
}

/// A number for an axis label: integers whole, fractions with three digits.
fn short(v: f64) -> String {
    if v.fract() == 0.0 && v.abs() < 1e15 {
        format!("{v:.0}")
    } else {
        format!("{v:.3}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::render::table::Column;

    #[test]
    fn text_from_a_recording_cannot_make_markup() {
        assert_eq!(
            escape("<script>alert('x')</script> & \"q\""),
            "&lt;script&gt;alert(&#39;x&#39;)&lt;/script&gt; &amp; &quot;q&quot;"
        );
    }

    #[test]
    fn a_time_series_table_gets_one_chart_per_numeric_column_and_a_line_per_event() {
        let mut t = Table::new(
            "intervals",
            vec![
                Column::right("time_s", "time", 0),
                Column::right("count", "counts", 0),
                Column::left("event", "event", 0),
            ],
        );
        t.ranked = false;
        let row = |time: f64, n: u64, e: &str| {
            vec![
                Cell::Shown {
                    text: format!("{time}"),
                    value: serde_json::json!(time),
                },
                Cell::Int(n),
                Cell::text(e),
            ]
        };
        t.rows = vec![
            row(0.1, 10, "cycles"),
            row(0.1, 5, "instructions"),
            row(0.2, 20, "cycles"),
            row(0.2, 8, "instructions"),
        ];
        let c = charts(&t);
        assert_eq!(c.len(), 1);
        assert!(c[0].contains("id=\"chart-intervals-count\""), "{}", c[0]);
        assert_eq!(c[0].matches("<polyline").count(), 2);
        // cycles: from (0.1, 10) to (0.2, 20), the chart's corners (x from 70 to 800,
        // y from 224 at 0 to 28 at the maximum 20).
        assert!(
            c[0].contains("data-series=\"cycles\" fill=\"none\" stroke=\"#1f77b4\" stroke-width=\"1.5\" points=\"70.0,126.0 800.0,28.0\""),
            "{}",
            c[0]
        );
        // Counts 1000 times apart: a chart each.
        t.rows.push(row(0.3, 9000, "page-faults"));
        let c = charts(&t);
        assert_eq!(c.len(), 3);
        assert!(c[0].contains("counts of page-faults over time"), "{}", c[0]);
        assert!(
            c[2].contains("counts of instructions over time"),
            "{}",
            c[2]
        );
        // A ranked table has no chart.
        t.ranked = true;
        assert!(charts(&t).is_empty());
    }
}
