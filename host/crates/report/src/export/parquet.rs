//! Parquet tables (the `parquet` crate): a row per sample and a stacks table beside it.

use crate::symbolize::stacks::{SampleRow, StackTable};
use ::parquet::basic::Compression;
use ::parquet::data_type::{ByteArray, ByteArrayType, Int32Type, Int64Type};
use ::parquet::errors::ParquetError;
use ::parquet::file::properties::WriterProperties;
use ::parquet::file::writer::SerializedFileWriter;
use std::io::Write;
use std::sync::Arc;

/// The Parquet tables of a [`StackTable`] (a trait: `StackTable` is labperf-symbolize's, and
/// a type's inherent methods belong to its own crate).
pub trait ToParquet {
    fn parquet(
        &self,
        samples: impl Write + Send,
        stacks: impl Write + Send,
    ) -> Result<(), ParquetError>;
}

impl ToParquet for StackTable {
    /// The Parquet tables of [`parquet_schema`] (needs [`StackTable::samples`]): the samples
    /// to `samples`, the stacks to `stacks`. Snappy-compressed, strings dictionary-encoded.
    fn parquet(
        &self,
        samples: impl Write + Send,
        stacks: impl Write + Send,
    ) -> Result<(), ParquetError> {
        write(self, samples, stacks)
    }
}

/// The Parquet schemas `labperf export --format parquet` writes: `OUT` holds one row per
/// sample, `OUT`'s `.stacks.parquet` sibling one row per frame of each stack.
///
/// Samples (`labperf_sample`): `host`, `arch` and `run` (the recording's file name without
/// extension) say where it came from; `event` is the event's name; `pid`, `tid`; `time`
/// is the sample's wall-clock time (UTC, ns: the recording's clock mapped through the
/// header's start); `weight` is the sample's period (ns for cpu-clock and task-clock,
/// events otherwise); `stack_id` joins the stacks table; `symbol` and `dso` name the
/// sampled (leaf) function, as `labperf report` does.
///
/// Stacks (`labperf_stack`): `stack_id`, `depth` (0 = the leaf, the sampled function;
/// callers follow; the greatest depth is the thread's name, with an empty `dso`), `symbol`,
/// `dso`.
///
/// ```sql
/// SELECT host, symbol, sum(weight) FROM 'x.parquet' GROUP BY ALL ORDER BY 3 DESC;
/// ```
pub fn parquet_schema() -> (&'static str, &'static str) {
    (SAMPLES, STACKS)
}

pub const SAMPLES: &str = "message labperf_sample {
  required binary host (STRING);
  required binary arch (STRING);
  required binary run (STRING);
  required binary event (STRING);
  required int32 pid (INTEGER(32,false));
  required int32 tid (INTEGER(32,false));
  required int64 time (TIMESTAMP(NANOS,true));
  required int64 weight;
  required int32 stack_id;
  required binary symbol (STRING);
  required binary dso (STRING);
}";

pub const STACKS: &str = "message labperf_stack {
  required int32 stack_id;
  required int32 depth;
  required binary symbol (STRING);
  required binary dso (STRING);
}";

/// Rows per row group: bounded memory while writing, large enough to compress well.
const GROUP: usize = 1 << 17;

fn props() -> Arc<WriterProperties> {
    Arc::new(
        WriterProperties::builder()
            .set_compression(Compression::SNAPPY)
            .set_created_by(concat!("labperf ", env!("CARGO_PKG_VERSION")).into())
            .build(),
    )
}

/// One column's values for a row group.
enum Values {
    Bytes(Vec<ByteArray>),
    I32(Vec<i32>),
    I64(Vec<i64>),
}

fn write_group<W: Write + Send>(
    w: &mut SerializedFileWriter<W>,
    columns: Vec<Values>,
) -> Result<(), ParquetError> {
    let mut rg = w.next_row_group()?;
    let mut columns = columns.into_iter();
    while let Some(mut c) = rg.next_column()? {
        match columns.next() {
            Some(Values::Bytes(v)) => {
                c.typed::<ByteArrayType>().write_batch(&v, None, None)?;
            }
            Some(Values::I32(v)) => {
                c.typed::<Int32Type>().write_batch(&v, None, None)?;
            }
            Some(Values::I64(v)) => {
                c.typed::<Int64Type>().write_batch(&v, None, None)?;
            }
            None => return Err(ParquetError::General("a column without values".into())),
        }
        c.close()?;
    }
    rg.close()?;
    Ok(())
}

