//! Address types ([`Field::SrcType`], [`Field::DstType`]) and link-layer
//! packet types ([`Field::PktType`]): the value sets of iptables'
//! `-m addrtype` and `-m pkttype` and of nft's `fib … type` and `meta
//! pkttype`, and how both renderers spell a set back.
//!
//! IPv4 `-m addrtype --dst-type A,B` is any of the types (xt_addrtype's
//! `match_type`: the address's one route type is in the mask). IPv6 is
//! different (`match_type6`): each of UNSPEC, UNICAST and MULTICAST present
//! is a condition on the address's class, all of which must hold, and the
//! route types LOCAL, ANYCAST and UNREACHABLE present are one condition,
//! any of them; BROADCAST, BLACKHOLE and the types after UNREACHABLE are
//! refused by the kernel in IPv6.

use parapet_model::{addr_type, pkt_type, Family, Field, IntervalSet, Rule};

/// Largest value of an address type field (its width is 4 bits).
pub(crate) const TYPE_MAX: u128 = 0xf;
/// Largest value of the packet type field (3 bits).
pub(crate) const PKT_MAX: u128 = 0x7;

/// The types iptables accepts for IPv6 (`addrtype_mt_checkentry`).
const V6_TYPES: [u8; 6] = [
    addr_type::UNSPEC,
    addr_type::UNICAST,
    addr_type::LOCAL,
    addr_type::ANYCAST,
    addr_type::MULTICAST,
    addr_type::UNREACHABLE,
];

/// The values of a comma-separated `--src-type`/`--dst-type` list in
/// `family` (not negated).
pub(crate) fn iptables_types(list: &str, family: Family) -> Result<IntervalSet, String> {
    let mut types = Vec::new();
    for part in list.split(',') {
        let Some(t) = addr_type::from_name(part) else {
            return Err(format!(
                "expected address types ({}), found '{part}'",
                addr_type::NAMES.join(", ")
            ));
        };
        if family == Family::V6 && !V6_TYPES.contains(&t) {
            return Err(format!("ip6tables refuses address type {} (the kernel matches UNSPEC, UNICAST, LOCAL, ANYCAST, MULTICAST and UNREACHABLE in IPv6)", addr_type::NAMES[t as usize]));
        }
        types.push(t);
    }
    Ok(match family {
        Family::V4 => points(&types),
        Family::V6 => v6_set(&types),
    })
}

/// `match_type6`: the class conditions present (all hold) and the route
/// types present (any of them).
fn v6_set(types: &[u8]) -> IntervalSet {
    use addr_type::*;
    let all = IntervalSet::range(0, TYPE_MAX);
    let mut set = all.clone();
    for &t in types {
        let class = match t {
            UNSPEC => points(&[UNSPEC]),
            MULTICAST => points(&[MULTICAST]),
            // ipv6_addr_type's UNICAST: every address but :: and ff00::/8.
            UNICAST => points(&[UNSPEC, MULTICAST]).complement(TYPE_MAX),
            _ => continue,
        };
        set = set.intersect(&class);
    }
    let routes: Vec<u8> = types
        .iter()
        .copied()
        .filter(|t| matches!(*t, LOCAL | ANYCAST | UNREACHABLE))
        .collect();
    if !routes.is_empty() {
        set = set.intersect(&points(&routes));
    }
    set
}

fn points(values: &[u8]) -> IntervalSet {
    values.iter().fold(IntervalSet::empty(), |s, &v| {
        s.union(&IntervalSet::point(v as u128))
    })
}

/// The values of a set, if every one has a name.
fn named(set: &IntervalSet, max: u8) -> Option<Vec<u8>> {
    let mut out = Vec::new();
    for &(lo, hi) in set.ranges() {
        for v in lo..=hi {
            if v > max as u128 {
                return None;
            }
            out.push(v as u8);
        }
    }
    Some(out)
}

