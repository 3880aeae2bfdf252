//! The one way gpuaudit runs another program: helper commands (nvidia-smi, nvcc, ldd,
//! ldconfig, python3) and its own children (`__measure`, `__ctx-probe`, `__nvml`).
//!
//! Every child
//! - runs in its own process group, so that the whole group (the child and anything it
//!   started: a daemon that nvidia-smi forks, a libcuda helper) is killed with one `killpg`;
//! - has stdin `/dev/null` unless it is given bytes or a pipe;
//! - dies with gpuaudit (`PR_SET_PDEATHSIG`), and is registered with [`crate::cleanup`], which
//!   kills its group on SIGINT, SIGTERM and SIGHUP;
//! - is read without threads, by `poll(2)` on its pipes with a deadline, so no reader can
//!   block: a grandchild that keeps a pipe open after the child exited is killed with the
//!   group, and one that left the group is abandoned after a short grace;
//! - has its output capped: past the cap the bytes are read and thrown away, so a flood costs
//!   no memory.
//!
//! [`run`] collects a command's output under one deadline; [`Running`] hands a child's
//! output over line by line (the measurement protocol) and leaves the deadline to the caller.

use crate::cleanup;
use std::collections::VecDeque;
use std::ffi::{OsStr, OsString};
use std::fs::File;
use std::io::{Read, Write};
use std::os::fd::{AsRawFd, OwnedFd};
use std::os::unix::process::CommandExt;
use std::path::PathBuf;
use std::process::{Child, Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

/// How long the pipes are still read after the child exited and its group was killed: what
/// is in the pipe buffers comes out at once; a writer that left the group is not waited for.
const EXIT_GRACE: Duration = Duration::from_millis(300);
/// The longest one `poll` waits, so that the child's exit is noticed promptly.
const POLL_SLICE: Duration = Duration::from_millis(50);
/// How long a killed group's leader is waited for (a process stuck in the kernel, in a
/// driver call, cannot be killed; it is left behind rather than hanging the audit).
const REAP_LIMIT: Duration = Duration::from_secs(2);

/// Default output caps of [`run`]: a report's worth of stdout, the last words of stderr.
pub const STDOUT_CAP: usize = 16 << 20;
pub const STDERR_CAP: usize = 64 << 10;

/// What a child reads on stdin.
#[derive(Clone, Debug, Default)]
pub enum Input {
    /// `/dev/null`.
    #[default]
    Null,
    /// These bytes, then end of file.
    Bytes(Vec<u8>),
    /// A pipe the caller writes to with [`Running::send`] (for [`Running`] only; [`run`]
    /// closes it at once).
    Pipe,
}

/// A program to run, with its arguments and environment changes.
#[derive(Clone, Debug)]
pub struct Cmd {
    program: OsString,
    args: Vec<OsString>,
    env: Vec<(OsString, Option<OsString>)>,
    dir: Option<PathBuf>,
    input: Input,
}

impl Cmd {
    pub fn new(program: impl AsRef<OsStr>) -> Cmd {
        Cmd {
            program: program.as_ref().to_os_string(),
            args: Vec::new(),
            env: Vec::new(),
            dir: None,
            input: Input::Null,
        }
    }

    pub fn arg(mut self, a: impl AsRef<OsStr>) -> Cmd {
        self.args.push(a.as_ref().to_os_string());
        self
    }

    pub fn args<I, S>(mut self, args: I) -> Cmd
    where
        I: IntoIterator<Item = S>,
        S: AsRef<OsStr>,
    {
        self.args
            .extend(args.into_iter().map(|a| a.as_ref().to_os_string()));
        self
    }

    /// Set (`Some`) or remove (`None`) an environment variable.
    pub fn env(mut self, key: impl AsRef<OsStr>, value: Option<impl AsRef<OsStr>>) -> Cmd {
        self.env.push((
            key.as_ref().to_os_string(),
            value.map(|v| v.as_ref().to_os_string()),
        ));
        self
    }

    pub fn current_dir(mut self, dir: impl Into<PathBuf>) -> Cmd {
        self.dir = Some(dir.into());
        self
    }

    pub fn input(mut self, input: Input) -> Cmd {
        self.input = input;
        self
    }

    /// The program as given ("nvidia-smi", "/usr/bin/python3").
    pub fn program(&self) -> String {
        self.program.to_string_lossy().into_owned()
    }

    fn spawn(&self) -> Result<Child, String> {
        let mut c = Command::new(&self.program);
        c.args(&self.args);
        for (k, v) in &self.env {
            match v {
                Some(v) => c.env(k, v),
                None => c.env_remove(k),
            };
        }
        if let Some(d) = &self.dir {
            c.current_dir(d);
        }
        c.stdin(match self.input {
            Input::Null => Stdio::null(),
            Input::Bytes(_) | Input::Pipe => Stdio::piped(),
        })
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .process_group(0);
        #[cfg(target_os = "linux")]
        {
            // SAFETY: getpid has no preconditions.
            let parent = unsafe { libc::getpid() };
            // SAFETY: the closure runs in the forked child before exec and only makes
            // async-signal-safe system calls (prctl, getppid, _exit).
            unsafe {
                c.pre_exec(move || {
                    // Die with gpuaudit, even when it is killed with SIGKILL; and if it died
                    // before this line, do not start at all.
                    if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL as libc::c_ulong) == 0
                        && libc::getppid() != parent
                    {
                        libc::_exit(1);
                    }
                    Ok(())
                });
            }
        }
        let program = self.program();
        cleanup::spawn_registered(|| {
            let child = c.spawn()?;
            let pid = child.id() as i32;
            Ok((child, pid))
        })
        .map_err(|e| match e.kind() {
            std::io::ErrorKind::NotFound => format!("{program}: not found"),
            std::io::ErrorKind::Interrupted => format!("{program}: not started: {e}"),
            _ => format!("{program}: {e}"),
        })
    }
}

