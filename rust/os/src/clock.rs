//! The clocks: CLOCK_MONOTONIC, which every delay is measured on and every
//! namespace of one host shares, and CLOCK_REALTIME, which the kernel stamps
//! received frames on.

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

/// Sleep until CLOCK_MONOTONIC reads `t_ns`.
pub fn sleep_until(t_ns: u64) {
    let ts = libc::timespec {
        tv_sec: (t_ns / 1_000_000_000) as libc::time_t,
        tv_nsec: (t_ns % 1_000_000_000) as libc::c_long,
    };
    // Absolute deadline: EINTR restarts lose nothing, and there is no drift.
    // SAFETY: a valid clock, flags and deadline; no remainder is asked for.
    while unsafe { libc::clock_nanosleep(libc::CLOCK_MONOTONIC, libc::TIMER_ABSTIME, &ts, std::ptr::null_mut()) }
        == libc::EINTR
    {}
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
    fn sleep_until_wakes_at_the_deadline_not_before() {
        let t0 = mono_ns();
        let deadline = t0 + 3_000_000;
        sleep_until(deadline);
        let woke = mono_ns();
        assert!(woke >= deadline, "woke {} ns early", deadline - woke);
        // A deadline already past returns at once.
        sleep_until(t0);
        assert!(mono_ns() - woke < 50_000_000);
    }

    #[test]
    fn timespec_counts_nanoseconds() {
        assert_eq!(timespec_ns(&libc::timespec { tv_sec: 3, tv_nsec: 25 }), 3_000_000_025);
    }
}
