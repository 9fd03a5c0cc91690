//! The command line: clap stays here; a typed [`Options`] leaves.

use std::ffi::OsString;
use std::path::PathBuf;
use std::time::{Duration, SystemTime};

use clap::{ColorChoice, Parser};

use crate::error::SetupError;
use crate::options::{
    Options, Output, Protocol, Segment, StopAfter, WeightedUrl, check_start_at, is_method, parse_duration,
    parse_unix_time,
};
use crate::pick::parse_url_list;
use crate::schedule::Schedule;
use crate::target::Url;

/// How parsing ended when it did not produce options.
#[derive(Debug)]
pub enum Exit {
    /// Help or version text: print it to stdout, exit 0.
    Info(String),
    /// Bad usage: one line for stderr, exit 2.
    Usage(String),
}

/// The exit statuses, for `--help` (the same list is in README.md).
const EXIT_STATUSES: &str = "\
Exit status (the report is printed in every case but 2):
  0    the run did what was asked
  2    bad arguments or setup error (one line on stderr, nothing run)
  3    no request completed (e.g. every connect refused)
  4    the failed share of measured requests exceeded --max-error-rate
  130  interrupted by SIGINT, SIGTERM or SIGHUP (report has \"interrupted\": true)";

/// HTTP load generator: closed loop (like ab/wrk) or open loop (like wrk2).
#[derive(Parser, Debug)]
#[command(name = "stacklab-load", version, color = ColorChoice::Never, after_help = EXIT_STATUSES)]
struct Cli {
    /// URLs to load (same scheme, host and port; different paths allowed).
    #[arg(value_name = "URL")]
    urls: Vec<String>,
    /// Concurrent connections.
    #[arg(short = 'c', long, value_name = "N", default_value_t = 10,
          value_parser = clap::value_parser!(u32).range(1..))]
    connections: u32,
    /// Protocol: http/1.1, h2 (HTTP/2 over TLS, by ALPN; an https URL) or h2c (HTTP/2 in
    /// cleartext with prior knowledge; an http URL).
    #[arg(long, value_name = "PROTOCOL", default_value = "http/1.1", value_parser = parse_protocol)]
    protocol: Protocol,
    /// HTTP/2: concurrent streams per connection (h2load's -m); each is a virtual client.
    #[arg(long, value_name = "M", default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..=1000))]
    streams: u32,
    /// Stop after N measured requests.
    #[arg(short = 'n', long, value_name = "N", conflicts_with = "duration",
          value_parser = clap::value_parser!(u64).range(1..))]
    requests: Option<u64>,
    /// Stop after this measured time (e.g. 500ms, 10s, 2m); default 10s.
    #[arg(short = 'd', long, value_name = "DURATION", value_parser = positive_duration)]
    duration: Option<Duration>,
    /// Worker threads (default: number of cores, never more than connections).
    #[arg(long, value_name = "T", value_parser = clap::value_parser!(u32).range(1..))]
    threads: Option<u32>,
    /// Open loop: requests per second over all connections.
    #[arg(long, value_name = "R", value_parser = positive_rate)]
    rate: Option<f64>,
    /// Run load this long first, then reset all counters and histograms.
    #[arg(long, value_name = "DURATION", default_value = "0s", value_parser = parse_duration)]
    warmup: Duration,
    /// Open a new connection for every request (sends Connection: close).
    #[arg(long)]
    no_keepalive: bool,
    /// Extra request header, 'Name: value' (repeatable).
    #[arg(short = 'H', long = "header", value_name = "HEADER", value_parser = parse_header)]
    headers: Vec<(String, String)>,
    /// Request method.
    #[arg(short = 'm', long, default_value = "GET", value_parser = parse_method)]
    method: String,
    /// Send this file as the request body.
    #[arg(long, value_name = "FILE")]
    body: Option<PathBuf>,
    /// Send Accept-Encoding: gzip, deflate.
    #[arg(long)]
    compressed: bool,
    /// With --compressed: also count decoded body bytes.
    #[arg(long, requires = "compressed")]
    decode: bool,
    /// Per-request timeout.
    #[arg(long, value_name = "DURATION", default_value = "30s", value_parser = positive_duration)]
    timeout: Duration,
    /// Accept any TLS certificate (self-signed test servers).
    #[arg(long)]
    insecure: bool,
    /// Resume TLS sessions (the default).
    #[arg(long, overrides_with = "no_tls_resume")]
    tls_resume: bool,
    /// Do a full TLS handshake on every connection.
    #[arg(long, overrides_with = "tls_resume")]
    no_tls_resume: bool,
    /// File of URLs: one per line, optional integer weight, '#' comments.
    #[arg(long = "urls", value_name = "FILE")]
    url_file: Option<PathBuf>,
    /// Replay: "OFFSET_US URL_INDEX" per line (into the URL list), each request sent once
    /// at its offset from the start, in order, open loop; the run ends after the last.
    #[arg(long, value_name = "FILE", conflicts_with_all = ["requests", "duration", "rate", "warmup"])]
    schedule: Option<PathBuf>,
    /// Seed of the random URL choice.
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Exit 4 when more than this share (0 to 1) of measured requests failed.
    #[arg(long, value_name = "FRACTION", value_parser = fraction)]
    max_error_rate: Option<f64>,
    /// Allow a target that is not loopback (127.0.0.0/8, ::1, localhost).
    #[arg(long)]
    allow_remote: bool,
    /// Running inside the lab's network namespace NAME (stacklab-…, made by stacklab):
    /// targets in 198.18.0.0/15, which exist only inside such namespaces, are allowed.
    #[arg(long, value_name = "NAME")]
    lab_netns: Option<String>,
    /// This process is agent K of N sharing one load (0 <= K < N <= 1024): with --rate R
    /// (the rate of all N) it sends global arrivals K, K+N, K+2N, … of the one-agent
    /// schedule; with --schedule, the entries K, K+N, …; closed loop is unchanged.
    #[arg(long, value_name = "K/N", value_parser = Segment::parse)]
    segment: Option<Segment>,
    /// Set up, then wait until the system clock reads this instant (decimal seconds since
    /// the Unix epoch, at most 300 s ahead; a past one starts at once) before time zero.
    #[arg(long, value_name = "UNIX_SECONDS", value_parser = start_at)]
    start_at: Option<SystemTime>,
    /// Test only: write "INTENDED_US LATENCY_US" per value recorded into the latency histogram.
    #[arg(long, value_name = "FILE", hide = true)]
    raw_log: Option<PathBuf>,
    /// Also write the JSON report into FILE (whatever --json), over its start, cut to its
    /// length and synced before the exit; a FILE that cannot be opened is refused first.
    #[arg(long, value_name = "FILE")]
    report_file: Option<PathBuf>,
    /// Print one JSON document instead of the human summary.
    #[arg(long)]
    json: bool,
}

