//! `#[repr(C)]` mirrors of the structs and constants in `bpf/parapet.h`.
//!
//! These cross the kernel/user boundary through BPF maps, so their layout is
//! an ABI. The `layout` tests compare every size and offset here with the
//! numbers a C program prints from the header itself (see `build.rs`).

use parapet_model::{CtState, Family, Packet};
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

/// Version of the ABI in `parapet.h`; bumped whenever a layout changes.
pub const ABI_VERSION: u32 = 3;

/// `parapet_key.family` of a frame that is not IP.
pub const FAMILY_NONE: u8 = 0;
/// `parapet_key.family` of an IPv4 packet.
pub const FAMILY_IPV4: u8 = 4;
/// `parapet_key.family` of an IPv6 packet.
pub const FAMILY_IPV6: u8 = 6;

/// `frag` bit: the packet is part of a fragmented datagram.
pub const FRAG_FRAGMENT: u8 = 0x01;
/// `frag` bit: a non-first fragment; it has no transport header and ports 0.
pub const FRAG_LATER: u8 = 0x02;

/// `flags` bit: an 802.1Q/802.1ad tag was present (`vlan_id` is valid).
pub const KEY_F_VLAN: u8 = 0x01;
/// `flags` bit: the conntrack lookup ran and `ctstate` is its result.
pub const KEY_F_CT: u8 = 0x02;

/// Most VLAN tags the parser walks; a frame with more is refused.
pub const MAX_VLAN_TAGS: usize = 2;
/// Most IPv6 extension headers the parser walks; a longer chain is refused.
pub const MAX_EXT_HDRS: usize = 8;

/// Largest header offset the BPF parser dereferences (`PARAPET_MAX_OFF`).
pub const MAX_HDR_OFFSET: usize = 1024;

/// `parapet_action.flags` bit: emit a log event (rate-limited) on match.
pub const ACTION_F_LOG: u8 = 0x01;

/// Bytes per page of the classifier-image map.
pub const IMAGE_PAGE_BYTES: usize = 4096;
/// Default pages per image slot (1 MiB).
pub const IMAGE_DEFAULT_SLOT_PAGES: u32 = 256;

/// Number of entries of the `parapet_stats` map.
pub const STAT_MAX: u32 = 18;

/// Non-terminal matches the BPF walker records per packet.
pub const MAX_NONTERM: usize = 16;

/// The classifier input that the BPF parser produces (`struct parapet_key`).
///
/// Addresses are network byte order as on the wire; an IPv4 address is in
/// the **last** four bytes and the first twelve are zero (not `::ffff:`
/// mapped — `family` tells which it is). Ports, `vlan_id`, `ifindex` and
/// `pkt_len` are host byte order. `pkt_len` is the L3 length the IP header
/// states (what iptables byte counters count); for non-IP frames, the frame
/// length.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct PacketKey {
    /// Source address.
    pub src: [u8; 16],
    /// Destination address.
    pub dst: [u8; 16],
    /// Ingress interface index.
    pub ifindex: u32,
    /// L3 length (see the type docs).
    pub pkt_len: u32,
    /// Source port (TCP, UDP, UDP-Lite, SCTP, DCCP), else 0.
    pub sport: u16,
    /// Destination port, else 0.
    pub dport: u16,
    /// VID of the outer VLAN tag when `flags & KEY_F_VLAN`, else 0.
    pub vlan_id: u16,
    /// [`FAMILY_NONE`], [`FAMILY_IPV4`] or [`FAMILY_IPV6`].
    pub family: u8,
    /// Transport protocol (after the IPv6 extension chain).
    pub proto: u8,
    /// ICMP or ICMPv6 type, else 0.
    pub icmp_type: u8,
    /// ICMP or ICMPv6 code, else 0.
    pub icmp_code: u8,
    /// TCP flags byte (CWR..FIN), else 0.
    pub tcp_flags: u8,
    /// [`FRAG_FRAGMENT`] / [`FRAG_LATER`] bits.
    pub frag: u8,
    /// [`KEY_F_VLAN`] and [`KEY_F_CT`] bits.
    pub flags: u8,
    /// `CT_*` from the kernel's conntrack table when the lookup ran for
    /// this packet (`flags & KEY_F_CT`), else 0.
    pub ctstate: u8,
    /// Always zero.
    pub _pad: [u8; 2],
}

impl PacketKey {
    /// The source address as an [`IpAddr`], `None` for non-IP.
    pub fn src_ip(&self) -> Option<IpAddr> {
        addr(self.family, &self.src)
    }

    /// The destination address as an [`IpAddr`], `None` for non-IP.
    pub fn dst_ip(&self) -> Option<IpAddr> {
        addr(self.family, &self.dst)
    }
}

