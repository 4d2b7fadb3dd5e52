//! Forwards raw Ethernet frames between two interfaces, both ways, through a
//! `LinkModel` per direction. This is the only path between two sites, so it
//! plays the long-haul fibre: delay, bottleneck rate, queue, jitter, loss.
//!
//! Threads: per direction one rx thread (recv, timestamp, ask the model) and
//! one tx thread (sleep until release, send). The main thread only waits for
//! SIGTERM/SIGINT, then writes the counters and exits.

use std::ffi::CString;
use std::io::{self, Write};
use std::os::fd::RawFd;
use std::process::exit;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::mpsc;
use std::sync::Arc;
use std::thread;

use geofed_linkemu::gso::{Layout, VNET_HDR_LEN};
use geofed_linkemu::sys::{args_or_exit, mono_ns, setsockopt};
use geofed_linkemu::{Counters, LinkConfig, LinkModel, Verdict};

const PROG: &str = "geofed-linkemu";
/// veth hands us whole GSO super-frames (up to 64 KiB, more with BIG TCP).
const RX_BUF_LEN: usize = 256 * 1024;
/// Big socket buffers so bursts are queued by the model, not dropped by the kernel.
const SOCK_BUF: libc::c_int = 32 << 20;
/// From linux/if_packet.h; older libc crates lack it.
const PACKET_IGNORE_OUTGOING: libc::c_int = 23;
/// rx sits one above tx so a tx thread spinning towards a release time never
/// holds up reception on its CPU (equal SCHED_FIFO priorities do not preempt).
const RX_PRIORITY: libc::c_int = 51;
const TX_PRIORITY: libc::c_int = 50;

const USAGE: &str = "usage: geofed-linkemu --if-a NAME --if-b NAME --delay-us F --rate-mbps F \
--queue-bytes N [--jitter-us F] [--loss F] [--back-delay-us F] [--back-rate-mbps F] [--back-queue-bytes N] \
[--back-jitter-us F] [--back-loss F] [--seed N] [--stats PATH] [--cpu-dma-latency-us N]\n\
The flags describe frames from --if-a to --if-b; --back-* ones the other way where it differs.";

/// One direction of the link as given on the command line.
#[derive(Debug, Clone, PartialEq)]
struct Way {
    delay_us: f64,
    rate_mbps: f64,
    queue_bytes: u64,
    jitter_us: f64,
    loss: f64,
}

impl Way {
    fn config(&self, seed: u64) -> LinkConfig {
        LinkConfig {
            delay_ns: (self.delay_us * 1e3).round() as u64,
            rate_bps: (self.rate_mbps * 1e6).round() as u64,
            queue_limit_bytes: self.queue_bytes,
            jitter_ns: (self.jitter_us * 1e3).round() as u64,
            loss: self.loss,
            seed,
        }
    }
}

#[derive(Debug, Clone, PartialEq)]
struct Args {
    if_a: String,
    if_b: String,
    /// Frames from `if_a` to `if_b`.
    a_to_b: Way,
    /// The other way: `a_to_b` unless a `--back-*` flag differs (asymmetric link).
    b_to_a: Way,
    seed: u64,
    stats: Option<String>,
    cpu_dma_latency_us: Option<u64>,
}

/// The per-direction flags of one direction, as far as given.
#[derive(Default)]
struct WayFlags {
    delay_us: Option<f64>,
    rate_mbps: Option<f64>,
    queue_bytes: Option<u64>,
    jitter_us: Option<f64>,
    loss: Option<f64>,
}

impl WayFlags {
    /// `name` is the flag without `--` or `--back-`; `flag` the whole one, for errors.
    fn set(&mut self, name: &str, flag: &str, v: &str) -> Result<(), String> {
        match name {
            "delay-us" => self.delay_us = Some(parse_f64(flag, v, 0.0, 60e6, false)?),
            "rate-mbps" => self.rate_mbps = Some(parse_f64(flag, v, 0.0, 1e7, true)?),
            "queue-bytes" => {
                let q = parse_u64(flag, v)?;
                if q == 0 {
                    return Err(format!("{flag}: must be > 0"));
                }
                self.queue_bytes = Some(q)
            }
            "jitter-us" => self.jitter_us = Some(parse_f64(flag, v, 0.0, 60e6, false)?),
            "loss" => self.loss = Some(parse_f64(flag, v, 0.0, 1.0, false)?),
            _ => unreachable!(),
        }
        Ok(())
    }

