//! labperf-lab: the host's lab layer, the machines recordings come from.
//!
//! It owns [`lab`]: SSH sessions (through jump hosts too), bounded commands and streamed
//! fetches (feature `remote`), the ssh config, known_hosts, hosts files and Ansible
//! inventories (feature `config`), host names, the agent deployed and run, pushed workloads,
//! and the live board. It may use `labperf-symbolize` and `labperf-record` (re-exported here,
//! so that `crate::symbolize::…` and `crate::files::…` paths resolve) and outside crates; no
//! report, import or other host crate. Only the `labperf` binary is above it.

pub use labperf_record::{files, fxhash, interrupt, progress, record, text};
pub use labperf_symbolize::symbolize;

pub mod lab;
