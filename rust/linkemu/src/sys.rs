//! The few OS calls both native programs need (the emulator and the probe).
//! Kept apart from `LinkModel`, which does no I/O.

use std::io;
use std::os::fd::RawFd;

/// The parsed command line, or the program's end: usage on stdout for help
/// (status 0), the one-line error on stderr for anything else (status 2).
pub fn args_or_exit<T>(prog: &str, usage: &str, parsed: Result<T, String>) -> T {
    match parsed {
        Ok(a) => a,
        Err(e) if e == "help" => {
            println!("{usage}");
            std::process::exit(0)
        }
        Err(e) => {
            eprintln!("{prog}: {e}");
            std::process::exit(2)
        }
    }
}

/// CLOCK_MONOTONIC in nanoseconds: the one clock every delay is measured on.
pub fn mono_ns() -> u64 {
    let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

pub fn setsockopt<T>(fd: RawFd, level: libc::c_int, name: libc::c_int, val: &T) -> io::Result<()> {
    let r = unsafe {
        libc::setsockopt(
            fd,
            level,
            name,
            val as *const T as *const libc::c_void,
            std::mem::size_of::<T>() as libc::socklen_t,
        )
    };
    if r == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}
