//! Measurement tool run inside the node namespaces: UDP echo + RTT sampler,
//! TCP sink + multi-stream TCP sender. Output is one JSON object on stdout
//! so the Python side can parse it without scraping.

use std::collections::{HashMap, HashSet};
use std::io::{self, ErrorKind, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream, UdpSocket};
use std::os::fd::{AsRawFd, RawFd};
use std::process::exit;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread;
use std::time::{Duration, Instant};

use geofed_os::args_or_exit;
use geofed_os::clock::mono_ns;
use geofed_os::sched::set_realtime;
use geofed_os::sockopt::{getsockopt, grow_send_buffer, setsockopt};

const PROG: &str = "geofed-probe";
const USAGE: &str = "usage:
  geofed-probe udp-echo --bind IP:PORT [--max-seconds S=60]
  geofed-probe rtt --to IP:PORT [--count N=200] [--size B=64] [--interval-us U=1000] [--timeout-ms T=2000]
  geofed-probe tcp-sink --bind IP:PORT [--max-seconds S=60]
  geofed-probe tcp-send --to IP:PORT [--streams N=1] [--seconds T=3] [--warmup S=1]
  geofed-probe tcp-send --to IP:PORT --bytes B [--streams N=1]   (B per stream, timed until acknowledged)";

/// Sequence number + send timestamp.
/// seq, send time, the echo's receive time: all CLOCK_MONOTONIC, which every
/// namespace of one host shares, so the two halves of a round trip are one-way delays.
const RTT_HDR: usize = 24;
const TCP_BUF: usize = 1 << 20;

// ---------- argument parsing ----------

/// Parsed `--flag value` / `--flag=value` pairs of one subcommand.
struct Flags(HashMap<String, String>);

impl Flags {
    fn parse(argv: &[String], known: &[&str]) -> Result<Flags, String> {
        let mut m = HashMap::new();
        let mut it = argv.iter();
        while let Some(arg) = it.next() {
            let (flag, inline) = match arg.split_once('=') {
                Some((f, v)) if f.starts_with("--") => (f, Some(v.to_string())),
                _ => (arg.as_str(), None),
            };
            if !known.contains(&flag) {
                return Err(format!("{flag}: unknown argument"));
            }
            let v = match inline {
                Some(v) => v,
                None => it.next().cloned().ok_or_else(|| format!("{flag}: missing value"))?,
            };
            if m.insert(flag.to_string(), v).is_some() {
                return Err(format!("{flag}: given twice"));
            }
        }
        Ok(Flags(m))
    }

    fn addr(&self, flag: &str) -> Result<SocketAddr, String> {
        let v = self.0.get(flag).ok_or_else(|| format!("{flag}: required"))?;
        v.parse().map_err(|_| format!("{flag}: expected IP:PORT (e.g. 10.0.0.1:9000 or [fd00::1]:9000), got '{v}'"))
    }

    /// Integer within [min, max], or `default` if absent.
    fn uint(&self, flag: &str, default: u64, min: u64, max: u64) -> Result<u64, String> {
        match self.0.get(flag) {
            None => Ok(default),
            Some(v) => match v.parse::<u64>() {
                Ok(x) if x >= min && x <= max => Ok(x),
                _ => Err(format!("{flag}: expected an integer in [{min}, {max}], got '{v}'")),
            },
        }
    }

    /// Seconds as a finite number within [min, max], or `default` if absent.
    fn secs(&self, flag: &str, default: f64, min: f64, max: f64) -> Result<f64, String> {
        match self.0.get(flag) {
            None => Ok(default),
            Some(v) => match v.parse::<f64>() {
                Ok(x) if x.is_finite() && x >= min && x <= max => Ok(x),
                _ => Err(format!("{flag}: expected a number in [{min}, {max}], got '{v}'")),
            },
        }
    }
}

#[derive(Debug, PartialEq)]
enum Cmd {
    UdpEcho {
        bind: SocketAddr,
        max_seconds: f64,
    },
    Rtt {
        to: SocketAddr,
        count: u64,
        size: usize,
        interval_us: u64,
        timeout_ms: u64,
    },
    TcpSink {
        bind: SocketAddr,
        max_seconds: f64,
    },
    TcpSend {
        to: SocketAddr,
        streams: usize,
        seconds: f64,
        warmup: f64,
        /// Bulk mode when > 0: this many bytes per stream, timed from the first
        /// write to the last byte acknowledged (slow start included), as a
        /// transfer of a file would be.
        bytes: u64,
    },
}

