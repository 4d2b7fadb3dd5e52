//! The seed's buffer discipline for the reliable-fabric path: one region
//! allocated when the channel opens, split into 1000 send blocks and 1000
//! receive blocks of 8128 bytes; send blocks come from a free list (take the
//! head, give back on completion), receive blocks are recycled as soon as
//! their content has been handed to the protocol.

use std::sync::{Condvar, Mutex};
use std::time::Duration;

use crate::segment::BLOCK_SIZE;

pub const BLOCKS: usize = 1000;

#[derive(Debug)]
pub struct BlockPool {
    region: Mutex<Vec<u8>>,
    free: Mutex<Vec<usize>>,
    freed: Condvar,
}

impl BlockPool {
    pub fn new() -> Self {
        BlockPool {
            region: Mutex::new(vec![0; 2 * BLOCKS * BLOCK_SIZE]),
            free: Mutex::new((0..BLOCKS).rev().collect()),
            freed: Condvar::new(),
        }
    }

    pub fn free_send_blocks(&self) -> usize {
        self.free.lock().unwrap().len()
    }

    /// Copy a segment into the head of the send free list; None when all blocks are in use.
    pub fn fill_send_block(&self, segment: &[u8]) -> Option<usize> {
        assert!(segment.len() <= BLOCK_SIZE);
        let i = self.free.lock().unwrap().pop()?;
        self.region.lock().unwrap()[i * BLOCK_SIZE..i * BLOCK_SIZE + segment.len()].copy_from_slice(segment);
        Some(i)
    }

    pub fn with_send_block<R>(&self, i: usize, len: usize, f: impl FnOnce(&[u8]) -> R) -> R {
        f(&self.region.lock().unwrap()[i * BLOCK_SIZE..i * BLOCK_SIZE + len])
    }

    /// Completion of a send: the block goes back to the free list.
    pub fn release_send_block(&self, i: usize) {
        self.free.lock().unwrap().push(i);
        self.freed.notify_all();
    }

    /// Wait (bounded) until a send block is free.
    pub fn wait_free(&self, timeout: Duration) -> bool {
        let g = self.free.lock().unwrap();
        let (g, _) = self.freed.wait_timeout_while(g, timeout, |f| f.is_empty()).unwrap();
        !g.is_empty()
    }

    /// Receive block `i` (0..BLOCKS) of the region's second half, to fill and hand over.
    pub fn with_recv_block<R>(&self, i: usize, f: impl FnOnce(&mut [u8]) -> R) -> R {
        let base = (BLOCKS + i % BLOCKS) * BLOCK_SIZE;
        f(&mut self.region.lock().unwrap()[base..base + BLOCK_SIZE])
    }
}

impl Default for BlockPool {
    fn default() -> Self {
        Self::new()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn free_list_hands_out_each_block_once_and_recycles() {
        let p = BlockPool::new();
        let taken: Vec<usize> = (0..BLOCKS).map(|k| p.fill_send_block(&[k as u8; 10]).unwrap()).collect();
        assert_eq!(p.fill_send_block(b"x"), None, "all 1000 blocks are in use");
        let mut sorted = taken.clone();
        sorted.sort();
        sorted.dedup();
        assert_eq!(sorted.len(), BLOCKS);
        assert!(!p.wait_free(Duration::from_millis(1)));
        p.with_send_block(taken[7], 10, |b| assert_eq!(b, &[7u8; 10]));
        p.release_send_block(taken[7]);
        assert_eq!(p.fill_send_block(b"y"), Some(taken[7]), "a completed block is reused first");
    }
}