pub fn write(
    st: &StackTable,
    samples: impl Write + Send,
    stacks: impl Write + Send,
) -> Result<(), ParquetError> {
    let text = |s: &str| ByteArray::from(s.as_bytes().to_vec());
    // Each distinct string once (ByteArray clones share it).
    let runs: Vec<[ByteArray; 3]> = st
        .runs
        .iter()
        .map(|r| [text(&r.host), text(&r.arch), text(&r.name)])
        .collect();
    // Each sample's event by name, as reports name it (joined across recordings).
    let events: Vec<ByteArray> = st.events.names.iter().map(|e| text(e)).collect();
    let unknown_event = text(crate::record::events::UNKNOWN);
    let names: Vec<(ByteArray, ByteArray)> = st
        .frames
        .iter()
        .map(|f| (text(&f.name), text(&f.dso)))
        .collect();
    let schema = Arc::new(parquet::schema::parser::parse_message_type(SAMPLES)?);
    let mut w = SerializedFileWriter::new(samples, schema, props())?;
    // The sampled function: the innermost frame.
    let leaf = |s: &SampleRow| -> usize {
        st.path(&st.stacks[s.stack as usize])
            .last()
            .map_or(0, |&f| f as usize)
    };
    let th = |s: &SampleRow| st.threads[s.thread as usize];
    for chunk in st.samples.chunks(GROUP) {
        let bytes =
            |f: &dyn Fn(&SampleRow) -> ByteArray| Values::Bytes(chunk.iter().map(f).collect());
        let columns = vec![
            bytes(&|s| runs[th(s).run as usize][0].clone()),
            bytes(&|s| runs[th(s).run as usize][1].clone()),
            bytes(&|s| runs[th(s).run as usize][2].clone()),
            bytes(&|s| {
                events
                    .get(s.event as usize)
                    .unwrap_or(&unknown_event)
                    .clone()
            }),
            Values::I32(chunk.iter().map(|s| th(s).pid as i32).collect()),
            Values::I32(chunk.iter().map(|s| th(s).tid as i32).collect()),
            Values::I64(
                chunk
                    .iter()
                    .map(|s| st.wall_ns(s).min(i64::MAX as u64) as i64)
                    .collect(),
            ),
            Values::I64(
                chunk
                    .iter()
                    .map(|s| s.period.min(i64::MAX as u64) as i64)
                    .collect(),
            ),
            Values::I32(chunk.iter().map(|s| s.stack as i32).collect()),
            bytes(&|s| names[leaf(s)].0.clone()),
            bytes(&|s| names[leaf(s)].1.clone()),
        ];
        write_group(&mut w, columns)?;
    }
    w.close()?;
    // The stacks table, leaf (depth 0) first, a row group at a time.
    let schema = Arc::new(parquet::schema::parser::parse_message_type(STACKS)?);
    let mut w = SerializedFileWriter::new(stacks, schema, props())?;
    let mut rows: Vec<(i32, i32, usize)> = Vec::with_capacity(GROUP);
    let flush = |w: &mut SerializedFileWriter<_>, rows: &mut Vec<(i32, i32, usize)>| {
        let columns = vec![
            Values::I32(rows.iter().map(|r| r.0).collect()),
            Values::I32(rows.iter().map(|r| r.1).collect()),
            Values::Bytes(rows.iter().map(|r| names[r.2].0.clone()).collect()),
            Values::Bytes(rows.iter().map(|r| names[r.2].1.clone()).collect()),
        ];
        rows.clear();
        write_group(w, columns)
    };
    for (id, s) in st.stacks.iter().enumerate() {
        for (depth, &f) in st.path(s).iter().rev().enumerate() {
            rows.push((id as i32, depth as i32, f as usize));
            if rows.len() == GROUP {
                flush(&mut w, &mut rows)?;
            }
        }
    }
    if !rows.is_empty() {
        flush(&mut w, &mut rows)?;
    }
    w.close()?;
    Ok(())
}
