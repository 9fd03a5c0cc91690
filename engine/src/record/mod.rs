//! Per-worker measurements: fixed-size histograms and counters, merged after join.

mod progress;
mod raw;
mod recorder;
mod series;
mod stats;

pub use progress::{InFlightSummary, Slot, SlotSummary, at_quantile, summarize_in_flight, summarize_slots};
pub use raw::RawLog;
pub use recorder::{ErrorClass, Recorder, Timing, TlsInfo, new_latency_histogram, valid_status};
pub use series::{Bucket, MAX_BUCKETS, Series};
pub use stats::Stats;
