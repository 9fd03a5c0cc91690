//! A connection's byte stream: plain TCP or rustls over TCP, chosen once.

use std::io::{self, Read, Write};

use mio::net::TcpStream;
use rustls::ClientConnection;

/// Why an I/O call did not move bytes.
#[derive(Debug)]
pub enum Fail {
    WouldBlock,
    Io(io::ErrorKind),
    Tls,
}

impl From<io::Error> for Fail {
    fn from(e: io::Error) -> Fail {
        match e.kind() {
            io::ErrorKind::WouldBlock => Fail::WouldBlock,
            kind => Fail::Io(kind),
        }
    }
}

/// What an idle kept-alive connection's readable event meant.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Idle {
    /// Nothing to read (TLS housekeeping): the connection stays.
    Open,
    /// The server closed it (or it failed).
    Closed,
    /// Bytes no request asked for (a second answer to the last one).
    Unasked,
}

pub enum Transport {
    Plain(TcpStream),
    Tls(Box<TlsStream>),
}

pub struct TlsStream {
    pub sock: TcpStream,
    pub tls: ClientConnection,
}

impl Transport {
    /// Read decrypted bytes; `Ok(0)` is end of stream.
    #[inline]
    pub fn read(&mut self, buf: &mut [u8]) -> Result<usize, Fail> {
        match self {
            Transport::Plain(s) => loop {
                match s.read(buf) {
                    Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                    r => return r.map_err(Fail::from),
                }
            },
            Transport::Tls(t) => t.read(buf),
        }
    }

    /// Write from `data`; returns bytes taken. TLS takes everything at once
    /// and flushes as far as the socket allows.
    #[inline]
    pub fn write(&mut self, data: &[u8]) -> Result<usize, Fail> {
        match self {
            Transport::Plain(s) => loop {
                match s.write(data) {
                    Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                    r => return r.map_err(Fail::from),
                }
            },
            Transport::Tls(t) => {
                if !data.is_empty() {
                    t.tls.writer().write_all(data).map_err(|_| Fail::Tls)?;
                }
                // The data is taken either way; what the socket did not take
                // yet shows in `pending_write`.
                match t.flush() {
                    Ok(()) | Err(Fail::WouldBlock) => Ok(data.len()),
                    Err(e) => Err(e),
                }
            }
        }
    }

    /// An idle kept-alive connection became readable: what arrived? TLS may just
    /// have received session tickets (no plaintext: still open).
    pub fn on_idle_readable(&mut self, buf: &mut [u8]) -> Idle {
        match self.read(buf) {
            Err(Fail::WouldBlock) => Idle::Open,
            Ok(n) if n > 0 => Idle::Unasked,
            _ => Idle::Closed,
        }
    }

    /// Bytes still queued inside the transport (TLS only).
    pub fn pending_write(&self) -> bool {
        match self {
            Transport::Plain(_) => false,
            Transport::Tls(t) => t.tls.wants_write(),
        }
    }
}

impl TlsStream {
    /// Send queued TLS records; `WouldBlock` if the socket is full.
    pub fn flush(&mut self) -> Result<(), Fail> {
        while self.tls.wants_write() {
            self.tls.write_tls(&mut self.sock)?;
        }
        Ok(())
    }

    fn read(&mut self, buf: &mut [u8]) -> Result<usize, Fail> {
        loop {
            match self.tls.reader().read(buf) {
                Ok(n) => return Ok(n),
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
                Err(e) => return Err(Fail::Io(e.kind())),
            }
            if self.tls.read_tls(&mut self.sock)? == 0 {
                return Ok(0);
            }
            self.tls.process_new_packets().map_err(|_| Fail::Tls)?;
        }
    }

    /// Drive the handshake as far as the socket allows. `Ok(true)` when done.
    pub fn handshake(&mut self) -> Result<bool, Fail> {
        loop {
            self.flush()?;
            if !self.tls.is_handshaking() {
                return Ok(true);
            }
            match self.tls.read_tls(&mut self.sock) {
                Ok(0) => return Err(Fail::Tls),
                Ok(_) => {
                    if self.tls.process_new_packets().is_err() {
                        let _ = self.flush(); // send the alert if we can
                        return Err(Fail::Tls);
                    }
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Ok(false),
                Err(e) => return Err(Fail::Io(e.kind())),
            }
        }
    }
}
