//! The kernel as the oracle for the iptables constructs issue #13 item 8
//! fixed: the same ruleset is loaded with `iptables-legacy-restore` into a
//! network namespace this test creates, raw IPv4 packets are sent through
//! its OUTPUT chain, and the rule whose kernel counter moved is compared
//! with the linear engine's decision, packet by packet.

#[path = "common/raw_out.rs"]
mod raw_out;

use parapet_model::{LinearEngine, NoSets, Packet};
use parapet_parse::{parse, Format};
use parapet_testbed::{require_root, Netns};
use raw_out::checksum;
use std::io::Write;
use std::net::Ipv4Addr;
use std::process::Stdio;

/// Every rule ACCEPTs, the policy too: the first rule whose counter moves
/// is the one that decided (0: the policy).
const RULES: &str = "*filter
:INPUT ACCEPT [0:0]
:FORWARD ACCEPT [0:0]
:OUTPUT ACCEPT [0:0]
-A OUTPUT -p tcp -m tcp --dport 22 --tcp-flags ALL SYN -j ACCEPT
-A OUTPUT -p tcp -m tcp --dport 23 --tcp-flags ALL NONE -j ACCEPT
-A OUTPUT -p tcp -m tcp --dport 24 --tcp-flags ALL ALL -j ACCEPT
-A OUTPUT -p icmp -m icmp --icmp-type host-redirect -j ACCEPT
-A OUTPUT -p icmp -m icmp --icmp-type ping -j ACCEPT
-A OUTPUT -p icmp -m icmp --icmp-type pong -j ACCEPT
-A OUTPUT -p icmp -m icmp --icmp-type ttl-exceeded -j ACCEPT
-A OUTPUT -p icmp -m icmp --icmp-type 255 -j ACCEPT
COMMIT
";

/// An IPv4 packet 127.0.0.1 → 127.0.0.1 with a valid header checksum.
fn ipv4(proto: u8, l4: &[u8]) -> Vec<u8> {
    let mut h = vec![
        0x45, 0, 0, 0, 0, 1, 0, 0, 64, proto, 0, 0, 127, 0, 0, 1, 127, 0, 0, 1,
    ];
    h[2..4].copy_from_slice(&(20 + l4.len() as u16).to_be_bytes());
    let c = checksum(&h);
    h[10..12].copy_from_slice(&c.to_be_bytes());
    h.extend_from_slice(l4);
    h
}

fn tcp(dport: u16, flags: u8) -> Vec<u8> {
    let mut t = vec![0u8; 20];
    t[0..2].copy_from_slice(&1000u16.to_be_bytes());
    t[2..4].copy_from_slice(&dport.to_be_bytes());
    t[12] = 5 << 4;
    t[13] = flags;
    t[14..16].copy_from_slice(&1024u16.to_be_bytes());
    let mut pseudo = vec![127, 0, 0, 1, 127, 0, 0, 1, 0, 6, 0, 20];
    pseudo.extend_from_slice(&t);
    let c = checksum(&pseudo);
    t[16..18].copy_from_slice(&c.to_be_bytes());
    ipv4(6, &t)
}

fn icmp(typ: u8, code: u8) -> Vec<u8> {
    let mut b = vec![typ, code, 0, 0, 0, 0, 0, 0];
    let c = checksum(&b);
    b[2..4].copy_from_slice(&c.to_be_bytes());
    ipv4(1, &b)
}

fn send_raw(pkt: &[u8]) {
    // SAFETY: a raw socket this function owns; the pointers are to live
    // locals of the sizes passed.
    unsafe {
        let fd = libc::socket(libc::AF_INET, libc::SOCK_RAW, libc::IPPROTO_RAW);
        assert!(fd >= 0, "raw socket: {}", std::io::Error::last_os_error());
        let mut to: libc::sockaddr_in = std::mem::zeroed();
        to.sin_family = libc::AF_INET as libc::sa_family_t;
        to.sin_addr.s_addr = u32::from(Ipv4Addr::LOCALHOST).to_be();
        let n = libc::sendto(
            fd,
            pkt.as_ptr() as *const libc::c_void,
            pkt.len(),
            0,
            &to as *const _ as *const libc::sockaddr,
            std::mem::size_of::<libc::sockaddr_in>() as u32,
        );
        assert_eq!(n, pkt.len() as isize, "{}", std::io::Error::last_os_error());
        libc::close(fd);
    }
}