fn parse_cmd(argv: &[String]) -> Result<Cmd, String> {
    let sub = argv.first().ok_or("missing subcommand (udp-echo, rtt, tcp-sink, tcp-send)")?;
    let rest = &argv[1..];
    match sub.as_str() {
        "udp-echo" | "tcp-sink" => {
            let f = Flags::parse(rest, &["--bind", "--max-seconds"])?;
            let bind = f.addr("--bind")?;
            let max_seconds = f.secs("--max-seconds", 60.0, 0.0, 1e7)?;
            Ok(if sub == "udp-echo" { Cmd::UdpEcho { bind, max_seconds } } else { Cmd::TcpSink { bind, max_seconds } })
        }
        "rtt" => {
            let f = Flags::parse(rest, &["--to", "--count", "--size", "--interval-us", "--timeout-ms"])?;
            Ok(Cmd::Rtt {
                to: f.addr("--to")?,
                count: f.uint("--count", 200, 1, 10_000_000)?,
                // Room for seq and two timestamps; 65507 is the IPv4 UDP payload maximum.
                size: f.uint("--size", 64, RTT_HDR as u64, 65507)? as usize,
                interval_us: f.uint("--interval-us", 1000, 0, 3_600_000_000)?,
                timeout_ms: f.uint("--timeout-ms", 2000, 1, 3_600_000)?,
            })
        }
        "tcp-send" => {
            let f = Flags::parse(rest, &["--to", "--streams", "--seconds", "--warmup", "--bytes"])?;
            Ok(Cmd::TcpSend {
                to: f.addr("--to")?,
                streams: f.uint("--streams", 1, 1, 1024)? as usize,
                seconds: f.secs("--seconds", 3.0, 0.01, 1e6)?,
                warmup: f.secs("--warmup", 1.0, 0.0, 1e6)?,
                bytes: f.uint("--bytes", 0, 0, 1 << 40)?,
            })
        }
        "-h" | "--help" | "help" => Err("help".into()),
        other => Err(format!("{other}: unknown subcommand (udp-echo, rtt, tcp-sink, tcp-send)")),
    }
}

// ---------- helpers ----------

fn fail(msg: String) -> ! {
    eprintln!("{PROG}: {msg}");
    exit(1)
}

fn say_ready() {
    let mut out = io::stdout().lock();
    let _ = writeln!(out, "ready");
    let _ = out.flush();
}

/// Best effort: the probe's own wake-up latency would otherwise show up as
/// link RTT. Silently skipped where not permitted.
fn try_realtime() {
    let _ = set_realtime(40);
}

/// Hard stop after the configured life, whatever the threads are doing, so a
/// forgotten server never outlives its experiment.
fn exit_after(seconds: f64) {
    thread::spawn(move || {
        thread::sleep(Duration::from_secs_f64(seconds));
        exit(0)
    });
}

// ---------- udp-echo / rtt ----------

fn udp_echo(bind: SocketAddr, max_seconds: f64) {
    let sock = UdpSocket::bind(bind).unwrap_or_else(|e| fail(format!("--bind {bind}: {e}")));
    exit_after(max_seconds);
    try_realtime();
    say_ready();
    let mut buf = vec![0u8; 65536];
    loop {
        match sock.recv_from(&mut buf) {
            Ok((n, src)) => {
                if n >= RTT_HDR {
                    buf[16..24].copy_from_slice(&mono_ns().to_be_bytes());
                }
                let _ = sock.send_to(&buf[..n], src);
            }
            Err(e) if e.kind() == ErrorKind::Interrupted => {}
            // Transient (e.g. ICMP errors reported on the socket): keep serving.
            Err(_) => {}
        }
    }
}

/// The probe a datagram echoes, if it is one.
fn echoed_seq(buf: &[u8]) -> Option<u64> {
    (buf.len() >= RTT_HDR).then(|| u64::from_be_bytes(buf[0..8].try_into().unwrap()))
}

