//! Response framing: parse the head with httparse, then count body bytes
//! (Content-Length, chunked or until close) without storing them.

use std::io::Write;

use super::chunked::Chunked;

/// Result of feeding bytes to the parser.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Feed {
    More,
    Done,
    Bad,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Body {
    Head,
    Length(u64),
    Chunked(Chunked),
    UntilClose,
    Done,
}

/// Parses one response at a time; reset before each request.
pub struct ResponseParser {
    body: Body,
    /// A head split across reads is gathered here (rare; reused).
    partial: Vec<u8>,
    pub status: u16,
    /// May the connection carry another request after this response?
    pub keep_alive: bool,
    pub wire_bytes: u64,
    pub body_bytes: u64,
    pub decoded_bytes: u64,
    no_body: bool,
    decode: bool,
    decoder: Option<Decoder>,
}

/// The facts the framing needs from a response head.
struct HeadInfo {
    status: u16,
    length: Option<u64>,
    chunked: bool,
    keep_alive: bool,
    encoding: Option<Encoding>,
}

#[derive(Clone, Copy)]
enum Encoding {
    Gzip,
    Deflate,
}

impl ResponseParser {
    pub fn new(decode: bool) -> ResponseParser {
        ResponseParser {
            body: Body::Head,
            partial: Vec::new(),
            status: 0,
            keep_alive: false,
            wire_bytes: 0,
            body_bytes: 0,
            decoded_bytes: 0,
            no_body: false,
            decode,
            decoder: None,
        }
    }

    /// Prepare for the next response; `no_body` for HEAD requests.
    pub fn reset(&mut self, no_body: bool) {
        self.body = Body::Head;
        self.partial.clear();
        self.status = 0;
        self.keep_alive = false;
        self.wire_bytes = 0;
        self.body_bytes = 0;
        self.decoded_bytes = 0;
        self.no_body = no_body;
        self.decoder = None;
    }

    /// Has any byte of the response arrived?
    pub fn started(&self) -> bool {
        self.wire_bytes > 0
    }

    pub fn feed(&mut self, mut data: &[u8]) -> Feed {
        self.wire_bytes += data.len() as u64;
        while self.body == Body::Head {
            match self.parse_head(data) {
                Err(()) => return Feed::Bad,
                Ok(None) => return Feed::More,
                Ok(Some((used, info))) => {
                    data = &data[used..];
                    self.start_body(info);
                }
            }
        }
        self.feed_body(data)
    }

    /// The peer closed the connection: is the response complete?
    pub fn eof(&mut self) -> Feed {
        match self.body {
            Body::UntilClose => {
                self.body = Body::Done;
                self.finish_decoding();
                Feed::Done
            }
            Body::Done => Feed::Done,
            _ => Feed::Bad,
        }
    }

    /// Parse the head from `data` (plus any earlier partial head). Returns how
    /// much of `data` the head used.
    fn parse_head(&mut self, data: &[u8]) -> Result<Option<(usize, HeadInfo)>, ()> {
        if self.partial.is_empty() {
            return match parse_head_bytes(data)? {
                Some(found) => Ok(Some(found)),
                None => {
                    self.partial.extend_from_slice(data);
                    Ok(None)
                }
            };
        }
        let before = self.partial.len();
        self.partial.extend_from_slice(data);
        match parse_head_bytes(&self.partial)? {
            Some((used, info)) => {
                self.partial.clear();
                Ok(Some((used - before, info)))
            }
            None if self.partial.len() > 1 << 20 => Err(()),
            None => Ok(None),
        }
    }

    fn start_body(&mut self, info: HeadInfo) {
        self.status = info.status;
        self.keep_alive = info.keep_alive;
        if (100..200).contains(&info.status) && info.status != 101 {
            return; // interim response: the real one follows
        }
        if self.decode {
            self.decoder = info.encoding.map(Decoder::new);
        }
        self.body = if self.no_body || info.status == 204 || info.status == 304 {
            Body::Done
        } else if info.chunked {
            Body::Chunked(Chunked::new())
        } else if let Some(n) = info.length {
            if n == 0 { Body::Done } else { Body::Length(n) }
        } else {
            self.keep_alive = false;
            Body::UntilClose
        };
    }

