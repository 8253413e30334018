//! labperf-import: the host's import layer, perf.data files read into a labperf recording.
//!
//! It owns [`import`]: the records of the perf.data parser (`linux-perf-data`), checked and
//! bounded before they are trusted (`checked`, `records`), and perf's feature sections
//! (`features`), re-encoded as a labperf record file. It may use `labperf-symbolize` and `labperf-record` (re-exported here, so
//! that `crate::symbolize::…` and `crate::files::…` paths resolve) and outside crates; no
//! higher host crate.

pub use labperf_record::{files, fxhash, interrupt, progress, record, text};
pub use labperf_symbolize::symbolize;

pub mod import;