/// `lost` counts probes without an echo within the timeout; `late` those of them whose
/// echo came afterwards. A host that stalls longer than the timeout (a busy 2-core VM)
/// delays a datagram, it does not lose it: `lost - late` is what the path lost.
fn rtt(to: SocketAddr, count: u64, size: usize, interval_us: u64, timeout_ms: u64) {
    let local: SocketAddr = if to.is_ipv4() { "0.0.0.0:0" } else { "[::]:0" }.parse().unwrap();
    let sock = UdpSocket::bind(local).unwrap_or_else(|e| fail(format!("bind: {e}")));
    // Connected: the kernel filters out datagrams from anyone but the target.
    sock.connect(to).unwrap_or_else(|e| fail(format!("--to {to}: {e}")));
    try_realtime();

    let mut pkt = vec![0u8; size];
    let mut buf = vec![0u8; 65536];
    let mut samples: Vec<u64> = Vec::with_capacity(count as usize);
    let mut forward: Vec<u64> = Vec::with_capacity(count as usize);
    let mut lost = 0u64;
    let mut timed_out: HashSet<u64> = HashSet::new();
    let mut late = 0u64;
    for seq in 0..count {
        let t0 = mono_ns();
        pkt[0..8].copy_from_slice(&seq.to_be_bytes());
        pkt[8..16].copy_from_slice(&t0.to_be_bytes());
        let deadline = t0 + timeout_ms * 1_000_000;
        if sock.send(&pkt).is_err() {
            lost += 1;
        } else {
            loop {
                let now = mono_ns();
                if now >= deadline {
                    lost += 1;
                    timed_out.insert(seq);
                    break;
                }
                let _ = sock.set_read_timeout(Some(Duration::from_nanos(deadline - now)));
                match sock.recv(&mut buf) {
                    Ok(n) => {
                        let t1 = mono_ns();
                        if n >= RTT_HDR && buf[0..8] == pkt[0..8] && buf[8..16] == pkt[8..16] {
                            samples.push(t1 - t0);
                            let echoed = u64::from_be_bytes(buf[16..24].try_into().unwrap());
                            forward.push(echoed.saturating_sub(t0));
                            break;
                        }
                        late += echoed_seq(&buf[..n]).is_some_and(|q| timed_out.remove(&q)) as u64;
                    }
                    Err(e) if e.kind() == ErrorKind::Interrupted => {}
                    // Timeout, or ICMP unreachable (nobody listening): lost.
                    Err(_) => {
                        lost += 1;
                        timed_out.insert(seq);
                        break;
                    }
                }
            }
        }
        if interval_us > 0 && seq + 1 < count {
            thread::sleep(Duration::from_micros(interval_us));
        }
    }
    // The last timed-out probes' echoes may still be on their way: wait for them while
    // some are missing, 200 ms at most (a host's stall, not a lossy link's timeout: with
    // the default 2 s, every lossy pair of `testbed verify` would wait 2 s more).
    let drain_until = mono_ns() + 200_000_000;
    while !timed_out.is_empty() {
        let now = mono_ns();
        if now >= drain_until {
            break;
        }
        let _ = sock.set_read_timeout(Some(Duration::from_nanos(drain_until - now)));
        match sock.recv(&mut buf) {
            Ok(n) => late += echoed_seq(&buf[..n]).is_some_and(|q| timed_out.remove(&q)) as u64,
            Err(e) if e.kind() == ErrorKind::Interrupted => {}
            Err(_) => break,
        }
    }
    let list = |v: &[u64]| v.iter().map(|s| s.to_string()).collect::<Vec<_>>().join(", ");
    println!(
        "{{\"samples_ns\": [{}], \"forward_ns\": [{}], \"lost\": {}, \"late\": {}}}",
        list(&samples),
        list(&forward),
        lost,
        late
    );
}

// ---------- tcp-sink / tcp-send ----------

fn tcp_sink(bind: SocketAddr, max_seconds: f64) {
    let l = TcpListener::bind(bind).unwrap_or_else(|e| fail(format!("--bind {bind}: {e}")));
    exit_after(max_seconds);
    say_ready();
    for conn in l.incoming() {
        let Ok(mut s) = conn else { continue };
        thread::spawn(move || {
            let mut buf = vec![0u8; TCP_BUF];
            loop {
                match s.read(&mut buf) {
                    Ok(0) => break,
                    Ok(_) => {}
                    Err(e) if e.kind() == ErrorKind::Interrupted => {}
                    Err(_) => break,
                }
            }
        });
    }
}

