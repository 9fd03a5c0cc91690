//! HTTP/2 on the worker's event loop: the `h2` crate frames and multiplexes, this
//! module drives it.
//!
//! A connection is a session; its `streams` slots are virtual clients that share it,
//! each with at most one request in flight (h2load's `-c` × `-m`). `h2` is written for
//! async I/O: here its futures are polled from the mio loop, with no runtime. The socket
//! is registered once (edge-triggered, token = session index); a readiness event, or a
//! wake-up from `h2` itself (a waker per slot and per session that only queues the
//! index), says what to poll next, so nothing is polled in vain.

use std::cell::Cell;
use std::future::Future;
use std::io;
use std::pin::Pin;
use std::rc::Rc;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::task::{Context, Poll, Wake, Waker};
use std::time::Instant;

use bytes::Bytes;
use h2::client::{Connection, ResponseFuture, SendRequest};
use h2::{Reason, RecvStream};
use mio::event::Event;
use mio::Token;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};

use super::Plan;
use super::tls::negotiated;
use super::transport::{Fail, Transport};
use super::worker::{Phase, Worker};
use crate::record::ErrorClass;

/// Flow-control windows, h2load's defaults (2^30 - 1 per stream and per connection):
/// the server never waits for a WINDOW_UPDATE on a page this size.
const WINDOW: u32 = (1 << 30) - 1;
/// A request refused unprocessed (GOAWAY past it, REFUSED_STREAM) goes again on a new
/// connection at most this often before it counts as failed.
const MAX_RETRIES: u8 = 3;

type Handshake = Pin<Box<dyn Future<Output = Result<(SendRequest<Bytes>, Connection<Io, Bytes>), h2::Error>>>>;

/// One slot's request in flight: waiting for its head, then reading its body.
pub(super) enum Stream {
    Head(ResponseFuture),
    Body(RecvStream),
}

/// The worker's HTTP/2 state, beside its slots.
pub(super) struct H2 {
    streams: usize,
    /// What a pass works through, taken from `woken` (kept, not freed).
    sessions_due: Vec<usize>,
    slots_due: Vec<usize>,
    sessions: Vec<Session>,
    woken: Arc<Woken>,
    /// Shared out of `self` for the length of a poll (a count, not an atomic, to copy).
    session_wakers: Rc<[Waker]>,
    slot_wakers: Rc<[Waker]>,
}

struct Session {
    state: State,
    /// Bytes read on the connection not yet counted to a response: a response takes
    /// what arrived since the last one ended, so the run's total is exact.
    read: Rc<Cell<u64>>,
    /// The socket may have bytes to read: set by a readable event, cleared when a
    /// read found it drained. `h2` reads at every poll; without this, every request
    /// sent would cost a read that finds nothing.
    readable: Rc<Cell<bool>>,
    connect_started: Instant,
}

// One per connection, polled in place: boxing the open state would add an indirection
// to every poll for a few hundred bytes per connection.
#[allow(clippy::large_enum_variant)]
enum State {
    Closed,
    Connecting(Transport),
    Handshaking(Transport),
    Starting(Handshake),
    Open { send: SendRequest<Bytes>, conn: Connection<Io, Bytes> },
}

/// What `h2` woke, kept until the loop polls it.
struct Woken {
    slots: Marks,
    sessions: Marks,
}

/// A set of indices, one bit each, with a bit per word that has any set: marking is one
/// or two atomic ORs (no lock; `Waker` must be `Sync`, though only the worker's own
/// thread ever wakes), and taking them out comes in index order, each once, and reads
/// only the words that have some.
struct Marks {
    words: Vec<AtomicU64>,
    summary: Vec<AtomicU64>,
}

impl Marks {
    fn new(count: usize) -> Marks {
        let words = count.div_ceil(64);
        Marks {
            words: (0..words).map(|_| AtomicU64::new(0)).collect(),
            summary: (0..words.div_ceil(64)).map(|_| AtomicU64::new(0)).collect(),
        }
    }

    fn mark(&self, i: usize) {
        let w = i / 64;
        if self.words[w].fetch_or(1 << (i % 64), Ordering::Relaxed) == 0 {
            self.summary[w / 64].fetch_or(1 << (w % 64), Ordering::Relaxed);
        }
    }

    fn any(&self) -> bool {
        self.summary.iter().any(|s| s.load(Ordering::Relaxed) != 0)
    }

