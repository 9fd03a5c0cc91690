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

    /// An idle kept-alive connection became readable: is it still usable?
    /// TLS may just have received session tickets (anything else read closes it).
    /// Plain bytes are peeked, not read: left waiting, the next request on this
    /// connection finds them (`bytes_waiting`) and fails as a bad response.
    pub fn still_open_when_idle(&mut self, buf: &mut [u8]) -> bool {
        match self {
            Transport::Plain(s) => match s.peek(&mut buf[..1]) {
                Ok(n) => n > 0,
                Err(e) => matches!(e.kind(), io::ErrorKind::WouldBlock | io::ErrorKind::Interrupted),
            },
            Transport::Tls(_) => matches!(self.read(buf), Err(Fail::WouldBlock)),
        }
    }

    /// Has the server sent bytes on this kept-alive connection that no request
    /// asked for (a second answer to the last request)? One non-blocking peek of the
    /// socket: the next response must not be read from them. TLS is checked by the
    /// response parser only (bytes past a response in the same read), because an idle
    /// TLS socket legitimately receives session tickets.
    pub fn bytes_waiting(&self) -> bool {
        match self {
            Transport::Plain(s) => s.peek(&mut [0u8; 1]).is_ok_and(|n| n > 0),
            Transport::Tls(_) => false,
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
