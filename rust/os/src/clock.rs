//! The clocks: CLOCK_MONOTONIC, which every delay is measured on and every
//! namespace of one host shares, and CLOCK_REALTIME, which the kernel stamps
//! received frames on; a timer to wait for an instant beside sockets.

/// Nanoseconds of a `timespec`.
pub fn timespec_ns(ts: &libc::timespec) -> u64 {
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

#[inline]
fn now_ns(clock: libc::clockid_t) -> u64 {
    let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: a valid clock id and a timespec to fill.
    unsafe { libc::clock_gettime(clock, &mut ts) };
    timespec_ns(&ts)
}

/// CLOCK_MONOTONIC in nanoseconds: the one clock every delay is measured on.
pub fn mono_ns() -> u64 {
    now_ns(libc::CLOCK_MONOTONIC)
}

/// CLOCK_REALTIME in nanoseconds.
pub fn realtime_ns() -> u64 {
    now_ns(libc::CLOCK_REALTIME)
}

/// CLOCK_MONOTONIC and CLOCK_REALTIME at one instant, for translating kernel
/// stamps. Two reads apart by a preemption (a busy host, a vCPU descheduled)
/// would move the translation, and so the release, that much early: a frame
/// then left before its fibre delay (9 us seen under CI load). Bracketing the
/// monotonic read between two realtime reads bounds the error by half the
/// bracket; the narrowest of a few tries is kept.
pub fn clocks_now() -> (u64, u64) {
    const TIGHT_NS: u64 = 1_000;
    let mut best = (0, 0, u64::MAX);
    for _ in 0..8 {
        let r1 = realtime_ns();
        let m = mono_ns();
        let r2 = realtime_ns();
        let width = r2.saturating_sub(r1);
        if width < best.2 {
            best = (m, r1 + width / 2, width);
        }
        if width <= TIGHT_NS {
            break;
        }
    }
    (best.0, best.1)
}

/// A timer on CLOCK_MONOTONIC set to absolute instants (timerfd): a
/// descriptor a thread can wait on together with its sockets.
pub struct Timer {
    fd: std::os::fd::OwnedFd,
}

impl Timer {
    pub fn new() -> std::io::Result<Timer> {
        use std::os::fd::FromRawFd;
        // SAFETY: plain flags; the descriptor returned is ours alone.
        let fd = unsafe { libc::timerfd_create(libc::CLOCK_MONOTONIC, libc::TFD_NONBLOCK | libc::TFD_CLOEXEC) };
        if fd < 0 {
            return Err(std::io::Error::last_os_error());
        }
        // SAFETY: a fresh descriptor nobody else owns.
        Ok(Timer { fd: unsafe { std::os::fd::OwnedFd::from_raw_fd(fd) } })
    }

    pub fn fd(&self) -> std::os::fd::RawFd {
        use std::os::fd::AsRawFd;
        self.fd.as_raw_fd()
    }

    /// Fires once when CLOCK_MONOTONIC reads `t_ns` (at once if that is past); None disarms it.
    pub fn set(&self, t_ns: Option<u64>) {
        // An all-zero it_value disarms; an instant already past is 1 ns, which fires at once.
        let t = t_ns.map_or(0, |t| t.max(1));
        let at = libc::timespec {
            tv_sec: (t / 1_000_000_000) as libc::time_t,
            tv_nsec: (t % 1_000_000_000) as libc::c_long,
        };
        let spec = libc::itimerspec { it_interval: libc::timespec { tv_sec: 0, tv_nsec: 0 }, it_value: at };
        // SAFETY: our descriptor and a valid itimerspec; the old value is not asked for.
        unsafe { libc::timerfd_settime(self.fd(), libc::TFD_TIMER_ABSTIME, &spec, std::ptr::null_mut()) };
    }

    /// Whether it fired since last asked (and clears that).
    pub fn fired(&self) -> bool {
        let mut n = 0u64;
        // SAFETY: reads 8 bytes into a u64; non-blocking.
        unsafe { libc::read(self.fd(), &mut n as *mut u64 as *mut libc::c_void, 8) == 8 && n > 0 }
    }
}

/// Waits up to `timeout_ms` until one of `fds` is readable; which are, in `ready`.
pub fn wait_readable(fds: &[std::os::fd::RawFd], timeout_ms: i32, ready: &mut [bool]) -> std::io::Result<()> {
    let mut polls: [libc::pollfd; 4] = [libc::pollfd { fd: -1, events: 0, revents: 0 }; 4];
    assert!(fds.len() <= polls.len() && ready.len() >= fds.len());
    for (p, &fd) in polls.iter_mut().zip(fds) {
        *p = libc::pollfd { fd, events: libc::POLLIN, revents: 0 };
    }
    // SAFETY: `fds.len()` initialised pollfds.
    let r = unsafe { libc::poll(polls.as_mut_ptr(), fds.len() as libc::nfds_t, timeout_ms) };
    if r < 0 {
        return Err(std::io::Error::last_os_error());
    }
    for (p, r) in polls.iter().zip(ready.iter_mut()).take(fds.len()) {
        *r = p.revents != 0;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_two_clocks_are_read_at_one_instant() {
        // Their difference is constant between NTP adjustments: pairs read far apart
        // agree within a microsecond or two, however the thread was scheduled.
        let offsets: Vec<i128> = (0..1000)
            .map(|_| {
                let (m, r) = clocks_now();
                r as i128 - m as i128
            })
            .collect();
        let (lo, hi) = (offsets.iter().min().unwrap(), offsets.iter().max().unwrap());
        assert!(hi - lo <= 2_000, "offset spread {} ns", hi - lo);
    }

    #[test]
    fn a_timer_fires_at_its_instant_not_before_and_wakes_a_wait() {
        let timer = Timer::new().unwrap();
        let mut ready = [false];
        wait_readable(&[timer.fd()], 0, &mut ready).unwrap();
        assert!(!ready[0] && !timer.fired(), "an unset timer never fires");
        let deadline = mono_ns() + 2_000_000;
        timer.set(Some(deadline));
        wait_readable(&[timer.fd()], 1_000, &mut ready).unwrap();
        let woke = mono_ns();
        assert!(ready[0] && timer.fired());
        assert!(woke >= deadline, "woke {} ns early", deadline - woke);
        assert!(!timer.fired(), "fired once");
        timer.set(Some(mono_ns() + 1_000_000));
        timer.set(None);
        wait_readable(&[timer.fd()], 5, &mut ready).unwrap();
        assert!(!ready[0], "disarmed");
    }

    #[test]
    fn timespec_counts_nanoseconds() {
        assert_eq!(timespec_ns(&libc::timespec { tv_sec: 3, tv_nsec: 25 }), 3_000_000_025);
    }
}
