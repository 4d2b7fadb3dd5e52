//! Model of one direction of a long-haul link, as a pure state machine.
//!
//! It does no I/O and reads no clock: the caller passes the arrival time of
//! each packet and gets back when (or whether) it leaves the far end. That
//! keeps the timing logic testable with simulated time and lets the binary
//! stay a thin shell around sockets.
//!
//! Pipeline per packet: tail-drop queue -> serialisation at `rate` ->
//! random loss -> propagation `delay` + uniform `jitter` -> FIFO clamp.

pub mod gso;

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
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ConfigError {
    ZeroRate,
    ZeroQueue,
    BadLoss,
}

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ConfigError::ZeroRate => write!(f, "rate must be > 0 bit/s"),
            ConfigError::ZeroQueue => write!(f, "queue limit must be > 0 bytes"),
            ConfigError::BadLoss => write!(f, "loss must be a probability in [0, 1]"),
        }
    }
}

impl std::error::Error for ConfigError {}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Reason {
    /// Tail drop: the queue in front of the wire was full.
    Queue,
    /// Random loss on the wire.
    Loss,
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
}

impl LinkModel {
    pub fn new(cfg: LinkConfig) -> Result<Self, ConfigError> {
        if cfg.rate_bps == 0 {
            return Err(ConfigError::ZeroRate);
        }
        if cfg.queue_limit_bytes == 0 {
            return Err(ConfigError::ZeroQueue);
        }
        if !(cfg.loss >= 0.0 && cfg.loss <= 1.0) {
            return Err(ConfigError::BadLoss);
        }
        let rng = SplitMix64::new(cfg.seed);
        Ok(LinkModel { cfg, rng, busy_until_ns: 0, carry: 0, last_release_ns: 0, counters: Counters::default() })
    }

    pub fn config(&self) -> &LinkConfig {
        &self.cfg
    }

    pub fn counters(&self) -> Counters {
        self.counters
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
        match self.wire(now_ns, bytes) {
            Err(r) => Verdict::Drop(r),
            Ok(()) => Verdict::Deliver { release_ns: self.release() },
        }
    }

    /// Back-to-back wire frames of `sizes` bytes arrive together at `now_ns`
    /// (a GSO super-frame): each meets the queue, the wire and the loss draw
    /// on its own; the survivors travel on as one unit, released together when
    /// the last of them has crossed.
    pub fn on_burst(&mut self, now_ns: u64, sizes: &[usize]) -> Burst {
        let dropped: Vec<usize> =
            sizes.iter().enumerate().filter(|&(_, &b)| self.wire(now_ns, b).is_err()).map(|(i, _)| i).collect();
        let release_ns = (dropped.len() < sizes.len()).then(|| self.release());
        Burst { release_ns, dropped }
    }

    /// Queue, serialisation and loss of one frame; counts what happened.
    fn wire(&mut self, now_ns: u64, bytes: usize) -> Result<(), Reason> {
        let bytes64 = bytes as u64;
        if self.backlog_bytes(now_ns).saturating_add(bytes64) > self.cfg.queue_limit_bytes {
            // A dropped packet never reaches the wire, so busy_until stays.
            self.counters.dropped_queue += 1;
            return Err(Reason::Queue);
        }

        let start = if self.busy_until_ns > now_ns {
            self.busy_until_ns
        } else {
            // The wire went idle: an old fractional remainder means nothing now.
            self.carry = 0;
            now_ns
        };
        let num = bytes64 as u128 * 8 * NS_PER_S + self.carry;
        let rate = self.cfg.rate_bps as u128;
        let ser_ns = (num / rate) as u64;
        self.carry = num % rate;
        self.busy_until_ns = start.saturating_add(ser_ns);

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
        LinkConfig { delay_ns, rate_bps, queue_limit_bytes: queue, jitter_ns: 0, loss: 0.0, seed: 1 }
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
