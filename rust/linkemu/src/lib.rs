//! Model of one direction of a long-haul link, as a pure state machine.
//!
//! It does no I/O and reads no clock: the caller passes the arrival time of
//! each packet and gets back when (or whether) it leaves the far end. That
//! keeps the timing logic testable with simulated time and lets the binary
//! stay a thin shell around sockets.
//!
//! Pipeline per packet: tail-drop queue -> serialisation at `rate` ->
//! random loss -> propagation `delay` + uniform `jitter` -> FIFO clamp.
//!
//! With `credits` (an InfiniBand range extender's flow control) the link is
//! lossless instead: a frame goes on the wire only into buffer credits the far
//! end advertised, and its credits come back one fibre round trip after it
//! started crossing (its serialisation, `delay`, then the reverse way's delay).
//! Frames wait for credits in the queue in front of the wire; nothing is
//! dropped unless that queue itself overflows, which is counted apart.
//!
//! A running link changes with [`LinkModel::apply`]: the new settings meet the
//! frames that arrive after the change, a new rate also what is not yet
//! serialised (whose releases it moves), and the FIFO clamp keeps a shorter
//! delay from reordering.

use std::collections::VecDeque;

pub mod gso;
pub mod release;

use std::fmt;

const NS_PER_S: u128 = 1_000_000_000;

/// Parameters of one direction of the link.
#[derive(Debug, Clone, PartialEq)]
pub struct LinkConfig {
    /// One-way propagation delay.
    pub delay_ns: u64,
    /// Bottleneck rate in bits per second.
    pub rate_bps: u64,
    /// Bytes that may wait for the wire before new packets are tail-dropped.
    pub queue_limit_bytes: u64,
    /// Extra delay drawn uniformly from `[0, jitter_ns]` per packet.
    pub jitter_ns: u64,
    /// Probability in `[0, 1]` that a packet is lost on the wire.
    pub loss: f64,
    /// Seed of the PRNG used for jitter and loss, so runs are reproducible.
    pub seed: u64,
    /// Credit-based flow control; None: a router's tail-drop queue.
    pub credits: Option<Credits>,
}

/// The far end's receive buffer, lent to the sender as credits.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Credits {
    /// Wire bytes that may be in flight (sent, their credits not yet back).
    pub bytes: u64,
    /// The reverse way's delay, which a returning credit travels.
    pub return_delay_ns: u64,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ConfigError {
    ZeroRate,
    ZeroQueue,
    BadLoss,
    ZeroCredits,
    /// A credit link is lossless: loss on its wire contradicts it.
    LossyCredits,
    /// Credits given to a way with a tail-drop queue: flow control does not change live.
    NoCredits,
}

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ConfigError::ZeroRate => write!(f, "rate must be > 0 bit/s"),
            ConfigError::ZeroQueue => write!(f, "queue limit must be > 0 bytes"),
            ConfigError::BadLoss => write!(f, "loss must be a probability in [0, 1]"),
            ConfigError::ZeroCredits => write!(f, "credits must be > 0 bytes"),
            ConfigError::LossyCredits => write!(f, "a credit link is lossless: loss must be 0"),
            ConfigError::NoCredits => write!(f, "credits: this way has a tail-drop queue, not credit flow control"),
        }
    }
}

impl std::error::Error for ConfigError {}

impl LinkConfig {
    fn check(&self) -> Result<(), ConfigError> {
        if self.rate_bps == 0 {
            return Err(ConfigError::ZeroRate);
        }
        if self.queue_limit_bytes == 0 {
            return Err(ConfigError::ZeroQueue);
        }
        if !(self.loss >= 0.0 && self.loss <= 1.0) {
            return Err(ConfigError::BadLoss);
        }
        if let Some(c) = self.credits {
            if c.bytes == 0 {
                return Err(ConfigError::ZeroCredits);
            }
            if self.loss > 0.0 {
                return Err(ConfigError::LossyCredits);
            }
        }
        Ok(())
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Reason {
    /// Tail drop: the queue in front of the wire was full.
    Queue,
    /// Random loss on the wire.
    Loss,
    /// A credit link's wait for credits overflowed its queue: a violation of
    /// the losslessness it emulates, counted apart from tail drops.
    CreditWaitOverflow,
    /// The link was down (a cut fibre) when the frame arrived.
    Down,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    /// Hand the packet to the far end at `release_ns` (same clock as `now_ns`).
    Deliver {
        release_ns: u64,
    },
    Drop(Reason),
}

/// What a burst of wire frames met: the survivors' release, if any survived,
/// and the indices of the frames lost (tail drop or loss on the wire).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Burst {
    pub release_ns: Option<u64>,
    pub dropped: Vec<usize>,
}

/// Per wire frame: a GSO super-frame counts as the frames it stands for.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Counters {
    pub delivered: u64,
    pub dropped_queue: u64,
    pub dropped_loss: u64,
    /// Frames a credit link could not hold while they waited for credits.
    pub credit_wait_overflow: u64,
    /// Frames that arrived while the link was down.
    pub dropped_down: u64,
    /// Bytes of delivered packets.
    pub bytes: u64,
}

/// SplitMix64: tiny, fast, and good enough for jitter/loss draws; we own it
/// so a seed means the same sequence forever, independent of crate versions.
#[derive(Debug, Clone)]
pub struct SplitMix64(u64);

impl SplitMix64 {
    pub fn new(seed: u64) -> Self {
        SplitMix64(seed)
    }

    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// Uniform in [0, 1) with 53 bits of precision.
    pub fn next_f64(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 * (1.0 / (1u64 << 53) as f64)
    }

    /// Uniform in [0, max] (inclusive); modulo bias is < 2^-40 for any
    /// realistic jitter, far below what matters here.
    pub fn below_inclusive(&mut self, max: u64) -> u64 {
        if max == u64::MAX {
            self.next_u64()
        } else {
            self.next_u64() % (max + 1)
        }
    }
}