/// How a run ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Ended {
    Exited(ExitStatus),
    /// Ran past its deadline; its group was killed.
    TimedOut(Duration),
}

/// What a [`run`] gave.
#[derive(Debug)]
pub struct Output {
    pub ended: Ended,
    /// The first (or last, [`Keep::Last`]) [`Caps::stdout`] bytes.
    pub stdout: Vec<u8>,
    /// The last [`Caps::stderr`] bytes.
    pub stderr: Vec<u8>,
    /// Bytes read past the caps and thrown away.
    pub stdout_dropped: u64,
    pub stderr_dropped: u64,
}

impl Output {
    pub fn stdout_text(&self) -> String {
        String::from_utf8_lossy(&self.stdout).into_owned()
    }

    pub fn stderr_text(&self) -> String {
        String::from_utf8_lossy(&self.stderr).into_owned()
    }
}

/// Output limits of [`run`].
#[derive(Clone, Copy, Debug)]
pub struct Caps {
    pub stdout: usize,
    pub stderr: usize,
    /// Which end of stdout is kept past its cap.
    pub keep: Keep,
}

/// The end of a stream kept past its cap.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Keep {
    /// A document (XML, a listing): past the cap it is incomplete anyway.
    #[default]
    First,
    /// A program that answers with its last line (after whatever a library printed).
    Last,
}

impl Caps {
    /// Keep the last `stdout` bytes: for a program whose answer is its last line.
    pub fn last(stdout: usize, stderr: usize) -> Caps {
        Caps {
            stdout,
            stderr,
            keep: Keep::Last,
        }
    }
}

impl Default for Caps {
    fn default() -> Self {
        Caps {
            stdout: STDOUT_CAP,
            stderr: STDERR_CAP,
            keep: Keep::First,
        }
    }
}

