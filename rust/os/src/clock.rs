//! The clocks: CLOCK_MONOTONIC, which every delay is measured on and every
//! namespace of one host shares, and CLOCK_REALTIME, which the kernel stamps
//! received frames on; a wait for sockets that ends at an instant.

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

/// Waits until one of `fds` is readable or CLOCK_MONOTONIC reads `until_ns`
/// (if given), at most `max_ms`; which are readable, in `ready`. The wait's own
/// timeout serves as the timer (ppoll's, with the thread's slack: none for a
/// real-time thread), so a wake-up costs one system call, not a timerfd's three.
/// It may end late, never before `until_ns`, unless a descriptor is readable.
pub fn wait_readable(
    fds: &[std::os::fd::RawFd],
    until_ns: Option<u64>,
    max_ms: u32,
    ready: &mut [bool],
) -> std::io::Result<()> {
    let mut polls: [libc::pollfd; 4] = [libc::pollfd { fd: -1, events: 0, revents: 0 }; 4];
    assert!(fds.len() <= polls.len() && ready.len() >= fds.len());
    for (p, &fd) in polls.iter_mut().zip(fds) {
        *p = libc::pollfd { fd, events: libc::POLLIN, revents: 0 };
    }
    let max_ns = max_ms as u64 * 1_000_000;
    // Relative to an instant read before the call: the kernel's count starts later, so it ends late, never early.
    let wait_ns = until_ns.map_or(max_ns, |t| t.saturating_sub(mono_ns()).min(max_ns));
    let timeout = libc::timespec {
        tv_sec: (wait_ns / 1_000_000_000) as libc::time_t,
        tv_nsec: (wait_ns % 1_000_000_000) as libc::c_long,
    };
    // SAFETY: `fds.len()` initialised pollfds, a valid timeout, no signal mask.
    let r = unsafe { libc::ppoll(polls.as_mut_ptr(), fds.len() as libc::nfds_t, &timeout, std::ptr::null()) };
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
    fn a_wait_ends_at_its_instant_not_before_or_when_a_descriptor_is_readable() {
        let (rx, tx) =
            (std::net::UdpSocket::bind("127.0.0.1:0").unwrap(), std::net::UdpSocket::bind("127.0.0.1:0").unwrap());
        let fds = [std::os::fd::AsRawFd::as_raw_fd(&rx)];
        let mut ready = [true];
        let deadline = mono_ns() + 2_000_000;
        wait_readable(&fds, Some(deadline), 1_000, &mut ready).unwrap();
        let woke = mono_ns();
        assert!(!ready[0], "nothing to read");
        assert!(woke >= deadline, "woke {} ns early", deadline - woke);
        wait_readable(&fds, Some(mono_ns() - 1), 1_000, &mut ready).unwrap();
        assert!(!ready[0], "an instant already past ends the wait at once");
        // No instant: the cap ends it.
        let start = mono_ns();
        wait_readable(&fds, None, 5, &mut ready).unwrap();
        assert!(!ready[0] && mono_ns() - start >= 5_000_000);
        tx.send_to(b"x", rx.local_addr().unwrap()).unwrap();
        let start = mono_ns();
        wait_readable(&fds, Some(start + 1_000_000_000), 1_000, &mut ready).unwrap();
        assert!(ready[0] && mono_ns() - start < 500_000_000, "a readable descriptor ends the wait before its instant");
    }

    #[test]
    fn timespec_counts_nanoseconds() {
        assert_eq!(timespec_ns(&libc::timespec { tv_sec: 3, tv_nsec: 25 }), 3_000_000_025);
    }
}