    /// Append the marked indices to `out`, in order, and clear them.
    fn take(&self, out: &mut Vec<usize>) {
        for (k, summary) in self.summary.iter().enumerate() {
            for w in bits(summary.swap(0, Ordering::Relaxed)) {
                let w = k * 64 + w;
                out.extend(bits(self.words[w].swap(0, Ordering::Relaxed)).map(|b| w * 64 + b));
            }
        }
    }
}

/// The positions of a word's set bits, lowest first.
fn bits(mut word: u64) -> impl Iterator<Item = usize> {
    std::iter::from_fn(move || {
        (word != 0).then(|| {
            let b = word.trailing_zeros() as usize;
            word &= word - 1;
            b
        })
    })
}

struct Wakeup {
    woken: Arc<Woken>,
    index: usize,
    session: bool,
}

impl Wake for Wakeup {
    fn wake(self: Arc<Self>) {
        self.wake_by_ref();
    }

    fn wake_by_ref(self: &Arc<Self>) {
        let marks = if self.session { &self.woken.sessions } else { &self.woken.slots };
        marks.mark(self.index);
    }
}

impl H2 {
    pub(super) fn new(plan: &Plan<'_>, slots: usize) -> H2 {
        let count = slots / plan.streams;
        let woken = Arc::new(Woken { slots: Marks::new(slots), sessions: Marks::new(count) });
        let waker = |index, session| Waker::from(Arc::new(Wakeup { woken: woken.clone(), index, session }));
        H2 {
            streams: plan.streams,
            sessions_due: Vec::new(),
            slots_due: Vec::new(),
            session_wakers: (0..count).map(|s| waker(s, true)).collect(),
            sessions: (0..count)
                .map(|_| Session {
                    state: State::Closed,
                    read: Rc::new(Cell::new(0)),
                    readable: Rc::new(Cell::new(true)),
                    connect_started: Instant::now(),
                })
                .collect(),
            slot_wakers: (0..slots).map(|i| waker(i, false)).collect(),
            woken,
        }
    }

    fn wake_session(&self, s: usize) {
        self.woken.sessions.mark(s);
    }

    fn wake_slot(&self, i: usize) {
        self.woken.slots.mark(i);
    }

    /// Something waits to be polled.
    pub(super) fn pending(&self) -> bool {
        self.woken.sessions.any() || self.woken.slots.any()
    }
}

/// The socket as `h2` sees it: non-blocking reads and writes that say Pending on
/// WouldBlock (the next edge of the socket's readiness polls again).
pub(super) struct Io {
    transport: Transport,
    read: Rc<Cell<u64>>,
    readable: Rc<Cell<bool>>,
}

impl AsyncRead for Io {
    fn poll_read(self: Pin<&mut Self>, _: &mut Context<'_>, buf: &mut ReadBuf<'_>) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        if !this.readable.get() {
            return Poll::Pending; // the socket's next readable edge wakes the session
        }
        // SAFETY: the transport only writes into `dst` (a socket read, or rustls copying
        // plaintext out), and only its first `n` bytes are then marked filled, so no
        // uninitialised byte is ever read. Zeroing `h2`'s whole spare buffer first
        // (`initialize_unfilled`) cost about 1% of the engine's CPU per request.
        let dst = unsafe { &mut *(buf.unfilled_mut() as *mut [std::mem::MaybeUninit<u8>] as *mut [u8]) };
        let wanted = dst.len();
        match this.transport.read(dst) {
            Ok(n) => {
                // SAFETY: the read initialised these `n` bytes.
                unsafe { buf.assume_init(n) };
                buf.advance(n);
                this.read.set(this.read.get() + n as u64);
                // A plain read shorter than asked drained the socket: the next segment
                // raises a new edge (as in the HTTP/1.1 exchange). TLS may hold more.
                if n > 0 && n < wanted && matches!(this.transport, Transport::Plain(_)) {
                    this.readable.set(false);
                }
                Poll::Ready(Ok(()))
            }
            Err(Fail::WouldBlock) => {
                this.readable.set(false);
                Poll::Pending
            }
            Err(fail) => ready_or_pending(fail),
        }
    }
}

impl AsyncWrite for Io {
    fn poll_write(self: Pin<&mut Self>, _: &mut Context<'_>, data: &[u8]) -> Poll<io::Result<usize>> {
        match self.get_mut().transport.write(data) {
            Ok(n) => Poll::Ready(Ok(n)),
            Err(fail) => ready_or_pending(fail),
        }
    }

