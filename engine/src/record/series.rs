//! The time series: counts and a small latency histogram per bucket of time.
//!
//! Buckets are one second wide until the run has [`MAX_BUCKETS`] of them;
//! then neighbours merge pairwise and the width doubles (2 s, 4 s, …), so the
//! series never holds more than [`MAX_BUCKETS`] buckets whatever the run length.

use std::time::Instant;

use hdrhistogram::Histogram;

/// The most buckets a series holds (an hour of one-second buckets).
pub const MAX_BUCKETS: usize = 3600;

/// One bucket of the run.
#[derive(Clone)]
pub struct Bucket {
    pub completed: u64,
    pub errors: u64,
    pub bytes: u64,
    /// The completed requests' corrected latencies added up, exact (µs): the bucket's
    /// mean, which its 2-figure histogram only approximates.
    pub latency_sum_us: u64,
    /// Corrected latency, 2 significant figures (small: a few KiB).
    pub latency: Histogram<u32>,
}

impl Bucket {
    fn new() -> Bucket {
        Bucket { completed: 0, errors: 0, bytes: 0, latency_sum_us: 0, latency: Histogram::new(2).expect("valid precision") }
    }

    /// Record a latency, growing the histogram as needed (`saturating_record`
    /// would clamp to its current, tiny range instead).
    #[inline]
    pub fn record(&mut self, us: u64) {
        self.latency_sum_us = self.latency_sum_us.saturating_add(us);
        if self.latency.record(us).is_err() {
            self.latency.saturating_record(us);
        }
    }

    fn add(&mut self, other: &Bucket) {
        self.completed += other.completed;
        self.errors += other.errors;
        self.bytes += other.bytes;
        self.latency_sum_us = self.latency_sum_us.saturating_add(other.latency_sum_us);
        self.latency.add(&other.latency).expect("auto-resizing histogram");
    }
}

/// Buckets of `width_s` seconds since `origin`.
pub struct Series {
    origin: Instant,
    width_s: u64,
    buckets: Vec<Bucket>,
}

impl Series {
    pub fn new(origin: Instant) -> Series {
        Series { origin, width_s: 1, buckets: Vec::new() }
    }

    /// The bucket containing `at` (times before origin go to the first one).
    #[inline]
    pub fn at(&mut self, at: Instant) -> &mut Bucket {
        let second = at.saturating_duration_since(self.origin).as_secs();
        while second / self.width_s >= MAX_BUCKETS as u64 {
            self.coarsen();
        }
        let index = (second / self.width_s) as usize;
        if index >= self.buckets.len() {
            self.buckets.resize_with(index + 1, Bucket::new);
        }
        &mut self.buckets[index]
    }

    pub fn buckets(&self) -> &[Bucket] {
        &self.buckets
    }

    /// Seconds per bucket (a power of two).
    pub fn width_s(&self) -> u64 {
        self.width_s
    }

    /// Merge neighbours pairwise: half as many buckets, twice as wide.
    fn coarsen(&mut self) {
        let fine = std::mem::take(&mut self.buckets);
        self.buckets = fine
            .chunks(2)
            .map(|pair| {
                let mut merged = pair[0].clone();
                if let Some(next) = pair.get(1) {
                    merged.add(next);
                }
                merged
            })
            .collect();
        self.width_s *= 2;
    }

    /// Add another worker's series bucket by bucket (same origin assumed);
    /// the finer of the two is coarsened first.
    pub fn merge(&mut self, other: &Series) {
        while self.width_s < other.width_s {
            self.coarsen();
        }
        let coarser;
        let other = if other.width_s < self.width_s {
            let mut copy = Series { origin: other.origin, width_s: other.width_s, buckets: other.buckets.clone() };
            while copy.width_s < self.width_s {
                copy.coarsen();
            }
            coarser = copy;
            &coarser
        } else {
            other
        };
        if other.buckets.len() > self.buckets.len() {
            self.buckets.resize_with(other.buckets.len(), Bucket::new);
        }
        for (a, b) in self.buckets.iter_mut().zip(&other.buckets) {
            a.add(b);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    fn hit(s: &mut Series, origin: Instant, second: u64) {
        let b = s.at(origin + Duration::from_secs(second));
        b.completed += 1;
        b.record(1000 + second);
    }

    #[test]
    fn never_more_than_max_buckets() {
        let t0 = Instant::now();
        let mut s = Series::new(t0);
        for second in 0..MAX_BUCKETS as u64 {
            hit(&mut s, t0, second);
        }
        assert_eq!((s.buckets().len(), s.width_s()), (MAX_BUCKETS, 1));
        hit(&mut s, t0, MAX_BUCKETS as u64); // one second more: pairs merge
        assert_eq!((s.buckets().len(), s.width_s()), (MAX_BUCKETS / 2 + 1, 2));
        assert!(s.buckets()[..MAX_BUCKETS / 2].iter().all(|b| b.completed == 2 && b.latency.len() == 2));
        hit(&mut s, t0, 10 * MAX_BUCKETS as u64); // ten times the bound: width 16
        assert_eq!(s.width_s(), 16);
        assert!(s.buckets().len() <= MAX_BUCKETS);
        assert_eq!(s.buckets().iter().map(|b| b.completed).sum::<u64>(), MAX_BUCKETS as u64 + 2);
    }

    #[test]
    fn merging_different_widths_keeps_every_count() {
        let t0 = Instant::now();
        let (mut fine, mut coarse) = (Series::new(t0), Series::new(t0));
        for second in [0, 1, 5] {
            hit(&mut fine, t0, second);
        }
        for second in [0, 3, MAX_BUCKETS as u64 + 1] {
            hit(&mut coarse, t0, second);
        }
        let mut a = Series::new(t0);
        a.merge(&fine);
        a.merge(&coarse);
        let mut b = Series::new(t0);
        b.merge(&coarse);
        b.merge(&fine);
        for s in [&a, &b] {
            assert_eq!(s.width_s(), 2);
            let counts: Vec<u64> = s.buckets().iter().map(|b| b.completed).collect();
            assert_eq!(&counts[..4], &[3, 1, 1, 0]); // [0,2) [2,4) [4,6) [6,8)
            assert_eq!(counts.iter().sum::<u64>(), 6);
        }
    }
}