#[derive(Debug, Clone)]
pub struct LinkModel {
    cfg: LinkConfig,
    rng: SplitMix64,
    /// Time the wire finishes serialising the last accepted packet.
    busy_until_ns: u64,
    /// Sub-nanosecond remainder of serialisation time (numerator over
    /// `rate_bps`), carried between back-to-back packets so long bursts hit
    /// the configured rate exactly instead of drifting by rounding.
    carry: u128,
    last_release_ns: u64,
    counters: Counters,
    credit: CreditState,
    /// Set by a change: every frame is lost, as on a cut fibre.
    down: bool,
    /// The last packet or burst given to the model (its number from 1).
    last_unit: u64,
    /// Wire bits of the packet or burst being taken in.
    unit_bits: u128,
    /// Packets and bursts of a queue link whose serialisation may not be over yet,
    /// in wire order: what a new rate re-times.
    on_wire: VecDeque<OnWire>,
    /// The latest release of those whose serialisation is over.
    done_release_ns: u64,
}

#[derive(Debug, Clone)]
struct OnWire {
    unit: u64,
    arrival_ns: u64,
    start_ns: u64,
    end_ns: u64,
    bits: u128,
    release_ns: Option<u64>,
}

/// A change of one direction of a running link: each given setting replaces the
/// current one for the frames that arrive after it.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Change {
    pub delay_ns: Option<u64>,
    pub rate_bps: Option<u64>,
    pub queue_limit_bytes: Option<u64>,
    pub jitter_ns: Option<u64>,
    pub loss: Option<f64>,
    pub credits_bytes: Option<u64>,
    /// The reverse way's new delay, which this way's credits travel back.
    pub credit_return_delay_ns: Option<u64>,
    pub down: Option<bool>,
}

impl Change {
    /// The settings `cfg` becomes with this change, if they make a valid link.
    pub fn applied_to(&self, cfg: &LinkConfig) -> Result<LinkConfig, ConfigError> {
        let mut cfg = cfg.clone();
        cfg.delay_ns = self.delay_ns.unwrap_or(cfg.delay_ns);
        cfg.rate_bps = self.rate_bps.unwrap_or(cfg.rate_bps);
        cfg.queue_limit_bytes = self.queue_limit_bytes.unwrap_or(cfg.queue_limit_bytes);
        cfg.jitter_ns = self.jitter_ns.unwrap_or(cfg.jitter_ns);
        cfg.loss = self.loss.unwrap_or(cfg.loss);
        if self.credits_bytes.is_some() || self.credit_return_delay_ns.is_some() {
            let c = cfg.credits.as_mut().ok_or(ConfigError::NoCredits)?;
            c.bytes = self.credits_bytes.unwrap_or(c.bytes);
            c.return_delay_ns = self.credit_return_delay_ns.unwrap_or(c.return_delay_ns);
        }
        cfg.check()?;
        Ok(cfg)
    }
}

/// What credit-based flow control keeps between frames.
#[derive(Debug, Clone, Default)]
struct CreditState {
    /// (when its credits come back, wire bytes) per frame in flight, in send order.
    in_flight: VecDeque<(u64, u64)>,
    in_flight_bytes: u64,
    /// (when it starts on the wire, wire bytes) per frame still waiting.
    waiting: VecDeque<(u64, u64)>,
    waiting_bytes: u64,
}

impl LinkModel {
    pub fn new(cfg: LinkConfig) -> Result<Self, ConfigError> {
        cfg.check()?;
        let rng = SplitMix64::new(cfg.seed);
        Ok(LinkModel {
            cfg,
            rng,
            busy_until_ns: 0,
            carry: 0,
            last_release_ns: 0,
            counters: Counters::default(),
            credit: CreditState::default(),
            down: false,
            last_unit: 0,
            unit_bits: 0,
            on_wire: VecDeque::new(),
            done_release_ns: 0,
        })
    }

    /// Changes the running link at `now_ns`; a change that would make an invalid
    /// link is refused whole and changes nothing. A longer delay holds the frames
    /// that arrive after it longer, a shorter one releases them no earlier than
    /// the last release (fibre is FIFO); a new queue limit, loss, jitter and a
    /// link going down or up meet the frames that arrive after it. A new rate
    /// serialises what is not yet serialised: on a queue link the frames queued
    /// and the rest of the one on the wire too, so they leave later (or earlier)
    /// by as much, in order; returned as (packet or burst number, its new release)
    /// for those that moved (numbers as `last_unit` gave them). On a credit link
    /// it meets the frames that arrive after it. New credits change the window:
    /// frames in flight keep theirs until they come back.
    pub fn apply(&mut self, change: &Change, now_ns: u64) -> Result<Vec<(u64, u64)>, ConfigError> {
        let cfg = change.applied_to(&self.cfg)?;
        let mut moved = vec![];
        if cfg.rate_bps != self.cfg.rate_bps {
            // The remainder is a fraction of a nanosecond at the old rate.
            self.carry = 0;
            moved = self.retime(now_ns, cfg.rate_bps);
        }
        self.cfg = cfg;
        self.down = change.down.unwrap_or(self.down);
        Ok(moved)
    }

    /// The number of the last packet or burst given to the model.
    pub fn last_unit(&self) -> u64 {
        self.last_unit
    }

    /// Serialises again at `rate_bps` from `now_ns` what was not serialised by
    /// then; each release moves with the end of its serialisation (its delay and
    /// jitter kept), never before an earlier release.
    fn retime(&mut self, now_ns: u64, rate_bps: u64) -> Vec<(u64, u64)> {
        self.finish_serialised(now_ns);
        let (mut cursor, mut last) = (now_ns, self.done_release_ns);
        let mut moved = vec![];
        for u in self.on_wire.iter_mut() {
            let (start, bits) = if u.start_ns < now_ns {
                // On the wire now: the rest of it goes at the new rate.
                (now_ns, u.bits * (u.end_ns - now_ns) as u128 / (u.end_ns - u.start_ns) as u128)
            } else {
                (u.arrival_ns.max(cursor), u.bits)
            };
            let end = start + (bits * NS_PER_S / rate_bps as u128) as u64;
            if let Some(r) = u.release_ns {
                let r = (r as i128 + end as i128 - u.end_ns as i128).max(last as i128) as u64;
                u.release_ns = Some(r);
                moved.push((u.unit, r));
                last = r;
            }
            (u.start_ns, u.end_ns, cursor) = (start, end, end);
        }
        if !self.on_wire.is_empty() {
            self.busy_until_ns = cursor;
            self.last_release_ns = last;
        }
        moved
    }

