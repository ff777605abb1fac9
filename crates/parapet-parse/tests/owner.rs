//! The socket owner's spellings (`-m owner`, nft `meta skuid`/`skgid`):
//! what each loads as, the errors iptables and parapet give, the round
//! trips (the compiled engines' refusal: parapet-compile's
//! `offline_fields.rs`).

use parapet_model::*;
use parapet_parse::*;

fn ipt(chain: &str, rule: &str) -> Result<Ruleset, String> {
    let text = format!("*filter\n:{chain} ACCEPT [0:0]\n-A {chain} {rule}\nCOMMIT\n");
    parse(&text, "o.rules", Format::IptablesSave)
        .map(|p| p.ruleset)
        .map_err(|e| e[0].to_string())
}

fn nft(hook: &str, rule: &str) -> Result<Ruleset, String> {
    let text = format!(
        "table inet t {{\n  chain c {{\n    type filter hook {hook} priority 0;\n    {rule}\n  }}\n}}\n"
    );
    parse(&text, "o.nft", Format::Nft)
        .map(|p| p.ruleset)
        .map_err(|e| e[0].to_string())
}

fn field(rs: &Ruleset, f: Field) -> IntervalSet {
    rs.rules().next().unwrap().matches.get(f).unwrap().clone()
}

#[test]
fn packed_values() {
    let rs = ipt("OUTPUT", "-m owner --uid-owner 1000-1999 -j DROP").unwrap();
    assert_eq!(field(&rs, Field::SkUid), IntervalSet::range(1002, 2001));
    let rs = ipt(
        "OUTPUT",
        "-m owner --uid-owner root --gid-owner 0x10 -j DROP",
    )
    .unwrap();
    assert_eq!(field(&rs, Field::SkUid), IntervalSet::point(2));
    assert_eq!(field(&rs, Field::SkGid), IntervalSet::point(18));
    // no socket (0) and no file (1) are in a negated option's set
    let rs = ipt("OUTPUT", "-m owner ! --uid-owner 5 -j DROP").unwrap();
    let s = field(&rs, Field::SkUid);
    assert!(s.contains(0) && s.contains(1) && !s.contains(7));
    let rs = ipt("OUTPUT", "-m owner ! --socket-exists -j DROP").unwrap();
    assert_eq!(field(&rs, Field::SkUid), IntervalSet::point(0));
    // nft's != never holds without a socket
    let rs = nft("output", "meta skuid != 5 drop").unwrap();
    let s = field(&rs, Field::SkUid);
    assert!(!s.contains(0) && !s.contains(1) && s.contains(2) && !s.contains(7));
    let rs = nft("output", "meta skgid { root, 7-9 } drop").unwrap();
    assert_eq!(
        field(&rs, Field::SkGid),
        IntervalSet::from_ranges([(2, 2), (9, 11)])
    );
}

#[test]
fn errors() {
    for (chain, rule, want) in [
        (
            "INPUT",
            "-m owner --uid-owner 0",
            "o.rules:3:13: iptables refuses -m owner in INPUT",
        ),
        (
            "FORWARD",
            "-m owner --uid-owner 0",
            "refuses -m owner in FORWARD",
        ),
        (
            "OUTPUT",
            "-m owner -j DROP",
            "-m owner needs at least one of",
        ),
        (
            "OUTPUT",
            "-m owner --uid-owner nosuchuser-here",
            "o.rules:3:32: unknown user 'nosuchuser-here'",
        ),
        (
            "OUTPUT",
            "-m owner --gid-owner nosuchgroup",
            "unknown group 'nosuchgroup'",
        ),
        (
            "OUTPUT",
            "-m owner --gid-owner 5 --suppl-groups",
            "--suppl-groups is not supported",
        ),
    ] {
        let e = ipt(chain, rule).unwrap_err();
        assert!(e.contains(want), "{rule}: {e}");
    }
    for (hook, rule, want) in [
        (
            "input",
            "meta skuid 0 drop",
            "o.nft:4:5: meta skuid/skgid is supported in output and postrouting chains only",
        ),
        (
            "output",
            "meta skuid nosuchuser-here drop",
            "unknown user 'nosuchuser-here'",
        ),
        (
            "output",
            "meta skuid < 1000 drop",
            "compare with == or != only",
        ),
        (
            "output",
            "meta skuid . tcp dport { 0 . 22 } drop",
            "not supported yet",
        ),
    ] {
        let e = nft(hook, rule).unwrap_err();
        assert!(e.contains(want), "{rule}: {e}");
    }
}

#[test]
fn round_trips() {
    let rule = "-m owner --socket-exists ! --uid-owner 0-10 --gid-owner 5 -j ACCEPT";
    let rs = ipt("OUTPUT", rule).unwrap();
    let listed = render::iptables_save(&rs).unwrap();
    assert!(listed.contains(rule), "{listed}");
    let rs = ipt("OUTPUT", "-m owner ! --socket-exists -j DROP").unwrap();
    let listed = render::iptables_save(&rs).unwrap();
    assert!(
        listed.contains("-m owner ! --socket-exists -j DROP"),
        "{listed}"
    );
    // nft has no spelling for "no socket"
    let e = render::nft(&ipt("OUTPUT", "-m owner ! --uid-owner 5").unwrap()).unwrap_err();
    assert!(e.to_string().contains("without a socket"), "{e}");
    let rs = nft("output", "meta skuid != 5 meta skgid 7-9 drop").unwrap();
    let listed = render::nft(&rs).unwrap();
    assert!(
        listed.contains("meta skuid != 5 meta skgid 7-9"),
        "{listed}"
    );
}