/// Runs `cmd` to its end or to `limit`, whichever comes first; `Err` only when it could not
/// start ("nvidia-smi: not found").
pub fn run(cmd: &Cmd, limit: Duration, caps: Caps) -> Result<Output, String> {
    let deadline = Instant::now() + limit;
    let out = match caps.keep {
        Keep::First => Sink::head(caps.stdout),
        Keep::Last => Sink::tail(caps.stdout),
    };
    let mut r = Running::start(cmd, out, Sink::tail(caps.stderr))?;
    let ended = loop {
        match r.next(deadline) {
            Event::Exited(st) => break Ended::Exited(st),
            Event::Deadline => {
                r.kill();
                break Ended::TimedOut(limit);
            }
            Event::Stdout(_) | Event::Stderr(_) => {}
        }
    };
    let (stdout, stdout_dropped) = r.out.sink.take();
    let (stderr, stderr_dropped) = r.err.sink.take();
    Ok(Output {
        ended,
        stdout,
        stderr,
        stdout_dropped,
        stderr_dropped,
    })
}

/// What [`Running::next`] saw.
#[derive(Debug, PartialEq, Eq)]
pub enum Event {
    /// A line of stdout (without its newline; cut at the line cap).
    Stdout(Vec<u8>),
    /// A line of stderr.
    Stderr(Vec<u8>),
    /// The child exited (and everything it wrote before was handed over); repeated on every
    /// later call.
    Exited(ExitStatus),
    /// `until` passed; the child still runs.
    Deadline,
}

/// Where a stream's bytes go.
#[derive(Debug)]
enum Sink {
    /// The first `cap` bytes.
    Head {
        buf: Vec<u8>,
        cap: usize,
        dropped: u64,
    },
    /// The last `cap` bytes.
    Tail {
        buf: VecDeque<u8>,
        cap: usize,
        dropped: u64,
    },
    /// Whole lines, each cut at `cap` bytes (the rest of a long line is thrown away).
    Lines {
        partial: Vec<u8>,
        cap: usize,
        skipping: bool,
        ready: VecDeque<Vec<u8>>,
    },
}

impl Sink {
    fn head(cap: usize) -> Sink {
        Sink::Head {
            buf: Vec::new(),
            cap,
            dropped: 0,
        }
    }

    fn tail(cap: usize) -> Sink {
        Sink::Tail {
            buf: VecDeque::new(),
            cap,
            dropped: 0,
        }
    }

    fn lines(cap: usize) -> Sink {
        Sink::Lines {
            partial: Vec::new(),
            cap,
            skipping: false,
            ready: VecDeque::new(),
        }
    }

    fn push(&mut self, data: &[u8]) {
        match self {
            Sink::Head { buf, cap, dropped } => {
                let room = cap.saturating_sub(buf.len()).min(data.len());
                buf.extend_from_slice(&data[..room]);
                *dropped += (data.len() - room) as u64;
            }
            Sink::Tail { buf, cap, dropped } => {
                let data = if data.len() > *cap {
                    *dropped += (data.len() - *cap) as u64;
                    &data[data.len() - *cap..]
                } else {
                    data
                };
                let over = (buf.len() + data.len()).saturating_sub(*cap);
                buf.drain(..over);
                *dropped += over as u64;
                buf.extend(data);
            }
            Sink::Lines {
                partial,
                cap,
                skipping,
                ready,
            } => {
                let mut rest = data;
                while !rest.is_empty() {
                    let (chunk, newline) = match rest.iter().position(|b| *b == b'\n') {
                        Some(i) => (&rest[..i], true),
                        None => (rest, false),
                    };
                    if !*skipping {
                        let room = cap.saturating_sub(partial.len()).min(chunk.len());
                        partial.extend_from_slice(&chunk[..room]);
                        if room < chunk.len() {
                            *skipping = true;
                        }
                    }
                    if newline {
                        ready.push_back(std::mem::take(partial));
                        *skipping = false;
                        rest = &rest[chunk.len() + 1..];
                    } else {
                        rest = &[];
                    }
                }
            }
        }
    }

    /// The last line, unterminated, once the stream ended.
    fn finish(&mut self) {
        if let Sink::Lines {
            partial,
            ready,
            skipping,
            ..
        } = self
        {
            if !partial.is_empty() {
                ready.push_back(std::mem::take(partial));
            }
            *skipping = false;
        }
    }

    fn pop_line(&mut self) -> Option<Vec<u8>> {
        match self {
            Sink::Lines { ready, .. } => ready.pop_front(),
            _ => None,
        }
    }

