//! Wake-up latency: how late a sleeping thread runs again is the error of
//! every emulated delay and every RTT sample.

use std::fs::File;
use std::io::{self, Write};

/// Timer slack of 1 ns for the calling thread, and for the threads it creates
/// from now on (they copy their creator's): timers fire when asked, not up to
/// 50 us later as the default slack allows.
pub fn fine_timer_slack() {
    // SAFETY: PR_SET_TIMERSLACK takes one integer argument.
    unsafe { libc::prctl(libc::PR_SET_TIMERSLACK, 1 as libc::c_ulong, 0, 0, 0) };
}

/// Fine timer slack and SCHED_FIFO at `priority` for the calling thread.
/// Err when the scheduling class is refused (no CAP_SYS_NICE): the thread
/// keeps running, with worse latency tails.
pub fn set_realtime(priority: libc::c_int) -> io::Result<()> {
    fine_timer_slack();
    let p = libc::sched_param { sched_priority: priority };
    // SAFETY: the calling thread and a valid sched_param.
    let r = unsafe { libc::pthread_setschedparam(libc::pthread_self(), libc::SCHED_FIFO, &p) };
    if r == 0 {
        Ok(())
    } else {
        Err(io::Error::from_raw_os_error(r))
    }
}

/// A PM QoS request for a CPU wake-up latency of at most `us` microseconds,
/// machine-wide, held while the file stays open (the kernel drops it when the
/// descriptor closes). 0 keeps idle CPUs polling instead of halting.
pub fn hold_cpu_latency(us: i32) -> io::Result<File> {
    let mut f = std::fs::OpenOptions::new().write(true).open("/dev/cpu_dma_latency")?;
    f.write_all(&us.to_ne_bytes())?;
    Ok(f)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn realtime_sets_fifo_and_fine_slack_or_says_why_not() {
        std::thread::spawn(|| {
            let r = set_realtime(10);
            // SAFETY: PR_GET_TIMERSLACK takes no argument and returns the slack.
            let slack = unsafe { libc::prctl(libc::PR_GET_TIMERSLACK, 0, 0, 0, 0) };
            // Real-time threads have no slack at all on recent kernels (6.7 on).
            assert!((0..=1).contains(&slack), "timer slack {slack} ns");
            let mut policy = 0;
            let mut p = libc::sched_param { sched_priority: 0 };
            // SAFETY: the calling thread and out-parameters to fill.
            assert_eq!(unsafe { libc::pthread_getschedparam(libc::pthread_self(), &mut policy, &mut p) }, 0);
            match r {
                Ok(()) => assert_eq!((policy, p.sched_priority), (libc::SCHED_FIFO, 10)),
                Err(e) => {
                    assert_eq!(e.raw_os_error(), Some(libc::EPERM), "{e}");
                    assert_eq!((policy, slack), (libc::SCHED_OTHER, 1), "fine slack even when the class is refused");
                }
            }
        })
        .join()
        .unwrap();
    }
}
