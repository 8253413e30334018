//! Alpha ProfileMe summaries: `report --profileme` (DCPI-style, by symbol or by PC, one
//! table per PCTR_CTL[SL1]) and `report --mem` (DTB hits and misses by symbol and by
//! data address, loads, stores and prefetches apart). The per-sample rules live in
//! `labperf_common::profileme`.

use crate::record::load::{self, FileInfo, LoadError};
use crate::render::table::{Cell, Column, Table};
use crate::symbolize::symbols::{label, place, Search, Symbolizer};
use labperf_common::profileme::{data_src, Payload, Skip, Trap, PCTR1_NAMES};
use labperf_common::{Header, Record};
use serde::Serialize;
use serde_json::{json, Map};
use std::collections::{BTreeMap, HashMap};

/// Samples whose raw data was not taken as ProfileMe status, by reason.
#[derive(Debug, Default, Clone, Copy, Serialize, PartialEq, Eq)]
pub struct Skipped {
    /// No raw data, or fewer than 28 bytes.
    pub short: u64,
    /// Payload version below 1.
    pub version: u64,
    /// Raw data of an event that is not the cpu PMU's (a tracepoint, another PMU).
    pub not_cpu_pmu: u64,
}

impl Skipped {
    pub fn total(&self) -> u64 {
        self.short + self.version + self.not_cpu_pmu
    }
    pub fn add(&mut self, s: Skip) {
        match s {
            Skip::Short => self.short += 1,
            Skip::Version => self.version += 1,
            Skip::NotCpuPmu => self.not_cpu_pmu += 1,
        }
    }
}

/// The perf_event_attr type of each event of a recording (index = sample's event).
fn event_types(h: Option<&Header>) -> Vec<u32> {
    h.map(|h| h.events.iter().map(|e| e.attr.type_).collect())
        .unwrap_or_default()
}

/// Parses a sample's payload, by its event's attr type (unknown event: not the cpu PMU).
pub fn payload(types: &[u32], s: &labperf_common::Sample) -> Result<Payload, Skip> {
    let t = types.get(s.event as usize).copied().unwrap_or(u32::MAX);
    Payload::parse(t, s.raw.as_deref())
}

/// One `report --profileme` row.
#[derive(Debug, Clone, Default, Serialize, PartialEq)]
pub struct PmRow {
    pub location: String,
    pub dso: String,
    pub symbol: Option<String>,
    /// With --pc: the instruction (PMPC & ~3), or for PALcode the PAL offset.
    pub pc: Option<String>,
    pub samples: u64,
    pub killed: u64,
    pub invalid: u64,
    pub mispredict: u64,
    pub taken: u64,
    pub stalled: u64,
    pub pctr1_sum: u64,
    pub killed_pct: f64,
    pub invalid_pct: f64,
    pub mispr_pct: f64,
    pub taken_pct: f64,
    pub stall_pct: f64,
    pub pctr1_mean: f64,
    /// Trap counts by short name, busiest first in the table.
    pub traps: BTreeMap<String, u64>,
}

/// The rows of one PCTR_CTL[SL1] value.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct PmTable {
    pub sl1: u8,
    /// What PCTR1 counted in these samples.
    pub pctr1_counts: &'static str,
    pub samples: u64,
    pub rows: Vec<PmRow>,
}

/// A finished `report --profileme`.
#[derive(Debug, Serialize)]
pub struct PmReport {
    pub total: u64,
    pub skipped: Skipped,
    pub skipped_total: u64,
    pub by_pc: bool,
    pub tables: Vec<PmTable>,
    #[serde(skip)]
    pub info: FileInfo,
    pub warnings: Vec<String>,
}

fn pct(n: u64, d: u64) -> f64 {
    if d == 0 {
        0.0
    } else {
        100.0 * n as f64 / d as f64
    }
}

struct Pending {
    pid: u32,
    ip: u64,
    event: u32,
    raw: Option<Vec<u8>>,
}

