//! `-m addrtype --src-type/--dst-type` and `-m pkttype --pkt-type`, with
//! the kernel's semantics (xt_addrtype.c, xt_pkttype.c); value sets in
//! [`crate::addrtype`].

use super::option_arg::OptionArg;
use super::rule::RuleParser;
use crate::addrtype::{iptables_types, PKT_MAX, TYPE_MAX};
use parapet_model::*;

/// The match modules this file reads.
pub(super) const TYPE_MATCHES: &[&str] = &["addrtype", "pkttype"];

/// Which of these modules provides an option.
pub(super) fn type_option_module(opt: &str) -> Option<&'static [&'static str]> {
    Some(match opt {
        "--src-type" | "--dst-type" | "--limit-iface-in" | "--limit-iface-out" => &["addrtype"],
        "--pkt-type" => &["pkttype"],
        _ => return None,
    })
}

impl RuleParser<'_> {
    /// One option of `-m addrtype` or `-m pkttype`; `v` is its value.
    pub(super) fn type_option(&mut self, arg: OptionArg<'_>) {
        let (opt, col, negated, v, vcol) = arg.parts();
        match opt {
            "--src-type" | "--dst-type" => {
                let field = if opt == "--src-type" {
                    Field::SrcType
                } else {
                    Field::DstType
                };
                match iptables_types(v, self.family) {
                    Ok(set) => {
                        let set = match negated {
                            Some(_) => set.complement(TYPE_MAX),
                            None => set,
                        };
                        self.matches.constrain(field, set);
                    }
                    Err(m) => self.err(vcol, m),
                }
            }
            // The type then comes from a lookup restricted to one
            // interface's routes (inet_dev_addr_type with a device):
            // per-interface address state parapet does not model.
            "--limit-iface-in" | "--limit-iface-out" => self.err(
                col,
                format!("-m addrtype {opt} is not supported: it looks the address up in one interface's routes only, which parapet's address types (the host's addresses, whatever the interface) do not model; refused rather than matched host-wide"),
            ),
            "--pkt-type" => {
                // libxt_pkttype's names and aliases (`outgoing` and the
                // rest of PACKET_* it refuses: "Bad packet type").
                let t = match v.to_ascii_lowercase().as_str() {
                    "bcast" => pkt_type::BROADCAST,
                    "mcast" => pkt_type::MULTICAST,
                    "unicast" | "host" | "broadcast" | "multicast" | "otherhost" => {
                        pkt_type::from_name(v).expect("a packet type name")
                    }
                    _ => {
                        return self.err(
                            vcol,
                            format!("expected a packet type (unicast, host, broadcast, bcast, multicast, mcast, otherhost), found '{v}'"),
                        )
                    }
                };
                let set = IntervalSet::point(t as u128);
                let set = match negated {
                    Some(_) => set.complement(PKT_MAX),
                    None => set,
                };
                self.matches.constrain(Field::PktType, set);
            }
            _ => unreachable!("not an addrtype/pkttype option: {opt}"),
        }
    }
}
