//! Tiny test servers on 127.0.0.1 (std::net, a thread per connection) and a
//! helper that runs the real binary.
#![allow(dead_code)]

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::process::{Command, Output};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// What the server does with each request.
#[derive(Clone, Copy, Debug)]
pub enum Behavior {
    /// `Content-Length` body of this many bytes, keep-alive.
    Length(usize),
    /// Chunked body of this many bytes in chunks of 100.
    Chunked(usize),
    /// Body then `Connection: close` and close.
    Close(usize),
    /// Bodies of alternately `.0` and `.1` bytes (server-wide request order).
    Alternate(usize, usize),
    /// Reset the connection (RST) instead of answering.
    Reset,
    /// Read the request and never answer.
    Silent,
    /// Like `Length`, but the whole server freezes once for `pause` after
    /// `after` requests (every response waits until the freeze ends).
    FreezeOnce { body: usize, after: u64, pause: Duration },
    /// Answer these exact bytes to every request, keep the connection.
    Raw(&'static [u8]),
    /// Answer each request twice (two `Length` responses, two writes), keep the connection.
    Twice(usize),
}

/// Counters the tests compare with the report.
#[derive(Default)]
pub struct Seen {
    pub connections: AtomicU64,
    pub requests: AtomicU64,
    pub bytes_sent: AtomicU64,
}

pub struct TestServer {
    pub port: u16,
    pub seen: Arc<Seen>,
}

impl TestServer {
    pub fn url(&self, path: &str) -> String {
        format!("http://127.0.0.1:{}{path}", self.port)
    }
}

/// A server that serves one connection at a time, each until the client
/// closes it (like a prefork server with one process and keep-alive): the
/// other clients' connects complete in the kernel and wait in the accept queue.
pub fn start_one_at_a_time(body: usize) -> TestServer {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let seen = Arc::new(Seen::default());
    let seen2 = Arc::clone(&seen);
    std::thread::spawn(move || {
        let freeze = Mutex::new(None);
        for stream in listener.incoming() {
            let Ok(stream) = stream else { continue };
            seen2.connections.fetch_add(1, Ordering::SeqCst);
            serve(stream, Behavior::Length(body), &seen2, &freeze);
        }
    });
    TestServer { port, seen }
}

pub fn start(behavior: Behavior) -> TestServer {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let seen = Arc::new(Seen::default());
    let freeze: Arc<Mutex<Option<Instant>>> = Arc::new(Mutex::new(None));
    let seen2 = Arc::clone(&seen);
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(stream) = stream else { continue };
            seen2.connections.fetch_add(1, Ordering::SeqCst);
            let seen = Arc::clone(&seen2);
            let freeze = Arc::clone(&freeze);
            std::thread::spawn(move || serve(stream, behavior, &seen, &freeze));
        }
    });
    TestServer { port, seen }
}

/// The response bytes for a body of `n` bytes.
pub fn length_response(n: usize) -> Vec<u8> {
    let mut r = format!("HTTP/1.1 200 OK\r\nContent-Length: {n}\r\nContent-Type: text/plain\r\n\r\n").into_bytes();
    r.extend(std::iter::repeat_n(b'x', n));
    r
}

pub fn chunked_response(n: usize) -> Vec<u8> {
    let mut r = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n".to_vec();
    let mut left = n;
    while left > 0 {
        let k = left.min(100);
        r.extend(format!("{k:x}\r\n").bytes());
        r.extend(std::iter::repeat_n(b'y', k));
        r.extend(b"\r\n");
        left -= k;
    }
    r.extend(b"0\r\n\r\n");
    r
}

