//! The HTTP side of `gpuaudit serve`: hyper 1 (HTTP/1.1) on a tokio runtime of two worker
//! threads, with the limits a server on the open network needs (DESIGN "gpuaudit serve").
//!
//! - Every connection is its own task: one that stalls holds its own socket and nothing else.
//! - A request's header is at most [`MAX_HEADER_BYTES`] (hyper answers 431 past it and closes
//!   the connection; memory stays bounded however long the line).
//! - The header must arrive whole within [`HEADER_TIMEOUT`] of the connection (or of the
//!   previous answer, on a kept-alive one): a slowloris client sending a byte a second is cut
//!   off, and an idle connection closed.
//! - A read that gets nothing for [`READ_TIMEOUT`], and an answer the client has not taken
//!   within [`WRITE_TIMEOUT`] (a client that pipelines requests and reads nothing), close the
//!   connection; so does [`CONNECTION_LIFETIME`] (after the answer in progress).
//! - At most [`connection_limit`] connections are served at once (half the descriptors the
//!   process may open, at most [`MAX_CONNECTIONS`]): past it new connections wait in the
//!   kernel's listen queue (or are refused by it) and the descriptors the audit needs are never
//!   taken by clients.
//! - An error of `accept()` (EMFILE, ENFILE, ENOBUFS, ...) is waited out with back-off
//!   ([`ACCEPT_BACKOFF_MAX`] at most); the server never stops accepting.
//!
//! Nothing is logged per connection: each kind of limit reached is one line on stderr at most
//! once per [`NOTICE_EVERY`], through a writer thread that a blocked stderr cannot stall the
//! server with (lines are dropped when its queue is full).

use super::POLL;
use http_body_util::Full;
use hyper::body::{Bytes, Incoming};
use hyper::{Method, Request, Response, StatusCode};
use hyper_util::rt::{TokioIo, TokioTimer};
use std::future::Future;
use std::io;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::mpsc::{self, SyncSender, TrySendError};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::{Duration, Instant};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::Semaphore;
use tokio::time::Sleep;

/// The request line and headers together, in bytes: Prometheus sends a few hundred; nginx's
/// default is 8 KiB a line.
pub const MAX_HEADER_BYTES: usize = 16 * 1024;
/// hyper's read (and write) buffer: what a connection may hold of pipelined requests. Larger
/// than a header may be, or the header's limit would be this one.
const MAX_BUF_BYTES: usize = 2 * MAX_HEADER_BYTES;
/// From the connection (or the previous answer) to the end of the next request's header.
pub const HEADER_TIMEOUT: Duration = Duration::from_secs(10);
/// A read that gets no byte for this long closes the connection.
pub const READ_TIMEOUT: Duration = Duration::from_secs(10);
/// An answer not taken by the client this long after it began to be written closes the
/// connection.
pub const WRITE_TIMEOUT: Duration = Duration::from_secs(10);
/// A connection is closed after this long (after the answer in progress); Prometheus opens
/// another.
pub const CONNECTION_LIFETIME: Duration = Duration::from_secs(600);
/// The most connections served at once, whatever the descriptor limit.
pub const MAX_CONNECTIONS: usize = 1024;
/// Back-off after an `accept()` error: from the first to the last, doubling.
pub const ACCEPT_BACKOFF_MIN: Duration = Duration::from_millis(10);
pub const ACCEPT_BACKOFF_MAX: Duration = Duration::from_secs(1);
/// Each kind of notice is said at most this often.
pub const NOTICE_EVERY: Duration = Duration::from_secs(60);
/// Lines waiting for stderr; more are dropped.
const LOG_QUEUE: usize = 64;

/// What a request is answered: status, body, content type.
pub type Answer = (StatusCode, Bytes, &'static str);
/// Answers a request by method and path (a plain function: no I/O, no waiting but a lock).
pub type Router = dyn Fn(&Method, &str) -> Answer + Send + Sync;

/// Half the descriptors this process may open (the soft RLIMIT_NOFILE), at least 1, at most
/// [`MAX_CONNECTIONS`]: the other half is for the audit (its files and children), the listener
/// and the runtime. `GPUAUDIT_SERVE_CONNECTIONS=N` sets it (for tests: a limit past the
/// descriptors, so that `accept()` runs out of them).
pub fn connection_limit() -> usize {
    if let Some(n) = std::env::var("GPUAUDIT_SERVE_CONNECTIONS")
        .ok()
        .and_then(|v| v.parse::<usize>().ok())
    {
        return n.clamp(1, 1 << 16);
    }
    let mut lim = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit writes the struct it is given and nothing else.
    let soft = if unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim) } == 0 {
        lim.rlim_cur
    } else {
        // Linux's default soft limit.
        1024
    };
    limit_for(soft)
}

