//! The kernel as the oracle for the socket owner (`-m owner`, nft `meta
//! skuid`/`skgid`): the same ruleset goes into a network namespace this
//! test creates (`iptables-legacy-restore`, `nft -f`), processes with
//! different uids and gids (`setpriv`) send UDP datagrams to 127.0.0.1 in
//! it, and which of them arrive must equal, datagram by datagram, what the
//! linear engine decides at OUTPUT for packets carrying the sender's
//! owner.

use parapet_model::*;
use parapet_parse::*;
use parapet_testbed::Netns;

/// Every uid/gid option, negated and not, and `--socket-exists`.
const IPT: &str = "*filter
:OUTPUT ACCEPT [0:0]
-A OUTPUT -o lo -p udp -m udp --dport 9301 -m owner --uid-owner 0 -j DROP
-A OUTPUT -o lo -p udp -m udp --dport 9302 -m owner ! --uid-owner 1000-1999 -j DROP
-A OUTPUT -o lo -p udp -m udp --dport 9303 -m owner --gid-owner 2000 -j DROP
-A OUTPUT -o lo -p udp -m udp --dport 9304 -m owner --socket-exists ! --gid-owner 2000 -j DROP
-A OUTPUT -o lo -p udp -m udp --dport 9305 -m owner --uid-owner 1500 --gid-owner 1500-2500 -j DROP
-A OUTPUT -o lo -p udp -m udp --dport 9306 -m owner ! --socket-exists -j DROP
-A OUTPUT -o lo -p udp -m udp --dport 9307 -m owner --uid-owner root -j DROP
COMMIT
";

/// nft's spelling: without a socket `!=` breaks the rule too.
const NFT: &str = "table inet t {
  chain out {
    type filter hook output priority 0; policy accept;
    oifname \"lo\" udp dport 9301 meta skuid 0 drop
    oifname \"lo\" udp dport 9302 meta skuid != 1000-1999 drop
    oifname \"lo\" udp dport 9303 meta skgid 2000 drop
    oifname \"lo\" udp dport 9304 meta skgid != 2000 drop
    oifname \"lo\" udp dport 9305 meta skuid 1500 meta skgid 1500-2500 drop
    oifname \"lo\" udp dport 9306 meta skuid { 0, 3000 } drop
    oifname \"lo\" udp dport 9307 meta skuid root drop
  }
}
";

/// The senders: (uid, gid).
const SENDERS: [(u32, u32); 4] = [(0, 0), (1500, 2000), (3000, 3000), (1200, 1700)];

/// Which datagrams arrive: each sender sends one to each port 9301..=9307
/// (datagram index = sender × 7 + port offset; `parapet_testbed::owner`,
/// shared with `parapet-cli`'s `netfilter_oracle_owner.rs`).
fn arrivals(ns: &Netns) -> Vec<bool> {
    let ports: Vec<u16> = (9301..=9307).collect();
    parapet_testbed::owner::udp_arrivals(ns, [127, 0, 0, 1].into(), &SENDERS, &ports)
}

/// The linear engine's fates at the ruleset's output chain.
fn engine_fates(rs: &Ruleset, chain: &str) -> Vec<bool> {
    let engine = LinearEngine::new(rs, rs.select_chain(Some(chain)).unwrap()).unwrap();
    let mut out = Vec::new();
    for (uid, gid) in SENDERS {
        for k in 0..7u16 {
            let mut p = Packet::v4(0x7f00_0001, 0x7f00_0001, 17, 40000, 9301 + k);
            p.oif = IfName::new("lo").unwrap();
            p.sk_uid = owner::key_value(uid) as u32;
            p.sk_gid = owner::key_value(gid) as u32;
            let d = engine.classify(&p, &NoSets).unwrap();
            out.push(d.verdict == Verdict::Accept);
        }
    }
    out
}

fn compare(kernel: &[bool], parapet: &[bool], what: &str) {
    for (i, (k, p)) in kernel.iter().zip(parapet).enumerate() {
        assert_eq!(
            p,
            k,
            "{what}: sender {:?} port {}: parapet vs the kernel (kernel: {kernel:?})",
            SENDERS[i / 7],
            9301 + i % 7
        );
    }
}

#[test]
#[ignore = "needs root"]
fn owner_agrees_with_iptables_legacy() {
    parapet_testbed::require_root();
    let ns = Netns::create("owner-ipt").unwrap();
    ns.exec(&["ip", "link", "set", "lo", "up"]).unwrap();
    let file = std::env::temp_dir().join(format!("parapet-owner-{}.v4", std::process::id()));
    std::fs::write(&file, IPT).unwrap();
    let loaded = ns.exec(&["iptables-legacy-restore", file.to_str().unwrap()]);
    let _ = std::fs::remove_file(&file);
    loaded.unwrap();
    let kernel = arrivals(&ns);
    let rs = parse(IPT, "owner.v4", Format::IptablesSave)
        .unwrap()
        .ruleset;
    compare(&kernel, &engine_fates(&rs, "filter/OUTPUT"), "iptables");
    let dropped = kernel.iter().filter(|a| !**a).count();
    assert!(
        dropped > 5 && dropped < 25,
        "{dropped} of 28 dropped: {kernel:?}"
    );
    // the listing decides the same
    let listed = render::iptables_save(&rs).unwrap();
    let again = parse(&listed, "listed.v4", Format::IptablesSave)
        .unwrap()
        .ruleset;
    compare(&kernel, &engine_fates(&again, "filter/OUTPUT"), "listed");
}

#[test]
#[ignore = "needs root"]
fn skuid_and_skgid_agree_with_nft() {
    parapet_testbed::require_root();
    let ns = Netns::create("owner-nft").unwrap();
    ns.exec(&["ip", "link", "set", "lo", "up"]).unwrap();
    let file = std::env::temp_dir().join(format!("parapet-owner-{}.nft", std::process::id()));
    std::fs::write(&file, NFT).unwrap();
    let loaded = ns.exec(&["nft", "-f", file.to_str().unwrap()]);
    let _ = std::fs::remove_file(&file);
    loaded.unwrap();
    let kernel = arrivals(&ns);
    let rs = parse(NFT, "owner.nft", Format::Nft).unwrap().ruleset;
    compare(&kernel, &engine_fates(&rs, "out"), "nft");
    let dropped = kernel.iter().filter(|a| !**a).count();
    assert!(
        dropped > 5 && dropped < 25,
        "{dropped} of 28 dropped: {kernel:?}"
    );
    let listed = render::nft(&rs).unwrap();
    let again = parse(&listed, "listed.nft", Format::Nft).unwrap().ruleset;
    compare(&kernel, &engine_fates(&again, "out"), "listed");
}
