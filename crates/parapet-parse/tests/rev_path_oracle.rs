//! The kernel as the oracle for nft's reverse-path lookups (`fib saddr .
//! iif oif missing|exists`, `fib saddr oif missing|exists`): one network
//! namespace this test creates with two veth pairs whose inner ends a0
//! (10.1.0.1/24, 2001:db8:1::1/64) and b0 (10.2.0.1/24, 2001:db8:2::1/64)
//! carry routes — 10.3.0.0/24 and 2001:db8:3::/64 through b0, unreachable
//! and blackhole prefixes, no default route. Frames of protocol 253 are
//! written into the outer ends (AF_PACKET) so that they arrive on a0 or
//! b0 from sources whose route back leaves through that interface,
//! through the other one, or nowhere (spoofed, unrouted, local,
//! broadcast, link-local, 0.0.0.0 to the limited broadcast), and raw
//! packets looped back from unrouted and routed sources. nft's
//! prerouting counters say which rule decided; the linear engine decides
//! from each packet's `rpath`, which the namespace's routing table gives
//! (`ip route get`, as nft's fib looks the source up): the routing view
//! is the assumption, the rules' semantics are what is checked.

#[path = "common/raw_out.rs"]
mod raw_out;

use parapet_model::{rev_path, Family, Packet};
use parapet_testbed::{require_root, Netns};
use raw_out::{
    agree, load_legacy, load_nft, nft_counters, polled_decisions, send, send_frame, Sender,
};
use std::net::IpAddr;
use std::time::Duration;

/// Each outcome decided by its own rule: 1 none, 2 another interface,
/// 3 the input interface.
const NFT_MISSING_FIRST: &str = "table inet t {
\tchain pre {
\t\ttype filter hook prerouting priority 0; policy accept;
\t\tmeta l4proto 253 fib saddr oif missing counter accept
\t\tmeta l4proto 253 fib saddr . iif oif missing counter accept
\t\tmeta l4proto 253 fib saddr . iif oif exists counter accept
\t\tmeta l4proto 253 counter accept
\t}
}
";

/// The same outcomes by the `exists` forms and a family-restricted rule
/// (firewalld's `meta nfproto ipv6 fib saddr . iif oif missing drop`).
const NFT_EXISTS_FIRST: &str = "table inet t {
\tchain pre {
\t\ttype filter hook prerouting priority 0; policy accept;
\t\tmeta l4proto 253 fib saddr . iif oif exists counter accept
\t\tmeta l4proto 253 meta nfproto ipv6 fib saddr . iif oif missing fib saddr oif exists counter accept
\t\tmeta l4proto 253 fib saddr oif exists counter accept
\t\tmeta l4proto 253 counter accept
\t}
}
";

const A_MAC: &str = "02:00:00:00:0a:00";
const B_MAC: &str = "02:00:00:00:0b:00";

fn mac(s: &str) -> [u8; 6] {
    let mut m = [0u8; 6];
    for (i, b) in s.split(':').enumerate() {
        m[i] = u8::from_str_radix(b, 16).unwrap();
    }
    m
}

/// The namespace: a0/a1 and b0/b1, addresses and routes as the module says.
fn host(tag: &str) -> Netns {
    let ns = Netns::create(tag).unwrap();
    for args in [
        &[
            "link", "add", "a0", "address", A_MAC, "type", "veth", "peer", "name", "a1",
        ][..],
        &[
            "link", "add", "b0", "address", B_MAC, "type", "veth", "peer", "name", "b1",
        ],
        &["addr", "add", "10.1.0.1/24", "brd", "+", "dev", "a0"],
        &["addr", "add", "10.2.0.1/24", "brd", "+", "dev", "b0"],
        &[
            "-6",
            "addr",
            "add",
            "2001:db8:1::1/64",
            "dev",
            "a0",
            "nodad",
        ],
        &[
            "-6",
            "addr",
            "add",
            "2001:db8:2::1/64",
            "dev",
            "b0",
            "nodad",
        ],
        &["link", "set", "a0", "up"],
        &["link", "set", "a1", "up"],
        &["link", "set", "b0", "up"],
        &["link", "set", "b1", "up"],
        &["route", "add", "10.3.0.0/24", "dev", "b0"],
        &["route", "add", "unreachable", "10.4.0.0/24"],
        &["route", "add", "blackhole", "10.5.0.0/24"],
        &["-6", "route", "add", "2001:db8:3::/64", "dev", "b0"],
        &["-6", "route", "add", "unreachable", "2001:db8:4::/64"],
    ] {
        ns.ip(args).unwrap();
    }
    ns.wait_local_route("2001:db8:1::1").unwrap();
    ns.wait_local_route("2001:db8:2::1").unwrap();
    ns
}

