//! Sets in the kernel: creating and destroying them, writing their
//! elements into the LPM trie or the tuple hash, reaping expired ones, and
//! the set references the next image uses. The element maths and the
//! user-space mirror are in `set_mirror.rs`.

use std::os::fd::AsFd;

use aya::maps::lpm_trie::Key as LpmKey;
use aya::maps::{IterableMap, MapError};
use aya::sys::SyscallError;

use crate::abi::{RawSetRef, SetLpmKey, SetTupleKey, SetVal, MAX_SETS, MAX_SET_REFS};
use crate::bpf_sys::{map_delete_batch, map_update_batch};
use crate::error::Result;
use crate::load::Dataplane;
use crate::set_mirror::{
    EntryKey, EntryMap, ExactRoom, KernelSetEntry, PacketPart, SetDim, SetElement, SetError,
    SetState, Writes,
};

impl Dataplane {
    /// Create set `id` (`0..1024`) with key dimensions `dims` (1 to 4,
    /// at most 36 bytes together). A set of one dimension keeps
    /// its elements in the LPM trie, any other in the tuple hash.
    pub fn create_set(&mut self, id: u32, dims: &[SetDim]) -> Result<()> {
        if id >= MAX_SETS {
            return Err(SetError::BadId(id).into());
        }
        if self.sets.contains_key(&id) {
            return Err(SetError::Exists(id).into());
        }
        let st = SetState::new(id, dims)?;
        self.set_descs.set(id, st.desc(), 0)?;
        self.sets.insert(id, st);
        Ok(())
    }

    /// Remove set `id` and its elements. References to it stay defined
    /// and find no elements until the id is created again (with the same
    /// dimensions; otherwise define the references again).
    pub fn destroy_set(&mut self, id: u32) -> Result<()> {
        self.set_flush(id)?;
        self.sets.remove(&id);
        self.set_names.retain(|_, v| *v != id);
        Ok(())
    }

    /// Whether the live or the staged reference table names set `id`.
    pub fn set_in_use(&self, id: u32) -> bool {
        self.live_refs
            .iter()
            .chain(&self.staged_refs)
            .any(|r| r.kind != 0 && u32::from(r.set_id) == id)
    }

    /// Destroy every set that neither the live nor the staged references
    /// use (after a swap to an image that dropped some sets). Returns the
    /// ids destroyed.
    pub fn destroy_unused_sets(&mut self) -> Result<Vec<u32>> {
        let mut unused: Vec<u32> = self
            .sets
            .keys()
            .copied()
            .filter(|&id| !self.set_in_use(id))
            .collect();
        unused.sort_unstable();
        for &id in &unused {
            self.destroy_set(id)?;
        }
        Ok(unused)
    }

    /// The set's dimensions, or `None` when it does not exist.
    pub fn set_dims(&self, id: u32) -> Option<&[SetDim]> {
        self.sets.get(&id).map(|s| &s.dims[..])
    }

    /// Elements of set `id` (user-space mirror; expired ones included
    /// until deleted).
    pub fn set_len(&self, id: u32) -> Result<usize> {
        Ok(self.set_state(id)?.len())
    }

    /// Map entries set `id` occupies (prefixes, or prefix boxes x shapes).
    pub fn set_entries(&self, id: u32) -> Result<usize> {
        Ok(self.set_state(id)?.entries.len())
    }

    /// Entries of set `id` the kernel's exact hashes hold (its single
    /// addresses but those that went to the trie when the hash was full),
    /// read back from the kernel.
    pub fn set_exact_entries(&self, id: u32) -> Result<usize> {
        self.set_state(id)?;
        let mut n = 0;
        for k in self.set_exact4.keys() {
            n += usize::from(u32::from(k?.set_id) == id);
        }
        for k in self.set_exact6.keys() {
            n += usize::from(u32::from(k?.set_id) == id);
        }
        Ok(n)
    }

