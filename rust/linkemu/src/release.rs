//! Frames held for release at the far end, and which of them may leave now.
//!
//! The model gives each frame the instant its last bit reaches the far end.
//! Its first bit got there one serialisation of the frame earlier, so handing
//! it over anywhere in between never beats light through the fibre. The
//! emulator uses that: a frame may leave up to `window` (and never more than
//! its own serialisation) before its release, so frames due close together
//! leave in one send and one timer wake-up serves them. Frames leave in the
//! order they were held (fibre is FIFO). Pure: no I/O, no clock.

use std::collections::VecDeque;

struct Held<T> {
    /// The earliest instant it may leave: release less its lead.
    from_ns: u64,
    release_ns: u64,
    frame: T,
}

pub struct Releases<T> {
    held: VecDeque<Held<T>>,
    window_ns: u64,
}

impl<T> Releases<T> {
    pub fn new(window_ns: u64) -> Self {
        Releases { held: VecDeque::new(), window_ns }
    }

    /// Holds `frame` until `release_ns`, the instant its last bit crosses;
    /// `serialisation_ns` is its time on the wire.
    pub fn hold(&mut self, release_ns: u64, serialisation_ns: u64, frame: T) {
        let from_ns = release_ns - serialisation_ns.min(self.window_ns).min(release_ns);
        self.held.push_back(Held { from_ns, release_ns, frame });
    }

    /// When the first held frame may leave.
    pub fn next_ns(&self) -> Option<u64> {
        self.held.front().map(|h| h.from_ns)
    }

    /// The first held frame's release: the latest it should leave.
    pub fn next_release_ns(&self) -> Option<u64> {
        self.held.front().map(|h| h.release_ns)
    }

    /// The first held frame, with its release, if it may leave at `now_ns`.
    pub fn pop_due(&mut self, now_ns: u64) -> Option<(u64, T)> {
        if self.held.front()?.from_ns > now_ns {
            return None;
        }
        self.held.pop_front().map(|h| (h.release_ns, h.frame))
    }

    pub fn is_empty(&self) -> bool {
        self.held.is_empty()
    }

    /// Moves the release of each held frame `new_release` gives one for (the model
    /// re-timed it: a new rate); each keeps its lead. The new releases must keep
    /// the held frames' order, as the model's do (fibre is FIFO).
    pub fn retime(&mut self, new_release: impl Fn(&T) -> Option<u64>) {
        for h in self.held.iter_mut() {
            if let Some(release_ns) = new_release(&h.frame) {
                let lead = h.release_ns - h.from_ns;
                (h.release_ns, h.from_ns) = (release_ns, release_ns - lead.min(release_ns));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{LinkConfig, LinkModel, Verdict};

    fn drain(r: &mut Releases<usize>, now: u64) -> Vec<usize> {
        std::iter::from_fn(|| r.pop_due(now).map(|(_, f)| f)).collect()
    }

    #[test]
    fn a_frame_leaves_at_most_its_serialisation_or_the_window_early() {
        let mut r = Releases::new(20_000);
        r.hold(1_000_000, 500, 0); // an ACK: 0.5 us on the wire
        r.hold(1_100_000, 524_000, 1); // a 64 KiB super-frame at 1 Gb/s
        assert_eq!(r.next_ns(), Some(999_500));
        assert_eq!(drain(&mut r, 999_499), Vec::<usize>::new());
        assert_eq!(drain(&mut r, 999_500), [0]);
        assert_eq!((r.next_ns(), r.next_release_ns()), (Some(1_080_000), Some(1_100_000)));
        assert_eq!(drain(&mut r, 1_079_999), Vec::<usize>::new());
        assert_eq!(r.pop_due(1_080_000), Some((1_100_000, 1)));
        assert!(r.is_empty() && r.next_ns().is_none());
    }

    #[test]
    fn frames_due_together_leave_together_and_in_order() {
        let mut r = Releases::new(20_000);
        r.hold(100_000, 50_000, 0);
        r.hold(110_000, 50_000, 1);
        // Opens later than the next one, which still waits behind it: no reordering.
        r.hold(115_000, 100, 2);
        r.hold(116_000, 50_000, 3);
        assert_eq!(drain(&mut r, 95_000), [0, 1]);
        assert_eq!(drain(&mut r, 114_899), Vec::<usize>::new());
        assert_eq!(drain(&mut r, 114_900), [2, 3]);
    }

    #[test]
    fn a_re_timed_frame_keeps_its_lead() {
        let mut r = Releases::new(20_000);
        r.hold(100_000, 5_000, 0);
        r.hold(110_000, 50_000, 1);
        r.retime(|&f| (f == 1).then_some(150_000));
        assert_eq!((r.next_ns(), r.next_release_ns()), (Some(95_000), Some(100_000)));
        assert_eq!(drain(&mut r, 129_999), [0]);
        assert_eq!(r.pop_due(130_000), Some((150_000, 1)));
    }

    #[test]
    fn no_frame_leaves_before_light_crossed_the_fibre() {
        // Frames of every size into the model, with jitter; each may leave no
        // earlier than its arrival plus the fibre's delay.
        let delay = 72_500;
        let cfg = LinkConfig {
            delay_ns: delay,
            rate_bps: 10_000_000_000,
            queue_limit_bytes: 1 << 30,
            jitter_ns: 30_000,
            loss: 0.0,
            seed: 7,
            credits: None,
        };
        let mut m = LinkModel::new(cfg).unwrap();
        let mut r = Releases::new(50_000);
        let mut now = 0;
        for i in 0..10_000u64 {
            let bytes = [64, 1514, 65_000][i as usize % 3];
            now += [0, 300, 40_000][i as usize % 3];
            let Verdict::Deliver { release_ns } = m.on_packet(now, bytes) else { panic!("dropped") };
            r.hold(release_ns, m.serialisation_ns(bytes), now);
        }
        let mut t = 0;
        while let Some(next) = r.next_ns() {
            t = t.max(next);
            let (_, arrival) = r.pop_due(t).unwrap();
            assert!(t >= arrival + delay, "left {} ns before the fibre's time", arrival + delay - t);
        }
    }
}