/// (tcpi_bytes_acked, tcpi_total_retrans) from TCP_INFO. bytes_acked counts
/// what the receiver confirmed, so bytes still in the send buffer or in
/// flight at the window edges are not counted as throughput.
fn tcp_acked(fd: RawFd) -> Option<(u64, u64)> {
    // Offsets in struct tcp_info (linux/tcp.h), stable ABI since 4.1.
    const TOTAL_RETRANS: usize = 100;
    const BYTES_ACKED: usize = 120;
    let mut info = [0u8; 512];
    let len = getsockopt(fd, libc::IPPROTO_TCP, libc::TCP_INFO, &mut info).ok()?;
    if len < BYTES_ACKED + 8 {
        return None;
    }
    let acked = u64::from_ne_bytes(info[BYTES_ACKED..BYTES_ACKED + 8].try_into().unwrap());
    let retr = u32::from_ne_bytes(info[TOTAL_RETRANS..TOTAL_RETRANS + 4].try_into().unwrap());
    Some((acked, retr as u64))
}

/// Congestion control actually in use, so a silently refused "cubic" shows.
fn tcp_cc(fd: RawFd) -> String {
    let mut name = [0u8; 16];
    let Ok(len) = getsockopt(fd, libc::IPPROTO_TCP, libc::TCP_CONGESTION, &mut name) else {
        return "unknown".into();
    };
    let n = name[..len].iter().position(|&b| b == 0).unwrap_or(len);
    String::from_utf8_lossy(&name[..n]).into_owned()
}

fn sum_acked(fds: &[RawFd]) -> (u64, u64) {
    fds.iter().fold((0, 0), |(a, r), &fd| {
        let (a2, r2) = tcp_acked(fd).unwrap_or_else(|| fail("TCP_INFO bytes_acked unavailable".into()));
        (a + a2, r + r2)
    })
}

fn tcp_send(to: SocketAddr, streams: usize, seconds: f64, warmup: f64, bytes: u64) {
    let conns = tcp_connect(to, streams);
    let fds: Vec<RawFd> = conns.iter().map(|s| s.as_raw_fd()).collect();
    let stop = Arc::new(AtomicBool::new(false));
    let t_start = Instant::now();
    for s in &conns {
        let mut s = s.try_clone().unwrap_or_else(|e| fail(format!("dup socket: {e}")));
        let stop = stop.clone();
        thread::spawn(move || {
            let buf = vec![0x5Au8; TCP_BUF];
            let mut left = if bytes > 0 { bytes } else { u64::MAX };
            while left > 0 && !stop.load(Ordering::Relaxed) {
                let n = left.min(TCP_BUF as u64) as usize;
                if s.write_all(&buf[..n]).is_err() {
                    break;
                }
                left -= n as u64;
            }
        });
    }
    let (moved, dt, retrans) =
        if bytes > 0 { bulk(&fds, bytes * streams as u64, t_start) } else { timed(&fds, seconds, warmup, t_start) };
    stop.store(true, Ordering::Relaxed);
    let mbps = moved as f64 * 8.0 / dt / 1e6;
    println!(
        "{{\"bytes\": {moved}, \"seconds\": {dt:.6}, \"mbps\": {mbps:.3}, \"streams\": {streams}, \"retrans\": {retrans}, \"cc\": \"{}\"}}",
        tcp_cc(fds[0])
    );
    let _ = io::stdout().flush();
    // Abortive close: otherwise the kernel keeps draining up to 64 MiB per
    // socket after we exit, polluting whatever is measured next.
    let linger = libc::linger { l_onoff: 1, l_linger: 0 };
    for &fd in &fds {
        let _ = setsockopt(fd, libc::SOL_SOCKET, libc::SO_LINGER, &linger);
    }
    exit(0)
}

fn tcp_connect(to: SocketAddr, streams: usize) -> Vec<TcpStream> {
    let mut conns = Vec::with_capacity(streams);
    for i in 0..streams {
        let s = TcpStream::connect_timeout(&to, Duration::from_secs(10))
            .unwrap_or_else(|e| fail(format!("--to {to}: stream {i}: {e}")));
        let fd = s.as_raw_fd();
        // Experiments compare sites under one known algorithm; a kernel
        // without cubic just keeps its default.
        let _ = setsockopt(fd, libc::IPPROTO_TCP, libc::TCP_CONGESTION, b"cubic");
        // The send buffer must exceed BDP + bottleneck queue or the sender,
        // not the link, caps throughput; FORCE bypasses net.core.wmem_max.
        let _ = grow_send_buffer(fd, 32 << 20);
        conns.push(s);
    }
    conns
}

