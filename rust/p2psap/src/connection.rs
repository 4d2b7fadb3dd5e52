//! The data channel between two peers: a composed micro-protocol stack as a
//! state machine that does no I/O.
//!
//! Events go in (`send`, `handle_segment`, `handle_timeout`), and out come
//! datagrams (`poll_transmit`), a deadline (`poll_timeout`) and messages
//! (`recv`). The I/O layer owns sockets and clocks; tests drive the same code
//! with simulated time, loss, duplication and reordering.

use std::collections::{BTreeMap, BTreeSet, HashMap, VecDeque};
use std::time::{Duration, Instant};

use crate::cc::{Ack, Ccid2, Controller, NewReno, Response};
use crate::context::{MicroProtocol as M, Scheme, Stack};
use crate::rtt::RttEstimator;
use crate::segment::{self, Header, Kind, BLOCK_SIZE, HEADER_LEN};

#[derive(Debug, Clone)]
pub struct Config {
    pub stack: Stack,
    /// Session identifier agreed on the control channel; other sessions are dropped.
    pub session: u64,
    pub local_port: u16,
    pub remote_port: u16,
    /// Resize: largest segment on the wire, header included.
    pub max_segment: usize,
    pub initial_rto: Duration,
    /// Floor of the RTO (RFC 6298 2.4 allows less than its 1 s). 200 ms, as Linux:
    /// a scheduling stall of a few ms on a shared host must not look like loss, since
    /// after a timeout NewReno regrows by one SMSS per RTT; fast retransmit, not the
    /// timer, repairs single losses.
    pub min_rto: Duration,
    pub max_rto: Duration,
    /// Synchronous sends are refused (`Full`) once the unsent or unacknowledged
    /// payload fills this many of the seed's 8128-byte send blocks (1000). Bytes,
    /// not segments, so segments smaller than a block (the path MTU) get the same buffer.
    pub send_blocks: usize,
    /// PositiveAck: acknowledge every `ack_every`-th in-order segment at once and
    /// the others after `ack_delay` (or at `flush_ack`); out-of-order and duplicate
    /// segments are acknowledged at once, so duplicate ACKs still count (RFC 5681 4.2).
    pub ack_every: u32,
    pub ack_delay: Duration,
    /// Window, in segments, of reliable stacks without congestion control
    /// (sync intra-site Ethernet): flow control only.
    pub fixed_window: usize,
}

