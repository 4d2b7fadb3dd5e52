//! The two directions' loops. Per direction one rx thread (recv, timestamp,
//! ask the model) and one tx thread (sleep until release, send).

use std::os::fd::RawFd;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::mpsc;
use std::sync::Arc;
use std::thread;

use geofed_linkemu::gso::{Layout, VNET_HDR_LEN};
use geofed_linkemu::{Counters, LinkModel, Verdict};
use geofed_os::clock::{clocks_now, mono_ns, sleep_until};
use geofed_os::msg::{recv_msg, send, Control};
use geofed_os::sched::set_realtime;

use crate::PROG;

/// veth hands us whole GSO super-frames (up to 64 KiB, more with BIG TCP).
const RX_BUF_LEN: usize = 256 * 1024;
/// rx sits one above tx so a tx thread spinning towards a release time never
/// holds up reception on its CPU (equal SCHED_FIFO priorities do not preempt).
const RX_PRIORITY: libc::c_int = 51;
const TX_PRIORITY: libc::c_int = 50;

/// Logged once per direction; the testbed looks for it.
const CREDIT_WAIT_OVERFLOW: &str =
    "credit wait overflowed the queue: a frame of a lossless link was dropped (credit_wait_overflow)";

static RT_WARNED: AtomicBool = AtomicBool::new(false);

/// Timer wake-up latency is the whole game for RTT accuracy: without
/// SCHED_FIFO, p99 RTT on a 9 ms link reached 13 ms in the feasibility probe.
fn make_thread_realtime(priority: libc::c_int) {
    if let Err(e) = set_realtime(priority) {
        if !RT_WARNED.swap(true, Ordering::Relaxed) {
            eprintln!("{PROG}: warning: cannot set SCHED_FIFO ({e}); continuing, latency tails will be worse");
        }
    }
}

#[derive(Default)]
pub struct TxStats {
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

/// One direction: its rx and tx threads, joined by a queue of frames with
/// their release times. The rx thread's handle gives the model's counters once
/// `stop` is set; the tx thread's send counts go to `stats`.
pub fn spawn_direction(
    name: &'static str,
    rx_fd: RawFd,
    tx_fd: RawFd,
    model: LinkModel,
    stats: Arc<TxStats>,
    stop: Arc<AtomicBool>,
) -> thread::JoinHandle<Counters> {
    let (s, r) = mpsc::channel::<Frame>();
    let rx = thread::Builder::new()
        .name(format!("rx-{name}"))
        .spawn(move || rx_loop(name, rx_fd, model, s, &stop))
        .expect("spawn rx thread");
    thread::Builder::new()
        .name(format!("tx-{name}"))
        .spawn(move || tx_loop(name, tx_fd, r, &stats))
        .expect("spawn tx thread");
    rx
}

fn rx_loop(name: &str, fd: RawFd, mut model: LinkModel, out: mpsc::Sender<Frame>, stop: &AtomicBool) -> Counters {
    make_thread_realtime(RX_PRIORITY);
    let mut buf = vec![0u8; RX_BUF_LEN];
    let mut control = Control::default();
    let mut warned = false;
    let mut truncated = 0u64;
    let mut last_arrival = 0u64;
    let mut overflow_warned = false;
    while !stop.load(Ordering::Relaxed) {
        // SAFETY: all-zero is a valid sockaddr_ll.
        let mut sll: libc::sockaddr_ll = unsafe { std::mem::zeroed() };
        // MSG_TRUNC makes recv report the real length, so oversize frames are
        // detected instead of being forwarded cut short.
        let got = recv_msg(fd, &mut buf, Some(&mut sll), &mut control, libc::MSG_TRUNC);
        let (now, now_real) = clocks_now();
        let n = match got {
            Ok(n) => n,
            Err(e) if matches!(e.raw_os_error(), Some(libc::EAGAIN) | Some(libc::EINTR)) => continue,
            Err(e) => {
                // e.g. ENETDOWN while the interface is being set up: keep going.
                if !warned {
                    eprintln!("{PROG}: warning: {name}: recv: {e}");
                    warned = true;
                }
                thread::sleep(std::time::Duration::from_millis(10));
                continue;
            }
        };
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
        let kstamp = control
            .messages()
            .find(|c| c.level == libc::SOL_SOCKET && c.kind == libc::SCM_TIMESTAMPNS)
            .and_then(|c| c.timespec_ns());
        // The model wants non-decreasing time; mixed stamp sources could step back.
        let arrival = arrival_ns(kstamp, now, now_real).max(last_arrival);
        last_arrival = arrival;
        if forward(&mut model, arrival, &buf[..n], &out).is_err() {
            break;
        }
        if !overflow_warned && model.counters().credit_wait_overflow > 0 {
            // The one way a lossless link loses a frame; the log says so at once (the
            // counters only reach the --stats file when the emulator stops).
            eprintln!("{PROG}: warning: {name}: {CREDIT_WAIT_OVERFLOW}");
            overflow_warned = true;
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
        match send(fd, &frame) {
            Ok(_) => {
                stats.sent.fetch_add(1, Ordering::Relaxed);
            }
            Err(e) => {
                stats.send_errors.fetch_add(1, Ordering::Relaxed);
                if !warned {
                    eprintln!("{PROG}: warning: {name}: send: {e}");
                    warned = true;
                }
            }
        }
    }
}

/// One direction's counters as the `--stats` file holds them.
pub fn dir_json(c: &Counters, t: &TxStats) -> String {
    let sent = t.sent.load(Ordering::Relaxed);
    let errs = t.send_errors.load(Ordering::Relaxed);
    let mean = t.late_ns_sum.load(Ordering::Relaxed) / (sent + errs).max(1);
    format!(
        "{{\"delivered\": {}, \"dropped_queue\": {}, \"dropped_loss\": {}, \"credit_wait_overflow\": {}, \"bytes\": {}, \"sent\": {sent}, \"send_errors\": {errs}, \"late_ns_mean\": {mean}, \"late_ns_max\": {}}}",
        c.delivered,
        c.dropped_queue,
        c.dropped_loss,
        c.credit_wait_overflow,
        c.bytes,
        t.late_ns_max.load(Ordering::Relaxed)
    )
}

#[cfg(test)]
mod tests {
    use super::*;

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
}
