//! The kernel as the oracle for the IP header fields (TTL / hop limit,
//! DSCP, length): the same rules are loaded into iptables-legacy,
//! ip6tables-legacy and nft in a network namespace this test creates, raw
//! IPv4 and IPv6 packets of protocol 253 (experimental, so the kernel's
//! own ICMP errors match no rule) leave through OUTPUT on loopback, and the
//! rule whose kernel counter moved is compared with the linear engine's
//! decision, packet by packet.

use parapet_model::{Family, LinearEngine, NoSets, Packet};
use parapet_parse::{parse, Format};
use parapet_testbed::{require_root, Netns};
use std::io::Write;
use std::process::Stdio;

const V4: &str = "*filter
:INPUT ACCEPT [0:0]
:FORWARD ACCEPT [0:0]
:OUTPUT ACCEPT [0:0]
-A OUTPUT -p 253 -m ttl --ttl-eq 1 -j ACCEPT
-A OUTPUT -p 253 -m ttl --ttl-lt 5 -m dscp --dscp 0x2e -j ACCEPT
-A OUTPUT -p 253 -m ttl --ttl-gt 200 -m length --length 100:200 -j ACCEPT
-A OUTPUT -p 253 -m ttl ! --ttl-eq 64 -m length ! --length 0:60 -j ACCEPT
-A OUTPUT -p 253 -m dscp --dscp-class AF41 -j ACCEPT
-A OUTPUT -p 253 -m dscp ! --dscp 0 -m length --length 300: -j ACCEPT
-A OUTPUT -p 253 -m length --length :40 -j ACCEPT
-A OUTPUT -p 253 -m ttl --ttl-gt 100 -m ttl --ttl-lt 150 -j ACCEPT
COMMIT
";

const V6: &str = "*filter
:INPUT ACCEPT [0:0]
:FORWARD ACCEPT [0:0]
:OUTPUT ACCEPT [0:0]
-A OUTPUT -p 253 -m hl --hl-eq 1 -j ACCEPT
-A OUTPUT -p 253 -m hl --hl-lt 5 -m dscp --dscp 0x2e -j ACCEPT
-A OUTPUT -p 253 -m hl --hl-gt 200 -m length --length 100:200 -j ACCEPT
-A OUTPUT -p 253 -m hl ! --hl-eq 64 -m length ! --length 0:60 -j ACCEPT
-A OUTPUT -p 253 -m dscp --dscp-class AF41 -j ACCEPT
-A OUTPUT -p 253 -m dscp ! --dscp 0 -m length --length 300: -j ACCEPT
-A OUTPUT -p 253 -m length --length :40 -j ACCEPT
-A OUTPUT -p 253 -m hl --hl-gt 100 -m hl --hl-lt 150 -j ACCEPT
COMMIT
";

const NFT: &str = "table inet t {
\tchain output {
\t\ttype filter hook output priority 0; policy accept;
\t\tmeta l4proto 253 ip ttl 1 counter accept
\t\tmeta l4proto 253 ip ttl < 5 ip dscp ef counter accept
\t\tmeta l4proto 253 ip6 hoplimit > 200 meta length 100-200 counter accept
\t\tmeta l4proto 253 ip6 hoplimit != 64 meta length != 0-60 counter accept
\t\tmeta l4proto 253 ip dscp { af41, cs1 } counter accept
\t\tmeta l4proto 253 ip6 dscp != cs0 meta length >= 300 counter accept
\t\tmeta l4proto 253 meta length <= 40 counter accept
\t\tmeta l4proto 253 ip ttl 100-150 counter accept
\t\tmeta l4proto 253 ip6 hoplimit { 3, 120 } ip6 dscp 34 counter accept
\t}
}
";

fn checksum(b: &[u8]) -> u16 {
    let mut s: u32 = b
        .chunks(2)
        .map(|c| u32::from(c[0]) << 8 | u32::from(*c.get(1).unwrap_or(&0)))
        .sum();
    while s > 0xffff {
        s = (s >> 16) + (s & 0xffff);
    }
    !(s as u16)
}

