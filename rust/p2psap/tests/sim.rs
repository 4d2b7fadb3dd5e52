//! Every stack of Table I over a simulated link, in simulated time: loss,
//! duplication and reordering at 0, 1 and 5 %; plus crafted traces for the
//! retransmission timer and NewReno's window inside a connection.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use geofed_linkemu::SplitMix64;
use geofed_p2psap::segment::{Header, Kind, Segment};
use geofed_p2psap::{Config, Connection, Context, Network, Scheme, SendError};

/// One direction of a simulated link: a bottleneck rate with a tail-drop queue,
/// a one-way delay, and independent loss, duplication and reordering (an extra
/// delay of up to 2 ms, so later datagrams overtake).
struct Wire {
    rng: SplitMix64,
    p: f64,
    delay: Duration,
    ns_per_byte: u64,
    queue_limit: Duration,
    busy_until: Instant,
    in_transit: BTreeMap<(Instant, u64), Vec<u8>>,
    n: u64,
}

impl Wire {
    fn new(p: f64, seed: u64, start: Instant) -> Wire {
        Wire {
            rng: SplitMix64::new(seed),
            p,
            delay: Duration::from_micros(4500),
            ns_per_byte: 8, // 1 Gb/s
            queue_limit: Duration::from_millis(20),
            busy_until: start,
            in_transit: BTreeMap::new(),
            n: 0,
        }
    }

    fn push(&mut self, now: Instant, d: Vec<u8>) {
        let start = self.busy_until.max(now);
        if start - now > self.queue_limit {
            return; // tail drop
        }
        self.busy_until = start + Duration::from_nanos(self.ns_per_byte * d.len() as u64);
        if self.rng.next_f64() < self.p {
            return; // loss
        }
        let copies = if self.rng.next_f64() < self.p { 2 } else { 1 };
        for _ in 0..copies {
            let mut at = self.busy_until + self.delay;
            if self.rng.next_f64() < self.p {
                at += Duration::from_micros(self.rng.below_inclusive(2000));
            }
            self.n += 1;
            self.in_transit.insert((at, self.n), d.clone());
        }
    }

    fn next(&self) -> Option<Instant> {
        self.in_transit.keys().next().map(|k| k.0)
    }

    fn pop_due(&mut self, now: Instant) -> Option<Vec<u8>> {
        let (&k, _) = self.in_transit.iter().next()?;
        (k.0 <= now).then(|| self.in_transit.remove(&k).unwrap())
    }
}

struct Sim {
    now: Instant,
    a: Connection,
    b: Connection,
    ab: Wire,
    ba: Wire,
}

impl Sim {
    fn new(ctx: Context, p: f64, seed: u64) -> Sim {
        Sim::with(ctx, p, seed, |_| {})
    }

    /// Both ends configured by `tune` on top of the defaults.
    fn with(ctx: Context, p: f64, seed: u64, tune: impl Fn(&mut Config)) -> Sim {
        let now = Instant::now();
        let stack = ctx.compose();
        let mut ca = Config::new(stack.clone(), 0xfeed);
        tune(&mut ca);
        ca.local_port = 10;
        ca.remote_port = 20;
        let mut cb = Config::new(stack, 0xfeed);
        tune(&mut cb);
        cb.local_port = 20;
        cb.remote_port = 10;
        Sim {
            now,
            a: Connection::new(ca),
            b: Connection::new(cb),
            ab: Wire::new(p, seed, now),
            ba: Wire::new(p, seed ^ 0x55, now),
        }
    }

    fn flush(&mut self) {
        while let Some(d) = self.a.poll_transmit(self.now) {
            self.ab.push(self.now, d);
        }
        while let Some(d) = self.b.poll_transmit(self.now) {
            self.ba.push(self.now, d);
        }
    }

