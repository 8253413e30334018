//! The recordings' facts: what each recording read says of itself (its name, host,
//! architecture and events, what its reader found, how far its call stacks reach), as
//! exports, `report --children` and the HTML page state them.

use crate::record::load::{FileInfo, Source};
use crate::symbolize::quality::Quality;

/// One recording read.
#[derive(Debug, Default)]
pub struct Run {
    /// The file's name without its extension (pprof's `run` label, Parquet's `run`).
    pub name: String,
    /// The header's hostname and architecture ("unknown" without a header).
    pub host: String,
    pub arch: String,
    /// The header's event names, in sample `event` order.
    pub events: Vec<String>,
    pub info: FileInfo,
    /// How far its call stacks reach; `None` when its events take none.
    pub stacks: Option<Quality>,
}

impl Run {
    /// The facts of `src`, read as `info`, its stacks reaching as `stacks` says.
    pub fn of(src: &Source, info: FileInfo, stacks: Option<Quality>) -> Run {
        let h = info.header.as_ref();
        Run {
            name: src
                .name
                .file_stem()
                .map_or("run".into(), |s| s.to_string_lossy().into_owned()),
            host: h.map_or("unknown".into(), |h| h.hostname.clone()),
            arch: h.map_or("unknown".into(), |h| h.arch.name().to_string()),
            events: h.map_or_else(Vec::new, |h| {
                h.events.iter().map(|e| e.name.clone()).collect()
            }),
            info,
            stacks,
        }
    }
}