/// Read one request head (tests send no bodies) into `buf`; returns the head, lowercased,
/// and removes it from `buf`. None when the client closed or the read failed.
pub fn read_head<S: Read>(s: &mut S, buf: &mut Vec<u8>) -> Option<String> {
    let mut chunk = [0u8; 4096];
    let end = loop {
        if let Some(p) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            break p + 4;
        }
        match s.read(&mut chunk) {
            Ok(0) | Err(_) => return None,
            Ok(n) => buf.extend_from_slice(&chunk[..n]),
        }
    };
    let head = String::from_utf8_lossy(&buf[..end]).to_ascii_lowercase();
    buf.drain(..end);
    Some(head)
}

fn serve(mut s: TcpStream, behavior: Behavior, seen: &Seen, freeze: &Mutex<Option<Instant>>) {
    let _ = s.set_nodelay(true);
    let mut buf = Vec::new();
    loop {
        let Some(head) = read_head(&mut s, &mut buf) else { return };
        let count = seen.requests.fetch_add(1, Ordering::SeqCst) + 1;
        let client_close = head.contains("connection: close");
        let (bytes, close) = match behavior {
            Behavior::Length(n) => (length_response(n), false),
            Behavior::Chunked(n) => (chunked_response(n), false),
            Behavior::Alternate(a, b) => (length_response(if count % 2 == 1 { a } else { b }), false),
            Behavior::Close(n) => {
                let mut r = length_response(n);
                let at = r.windows(2).position(|w| w == b"\r\n").unwrap() + 2;
                r.splice(at..at, b"Connection: close\r\n".iter().copied());
                (r, true)
            }
            Behavior::Raw(bytes) => (bytes.to_vec(), false),
            Behavior::Twice(n) => {
                if s.write_all(&length_response(n)).is_err() {
                    return;
                }
                seen.bytes_sent.fetch_add(length_response(n).len() as u64, Ordering::SeqCst);
                (length_response(n), false)
            }
            Behavior::Reset => {
                linger_zero(&s);
                return; // dropping `s` now sends the reset
            }
            Behavior::Silent => {
                std::thread::sleep(Duration::from_secs(60));
                return;
            }
            Behavior::FreezeOnce { body, after, pause } => {
                let until = {
                    let mut f = freeze.lock().unwrap();
                    if f.is_none() && count == after {
                        *f = Some(Instant::now() + pause);
                    }
                    *f
                };
                if let Some(until) = until {
                    let now = Instant::now();
                    if now < until {
                        std::thread::sleep(until - now);
                    }
                }
                (length_response(body), false)
            }
        };
        if s.write_all(&bytes).is_err() {
            return;
        }
        seen.bytes_sent.fetch_add(bytes.len() as u64, Ordering::SeqCst);
        if close || client_close {
            return;
        }
    }
}

/// Set SO_LINGER to zero so that closing sends a reset.
fn linger_zero(s: &TcpStream) {
    use std::os::fd::AsRawFd;
    let linger = libc::linger { l_onoff: 1, l_linger: 0 };
    // SAFETY: plain setsockopt on a valid socket with a correctly sized value.
    unsafe {
        libc::setsockopt(
            s.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_LINGER,
            (&linger as *const libc::linger).cast(),
            std::mem::size_of::<libc::linger>() as libc::socklen_t,
        );
    }
}

/// Run the real binary with `args`.
pub fn run(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_stacklab-load")).args(args).output().expect("binary runs")
}

/// Run with `--json` and parse the report (asserting exit 0).
pub fn run_json(args: &[&str]) -> serde_json::Value {
    run_json_exit(args, 0)
}

/// Run with `--json`, assert the exit status and parse the report.
pub fn run_json_exit(args: &[&str], code: i32) -> serde_json::Value {
    let mut all = vec!["--json"];
    all.extend_from_slice(args);
    let out = run(&all);
    assert_eq!(out.status.code(), Some(code), "{args:?}: {}", String::from_utf8_lossy(&out.stderr));
    serde_json::from_slice(&out.stdout).expect("stdout is one JSON document")
}

/// A free port with nothing listening on it.
pub fn closed_port() -> u16 {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    l.local_addr().unwrap().port()
}
