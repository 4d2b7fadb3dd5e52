//! The two directions' loops: per direction one thread that receives frames
//! in batches, asks the model when each reaches the far end, and hands over
//! together the frames whose time has come, waiting on one timer between.

use std::os::fd::RawFd;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread;

use geofed_linkemu::gso::{Layout, VNET_HDR_LEN};
use geofed_linkemu::release::Releases;
use geofed_linkemu::{Counters, LinkModel, Verdict};
use geofed_os::clock::{clocks_now, mono_ns, wait_readable, Timer};
use geofed_os::msg::{send_batch, RecvBatch};
use geofed_os::sched::set_realtime;

use crate::control::Inbox;
use crate::PROG;

/// veth hands us whole GSO super-frames (up to 64 KiB, more with BIG TCP).
const RX_BUF_LEN: usize = 256 * 1024;
/// Frames taken per receive call: a burst of a TCP window's super-frames, or its ACKs.
const RX_BATCH: usize = 32;
/// Receive calls per wake-up at most.
const RX_BATCHES_PER_WAKE: usize = 8;
/// Frames this long or longer are kept in the buffer they were received in
/// (swapped for a spare one) instead of being copied out.
const KEEP_FROM_BYTES: usize = 4096;
/// Spare receive buffers kept for reuse; beyond this they are freed.
const SPARE_BUFFERS: usize = 256;
const PRIORITY: libc::c_int = 50;
/// How much before its release a frame may leave, its own serialisation
/// permitting (release.rs): frames due within it leave in one send.
const WINDOW_NS: u64 = 20_000;
/// The longest frames stay unread in the socket while others are held.
const MAX_UNREAD_NS: u64 = 1_000_000;
/// The wait between checks of the stop flag.
const STOP_POLL_MS: i32 = 200;

/// Logged once per direction; the testbed looks for it.
const CREDIT_WAIT_OVERFLOW: &str =
    "credit wait overflowed the queue: a frame of a lossless link was dropped (credit_wait_overflow)";

static RT_WARNED: AtomicBool = AtomicBool::new(false);

/// Timer wake-up latency is the whole game for RTT accuracy: without
/// SCHED_FIFO, p99 RTT on a 9 ms link reached 13 ms in the feasibility probe.
pub fn make_thread_realtime(priority: libc::c_int) {
    if let Err(e) = set_realtime(priority) {
        if !RT_WARNED.swap(true, Ordering::Relaxed) {
            eprintln!("{PROG}: warning: cannot set SCHED_FIFO ({e}); continuing, latency tails will be worse");
        }
    }
}

/// A frame held for release: the first `len` bytes of `buf`, standing for
/// `wire_frames` frames on the wire, the `seq`th held on this way, of the
/// model's packet or burst `unit`.
struct Frame {
    buf: Vec<u8>,
    len: usize,
    wire_frames: u64,
    seq: u64,
    unit: u64,
}

impl Frame {
    fn new(buf: Vec<u8>, len: usize, wire_frames: u64) -> Frame {
        Frame { buf, len, wire_frames, seq: 0, unit: 0 }
    }

    fn copied(bytes: &[u8], wire_frames: u64) -> Frame {
        Frame::new(bytes.to_vec(), bytes.len(), wire_frames)
    }
}

/// Receive buffers whose frames were sent, for the next frames kept whole.
#[derive(Default)]
struct Spares(Vec<Vec<u8>>);

impl Spares {
    fn get(&mut self) -> Vec<u8> {
        self.0.pop().unwrap_or_else(|| vec![0u8; RX_BUF_LEN])
    }

    fn put(&mut self, buf: Vec<u8>) {
        if buf.len() == RX_BUF_LEN && self.0.len() < SPARE_BUFFERS {
            self.0.push(buf);
        }
    }
}

/// What left, and the accounting that shows no frame vanished or overtook another:
/// the model's delivered wire frames are those handed to the kernel and those held.
#[derive(Default)]
pub struct TxStats {
    sent: u64,
    send_errors: u64,
    /// How far behind its release time each frame was handed to the kernel.
    late_ns_sum: u64,
    late_ns_max: u64,
    /// Wire frames handed to the kernel (a super-frame counts as its frames).
    wire_out: u64,
    /// Wire frames held for release now.
    held: u64,
    /// Frames that left before one held earlier than them (FIFO says never).
    out_of_order: u64,
    next_seq: u64,
    last_seq_out: Option<u64>,
}

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

