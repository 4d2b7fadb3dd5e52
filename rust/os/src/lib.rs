//! What geofed's native programs (the link emulator, the probe, P2PSAP's I/O
//! layer) ask of Linux, in one place and nowhere else, as quinn keeps
//! `quinn-udp` apart from its protocol:
//!
//! - [`sockopt`]: typed setsockopt/getsockopt and socket buffers beyond the sysctl caps;
//! - [`msg`]: recvmsg, and frames received and sent in batches (recvmmsg, sendmmsg), on raw descriptors; the control messages a receive carries;
//! - [`udp`]: UDP segmentation offload both ways (GSO sends, GRO reads) and the path MTU;
//! - [`clock`]: the monotonic and realtime clocks, a timer for an instant, waiting on descriptors;
//! - [`sched`]: real-time scheduling and wake-up latency.
//!
//! Also the programs' one exit convention for their command lines, [`args_or_exit`].

pub mod clock;
pub mod msg;
pub mod sched;
pub mod sockopt;
pub mod udp;

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
