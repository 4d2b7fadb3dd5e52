//! Window congestion control: one trait with event hooks, one file per algorithm.
//!
//! The connection measures (bytes in flight, acknowledgements, timeouts) and
//! the controller decides the window; NewReno also decides its loss-recovery
//! retransmissions (RFC 6582 ties them to the window), which it asks for in
//! its `Response`.

mod ccid2;
mod newreno;

pub use ccid2::Ccid2;
pub use newreno::NewReno;

/// What one acknowledgement told the sender.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Ack {
    /// Bytes newly acknowledged by this ACK.
    pub newly_acked: u64,
    /// Cumulative acknowledgement: the next sequence number the receiver expects.
    pub cumulative: u64,
    /// Acknowledges nothing new while data is outstanding (RFC 5681's duplicate ACK).
    pub duplicate: bool,
    /// Bytes in flight before this ACK.
    pub flight: u64,
    /// Highest sequence number transmitted so far.
    pub high_seq: u64,
    /// The window, not the application, limited sending when this ACK arrived
    /// (data was waiting for room). RFC 7661 / RFC 9002 7.8: a window that is not
    /// being used must not grow, or it would license a burst it was never tested at.
    pub cwnd_limited: bool,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Response {
    Nothing,
    /// Retransmit the first unacknowledged segment (fast retransmit, partial ACK).
    RetransmitFirstUnacked,
}

pub trait Controller: Send + std::fmt::Debug {
    /// Bytes the sender may have in flight.
    fn window(&self) -> u64;
    fn on_ack(&mut self, ack: &Ack) -> Response;
    /// A segment was found lost without a timeout (CCID2's ack vector); NewReno
    /// learns of losses from duplicate ACKs instead.
    fn on_loss(&mut self, _lost_seq: u64, _high_seq: u64) {}
    fn on_timeout(&mut self, flight: u64, high_seq: u64);
    fn name(&self) -> &'static str;
}

/// RFC 6928: ten segments, at most 14600 bytes unless that is under two segments.
/// (RFC 5681's 2-4 segments cost a long link several round trips of slow start.)
pub fn initial_window(smss: u64) -> u64 {
    (10 * smss).min((2 * smss).max(14_600))
}

/// RFC 3465's limit L on slow-start growth per ACK, in SMSS.
const ABC_LIMIT: u64 = 2;

/// Window growth outside recovery by Appropriate Byte Counting (RFC 3465): the
/// bytes an ACK covers count, not the ACK, so delayed and stretch ACKs (one per
/// two segments, one per receive batch) grow the window as per-segment ACKs would.
#[derive(Debug, Clone, Default)]
struct Growth {
    /// Congestion avoidance: bytes acknowledged towards the next SMSS of window.
    bytes_acked: u64,
}

impl Growth {
    /// The window after `ack`: slow start adds the bytes acknowledged (at most
    /// L SMSS per ACK), congestion avoidance one SMSS per window of bytes acknowledged.
    fn grow(&mut self, cwnd: u64, ssthresh: u64, ack: &Ack, smss: u64) -> u64 {
        if !ack.cwnd_limited {
            return cwnd;
        }
        if cwnd < ssthresh {
            return cwnd + ack.newly_acked.min(ABC_LIMIT * smss);
        }
        self.bytes_acked += ack.newly_acked;
        if self.bytes_acked >= cwnd {
            self.bytes_acked -= cwnd;
            return cwnd + smss;
        }
        cwnd
    }

    /// A loss or timeout starts a fresh count (RFC 3465 2.1).
    fn reset(&mut self) {
        self.bytes_acked = 0;
    }
}
