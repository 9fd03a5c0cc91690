//! Summary numbers of one histogram, in microseconds.

use hdrhistogram::Histogram;
use serde::Serialize;

/// Summary of one latency histogram; all zeros when empty.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Default)]
pub struct Stats {
    pub count: u64,
    pub min: u64,
    pub mean: f64,
    pub stdev: f64,
    pub p50: u64,
    pub p90: u64,
    pub p99: u64,
    pub p999: u64,
    pub max: u64,
}

impl Stats {
    pub fn of(h: &Histogram<u64>) -> Stats {
        if h.is_empty() {
            return Stats::default();
        }
        Stats {
            count: h.len(),
            min: h.min(),
            mean: round3(h.mean()),
            stdev: round3(h.stdev()),
            p50: h.value_at_quantile(0.50),
            p90: h.value_at_quantile(0.90),
            p99: h.value_at_quantile(0.99),
            p999: h.value_at_quantile(0.999),
            max: h.max(),
        }
    }
}

fn round3(x: f64) -> f64 {
    (x * 1000.0).round() / 1000.0
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::record::new_latency_histogram;

    #[test]
    fn empty_is_zeros() {
        assert_eq!(Stats::of(&new_latency_histogram()), Stats::default());
    }

    #[test]
    fn merged_histograms_equal_one_histogram_of_both() {
        let mut a = new_latency_histogram();
        let mut b = new_latency_histogram();
        let mut both = new_latency_histogram();
        for i in 0..10_000u64 {
            let v = (i * 7919) % 250_000 + 1;
            if i % 3 == 0 {
                a.record(v).unwrap()
            } else {
                b.record(v * 2).unwrap()
            }
            both.record(if i % 3 == 0 { v } else { v * 2 }).unwrap();
        }
        a.add(&b).unwrap();
        assert_eq!(Stats::of(&a), Stats::of(&both));
        for q in [0.5, 0.66, 0.75, 0.9, 0.99, 0.999, 1.0] {
            assert_eq!(a.value_at_quantile(q), both.value_at_quantile(q));
        }
    }
}
