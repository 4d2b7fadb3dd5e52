//! The Ethernet stacks' data channels: one UDP socket per endpoint. Runs of
//! segments leave in one GSO send and arrive as one GRO read; a thread
//! receives, routes by session id and fires the retransmission timers.

use std::io;
use std::net::{SocketAddr, UdpSocket};
use std::os::fd::AsRawFd;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Instant;

use geofed_os::sockopt::{grow_recv_buffer, grow_send_buffer};
use geofed_os::udp::{enable_gro, recv_segments, send_to};

use super::{flush, Inner, TICK};
use crate::connection::Connection;

/// Largest UDP payload, the limit of one GSO send or GRO read.
const MAX_DATAGRAM: usize = 65507;
/// Most segments per GSO send (the kernel's UDP_MAX_SEGMENTS is 64).
const GSO_SEGMENTS: usize = 64;
/// Super-datagrams read per lock acquisition before timers and transmission run.
const RECV_BATCH: usize = 64;
/// A window of a long link is megabytes; the default 208 KiB socket buffers would
/// drop bursts before the protocol sees them. Root may exceed rmem_max (FORCE).
const SOCKET_BUFFER: libc::c_int = 16 << 20;

/// The endpoint's UDP socket on `host` (an ephemeral port), reads bounded by TICK.
pub(super) fn bind(host: &str) -> io::Result<UdpSocket> {
    let udp = UdpSocket::bind((host, 0))?;
    udp.set_read_timeout(Some(TICK))?;
    let _ = grow_recv_buffer(udp.as_raw_fd(), SOCKET_BUFFER);
    let _ = grow_send_buffer(udp.as_raw_fd(), SOCKET_BUFFER);
    // Without GRO, one datagram per read.
    let _ = enable_gro(&udp);
    Ok(udp)
}

/// Send what `conn` may send now to `addr`, as runs built in the peer's
/// reusable buffer `run`: datagrams of one size (only the last may be
/// shorter), at most GSO_SEGMENTS and MAX_DATAGRAM.
pub(super) fn transmit(inner: &Inner, addr: &SocketAddr, conn: &mut Connection, run: &mut Vec<u8>, now: Instant) {
    run.clear();
    let (mut size, mut count, mut open) = (0, 0, false);
    loop {
        let start = run.len();
        let Some(len) = conn.transmit_into(now, run) else { break };
        let joins = open && len <= size && run.len() <= MAX_DATAGRAM && count < GSO_SEGMENTS;
        if count > 0 && !joins {
            send_run(inner, addr, &run[..start], size);
            run.drain(..start);
            count = 0;
        }
        if count == 0 {
            size = len;
            open = inner.gso.load(Ordering::Relaxed);
        } else if len < size {
            open = false;
        }
        count += 1;
    }
    if count > 0 {
        send_run(inner, addr, run, size);
    }
}

/// Send one run of datagrams, `size` bytes each but the last (which may be
/// shorter), laid out back to back in `run`: one GSO send where the path
/// takes it, else one datagram each.
fn send_run(inner: &Inner, addr: &SocketAddr, run: &[u8], size: usize) {
    if run.len() > size {
        let Err(e) = send_to(&inner.udp, addr, run, Some(size as u16)) else { return };
        if !matches!(
            e.raw_os_error(),
            Some(libc::EIO) | Some(libc::EINVAL) | Some(libc::ENOPROTOOPT) | Some(libc::EOPNOTSUPP)
        ) {
            return; // loss to the protocol above, as on a wire
        }
        // No segmentation offload on this path: resend this run one by one.
        inner.gso.store(false, Ordering::Relaxed);
    }
    // A failed send is loss to the protocol above, as on a wire.
    for d in run.chunks(size) {
        let _ = send_to(&inner.udp, addr, d, None);
    }
}

/// One read: the bytes and the size of the datagrams they hold, or None on
/// timeout / nothing pending (`wait` false: do not block).
fn recv_datagrams(udp: &UdpSocket, buf: &mut [u8], wait: bool) -> Option<(usize, usize)> {
    recv_segments(udp, buf, wait).ok().filter(|&(n, _)| n > 0)
}

/// The UDP thread: receive and route by session, then acknowledge, fire due
/// timers and transmit, until the endpoint closes.
pub(super) fn drive(inner: Arc<Inner>) {
    let mut buf = vec![0u8; 65536];
    while !inner.closed.load(Ordering::SeqCst) {
        // Block (up to TICK) without the lock, then take whatever else is queued.
        let mut got = recv_datagrams(&inner.udp, &mut buf, true);
        let mut st = inner.state.lock().unwrap();
        let mut reads = 0;
        while let Some((n, size)) = got {
            let now = Instant::now();
            for d in buf[..n].chunks(size) {
                let session = (d.len() >= 12).then(|| u64::from_be_bytes(d[4..12].try_into().unwrap()));
                match session.and_then(|s| st.peers.values_mut().find(|p| p.conn.session() == s)) {
                    Some(p) => p.conn.handle_segment(now, d),
                    None => {
                        inner.unknown_session.fetch_add(1, Ordering::Relaxed);
                    }
                }
            }
            reads += 1;
            got = if reads < RECV_BATCH { recv_datagrams(&inner.udp, &mut buf, false) } else { None };
        }
        // One ACK and one transmission round per batch, not per segment.
        let now = Instant::now();
        for p in st.peers.values_mut() {
            p.conn.flush_ack();
            if p.conn.poll_timeout().is_some_and(|t| t <= now) {
                p.conn.handle_timeout(now);
            }
            flush(&inner, p);
        }
        drop(st);
        inner.changed.notify_all();
    }
}