fn limit_for(soft: libc::rlim_t) -> usize {
    usize::try_from(soft / 2)
        .unwrap_or(MAX_CONNECTIONS)
        .clamp(1, MAX_CONNECTIONS)
}

/// Lines for stderr, written by a thread of their own.
#[derive(Clone)]
pub struct Log {
    tx: SyncSender<LogMsg>,
}

enum LogMsg {
    Line(String),
    Flush(SyncSender<()>),
}

impl Log {
    pub fn start() -> io::Result<Log> {
        let (tx, rx) = mpsc::sync_channel::<LogMsg>(LOG_QUEUE);
        std::thread::Builder::new()
            .name("gpuaudit-log".into())
            .spawn(move || {
                for msg in rx {
                    match msg {
                        LogMsg::Line(l) => crate::sink::note(&l),
                        LogMsg::Flush(ack) => {
                            let _ = ack.send(());
                        }
                    }
                }
            })?;
        Ok(Log { tx })
    }

    /// One line, escaped by the caller where it holds text from outside; dropped when the
    /// queue is full (stderr blocked).
    pub fn say(&self, line: String) {
        let _ = self.tx.try_send(LogMsg::Line(line));
    }

    /// Waits (at most `within`) until what was said before is written.
    pub fn flush(&self, within: Duration) {
        let (ack, done) = mpsc::sync_channel(1);
        let sent = match self.tx.try_send(LogMsg::Flush(ack.clone())) {
            Ok(()) => true,
            Err(TrySendError::Full(_)) => {
                // Wait for room, but not for ever.
                let end = Instant::now() + within;
                let mut sent = false;
                while Instant::now() < end {
                    if self.tx.try_send(LogMsg::Flush(ack.clone())).is_ok() {
                        sent = true;
                        break;
                    }
                    std::thread::sleep(Duration::from_millis(10));
                }
                sent
            }
            Err(TrySendError::Disconnected(_)) => false,
        };
        if sent {
            let _ = done.recv_timeout(within);
        }
    }
}

/// The kinds of limit reached that the admin is told of.
#[derive(Clone, Copy)]
enum Notice {
    ConnectionLimit,
    Accept,
    HeaderTooLarge,
    SlowRequest,
    SlowReader,
}

const NOTICES: usize = 5;

/// Each kind said at most once per [`NOTICE_EVERY`].
struct Notices {
    log: Log,
    last: Mutex<[Option<Instant>; NOTICES]>,
}

impl Notices {
    fn say(&self, kind: Notice, line: impl FnOnce() -> String) {
        let now = Instant::now();
        {
            let mut last = self.last.lock().unwrap_or_else(|e| e.into_inner());
            let slot = &mut last[kind as usize];
            if slot.is_some_and(|t| now.duration_since(t) < NOTICE_EVERY) {
                return;
            }
            *slot = Some(now);
        }
        self.log.say(format!(
            "gpuaudit serve: {} (said at most once a minute)",
            line()
        ));
    }
}

/// Serves `router` on `listener` until `stop` is set (looked at every [`POLL`]).
pub async fn serve(
    listener: TcpListener,
    router: Arc<Router>,
    stop: Arc<AtomicBool>,
    log: Log,
    limit: usize,
) {
    let notices = Arc::new(Notices {
        log,
        last: Mutex::new([None; NOTICES]),
    });
    let permits = Arc::new(Semaphore::new(limit));
    let mut backoff = ACCEPT_BACKOFF_MIN;
    while !stop.load(Ordering::SeqCst) {
        let permit = match Arc::clone(&permits).try_acquire_owned() {
            Ok(p) => p,
            Err(_) => {
                notices.say(Notice::ConnectionLimit, || {
                    format!(
                        "{limit} connections open, the most it serves at once (half of \
                         RLIMIT_NOFILE, at most {MAX_CONNECTIONS}): new ones wait"
                    )
                });
                match tokio::time::timeout(POLL, Arc::clone(&permits).acquire_owned()).await {
                    Ok(Ok(p)) => p,
                    _ => continue,
                }
            }
        };
        let stream = match tokio::time::timeout(POLL, listener.accept()).await {
            Err(_) => continue,
            Ok(Ok((stream, _))) => {
                backoff = ACCEPT_BACKOFF_MIN;
                stream
            }
            // The client gave up before it was accepted: nothing wrong here.
            Ok(Err(e))
                if matches!(
                    e.kind(),
                    io::ErrorKind::ConnectionAborted | io::ErrorKind::ConnectionReset
                ) =>
            {
                continue
            }
            Ok(Err(e)) => {
                notices.say(Notice::Accept, || {
                    format!(
                        "cannot accept a connection: {}; trying again (back-off up to {} ms)",
                        gpuaudit_core::render::escape::escape_line(&e.to_string()),
                        ACCEPT_BACKOFF_MAX.as_millis()
                    )
                });
                drop(permit);
                tokio::time::sleep(backoff).await;
                backoff = (backoff * 2).min(ACCEPT_BACKOFF_MAX);
                continue;
            }
        };
        let router = Arc::clone(&router);
        let notices = Arc::clone(&notices);
        tokio::spawn(async move {
            connection(stream, router, &notices).await;
            drop(permit);
        });
    }
}

