//! Which /24 of the 127/8 pools a mock cloud takes (its nodes', load balancers' and public
//! addresses), unique on the machine for as long as the cloud runs.
//!
//! Why across processes: shards run as processes side by side (`run --shard`, `certify
//! --shards`, `bench matrix`), and so do a benchmark and `cargo test`. A per-process
//! counter let two processes hand the same block to two live clouds: one case's kube-proxy
//! then failed to bind its node's address, or a load balancer's traffic reached another
//! case's node. A block is held by an advisory lock (`flock`) on a file named after it in
//! the temporary directory; the kernel drops the lock when the holder exits, even on
//! `kill -9`, so a crashed run never leaks one.

use std::fs::{File, TryLockError};
use std::path::PathBuf;
use std::sync::OnceLock;
use std::sync::atomic::{AtomicU8, Ordering};

/// A block and the lock that keeps it ours; dropping it frees the block.
#[derive(Debug)]
pub(crate) struct AddressBlock {
    pub(crate) index: u8,
    /// `None` when no lock could be taken (an unwritable temporary directory, or every
    /// block held): the block is then as unique as the per-process sequence makes it.
    _lock: Option<File>,
}

fn lock_dir() -> PathBuf {
    std::env::temp_dir().join("ccm-conformance-address-blocks")
}

/// The next free block, starting from a per-process sequence (which begins at a point
/// taken from the process id, so processes usually find a free block at the first try).
pub(crate) fn take() -> AddressBlock {
    static NEXT: OnceLock<AtomicU8> = OnceLock::new();
    let next = NEXT.get_or_init(|| AtomicU8::new((std::process::id() % 251) as u8));
    let dir = lock_dir();
    let dir_ready = std::fs::create_dir_all(&dir).is_ok();
    let first = next.fetch_add(1, Ordering::Relaxed);
    if dir_ready {
        let mut index = first;
        for _ in 0..=u8::MAX {
            if let Some(lock) = try_lock(&dir, index) {
                return AddressBlock {
                    index,
                    _lock: Some(lock),
                };
            }
            index = next.fetch_add(1, Ordering::Relaxed);
        }
    }
    AddressBlock {
        index: first,
        _lock: None,
    }
}

fn try_lock(dir: &std::path::Path, index: u8) -> Option<File> {
    let file = std::fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(dir.join(format!("{index}.lock")))
        .ok()?;
    match file.try_lock() {
        Ok(()) => Some(file),
        Err(TryLockError::WouldBlock) | Err(TryLockError::Error(_)) => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_held_block_is_not_handed_out_again_until_dropped() {
        let held: Vec<AddressBlock> = (0..8).map(|_| take()).collect();
        let mut indexes: Vec<u8> = held.iter().map(|b| b.index).collect();
        indexes.sort();
        indexes.dedup();
        assert_eq!(indexes.len(), 8, "distinct while held");
        assert!(held.iter().all(|b| b._lock.is_some()));
        // Another open of a held block's file cannot lock it (as another process cannot).
        assert!(try_lock(&lock_dir(), held[0].index).is_none());
        let freed = held[0].index;
        drop(held);
        assert!(try_lock(&lock_dir(), freed).is_some());
    }
}
