//! TCP NewReno: RFC 5681 (slow start, congestion avoidance, fast retransmit and
//! recovery) with RFC 6582's handling of partial acknowledgements.

use super::{initial_window, Ack, Controller, Growth, Response};

#[derive(Debug, Clone)]
pub struct NewReno {
    smss: u64,
    cwnd: u64,
    ssthresh: u64,
    dupacks: u32,
    /// RFC 6582 `recover`: highest sequence sent when the last recovery began.
    recover: u64,
    in_recovery: bool,
    growth: Growth,
}

impl NewReno {
    pub fn new(smss: u64) -> Self {
        NewReno {
            smss,
            cwnd: initial_window(smss),
            ssthresh: u64::MAX,
            dupacks: 0,
            recover: 0,
            in_recovery: false,
            growth: Growth::default(),
        }
    }

    pub fn ssthresh(&self) -> u64 {
        self.ssthresh
    }

    pub fn in_recovery(&self) -> bool {
        self.in_recovery
    }

    fn halve(&self, flight: u64) -> u64 {
        (flight / 2).max(2 * self.smss)
    }
}

impl Controller for NewReno {
    fn window(&self) -> u64 {
        self.cwnd
    }

    fn on_ack(&mut self, ack: &Ack) -> Response {
        if ack.duplicate {
            self.dupacks += 1;
            if self.in_recovery {
                self.cwnd += self.smss; // RFC 6582 step 3: inflate by each further duplicate
                return Response::Nothing;
            }
            // RFC 6582 step 2: only a duplicate that covers more than `recover` starts recovery,
            // so duplicates caused by retransmissions after a timeout do not halve again.
            if self.dupacks == 3 && ack.cumulative > self.recover {
                self.recover = ack.high_seq;
                self.ssthresh = self.halve(ack.flight);
                self.cwnd = self.ssthresh + 3 * self.smss;
                self.in_recovery = true;
                self.growth.reset();
                return Response::RetransmitFirstUnacked;
            }
            return Response::Nothing;
        }
        if ack.newly_acked == 0 {
            return Response::Nothing;
        }
        if self.in_recovery {
            if ack.cumulative > self.recover {
                // Full acknowledgement (RFC 6582 step 4, option 1).
                let flight_after = ack.flight.saturating_sub(ack.newly_acked);
                self.cwnd = self.ssthresh.min(flight_after.max(self.smss) + self.smss);
                self.in_recovery = false;
                self.dupacks = 0;
                return Response::Nothing;
            }
            // Partial acknowledgement (step 5): retransmit the next hole, deflate.
            self.cwnd = self.cwnd.saturating_sub(ack.newly_acked);
            if ack.newly_acked >= self.smss {
                self.cwnd += self.smss;
            }
            self.cwnd = self.cwnd.max(self.smss);
            return Response::RetransmitFirstUnacked;
        }
        self.dupacks = 0;
        self.cwnd = self.growth.grow(self.cwnd, self.ssthresh, ack, self.smss);
        Response::Nothing
    }

    fn on_timeout(&mut self, flight: u64, high_seq: u64) {
        // RFC 5681 (4): ssthresh from the flight, cwnd to the loss window of one segment;
        // RFC 6582: recover = highest sequence sent, leave any recovery.
        self.ssthresh = self.halve(flight);
        self.cwnd = self.smss;
        self.recover = high_seq;
        self.in_recovery = false;
        self.dupacks = 0;
        self.growth.reset();
    }

    fn name(&self) -> &'static str {
        "NewReno"
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MSS: u64 = 1000;

    fn ack(newly: u64, cum: u64, flight: u64, high: u64) -> Ack {
        Ack { newly_acked: newly, cumulative: cum, duplicate: false, flight, high_seq: high, cwnd_limited: true }
    }

    fn dup(cum: u64, flight: u64, high: u64) -> Ack {
        Ack { newly_acked: 0, cumulative: cum, duplicate: true, flight, high_seq: high, cwnd_limited: false }
    }

    #[test]
    fn initial_window_follows_rfc6928() {
        assert_eq!(NewReno::new(1000).window(), 10_000); // 10 segments
        assert_eq!(NewReno::new(1472).window(), 14_600); // capped at 14600 bytes
        assert_eq!(NewReno::new(8128).window(), 16_256); // but never under 2 segments
    }

