//! Lab machines: SSH (through jump hosts too), ssh_config, known_hosts, hosts files, the remote flow (deploy, fetch), pushed workloads and the live board.

pub mod board;
#[cfg(feature = "remote")]
pub mod deploy;
#[cfg(feature = "config")]
pub mod hosts;
#[cfg(feature = "remote")]
pub mod jump;
#[cfg(feature = "remote")]
pub mod known_hosts;
pub mod names;
#[cfg(feature = "remote")]
pub mod push;
#[cfg(feature = "remote")]
pub mod remote;
#[cfg(feature = "config")]
pub mod ssh_config;