/// One connection, from its first byte to its end.
async fn connection(stream: TcpStream, router: Arc<Router>, notices: &Notices) {
    let served = Arc::new(AtomicUsize::new(0));
    let counted = Arc::clone(&served);
    let service = hyper::service::service_fn(move |req: Request<Incoming>| {
        counted.fetch_add(1, Ordering::Relaxed);
        let (status, body, content_type) = router(req.method(), req.uri().path());
        let mut response = Response::new(Full::new(body));
        *response.status_mut() = status;
        response.headers_mut().insert(
            hyper::header::CONTENT_TYPE,
            hyper::header::HeaderValue::from_static(content_type),
        );
        std::future::ready(Ok::<_, std::convert::Infallible>(response))
    });
    let mut builder = hyper::server::conn::http1::Builder::new();
    builder
        .timer(TokioTimer::new())
        .header_read_timeout(HEADER_TIMEOUT)
        .max_header_size(MAX_HEADER_BYTES)
        .max_buf_size(MAX_BUF_BYTES);
    let conn = builder.serve_connection(TokioIo::new(Guarded::new(stream)), service);
    let mut conn = std::pin::pin!(conn);
    let outcome = match tokio::time::timeout(CONNECTION_LIFETIME, conn.as_mut()).await {
        Ok(outcome) => outcome,
        Err(_) => {
            conn.as_mut().graceful_shutdown();
            match tokio::time::timeout(WRITE_TIMEOUT, conn.as_mut()).await {
                Ok(outcome) => outcome,
                Err(_) => Ok(()),
            }
        }
    };
    let Err(e) = outcome else { return };
    let first = served.load(Ordering::Relaxed) == 0;
    match stalled(&e) {
        Some(Stalled::Write) => notices.say(Notice::SlowReader, || {
            format!(
                "closed a connection that did not take its answer within {} s",
                WRITE_TIMEOUT.as_secs()
            )
        }),
        _ if e.is_parse_too_large() => notices.say(Notice::HeaderTooLarge, || {
            format!(
                "a request's header was over {} KiB: answered 431 and closed the connection",
                MAX_HEADER_BYTES / 1024
            )
        }),
        // An idle kept-alive connection ending is normal; one that never sent a whole
        // request in time is a slow client.
        Some(Stalled::Read) if first => slow_request(notices),
        _ if e.is_timeout() && first => slow_request(notices),
        // A client that went away, a request that is not HTTP: the client's problem.
        _ => {}
    }
}

fn slow_request(notices: &Notices) {
    notices.say(Notice::SlowRequest, || {
        format!(
            "closed a connection that sent no whole request within {} s",
            HEADER_TIMEOUT.as_secs()
        )
    })
}

/// Which way a connection stalled, carried in the `io::Error` of [`Guarded`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Stalled {
    Read,
    Write,
}

impl std::fmt::Display for Stalled {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Stalled::Read => "no byte read within the read timeout",
            Stalled::Write => "the answer not taken within the write timeout",
        })
    }
}

impl std::error::Error for Stalled {}

fn stalled(e: &hyper::Error) -> Option<Stalled> {
    let mut source = std::error::Error::source(e);
    while let Some(s) = source {
        if let Some(st) = s.downcast_ref::<Stalled>() {
            return Some(*st);
        }
        if let Some(io) = s.downcast_ref::<io::Error>() {
            if let Some(st) = io.get_ref().and_then(|i| i.downcast_ref::<Stalled>()) {
                return Some(*st);
            }
        }
        source = s.source();
    }
    None
}

/// A TCP stream whose reads fail after [`READ_TIMEOUT`] without a byte and whose writes fail
/// once an answer has not been taken [`WRITE_TIMEOUT`] after its first byte was written.
struct Guarded {
    inner: TcpStream,
    read: Timer,
    write: Timer,
}

