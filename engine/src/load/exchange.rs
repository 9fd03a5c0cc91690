//! One request/response exchange on a connection slot: connect, TLS
//! handshake, write, read. Edge-triggered: sockets are registered once for
//! both directions and never re-registered.

use std::io;
use std::sync::atomic::Ordering;
use std::time::Instant;

use mio::event::Event;
use mio::net::TcpStream;
use mio::{Interest, Token};

use super::tls::negotiated;
use super::transport::{Fail, Idle, TlsStream, Transport};
use super::worker::{Phase, Worker};
use crate::http::Feed;
use crate::record::{ErrorClass, Timing, valid_status};

impl Worker<'_> {
    pub(super) fn connect(&mut self, i: usize, now: Instant) {
        let transport = match self.open(Token(i)) {
            Ok(transport) => transport,
            Err(class) => return self.fail(i, class, now),
        };
        let c = &mut self.conns[i];
        c.transport = Some(transport);
        c.phase = Phase::Connecting;
    }

    /// A new non-blocking connection to the target, registered once under `token` for
    /// both directions, wrapped in TLS when the run asks it; the class of its failure.
    pub(super) fn open(&mut self, token: Token) -> Result<Transport, ErrorClass> {
        let mut sock = TcpStream::connect(self.plan.target.addr).map_err(|_| ErrorClass::Connect)?;
        let _ = sock.set_nodelay(true);
        self.poll
            .registry()
            .register(&mut sock, token, Interest::READABLE | Interest::WRITABLE)
            .map_err(|_| ErrorClass::Connect)?;
        Ok(match (&self.tls_config, &self.plan.tls) {
            (Some(config), Some(tls)) => {
                let conn = rustls::ClientConnection::new(config.clone(), tls.server_name.clone())
                    .map_err(|_| ErrorClass::Tls)?;
                Transport::Tls(Box::new(TlsStream { sock, tls: conn }))
            }
            _ => Transport::Plain(sock),
        })
    }

    pub(super) fn on_event(&mut self, i: usize, ev: &Event) {
        match self.conns[i].phase {
            Phase::Reading => self.read_response(i),
            Phase::Writing => {
                if ev.is_readable() {
                    self.conns[i].readable_early = true;
                }
                if ev.is_writable() || ev.is_error() {
                    let now = Instant::now();
                    self.write_request(i, now);
                }
            }
            Phase::Connecting => {
                let now = Instant::now();
                if ev.is_error() || !ev.is_writable() {
                    return self.fail(i, ErrorClass::Connect, now);
                }
                let c = &mut self.conns[i];
                c.connected = now;
                c.refusals.connected();
                self.rec.connected(now.saturating_duration_since(c.start));
                match c.transport {
                    Some(Transport::Tls(_)) => {
                        c.phase = Phase::Handshaking;
                        self.handshake(i);
                    }
                    _ => self.write_request(i, now),
                }
            }
            Phase::Handshaking => self.handshake(i),
            Phase::Idle => {
                // The server closed (or wrote to) an idle kept-alive connection. Bytes
                // nobody asked for fail the slot's next request as a bad response.
                if ev.is_readable() || ev.is_read_closed() || ev.is_error() {
                    let c = &mut self.conns[i];
                    let idle = c.transport.as_mut().map(|t| t.on_idle_readable(&mut self.buf));
                    if idle.is_some_and(|idle| idle != Idle::Open) {
                        c.transport = None;
                        c.unasked |= idle == Some(Idle::Unasked);
                    }
                }
            }
        }
    }

    fn handshake(&mut self, i: usize) {
        let Some(Transport::Tls(t)) = self.conns[i].transport.as_mut() else { return };
        match t.handshake() {
            Ok(false) | Err(Fail::WouldBlock) => {}
            Ok(true) => {
                let now = Instant::now();
                let resumed = t.tls.handshake_kind() == Some(rustls::HandshakeKind::Resumed);
                let took = now.saturating_duration_since(self.conns[i].connected);
                if self.rec.tls_info.protocol.is_none() {
                    let Some(Transport::Tls(t)) = self.conns[i].transport.as_ref() else { return };
                    let (protocol, cipher, alpn) = negotiated(&t.tls);
                    self.rec.tls_info.protocol = Some(protocol);
                    self.rec.tls_info.cipher = Some(cipher);
                    self.rec.tls_info.alpn = alpn;
                }
                self.rec.handshake(took, resumed);
                self.write_request(i, now);
            }
            Err(Fail::Io(kind)) => {
                let class =
                    if kind == io::ErrorKind::ConnectionRefused { ErrorClass::Connect } else { ErrorClass::Tls };
                self.fail(i, class, Instant::now());
            }
            Err(Fail::Tls) => self.fail(i, ErrorClass::Tls, Instant::now()),
        }
    }

    pub(super) fn write_request(&mut self, i: usize, now: Instant) {
        let c = &mut self.conns[i];
        let request = &self.plan.requests[c.url];
        let Some(transport) = c.transport.as_mut() else { return };
        if c.written == 0 {
            c.sent_at = now;
            self.first_send.get_or_insert(now);
        }
        loop {
            match transport.write(&request[c.written..]) {
                Ok(n) => {
                    c.written += n;
                    if c.written < request.len() {
                        continue;
                    }
                    if transport.pending_write() {
                        c.phase = Phase::Writing;
                        return;
                    }
                    let early = c.phase == Phase::Writing && c.readable_early;
                    c.phase = Phase::Reading;
                    if early {
                        self.read_response(i);
                    }
                    return;
                }
                Err(Fail::WouldBlock) => {
                    c.phase = Phase::Writing;
                    return;
                }
                Err(Fail::Io(kind)) => {
                    let class =
                        if kind == io::ErrorKind::ConnectionRefused { ErrorClass::Connect } else { ErrorClass::Write };
                    return self.fail(i, class, now);
                }
                Err(Fail::Tls) => return self.fail(i, ErrorClass::Tls, now),
            }
        }
    }

    /// Read what is there. A plain read shorter than the buffer means the
    /// socket is drained, so no extra read just to see EAGAIN: the next
    /// arriving segment raises a new edge.
    pub(super) fn read_response(&mut self, i: usize) {
        let plain = matches!(self.conns[i].transport, Some(Transport::Plain(_)));
        loop {
            let c = &mut self.conns[i];
            let Some(transport) = c.transport.as_mut() else { return };
            match transport.read(&mut self.buf) {
                Ok(0) => {
                    let now = Instant::now();
                    return match c.parser.eof() {
                        Feed::Done => self.complete(i, now),
                        _ => self.fail(i, ErrorClass::Read, now),
                    };
                }
                Ok(n) => {
                    let first = !c.parser.started();
                    let mut now = None;
                    if first {
                        let t = Instant::now();
                        c.first_byte = t;
                        now = Some(t);
                    }
                    match c.parser.feed(&self.buf[..n]) {
                        Feed::More => {
                            if plain && n < self.buf.len() {
                                return;
                            }
                        }
                        Feed::Done => return self.complete(i, now.unwrap_or_else(Instant::now)),
                        Feed::Bad => return self.fail(i, ErrorClass::BadResponse, now.unwrap_or_else(Instant::now)),
                    }
                }
                Err(Fail::WouldBlock) => return,
                Err(Fail::Io(kind)) => {
                    let class =
                        if kind == io::ErrorKind::ConnectionRefused { ErrorClass::Connect } else { ErrorClass::Read };
                    return self.fail(i, class, Instant::now());
                }
                Err(Fail::Tls) => return self.fail(i, ErrorClass::Tls, Instant::now()),
            }
        }
    }

    pub(super) fn complete(&mut self, i: usize, now: Instant) {
        let c = &self.conns[i];
        let p = &c.parser;
        let first = &self.plan.first_lengths[c.url];
        let mut known = first.load(Ordering::Relaxed);
        // A response with no valid status (a bad_response) sets no length.
        if known == u64::MAX && valid_status(p.status) {
            known = match first.compare_exchange(u64::MAX, p.body_bytes, Ordering::Relaxed, Ordering::Relaxed) {
                Ok(_) => p.body_bytes,
                Err(other) => other,
            };
        }
        let varies = self.plan.varies[c.url];
        let failed = (!varies && known != p.body_bytes).then_some(ErrorClass::LengthMismatch);
        let timing =
            Timing { intended: c.intended, start: c.start, sent: c.sent_at, first_byte: c.first_byte, done: now };
        let completed = self.rec.response(&timing, p.status, p.wire_bytes, p.body_bytes, p.decoded_bytes, failed);
        self.rec.slot_ended(i, now.saturating_duration_since(c.intended), completed);
        let keep = self.plan.keepalive && p.keep_alive;
        self.finish(i, keep);
        self.next(i, now);
    }
}
