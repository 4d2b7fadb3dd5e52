//! Forwards raw Ethernet frames between two interfaces, both ways, through a
//! `LinkModel` per direction. This is the only path between two sites, so it
//! plays the long-haul fibre: delay, bottleneck rate, queue, jitter, loss.
//!
//! - [`args`]: the command line;
//! - [`packet`]: the packet socket on each interface;
//! - [`loops`]: per direction one thread: receive in batches, timestamp, ask
//!   the model, send what is due together, wait on the socket and one timer;
//! - [`control`]: the control socket's thread: live changes and counters.
//!
//! The main thread only waits for SIGTERM/SIGINT, then writes the counters and exits.

mod args;
mod control;
mod loops;
mod packet;

use std::io::{self, Write};
use std::process::exit;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use geofed_linkemu::LinkModel;
use geofed_os::args_or_exit;
use geofed_os::sched::{fine_timer_slack, hold_cpu_latency};

use args::{parse_args, USAGE};
use control::{Inbox, WayControl};
use loops::{dir_json, spawn_direction};
use packet::open_packet_socket;

const PROG: &str = "geofed-linkemu";

/// Opt-in PM QoS request, held until the process exits (the kernel drops it
/// when the fd closes). On a KVM guest a halted idle vCPU takes ~50-150 us to
/// wake for a packet, which lands on every RTT sample of an otherwise idle
/// link; 0 keeps idle vCPUs polling instead (costs host CPU, machine-wide).
fn request_cpu_latency(us: u64) -> Option<std::fs::File> {
    match hold_cpu_latency(us as i32) {
        Ok(f) => Some(f),
        Err(e) => {
            eprintln!("{PROG}: warning: --cpu-dma-latency-us: /dev/cpu_dma_latency: {e}; continuing without it");
            None
        }
    }
}

fn main() {
    let argv: Vec<String> = std::env::args().skip(1).collect();
    let args = args_or_exit(PROG, USAGE, parse_args(&argv));
    // Distinct PRNG streams per direction, both derived from the one seed.
    let model_ab = LinkModel::new(args.a_to_b.config(args.seed, &args.b_to_a));
    let model_ba = LinkModel::new(args.b_to_a.config(args.seed ^ 0x5DEE_CE66_D1CE_F00D, &args.a_to_b));
    let (model_ab, model_ba) = match (model_ab, model_ba) {
        (Ok(a), Ok(b)) => (a, b),
        (Err(e), _) | (_, Err(e)) => {
            eprintln!("{PROG}: invalid link config: {e}");
            exit(2)
        }
    };

    // Block the stop signals before any thread exists so all inherit the
    // mask and only sigwait() below sees them: no async-signal-safety issues.
    // SAFETY: an all-zero sigset_t is emptied and filled by the calls meant for it.
    let mut sigs: libc::sigset_t = unsafe { std::mem::zeroed() };
    unsafe {
        libc::sigemptyset(&mut sigs);
        libc::sigaddset(&mut sigs, libc::SIGTERM);
        libc::sigaddset(&mut sigs, libc::SIGINT);
        libc::pthread_sigmask(libc::SIG_BLOCK, &sigs, std::ptr::null_mut());
    }
    // New threads copy the creator's slack; set it early for all of them.
    fine_timer_slack();

    let (fd_a, fd_b) = match (open_packet_socket("--if-a", &args.if_a), open_packet_socket("--if-b", &args.if_b)) {
        (Ok(a), Ok(b)) => (a, b),
        (Err(e), _) | (_, Err(e)) => {
            eprintln!("{PROG}: {e}");
            exit(1)
        }
    };

    let _pm_qos = args.cpu_dma_latency_us.and_then(request_cpu_latency);

    let (inbox_ab, replies_ab) = Inbox::new();
    let (inbox_ba, replies_ba) = Inbox::new();
    if let Some(path) = &args.control {
        let ways = [
            WayControl {
                name: "a_to_b",
                inbox: inbox_ab.clone(),
                replies: replies_ab,
                config: model_ab.config().clone(),
            },
            WayControl {
                name: "b_to_a",
                inbox: inbox_ba.clone(),
                replies: replies_ba,
                config: model_ba.config().clone(),
            },
        ];
        if let Err(e) = control::spawn(path, ways) {
            eprintln!("{PROG}: {e}");
            exit(1)
        }
    }

    let stop = Arc::new(AtomicBool::new(false));
    let ab = spawn_direction("a_to_b", fd_a, fd_b, model_ab, inbox_ab, stop.clone());
    let ba = spawn_direction("b_to_a", fd_b, fd_a, model_ba, inbox_ba, stop.clone());

    {
        let mut out = io::stdout().lock();
        let _ = writeln!(out, "ready");
        let _ = out.flush();
    }

    let mut sig: libc::c_int = 0;
    // SAFETY: the set built above and an int to receive the signal number.
    while unsafe { libc::sigwait(&sigs, &mut sig) } != 0 {}

    stop.store(true, Ordering::Relaxed);
    // The threads look at the flag at least every STOP_POLL_MS; joining gives final, consistent counters.
    let (c_ab, tx_ab) = ab.join().unwrap_or_default();
    let (c_ba, tx_ba) = ba.join().unwrap_or_default();
    if let Some(path) = &args.stats {
        let json = format!("{{\"a_to_b\": {}, \"b_to_a\": {}}}\n", dir_json(&c_ab, &tx_ab), dir_json(&c_ba, &tx_ba));
        if let Err(e) = std::fs::write(path, json) {
            eprintln!("{PROG}: --stats {path}: {e}");
            exit(1);
        }
    }
    if let Some(path) = &args.control {
        let _ = std::fs::remove_file(path);
    }
    // Frames still held for release are simply lost, as on a cut fibre.
    exit(0)
}
