//! A reliable-fabric data stream: a writer thread sends filled blocks and
//! releases them on completion; a reader thread fills receive blocks and
//! recycles each once the protocol has copied it out.

use std::io::{Read, Write};
use std::net::{Shutdown, TcpStream};
use std::sync::mpsc;
use std::sync::Arc;
use std::time::Instant;

use super::{flush, Inner, Path};
use crate::connection::Connection;
use crate::fabric::{BlockPool, BLOCKS};
use crate::segment::{self, BLOCK_SIZE, HEADER_LEN};

/// Blocks the fabric path moves per write, and at most per read.
const FABRIC_BATCH: usize = 64;

/// Hand what `conn` may send now to the stream's writer, as long as send blocks are free.
pub(super) fn transmit(tx: &mpsc::Sender<(usize, usize)>, pool: &BlockPool, conn: &mut Connection, now: Instant) {
    while pool.free_send_blocks() > 0 {
        let Some(d) = conn.poll_transmit(now) else { break };
        let i = pool.fill_send_block(&d).unwrap();
        if tx.send((i, d.len())).is_err() {
            pool.release_send_block(i);
        }
    }
}

/// Make `stream` the data path of `peer`'s session `session` (if that is still its session)
/// and start its writer and reader threads.
pub(super) fn attach(inner: Arc<Inner>, peer: u32, session: u64, stream: TcpStream) {
    let (tx, rx) = mpsc::channel::<(usize, usize)>();
    let pool = Arc::new(BlockPool::new());
    let (pw, pr) = (pool.clone(), pool.clone());
    let writer = stream.try_clone().expect("clone fabric stream");
    {
        let mut st = inner.state.lock().unwrap();
        if let Some(p) = st.peers.get_mut(&peer) {
            if p.conn.session() == session {
                p.path = Path::Fabric(tx, pool);
                flush(&inner, p);
            }
        }
    }
    inner.changed.notify_all();
    let (iw, ir) = (inner.clone(), inner.clone());
    let hw = std::thread::spawn(move || {
        let mut w = &writer;
        let mut out = Vec::with_capacity(FABRIC_BATCH * BLOCK_SIZE);
        while let Ok(first) = rx.recv() {
            // Every block already queued leaves in one write: a syscall and a
            // state-lock round per batch, not per 8 KB block.
            let mut batch = vec![first];
            batch.extend(rx.try_iter().take(FABRIC_BATCH - 1));
            out.clear();
            for &(i, len) in &batch {
                // The region's lock covers copies only, never a blocking write.
                pw.with_send_block(i, len, |b| out.extend_from_slice(b));
            }
            let ok = w.write_all(&out).is_ok();
            // Completion: the blocks return to the free list; more may now leave.
            for &(i, _) in &batch {
                pw.release_send_block(i);
            }
            if !ok {
                break;
            }
            let mut st = iw.state.lock().unwrap();
            if let Some(p) = st.peers.get_mut(&peer) {
                flush(&iw, p);
            }
        }
        let _ = writer.shutdown(Shutdown::Both);
    });
    let hr = std::thread::spawn(move || {
        let mut r = &stream;
        let mut next = 0usize;
        // Reads take whatever the stream holds (up to FABRIC_BATCH blocks); the
        // complete segments in it are handed over under one lock acquisition.
        let mut wire = vec![0u8; FABRIC_BATCH * BLOCK_SIZE];
        let mut have = 0;
        let mut filled = Vec::with_capacity(FABRIC_BATCH);
        loop {
            match r.read(&mut wire[have..]) {
                Ok(0) | Err(_) => break,
                Ok(n) => have += n,
            }
            let mut at = 0;
            while let Some(len) = segment::payload_len(&wire[at..have]).map(|l| HEADER_LEN + l) {
                if len > BLOCK_SIZE {
                    return; // not our framing: drop the stream
                }
                if at + len > have {
                    break;
                }
                // The region's lock covers copies only, never a blocking read.
                pr.with_recv_block(next, |b| b[..len].copy_from_slice(&wire[at..at + len]));
                filled.push((next, len));
                next = (next + 1) % BLOCKS;
                at += len;
            }
            wire.copy_within(at..have, 0);
            have -= at;
            if filled.is_empty() {
                continue;
            }
            let mut st = ir.state.lock().unwrap();
            if let Some(p) = st.peers.get_mut(&peer) {
                let now = Instant::now();
                for &(i, len) in &filled {
                    pr.with_recv_block(i, |b| p.conn.handle_segment(now, &b[..len]));
                }
                flush(&ir, p);
            }
            drop(st);
            filled.clear(); // the blocks are reposted
            ir.changed.notify_all();
        }
    });
    inner.threads.lock().unwrap().extend([hw, hr]);
}
