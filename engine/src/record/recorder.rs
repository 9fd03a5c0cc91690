//! One worker's recorder: nothing per request is kept, only counts and histograms.

use std::time::{Duration, Instant};

use hdrhistogram::Histogram;

use super::progress::{Slot, micros};
use super::raw::RawLog;
use super::series::Series;

/// The fixed taxonomy of per-request failures.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ErrorClass {
    Connect,
    Read,
    Write,
    Timeout,
    Tls,
    BadResponse,
    LengthMismatch,
}

impl ErrorClass {
    pub const ALL: [ErrorClass; 7] = [
        ErrorClass::Connect,
        ErrorClass::Read,
        ErrorClass::Write,
        ErrorClass::Timeout,
        ErrorClass::Tls,
        ErrorClass::BadResponse,
        ErrorClass::LengthMismatch,
    ];

    pub fn name(self) -> &'static str {
        match self {
            ErrorClass::Connect => "connect",
            ErrorClass::Read => "read",
            ErrorClass::Write => "write",
            ErrorClass::Timeout => "timeout",
            ErrorClass::Tls => "tls",
            ErrorClass::BadResponse => "bad_response",
            ErrorClass::LengthMismatch => "length_mismatch",
        }
    }
}

/// What TLS negotiated, and how often handshakes were resumed.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TlsInfo {
    pub protocol: Option<String>,
    pub cipher: Option<String>,
    /// The application protocol the server chose by ALPN (none: it chose none).
    pub alpn: Option<String>,
    pub handshakes: u64,
    pub resumed: u64,
}

/// A status outside 100..=599 is no HTTP status (RFC 9110 §15): such a
/// response is a `bad_response`, not a clamped status.
pub fn valid_status(status: u16) -> bool {
    (100..=599).contains(&status)
}

/// Latency histogram: 1 µs to 1 hour, 3 significant figures.
pub fn new_latency_histogram() -> Histogram<u64> {
    Histogram::new_with_bounds(1, 3_600_000_000, 3).expect("valid histogram bounds")
}

/// Timings of one finished response.
#[derive(Debug, Clone, Copy)]
pub struct Timing {
    /// When the request should have gone (open loop) or started (closed loop).
    pub intended: Instant,
    /// When work on it began (connect, or write on a kept-alive connection).
    pub start: Instant,
    /// When the request was written.
    pub sent: Instant,
    pub first_byte: Instant,
    pub done: Instant,
}

/// One worker's measurements.
pub struct Recorder {
    pub latency: Histogram<u64>,
    pub latency_uncorrected: Histogram<u64>,
    pub connect: Histogram<u64>,
    pub tls: Histogram<u64>,
    pub ttfb: Histogram<u64>,
    pub completed: u64,
    pub errors: [u64; 7],
    pub status: Vec<u64>,
    pub bytes_total: u64,
    pub bytes_body: u64,
    pub bytes_decoded: u64,
    pub connections_opened: u64,
    /// HTTP/2: requests sent again on a new connection (refused unprocessed, or their
    /// connection closed before any answer).
    pub retried: u64,
    pub tls_info: TlsInfo,
    pub series: Series,
    /// Per connection slot of this worker, in slot order (merging appends).
    pub slots: Vec<Slot>,
    /// Test-only (`--raw-log`): each value recorded into `latency`; None unless asked.
    pub raw: Option<RawLog>,
}

impl Recorder {
    pub fn new(origin: Instant, slots: usize) -> Recorder {
        Recorder {
            latency: new_latency_histogram(),
            latency_uncorrected: new_latency_histogram(),
            connect: new_latency_histogram(),
            tls: new_latency_histogram(),
            ttfb: new_latency_histogram(),
            completed: 0,
            errors: [0; 7],
            status: vec![0; 600],
            bytes_total: 0,
            bytes_body: 0,
            bytes_decoded: 0,
            connections_opened: 0,
            retried: 0,
            tls_info: TlsInfo::default(),
            series: Series::new(origin),
            slots: vec![Slot::default(); slots],
            raw: None,
        }
    }

