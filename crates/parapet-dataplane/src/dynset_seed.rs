//! nft dynamic sets' declared elements (`set s { …; elements = { … } }`)
//! put into `parapet_dynset` (`bpf/lib/dynset.h`) when a ruleset declaring
//! them is installed, as `nft -f` adds them: an element already there is
//! kept, with its expiry moved to the declared lifetime when it has one
//! (what `nft -f` of the same file does to an existing table, checked on
//! Linux 6.18); an absent one is added and counted against the set's
//! size. Elements a rule added stay. The Rust twin is
//! `parapet_model::DynsetTables::reapply`.

use crate::error::{Error, Result};
use crate::load::Dataplane;
use aya::maps::HashMap;
use parapet_model::{dynset_timeout_jiffies, DynsetDecl, Ruleset};

/// `struct parapet_dynset_key`.
#[repr(C)]
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
struct DynsetKey {
    set: u32,
    family: u16,
    port: u16,
    addr: [u8; 16],
}

/// `struct parapet_dynset_elem`.
#[repr(C)]
#[derive(Copy, Clone, Debug)]
struct DynsetElem {
    expires: u64,
    empty_at: u64,
}

// SAFETY: plain `repr(C)` integers with no padding (24 and 16 bytes), as
// the BPF program lays them out.
unsafe impl aya::Pod for DynsetKey {}
// SAFETY: as above.
unsafe impl aya::Pod for DynsetElem {}

impl Dataplane {
    /// Seeds every dynamic set of `rs` that declares elements, at the
    /// program's clock (the test clock when a test set one, else the
    /// kernel's jiffies). Returns how many elements were added.
    pub fn seed_dynsets(&mut self, rs: &Ruleset) -> Result<usize> {
        let decls = DynsetDecl::with_elements(rs);
        if decls.is_empty() {
            return Ok(0);
        }
        let hz = crate::stateful::kernel_hz()
            .ok_or(Error::Missing("the kernel's HZ (dynamic sets' timeouts)"))?;
        let test_ns = self.test_clock()?;
        let now = if test_ns != 0 {
            test_ns / (1_000_000_000 / u64::from(hz))
        } else {
            crate::stateful::kernel_jiffies().ok_or(Error::Missing("the kernel's jiffies"))?
        };
        let mut added = 0;
        for d in decls {
            added += self.seed_dynset(d, now, hz)?;
        }
        Ok(added)
    }

    /// Seeds set `decl` at jiffy `now` on a kernel of `hz`; returns how
    /// many elements were added. An element that no longer fits the set's
    /// size is not added (`nft -f` would refuse the whole file: `ENFILE`).
    pub fn seed_dynset(&mut self, decl: &DynsetDecl, now: u64, hz: u32) -> Result<usize> {
        let id = decl.id();
        let mut count = {
            let map = self
                .ebpf
                .map_mut("parapet_dynset_count")
                .ok_or(Error::Missing("map parapet_dynset_count"))?;
            let counts: HashMap<_, u32, u64> = HashMap::try_from(map)?;
            counts.get(&id, 0).unwrap_or(0)
        };
        let mut added = 0;
        {
            let map = self
                .ebpf
                .map_mut("parapet_dynset")
                .ok_or(Error::Missing("map parapet_dynset"))?;
            let mut elems: HashMap<_, DynsetKey, DynsetElem> = HashMap::try_from(map)?;
            for e in &decl.elements {
                let (family, port, addr) = e.key(decl.family);
                let key = DynsetKey {
                    set: id,
                    family: u16::from(family),
                    port,
                    addr: addr.to_be_bytes(),
                };
                let expires = e.lifetime_ms(decl).map_or(0, |ms| {
                    now + dynset_timeout_jiffies(ms.min(u64::from(u32::MAX)) as u32, hz)
                });
                match elems.get(&key, 0) {
                    Ok(mut old) => {
                        if expires != 0 {
                            old.expires = expires;
                            elems.insert(key, old, 0)?;
                        }
                    }
                    Err(_) if count >= u64::from(decl.size) => {}
                    Err(_) => {
                        // No limit of its own (the parser refuses a limit
                        // on a rule filling such a set): the bucket is
                        // never read.
                        let v = DynsetElem {
                            expires,
                            empty_at: 0,
                        };
                        elems.insert(key, v, 0)?;
                        count += 1;
                        added += 1;
                    }
                }
            }
        }
        let map = self
            .ebpf
            .map_mut("parapet_dynset_count")
            .ok_or(Error::Missing("map parapet_dynset_count"))?;
        let mut counts: HashMap<_, u32, u64> = HashMap::try_from(map)?;
        counts.insert(id, count, 0)?;
        Ok(added)
    }
}