/// A protocol-253 packet to the loopback address of `p.family` with the
/// packet's TTL, DSCP and L3 length.
fn wire(p: &Packet) -> Vec<u8> {
    match p.family {
        Family::V4 => {
            let mut h = vec![
                0x45,
                p.dscp << 2,
                0,
                0,
                0,
                1,
                0,
                0,
                p.ttl,
                253,
                0,
                0,
                127,
                0,
                0,
                1,
                127,
                0,
                0,
                1,
            ];
            h[2..4].copy_from_slice(&(p.len as u16).to_be_bytes());
            let c = checksum(&h);
            h[10..12].copy_from_slice(&c.to_be_bytes());
            h.resize(p.len as usize, 0xab);
            h
        }
        Family::V6 => {
            let mut h = vec![0u8; 40];
            h[0] = 0x60 | (p.dscp >> 2);
            h[1] = (p.dscp & 3) << 6;
            h[4..6].copy_from_slice(&(p.len as u16 - 40).to_be_bytes());
            h[6] = 253;
            h[7] = p.ttl;
            h[23] = 1;
            h[39] = 1;
            h.resize(p.len as usize, 0xab);
            h
        }
    }
}

fn send_raw(pkt: &[u8], family: Family) {
    // SAFETY: a raw socket this function owns; the pointers are to live
    // locals of the sizes passed.
    unsafe {
        let (af, to4, to6) = match family {
            Family::V4 => {
                let mut to: libc::sockaddr_in = std::mem::zeroed();
                to.sin_family = libc::AF_INET as libc::sa_family_t;
                to.sin_addr.s_addr = u32::from(std::net::Ipv4Addr::LOCALHOST).to_be();
                (libc::AF_INET, Some(to), None)
            }
            Family::V6 => {
                let mut to: libc::sockaddr_in6 = std::mem::zeroed();
                to.sin6_family = libc::AF_INET6 as libc::sa_family_t;
                to.sin6_addr.s6_addr = std::net::Ipv6Addr::LOCALHOST.octets();
                (libc::AF_INET6, None, Some(to))
            }
        };
        let fd = libc::socket(af, libc::SOCK_RAW, libc::IPPROTO_RAW);
        assert!(fd >= 0, "raw socket: {}", std::io::Error::last_os_error());
        let n = match (&to4, &to6) {
            (Some(to), _) => libc::sendto(
                fd,
                pkt.as_ptr() as *const libc::c_void,
                pkt.len(),
                0,
                to as *const _ as *const libc::sockaddr,
                std::mem::size_of::<libc::sockaddr_in>() as u32,
            ),
            (_, Some(to)) => libc::sendto(
                fd,
                pkt.as_ptr() as *const libc::c_void,
                pkt.len(),
                0,
                to as *const _ as *const libc::sockaddr,
                std::mem::size_of::<libc::sockaddr_in6>() as u32,
            ),
            _ => unreachable!(),
        };
        assert_eq!(n, pkt.len() as isize, "{}", std::io::Error::last_os_error());
        libc::close(fd);
    }
}

/// Which rule counted the packet: the first counter that moved (0: none,
/// the policy). `counters` lists the chain's rule counters in order.
fn first_moved(counters: &[u64]) -> u32 {
    counters
        .iter()
        .position(|&c| c > 0)
        .map_or(0, |i| i as u32 + 1)
}

/// The kernel's decisions for `packets` under iptables-save `rules`.
fn iptables_decisions(ns: &Netns, rules: &str, family: Family, packets: &[Packet]) -> Vec<u32> {
    let tool = match family {
        Family::V4 => "iptables-legacy",
        Family::V6 => "ip6tables-legacy",
    };
    let mut restore = ns
        .command(format!("{tool}-restore"))
        .stdin(Stdio::piped())
        .spawn()
        .expect("iptables-legacy-restore");
    restore
        .stdin
        .take()
        .unwrap()
        .write_all(rules.as_bytes())
        .unwrap();
    assert!(
        restore.wait().unwrap().success(),
        "{tool}-restore refused the rules"
    );
    packets
        .iter()
        .map(|p| {
            ns.exec(&[tool, "-Z", "OUTPUT"]).unwrap();
            ns.run_in(|| send_raw(&wire(p), family));
            let out = ns.exec(&[tool, "-L", "OUTPUT", "-v", "-x", "-n"]).unwrap();
            let counts: Vec<u64> = out
                .lines()
                .skip(2)
                .map(|l| l.split_whitespace().next().unwrap().parse().unwrap())
                .collect();
            first_moved(&counts)
        })
        .collect()
}

