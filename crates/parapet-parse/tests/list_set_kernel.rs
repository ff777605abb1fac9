//! The kernel as the oracle for ipset `list:set`: the same `ipset restore`
//! text goes into a namespace's ipset and into a [`SetStore`], the same
//! iptables-save rules (`-m set [!] --match-set LIST src[,dst]`) into
//! iptables-legacy and the linear engine; raw protocol-253 packets leave
//! through OUTPUT on loopback and the rule whose counter moved is compared
//! with the engine's decision. The lists mix a two-dimension member (which
//! the kernel skips under one direction flag), an IPv6 member (skipped for
//! IPv4 packets), members placed with `before`/`after`, and a negation;
//! and a direct reference with fewer flags than its set's dimensions,
//! which the kernel never matches.

#[path = "common/ipset_kernel.rs"]
mod ipset_kernel;
#[path = "common/raw_out.rs"]
mod raw_out;

use ipset_kernel::{ipset_restore, loopback_packets, Store};
use parapet_model::{Family, LinearEngine};
use parapet_parse::{parse, Format};
use parapet_sets::SetStore;
use parapet_testbed::{require_root, Netns};
use raw_out::{iptables_decisions, Sender};

const SETS: &str = "\
create a hash:ip family inet
add a 127.0.0.1
add a 127.0.0.8
create b hash:net family inet
add b 127.0.0.16/29
create pair hash:net,port family inet
add pair 127.0.0.24/29,253:0
add pair 127.0.0.32/30,tcp:1
create six hash:ip family inet6
add six ::1
create c hash:ip family inet
add c 127.0.0.36
add c 127.0.0.37
add c 127.0.0.38
add c 127.0.0.39
add c 127.0.0.40
create l list:set size 8
add l pair
add l six
add l b
add l a before b
create l2 list:set size 2
add l2 c
";

const RULES: &str = "*filter
:INPUT ACCEPT [0:0]
:FORWARD ACCEPT [0:0]
:OUTPUT ACCEPT [0:0]
-A OUTPUT -p 253 -m set --match-set pair src -j ACCEPT
-A OUTPUT -p 253 -m set --match-set l src -j ACCEPT
-A OUTPUT -p 253 -m set --match-set l src,dst -j ACCEPT
-A OUTPUT -p 253 -m set ! --match-set l2 src -j ACCEPT
COMMIT
";

#[test]
#[ignore = "needs root"]
fn list_set_matches_agree_with_iptables_legacy() {
    require_root();
    let ns = Netns::create("p13-listset").unwrap();
    ns.ip(&["link", "set", "lo", "up"]).unwrap();
    ipset_restore(&ns, SETS);
    let p = loopback_packets(41);
    let kernel = iptables_decisions(&ns, RULES, Family::V4, &p, Sender::Loopback);
    // The rules go before the namespace (and its sets) goes.
    ns.exec(&["iptables-legacy", "-F", "OUTPUT"]).unwrap();
    ns.exec(&["ipset", "flush", "l"]).unwrap();
    ns.exec(&["ipset", "flush", "l2"]).unwrap();
    ns.exec(&["ipset", "destroy"]).unwrap();

    let mut store = SetStore::new();
    store.load_ipset(SETS).unwrap();
    let sets = Store(store);
    let rs = parse(RULES, "l.v4", Format::Auto).unwrap().ruleset;
    let engine = LinearEngine::new(&rs, rs.select_chain(Some("filter/OUTPUT")).unwrap()).unwrap();
    let ours: Vec<u32> = p
        .iter()
        .map(|p| engine.classify(p, &sets).unwrap().rule_id)
        .collect();

    let distinct: std::collections::BTreeSet<u32> = kernel.iter().copied().collect();
    // Rule 1 (`pair`, two dimensions, under one flag) never matches in
    // the kernel; every other rule and the policy decide some packet.
    assert_eq!(
        distinct,
        [0, 2, 3, 4].into(),
        "the rules that decide: {kernel:?}"
    );
    let differ: Vec<String> = p
        .iter()
        .zip(kernel.iter().zip(&ours))
        .filter(|(_, (k, o))| k != o)
        .map(|(p, (k, o))| format!("{p}: kernel rule {k}, parapet rule {o}"))
        .collect();
    assert!(differ.is_empty(), "{}", differ.join("\n"));
}