    #[test]
    fn slow_start_counts_bytes_up_to_two_segments_per_ack() {
        let mut c = NewReno::new(MSS);
        c.on_ack(&ack(MSS, 2, 10 * MSS, 11));
        assert_eq!(c.window(), 11 * MSS);
        // A delayed ACK of two segments grows as two ACKs would (RFC 3465, L = 2) ...
        c.on_ack(&ack(2 * MSS, 4, 10 * MSS, 13));
        assert_eq!(c.window(), 13 * MSS);
        // ... a stretch ACK of five by at most two.
        c.on_ack(&ack(5 * MSS, 9, 12 * MSS, 17));
        assert_eq!(c.window(), 15 * MSS);
    }

    #[test]
    fn an_unused_window_does_not_grow() {
        let mut c = NewReno::new(MSS);
        // RFC 7661 / RFC 9002 7.8: the application sent less than the window allowed.
        let idle = Ack { cwnd_limited: false, ..ack(2 * MSS, 3, 2 * MSS, 2) };
        for _ in 0..5 {
            c.on_ack(&idle);
        }
        assert_eq!(c.window(), 10 * MSS);
        c.on_timeout(8 * MSS, 20);
        c.on_ack(&Ack { cwnd_limited: false, ..ack(MSS, 21, MSS, 21) });
        assert_eq!(c.window(), MSS);
    }

    #[test]
    fn congestion_avoidance_adds_one_segment_per_window_acknowledged() {
        let mut c = NewReno::new(MSS);
        // A timeout sets ssthresh = flight / 2 and cwnd = 1 SMSS (RFC 5681 (4)).
        c.on_timeout(8 * MSS, 20);
        assert_eq!((c.window(), c.ssthresh()), (MSS, 4 * MSS));
        for i in 0..3 {
            c.on_ack(&ack(MSS, 21 + i, MSS, 21));
        }
        assert_eq!(c.window(), 4 * MSS); // slow start reached ssthresh
                                         // RFC 3465 2.1: + 1 SMSS once a window's worth (4 SMSS) is acknowledged,
                                         // whether by four ACKs or by two delayed ones.
        for i in 0..3 {
            c.on_ack(&ack(MSS, 24 + i, 4 * MSS, 28));
            assert_eq!(c.window(), 4 * MSS);
        }
        c.on_ack(&ack(MSS, 27, 4 * MSS, 28));
        assert_eq!(c.window(), 5 * MSS);
        c.on_ack(&ack(2 * MSS, 29, 5 * MSS, 32));
        c.on_ack(&ack(2 * MSS, 31, 5 * MSS, 32));
        assert_eq!(c.window(), 5 * MSS);
        c.on_ack(&ack(2 * MSS, 33, 5 * MSS, 36));
        assert_eq!(c.window(), 6 * MSS); // 6 SMSS acknowledged; 1 carries over
    }

    #[test]
    fn fast_retransmit_partial_and_full_ack_follow_rfc6582() {
        let mut c = NewReno::new(MSS);
        assert_eq!(c.window(), 10 * MSS);
        // Segment 10 is lost; 10 segments (10..=19) are in flight.
        let flight = 10 * MSS;
        assert_eq!(c.on_ack(&dup(10, flight, 19)), Response::Nothing);
        assert_eq!(c.on_ack(&dup(10, flight, 19)), Response::Nothing);
        assert_eq!(c.on_ack(&dup(10, flight, 19)), Response::RetransmitFirstUnacked);
        assert!(c.in_recovery());
        assert_eq!(c.ssthresh(), 5 * MSS);
        assert_eq!(c.window(), 8 * MSS); // ssthresh + 3 SMSS
        c.on_ack(&dup(10, flight, 19));
        assert_eq!(c.window(), 9 * MSS); // inflation
                                         // Partial ACK of 3 segments (10..12; 13 also lost): retransmit, deflate by 3, add 1.
        assert_eq!(c.on_ack(&ack(3 * MSS, 13, flight, 19)), Response::RetransmitFirstUnacked);
        assert_eq!(c.window(), 7 * MSS);
        assert!(c.in_recovery());
        // Full ACK beyond recover (19): cwnd = min(ssthresh, max(flight', SMSS) + SMSS).
        assert_eq!(c.on_ack(&ack(7 * MSS, 20, 7 * MSS, 19)), Response::Nothing);
        assert!(!c.in_recovery());
        assert_eq!(c.window(), MSS * 2);
    }

    #[test]
    fn duplicates_not_beyond_recover_do_not_start_recovery() {
        let mut c = NewReno::new(MSS);
        c.on_timeout(8 * MSS, 30); // recover = 30
        for _ in 0..3 {
            assert_eq!(c.on_ack(&dup(25, 4 * MSS, 30)), Response::Nothing);
        }
        assert!(!c.in_recovery());
        assert_eq!(c.window(), MSS);
    }
}