/// The kernel's decision: the first OUTPUT rule whose packet counter is 1.
fn kernel_decision(ns: &Netns, pkt: &[u8]) -> u32 {
    ns.exec(&["iptables-legacy", "-Z", "OUTPUT"]).unwrap();
    ns.run_in(|| send_raw(pkt));
    let out = ns
        .exec(&["iptables-legacy", "-L", "OUTPUT", "-v", "-x", "-n"])
        .unwrap();
    let counts: Vec<u64> = out
        .lines()
        .skip(2)
        .map(|l| l.split_whitespace().next().unwrap().parse().unwrap())
        .collect();
    counts
        .iter()
        .position(|&c| c > 0)
        .map_or(0, |i| i as u32 + 1)
}

fn restore(ns: &Netns, rules: &str) {
    let mut restore = ns
        .command("iptables-legacy-restore")
        .stdin(Stdio::piped())
        .spawn()
        .expect("iptables-legacy-restore");
    restore
        .stdin
        .take()
        .unwrap()
        .write_all(rules.as_bytes())
        .unwrap();
    assert!(restore.wait().unwrap().success());
}

#[test]
#[ignore = "needs root"]
fn iptables_flags_and_icmp_agree_with_iptables_legacy() {
    require_root();
    let ns = Netns::create("p13-oracle").unwrap();
    restore(&ns, RULES);

    let rs = parse(RULES, "oracle.v4", Format::IptablesSave)
        .unwrap()
        .ruleset;
    let engine = LinearEngine::new(&rs, rs.select_chain(Some("filter/OUTPUT")).unwrap()).unwrap();
    let cases: Vec<(String, Vec<u8>)> = [
        (22, 0x02),
        (22, 0x02 | 0x40 | 0x80),
        (22, 0x12),
        (22, 0x02 | 0x40),
        (23, 0x00),
        (23, 0x40),
        (23, 0x80 | 0x01),
        (24, 0x3f),
        (24, 0xff),
        (24, 0x1f),
    ]
    .iter()
    .map(|&(port, flags)| {
        let names = parapet_model::tcp_flags::format_list(flags);
        (
            format!("tcp 127.0.0.1:1000 > 127.0.0.1:{port} flags {names}"),
            tcp(port, flags),
        )
    })
    .chain(
        [
            (5, 1),
            (5, 0),
            (8, 0),
            (0, 0),
            (11, 1),
            (3, 1),
            (255, 7),
            (13, 0),
        ]
        .iter()
        .map(|&(t, c)| {
            (
                format!("icmp 127.0.0.1 > 127.0.0.1 type {t} code {c}"),
                icmp(t, c),
            )
        }),
    )
    .collect();
    let mut differ = Vec::new();
    for (spec, bytes) in &cases {
        let pkt: Packet = spec.parse().unwrap();
        let ours = engine.classify(&pkt, &NoSets).unwrap().rule_id;
        let kernel = kernel_decision(&ns, bytes);
        if ours != kernel {
            differ.push(format!("{spec}: kernel rule {kernel}, parapet rule {ours}"));
        }
    }
    assert!(differ.is_empty(), "{}", differ.join("\n"));
}

/// iptables-restore's other spellings (session 5): `-N`, `-F` before rules,
/// `-P`, target options followed by rule options, service and protocol
/// names from netbase.
const SPELLINGS: &str = "*filter
:INPUT ACCEPT [0:0]
:FORWARD ACCEPT [0:0]
:OUTPUT DROP [0:0]
-N USER
-F OUTPUT
-P OUTPUT ACCEPT
-A OUTPUT -j ACCEPT -p tcp --dport 25
-A OUTPUT -p tcp --dport pop3 -j ACCEPT
-A OUTPUT -j ACCEPT -p tcp -m tcp --dport bgp
-A OUTPUT -p vrrp -j ACCEPT
-A OUTPUT -p ospf -j ACCEPT
-A OUTPUT -p tcp -m multiport --dports ftp-data,imap -j ACCEPT
-A OUTPUT -p udp -m multiport --ports 5000,5001:5002 -j ACCEPT
COMMIT
";

/// A UDP datagram 127.0.0.1:`sport` → 127.0.0.1:`dport` (no checksum,
/// which IPv4 allows).
fn udp(sport: u16, dport: u16) -> Vec<u8> {
    let mut u = vec![0u8; 12];
    u[0..2].copy_from_slice(&sport.to_be_bytes());
    u[2..4].copy_from_slice(&dport.to_be_bytes());
    u[4..6].copy_from_slice(&12u16.to_be_bytes());
    ipv4(17, &u)
}