/// One direction's thread; its handle gives the model's counters and the
/// send counts once `stop` is set.
pub fn spawn_direction(
    name: &'static str,
    rx_fd: RawFd,
    tx_fd: RawFd,
    model: LinkModel,
    inbox: Arc<Inbox>,
    stop: Arc<AtomicBool>,
) -> thread::JoinHandle<(Counters, TxStats)> {
    thread::Builder::new()
        .name(name.to_string())
        .spawn(move || direction_loop(name, rx_fd, tx_fd, model, &inbox, &stop))
        .expect("spawn direction thread")
}

fn direction_loop(
    name: &str,
    rx_fd: RawFd,
    tx_fd: RawFd,
    mut model: LinkModel,
    inbox: &Inbox,
    stop: &AtomicBool,
) -> (Counters, TxStats) {
    make_thread_realtime(PRIORITY);
    let timer = Timer::new().unwrap_or_else(|e| {
        eprintln!("{PROG}: {name}: timerfd: {e}");
        std::process::exit(1)
    });
    let mut rx = Receiver {
        name: name.to_string(),
        batch: RecvBatch::new(RX_BATCH, RX_BUF_LEN),
        warned: false,
        truncated: 0,
        last_arrival: 0,
        overflow_warned: false,
    };
    let mut held: Releases<Frame> = Releases::new(WINDOW_NS);
    let mut spares = Spares::default();
    let mut tx = TxStats::default();
    let mut waker = Waker { est_ns: 20_000, armed_ns: None };
    let mut ready = [false; 3];
    let mut drained_ns = 0;
    while !stop.load(Ordering::Relaxed) {
        send_due(name, tx_fd, &mut held, &mut spares, &mut tx);
        // While frames are held, the socket is read only when the timer wakes:
        // the model goes by the kernel's receive stamps, and a frame arriving
        // now leaves after the held ones (FIFO), so nothing is late for being
        // read then. At least every MAX_UNREAD_NS, so the socket never fills.
        let hold_on = held.next_ns().zip(held.next_release_ns());
        if let Some((from, release)) = hold_on {
            // A frame whose window is longer than the timer's lateness leaves
            // when the timer wakes; a short one (an ACK, a probe) is waited
            // for by spinning from the early wake-up to its instant.
            let Some(wake) = waker.wake_for(release) else {
                while mono_ns() < from {
                    std::hint::spin_loop();
                }
                continue;
            };
            waker.arm(&timer, wake.min(drained_ns + MAX_UNREAD_NS));
        } else {
            waker.disarm(&timer);
        }
        let fds = [timer.fd(), inbox.fd(), rx_fd];
        let watched = if hold_on.is_some() { &fds[..2] } else { &fds[..] };
        if wait_readable(watched, STOP_POLL_MS, &mut ready).is_err() {
            continue;
        }
        if ready[0] && timer.fired() {
            waker.learn();
        }
        if ready[1] {
            if let Some(change) = inbox.take() {
                // What reached the socket before the change meets the old link:
                // read all of it first, then change.
                while rx.receive(rx_fd, &mut model, &mut held, &mut spares, &mut tx) == RX_BATCH {}
                let applied = model.apply(&change, mono_ns()).map(|moved| {
                    // A new rate re-timed what was not yet serialised (in order, by unit).
                    held.retime(|f| moved.binary_search_by_key(&f.unit, |&(u, _)| u).ok().map(|i| moved[i].1));
                    mono_ns()
                });
                inbox.reply(applied.map(|ns| (ns, dir_json(&model.counters(), &tx))).map_err(|e| e.to_string()));
            }
        }
        drained_ns = mono_ns();
        // Bounded, so a flood cannot hold up sending; what it leaves is read
        // again right after the frames now due have gone.
        if (0..RX_BATCHES_PER_WAKE).all(|_| rx.receive(rx_fd, &mut model, &mut held, &mut spares, &mut tx) == RX_BATCH)
        {
            drained_ns = 0;
        }
    }
    (model.counters(), tx)
}

/// What the receiving side keeps between batches.
struct Receiver {
    name: String,
    batch: RecvBatch<libc::sockaddr_ll>,
    warned: bool,
    truncated: u64,
    last_arrival: u64,
    overflow_warned: bool,
}

