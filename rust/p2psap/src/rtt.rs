//! RTTEstimation: the retransmission timer of RFC 6298 (Jacobson/Karels).
//!
//! Karn's rule (no sample from a retransmitted segment) is the caller's part:
//! it alone knows whether an acknowledged segment was sent more than once.

use std::time::Duration;

#[derive(Debug, Clone)]
pub struct RttEstimator {
    srtt: Option<Duration>,
    rttvar: Duration,
    rto: Duration,
    /// Exponent of the timer backoff since the last valid sample.
    backoff: u32,
    min_rto: Duration,
    max_rto: Duration,
}

/// Clock granularity G of RFC 6298: the I/O layer reads a nanosecond clock.
const GRANULARITY: Duration = Duration::from_micros(1);

impl RttEstimator {
    /// `initial` is the RTO before any sample (RFC 6298 says 1 s; a cluster
    /// protocol may start lower); `min_rto` replaces RFC 6298's 1 s floor,
    /// which would idle a 10 µs intra-site link for 100 000 round trips [ours].
    pub fn new(initial: Duration, min_rto: Duration, max_rto: Duration) -> Self {
        RttEstimator { srtt: None, rttvar: Duration::ZERO, rto: initial, backoff: 0, min_rto, max_rto }
    }

    pub fn srtt(&self) -> Option<Duration> {
        self.srtt
    }

    pub fn rttvar(&self) -> Duration {
        self.rttvar
    }

    /// The current timeout, backoff included (RFC 6298 5.5), clamped to the maximum.
    pub fn rto(&self) -> Duration {
        self.rto.checked_mul(1 << self.backoff.min(16)).unwrap_or(self.max_rto).min(self.max_rto)
    }

    /// A measurement R from a segment sent once (RFC 6298 2.2 and 2.3).
    pub fn on_sample(&mut self, r: Duration) {
        match self.srtt {
            None => {
                self.srtt = Some(r);
                self.rttvar = r / 2;
            }
            Some(srtt) => {
                // RTTVAR first, with the old SRTT: beta = 1/4, alpha = 1/8.
                let err = srtt.abs_diff(r);
                self.rttvar = self.rttvar * 3 / 4 + err / 4;
                self.srtt = Some(srtt * 7 / 8 + r / 8);
            }
        }
        let srtt = self.srtt.unwrap();
        self.rto = (srtt + GRANULARITY.max(self.rttvar * 4)).max(self.min_rto).min(self.max_rto);
        self.backoff = 0;
    }

    /// The retransmission timer expired: back the timer off (RFC 6298 5.5).
    pub fn on_timeout(&mut self) {
        self.backoff += 1;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ms(x: u64) -> Duration {
        Duration::from_millis(x)
    }

    fn est() -> RttEstimator {
        RttEstimator::new(Duration::from_secs(1), Duration::from_micros(200), Duration::from_secs(60))
    }

    #[test]
    fn first_sample_then_smoothing_follow_rfc6298() {
        let mut e = est();
        assert_eq!(e.rto(), Duration::from_secs(1));
        e.on_sample(ms(100));
        assert_eq!(e.srtt(), Some(ms(100)));
        assert_eq!(e.rttvar(), ms(50));
        assert_eq!(e.rto(), ms(300)); // 100 + 4 * 50
        e.on_sample(ms(200));
        // RTTVAR = 3/4 * 50 + 1/4 * |100 - 200| = 62.5; SRTT = 7/8 * 100 + 1/8 * 200 = 112.5
        assert_eq!(e.rttvar(), Duration::from_micros(62_500));
        assert_eq!(e.srtt(), Some(Duration::from_micros(112_500)));
        assert_eq!(e.rto(), Duration::from_micros(362_500));
    }

    #[test]
    fn steady_trace_converges_to_srtt_and_min_rto() {
        let mut e = est();
        for _ in 0..200 {
            e.on_sample(ms(9));
        }
        assert_eq!(e.srtt(), Some(ms(9)));
        assert!(e.rttvar() < Duration::from_micros(1));
        assert_eq!(e.rto(), ms(9) + GRANULARITY.max(e.rttvar() * 4));
        let mut fast = est();
        for _ in 0..200 {
            fast.on_sample(Duration::from_micros(20));
        }
        assert_eq!(fast.rto(), Duration::from_micros(200)); // the floor
    }

    #[test]
    fn backoff_doubles_until_a_new_sample_and_is_capped() {
        let mut e = est();
        e.on_sample(ms(100)); // RTO 300 ms
        e.on_timeout();
        assert_eq!(e.rto(), ms(600));
        e.on_timeout();
        assert_eq!(e.rto(), ms(1200));
        for _ in 0..20 {
            e.on_timeout();
        }
        assert_eq!(e.rto(), Duration::from_secs(60));
        e.on_sample(ms(100));
        assert!(e.rto() < ms(400));
    }
}
