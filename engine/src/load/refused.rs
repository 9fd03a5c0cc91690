//! A refused connect is answered in microseconds, so a slot that retried at
//! once would spin a core on connect errors. After each failed connect a slot
//! waits, exponentially longer, and a worker whose every slot has been refused
//! for [`GIVE_UP_AFTER`] ends the run early. Pure: no clock inside.

use std::time::{Duration, Instant};

/// The wait after the first failed connect of a streak.
pub const FIRST_WAIT: Duration = Duration::from_millis(1);
/// The longest wait between two connects of a slot.
pub const MAX_WAIT: Duration = Duration::from_millis(100);
/// Every slot refused without a break for this long: the run ends early.
pub const GIVE_UP_AFTER: Duration = Duration::from_secs(1);

/// The wait after the `streak`-th failed connect in a row (1-based).
pub fn backoff(streak: u32) -> Duration {
    let doublings = streak.saturating_sub(1).min(16);
    (FIRST_WAIT * (1u32 << doublings)).min(MAX_WAIT)
}

/// One slot's current streak of failed connects.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Refusals {
    streak: u32,
    since: Option<Instant>,
}

impl Refusals {
    /// A connect failed at `now`: how long to wait before the next one.
    pub fn refused(&mut self, now: Instant) -> Duration {
        self.streak = self.streak.saturating_add(1);
        self.since.get_or_insert(now);
        backoff(self.streak)
    }

    /// A connect succeeded: the streak is over.
    pub fn connected(&mut self) {
        *self = Refusals::default();
    }

    /// Refused without a break for at least [`GIVE_UP_AFTER`]?
    pub fn given_up(&self, now: Instant) -> bool {
        self.since.is_some_and(|since| now.saturating_duration_since(since) >= GIVE_UP_AFTER)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: fn(u64) -> Duration = Duration::from_millis;

    #[test]
    fn backoff_table() {
        let table = [(0, MS(1)), (1, MS(1)), (2, MS(2)), (3, MS(4)), (7, MS(64)), (8, MS(100)), (u32::MAX, MS(100))];
        for (streak, wait) in table {
            assert_eq!(backoff(streak), wait, "streak {streak}");
        }
    }

    #[test]
    fn a_streak_gives_up_after_a_second_and_a_connect_ends_it() {
        let t0 = Instant::now();
        let mut r = Refusals::default();
        assert!(!r.given_up(t0 + MS(5000)));
        assert_eq!(r.refused(t0), MS(1));
        assert_eq!(r.refused(t0 + MS(1)), MS(2));
        assert!(!r.given_up(t0 + MS(999)));
        assert!(r.given_up(t0 + MS(1000)));
        r.connected();
        assert!(!r.given_up(t0 + MS(5000)));
        assert_eq!(r.refused(t0 + MS(5000)), MS(1));
        assert!(!r.given_up(t0 + MS(5999)) && r.given_up(t0 + MS(6000)));
    }
}