impl Receiver {
    /// Takes what the socket holds, up to a batch, puts each frame through
    /// the model and holds the survivors for release; how many it took.
    fn receive(
        &mut self,
        fd: RawFd,
        model: &mut LinkModel,
        held: &mut Releases<Frame>,
        spares: &mut Spares,
        tx: &mut TxStats,
    ) -> usize {
        let name = &self.name;
        // MSG_TRUNC makes recv report the real length, so oversize frames are
        // detected instead of being forwarded cut short.
        let got = self.batch.recv(fd, libc::MSG_DONTWAIT | libc::MSG_TRUNC);
        let (now, now_real) = clocks_now();
        let count = match got {
            Ok(n) => n,
            Err(e) if matches!(e.raw_os_error(), Some(libc::EAGAIN) | Some(libc::EINTR)) => return 0,
            Err(e) => {
                // e.g. ENETDOWN while the interface is being set up: keep going.
                if !self.warned {
                    eprintln!("{PROG}: warning: {name}: recv: {e}");
                    self.warned = true;
                }
                thread::sleep(std::time::Duration::from_millis(10));
                return 0;
            }
        };
        for i in 0..count {
            let (frame, n, sll, control) = self.batch.frame(i);
            if sll.sll_pkttype == libc::PACKET_OUTGOING || n < VNET_HDR_LEN {
                continue;
            }
            if n > frame.len() {
                self.truncated += 1;
                if self.truncated == 1 {
                    eprintln!("{PROG}: warning: {name}: dropping {n}-byte frame larger than buffer");
                }
                continue;
            }
            let kstamp = control
                .messages()
                .find(|c| c.level == libc::SOL_SOCKET && c.kind == libc::SCM_TIMESTAMPNS)
                .and_then(|c| c.timespec_ns());
            // The model wants non-decreasing time; mixed stamp sources could step back.
            let arrival = arrival_ns(kstamp, now, now_real).max(self.last_arrival);
            self.last_arrival = arrival;
            match forward(model, arrival, frame) {
                Keep::Nothing => {}
                Keep::Whole(release_ns, wire) if n < KEEP_FROM_BYTES => {
                    hold(held, tx, model, release_ns, Frame::copied(frame, wire))
                }
                Keep::Whole(release_ns, wire) => {
                    let buf = self.batch.swap(i, spares.get());
                    hold(held, tx, model, release_ns, Frame::new(buf, n, wire));
                }
                Keep::Segments(release_ns, segments) => {
                    for s in segments {
                        let len = s.len();
                        hold(held, tx, model, release_ns, Frame::new(s, len, 1));
                    }
                }
            }
            if !self.overflow_warned && model.counters().credit_wait_overflow > 0 {
                // The one way a lossless link loses a frame; the log says so at once (the
                // counters only reach the --stats file when the emulator stops).
                eprintln!("{PROG}: warning: {name}: {CREDIT_WAIT_OVERFLOW}");
                self.overflow_warned = true;
            }
        }
        count
    }
}

/// What of a received frame goes on to the far end, released when.
enum Keep {
    Nothing,
    /// Released when, and the wire frames it stands for.
    Whole(u64, u64),
    /// Wire frames of a super-frame that survived, cut apart.
    Segments(u64, Vec<Vec<u8>>),
}

/// Puts one received frame through the model. A GSO super-frame meets the
/// link as the wire frames it stands for; it stays whole unless some of them
/// were lost, and then the survivors go out cut.
fn forward(model: &mut LinkModel, arrival: u64, frame: &[u8]) -> Keep {
    let Some(layout) = Layout::parse(frame) else {
        // The wire carries the Ethernet frame; the vnet header is metadata.
        return match model.on_packet(arrival, frame.len() - VNET_HDR_LEN) {
            Verdict::Deliver { release_ns } => Keep::Whole(release_ns, 1),
            Verdict::Drop(_) => Keep::Nothing,
        };
    };
    let sizes: Vec<usize> = layout.wire_sizes().collect();
    let burst = model.on_burst(arrival, &sizes);
    match burst.release_ns {
        None => Keep::Nothing,
        Some(release_ns) if burst.dropped.is_empty() => Keep::Whole(release_ns, sizes.len() as u64),
        Some(release_ns) => Keep::Segments(
            release_ns,
            (0..sizes.len()).filter(|i| !burst.dropped.contains(i)).map(|i| layout.segment(frame, i)).collect(),
        ),
    }
}