fn addr(s: &str) -> u128 {
    match s.parse::<IpAddr>().unwrap() {
        IpAddr::V4(a) => u32::from(a) as u128,
        IpAddr::V6(a) => u128::from(a),
    }
}

/// The namespace's answer to "where does the route back to `src` leave",
/// for a packet that came in on `iif`: `ip route get` (with the input
/// interface as the output hint for link-local sources, as nft_fib6
/// restricts those lookups), no route or a local address → none. The
/// kernel's skips (a packet from loopback; 0.0.0.0 to the limited
/// broadcast) → iif.
fn routing_view(ns: &Netns, p: &Packet, iif: &str) -> u8 {
    if iif == "lo" {
        return rev_path::IIF;
    }
    let src = p.src_ip();
    if let (IpAddr::V4(s), IpAddr::V4(d)) = (src, p.dst_ip()) {
        if s.is_unspecified() && (d.is_broadcast() || d.octets()[..3] == [224, 0, 0]) {
            return rev_path::IIF;
        }
    }
    let s = src.to_string();
    let mut args = vec!["-j", "route", "get", s.as_str()];
    if matches!(src, IpAddr::V6(a) if a.segments()[0] & 0xffc0 == 0xfe80) {
        args.extend(["oif", iif]);
    }
    let Ok(out) = ns.ip(&args) else {
        return rev_path::NONE;
    };
    let route: serde_json::Value = serde_json::from_str(&out).unwrap();
    let route = &route[0];
    if route["type"] == "local" {
        rev_path::NONE
    } else if route["dev"] == iif {
        rev_path::IIF
    } else {
        rev_path::OTHER
    }
}

/// (interface the frame arrives on, packet) for every source of the
/// family, arriving on a0 and on b0.
fn probes(ns: &Netns) -> Vec<(&'static str, Packet)> {
    let v4 = [
        "10.1.0.7",
        "10.2.0.7",
        "10.3.0.7",
        "10.4.0.7",
        "10.5.0.7",
        "192.0.2.7",
        "10.1.0.1",
        "10.2.0.1",
        "10.1.0.255",
        "0.0.0.0",
    ];
    let v6 = [
        "2001:db8:1::7",
        "2001:db8:2::7",
        "2001:db8:3::7",
        "2001:db8:4::7",
        "2001:db8:ff::7",
        "2001:db8:1::1",
        "fe80::7",
    ];
    let mut out = Vec::new();
    for (iif, d4, d6) in [
        ("a0", "10.1.0.1", "2001:db8:1::1"),
        ("b0", "10.2.0.1", "2001:db8:2::1"),
    ] {
        let mut add = |family, s: &str, d: &str| {
            let mut p = Packet::new(family, addr(s), addr(d), 253, 0, 0);
            p.len = 60;
            p.iif = parapet_model::IfName::new(iif).unwrap();
            p.rev_path = routing_view(ns, &p, iif);
            out.push((iif, p));
        };
        for s in v4 {
            add(Family::V4, s, d4);
        }
        add(Family::V4, "0.0.0.0", "255.255.255.255");
        for s in v6 {
            add(Family::V6, s, d6);
        }
    }
    // Looped back (sent to the loopback address): nft skips the lookup
    // for a packet from loopback, whatever its source.
    for (family, s, d) in [
        (Family::V4, "192.0.2.7", "127.0.0.1"),
        (Family::V4, "10.2.0.7", "127.0.0.1"),
        (Family::V6, "2001:db8:ff::7", "::1"),
        (Family::V6, "2001:db8:2::7", "::1"),
    ] {
        let mut p = Packet::new(family, addr(s), addr(d), 253, 0, 0);
        p.len = 60;
        p.iif = parapet_model::IfName::new("lo").unwrap();
        p.rev_path = routing_view(ns, &p, "lo");
        out.push(("lo", p));
    }
    out
}

/// Writes each probe into the outer end of its interface's pair and reads
/// which prerouting counter moved (waiting, bounded, for the frame to
/// cross the veth).
fn kernel_decisions(ns: &Netns, script: &str, probes: &[(&str, Packet)]) -> Vec<u32> {
    load_nft(ns, script);
    let counts = || nft_counters(ns, "inet", "t", "pre");
    polled_decisions(probes, counts, |_, (iif, p)| {
        let from = mac("02:00:00:00:00:99");
        match *iif {
            "lo" => ns.run_in(|| send(p, Sender::Loopback)),
            "a0" => ns.run_in(|| send_frame("a1", mac(A_MAC), from, p)),
            _ => ns.run_in(|| send_frame("b1", mac(B_MAC), from, p)),
        }
        ((), Duration::from_secs(10))
    })
    .into_iter()
    .map(|(_, rule)| rule)
    .collect()
}