/// `PacketKey` is the C ABI view of a [`Packet`], the one packet shape:
/// the image key of a parsed packet is `KeyWords::new(&key.to_packet(..), sets)`.
impl PacketKey {
    /// The packet this key describes, as the BPF program builds its image
    /// key from it: `iif` the ingress interface's name, no `oif` at
    /// ingress, `ctstate` the conntrack result when the lookup ran else
    /// UNTRACKED, `fragment` for non-first fragments. `None` for non-IP
    /// frames (never classified).
    pub fn to_packet(&self, iif: parapet_model::IfName) -> Option<Packet> {
        let family = match self.family {
            FAMILY_IPV4 => Family::V4,
            FAMILY_IPV6 => Family::V6,
            _ => return None,
        };
        let ct_state = match self.ctstate {
            _ if self.flags & KEY_F_CT == 0 => CtState::Untracked,
            s => CtState::ALL
                .into_iter()
                .find(|c| *c as u8 == s)
                .unwrap_or(CtState::Invalid),
        };
        Some(Packet {
            family,
            src: u128::from_be_bytes(self.src),
            dst: u128::from_be_bytes(self.dst),
            proto: self.proto,
            sport: self.sport,
            dport: self.dport,
            icmp_type: self.icmp_type,
            icmp_code: self.icmp_code,
            tcp_flags: self.tcp_flags,
            iif,
            oif: parapet_model::IfName::default(),
            ct_state,
            fragment: self.frag & FRAG_LATER != 0,
            len: self.pkt_len,
        })
    }

    /// The key of a packet as the BPF parser would fill it (no interface
    /// index, no VLAN; `ctstate` with [`KEY_F_CT`] unless UNTRACKED; a
    /// fragment is a non-first one).
    pub fn from_packet(p: &Packet) -> PacketKey {
        let tracked = p.ct_state != CtState::Untracked;
        PacketKey {
            src: p.src.to_be_bytes(),
            dst: p.dst.to_be_bytes(),
            pkt_len: p.len,
            sport: p.sport,
            dport: p.dport,
            family: match p.family {
                Family::V4 => FAMILY_IPV4,
                Family::V6 => FAMILY_IPV6,
            },
            proto: p.proto,
            icmp_type: p.icmp_type,
            icmp_code: p.icmp_code,
            tcp_flags: p.tcp_flags,
            frag: if p.fragment {
                FRAG_FRAGMENT | FRAG_LATER
            } else {
                0
            },
            flags: if tracked { KEY_F_CT } else { 0 },
            ctstate: if tracked { p.ct_state as u8 } else { 0 },
            ..PacketKey::default()
        }
    }
}

fn addr(family: u8, b: &[u8; 16]) -> Option<IpAddr> {
    match family {
        FAMILY_IPV4 => Some(IpAddr::V4(Ipv4Addr::new(b[12], b[13], b[14], b[15]))),
        FAMILY_IPV6 => Some(IpAddr::V6(Ipv6Addr::from(*b))),
        _ => None,
    }
}

/// What the parser made of a frame (`enum parapet_parse_status`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[repr(u32)]
pub enum ParseStatus {
    /// Parsed; the key is complete.
    Ok = 0,
    /// Not IP (ARP, LLDP, ...): passed without classification.
    NotIp = 1,
    /// A header runs past the end of the data or the datagram: dropped.
    Truncated = 2,
    /// Bad IP version, IHL, length or TCP data offset: dropped.
    Malformed = 3,
    /// More VLAN tags or IPv6 extension headers than the parser walks:
    /// dropped.
    ExtLimit = 4,
}

impl ParseStatus {
    /// From the raw value the BPF side writes; unknown values map to `None`.
    pub fn from_raw(v: u32) -> Option<Self> {
        Some(match v {
            0 => Self::Ok,
            1 => Self::NotIp,
            2 => Self::Truncated,
            3 => Self::Malformed,
            4 => Self::ExtLimit,
            _ => return None,
        })
    }
}

/// A rule's verdict as the kernel program applies it
/// (`PARAPET_VERDICT_*`): what a `parapet_model::Verdict` becomes in the
/// action map, the debug record and log events.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
#[repr(u8)]
pub enum KernelVerdict {
    /// XDP_PASS / TC_ACT_OK.
    #[default]
    Accept = 0,
    /// XDP_DROP / TC_ACT_SHOT.
    Drop = 1,
    /// Dropped too: neither hook can send the ICMP/RST answer.
    Reject = 2,
}

impl KernelVerdict {
    /// From the raw value; unknown values map to `None`.
    pub fn from_raw(v: u32) -> Option<Self> {
        Some(match v {
            0 => Self::Accept,
            1 => Self::Drop,
            2 => Self::Reject,
            _ => return None,
        })
    }
}

/// `struct parapet_action`: one per rule id, entry 0 is the policy.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct RawAction {
    /// `KernelVerdict as u8`.
    pub verdict: u8,
    /// [`ACTION_F_LOG`] bit.
    pub flags: u8,
    /// `REJECT_*` type when `verdict` is REJECT.
    pub reject: u8,
    /// Zero.
    pub _pad: u8,
}

