//! `gpuaudit serve` against a hostile world (issue 20), the real binary on 127.0.0.1:0:
//! descriptors exhausted, a header line without end, a slowloris client, a client that
//! pipelines requests and reads nothing, durations past their bounds, an audit error full of
//! escape sequences. Every loop is bounded and every test under a deadline; each says what it
//! measured on stderr (`cargo test -- --nocapture`).

mod common;
mod exporter;
use exporter::*;
use std::io::{ErrorKind, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// The exporter's limits (commands/serve/http.rs).
const HEADER_TIMEOUT: Duration = Duration::from_secs(10);
const WRITE_TIMEOUT: Duration = Duration::from_secs(10);

fn start(extra: &[&str]) -> Exporter {
    let root = snapshot("h200-x2-x8-link");
    let mut args = vec!["--root", root.to_str().unwrap(), "--interval", "1s"];
    args.extend_from_slice(extra);
    let e = Exporter::start(&args);
    e.wait_for("/healthz", 200, Duration::from_secs(30));
    e
}

/// /healthz asked every 100 ms by another client while `while_` runs: the longest answer, and
/// every answer 200.
struct HealthProbe {
    done: Arc<AtomicBool>,
    worst: Arc<Mutex<(Duration, usize, Vec<String>)>>,
    thread: Option<JoinHandle<()>>,
}

impl HealthProbe {
    fn start(addr: SocketAddr) -> HealthProbe {
        let done = Arc::new(AtomicBool::new(false));
        let worst = Arc::new(Mutex::new((Duration::ZERO, 0, Vec::new())));
        let (d, w) = (Arc::clone(&done), Arc::clone(&worst));
        let thread = std::thread::spawn(move || {
            while !d.load(Ordering::SeqCst) {
                let t = Instant::now();
                let r = try_request_within(addr, "GET", "/healthz", Duration::from_secs(5));
                let took = t.elapsed();
                let mut w = w.lock().unwrap();
                w.0 = w.0.max(took);
                w.1 += 1;
                match r {
                    Ok(r) if r.status == 200 => {}
                    Ok(r) => w.2.push(format!("{}: {}", r.status, r.body)),
                    Err(e) => w.2.push(e.to_string()),
                }
                drop(w);
                std::thread::sleep(Duration::from_millis(100));
            }
        });
        HealthProbe {
            done,
            worst,
            thread: Some(thread),
        }
    }

    /// Stops it; the longest answer and how many were asked; panics on one that was not 200.
    fn finish(mut self, what: &str) -> (Duration, usize) {
        self.done.store(true, Ordering::SeqCst);
        if let Some(t) = self.thread.take() {
            t.join().unwrap();
        }
        let w = self.worst.lock().unwrap();
        assert!(w.2.is_empty(), "{what}: /healthz failed: {:?}", w.2);
        assert!(w.1 > 0, "{what}: /healthz never asked");
        eprintln!(
            "{what}: /healthz answered {} times, the longest in {:?}",
            w.1, w.0
        );
        (w.0, w.1)
    }
}

/// The connection's end as the client sees it: `Ok(bytes read)` at EOF, `Err` at a reset.
fn read_to_end_within(s: &mut TcpStream, within: Duration) -> std::io::Result<Vec<u8>> {
    s.set_read_timeout(Some(within))?;
    let mut got = Vec::new();
    s.read_to_end(&mut got).map(|_| got)
}

#[test]
fn descriptors_run_out_and_come_back() {
    // 128 descriptors: the exporter serves 64 connections at once (half), the next ones wait
    // in the listen queue. 200 half-open connections, then closed: a new one is served.
    let root = snapshot("h200-x2-x8-link");
    let args = ["--root", root.to_str().unwrap(), "--interval", "1s"];
    let mut e = Exporter::start_with(&args, &[], Some(128));
    e.wait_for("/healthz", 200, Duration::from_secs(30));
    let mut held = Vec::new();
    let mut refused = 0;
    for _ in 0..200 {
        match TcpStream::connect_timeout(&e.addr, Duration::from_secs(2)) {
            Ok(mut s) => {
                // Half a request: the header never ends.
                let _ = s.write_all(b"GET /healthz HTTP/1.1\r\nHost: x\r\n");
                held.push(s);
            }
            Err(_) => refused += 1,
        }
    }
    let end = Instant::now() + Duration::from_secs(10);
    while !e
        .said()
        .contains("connections open, the most it serves at once")
    {
        assert!(Instant::now() < end, "no notice of the limit: {}", e.said());
        std::thread::sleep(Duration::from_millis(50));
    }
    assert!(e.alive());
    drop(held);
    let t = Instant::now();
    let h = e.wait_for("/healthz", 200, Duration::from_secs(15));
    eprintln!(
        "RLIMIT_NOFILE 128: 200 connections ({refused} refused), closed; /healthz {} after {:?}",
        h.status,
        t.elapsed()
    );
    let said = e.said();
    assert_eq!(
        said.matches("connections open, the most it serves").count(),
        1,
        "once, not per connection: {said}"
    );
    assert!(!said.contains("audit failed"), "{said}");
    assert_eq!(e.terminate(Duration::from_secs(5)).code(), Some(0));
}

#[test]
fn accept_errors_are_waited_out() {
    // 32 descriptors and a connection limit past them (GPUAUDIT_SERVE_CONNECTIONS, for tests):
    // accept() fails with EMFILE. The exporter waits it out and serves again once the
    // clients are gone; the audit, short of descriptors meanwhile, recovers too.
    let root = snapshot("h200-x2-x8-link");
    let args = ["--root", root.to_str().unwrap(), "--interval", "1s"];
    let mut e = Exporter::start_with(&args, &[("GPUAUDIT_SERVE_CONNECTIONS", "1000")], Some(32));
    e.wait_for("/healthz", 200, Duration::from_secs(30));
    let mut held = Vec::new();
    for _ in 0..100 {
        if let Ok(mut s) = TcpStream::connect_timeout(&e.addr, Duration::from_secs(2)) {
            let _ = s.write_all(b"GET /healthz HTTP/1.1\r\n");
            held.push(s);
        }
    }
    let end = Instant::now() + Duration::from_secs(15);
    while !e.said().contains("cannot accept a connection") {
        assert!(Instant::now() < end, "no accept error: {}", e.said());
        std::thread::sleep(Duration::from_millis(50));
    }
    // Held a while: the accept loop keeps failing, and backs off.
    std::thread::sleep(Duration::from_secs(2));
    assert!(e.alive());
    drop(held);
    let t = Instant::now();
    e.wait_for("/healthz", 200, Duration::from_secs(20));
    eprintln!(
        "EMFILE: served again {:?} after the clients closed",
        t.elapsed()
    );
    let said = e.said();
    let line = said
        .lines()
        .find(|l| l.contains("cannot accept a connection"))
        .unwrap_or_default()
        .to_string();
    assert!(line.contains("Too many open files"), "{said}");
    assert_eq!(
        said.matches("cannot accept a connection").count(),
        1,
        "once a minute, not per attempt: {said}"
    );
    assert_eq!(e.terminate(Duration::from_secs(5)).code(), Some(0));
}

#[test]
fn a_header_without_end_is_431_in_bounded_memory() {
    let mut e = start(&[]);
    let before = e.vm_kib("VmRSS");
    // A header just over the limit, then the client waits: 431 and the connection closed.
    let mut s = TcpStream::connect(e.addr).unwrap();
    s.set_write_timeout(Some(Duration::from_secs(10))).unwrap();
    let mut head = b"GET /metrics HTTP/1.1\r\nX-Long: ".to_vec();
    head.resize(20 * 1024, b'a');
    s.write_all(&head).unwrap();
    let answer = read_to_end_within(&mut s, Duration::from_secs(10)).unwrap_or_default();
    let answer = String::from_utf8_lossy(&answer);
    assert!(
        answer.starts_with("HTTP/1.1 431 Request Header Fields Too Large"),
        "{answer}"
    );

    // Four clients stream 64 MiB of one header line each: each is cut off at the limit.
    let addr = e.addr;
    let bombs: Vec<JoinHandle<(usize, String)>> = (0..4)
        .map(|_| {
            std::thread::spawn(move || {
                let mut s = TcpStream::connect(addr).unwrap();
                s.set_write_timeout(Some(Duration::from_secs(10))).unwrap();
                let _ = s.write_all(b"GET /metrics HTTP/1.1\r\nX-Bomb: ");
                let chunk = vec![b'a'; 64 * 1024];
                let mut sent = 0;
                while sent < 64 << 20 {
                    match s.write(&chunk) {
                        Ok(n) => sent += n,
                        Err(_) => break,
                    }
                }
                let end = match read_to_end_within(&mut s, Duration::from_secs(10)) {
                    Ok(got) => String::from_utf8_lossy(&got)
                        .lines()
                        .next()
                        .unwrap_or("closed")
                        .to_string(),
                    Err(e) => format!("closed: {e}"),
                };
                (sent, end)
            })
        })
        .collect();
    let mut ends = Vec::new();
    for b in bombs {
        let (sent, end) = b.join().unwrap();
        assert!(sent < 64 << 20, "64 MiB of header taken in");
        assert!(
            end.starts_with("HTTP/1.1 431") || end.starts_with("closed"),
            "{end}"
        );
        ends.push(format!("{sent} bytes sent, then {end}"));
    }
    let peak = e.vm_kib("VmHWM");
    let after = e.vm_kib("VmRSS");
    eprintln!(
        "header bombs: {ends:?}; RSS {before} KiB before, {after} KiB after, peak {peak} KiB"
    );
    assert!(peak < 100 * 1024, "peak RSS {peak} KiB");
    assert_eq!(get(e.addr, "/healthz").status, 200);
    let said = e.said_once("header was over 16 KiB", Duration::from_secs(10));
    assert_eq!(
        said.matches("header was over 16 KiB").count(),
        1,
        "one line for the burst: {said}"
    );
    assert_eq!(e.terminate(Duration::from_secs(5)).code(), Some(0));
}

#[test]
fn a_slowloris_client_is_cut_off_and_others_are_answered() {
    let mut e = start(&[]);
    let probe = HealthProbe::start(e.addr);
    let addr = e.addr;
    let slow: Vec<JoinHandle<Duration>> = (0..8)
        .map(|_| {
            std::thread::spawn(move || {
                let t = Instant::now();
                let mut s = TcpStream::connect(addr).unwrap();
                s.set_read_timeout(Some(Duration::from_secs(1))).unwrap();
                let _ = s.write_all(b"GET /healthz HTTP/1.1\r\nX-Slow: ");
                let mut buf = [0u8; 512];
                // A byte a second, 30 at most.
                for _ in 0..30 {
                    if s.write_all(b"a").is_err() {
                        return t.elapsed();
                    }
                    match s.read(&mut buf) {
                        Ok(0) => return t.elapsed(),
                        Ok(_) => {}
                        Err(e)
                            if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => {}
                        Err(_) => return t.elapsed(),
                    }
                }
                t.elapsed()
            })
        })
        .collect();
    let cut: Vec<Duration> = slow.into_iter().map(|t| t.join().unwrap()).collect();
    let (worst, _) = probe.finish("slowloris");
    eprintln!("slowloris: cut off after {cut:?}");
    for c in &cut {
        assert!(
            *c >= HEADER_TIMEOUT - Duration::from_secs(1)
                && *c < HEADER_TIMEOUT + Duration::from_secs(5),
            "cut off after {c:?}"
        );
    }
    assert!(worst < Duration::from_secs(1), "/healthz took {worst:?}");
    let said = e.said_once("sent no whole request within", Duration::from_secs(10));
    assert_eq!(
        said.matches("sent no whole request within").count(),
        1,
        "{said}"
    );
    assert_eq!(e.terminate(Duration::from_secs(5)).code(), Some(0));
}

/// Whether the peer closed `s` (waits 200 ms at most; reads nothing).
fn hung_up(s: &TcpStream) -> bool {
    use std::os::fd::AsRawFd;
    let mut p = libc::pollfd {
        fd: s.as_raw_fd(),
        events: libc::POLLRDHUP,
        revents: 0,
    };
    // SAFETY: one pollfd, ours, for the duration of the call.
    let n = unsafe { libc::poll(&mut p, 1, 200) };
    n > 0 && p.revents & (libc::POLLRDHUP | libc::POLLHUP | libc::POLLERR) != 0
}

#[test]
fn a_client_that_pipelines_and_reads_nothing_delays_no_one() {
    let mut e = start(&[]);
    let probe = HealthProbe::start(e.addr);
    let addr = e.addr;
    let pipeliners: Vec<JoinHandle<(usize, Duration)>> = (0..4)
        .map(|_| {
            std::thread::spawn(move || {
                let t = Instant::now();
                let mut s = TcpStream::connect(addr).unwrap();
                s.set_write_timeout(Some(Duration::from_secs(2))).unwrap();
                let one = b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n";
                let all = one.repeat(3000);
                let mut off = 0;
                // 3,000 requests; nothing read. The writes block once the exporter stops
                // reading (it answers one at a time and its answers are not taken).
                while off < all.len() && t.elapsed() < Duration::from_secs(30) {
                    match s.write(&all[off..]) {
                        Ok(n) => off += n,
                        Err(e)
                            if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => {}
                        Err(_) => break,
                    }
                }
                let sent = off / one.len();
                // Hold the socket, reading nothing, until the exporter closes it (a hang-up
                // or a reset seen by poll).
                while t.elapsed() < Duration::from_secs(40) && !hung_up(&s) {}
                (sent, t.elapsed())
            })
        })
        .collect();
    let ends: Vec<(usize, Duration)> = pipeliners.into_iter().map(|t| t.join().unwrap()).collect();
    let (worst, _) = probe.finish("pipelining");
    eprintln!("pipelining: (requests written, closed after) {ends:?}");
    for (_, closed) in &ends {
        assert!(*closed < Duration::from_secs(40), "never closed");
    }
    assert!(worst < Duration::from_secs(1), "/healthz took {worst:?}");
    let peak = e.vm_kib("VmHWM");
    assert!(peak < 100 * 1024, "peak RSS {peak} KiB");
    let said = e.said_once(
        "closed a connection that did not take its answer",
        Duration::from_secs(10),
    );
    assert!(
        said.contains(&format!(
            "closed a connection that did not take its answer within {} s",
            WRITE_TIMEOUT.as_secs()
        )),
        "{said}"
    );
    assert_eq!(get(e.addr, "/healthz").status, 200);
    assert_eq!(e.terminate(Duration::from_secs(5)).code(), Some(0));
}

#[test]
fn durations_past_their_bounds_are_exit_2_not_a_panic() {
    let root = snapshot("h200-x2-x8-link");
    for (args, says) in [
        (vec!["--interval", "18446744073709551615s"], "at most 1 day"),
        (vec!["--interval", "25h"], "at most 1 day"),
        (
            vec!["--measure-every", "18446744073709551615s"],
            "at most 30 days",
        ),
        (vec!["--measure-every", "31d"], "at most 30 days"),
        (vec!["--interval", "100000000000000000000s"], "too large"),
    ] {
        let out = common::gpuaudit()
            .arg("serve")
            .args(["--listen", "127.0.0.1:0"])
            .args(&args)
            .timeout(Duration::from_secs(30))
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {err}");
        assert!(!err.contains("panicked"), "{args:?}: {err}");
        // One line of error; clap adds its pointer to --help.
        let lines: Vec<&str> = err
            .lines()
            .filter(|l| !l.trim().is_empty() && !l.starts_with("For more information"))
            .collect();
        assert_eq!(lines.len(), 1, "{args:?}: {err}");
        assert!(lines[0].starts_with("error: invalid value"), "{err}");
        assert!(lines[0].contains(says), "{args:?}: {err}");
    }
    // The bounds themselves are taken.
    let mut e = Exporter::start(&["--root", root.to_str().unwrap(), "--interval", "1d"]);
    e.wait_for("/healthz", 200, Duration::from_secs(30));
    assert_eq!(e.terminate(Duration::from_secs(5)).code(), Some(0));
}

#[test]
fn an_audit_error_with_escape_sequences_is_escaped_on_stderr_and_in_healthz() {
    // The snapshot's directory name says "set the window title, clear the screen": once it is
    // gone, the audit's error names it.
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path().join("snap\x1b]0;pwned\x07\x1b[2J\u{9b}31m");
    common::copy_dir(&snapshot("h200-x2-x8-link"), &root);
    let mut e = Exporter::start(&["--root", root.to_str().unwrap(), "--interval", "1s"]);
    e.wait_for("/healthz", 200, Duration::from_secs(30));
    std::fs::remove_dir_all(&root).unwrap();
    let h = e.wait_for("/healthz", 503, Duration::from_secs(30));
    let end = Instant::now() + Duration::from_secs(10);
    while !e.said().contains("audit failed") {
        assert!(Instant::now() < end, "{}", e.said());
        std::thread::sleep(Duration::from_millis(50));
    }
    assert_eq!(e.terminate(Duration::from_secs(5)).code(), Some(0));
    let said = e.said();
    let escaped = "snap\\x1b]0;pwned\\x07\\x1b[2J\\u{9b}31m";
    assert!(
        h.body.starts_with("the latest audit failed: "),
        "{}",
        h.body
    );
    assert!(h.body.contains(escaped), "{}", h.body);
    assert!(
        !h.body.contains('\x1b') && !h.body.contains('\x07'),
        "{:?}",
        h.body
    );
    assert!(!h.body.contains('\u{9b}'), "{:?}", h.body);
    assert_eq!(h.body.lines().count(), 1, "{:?}", h.body);
    let failed = said
        .lines()
        .find(|l| l.contains("audit failed"))
        .unwrap_or_default();
    assert!(failed.contains(escaped), "{failed:?}");
    assert!(
        !said.contains('\x1b') && !said.contains('\x07') && !said.contains('\u{9b}'),
        "{said:?}"
    );
}
