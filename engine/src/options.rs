//! Typed options: what crosses from the command line into the library.

use std::time::Duration;

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
    /// Replay: intended send offsets, each with its URL, played once in order (open loop).
    pub schedule: Option<Schedule>,
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
}
