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

/// RFC 5681 section 3.1: the initial window from the sender's maximum segment size.
pub fn initial_window(smss: u64) -> u64 {
    if smss > 2190 {
        2 * smss
    } else if smss > 1095 {
        3 * smss
    } else {
        4 * smss
    }
}

/// RFC 5681's growth per ACK outside recovery: slow start below ssthresh,
/// congestion avoidance (about one SMSS per window) above.
fn grow(cwnd: u64, ssthresh: u64, newly_acked: u64, smss: u64) -> u64 {
    if cwnd < ssthresh {
        cwnd + newly_acked.min(smss)
    } else {
        cwnd + (smss * smss / cwnd).max(1)
    }
}