    fn poll_flush(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<io::Result<()>> {
        match &mut self.get_mut().transport {
            Transport::Plain(_) => Poll::Ready(Ok(())),
            Transport::Tls(t) => match t.flush() {
                Ok(()) => Poll::Ready(Ok(())),
                Err(fail) => ready_or_pending(fail),
            },
        }
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        self.poll_flush(cx)
    }
}

fn ready_or_pending<T>(fail: Fail) -> Poll<io::Result<T>> {
    match fail {
        Fail::WouldBlock => Poll::Pending,
        Fail::Io(kind) => Poll::Ready(Err(kind.into())),
        Fail::Tls => Poll::Ready(Err(io::Error::other("TLS error"))),
    }
}

impl Worker<'_> {
    fn h2(&self) -> &H2 {
        self.h2.as_ref().expect("an HTTP/2 run")
    }

    fn h2_mut(&mut self) -> &mut H2 {
        self.h2.as_mut().expect("an HTTP/2 run")
    }

    fn session_of(&self, i: usize) -> usize {
        i / self.h2().streams
    }

    fn slots_of(&self, s: usize) -> std::ops::Range<usize> {
        let m = self.h2().streams;
        s * m..(s + 1) * m
    }

    /// Slot `i`'s request waits for its session: sent when the session is open and has
    /// a stream free; the session is opened if it is closed.
    pub(super) fn h2_wait(&mut self, i: usize, now: Instant) {
        let c = &mut self.conns[i];
        c.stream = None;
        c.phase = Phase::Connecting;
        let s = self.session_of(i);
        match self.h2().sessions[s].state {
            State::Closed => self.h2_connect(s, now),
            State::Open { .. } => self.h2().wake_session(s),
            _ => {}
        }
    }

    fn h2_connect(&mut self, s: usize, now: Instant) {
        let transport = match self.open(Token(s)) {
            Ok(transport) => transport,
            Err(class) => return self.h2_fail_waiting(s, class, now),
        };
        let session = &mut self.h2_mut().sessions[s];
        session.state = State::Connecting(transport);
        session.connect_started = now;
    }

    /// Every slot waiting for session `s` fails (its connect or handshake did).
    fn h2_fail_waiting(&mut self, s: usize, class: ErrorClass, now: Instant) {
        self.h2_mut().sessions[s].state = State::Closed;
        for i in self.slots_of(s) {
            if self.conns[i].phase == Phase::Connecting {
                self.fail(i, class, now);
            }
        }
    }

    /// The socket of session `s` is ready.
    pub(super) fn h2_event(&mut self, s: usize, ev: &Event) {
        match &self.h2().sessions[s].state {
            State::Connecting(transport) => {
                let now = Instant::now();
                if ev.is_error() || !ev.is_writable() {
                    return self.h2_fail_waiting(s, ErrorClass::Connect, now);
                }
                let tls = matches!(transport, Transport::Tls(_));
                let took = now.saturating_duration_since(self.h2().sessions[s].connect_started);
                self.rec.connected(took);
                for i in self.slots_of(s) {
                    self.conns[i].refusals.connected();
                }
                let session = &mut self.h2_mut().sessions[s];
                let State::Connecting(transport) = std::mem::replace(&mut session.state, State::Closed) else {
                    unreachable!()
                };
                if tls {
                    session.state = State::Handshaking(transport);
                    self.h2_handshake(s);
                } else {
                    self.h2_start(s, transport);
                }
            }
            State::Handshaking(_) => self.h2_handshake(s),
            State::Starting(_) | State::Open { .. } => {
                if ev.is_readable() || ev.is_read_closed() || ev.is_error() {
                    self.h2().sessions[s].readable.set(true);
                }
                self.h2().wake_session(s)
            }
            State::Closed => {}
        }
    }

    fn h2_handshake(&mut self, s: usize) {
        let State::Handshaking(Transport::Tls(t)) = &mut self.h2_mut().sessions[s].state else { return };
        let now = Instant::now();
        match t.handshake() {
            Ok(false) | Err(Fail::WouldBlock) => {}
            Ok(true) => {
                let resumed = t.tls.handshake_kind() == Some(rustls::HandshakeKind::Resumed);
                let (protocol, cipher, alpn) = negotiated(&t.tls);
                let took = now.saturating_duration_since(self.h2().sessions[s].connect_started);
                self.rec.handshake(took, resumed);
                if self.rec.tls_info.protocol.is_none() {
                    self.rec.tls_info.protocol = Some(protocol);
                    self.rec.tls_info.cipher = Some(cipher);
                    self.rec.tls_info.alpn.clone_from(&alpn);
                }
                if alpn.as_deref() != Some("h2") {
                    // The server does not speak HTTP/2 here: every request fails, and
                    // the report's tls.alpn says what it chose instead.
                    self.rec.tls_info.alpn = alpn;
                    return self.h2_fail_waiting(s, ErrorClass::Tls, now);
                }
                let session = &mut self.h2_mut().sessions[s];
                let State::Handshaking(transport) = std::mem::replace(&mut session.state, State::Closed) else {
                    unreachable!()
                };
                self.h2_start(s, transport);
            }
            Err(_) => self.h2_fail_waiting(s, ErrorClass::Tls, now),
        }
    }