    fn forward(self) -> Result<Way, String> {
        Ok(Way {
            delay_us: self.delay_us.ok_or("--delay-us: required")?,
            rate_mbps: self.rate_mbps.ok_or("--rate-mbps: required")?,
            queue_bytes: self.queue_bytes.ok_or("--queue-bytes: required")?,
            jitter_us: self.jitter_us.unwrap_or(0.0),
            loss: self.loss.unwrap_or(0.0),
        })
    }

    fn back(self, forward: &Way) -> Way {
        Way {
            delay_us: self.delay_us.unwrap_or(forward.delay_us),
            rate_mbps: self.rate_mbps.unwrap_or(forward.rate_mbps),
            queue_bytes: self.queue_bytes.unwrap_or(forward.queue_bytes),
            jitter_us: self.jitter_us.unwrap_or(forward.jitter_us),
            loss: self.loss.unwrap_or(forward.loss),
        }
    }
}

const WAY_FLAGS: [&str; 5] = ["delay-us", "rate-mbps", "queue-bytes", "jitter-us", "loss"];

fn parse_f64(flag: &str, v: &str, min: f64, max: f64, min_exclusive: bool) -> Result<f64, String> {
    let x: f64 = v.parse().map_err(|_| format!("{flag}: expected a number, got '{v}'"))?;
    let low_ok = if min_exclusive { x > min } else { x >= min };
    if !x.is_finite() || !low_ok || x > max {
        let lo = if min_exclusive { ">" } else { ">=" };
        return Err(format!("{flag}: must be {lo} {min} and <= {max}, got '{v}'"));
    }
    Ok(x)
}

fn parse_u64(flag: &str, v: &str) -> Result<u64, String> {
    v.parse().map_err(|_| format!("{flag}: expected a non-negative integer, got '{v}'"))
}

/// Accepts `--flag value` and `--flag=value`. Errors name the flag so the
/// caller's log line says what to fix.
fn parse_args(argv: &[String]) -> Result<Args, String> {
    let mut if_a = None;
    let mut if_b = None;
    let mut forward = WayFlags::default();
    let mut back = WayFlags::default();
    let mut seed = 1u64;
    let mut stats = None;
    let mut cpu_dma_latency_us = None;

    let mut it = argv.iter();
    while let Some(arg) = it.next() {
        let (flag, inline) = match arg.split_once('=') {
            Some((f, v)) if f.starts_with("--") => (f, Some(v.to_string())),
            _ => (arg.as_str(), None),
        };
        if flag == "--help" || flag == "-h" {
            return Err("help".into());
        }
        let way = flag
            .strip_prefix("--back-")
            .filter(|n| WAY_FLAGS.contains(n))
            .map(|n| (&mut back, n))
            .or_else(|| flag.strip_prefix("--").filter(|n| WAY_FLAGS.contains(n)).map(|n| (&mut forward, n)));
        let known = ["--if-a", "--if-b", "--seed", "--stats", "--cpu-dma-latency-us"];
        if way.is_none() && !known.contains(&flag) {
            return Err(format!("{flag}: unknown argument"));
        }
        let v = match inline {
            Some(v) => v,
            None => it.next().cloned().ok_or_else(|| format!("{flag}: missing value"))?,
        };
        if let Some((w, name)) = way {
            w.set(name, flag, &v)?;
            continue;
        }
        match flag {
            "--if-a" | "--if-b" => {
                // IFNAMSIZ is 16 including the NUL.
                if v.is_empty() || v.len() > 15 || v.contains('/') || v.contains('\0') {
                    return Err(format!("{flag}: invalid interface name '{v}'"));
                }
                if flag == "--if-a" {
                    if_a = Some(v)
                } else {
                    if_b = Some(v)
                }
            }
            "--seed" => seed = parse_u64(flag, &v)?,
            "--cpu-dma-latency-us" => {
                let us = parse_u64(flag, &v)?;
                if us > i32::MAX as u64 {
                    return Err(format!("{flag}: too large"));
                }
                cpu_dma_latency_us = Some(us)
            }
            "--stats" => {
                if v.is_empty() {
                    return Err(format!("{flag}: empty path"));
                }
                stats = Some(v)
            }
            _ => unreachable!(),
        }
    }
    let if_a = if_a.ok_or("--if-a: required")?;
    let if_b = if_b.ok_or("--if-b: required")?;
    let a_to_b = forward.forward()?;
    let b_to_a = back.back(&a_to_b);
    if if_a == if_b {
        return Err("--if-b: must differ from --if-a".into());
    }
    for (way, prefix) in [(&a_to_b, "--"), (&b_to_a, "--back-")] {
        if way.config(0).rate_bps == 0 {
            return Err(format!("{prefix}rate-mbps: below 1 bit/s"));
        }
    }
    Ok(Args { if_a, if_b, a_to_b, b_to_a, seed, stats, cpu_dma_latency_us })
}

