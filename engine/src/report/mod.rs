//! The report: one plain data structure, rendered as JSON or for humans.

mod file;
mod human;
mod json;

use std::collections::BTreeMap;
use std::time::SystemTime;

use base64::Engine as _;
use hdrhistogram::serialization::{Serializer, V2DeflateSerializer};
use serde::Serialize;

use crate::load::Measurement;
use crate::options::{Options, Output, StopAfter};
use crate::record::{ErrorClass, Recorder, Stats, summarize_in_flight, summarize_slots};

pub use file::ReportFile;
pub use human::render as render_human;
pub use json::render as render_json;

/// Version of the JSON contract; bump on any incompatible change (changelog in README.md).
pub const SCHEMA_VERSION: u32 = 5;
/// The `ended_early` reason when every connect was refused.
pub const ALL_REFUSED: &str = "all connections refused";
/// Percentiles listed in `latency_percentiles_us` and the human table.
pub const PERCENTILES: [f64; 10] = [50.0, 66.0, 75.0, 80.0, 90.0, 95.0, 98.0, 99.0, 99.9, 100.0];

#[derive(Debug, Clone, Serialize)]
pub struct Report {
    pub schema_version: u32,
    pub config: Config,
    /// When the run began, on the system clock (to merge the reports of several agents).
    pub start: Start,
    pub duration_s: f64,
    pub requests: Requests,
    pub status: BTreeMap<String, u64>,
    pub status_classes: BTreeMap<String, u64>,
    pub rps: f64,
    pub bytes: Bytes,
    pub latency_us: Stats,
    pub latency_uncorrected_us: Stats,
    pub connect_us: Stats,
    pub tls_us: Stats,
    pub ttfb_us: Stats,
    pub latency_percentiles_us: Vec<Percentile>,
    /// The protocol the responses came in: http/1.1, h2 (ALPN chose it) or h2c; null
    /// when no response completed (nothing shows a protocol worked).
    pub protocol: Option<String>,
    pub tls: Tls,
    pub connections_opened: u64,
    pub connections: Connections,
    pub in_flight: InFlight,
    pub timeseries: Vec<Point>,
    pub histogram: String,
    /// The time to first byte and connect histograms, encoded as `histogram`.
    pub histograms: Histograms,
    pub engine: Engine,
    pub interrupted: bool,
    /// Why the run stopped before its stop condition (absent when it did not).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ended_early: Option<String>,
}

#[derive(Debug, Clone, Serialize)]
pub struct Config {
    pub urls: Vec<UrlEntry>,
    pub connections: usize,
    /// The protocol asked for: http/1.1, h2 or h2c.
    pub protocol: String,
    /// HTTP/2 streams per connection (1 for HTTP/1.1); slots = connections × streams.
    pub streams: usize,
    pub threads: usize,
    pub requests: Option<u64>,
    pub duration_s: Option<f64>,
    pub rate: Option<f64>,
    pub warmup_s: f64,
    pub keepalive: bool,
    pub method: String,
    pub headers: Vec<String>,
    pub body_bytes: Option<usize>,
    pub compressed: bool,
    pub decode: bool,
    pub timeout_s: f64,
    pub insecure: bool,
    pub tls_resume: bool,
    pub seed: u64,
    pub allow_remote: bool,
    pub max_error_rate: Option<f64>,
    /// Replay (`--schedule`): null unless given; with a segment, that segment's entries.
    pub schedule: Option<ScheduleEcho>,
    /// This process's share of a load over several agents (`--segment`): null unless given.
    pub segment: Option<SegmentEcho>,
}

/// `--segment K/N`: agent `index` of `of`.
#[derive(Debug, Clone, Serialize)]
pub struct SegmentEcho {
    pub index: usize,
    pub of: usize,
}