    /// Forgets what has been serialised by `now_ns` (nothing can re-time it).
    fn finish_serialised(&mut self, now_ns: u64) {
        while let Some(u) = self.on_wire.front() {
            if u.end_ns > now_ns {
                break;
            }
            self.done_release_ns = self.done_release_ns.max(u.release_ns.unwrap_or(0));
            self.on_wire.pop_front();
        }
    }

    /// A packet or burst arrives at `now_ns`: its number, and where its first frame would start.
    fn begin_unit(&mut self, now_ns: u64) -> u64 {
        self.last_unit += 1;
        self.unit_bits = 0;
        self.finish_serialised(now_ns);
        now_ns.max(self.busy_until_ns)
    }

    /// What of the packet or burst went on the wire of a queue link, kept for re-timing.
    fn end_unit(&mut self, now_ns: u64, start_ns: u64, release_ns: Option<u64>) {
        if self.unit_bits > 0 && self.cfg.credits.is_none() {
            let (unit, bits, end_ns) = (self.last_unit, self.unit_bits, self.busy_until_ns);
            self.on_wire.push_back(OnWire { unit, arrival_ns: now_ns, start_ns, end_ns, bits, release_ns });
        }
    }

    pub fn config(&self) -> &LinkConfig {
        &self.cfg
    }

    pub fn counters(&self) -> Counters {
        self.counters
    }

    /// How long `bytes` take on the wire (whole nanoseconds, rounded down).
    pub fn serialisation_ns(&self, bytes: usize) -> u64 {
        (bytes as u128 * 8 * NS_PER_S / self.cfg.rate_bps as u128) as u64
    }

    /// Bytes waiting for (or on) the wire at `now_ns`.
    pub fn backlog_bytes(&self, now_ns: u64) -> u64 {
        if self.busy_until_ns <= now_ns {
            return 0;
        }
        let ns = (self.busy_until_ns - now_ns) as u128;
        (ns * self.cfg.rate_bps as u128 / (8 * NS_PER_S)) as u64
    }

    /// A packet of `bytes` arrives at `now_ns`. Calls must come with
    /// non-decreasing `now_ns` (one clock, one thread per direction).
    pub fn on_packet(&mut self, now_ns: u64, bytes: usize) -> Verdict {
        let start = self.begin_unit(now_ns);
        let verdict = match self.wire(now_ns, bytes) {
            Err(r) => Verdict::Drop(r),
            Ok(()) => Verdict::Deliver { release_ns: self.release() },
        };
        let release = match verdict {
            Verdict::Deliver { release_ns } => Some(release_ns),
            Verdict::Drop(_) => None,
        };
        self.end_unit(now_ns, start, release);
        verdict
    }

    /// Back-to-back wire frames of `sizes` bytes arrive together at `now_ns`
    /// (a GSO super-frame): each meets the queue, the wire and the loss draw
    /// on its own; the survivors travel on as one unit, released together when
    /// the last of them has crossed.
    pub fn on_burst(&mut self, now_ns: u64, sizes: &[usize]) -> Burst {
        let start = self.begin_unit(now_ns);
        let dropped: Vec<usize> =
            sizes.iter().enumerate().filter(|&(_, &b)| self.wire(now_ns, b).is_err()).map(|(i, _)| i).collect();
        let release_ns = (dropped.len() < sizes.len()).then(|| self.release());
        self.end_unit(now_ns, start, release_ns);
        Burst { release_ns, dropped }
    }

    /// Bytes of a credit link waiting in front of the wire at `now_ns`.
    pub fn credit_wait_bytes(&mut self, now_ns: u64) -> u64 {
        let c = &mut self.credit;
        while let Some(&(start, bytes)) = c.waiting.front() {
            if start > now_ns {
                break;
            }
            c.waiting.pop_front();
            c.waiting_bytes -= bytes;
        }
        c.waiting_bytes
    }

    /// Queue, serialisation and loss of one frame; counts what happened.
    fn wire(&mut self, now_ns: u64, bytes: usize) -> Result<(), Reason> {
        if self.down {
            self.counters.dropped_down += 1;
            return Err(Reason::Down);
        }
        let bytes64 = bytes as u64;
        let mut start = now_ns.max(self.busy_until_ns);
        if let Some(credits) = self.cfg.credits {
            if self.credit_wait_bytes(now_ns).saturating_add(bytes64) > self.cfg.queue_limit_bytes {
                self.counters.credit_wait_overflow += 1;
                return Err(Reason::CreditWaitOverflow);
            }
            start = self.take_credits(credits, start, bytes64);
        } else if self.backlog_bytes(now_ns).saturating_add(bytes64) > self.cfg.queue_limit_bytes {
            // A dropped packet never reaches the wire, so busy_until stays.
            self.counters.dropped_queue += 1;
            return Err(Reason::Queue);
        }

        if start > self.busy_until_ns {
            // The wire went idle: an old fractional remainder means nothing now.
            self.carry = 0;
        }
        self.unit_bits += bytes64 as u128 * 8;
        let num = bytes64 as u128 * 8 * NS_PER_S + self.carry;
        let rate = self.cfg.rate_bps as u128;
        let ser_ns = (num / rate) as u64;
        self.carry = num % rate;
        self.busy_until_ns = start.saturating_add(ser_ns);
        if let Some(credits) = self.cfg.credits {
            // Delivered `delay` after it has crossed; the far end's credit
            // update then travels the reverse way. Jitter delays the frame's
            // hand-off past the far end, not the buffer it occupied there.
            let back = self.busy_until_ns.saturating_add(self.cfg.delay_ns).saturating_add(credits.return_delay_ns);
            self.credit.in_flight.push_back((back, bytes64));
            self.credit.in_flight_bytes += bytes64;
            self.credit.waiting.push_back((start, bytes64));
            self.credit.waiting_bytes += bytes64;
        }

        // Loss is applied after serialisation: a frame corrupted on the fibre
        // still occupied the wire, so it delays the packets behind it. This
        // also keeps queueing identical with and without loss for one seed.
        if self.cfg.loss > 0.0 && self.rng.next_f64() < self.cfg.loss {
            self.counters.dropped_loss += 1;
            return Err(Reason::Loss);
        }
        self.counters.delivered += 1;
        self.counters.bytes += bytes64;
        Ok(())
    }