/// Reads `path` and summarises its ProfileMe samples.
pub fn build(src: &load::Source, by_pc: bool, search: Search) -> Result<PmReport, LoadError> {
    let mut sym = Symbolizer::new(search);
    let mut pending = Vec::new();
    let info = load::stream(src, |r| match r {
        Record::Sample(s) => pending.push(Pending {
            pid: s.pid,
            ip: s.ip,
            event: s.event,
            raw: s.raw.clone(),
        }),
        other => sym.observe(other),
    })?;
    sym.recorded_on(src, info.header.as_ref(), info.header_ext.as_ref());
    // Which events are the cpu PMU's is in the header, known once the file is read.
    let types = event_types(info.header.as_ref());
    let mut skipped = Skipped::default();
    let mut warnings = std::mem::take(&mut sym.warnings);
    if let Some(h) = &info.header {
        if h.arch != labperf_common::Arch::Alpha {
            warnings.push(format!(
                "this recording is from {}, not Alpha: ProfileMe status comes only from an Alpha EV67 or later",
                h.arch.name()
            ));
        }
    }
    let mut tables: BTreeMap<u8, (HashMap<String, usize>, Vec<PmRow>)> = BTreeMap::new();
    for Pending {
        pid,
        ip,
        event,
        raw,
    } in pending
    {
        let t = types.get(event as usize).copied().unwrap_or(u32::MAX);
        let p = match Payload::parse(t, raw.as_deref()) {
            Ok(p) => p,
            Err(e) => {
                skipped.add(e);
                continue;
            }
        };
        let loc = sym.resolve(pid, ip);
        let symbol = loc.sym.as_deref().map(str::to_string);
        let (key, pc) = if by_pc {
            if p.is_pal() {
                let k = format!("PAL+{:#x}", p.pal_offset());
                (k.clone(), Some(k))
            } else {
                let pc = format!("{:#018x}", p.pmpc & !3);
                let what = label(&loc.dso, symbol.as_deref(), loc.vaddr);
                (format!("{pc} {what}"), Some(pc))
            }
        } else {
            (place(&loc.dso, symbol.as_deref(), loc.vaddr), None)
        };
        let (index, rows) = tables.entry(p.sl1() as u8).or_default();
        let i = *index.entry(key.clone()).or_insert_with(|| {
            rows.push(PmRow {
                location: key,
                dso: loc.dso.to_string(),
                symbol,
                pc,
                ..Default::default()
            });
            rows.len() - 1
        });
        let r = &mut rows[i];
        let t = p.tally();
        r.samples += 1;
        r.killed += t.killed as u64;
        r.invalid += t.invalid as u64;
        r.mispredict += t.mispredict as u64;
        r.taken += t.taken as u64;
        r.stalled += t.stalled as u64;
        r.pctr1_sum = r.pctr1_sum.saturating_add(t.pctr1);
        if let Some(trap) = t.trap {
            *r.traps
                .entry(Trap::short_name(trap).to_string())
                .or_default() += 1;
        }
    }
    let mut total = 0;
    let tables = tables
        .into_iter()
        .map(|(sl1, (_, mut rows))| {
            for r in &mut rows {
                r.killed_pct = pct(r.killed, r.samples);
                r.invalid_pct = pct(r.invalid, r.samples);
                r.mispr_pct = pct(r.mispredict, r.samples);
                r.taken_pct = pct(r.taken, r.samples);
                r.stall_pct = pct(r.stalled, r.samples);
                r.pctr1_mean = r.pctr1_sum as f64 / r.samples as f64;
            }
            rows.sort_by(|a, b| {
                b.samples
                    .cmp(&a.samples)
                    .then_with(|| a.location.cmp(&b.location))
            });
            let samples = rows.iter().map(|r| r.samples).sum();
            total += samples;
            PmTable {
                sl1,
                pctr1_counts: PCTR1_NAMES[sl1 as usize & 3],
                samples,
                rows,
            }
        })
        .collect();
    Ok(PmReport {
        total,
        skipped,
        skipped_total: skipped.total(),
        by_pc,
        tables,
        info,
        warnings,
    })
}

fn traps_text(t: &BTreeMap<String, u64>) -> String {
    let mut v: Vec<_> = t.iter().collect();
    v.sort_by(|a, b| b.1.cmp(a.1).then_with(|| a.0.cmp(b.0)));
    v.iter()
        .map(|(k, n)| format!("{k}={n}"))
        .collect::<Vec<_>>()
        .join(" ")
}

fn pct_cell(value: f64) -> Cell {
    Cell::Float { value, places: 1 }
}

