//! When a connection sends its next request: a pure function of
//! (elapsed time, requests already sent), no clock inside.

use std::time::Duration;

use crate::options::Segment;

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
    /// Open loop for one connection: the whole load (every connection of every agent)
    /// sends its arrival i at i / `rate` seconds; this connection sends arrivals
    /// `first`, `first + stride`, `first + 2·stride`, …
    Constant { rate: f64, first: u64, stride: u64 },
}

impl Pacer {
    /// The pacer of connection `index` of this process's `connections`, the load being
    /// `rate` req/s over all of them and of every agent (`segment`): arrival i of the load
    /// belongs to agent i mod N, and of its arrivals, connection j sends every c-th one
    /// from the j-th on. So connection j of agent K sends arrivals K + N·(j + n·c): at
    /// rate / (N·c) req/s from (K + j·N) / rate on, and the N agents' sends together are
    /// the one-agent schedule, to the nanosecond (the same arrival, the same division).
    pub fn for_connection(rate: Option<f64>, index: usize, connections: usize, segment: Segment) -> Pacer {
        match rate {
            None => Pacer::Closed,
            Some(rate) => Pacer::Constant {
                rate,
                first: (segment.index + index * segment.of) as u64,
                stride: (connections * segment.of) as u64,
            },
        }
    }

    pub fn pace(&self, elapsed: Duration, sent: u64) -> Pace {
        match *self {
            Pacer::Closed => Pace { wait: Duration::ZERO, intended: elapsed },
            Pacer::Constant { rate, first, stride } => {
                // In u128 the arrival never overflows; far beyond any run it saturates below.
                let arrival = u128::from(first) + u128::from(sent) * u128::from(stride);
                let intended = Duration::try_from_secs_f64(arrival as f64 / rate).unwrap_or(Duration::MAX);
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
        let p = Pacer::Constant { rate: 100.0, first: 0, stride: 1 };
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
        let p = Pacer::for_connection(Some(1000.0), 3, 10, Segment::WHOLE);
        assert_eq!(p, Pacer::Constant { rate: 1000.0, first: 3, stride: 10 });
        assert_eq!(p.pace(MS(0), 0).intended, MS(3));
        assert_eq!(p.pace(MS(0), 2).intended, MS(23));
        // Overflow rows saturate instead of panicking.
        let huge = p.pace(Duration::MAX, u64::MAX);
        assert!(huge.intended.as_secs() > 100_000_000_000_000_000);
        assert_eq!(huge.wait, Duration::ZERO);
        let pending = p.pace(Duration::ZERO, u64::MAX);
        assert_eq!(pending.wait, pending.intended);
        let tiny = Pacer::Constant { rate: 1e-300, first: 0, stride: 1 };
        assert_eq!(tiny.pace(MS(1), 1).intended, Duration::MAX);
        let widest =
            Pacer::for_connection(Some(1.0), usize::MAX / 2048, usize::MAX / 2048, Segment { index: 1023, of: 1024 });
        assert!(widest.pace(Duration::ZERO, u64::MAX).intended > Duration::from_secs(u64::MAX / 2));
    }

    /// Every intended send of `connections` connections of `segment` for the first
    /// `per_connection` sends each, sorted.
    fn sends(rate: f64, connections: usize, segment: Segment, per_connection: u64) -> Vec<Duration> {
        let mut all: Vec<Duration> = (0..connections)
            .map(|j| Pacer::for_connection(Some(rate), j, connections, segment))
            .flat_map(|p| (0..per_connection).map(move |n| p.pace(Duration::ZERO, n).intended))
            .collect();
        all.sort();
        all
    }

    #[test]
    fn segments_together_are_the_one_agent_schedule() {
        // (rate, agents, connections per agent): c dividing nothing, c > N, c < N, N = 1.
        for (rate, agents, c) in [(300.0, 3, 7), (1000.0, 4, 10), (333.3, 7, 3), (12_345.6, 1, 5), (50.0, 5, 1)] {
            let per_connection = 40;
            let mut union: Vec<Duration> =
                (0..agents).flat_map(|k| sends(rate, c, Segment { index: k, of: agents }, per_connection)).collect();
            union.sort();
            // One agent with all N·c connections sends the same arrivals, each at i / rate.
            let whole = sends(rate, agents * c, Segment::WHOLE, per_connection);
            assert_eq!(union, whole, "rate {rate}, {agents} agents of {c} connections");
            let expected: Vec<Duration> = (0..whole.len()).map(|i| Duration::from_secs_f64(i as f64 / rate)).collect();
            assert_eq!(whole, expected, "arrival i at i / rate");
        }
    }

    #[test]
    fn a_segment_sends_its_arrivals_only() {
        // Agent 1 of 3 at 300 req/s over 2 connections: arrivals 1, 4, 7, … at (1 + 3m) / 300 s.
        let mine = sends(300.0, 2, Segment { index: 1, of: 3 }, 5);
        let want: Vec<Duration> = (0..10).map(|m| Duration::from_secs_f64((1 + 3 * m) as f64 / 300.0)).collect();
        assert_eq!(mine, want);
        let p = Pacer::for_connection(Some(300.0), 1, 2, Segment { index: 1, of: 3 });
        assert_eq!(p, Pacer::Constant { rate: 300.0, first: 4, stride: 6 });
    }
}