    fn take(&mut self) -> (Vec<u8>, u64) {
        match self {
            Sink::Head { buf, dropped, .. } => (std::mem::take(buf), *dropped),
            Sink::Tail { buf, dropped, .. } => (std::mem::take(buf).into(), *dropped),
            Sink::Lines { .. } => (Vec::new(), 0),
        }
    }
}

/// One output pipe of the child.
#[derive(Debug)]
struct Stream {
    file: Option<File>,
    sink: Sink,
}

impl Stream {
    fn new(fd: Option<OwnedFd>, sink: Sink) -> Stream {
        let file = fd.map(File::from);
        if let Some(f) = &file {
            set_nonblocking(f.as_raw_fd());
        }
        Stream { file, sink }
    }

    /// Reads what the pipe has now; end of file (or an error) closes it.
    fn read_available(&mut self) {
        let Some(f) = self.file.as_mut() else {
            return;
        };
        let mut buf = [0u8; 64 * 1024];
        // Bounded: a writer faster than this loop must not keep it here forever.
        for _ in 0..64 {
            match f.read(&mut buf) {
                Ok(0) => {
                    self.close();
                    return;
                }
                Ok(n) => self.sink.push(&buf[..n]),
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => return,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(_) => {
                    self.close();
                    return;
                }
            }
        }
    }

    fn close(&mut self) {
        self.file = None;
        self.sink.finish();
    }
}

fn set_nonblocking(fd: i32) {
    // SAFETY: fcntl on a descriptor this process owns; no pointers.
    unsafe {
        let flags = libc::fcntl(fd, libc::F_GETFL);
        if flags >= 0 {
            libc::fcntl(fd, libc::F_SETFL, flags | libc::O_NONBLOCK);
        }
    }
}

/// Whether the child `pid` has exited, without reaping it: while it is not reaped its pid
/// (and so its process-group id) cannot be reused, so killing the group stays safe.
fn exited_unreaped(pid: i32) -> bool {
    // SAFETY: a zeroed siginfo_t is a valid out-parameter; waitid writes into it.
    let mut info: libc::siginfo_t = unsafe { std::mem::zeroed() };
    // SAFETY: plain system call on our own child.
    let r = unsafe {
        libc::waitid(
            libc::P_PID,
            pid as libc::id_t,
            &mut info,
            libc::WEXITED | libc::WNOHANG | libc::WNOWAIT,
        )
    };
    // ECHILD (already reaped) counts as exited.
    // SAFETY: si_pid is set by waitid (0 when no child changed state).
    r != 0 || unsafe { info.si_pid() } != 0
}

/// A running child whose output is handed over line by line. Dropping it kills its group.
pub struct Running {
    child: Child,
    pgid: i32,
    program: String,
    out: Stream,
    err: Stream,
    stdin: Option<File>,
    pending_in: Vec<u8>,
    /// Close stdin once `pending_in` is written.
    close_in: bool,
    /// When the child was seen to have exited (its group was killed then).
    exited_at: Option<Instant>,
    status: Option<ExitStatus>,
    /// Not reaped (stuck in the kernel after SIGKILL): its group stays registered.
    abandoned: bool,
}

impl Running {
    /// Starts `cmd` with stdout and stderr handed over as lines of at most `stdout_line_cap`
    /// and `stderr_line_cap` bytes.
    pub fn spawn(
        cmd: &Cmd,
        stdout_line_cap: usize,
        stderr_line_cap: usize,
    ) -> Result<Running, String> {
        Running::start(
            cmd,
            Sink::lines(stdout_line_cap),
            Sink::lines(stderr_line_cap),
        )
    }

    fn start(cmd: &Cmd, out: Sink, err: Sink) -> Result<Running, String> {
        let mut child = cmd.spawn()?;
        let pgid = child.id() as i32;
        let stdin = child.stdin.take().map(|s| File::from(OwnedFd::from(s)));
        if let Some(f) = &stdin {
            set_nonblocking(f.as_raw_fd());
        }
        let (pending_in, close_in) = match &cmd.input {
            Input::Bytes(b) => (b.clone(), true),
            Input::Pipe => (Vec::new(), false),
            Input::Null => (Vec::new(), true),
        };
        let out = Stream::new(child.stdout.take().map(OwnedFd::from), out);
        let err = Stream::new(child.stderr.take().map(OwnedFd::from), err);
        let mut r = Running {
            child,
            pgid,
            program: cmd.program(),
            out,
            err,
            stdin,
            pending_in,
            close_in,
            exited_at: None,
            status: None,
            abandoned: false,
        };
        r.flush_stdin();
        Ok(r)
    }

    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    pub fn program(&self) -> &str {
        &self.program
    }

