//! From the rule model and the set store to the kernel's sets: what the
//! daemon (or `parapet run`) calls after compiling a ruleset.
//!
//! [`ref_parts`] builds a reference's key from the packet fields
//! [`parapet_sets::ref_fields`] picks, the mapping the offline lookup
//! (`parapet-cli`'s `set_lookup`, through `SetStore::ref_matches`) uses too.

use std::collections::BTreeMap;

use parapet_model::{Field, SetRef};
use parapet_sets::{KeyPart, Set, SetStore};

use crate::error::Result;
use crate::set_mirror::{PacketPart, SetDim, SetElement};
use crate::Dataplane;

/// The kernel's dimension type for a set-store dimension; `None` for the
/// parts the packet key does not carry yet (Ethernet address, mark).
pub fn set_dim(p: KeyPart) -> Option<SetDim> {
    Some(match p {
        KeyPart::Ipv4Addr => SetDim::Ipv4Addr,
        KeyPart::Ipv6Addr => SetDim::Ipv6Addr,
        KeyPart::InetService => SetDim::Port,
        KeyPart::InetProto => SetDim::Proto,
        KeyPart::IfName => SetDim::IfName,
        KeyPart::EtherAddr | KeyPart::Mark => return None,
    })
}

/// The packet parts of `r`'s key for a set of dimensions `dims`, or `None`
/// when no packet can be a member (no flags, or a field that cannot fill
/// its dimension).
pub fn ref_parts(r: &SetRef, dims: &[KeyPart]) -> Option<Vec<PacketPart>> {
    parapet_sets::ref_fields(r, dims)?
        .into_iter()
        .map(packet_part)
        .collect()
}

/// The kernel's packet part for a packet field; `None` for the fields
/// [`parapet_sets::ref_fields`] never returns.
fn packet_part(f: Field) -> Option<PacketPart> {
    Some(match f {
        Field::SrcAddr => PacketPart::SrcAddr,
        Field::DstAddr => PacketPart::DstAddr,
        Field::SrcPort => PacketPart::SrcPort,
        Field::DstPort => PacketPart::DstPort,
        Field::Proto => PacketPart::Proto,
        Field::InIface => PacketPart::InIface,
        Field::OutIface => PacketPart::OutIface,
        _ => return None,
    })
}

/// The live elements of `set` at `now_ms` (the store's clock), with
/// expiries on the kernel's clock: `mono_now_ns` is
/// [`crate::set_mirror::monotonic_ns`] read at the same moment.
pub fn set_elements(set: &Set, now_ms: u64, mono_now_ns: u64) -> Vec<SetElement> {
    let mut out = Vec::with_capacity(set.len());
    set.for_each_element(now_ms, &mut |e| {
        out.push(kernel_element(&e.element, e.remaining, mono_now_ns));
    });
    out
}

impl Dataplane {
    /// Load the sets a ruleset's references name from `store` and define
    /// reference `n` as `refs[n]` for the next image. Each set name keeps
    /// its id across calls; a set that exists with the same dimensions is
    /// updated in place (`set_replace`: new elements first, so the live
    /// image never sees an element of both versions missing), a new name
    /// gets the lowest free id. A reference to a set the store lacks, or
    /// whose key cannot be built, matches nothing. Sets the new references
    /// no longer use stay until [`Dataplane::destroy_unused_sets`] (after
    /// the swap). Returns the ids by name.
    pub fn install_sets(
        &mut self,
        refs: &[SetRef],
        store: &SetStore,
    ) -> Result<BTreeMap<String, u32>> {
        let mut ids = BTreeMap::new();
        let (now_ms, mono) = (store.now(), crate::set_mirror::monotonic_ns());
        for (n, r) in refs.iter().enumerate() {
            if store.list(&r.name).is_some() {
                // Matching nothing would change verdicts silently (and
                // fail open under `! --match-set … -j DROP`): refuse.
                Err(crate::set_mirror::SetError::BadKey(format!(
                    "set '{}' is an ipset list:set, which the kernel dataplane does not evaluate yet: reference its member sets one rule each (parapet classify evaluates list:set)",
                    r.name
                )))?;
            }
            let Some(set) = store.get(&r.name) else {
                self.undefine_set_ref(n as u32)?;
                continue;
            };
            let id = match ids.get(&r.name) {
                Some(&id) => id,
                None => {
                    let dims: Vec<SetDim> = set
                        .key_dims()
                        .iter()
                        .map(|&p| set_dim(p))
                        .collect::<Option<_>>()
                        .ok_or_else(|| {
                            crate::set_mirror::SetError::BadKey(format!(
                                "set '{}' is keyed on {}, which the kernel dataplane's packet key does not carry yet",
                                r.name,
                                set.desc().type_name()
                            ))
                        })?;
                    let els = set_elements(set, now_ms, mono);
                    let id = match self.set_names.get(&r.name).copied() {
                        Some(id) if self.set_dims(id) == Some(&dims[..]) => {
                            self.set_replace(id, &els)?;
                            id
                        }
                        old => {
                            // new name, or new dimensions: a fresh id (the
                            // live image may still use the old one)
                            let id = (0..crate::abi::MAX_SETS)
                                .find(|&i| self.set_dims(i).is_none() && !self.set_id_adopted(i))
                                .ok_or(crate::set_mirror::SetError::BadId(crate::abi::MAX_SETS))?;
                            self.create_set(id, &dims)?;
                            self.set_add(id, &els)?;
                            if let Some(old) = old {
                                if !self.set_in_use(old) {
                                    self.destroy_set(old)?;
                                }
                            }
                            self.set_names.insert(r.name.clone(), id);
                            id
                        }
                    };
                    ids.insert(r.name.clone(), id);
                    id
                }
            };
            match ref_parts(r, set.key_dims()) {
                Some(parts) => self.define_set_ref(n as u32, id, &parts)?,
                None => self.undefine_set_ref(n as u32)?,
            }
        }
        for n in refs.len()..crate::abi::MAX_SET_REFS as usize {
            self.undefine_set_ref(n as u32)?;
        }
        Ok(ids)
    }
}

impl Dataplane {
    /// The kernel set id that set `name` of the store has (after
    /// [`Dataplane::install_sets`]), or `None` when no installed ruleset
    /// references it.
    pub fn set_id(&self, name: &str) -> Option<u32> {
        self.set_names.get(name).copied()
    }

    /// Every installed set's name and kernel id, by name.
    pub fn installed_sets(&self) -> Vec<(String, u32)> {
        let mut v: Vec<(String, u32)> = self
            .set_names
            .iter()
            .map(|(n, i)| (n.clone(), *i))
            .collect();
        v.sort();
        v
    }
}

/// The kernel's form of a store element with `remaining_ms` to live
/// (`None` = permanent); `mono_now_ns` is [`crate::set_mirror::monotonic_ns`]
/// read now.
pub fn kernel_element(
    el: &parapet_sets::Element,
    remaining_ms: Option<u64>,
    mono_now_ns: u64,
) -> SetElement {
    SetElement {
        ranges: el.ranges().to_vec(),
        expires_ns: remaining_ms.map_or(0, |ms| {
            mono_now_ns
                .saturating_add(ms.saturating_mul(1_000_000))
                .max(1)
        }),
    }
}