#[test]
#[ignore = "needs root"]
fn restore_spellings_agree_with_iptables_legacy() {
    require_root();
    let ns = Netns::create("p13-spell").unwrap();
    restore(&ns, SPELLINGS);
    let rs = parse(SPELLINGS, "spell.v4", Format::IptablesSave)
        .unwrap()
        .ruleset;
    let engine = LinearEngine::new(&rs, rs.select_chain(Some("filter/OUTPUT")).unwrap()).unwrap();
    let mut cases: Vec<(Packet, Vec<u8>)> = [25u16, 110, 179, 20, 143, 80]
        .iter()
        .map(|&p| {
            (
                Packet::v4(0x7f00_0001, 0x7f00_0001, 6, 1000, p),
                tcp(p, 0x02),
            )
        })
        .collect();
    for (sport, dport) in [(5000u16, 9u16), (1000, 5002), (5001, 5001), (1000, 9)] {
        cases.push((
            Packet::v4(0x7f00_0001, 0x7f00_0001, 17, sport, dport),
            udp(sport, dport),
        ));
    }
    for proto in [112u8, 89, 47] {
        cases.push((
            Packet::v4(0x7f00_0001, 0x7f00_0001, proto, 0, 0),
            ipv4(proto, &[0u8; 8]),
        ));
    }
    let mut differ = Vec::new();
    let mut decided = 0;
    for (pkt, bytes) in &cases {
        let ours = engine.classify(pkt, &NoSets).unwrap().rule_id;
        let kernel = kernel_decision(&ns, bytes);
        decided += usize::from(kernel > 0);
        if ours != kernel {
            differ.push(format!(
                "{pkt:?}: kernel rule {kernel}, parapet rule {ours}"
            ));
        }
    }
    assert!(differ.is_empty(), "{}", differ.join("\n"));
    // Every rule decided a packet: the test can tell them apart (the
    // `--ports` rule three: by source, by destination, by both).
    assert_eq!(decided, 10);
}

/// Non-first fragments: the kernel's tcp, udp, icmp and multiport matches
/// never match one, whatever `!` says, and `--sport 0:65535` is still a
/// tcp match; `-f` and a bare `-p tcp` do match one.
const FRAGMENTS: &str = "*filter
:INPUT ACCEPT [0:0]
:FORWARD ACCEPT [0:0]
:OUTPUT ACCEPT [0:0]
-A OUTPUT -p tcp -m tcp --dport 22 -j ACCEPT
-A OUTPUT -p tcp -m tcp ! --dport 22 -j ACCEPT
-A OUTPUT -p udp -m udp --sport 0:65535 -j ACCEPT
-A OUTPUT -p udp -m multiport ! --dports 1,2 -j ACCEPT
-A OUTPUT -p icmp -m icmp --icmp-type any -j ACCEPT
-A OUTPUT -p tcp -f -j ACCEPT
-A OUTPUT -p sctp -j ACCEPT
COMMIT
";

/// A non-first fragment (offset 128 bytes, last) of protocol `proto`.
fn fragment(proto: u8) -> Vec<u8> {
    let mut p = ipv4(proto, &[0xab; 16]);
    p[6..8].copy_from_slice(&16u16.to_be_bytes());
    p[10..12].copy_from_slice(&[0, 0]);
    let c = checksum(&p[..20]);
    p[10..12].copy_from_slice(&c.to_be_bytes());
    p
}

