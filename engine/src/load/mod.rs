//! The load stage: plan the run, start one worker per thread, join, merge.

mod alarm;
mod exchange;
mod h2;
pub mod pacer;
pub mod refused;
pub mod start;
pub mod stop;
mod tls;
mod transport;
mod worker;

use std::sync::atomic::{AtomicBool, AtomicU64};
use std::time::{Duration, Instant, SystemTime};

use crate::error::SetupError;
use crate::http::{build_h2_request, build_request_as};
use crate::options::{Options, Protocol, Segment, StopAfter};
use crate::pick::Chooser;
use crate::record::Recorder;
use crate::schedule::Schedule;
use crate::target::{self, Scheme, Target};
use stop::{Stop, split_budget};
pub use tls::TlsPlan;
use worker::{WorkerPlan, run_worker};

/// Everything workers share, read-only (except the first-length cells).
pub struct Plan<'a> {
    pub target: Target,
    pub requests: Vec<Vec<u8>>,
    pub chooser: Chooser,
    /// Body length of the first response per URL (u64::MAX until known).
    pub first_lengths: Vec<AtomicU64>,
    /// Per URL: its length varies by design, so it is never a length mismatch.
    pub varies: Vec<bool>,
    pub tls: Option<TlsPlan>,
    pub connections: usize,
    pub protocol: Protocol,
    /// HTTP/2 streams per connection (1 for HTTP/1.1).
    pub streams: usize,
    /// Virtual clients: connections × streams. Pacers and schedules are per slot.
    pub slots: usize,
    /// HTTP/2: each URL's request (HTTP/1.1 sends `requests`' bytes instead).
    pub h2_requests: Vec<http::Request<()>>,
    /// HTTP/2: the request body, shared by every stream.
    pub body: Option<bytes::Bytes>,
    /// Open loop: the rate of the whole load (of every agent, with a segment).
    pub rate: Option<f64>,
    /// This process's share of the load (the whole of it without `--segment`).
    pub segment: Segment,
    /// Keep each latency recorded (test-only `--raw-log`).
    pub raw_log: bool,
    pub keepalive: bool,
    /// Per URL: its method is HEAD, so its response has no body.
    pub no_body: Vec<bool>,
    /// Replay: each request's intended time and URL, instead of the chooser and pacer.
    pub schedule: Option<Schedule>,
    pub decode: bool,
    pub timeout: Duration,
    pub interrupt: &'a AtomicBool,
}

impl<'a> Plan<'a> {
    /// Validate and prepare: resolve the target, build request bytes once.
    pub fn new(options: &Options, interrupt: &'a AtomicBool) -> Result<Plan<'a>, SetupError> {
        if options.connections == 0 {
            return Err(SetupError::new("--connections", "0", "must be at least 1"));
        }
        let target = target::resolve(&options.urls, options.allow_remote, options.lab_netns.as_deref())?;
        // h2 offers http/1.1 too, so that a server without HTTP/2 says so by its choice
        // (the run then fails every request, and tls.alpn shows what it chose).
        let alpn: &'static [&'static [u8]] =
            if options.protocol == Protocol::H2 { &[b"h2", b"http/1.1"] } else { &[b"http/1.1"] };
        let tls = match target.scheme {
            Scheme::Https => Some(TlsPlan::new(&target.host, options.insecure, options.tls_resume, alpn)?),
            Scheme::Http => None,
        };
        let h2_requests = if options.protocol.is_h2() {
            options
                .urls
                .iter()
                .map(|u| build_h2_request(method(u, options), &u.url, options))
                .collect::<Result<Vec<_>, String>>()
                .map_err(|e| SetupError::new("--header", "", format!("not a valid HTTP/2 request: {e}")))?
        } else {
            Vec::new()
        };
        Ok(Plan {
            requests: options.urls.iter().map(|u| build_request_as(method(u, options), &u.url, options)).collect(),
            no_body: options.urls.iter().map(|u| method(u, options) == "HEAD").collect(),
            schedule: options.schedule.clone(),
            chooser: Chooser::new(options.urls.iter().map(|u| u.weight)),
            first_lengths: options.urls.iter().map(|_| AtomicU64::new(u64::MAX)).collect(),
            varies: options.urls.iter().map(|u| u.varies).collect(),
            target,
            tls,
            connections: options.connections,
            protocol: options.protocol,
            streams: options.streams,
            slots: options.connections * options.streams,
            h2_requests,
            body: options.body.clone().map(bytes::Bytes::from),
            rate: options.rate,
            segment: options.segment.unwrap_or(Segment::WHOLE),
            raw_log: options.raw_log.is_some(),
            keepalive: options.keepalive,
            decode: options.decode,
            timeout: options.timeout,
            interrupt,
        })
    }
}

/// A URL's method: its own (a URL list line's), else the run's.
fn method<'o>(url: &'o crate::options::WeightedUrl, options: &'o Options) -> &'o str {
    url.method.as_deref().unwrap_or(&options.method)
}

