//! ipset 4's save format (`-N SET OLDTYPE --option N`, `-A SET ELEM`,
//! `COMMIT`), which a current `ipset restore` still reads, with the kernel
//! as the oracle: the same legacy text goes into a namespace's ipset (with
//! `ipset restore`) and, through `parapet check`'s loader, into a
//! [`SetStore`]; the same iptables-save rules (`-m set --match-set`) go into
//! iptables-legacy and the linear engine; raw protocol-253 packets leave
//! through OUTPUT on loopback and the rule whose counter moved is compared
//! with the engine's decision. The old type names (`iphash`, `nethash`,
//! `ipporthash`, `setlist`) and `--option` spellings are all used.
//! Malformed legacy lines fail with `FILE:LINE:COL`, as ipset refuses them.

#[path = "common/ipset_kernel.rs"]
mod ipset_kernel;
#[path = "common/raw_out.rs"]
mod raw_out;

use ipset_kernel::{ipset_restore, loopback_packets, Store};
use parapet_model::{Family, LinearEngine};
use parapet_parse::{check, parse, Format};
use parapet_testbed::{require_root, Netns};
use raw_out::{iptables_decisions, Sender};

const SETS: &str = "\
-N a iphash --hashsize 64
-A a 127.0.0.1
-A a 127.0.0.8
-N b nethash --maxelem 16
-A b 127.0.0.16/29
-N p ipporthash
-A p 127.0.0.26,253:0
-N t iphash --timeout 600
-A t 127.0.0.30 --timeout 300
-N l setlist
-A l b
COMMIT
";

const RULES: &str = "*filter
:INPUT ACCEPT [0:0]
:FORWARD ACCEPT [0:0]
:OUTPUT ACCEPT [0:0]
-A OUTPUT -p 253 -m set --match-set a src -j ACCEPT
-A OUTPUT -p 253 -m set --match-set p src,src -j ACCEPT
-A OUTPUT -p 253 -m set --match-set l src -j ACCEPT
-A OUTPUT -p 253 -m set --match-set t src -j ACCEPT
COMMIT
";

#[test]
#[ignore = "needs root"]
fn legacy_ipset_sets_agree_with_the_kernel() {
    require_root();
    let ns = Netns::create("p13-ipsetold").unwrap();
    ns.ip(&["link", "set", "lo", "up"]).unwrap();
    ipset_restore(&ns, SETS);
    let p = loopback_packets(32);
    let kernel = iptables_decisions(&ns, RULES, Family::V4, &p, Sender::Loopback);
    // The rules go before the namespace (and its sets) goes.
    ns.exec(&["iptables-legacy", "-F", "OUTPUT"]).unwrap();
    ns.exec(&["ipset", "flush", "l"]).unwrap();
    ns.exec(&["ipset", "destroy"]).unwrap();

    let checked = check::check(SETS, "old.ipset", Format::Auto).unwrap();
    assert_eq!(checked.format, Format::Ipset);
    let sets = Store(checked.sets);
    let rs = parse(RULES, "l.v4", Format::Auto).unwrap().ruleset;
    let engine = LinearEngine::new(&rs, rs.select_chain(Some("filter/OUTPUT")).unwrap()).unwrap();
    let ours: Vec<u32> = p
        .iter()
        .map(|p| engine.classify(p, &sets).unwrap().rule_id)
        .collect();

    let distinct: std::collections::BTreeSet<u32> = kernel.iter().copied().collect();
    assert_eq!(
        distinct,
        [0, 1, 2, 3, 4].into(),
        "every rule and the policy decide some packet: {kernel:?}"
    );
    let differ: Vec<String> = p
        .iter()
        .zip(kernel.iter().zip(&ours))
        .filter(|(_, (k, o))| k != o)
        .map(|(p, (k, o))| format!("{p}: kernel rule {k}, parapet rule {o}"))
        .collect();
    assert!(differ.is_empty(), "{}", differ.join("\n"));
}

/// What ipset refuses in the old spellings is refused at its place:
/// `iptree` has no alias today ("typename 'iptree' is unknown"), and a
/// single-dash option is not an option ("Unknown argument: `-hashsize'").
#[test]
fn malformed_legacy_lines_fail_at_file_line_col() {
    for (text, want) in [
        (
            "-N a iptree\n",
            "old.ipset:1:6: unsupported set type `iptree`",
        ),
        (
            "-N a iphash -hashsize 64\n",
            "old.ipset:1:13: unknown create option `-hashsize`",
        ),
        (
            "-N a iphash\n-A a 10.0.0.1 --timeout x\n",
            "old.ipset:2:25: expected a timeout in seconds, found `x`",
        ),
        (
            "-N a iphash\n-A b 10.0.0.1\n",
            "old.ipset:2:4: set `b` does not exist",
        ),
    ] {
        let e = check::check(text, "old.ipset", Format::Auto).unwrap_err();
        assert!(e[0].to_string().starts_with(want), "{text:?}: {}", e[0]);
    }
}