#[test]
#[ignore = "needs root"]
fn non_first_fragments_agree_with_iptables_legacy() {
    require_root();
    let ns = Netns::create("p13-frag").unwrap();
    restore(&ns, FRAGMENTS);
    let rs = parse(FRAGMENTS, "frag.v4", Format::IptablesSave)
        .unwrap()
        .ruleset;
    let engine = LinearEngine::new(&rs, rs.select_chain(Some("filter/OUTPUT")).unwrap()).unwrap();
    let whole = |proto: u8, dport: u16| Packet::v4(0x7f00_0001, 0x7f00_0001, proto, 1000, dport);
    let frag = |proto: u8| {
        let mut p = Packet::v4(0x7f00_0001, 0x7f00_0001, proto, 0, 0);
        p.fragment = true;
        p
    };
    let cases: Vec<(&str, Packet, Vec<u8>, u32)> = vec![
        ("tcp to 22", whole(6, 22), tcp(22, 0x02), 1),
        ("tcp to 80", whole(6, 80), tcp(80, 0x02), 2),
        ("tcp fragment", frag(6), fragment(6), 6),
        ("udp fragment", frag(17), fragment(17), 0),
        ("icmp fragment", frag(1), fragment(1), 0),
        ("icmp echo", whole(1, 0), icmp(8, 0), 5),
        ("sctp fragment", frag(132), fragment(132), 7),
    ];
    let mut differ = Vec::new();
    for (what, pkt, bytes, want) in &cases {
        let mut pkt = pkt.clone();
        if pkt.proto == 1 && !pkt.fragment {
            pkt.icmp_type = 8;
        }
        let ours = engine.classify(&pkt, &NoSets).unwrap().rule_id;
        let kernel = kernel_decision(&ns, bytes);
        if ours != kernel || kernel != *want {
            differ.push(format!(
                "{what}: kernel rule {kernel}, parapet rule {ours}, expected {want}"
            ));
        }
    }
    assert!(differ.is_empty(), "{}", differ.join("\n"));
}

/// Targets left to the kernel (TCPMSS, NFLOG) are non-terminal: the kernel
/// counts them and goes on to the next rule, and parapet's decision is the
/// kernel's next deciding rule. parapet's listing of the file loads back
/// into iptables-legacy-restore.
const KERNEL_TARGETS: &str = "*filter
:INPUT ACCEPT [0:0]
:FORWARD ACCEPT [0:0]
:OUTPUT ACCEPT [0:0]
-A OUTPUT -p tcp -m tcp --tcp-flags SYN,RST SYN -j TCPMSS --set-mss 1400
-A OUTPUT -p tcp -m tcp --dport 22 -j NFLOG --nflog-group 5 --nflog-prefix \"ssh try\"
-A OUTPUT -p tcp -m tcp --dport 22 -j ACCEPT
-A OUTPUT -j TCPMSS --set-mss 1300 -p tcp -m tcp --tcp-flags SYN,RST SYN --dport 80
-A OUTPUT -p tcp -j ACCEPT
COMMIT
";

#[test]
#[ignore = "needs root"]
fn targets_left_to_the_kernel_agree_with_iptables_legacy() {
    require_root();
    let parsed = parse(KERNEL_TARGETS, "kt.v4", Format::IptablesSave).unwrap();
    let rs = &parsed.ruleset;
    let listing = parapet_parse::render::iptables_save(rs).unwrap();
    let ns = Netns::create("p13-ktgt").unwrap();
    // parapet's listing is what the kernel runs: it must load as is.
    restore(&ns, &listing);
    let engine = LinearEngine::new(rs, rs.select_chain(Some("filter/OUTPUT")).unwrap()).unwrap();
    let deciding = [3u32, 5];
    let cases = [
        (22u16, 0x02u8, 3u32),
        (80, 0x02, 5),
        (22, 0x10, 3),
        (443, 0x02, 5),
    ];
    for (dport, flags, want) in cases {
        let pkt = Packet::v4(0x7f00_0001, 0x7f00_0001, 6, 1000, dport);
        let ours = engine.classify(&pkt, &NoSets).unwrap().rule_id;
        ns.exec(&["iptables-legacy", "-Z", "OUTPUT"]).unwrap();
        ns.run_in(|| send_raw(&tcp(dport, flags)));
        let out = ns
            .exec(&["iptables-legacy", "-L", "OUTPUT", "-v", "-x", "-n"])
            .unwrap();
        let moved: Vec<u32> = out
            .lines()
            .skip(2)
            .enumerate()
            .filter(|(_, l)| l.split_whitespace().next() != Some("0"))
            .map(|(i, _)| i as u32 + 1)
            .collect();
        let kernel = moved.iter().copied().find(|r| deciding.contains(r));
        assert_eq!(
            (kernel, ours),
            (Some(want), want),
            "dport {dport} flags {flags:#x}: kernel counters moved {moved:?}"
        );
        // The non-terminal rules before the decision did run in the kernel.
        if flags == 0x02 {
            assert!(moved.contains(&1), "TCPMSS did not see the SYN: {moved:?}");
        }
    }
}
