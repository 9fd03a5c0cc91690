//! `--start-at`: wait, set up, for a wall-clock instant before the run's time zero, so that
//! agents on several hosts start within a millisecond or two of one another. Sleeps end
//! up to a few hundred microseconds late, so the last [`SPIN`] is spent polling the clock.

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, SystemTime};

/// Sleep until this long before the instant, then poll the clock.
pub const SPIN: Duration = Duration::from_millis(2);
/// The wait looks at the interrupt flag at least this often.
const MAX_SLEEP: Duration = Duration::from_millis(50);

/// What to do next, `now` being the system clock's reading.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Step {
    /// The instant has come (or was in the past): start.
    Go,
    Sleep(Duration),
    /// Close enough to poll the clock rather than sleep.
    Spin,
}

/// A pure step of the wait for `at`.
pub fn step(now: SystemTime, at: SystemTime) -> Step {
    match at.duration_since(now) {
        Ok(left) if left > SPIN => Step::Sleep((left - SPIN).min(MAX_SLEEP)),
        Ok(left) if !left.is_zero() => Step::Spin,
        _ => Step::Go,
    }
}

/// Wait until the system clock reads `at` (at once if it has), or until `interrupt`; the
/// clock is read again at every step, so a clock stepped meanwhile is followed.
pub fn wait_until(at: SystemTime, interrupt: &AtomicBool) {
    while !interrupt.load(Ordering::Relaxed) {
        match step(SystemTime::now(), at) {
            Step::Go => return,
            Step::Sleep(d) => std::thread::sleep(d),
            Step::Spin => std::hint::spin_loop(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn steps() {
        let at = SystemTime::UNIX_EPOCH + Duration::from_secs(1_000_000);
        let us = Duration::from_micros;
        let table = [
            (at + us(1), Step::Go),
            (at, Step::Go),
            (at - us(1), Step::Spin),
            (at - us(2000), Step::Spin),
            (at - us(2001), Step::Sleep(us(1))),
            (at - us(30_000), Step::Sleep(us(28_000))),
            (at - Duration::from_secs(300), Step::Sleep(MAX_SLEEP)),
        ];
        for (now, want) in table {
            assert_eq!(step(now, at), want, "{now:?}");
        }
    }

    #[test]
    fn waits_for_the_instant_never_before_it() {
        let at = SystemTime::now() + Duration::from_millis(30);
        wait_until(at, &AtomicBool::new(false));
        let late = SystemTime::now().duration_since(at).expect("not before the instant");
        // Typically a few µs; the bound is loose so that a busy machine cannot fail it.
        eprintln!("started {late:?} after the instant");
        assert!(late < Duration::from_millis(20), "{late:?} late");
        let interrupted = SystemTime::now() + Duration::from_secs(60);
        wait_until(interrupted, &AtomicBool::new(true)); // returns at once
    }
}