/// `struct parapet_counter`: packets and L3 bytes of one rule on one CPU.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Counter {
    /// Packets that this rule decided.
    pub packets: u64,
    /// Sum of their `pkt_len`.
    pub bytes: u64,
}

/// `struct parapet_lite_key`: key of the interim (proto, dport) classifier.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct LiteKey {
    /// Protocol; 0 with `dport` 0 matches anything.
    pub proto: u8,
    /// Zero.
    pub _pad: u8,
    /// Destination port; 0 matches any port of `proto`.
    pub dport: u16,
}

/// `struct parapet_log_limit`: GCRA state of one rule's log rate limit.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct LogLimit {
    /// 1e9 / rate; 0 disables logging for the rule.
    pub interval_ns: u64,
    /// interval_ns * (burst - 1).
    pub tolerance_ns: u64,
    /// Theoretical arrival time, owned by the BPF side.
    pub tat_ns: u64,
}

/// `PARAPET_HOOK_XDP`.
pub const HOOK_XDP: u8 = 1;
/// `PARAPET_HOOK_TC`.
pub const HOOK_TC: u8 = 2;

/// `struct parapet_log_event`: one ring-buffer record.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct RawLogEvent {
    /// CLOCK_MONOTONIC nanoseconds.
    pub ts_ns: u64,
    /// Rule that matched.
    pub rule_id: u32,
    /// `KernelVerdict as u8`.
    pub verdict: u8,
    /// [`HOOK_XDP`] or [`HOOK_TC`].
    pub hook: u8,
    /// Zero.
    pub _pad: u16,
    /// The packet.
    pub key: PacketKey,
}

/// `struct parapet_debug_rec`: the last packet's key and decision (test mode).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct DebugRec {
    /// The parsed key.
    pub key: PacketKey,
    /// Raw [`ParseStatus`].
    pub status: u32,
    /// Deciding rule id (0 = policy).
    pub rule_id: u32,
    /// Raw [`KernelVerdict`].
    pub verdict: u32,
    /// Incremented per packet.
    pub seq: u32,
    /// 1 when the image walker decided, 0 for the interim classifier.
    pub by_image: u32,
    /// Entries of `nonterm` in use.
    pub n_nonterm: u32,
    /// Rule ids of non-terminal matches, in evaluation order.
    pub nonterm: [u32; MAX_NONTERM],
    /// Why the image walker gave up on this packet (0: it did not).
    pub walk_err: u32,
    /// The image key's set bits: word 24 (references 0..31), word 25.
    pub sets: [u32; 2],
    /// `REJECT_*` type of a REJECT verdict.
    pub reject: u32,
    /// The ctstate the image saw (`CT_*`).
    pub ctstate: u32,
}

/// Most set references an image may use (one `u64` of key bits).
pub const MAX_SET_REFS: u32 = 64;
/// Set ids are `0..MAX_SETS`.
pub const MAX_SETS: u32 = 1024;
/// Dimensions of a concatenated set key.
pub const SET_MAX_DIMS: usize = 4;
/// Bytes of a concatenated set key.
pub const SET_KEY_BYTES: usize = 36;
/// Prefix-length combinations ("shapes") of a tuple set.
pub const SET_MAX_SHAPES: usize = 32;
/// `enum parapet_set_kind`: one dimension, in the LPM trie.
pub const SET_LPM: u8 = 1;
/// `enum parapet_set_kind`: anything else, in the tuple hash.
pub const SET_TUPLE: u8 = 2;

/// `struct parapet_set_ref`: how reference n builds its key.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct RawSetRef {
    /// Set id.
    pub set_id: u16,
    /// [`SET_LPM`], [`SET_TUPLE`] or 0 (never a member).
    pub kind: u8,
    /// 0 (any), 4 or 6.
    pub family: u8,
    /// Dimensions in use.
    pub n_dims: u8,
    /// `enum parapet_set_part` per dimension.
    pub part: [u8; SET_MAX_DIMS],
    /// Bytes per dimension.
    pub width: [u8; SET_MAX_DIMS],
    /// Zero.
    pub _pad: [u8; 3],
}

/// `struct parapet_set_desc`: the shapes (bit masks) of a tuple set.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RawSetDesc {
    /// Shapes in use.
    pub n_shapes: u32,
    /// Zero.
    pub _pad: u32,
    /// Per shape, the key bits it keeps (words of big-endian key bytes).
    pub mask: [[u32; SET_KEY_BYTES / 4]; SET_MAX_SHAPES],
}

impl Default for RawSetDesc {
    fn default() -> Self {
        RawSetDesc {
            n_shapes: 0,
            _pad: 0,
            mask: [[0; SET_KEY_BYTES / 4]; SET_MAX_SHAPES],
        }
    }
}

