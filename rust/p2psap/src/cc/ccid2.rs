//! CCID2 (RFC 4341): TCP-like window congestion control for an unreliable
//! stream, with DCCP acknowledgements and no retransmission. Losses are
//! learnt from the ack vector; the window halves at most once per window of data.

use super::{initial_window, Ack, Controller, Growth, Response};

#[derive(Debug, Clone)]
pub struct Ccid2 {
    smss: u64,
    cwnd: u64,
    ssthresh: u64,
    /// Losses of sequences up to here belong to the window already halved for.
    recover: u64,
    growth: Growth,
}

impl Ccid2 {
    pub fn new(smss: u64) -> Self {
        Ccid2 { smss, cwnd: initial_window(smss), ssthresh: u64::MAX, recover: 0, growth: Growth::default() }
    }

    pub fn ssthresh(&self) -> u64 {
        self.ssthresh
    }
}

impl Controller for Ccid2 {
    fn window(&self) -> u64 {
        self.cwnd
    }

    fn on_ack(&mut self, ack: &Ack) -> Response {
        if ack.newly_acked > 0 {
            self.cwnd = self.growth.grow(self.cwnd, self.ssthresh, ack, self.smss);
        }
        Response::Nothing
    }

    fn on_loss(&mut self, lost_seq: u64, high_seq: u64) {
        if lost_seq > self.recover {
            self.ssthresh = (self.cwnd / 2).max(2 * self.smss);
            self.cwnd = self.ssthresh;
            self.recover = high_seq;
            self.growth.reset();
        }
    }

    fn on_timeout(&mut self, _flight: u64, high_seq: u64) {
        self.ssthresh = (self.cwnd / 2).max(2 * self.smss);
        self.cwnd = self.smss;
        self.recover = high_seq;
        self.growth.reset();
    }

    fn name(&self) -> &'static str {
        "CCID2"
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn halves_once_per_window_and_never_retransmits() {
        let mut c = Ccid2::new(1000);
        for i in 0..8 {
            let a = Ack {
                newly_acked: 1000,
                cumulative: i + 1,
                duplicate: false,
                flight: 4000,
                high_seq: 12,
                cwnd_limited: true,
            };
            assert_eq!(c.on_ack(&a), Response::Nothing);
        }
        assert_eq!(c.window(), 18_000); // IW 10 segments, then + 1 per segment acknowledged
        c.on_loss(9, 20);
        assert_eq!((c.window(), c.ssthresh()), (9000, 9000));
        c.on_loss(15, 20); // same window
        assert_eq!(c.window(), 9000);
        c.on_loss(21, 30);
        assert_eq!(c.window(), 4500);
    }
}
