//! The IPv4 router case both placements of the netfilter hooks are checked
//! with (`netfilter_oracle.rs`: BPF netfilter links, in four twins;
//! `netfilter_oracle_tc.rs`: the tc placement): a filter ruleset over the
//! router bed's DNAT ([`super::nf_twins::NAT4`]), UDP and TCP probes to R
//! (INPUT), through R (FORWARD: DNAT'ed, a conntrack reply, a user chain
//! with RETURN, REJECTs) and from R (OUTPUT), and the fates the kernel
//! gives them.

use super::router::{p, tcp, Fate, Probe, Side, V4};

/// Rule 1 is the DNAT rule (the kernel's). Rule ids: 2.. INPUT, FORWARD,
/// OUTPUT, `fwd_udp` in file order.
pub const FILTER4: &str = "*filter
:INPUT DROP [0:0]
:FORWARD DROP [0:0]
:OUTPUT ACCEPT [0:0]
:fwd_udp - [0:0]
-A INPUT -p udp -m udp --dport 6000 -j ACCEPT
-A INPUT -s 10.71.1.0/24 -p udp -m udp --dport 6001 -j DROP
-A INPUT -i rl -p udp -m udp --dport 6002 -j ACCEPT
-A INPUT -p udp -m udp --dport 7000 -j ACCEPT
-A FORWARD -m conntrack --ctstate RELATED,ESTABLISHED -j ACCEPT
-A FORWARD -d 10.71.2.2/32 -p udp -m udp --dport 7001 -j ACCEPT
-A FORWARD -i rl -o rh -p udp -m udp --dport 7100:7110 -j ACCEPT
-A FORWARD -o rh -p udp -m udp --dport 7111 -j DROP
-A FORWARD -p tcp -m tcp --dport 7500 -j REJECT --reject-with tcp-reset
-A FORWARD -p udp -m udp --dport 7501 -j REJECT --reject-with icmp-port-unreachable
-A FORWARD -p tcp -m tcp --dport 7502 -j DROP
-A FORWARD -p udp -j fwd_udp
-A OUTPUT -o rh -p udp -m udp --dport 7200 -j DROP
-A OUTPUT -p udp -m udp --dport 7201 -j DROP
-A fwd_udp -p udp -m udp --dport 7300 -j ACCEPT
-A fwd_udp -p udp -m udp --dport 7301 -j RETURN
COMMIT
";

/// The INPUT rule `--dport 7000 -j ACCEPT` and the FORWARD rule `-d
/// 10.71.2.2 --dport 7001 -j ACCEPT` (rule ids of NAT4 + FILTER4).
pub const INPUT_7000: u32 = 5;
pub const FORWARD_7001: u32 = 7;

/// The probe sent to R:7000 and DNAT'ed to H:7001 (judged by FORWARD as
/// 10.71.2.2:7001, never by INPUT, at the netfilter hooks).
pub const DNAT_PROBE: usize = 4;
/// The probe dropped by INPUT (`-s 10.71.1.0/24 --dport 6001`).
pub const INPUT_DROP: usize = 1;
/// The probes dropped by OUTPUT (R's own packets to 7200 and 7201).
pub const OUTPUT_DROPS: [usize; 2] = [11, 12];

/// The probes, in order.
pub fn probes() -> Vec<Probe> {
    use Side::*;
    let (r, h) = (V4.rl, V4.h);
    vec![
        p(L, 40000, r, 6000, R),
        p(L, 40001, r, 6001, R),
        p(L, 40002, r, 6002, R),
        p(L, 40003, r, 6003, R),
        Probe {
            at: H,
            at_port: 7001,
            ..p(L, 40004, r, 7000, H)
        },
        p(L, 40005, h, 7100, H),
        // the reply to the 7100 flow: ESTABLISHED at FORWARD
        Probe {
            reply_of: Some(5),
            ..p(H, 0, h, 0, L)
        },
        p(L, 40007, h, 7111, H),
        p(L, 40008, h, 7300, H),
        p(L, 40009, h, 7301, H),
        p(L, 40010, h, 7302, H),
        p(R, 40011, h, 7200, H),
        p(R, 40012, h, 7201, H),
        p(R, 40013, h, 7202, H),
        p(H, 40014, V4.l, 7400, L),
        // REJECT at FORWARD: the sender in L gets the reset / ICMP error
        tcp(L, h, 7500, H),
        p(L, 40016, h, 7501, H),
        tcp(L, h, 7502, H),
    ]
}

/// What the kernel does with [`probes`] under [`FILTER4`].
pub fn kernel_fates() -> Vec<Fate> {
    use Fate::{Delivered as D, Dropped as X, Refused as E, Rejected as J};
    vec![D, X, D, X, D, D, D, X, D, X, X, E, E, D, X, J, J, X]
}