/// `struct parapet_set_lpm_key`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct SetLpmKey {
    /// 16 + the address prefix length.
    pub prefixlen: u32,
    /// Set id, big-endian.
    pub set_id: [u8; 2],
    /// Address, big-endian; IPv4 in the first 4 bytes.
    pub addr: [u8; 16],
    /// Zero.
    pub _pad: [u8; 2],
}

/// `struct parapet_set_tuple_key`.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct SetTupleKey {
    /// Set id.
    pub set_id: u16,
    /// Shape index.
    pub shape: u8,
    /// Zero.
    pub _pad: u8,
    /// Masked key bytes, dimensions back to back, big-endian.
    pub data: [u8; SET_KEY_BYTES],
}

impl Default for SetTupleKey {
    fn default() -> Self {
        SetTupleKey {
            set_id: 0,
            shape: 0,
            _pad: 0,
            data: [0; SET_KEY_BYTES],
        }
    }
}

/// `struct parapet_set_val`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SetVal {
    /// CLOCK_MONOTONIC ns; 0 = permanent.
    pub expires_ns: u64,
    /// LPM: the entry's prefixlen.
    pub prefixlen: u32,
    /// Zero.
    pub _pad: u32,
}

/// `struct parapet_ifname`: NUL-padded interface name, the image key's iif.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct IfName {
    /// The name's bytes, NUL padded.
    pub name: [u8; 16],
}

/// Indices of the `parapet_stats` per-CPU array (`enum parapet_stat`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u32)]
pub enum Stat {
    /// Every packet seen.
    Packets = 0,
    /// Non-IP frames passed unclassified.
    NotIp = 1,
    /// Truncated packets dropped.
    Truncated = 2,
    /// Malformed packets dropped.
    Malformed = 3,
    /// Packets with too many VLAN tags / IPv6 extension headers dropped.
    ExtLimit = 4,
    /// Log events written to the ring buffer.
    LogEmitted = 5,
    /// Log events suppressed by the rate limit.
    LogRateLimited = 6,
    /// Log events lost because the ring buffer was full.
    LogRingFull = 7,
    /// Rule ids without an action entry (dropped).
    NoAction = 8,
    /// Packets classified by the image walker.
    Image = 9,
    /// Packets for which the walker refused the live image (the interim
    /// classifier decided instead).
    ImageError = 10,
    /// Packets with more than [`MAX_NONTERM`] non-terminal matches (the
    /// rest were neither counted nor logged).
    NontermTruncated = 11,
    /// REJECT verdicts answered with a TCP reset or an ICMP error.
    RejectSent = 12,
    /// REJECT verdicts over the global reply rate: dropped without answer.
    RejectLimited = 13,
    /// REJECT verdicts on packets that never get an answer (ICMP errors,
    /// resets, broadcast/multicast, later fragments, a type of the other
    /// family, `tcp-reset` on non-TCP): dropped.
    RejectNoReply = 14,
    /// REJECT verdicts whose answer could not be built: dropped.
    RejectFailed = 15,
    /// Conntrack lookups made.
    CtLookup = 16,
    /// Conntrack lookups that found an entry.
    CtFound = 17,
}

/// REJECT types (`PARAPET_REJECT_*`, owned by [`parapet_image::reject`]:
/// the 4th word of an image verdict row and [`RawAction::reject`]) and the
/// kernel's limits on the answers it sends.
pub mod reject {
    pub use parapet_image::reject::*;
    /// Largest reply (L3 bytes): the IPv6 minimum MTU.
    pub const MAX_L3: usize = 1280;
    /// Default global reply rate, per second.
    pub const DEFAULT_RATE: u32 = 1000;
    /// Default burst of the reply rate.
    pub const DEFAULT_BURST: u32 = 50;
}

// SAFETY: all of these are #[repr(C)] plain integers/arrays with explicit
// padding fields, so every bit pattern is valid and there are no
// uninitialised bytes.
unsafe impl aya::Pod for PacketKey {}
// SAFETY: as above.
unsafe impl aya::Pod for RawAction {}
// SAFETY: as above.
unsafe impl aya::Pod for Counter {}
// SAFETY: as above.
unsafe impl aya::Pod for LiteKey {}
// SAFETY: as above.
unsafe impl aya::Pod for LogLimit {}
// SAFETY: as above.
unsafe impl aya::Pod for DebugRec {}
// SAFETY: as above.
unsafe impl aya::Pod for IfName {}
// SAFETY: as above.
unsafe impl aya::Pod for RawSetRef {}
// SAFETY: as above.
unsafe impl aya::Pod for RawSetDesc {}
// SAFETY: as above.
unsafe impl aya::Pod for SetLpmKey {}
// SAFETY: as above.
unsafe impl aya::Pod for SetTupleKey {}
// SAFETY: as above.
unsafe impl aya::Pod for SetVal {}