/// Parse a command line (program name first) into options.
pub fn parse<I, T>(args: I) -> Result<Options, Exit>
where
    I: IntoIterator<Item = T>,
    T: Into<OsString> + Clone,
{
    let cli = Cli::try_parse_from(args).map_err(clap_exit)?;
    cli.into_options().map_err(|e| Exit::Usage(format!("error: {e}")))
}

fn clap_exit(err: clap::Error) -> Exit {
    use clap::error::ErrorKind;
    let text = err.render().to_string();
    match err.kind() {
        ErrorKind::DisplayHelp | ErrorKind::DisplayVersion => Exit::Info(text),
        _ => Exit::Usage(text.lines().find(|l| !l.trim().is_empty()).unwrap_or("error: bad usage").to_string()),
    }
}

impl Cli {
    fn into_options(self) -> Result<Options, SetupError> {
        let mut urls = Vec::new();
        for text in &self.urls {
            let url = Url::parse(text).map_err(|e| SetupError::new("URL", text, e))?;
            urls.push(WeightedUrl { url, weight: 1, varies: false, method: None });
        }
        if let Some(path) = &self.url_file {
            let shown = path.display().to_string();
            let text = std::fs::read_to_string(path).map_err(|e| SetupError::new("--urls", &shown, e.to_string()))?;
            urls.extend(parse_url_list(&text).map_err(|e| SetupError::new("--urls", &shown, e))?);
        }
        if urls.is_empty() {
            return Err(SetupError::new("URL", "", "no URL given (pass URL... or --urls FILE)"));
        }
        let schedule = match &self.schedule {
            None => None,
            Some(path) => {
                let shown = path.display().to_string();
                let text =
                    std::fs::read_to_string(path).map_err(|e| SetupError::new("--schedule", &shown, e.to_string()))?;
                let all = Schedule::parse(&text, urls.len()).map_err(|e| SetupError::new("--schedule", &shown, e))?;
                Some(self.segment_of(all)?)
            }
        };
        let body = match &self.body {
            None => None,
            Some(p) => {
                Some(std::fs::read(p).map_err(|e| SetupError::new("--body", p.display().to_string(), e.to_string()))?)
            }
        };
        let connections = self.connections as usize;
        self.check_protocol(&urls)?;
        let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
        let threads = self.threads.map_or(cores, |t| t as usize).min(connections);
        let stop = match (self.requests, self.duration) {
            _ if schedule.is_some() => StopAfter::Requests(schedule.as_ref().map_or(0, |s| s.len() as u64)),
            (Some(n), _) => StopAfter::Requests(n),
            (None, Some(d)) => StopAfter::Duration(d),
            (None, None) => StopAfter::Duration(Duration::from_secs(10)),
        };
        Ok(Options {
            urls,
            connections,
            protocol: self.protocol,
            streams: self.streams as usize,
            threads,
            stop,
            rate: self.rate,
            warmup: self.warmup,
            keepalive: !self.no_keepalive,
            method: self.method,
            headers: self.headers,
            body,
            compressed: self.compressed,
            decode: self.decode,
            timeout: self.timeout,
            insecure: self.insecure,
            tls_resume: !self.no_tls_resume,
            seed: self.seed,
            allow_remote: self.allow_remote,
            lab_netns: self.lab_netns,
            max_error_rate: self.max_error_rate,
            output: if self.json { Output::Json } else { Output::Human },
            schedule,
            segment: self.segment,
            start_at: self.start_at,
            raw_log: self.raw_log,
            report_file: self.report_file,
        })
    }