/// A deadline armed when waiting begins.
struct Timer {
    sleep: Pin<Box<Sleep>>,
    armed: bool,
    after: Duration,
}

impl Timer {
    fn new(after: Duration) -> Timer {
        Timer {
            sleep: Box::pin(tokio::time::sleep(after)),
            armed: false,
            after,
        }
    }

    fn arm(&mut self) {
        if !self.armed {
            self.armed = true;
            let at = tokio::time::Instant::now() + self.after;
            self.sleep.as_mut().reset(at);
        }
    }

    fn disarm(&mut self) {
        self.armed = false;
    }

    /// Whether the deadline passed (registering the waker otherwise).
    fn expired(&mut self, cx: &mut Context<'_>) -> bool {
        self.armed && self.sleep.as_mut().poll(cx).is_ready()
    }
}

impl Guarded {
    fn new(inner: TcpStream) -> Guarded {
        Guarded {
            inner,
            read: Timer::new(READ_TIMEOUT),
            write: Timer::new(WRITE_TIMEOUT),
        }
    }

    /// After a write or flush that is `Pending`: the error once the answer is overdue.
    fn write_pending<T>(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<T>> {
        self.write.arm();
        if self.write.expired(cx) {
            return Poll::Ready(Err(io::Error::new(io::ErrorKind::TimedOut, Stalled::Write)));
        }
        Poll::Pending
    }
}

impl AsyncRead for Guarded {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        match Pin::new(&mut this.inner).poll_read(cx, buf) {
            Poll::Ready(r) => {
                this.read.disarm();
                Poll::Ready(r)
            }
            Poll::Pending => {
                this.read.arm();
                if this.read.expired(cx) {
                    return Poll::Ready(Err(io::Error::new(
                        io::ErrorKind::TimedOut,
                        Stalled::Read,
                    )));
                }
                Poll::Pending
            }
        }
    }
}

impl AsyncWrite for Guarded {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        // The answer's clock starts with its first byte.
        this.write.arm();
        match Pin::new(&mut this.inner).poll_write(cx, buf) {
            Poll::Ready(r) => Poll::Ready(r),
            Poll::Pending => this.write_pending(cx),
        }
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        this.write.arm();
        match Pin::new(&mut this.inner).poll_write_vectored(cx, bufs) {
            Poll::Ready(r) => Poll::Ready(r),
            Poll::Pending => this.write_pending(cx),
        }
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        match Pin::new(&mut this.inner).poll_flush(cx) {
            Poll::Ready(r) => {
                // hyper flushes after each answer: the next one has a clock of its own.
                this.write.disarm();
                Poll::Ready(r)
            }
            Poll::Pending => this.write_pending(cx),
        }
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().inner).poll_shutdown(cx)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_connection_limit_is_half_the_descriptors_within_bounds() {
        assert_eq!(limit_for(1024), 512);
        assert_eq!(limit_for(128), 64);
        assert_eq!(limit_for(1), 1);
        assert_eq!(limit_for(0), 1);
        assert_eq!(limit_for(1 << 20), MAX_CONNECTIONS);
        assert_eq!(limit_for(libc::RLIM_INFINITY), MAX_CONNECTIONS);
        assert!(connection_limit() >= 1);
    }

    #[test]
    fn a_notice_is_said_once_a_minute_at_most() {
        let (tx, rx) = mpsc::sync_channel(16);
        let n = Notices {
            log: Log { tx },
            last: Mutex::new([None; NOTICES]),
        };
        for _ in 0..100 {
            n.say(Notice::Accept, || "cannot accept".into());
        }
        n.say(Notice::HeaderTooLarge, || "431".into());
        let lines: Vec<String> = rx
            .try_iter()
            .filter_map(|m| match m {
                LogMsg::Line(l) => Some(l),
                LogMsg::Flush(_) => None,
            })
            .collect();
        assert_eq!(
            lines,
            [
                "gpuaudit serve: cannot accept (said at most once a minute)",
                "gpuaudit serve: 431 (said at most once a minute)"
            ]
        );
    }

    #[test]
    fn a_full_log_queue_drops_lines_instead_of_waiting() {
        let (tx, _rx) = mpsc::sync_channel(1);
        let log = Log { tx };
        let t = Instant::now();
        for i in 0..1000 {
            log.say(format!("line {i}"));
        }
        log.flush(Duration::from_millis(50));
        assert!(t.elapsed() < Duration::from_secs(5));
    }
}
