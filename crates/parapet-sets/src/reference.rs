//! Which packet field feeds each dimension of a set's key, for a rule's
//! set reference: the one mapping the offline lookup (`parapet classify`)
//! and the kernel bridge (`parapet-dataplane`'s `bridge::ref_parts`) share.
//! The BPF side reads the result from the set-reference map. Also the
//! whole answer for a reference, list:set included
//! ([`SetStore::ref_matches`]).

use crate::key::{KeyPart, KeyValue, LookupKey};
use crate::list_set::{held_by, kernel_dimension, ListSet};
use crate::store::SetStore;
use parapet_model::{Dir, Family, Field, Packet, SetKeySpec, SetRef};

/// The packet field of each dimension of `r`'s key for a set with key
/// `dims`, or `None` when no packet can be a member (no flags, or a field
/// that cannot fill its dimension).
///
/// iptables direction flags pick source or destination per dimension (the
/// protocol takes no flag; fewer flags than the set's dimensions give
/// `None`, as the kernel never matches them; more are allowed); nft
/// fields name the packet fields. The fields are among `SrcAddr`,
/// `DstAddr`, `SrcPort`, `DstPort`, `Proto`, `InIface` and `OutIface`.
/// A set keyed on an Ethernet address or a mark gives `None`: the packet
/// key does not carry those yet, and [`unreferenceable`] names them so the
/// callers refuse such a reference instead of never matching.
pub fn ref_fields(r: &SetRef, dims: &[KeyPart]) -> Option<Vec<Field>> {
    // The kernel's ip_set_test: fewer direction flags than the set's
    // dimension never match (`--match-set IP_PORT_SET src`).
    if let SetKeySpec::Flags(dirs) = &r.key {
        if dirs.len() < kernel_dimension(dims) {
            return None;
        }
    }
    let mut out = Vec::with_capacity(dims.len());
    // The flag of each dimension: the protocol has none, so the port after
    // it takes the next flag (`hash:ip,port,ip` with `src,dst,src`: the
    // destination port).
    let mut flag = 0;
    for (i, &part) in dims.iter().enumerate() {
        let f = match &r.key {
            SetKeySpec::Flags(dirs) => {
                let src = *dirs.get(flag)? == Dir::Src;
                if part != KeyPart::InetProto {
                    flag += 1;
                }
                match part {
                    KeyPart::Ipv4Addr | KeyPart::Ipv6Addr if src => Field::SrcAddr,
                    KeyPart::Ipv4Addr | KeyPart::Ipv6Addr => Field::DstAddr,
                    KeyPart::InetService if src => Field::SrcPort,
                    KeyPart::InetService => Field::DstPort,
                    KeyPart::InetProto => Field::Proto,
                    KeyPart::IfName if src => Field::InIface,
                    KeyPart::IfName => Field::OutIface,
                    KeyPart::EtherAddr | KeyPart::Mark => return None,
                }
            }
            SetKeySpec::Fields(fields) => match (part, *fields.get(i)?) {
                (KeyPart::Ipv4Addr | KeyPart::Ipv6Addr, f @ (Field::SrcAddr | Field::DstAddr))
                | (KeyPart::InetService, f @ (Field::SrcPort | Field::DstPort))
                | (KeyPart::InetProto, f @ Field::Proto)
                | (KeyPart::IfName, f @ (Field::InIface | Field::OutIface)) => f,
                _ => return None,
            },
        };
        out.push(f);
    }
    Some(out)
}

/// The lookup key of `pkt` for `r` in a set with key `dims`; `None` when
/// the packet cannot be a member (see [`ref_fields`], or an address of the
/// other family).
pub fn packet_key(r: &SetRef, dims: &[KeyPart], pkt: &Packet) -> Option<LookupKey> {
    let fields = ref_fields(r, dims)?;
    let mut key = LookupKey::new();
    for (&part, field) in dims.iter().zip(fields) {
        let value = match part {
            KeyPart::Ipv4Addr | KeyPart::Ipv6Addr => {
                let family = match (part, pkt.family) {
                    (KeyPart::Ipv4Addr, Family::V4) => Family::V4,
                    (KeyPart::Ipv6Addr, Family::V6) => Family::V6,
                    _ => return None,
                };
                KeyValue::Addr {
                    family,
                    addr: pkt.value(field),
                }
            }
            KeyPart::InetService => KeyValue::Port(pkt.value(field) as u16),
            KeyPart::InetProto => KeyValue::Proto(pkt.proto),
            KeyPart::IfName => KeyValue::Iface(pkt.value(field).to_be_bytes()),
            KeyPart::EtherAddr | KeyPart::Mark => return None,
        };
        key = key.push(value);
    }
    Some(key)
}

/// The key part of `dims` that no packet field fills yet (an Ethernet
/// address, a mark), if any: a rule referencing such a set is refused.
pub fn unreferenceable(dims: &[KeyPart]) -> Option<KeyPart> {
    dims.iter()
        .copied()
        .find(|d| matches!(d, KeyPart::EtherAddr | KeyPart::Mark))
}

impl SetStore {
    /// Whether `pkt` matches the set reference `r` at time `now` (the
    /// reference's own `!` is the caller's): a plain set by its key, a
    /// list:set by its first matching member (see the module). `None` when
    /// there is no set or list of that name.
    pub fn ref_matches_at(&self, r: &SetRef, pkt: &Packet, now: u64) -> Option<bool> {
        if let Some(list) = self.list(&r.name) {
            // A list is an ipset type: only iptables' direction flags
            // reach it.
            let SetKeySpec::Flags(dirs) = &r.key else {
                return Some(false);
            };
            let found = list.live(now).any(|m| {
                self.get(&m.name).is_some_and(|set| {
                    kernel_dimension(set.key_dims()) <= dirs.len()
                        && packet_key(r, set.key_dims(), pkt).is_some_and(|k| set.contains(&k, now))
                })
            });
            return Some(found);
        }
        let set = self.get(&r.name)?;
        Some(packet_key(r, set.key_dims(), pkt).is_some_and(|k| set.contains(&k, now)))
    }

    /// [`ref_matches_at`](Self::ref_matches_at) on the store's clock.
    pub fn ref_matches(&self, r: &SetRef, pkt: &Packet) -> Option<bool> {
        self.ref_matches_at(r, pkt, self.now())
    }

    /// The list:set of that name.
    pub fn list(&self, name: &str) -> Option<&ListSet> {
        self.lists.get(name)
    }

    /// The list:set names, sorted.
    pub fn list_names(&self) -> Vec<&str> {
        let mut v: Vec<&str> = self.lists.keys().map(|s| s.as_str()).collect();
        v.sort_unstable();
        v
    }

    /// The list (if any) that holds set `name` at `now`.
    pub fn held_by(&self, name: &str, now: u64) -> Option<&str> {
        held_by(&self.lists, name, now)
    }
}