    /// A replay's entries this segment plays (all of them without `--segment`); a segment
    /// that would play none is refused.
    fn segment_of(&self, schedule: Schedule) -> Result<Schedule, SetupError> {
        let Some(segment) = self.segment else { return Ok(schedule) };
        let mine = schedule.segment(segment);
        if mine.is_empty() {
            let shown = format!("{}/{}", segment.index, segment.of);
            let reason = format!("the schedule's {} entries leave this segment none", schedule.len());
            return Err(SetupError::new("--segment", shown, reason));
        }
        Ok(mine)
    }
}

impl Cli {
    /// h2 needs an https URL, h2c an http one; streams and HTTP/2's one long connection
    /// mean nothing to HTTP/1.1.
    fn check_protocol(&self, urls: &[WeightedUrl]) -> Result<(), SetupError> {
        use crate::target::Scheme;
        let name = self.protocol.name();
        let want = match self.protocol {
            Protocol::Http1 if self.streams > 1 => {
                return Err(SetupError::new("--streams", self.streams.to_string(), "needs --protocol h2 or h2c"));
            }
            Protocol::Http1 => return Ok(()),
            Protocol::H2 => Scheme::Https,
            Protocol::H2c => Scheme::Http,
        };
        if let Some(u) = urls.iter().find(|u| u.url.scheme != want) {
            let scheme = if want == Scheme::Https { "https" } else { "http" };
            return Err(SetupError::new("--protocol", name, format!("needs {scheme} URLs, got {}", u.url.text)));
        }
        if self.no_keepalive {
            return Err(SetupError::new("--no-keepalive", name, "HTTP/2 keeps its connections (use http/1.1)"));
        }
        if self.decode {
            return Err(SetupError::new("--decode", name, "decoding is for HTTP/1.1 only"));
        }
        Ok(())
    }
}

fn parse_protocol(text: &str) -> Result<Protocol, String> {
    [Protocol::Http1, Protocol::H2, Protocol::H2c]
        .into_iter()
        .find(|p| p.name() == text)
        .ok_or_else(|| "expected http/1.1, h2 or h2c".to_string())
}

fn positive_duration(text: &str) -> Result<Duration, String> {
    let d = parse_duration(text)?;
    if d.is_zero() { Err("must be greater than 0".to_string()) } else { Ok(d) }
}

fn positive_rate(text: &str) -> Result<f64, String> {
    let r: f64 = text.parse().map_err(|_| "expected a number of requests per second".to_string())?;
    if r.is_finite() && r > 0.0 { Ok(r) } else { Err("must be greater than 0".to_string()) }
}

fn start_at(text: &str) -> Result<SystemTime, String> {
    check_start_at(parse_unix_time(text)?, SystemTime::now())
}

fn fraction(text: &str) -> Result<f64, String> {
    let x: f64 = text.parse().map_err(|_| "expected a fraction like 0.01".to_string())?;
    if (0.0..=1.0).contains(&x) { Ok(x) } else { Err("must be between 0 and 1".to_string()) }
}

fn parse_header(text: &str) -> Result<(String, String), String> {
    let (name, value) = text.split_once(':').ok_or("expected 'Name: value' (no colon found)")?;
    let name = name.trim();
    let is_token = |c: char| c.is_ascii_alphanumeric() || "!#$%&'*+-.^_`|~".contains(c);
    if name.is_empty() || !name.chars().all(is_token) {
        return Err(format!("bad header name '{name}'"));
    }
    if value.contains(['\r', '\n']) {
        return Err("header value contains a line break".to_string());
    }
    Ok((name.to_string(), value.trim().to_string()))
}

