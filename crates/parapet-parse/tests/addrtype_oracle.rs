//! The kernel as the oracle for address types (`-m addrtype`, nft `fib
//! saddr|daddr type`): the same rules are loaded into iptables-legacy,
//! ip6tables-legacy and nft in a network namespace this test creates, with
//! an interface holding 10.9.0.1/24 (so 10.9.0.255 is a broadcast
//! address) and 2001:db8:9::1/64. Raw packets of protocol 253 with every
//! combination of local, broadcast, multicast and unicast source and
//! destination addresses leave through OUTPUT, and the rule whose kernel
//! counter moved is compared with the linear engine's decision, packet by
//! packet, the packets' types given as `--local-addr` gives them (the
//! host's addresses LOCAL, its subnet's broadcast address BROADCAST, the
//! rest by prefix).

use parapet_model::{Family, LinearEngine, NoSets, Packet};
use parapet_parse::{parse, Format};
use parapet_testbed::{require_root, Netns};
use std::io::Write;
use std::net::IpAddr;
use std::process::Stdio;

const V4: &str = "*filter
:INPUT ACCEPT [0:0]
:FORWARD ACCEPT [0:0]
:OUTPUT ACCEPT [0:0]
-A OUTPUT -p 253 -m addrtype --src-type LOCAL --dst-type LOCAL -j ACCEPT
-A OUTPUT -p 253 -m addrtype --dst-type BROADCAST -j ACCEPT
-A OUTPUT -p 253 -m addrtype --src-type UNICAST --dst-type MULTICAST -j ACCEPT
-A OUTPUT -p 253 -m addrtype --dst-type LOCAL -j ACCEPT
-A OUTPUT -p 253 -m addrtype --src-type LOCAL,BROADCAST ! --dst-type UNICAST -j ACCEPT
-A OUTPUT -p 253 -m addrtype ! --src-type LOCAL -j ACCEPT
-A OUTPUT -p 253 -m addrtype --dst-type UNICAST -j ACCEPT
COMMIT
";

/// ip6tables' lists are conjunctions (`match_type6`): rule 4 is LOCAL.
const V6: &str = "*filter
:INPUT ACCEPT [0:0]
:FORWARD ACCEPT [0:0]
:OUTPUT ACCEPT [0:0]
-A OUTPUT -p 253 -m addrtype --src-type LOCAL --dst-type LOCAL -j ACCEPT
-A OUTPUT -p 253 -m addrtype --dst-type MULTICAST -j ACCEPT
-A OUTPUT -p 253 -m addrtype --dst-type UNICAST,MULTICAST -j ACCEPT
-A OUTPUT -p 253 -m addrtype --dst-type UNICAST,LOCAL -j ACCEPT
-A OUTPUT -p 253 -m addrtype ! --src-type LOCAL -j ACCEPT
-A OUTPUT -p 253 -m addrtype --dst-type UNICAST -j ACCEPT
COMMIT
";

const NFT: &str = "table inet t {
\tchain output {
\t\ttype filter hook output priority 0; policy accept;
\t\tmeta l4proto 253 fib saddr type local fib daddr type local counter accept
\t\tmeta l4proto 253 fib daddr type broadcast counter accept
\t\tmeta l4proto 253 fib daddr type multicast fib saddr type unicast counter accept
\t\tmeta l4proto 253 meta nfproto ipv6 fib daddr type { local, multicast } counter accept
\t\tmeta l4proto 253 fib saddr type != local counter accept
\t\tmeta l4proto 253 fib saddr type { broadcast, local } fib daddr type != unicast counter accept
\t\tmeta l4proto 253 fib daddr type unicast counter accept
\t}
}
";

/// The interface's addresses; loopback's (127.0.0.0/8, ::1) are LOCAL by
/// prefix.
const LOCAL4: [&str; 1] = ["10.9.0.1"];
const BCAST4: &str = "10.9.0.255";
const LOCAL6: [&str; 1] = ["2001:db8:9::1"];

