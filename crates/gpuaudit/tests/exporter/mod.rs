//! `gpuaudit serve` started as a process, and plain HTTP/1.0 over loopback (shared by
//! serve.rs and serve_prometheus.rs).
#![allow(dead_code)]

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::Path;
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// A running exporter; killed on drop should a test fail before it stopped it.
pub struct Exporter {
    pub child: Child,
    pub addr: SocketAddr,
    pub stderr: Arc<Mutex<String>>,
}

impl Exporter {
    /// `gpuaudit serve --listen 127.0.0.1:0 ARGS...`, once it says where it listens.
    pub fn start(args: &[&str]) -> Exporter {
        Exporter::start_with(args, &[], None)
    }

    /// [`Exporter::start`] with more environment and, where `nofile` says, the soft and hard
    /// RLIMIT_NOFILE set to it in the child before it runs gpuaudit.
    pub fn start_with(args: &[&str], env: &[(&str, &str)], nofile: Option<u64>) -> Exporter {
        use std::os::unix::process::CommandExt;
        let bin = assert_cmd::cargo::cargo_bin("gpuaudit");
        let mut cmd = Command::new(bin);
        cmd.arg("serve")
            .args(["--listen", "127.0.0.1:0"])
            .args(args)
            .env("GPUAUDIT_NOW", "2026-01-01T00:00:00Z")
            .envs(env.iter().copied())
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped());
        if let Some(n) = nofile {
            let lim = libc::rlimit {
                rlim_cur: n as libc::rlim_t,
                rlim_max: n as libc::rlim_t,
            };
            // SAFETY: setrlimit is async-signal-safe and touches only the new process.
            unsafe {
                cmd.pre_exec(move || {
                    if libc::setrlimit(libc::RLIMIT_NOFILE, &lim) == 0 {
                        Ok(())
                    } else {
                        Err(std::io::Error::last_os_error())
                    }
                });
            }
        }
        let mut child = cmd.spawn().expect("gpuaudit serve starts");
        let stderr = child.stderr.take().expect("piped stderr");
        let (tx, rx) = std::sync::mpsc::channel();
        let log = Arc::new(Mutex::new(String::new()));
        let keep = Arc::clone(&log);
        std::thread::spawn(move || {
            for line in BufReader::new(stderr).lines().map_while(Result::ok) {
                if let Some(rest) = line.split("listening on http://").nth(1) {
                    let addr = rest.split_whitespace().next().unwrap_or("").to_string();
                    let _ = tx.send(addr);
                }
                let mut l = keep.lock().unwrap_or_else(|e| e.into_inner());
                l.push_str(&line);
                l.push('\n');
            }
        });
        let addr = match rx.recv_timeout(Duration::from_secs(30)) {
            Ok(a) => a.parse().expect("an address"),
            Err(_) => {
                let _ = child.kill();
                let _ = child.wait();
                panic!(
                    "gpuaudit serve did not say where it listens: {}",
                    log.lock().unwrap()
                );
            }
        };
        Exporter {
            child,
            addr,
            stderr: log,
        }
    }

    /// Polls `path` until it answers `status` (at most `within`).
    pub fn wait_for(&self, path: &str, status: u16, within: Duration) -> Response {
        let end = Instant::now() + within;
        loop {
            let r = get(self.addr, path);
            if r.status == status || Instant::now() > end {
                assert_eq!(
                    r.status,
                    status,
                    "{path}: {} (stderr: {})",
                    r.body,
                    self.stderr.lock().unwrap()
                );
                return r;
            }
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    /// The process's `/proc/PID/status` field in KiB (`VmRSS`, `VmHWM`: the peak).
    pub fn vm_kib(&self, field: &str) -> u64 {
        let status = std::fs::read_to_string(format!("/proc/{}/status", self.child.id()))
            .expect("/proc/PID/status");
        status
            .lines()
            .find_map(|l| l.strip_prefix(field)?.strip_prefix(':'))
            .and_then(|v| v.split_whitespace().next()?.parse().ok())
            .unwrap_or_else(|| panic!("no {field} in {status}"))
    }

    /// Whether the process still runs.
    pub fn alive(&mut self) -> bool {
        matches!(self.child.try_wait(), Ok(None))
    }

    /// What it said on stderr so far.
    pub fn said(&self) -> String {
        self.stderr
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    /// Stderr once it holds `text`, or after `within` as it is: the limits' lines go through
    /// a thread and a queue of their own, so a line may reach stderr a moment after the event
    /// (on a loaded machine, after the test's next request).
    pub fn said_once(&self, text: &str, within: Duration) -> String {
        let end = std::time::Instant::now() + within;
        loop {
            let said = self.said();
            if said.contains(text) || std::time::Instant::now() >= end {
                return said;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// SIGTERM, then the exit status (within `within`, else a panic).
    pub fn terminate(&mut self, within: Duration) -> ExitStatus {
        let pid = i32::try_from(self.child.id()).expect("a pid");
        // SAFETY: kill takes plain integers; the child is ours and not reaped yet.
        unsafe {
            libc::kill(pid, libc::SIGTERM);
        }
        let end = Instant::now() + within;
        loop {
            if let Some(status) = self.child.try_wait().expect("wait") {
                return status;
            }
            assert!(
                Instant::now() < end,
                "gpuaudit serve did not stop within {within:?} of SIGTERM"
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

impl Drop for Exporter {
    fn drop(&mut self) {
        if let Ok(None) = self.child.try_wait() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

#[derive(Debug)]
pub struct Response {
    pub status: u16,
    pub head: String,
    pub body: String,
}

/// One HTTP/1.0 request (so that no server answers in chunks), the whole answer.
pub fn request(addr: SocketAddr, method: &str, path: &str) -> Response {
    try_request(addr, method, path).unwrap_or_else(|e| panic!("{method} http://{addr}{path}: {e}"))
}

/// [`request`], or why it got no answer (nothing listens yet).
pub fn try_request(addr: SocketAddr, method: &str, path: &str) -> std::io::Result<Response> {
    try_request_within(addr, method, path, Duration::from_secs(10))
}

/// [`try_request`], the connection and the answer each within `within`.
pub fn try_request_within(
    addr: SocketAddr,
    method: &str,
    path: &str,
    within: Duration,
) -> std::io::Result<Response> {
    let mut s = TcpStream::connect_timeout(&addr, within)?;
    s.set_read_timeout(Some(within))?;
    s.set_write_timeout(Some(within))?;
    write!(
        s,
        "{method} {path} HTTP/1.0\r\nHost: {addr}\r\nConnection: close\r\n\r\n"
    )?;
    let mut raw = Vec::new();
    s.read_to_end(&mut raw)?;
    let text = String::from_utf8_lossy(&raw).into_owned();
    let (head, body) = text.split_once("\r\n\r\n").unwrap_or((&text, ""));
    let status = head
        .split_whitespace()
        .nth(1)
        .and_then(|c| c.parse().ok())
        .unwrap_or(0);
    Ok(Response {
        status,
        head: head.to_string(),
        body: body.to_string(),
    })
}

pub fn get(addr: SocketAddr, path: &str) -> Response {
    request(addr, "GET", path)
}

/// The repository's fixtures/snapshots/NAME.
pub fn snapshot(name: &str) -> std::path::PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../fixtures/snapshots")
        .join(name)
}