fn parse_method(text: &str) -> Result<String, String> {
    if is_method(text) { Ok(text.to_string()) } else { Err("expected an upper-case method token like GET".to_string()) }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn usage(args: &[&str]) -> String {
        let mut full = vec!["stacklab-load"];
        full.extend_from_slice(args);
        match parse(full) {
            Err(Exit::Usage(line)) => line,
            other => panic!("expected usage error for {args:?}, got {other:?}"),
        }
    }

    #[test]
    fn bad_arguments_name_the_flag_on_one_line() {
        let table: &[(&[&str], &str)] = &[
            (&["ftp://127.0.0.1/"], "URL"),
            (&["not a url"], "URL"),
            (&["-n", "5", "-d", "1s", "http://127.0.0.1/"], "--requests"),
            (&["--rate", "0", "http://127.0.0.1/"], "--rate"),
            (&["-H", "NoColon", "http://127.0.0.1/"], "--header"),
            (&["-c", "0", "http://127.0.0.1/"], "--connections"),
            (&["--bogus", "http://127.0.0.1/"], "--bogus"),
            (&["-d", "10parsecs", "http://127.0.0.1/"], "--duration"),
            (&["--max-error-rate", "5%", "http://127.0.0.1/"], "--max-error-rate"),
            (&["--max-error-rate", "1.5", "http://127.0.0.1/"], "--max-error-rate"),
            (&["--schedule", "/nonexistent", "http://127.0.0.1/"], "--schedule"),
            (&["--schedule", "/nonexistent", "-d", "1s", "http://127.0.0.1/"], "--schedule"),
            (&["--schedule", "/nonexistent", "--rate", "5", "http://127.0.0.1/"], "--rate"),
            (&["--protocol", "h3", "http://127.0.0.1/"], "--protocol"),
            (&["--protocol", "h2", "http://127.0.0.1/"], "--protocol"),
            (&["--protocol", "h2c", "https://127.0.0.1/"], "--protocol"),
            (&["--streams", "4", "http://127.0.0.1/"], "--streams"),
            (&["--streams", "0", "--protocol", "h2c", "http://127.0.0.1/"], "--streams"),
            (&["--protocol", "h2c", "--no-keepalive", "http://127.0.0.1/"], "--no-keepalive"),
            (&["--segment", "3/3", "http://127.0.0.1/"], "--segment"),
            (&["--segment", "1", "http://127.0.0.1/"], "--segment"),
            (&["--segment", "0/2000", "http://127.0.0.1/"], "--segment"),
            (&["--start-at", "soon", "http://127.0.0.1/"], "--start-at"),
            (&["--start-at", "99999999999", "http://127.0.0.1/"], "--start-at"),
            (&[], "URL"),
        ];
        for (args, flag) in table {
            let line = usage(args);
            assert!(line.contains(flag), "{args:?}: {line}");
            assert!(!line.contains('\n'), "{args:?}: {line}");
        }
    }

    #[test]
    fn defaults_and_overrides() {
        let o = parse(["x", "-c", "4", "--threads", "16", "--no-tls-resume", "http://127.0.0.1:8/"]).unwrap();
        assert_eq!(o.threads, 4);
        assert!(!o.tls_resume && o.keepalive);
        assert_eq!(o.stop, StopAfter::Duration(Duration::from_secs(10)));
        let o = parse(["x", "--no-tls-resume", "--tls-resume", "-n", "7", "http://127.0.0.1:8/"]).unwrap();
        assert!(o.tls_resume);
        assert_eq!(o.stop, StopAfter::Requests(7));
        assert_eq!(o.max_error_rate, None);
        let o = parse(["x", "--max-error-rate", "0.05", "http://127.0.0.1:8/"]).unwrap();
        assert_eq!(o.max_error_rate, Some(0.05));
        assert_eq!((o.segment, o.start_at, o.raw_log), (None, None, None));
        let o = parse(["x", "--segment", "2/5", "--start-at", "1.5", "http://127.0.0.1:8/"]).unwrap();
        assert_eq!(o.segment, Some(Segment { index: 2, of: 5 }));
        assert_eq!(o.start_at, Some(SystemTime::UNIX_EPOCH + Duration::from_millis(1500)), "the past: accepted");
    }

    #[test]
    fn a_segment_plays_its_share_of_a_schedule() {
        let path = std::env::temp_dir().join(format!("stacklab-load-cli-segment-{}", std::process::id()));
        std::fs::write(&path, "0 0\n10 0\n20 0\n30 0\n40 0\n").unwrap();
        let shown = path.display().to_string();
        let o = parse(["x", "--schedule", &shown, "--segment", "1/3", "http://127.0.0.1:8/"]).unwrap();
        assert_eq!((o.schedule.as_ref().map(Schedule::len), o.stop), (Some(2), StopAfter::Requests(2)));
        let line = usage(&["--schedule", &shown, "--segment", "5/6", "http://127.0.0.1:8/"]);
        assert!(line.contains("--segment '5/6'") && line.contains("5 entries"), "{line}");
        std::fs::remove_file(&path).unwrap();
    }
}
