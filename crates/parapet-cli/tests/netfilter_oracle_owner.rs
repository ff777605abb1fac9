//! `-m owner` (nft `meta skuid|skgid`) against the kernel at the netfilter
//! OUTPUT hook. The same ruleset goes into the kernel of one network
//! namespace (`iptables-legacy-restore`, `nft -f`) and into parapetd at
//! the netfilter hooks of another; in each, processes running as
//! different uids and gids (`setpriv`) send UDP datagrams to 127.0.0.1,
//! and connection attempts to closed TCP ports draw the kernel's resets (a
//! packet of the kernel's own socket, which has no file: `--socket-exists`
//! matches it, `--uid-owner` does not, `! --uid-owner` does), and the last
//! ACK of a connection closed first by a user's client leaves from a
//! time-wait socket (no owner at all). Which
//! datagrams and resets arrive must be the same, packet by packet, and
//! parapetd's counters must name the rules that dropped. Needs root.

mod common;

use common::daemon::{stat_counters, stats};
use common::router::{applied, applied_and_attached};
use parapet_testbed::owner::{
    reset_arrives, synack_arrives, timewait_ack_arrives, udp_arrivals, udp_arrivals_at,
};
use parapet_testbed::{require_root, Netns};
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

/// The senders: (uid, gid).
const SENDERS: [(u32, u32); 4] = [(0, 0), (1500, 2000), (3000, 3000), (1200, 1700)];
const UDP_PORTS: [u16; 7] = [9301, 9302, 9303, 9304, 9305, 9306, 9307];
/// Closed ports whose resets the rules at 94xx judge.
const RST_PORTS: [u16; 4] = [9401, 9402, 9403, 9404];
/// Listeners (port, uid = gid) whose SYN-ACKs rules 12 and 13 judge: the
/// request socket answers with its listener's owner.
const LISTENERS: [(u16, u32); 3] = [(9501, 1500), (9502, 1600), (9503, 1500)];
/// The server port of the connection whose client (uid = gid 1500)
/// closes first: its last ACK leaves from a time-wait socket.
const TIME_WAIT_PORT: u16 = 9601;

/// Every uid/gid option, negated and not, `--socket-exists`, the four
/// answers for a socket without a file (rules 8..=11), and (rule 14) the
/// last ACK a time-wait socket sends: no owner, so `! --uid-owner 1500`
/// drops it although the connection's client ran as 1500.
const IPT: &str = "*filter
:INPUT ACCEPT [0:0]
:FORWARD ACCEPT [0:0]
:OUTPUT ACCEPT [0:0]
-A OUTPUT -o lo -p udp -m udp --dport 9301 -m owner --uid-owner 0 -j DROP
-A OUTPUT -o lo -p udp -m udp --dport 9302 -m owner ! --uid-owner 1000-1999 -j DROP
-A OUTPUT -o lo -p udp -m udp --dport 9303 -m owner --gid-owner 2000 -j DROP
-A OUTPUT -o lo -p udp -m udp --dport 9304 -m owner --socket-exists ! --gid-owner 2000 -j DROP
-A OUTPUT -o lo -p udp -m udp --dport 9305 -m owner --uid-owner 1500 --gid-owner 1500-2500 -j DROP
-A OUTPUT -o lo -p udp -m udp --dport 9306 -m owner ! --socket-exists -j DROP
-A OUTPUT -o lo -p udp -m udp --dport 9307 -m owner --uid-owner 3000 -j DROP
-A OUTPUT -o lo -p tcp -m tcp --sport 9401 --tcp-flags RST RST -m owner --socket-exists -j DROP
-A OUTPUT -o lo -p tcp -m tcp --sport 9402 --tcp-flags RST RST -m owner ! --uid-owner 0 -j DROP
-A OUTPUT -o lo -p tcp -m tcp --sport 9403 --tcp-flags RST RST -m owner --uid-owner 0 -j DROP
-A OUTPUT -o lo -p tcp -m tcp --sport 9404 --tcp-flags RST RST -m owner ! --socket-exists -j DROP
-A OUTPUT -o lo -p tcp -m tcp --sport 9501:9502 --tcp-flags SYN,ACK SYN,ACK -m owner --uid-owner 1500 -j DROP
-A OUTPUT -o lo -p tcp -m tcp --sport 9503 --tcp-flags SYN,ACK SYN,ACK -m owner ! --gid-owner 1500 -j DROP
-A OUTPUT -o lo -p tcp -m tcp --dport 9601 --tcp-flags SYN,ACK,FIN,RST ACK -m owner ! --uid-owner 1500 -j DROP
COMMIT
";

