//! net.loopback: TCP round trips through 127.0.0.1 with gpuaudit's own listener on an
//! ephemeral port: no ICMP, no root, bounded in count and time.

use gpuaudit_core::facts::LoopbackRtt;
use gpuaudit_core::reading::Reading;
use std::io::{Read, Write};
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream};
use std::time::{Duration, Instant};

const MSG: usize = 64;
const WARMUP: u32 = 50;
const MAX_TRIPS: u32 = 1000;
const MAX_TIME: Duration = Duration::from_secs(2);
const IO_TIMEOUT: Duration = Duration::from_secs(1);

fn serve(listener: TcpListener, deadline: Instant) {
    let _ = listener.set_nonblocking(true);
    let stream = loop {
        match listener.accept() {
            Ok((s, _)) => break s,
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock && Instant::now() < deadline => {
                std::thread::sleep(Duration::from_millis(1));
            }
            Err(_) => return,
        }
    };
    let mut s = stream;
    let _ = s.set_nonblocking(false);
    let _ = s.set_nodelay(true);
    let _ = s.set_read_timeout(Some(IO_TIMEOUT * 3));
    let mut buf = [0u8; MSG];
    while s.read_exact(&mut buf).is_ok() {
        if s.write_all(&buf).is_err() {
            break;
        }
    }
}

pub fn measure() -> Reading<LoopbackRtt> {
    measure_with(MAX_TRIPS, MAX_TIME)
}

pub fn measure_with(max_trips: u32, max_time: Duration) -> Reading<LoopbackRtt> {
    let listener = match TcpListener::bind("127.0.0.1:0") {
        Ok(l) => l,
        Err(e) => return Reading::unavailable(format!("cannot listen on 127.0.0.1: {e}")),
    };
    let addr: SocketAddr = match listener.local_addr() {
        Ok(a) => a,
        Err(e) => return Reading::unavailable(format!("listener address: {e}")),
    };
    let deadline = Instant::now() + max_time + IO_TIMEOUT * 2;
    let server = std::thread::spawn(move || serve(listener, deadline));
    let result = client(addr, max_trips, max_time);
    let _ = server.join();
    result
}

fn client(addr: SocketAddr, max_trips: u32, max_time: Duration) -> Reading<LoopbackRtt> {
    let mut c = match TcpStream::connect_timeout(&addr, IO_TIMEOUT) {
        Ok(c) => c,
        Err(e) => {
            return Reading::unavailable(format!(
                "cannot connect to our own listener on {addr}: {e}"
            ))
        }
    };
    let _ = c.set_nodelay(true);
    let _ = c.set_read_timeout(Some(IO_TIMEOUT));
    let _ = c.set_write_timeout(Some(IO_TIMEOUT));
    let msg = [0x5au8; MSG];
    let mut back = [0u8; MSG];
    let mut trip = |c: &mut TcpStream| -> std::io::Result<()> {
        c.write_all(&msg)?;
        c.read_exact(&mut back)
    };
    for _ in 0..WARMUP {
        if let Err(e) = trip(&mut c) {
            return Reading::unavailable(format!("loopback exchange failed: {e}"));
        }
    }
    let mut samples: Vec<f64> = Vec::with_capacity(max_trips as usize);
    let t0 = Instant::now();
    while (samples.len() as u32) < max_trips && t0.elapsed() < max_time {
        let t = Instant::now();
        if let Err(e) = trip(&mut c) {
            return Reading::unavailable(format!("loopback exchange failed: {e}"));
        }
        samples.push(t.elapsed().as_secs_f64() * 1e6);
    }
    let _ = c.shutdown(Shutdown::Both);
    if samples.is_empty() {
        return Reading::unavailable("no round trip completed in time");
    }
    samples.sort_by(|a, b| a.total_cmp(b));
    let pick = |q: f64| samples[((samples.len() - 1) as f64 * q).round() as usize];
    Reading::Value(LoopbackRtt {
        round_trips: samples.len() as u32,
        median_us: (pick(0.5) * 10.0).round() / 10.0,
        p99_us: (pick(0.99) * 10.0).round() / 10.0,
        max_us: (pick(1.0) * 10.0).round() / 10.0,
        method: format!(
            "{MSG}-byte TCP ping-pong over 127.0.0.1 with TCP_NODELAY against gpuaudit's own listener on an ephemeral port, after {WARMUP} warm-up round trips; at most {max_trips} round trips or {} s",
            max_time.as_secs_f64()
        ),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn measures_quickly() {
        let t = Instant::now();
        let r = measure_with(200, Duration::from_millis(500))
            .into_value()
            .unwrap();
        assert!(r.round_trips > 0 && r.round_trips <= 200);
        assert!(r.median_us > 0.0 && r.median_us <= r.p99_us && r.p99_us <= r.max_us);
        assert!(t.elapsed() < Duration::from_secs(5));
    }
}