    /// Advance to the next event no later than `limit`; false when nothing is left before it.
    fn step(&mut self, limit: Instant) -> bool {
        self.flush();
        let next =
            [self.ab.next(), self.ba.next(), self.a.poll_timeout(), self.b.poll_timeout()].into_iter().flatten().min();
        let Some(t) = next.filter(|&t| t <= limit) else {
            self.now = limit.max(self.now);
            return false;
        };
        self.now = t.max(self.now);
        while let Some(d) = self.ab.pop_due(self.now) {
            self.b.handle_segment(self.now, &d);
        }
        while let Some(d) = self.ba.pop_due(self.now) {
            self.a.handle_segment(self.now, &d);
        }
        self.a.handle_timeout(self.now);
        self.b.handle_timeout(self.now);
        true
    }
}

fn payload(tag: u32, i: u64) -> Vec<u8> {
    // Sizes from empty to several segments, so Resize cuts and joins.
    let len = [0usize, 1, 100, 8074, 8075, 20_000, 3000][(i % 7) as usize];
    (0..len).map(|k| (k as u64 * 31 + i * 7 + tag as u64) as u8).collect()
}

fn contexts(scheme: Scheme) -> Vec<Context> {
    Context::all().into_iter().filter(|c| c.scheme == scheme).collect()
}

/// The fabric stacks rely on the fabric's own reliability (no software
/// acknowledgements), so their link is the fabric's contract: no loss, in order.
fn levels(ctx: &Context) -> Vec<f64> {
    match ctx.network {
        Network::ReliableFabric => vec![0.0],
        Network::Ethernet => vec![0.0, 0.01, 0.05],
    }
}

/// What the I/O layer sets on an Ethernet path of MTU 1500: segments that are
/// never IP-fragmented, and an ACK for every second segment.
fn mtu_segments_delayed_acks(c: &mut Config) {
    c.max_segment = 1472;
    c.ack_every = 2;
}

#[test]
fn synchronous_stacks_deliver_everything_in_order_exactly_once() {
    deliver_everything_in_order_exactly_once(|_| {});
}

#[test]
fn synchronous_stacks_with_mtu_segments_and_delayed_acks_deliver_everything() {
    deliver_everything_in_order_exactly_once(mtu_segments_delayed_acks);
}

fn deliver_everything_in_order_exactly_once(tune: fn(&mut Config)) {
    const N: u64 = 300;
    for ctx in contexts(Scheme::Synchronous) {
        for p in levels(&ctx) {
            let mut sim = Sim::with(ctx, p, 42 + (p * 1000.0) as u64, tune);
            let mut sent = 0u64;
            let mut got: [Vec<(u64, Vec<u8>)>; 2] = [vec![], vec![]];
            let deadline = sim.now + Duration::from_secs(120);
            while (got[0].len() + got[1].len()) < N as usize {
                while sent < N {
                    match sim.a.send((sent % 2) as u32, &payload((sent % 2) as u32, sent)) {
                        Ok(_) => sent += 1,
                        Err(SendError::Full) => break,
                    }
                }
                assert!(sim.step(deadline), "{ctx:?} at {p}: stalled after {} messages", got[0].len() + got[1].len());
                for tag in 0..2 {
                    while let Some(m) = sim.b.recv(tag) {
                        got[tag as usize].push(m);
                    }
                }
            }
            // Let every duplicate and retransmission land: nothing more may come out.
            let end = sim.now + Duration::from_secs(5);
            while sim.step(end) {}
            for tag in 0..2u32 {
                assert_eq!(sim.b.recv(tag), None, "{ctx:?} at {p}: extra message");
                let expect: Vec<(u64, Vec<u8>)> = (0..N)
                    .filter(|i| i % 2 == tag as u64)
                    .enumerate()
                    .map(|(k, i)| (k as u64 + 1, payload(tag, i)))
                    .collect();
                assert!(got[tag as usize] == expect, "{ctx:?} at {p}: tag {tag} out of order, lost or duplicated");
            }
            if p > 0.0 {
                assert!(sim.a.stats().retransmissions > 0, "{ctx:?} at {p}: loss never repaired?");
            }
            assert_eq!(sim.a.outstanding(), 0);
        }
    }
}

