//! [`DeltaState`]: what a records frame carries from record to record, the same in the
//! encoder and the decoder.

use crate::ustack::Stacks;
use alloc::vec::Vec;

/// Delta state shared by the encoder and the decoder; reset at every records frame.
#[derive(Debug, Default, Clone)]
pub(crate) struct DeltaState {
    pub thread: Option<u32>,
    pub event: u32,
    pub cpu: u32,
    pub period: u64,
    pub ip: u64,
    pub time: u64,
    pub addr: u64,
    pub values: Vec<u64>,
    pub stacks: Stacks,
}