    /// Send the connection preface and settings.
    fn h2_start(&mut self, s: usize, transport: Transport) {
        let session = &mut self.h2_mut().sessions[s];
        session.read.set(0);
        session.readable.set(true);
        let io = Io { transport, read: session.read.clone(), readable: session.readable.clone() };
        let mut builder = h2::client::Builder::new();
        builder.initial_window_size(WINDOW).initial_connection_window_size(WINDOW).enable_push(false);
        session.state = State::Starting(Box::pin(builder.handshake(io)));
        self.h2().wake_session(s);
    }

    /// Poll everything `h2` or a socket woke, until nothing is left: sessions move
    /// bytes and send waiting requests, slots read their responses.
    pub(super) fn h2_run_woken(&mut self) {
        loop {
            let h2 = self.h2_mut();
            let mut sessions = std::mem::take(&mut h2.sessions_due);
            let mut slots = std::mem::take(&mut h2.slots_due);
            h2.woken.sessions.take(&mut sessions);
            h2.woken.slots.take(&mut slots);
            if sessions.is_empty() && slots.is_empty() {
                (h2.sessions_due, h2.slots_due) = (sessions, slots);
                return;
            }
            // One clock reading for what this pass reads: the bytes it reads arrived
            // together, within the pass's few microseconds. A session woken by several
            // of its streams is driven once.
            let now = Instant::now();
            for &s in &sessions {
                self.h2_drive(s, now);
            }
            for &i in &slots {
                self.h2_poll_slot(i, now);
            }
            sessions.clear();
            slots.clear();
            let h2 = self.h2_mut();
            (h2.sessions_due, h2.slots_due) = (sessions, slots);
        }
    }

    /// Move session `s`'s bytes both ways, then send what waits for it.
    fn h2_drive(&mut self, s: usize, now: Instant) {
        let h2 = self.h2.as_mut().expect("an HTTP/2 run");
        let wakers = h2.session_wakers.clone();
        let mut cx = Context::from_waker(&wakers[s]);
        let session = &mut h2.sessions[s];
        if let State::Starting(handshake) = &mut session.state {
            match handshake.as_mut().poll(&mut cx) {
                Poll::Pending => return,
                Poll::Ready(Ok((send, conn))) => session.state = State::Open { send, conn },
                Poll::Ready(Err(_)) => return self.h2_fail_waiting(s, ErrorClass::Write, now),
            }
        }
        // Queue the waiting requests first, so that one poll of the connection writes
        // them all and reads what came (a read batch's responses make one write).
        self.h2_send_waiting(s, &mut cx, now);
        let session = &mut self.h2.as_mut().expect("an HTTP/2 run").sessions[s];
        let State::Open { conn, .. } = &mut session.state else { return };
        if Pin::new(conn).poll(&mut cx).is_ready() {
            // Closed (GOAWAY, an error, the server's idle timeout): its streams learn
            // why when polled; the requests still to send go on a new connection.
            self.h2_closed(s, now);
        }
    }

    fn h2_closed(&mut self, s: usize, now: Instant) {
        self.h2_mut().sessions[s].state = State::Closed;
        let mut waiting = false;
        for i in self.slots_of(s) {
            match self.conns[i].phase {
                Phase::Reading => self.h2().wake_slot(i),
                Phase::Connecting => waiting = true,
                _ => {}
            }
        }
        if waiting {
            self.h2_connect(s, now);
        }
    }

