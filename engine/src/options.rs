//! Typed options: what crosses from the command line into the library.

use std::path::PathBuf;
use std::time::{Duration, SystemTime};

// `WeightedUrl` lives with `Url` in target.rs (which needs it to resolve a run's
// host); it is re-exported here because it is part of what `Options` holds.
// The dependency goes one way: options → target.
use crate::schedule::Schedule;
use crate::target::Url;
pub use crate::target::WeightedUrl;

/// When a run ends (besides Ctrl-C).
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum StopAfter {
    /// After this many measured requests (completed or failed).
    Requests(u64),
    /// After this much measured time (warm-up not included).
    Duration(Duration),
}

/// The HTTP version the run speaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Protocol {
    Http1,
    /// HTTP/2 over TLS, chosen by ALPN.
    H2,
    /// HTTP/2 in cleartext with prior knowledge (no Upgrade).
    H2c,
}

impl Protocol {
    /// The name used on the command line and in the report.
    pub fn name(self) -> &'static str {
        match self {
            Protocol::Http1 => "http/1.1",
            Protocol::H2 => "h2",
            Protocol::H2c => "h2c",
        }
    }

    pub fn is_h2(self) -> bool {
        self != Protocol::Http1
    }
}

/// This process is agent `index` of `of` sharing one load (`--segment K/N`): it sends the
/// open loop's arrivals i ≡ index (mod of), or a replay's entries of those indices.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Segment {
    pub index: usize,
    pub of: usize,
}

impl Segment {
    /// One agent doing the whole load (no `--segment`).
    pub const WHOLE: Segment = Segment { index: 0, of: 1 };
    /// The most agents one load may be split over.
    pub const MAX_AGENTS: usize = 1024;

    /// Parse `K/N`, 0 <= K < N <= 1024.
    pub fn parse(text: &str) -> Result<Segment, String> {
        let bad = || "expected K/N with 0 <= K < N <= 1024 (e.g. 1/3)".to_string();
        let (k, n) = text.split_once('/').ok_or_else(bad)?;
        let digits = |t: &str| !t.is_empty() && t.bytes().all(|b| b.is_ascii_digit());
        if !digits(k) || !digits(n) {
            return Err(bad());
        }
        let (index, of) = (k.parse::<usize>().map_err(|_| bad())?, n.parse::<usize>().map_err(|_| bad())?);
        if of == 0 || of > Segment::MAX_AGENTS || index >= of {
            return Err(bad());
        }
        Ok(Segment { index, of })
    }
}

/// How far ahead `--start-at` may be: further is surely a mistake (a clock, a unit).
pub const START_AT_MAX_AHEAD: Duration = Duration::from_secs(300);

/// Parse decimal seconds since the Unix epoch (`1764412345.25`) to the nanosecond
/// (further digits are dropped), without going through a float.
pub fn parse_unix_time(text: &str) -> Result<SystemTime, String> {
    let bad = || "expected decimal seconds since the Unix epoch, like 1764412345.25".to_string();
    let (whole, fraction) = text.split_once('.').unwrap_or((text, ""));
    let digits = |t: &str| t.bytes().all(|b| b.is_ascii_digit());
    if whole.is_empty() || !digits(whole) || !digits(fraction) {
        return Err(bad());
    }
    let secs: u64 = whole.parse().map_err(|_| bad())?;
    let nanos = fraction.bytes().chain(std::iter::repeat(b'0')).take(9).fold(0u32, |n, b| n * 10 + u32::from(b - b'0'));
    SystemTime::UNIX_EPOCH.checked_add(Duration::new(secs, nanos)).ok_or_else(bad)
}

/// A `--start-at` instant is refused when it lies more than [`START_AT_MAX_AHEAD`] after
/// `now`; one in the past means "at once".
pub fn check_start_at(at: SystemTime, now: SystemTime) -> Result<SystemTime, String> {
    match at.duration_since(now) {
        Ok(ahead) if ahead > START_AT_MAX_AHEAD => Err(format!(
            "{:.3} s in the future, more than the {} s allowed",
            ahead.as_secs_f64(),
            START_AT_MAX_AHEAD.as_secs()
        )),
        _ => Ok(at),
    }
}

/// The report format.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Output {
    Human,
    Json,
}

/// Every effective option of a run.
#[derive(Debug, Clone, PartialEq)]
pub struct Options {
    pub urls: Vec<WeightedUrl>,
    pub connections: usize,
    pub protocol: Protocol,
    /// HTTP/2: requests in flight at once on each connection (h2load's -m); 1 otherwise.
    pub streams: usize,
    pub threads: usize,
    pub stop: StopAfter,
    /// Open loop: requests per second over all connections.
    pub rate: Option<f64>,
    pub warmup: Duration,
    pub keepalive: bool,
    pub method: String,
    pub headers: Vec<(String, String)>,
    pub body: Option<Vec<u8>>,
    pub compressed: bool,
    pub decode: bool,
    pub timeout: Duration,
    pub insecure: bool,
    pub tls_resume: bool,
    pub seed: u64,
    pub allow_remote: bool,
    /// The lab's network namespace this process runs in (created by stacklab): its
    /// benchmarking addresses (198.18.0.0/15) are then allowed targets.
    pub lab_netns: Option<String>,
    /// Exit non-zero when more than this share of measured requests failed.
    pub max_error_rate: Option<f64>,
    pub output: Output,
    /// Replay: intended send offsets, each with its URL, played once in order (open loop);
    /// with a segment, only that segment's entries.
    pub schedule: Option<Schedule>,
    /// This process's share of a load split over several agents (None: all of it).
    pub segment: Option<Segment>,
    /// Wait until the system clock reads this instant before the run's time zero.
    pub start_at: Option<SystemTime>,
    /// Test-only: write each value recorded into the latency histogram to this file.
    pub raw_log: Option<PathBuf>,
    /// Also write the JSON report into this file, synced before the process exits.
    pub report_file: Option<PathBuf>,
}