    /// Count `data` as body. Bytes past the end of the response are a bad response:
    /// nothing was asked for them (a server that answers twice, say), and taken as the
    /// next request's answer they would count a response the server never gave it.
    fn feed_body(&mut self, data: &[u8]) -> Feed {
        let used = match &mut self.body {
            Body::Length(left) => {
                let take = (*left).min(data.len() as u64);
                *left -= take;
                let done = *left == 0;
                self.count_body(&data[..take as usize]);
                if done {
                    self.body = Body::Done;
                }
                take as usize
            }
            Body::Chunked(state) => {
                let mut state = *state;
                let mut counted = 0u64;
                let mut decoder = self.decoder.take();
                let step = state.advance(data, &mut |d| {
                    counted += d.len() as u64;
                    if let Some(dec) = decoder.as_mut() {
                        dec.write(d);
                    }
                });
                self.decoder = decoder;
                self.body_bytes += counted;
                match step {
                    Err(_) => return Feed::Bad,
                    Ok(s) if s.done => {
                        self.body = Body::Done;
                        s.consumed
                    }
                    Ok(s) => {
                        self.body = Body::Chunked(state);
                        s.consumed
                    }
                }
            }
            Body::UntilClose => {
                self.count_body(data);
                data.len()
            }
            Body::Head | Body::Done => 0,
        };
        if used < data.len() {
            return Feed::Bad;
        }
        if self.body == Body::Done {
            self.finish_decoding();
            Feed::Done
        } else {
            Feed::More
        }
    }

    fn count_body(&mut self, data: &[u8]) {
        self.body_bytes += data.len() as u64;
        if let Some(dec) = self.decoder.as_mut() {
            dec.write(data);
        }
    }

    fn finish_decoding(&mut self) {
        if let Some(dec) = self.decoder.take() {
            self.decoded_bytes = dec.finish();
        } else {
            self.decoded_bytes = self.body_bytes;
        }
    }
}

fn parse_head_bytes(data: &[u8]) -> Result<Option<(usize, HeadInfo)>, ()> {
    let mut headers = [httparse::EMPTY_HEADER; 64];
    let mut resp = httparse::Response::new(&mut headers);
    let used = match resp.parse(data) {
        Ok(httparse::Status::Complete(n)) => n,
        Ok(httparse::Status::Partial) => return Ok(None),
        Err(_) => return Err(()),
    };
    let http11 = resp.version == Some(1);
    let mut info =
        HeadInfo { status: resp.code.unwrap_or(0), length: None, chunked: false, keep_alive: http11, encoding: None };
    for h in resp.headers.iter() {
        let name = h.name.as_bytes();
        if name.eq_ignore_ascii_case(b"content-length") {
            // Two different lengths: the framing is unknowable (RFC 9112 §6.3), bad at once.
            let length = content_length(h.value)?;
            if info.length.is_some_and(|known| known != length) {
                return Err(());
            }
            info.length = Some(length);
        } else if name.eq_ignore_ascii_case(b"transfer-encoding") {
            info.chunked = contains_token(h.value, b"chunked");
        } else if name.eq_ignore_ascii_case(b"connection") {
            if contains_token(h.value, b"close") {
                info.keep_alive = false;
            } else if contains_token(h.value, b"keep-alive") {
                info.keep_alive = true;
            }
        } else if name.eq_ignore_ascii_case(b"content-encoding") {
            info.encoding = if contains_token(h.value, b"gzip") {
                Some(Encoding::Gzip)
            } else if contains_token(h.value, b"deflate") {
                Some(Encoding::Deflate)
            } else {
                None
            };
        }
    }
    Ok(Some((used, info)))
}

/// A Content-Length value: digits only; a list of equal values ("42, 42")
/// is that length (RFC 9110 §8.6), a list of different ones is an error.
fn content_length(value: &[u8]) -> Result<u64, ()> {
    let mut length = None;
    for part in value.split(|&b| b == b',') {
        let digits = part.trim_ascii();
        if digits.is_empty() || !digits.iter().all(u8::is_ascii_digit) {
            return Err(());
        }
        let n: u64 = std::str::from_utf8(digits).map_err(|_| ())?.parse().map_err(|_| ())?;
        if length.is_some_and(|known| known != n) {
            return Err(());
        }
        length = Some(n);
    }
    length.ok_or(())
}

fn contains_token(value: &[u8], token: &[u8]) -> bool {
    value.split(|&b| b == b',').any(|part| part.trim_ascii().eq_ignore_ascii_case(token))
}

/// Counts the bytes a decoder produces.
struct Counter(u64);

impl Write for Counter {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0 += buf.len() as u64;
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

enum Decoder {
    Gzip(flate2::write::GzDecoder<Counter>),
    Deflate(flate2::write::ZlibDecoder<Counter>),
}

impl Decoder {
    fn new(encoding: Encoding) -> Decoder {
        match encoding {
            Encoding::Gzip => Decoder::Gzip(flate2::write::GzDecoder::new(Counter(0))),
            Encoding::Deflate => Decoder::Deflate(flate2::write::ZlibDecoder::new(Counter(0))),
        }
    }

    /// Feed compressed bytes; a corrupt stream just stops counting.
    fn write(&mut self, data: &[u8]) {
        let _ = match self {
            Decoder::Gzip(d) => d.write_all(data),
            Decoder::Deflate(d) => d.write_all(data),
        };
    }