    /// Start the requests waiting on session `s` while it takes new streams.
    fn h2_send_waiting(&mut self, s: usize, cx: &mut Context<'_>, now: Instant) {
        for i in self.slots_of(s) {
            if self.conns[i].phase != Phase::Connecting {
                continue;
            }
            let h2 = self.h2.as_mut().expect("an HTTP/2 run");
            let State::Open { send, .. } = &mut h2.sessions[s].state else { return };
            match send.poll_ready(cx) {
                Poll::Ready(Ok(())) => {}
                Poll::Pending => return, // the server's stream limit: when one ends
                Poll::Ready(Err(_)) => return self.h2_closed(s, now),
            }
            let c = &mut self.conns[i];
            let template = &self.plan.h2_requests[c.url];
            let mut request = http::Request::new(());
            *request.method_mut() = template.method().clone();
            *request.uri_mut() = template.uri().clone();
            *request.headers_mut() = template.headers().clone();
            let body = self.plan.body.as_ref();
            match send.send_request(request, body.is_none()) {
                Ok((response, mut stream)) => {
                    if let Some(body) = body {
                        let _ = stream.send_data(body.clone(), true);
                    }
                    c.stream = Some(Stream::Head(response));
                    c.phase = Phase::Reading;
                    c.sent_at = now;
                    self.first_send.get_or_insert(now);
                    h2.wake_slot(i); // its first poll registers its waker
                }
                Err(_) => return self.h2_closed(s, now),
            }
        }
    }

    /// Read what slot `i`'s stream has: its head, its body, its end.
    fn h2_poll_slot(&mut self, i: usize, now: Instant) {
        let s = self.session_of(i);
        let h2 = self.h2.as_ref().expect("an HTTP/2 run");
        let wakers = h2.slot_wakers.clone();
        let read = h2.sessions[s].read.clone();
        let mut cx = Context::from_waker(&wakers[i]);
        loop {
            let c = &mut self.conns[i];
            if c.phase != Phase::Reading {
                return;
            }
            match c.stream.as_mut() {
                None => return,
                Some(Stream::Head(response)) => match Pin::new(response).poll(&mut cx) {
                    Poll::Pending => return,
                    Poll::Ready(Ok(head)) => {
                        c.first_byte = now;
                        c.parser.status = head.status().as_u16();
                        c.stream = Some(Stream::Body(head.into_body()));
                    }
                    Poll::Ready(Err(e)) => return self.h2_stream_failed(i, &e, now),
                },
                Some(Stream::Body(body)) => match body.poll_data(&mut cx) {
                    Poll::Pending => return,
                    Poll::Ready(Some(Ok(data))) => {
                        c.parser.body_bytes += data.len() as u64;
                        let _ = body.flow_control().release_capacity(data.len());
                    }
                    Poll::Ready(Some(Err(e))) => return self.h2_stream_failed(i, &e, now),
                    Poll::Ready(None) => {
                        c.parser.wire_bytes = read.replace(0);
                        c.stream = None;
                        return self.complete(i, now);
                    }
                },
            }
        }
    }

    /// A stream ended in error. One the server refused unprocessed (past its GOAWAY, or
    /// REFUSED_STREAM), or an idempotent one whose connection failed before its answer
    /// was whole (nginx closes after its GOAWAY with requests still unread, so the kernel
    /// resets the connection and the GOAWAY or the answer's last frames may never be
    /// read: RFC 9113 §8.7 lets a client send those again), goes again on a new
    /// connection, its latency still counted from its first intended start, and is
    /// counted as retried; anything else fails.
    fn h2_stream_failed(&mut self, i: usize, e: &h2::Error, now: Instant) {
        let refused = e.is_remote()
            && ((e.is_go_away() && e.reason() == Some(Reason::NO_ERROR))
                || (e.is_reset() && e.reason() == Some(Reason::REFUSED_STREAM)));
        let c = &mut self.conns[i];
        let lost = e.is_io() && self.plan.h2_requests[c.url].method().is_idempotent();
        if (refused || lost) && c.retries < MAX_RETRIES {
            c.retries += 1;
            c.parser.reset(self.plan.no_body[c.url]); // what came of the lost answer
            self.rec.retried += 1;
            return self.h2_wait(i, now);
        }
        let class = if e.is_io() { ErrorClass::Read } else { ErrorClass::BadResponse };
        self.fail(i, class, now);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn taken(marks: &Marks) -> Vec<usize> {
        let mut out = Vec::new();
        marks.take(&mut out);
        out
    }

    #[test]
    fn marks_come_out_once_each_in_order_and_are_cleared() {
        // Past one summary word (64 × 64 indices), so both levels are exercised.
        let marks = Marks::new(10_000);
        assert!(!marks.any());
        for i in [9_999, 4_096, 0, 63, 64, 4_095, 63, 9_999, 130] {
            marks.mark(i);
        }
        assert!(marks.any());
        assert_eq!(taken(&marks), [0, 63, 64, 130, 4_095, 4_096, 9_999]);
        assert!(!marks.any());
        assert!(taken(&marks).is_empty());
        marks.mark(5);
        assert_eq!(taken(&marks), [5]);
    }
}
