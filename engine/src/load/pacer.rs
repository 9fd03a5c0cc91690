//! When a connection sends its next request: a pure function of
//! (elapsed time, requests already sent), no clock inside.

use std::time::Duration;

/// The decision for one request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Pace {
    /// How long to wait from `elapsed` before sending.
    pub wait: Duration,
    /// When the request should go, as time since the start of the run.
    /// Latency is measured from here (coordinated-omission correct).
    pub intended: Duration,
}

#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Pacer {
    /// Closed loop: send as soon as the previous response is in.
    Closed,
    /// Open loop for one connection: `per_s` requests per second, the first
    /// one `offset` after the start.
    Constant { per_s: f64, offset: Duration },
}

impl Pacer {
    /// The pacer of connection `index` of `connections` sharing `rate` req/s:
    /// each connection gets an equal share, their phases spread evenly.
    pub fn for_connection(rate: Option<f64>, index: usize, connections: usize) -> Pacer {
        match rate {
            None => Pacer::Closed,
            Some(rate) => Pacer::Constant {
                per_s: rate / connections as f64,
                offset: Duration::from_secs_f64(index as f64 / rate),
            },
        }
    }

    pub fn pace(&self, elapsed: Duration, sent: u64) -> Pace {
        match *self {
            Pacer::Closed => Pace { wait: Duration::ZERO, intended: elapsed },
            Pacer::Constant { per_s, offset } => {
                let due = Duration::try_from_secs_f64(sent as f64 / per_s).unwrap_or(Duration::MAX);
                let intended = offset.saturating_add(due);
                Pace { wait: intended.saturating_sub(elapsed), intended }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: fn(u64) -> Duration = Duration::from_millis;

    #[test]
    fn closed_loop_never_waits() {
        for (elapsed, sent) in [(MS(0), 0), (MS(5), 1_000_000), (Duration::MAX, u64::MAX)] {
            assert_eq!(Pacer::Closed.pace(elapsed, sent), Pace { wait: Duration::ZERO, intended: elapsed });
        }
    }

    #[test]
    fn constant_rate_table() {
        // 100 req/s on one connection: one every 10 ms.
        let p = Pacer::Constant { per_s: 100.0, offset: Duration::ZERO };
        let table = [
            // elapsed, sent, wait, intended
            (MS(0), 0, MS(0), MS(0)),
            (MS(0), 1, MS(10), MS(10)),
            (MS(3), 1, MS(7), MS(10)),
            (MS(10), 1, MS(0), MS(10)),
            (MS(25), 1, MS(0), MS(10)), // late: send now, latency still from 10 ms
            (MS(25), 5, MS(25), MS(50)),
        ];
        for (elapsed, sent, wait, intended) in table {
            assert_eq!(p.pace(elapsed, sent), Pace { wait, intended }, "{elapsed:?} {sent}");
        }
    }

    #[test]
    fn offsets_and_overflow() {
        let p = Pacer::for_connection(Some(1000.0), 3, 10);
        assert_eq!(p, Pacer::Constant { per_s: 100.0, offset: MS(3) });
        assert_eq!(p.pace(MS(0), 0).intended, MS(3));
        assert_eq!(p.pace(MS(0), 2).intended, MS(23));
        // Overflow rows saturate instead of panicking.
        let huge = p.pace(Duration::MAX, u64::MAX);
        assert!(huge.intended.as_secs() > 100_000_000_000_000_000);
        assert_eq!(huge.wait, Duration::ZERO);
        let pending = p.pace(Duration::ZERO, u64::MAX);
        assert_eq!(pending.wait, pending.intended);
        let tiny = Pacer::Constant { per_s: 1e-300, offset: Duration::ZERO };
        assert_eq!(tiny.pace(MS(1), 1).intended, Duration::MAX);
    }
}