    /// Also keep each value recorded into `latency` with its intended send time, in µs
    /// from `zero` (the run's time zero): the test-only raw log.
    pub fn keep_raw_log(&mut self, zero: Instant) {
        self.raw = Some(RawLog::new(zero));
    }

    /// Forget everything (end of warm-up); the time series restarts at `origin`.
    pub fn reset(&mut self, origin: Instant) {
        let negotiated = (self.tls_info.protocol.take(), self.tls_info.cipher.take(), self.tls_info.alpn.take());
        let raw = self.raw.take().map(|r| RawLog::new(r.zero));
        *self = Recorder::new(origin, self.slots.len());
        (self.tls_info.protocol, self.tls_info.cipher, self.tls_info.alpn) = negotiated;
        self.raw = raw;
    }

    pub fn connected(&mut self, took: Duration) {
        self.connections_opened += 1;
        self.connect.saturating_record(micros(took));
    }

    pub fn handshake(&mut self, took: Duration, resumed: bool) {
        self.tls.saturating_record(micros(took));
        self.tls_info.handshakes += 1;
        self.tls_info.resumed += u64::from(resumed);
    }

    /// A response arrived whole. `failed` marks a length mismatch: its bytes
    /// and status count, its latency does not. A status outside 100..=599 is a
    /// `bad_response`: its bytes count. Returns whether it counts as completed.
    pub fn response(
        &mut self,
        t: &Timing,
        status: u16,
        wire: u64,
        body: u64,
        decoded: u64,
        failed: Option<ErrorClass>,
    ) -> bool {
        let failed = if valid_status(status) {
            self.status[usize::from(status)] += 1;
            failed
        } else {
            Some(ErrorClass::BadResponse)
        };
        self.bytes_total += wire;
        self.bytes_body += body;
        self.bytes_decoded += decoded;
        let latency = micros(t.done.saturating_duration_since(t.intended));
        let second = self.series.at(t.done);
        second.bytes += wire;
        if let Some(class) = failed {
            second.errors += 1;
            self.errors[class as usize] += 1;
            return false;
        }
        second.completed += 1;
        second.record(latency);
        self.completed += 1;
        self.latency.saturating_record(latency);
        if let Some(raw) = self.raw.as_mut() {
            raw.record(t.intended, latency.min(self.latency.high())); // as saturating_record did
        }
        self.latency_uncorrected.saturating_record(micros(t.done.saturating_duration_since(t.start)));
        self.ttfb.saturating_record(micros(t.first_byte.saturating_duration_since(t.sent)));
        true
    }

    /// A request on slot `slot` of this worker ended (completed or not) after
    /// waiting `waited` since its start (its intended send time in open loop).
    pub fn slot_ended(&mut self, slot: usize, waited: Duration, completed: bool) {
        self.slots[slot].ended(waited, completed);
    }

    /// The run ended with a request of `age` in flight on `slot`.
    pub fn slot_in_flight(&mut self, slot: usize, age: Duration) {
        self.slots[slot].still_in_flight(age);
    }

    /// A request failed; `wire` is what had arrived of its response.
    pub fn error(&mut self, class: ErrorClass, at: Instant, wire: u64) {
        self.errors[class as usize] += 1;
        self.bytes_total += wire;
        let second = self.series.at(at);
        second.errors += 1;
        second.bytes += wire;
    }