    /// What the exact hashes have left for new single addresses: their
    /// size less every set's entries and the adopted sets'.
    fn exact_room(&self) -> ExactRoom {
        let mut room = self.exact_cap;
        for (f, r) in room.iter_mut().enumerate() {
            let used: usize = self.sets.values().map(|s| s.exact[f]).sum();
            *r = r.saturating_sub(used + self.exact_adopted[f]);
        }
        room
    }

    fn set_state(&self, id: u32) -> Result<&SetState> {
        self.sets.get(&id).ok_or(SetError::NoSuchSet(id).into())
    }

    /// Add elements to set `id`, or refresh their expiry when present.
    /// Ranges are split into prefixes here. All elements are checked before
    /// anything is written; packets see each map entry change atomically,
    /// and no program is reloaded.
    pub fn set_add(&mut self, id: u32, els: &[SetElement]) -> Result<()> {
        let mut room = self.exact_room();
        let st = self.sets.get_mut(&id).ok_or(SetError::NoSuchSet(id))?;
        let w = st.add(id, els, &mut room)?;
        self.apply_or_fall_behind(id, w)
    }

    /// Delete elements (named by their ranges, expiry ignored) from set
    /// `id`. Absent elements are ignored. Overlapping elements stay exact:
    /// an entry shared with another element keeps that element's expiry.
    pub fn set_del(&mut self, id: u32, els: &[SetElement]) -> Result<()> {
        let st = self.sets.get_mut(&id).ok_or(SetError::NoSuchSet(id))?;
        let w = st.del(id, els)?;
        self.apply_or_fall_behind(id, w)
    }

    /// Make set `id` hold exactly `els`, without a moment in which an
    /// element of both the old and the new contents is missing: the new
    /// elements are added (or refreshed) first, then the others deleted.
    pub fn set_replace(&mut self, id: u32, els: &[SetElement]) -> Result<()> {
        let mut room = self.exact_room();
        let st = self.sets.get_mut(&id).ok_or(SetError::NoSuchSet(id))?;
        let (add, del) = st.replace(id, els, &mut room)?;
        self.apply_or_fall_behind(id, add)?;
        self.apply_or_fall_behind(id, del)
    }

    /// Delete up to `budget` elements of every set that expired (they
    /// already match nothing; this frees their map entries). Returns how
    /// many went.
    pub fn reap_sets(&mut self, budget: usize) -> Result<usize> {
        let now = crate::set_mirror::monotonic_ns();
        let mut ids: Vec<u32> = self.sets.keys().copied().collect();
        ids.sort_unstable();
        let mut n = 0;
        for id in ids {
            let set = &self.sets[&id];
            let gone = if self.reap_by_scan {
                set.expired_by_scan(now, budget)
            } else {
                set.expired(now, budget)
            };
            if !gone.is_empty() {
                n += gone.len();
                self.set_del(id, &gone)?;
            }
        }
        Ok(n)
    }

    /// Empty set `id`.
    pub fn set_flush(&mut self, id: u32) -> Result<()> {
        let st = self.sets.get_mut(&id).ok_or(SetError::NoSuchSet(id))?;
        let w = st.flush();
        self.apply_or_fall_behind(id, w)
    }

    /// [`Self::apply`]; on failure the mirror is ahead of the kernel, so
    /// the set's adds stop skipping entries the mirror says are there
    /// (`SetState::kernel_behind`).
    fn apply_or_fall_behind(&mut self, id: u32, w: Writes) -> Result<()> {
        let r = self.apply(id, w);
        if r.is_err() {
            if let Some(st) = self.sets.get_mut(&id) {
                st.kernel_behind = true;
            }
        }
        r
    }

