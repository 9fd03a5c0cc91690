//! One worker thread: an event loop over its connections, composed of a stop
//! condition, a pacer per connection and a recorder. Every mode runs this loop.

use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use mio::{Events, Poll};

use super::Plan;
use super::alarm::Alarm;
use super::h2::{H2, Stream};
use super::pacer::Pacer;
use super::refused::Refusals;
use super::stop::Stop;
use super::transport::Transport;
use crate::http::ResponseParser;
use crate::pick::Rng;
use crate::record::{ErrorClass, Recorder};

/// A paced request this close to its time goes now rather than after a wake-up.
const EARLY: Duration = Duration::from_micros(20);
/// Token of the worker's alarm (connections use their slot index).
const ALARM: mio::Token = mio::Token(usize::MAX);
/// The loop looks at the interrupt flag at least this often.
const MAX_SLEEP: Duration = Duration::from_millis(50);
/// One read buffer per worker, shared by its connections.
const READ_BUFFER: usize = 256 * 1024;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Phase {
    Idle,
    Connecting,
    Handshaking,
    Writing,
    Reading,
}

/// One connection slot: its socket (when open) and the request in flight.
pub(super) struct Conn {
    pub pacer: Pacer,
    /// Its global index (a schedule's entries are dealt by it).
    pub slot: usize,
    pub sent: u64,
    pub transport: Option<Transport>,
    pub phase: Phase,
    pub url: usize,
    pub written: usize,
    /// A readable edge arrived while still writing.
    pub readable_early: bool,
    pub intended: Instant,
    pub start: Instant,
    pub connected: Instant,
    pub sent_at: Instant,
    pub first_byte: Instant,
    pub deadline: Instant,
    pub parser: ResponseParser,
    /// Failed connects in a row, and no new connect before `retry_at`.
    pub refusals: Refusals,
    pub retry_at: Instant,
    /// Its idle kept-alive connection received bytes no request asked for: the next
    /// request fails as a bad response (checked from the event, so no syscall per request).
    pub unasked: bool,
    /// HTTP/2: its stream in flight (the session owns the connection).
    pub stream: Option<Stream>,
    /// HTTP/2: times its request was refused unprocessed and sent again.
    pub retries: u8,
}

/// What one worker is told to do.
pub struct WorkerPlan {
    /// Global indices of this worker's connections (for pacer phases).
    pub slots: std::ops::Range<usize>,
    pub stop: Stop,
    pub start: Instant,
    pub warmup_end: Option<Instant>,
    pub seed: u64,
}

pub(super) struct Worker<'a> {
    pub plan: &'a Plan<'a>,
    pub poll: Poll,
    pub conns: Vec<Conn>,
    pub buf: Vec<u8>,
    pub rec: Recorder,
    pub rng: Rng,
    pub tls_config: Option<std::sync::Arc<rustls::ClientConfig>>,
    /// HTTP/2 runs: the sessions (connections) its slots share.
    pub h2: Option<H2>,
    stop: Stop,
    start: Instant,
    warmup_end: Option<Instant>,
    started: u64,
    pub in_flight: usize,
    timers: BinaryHeap<Reverse<(Instant, usize)>>,
    alarm: Option<Alarm>,
    pub ready: Vec<usize>,
    next_sweep: Instant,
    sweep_every: Duration,
    /// Every slot was refused for a while: stop before the stop condition.
    all_refused: bool,
    /// When its first request (warm-up included) began to be written.
    pub first_send: Option<Instant>,
}

/// What one worker measured, and how it ended.
pub struct WorkerEnd {
    pub rec: Recorder,
    pub stopped: Instant,
    /// Ended early because every slot's connects were refused.
    pub all_refused: bool,
    /// When its first request (warm-up included) began to be written.
    pub first_send: Option<Instant>,
}

/// Run one worker to its end.
pub fn run_worker(plan: &Plan<'_>, wp: WorkerPlan) -> std::io::Result<WorkerEnd> {
    let mut events = Events::with_capacity(1024);
    let mut worker = Worker::new(plan, wp)?;
    worker.run(&mut events);
    let stopped = Instant::now();
    worker.record_in_flight(stopped);
    Ok(WorkerEnd { rec: worker.rec, stopped, all_refused: worker.all_refused, first_send: worker.first_send })
}

