//! When a worker stops starting requests, and when it is finished.

use std::time::Instant;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stop {
    /// This worker's share of `-n`.
    Requests(u64),
    /// Nothing starts at or after this instant; in-flight requests are dropped.
    Deadline(Instant),
}

impl Stop {
    /// May another request start, given how many started since measuring began?
    pub fn may_start(&self, started: u64, now: Instant) -> bool {
        match *self {
            Stop::Requests(budget) => started < budget,
            Stop::Deadline(deadline) => now < deadline,
        }
    }

    /// Is the worker done?
    pub fn finished(&self, started: u64, in_flight: usize, now: Instant) -> bool {
        match *self {
            Stop::Requests(budget) => started >= budget && in_flight == 0,
            Stop::Deadline(deadline) => now >= deadline,
        }
    }

    pub fn deadline(&self) -> Option<Instant> {
        match *self {
            Stop::Requests(_) => None,
            Stop::Deadline(d) => Some(d),
        }
    }
}

/// Split `total` into `parts` shares weighted by `sizes` (connections per worker).
pub fn split_budget(total: u64, sizes: &[usize]) -> Vec<u64> {
    let all: usize = sizes.iter().sum();
    let mut shares: Vec<u64> = sizes.iter().map(|&s| total * s as u64 / all.max(1) as u64).collect();
    let mut left = total - shares.iter().sum::<u64>();
    for share in shares.iter_mut() {
        if left == 0 {
            break;
        }
        *share += 1;
        left -= 1;
    }
    shares
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn request_budget() {
        let now = Instant::now();
        let s = Stop::Requests(3);
        assert!(s.may_start(2, now) && !s.may_start(3, now));
        assert!(!s.finished(3, 1, now) && s.finished(3, 0, now));
    }

    #[test]
    fn deadline() {
        let t0 = Instant::now();
        let s = Stop::Deadline(t0 + Duration::from_secs(1));
        assert!(s.may_start(u64::MAX, t0) && !s.finished(0, 5, t0));
        let t1 = t0 + Duration::from_secs(1);
        assert!(!s.may_start(0, t1) && s.finished(0, 5, t1));
    }

    #[test]
    fn budgets_add_up() {
        assert_eq!(split_budget(10, &[1, 1, 1]), vec![4, 3, 3]);
        assert_eq!(split_budget(7, &[25, 25]), vec![4, 3]);
        assert_eq!(split_budget(1, &[3, 1]), vec![1, 0]);
        assert_eq!(split_budget(100, &[3, 1]).iter().sum::<u64>(), 100);
    }
}