/// nft's spelling, at OUTPUT and POSTROUTING: without a socket file
/// `!=` breaks the rule too (nft_meta).
const NFT: &str = "table inet t {
  chain out {
    type filter hook output priority 0; policy accept;
    oifname \"lo\" udp dport 9301 meta skuid 0 drop
    oifname \"lo\" udp dport 9302 meta skuid != 1000-1999 drop
    oifname \"lo\" udp dport 9303 meta skgid 2000 drop
    oifname \"lo\" tcp sport 9401 tcp flags & rst == rst meta skuid != 0 drop
  }
  chain post {
    type filter hook postrouting priority 0; policy accept;
    oifname \"lo\" udp dport 9304 meta skgid != 2000 drop
    oifname \"lo\" udp dport 9305 meta skuid 1500 meta skgid 1500-2500 drop
    oifname \"lo\" udp dport 9306 meta skuid { 0, 3000 } drop
    oifname \"lo\" tcp sport 9402 tcp flags & rst == rst meta skuid 0 drop
  }
}
";

/// Every datagram's fate, then every reset's, every SYN-ACK's and the
/// time-wait socket's ACK's, to `addr`.
fn fates(ns: &Netns, addr: IpAddr) -> Vec<bool> {
    let mut out = udp_arrivals(ns, addr, &SENDERS, &UDP_PORTS);
    out.extend(RST_PORTS.iter().map(|&p| reset_arrives(ns, addr, p)));
    out.extend(
        LISTENERS
            .iter()
            .map(|&(p, id)| synack_arrives(ns, addr, p, id, id)),
    );
    out.push(timewait_ack_arrives(ns, addr, TIME_WAIT_PORT, 1500, 1500));
    out
}

const V4: IpAddr = IpAddr::V4(Ipv4Addr::LOCALHOST);
const V6: IpAddr = IpAddr::V6(Ipv6Addr::LOCALHOST);

fn what(i: usize) -> String {
    let n = SENDERS.len() * UDP_PORTS.len();
    if i < n {
        format!(
            "udp from {:?} to {}",
            SENDERS[i / UDP_PORTS.len()],
            UDP_PORTS[i % UDP_PORTS.len()]
        )
    } else if i < n + RST_PORTS.len() {
        format!("reset from {}", RST_PORTS[i - n])
    } else if i < n + RST_PORTS.len() + LISTENERS.len() {
        format!("syn-ack of {:?}", LISTENERS[i - n - RST_PORTS.len()])
    } else {
        format!("the time-wait socket's ACK to {TIME_WAIT_PORT}")
    }
}

/// The kernel's fates with `text` loaded by `argv`, in a namespace of its
/// own.
fn kernel(tag: &str, argv: &[&str], text: &str, addr: IpAddr) -> Vec<bool> {
    let ns = Netns::create(tag).unwrap();
    common::nf_twins::load(&ns, argv, text);
    fates(&ns, addr)
}

/// parapetd's fates with `text` (in `format`) applied and attached at
/// the netfilter hooks; its per-rule drop counters.
fn parapetd(tag: &str, text: &str, format: &str, addr: IpAddr) -> (Vec<bool>, Vec<(u32, u64)>) {
    let ns = Netns::create(tag).unwrap();
    parapetd_in(&ns, text, format, &|ns| fates(ns, addr))
}