impl Options {
    /// Options for one URL with the command line's defaults (handy in tests).
    pub fn for_url(url: Url) -> Options {
        Options {
            urls: vec![WeightedUrl { url, weight: 1, varies: false, method: None }],
            schedule: None,
            connections: 10,
            protocol: Protocol::Http1,
            streams: 1,
            threads: 1,
            stop: StopAfter::Duration(Duration::from_secs(10)),
            rate: None,
            warmup: Duration::ZERO,
            keepalive: true,
            method: "GET".to_string(),
            headers: Vec::new(),
            body: None,
            compressed: false,
            decode: false,
            timeout: Duration::from_secs(30),
            insecure: false,
            tls_resume: true,
            seed: 1,
            allow_remote: false,
            lab_netns: None,
            max_error_rate: None,
            output: Output::Human,
            segment: None,
            start_at: None,
            raw_log: None,
            report_file: None,
        }
    }
}

/// A request method as the engine sends it: an upper-case token (GET, HEAD, PURGE).
pub fn is_method(text: &str) -> bool {
    !text.is_empty() && text.chars().all(|c| c.is_ascii_uppercase() || c == '-' || c == '_')
}

/// Parse a duration like `500ms`, `10s`, `2m`, `1h`, `250us` or a bare number of seconds.
pub fn parse_duration(text: &str) -> Result<Duration, String> {
    let t = text.trim();
    let split = t.find(|c: char| c.is_ascii_alphabetic()).unwrap_or(t.len());
    let (num, unit) = t.split_at(split);
    let value: f64 = num.parse().map_err(|_| "expected a duration like 500ms, 10s, 2m or 1h".to_string())?;
    let scale = match unit {
        "" | "s" => 1.0,
        "us" => 1e-6,
        "ms" => 1e-3,
        "m" | "min" => 60.0,
        "h" => 3600.0,
        _ => return Err(format!("unknown unit '{unit}' (use us, ms, s, m or h)")),
    };
    if !value.is_finite() || value < 0.0 {
        return Err("must be a non-negative duration".to_string());
    }
    Duration::try_from_secs_f64(value * scale).map_err(|_| "duration out of range".to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations() {
        let table = [
            ("500ms", Some(Duration::from_millis(500))),
            ("10s", Some(Duration::from_secs(10))),
            ("2m", Some(Duration::from_secs(120))),
            ("1h", Some(Duration::from_secs(3600))),
            ("250us", Some(Duration::from_micros(250))),
            ("1.5s", Some(Duration::from_millis(1500))),
            ("3", Some(Duration::from_secs(3))),
            ("0s", Some(Duration::ZERO)),
            ("10x", None),
            ("abc", None),
            ("-1s", None),
            ("", None),
        ];
        for (text, want) in table {
            assert_eq!(parse_duration(text).ok(), want, "{text}");
        }
    }

    #[test]
    fn segments() {
        let table = [
            ("0/1", Some((0, 1))),
            ("1/3", Some((1, 3))),
            ("1023/1024", Some((1023, 1024))),
            ("3/3", None),
            ("0/0", None),
            ("0/1025", None),
            ("-1/3", None),
            ("1/+3", None),
            ("1", None),
            ("1/3/5", None),
            ("/3", None),
            ("99999999999999999999999/3", None),
        ];
        for (text, want) in table {
            assert_eq!(Segment::parse(text).ok().map(|s| (s.index, s.of)), want, "{text}");
        }
    }

    #[test]
    fn unix_times() {
        let at = |s, ns| Some(SystemTime::UNIX_EPOCH + Duration::new(s, ns));
        let table = [
            ("1764412345.25", at(1_764_412_345, 250_000_000)),
            ("1764412345", at(1_764_412_345, 0)),
            ("1764412345.", at(1_764_412_345, 0)),
            ("1764412345.123456789123", at(1_764_412_345, 123_456_789)),
            ("0.000001", at(0, 1000)),
            ("", None),
            (".5", None),
            ("-1", None),
            ("1e9", None),
            ("12:00", None),
            ("1.2.3", None),
        ];
        for (text, want) in table {
            assert_eq!(parse_unix_time(text).ok(), want, "{text}");
        }
        let now = SystemTime::UNIX_EPOCH + Duration::from_secs(1_000_000);
        let s = Duration::from_secs;
        assert!(check_start_at(now + s(300), now).is_ok());
        assert!(check_start_at(now - s(3600), now).is_ok(), "the past: at once");
        let err = check_start_at(now + s(301), now).unwrap_err();
        assert!(err.contains("301.000 s in the future"), "{err}");
    }
}
