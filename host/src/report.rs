//! The plain view: samples aggregated per symbol, per mapped file or per address.

use crate::load::{self, FileInfo, LoadError};
use crate::symbols::{label, Location, Search, Symbolizer};
pub use crate::table::Format;
use crate::table::{Cell, Column, Table};
use serde::Serialize;
use serde_json::json;
use std::collections::HashMap;

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum By {
    Symbol,
    Dso,
    Pc,
}

/// One output row.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct Row {
    pub name: String,
    pub dso: String,
    pub samples: u64,
    pub period: u64,
    /// Share of samples, percent.
    pub percent: f64,
}

/// A finished report.
#[derive(Debug)]
pub struct Report {
    pub total_samples: u64,
    pub total_period: u64,
    pub rows: Vec<Row>,
    pub info: FileInfo,
    pub warnings: Vec<String>,
    pub by: By,
}

/// Reads `path` and aggregates its samples.
pub fn build(src: &load::Source, by: By, search: Search) -> Result<Report, LoadError> {
    // LABPERF_THREADS caps the decoding threads (default: one per CPU).
    let threads = std::env::var("LABPERF_THREADS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get()));
    let load::Counts {
        by_ip,
        others,
        info,
    } = load::sample_counts(src, threads)?;
    // Addresses are resolved once every side-band record (mmap2, fork) is known.
    let mut sym = Symbolizer::new(search);
    sym.recorded_on(info.header.as_ref(), info.header_ext.as_ref());
    for r in others.into_iter().map(load::Side::record) {
        sym.observe(&r);
    }
    let mut keys: Vec<(String, String)> = Vec::new();
    let mut index: HashMap<(String, String), usize> = HashMap::new();
    let mut acc: Vec<(u64, u64)> = Vec::new();
    let (mut total, mut total_period) = (0u64, 0u64);
    for (&(pid, ip), &(n, period)) in &by_ip {
        let Location { dso, sym: s, vaddr } = sym.resolve(pid, ip);
        let key = match by {
            By::Symbol => (label(&dso, s.as_deref(), vaddr), dso.to_string()),
            By::Dso => (dso.to_string(), dso.to_string()),
            By::Pc => (
                format!(
                    "{vaddr:#x}{}",
                    s.map(|n| format!(" <{n}>")).unwrap_or_default()
                ),
                dso.to_string(),
            ),
        };
        let k = *index.entry(key.clone()).or_insert_with(|| {
            keys.push(key);
            acc.push((0, 0));
            keys.len() - 1
        });
        acc[k].0 += n;
        acc[k].1 = acc[k].1.saturating_add(period);
        total += n;
        total_period = total_period.saturating_add(period);
    }
    let mut rows: Vec<Row> = keys
        .into_iter()
        .zip(acc)
        .map(|((name, dso), (samples, period))| Row {
            name,
            dso,
            samples,
            period,
            percent: if total > 0 {
                100.0 * samples as f64 / total as f64
            } else {
                0.0
            },
        })
        .collect();
    rows.sort_by(|a, b| b.samples.cmp(&a.samples).then_with(|| a.name.cmp(&b.name)));
    Ok(Report {
        total_samples: total,
        total_period,
        rows,
        warnings: std::mem::take(&mut sym.warnings),
        info,
        by,
    })
}

impl Report {
    /// The report in the table model.
    pub fn table(self) -> crate::table::Report {
        let what = match self.by {
            By::Symbol => "Symbol",
            By::Dso => "DSO",
            By::Pc => "PC",
        };
        let mut columns = vec![
            Column::right("percent", "Overhead", 8),
            Column::right("samples", "Samples", 9),
            Column::right("period", "Period", 12),
            Column::left("name", what, 40),
        ];
        if self.by != By::Dso {
            columns.push(Column::left("dso", "DSO", 0));
        }
        let mut t = Table::new("functions", columns);
        let by = self.by;
        t.rows = self
            .rows
            .into_iter()
            .map(|r| {
                let mut row = vec![
                    Cell::Percent {
                        value: r.percent,
                        places: 2,
                    },
                    Cell::Int(r.samples),
                    Cell::Int(r.period),
                    Cell::Text(r.name),
                ];
                if by != By::Dso {
                    row.push(Cell::file(&r.dso));
                }
                row
            })
            .collect();
        let mut summary = serde_json::Map::new();
        summary.insert("total_samples".into(), json!(self.total_samples));
        summary.insert("total_period".into(), json!(self.total_period));
        let mut warnings = self.warnings;
        if self.total_samples == 0 {
            warnings.push("note: the file holds no samples (was the workload too short, or the period too long?)".into());
        }
        crate::table::Report {
            heading: vec![format!(
                "# {} samples, total period {}",
                self.total_samples, self.total_period
            )],
            summary,
            tables: vec![t],
            ..crate::table::Report::of_file("plain", &self.info, warnings)
        }
    }
}