    /// Fold another worker's recorder into this one.
    pub fn merge(&mut self, other: &Recorder) {
        let add = |a: &mut Histogram<u64>, b: &Histogram<u64>| a.add(b).expect("same histogram bounds");
        add(&mut self.latency, &other.latency);
        add(&mut self.latency_uncorrected, &other.latency_uncorrected);
        add(&mut self.connect, &other.connect);
        add(&mut self.tls, &other.tls);
        add(&mut self.ttfb, &other.ttfb);
        self.completed += other.completed;
        for (a, b) in self.errors.iter_mut().zip(other.errors) {
            *a += b;
        }
        for (a, b) in self.status.iter_mut().zip(&other.status) {
            *a += b;
        }
        self.bytes_total += other.bytes_total;
        self.bytes_body += other.bytes_body;
        self.bytes_decoded += other.bytes_decoded;
        self.connections_opened += other.connections_opened;
        self.retried += other.retried;
        self.tls_info.handshakes += other.tls_info.handshakes;
        self.tls_info.resumed += other.tls_info.resumed;
        if self.tls_info.protocol.is_none() {
            self.tls_info.protocol.clone_from(&other.tls_info.protocol);
            self.tls_info.cipher.clone_from(&other.tls_info.cipher);
            self.tls_info.alpn.clone_from(&other.tls_info.alpn);
        }
        self.series.merge(&other.series);
        // Each worker owns its slots: the merged list is every worker's, in order.
        self.slots.extend_from_slice(&other.slots);
        if let Some(theirs) = &other.raw {
            self.raw.get_or_insert_with(|| RawLog::new(theirs.zero)).lines.extend_from_slice(&theirs.lines);
        }
    }