/// Holds `frame` for release; it may leave no earlier than its first bit's arrival.
fn hold(held: &mut Releases<Frame>, tx: &mut TxStats, model: &LinkModel, release_ns: u64, mut frame: Frame) {
    let serialisation_ns = model.serialisation_ns(frame.len - VNET_HDR_LEN);
    frame.seq = tx.next_seq;
    frame.unit = model.last_unit();
    tx.next_seq += 1;
    tx.held += frame.wire_frames;
    held.hold(release_ns, serialisation_ns, frame);
}

/// Sends, in one call, every held frame that may leave now.
fn send_due(name: &str, fd: RawFd, held: &mut Releases<Frame>, spares: &mut Spares, stats: &mut TxStats) {
    let now = mono_ns();
    let mut due = vec![];
    while let Some((release_ns, frame)) = held.pop_due(now) {
        let late = now.saturating_sub(release_ns);
        stats.late_ns_sum += late;
        stats.late_ns_max = stats.late_ns_max.max(late);
        stats.out_of_order += stats.last_seq_out.is_some_and(|s| s > frame.seq) as u64;
        stats.last_seq_out = Some(frame.seq);
        stats.held -= frame.wire_frames;
        stats.wire_out += frame.wire_frames;
        due.push(frame);
    }
    if due.is_empty() {
        return;
    }
    // The vnet header goes back out verbatim so GSO/csum state survives.
    let frames: Vec<&[u8]> = due.iter().map(|f| &f.buf[..f.len]).collect();
    let sent = send_batch(fd, &frames, |e| {
        if stats.send_errors == 0 {
            eprintln!("{PROG}: warning: {name}: send: {e}");
        }
        stats.send_errors += 1;
    });
    stats.sent += sent as u64;
    for f in due {
        spares.put(f.buf);
    }
}

/// Timer wake-ups on this class of host (KVM guest) arrive 10-30 us late
/// (median 20 us, 2026-11-26) even under SCHED_FIFO. We track that lateness
/// and set the timer that much before a frame's release; what is left to
/// the frame's window, if anything, is spun.
struct Waker {
    /// Running mean of timer lateness (ns).
    est_ns: u64,
    /// The instant the timer is set for.
    armed_ns: Option<u64>,
}

impl Waker {
    const GUARD_NS: u64 = 2_000;
    const MAX_EST_NS: u64 = 50_000;

    /// When to wake for a frame released at `release_ns`; None when that is too close for a timer.
    fn wake_for(&self, release_ns: u64) -> Option<u64> {
        let target = release_ns.saturating_sub(self.est_ns + Self::GUARD_NS);
        (target > mono_ns()).then_some(target)
    }

    fn arm(&mut self, timer: &Timer, target: u64) {
        if self.armed_ns != Some(target) {
            timer.set(Some(target));
            self.armed_ns = Some(target);
        }
    }

    fn disarm(&mut self, timer: &Timer) {
        if self.armed_ns.take().is_some() {
            timer.set(None);
        }
    }

    /// The timer fired: how late it was feeds the estimate.
    fn learn(&mut self) {
        let Some(target) = self.armed_ns.take() else { return };
        let late = mono_ns().saturating_sub(target).min(Self::MAX_EST_NS);
        // EWMA with weight 1/16: follows load changes within tens of packets.
        self.est_ns = (self.est_ns * 15 + late) / 16;
    }
}

/// One direction's counters as the `--stats` file holds them.
pub fn dir_json(c: &Counters, t: &TxStats) -> String {
    let (sent, errs) = (t.sent, t.send_errors);
    let mean = t.late_ns_sum / (sent + errs).max(1);
    format!(
        "{{\"delivered\": {}, \"dropped_queue\": {}, \"dropped_loss\": {}, \"credit_wait_overflow\": {}, \"dropped_down\": {}, \"bytes\": {}, \"sent\": {sent}, \"send_errors\": {errs}, \"late_ns_mean\": {mean}, \"late_ns_max\": {}, \"wire_out\": {}, \"held\": {}, \"out_of_order\": {}}}",
        c.delivered,
        c.dropped_queue,
        c.dropped_loss,
        c.credit_wait_overflow,
        c.dropped_down,
        c.bytes,
        t.late_ns_max,
        t.wire_out,
        t.held,
        t.out_of_order
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