/// The run's time zero and first send on the system clock, in µs since the Unix epoch.
#[derive(Debug, Clone, Serialize)]
pub struct Start {
    /// The instant `--start-at` asked for (null without it).
    pub asked_unix_us: Option<u64>,
    /// The system clock at the run's time zero (warm-up included), read with the
    /// monotonic clock that times everything else.
    pub unix_us: u64,
    /// When the first request (warm-up included) began to be written: `unix_us` plus its
    /// monotonic time from time zero (null when none was).
    pub first_send_unix_us: Option<u64>,
}

/// More histograms in the form of `histogram`, for exact merging.
#[derive(Debug, Clone, Serialize)]
pub struct Histograms {
    pub ttfb: String,
    pub connect: String,
}

#[derive(Debug, Clone, Serialize)]
pub struct UrlEntry {
    pub url: String,
    pub weight: u32,
    pub varies: bool,
    /// The method sent to this URL: its own from the URL list, else the run's.
    pub method: String,
}

/// What a replay schedule held: its requests and the time from its first to its last.
#[derive(Debug, Clone, Serialize)]
pub struct ScheduleEcho {
    pub requests: usize,
    pub span_s: f64,
}

#[derive(Debug, Clone, Serialize)]
pub struct Requests {
    pub completed: u64,
    pub failed: u64,
    /// HTTP/2: requests sent again on a new connection, the server having refused them
    /// unprocessed or closed before answering (counted once, as completed or failed).
    pub retried: u64,
    pub errors: BTreeMap<String, u64>,
}

#[derive(Debug, Clone, Serialize)]
pub struct Bytes {
    pub total: u64,
    pub body: u64,
    pub decoded_body: Option<u64>,
}

#[derive(Debug, Clone, Serialize)]
pub struct Percentile {
    pub percentile: f64,
    pub value: u64,
}

#[derive(Debug, Clone, Serialize)]
pub struct Tls {
    pub protocol: Option<String>,
    pub cipher: Option<String>,
    /// What the server chose by ALPN (null: nothing).
    pub alpn: Option<String>,
    pub handshakes: Option<u64>,
    pub resumed: Option<u64>,
}

/// Per connection slot (one of the `-c` virtual clients) in the measured phase.
#[derive(Debug, Clone, Serialize)]
pub struct Connections {
    pub slots: u64,
    pub requests_per_slot: PerSlot,
    pub idle_slots: u64,
    pub longest_wait_us: Spread,
}

/// Requests completed per slot (nearest rank, as the latency percentiles).
#[derive(Debug, Clone, Serialize)]
pub struct PerSlot {
    pub min: u64,
    pub p1: u64,
    pub median: u64,
    pub max: u64,
}

#[derive(Debug, Clone, Serialize)]
pub struct Spread {
    pub median: u64,
    pub max: u64,
}

/// Requests in flight when the run ended.
#[derive(Debug, Clone, Serialize)]
pub struct InFlight {
    pub count: u64,
    pub age_us_max: u64,
    pub age_us_median: u64,
    pub older_than_run: u64,
}

#[derive(Debug, Clone, Serialize)]
pub struct Point {
    /// Start of the bucket, seconds since the measured phase began.
    pub t_s: u64,
    /// Bucket width: 1 s, coarser (2, 4, … s) in runs longer than an hour.
    pub width_s: u64,
    pub completed: u64,
    pub errors: u64,
    pub p50_us: u64,
    pub p99_us: u64,
    /// The completed requests' mean corrected latency (0 when none completed): a
    /// capacity step's windows, whose spread sizes how correlated its latencies are.
    pub mean_us: f64,
    pub bytes: u64,
}

#[derive(Debug, Clone, Serialize)]
pub struct Engine {
    pub version: String,
    pub cpu_user_s: f64,
    pub cpu_sys_s: f64,
}