    pub fn failed(&self) -> u64 {
        self.errors.iter().sum()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn timing(origin: Instant, start_ms: u64, done_ms: u64) -> Timing {
        let at = |ms| origin + Duration::from_millis(ms);
        Timing {
            intended: at(start_ms),
            start: at(start_ms),
            sent: at(start_ms),
            first_byte: at(done_ms),
            done: at(done_ms),
        }
    }

    #[test]
    fn counts_and_merges() {
        let t0 = Instant::now();
        let mut a = Recorder::new(t0, 1);
        let mut b = Recorder::new(t0, 1);
        a.response(&timing(t0, 0, 10), 200, 100, 60, 60, None);
        b.response(&timing(t0, 1000, 1020), 404, 100, 60, 60, None);
        b.response(&timing(t0, 1000, 1030), 200, 90, 50, 50, Some(ErrorClass::LengthMismatch));
        b.error(ErrorClass::Connect, t0 + Duration::from_millis(1500), 0);
        a.merge(&b);
        assert_eq!((a.completed, a.failed(), a.bytes_total, a.bytes_body), (2, 2, 290, 170));
        assert_eq!((a.status[200], a.status[404]), (2, 1));
        assert_eq!(a.errors[ErrorClass::LengthMismatch as usize], 1);
        assert_eq!(a.latency.len(), 2);
        assert_eq!(a.series.buckets().len(), 2);
        assert_eq!((a.series.buckets()[1].completed, a.series.buckets()[1].errors), (1, 2));
    }

    #[test]
    fn per_second_percentiles_match_the_run_histogram() {
        let t0 = Instant::now();
        let mut r = Recorder::new(t0, 1);
        for i in 0..2000u64 {
            let done = t0 + Duration::from_micros(100 + (i * 37) % 40_000);
            let t = Timing { intended: t0, start: t0, sent: t0, first_byte: done, done };
            r.response(&t, 200, 1, 1, 1, None);
        }
        let second = &r.series.buckets()[0].latency;
        for q in [0.5, 0.99] {
            let (coarse, fine) = (second.value_at_quantile(q) as f64, r.latency.value_at_quantile(q) as f64);
            assert!((coarse - fine).abs() / fine < 0.01, "q{q}: {coarse} vs {fine}");
        }
    }

    #[test]
    fn coordinated_omission_pinned_down() {
        // Intended at 0 (open loop), started late at 900 ms, done at 1,000 ms.
        let t0 = Instant::now();
        let at = |ms| t0 + Duration::from_millis(ms);
        let t = Timing { intended: at(0), start: at(900), sent: at(900), first_byte: at(1000), done: at(1000) };
        let mut r = Recorder::new(t0, 1);
        assert!(r.response(&t, 200, 10, 5, 5, None));
        assert_eq!((r.latency.len(), r.latency.count_at(1_000_000)), (1, 1), "corrected: 1,000,000 us");
        assert_eq!((r.latency_uncorrected.len(), r.latency_uncorrected.count_at(100_000)), (1, 1), "uncorrected");
        assert!(r.latency.equivalent(r.latency.max(), 1_000_000));
        assert!(r.latency_uncorrected.equivalent(r.latency_uncorrected.max(), 100_000));
    }

    #[test]
    fn a_status_beyond_599_is_a_bad_response() {
        let t0 = Instant::now();
        let mut r = Recorder::new(t0, 1);
        for status in [600, 999, 99] {
            assert!(!r.response(&timing(t0, 0, 10), status, 100, 60, 60, None), "{status}");
        }
        assert!(r.response(&timing(t0, 0, 10), 599, 100, 60, 60, None));
        assert_eq!((r.errors[ErrorClass::BadResponse as usize], r.completed, r.bytes_total), (3, 1, 400));
        assert_eq!((r.status[599], r.status.iter().sum::<u64>()), (1, 1));
        assert_eq!(r.latency.len(), 1);
    }

    #[test]
    fn slots_merge_in_worker_order_and_reset_keeps_their_number() {
        let t0 = Instant::now();
        let (mut a, mut b) = (Recorder::new(t0, 2), Recorder::new(t0, 3));
        a.slot_ended(1, Duration::from_millis(5), true);
        b.slot_ended(0, Duration::from_millis(7), false);
        b.slot_in_flight(2, Duration::from_millis(9));
        let mut merged = Recorder::new(t0, 0);
        merged.merge(&a);
        merged.merge(&b);
        let completed: Vec<u64> = merged.slots.iter().map(|s| s.completed).collect();
        let waits: Vec<u64> = merged.slots.iter().map(|s| s.longest_wait_us).collect();
        assert_eq!(completed, [0, 1, 0, 0, 0]);
        assert_eq!(waits, [0, 5000, 7000, 0, 9000]);
        a.reset(t0);
        assert_eq!(a.slots, vec![crate::record::Slot::default(); 2]);
    }

    #[test]
    fn the_raw_log_holds_what_the_histogram_holds() {
        let t0 = Instant::now();
        let mut r = Recorder::new(t0, 1);
        r.keep_raw_log(t0);
        r.response(&timing(t0, 0, 10), 200, 100, 60, 60, None);
        r.reset(t0 + Duration::from_millis(5)); // warm-up over: forgotten, still kept
        r.response(&timing(t0, 20, 31), 200, 100, 60, 60, None);
        r.response(&timing(t0, 30, 45), 200, 90, 50, 50, Some(ErrorClass::LengthMismatch));
        r.response(&timing(t0, 40, 50), 700, 100, 60, 60, None);
        r.error(ErrorClass::Timeout, t0 + Duration::from_millis(60), 0);
        let far = Timing { done: t0 + Duration::from_secs(7200), ..timing(t0, 50, 50) };
        r.response(&far, 200, 100, 60, 60, None);
        let mut merged = Recorder::new(t0, 0);
        merged.merge(&Recorder::new(t0, 1));
        merged.merge(&r);
        let raw = merged.raw.as_ref().expect("kept through reset and merge");
        assert_eq!(raw.lines, [(20_000, 11_000), (50_000, 3_600_000_000)]);
        let mut rebuilt = new_latency_histogram();
        for &(_, latency) in &raw.lines {
            rebuilt.record(latency).unwrap();
        }
        assert_eq!(rebuilt, merged.latency);
    }

    #[test]
    fn reset_forgets() {
        let t0 = Instant::now();
        let mut r = Recorder::new(t0, 1);
        r.response(&timing(t0, 0, 10), 200, 100, 60, 60, None);
        r.connected(Duration::from_micros(50));
        r.reset(t0 + Duration::from_secs(2));
        assert_eq!((r.completed, r.latency.len(), r.connections_opened, r.bytes_total), (0, 0, 0, 0));
        assert!(r.series.buckets().is_empty());
    }
}