impl PmReport {
    /// The report in the table model: one table per PCTR_CTL[SL1] value.
    pub fn table(self) -> crate::render::table::Report {
        let mut tables = Vec::new();
        for t in self.tables {
            let mut columns = vec![
                Column::right("samples", "samples", 8),
                Column::right("killed_pct", "killed%", 7).tight_gap(),
                Column::right("invalid_pct", "invalid%", 8).tight_gap(),
                Column::right("mispr_pct", "mispr%", 6).tight_gap(),
                Column::right("taken_pct", "taken%", 7).tight_gap(),
                Column::right("stall_pct", "stall%", 6).tight_gap(),
                Column::right("pctr1_mean", "pctr1", 7).tight_gap(),
                Column::left("location", "location", 40),
            ];
            if self.by_pc {
                columns.push(Column::left("pc", "pc", 0).tight_gap());
            }
            columns.extend([
                Column::left("symbol", "symbol", 0).tight_gap(),
                Column::left("dso", "dso", 0).tight_gap(),
                Column::left("traps", "traps", 0).tight_gap(),
            ]);
            // Symbol, DSO and PC are in the location already: the text table leaves them out.
            let mut table = Table::new(format!("sl1_{}", t.sl1), columns);
            table.title = Some(format!("pctr1 counts {}:", t.pctr1_counts));
            table.summary.insert("sl1".into(), json!(t.sl1));
            table
                .summary
                .insert("pctr1_counts".into(), json!(t.pctr1_counts));
            table.summary.insert("samples".into(), json!(t.samples));
            table.hidden = if self.by_pc {
                vec!["pc", "symbol", "dso"]
            } else {
                vec!["symbol", "dso"]
            };
            let by_pc = self.by_pc;
            table.rows = t
                .rows
                .into_iter()
                .map(|r| {
                    let mut row = vec![
                        Cell::Int(r.samples),
                        pct_cell(r.killed_pct),
                        pct_cell(r.invalid_pct),
                        pct_cell(r.mispr_pct),
                        pct_cell(r.taken_pct),
                        pct_cell(r.stall_pct),
                        pct_cell(r.pctr1_mean),
                        Cell::Text(r.location),
                    ];
                    if by_pc {
                        row.push(r.pc.map_or(Cell::Empty, Cell::Text));
                    }
                    row.extend([
                        r.symbol.map_or(Cell::Empty, Cell::Text),
                        Cell::Text(r.dso),
                        Cell::Shown {
                            text: crate::text::show(&traps_text(&r.traps)).into_owned(),
                            value: json!(r.traps),
                        },
                    ]);
                    row
                })
                .collect();
            tables.push(table);
        }
        let mut summary = Map::new();
        summary.insert("total".into(), json!(self.total));
        summary.insert("skipped".into(), json!(self.skipped));
        summary.insert("skipped_total".into(), json!(self.skipped_total));
        summary.insert("by_pc".into(), json!(self.by_pc));
        crate::render::table::Report {
            heading: vec![format!(
                "{} ProfileMe samples, {} without ProfileMe data ({} short or without raw data, {} of version 0, {} not from the cpu PMU)",
                self.total,
                self.skipped_total,
                self.skipped.short,
                self.skipped.version,
                self.skipped.not_cpu_pmu
            )],
            summary,
            tables,
            ..crate::render::table::Report::of_file("profileme", &self.info, self.warnings)
        }
    }
}

/// One `report --mem` row: DTB hits and misses of one operation at one place.
#[derive(Debug, Clone, Default, Serialize, PartialEq)]
pub struct MemRow {
    pub op: &'static str,
    /// `dso symbol` (by symbol) or the data address (by address).
    pub location: String,
    pub hits: u64,
    pub misses: u64,
    pub miss_pct: f64,
}

/// A finished `report --mem`.
#[derive(Debug, Serialize)]
pub struct MemReport {
    pub samples: u64,
    pub loads: u64,
    pub stores: u64,
    pub prefetches: u64,
    /// Samples without a data source naming a load, store or prefetch with a DTB result.
    pub without_data_source: u64,
    pub by_symbol: Vec<MemRow>,
    pub by_address: Vec<MemRow>,
    #[serde(skip)]
    pub info: FileInfo,
    pub warnings: Vec<String>,
}

struct MemPending {
    pid: u32,
    ip: u64,
    addr: Option<u64>,
    op: data_src::Op,
    hit: bool,
}

fn mem_rows(m: HashMap<(data_src::Op, String), (u64, u64)>) -> Vec<MemRow> {
    let mut v: Vec<_> = m.into_iter().collect();
    v.sort_by(|a, b| {
        a.0 .0.cmp(&b.0 .0).then_with(|| {
            (b.1 .0 + b.1 .1)
                .cmp(&(a.1 .0 + a.1 .1))
                .then_with(|| a.0 .1.cmp(&b.0 .1))
        })
    });
    v.into_iter()
        .map(|((op, location), (hits, misses))| MemRow {
            op: op.name(),
            location,
            hits,
            misses,
            miss_pct: pct(misses, hits + misses),
        })
        .collect()
}