impl Config {
    pub fn new(stack: Stack, session: u64) -> Self {
        Config {
            stack,
            session,
            local_port: 1,
            remote_port: 1,
            max_segment: BLOCK_SIZE,
            initial_rto: Duration::from_millis(200),
            min_rto: Duration::from_millis(200),
            max_rto: Duration::from_secs(10),
            send_blocks: 1000,
            ack_every: 1,
            ack_delay: Duration::from_millis(1),
            fixed_window: 256,
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SendError {
    /// The send buffer is full; retry after acknowledgements free blocks.
    Full,
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Stats {
    pub segments_sent: u64,
    pub bytes_sent: u64,
    pub retransmissions: u64,
    pub fast_retransmits: u64,
    pub timeouts: u64,
    pub segments_received: u64,
    pub duplicates: u64,
    /// Asynchronous segments of a message older than one already complete.
    pub stale: u64,
    /// Asynchronous messages overwritten in the send slot before leaving.
    pub overwritten: u64,
    pub unknown_session: u64,
    pub wrong_port: u64,
    pub malformed: u64,
    pub messages_delivered: u64,
    /// Asynchronous segments the congestion window found lost (never resent).
    pub lost: u64,
}

#[derive(Debug)]
struct Sent {
    bytes: Vec<u8>,
    sent_at: Instant,
    retransmitted: bool,
}

/// Reassembly of one asynchronous message.
#[derive(Debug)]
struct Partial {
    frags: Vec<Option<Vec<u8>>>,
    have: usize,
}

#[derive(Debug, Default)]
struct AsyncSlot {
    complete: Option<(u64, Vec<u8>)>,
    consumed: u64,
    partial: BTreeMap<u64, Partial>,
}

/// Partial asynchronous messages kept per tag before the oldest is abandoned.
const MAX_PARTIALS: usize = 8;
/// Immediate ACKs queued before the oldest is dropped (later ACKs supersede it).
const MAX_PENDING_ACKS: usize = 256;

#[derive(Debug)]
pub struct Connection {
    cfg: Config,
    stats: Stats,
    msg_seq: HashMap<u32, u64>,
    // --- sending, synchronous; segments are encoded once, at `send`, and numbered
    // when they first leave
    unsent: VecDeque<Vec<u8>>,
    next_seq: u64,
    snd_una: u64,
    in_flight: BTreeMap<u64, Sent>,
    /// In flight but declared lost by a timeout: resent within the window.
    lost: BTreeSet<u64>,
    flight_bytes: u64,
    fast_rtx: Option<u64>,
    rto_at: Option<Instant>,
    rtt: RttEstimator,
    cc: Option<Box<dyn Controller>>,
    // --- sending, asynchronous: one slot per tag, newest message only
    async_out: BTreeMap<u32, VecDeque<Vec<u8>>>,
    async_rr: VecDeque<u32>,
    /// DCCP: sequence -> (bytes, sent at) awaiting the ack vector.
    dccp_flight: BTreeMap<u64, (u64, Instant)>,
    /// Payload bytes of synchronous messages not yet acknowledged (reliable) or sent.
    buffered: usize,
    // --- receiving
    /// ACK headers, encoded straight into the transmission buffer.
    pending_acks: VecDeque<Header>,
    /// In-order segments received since the last ACK, and when the owed ACK is due.
    unacked: u32,
    ack_at: Option<Instant>,
    rcv_nxt: u64,
    out_of_order: BTreeMap<u64, (Header, Vec<u8>)>,
    assembling: HashMap<u32, (u64, Vec<u8>)>,
    delivered: HashMap<u32, VecDeque<(u64, Vec<u8>)>>,
    async_in: HashMap<u32, AsyncSlot>,
    dccp_high: u64,
    dccp_vector: u32,
}

impl Connection {
    pub fn new(cfg: Config) -> Self {
        assert!(cfg.max_segment > HEADER_LEN && cfg.max_segment <= BLOCK_SIZE, "segment size out of range");
        // Windows count whole segments on the wire, headers included, like the flight.
        let smss = cfg.max_segment as u64;
        let cc: Option<Box<dyn Controller>> = if cfg.stack.has(M::TcpNewRenoCa) {
            Some(Box::new(NewReno::new(smss)))
        } else if cfg.stack.has(M::TcpCongAvoid) {
            Some(Box::new(Ccid2::new(smss)))
        } else {
            None
        };
        let rtt = RttEstimator::new(cfg.initial_rto, cfg.min_rto, cfg.max_rto);
        Connection {
            cfg,
            stats: Stats::default(),
            msg_seq: HashMap::new(),
            unsent: VecDeque::new(),
            next_seq: 1,
            snd_una: 1,
            in_flight: BTreeMap::new(),
            lost: BTreeSet::new(),
            flight_bytes: 0,
            fast_rtx: None,
            rto_at: None,
            rtt,
            cc,
            async_out: BTreeMap::new(),
            async_rr: VecDeque::new(),
            dccp_flight: BTreeMap::new(),
            buffered: 0,
            pending_acks: VecDeque::new(),
            unacked: 0,
            ack_at: None,
            rcv_nxt: 1,
            out_of_order: BTreeMap::new(),
            assembling: HashMap::new(),
            delivered: HashMap::new(),
            async_in: HashMap::new(),
            dccp_high: 0,
            dccp_vector: 0,
        }
    }

    pub fn stack(&self) -> &Stack {
        &self.cfg.stack
    }

    pub fn session(&self) -> u64 {
        self.cfg.session
    }

    pub fn stats(&self) -> Stats {
        self.stats
    }

    pub fn rtt(&self) -> &RttEstimator {
        &self.rtt
    }

    pub fn congestion_window(&self) -> Option<u64> {
        self.cc.as_ref().map(|c| c.window())
    }

    /// Segments not yet acknowledged (reliable) or not yet sent.
    pub fn outstanding(&self) -> usize {
        self.unsent.len() + self.in_flight.len() + self.async_out.values().map(|q| q.len()).sum::<usize>()
    }

    fn header(&self, tag: u32, msg: u64) -> Header {
        Header {
            session: self.cfg.session,
            src_port: self.cfg.local_port,
            dst_port: self.cfg.remote_port,
            tag,
            msg,
            ..Header::default()
        }
    }

    /// Resize: cut a message into segments that fit `max_segment`.
    fn fragments(&self, tag: u32, msg: u64, data: &[u8]) -> Vec<Vec<u8>> {
        let room = self.cfg.max_segment - HEADER_LEN;
        let n = data.len().div_ceil(room).max(1);
        assert!(n <= u16::MAX as usize, "message too large for one Resize sequence");
        (0..n)
            .map(|i| {
                let mut h = self.header(tag, msg);
                h.frag = i as u16;
                h.nfrags = n as u16;
                let payload = &data[i * room..((i + 1) * room).min(data.len())];
                let mut b = Vec::with_capacity(HEADER_LEN + payload.len());
                segment::encode_into(Kind::Data, &h, payload, &mut b);
                b
            })
            .collect()
    }

    /// The user's send. Synchronous: queued in FIFO order, exactly once, refused
    /// while the send blocks are used up. Asynchronous: replaces any part of an
    /// older message of the same tag that has not left yet.
    pub fn send(&mut self, tag: u32, data: &[u8]) -> Result<u64, SendError> {
        if self.cfg.stack.scheme() == Scheme::Synchronous
            && self.buffered >= self.cfg.send_blocks * (BLOCK_SIZE - HEADER_LEN)
        {
            return Err(SendError::Full);
        }
        let msg = {
            let m = self.msg_seq.entry(tag).or_insert(0);
            *m += 1;
            *m
        };
        let segs = self.fragments(tag, msg, data);
        match self.cfg.stack.scheme() {
            Scheme::Synchronous => {
                self.buffered += data.len();
                self.unsent.extend(segs);
            }
            Scheme::Asynchronous => {
                let old = self.async_out.insert(tag, segs.into());
                match old {
                    Some(q) if !q.is_empty() => self.stats.overwritten += 1,
                    _ => self.async_rr.push_back(tag),
                }
            }
        }
        Ok(msg)
    }

    // ------------------------------------------------------------ receiving

    pub fn handle_segment(&mut self, now: Instant, bytes: &[u8]) {
        let (kind, header, payload) = match segment::parse(bytes) {
            Ok(s) => s,
            Err(_) => {
                self.stats.malformed += 1;
                return;
            }
        };
        if header.session != self.cfg.session {
            self.stats.unknown_session += 1;
            return;
        }
        if header.dst_port != self.cfg.local_port {
            self.stats.wrong_port += 1;
            return;
        }
        self.stats.segments_received += 1;
        match kind {
            Kind::Ack if self.cfg.stack.has(M::DccpAck) => self.on_dccp_ack(now, &header),
            Kind::Ack => self.on_ack(now, header.ack),
            Kind::Data => self.on_data(now, header, payload),
        }
    }

    fn on_data(&mut self, now: Instant, h: Header, payload: &[u8]) {
        if self.cfg.stack.has(M::DccpAck) {
            self.note_dccp_seq(h.seq);
        }
        let stack = &self.cfg.stack;
        if stack.scheme() == Scheme::Asynchronous {
            return self.assemble_async(h, payload);
        }
        if !stack.has(M::SequencedSegment) {
            // Reliable fabric: the transport already delivers in order, exactly once.
            return self.assemble_in_order(&h, payload);
        }
        let seq = h.seq;
        let mut in_order = false;
        if seq < self.rcv_nxt || self.out_of_order.contains_key(&seq) {
            self.stats.duplicates += 1;
        } else if seq == self.rcv_nxt {
            // Filling a hole is acknowledged at once: the sender is in recovery.
            in_order = self.out_of_order.is_empty();
            self.rcv_nxt += 1;
            self.assemble_in_order(&h, payload);
            while let Some((h, payload)) = self.out_of_order.remove(&self.rcv_nxt) {
                self.rcv_nxt += 1;
                self.assemble_in_order(&h, &payload);
            }
        } else {
            self.out_of_order.insert(seq, (h, payload.to_vec()));
        }
        // PositiveAck: cumulative; anything unexpected is acknowledged at once so the
        // sender can count duplicates, in-order data every `ack_every` segments.
        self.unacked += 1;
        if in_order && self.unacked < self.cfg.ack_every {
            self.ack_at.get_or_insert(now + self.cfg.ack_delay);
        } else {
            self.queue_cumulative_ack();
        }
    }

    fn queue_cumulative_ack(&mut self) {
        self.unacked = 0;
        self.ack_at = None;
        let mut h = self.header(0, 0);
        h.ack = self.rcv_nxt;
        self.queue_ack(h);
    }

    /// Send a delayed ACK now: the I/O layer calls this once it has handled every
    /// datagram that arrived together, so a batch costs one ACK, not one per segment.
    pub fn flush_ack(&mut self) {
        if self.ack_at.is_some() {
            self.queue_cumulative_ack();
        }
    }

    fn queue_ack(&mut self, ack: Header) {
        if self.pending_acks.len() >= MAX_PENDING_ACKS {
            self.pending_acks.pop_front();
        }
        self.pending_acks.push_back(ack);
    }

    fn assemble_in_order(&mut self, h: &Header, payload: &[u8]) {
        let entry = self.assembling.entry(h.tag).or_insert_with(|| (h.msg, Vec::new()));
        if entry.0 != h.msg || h.frag == 0 {
            // Every fragment but the last is as long as the first: one allocation
            // per message instead of a reallocation (and copy) per doubling.
            *entry = (h.msg, Vec::with_capacity(payload.len() * h.nfrags as usize));
        }
        entry.1.extend_from_slice(payload);
        if h.frag + 1 == h.nfrags {
            let (msg, data) = self.assembling.remove(&h.tag).unwrap();
            self.delivered.entry(h.tag).or_default().push_back((msg, data));
        }
    }

    fn assemble_async(&mut self, h: Header, payload: &[u8]) {
        let slot = self.async_in.entry(h.tag).or_default();
        let newest = slot.complete.as_ref().map_or(slot.consumed, |c| c.0).max(slot.consumed);
        if h.msg <= newest || h.frag >= h.nfrags {
            self.stats.stale += 1;
            return;
        }
        let p = slot.partial.entry(h.msg).or_insert_with(|| Partial { frags: vec![None; h.nfrags as usize], have: 0 });
        if p.frags.len() != h.nfrags as usize {
            self.stats.malformed += 1;
            return;
        }
        if p.frags[h.frag as usize].is_some() {
            self.stats.duplicates += 1;
            return;
        }
        p.frags[h.frag as usize] = Some(payload.to_vec());
        p.have += 1;
        if p.have == p.frags.len() {
            let p = slot.partial.remove(&h.msg).unwrap();
            let data: Vec<u8> = p.frags.into_iter().flatten().flatten().collect();
            slot.complete = Some((h.msg, data));
            // Anything older can no longer be the newest value.
            slot.partial = slot.partial.split_off(&(h.msg + 1));
        } else if slot.partial.len() > MAX_PARTIALS {
            slot.partial.pop_first();
        }
    }

    /// The next message of `tag`. Synchronous: in order, each once. Asynchronous:
    /// the newest complete message newer than the last one returned, if any.
    pub fn recv(&mut self, tag: u32) -> Option<(u64, Vec<u8>)> {
        let out = match self.cfg.stack.scheme() {
            Scheme::Synchronous => self.delivered.get_mut(&tag).and_then(|q| q.pop_front()),
            Scheme::Asynchronous => {
                let slot = self.async_in.get_mut(&tag)?;
                match slot.complete.take() {
                    Some((msg, data)) if msg > slot.consumed => {
                        slot.consumed = msg;
                        Some((msg, data))
                    }
                    _ => None,
                }
            }
        };
        if out.is_some() {
            self.stats.messages_delivered += 1;
        }
        out
    }

    /// Whether `recv(tag)` would return a message now.
    pub fn has_message(&self, tag: u32) -> bool {
        match self.cfg.stack.scheme() {
            Scheme::Synchronous => self.delivered.get(&tag).is_some_and(|q| !q.is_empty()),
            Scheme::Asynchronous => {
                self.async_in.get(&tag).is_some_and(|s| s.complete.as_ref().is_some_and(|c| c.0 > s.consumed))
            }
        }
    }

    // ------------------------------------------------------------ acknowledgements

    fn on_ack(&mut self, now: Instant, cumulative: u64) {
        if !self.cfg.stack.reliable() {
            return;
        }
        let flight_before = self.flight_bytes;
        let high_seq = self.next_seq - 1;
        if cumulative > self.snd_una && cumulative <= self.next_seq {
            let mut newly = 0;
            let mut sample = None;
            while let Some((&seq, _)) = self.in_flight.first_key_value() {
                if seq >= cumulative {
                    break;
                }
                let sent = self.in_flight.remove(&seq).unwrap();
                let len = sent.bytes.len() as u64;
                self.buffered -= sent.bytes.len() - HEADER_LEN;
                newly += len;
                if !self.lost.remove(&seq) {
                    self.flight_bytes -= len;
                }
                // Karn: only segments sent once give a sample.
                sample = (!sent.retransmitted).then(|| now.saturating_duration_since(sent.sent_at));
            }
            self.snd_una = cumulative;
            if let Some(r) = sample {
                self.rtt.on_sample(r);
            }
            if self.fast_rtx.is_some_and(|s| s < cumulative) {
                self.fast_rtx = None;
            }
            let cwnd_limited = self.window_limited(flight_before, !self.unsent.is_empty() || !self.lost.is_empty());
            let ack =
                Ack { newly_acked: newly, cumulative, duplicate: false, flight: flight_before, high_seq, cwnd_limited };
            if let Some(cc) = self.cc.as_mut() {
                if cc.on_ack(&ack) == Response::RetransmitFirstUnacked && self.in_flight.contains_key(&cumulative) {
                    self.fast_rtx = Some(cumulative);
                }
            }
            // RFC 6298 5.2 and 5.3: stop the timer when all is acknowledged, else restart it.
            self.rto_at = (!self.in_flight.is_empty()).then(|| now + self.rtt.rto());
        } else if cumulative == self.snd_una && !self.in_flight.is_empty() && self.cfg.stack.has(M::DuplicateAck) {
            let ack = Ack {
                newly_acked: 0,
                cumulative,
                duplicate: true,
                flight: flight_before,
                high_seq,
                cwnd_limited: false,
            };
            if let Some(cc) = self.cc.as_mut() {
                if cc.on_ack(&ack) == Response::RetransmitFirstUnacked {
                    self.stats.fast_retransmits += 1;
                    self.fast_rtx = Some(cumulative);
                }
            }
        }
    }

    /// Whether the window limited sending: data was waiting, or the flight filled it.
    fn window_limited(&self, flight: u64, waiting: bool) -> bool {
        waiting || flight + self.cfg.max_segment as u64 > self.window()
    }

    fn note_dccp_seq(&mut self, seq: u64) {
        if seq > self.dccp_high {
            let shift = seq - self.dccp_high;
            // Bit i stands for `high - 1 - i`; the old high becomes bit shift - 1.
            self.dccp_vector =
                if shift > 32 { 0 } else { ((self.dccp_vector as u64) << shift | 1 << (shift - 1)) as u32 };
            self.dccp_high = seq;
        } else if seq < self.dccp_high && self.dccp_high - seq <= 32 {
            self.dccp_vector |= 1 << (self.dccp_high - seq - 1);
        }
        let mut h = self.header(0, 0);
        h.ack = self.dccp_high;
        h.ack_vector = self.dccp_vector;
        self.queue_ack(h);
    }

    fn on_dccp_ack(&mut self, now: Instant, h: &Header) {
        let acked =
            |seq: u64| seq == h.ack || (seq < h.ack && h.ack - seq <= 32 && h.ack_vector >> (h.ack - seq - 1) & 1 == 1);
        let flight_before: u64 = self.dccp_flight.values().map(|v| v.0).sum();
        let high_seq = self.next_seq - 1;
        let mut newly = 0;
        let mut lost = Vec::new();
        let mut sample = None;
        for (&seq, &(len, sent_at)) in self.dccp_flight.range(..=h.ack) {
            if acked(seq) {
                newly += len;
                if seq == h.ack {
                    sample = Some(now.saturating_duration_since(sent_at));
                }
            } else if h.ack - seq >= 3 {
                // Three later segments arrived: this one is lost (RFC 4341's dupack analogue).
                lost.push(seq);
            } else {
                continue;
            }
        }
        self.dccp_flight.retain(|&seq, _| !(acked(seq) || (seq < h.ack && h.ack - seq >= 3)));
        if let Some(r) = sample {
            self.rtt.on_sample(r);
        }
        let cwnd_limited = self.window_limited(flight_before, self.async_out.values().any(|q| !q.is_empty()));
        let cc = self.cc.as_mut().expect("DCCP stacks carry a congestion controller");
        for seq in lost {
            self.stats.lost += 1;
            cc.on_loss(seq, high_seq);
        }
        cc.on_ack(&Ack {
            newly_acked: newly,
            cumulative: h.ack + 1,
            duplicate: false,
            flight: flight_before,
            high_seq,
            cwnd_limited,
        });
        self.rto_at = (!self.dccp_flight.is_empty()).then(|| now + self.rtt.rto());
    }

    // ------------------------------------------------------------ transmitting

    /// The next datagram to put on the wire, if any may leave now.
    pub fn poll_transmit(&mut self, now: Instant) -> Option<Vec<u8>> {
        let mut out = Vec::new();
        self.transmit_into(now, &mut out).map(|_| out)
    }

    /// `poll_transmit` appending to `out`, so the I/O layer builds a GSO run in
    /// one buffer without a datagram's allocation; returns the datagram's length.
    pub fn transmit_into(&mut self, now: Instant, out: &mut Vec<u8>) -> Option<usize> {
        let start = out.len();
        if let Some(a) = self.pending_acks.pop_front() {
            segment::encode_into(Kind::Ack, &a, &[], out);
            return Some(out.len() - start);
        }
        match self.cfg.stack.scheme() {
            Scheme::Synchronous if self.cfg.stack.reliable() => self.transmit_reliable(now, out)?,
            Scheme::Synchronous => {
                let s = self.unsent.pop_front()?;
                self.buffered -= s.len() - HEADER_LEN;
                out.extend_from_slice(&s);
            }
            Scheme::Asynchronous => self.transmit_async(now, out)?,
        }
        let len = out.len() - start;
        self.stats.segments_sent += 1;
        self.stats.bytes_sent += len as u64;
        Some(len)
    }

    fn window(&self) -> u64 {
        match &self.cc {
            Some(cc) => cc.window(),
            None => (self.cfg.fixed_window * self.cfg.max_segment) as u64,
        }
    }

    fn transmit_reliable(&mut self, now: Instant, out: &mut Vec<u8>) -> Option<()> {
        // Fast retransmit and partial-ACK retransmissions ignore the window (RFC 5681 3.2).
        if let Some(seq) = self.fast_rtx.take() {
            if let Some(s) = self.in_flight.get_mut(&seq) {
                s.retransmitted = true;
                s.sent_at = now;
                self.stats.retransmissions += 1;
                out.extend_from_slice(&s.bytes);
                return Some(());
            }
        }
        let room = |this: &Self, len: usize| this.flight_bytes == 0 || this.flight_bytes + len as u64 <= this.window();
        if let Some(&seq) = self.lost.first() {
            let len = self.in_flight[&seq].bytes.len();
            if !room(self, len) {
                return None;
            }
            self.lost.remove(&seq);
            self.flight_bytes += len as u64;
            let s = self.in_flight.get_mut(&seq).unwrap();
            s.retransmitted = true;
            s.sent_at = now;
            self.stats.retransmissions += 1;
            out.extend_from_slice(&s.bytes);
            return Some(());
        }
        let len = self.unsent.front()?.len();
        if !room(self, len) {
            return None;
        }
        let mut bytes = self.unsent.pop_front().unwrap();
        let seq = self.next_seq;
        self.next_seq += 1;
        segment::set_seq(&mut bytes, seq);
        self.flight_bytes += len as u64;
        out.extend_from_slice(&bytes);
        self.in_flight.insert(seq, Sent { bytes, sent_at: now, retransmitted: false });
        // RFC 6298 5.1: start the timer if it is not running.
        self.rto_at.get_or_insert(now + self.rtt.rto());
        Some(())
    }

    fn transmit_async(&mut self, now: Instant, out: &mut Vec<u8>) -> Option<()> {
        let dccp = self.cfg.stack.has(M::DccpAck);
        if dccp {
            let flight: u64 = self.dccp_flight.values().map(|v| v.0).sum();
            if flight > 0 && flight + self.cfg.max_segment as u64 > self.window() {
                return None;
            }
        }
        // Round robin over tags, so one large message does not starve the others.
        let tag = loop {
            let tag = self.async_rr.pop_front()?;
            if self.async_out.get(&tag).is_some_and(|q| !q.is_empty()) {
                break tag;
            }
            self.async_out.remove(&tag);
        };
        let q = self.async_out.get_mut(&tag).unwrap();
        let mut bytes = q.pop_front().unwrap();
        if q.is_empty() {
            self.async_out.remove(&tag);
        } else {
            self.async_rr.push_back(tag);
        }
        if dccp {
            let seq = self.next_seq;
            self.next_seq += 1;
            segment::set_seq(&mut bytes, seq);
            self.dccp_flight.insert(seq, (bytes.len() as u64, now));
            self.rto_at.get_or_insert(now + self.rtt.rto());
        }
        out.extend_from_slice(&bytes);
        Some(())
    }

    // ------------------------------------------------------------ timers

    pub fn poll_timeout(&self) -> Option<Instant> {
        [self.rto_at, self.ack_at].into_iter().flatten().min()
    }

    pub fn handle_timeout(&mut self, now: Instant) {
        if self.ack_at.is_some_and(|t| t <= now) {
            self.queue_cumulative_ack();
        }
        match self.rto_at {
            Some(t) if t <= now => {}
            _ => return,
        }
        self.stats.timeouts += 1;
        let high_seq = self.next_seq - 1;
        if self.cfg.stack.has(M::DccpAck) {
            // No retransmission: forget the flight, shrink the window, back off.
            let flight = self.dccp_flight.values().map(|v| v.0).sum();
            self.stats.lost += self.dccp_flight.len() as u64;
            self.dccp_flight.clear();
            self.cc.as_mut().unwrap().on_timeout(flight, high_seq);
            self.rtt.on_timeout();
            self.rto_at = None;
            return;
        }
        // RFC 6298 5.4-5.6 with go-back-N: everything in flight is presumed lost and
        // resent as the (collapsed) window allows, oldest first.
        if let Some(cc) = self.cc.as_mut() {
            cc.on_timeout(self.flight_bytes, high_seq);
        }
        self.rtt.on_timeout();
        self.lost.extend(self.in_flight.keys().copied());
        self.flight_bytes = 0;
        self.fast_rtx = None;
        self.rto_at = (!self.in_flight.is_empty()).then(|| now + self.rtt.rto());
    }
}