/// Steady state: acknowledged bytes over `seconds` after `warmup`. Sampling acked
/// bytes here (not counting writes in the workers) makes the window edges exact
/// even though writes block for long. -> (bytes, seconds, retransmissions)
fn timed(fds: &[RawFd], seconds: f64, warmup: f64, t_start: Instant) -> (u64, f64, u64) {
    thread::sleep(Duration::from_secs_f64(warmup).saturating_sub(t_start.elapsed()));
    let t1 = Instant::now();
    let (a1, r1) = sum_acked(fds);
    thread::sleep(Duration::from_secs_f64(seconds));
    let (a2, r2) = sum_acked(fds);
    (a2.saturating_sub(a1), t1.elapsed().as_secs_f64(), r2.saturating_sub(r1))
}

/// Bulk: from the first write until `total` bytes are acknowledged, polled every
/// 100 us (under 0.1 % of a transfer that crosses a long link).
fn bulk(fds: &[RawFd], total: u64, t_start: Instant) -> (u64, f64, u64) {
    loop {
        let (acked, retrans) = sum_acked(fds);
        if acked >= total {
            return (acked, t_start.elapsed().as_secs_f64(), retrans);
        }
        thread::sleep(Duration::from_micros(100));
    }
}

fn main() {
    let argv: Vec<String> = std::env::args().skip(1).collect();
    let cmd = args_or_exit(PROG, USAGE, parse_cmd(&argv));
    match cmd {
        Cmd::UdpEcho { bind, max_seconds } => udp_echo(bind, max_seconds),
        Cmd::Rtt { to, count, size, interval_us, timeout_ms } => rtt(to, count, size, interval_us, timeout_ms),
        Cmd::TcpSink { bind, max_seconds } => tcp_sink(bind, max_seconds),
        Cmd::TcpSend { to, streams, seconds, warmup, bytes } => tcp_send(to, streams, seconds, warmup, bytes),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn p(s: &str) -> Result<Cmd, String> {
        parse_cmd(&s.split_whitespace().map(String::from).collect::<Vec<_>>())
    }

    #[test]
    fn defaults_and_values() {
        assert_eq!(
            p("rtt --to 10.99.0.2:7000").unwrap(),
            Cmd::Rtt {
                to: "10.99.0.2:7000".parse().unwrap(),
                count: 200,
                size: 64,
                interval_us: 1000,
                timeout_ms: 2000
            }
        );
        assert_eq!(
            p("tcp-send --to=10.99.0.2:5001 --streams 4 --seconds 2.5").unwrap(),
            Cmd::TcpSend { to: "10.99.0.2:5001".parse().unwrap(), streams: 4, seconds: 2.5, warmup: 1.0, bytes: 0 }
        );
        assert_eq!(
            p("udp-echo --bind 0.0.0.0:7000 --max-seconds 5").unwrap(),
            Cmd::UdpEcho { bind: "0.0.0.0:7000".parse().unwrap(), max_seconds: 5.0 }
        );
    }

    #[test]
    fn errors_name_the_flag() {
        for (argv, flag) in [
            ("rtt", "--to"),
            ("rtt --to 10.0.0.1", "--to"),
            ("rtt --to 10.0.0.1:1 --size 8", "--size"),
            ("rtt --to 10.0.0.1:1 --count x", "--count"),
            ("tcp-send --to 10.0.0.1:1 --streams 0", "--streams"),
            ("tcp-send --to 10.0.0.1:1 --seconds", "--seconds"),
            ("tcp-send --to 10.0.0.1:1 --bytes -5", "--bytes"),
            ("tcp-sink --bind 1.2.3.4:5 --bind 1.2.3.4:6", "--bind"),
            ("udp-echo --bind 1.2.3.4:5 --nope 1", "--nope"),
            ("frobnicate", "frobnicate"),
        ] {
            let e = p(argv).unwrap_err();
            assert!(e.starts_with(flag), "{argv:?} -> {e:?}");
        }
    }
}
