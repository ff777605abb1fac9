//! The layout probe's numbers (`build.rs`, `bpf/layout_probe.c`) against
//! the Rust mirrors: every size, offset and constant.

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
            "flags" => flags, "ctstate" => ctstate, "ttl" => ttl, "dscp" => dscp,
            "oifindex" => oifindex
        },
        "parapet_action" => RawAction { "verdict" => verdict, "flags" => flags, "reject" => reject },
        "parapet_counter" => Counter { "packets" => packets, "bytes" => bytes },
        "parapet_hook_stat" => HookStat { "packets" => packets, "bytes" => bytes, "dropped" => dropped },
        "parapet_lite_key" => LiteKey { "proto" => proto, "dport" => dport },
        "parapet_log_limit" => LogLimit {
            "interval_ns" => interval_ns, "tolerance_ns" => tolerance_ns, "tat_ns" => tat_ns
        },
        "parapet_log_event" => RawLogEvent {
            "ts_ns" => ts_ns, "rule_id" => rule_id, "verdict" => verdict,
            "hook" => hook, "key" => key
        },
        "parapet_nf_reject" => reject::RawNfReject {
            "rtype" => rtype, "hook" => hook, "family" => family, "len" => len,
            "ifindex" => ifindex, "oifindex" => oifindex, "ts_ns" => ts_ns, "pkt" => pkt
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
        "parapet_set_exact4_key" => SetExact4Key { "set_id" => set_id, "addr" => addr },
        "parapet_set_exact6_key" => SetExact6Key { "set_id" => set_id, "addr" => addr },
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
        ("PARAPET_KEY_CT_STATUS_SHIFT", KEY_CT_STATUS_SHIFT.into()),
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
        ("PARAPET_HOOK_NF_INPUT", HOOK_NF_INPUT.into()),
        ("PARAPET_HOOK_NF_FORWARD", HOOK_NF_FORWARD.into()),
        ("PARAPET_HOOK_NF_OUTPUT", HOOK_NF_OUTPUT.into()),
        ("PARAPET_HOOK_NF_PREROUTING", HOOK_NF_PREROUTING.into()),
        ("PARAPET_HOOK_NF_POSTROUTING", HOOK_NF_POSTROUTING.into()),
        ("PARAPET_IMAGES", IMAGES.into()),
        ("PARAPET_STAT_MAX", STAT_MAX.into()),
        ("PARAPET_HOOK_ROWS", HOOK_ROWS.into()),
        ("PARAPET_HOOK_IFACES", HOOK_IFACES.into()),
        ("PARAPET_NF_REJECT_BYTES", reject::NF_REJECT_BYTES as u64),
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
        (
            "PARAPET_IMG_MAX_CONSTRAINTS",
            (parapet_image::MAX_CONSTRAINTS) as u64,
        ),
        ("PARAPET_IMG_MAX_LEAF", (parapet_image::MAX_LEAF) as u64),
        (
            "PARAPET_IMG_MAX_PARTITIONS",
            (parapet_image::MAX_PARTITIONS) as u64,
        ),
        ("PARAPET_IMG_LEAF_BIT", (parapet_image::LEAF_BIT) as u64),
        ("PARAPET_IMG_WIDE_BIT", (parapet_image::WIDE_BIT) as u64),
        ("PARAPET_IMG_MASKED_BIT", (parapet_image::MASKED_BIT) as u64),
        (
            "PARAPET_IMG_MASK_NEGATE_BIT",
            (parapet_image::MASK_NEGATE_BIT) as u64,
        ),
        (
            "PARAPET_IMG_FIXED_FIELDS",
            (parapet_image::FIXED_FIELDS) as u64,
        ),
        ("PARAPET_IMG_SET_FIELD", (parapet_image::SET_FIELD) as u64),
        (
            "PARAPET_IMG_FLAG_PURE_FIRST_MATCH",
            (parapet_image::FLAG_PURE_FIRST_MATCH) as u64,
        ),
        (
            "PARAPET_IMG_FLAG_ADDR_TYPES",
            (parapet_image::FLAG_ADDR_TYPES) as u64,
        ),
        (
            "PARAPET_IMG_FLAG_TCP_OPTIONS",
            (parapet_image::FLAG_TCP_OPTIONS) as u64,
        ),
        (
            "PARAPET_IMG_FLAG_PATTERNS",
            (parapet_image::FLAG_PATTERNS) as u64,
        ),
        (
            "PARAPET_IMG_FLAG_REV_PATH",
            (parapet_image::FLAG_REV_PATH) as u64,
        ),
        (
            "PARAPET_IMG_PATTERN_FIELD",
            (parapet_image::patterns::FIELD) as u64,
        ),
        (
            "PARAPET_IMG_PATTERN_ROW_WORDS",
            (parapet_image::patterns::ROW_WORDS) as u64,
        ),
        (
            "PARAPET_IMG_PATTERN_MAX_ROWS",
            (parapet_image::patterns::MAX_ROWS) as u64,
        ),
        (
            "PARAPET_IMG_PATTERN_MAX_LEN",
            (parapet_model::string_match::MAX_PATTERN) as u64,
        ),
        (
            "PARAPET_IMG_PATTERN_F_ICASE",
            (parapet_image::patterns::F_ICASE) as u64,
        ),
        (
            "PARAPET_KW_PATTERNS",
            (parapet_image::patterns::KEY_WORD) as u64,
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
        (
            "PARAPET_IMG_KIND_STATEFUL_BIT",
            (parapet_image::kind::STATEFUL_BIT) as u64,
        ),
        (
            "PARAPET_IMG_STATEFUL_ROW_SHIFT",
            (parapet_image::kind::STATEFUL_ROW_SHIFT) as u64,
        ),
        (
            "PARAPET_IMG_STATEFUL_ROW_WORDS",
            (parapet_image::stateful::ROW_WORDS) as u64,
        ),
        (
            "PARAPET_IMG_STATEFUL_MAX_ROWS",
            (parapet_image::stateful::MAX_ROWS) as u64,
        ),
        (
            "PARAPET_IMG_STATEFUL_XT_LIMIT",
            (parapet_image::stateful::XT_LIMIT) as u64,
        ),
        (
            "PARAPET_IMG_STATEFUL_NFT_LIMIT",
            (parapet_image::stateful::NFT_LIMIT) as u64,
        ),
        (
            "PARAPET_IMG_STATEFUL_F_OVER",
            (parapet_image::stateful::F_OVER) as u64,
        ),
        (
            "PARAPET_IMG_STATEFUL_RECENT",
            (parapet_image::stateful::RECENT) as u64,
        ),
        (
            "PARAPET_IMG_STATEFUL_RECENT_CMD_SHIFT",
            (parapet_image::stateful::RECENT_CMD_SHIFT) as u64,
        ),
        (
            "PARAPET_IMG_STATEFUL_F_RDEST",
            (parapet_image::stateful::F_RDEST) as u64,
        ),
        (
            "PARAPET_IMG_STATEFUL_F_INVERT",
            (parapet_image::stateful::F_INVERT) as u64,
        ),
        (
            "PARAPET_IMG_STATEFUL_F_REAP",
            (parapet_image::stateful::F_REAP) as u64,
        ),
        (
            "PARAPET_IMG_STATEFUL_F_RTTL",
            (parapet_image::stateful::F_RTTL) as u64,
        ),
        (
            "PARAPET_IMG_STATEFUL_RECENT_MAX_HITCOUNT",
            (parapet_image::stateful::RECENT_MAX_HITCOUNT) as u64,
        ),
        (
            "PARAPET_IMG_STATEFUL_HASHLIMIT",
            (parapet_image::stateful::HASHLIMIT) as u64,
        ),
        (
            "PARAPET_IMG_STATEFUL_HASHLIMIT_MODE_SHIFT",
            (parapet_image::stateful::HASHLIMIT_MODE_SHIFT) as u64,
        ),
        (
            "PARAPET_IMG_STATEFUL_F_ABOVE",
            (parapet_image::stateful::F_ABOVE) as u64,
        ),
        (
            "PARAPET_IMG_STATEFUL_HASHLIMIT_SRCMASK_SHIFT",
            (parapet_image::stateful::HASHLIMIT_SRCMASK_SHIFT) as u64,
        ),
        (
            "PARAPET_IMG_STATEFUL_HASHLIMIT_DSTMASK_SHIFT",
            (parapet_image::stateful::HASHLIMIT_DSTMASK_SHIFT) as u64,
        ),
        (
            "PARAPET_IMG_STATEFUL_HASHLIMIT_BURST_SHIFT",
            (parapet_image::stateful::HASHLIMIT_BURST_SHIFT) as u64,
        ),
        (
            "PARAPET_IMG_STATEFUL_DYNSET",
            (parapet_image::stateful::DYNSET) as u64,
        ),
        (
            "PARAPET_IMG_STATEFUL_DYNSET_OP_SHIFT",
            (parapet_image::stateful::DYNSET_OP_SHIFT) as u64,
        ),
        (
            "PARAPET_IMG_STATEFUL_F_DYNSET_LIMIT",
            (parapet_image::stateful::F_DYNSET_LIMIT) as u64,
        ),
        (
            "PARAPET_IMG_STATEFUL_F_DYNSET_OVER",
            (parapet_image::stateful::F_DYNSET_OVER) as u64,
        ),
        (
            "PARAPET_IMG_STATEFUL_DYNSET_PORT_SHIFT",
            (parapet_image::stateful::DYNSET_PORT_SHIFT) as u64,
        ),
        (
            "PARAPET_IMG_STATEFUL_DYNSET_PORT_CONST_SHIFT",
            (parapet_image::stateful::DYNSET_PORT_CONST_SHIFT) as u64,
        ),
        (
            "PARAPET_IMG_STATEFUL_DYNSET_UNIT_SHIFT",
            (parapet_image::stateful::DYNSET_UNIT_SHIFT) as u64,
        ),
        (
            "PARAPET_IMG_STATEFUL_DYNSET_BURST_SHIFT",
            (parapet_image::stateful::DYNSET_BURST_SHIFT) as u64,
        ),
        (
            "PARAPET_IMG_STATEFUL_QUOTA",
            (parapet_image::stateful::QUOTA) as u64,
        ),
        (
            "PARAPET_IMG_STATEFUL_TIME",
            (parapet_image::stateful::TIME) as u64,
        ),
        (
            "PARAPET_IMG_STATEFUL_STATISTIC_NTH",
            (parapet_image::stateful::STATISTIC_NTH) as u64,
        ),
        (
            "PARAPET_IMG_STATEFUL_STATISTIC_RANDOM",
            (parapet_image::stateful::STATISTIC_RANDOM) as u64,
        ),
        (
            "PARAPET_IMG_STATEFUL_F_KERNEL_TZ",
            (parapet_image::stateful::F_KERNEL_TZ) as u64,
        ),
        (
            "PARAPET_IMG_STATEFUL_F_CONTIGUOUS",
            (parapet_image::stateful::F_CONTIGUOUS) as u64,
        ),
        (
            "PARAPET_IMG_STATEFUL_TIME_DAYTIME_STOP_SHIFT",
            (parapet_image::stateful::TIME_DAYTIME_STOP_SHIFT) as u64,
        ),
        (
            "PARAPET_IMG_STATEFUL_TIME_WEEKDAYS_SHIFT",
            (parapet_image::stateful::TIME_WEEKDAYS_SHIFT) as u64,
        ),
        (
            "PARAPET_HASHLIMIT_HASH_DIP",
            (parapet_model::HASHLIMIT_DSTIP) as u64,
        ),
        (
            "PARAPET_HASHLIMIT_HASH_DPT",
            (parapet_model::HASHLIMIT_DSTPORT) as u64,
        ),
        (
            "PARAPET_HASHLIMIT_HASH_SIP",
            (parapet_model::HASHLIMIT_SRCIP) as u64,
        ),
        (
            "PARAPET_HASHLIMIT_HASH_SPT",
            (parapet_model::HASHLIMIT_SRCPORT) as u64,
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
            "PARAPET_HW_STATEFUL_OFF",
            (parapet_image::hw::STATEFUL_OFF) as u64,
        ),
        (
            "PARAPET_HW_N_STATEFUL",
            (parapet_image::hw::N_STATEFUL) as u64,
        ),
        (
            "PARAPET_HW_PATTERNS_OFF",
            (parapet_image::hw::PATTERNS_OFF) as u64,
        ),
        (
            "PARAPET_HW_N_PATTERNS",
            (parapet_image::hw::N_PATTERNS) as u64,
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
        ("PARAPET_KW_TTL", (parapet_image::KEY_OFF[12]) as u64),
        ("PARAPET_KW_DSCP", (parapet_image::KEY_OFF[13]) as u64),
        ("PARAPET_KW_LENGTH", (parapet_image::KEY_OFF[14]) as u64),
        ("PARAPET_KW_CTSTATUS", (parapet_image::KEY_OFF[15]) as u64),
        ("PARAPET_KW_MARK", (parapet_image::KEY_OFF[16]) as u64),
        ("PARAPET_KW_CTMARK", (parapet_image::KEY_OFF[17]) as u64),
        (
            "PARAPET_KW_CTORIGDPORT",
            (parapet_image::KEY_OFF[18]) as u64,
        ),
        ("PARAPET_KW_CTPROTO", (parapet_image::KEY_OFF[19]) as u64),
        ("PARAPET_KW_STYPE", (parapet_image::KEY_OFF[20]) as u64),
        ("PARAPET_KW_DTYPE", (parapet_image::KEY_OFF[21]) as u64),
        ("PARAPET_KW_PKTTYPE", (parapet_image::KEY_OFF[22]) as u64),
        ("PARAPET_KW_MACSRC", (parapet_image::KEY_OFF[23]) as u64),
        ("PARAPET_KW_RT", (parapet_image::KEY_OFF[24]) as u64),
        ("PARAPET_KW_SKUID", (parapet_image::KEY_OFF[25]) as u64),
        ("PARAPET_KW_SKGID", (parapet_image::KEY_OFF[26]) as u64),
        ("PARAPET_KW_TCPOPT_LO", (parapet_image::KEY_OFF[27]) as u64),
        ("PARAPET_KW_TCPOPT_HI", (parapet_image::KEY_OFF[28]) as u64),
        ("PARAPET_KW_REVPATH", (parapet_image::KEY_OFF[29]) as u64),
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