    /// The earliest time from `ready_ns` at which `bytes` of credits are free;
    /// takes them. Credits come back in send order (one delay per way), so the
    /// oldest in flight is the next to return. A frame larger than the whole
    /// window waits for every credit and then goes alone.
    fn take_credits(&mut self, credits: Credits, ready_ns: u64, bytes: u64) -> u64 {
        let c = &mut self.credit;
        let mut start = ready_ns;
        while let Some(&(back, b)) = c.in_flight.front() {
            let free_now = back <= start;
            if !free_now && c.in_flight_bytes + bytes <= credits.bytes {
                break;
            }
            start = start.max(back);
            c.in_flight.pop_front();
            c.in_flight_bytes -= b;
        }
        start
    }

    /// When what has been serialised so far reaches the far end: propagation
    /// plus one jitter draw, never before an earlier release (FIFO).
    fn release(&mut self) -> u64 {
        let jitter = if self.cfg.jitter_ns > 0 { self.rng.below_inclusive(self.cfg.jitter_ns) } else { 0 };
        let mut release = self.busy_until_ns.saturating_add(self.cfg.delay_ns).saturating_add(jitter);
        // Fibre is FIFO: jitter may stretch gaps but must never reorder.
        if release < self.last_release_ns {
            release = self.last_release_ns;
        }
        self.last_release_ns = release;
        release
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cfg(delay_ns: u64, rate_bps: u64, queue: u64) -> LinkConfig {
        LinkConfig { delay_ns, rate_bps, queue_limit_bytes: queue, jitter_ns: 0, loss: 0.0, seed: 1, credits: None }
    }

    fn release(v: Verdict) -> u64 {
        match v {
            Verdict::Deliver { release_ns } => release_ns,
            Verdict::Drop(r) => panic!("unexpected drop {r:?}"),
        }
    }

    #[test]
    fn pure_delay() {
        // 1 Tbit/s: serialisation of 100 bytes is < 1 ns, so only delay shows.
        let mut m = LinkModel::new(cfg(4_500_000, 1_000_000_000_000, 1 << 30)).unwrap();
        assert_eq!(release(m.on_packet(1_000, 100)), 1_000 + 4_500_000);
        assert_eq!(release(m.on_packet(10_000_000, 100)), 10_000_000 + 4_500_000);
    }

    #[test]
    fn serialisation_back_to_back() {
        // 1500 B at 1 Gbit/s = 12 us on the wire.
        let mut m = LinkModel::new(cfg(1_000_000, 1_000_000_000, 1 << 30)).unwrap();
        let r1 = release(m.on_packet(0, 1500));
        let r2 = release(m.on_packet(0, 1500));
        let r3 = release(m.on_packet(0, 1500));
        assert_eq!(r1, 12_000 + 1_000_000);
        assert_eq!(r2 - r1, 12_000);
        assert_eq!(r3 - r2, 12_000);
        // After the wire goes idle a packet pays only its own serialisation.
        let r4 = release(m.on_packet(10_000_000, 1500));
        assert_eq!(r4, 10_000_000 + 12_000 + 1_000_000);
    }

    #[test]
    fn long_burst_throughput_equals_rate() {
        // 4 Gbit/s with odd frame sizes so per-packet rounding would drift.
        let rate = 4_000_000_000u64;
        let mut m = LinkModel::new(cfg(4_500_000, rate, u64::MAX)).unwrap();
        let mut total: u64 = 0;
        let mut last = 0;
        let mut now = 0u64;
        for i in 0..100_000u64 {
            let bytes = 1000 + (i % 7) as usize * 13;
            total += bytes as u64;
            last = release(m.on_packet(now, bytes));
            // Offered at twice the rate so the wire never idles.
            now += bytes as u64 * 8 * 1_000_000_000 / (2 * rate);
        }
        let wire_ns = (last - 4_500_000) as f64;
        let got = total as f64 * 8.0 * 1e9 / wire_ns;
        assert!((got / rate as f64 - 1.0).abs() < 1e-6, "got {got} bit/s");
    }

    #[test]
    fn queue_of_one_bdp_drops_the_tail() {
        // 1 Gbit/s x 10 ms = 1.25 MB BDP.
        let bdp = 1_250_000u64;
        let mut m = LinkModel::new(cfg(10_000_000, 1_000_000_000, bdp)).unwrap();
        let mut accepted = 0u64;
        let mut first_drop = None;
        for i in 0..2000 {
            match m.on_packet(0, 1500) {
                Verdict::Deliver { .. } => {
                    assert!(first_drop.is_none(), "accepted after tail drop in one burst");
                    accepted += 1;
                }
                Verdict::Drop(Reason::Queue) => {
                    first_drop.get_or_insert(i);
                }
                Verdict::Drop(r) => panic!("unexpected {r:?}"),
            }
        }
        assert_eq!(accepted, bdp / 1500);
        let c = m.counters();
        assert_eq!(c.delivered, accepted);
        assert_eq!(c.dropped_queue, 2000 - accepted);
        assert_eq!(c.bytes, accepted * 1500);
        // Drops did not consume wire time: the queue drains on schedule and
        // exactly one packet's worth of room appears after 12 us.
        assert_eq!(m.backlog_bytes(0), accepted * 1500);
        assert!(matches!(m.on_packet(12_000, 1500), Verdict::Deliver { .. }));
        assert!(matches!(m.on_packet(12_000, 1500), Verdict::Drop(Reason::Queue)));
    }

    #[test]
    fn jitter_is_bounded_and_never_reorders() {
        // Dense (10 us apart, so the FIFO clamp is busy) and sparse (2 ms
        // apart, so each packet sees the raw jitter draw).
        for gap in [10_000u64, 2_000_000] {
            let mut c = cfg(5_000_000, 10_000_000_000, 1 << 30);
            c.jitter_ns = 1_000_000;
            c.seed = 42;
            let mut m = LinkModel::new(c).unwrap();
            let ser = 1500 * 8 * 1_000_000_000 / 10_000_000_000;
            let mut prev = 0;
            let (mut lo, mut hi, mut sum) = (u64::MAX, 0u64, 0u64);
            let n = 20_000u64;
            for i in 0..n {
                let now = i * gap;
                let r = release(m.on_packet(now, 1500));
                assert!(r >= now + ser + 5_000_000);
                let extra = r - (now + ser + 5_000_000);
                assert!(extra <= 1_000_000, "jitter {extra} above bound");
                assert!(r >= prev, "reordered");
                prev = r;
                lo = lo.min(extra);
                hi = hi.max(extra);
                sum += extra;
            }
            if gap > 1_000_000 {
                // Unclamped draws: uniform over the whole range, mean in the middle.
                assert!(lo < 10_000 && hi > 990_000, "range {lo}..{hi}");
                let mean = sum as f64 / n as f64;
                assert!((mean - 500_000.0).abs() < 15_000.0, "mean {mean}");
            }
        }
    }

    #[test]
    fn jitter_is_deterministic_per_seed() {
        let mut c = cfg(1_000, 1_000_000_000, 1 << 30);
        c.jitter_ns = 50_000;
        c.loss = 0.1;
        let run = |c: LinkConfig| {
            let mut m = LinkModel::new(c).unwrap();
            (0..1000u64).map(|i| m.on_packet(i * 100_000, 100)).collect::<Vec<_>>()
        };
        assert_eq!(run(c.clone()), run(c.clone()));
        let mut c2 = c.clone();
        c2.seed = 2;
        assert_ne!(run(c), run(c2));
    }

    #[test]
    fn loss_rate_matches_config() {
        let mut c = cfg(1_000, 1_000_000_000, 1 << 30);
        c.loss = 0.02;
        c.seed = 7;
        let mut m = LinkModel::new(c).unwrap();
        let n = 200_000u64;
        for i in 0..n {
            let _ = m.on_packet(i * 100_000, 1000);
        }
        let cnt = m.counters();
        assert_eq!(cnt.delivered + cnt.dropped_loss, n);
        assert_eq!(cnt.dropped_queue, 0);
        let p = cnt.dropped_loss as f64 / n as f64;
        // sigma = sqrt(0.02*0.98/2e5) ~ 3e-4; allow ~5 sigma.
        assert!((p - 0.02).abs() < 0.0015, "loss rate {p}");
    }

    #[test]
    fn a_burst_is_its_frames_back_to_back() {
        // Three 1500 B frames at 1 Gbit/s: 36 us of wire, released together
        // when the last has crossed, exactly as three single packets.
        let mut burst = LinkModel::new(cfg(1_000_000, 1_000_000_000, 1 << 30)).unwrap();
        let mut single = burst.clone();
        let b = burst.on_burst(0, &[1500, 1500, 1500]);
        let last = (0..3).map(|_| release(single.on_packet(0, 1500))).last().unwrap();
        assert_eq!(b, Burst { release_ns: Some(last), dropped: vec![] });
        assert_eq!(last, 36_000 + 1_000_000);
        assert_eq!(burst.counters(), single.counters());
        assert_eq!(burst.counters().delivered, 3);
    }

    #[test]
    fn loss_hits_wire_frames_not_bursts() {
        // 44-frame bursts (a 64 KiB super-frame) at 3 %: the rate holds per
        // frame; drawn per burst, a quarter of the bursts would cross intact.
        let mut c = cfg(1_000, 100_000_000_000, 1 << 30);
        c.loss = 0.03;
        c.seed = 11;
        let mut m = LinkModel::new(c).unwrap();
        let (bursts, per) = (20_000u64, 44usize);
        let mut intact = 0u64;
        for i in 0..bursts {
            let b = m.on_burst(i * 100_000, &[1514; 44]);
            assert!(b.dropped.windows(2).all(|w| w[0] < w[1]) && b.dropped.iter().all(|&d| d < per));
            intact += b.dropped.is_empty() as u64;
            assert!(b.release_ns.is_some(), "a whole burst lost is ~1e-67 likely");
        }
        let cnt = m.counters();
        let n = bursts * per as u64;
        assert_eq!(cnt.delivered + cnt.dropped_loss, n);
        let p = cnt.dropped_loss as f64 / n as f64;
        // sigma = sqrt(0.03*0.97/8.8e5) ~ 1.8e-4; allow ~5 sigma.
        assert!((p - 0.03).abs() < 0.001, "loss rate {p}");
        let p_intact = intact as f64 / bursts as f64;
        assert!((p_intact - 0.97f64.powi(44)).abs() < 0.02, "intact bursts {p_intact}");
    }

    #[test]
    fn a_burst_lost_entirely_is_not_released() {
        let mut c = cfg(0, 1_000_000_000, 1 << 30);
        c.loss = 1.0;
        let mut m = LinkModel::new(c).unwrap();
        assert_eq!(m.on_burst(0, &[1500, 1500]), Burst { release_ns: None, dropped: vec![0, 1] });
        assert_eq!(m.backlog_bytes(0), 3000, "lost frames still used the wire");
        // A queue with room for two of three frames drops the tail one only.
        let mut q = LinkModel::new(cfg(0, 1_000_000_000, 3000)).unwrap();
        let b = q.on_burst(0, &[1500, 1500, 1500]);
        assert_eq!(b.dropped, vec![2]);
        assert_eq!(q.counters().dropped_queue, 1);
    }

    #[test]
    fn lost_packets_still_use_the_wire() {
        let mut c = cfg(0, 1_000_000_000, 1 << 30);
        c.loss = 1.0;
        let mut m = LinkModel::new(c).unwrap();
        assert_eq!(m.on_packet(0, 1500), Verdict::Drop(Reason::Loss));
        assert_eq!(m.backlog_bytes(0), 1500);
    }

    /// A credit link of `rtt_ns` (half each way) at `rate_bps` with `credits` bytes.
    fn credit_cfg(rtt_ns: u64, rate_bps: u64, credits: u64, queue: u64) -> LinkConfig {
        let mut c = cfg(rtt_ns / 2, rate_bps, queue);
        c.credits = Some(Credits { bytes: credits, return_delay_ns: rtt_ns / 2 });
        c
    }

    /// Offers `n` wire frames of 1514 bytes in `burst`s at 1.25 x the rate (more
    /// than any credit window lets through) and returns the delivered rate in
    /// bit/s, counted between the releases of the last 80 % of the frames so the
    /// first window, which crosses before any credit is due back, is left out.
    fn delivered_bps(m: &mut LinkModel, n: usize, burst: usize) -> f64 {
        const FRAME: usize = 1514;
        let rate = m.config().rate_bps as f64;
        let gap = (burst * FRAME) as f64 * 8.0 * 1e9 / (1.25 * rate);
        let mut releases = Vec::with_capacity(n / burst);
        for i in 0..n / burst {
            let b = m.on_burst((i as f64 * gap) as u64, &vec![FRAME; burst]);
            assert!(b.dropped.is_empty(), "a credit link dropped {:?}", b.dropped);
            releases.push(b.release_ns.unwrap());
        }
        let from = releases.len() / 5;
        let frames = (releases.len() - 1 - from) * burst;
        (frames * FRAME) as f64 * 8.0 * 1e9 / (releases[releases.len() - 1] - releases[from]) as f64
    }

    #[test]
    fn credit_link_delivers_min_of_rate_and_credits_per_rtt() {
        // The three RTTs at 10 Gb/s, with a window of half and of twice the BDP.
        let rate = 10_000_000_000u64;
        for rtt_ns in [145_000u64, 1_000_000, 9_000_000] {
            let bdp = rate / 8 * rtt_ns / 1_000_000_000;
            for credits in [bdp / 2, bdp * 2] {
                let mut m = LinkModel::new(credit_cfg(rtt_ns, rate, credits, u64::MAX)).unwrap();
                // Fifty round trips' worth of frames at the ceiling.
                let ceiling = (rate as f64).min(credits as f64 * 8.0 * 1e9 / rtt_ns as f64);
                let n = (ceiling * 50.0 * rtt_ns as f64 / 1e9 / 8.0 / 1514.0) as usize;
                let got = delivered_bps(&mut m, n, 1);
                assert!((got / ceiling - 1.0).abs() < 0.02, "rtt {rtt_ns} credits {credits}: {got} of {ceiling} bit/s");
                let c = m.counters();
                assert_eq!((c.dropped_queue, c.dropped_loss, c.credit_wait_overflow), (0, 0, 0));
                assert_eq!(c.delivered as usize, n);
            }
        }
    }

    #[test]
    fn credits_count_wire_frames_of_a_burst() {
        // 64 KiB super-frames (44 wire frames) on a window smaller than one of
        // them: each wire frame takes its own credits, so the ceiling holds.
        let (rate, rtt_ns, credits) = (10_000_000_000u64, 1_000_000u64, 40_000u64);
        let mut m = LinkModel::new(credit_cfg(rtt_ns, rate, credits, u64::MAX)).unwrap();
        let ceiling = credits as f64 * 8.0 * 1e9 / rtt_ns as f64;
        let got = delivered_bps(&mut m, 44 * 400, 44);
        assert!((got / ceiling - 1.0).abs() < 0.02, "{got} of {ceiling} bit/s");
    }

    #[test]
    fn no_frame_starts_before_its_credits_are_back() {
        // Window of exactly two frames, 1 ms each way: frames 3 and 4 start
        // when frames 1 and 2's credits return, one RTT after these crossed.
        let (frame, ser) = (1500usize, 12_000u64);
        let mut m = LinkModel::new(credit_cfg(2_000_000, 1_000_000_000, 3000, u64::MAX)).unwrap();
        let r: Vec<u64> = (0..4).map(|_| release(m.on_packet(0, frame))).collect();
        assert_eq!(r[..2], [ser + 1_000_000, 2 * ser + 1_000_000]);
        assert_eq!(r[2], (ser + 2_000_000) + ser + 1_000_000);
        assert_eq!(r[3], (2 * ser + 2_000_000) + ser + 1_000_000);
        // In front of the wire: frame 2 for the wire, frames 3 and 4 for credits.
        assert_eq!(m.credit_wait_bytes(0), 3 * frame as u64);
        assert_eq!(m.credit_wait_bytes(2_012_000), frame as u64);
    }

    #[test]
    fn a_full_credit_wait_is_counted_not_silent() {
        // Room for three frames in front of the wire; the fourth overflows.
        let mut m = LinkModel::new(credit_cfg(2_000_000, 1_000_000_000, 1500, 4500)).unwrap();
        for _ in 0..4 {
            assert!(matches!(m.on_packet(0, 1500), Verdict::Deliver { .. }));
        }
        assert_eq!(m.on_packet(0, 1500), Verdict::Drop(Reason::CreditWaitOverflow));
        let c = m.counters();
        assert_eq!((c.delivered, c.credit_wait_overflow, c.dropped_queue), (4, 1, 0));
    }

    #[test]
    fn a_credit_link_is_lossless() {
        let mut c = credit_cfg(1_000_000, 1_000_000_000, 1_000_000, 1 << 30);
        c.loss = 0.01;
        assert_eq!(LinkModel::new(c.clone()).unwrap_err(), ConfigError::LossyCredits);
        c.loss = 0.0;
        c.credits = Some(Credits { bytes: 0, return_delay_ns: 0 });
        assert_eq!(LinkModel::new(c).unwrap_err(), ConfigError::ZeroCredits);
    }

    /// Frames of `bytes` every `gap_ns` from `from_ns` until `to_ns`: (arrival, release) of each.
    fn stream(m: &mut LinkModel, from_ns: u64, to_ns: u64, gap_ns: u64, bytes: usize) -> Vec<(u64, u64)> {
        (from_ns..to_ns).step_by(gap_ns as usize).map(|t| (t, release(m.on_packet(t, bytes)))).collect()
    }

    fn in_order(releases: &[(u64, u64)]) -> bool {
        releases.windows(2).all(|w| w[0].1 <= w[1].1)
    }

    #[test]
    fn a_longer_delay_holds_the_frames_after_it_longer() {
        // RTT 9 -> 11 ms: 4.5 -> 5.5 ms one way, at 10 Gb/s (1500 B: 1.2 us on the wire).
        let mut m = LinkModel::new(cfg(4_500_000, 10_000_000_000, 1 << 30)).unwrap();
        let before = stream(&mut m, 0, 10_000_000, 100_000, 1500);
        m.apply(&Change { delay_ns: Some(5_500_000), ..Change::default() }, 10_000_000).unwrap();
        let after = stream(&mut m, 10_000_000, 20_000_000, 100_000, 1500);
        assert!(before.iter().all(|&(t, r)| r == t + 1_200 + 4_500_000));
        assert!(after.iter().all(|&(t, r)| r == t + 1_200 + 5_500_000));
        assert_eq!(m.counters().delivered as usize, before.len() + after.len());
    }

    #[test]
    fn a_shorter_delay_never_reorders() {
        // 5.5 -> 4.5 ms under a frame every 10 us: the frames of the first ms after
        // the change would overtake those before it; they leave with the last of
        // them instead, and from then on each pays the new delay exactly.
        let mut m = LinkModel::new(cfg(5_500_000, 10_000_000_000, 1 << 30)).unwrap();
        let mut all = stream(&mut m, 0, 10_000_000, 10_000, 1500);
        let last_old = all.last().unwrap().1;
        m.apply(&Change { delay_ns: Some(4_500_000), ..Change::default() }, 10_000_000).unwrap();
        let after = stream(&mut m, 10_000_000, 20_000_000, 10_000, 1500);
        all.extend(&after);
        assert!(in_order(&all));
        for &(t, r) in &after {
            assert_eq!(r, (t + 1_200 + 4_500_000).max(last_old), "arrived at {t}");
        }
        assert!(after.iter().any(|&(_, r)| r == last_old) && after.iter().any(|&(t, r)| r == t + 1_200 + 4_500_000));
        assert_eq!(m.counters().delivered as usize, all.len());
    }

    #[test]
    fn a_new_rate_serialises_what_is_not_yet_serialised() {
        // Ten 1500 B frames queued at 1 Gb/s (12 us each), the rate halved at 30 us:
        // two have crossed, the third has 6 of its 12 us left (12 at the new rate),
        // the rest take 24 us each, and a frame after them follows at the new rate.
        let mut m = LinkModel::new(cfg(1_000_000, 1_000_000_000, 1 << 30)).unwrap();
        let queued: Vec<u64> = (0..10).map(|_| release(m.on_packet(0, 1500))).collect();
        let moved = m.apply(&Change { rate_bps: Some(500_000_000), ..Change::default() }, 30_000).unwrap();
        assert_eq!(queued[..2], [1_012_000, 1_024_000]);
        assert_eq!(moved, (3..=10).map(|k| (k, 1_042_000 + 24_000 * (k - 3))).collect::<Vec<_>>());
        assert_eq!(release(m.on_packet(31_000, 1500)), 1_042_000 + 24_000 * 8);
        // Doubled instead, they leave sooner: the third's 6 us left take 3, the rest 6 each.
        let mut m = LinkModel::new(cfg(1_000_000, 1_000_000_000, 1 << 30)).unwrap();
        for _ in 0..10 {
            m.on_packet(0, 1500);
        }
        let moved = m.apply(&Change { rate_bps: Some(2_000_000_000), ..Change::default() }, 30_000).unwrap();
        assert_eq!(moved, (3..=10).map(|k| (k, 1_033_000 + 6_000 * (k - 3))).collect::<Vec<_>>());
        // A long stream after the change is carried at the new rate exactly.
        let mut m = LinkModel::new(cfg(1_000_000, 4_000_000_000, u64::MAX)).unwrap();
        m.apply(&Change { rate_bps: Some(2_000_000_000), ..Change::default() }, 0).unwrap();
        let r: Vec<u64> = (0..10_000).map(|_| release(m.on_packet(0, 1013))).collect();
        let got = 9_999.0 * 1013.0 * 8.0 * 1e9 / (r[9_999] - r[0]) as f64;
        assert!((got / 2e9 - 1.0).abs() < 1e-6, "{got} bit/s");
    }

    #[test]
    fn a_re_timed_frame_keeps_its_jitter_and_its_place() {
        // Fifty frames queued with jitter, the rate quartered before any has crossed:
        // each moves by its serialisation's stretch at least (more where the FIFO
        // clamp holds it behind an earlier one), never before the fibre's time.
        let mut c = cfg(1_000_000, 1_000_000_000, 1 << 30);
        (c.jitter_ns, c.seed) = (200_000, 5);
        let mut m = LinkModel::new(c).unwrap();
        let before: Vec<u64> = (0..50).map(|_| release(m.on_packet(0, 1500))).collect();
        let moved = m.apply(&Change { rate_bps: Some(250_000_000), ..Change::default() }, 0).unwrap();
        assert_eq!(moved.iter().map(|&(u, _)| u).collect::<Vec<_>>(), (1..=50).collect::<Vec<u64>>());
        for (k, &(_, r)) in moved.iter().enumerate() {
            let (end_old, end_new) = (12_000 * (k as u64 + 1), 48_000 * (k as u64 + 1));
            assert!(r >= before[k] + (end_new - end_old) && r >= end_new + 1_000_000, "frame {k}");
        }
        assert!(moved.windows(2).all(|w| w[0].1 <= w[1].1));
        // A credit link's rate meets the frames after it: nothing queued moves.
        let mut c = LinkModel::new(credit_cfg(1_000_000, 1_000_000_000, 100_000, 1 << 30)).unwrap();
        for _ in 0..10 {
            c.on_packet(0, 1500);
        }
        assert_eq!(c.apply(&Change { rate_bps: Some(500_000_000), ..Change::default() }, 0).unwrap(), vec![]);
    }

    #[test]
    fn a_new_loss_meets_the_frames_after_it() {
        // 0 -> 0.1 %: nothing lost before; after, the rate within 5 standard errors.
        let mut m = LinkModel::new(cfg(1_000, 1_000_000_000, 1 << 30)).unwrap();
        let n = 400_000u64;
        for i in 0..n {
            assert!(matches!(m.on_packet(i * 20_000, 1500), Verdict::Deliver { .. }));
        }
        m.apply(&Change { loss: Some(0.001), ..Change::default() }, n * 20_000).unwrap();
        for i in n..2 * n {
            let _ = m.on_packet(i * 20_000, 1500);
        }
        let c = m.counters();
        assert_eq!(c.delivered + c.dropped_loss, 2 * n);
        let p = c.dropped_loss as f64 / n as f64;
        let se = (0.001f64 * 0.999 / n as f64).sqrt();
        assert!((p - 0.001).abs() < 5.0 * se, "loss {p}");
    }

    #[test]
    fn changes_under_load_lose_and_reorder_nothing() {
        // Every kind of change, one after another, under a stream near the rate (above
        // it once halved, so frames queue and a rate change re-times them), with
        // jitter: every frame is delivered and none overtakes another.
        let mut c = cfg(4_500_000, 10_000_000_000, 1 << 30);
        c.jitter_ns = 50_000;
        let mut m = LinkModel::new(c).unwrap();
        let changes = [
            Change { delay_ns: Some(5_500_000), ..Change::default() },
            Change { rate_bps: Some(5_000_000_000), ..Change::default() },
            Change { delay_ns: Some(1_000_000), jitter_ns: Some(0), ..Change::default() },
            Change { queue_limit_bytes: Some(1 << 29), rate_bps: Some(20_000_000_000), ..Change::default() },
            Change { delay_ns: Some(9_000_000), jitter_ns: Some(200_000), ..Change::default() },
        ];
        // Release per frame (each its own packet, numbered from 1).
        let mut releases = vec![0u64];
        for (i, change) in changes.iter().enumerate() {
            let t = i as u64 * 10_000_000;
            releases.extend(stream(&mut m, t, t + 10_000_000, 2_000, 1500).iter().map(|&(_, r)| r));
            for (unit, r) in m.apply(change, t + 10_000_000).unwrap() {
                releases[unit as usize] = r;
            }
        }
        assert!(releases.windows(2).all(|w| w[0] <= w[1]));
        let cnt = m.counters();
        assert_eq!((cnt.delivered as usize, cnt.dropped_queue, cnt.dropped_loss), (releases.len() - 1, 0, 0));
    }

    #[test]
    fn new_credits_set_the_window_after_them() {
        // Twice the BDP, then half of it: the delivered rate follows min(rate, credits / RTT).
        let (rate, rtt_ns) = (10_000_000_000u64, 1_000_000u64);
        let bdp = rate / 8 * rtt_ns / 1_000_000_000;
        let mut m = LinkModel::new(credit_cfg(rtt_ns, rate, 2 * bdp, u64::MAX)).unwrap();
        let n = (rate as f64 * 50.0 * rtt_ns as f64 / 1e9 / 8.0 / 1514.0) as usize;
        let full = delivered_bps(&mut m, n, 1);
        assert!((full / rate as f64 - 1.0).abs() < 0.02, "{full}");
        m.apply(&Change { credits_bytes: Some(bdp / 2), ..Change::default() }, 0).unwrap();
        let ceiling = (bdp / 2) as f64 * 8.0 * 1e9 / rtt_ns as f64;
        let got = delivered_bps(&mut m, n / 2, 1);
        assert!((got / ceiling - 1.0).abs() < 0.02, "{got} of {ceiling}");
        assert_eq!(m.counters().credit_wait_overflow, 0);
    }

    #[test]
    fn a_link_down_loses_every_frame_until_it_is_up() {
        let mut m = LinkModel::new(cfg(1_000_000, 1_000_000_000, 1 << 30)).unwrap();
        m.apply(&Change { down: Some(true), ..Change::default() }, 0).unwrap();
        assert_eq!(m.on_burst(0, &[1500, 1500]), Burst { release_ns: None, dropped: vec![0, 1] });
        assert_eq!(m.backlog_bytes(0), 0, "a frame into a cut fibre takes no wire time");
        m.apply(&Change { down: Some(false), ..Change::default() }, 0).unwrap();
        assert_eq!(release(m.on_packet(0, 1500)), 12_000 + 1_000_000);
        let c = m.counters();
        assert_eq!((c.dropped_down, c.delivered, c.dropped_loss), (2, 1, 0));
    }

    #[test]
    fn a_bad_change_changes_nothing() {
        let mut m = LinkModel::new(cfg(1_000, 1_000_000_000, 1 << 30)).unwrap();
        let before = m.config().clone();
        let bad = [
            (Change { rate_bps: Some(0), delay_ns: Some(5), ..Change::default() }, ConfigError::ZeroRate),
            (Change { loss: Some(1.5), ..Change::default() }, ConfigError::BadLoss),
            (Change { credits_bytes: Some(100_000), ..Change::default() }, ConfigError::NoCredits),
        ];
        for (change, err) in bad {
            assert_eq!(m.apply(&change, 0).unwrap_err(), err);
            assert_eq!(m.config(), &before);
        }
        let mut c = LinkModel::new(credit_cfg(1_000_000, 1_000_000_000, 100_000, 1 << 30)).unwrap();
        assert_eq!(
            c.apply(&Change { loss: Some(0.001), ..Change::default() }, 0).unwrap_err(),
            ConfigError::LossyCredits
        );
        c.apply(&Change { credit_return_delay_ns: Some(700_000), ..Change::default() }, 0).unwrap();
        assert_eq!(c.config().credits.unwrap().return_delay_ns, 700_000);
    }

    #[test]
    fn invalid_config_rejected() {
        assert_eq!(LinkModel::new(cfg(0, 0, 1000)).unwrap_err(), ConfigError::ZeroRate);
        assert_eq!(LinkModel::new(cfg(0, 1000, 0)).unwrap_err(), ConfigError::ZeroQueue);
        for bad in [-0.1, 1.5, f64::NAN, f64::INFINITY] {
            let mut c = cfg(0, 1000, 1000);
            c.loss = bad;
            assert_eq!(LinkModel::new(c).unwrap_err(), ConfigError::BadLoss);
        }
        let mut c = cfg(0, 1000, 1000);
        c.loss = 1.0;
        assert!(LinkModel::new(c).is_ok());
    }
}
