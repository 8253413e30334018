//! The intervals view: the counts of a `stat` recording, one row per interval, thread and
//! event, scaled for multiplexing as `perf stat` scales them.

use crate::record::load::{self, LoadError};
use crate::render::table::{Cell, Column, Report, Table};
use labperf_common::Record;
use serde_json::{json, Map};

/// Reads a `stat` recording's intervals into the table model.
pub fn build(src: &load::Source) -> Result<Report, LoadError> {
    let mut rows = Vec::new();
    let mut per_thread = false;
    let mut names: Vec<String> = Vec::new();
    let mut intervals = 0u64;
    let info = load::stream_with_header(src, |h, _, r| {
        if names.is_empty() {
            if let Some(h) = h {
                names = h.events.iter().map(|e| e.name.clone()).collect();
            }
        }
        let Record::Interval(i) = r else { return };
        intervals += 1;
        per_thread |= i.tid.is_some();
        for c in &i.counts {
            let event = names
                .get(c.event as usize)
                .cloned()
                .unwrap_or_else(|| format!("event {}", c.event));
            rows.push((i.time, i.tid, i.delta, event, c.clone()));
        }
    })?;
    let mut columns = vec![Column::right("time_s", "time", 12)];
    if per_thread {
        columns.push(Column::right("tid", "thread", 8));
    }
    columns.extend([
        Column::right("count", "counts", 18),
        Column::right("running_pct", "running", 8),
        Column::left("event", "event", 0),
        Column::left("kind", "kind", 0),
        Column::right("value", "raw", 0),
        Column::right("time_enabled", "enabled ns", 0),
        Column::right("time_running", "running ns", 0),
    ]);
    let mut t = Table::new("intervals", columns);
    t.ranked = false;
    // perf stat prints counts, running share and event; the raw numbers are for CSV/JSON.
    t.hidden = vec!["kind", "value", "time_enabled", "time_running"];
    t.rows = rows
        .into_iter()
        .map(|(time, tid, delta, event, c)| {
            let mut r = vec![Cell::Shown {
                text: labperf_common::topdown::seconds(time),
                value: json!(time as f64 / 1e9),
            }];
            if per_thread {
                r.push(tid.map_or(Cell::Empty, |t| Cell::Int(u64::from(t))));
            }
            r.extend([
                Cell::Int(c.scaled()),
                Cell::Percent {
                    value: c.running_bp() as f64 / 100.0,
                    places: 2,
                },
                Cell::Text(event),
                Cell::text(if delta { "delta" } else { "total" }),
                Cell::Int(c.value),
                Cell::Int(c.time_enabled),
                Cell::Int(c.time_running),
            ]);
            r
        })
        .collect();
    let mut summary = Map::new();
    summary.insert("intervals".into(), json!(intervals));
    let none = (intervals == 0).then(|| {
        "note: the file holds no counts (record them with `labperf stat -o FILE -- CMD`)".into()
    });
    Ok(Report {
        heading: vec![format!("# {intervals} intervals")],
        summary,
        tables: vec![t],
        ..Report::of_file("intervals", &info, none)
    })
}
