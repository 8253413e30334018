//! The intervals view: the counts of a `stat` recording, one row per interval, thread and
//! event, scaled for multiplexing as `perf stat` scales them; the whole run's totals in a
//! table of their own, titled as such (not one more interval); a file counted without
//! `-I` shows that table alone.

use crate::record::load::{self, LoadError};
use crate::render::table::{Cell, Column, Report, Table};
use labperf_common::{Count, Record};
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
        // The whole run's totals are no interval.
        intervals += u64::from(i.delta);
        per_thread |= i.tid.is_some();
        for c in &i.counts {
            let event = names
                .get(c.event as usize)
                .cloned()
                .unwrap_or_else(|| format!("event {}", c.event));
            rows.push((i.time, i.tid, i.delta, event, c.clone()));
        }
    })?;
    let columns = |first: Column| {
        let mut c = vec![first];
        if per_thread {
            c.push(Column::right("tid", "thread", 8));
        }
        c.extend(more_columns());
        c
    };
    let row = |(time, tid, delta, event, c): (u64, Option<u32>, bool, String, Count)| {
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
    };
    let (deltas, totals): (Vec<_>, Vec<_>) = rows.into_iter().partition(|r| r.2);
    let mut t = Table::new("intervals", columns(Column::right("time_s", "time", 12)));
    t.ranked = false;
    // perf stat prints counts, running share and event; the raw numbers are for CSV/JSON.
    t.hidden = vec!["kind", "value", "time_enabled", "time_running"];
    t.rows = deltas.into_iter().map(row).collect();
    // A file recorded without -I holds the totals only: no empty table of intervals.
    let only_totals = intervals == 0 && !totals.is_empty();
    let mut tables = if only_totals { Vec::new() } else { vec![t] };
    if !totals.is_empty() {
        // Its time column is the run's end ("end_s"): no chart draws it as an interval.
        let mut t = Table::new("total", columns(Column::right("end_s", "end", 12)));
        t.ranked = false;
        t.title = Some("# total of the whole run".into());
        t.hidden = vec!["kind", "value", "time_enabled", "time_running"];
        t.rows = totals.into_iter().map(row).collect();
        tables.push(t);
    }
    let mut summary = Map::new();
    summary.insert("intervals".into(), json!(intervals));
    let none = (intervals == 0 && !only_totals).then(|| {
        "note: the file holds no counts (record them with `labperf stat -o FILE -- CMD`)".into()
    });
    let heading = match only_totals {
        true => "# the whole run's totals (counted without -I: no intervals)".into(),
        false => format!("# {intervals} intervals"),
    };
    Ok(Report {
        heading: vec![heading],
        summary,
        tables,
        ..Report::of_file("intervals", &info, none)
    })
}

/// The columns after the time and thread: counts, share, event, then the raw numbers.
fn more_columns() -> [Column; 7] {
    [
        Column::right("count", "counts", 18),
        Column::right("running_pct", "running", 8),
        Column::left("event", "event", 0),
        Column::left("kind", "kind", 0),
        Column::right("value", "raw", 0),
        Column::right("time_enabled", "enabled ns", 0),
        Column::right("time_running", "running ns", 0),
    ]
}
