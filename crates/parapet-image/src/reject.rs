//! REJECT types (`PARAPET_REJECT_*` in `bpf/parapet.h`): the 4th word of an
//! image verdict row and the dataplane's `RawAction::reject`, and
//! [`reject_code`], which maps `--reject-with` names to them.

/// iptables' default: ICMP port unreachable of the packet's family.
pub const DEFAULT: u8 = 0;
/// `icmp-net-unreachable` (3/0).
pub const ICMP_NET_UNREACHABLE: u8 = 1;
/// `icmp-host-unreachable` (3/1).
pub const ICMP_HOST_UNREACHABLE: u8 = 2;
/// `icmp-port-unreachable` (3/3).
pub const ICMP_PORT_UNREACHABLE: u8 = 3;
/// `icmp-proto-unreachable` (3/2).
pub const ICMP_PROTO_UNREACHABLE: u8 = 4;
/// `icmp-net-prohibited` (3/9).
pub const ICMP_NET_PROHIBITED: u8 = 5;
/// `icmp-host-prohibited` (3/10).
pub const ICMP_HOST_PROHIBITED: u8 = 6;
/// `icmp-admin-prohibited` (3/13).
pub const ICMP_ADMIN_PROHIBITED: u8 = 7;
/// `tcp-reset`.
pub const TCP_RESET: u8 = 8;
/// `icmp6-no-route` (1/0).
pub const ICMP6_NO_ROUTE: u8 = 9;
/// `icmp6-adm-prohibited` (1/1).
pub const ICMP6_ADM_PROHIBITED: u8 = 10;
/// `icmp6-addr-unreachable` (1/3).
pub const ICMP6_ADDR_UNREACHABLE: u8 = 11;
/// `icmp6-port-unreachable` (1/4).
pub const ICMP6_PORT_UNREACHABLE: u8 = 12;
/// `icmp6-policy-fail` (1/5).
pub const ICMP6_POLICY_FAIL: u8 = 13;
/// `icmp6-reject-route` (1/6).
pub const ICMP6_REJECT_ROUTE: u8 = 14;
/// `icmpx-no-route` (3/0 or 1/0).
pub const ICMPX_NO_ROUTE: u8 = 15;
/// `icmpx-admin-prohibited` (3/13 or 1/1).
pub const ICMPX_ADMIN_PROHIBITED: u8 = 16;
/// `icmpx-host-unreachable` (3/1 or 1/3).
pub const ICMPX_HOST_UNREACHABLE: u8 = 17;
/// `icmpx-port-unreachable` (3/3 or 1/4).
pub const ICMPX_PORT_UNREACHABLE: u8 = 18;
/// A name the writer did not know: drop without an answer.
pub const UNKNOWN: u8 = 255;

/// The reject type of a REJECT's `--reject-with` name. `None` (no
/// `--reject-with`) is [`DEFAULT`], iptables' default (ICMP port
/// unreachable of the packet's family); iptables' short aliases
/// (`port-unreach`, …) and nft's `icmpx` types are understood; an unknown
/// name is [`UNKNOWN`] (the kernel drops without answering).
pub fn reject_code(with: Option<&str>) -> u32 {
    let Some(w) = with else {
        return DEFAULT.into();
    };
    let code = match w {
        "icmp-net-unreachable" | "net-unreach" => ICMP_NET_UNREACHABLE,
        "icmp-host-unreachable" | "host-unreach" => ICMP_HOST_UNREACHABLE,
        "icmp-port-unreachable" => ICMP_PORT_UNREACHABLE,
        "icmp-proto-unreachable" | "proto-unreach" => ICMP_PROTO_UNREACHABLE,
        "icmp-net-prohibited" | "net-prohib" => ICMP_NET_PROHIBITED,
        "icmp-host-prohibited" | "host-prohib" => ICMP_HOST_PROHIBITED,
        "icmp-admin-prohibited" | "admin-prohib" => ICMP_ADMIN_PROHIBITED,
        "tcp-reset" | "tcp-rst" => TCP_RESET,
        "icmp6-no-route" | "no-route" => ICMP6_NO_ROUTE,
        "icmp6-adm-prohibited" | "adm-prohibited" => ICMP6_ADM_PROHIBITED,
        "icmp6-addr-unreachable" | "addr-unreach" => ICMP6_ADDR_UNREACHABLE,
        "icmp6-port-unreachable" => ICMP6_PORT_UNREACHABLE,
        "icmp6-policy-fail" | "policy-fail" => ICMP6_POLICY_FAIL,
        "icmp6-reject-route" | "reject-route" => ICMP6_REJECT_ROUTE,
        "icmpx-no-route" => ICMPX_NO_ROUTE,
        "icmpx-admin-prohibited" => ICMPX_ADMIN_PROHIBITED,
        "icmpx-host-unreachable" => ICMPX_HOST_UNREACHABLE,
        // the alias means the table's family's port unreachable
        "icmpx-port-unreachable" | "port-unreach" => ICMPX_PORT_UNREACHABLE,
        _ => UNKNOWN,
    };
    code.into()
}