    fn apply(&mut self, id: u32, w: Writes) -> Result<()> {
        // New shapes first: a probe of a shape without entries finds
        // nothing, an entry of an unknown shape would be missed.
        if let Some(d) = &w.desc {
            if d.n_shapes > 0 {
                self.set_descs.set(id, d, 0)?;
            }
        }
        // Each map's entries go in one `bpf()` call (the order among
        // one call's entries does not matter: each is a change of its own).
        for map in MAPS {
            let run: Vec<(EntryKey, SetVal)> = w
                .put
                .iter()
                .filter(|(k, _)| k.map() == map)
                .copied()
                .collect();
            if !run.is_empty() {
                self.put_run(map, &run)?;
            }
        }
        for map in MAPS {
            let run: Vec<EntryKey> = w.del.iter().filter(|k| k.map() == map).copied().collect();
            if !run.is_empty() {
                self.del_run(map, &run)?;
            }
        }
        // A flush clears the shapes last.
        if let Some(d) = &w.desc {
            if d.n_shapes == 0 {
                self.set_descs.set(id, d, 0)?;
            }
        }
        Ok(())
    }

    /// Whether set entries are written and deleted in batches (the
    /// default) or with one `bpf()` call each: the same entries either
    /// way. For benchmarks that measure what the batches save, and tests
    /// that compare the two.
    pub fn set_batched_writes(&mut self, on: bool) {
        self.batch_writes = on;
    }

    /// Whether [`Dataplane::reap_sets`] finds expired elements by a scan
    /// of every element (`true`) or by the sets' expiry index (`false`, the
    /// default): the same elements either way when the budget takes them
    /// all. For the benchmark that measures what the index saves.
    pub fn set_reap_by_scan(&mut self, on: bool) {
        self.reap_by_scan = on;
    }

    /// The kernel map `map`.
    fn entry_map(&self, map: EntryMap) -> &aya::maps::MapData {
        match map {
            EntryMap::Lpm => self.set_lpm.map(),
            EntryMap::Tuple => self.set_tuple.map(),
            EntryMap::Exact4 => self.set_exact4.map(),
            EntryMap::Exact6 => self.set_exact6.map(),
        }
    }

    /// Writes entries of one map: one `BPF_MAP_UPDATE_BATCH` for two or
    /// more, one update each where the kernel has no batch updates for the
    /// map.
    fn put_run(&mut self, map: EntryMap, run: &[(EntryKey, SetVal)]) -> Result<()> {
        if run.len() >= 2 && self.batch_writes {
            let (keys, values) = pack(run);
            let map = self.entry_map(map);
            match map_update_batch(map.fd().as_fd(), &keys, &values, run.len() as u32) {
                Ok(()) => return Ok(()),
                // no batch updates for this map here: one by one below
                Err((e, 0)) if is_unsupported(&e) => {}
                Err((io_error, _)) => {
                    return Err(MapError::SyscallError(SyscallError {
                        call: "bpf_map_update_batch",
                        io_error,
                    })
                    .into())
                }
            }
        }
        for (k, v) in run {
            match k {
                EntryKey::Lpm(l) => {
                    self.set_lpm
                        .insert(&LpmKey::new(l.prefixlen, lpm_data(l)), v, 0)?
                }
                EntryKey::Tuple(t) => self.set_tuple.insert(t, v, 0)?,
                EntryKey::Exact4(k) => self.set_exact4.insert(k, v.expires_ns, 0)?,
                EntryKey::Exact6(k) => self.set_exact6.insert(k, v.expires_ns, 0)?,
            }
        }
        Ok(())
    }

