//! A timerfd for open-loop send times: epoll's own timeout only has
//! millisecond resolution, which would add up to 1 ms to every paced request.

use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::time::{Duration, Instant};

use mio::unix::SourceFd;
use mio::{Interest, Registry, Token};

pub struct Alarm {
    fd: OwnedFd,
    armed: Option<Instant>,
}

impl Alarm {
    pub fn new(registry: &Registry, token: Token) -> io::Result<Alarm> {
        // SAFETY: timerfd_create returns a new descriptor or -1.
        let raw = unsafe { libc::timerfd_create(libc::CLOCK_MONOTONIC, libc::TFD_NONBLOCK | libc::TFD_CLOEXEC) };
        if raw < 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: `raw` is a fresh descriptor we own.
        let fd = unsafe { OwnedFd::from_raw_fd(raw) };
        registry.register(&mut SourceFd(&fd.as_raw_fd()), token, Interest::READABLE)?;
        Ok(Alarm { fd, armed: None })
    }

    /// Make sure the alarm rings no later than `at`.
    pub fn arm(&mut self, at: Instant, now: Instant) {
        if self.armed.is_some_and(|armed| armed <= at && armed > now) {
            return;
        }
        let wait = at.saturating_duration_since(now).max(Duration::from_nanos(1));
        let spec = libc::itimerspec {
            it_interval: libc::timespec { tv_sec: 0, tv_nsec: 0 },
            it_value: libc::timespec {
                tv_sec: wait.as_secs() as libc::time_t,
                tv_nsec: wait.subsec_nanos() as libc::c_long,
            },
        };
        // SAFETY: valid descriptor and a fully initialised itimerspec.
        unsafe { libc::timerfd_settime(self.fd.as_raw_fd(), 0, &spec, std::ptr::null_mut()) };
        self.armed = Some(at);
    }

    /// The alarm rang: consume the expiration.
    pub fn rang(&mut self) {
        let mut count = [0u8; 8];
        // SAFETY: reading 8 bytes into an 8-byte buffer from our descriptor.
        unsafe { libc::read(self.fd.as_raw_fd(), count.as_mut_ptr().cast(), 8) };
        self.armed = None;
    }
}
