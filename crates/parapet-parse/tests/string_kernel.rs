//! The kernel as the oracle for `-m string` (xt_string, `skb_find_text`):
//! the same rules go into iptables-legacy in a network namespace this test
//! creates, UDP datagrams whose bytes the test writes leave through OUTPUT
//! on loopback, and the rule whose counter moved is compared with the
//! linear engine's decision for a packet carrying the same bytes
//! (`Packet::datagram`), datagram by datagram: both algorithms, `--icase`
//! (ASCII and Latin-1), a pattern placed at and across `--from`/`--to`
//! (offsets from the IP header), a pattern in the headers, `!`, two
//! strings in one rule, a pattern at the very end of a 1,400-byte
//! datagram and one cut by it (`common/string_probes.rs`, shared with
//! parapetd's twin, `parapet-cli/tests/netfilter_oracle_string.rs`).
//! Also: listings read back equal, and iptables' refusals are refused
//! with their position.

#[path = "common/raw_out.rs"]
mod raw_out;
#[path = "common/save_text.rs"]
mod save_text;
#[path = "common/string_probes.rs"]
mod string_probes;

use parapet_model::Family;
use parapet_parse::{parse, render, Format};
use parapet_testbed::{require_root, Netns};
use raw_out::{agree, counted_decisions, legacy_counters, load_legacy, send_wire, Sender};
use save_text::{linted, listed_back, refused_at};
use string_probes::{probes, RULES};

#[test]
#[ignore = "needs root"]
fn strings_agree_with_iptables_legacy() {
    require_root();
    let ns = Netns::create("k13str-string").unwrap();
    load_legacy(&ns, RULES, Family::V4);
    let packets = probes();
    let kernel = counted_decisions(
        &ns,
        &packets,
        || legacy_counters(&ns, Family::V4, "OUTPUT"),
        |p| {
            send_wire(p, p.datagram.as_deref().unwrap(), Sender::Loopback)
                .unwrap_or_else(|e| panic!("{p}: {e}"))
        },
    );
    agree(RULES, "string", "filter/OUTPUT", &packets, &kernel, 9);
}

#[test]
fn strings_list_back_as_iptables_save_writes_them() {
    // (a rule's string matches are kept in pattern order, which the
    // rules above are written in)
    let (rs, _, back) = listed_back(RULES, "string.v4");
    assert!(rs
        .rules()
        .map(|r| &r.matches)
        .eq(back.rules().map(|r| &r.matches)));
    // libxt_string's save: printable patterns as --string with \" and \\,
    // others as hex; --from/--to only when not the defaults
    let one = "*filter\n:OUTPUT ACCEPT [0:0]\n-A OUTPUT -m string --algo kmp --from 28 --to 100 ! --string \"a|0d0a|b\" --icase -j DROP\n-A OUTPUT -m string --algo kmp --hex-string \"|00 01|ab\\\"c\" -j DROP\n-A OUTPUT -m string --algo kmp --string \"x\\\"y z\" -j DROP\nCOMMIT\n";
    let listed =
        render::iptables_save(&parse(one, "one.v4", Format::IptablesSave).unwrap().ruleset)
            .unwrap();
    for line in [
        "-A OUTPUT -m string ! --string \"a|0d0a|b\" --algo kmp --from 28 --to 100 --icase -j DROP",
        "-A OUTPUT -m string --hex-string \"|000161622263|\" --algo kmp -j DROP",
        "-A OUTPUT -m string --string \"x\\\"y z\" --algo kmp -j DROP",
    ] {
        assert!(listed.contains(line), "{line} not in\n{listed}");
    }
    let nft = render::nft(&rs).unwrap_err();
    assert!(
        format!("{nft:?}").contains("-m string has no nft spelling"),
        "{nft:?}"
    );
}

#[test]
fn iptables_refusals_are_refused_with_their_position() {
    let long = "x".repeat(129);
    for (opts, col, says) in [
        (
            "-m string --string x",
            13,
            "--algo (bm or kmp) and a pattern",
        ),
        (
            "-m string --algo bm",
            13,
            "--algo (bm or kmp) and a pattern",
        ),
        (
            "-m string --algo fsm --string x",
            27,
            "algorithm 'fsm' is not read",
        ),
        (
            "-m string --algo bm --string x --from 10 --to 5",
            13,
            "--from 10 is after --to 5",
        ),
        (
            "-m string --algo bm --string x --string y",
            41,
            "one pattern per -m string",
        ),
        (
            "-m string --algo bm --hex-string |0g|",
            43,
            "invalid hex digits",
        ),
        (
            "-m string --algo bm ! --from 3 --string x",
            30,
            "cannot be inverted",
        ),
        (
            &format!("-m string --algo bm --string {long}"),
            39,
            "more than the kernel's 128",
        ),
    ] {
        refused_at(&format!("-A INPUT {opts} -j DROP"), col, says);
    }
}

/// Analysis with a `-m string` rule: it decides part of its box, so lint
/// must not call the rule before it redundant nor the rule after it
/// unreachable, and diff refuses rather than compare boxes.
#[test]
fn lint_and_diff_do_not_trust_a_string_box() {
    use parapet_model::{diff, Budget};
    let text = "*filter
:INPUT ACCEPT [0:0]
-A INPUT -p tcp -m tcp --dport 22 -j DROP
-A INPUT -p tcp -m string --string \"x\" --algo bm -j ACCEPT
-A INPUT -p tcp -j DROP
COMMIT
";
    let (_, list, report) = linted(text, "s.v4", Format::IptablesSave);
    assert!(
        report.findings.is_empty(),
        "findings: {:?}",
        report.findings
    );
    let e = diff(&list, &list, Budget::default()).unwrap_err();
    assert!(e.contains("-m string"), "{e}");
}