    /// Queue bytes for the child's stdin (written as the pipe takes them).
    pub fn send(&mut self, bytes: &[u8]) {
        if self.stdin.is_some() {
            self.pending_in.extend_from_slice(bytes);
            self.flush_stdin();
        }
    }

    /// Close the child's stdin once what was sent is written.
    pub fn close_stdin(&mut self) {
        self.close_in = true;
        self.flush_stdin();
    }

    fn flush_stdin(&mut self) {
        let Some(f) = self.stdin.as_mut() else {
            self.pending_in.clear();
            return;
        };
        while !self.pending_in.is_empty() {
            match f.write(&self.pending_in) {
                Ok(0) => break,
                Ok(n) => {
                    self.pending_in.drain(..n);
                }
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => break,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(_) => {
                    // The child closed its stdin (or died): nothing more can be sent.
                    self.stdin = None;
                    self.pending_in.clear();
                    return;
                }
            }
        }
        if self.pending_in.is_empty() && self.close_in {
            self.stdin = None;
        }
    }

    /// The next line or the child's exit, waiting at most until `until`.
    pub fn next(&mut self, until: Instant) -> Event {
        loop {
            if let Some(l) = self.out.sink.pop_line() {
                return Event::Stdout(l);
            }
            if let Some(l) = self.err.sink.pop_line() {
                return Event::Stderr(l);
            }
            if let Some(st) = self.status {
                return Event::Exited(st);
            }
            let now = Instant::now();
            if now >= until {
                return Event::Deadline;
            }
            self.step(until);
        }
    }

    /// One round: notice an exit, wait for the pipes (at most one poll slice), read them.
    fn step(&mut self, until: Instant) {
        let now = Instant::now();
        if self.exited_at.is_none() && exited_unreaped(self.pgid) {
            // The child is gone: what is left of its group only holds pipes open.
            cleanup::kill_group(self.pgid);
            self.exited_at = Some(now);
        }
        let grace_over = self.exited_at.is_some_and(|t| now >= t + EXIT_GRACE);
        if grace_over
            || (self.exited_at.is_some() && self.out.file.is_none() && self.err.file.is_none())
        {
            self.finish();
            return;
        }
        let mut fds: Vec<libc::pollfd> = Vec::with_capacity(3);
        for f in [&self.out.file, &self.err.file].into_iter().flatten() {
            fds.push(libc::pollfd {
                fd: f.as_raw_fd(),
                events: libc::POLLIN,
                revents: 0,
            });
        }
        let stdin_fd = match (&self.stdin, self.pending_in.is_empty()) {
            (Some(f), false) => Some(f.as_raw_fd()),
            _ => None,
        };
        if let Some(fd) = stdin_fd {
            fds.push(libc::pollfd {
                fd,
                events: libc::POLLOUT,
                revents: 0,
            });
        }
        let mut wait = POLL_SLICE.min(until.saturating_duration_since(now));
        if let Some(t) = self.exited_at {
            wait = wait.min((t + EXIT_GRACE).saturating_duration_since(now));
        }
        if fds.is_empty() {
            // Both pipes closed, the child not yet exited: just wait a little.
            std::thread::sleep(wait.max(Duration::from_millis(1)));
            return;
        }
        let ms = wait.as_millis().clamp(1, 1000) as i32;
        // SAFETY: `fds` is a valid array of pollfd of the given length.
        let n = unsafe { libc::poll(fds.as_mut_ptr(), fds.len() as libc::nfds_t, ms) };
        if n <= 0 {
            return;
        }
        let ready = |fd: i32| {
            fds.iter().any(|p| {
                p.fd == fd && p.revents & (libc::POLLIN | libc::POLLHUP | libc::POLLERR) != 0
            })
        };
        let out_fd = self.out.file.as_ref().map(|f| f.as_raw_fd());
        let err_fd = self.err.file.as_ref().map(|f| f.as_raw_fd());
        if out_fd.is_some_and(ready) {
            self.out.read_available();
        }
        if err_fd.is_some_and(ready) {
            self.err.read_available();
        }
        if let Some(fd) = stdin_fd {
            if fds.iter().any(|p| p.fd == fd && p.revents != 0) {
                self.flush_stdin();
            }
        }
    }