impl Report {
    pub fn new(options: &Options, m: &Measurement) -> Report {
        let r = &m.recorder;
        let secs = m.duration.as_secs_f64();
        let is_tls = options.urls.first().is_some_and(|u| u.url.scheme == crate::target::Scheme::Https);
        Report {
            schema_version: SCHEMA_VERSION,
            config: config(options),
            start: start(options, m),
            duration_s: round6(secs),
            requests: Requests {
                completed: r.completed,
                failed: r.failed(),
                retried: r.retried,
                errors: ErrorClass::ALL.iter().map(|c| (c.name().to_string(), r.errors[*c as usize])).collect(),
            },
            status: (0..r.status.len()).filter(|&s| r.status[s] > 0).map(|s| (s.to_string(), r.status[s])).collect(),
            status_classes: status_classes(&r.status),
            rps: if secs > 0.0 { round3(r.completed as f64 / secs) } else { 0.0 },
            bytes: Bytes {
                total: r.bytes_total,
                body: r.bytes_body,
                decoded_body: options.decode.then_some(r.bytes_decoded),
            },
            latency_us: Stats::of(&r.latency),
            latency_uncorrected_us: Stats::of(&r.latency_uncorrected),
            connect_us: Stats::of(&r.connect),
            tls_us: Stats::of(&r.tls),
            ttfb_us: Stats::of(&r.ttfb),
            latency_percentiles_us: PERCENTILES
                .iter()
                .map(|&p| Percentile {
                    percentile: p,
                    value: if r.latency.is_empty() { 0 } else { r.latency.value_at_percentile(p) },
                })
                .collect(),
            protocol: (r.completed > 0).then(|| options.protocol.name().to_string()),
            tls: Tls {
                protocol: r.tls_info.protocol.clone(),
                cipher: r.tls_info.cipher.clone(),
                alpn: r.tls_info.alpn.clone(),
                handshakes: is_tls.then_some(r.tls_info.handshakes),
                resumed: is_tls.then_some(r.tls_info.resumed),
            },
            connections_opened: r.connections_opened,
            connections: connections(r),
            in_flight: in_flight(r, m.duration),
            timeseries: timeseries(r),
            histogram: serialize_histogram(&r.latency),
            histograms: Histograms { ttfb: serialize_histogram(&r.ttfb), connect: serialize_histogram(&r.connect) },
            engine: engine(),
            interrupted: m.interrupted,
            ended_early: m.all_refused.then(|| ALL_REFUSED.to_string()),
        }
    }
}

fn connections(r: &Recorder) -> Connections {
    let s = summarize_slots(&r.slots);
    Connections {
        slots: s.slots,
        requests_per_slot: PerSlot {
            min: s.requests_min,
            p1: s.requests_p1,
            median: s.requests_median,
            max: s.requests_max,
        },
        idle_slots: s.idle_slots,
        longest_wait_us: Spread { median: s.longest_wait_median_us, max: s.longest_wait_max_us },
    }
}

fn in_flight(r: &Recorder, run: std::time::Duration) -> InFlight {
    let f = summarize_in_flight(&r.slots, run);
    InFlight {
        count: f.count,
        age_us_max: f.age_max_us,
        age_us_median: f.age_median_us,
        older_than_run: f.older_than_run,
    }
}

/// Print the report to stdout in the chosen format.
pub fn print(report: &Report, output: Output) {
    match output {
        Output::Json => println!("{}", render_json(report)),
        Output::Human => print!("{}", render_human(report)),
    }
}

fn config(o: &Options) -> Config {
    Config {
        urls: o
            .urls
            .iter()
            .map(|u| UrlEntry {
                url: u.url.text.clone(),
                weight: u.weight,
                varies: u.varies,
                method: u.method.clone().unwrap_or_else(|| o.method.clone()),
            })
            .collect(),
        connections: o.connections,
        protocol: o.protocol.name().to_string(),
        streams: o.streams,
        threads: o.threads.clamp(1, o.connections.max(1)),
        requests: match o.stop {
            StopAfter::Requests(n) => Some(n),
            StopAfter::Duration(_) => None,
        },
        duration_s: match o.stop {
            StopAfter::Requests(_) => None,
            StopAfter::Duration(d) => Some(d.as_secs_f64()),
        },
        rate: o.rate,
        warmup_s: o.warmup.as_secs_f64(),
        keepalive: o.keepalive,
        method: o.method.clone(),
        headers: o.headers.iter().map(|(n, v)| format!("{n}: {v}")).collect(),
        body_bytes: o.body.as_ref().map(Vec::len),
        compressed: o.compressed,
        decode: o.decode,
        timeout_s: o.timeout.as_secs_f64(),
        insecure: o.insecure,
        tls_resume: o.tls_resume,
        seed: o.seed,
        allow_remote: o.allow_remote,
        max_error_rate: o.max_error_rate,
        schedule: o.schedule.as_ref().map(|s| ScheduleEcho { requests: s.len(), span_s: s.span().as_secs_f64() }),
        segment: o.segment.map(|s| SegmentEcho { index: s.index, of: s.of }),
    }
}

