//! Per-symbol / per-DSO / per-PC aggregation of samples and its table, CSV and JSON output.

use crate::load::{self, FileInfo, LoadError};
use crate::symbols::{Location, Search, Symbolizer};
use serde::Serialize;
use std::collections::HashMap;
use std::fmt::Write;

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum By {
    Symbol,
    Dso,
    Pc,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Format {
    Table,
    Csv,
    Json,
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
#[derive(Debug, Serialize)]
pub struct Report {
    pub total_samples: u64,
    pub total_period: u64,
    pub rows: Vec<Row>,
    #[serde(skip)]
    pub info: FileInfo,
    pub warnings: Vec<String>,
}

/// The file name of a DSO path.
pub(crate) fn short(dso: &str) -> &str {
    dso.rsplit('/').next().unwrap_or(dso)
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
    sym.recorded_on(info.header.as_ref());
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
            By::Symbol => (
                s.map(|n| n.to_string())
                    .unwrap_or_else(|| format!("{}+{vaddr:#x}", short(&dso))),
                dso.to_string(),
            ),
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
    })
}

/// A CSV field, quoted when it holds a comma, quote or newline.
pub(crate) fn csv_field(s: &str) -> String {
    // Control characters are escaped here too: CSV lands on terminals as often as in files.
    let s = &*crate::text::show(s);
    if s.contains([',', '"', '\n']) {
        format!("\"{}\"", s.replace('"', "\"\""))
    } else {
        s.to_string()
    }
}

impl Report {
    /// Renders the top `top` rows (0 = all).
    pub fn render(&self, format: Format, by: By, top: usize) -> String {
        let rows = if top == 0 {
            &self.rows[..]
        } else {
            &self.rows[..top.min(self.rows.len())]
        };
        let mut s = String::new();
        match format {
            Format::Table => {
                let what = match by {
                    By::Symbol => "Symbol",
                    By::Dso => "DSO",
                    By::Pc => "PC",
                };
                let _ = writeln!(
                    s,
                    "# {} samples, total period {}",
                    self.total_samples, self.total_period
                );
                let _ = writeln!(
                    s,
                    "{:>8}  {:>9}  {:<40}  {}",
                    "Overhead",
                    "Samples",
                    what,
                    if by == By::Dso { "" } else { "DSO" }
                );
                for r in rows {
                    let dso = if by == By::Dso { "" } else { short(&r.dso) };
                    let _ = writeln!(
                        s,
                        "{:>7.2}%  {:>9}  {:<40}  {}",
                        r.percent,
                        r.samples,
                        crate::text::show(&r.name),
                        crate::text::show(dso)
                    );
                }
            }
            Format::Csv => {
                s.push_str("name,dso,samples,period,percent\n");
                for r in rows {
                    let _ = writeln!(
                        s,
                        "{},{},{},{},{:.4}",
                        csv_field(&r.name),
                        csv_field(&r.dso),
                        r.samples,
                        r.period,
                        r.percent
                    );
                }
            }
            Format::Json => {
                #[derive(Serialize)]
                struct J<'a> {
                    total_samples: u64,
                    total_period: u64,
                    rows: &'a [Row],
                    warnings: &'a [String],
                    damaged: bool,
                }
                s = serde_json::to_string_pretty(&J {
                    total_samples: self.total_samples,
                    total_period: self.total_period,
                    rows,
                    warnings: &self.warnings,
                    damaged: !self.info.losses.is_clean(),
                })
                .expect("rows serialize");
                s.push('\n');
            }
        }
        s
    }
}