impl<'a> Worker<'a> {
    fn new(plan: &'a Plan<'a>, wp: WorkerPlan) -> std::io::Result<Worker<'a>> {
        let conns = wp
            .slots
            .clone()
            .map(|k| Conn {
                pacer: Pacer::for_connection(plan.rate, k, plan.slots, plan.segment),
                slot: k,
                sent: 0,
                transport: None,
                phase: Phase::Idle,
                url: 0,
                written: 0,
                readable_early: false,
                intended: wp.start,
                start: wp.start,
                connected: wp.start,
                sent_at: wp.start,
                first_byte: wp.start,
                deadline: wp.start,
                parser: ResponseParser::new(plan.decode),
                refusals: Refusals::default(),
                retry_at: wp.start,
                unasked: false,
                stream: None,
                retries: 0,
            })
            .collect::<Vec<_>>();
        let poll = Poll::new()?;
        let paced = plan.rate.is_some() || plan.schedule.is_some();
        let alarm = if paced { Some(Alarm::new(poll.registry(), ALARM)?) } else { None };
        let sweep_every = (plan.timeout / 10).clamp(Duration::from_millis(1), Duration::from_millis(100));
        let mut rec = Recorder::new(wp.start, wp.slots.len());
        if plan.raw_log {
            rec.keep_raw_log(wp.start);
        }
        Ok(Worker {
            plan,
            poll,
            conns,
            buf: vec![0; READ_BUFFER],
            rec,
            rng: Rng::new(wp.seed),
            tls_config: plan.tls.as_ref().map(|t| t.client_config()),
            h2: plan.protocol.is_h2().then(|| H2::new(plan, wp.slots.len())),
            stop: wp.stop,
            start: wp.start,
            warmup_end: wp.warmup_end,
            started: 0,
            in_flight: 0,
            timers: BinaryHeap::new(),
            alarm,
            ready: Vec::new(),
            next_sweep: wp.start + sweep_every,
            sweep_every,
            all_refused: false,
            first_send: None,
        })
    }

    fn run(&mut self, events: &mut Events) {
        let now = Instant::now();
        for i in 0..self.conns.len() {
            self.next(i, now);
        }
        loop {
            let now = Instant::now();
            if self.warmup_end.is_some_and(|w| now >= w) {
                self.end_warmup();
            }
            if self.plan.interrupt.load(Ordering::Relaxed) || self.finished(now) || self.all_refused {
                break;
            }
            self.fire_timers(now);
            let ready = std::mem::take(&mut self.ready);
            for &i in &ready {
                self.next(i, now);
            }
            if now >= self.next_sweep {
                self.sweep_timeouts(now);
                self.all_refused = self.conns.iter().all(|c| c.refusals.given_up(now));
                self.next_sweep = now + self.sweep_every;
            }
            if self.h2.is_some() {
                self.h2_run_woken();
            }
            if let (Some(alarm), Some(Reverse((at, _)))) = (self.alarm.as_mut(), self.timers.peek()) {
                alarm.arm(*at, now);
            }
            let timeout = self.poll_timeout(now);
            if let Err(e) = self.poll.poll(events, Some(timeout))
                && e.kind() != std::io::ErrorKind::Interrupted
            {
                break;
            }
            for event in events.iter() {
                match event.token() {
                    ALARM => self.alarm.as_mut().map_or((), Alarm::rang),
                    token if self.h2.is_some() => self.h2_event(token.0, event),
                    token => self.on_event(token.0, event),
                }
            }
        }
        if self.warmup_end.is_some() {
            self.end_warmup(); // stopped during warm-up: nothing was measured
        }
    }

    fn finished(&self, now: Instant) -> bool {
        self.warmup_end.is_none() && self.stop.finished(self.started, self.in_flight, now)
    }

    fn may_start(&self, now: Instant) -> bool {
        if self.warmup_end.is_some() {
            // During warm-up only time limits the load; -n counts measured requests.
            return self.stop.deadline().is_none_or(|d| now < d);
        }
        self.stop.may_start(self.started, now)
    }

    /// Warm-up is over: reset, not filter. Requests in flight count as measured.
    fn end_warmup(&mut self) {
        let origin = self.warmup_end.take().unwrap_or(self.start);
        self.rec.reset(origin);
        self.started = self.in_flight as u64;
    }

    /// The slot is free: start its next request now or when its pacer (and
    /// its back-off after a failed connect) says.
    pub(super) fn next(&mut self, i: usize, now: Instant) {
        if !self.may_start(now) || self.slot_done(i) {
            return;
        }
        let intended = self.intended(i, now);
        let at = intended.max(self.conns[i].retry_at);
        if at <= now + EARLY {
            self.begin(i, now, intended);
        } else {
            self.timers.push(Reverse((at, i)));
        }
    }

    /// The slot has sent every request a schedule dealt it.
    fn slot_done(&self, i: usize) -> bool {
        self.scheduled(i).is_none() && self.plan.schedule.is_some()
    }

    /// Slot `i`'s next entry of the schedule, when the run replays one.
    fn scheduled(&self, i: usize) -> Option<crate::schedule::Entry> {
        let c = &self.conns[i];
        self.plan.schedule.as_ref()?.entry(c.slot, self.plan.slots, c.sent)
    }

    /// When slot `i`'s next request should go: now in closed loop, its
    /// scheduled time in open loop or replay (latency counts from there).
    fn intended(&self, i: usize, now: Instant) -> Instant {
        if let Some(entry) = self.scheduled(i) {
            return self.start + entry.at;
        }
        let conn = &self.conns[i];
        self.start + conn.pacer.pace(now.saturating_duration_since(self.start), conn.sent).intended
    }

    fn fire_timers(&mut self, now: Instant) {
        while let Some(&Reverse((at, i))) = self.timers.peek() {
            if at > now + EARLY {
                break;
            }
            self.timers.pop();
            if self.may_start(now) && !self.slot_done(i) {
                let intended = self.intended(i, now).min(at);
                self.begin(i, now, intended);
            }
        }
    }

    fn begin(&mut self, i: usize, now: Instant, intended: Instant) {
        self.started += 1;
        self.in_flight += 1;
        let url = match self.scheduled(i) {
            Some(entry) => entry.url,
            None => self.plan.chooser.pick(&mut self.rng),
        };
        let c = &mut self.conns[i];
        c.sent += 1;
        c.url = url;
        c.intended = intended;
        c.start = now;
        c.deadline = now + self.plan.timeout;
        c.written = 0;
        c.readable_early = false;
        c.parser.reset(self.plan.no_body[url]);
        c.retries = 0;
        if self.h2.is_some() {
            self.h2_wait(i, now);
        } else if std::mem::take(&mut c.unasked) {
            // The connection it would have used sent bytes nobody asked for (closed then).
            self.fail(i, ErrorClass::BadResponse, now);
        } else if c.transport.is_some() {
            self.write_request(i, now);
        } else {
            self.connect(i, now);
        }
    }

    fn sweep_timeouts(&mut self, now: Instant) {
        for i in 0..self.conns.len() {
            let c = &self.conns[i];
            if c.phase != Phase::Idle && c.deadline <= now {
                self.fail(i, ErrorClass::Timeout, now);
            }
        }
    }

    fn poll_timeout(&self, now: Instant) -> Duration {
        if !self.ready.is_empty() || self.h2.as_ref().is_some_and(H2::pending) {
            return Duration::ZERO;
        }
        let mut until = now + MAX_SLEEP;
        if let (None, Some(Reverse((at, _)))) = (&self.alarm, self.timers.peek()) {
            until = until.min(*at);
        }
        until = until.min(self.next_sweep);
        if let Some(d) = self.stop.deadline() {
            until = until.min(d);
        }
        if let Some(w) = self.warmup_end {
            until = until.min(w);
        }
        until.saturating_duration_since(now)
    }

    /// The request on slot `i` is over, well or not.
    pub(super) fn finish(&mut self, i: usize, keep: bool) {
        let c = &mut self.conns[i];
        if self.h2.is_some() {
            c.stream = None; // dropping an unfinished stream resets it; the session stays
        } else if !keep {
            c.transport = None; // closing the socket also removes it from epoll
        }
        c.phase = Phase::Idle;
        self.in_flight -= 1;
    }

    /// Count a failed request and retry the slot from the main loop (never
    /// recursively, so a refusing server cannot blow the stack); after a
    /// failed connect, not before the slot's back-off has passed.
    pub(super) fn fail(&mut self, i: usize, class: ErrorClass, now: Instant) {
        let c = &mut self.conns[i];
        self.rec.error(class, now, c.parser.wire_bytes);
        self.rec.slot_ended(i, now.saturating_duration_since(c.intended), false);
        if class == ErrorClass::Connect {
            c.retry_at = now + c.refusals.refused(now);
        }
        self.finish(i, false);
        self.ready.push(i);
    }

    /// The run is over: requests still in flight count with their age.
    fn record_in_flight(&mut self, now: Instant) {
        for (i, c) in self.conns.iter().enumerate() {
            if c.phase != Phase::Idle {
                self.rec.slot_in_flight(i, now.saturating_duration_since(c.intended));
            }
        }
    }
}
