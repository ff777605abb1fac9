//! The kernel as the oracle for mark changes inside the filter rules:
//! `-j MARK --set-xmark/--set-mark/--and-mark/--or-mark/--xor-mark`
//! (iptables-legacy) and `meta mark set` (nft), each followed by rules
//! matching the mark. A mangle part gives each packet a starting mark from
//! its source address; raw protocol-253 packets leave through OUTPUT on
//! loopback. For every packet, the set of OUTPUT rules whose counter moved
//! (the MARK rules included) is compared with the rules the linear engine
//! matched; and a POSTROUTING rule per packet, matching the mark parapet's
//! decision says the packet leaves with, must count it: the kernel's mark
//! after the filter rules is the one parapet computes.

#[path = "common/raw_out.rs"]
mod raw_out;

use parapet_model::{Family, LinearEngine, NoSets, Packet, Ruleset};
use parapet_parse::{parse, Format};
use parapet_testbed::{require_root, Netns};
use raw_out::{legacy_counters, listings_keep, load_legacy, load_nft, nft_counters, send, Sender};

const FILTER: &str = "*filter
:INPUT ACCEPT [0:0]
:FORWARD ACCEPT [0:0]
:OUTPUT ACCEPT [0:0]
-A OUTPUT -p 253 -s 127.0.0.0/27 -j MARK --set-xmark 0x40000/0xff0000
-A OUTPUT -p 253 -m mark --mark 0x40000/0xff0000 -m mark --mark 0x1/0x1 -j ACCEPT
-A OUTPUT -p 253 -s 127.0.0.0/28 -j MARK --or-mark 0x2
-A OUTPUT -p 253 -m mark --mark 0x40002/0xff00f2 -j ACCEPT
-A OUTPUT -p 253 -j MARK --xor-mark 0x10
-A OUTPUT -p 253 -m mark --mark 0x10/0x10 -j MARK --and-mark 0xffff00ff
-A OUTPUT -p 253 -m mark --mark 0x40010/0xff00f0 -j ACCEPT
-A OUTPUT -p 253 -s 127.0.0.16/28 -j MARK --set-mark 0x5/0xf
-A OUTPUT -p 253 -m mark --mark 0x5 -j ACCEPT
-A OUTPUT -p 253 -m mark ! --mark 0x0/0xf0000 -j ACCEPT
COMMIT
";

const NFT: &str = "table inet t {
\tchain output {
\t\ttype filter hook output priority 0; policy accept;
\t\tmeta l4proto 253 ip saddr 127.0.0.0/27 counter meta mark set mark and 0xff00ffff xor 0x40000
\t\tmeta l4proto 253 meta mark & 0xff0001 == 0x40001 counter accept
\t\tmeta l4proto 253 ip saddr 127.0.0.0/28 counter meta mark set mark or 0x2
\t\tmeta l4proto 253 meta mark & 0xff00f2 == 0x40002 counter accept
\t\tmeta l4proto 253 counter meta mark set mark xor 0x10
\t\tmeta l4proto 253 meta mark & 0x10 == 0x10 counter meta mark set mark and 0xffff00ff
\t\tmeta l4proto 253 meta mark & 0xff00f0 == 0x40010 counter accept
\t\tmeta l4proto 253 ip saddr 127.0.0.16/28 counter meta mark set 0x5
\t\tmeta l4proto 253 meta mark 0x5 counter accept
\t\tmeta l4proto 253 meta mark & 0xf0000 != 0 counter accept
\t}
}
";

const SOURCES: u32 = 48;

/// The mark mangle gives the packet from 127.0.0.K: bits each rule reads.
fn start_mark(k: u32) -> u32 {
    let bits = [0x1, 0x2, 0x10, 0x20, 0x4_0000, 0x1_0000, 0x4, 0x8000_0000];
    (0..8)
        .filter(|b| (k.wrapping_mul(37) >> b) & 1 == 1)
        .fold(0, |m, b| m | bits[b as usize])
}

fn packets() -> Vec<Packet> {
    (1..=SOURCES)
        .map(|k| {
            let mut p = Packet::new(Family::V4, 0x7f00_0000 | k as u128, 0x7f00_0001, 253, 0, 0);
            p.len = 60;
            p.mark = start_mark(k);
            p
        })
        .collect()
}

/// Per packet: the rules the linear engine matched (1-based positions in
/// the chain, which are the rule ids here) and the mark it leaves with.
fn ours(rs: &Ruleset, chain: &str, packets: &[Packet]) -> Vec<(Vec<u32>, u32)> {
    let e = LinearEngine::new(rs, rs.select_chain(Some(chain)).unwrap()).unwrap();
    packets
        .iter()
        .map(|p| {
            let (d, steps) = e.trace(p, &NoSets).unwrap();
            let matched = steps
                .iter()
                .filter(|s| s.failed_on.is_none() && s.stateful != Some(false))
                .map(|s| s.rule_id)
                .collect();
            (matched, d.mark.map_or(p.mark, |m| m.apply(p.mark)))
        })
        .collect()
}

fn moved(before: &[u64], after: &[u64]) -> Vec<u32> {
    after
        .iter()
        .zip(before)
        .enumerate()
        .filter(|(_, (a, b))| a > b)
        .map(|(i, _)| i as u32 + 1)
        .collect()
}

