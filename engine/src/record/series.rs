//! The per-second time series: counts and a small latency histogram per second.

use std::time::Instant;

use hdrhistogram::Histogram;

/// One second of the run.
#[derive(Clone)]
pub struct Second {
    pub completed: u64,
    pub errors: u64,
    pub bytes: u64,
    /// Corrected latency, 2 significant figures (small: a few KiB).
    pub latency: Histogram<u32>,
}

impl Second {
    fn new() -> Second {
        Second { completed: 0, errors: 0, bytes: 0, latency: Histogram::new(2).expect("valid precision") }
    }

    /// Record a latency, growing the histogram as needed (`saturating_record`
    /// would clamp to its current, tiny range instead).
    #[inline]
    pub fn record(&mut self, us: u64) {
        if self.latency.record(us).is_err() {
            self.latency.saturating_record(us);
        }
    }
}

/// Seconds since `origin`, indexed by whole seconds.
pub struct Series {
    origin: Instant,
    seconds: Vec<Second>,
}

impl Series {
    pub fn new(origin: Instant) -> Series {
        Series { origin, seconds: Vec::new() }
    }

    /// The bucket of the second containing `at` (times before origin go to second 0).
    #[inline]
    pub fn at(&mut self, at: Instant) -> &mut Second {
        let index = at.saturating_duration_since(self.origin).as_secs() as usize;
        if index >= self.seconds.len() {
            self.seconds.resize_with(index + 1, Second::new);
        }
        &mut self.seconds[index]
    }

    pub fn seconds(&self) -> &[Second] {
        &self.seconds
    }

    /// Add another worker's series second by second (same origin assumed).
    pub fn merge(&mut self, other: &Series) {
        if other.seconds.len() > self.seconds.len() {
            self.seconds.resize_with(other.seconds.len(), Second::new);
        }
        for (a, b) in self.seconds.iter_mut().zip(&other.seconds) {
            a.completed += b.completed;
            a.errors += b.errors;
            a.bytes += b.bytes;
            a.latency.add(&b.latency).expect("auto-resizing histogram");
        }
    }
}