    /// The child exited: reap it and stop reading (a pipe still open belongs to a process that
    /// left the group; it is not waited for).
    fn finish(&mut self) {
        self.out.read_available();
        self.err.read_available();
        self.out.close();
        self.err.close();
        self.stdin = None;
        if let Ok(st) = self.child.wait() {
            self.status = Some(st);
        }
        cleanup::forget_group(self.pgid);
        if self.status.is_none() {
            // wait() failed (it should not, the child exited): report a kill.
            use std::os::unix::process::ExitStatusExt;
            self.status = Some(ExitStatus::from_raw(libc::SIGKILL));
        }
    }

    /// Kills the child's whole group and reaps it (waiting at most [`REAP_LIMIT`]); returns
    /// how it ended where it could be reaped.
    pub fn kill(&mut self) -> Option<ExitStatus> {
        if let Some(st) = self.status {
            return Some(st);
        }
        cleanup::kill_group(self.pgid);
        let t0 = Instant::now();
        while t0.elapsed() < REAP_LIMIT {
            if exited_unreaped(self.pgid) {
                self.finish();
                return self.status;
            }
            std::thread::sleep(Duration::from_millis(5));
        }
        // Stuck in the kernel: leave it (its group stays registered, to be killed again on a
        // signal) and stop reading its pipes.
        self.abandoned = true;
        self.out.close();
        self.err.close();
        self.stdin = None;
        None
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        if self.status.is_none() && !self.abandoned {
            self.kill();
        }
    }
}

/// In a child (`__measure`, `__ctx-probe`, `__nvml`): writes one protocol line to stdout,
/// flushed, on a line of its own: a library that printed without a newline (or flooded
/// stdout) cannot glue its bytes to the line the parent parses.
pub fn write_line(line: &str) {
    let mut out = std::io::stdout().lock();
    // A closed pipe means the parent is gone; nothing useful is left to do with the error.
    let _ = write!(out, "\n{line}\n");
    let _ = out.flush();
}