fn compare(name: &str, kernel: &[(Vec<u32>, bool)], ours: &[(Vec<u32>, u32)], p: &[Packet]) {
    let differ: Vec<String> = p
        .iter()
        .zip(kernel.iter().zip(ours))
        .filter(|(_, ((k, seen), (o, _)))| k != o || !seen)
        .map(|(p, ((k, seen), (o, m)))| {
            format!("{p}: kernel rules {k:?}, parapet rules {o:?}; mark {m:#x} seen after: {seen}")
        })
        .collect();
    assert!(differ.is_empty(), "{name}:\n{}", differ.join("\n"));
    // the comparison proves something: packets end at several rules and
    // with several marks
    let ends: std::collections::BTreeSet<Option<&u32>> =
        kernel.iter().map(|(k, _)| k.last()).collect();
    let marks: std::collections::BTreeSet<u32> = ours.iter().map(|(_, m)| *m).collect();
    assert!(ends.len() >= 5, "{name}: packets end at {ends:?}");
    assert!(marks.len() >= 8, "{name}: marks {marks:?}");
}

#[test]
fn mark_changes_read_back_in_both_syntaxes() {
    let p = packets();
    listings_keep(
        &[("m.v4", FILTER, "filter/OUTPUT"), ("m.nft", NFT, "output")],
        &|rs, chain| ours(rs, chain, &p),
    );
}

#[test]
#[ignore = "needs root"]
fn mark_changes_agree_with_iptables_legacy() {
    require_root();
    let ns = Netns::create("k13mark-ipt").unwrap();
    ns.ip(&["link", "set", "lo", "up"]).unwrap();
    let p = packets();
    let rs = parse(FILTER, "m.v4", Format::Auto).unwrap().ruleset;
    let want = ours(&rs, "filter/OUTPUT", &p);
    let mut mangle = String::from("*mangle\n:PREROUTING ACCEPT [0:0]\n:INPUT ACCEPT [0:0]\n:FORWARD ACCEPT [0:0]\n:OUTPUT ACCEPT [0:0]\n:POSTROUTING ACCEPT [0:0]\n");
    for (k, pkt) in p.iter().enumerate() {
        let k = k + 1;
        mangle += &format!(
            "-A OUTPUT -s 127.0.0.{k} -j MARK --set-mark {:#x}\n",
            pkt.mark
        );
    }
    for (k, (_, mark)) in want.iter().enumerate() {
        mangle += &format!(
            "-A POSTROUTING -s 127.0.0.{} -m mark --mark {mark:#x}\n",
            k + 1
        );
    }
    mangle += "COMMIT\n";
    load_legacy(&ns, &format!("{mangle}{FILTER}"), Family::V4);
    let post = || {
        let out = ns
            .exec(&[
                "iptables-legacy",
                "-t",
                "mangle",
                "-L",
                "POSTROUTING",
                "-v",
                "-x",
                "-n",
            ])
            .unwrap();
        out.lines()
            .skip(2)
            .map(|l| l.split_whitespace().next().unwrap().parse().unwrap())
            .collect::<Vec<u64>>()
    };
    let kernel: Vec<(Vec<u32>, bool)> = p
        .iter()
        .enumerate()
        .map(|(k, pkt)| {
            let (before, post_before) = (legacy_counters(&ns, Family::V4, "OUTPUT"), post());
            ns.run_in(|| send(pkt, Sender::Loopback));
            let rules = moved(&before, &legacy_counters(&ns, Family::V4, "OUTPUT"));
            (rules, post()[k] > post_before[k])
        })
        .collect();
    compare("iptables-legacy", &kernel, &want, &p);
}

#[test]
#[ignore = "needs root"]
fn mark_changes_agree_with_nft() {
    require_root();
    let ns = Netns::create("k13mark-nft").unwrap();
    ns.ip(&["link", "set", "lo", "up"]).unwrap();
    let p = packets();
    let rs = parse(NFT, "m.nft", Format::Auto).unwrap().ruleset;
    let want = ours(&rs, "output", &p);
    let mut script = String::from(
        "table ip m {\n\tchain out {\n\t\ttype route hook output priority -150; policy accept;\n",
    );
    for (k, pkt) in p.iter().enumerate() {
        script += &format!(
            "\t\tip saddr 127.0.0.{} meta mark set {:#x}\n",
            k + 1,
            pkt.mark
        );
    }
    script += "\t}\n\tchain post {\n\t\ttype filter hook postrouting priority 0; policy accept;\n";
    for (k, (_, mark)) in want.iter().enumerate() {
        script += &format!(
            "\t\tip saddr 127.0.0.{} meta mark {mark:#x} counter\n",
            k + 1
        );
    }
    script += "\t}\n}\n";
    load_nft(&ns, &format!("{script}{NFT}"));
    let out = || nft_counters(&ns, "inet", "t", "output");
    let post = || nft_counters(&ns, "ip", "m", "post");
    let kernel: Vec<(Vec<u32>, bool)> = p
        .iter()
        .enumerate()
        .map(|(k, pkt)| {
            let (before, post_before) = (out(), post());
            ns.run_in(|| send(pkt, Sender::Loopback));
            (moved(&before, &out()), post()[k] > post_before[k])
        })
        .collect();
    compare("nft", &kernel, &want, &p);
}
