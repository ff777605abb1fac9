//! `-m recent`'s tables in the kernel (`parapet_recent`,
//! `bpf/lib/stateful.h`), read and written the way
//! `/proc/net/xt_recent/NAME` is: list, `+ADDR` (add, or record one more
//! hit now), `-ADDR`, `/` (flush). Tables are named by their id
//! (`parapet_model::table_id` of the name).

use crate::error::{Error, Result};
use crate::load::Dataplane;
use aya::maps::HashMap;
use std::net::IpAddr;

/// Time stamps per address (`PARAPET_RECENT_STAMPS`).
pub const RECENT_STAMPS: usize = 256;

/// `struct parapet_recent_key`.
#[repr(C)]
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
struct RecentKey {
    table: u32,
    family: u32,
    addr: [u8; 16],
}

/// `struct parapet_recent_entry`.
#[repr(C)]
#[derive(Copy, Clone, Debug)]
struct RecentValue {
    stamps: [u64; RECENT_STAMPS],
    index: u32,
    nstamps: u32,
    ttl: u32,
    reserved: u32,
}

// SAFETY: plain `repr(C)` integers with no padding (24 and 2064 bytes), as
// the BPF program lays them out.
unsafe impl aya::Pod for RecentKey {}
// SAFETY: as above.
unsafe impl aya::Pod for RecentValue {}

/// One address of a table, as `/proc/net/xt_recent/NAME` shows it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RecentAddress {
    /// The (masked) address.
    pub addr: IpAddr,
    /// Jiffies of the newest hit.
    pub last_seen: u64,
    /// Where the next stamp goes (`oldest_pkt` in `/proc`).
    pub index: u32,
    /// The TTL recorded with the newest `--set`/`--update` (`ttl:` in
    /// `/proc`; 0 for an address added by hand).
    pub ttl: u8,
    /// Jiffies of the hits kept, in ring order.
    pub stamps: Vec<u64>,
}

fn key_of(table: u32, addr: IpAddr) -> RecentKey {
    let mut a = [0u8; 16];
    let family = match addr {
        IpAddr::V4(v4) => {
            a[12..].copy_from_slice(&v4.octets());
            4
        }
        IpAddr::V6(v6) => {
            a = v6.octets();
            6
        }
    };
    RecentKey {
        table,
        family,
        addr: a,
    }
}

fn addr_of(k: &RecentKey) -> Option<IpAddr> {
    match k.family {
        4 => Some(IpAddr::from(<[u8; 4]>::try_from(&k.addr[12..]).ok()?)),
        6 => Some(IpAddr::from(k.addr)),
        _ => None,
    }
}

impl Dataplane {
    fn recent_map(&mut self) -> Result<HashMap<&mut aya::maps::MapData, RecentKey, RecentValue>> {
        let map = self
            .ebpf
            .map_mut("parapet_recent")
            .ok_or(Error::Missing("map parapet_recent"))?;
        Ok(HashMap::try_from(map)?)
    }

    /// The addresses of table `table` (at most `max`).
    pub fn recent_list(&mut self, table: u32, max: usize) -> Result<Vec<RecentAddress>> {
        let map = self.recent_map()?;
        let mut out = Vec::new();
        for item in map.iter() {
            let Ok((k, v)) = item else { continue };
            if k.table != table || out.len() >= max {
                continue;
            }
            let Some(addr) = addr_of(&k) else { continue };
            let n = (v.nstamps as usize).min(RECENT_STAMPS);
            let newest = (v.index as usize + RECENT_STAMPS - 1) % RECENT_STAMPS;
            out.push(RecentAddress {
                addr,
                last_seen: v.stamps[newest],
                index: v.index,
                ttl: v.ttl as u8,
                stamps: v.stamps[..n].to_vec(),
            });
        }
        out.sort_by_key(|a| a.addr);
        Ok(out)
    }

    /// `+ADDR`: adds the address with one hit at jiffy `now`, or records
    /// one more hit (`recent_entry_init` / `recent_entry_update`). True
    /// when it was new.
    pub fn recent_add(&mut self, table: u32, addr: IpAddr, now: u64) -> Result<bool> {
        let mut map = self.recent_map()?;
        let k = key_of(table, addr);
        let (v, new) = match map.get(&k, 0) {
            Ok(mut v) => {
                let i = v.index as usize & (RECENT_STAMPS - 1);
                v.stamps[i] = now;
                v.index = i as u32 + 1;
                v.nstamps = v.nstamps.max(v.index);
                (v, false)
            }
            Err(_) => {
                let mut v = RecentValue {
                    stamps: [0; RECENT_STAMPS],
                    index: 1,
                    nstamps: 1,
                    ttl: 0,
                    reserved: 0,
                };
                v.stamps[0] = now;
                (v, true)
            }
        };
        map.insert(k, v, 0)?;
        Ok(new)
    }

    /// `-ADDR`: removes the address; true when it was there.
    pub fn recent_remove(&mut self, table: u32, addr: IpAddr) -> Result<bool> {
        let mut map = self.recent_map()?;
        Ok(map.remove(&key_of(table, addr)).is_ok())
    }

    /// `/`: removes every address of the table; returns how many.
    pub fn recent_flush(&mut self, table: u32) -> Result<usize> {
        let mut map = self.recent_map()?;
        let keys: Vec<RecentKey> = map
            .keys()
            .filter_map(|k| k.ok())
            .filter(|k| k.table == table)
            .collect();
        Ok(keys.iter().filter(|k| map.remove(k).is_ok()).count())
    }
}