#[test]
fn asynchronous_stacks_never_deliver_older_after_newer() {
    never_deliver_older_after_newer(|_| {});
}

#[test]
fn asynchronous_stacks_with_mtu_segments_never_deliver_older_after_newer() {
    never_deliver_older_after_newer(mtu_segments_delayed_acks);
}

fn never_deliver_older_after_newer(tune: fn(&mut Config)) {
    const N: u64 = 2000;
    for ctx in contexts(Scheme::Asynchronous) {
        for p in levels(&ctx) {
            let mut sim = Sim::with(ctx, p, 7 + (p * 1000.0) as u64, tune);
            let mut last = [0u64; 2];
            let mut count = 0;
            let mut next_send = sim.now;
            let mut i = 0;
            while i < N || sim.step(sim.now + Duration::from_secs(2)) {
                if i < N && sim.now >= next_send {
                    let tag = (i % 2) as u32;
                    sim.a.send(tag, &payload(tag, i / 2)).unwrap();
                    i += 1;
                    next_send = sim.now + Duration::from_micros(200);
                }
                if i < N {
                    sim.step(next_send);
                }
                for tag in 0..2u32 {
                    if let Some((msg, data)) = sim.b.recv(tag) {
                        assert!(msg > last[tag as usize], "{ctx:?} at {p}: message {msg} after {}", last[tag as usize]);
                        assert_eq!(data, payload(tag, msg - 1), "{ctx:?} at {p}: message {msg} corrupted");
                        last[tag as usize] = msg;
                        count += 1;
                    }
                }
            }
            // Later values replace earlier ones, but a fair share gets through, and
            // on a clean link the newest value always does.
            assert!(count > (N / 20) as usize, "{ctx:?} at {p}: only {count} values");
            if p == 0.0 {
                assert_eq!(last, [N / 2, N / 2], "{ctx:?}: newest value lost on a clean link");
            }
            assert_eq!(sim.a.stats().retransmissions, 0);
        }
    }
}

#[test]
fn delayed_acks_cover_two_segments_and_gaps_are_acknowledged_at_once() {
    let mut sim = Sim::with(inter_eth(Scheme::Synchronous), 0.0, 1, mtu_segments_delayed_acks);
    let t0 = sim.now;
    sim.a.send(0, &vec![7u8; 12 * 1418]).unwrap(); // twelve full segments
    let segs: Vec<_> = std::iter::from_fn(|| sim.a.poll_transmit(t0)).collect();
    assert_eq!(segs.len(), 9, "initial window: 14600 bytes, 9 segments of 1472 (RFC 6928)");
    let ack_of = |d: &[u8]| Segment::decode(d).unwrap().header.ack;
    sim.b.handle_segment(t0, &segs[0]);
    assert_eq!(sim.b.poll_transmit(t0), None, "the first in-order segment waits for a second");
    assert_eq!(sim.b.poll_timeout(), Some(t0 + Duration::from_millis(1)));
    sim.b.handle_segment(t0, &segs[1]);
    assert_eq!(sim.b.poll_transmit(t0).map(|a| ack_of(&a)), Some(3), "one ACK for two segments");
    assert_eq!(sim.b.poll_timeout(), None);
    sim.b.handle_segment(t0, &segs[2]);
    let t1 = t0 + Duration::from_millis(1);
    sim.b.handle_timeout(t1);
    assert_eq!(sim.b.poll_transmit(t1).map(|a| ack_of(&a)), Some(4), "a lone segment is acknowledged after the delay");
    // Segment 2 before 1: the gap, its repair and a duplicate are each acknowledged at once.
    let mut c = Sim::with(inter_eth(Scheme::Synchronous), 0.0, 1, mtu_segments_delayed_acks);
    c.a.send(0, &vec![7u8; 5 * 1418]).unwrap();
    let segs: Vec<_> = std::iter::from_fn(|| c.a.poll_transmit(t0)).collect();
    c.b.handle_segment(t0, &segs[1]);
    assert_eq!(c.b.poll_transmit(t0).map(|a| ack_of(&a)), Some(1), "out of order: a duplicate ACK at once");
    c.b.handle_segment(t0, &segs[0]);
    assert_eq!(c.b.poll_transmit(t0).map(|a| ack_of(&a)), Some(3), "the hole filled: acknowledged at once");
    c.b.handle_segment(t0, &segs[1]);
    assert_eq!(c.b.poll_transmit(t0).map(|a| ack_of(&a)), Some(3), "a duplicate: acknowledged at once");
}