/// The test host: an interface (one end of a veth pair) with an IPv4 /24 and an IPv6 /64,
/// default routes through it (so any unicast address has a route).
fn host(tag: &str) -> Netns {
    let ns = Netns::create(tag).unwrap();
    for args in [
        &["link", "add", "d0", "type", "veth", "peer", "name", "d1"][..],
        &["addr", "add", "10.9.0.1/24", "brd", "+", "dev", "d0"],
        &[
            "-6",
            "addr",
            "add",
            "2001:db8:9::1/64",
            "dev",
            "d0",
            "nodad",
        ],
        &["link", "set", "d0", "up"],
        &["link", "set", "d1", "up"],
        &["route", "add", "default", "dev", "d0"],
        &["-6", "route", "add", "default", "dev", "d0"],
    ] {
        ns.ip(args).unwrap();
    }
    ns
}

fn addr(s: &str) -> u128 {
    match s.parse::<IpAddr>().unwrap() {
        IpAddr::V4(a) => u32::from(a) as u128,
        IpAddr::V6(a) => u128::from(a),
    }
}

/// Every pair of the family's source and destination addresses, typed as
/// the host's tables type them.
fn packets(family: Family) -> Vec<Packet> {
    let (srcs, dsts, local, bcast): (&[&str], &[&str], &[&str], &[&str]) = match family {
        Family::V4 => (
            &["127.0.0.1", "10.9.0.1", "10.9.0.255", "192.0.2.7"],
            &[
                "127.0.0.1",
                "10.9.0.1",
                "10.9.0.255",
                "255.255.255.255",
                "224.0.0.1",
                "10.9.0.7",
                "192.0.2.9",
            ],
            &LOCAL4,
            &[BCAST4],
        ),
        Family::V6 => (
            &["::1", "2001:db8:9::1", "2001:db8:9::7", "2001:db8:ff::5"],
            &[
                "::1",
                "2001:db8:9::1",
                "ff02::1",
                "2001:db8:9::7",
                "2001:db8:ff::9",
            ],
            &LOCAL6,
            &[],
        ),
    };
    let local: Vec<u128> = local.iter().map(|a| addr(a)).collect();
    let bcast: Vec<u128> = bcast.iter().map(|a| addr(a)).collect();
    let mut out = Vec::new();
    for s in srcs {
        for d in dsts {
            let mut p = Packet::new(family, addr(s), addr(d), 253, 0, 0);
            p.len = 60;
            p.set_host_addrs(&local, &bcast);
            out.push(p);
        }
    }
    out
}

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

/// The packet's IP header (protocol 253) and zero payload.
fn wire(p: &Packet) -> Vec<u8> {
    let mut h = match p.family {
        Family::V4 => {
            let mut h = vec![0x45, 0, 0, 60, 0, 1, 0, 0, 64, 253, 0, 0];
            h.extend_from_slice(&(p.src as u32).to_be_bytes());
            h.extend_from_slice(&(p.dst as u32).to_be_bytes());
            let c = checksum(&h);
            h[10..12].copy_from_slice(&c.to_be_bytes());
            h
        }
        Family::V6 => {
            let mut h = vec![0x60, 0, 0, 0, 0, 20, 253, 64];
            h.extend_from_slice(&p.src.to_be_bytes());
            h.extend_from_slice(&p.dst.to_be_bytes());
            h
        }
    };
    h.resize(60, 0);
    h
}