/// Reads `path` and counts DTB hits and misses from its samples' data sources.
pub fn build_mem(src: &load::Source, search: Search) -> Result<MemReport, LoadError> {
    let mut sym = Symbolizer::new(search);
    let mut pending = Vec::new();
    let (mut samples, mut without) = (0u64, 0u64);
    let info = load::stream(src, |r| match r {
        Record::Sample(s) => {
            samples += 1;
            let d = s.data_src.unwrap_or(0);
            match (data_src::op(d), data_src::dtb_hit(d)) {
                (Some(op), Some(hit)) => pending.push(MemPending {
                    pid: s.pid,
                    ip: s.ip,
                    addr: s.addr,
                    op,
                    hit,
                }),
                _ => without += 1,
            }
        }
        other => sym.observe(other),
    })?;
    sym.recorded_on(src, info.header.as_ref(), info.header_ext.as_ref());
    let mut by_sym: HashMap<(data_src::Op, String), (u64, u64)> = HashMap::new();
    let mut by_addr: HashMap<(data_src::Op, String), (u64, u64)> = HashMap::new();
    let (mut loads, mut stores, mut prefetches) = (0, 0, 0);
    for p in pending {
        match p.op {
            data_src::Op::Load => loads += 1,
            data_src::Op::Store => stores += 1,
            data_src::Op::Prefetch => prefetches += 1,
        }
        let loc = sym.resolve(p.pid, p.ip);
        let key = place(&loc.dso, loc.sym.as_deref(), loc.vaddr);
        let e = by_sym.entry((p.op, key)).or_default();
        let e2 = by_addr
            .entry((
                p.op,
                p.addr
                    .map(|a| format!("{a:#018x}"))
                    .unwrap_or_else(|| "[no address]".into()),
            ))
            .or_default();
        if p.hit {
            e.0 += 1;
            e2.0 += 1;
        } else {
            e.1 += 1;
            e2.1 += 1;
        }
    }
    Ok(MemReport {
        samples,
        loads,
        stores,
        prefetches,
        without_data_source: without,
        by_symbol: mem_rows(by_sym),
        by_address: mem_rows(by_addr),
        warnings: std::mem::take(&mut sym.warnings),
        info,
    })
}

/// An operation's name in the plural (table names and titles).
fn plural(op: data_src::Op) -> &'static str {
    match op {
        data_src::Op::Load => "loads",
        data_src::Op::Store => "stores",
        data_src::Op::Prefetch => "prefetches",
    }
}

impl MemReport {
    /// The report in the table model: a table per operation, by symbol and by data address.
    pub fn table(self) -> crate::render::table::Report {
        let mut tables = Vec::new();
        for (by, what, rows) in [
            ("symbol", "symbol", self.by_symbol),
            ("address", "data address", self.by_address),
        ] {
            for op in [
                data_src::Op::Load,
                data_src::Op::Store,
                data_src::Op::Prefetch,
            ] {
                let rows: Vec<Vec<Cell>> = rows
                    .iter()
                    .filter(|r| r.op == op.name())
                    .map(|r| {
                        vec![
                            Cell::text(r.op),
                            Cell::Int(r.hits),
                            Cell::Int(r.misses),
                            pct_cell(r.miss_pct),
                            Cell::Text(r.location.clone()),
                        ]
                    })
                    .collect();
                if rows.is_empty() {
                    continue;
                }
                let mut t = Table::new(
                    format!("{}_by_{by}", plural(op)),
                    vec![
                        Column::left("op", "op", 9),
                        Column::right("hits", "hits", 9).tight_gap(),
                        Column::right("misses", "misses", 9).tight_gap(),
                        Column::right("miss_pct", "miss%", 6).tight_gap(),
                        Column::left("location", "location", 0),
                    ],
                );
                t.title = Some(format!("DTB hits and misses of {} by {what}:", plural(op)));
                t.rows = rows;
                tables.push(t);
            }
        }
        let mut summary = Map::new();
        summary.insert("samples".into(), json!(self.samples));
        summary.insert("loads".into(), json!(self.loads));
        summary.insert("stores".into(), json!(self.stores));
        summary.insert("prefetches".into(), json!(self.prefetches));
        summary.insert(
            "without_data_source".into(),
            json!(self.without_data_source),
        );
        crate::render::table::Report {
            heading: vec![format!(
                "# {} samples: {} loads, {} stores, {} prefetches with a DTB result; {} without one",
                self.samples, self.loads, self.stores, self.prefetches, self.without_data_source
            )],
            summary,
            tables,
            ..crate::render::table::Report::of_file("mem", &self.info, self.warnings)
        }
    }
}
