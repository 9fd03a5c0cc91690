//! Per-slot progress: did every virtual client get served, or did a few
//! connections take all the answers while the rest waited in the accept queue?
//! A closed loop hides starved clients (a waiting client sends nothing, so it
//! adds no latency samples); these counters show them. O(slots) memory.

use std::time::Duration;

/// One connection slot (one of the `-c` virtual clients) in the measured phase.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Slot {
    /// Requests the slot completed.
    pub completed: u64,
    /// Its longest wait: from a request's start (intended send time in open
    /// loop) to its end, completed or failed; a request still in flight at the
    /// end counts with its age.
    pub longest_wait_us: u64,
    /// Age of the request in flight when the run ended, if any.
    pub in_flight_us: Option<u64>,
}

impl Slot {
    pub fn ended(&mut self, waited: Duration, completed: bool) {
        self.completed += u64::from(completed);
        self.longest_wait_us = self.longest_wait_us.max(micros(waited));
    }

    pub fn still_in_flight(&mut self, age: Duration) {
        let age = micros(age);
        self.in_flight_us = Some(age);
        self.longest_wait_us = self.longest_wait_us.max(age);
    }
}

/// The value at quantile `q` of `sorted` (ascending) by the rule HdrHistogram's
/// `value_at_quantile` uses: the value of 1-based rank max(1, ⌈q·n⌉), never
/// interpolated. 0 when empty.
pub fn at_quantile(sorted: &[u64], q: f64) -> u64 {
    if sorted.is_empty() {
        return 0;
    }
    let rank = ((q.clamp(0.0, 1.0) * sorted.len() as f64).ceil() as usize).max(1);
    sorted[rank.min(sorted.len()) - 1]
}

/// Summary of the slots.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct SlotSummary {
    pub slots: u64,
    pub requests_min: u64,
    pub requests_p1: u64,
    pub requests_median: u64,
    pub requests_max: u64,
    pub idle_slots: u64,
    pub longest_wait_median_us: u64,
    pub longest_wait_max_us: u64,
}

/// Summary of the requests in flight when the run ended.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct InFlightSummary {
    pub count: u64,
    pub age_max_us: u64,
    pub age_median_us: u64,
    /// Those older than the measured phase (they started during warm-up).
    pub older_than_run: u64,
}

pub fn summarize_slots(slots: &[Slot]) -> SlotSummary {
    let mut requests: Vec<u64> = slots.iter().map(|s| s.completed).collect();
    let mut waits: Vec<u64> = slots.iter().map(|s| s.longest_wait_us).collect();
    requests.sort_unstable();
    waits.sort_unstable();
    SlotSummary {
        slots: slots.len() as u64,
        requests_min: at_quantile(&requests, 0.0),
        requests_p1: at_quantile(&requests, 0.01),
        requests_median: at_quantile(&requests, 0.5),
        requests_max: at_quantile(&requests, 1.0),
        idle_slots: requests.iter().filter(|&&n| n == 0).count() as u64,
        longest_wait_median_us: at_quantile(&waits, 0.5),
        longest_wait_max_us: at_quantile(&waits, 1.0),
    }
}

pub fn summarize_in_flight(slots: &[Slot], run: Duration) -> InFlightSummary {
    let mut ages: Vec<u64> = slots.iter().filter_map(|s| s.in_flight_us).collect();
    ages.sort_unstable();
    let run_us = micros(run);
    InFlightSummary {
        count: ages.len() as u64,
        age_max_us: at_quantile(&ages, 1.0),
        age_median_us: at_quantile(&ages, 0.5),
        older_than_run: ages.iter().filter(|&&age| age > run_us).count() as u64,
    }
}

#[inline]
pub(super) fn micros(d: Duration) -> u64 {
    d.as_secs() * 1_000_000 + u64::from(d.subsec_micros())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nearest_rank_table() {
        let ten: Vec<u64> = (1..=10).collect();
        let hundred: Vec<u64> = (1..=100).collect();
        let table: &[(&[u64], f64, u64)] = &[
            (&[], 0.5, 0),
            (&[7], 0.0, 7),
            (&[7], 0.01, 7),
            (&[7], 1.0, 7),
            (&[1, 2], 0.5, 1), // rank ⌈1⌉ = 1: the lower middle, not 1.5
            (&[1, 2, 3], 0.5, 2),
            (&ten, 0.0, 1),
            (&ten, 0.01, 1), // ⌈0.1⌉ = 1
            (&ten, 0.5, 5),
            (&ten, 0.99, 10),
            (&hundred, 0.01, 1),
            (&hundred, 0.99, 99),
            (&hundred, 1.0, 100),
        ];
        for &(sorted, q, want) in table {
            assert_eq!(at_quantile(sorted, q), want, "{sorted:?} q{q}");
        }
    }

    #[test]
    fn same_rule_as_the_histograms() {
        let mut h = crate::record::new_latency_histogram();
        // Values below 2048 are exact in a 3-significant-figure histogram.
        let values: Vec<u64> = (0..301u64).map(|i| (i * 7919) % 2000 + 1).collect();
        for &v in &values {
            h.record(v).unwrap();
        }
        let mut sorted = values.clone();
        sorted.sort_unstable();
        for q in [0.0, 0.01, 0.1, 0.5, 0.66, 0.9, 0.99, 0.999, 1.0] {
            assert_eq!(at_quantile(&sorted, q), h.value_at_quantile(q), "q{q}");
        }
    }

    #[test]
    fn starved_slots_show() {
        let ms = Duration::from_millis;
        let mut slots = vec![Slot::default(); 4];
        for _ in 0..50 {
            slots[0].ended(ms(2), true);
        }
        slots[1].ended(ms(30), true);
        slots[2].ended(ms(900), false); // a timeout is a wait too, not a completion
        slots[2].still_in_flight(ms(1500));
        slots[3].still_in_flight(ms(2500));
        let s = summarize_slots(&slots);
        let want = SlotSummary {
            slots: 4,
            requests_min: 0,
            requests_p1: 0,
            requests_median: 0,
            requests_max: 50,
            idle_slots: 2,
            longest_wait_median_us: 30_000,
            longest_wait_max_us: 2_500_000,
        };
        assert_eq!(s, want);
        let f = summarize_in_flight(&slots, Duration::from_secs(2));
        assert_eq!(f, InFlightSummary { count: 2, age_max_us: 2_500_000, age_median_us: 1_500_000, older_than_run: 1 });
        assert_eq!(summarize_in_flight(&[], Duration::ZERO), InFlightSummary::default());
    }
}