/// iptables' spelling of an address type set: `--src-type LOCAL,BROADCAST`
/// or `! --dst-type LOCAL` (the option name given).
pub(crate) fn iptables_option(
    opt: &str,
    set: &IntervalSet,
    family: Family,
) -> Result<String, String> {
    let candidates: Vec<Vec<u8>> = match family {
        Family::V4 => {
            let direct = named(set, addr_type::MAX);
            let inverse = named(&set.complement(TYPE_MAX), addr_type::MAX);
            let spell = |v: &[u8]| {
                let n: Vec<&str> = v.iter().map(|&t| addr_type::NAMES[t as usize]).collect();
                n.join(",")
            };
            return match (direct, inverse) {
                (Some(d), Some(i)) if i.len() < d.len() && !i.is_empty() => {
                    Ok(format!(" ! {opt} {}", spell(&i)))
                }
                (Some(d), _) if !d.is_empty() => Ok(format!(" {opt} {}", spell(&d))),
                (_, Some(i)) if !i.is_empty() => Ok(format!(" ! {opt} {}", spell(&i))),
                _ => Err(format!("this address type set has no {opt} spelling")),
            };
        }
        // IPv6 lists are conjunctions: find one that gives the set.
        Family::V6 => (1u32..1 << V6_TYPES.len())
            .map(|bits| {
                (0..V6_TYPES.len())
                    .filter(|i| bits >> i & 1 == 1)
                    .map(|i| V6_TYPES[i])
                    .collect()
            })
            .collect(),
    };
    let spell = |v: &[u8]| {
        let n: Vec<&str> = v.iter().map(|&t| addr_type::NAMES[t as usize]).collect();
        n.join(",")
    };
    let mut by_len = candidates;
    by_len.sort_by_key(|c| c.len());
    for c in &by_len {
        let s = v6_set(c);
        if &s == set {
            return Ok(format!(" {opt} {}", spell(c)));
        }
        if s.complement(TYPE_MAX) == *set {
            return Ok(format!(" ! {opt} {}", spell(c)));
        }
    }
    Err(format!(
        "this IPv6 address type set has no ip6tables {opt} spelling"
    ))
}

/// nft's spelling of a type set: `fib daddr type local`, `fib saddr type
/// != { broadcast, multicast }`.
pub(crate) fn nft(field: Field, set: &IntervalSet) -> Result<String, String> {
    let (head, max, names): (&str, u8, &[&str]) = match field {
        Field::SrcType => ("fib saddr type", addr_type::MAX, &addr_type::NAMES),
        Field::DstType => ("fib daddr type", addr_type::MAX, &addr_type::NAMES),
        _ => ("meta pkttype", pkt_type::OTHERHOST, &pkt_type::NAMES),
    };
    let all = if field == Field::PktType {
        PKT_MAX
    } else {
        TYPE_MAX
    };
    let spell = |v: &[u8]| -> String {
        let n: Vec<String> = v
            .iter()
            .map(|&t| names[t as usize].to_ascii_lowercase())
            .collect();
        if n.len() == 1 {
            n[0].clone()
        } else {
            format!("{{ {} }}", n.join(", "))
        }
    };
    let direct = named(set, max).filter(|d| !d.is_empty());
    let inverse = named(&set.complement(all), max).filter(|i| !i.is_empty());
    match (direct, inverse) {
        (Some(d), Some(i)) if i.len() < d.len() => Ok(format!("{head} != {}", spell(&i))),
        (Some(d), _) => Ok(format!("{head} {}", spell(&d))),
        (_, Some(i)) => Ok(format!("{head} != {}", spell(&i))),
        _ => Err(format!("this {} set has no nft spelling", field.name())),
    }
}

