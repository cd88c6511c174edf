//! Address pools: the fixed, floating and Octavia VIP addresses. Its own leaf so
//! Octavia's state, which `state::Cloud` holds, can own its VIP pool without importing
//! `state.rs`.

use std::collections::HashSet;
use std::net::{IpAddr, Ipv4Addr};

use crate::error::AdminError;

/// A sequential allocator over one /16, skipping addresses in use.
#[derive(Debug, Clone)]
pub(crate) struct Pool {
    name: &'static str,
    base: u32,
    next: u32,
    last: u32,
    pub(crate) used: HashSet<IpAddr>,
}

impl Pool {
    pub fn new(name: &'static str, first: Ipv4Addr, last: Ipv4Addr) -> Self {
        Self {
            name,
            base: u32::from(first),
            next: u32::from(first),
            last: u32::from(last),
            used: HashSet::new(),
        }
    }

    /// Marks `ip` used; false if it already was.
    pub fn take(&mut self, ip: IpAddr) -> bool {
        self.used.insert(ip)
    }

    pub fn release(&mut self, ip: &IpAddr) {
        self.used.remove(ip);
    }

    /// Starts allocating `offset` addresses past the first one (the pool still wraps
    /// around to its first address when it reaches the end).
    pub fn skip(&mut self, offset: u32) {
        self.next = self.base.saturating_add(offset).min(self.last);
    }

    pub fn allocate(&mut self) -> Result<IpAddr, AdminError> {
        let span = self.last - self.base + 1;
        for _ in 0..span {
            let ip = IpAddr::V4(Ipv4Addr::from(self.next));
            self.next = if self.next >= self.last {
                self.base
            } else {
                self.next + 1
            };
            if self.used.insert(ip) {
                return Ok(ip);
            }
        }
        Err(AdminError::Exhausted(self.name))
    }
}