/// Describes an exit status in words ("killed by signal 11 (SIGSEGV: invalid memory access)").
pub fn describe_status(st: &ExitStatus) -> String {
    use std::os::unix::process::ExitStatusExt;
    if let Some(sig) = st.signal() {
        let name = match sig {
            4 => " (SIGILL)",
            6 => " (SIGABRT: the process aborted)",
            7 => " (SIGBUS)",
            9 => " (SIGKILL: killed, perhaps by the kernel's OOM killer)",
            11 => " (SIGSEGV: invalid memory access)",
            15 => " (SIGTERM)",
            _ => "",
        };
        return format!("killed by signal {sig}{name}");
    }
    match st.code() {
        Some(101) => "exited with status 101 (a panic)".into(),
        Some(c) => format!("exited with status {c}"),
        None => "ended".into(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sh(script: &str) -> Cmd {
        Cmd::new("/bin/sh").arg("-c").arg(script)
    }

    fn alive(pid: i32) -> bool {
        // SAFETY: signal 0 only checks for existence.
        unsafe { libc::kill(pid, 0) == 0 }
    }

    /// Waits up to 5 s for `pid` to be gone (a killed process takes a moment to disappear).
    fn gone(pid: i32) -> bool {
        let t0 = Instant::now();
        while t0.elapsed() < Duration::from_secs(5) {
            if !alive(pid) {
                return true;
            }
            // A zombie still answers kill(0); it is not ours to reap (init reaps it).
            if let Ok(s) = std::fs::read_to_string(format!("/proc/{pid}/stat")) {
                if s.rsplit(')')
                    .next()
                    .is_some_and(|r| r.trim_start().starts_with('Z'))
                {
                    return true;
                }
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        false
    }

    #[test]
    fn collects_output_and_exit_status() {
        let o = run(
            &sh("echo out; echo err >&2; exit 3"),
            Duration::from_secs(10),
            Caps::default(),
        )
        .unwrap();
        assert_eq!(o.stdout_text(), "out\n");
        assert_eq!(o.stderr_text(), "err\n");
        match o.ended {
            Ended::Exited(st) => assert_eq!(st.code(), Some(3)),
            other => panic!("{other:?}"),
        }
        let e = run(
            &Cmd::new("gpuaudit-no-such-program"),
            Duration::from_secs(1),
            Caps::default(),
        )
        .unwrap_err();
        assert_eq!(e, "gpuaudit-no-such-program: not found");
    }

    #[test]
    fn stdin_is_null_unless_given() {
        let o = run(&sh("cat"), Duration::from_secs(10), Caps::default()).unwrap();
        assert!(o.stdout.is_empty());
        // More than a pipe buffer holds, so the writing must go along with the reading.
        let big = vec![b'x'; 1 << 20];
        let o = run(
            &sh("wc -c").input(Input::Bytes(big)),
            Duration::from_secs(10),
            Caps::default(),
        )
        .unwrap();
        assert_eq!(o.stdout_text().trim(), "1048576");
    }

    #[test]
    fn a_deadline_kills_the_whole_group() {
        let d = tempfile::tempdir().unwrap();
        let pidfile = d.path().join("pid");
        let script = format!("sleep 60 & echo $! > {}; wait", pidfile.display());
        let t0 = Instant::now();
        let o = run(&sh(&script), Duration::from_millis(500), Caps::default()).unwrap();
        assert!(t0.elapsed() < Duration::from_secs(5), "{:?}", t0.elapsed());
        assert_eq!(o.ended, Ended::TimedOut(Duration::from_millis(500)));
        let pid: i32 = std::fs::read_to_string(&pidfile)
            .unwrap()
            .trim()
            .parse()
            .unwrap();
        assert!(gone(pid), "the grandchild {pid} outlived the deadline");
    }

    #[test]
    fn a_background_grandchild_holding_the_pipe_does_not_hang_the_run() {
        let d = tempfile::tempdir().unwrap();
        let pidfile = d.path().join("pid");
        // The child exits at once; its background child keeps stdout and stderr open.
        let script = format!("sleep 60 & echo $! > {}; echo done", pidfile.display());
        let t0 = Instant::now();
        let o = run(&sh(&script), Duration::from_secs(30), Caps::default()).unwrap();
        assert!(t0.elapsed() < Duration::from_secs(5), "{:?}", t0.elapsed());
        assert_eq!(o.stdout_text(), "done\n");
        assert!(matches!(o.ended, Ended::Exited(st) if st.success()));
        let pid: i32 = std::fs::read_to_string(&pidfile)
            .unwrap()
            .trim()
            .parse()
            .unwrap();
        assert!(gone(pid), "the grandchild {pid} was left running");
    }

    #[test]
    fn a_grandchild_that_left_the_group_is_abandoned_after_a_grace() {
        if Command::new("setsid").arg("--version").output().is_err() {
            eprintln!("skipped: no setsid program");
            return;
        }
        let d = tempfile::tempdir().unwrap();
        let pidfile = d.path().join("pid");
        let script = format!(
            "setsid sh -c 'echo $$ > {}; exec sleep 60' & sleep 0.2; echo done",
            pidfile.display()
        );
        let t0 = Instant::now();
        let o = run(&sh(&script), Duration::from_secs(30), Caps::default()).unwrap();
        assert!(t0.elapsed() < Duration::from_secs(5), "{:?}", t0.elapsed());
        assert_eq!(o.stdout_text(), "done\n");
        if let Ok(p) = std::fs::read_to_string(&pidfile) {
            if let Ok(pid) = p.trim().parse::<i32>() {
                // SAFETY: our own test's process.
                unsafe { libc::kill(pid, libc::SIGKILL) };
            }
        }
    }

    #[test]
    fn a_flood_is_capped_and_drained() {
        // 64 MiB on each stream; the caps keep 1 KiB of stdout and the last 1 KiB of stderr.
        let script = "head -c 67108864 /dev/zero; head -c 67108864 /dev/zero >&2; printf end >&2";
        let o = run(
            &sh(script),
            Duration::from_secs(60),
            Caps {
                stdout: 1024,
                stderr: 1024,
                keep: Keep::First,
            },
        )
        .unwrap();
        assert!(
            matches!(o.ended, Ended::Exited(st) if st.success()),
            "{:?}",
            o.ended
        );
        assert_eq!(o.stdout.len(), 1024);
        assert_eq!(o.stdout_dropped, (64 << 20) - 1024);
        assert_eq!(o.stderr.len(), 1024);
        assert!(o.stderr.ends_with(b"end"));
        assert_eq!(o.stderr_dropped, (64 << 20) + 3 - 1024);
    }

    #[test]
    fn an_answer_after_a_flood_is_kept_where_the_last_bytes_are() {
        let o = run(
            &sh("head -c 10000000 /dev/zero; echo; echo '{\"answer\": 1}'"),
            Duration::from_secs(60),
            Caps::last(4096, 1024),
        )
        .unwrap();
        assert_eq!(o.stdout.len(), 4096);
        assert!(o.stdout_text().ends_with("{\"answer\": 1}\n"));
        assert!(o.stdout_dropped > 0);
    }

    #[test]
    fn lines_are_handed_over_and_long_ones_cut() {
        let mut r = Running::spawn(
            &sh("echo one; printf 'two\\nthree' >&2; head -c 100000 /dev/zero | tr '\\0' x; echo; echo four"),
            16,
            16,
        )
        .unwrap();
        let until = Instant::now() + Duration::from_secs(10);
        let mut out = Vec::new();
        let mut err = Vec::new();
        let status = loop {
            match r.next(until) {
                Event::Stdout(l) => out.push(String::from_utf8(l).unwrap()),
                Event::Stderr(l) => err.push(String::from_utf8(l).unwrap()),
                Event::Exited(st) => break st,
                Event::Deadline => panic!("deadline"),
            }
        };
        assert!(status.success());
        assert_eq!(out, vec!["one", &"x".repeat(16), "four"]);
        assert_eq!(err, vec!["two", "three"]);
        assert_eq!(r.next(until), Event::Exited(status));
    }

    #[test]
    fn a_pipe_feeds_the_child_until_closed() {
        let mut r = Running::spawn(
            &sh("while read l; do echo got $l; done").input(Input::Pipe),
            64,
            64,
        )
        .unwrap();
        r.send(b"a\n");
        let until = Instant::now() + Duration::from_secs(10);
        assert_eq!(r.next(until), Event::Stdout(b"got a".to_vec()));
        r.send(b"b\n");
        assert_eq!(r.next(until), Event::Stdout(b"got b".to_vec()));
        r.close_stdin();
        assert!(matches!(r.next(until), Event::Exited(st) if st.success()));
    }

    #[test]
    fn a_running_child_is_registered_and_dropping_it_kills_the_group() {
        let r = Running::spawn(&sh("sleep 60"), 64, 64).unwrap();
        let pid = r.pid() as i32;
        assert!(cleanup::registered_groups().contains(&pid));
        drop(r);
        assert!(!cleanup::registered_groups().contains(&pid));
        assert!(!alive(pid), "reaped, so gone at once");
    }

    #[test]
    fn exit_status_words() {
        let st = Command::new("/bin/sh")
            .args(["-c", "exit 3"])
            .status()
            .unwrap();
        assert_eq!(describe_status(&st), "exited with status 3");
        let st = Command::new("/bin/sh")
            .args(["-c", "kill -SEGV $$"])
            .status()
            .unwrap();
        assert_eq!(
            describe_status(&st),
            "killed by signal 11 (SIGSEGV: invalid memory access)"
        );
    }
}