fn inter_eth(scheme: Scheme) -> Context {
    Context { scheme, location: geofed_p2psap::Location::InterSite, network: Network::Ethernet }
}

#[test]
fn retransmission_timer_backs_off_and_karn_skips_retransmitted_samples() {
    let mut sim = Sim::new(inter_eth(Scheme::Synchronous), 0.0, 1);
    let t0 = sim.now;
    sim.a.send(0, b"x").unwrap();
    let first = sim.a.poll_transmit(t0).unwrap(); // lost on purpose
    assert_eq!(sim.a.poll_timeout(), Some(t0 + Duration::from_millis(200)));
    let t1 = t0 + Duration::from_millis(200);
    sim.a.handle_timeout(t1);
    let again = sim.a.poll_transmit(t1).unwrap();
    assert_eq!(again, first, "the timeout resends the same segment");
    assert_eq!(sim.a.poll_timeout(), Some(t1 + Duration::from_millis(400)), "RTO doubled");
    // Its ACK comes 10 ms later: no RTT sample (Karn), timer stopped.
    sim.b.handle_segment(t1 + Duration::from_millis(5), &again);
    let ack = sim.b.poll_transmit(t1 + Duration::from_millis(5)).unwrap();
    sim.a.handle_segment(t1 + Duration::from_millis(10), &ack);
    assert_eq!(sim.a.rtt().srtt(), None);
    assert_eq!(sim.a.poll_timeout(), None);
    // A segment sent once gives a sample: SRTT = R, RTO = R + 4 R/2.
    let t2 = t1 + Duration::from_millis(20);
    sim.a.send(0, b"y").unwrap();
    let d = sim.a.poll_transmit(t2).unwrap();
    sim.b.handle_segment(t2 + Duration::from_millis(4), &d);
    let ack = sim.b.poll_transmit(t2 + Duration::from_millis(4)).unwrap();
    sim.a.handle_segment(t2 + Duration::from_millis(9), &ack);
    assert_eq!(sim.a.rtt().srtt(), Some(Duration::from_millis(9)));
    // RFC 6298 2.2: RTO = max(min RTO, SRTT + max(G, 4 RTTVAR)) = max(min RTO, 9 + 4 * 4.5 ms).
    let floor = Config::new(inter_eth(Scheme::Synchronous).compose(), 0).min_rto;
    assert_eq!(floor, Duration::from_millis(200));
    assert_eq!(sim.a.rtt().rto(), floor.max(Duration::from_millis(27)));
}

#[test]
fn rto_above_the_floor_follows_rfc6298() {
    // With a floor below the computed value the RFC's formula shows: 9 + 4 * 4.5 = 27 ms.
    let mut sim = Sim::with(inter_eth(Scheme::Synchronous), 0.0, 1, |c| c.min_rto = Duration::from_millis(2));
    let t = sim.now;
    sim.a.send(0, b"y").unwrap();
    let d = sim.a.poll_transmit(t).unwrap();
    sim.b.handle_segment(t + Duration::from_millis(4), &d);
    let ack = sim.b.poll_transmit(t + Duration::from_millis(4)).unwrap();
    sim.a.handle_segment(t + Duration::from_millis(9), &ack);
    assert_eq!(sim.a.rtt().rto(), Duration::from_millis(27));
    assert_eq!(sim.a.poll_timeout(), None, "everything acknowledged: timer stopped (RFC 6298 5.2)");
}