/// iptables' spelling of a packet type set: `-m pkttype [!] --pkt-type T`
/// (one type per match).
pub(crate) fn iptables_pkttype(set: &IntervalSet) -> Result<String, String> {
    let one = |s: &IntervalSet| match s.ranges() {
        [(a, b)] if a == b && *a <= pkt_type::OTHERHOST as u128 => {
            pkt_type::iptables_name(*a as u8)
        }
        _ => None,
    };
    if let Some(n) = one(set) {
        return Ok(format!(" -m pkttype --pkt-type {n}"));
    }
    if let Some(n) = one(&set.complement(PKT_MAX)) {
        return Ok(format!(" -m pkttype ! --pkt-type {n}"));
    }
    Err("-m pkttype matches one packet type (or all but one); this set needs nft's meta pkttype { … }".into())
}

/// `-m addrtype --src-type … --dst-type …` and `-m pkttype --pkt-type …`.
pub(crate) fn iptables(r: &Rule, family: Family) -> Result<String, String> {
    let mut out = String::new();
    let src = r.matches.get(Field::SrcType);
    let dst = r.matches.get(Field::DstType);
    if src.is_some() || dst.is_some() {
        out.push_str(" -m addrtype");
        if let Some(set) = src {
            out.push_str(&iptables_option("--src-type", set, family)?);
        }
        if let Some(set) = dst {
            out.push_str(&iptables_option("--dst-type", set, family)?);
        }
    }
    if let Some(set) = r.matches.get(Field::PktType) {
        out.push_str(&iptables_pkttype(set)?);
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use addr_type::*;

    #[test]
    fn v4_lists_are_any_of() {
        let s = iptables_types("LOCAL,BROADCAST", Family::V4).unwrap();
        assert_eq!(s, points(&[LOCAL, BROADCAST]));
        let spelled = iptables_option("--dst-type", &s, Family::V4).unwrap();
        assert_eq!(spelled, " --dst-type LOCAL,BROADCAST");
        let neg = s.complement(TYPE_MAX);
        let spelled = iptables_option("--dst-type", &neg, Family::V4).unwrap();
        assert_eq!(spelled, " ! --dst-type LOCAL,BROADCAST");
    }

    #[test]
    fn v6_lists_are_the_kernels_conjunction() {
        // UNICAST in IPv6 is the address class: a local address is one.
        let u = iptables_types("UNICAST", Family::V6).unwrap();
        assert!(u.contains(LOCAL as u128) && u.contains(UNICAST as u128));
        assert!(!u.contains(MULTICAST as u128) && !u.contains(UNSPEC as u128));
        // UNICAST and MULTICAST together: no address is both.
        assert!(iptables_types("UNICAST,MULTICAST", Family::V6)
            .unwrap()
            .is_empty());
        let l = iptables_types("UNICAST,LOCAL", Family::V6).unwrap();
        assert_eq!(l, points(&[LOCAL]));
        assert!(iptables_types("BROADCAST", Family::V6).is_err());
        for list in ["UNICAST", "LOCAL", "MULTICAST,UNSPEC", "LOCAL,ANYCAST"] {
            let s = iptables_types(list, Family::V6).unwrap();
            let again = iptables_option("--src-type", &s, Family::V6).unwrap();
            let back = again.trim().trim_start_matches("--src-type ");
            assert_eq!(iptables_types(back, Family::V6).unwrap(), s, "{list}");
        }
    }

    #[test]
    fn nft_spells_sets_and_negations() {
        let s = points(&[LOCAL]);
        assert_eq!(nft(Field::DstType, &s).unwrap(), "fib daddr type local");
        assert_eq!(
            nft(Field::SrcType, &s.complement(TYPE_MAX)).unwrap(),
            "fib saddr type != local"
        );
        let p = points(&[pkt_type::BROADCAST, pkt_type::MULTICAST]);
        assert_eq!(
            nft(Field::PktType, &p).unwrap(),
            "meta pkttype { broadcast, multicast }"
        );
        assert_eq!(
            iptables_pkttype(&points(&[pkt_type::HOST]).complement(PKT_MAX)).unwrap(),
            " -m pkttype ! --pkt-type unicast"
        );
    }
}