    fn finish(self) -> u64 {
        match self {
            Decoder::Gzip(d) => d.finish().map_or(0, |c| c.0),
            Decoder::Deflate(d) => d.finish().map_or(0, |c| c.0),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn feed_all(p: &mut ResponseParser, pieces: &[&[u8]]) -> Feed {
        let mut last = Feed::More;
        for piece in pieces {
            last = p.feed(piece);
            if last != Feed::More {
                break;
            }
        }
        last
    }

    #[test]
    fn content_length_in_pieces() {
        let wire = b"HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\n0123456789";
        for split in 1..wire.len() {
            let mut p = ResponseParser::new(false);
            p.reset(false);
            assert_eq!(feed_all(&mut p, &[&wire[..split], &wire[split..]]), Feed::Done, "split {split}");
            assert_eq!((p.status, p.body_bytes, p.wire_bytes, p.keep_alive), (200, 10, wire.len() as u64, true));
        }
    }

    #[test]
    fn chunked_close_and_interim() {
        let mut p = ResponseParser::new(false);
        p.reset(false);
        let wire = b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 201 Created\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n\r\n3\r\nabc\r\n0\r\n\r\n";
        assert_eq!(p.feed(wire), Feed::Done);
        assert_eq!((p.status, p.body_bytes, p.keep_alive), (201, 3, false));

        p.reset(false);
        assert_eq!(p.feed(b"HTTP/1.0 200 OK\r\n\r\nabcd"), Feed::More);
        assert_eq!(p.eof(), Feed::Done);
        assert_eq!((p.body_bytes, p.keep_alive), (4, false));

        p.reset(true); // HEAD
        assert_eq!(p.feed(b"HTTP/1.1 200 OK\r\nContent-Length: 99\r\n\r\n"), Feed::Done);
        assert_eq!(p.body_bytes, 0);

        p.reset(false);
        assert_eq!(p.feed(b"HTTP/1.1 200 OK\r\nContent-Length: 9\r\n\r\nabc"), Feed::More);
        assert_eq!(p.eof(), Feed::Bad);

        p.reset(false);
        assert_eq!(p.feed(b"garbage\r\n\r\n"), Feed::Bad);
    }

    #[test]
    fn conflicting_content_lengths_are_bad_at_once() {
        let table: &[(&[u8], Feed)] = &[
            (b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\nContent-Length: 50\r\n\r\nhello", Feed::Bad),
            (b"HTTP/1.1 200 OK\r\nContent-Length: 5, 50\r\n\r\nhello", Feed::Bad),
            (b"HTTP/1.1 200 OK\r\nContent-Length: +5\r\n\r\nhello", Feed::Bad),
            (b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\nContent-Length: 5\r\n\r\nhello", Feed::Done),
            (b"HTTP/1.1 200 OK\r\nContent-Length: 5, 5\r\n\r\nhello", Feed::Done),
        ];
        for &(wire, want) in table {
            let mut p = ResponseParser::new(false);
            p.reset(false);
            assert_eq!(p.feed(wire), want, "{}", String::from_utf8_lossy(wire));
        }
    }

    #[test]
    fn bytes_past_the_response_are_bad() {
        let second = "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok";
        let table: &[(&str, bool, Feed)] = &[
            ("HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok", false, Feed::Done),
            ("HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok{second}", false, Feed::Bad),
            ("HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nokX", false, Feed::Bad),
            ("HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n{second}", false, Feed::Bad),
            ("HTTP/1.1 204 No Content\r\n\r\n{second}", false, Feed::Bad),
            ("HTTP/1.1 200 OK\r\nContent-Length: 9\r\n\r\n{second}", true, Feed::Bad), // HEAD
            ("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nok\r\n0\r\n\r\n{second}", false, Feed::Bad),
            ("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nok\r\n0\r\n\r\n", false, Feed::Done),
            ("HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok", false, Feed::Done),
        ];
        for &(wire, head, want) in table {
            let wire = wire.replace("{second}", second);
            let mut p = ResponseParser::new(false);
            p.reset(head);
            assert_eq!(p.feed(wire.as_bytes()), want, "{wire:?}");
        }
        // The same bytes split across reads: the extra bytes arrive in the last piece.
        let mut p = ResponseParser::new(false);
        p.reset(false);
        assert_eq!(p.feed(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\no"), Feed::More);
        assert_eq!(p.feed(b"kHTTP"), Feed::Bad);
    }

    #[test]
    fn decodes_gzip() {
        let plain = vec![b'a'; 5000];
        let mut enc = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
        enc.write_all(&plain).unwrap();
        let gz = enc.finish().unwrap();
        let mut wire =
            format!("HTTP/1.1 200 OK\r\nContent-Encoding: gzip\r\nContent-Length: {}\r\n\r\n", gz.len()).into_bytes();
        wire.extend_from_slice(&gz);
        let mut p = ResponseParser::new(true);
        p.reset(false);
        assert_eq!(p.feed(&wire), Feed::Done);
        assert_eq!((p.body_bytes, p.decoded_bytes), (gz.len() as u64, 5000));
    }
}