#[cfg(test)]
mod packet_view {
    use super::*;
    use parapet_model::IfName;

    #[test]
    fn packet_key_and_packet_convert_both_ways() {
        let mut p = Packet::new(Family::V6, 1 << 100 | 5, 7, 6, 1000, 22);
        p.iif = IfName::new("eth0").unwrap();
        p.ct_state = CtState::Established;
        p.fragment = true;
        let k = PacketKey::from_packet(&p);
        assert_eq!(k.src_ip(), Some(p.src_ip()));
        assert_eq!(k.to_packet(p.iif), Some(p.clone()));
        p.family = Family::V4;
        p.src = 0x0a00_0001;
        p.ct_state = CtState::Untracked;
        let k = PacketKey::from_packet(&p);
        assert_eq!(k.src_ip(), Some(p.src_ip()));
        assert_eq!(k.flags & KEY_F_CT, 0);
        assert_eq!(k.to_packet(p.iif), Some(p));
        let non_ip = PacketKey::default();
        assert_eq!(non_ip.to_packet(IfName::default()), None);
    }
}

#[cfg(test)]
mod layout {
    use super::*;
    use std::mem::{offset_of, size_of};

    include!(concat!(env!("OUT_DIR"), "/c_layout.rs"));

    fn rust_layout(s: &str, f: &str) -> usize {
        macro_rules! table {
            ($($cs:literal => $ty:ty { $($cf:literal => $rf:ident),* }),* $(,)?) => {
                match (s, f) {
                    $(
                        ($cs, "") => size_of::<$ty>(),
                        $(($cs, $cf) => offset_of!($ty, $rf),)*
                    )*
                    _ => panic!("no Rust mirror for {s}.{f}"),
                }
            };
        }
        table! {
            "parapet_key" => PacketKey {
                "src" => src, "dst" => dst, "ifindex" => ifindex, "pkt_len" => pkt_len,
                "sport" => sport, "dport" => dport, "vlan_id" => vlan_id,
                "family" => family, "proto" => proto, "icmp_type" => icmp_type,
                "icmp_code" => icmp_code, "tcp_flags" => tcp_flags, "frag" => frag,
                "flags" => flags, "ctstate" => ctstate
            },
            "parapet_action" => RawAction { "verdict" => verdict, "flags" => flags, "reject" => reject },
            "parapet_counter" => Counter { "packets" => packets, "bytes" => bytes },
            "parapet_lite_key" => LiteKey { "proto" => proto, "dport" => dport },
            "parapet_log_limit" => LogLimit {
                "interval_ns" => interval_ns, "tolerance_ns" => tolerance_ns, "tat_ns" => tat_ns
            },
            "parapet_log_event" => RawLogEvent {
                "ts_ns" => ts_ns, "rule_id" => rule_id, "verdict" => verdict,
                "hook" => hook, "key" => key
            },
            "parapet_debug_rec" => DebugRec {
                "key" => key, "status" => status, "rule_id" => rule_id,
                "verdict" => verdict, "seq" => seq, "by_image" => by_image,
                "n_nonterm" => n_nonterm, "nonterm" => nonterm, "walk_err" => walk_err,
                "sets" => sets, "reject" => reject, "ctstate" => ctstate
            },
            "parapet_set_ref" => RawSetRef {
                "set_id" => set_id, "kind" => kind, "family" => family, "n_dims" => n_dims,
                "part" => part, "width" => width
            },
            "parapet_set_desc" => RawSetDesc { "n_shapes" => n_shapes, "mask" => mask },
            "parapet_set_lpm_key" => SetLpmKey {
                "prefixlen" => prefixlen, "set_id" => set_id, "addr" => addr
            },
            "parapet_set_tuple_key" => SetTupleKey {
                "set_id" => set_id, "shape" => shape, "data" => data
            },
            "parapet_set_val" => SetVal { "expires_ns" => expires_ns, "prefixlen" => prefixlen },
            "parapet_ifname" => IfName {},
            "parapet_image_page" => [u8; IMAGE_PAGE_BYTES] {},
        }
    }

    #[test]
    fn c_and_rust_layouts_agree() {
        assert!(C_LAYOUT.len() > 30, "layout probe printed too little");
        for &(s, f, c) in C_LAYOUT {
            assert_eq!(rust_layout(s, f), c, "{s}.{f}: Rust differs from C");
        }
    }