/// Sends a header-included raw packet; bound to the interface for
/// multicast and limited-broadcast destinations (which need an output
/// interface), allowed to broadcast.
fn send_raw(p: &Packet) {
    let pkt = wire(p);
    let bind = match p.family {
        Family::V4 => p.dst == 0xffff_ffff || p.dst >> 28 == 0xe,
        Family::V6 => p.dst >> 120 == 0xff,
    };
    // SAFETY: a raw socket this function owns; the pointers are to live
    // locals of the sizes passed.
    unsafe {
        let af = match p.family {
            Family::V4 => libc::AF_INET,
            Family::V6 => libc::AF_INET6,
        };
        let fd = libc::socket(af, libc::SOCK_RAW, libc::IPPROTO_RAW);
        assert!(fd >= 0, "raw socket: {}", std::io::Error::last_os_error());
        let one: libc::c_int = 1;
        libc::setsockopt(
            fd,
            libc::SOL_SOCKET,
            libc::SO_BROADCAST,
            &one as *const _ as *const libc::c_void,
            4,
        );
        if bind {
            let dev = b"d0\0";
            let rc = libc::setsockopt(
                fd,
                libc::SOL_SOCKET,
                libc::SO_BINDTODEVICE,
                dev.as_ptr() as *const libc::c_void,
                dev.len() as u32,
            );
            assert_eq!(
                rc,
                0,
                "SO_BINDTODEVICE: {}",
                std::io::Error::last_os_error()
            );
        }
        let n = match p.family {
            Family::V4 => {
                let mut to: libc::sockaddr_in = std::mem::zeroed();
                to.sin_family = libc::AF_INET as libc::sa_family_t;
                to.sin_addr.s_addr = (p.dst as u32).to_be();
                libc::sendto(
                    fd,
                    pkt.as_ptr() as *const libc::c_void,
                    pkt.len(),
                    0,
                    &to as *const _ as *const libc::sockaddr,
                    std::mem::size_of::<libc::sockaddr_in>() as u32,
                )
            }
            Family::V6 => {
                let mut to: libc::sockaddr_in6 = std::mem::zeroed();
                to.sin6_family = libc::AF_INET6 as libc::sa_family_t;
                to.sin6_addr.s6_addr = p.dst.to_be_bytes();
                libc::sendto(
                    fd,
                    pkt.as_ptr() as *const libc::c_void,
                    pkt.len(),
                    0,
                    &to as *const _ as *const libc::sockaddr,
                    std::mem::size_of::<libc::sockaddr_in6>() as u32,
                )
            }
        };
        let err = std::io::Error::last_os_error();
        libc::close(fd);
        assert_eq!(n, pkt.len() as isize, "sending {p}: {err}");
    }
}

/// Which rule counted: the first counter that moved (0: none, the policy).
fn first_moved(counters: &[u64]) -> u32 {
    counters
        .iter()
        .position(|&c| c > 0)
        .map_or(0, |i| i as u32 + 1)
}

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
            ns.run_in(|| send_raw(p));
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

fn nft_decisions(ns: &Netns, packets: &[Packet]) -> Vec<u32> {
    let path = std::env::temp_dir().join(format!("parapet-addrtype-{}.nft", std::process::id()));
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
            ns.run_in(|| send_raw(p));
            let after = counts();
            let moved: Vec<u64> = after.iter().zip(&before).map(|(a, b)| a - b).collect();
            before = after;
            first_moved(&moved)
        })
        .collect()
}

fn compare(
    rules: &str,
    name: &str,
    chain: &str,
    packets: &[Packet],
    kernel: &[u32],
    min_rules: usize,
) {
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
        distinct.len() >= min_rules,
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
fn addrtype_agrees_with_iptables_legacy() {
    require_root();
    let ns = host("p13-at-ipt");
    let v4 = packets(Family::V4);
    let kernel = iptables_decisions(&ns, V4, Family::V4, &v4);
    compare(V4, "addrtype.v4", "filter/OUTPUT", &v4, &kernel, 7);
    let v6 = packets(Family::V6);
    let kernel = iptables_decisions(&ns, V6, Family::V6, &v6);
    let v6_rules = format!("# Generated by ip6tables-save\n{V6}");
    compare(&v6_rules, "addrtype.v6", "filter/OUTPUT", &v6, &kernel, 4);
}

#[test]
#[ignore = "needs root"]
fn fib_type_agrees_with_nft() {
    require_root();
    let ns = host("p13-at-nft");
    let mut all = packets(Family::V4);
    all.extend(packets(Family::V6));
    let kernel = nft_decisions(&ns, &all);
    compare(NFT, "addrtype.nft", "t/output", &all, &kernel, 6);
}