/// The kernel's decisions for `packets` under the nft script: every rule
/// counts, and the first counter that grew while a packet passed decided
/// (nft 1.0.6 cannot reset a rule's counter).
fn nft_decisions(ns: &Netns, packets: &[Packet]) -> Vec<u32> {
    let path = std::env::temp_dir().join(format!("parapet-header-{}.nft", std::process::id()));
    std::fs::write(&path, NFT).unwrap();
    let loaded = ns.exec(&["nft", "-f", path.to_str().unwrap()]);
    let _ = std::fs::remove_file(&path);
    loaded.unwrap();
    let counts = || -> Vec<u64> {
        let out = ns
            .exec(&["nft", "list", "chain", "inet", "t", "output"])
            .unwrap();
        out.lines()
            .filter_map(|l| l.split("counter packets ").nth(1))
            .map(|rest| rest.split_whitespace().next().unwrap().parse().unwrap())
            .collect()
    };
    let mut before = counts();
    packets
        .iter()
        .map(|p| {
            ns.run_in(|| send_raw(&wire(p), p.family));
            let after = counts();
            let moved: Vec<u64> = after.iter().zip(&before).map(|(a, b)| a - b).collect();
            before = after;
            first_moved(&moved)
        })
        .collect()
}

/// Every combination of TTLs, DSCPs and lengths on both sides of the
/// rules' edges (an off-by-one in any bound changes a decision).
fn packets(family: Family) -> Vec<Packet> {
    let (lens, addr): (&[u32], u128) = match family {
        Family::V4 => (&[40, 41, 60, 61, 200, 201, 299, 300], 0x7f00_0001),
        Family::V6 => (&[40, 41, 60, 61, 200, 201, 299, 300], 1),
    };
    let mut out = Vec::new();
    for &ttl in &[1u8, 4, 5, 64, 100, 101, 149, 150, 200, 201] {
        for &dscp in &[0u8, 34, 46] {
            for &len in lens {
                let mut p = Packet::new(family, addr, addr, 253, 0, 0);
                (p.ttl, p.dscp, p.len) = (ttl, dscp, len);
                out.push(p);
            }
        }
    }
    out
}

fn compare(rules: &str, name: &str, chain: &str, packets: &[Packet], kernel: &[u32]) {
    let rs = parse(rules, name, Format::Auto).unwrap().ruleset;
    let engine = LinearEngine::new(&rs, rs.select_chain(Some(chain)).unwrap()).unwrap();
    let mut differ = Vec::new();
    for (p, &k) in packets.iter().zip(kernel) {
        let ours = engine.classify(p, &NoSets).unwrap().rule_id;
        if ours != k {
            differ.push(format!("{name}: {p}: kernel rule {k}, parapet rule {ours}"));
        }
    }
    // The kernel must tell the rules apart, or the test proves nothing.
    let distinct: std::collections::BTreeSet<u32> = kernel.iter().copied().collect();
    assert!(
        distinct.len() >= 6,
        "{name}: the kernel decided only {distinct:?}"
    );
    assert!(
        differ.is_empty(),
        "{} of {} differ:\n{}",
        differ.len(),
        packets.len(),
        differ.join("\n")
    );
}

#[test]
#[ignore = "needs root"]
fn ttl_dscp_length_agree_with_iptables_legacy() {
    require_root();
    let ns = Netns::create("p13-hdr-ipt").unwrap();
    ns.ip(&["link", "set", "lo", "up"]).unwrap();
    let v4 = packets(Family::V4);
    let kernel = iptables_decisions(&ns, V4, Family::V4, &v4);
    compare(V4, "header.v4", "filter/OUTPUT", &v4, &kernel);
    let v6 = packets(Family::V6);
    let kernel = iptables_decisions(&ns, V6, Family::V6, &v6);
    let v6_rules = format!("# Generated by ip6tables-save\n{V6}");
    compare(&v6_rules, "header.v6", "filter/OUTPUT", &v6, &kernel);
}

#[test]
#[ignore = "needs root"]
fn ttl_dscp_length_agree_with_nft() {
    require_root();
    let ns = Netns::create("p13-hdr-nft").unwrap();
    ns.ip(&["link", "set", "lo", "up"]).unwrap();
    let mut all = packets(Family::V4);
    all.extend(packets(Family::V6));
    let kernel = nft_decisions(&ns, &all);
    compare(NFT, "header.nft", "t/output", &all, &kernel);
}