#[test]
#[ignore = "needs root"]
fn fib_reverse_path_agrees_with_nft() {
    require_root();
    let ns = host("k13rpf-nft");
    let probes = probes(&ns);
    let outcomes: std::collections::BTreeSet<u8> = probes.iter().map(|(_, p)| p.rev_path).collect();
    assert_eq!(outcomes.len(), 3, "the routes give every outcome");
    let packets: Vec<Packet> = probes.iter().map(|(_, p)| p.clone()).collect();
    for (name, script) in [
        ("rpath-missing.nft", NFT_MISSING_FIRST),
        ("rpath-exists.nft", NFT_EXISTS_FIRST),
    ] {
        ns.exec(&["nft", "flush", "ruleset"]).unwrap();
        let kernel = kernel_decisions(&ns, script, &probes);
        assert!(
            kernel.iter().all(|&k| k != 0),
            "{name}: a frame no rule counted: {kernel:?}"
        );
        agree(script, name, "t/pre", &packets, &kernel, 3);
    }
}

/// `-m rpfilter` loads only in the raw and mangle tables: iptables-restore
/// refuses it in the filter table, and so does parapet (at the match);
/// in `*raw` it is left to the kernel, loaded as written.
#[test]
#[ignore = "needs root"]
fn rpfilter_tables_as_iptables_restore() {
    require_root();
    let ns = Netns::create("k13rpf-ipt").unwrap();
    let filter = "*filter\n:INPUT ACCEPT [0:0]\n-A INPUT -m rpfilter --invert -j DROP\nCOMMIT\n";
    let raw = "*raw\n:PREROUTING ACCEPT [0:0]\n-A PREROUTING -m rpfilter --loose --invert -j DROP\nCOMMIT\n*filter\n:INPUT ACCEPT [0:0]\n-A INPUT -p tcp --dport 22 -j ACCEPT\nCOMMIT\n";
    let refused = std::panic::catch_unwind(|| load_legacy(&ns, filter, Family::V4));
    assert!(
        refused.is_err(),
        "iptables-legacy-restore loaded rpfilter in the filter table"
    );
    let errs = parapet_parse::parse(filter, "f.rules", parapet_parse::Format::Auto).unwrap_err();
    assert_eq!(errs.len(), 1, "{errs:?}");
    assert!(
        errs[0].to_string().starts_with(
            "f.rules:3:13: match 'rpfilter' is valid only in the raw and mangle tables"
        ),
        "{}",
        errs[0]
    );
    load_legacy(&ns, raw, Family::V4);
    let parsed = parapet_parse::parse(raw, "r.rules", parapet_parse::Format::Auto).unwrap();
    assert_eq!(
        parsed.ruleset.rule_count(),
        1,
        "the filter rule alone is parapet's"
    );
}

/// nft refuses the `oif` result of a fib lookup in output and postrouting
/// chains ("Operation not supported"), and accepts it in prerouting,
/// input and forward, in every spelling: parapet loads the same files.
#[test]
#[ignore = "needs root"]
fn fib_oif_hooks_and_spellings_as_nft() {
    require_root();
    let ns = Netns::create("k13rpf-hooks").unwrap();
    let path = std::env::temp_dir().join(format!("k13rpf-hooks-{}.nft", std::process::id()));
    let mut refused = 0;
    for expr in [
        "fib saddr . iif oif missing",
        "fib saddr . iif oif exists",
        "fib saddr oif missing",
        "fib saddr . iif oif != missing",
        "fib saddr . iif oif 0",
        "fib saddr oif != 0",
    ] {
        for hook in ["prerouting", "input", "forward", "output", "postrouting"] {
            let text = format!(
                "table inet t {{\n\tchain c {{\n\t\ttype filter hook {hook} priority 0; policy accept;\n\t\t{expr} counter drop\n\t}}\n}}\n"
            );
            std::fs::write(&path, &text).unwrap();
            let kernel = ns.exec(&["nft", "-f", path.to_str().unwrap()]).is_ok();
            ns.exec(&["nft", "flush", "ruleset"]).unwrap();
            let ours = parapet_parse::parse(&text, "h.nft", parapet_parse::Format::Nft);
            assert_eq!(ours.is_ok(), kernel, "{hook}: {expr}: {:?}", ours.err());
            if let Err(e) = ours {
                assert!(
                    e[0].to_string().starts_with(
                        "h.nft:4:3: fib saddr … oif (reverse path) is valid in prerouting"
                    ),
                    "{}",
                    e[0]
                );
                refused += 1;
            }
        }
    }
    let _ = std::fs::remove_file(&path);
    assert_eq!(refused, 12, "output and postrouting, six spellings");
}