/// Wall-clock times from the one system-clock reading at time zero plus monotonic offsets:
/// a clock stepped during the run moves none of them apart.
fn start(o: &Options, m: &Measurement) -> Start {
    let unix_us = |t: SystemTime| t.duration_since(SystemTime::UNIX_EPOCH).map_or(0, |d| d.as_micros() as u64);
    Start {
        asked_unix_us: o.start_at.map(unix_us),
        unix_us: unix_us(m.started_wall),
        first_send_unix_us: m.first_send.map(|d| unix_us(m.started_wall + d)),
    }
}

fn status_classes(status: &[u64]) -> BTreeMap<String, u64> {
    let mut classes = BTreeMap::new();
    for (code, &count) in status.iter().enumerate() {
        if count > 0 {
            *classes.entry(format!("{}xx", code / 100)).or_insert(0) += count;
        }
    }
    classes
}

fn timeseries(r: &Recorder) -> Vec<Point> {
    let width_s = r.series.width_s();
    r.series
        .buckets()
        .iter()
        .enumerate()
        .map(|(t, s)| {
            let q = |q: f64| if s.latency.is_empty() { 0 } else { s.latency.value_at_quantile(q) };
            Point {
                t_s: t as u64 * width_s,
                width_s,
                completed: s.completed,
                errors: s.errors,
                p50_us: q(0.5),
                p99_us: q(0.99),
                mean_us: if s.completed == 0 { 0.0 } else { s.latency_sum_us as f64 / s.completed as f64 },
                bytes: s.bytes,
            }
        })
        .collect()
}

/// The corrected latency histogram in the standard compressed form every
/// HdrHistogram library reads (V2 + deflate, cookie 0x1c849314), standard base64.
pub fn serialize_histogram(h: &hdrhistogram::Histogram<u64>) -> String {
    let mut bytes = Vec::new();
    V2DeflateSerializer::new().serialize(h, &mut bytes).expect("serializing to memory cannot fail");
    base64::engine::general_purpose::STANDARD.encode(bytes)
}

/// Read a histogram back from the report's `histogram` field (either V2 form:
/// schema 1 reports hold the uncompressed one).
pub fn deserialize_histogram(text: &str) -> Option<hdrhistogram::Histogram<u64>> {
    let bytes = base64::engine::general_purpose::STANDARD.decode(text).ok()?;
    hdrhistogram::serialization::Deserializer::new().deserialize(&mut bytes.as_slice()).ok()
}

fn engine() -> Engine {
    // SAFETY: getrusage only writes into the struct we pass.
    let usage = unsafe {
        let mut usage: libc::rusage = std::mem::zeroed();
        libc::getrusage(libc::RUSAGE_SELF, &mut usage);
        usage
    };
    let secs = |tv: libc::timeval| round6(tv.tv_sec as f64 + tv.tv_usec as f64 / 1e6);
    Engine {
        version: env!("CARGO_PKG_VERSION").to_string(),
        cpu_user_s: secs(usage.ru_utime),
        cpu_sys_s: secs(usage.ru_stime),
    }
}

fn round3(x: f64) -> f64 {
    (x * 1e3).round() / 1e3
}

fn round6(x: f64) -> f64 {
    (x * 1e6).round() / 1e6
}