/// [`parapetd`] in `ns`, the fates read by `fates`.
fn parapetd_in(
    ns: &Netns,
    text: &str,
    format: &str,
    fates: &dyn Fn(&Netns) -> Vec<bool>,
) -> (Vec<bool>, Vec<(u32, u64)>) {
    let d = applied_and_attached(ns, text, Some(format), &[]);
    let f = fates(ns);
    let mut counters: Vec<(u32, u64)> = stat_counters(&stats(&d.sock))
        .into_iter()
        .filter(|(id, n)| *id != 0 && *n > 0)
        .collect();
    counters.sort();
    (f, counters)
}

fn compare(kernel: &[bool], ours: &[bool], what_: &str) {
    assert_eq!(kernel.len(), ours.len());
    let wrong: Vec<String> = kernel
        .iter()
        .zip(ours)
        .enumerate()
        .filter(|(_, (k, p))| k != p)
        .map(|(i, (k, p))| format!("{}: kernel delivered {k}, parapet {p}", what(i)))
        .collect();
    assert!(wrong.is_empty(), "{what_}:\n{}", wrong.join("\n"));
}

#[test]
#[ignore = "needs root"]
fn owner_at_output_as_iptables_legacy() {
    require_root();
    let k = kernel("ownk", &["iptables-legacy-restore"], IPT, V4);
    let n = SENDERS.len() * UDP_PORTS.len();
    // the resets: a socket without a file (the kernel's control socket)
    assert_eq!(
        &k[n..n + 4],
        &[false, false, true, true],
        "the kernel's resets: --socket-exists and ! --uid-owner drop them"
    );
    assert_eq!(
        &k[n + 4..n + 7],
        &[false, true, true],
        "the SYN-ACKs carry their listener's owner"
    );
    assert!(
        !k[n + 7],
        "a time-wait socket's ACK has no owner: ! --uid-owner drops it"
    );
    let dropped = k[..n].iter().filter(|a| !**a).count();
    assert!(
        dropped > 5 && dropped < 25,
        "{dropped} of {n} dropped: {k:?}"
    );
    let (ours, counters) = parapetd("ownp", IPT, "iptables", V4);
    compare(&k, &ours, "parapetd at the netfilter hooks");
    // the rules that dropped are the ones counted: every DROP rule that
    // dropped something in the kernel (1..=5, 7, 8, 9) and no other
    let counted: Vec<u32> = counters.iter().map(|c| c.0).collect();
    assert!(
        [8, 9, 14].iter().all(|r| counted.contains(r)) && !counted.contains(&10),
        "{counters:?}"
    );
}

#[test]
#[ignore = "needs root"]
fn skuid_and_skgid_at_output_and_postrouting_as_nft() {
    require_root();
    let k = kernel("ownkn", &["nft", "-f", "-"], NFT, V4);
    let n = SENDERS.len() * UDP_PORTS.len();
    // nft: without a file no skuid rule matches, `!=` included
    assert_eq!(&k[n..n + 4], &[true, true, true, true], "{k:?}");
    let dropped = k[..n].iter().filter(|a| !**a).count();
    assert!(
        dropped > 5 && dropped < 25,
        "{dropped} of {n} dropped: {k:?}"
    );
    let (ours, _) = parapetd("ownpn", NFT, "nft", V4);
    compare(&k, &ours, "parapetd at the netfilter hooks (nft)");
    // the same over IPv6 (the inet table): datagrams to ::1, resets from
    // ::1's closed ports
    let k6 = kernel("ownkn6", &["nft", "-f", "-"], NFT, V6);
    let dropped = k6[..n].iter().filter(|a| !**a).count();
    assert!(
        dropped > 5 && dropped < 25,
        "{dropped} of {n} dropped: {k6:?}"
    );
    let (ours6, _) = parapetd("ownpn6", NFT, "nft", V6);
    compare(&k6, &ours6, "parapetd at the netfilter hooks (nft, IPv6)");
}

