//! Per-worker measurements: fixed-size histograms and counters, merged after join.

mod recorder;
mod series;
mod stats;

pub use recorder::{ErrorClass, Recorder, Timing, TlsInfo, new_latency_histogram};
pub use series::{Second, Series};
pub use stats::Stats;
