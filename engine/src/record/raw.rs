//! Test-only (`--raw-log`): every value recorded into the latency histogram, with its
//! request's intended send time, so that a test can rebuild the histogram from the logs of
//! several processes. It grows per request, so it is kept only when asked for.

use std::io::{self, Write};
use std::time::Instant;

use super::progress::micros;

/// One worker's (or, merged, one run's) values: (intended µs from time zero, latency µs).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RawLog {
    /// The run's time zero.
    pub zero: Instant,
    pub lines: Vec<(u64, u64)>,
}

impl RawLog {
    pub fn new(zero: Instant) -> RawLog {
        RawLog { zero, lines: Vec::new() }
    }

    /// `latency` (µs) was recorded for the request intended at `intended`.
    pub fn record(&mut self, intended: Instant, latency: u64) {
        self.lines.push((micros(intended.saturating_duration_since(self.zero)), latency));
    }

    /// "INTENDED_US LATENCY_US" per value, in intended order.
    pub fn write_to(&self, out: impl Write) -> io::Result<()> {
        let mut out = io::BufWriter::new(out);
        let mut lines = self.lines.clone();
        lines.sort_unstable();
        for (intended, latency) in lines {
            writeln!(out, "{intended} {latency}")?;
        }
        out.flush()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn lines_in_intended_order() {
        let zero = Instant::now();
        let mut log = RawLog::new(zero);
        log.record(zero + Duration::from_micros(3_333), 120);
        log.record(zero + Duration::from_micros(1_000), 95);
        let mut out = Vec::new();
        log.write_to(&mut out).unwrap();
        assert_eq!(String::from_utf8(out).unwrap(), "1000 95\n3333 120\n");
    }
}