/// IPv6 (`ip6tables-legacy-restore`): IPv6 sends a closed port's reset
/// with no socket at all (`tcp_v6_send_response`), where IPv4 uses its
/// control socket: `! --socket-exists` and `! --uid-owner` (no socket:
/// every option negated matches) drop it, `--socket-exists` does not.
#[test]
#[ignore = "needs root"]
fn owner_at_output_as_ip6tables_legacy() {
    require_root();
    let k = kernel("ownk6", &["ip6tables-legacy-restore"], IPT, V6);
    let n = SENDERS.len() * UDP_PORTS.len();
    let dropped = k[..n].iter().filter(|a| !**a).count();
    assert!(
        dropped > 5 && dropped < 25,
        "{dropped} of {n} dropped: {k:?}"
    );
    assert_eq!(
        &k[n..n + 4],
        &[true, false, true, false],
        "the resets: {k:?}"
    );
    assert_eq!(
        &k[n + 4..],
        &[false, true, true, false],
        "the SYN-ACKs, the time-wait ACK: {k:?}"
    );
    let (ours, _) = parapetd("ownp6", IPT, "ip6tables", V6);
    compare(&k, &ours, "parapetd at the netfilter hooks (IPv6)");
}

/// `text` with its loopback interface matches on `iface` instead.
fn on_iface(text: &str, iface: &str) -> String {
    text.replace("-o lo ", &format!("-o {iface} "))
        .replace("oifname \"lo\"", &format!("oifname \"{iface}\""))
}

/// The UDP rules on traffic that leaves by a veth to another namespace
/// (`-o` / `oifname` the veth; OUTPUT, and with nft POSTROUTING too)
/// instead of loopback: the four senders' datagrams in the filtered
/// namespace of a veth pair, received in the peer's. Loopback skips the
/// neighbour and device queue a veth has; the owner must be read the same.
#[test]
#[ignore = "needs root"]
fn owner_on_a_veth_as_iptables_legacy_and_nft() {
    require_root();
    let peer = IpAddr::V4(Ipv4Addr::from(common::A_ADDR));
    for (kt, pt, argv, text, format) in [
        (
            "owvki",
            "owvpi",
            &["iptables-legacy-restore"][..],
            IPT,
            "iptables",
        ),
        ("owvkn", "owvpn", &["nft", "-f", "-"][..], NFT, "nft"),
    ] {
        let bed = common::testbed(kt, &[]);
        common::nf_twins::load(&bed.guard.b, argv, &on_iface(text, &bed.vb));
        let k = udp_arrivals_at(&bed.guard.b, &bed.guard.a, peer, &SENDERS, &UDP_PORTS);
        let dropped = k.iter().filter(|a| !**a).count();
        assert!(
            dropped > 3 && dropped < 25,
            "{format}: {dropped} of {} dropped: {k:?}",
            k.len()
        );
        let bed = common::testbed(pt, &[]);
        let (ours, _) = parapetd_in(&bed.guard.b, &on_iface(text, &bed.vb), format, &|ns| {
            udp_arrivals_at(ns, &bed.guard.a, peer, &SENDERS, &UDP_PORTS)
        });
        compare(
            &k,
            &ours,
            &format!("parapetd at the netfilter hooks, {format}, -o a veth"),
        );
    }
}

/// Where no socket can be read the owner rules are refused, never run as
/// if no packet had one: the OUTPUT chain placed on an interface (xdp)
/// and the tc placement (tc egress).
#[test]
#[ignore = "needs root"]
fn owner_rules_are_refused_at_interfaces_and_in_the_tc_placement() {
    require_root();
    for (tag, flags, attach, want) in [
        (
            "ownx",
            &["--chain", "filter/OUTPUT"][..],
            &["lo", "--hook", "xdp"][..],
            "which an interface hook (xdp, tc) does not have",
        ),
        (
            "ownt",
            &["--hook-placement", "tc"][..],
            &[][..],
            "the tc placement",
        ),
    ] {
        let ns = Netns::create(tag).unwrap();
        let d = applied(&ns, IPT, Some("iptables"), flags);
        let o = d.attach(attach);
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(
            !o.status.success() && err.contains("rules 1, 2, 3") && err.contains(want),
            "{tag}: {attach:?}: {err}"
        );
        assert!(err.contains("socket owner"), "{err}");
        let s = stats(&d.sock);
        assert_eq!(
            s["dataplane"]["attachments"].as_array().map(Vec::len),
            Some(0),
            "{s}"
        );
    }
}