/// What a run measured, merged over workers.
pub struct Measurement {
    pub recorder: Recorder,
    /// The system clock at the run's time zero (read once, with the monotonic clock).
    pub started_wall: SystemTime,
    /// When the first request (warm-up included) began to be written, from time zero.
    pub first_send: Option<Duration>,
    /// Wall time of the measured phase (after warm-up).
    pub duration: Duration,
    pub interrupted: bool,
    /// A worker stopped before the stop condition because every one of its
    /// slots had been refused for [`refused::GIVE_UP_AFTER`].
    pub all_refused: bool,
}

/// Run the load described by `options` until its stop condition or `interrupt`.
pub fn run(options: &Options, interrupt: &AtomicBool) -> Result<Measurement, SetupError> {
    let plan = Plan::new(options, interrupt)?;
    let wanted = options.connections as u64 + 64;
    let limit = raise_fd_limit(wanted);
    if limit < wanted {
        let reason = format!("needs about {wanted} file descriptors but the limit is {limit} (raise ulimit -n)");
        return Err(SetupError::new("--connections", options.connections.to_string(), reason));
    }
    let threads = options.threads.clamp(1, options.connections);
    // Connections are dealt to threads; each brings its streams' slots (HTTP/2).
    let sizes: Vec<usize> = (0..threads)
        .map(|t| (options.connections / threads + usize::from(t < options.connections % threads)) * plan.streams)
        .collect();
    // Everything is set up: wait for the agreed instant, then take time zero on both clocks.
    if let Some(at) = options.start_at {
        start::wait_until(at, interrupt);
    }
    let (start, started_wall) = (Instant::now(), SystemTime::now());
    let measure_from = start + options.warmup;
    let warmup_end = (!options.warmup.is_zero()).then_some(measure_from);
    let stops: Vec<Stop> = match (options.stop, &options.schedule) {
        // A schedule's requests go to the slots in turn: each worker's share is its slots'.
        (_, Some(schedule)) => slot_ranges(&sizes)
            .map(|slots| Stop::Requests(slots.map(|k| schedule.per_slot(k, plan.slots)).sum()))
            .collect(),
        (StopAfter::Requests(n), None) => split_budget(n, &sizes).into_iter().map(Stop::Requests).collect(),
        (StopAfter::Duration(d), None) => vec![Stop::Deadline(measure_from + d); threads],
    };
    let plans: Vec<WorkerPlan> = slot_ranges(&sizes)
        .zip(stops)
        .enumerate()
        .map(|(t, (slots, stop))| {
            let seed = options.seed.wrapping_add((t as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15));
            WorkerPlan { slots, stop, start, warmup_end, seed }
        })
        .collect();
    let results: Vec<std::io::Result<worker::WorkerEnd>> = std::thread::scope(|scope| {
        let handles: Vec<_> = plans
            .into_iter()
            .map(|wp| {
                let plan = &plan;
                scope.spawn(move || run_worker(plan, wp))
            })
            .collect();
        handles.into_iter().map(|h| h.join().expect("worker thread panicked")).collect()
    });
    let mut merged = Recorder::new(measure_from, 0);
    let mut end = start;
    let mut all_refused = false;
    let mut first_send: Option<Instant> = None;
    for result in results {
        let worker = result.map_err(|e| SetupError::new("event loop", "epoll", e.to_string()))?;
        merged.merge(&worker.rec);
        end = end.max(worker.stopped);
        all_refused |= worker.all_refused;
        first_send = first_send.into_iter().chain(worker.first_send).min();
    }
    Ok(Measurement {
        recorder: merged,
        started_wall,
        first_send: first_send.map(|at| at.saturating_duration_since(start)),
        duration: end.saturating_duration_since(measure_from),
        interrupted: interrupt.load(std::sync::atomic::Ordering::Relaxed),
        all_refused,
    })
}

/// The global slot indices of each worker, in order.
fn slot_ranges(sizes: &[usize]) -> impl Iterator<Item = std::ops::Range<usize>> + '_ {
    sizes.iter().scan(0, |first, &size| {
        let slots = *first..*first + size;
        *first += size;
        Some(slots)
    })
}

/// Each connection needs a descriptor: lift the soft limit toward the hard
/// one so that `-c 5000` does not fail on the usual 1024 default. Returns
/// the soft limit in force.
fn raise_fd_limit(wanted: u64) -> u64 {
    // SAFETY: getrlimit/setrlimit with a valid, initialised struct.
    unsafe {
        let mut limit: libc::rlimit = std::mem::zeroed();
        if libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit) != 0 {
            return u64::MAX; // unknown: let the run find out
        }
        if (limit.rlim_cur as u64) < wanted {
            limit.rlim_cur = (wanted as libc::rlim_t).min(limit.rlim_max);
            if libc::setrlimit(libc::RLIMIT_NOFILE, &limit) != 0 {
                libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit);
            }
        }
        limit.rlim_cur as u64
    }
}
