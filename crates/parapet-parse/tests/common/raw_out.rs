//! Raw protocol-253 packets out through OUTPUT on loopback, and which
//! kernel rule counted each: the harness of the kernel-oracle tests of IP
//! header fields and masked comparisons (protocol 253 is experimental, so
//! the kernel's own ICMP errors match no rule).

#![allow(dead_code)]

use parapet_model::{Family, Packet};
use parapet_testbed::Netns;
use std::io::Write;
use std::process::Stdio;

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

/// A protocol-253 packet with the packet's addresses, TTL, DSCP and L3
/// length (sent to loopback by [`send_raw`] whatever its destination).
pub fn wire(p: &Packet) -> Vec<u8> {
    match p.family {
        Family::V4 => {
            let mut h = vec![0x45, p.dscp << 2, 0, 0, 0, 1, 0, 0, p.ttl, 253, 0, 0];
            h.extend((p.src as u32).to_be_bytes());
            h.extend((p.dst as u32).to_be_bytes());
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
            h[8..24].copy_from_slice(&p.src.to_be_bytes());
            h[24..40].copy_from_slice(&p.dst.to_be_bytes());
            h.resize(p.len as usize, 0xab);
            h
        }
    }
}

/// Sends a raw IP packet (header included) to the loopback address.
pub fn send_raw(pkt: &[u8], family: Family) {
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
pub fn first_moved(counters: &[u64]) -> u32 {
    counters
        .iter()
        .position(|&c| c > 0)
        .map_or(0, |i| i as u32 + 1)
}

/// The kernel's decisions for `packets` under the nft script: every rule
/// counts, and the first counter that grew while a packet passed decided
/// (nft 1.0.6 cannot reset a rule's counter).
/// The script's table is `inet t`, its chain `output`.
pub fn nft_decisions(ns: &Netns, script: &str, packets: &[Packet]) -> Vec<u32> {
    let path = std::env::temp_dir().join(format!(
        "parapet-raw-out-{}-{}.nft",
        std::process::id(),
        ns.name()
    ));
    std::fs::write(&path, script).unwrap();
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

/// The kernel's decisions for `packets` under iptables-save `rules`.
pub fn iptables_decisions(ns: &Netns, rules: &str, family: Family, packets: &[Packet]) -> Vec<u32> {
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