fn errno() -> i32 {
    io::Error::last_os_error().raw_os_error().unwrap_or(0)
}

fn realtime_ns() -> u64 {
    let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    unsafe { libc::clock_gettime(libc::CLOCK_REALTIME, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

/// CLOCK_MONOTONIC and CLOCK_REALTIME at one instant, for translating kernel
/// stamps. Two reads apart by a preemption (a busy host, a vCPU descheduled)
/// would move the translation, and so the release, that much early: a frame
/// then left before its fibre delay (9 us seen under CI load). Bracketing the
/// monotonic read between two realtime reads bounds the error by half the
/// bracket; the narrowest of a few tries is kept.
fn clocks_now() -> (u64, u64) {
    const TIGHT_NS: u64 = 1_000;
    let mut best = (0, 0, u64::MAX);
    for _ in 0..8 {
        let r1 = realtime_ns();
        let m = mono_ns();
        let r2 = realtime_ns();
        let width = r2.saturating_sub(r1);
        if width < best.2 {
            best = (m, r1 + width / 2, width);
        }
        if width <= TIGHT_NS {
            break;
        }
    }
    (best.0, best.1)
}

fn sleep_until(t_ns: u64) {
    let ts = libc::timespec {
        tv_sec: (t_ns / 1_000_000_000) as libc::time_t,
        tv_nsec: (t_ns % 1_000_000_000) as libc::c_long,
    };
    // Absolute deadline: EINTR restarts lose nothing, and there is no drift.
    while unsafe { libc::clock_nanosleep(libc::CLOCK_MONOTONIC, libc::TIMER_ABSTIME, &ts, std::ptr::null_mut()) }
        == libc::EINTR
    {}
}

fn open_packet_socket(flag: &str, ifname: &str) -> Result<RawFd, String> {
    let cname = CString::new(ifname).map_err(|_| format!("{flag}: invalid interface name"))?;
    let ifindex = unsafe { libc::if_nametoindex(cname.as_ptr()) };
    if ifindex == 0 {
        return Err(format!("{flag}: no interface '{ifname}' in this network namespace"));
    }
    let e = |what: &str| format!("{flag} {ifname}: {what}: {}", io::Error::last_os_error());
    // Protocol 0 at creation: the socket hears nothing until bind names the
    // device, so no frames from other interfaces sneak in meanwhile.
    let fd = unsafe { libc::socket(libc::AF_PACKET, libc::SOCK_RAW | libc::SOCK_CLOEXEC, 0) };
    if fd < 0 {
        return Err(e("socket(AF_PACKET)"));
    }
    // Keep veth's GSO super-frames and checksum-offload state intact end to
    // end; without this every 64 KiB frame would be segmented and checksummed.
    setsockopt(fd, libc::SOL_PACKET, libc::PACKET_VNET_HDR, &(1 as libc::c_int)).map_err(|_| e("PACKET_VNET_HDR"))?;
    // Our own sends on this interface must not come back as input.
    if setsockopt(fd, libc::SOL_PACKET, PACKET_IGNORE_OUTGOING, &(1 as libc::c_int)).is_err() {
        eprintln!("{PROG}: warning: PACKET_IGNORE_OUTGOING unsupported; filtering by pkttype");
    }
    for (force, plain) in [(libc::SO_RCVBUFFORCE, libc::SO_RCVBUF), (libc::SO_SNDBUFFORCE, libc::SO_SNDBUF)] {
        if setsockopt(fd, libc::SOL_SOCKET, force, &(SOCK_BUF as libc::c_int)).is_err() {
            let _ = setsockopt(fd, libc::SOL_SOCKET, plain, &(SOCK_BUF as libc::c_int));
        }
    }
    // Kernel receive stamps let arrival time exclude our own wake-up latency.
    if setsockopt(fd, libc::SOL_SOCKET, libc::SO_TIMESTAMPNS, &(1 as libc::c_int)).is_err() {
        eprintln!("{PROG}: warning: SO_TIMESTAMPNS unsupported; using recv time as arrival");
    }
    // Bounded recv so rx threads notice the stop flag.
    let tv = libc::timeval { tv_sec: 0, tv_usec: 200_000 };
    if setsockopt(fd, libc::SOL_SOCKET, libc::SO_RCVTIMEO, &tv).is_err() {
        return Err(e("SO_RCVTIMEO"));
    }
    let mut sll: libc::sockaddr_ll = unsafe { std::mem::zeroed() };
    sll.sll_family = libc::AF_PACKET as u16;
    sll.sll_protocol = (libc::ETH_P_ALL as u16).to_be();
    sll.sll_ifindex = ifindex as i32;
    let r = unsafe {
        libc::bind(
            fd,
            &sll as *const _ as *const libc::sockaddr,
            std::mem::size_of::<libc::sockaddr_ll>() as libc::socklen_t,
        )
    };
    if r != 0 {
        return Err(e("bind"));
    }
    // Frames are addressed to the far side's MAC, not ours: be a wire, take all.
    let mr = libc::packet_mreq {
        mr_ifindex: ifindex as i32,
        mr_type: libc::PACKET_MR_PROMISC as u16,
        mr_alen: 0,
        mr_address: [0; 8],
    };
    if setsockopt(fd, libc::SOL_PACKET, libc::PACKET_ADD_MEMBERSHIP, &mr).is_err() {
        return Err(e("PACKET_MR_PROMISC"));
    }
    Ok(fd)
}

/// Opt-in PM QoS request, held until the process exits (the kernel drops it
/// when the fd closes). On a KVM guest a halted idle vCPU takes ~50-150 us to
/// wake for a packet, which lands on every RTT sample of an otherwise idle
/// link; 0 keeps idle vCPUs polling instead (costs host CPU, machine-wide).
fn request_cpu_latency(us: u64) -> Option<std::fs::File> {
    let r = std::fs::OpenOptions::new()
        .write(true)
        .open("/dev/cpu_dma_latency")
        .and_then(|mut f| f.write_all(&(us as i32).to_ne_bytes()).map(|_| f));
    match r {
        Ok(f) => Some(f),
        Err(e) => {
            eprintln!("{PROG}: warning: --cpu-dma-latency-us: /dev/cpu_dma_latency: {e}; continuing without it");
            None
        }
    }
}

static RT_WARNED: AtomicBool = AtomicBool::new(false);

/// Timer wake-up latency is the whole game for RTT accuracy: without
/// SCHED_FIFO, p99 RTT on a 9 ms link reached 13 ms in the feasibility probe.
fn make_thread_realtime(priority: libc::c_int) {
    unsafe { libc::prctl(libc::PR_SET_TIMERSLACK, 1 as libc::c_ulong, 0, 0, 0) };
    let p = libc::sched_param { sched_priority: priority };
    let r = unsafe { libc::pthread_setschedparam(libc::pthread_self(), libc::SCHED_FIFO, &p) };
    if r != 0 && !RT_WARNED.swap(true, Ordering::Relaxed) {
        eprintln!(
            "{PROG}: warning: cannot set SCHED_FIFO ({}); continuing, latency tails will be worse",
            io::Error::from_raw_os_error(r)
        );
    }
}

#[derive(Default)]
struct TxStats {
    sent: AtomicU64,
    send_errors: AtomicU64,
    /// How far behind its release time each frame was handed to the kernel.
    late_ns_sum: AtomicU64,
    late_ns_max: AtomicU64,
}

type Frame = (u64, Vec<u8>);

/// Arrival time on CLOCK_MONOTONIC. The kernel stamps frames on CLOCK_REALTIME
/// when they reach the socket; translating that (instead of reading the clock
/// after recv returns) keeps the rx thread's wake-up latency, tens of us on
/// an idle VM, out of the emulated delay. Stamps that are not plausible
/// receive times (absent, in the future, > 1 s old, or a TCP EDT departure
/// time kept across the veth) fall back to the time recv returned.
fn arrival_ns(kernel_real_ns: Option<u64>, now_mono: u64, now_real: u64) -> u64 {
    match kernel_real_ns {
        Some(k) if k <= now_real && now_real - k < 1_000_000_000 => now_mono.saturating_sub(now_real - k),
        _ => now_mono,
    }
}

fn rx_loop(name: &str, fd: RawFd, mut model: LinkModel, out: mpsc::Sender<Frame>, stop: &AtomicBool) -> Counters {
    make_thread_realtime(RX_PRIORITY);
    let mut buf = vec![0u8; RX_BUF_LEN];
    // u64 array keeps the control buffer aligned for cmsghdr.
    let mut cbuf = [0u64; 16];
    let mut warned = false;
    let mut truncated = 0u64;
    let mut last_arrival = 0u64;
    while !stop.load(Ordering::Relaxed) {
        let mut sll: libc::sockaddr_ll = unsafe { std::mem::zeroed() };
        let mut iov = libc::iovec { iov_base: buf.as_mut_ptr() as *mut libc::c_void, iov_len: buf.len() };
        let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
        msg.msg_name = &mut sll as *mut _ as *mut libc::c_void;
        msg.msg_namelen = std::mem::size_of::<libc::sockaddr_ll>() as libc::socklen_t;
        msg.msg_iov = &mut iov;
        msg.msg_iovlen = 1;
        msg.msg_control = cbuf.as_mut_ptr() as *mut libc::c_void;
        msg.msg_controllen = std::mem::size_of_val(&cbuf) as _;
        // MSG_TRUNC makes recv report the real length, so oversize frames are
        // detected instead of being forwarded cut short.
        let n = unsafe { libc::recvmsg(fd, &mut msg, libc::MSG_TRUNC) };
        let (now, now_real) = clocks_now();
        if n < 0 {
            let en = errno();
            if en == libc::EAGAIN || en == libc::EINTR {
                continue;
            }
            // e.g. ENETDOWN while the interface is being set up: keep going.
            if !warned {
                eprintln!("{PROG}: warning: {name}: recv: {}", io::Error::from_raw_os_error(en));
                warned = true;
            }
            thread::sleep(std::time::Duration::from_millis(10));
            continue;
        }
        let n = n as usize;
        if sll.sll_pkttype == libc::PACKET_OUTGOING || n < VNET_HDR_LEN {
            continue;
        }
        if n > buf.len() {
            truncated += 1;
            if truncated == 1 {
                eprintln!("{PROG}: warning: {name}: dropping {n}-byte frame larger than buffer");
            }
            continue;
        }
        let mut kstamp = None;
        unsafe {
            let mut c = libc::CMSG_FIRSTHDR(&msg);
            while !c.is_null() {
                if (*c).cmsg_level == libc::SOL_SOCKET && (*c).cmsg_type == libc::SCM_TIMESTAMPNS {
                    let ts = std::ptr::read_unaligned(libc::CMSG_DATA(c) as *const libc::timespec);
                    kstamp = Some(ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64);
                }
                c = libc::CMSG_NXTHDR(&msg, c);
            }
        }
        // The model wants non-decreasing time; mixed stamp sources could step back.
        let arrival = arrival_ns(kstamp, now, now_real).max(last_arrival);
        last_arrival = arrival;
        if forward(&mut model, arrival, &buf[..n], &out).is_err() {
            break;
        }
    }
    model.counters()
}

/// Puts one received frame through the model and queues what survives for
/// sending. A GSO super-frame meets the link as the wire frames it stands
/// for; it stays whole unless some of them were lost, and then the survivors
/// go out cut. Err when the tx thread is gone.
fn forward(model: &mut LinkModel, arrival: u64, frame: &[u8], out: &mpsc::Sender<Frame>) -> Result<(), ()> {
    let send = |release_ns: u64, f: Vec<u8>| out.send((release_ns, f)).map_err(|_| ());
    let Some(layout) = Layout::parse(frame) else {
        // The wire carries the Ethernet frame; the vnet header is metadata.
        return match model.on_packet(arrival, frame.len() - VNET_HDR_LEN) {
            Verdict::Deliver { release_ns } => send(release_ns, frame.to_vec()),
            Verdict::Drop(_) => Ok(()),
        };
    };
    let sizes: Vec<usize> = layout.wire_sizes().collect();
    let burst = model.on_burst(arrival, &sizes);
    let Some(release_ns) = burst.release_ns else { return Ok(()) };
    if burst.dropped.is_empty() {
        return send(release_ns, frame.to_vec());
    }
    for i in (0..sizes.len()).filter(|i| !burst.dropped.contains(i)) {
        send(release_ns, layout.segment(frame, i))?;
    }
    Ok(())
}

/// Timer wake-ups on this class of host (KVM guest) arrive ~15-60 us late
/// even under SCHED_FIFO. We track that lateness and set the timer that much
/// early, then spin the last few microseconds, so frames leave on time
/// without burning a CPU between packets.
struct Waker {
    /// Running mean of timer lateness (ns).
    est_ns: u64,
}

impl Waker {
    const GUARD_NS: u64 = 3_000;
    const MAX_EST_NS: u64 = 100_000;

    fn wait_until(&mut self, release_ns: u64) {
        let target = release_ns.saturating_sub(self.est_ns + Self::GUARD_NS);
        if target > mono_ns() {
            sleep_until(target);
            let late = mono_ns().saturating_sub(target);
            // EWMA with weight 1/16: follows load changes within tens of packets.
            let est = (self.est_ns * 15 + late.min(Self::MAX_EST_NS)) / 16;
            self.est_ns = est.min(Self::MAX_EST_NS);
        }
        while mono_ns() < release_ns {
            std::hint::spin_loop();
        }
    }
}

fn tx_loop(name: &str, fd: RawFd, input: mpsc::Receiver<Frame>, stats: &TxStats) {
    make_thread_realtime(TX_PRIORITY);
    let mut warned = false;
    let mut waker = Waker { est_ns: 20_000 };
    while let Ok((release_ns, frame)) = input.recv() {
        waker.wait_until(release_ns);
        let late = mono_ns().saturating_sub(release_ns);
        stats.late_ns_sum.fetch_add(late, Ordering::Relaxed);
        stats.late_ns_max.fetch_max(late, Ordering::Relaxed);
        // The vnet header goes back out verbatim so GSO/csum state survives.
        let r = loop {
            let r = unsafe { libc::send(fd, frame.as_ptr() as *const libc::c_void, frame.len(), 0) };
            if r < 0 && errno() == libc::EINTR {
                continue;
            }
            break r;
        };
        if r < 0 {
            stats.send_errors.fetch_add(1, Ordering::Relaxed);
            if !warned {
                eprintln!("{PROG}: warning: {name}: send: {}", io::Error::last_os_error());
                warned = true;
            }
        } else {
            stats.sent.fetch_add(1, Ordering::Relaxed);
        }
    }
}

fn dir_json(c: &Counters, t: &TxStats) -> String {
    let sent = t.sent.load(Ordering::Relaxed);
    let errs = t.send_errors.load(Ordering::Relaxed);
    let mean = t.late_ns_sum.load(Ordering::Relaxed) / (sent + errs).max(1);
    format!(
        "{{\"delivered\": {}, \"dropped_queue\": {}, \"dropped_loss\": {}, \"bytes\": {}, \"sent\": {sent}, \"send_errors\": {errs}, \"late_ns_mean\": {mean}, \"late_ns_max\": {}}}",
        c.delivered,
        c.dropped_queue,
        c.dropped_loss,
        c.bytes,
        t.late_ns_max.load(Ordering::Relaxed)
    )
}

fn main() {
    let argv: Vec<String> = std::env::args().skip(1).collect();
    let args = args_or_exit(PROG, USAGE, parse_args(&argv));
    // Distinct PRNG streams per direction, both derived from the one seed.
    let model_ab = LinkModel::new(args.a_to_b.config(args.seed));
    let model_ba = LinkModel::new(args.b_to_a.config(args.seed ^ 0x5DEE_CE66_D1CE_F00D));
    let (model_ab, model_ba) = match (model_ab, model_ba) {
        (Ok(a), Ok(b)) => (a, b),
        (Err(e), _) | (_, Err(e)) => {
            eprintln!("{PROG}: invalid link config: {e}");
            exit(2)
        }
    };

    // Block the stop signals before any thread exists so all inherit the
    // mask and only sigwait() below sees them: no async-signal-safety issues.
    let mut sigs: libc::sigset_t = unsafe { std::mem::zeroed() };
    unsafe {
        libc::sigemptyset(&mut sigs);
        libc::sigaddset(&mut sigs, libc::SIGTERM);
        libc::sigaddset(&mut sigs, libc::SIGINT);
        libc::pthread_sigmask(libc::SIG_BLOCK, &sigs, std::ptr::null_mut());
        // New threads copy the creator's slack; set it early for all of them.
        libc::prctl(libc::PR_SET_TIMERSLACK, 1 as libc::c_ulong, 0, 0, 0);
    }

    let (fd_a, fd_b) = match (open_packet_socket("--if-a", &args.if_a), open_packet_socket("--if-b", &args.if_b)) {
        (Ok(a), Ok(b)) => (a, b),
        (Err(e), _) | (_, Err(e)) => {
            eprintln!("{PROG}: {e}");
            exit(1)
        }
    };

    let _pm_qos = args.cpu_dma_latency_us.and_then(request_cpu_latency);

    let stop = Arc::new(AtomicBool::new(false));
    let tx_ab = Arc::new(TxStats::default());
    let tx_ba = Arc::new(TxStats::default());
    let spawn_dir = |name: &'static str, rx_fd: RawFd, tx_fd: RawFd, model: LinkModel, stats: Arc<TxStats>| {
        let (s, r) = mpsc::channel::<Frame>();
        let stop = stop.clone();
        let rx = thread::Builder::new()
            .name(format!("rx-{name}"))
            .spawn(move || rx_loop(name, rx_fd, model, s, &stop))
            .expect("spawn rx thread");
        thread::Builder::new()
            .name(format!("tx-{name}"))
            .spawn(move || tx_loop(name, tx_fd, r, &stats))
            .expect("spawn tx thread");
        rx
    };
    let rx_ab = spawn_dir("a_to_b", fd_a, fd_b, model_ab, tx_ab.clone());
    let rx_ba = spawn_dir("b_to_a", fd_b, fd_a, model_ba, tx_ba.clone());

    {
        let mut out = io::stdout().lock();
        let _ = writeln!(out, "ready");
        let _ = out.flush();
    }

    let mut sig: libc::c_int = 0;
    while unsafe { libc::sigwait(&sigs, &mut sig) } != 0 {}

    stop.store(true, Ordering::Relaxed);
    // rx threads wake within SO_RCVTIMEO; joining gives final, consistent counters.
    let c_ab = rx_ab.join().unwrap_or_default();
    let c_ba = rx_ba.join().unwrap_or_default();
    if let Some(path) = &args.stats {
        let json = format!("{{\"a_to_b\": {}, \"b_to_a\": {}}}\n", dir_json(&c_ab, &tx_ab), dir_json(&c_ba, &tx_ba));
        if let Err(e) = std::fs::write(path, json) {
            eprintln!("{PROG}: --stats {path}: {e}");
            exit(1);
        }
    }
    // tx threads may be asleep until a release time; in-flight frames are
    // simply lost, as on a cut fibre.
    exit(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn a(s: &str) -> Vec<String> {
        s.split_whitespace().map(String::from).collect()
    }

    const BASE: &str = "--if-a a --if-b b --delay-us 4500 --rate-mbps 4000 --queue-bytes 2250000";

    #[test]
    fn parses_minimal_and_full() {
        let p = parse_args(&a(BASE)).unwrap();
        assert_eq!(p.if_a, "a");
        assert_eq!(p.a_to_b.delay_us, 4500.0);
        assert_eq!(p.b_to_a, p.a_to_b, "symmetric unless told otherwise");
        let c = p.a_to_b.config(p.seed);
        assert_eq!(c.delay_ns, 4_500_000);
        assert_eq!(c.rate_bps, 4_000_000_000);
        let p = parse_args(&a(&format!(
            "{BASE} --jitter-us 12.5 --loss=0.01 --seed 9 --stats /tmp/x.json --cpu-dma-latency-us 0"
        )))
        .unwrap();
        assert_eq!(p.a_to_b.config(p.seed).jitter_ns, 12_500);
        assert_eq!(p.b_to_a.loss, 0.01);
        assert_eq!(p.seed, 9);
        assert_eq!(p.stats.as_deref(), Some("/tmp/x.json"));
        assert_eq!(p.cpu_dma_latency_us, Some(0));
        assert_eq!(parse_args(&a(BASE)).unwrap().cpu_dma_latency_us, None);
    }

    #[test]
    fn back_flags_make_the_link_asymmetric() {
        let p = parse_args(&a(&format!(
            "{BASE} --jitter-us 10 --back-delay-us 5000 --back-rate-mbps=1000 --back-loss 0.02"
        )))
        .unwrap();
        assert_eq!((p.a_to_b.delay_us, p.a_to_b.rate_mbps, p.a_to_b.loss), (4500.0, 4000.0, 0.0));
        assert_eq!((p.b_to_a.delay_us, p.b_to_a.rate_mbps, p.b_to_a.loss), (5000.0, 1000.0, 0.02));
        // What the back flags leave out is the forward direction's.
        assert_eq!((p.b_to_a.queue_bytes, p.b_to_a.jitter_us), (2_250_000, 10.0));
    }

    #[test]
    fn arrival_uses_plausible_kernel_stamps_only() {
        let (mono, real) = (5_000_000_000, 1_700_000_000_000_000_000);
        // Stamped 40 us before recv returned: arrival moves back by 40 us.
        assert_eq!(arrival_ns(Some(real - 40_000), mono, real), mono - 40_000);
        // Missing, future, stale or foreign-clock stamps: recv time.
        assert_eq!(arrival_ns(None, mono, real), mono);
        assert_eq!(arrival_ns(Some(real + 1), mono, real), mono);
        assert_eq!(arrival_ns(Some(real - 2_000_000_000), mono, real), mono);
        assert_eq!(arrival_ns(Some(123_456_789), mono, real), mono);
    }

    #[test]
    fn the_two_clocks_are_read_at_one_instant() {
        // Their difference is constant between NTP adjustments: pairs read far apart
        // agree within a microsecond or two, however the thread was scheduled.
        let offsets: Vec<i128> = (0..1000)
            .map(|_| {
                let (m, r) = clocks_now();
                r as i128 - m as i128
            })
            .collect();
        let (lo, hi) = (offsets.iter().min().unwrap(), offsets.iter().max().unwrap());
        assert!(hi - lo <= 2_000, "offset spread {} ns", hi - lo);
    }

    #[test]
    fn errors_name_the_flag() {
        let cases = [
            ("--if-a a --if-b b --delay-us 1 --rate-mbps 1", "--queue-bytes"),
            (&format!("{BASE} --rate-mbps 0"), "--rate-mbps"),
            (&format!("{BASE} --rate-mbps nan"), "--rate-mbps"),
            (&format!("{BASE} --delay-us -1"), "--delay-us"),
            (&format!("{BASE} --loss 2"), "--loss"),
            (&format!("{BASE} --queue-bytes 0"), "--queue-bytes"),
            (&format!("{BASE} --queue-bytes 1.5"), "--queue-bytes"),
            (&format!("{BASE} --seed"), "--seed"),
            (&format!("{BASE} --bogus 1"), "--bogus"),
            ("--if-a a --if-b a --delay-us 1 --rate-mbps 1 --queue-bytes 1", "--if-b"),
            (&format!("{BASE} --back-loss 1.5"), "--back-loss"),
            (&format!("{BASE} --back-rate-mbps 0.0000001"), "--back-rate-mbps"),
            (&format!("{BASE} --back-seed 1"), "--back-seed"),
        ];
        for (argv, flag) in cases {
            let e = parse_args(&a(argv)).unwrap_err();
            assert!(e.starts_with(flag), "{argv:?} -> {e:?}");
            assert!(!e.contains('\n'));
        }
    }
}
