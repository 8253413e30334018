//! What the export formats say of the recordings a stack table holds: the first recording's header, the event the weights count, and whether they are nanoseconds.

use crate::symbolize::stacks::StackTable;

/// What the formats say of the recordings a [`StackTable`] holds (a trait: `StackTable` is
/// labperf-symbolize's, and a type's inherent methods belong to its own crate).
pub(crate) trait StackFacts {
    fn header(&self) -> Option<&labperf_common::Header>;
    fn event(&self) -> Option<&str>;
    fn weights_are_ns(&self) -> bool;
}

impl StackFacts for StackTable {
    /// The first recording's header, if any.
    fn header(&self) -> Option<&labperf_common::Header> {
        self.runs.first().and_then(|r| r.info.header.as_ref())
    }

    /// The first event with samples (what the weights count), else the first recording's
    /// first event.
    fn event(&self) -> Option<&str> {
        match self.sampled_events().first() {
            Some(e) => Some(self.events.names[e.0 as usize].as_str()),
            None => self
                .runs
                .first()
                .and_then(|r| r.events.first())
                .map(String::as_str),
        }
    }

    /// Whether the weights are nanoseconds (cpu-clock and task-clock periods).
    fn weights_are_ns(&self) -> bool {
        self.event().is_some_and(crate::record::events::is_ns)
    }
}