    /// Deletes entries of one map: one `BPF_MAP_DELETE_BATCH` for two or
    /// more, one delete each where the kernel has no batch deletes for the
    /// map. An absent entry (the mirror said it was there) is skipped, as
    /// a single delete ignores it: the batch goes on after it.
    fn del_run(&mut self, map: EntryMap, run: &[EntryKey]) -> Result<()> {
        let mut at = 0;
        if run.len() >= 2 && self.batch_writes {
            let keys = pack_keys(run);
            let key_bytes = keys.len() / run.len();
            let map = self.entry_map(map);
            while run.len() - at >= 2 {
                let left = (run.len() - at) as u32;
                match map_delete_batch(map.fd().as_fd(), &keys[at * key_bytes..], left) {
                    Ok(()) => return Ok(()),
                    Err((e, done)) if e.raw_os_error() == Some(libc::ENOENT) && done < left => {
                        at += done as usize + 1;
                    }
                    // no batch deletes for this map here: one by one below
                    Err((e, 0)) if at == 0 && is_unsupported(&e) => break,
                    Err((io_error, _)) => {
                        return Err(MapError::SyscallError(SyscallError {
                            call: "bpf_map_delete_batch",
                            io_error,
                        })
                        .into())
                    }
                }
            }
        }
        for k in &run[at..] {
            let r = match k {
                EntryKey::Lpm(l) => self.set_lpm.remove(&LpmKey::new(l.prefixlen, lpm_data(l))),
                EntryKey::Tuple(t) => self.set_tuple.remove(t),
                EntryKey::Exact4(k) => self.set_exact4.remove(k),
                EntryKey::Exact6(k) => self.set_exact6.remove(k),
            };
            match r {
                Ok(()) | Err(MapError::KeyNotFound) => {}
                Err(MapError::SyscallError(e))
                    if e.io_error.raw_os_error() == Some(libc::ENOENT) => {}
                Err(e) => return Err(e.into()),
            }
        }
        Ok(())
    }

    /// The entries of set `id` as the kernel's maps hold them, read back
    /// (sorted; for checks that the maps equal the mirror). An entry of
    /// the LPM trie is its prefix length and address, one of the tuple
    /// hash its shape and masked key bytes.
    pub fn set_kernel_entries(&self, id: u32) -> Result<Vec<KernelSetEntry>> {
        let st = self.set_state(id)?;
        let mut out = Vec::new();
        if st.kind == crate::abi::SET_LPM {
            for k in self.set_lpm.keys() {
                let k = k?;
                let data = k.data();
                if u16::from_be_bytes([data[0], data[1]]) as u32 != id {
                    continue;
                }
                let v = self.set_lpm.get(&k, 0)?;
                out.push(KernelSetEntry {
                    shape: 0,
                    prefixlen: k.prefix_len(),
                    key: data[2..18].to_vec(),
                    expires_ns: v.expires_ns,
                });
            }
            // single addresses in the exact hashes, shown as the trie
            // would hold them (full-length prefixes)
            for k in self.set_exact4.keys() {
                let k = k?;
                if u32::from(k.set_id) == id {
                    let mut key = vec![0; 16];
                    key[..4].copy_from_slice(&k.addr);
                    out.push(KernelSetEntry {
                        shape: 0,
                        prefixlen: 16 + 32,
                        key,
                        expires_ns: self.set_exact4.get(&k, 0)?,
                    });
                }
            }
            for k in self.set_exact6.keys() {
                let k = k?;
                if u32::from(k.set_id) == id {
                    out.push(KernelSetEntry {
                        shape: 0,
                        prefixlen: 16 + 128,
                        key: k.addr.to_vec(),
                        expires_ns: self.set_exact6.get(&k, 0)?,
                    });
                }
            }
        } else {
            for k in self.set_tuple.keys() {
                let k = k?;
                if u32::from(k.set_id) != id {
                    continue;
                }
                let v = self.set_tuple.get(&k, 0)?;
                out.push(KernelSetEntry {
                    shape: k.shape,
                    prefixlen: v.prefixlen,
                    key: k.data.to_vec(),
                    expires_ns: v.expires_ns,
                });
            }
        }
        out.sort();
        Ok(out)
    }

    /// Define set reference `index` (bit `index` of the image key) of the
    /// *next* image: its key is `parts` of the packet, one per dimension of
    /// set `set`, in order. A packet of the other family than the set's
    /// addresses is not a member. The reference table goes live with the
    /// next [`Dataplane::swap`], together with the image, and stays as it is
    /// for later images until changed.
    pub fn define_set_ref(&mut self, index: u32, set: u32, parts: &[PacketPart]) -> Result<()> {
        if index >= MAX_SET_REFS {
            return Err(SetError::BadRef(index).into());
        }
        let r = self.set_state(set)?.ref_desc(set, parts)?;
        self.staged_refs[index as usize] = r;
        Ok(())
    }