    #[test]
    fn c_and_rust_constants_agree() {
        let rust: &[(&str, u64)] = &[
            ("PARAPET_ABI_VERSION", ABI_VERSION.into()),
            ("PARAPET_FAMILY_IPV4", FAMILY_IPV4.into()),
            ("PARAPET_FAMILY_IPV6", FAMILY_IPV6.into()),
            ("PARAPET_FRAG_FRAGMENT", FRAG_FRAGMENT.into()),
            ("PARAPET_FRAG_LATER", FRAG_LATER.into()),
            ("PARAPET_KEY_F_VLAN", KEY_F_VLAN.into()),
            ("PARAPET_KEY_F_CT", KEY_F_CT.into()),
            ("PARAPET_PARSE_OK", ParseStatus::Ok as u64),
            ("PARAPET_PARSE_NOT_IP", ParseStatus::NotIp as u64),
            ("PARAPET_PARSE_TRUNCATED", ParseStatus::Truncated as u64),
            ("PARAPET_PARSE_MALFORMED", ParseStatus::Malformed as u64),
            ("PARAPET_PARSE_EXT_LIMIT", ParseStatus::ExtLimit as u64),
            ("PARAPET_MAX_VLAN_TAGS", MAX_VLAN_TAGS as u64),
            ("PARAPET_MAX_EXT_HDRS", MAX_EXT_HDRS as u64),
            ("PARAPET_MAX_OFF", MAX_HDR_OFFSET as u64),
            ("PARAPET_VERDICT_ACCEPT", KernelVerdict::Accept as u64),
            ("PARAPET_VERDICT_DROP", KernelVerdict::Drop as u64),
            ("PARAPET_VERDICT_REJECT", KernelVerdict::Reject as u64),
            ("PARAPET_ACTION_F_LOG", ACTION_F_LOG.into()),
            ("PARAPET_HOOK_XDP", HOOK_XDP.into()),
            ("PARAPET_HOOK_TC", HOOK_TC.into()),
            ("PARAPET_STAT_MAX", STAT_MAX.into()),
            ("PARAPET_IMAGE_PAGE_BYTES", IMAGE_PAGE_BYTES as u64),
            (
                "PARAPET_IMAGE_DEFAULT_SLOT_PAGES",
                IMAGE_DEFAULT_SLOT_PAGES.into(),
            ),
            ("PARAPET_MAX_NONTERM", MAX_NONTERM as u64),
            ("PARAPET_IMG_MAGIC", parapet_image::MAGIC.into()),
            ("PARAPET_IMG_VERSION", parapet_image::VERSION.into()),
            (
                "PARAPET_IMG_HEADER_WORDS",
                parapet_image::HEADER_WORDS as u64,
            ),
            ("PARAPET_IMG_KEY_WORDS", parapet_image::KEY_WORDS as u64),
            (
                "PARAPET_HW_TOTAL_WORDS",
                parapet_image::hw::TOTAL_WORDS as u64,
            ),
            ("PARAPET_HW_CHECKSUM", parapet_image::hw::CHECKSUM as u64),
            ("PARAPET_CT_UNTRACKED", parapet_image::ct::UNTRACKED.into()),
            ("PARAPET_MAX_SET_REFS", MAX_SET_REFS.into()),
            ("PARAPET_MAX_SETS", MAX_SETS.into()),
            ("PARAPET_SET_MAX_DIMS", SET_MAX_DIMS as u64),
            ("PARAPET_SET_KEY_BYTES", SET_KEY_BYTES as u64),
            ("PARAPET_SET_MAX_SHAPES", SET_MAX_SHAPES as u64),
            ("PARAPET_SET_LPM", SET_LPM.into()),
            ("PARAPET_SET_TUPLE", SET_TUPLE.into()),
            ("PARAPET_REJECT_DEFAULT", reject::DEFAULT.into()),
            (
                "PARAPET_REJECT_ICMP_NET_UNREACHABLE",
                reject::ICMP_NET_UNREACHABLE.into(),
            ),
            (
                "PARAPET_REJECT_ICMP_HOST_UNREACHABLE",
                reject::ICMP_HOST_UNREACHABLE.into(),
            ),
            (
                "PARAPET_REJECT_ICMP_PORT_UNREACHABLE",
                reject::ICMP_PORT_UNREACHABLE.into(),
            ),
            (
                "PARAPET_REJECT_ICMP_PROTO_UNREACHABLE",
                reject::ICMP_PROTO_UNREACHABLE.into(),
            ),
            (
                "PARAPET_REJECT_ICMP_NET_PROHIBITED",
                reject::ICMP_NET_PROHIBITED.into(),
            ),
            (
                "PARAPET_REJECT_ICMP_HOST_PROHIBITED",
                reject::ICMP_HOST_PROHIBITED.into(),
            ),
            (
                "PARAPET_REJECT_ICMP_ADMIN_PROHIBITED",
                reject::ICMP_ADMIN_PROHIBITED.into(),
            ),
            ("PARAPET_REJECT_TCP_RESET", reject::TCP_RESET.into()),
            (
                "PARAPET_REJECT_ICMP6_NO_ROUTE",
                reject::ICMP6_NO_ROUTE.into(),
            ),
            (
                "PARAPET_REJECT_ICMP6_ADM_PROHIBITED",
                reject::ICMP6_ADM_PROHIBITED.into(),
            ),
            (
                "PARAPET_REJECT_ICMP6_ADDR_UNREACHABLE",
                reject::ICMP6_ADDR_UNREACHABLE.into(),
            ),
            (
                "PARAPET_REJECT_ICMP6_PORT_UNREACHABLE",
                reject::ICMP6_PORT_UNREACHABLE.into(),
            ),
            (
                "PARAPET_REJECT_ICMP6_POLICY_FAIL",
                reject::ICMP6_POLICY_FAIL.into(),
            ),
            (
                "PARAPET_REJECT_ICMP6_REJECT_ROUTE",
                reject::ICMP6_REJECT_ROUTE.into(),
            ),
            (
                "PARAPET_REJECT_ICMPX_NO_ROUTE",
                reject::ICMPX_NO_ROUTE.into(),
            ),
            (
                "PARAPET_REJECT_ICMPX_ADMIN_PROHIBITED",
                reject::ICMPX_ADMIN_PROHIBITED.into(),
            ),
            (
                "PARAPET_REJECT_ICMPX_HOST_UNREACHABLE",
                reject::ICMPX_HOST_UNREACHABLE.into(),
            ),
            (
                "PARAPET_REJECT_ICMPX_PORT_UNREACHABLE",
                reject::ICMPX_PORT_UNREACHABLE.into(),
            ),
            ("PARAPET_REJECT_UNKNOWN", reject::UNKNOWN.into()),
            ("PARAPET_REJECT_MAX_L3", reject::MAX_L3 as u64),
            ("PARAPET_REJECT_DEFAULT_RATE", reject::DEFAULT_RATE.into()),
            ("PARAPET_REJECT_DEFAULT_BURST", reject::DEFAULT_BURST.into()),
            ("PARAPET_CT_INVALID", parapet_image::ct::INVALID.into()),
            ("PARAPET_CT_NEW", parapet_image::ct::NEW.into()),
            (
                "PARAPET_CT_ESTABLISHED",
                parapet_image::ct::ESTABLISHED.into(),
            ),
            ("PARAPET_CT_RELATED", parapet_image::ct::RELATED.into()),
            ("PARAPET_IMG_NODE_WORDS", (parapet_image::NODE_WORDS) as u64),
            (
                "PARAPET_IMG_PARTITION_WORDS",
                (parapet_image::PARTITION_WORDS) as u64,
            ),
            (
                "PARAPET_IMG_VERDICT_WORDS",
                (parapet_image::VERDICT_WORDS) as u64,
            ),
            (
                "PARAPET_IMG_RECORD_HEADER_WORDS",
                (parapet_image::RECORD_HEADER_WORDS) as u64,
            ),
            ("PARAPET_IMG_MAX_DEPTH", (parapet_image::MAX_DEPTH) as u64),
            ("PARAPET_IMG_MAX_LEAF", (parapet_image::MAX_LEAF) as u64),
            (
                "PARAPET_IMG_MAX_PARTITIONS",
                (parapet_image::MAX_PARTITIONS) as u64,
            ),
            ("PARAPET_IMG_LEAF_BIT", (parapet_image::LEAF_BIT) as u64),
            ("PARAPET_IMG_WIDE_BIT", (parapet_image::WIDE_BIT) as u64),
            ("PARAPET_IMG_SET_FIELD", (parapet_image::SET_FIELD) as u64),
            (
                "PARAPET_IMG_FLAG_PURE_FIRST_MATCH",
                (parapet_image::FLAG_PURE_FIRST_MATCH) as u64,
            ),
            (
                "PARAPET_IMG_KIND_DECIDE",
                (parapet_image::kind::DECIDE) as u64,
            ),
            ("PARAPET_IMG_KIND_LOG", (parapet_image::kind::LOG) as u64),
            (
                "PARAPET_IMG_KIND_COUNT",
                (parapet_image::kind::COUNT) as u64,
            ),
            ("PARAPET_IMG_KIND_JUMP", (parapet_image::kind::JUMP) as u64),
            (
                "PARAPET_IMG_KIND_RETURN",
                (parapet_image::kind::RETURN) as u64,
            ),
            (
                "PARAPET_IMG_KIND_COUNTED_BIT",
                (parapet_image::kind::COUNTED_BIT) as u64,
            ),
            ("PARAPET_HW_MAGIC", (parapet_image::hw::MAGIC) as u64),
            ("PARAPET_HW_VERSION", (parapet_image::hw::VERSION) as u64),
            ("PARAPET_HW_BACKEND", (parapet_image::hw::BACKEND) as u64),
            ("PARAPET_HW_FLAGS", (parapet_image::hw::FLAGS) as u64),
            (
                "PARAPET_HW_N_ENTRIES",
                (parapet_image::hw::N_ENTRIES) as u64,
            ),
            (
                "PARAPET_HW_N_PARTITIONS",
                (parapet_image::hw::N_PARTITIONS) as u64,
            ),
            ("PARAPET_HW_POLICY", (parapet_image::hw::POLICY) as u64),
            (
                "PARAPET_HW_MAX_DEPTH",
                (parapet_image::hw::MAX_DEPTH) as u64,
            ),
            ("PARAPET_HW_MAX_LEAF", (parapet_image::hw::MAX_LEAF) as u64),
            (
                "PARAPET_HW_MAX_RANGES",
                (parapet_image::hw::MAX_RANGES) as u64,
            ),
            (
                "PARAPET_HW_SET_REF_COUNT",
                (parapet_image::hw::SET_REF_COUNT) as u64,
            ),
            (
                "PARAPET_HW_PARTITIONS_OFF",
                (parapet_image::hw::PARTITIONS_OFF) as u64,
            ),
            (
                "PARAPET_HW_NODES_OFF",
                (parapet_image::hw::NODES_OFF) as u64,
            ),
            ("PARAPET_HW_N_NODES", (parapet_image::hw::N_NODES) as u64),
            (
                "PARAPET_HW_LEAVES_OFF",
                (parapet_image::hw::LEAVES_OFF) as u64,
            ),
            (
                "PARAPET_HW_LEAVES_WORDS",
                (parapet_image::hw::LEAVES_WORDS) as u64,
            ),
            (
                "PARAPET_HW_ENTRY_TABLE_OFF",
                (parapet_image::hw::ENTRY_TABLE_OFF) as u64,
            ),
            (
                "PARAPET_HW_ENTRIES_OFF",
                (parapet_image::hw::ENTRIES_OFF) as u64,
            ),
            (
                "PARAPET_HW_ENTRIES_WORDS",
                (parapet_image::hw::ENTRIES_WORDS) as u64,
            ),
            (
                "PARAPET_HW_VERDICTS_OFF",
                (parapet_image::hw::VERDICTS_OFF) as u64,
            ),
            (
                "PARAPET_HW_N_VERDICTS",
                (parapet_image::hw::N_VERDICTS) as u64,
            ),
            (
                "PARAPET_HW_STRINGS_OFF",
                (parapet_image::hw::STRINGS_OFF) as u64,
            ),
            (
                "PARAPET_HW_STRINGS_BYTES",
                (parapet_image::hw::STRINGS_BYTES) as u64,
            ),
            (
                "PARAPET_HW_FANOUT_OFF",
                (parapet_image::hw::FANOUT_OFF) as u64,
            ),
            (
                "PARAPET_HW_FANOUT_WORDS",
                (parapet_image::hw::FANOUT_WORDS) as u64,
            ),
            (
                "PARAPET_IMG_NODE_BINARY",
                (parapet_image::NODE_BINARY) as u64,
            ),
            (
                "PARAPET_IMG_NODE_MULTIWAY",
                (parapet_image::NODE_MULTI) as u64,
            ),
            (
                "PARAPET_IMG_MAX_FANOUT_BITS",
                (parapet_image::MAX_FANOUT_BITS) as u64,
            ),
            ("PARAPET_KW_FAMILY", (parapet_image::KEY_OFF[0]) as u64),
            ("PARAPET_KW_SADDR", (parapet_image::KEY_OFF[1]) as u64),
            ("PARAPET_KW_DADDR", (parapet_image::KEY_OFF[2]) as u64),
            ("PARAPET_KW_PROTO", (parapet_image::KEY_OFF[3]) as u64),
            ("PARAPET_KW_SPORT", (parapet_image::KEY_OFF[4]) as u64),
            ("PARAPET_KW_DPORT", (parapet_image::KEY_OFF[5]) as u64),
            ("PARAPET_KW_ICMP", (parapet_image::KEY_OFF[6]) as u64),
            ("PARAPET_KW_TCPFLAGS", (parapet_image::KEY_OFF[7]) as u64),
            ("PARAPET_KW_IIF", (parapet_image::KEY_OFF[8]) as u64),
            ("PARAPET_KW_OIF", (parapet_image::KEY_OFF[9]) as u64),
            ("PARAPET_KW_CTSTATE", (parapet_image::KEY_OFF[10]) as u64),
            ("PARAPET_KW_FRAGMENT", (parapet_image::KEY_OFF[11]) as u64),
            ("PARAPET_KW_SETS", (parapet_image::KEY_SETS) as u64),
        ];
        assert_eq!(
            rust.len(),
            C_CONSTS.len(),
            "constant lists differ in length"
        );
        for (&(cn, cv), &(rn, rv)) in C_CONSTS.iter().zip(rust) {
            assert_eq!(cn, rn, "constant order differs");
            assert_eq!(cv, rv, "{cn}: Rust differs from C");
        }
    }
}