#[test]
fn three_duplicate_acks_trigger_one_fast_retransmit_and_halve_the_window() {
    let mut sim = Sim::new(inter_eth(Scheme::Synchronous), 0.0, 1);
    let t = sim.now;
    let smss = 8128 - 54; // payload of one full segment
    let seg = 8128u64; // the segment on the wire, as the window counts it
    for i in 0..2 {
        sim.a.send(0, &vec![i; smss]).unwrap();
    }
    assert_eq!(sim.a.congestion_window(), Some(2 * seg)); // RFC 6928: two segments when 14600 bytes hold fewer
                                                          // Grow the window in slow start with clean round trips.
    let mut now = t;
    for round in 0..3 {
        for _ in 0..(4 << round) {
            sim.a.send(0, &vec![0; smss]).unwrap();
        }
        let mut out = vec![];
        while let Some(d) = sim.a.poll_transmit(now) {
            out.push(d);
        }
        now += Duration::from_millis(5);
        for d in &out {
            sim.b.handle_segment(now, d);
        }
        now += Duration::from_millis(5);
        while let Some(a) = sim.b.poll_transmit(now) {
            sim.a.handle_segment(now, &a);
        }
    }
    let cwnd = sim.a.congestion_window().unwrap();
    while sim.b.recv(0).is_some() {}
    // One full window: the first segment is lost, the rest arrive and each draws a duplicate ACK.
    for _ in 0..(cwnd / seg) {
        sim.a.send(0, &vec![1; smss]).unwrap();
    }
    let mut out = vec![];
    while let Some(d) = sim.a.poll_transmit(now) {
        out.push(d);
    }
    let flight: u64 = out.iter().map(|d| d.len() as u64).sum();
    now += Duration::from_millis(5);
    for d in &out[1..] {
        sim.b.handle_segment(now, d);
    }
    now += Duration::from_millis(5);
    let acks: Vec<_> = std::iter::from_fn(|| sim.b.poll_transmit(now)).collect();
    for a in &acks[..3] {
        sim.a.handle_segment(now, a);
    }
    assert_eq!(sim.a.stats().fast_retransmits, 1);
    let ssthresh = (flight / 2).max(2 * seg);
    assert_eq!(sim.a.congestion_window(), Some(ssthresh + 3 * seg));
    assert_eq!(sim.a.poll_transmit(now).as_ref(), Some(&out[0]), "the lost segment goes first");
    for a in &acks[3..] {
        sim.a.handle_segment(now, a); // further duplicates inflate, no second retransmit
    }
    assert_eq!(sim.a.stats().fast_retransmits, 1);
    // The retransmission fills the hole: a full ACK ends recovery at about ssthresh.
    sim.b.handle_segment(now, &out[0]);
    let full = std::iter::from_fn(|| sim.b.poll_transmit(now)).last().unwrap();
    sim.a.handle_segment(now + Duration::from_millis(5), &full);
    assert_eq!(sim.a.congestion_window(), Some(ssthresh.min(seg * 2)));
}

#[test]
fn segments_of_unknown_sessions_are_dropped_and_counted() {
    let mut sim = Sim::new(inter_eth(Scheme::Asynchronous), 0.0, 1);
    let h =
        Header { session: 0xbad, src_port: 10, dst_port: 20, tag: 0, msg: 1, nfrags: 1, seq: 1, ..Header::default() };
    let forged = Segment { kind: Kind::Data, header: h, payload: vec![1, 2, 3] }.encode();
    sim.b.handle_segment(sim.now, &forged);
    sim.b.handle_segment(sim.now, b"garbage");
    assert_eq!(sim.b.recv(0), None);
    assert_eq!(sim.b.stats().unknown_session, 1);
    assert_eq!(sim.b.stats().malformed, 1);
    assert_eq!(sim.b.poll_transmit(sim.now), None, "no ACK for a forged segment");
}