    /// Make set reference `index` of the next image match nothing (e.g. a
    /// key the set's type cannot hold, as a packet of the other family).
    pub fn undefine_set_ref(&mut self, index: u32) -> Result<()> {
        if index >= MAX_SET_REFS {
            return Err(SetError::BadRef(index).into());
        }
        self.staged_refs[index as usize] = RawSetRef::default();
        Ok(())
    }
}

/// The maps set entries live in, in the order [`Dataplane::apply`] writes them.
const MAPS: [EntryMap; 4] = [
    EntryMap::Exact4,
    EntryMap::Exact6,
    EntryMap::Lpm,
    EntryMap::Tuple,
];

/// The LPM trie key's data after its prefix length: set id, address, zero.
fn lpm_data(l: &SetLpmKey) -> [u8; 20] {
    let mut data = [0u8; 20];
    data[..2].copy_from_slice(&l.set_id);
    data[2..18].copy_from_slice(&l.addr);
    data
}

/// Keys and values of a run back to back, laid out as the maps hold them:
/// `struct bpf_lpm_trie_key` (prefix length, then data) or
/// `struct parapet_set_tuple_key`, and `struct parapet_set_val`.
fn pack(run: &[(EntryKey, SetVal)]) -> (Vec<u8>, Vec<u8>) {
    let mut keys = Vec::with_capacity(run.len() * std::mem::size_of::<SetTupleKey>());
    let mut values = Vec::with_capacity(run.len() * std::mem::size_of::<SetVal>());
    for (k, v) in run {
        pack_key(k, &mut keys);
        values.extend_from_slice(&v.expires_ns.to_ne_bytes());
        // the exact hashes' value is the expiry alone
        if !matches!(k, EntryKey::Exact4(_) | EntryKey::Exact6(_)) {
            values.extend_from_slice(&v.prefixlen.to_ne_bytes());
            values.extend_from_slice(&v._pad.to_ne_bytes());
        }
    }
    (keys, values)
}

/// Keys of a run back to back, as [`pack`] lays them out.
fn pack_keys(run: &[EntryKey]) -> Vec<u8> {
    let mut keys = Vec::with_capacity(run.len() * std::mem::size_of::<SetTupleKey>());
    for k in run {
        pack_key(k, &mut keys);
    }
    keys
}

fn pack_key(k: &EntryKey, keys: &mut Vec<u8>) {
    match k {
        EntryKey::Lpm(l) => {
            keys.extend_from_slice(&l.prefixlen.to_ne_bytes());
            keys.extend_from_slice(&lpm_data(l));
        }
        EntryKey::Tuple(t) => {
            keys.extend_from_slice(&t.set_id.to_ne_bytes());
            keys.extend_from_slice(&[t.shape, t._pad]);
            keys.extend_from_slice(&t.data);
        }
        EntryKey::Exact4(e) => {
            keys.extend_from_slice(&e.set_id.to_ne_bytes());
            keys.extend_from_slice(&e._pad.to_ne_bytes());
            keys.extend_from_slice(&e.addr);
        }
        EntryKey::Exact6(e) => {
            keys.extend_from_slice(&e.set_id.to_ne_bytes());
            keys.extend_from_slice(&e._pad.to_ne_bytes());
            keys.extend_from_slice(&e.addr);
        }
    }
}

/// Whether a batch call failed because the kernel has no batch updates
/// for the map (older kernels, map types without them).
fn is_unsupported(e: &std::io::Error) -> bool {
    const ENOTSUPP: i32 = 524; // the kernel's own, not EOPNOTSUPP
    matches!(
        e.raw_os_error(),
        Some(libc::EINVAL | libc::EOPNOTSUPP | ENOTSUPP)
    )
}
