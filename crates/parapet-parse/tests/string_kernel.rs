//! The kernel as the oracle for `-m string` (xt_string, `skb_find_text`):
//! the same rules go into iptables-legacy in a network namespace this test
//! creates, UDP datagrams whose bytes the test writes leave through OUTPUT
//! on loopback, and the rule whose counter moved is compared with the
//! linear engine's decision for a packet carrying the same bytes
//! (`Packet::datagram`), datagram by datagram: both algorithms, `--icase`
//! (ASCII and Latin-1), a pattern placed at and across `--from`/`--to`
//! (offsets from the IP header), a pattern in the headers, `!`, two
//! strings in one rule. Also: listings read back equal, and iptables'
//! refusals are refused with their position.

#[path = "common/raw_out.rs"]
mod raw_out;
#[path = "common/save_text.rs"]
mod save_text;

use parapet_model::{Family, Packet};
use parapet_parse::{parse, render, Format};
use parapet_testbed::{require_root, Netns};
use raw_out::{agree, counted_decisions, legacy_counters, load_legacy, send_wire, Sender};
use save_text::{linted, listed_back, refused_at};

/// The UDP payload starts at byte 28 (20 of IP header, 8 of UDP). Rule 3
/// reads bytes [30, 40); rule 6's hex pattern is the source port 40001 in
/// the UDP header (bytes 20 and 21).
const RULES: &str = "*filter
:INPUT ACCEPT [0:0]
:FORWARD ACCEPT [0:0]
:OUTPUT ACCEPT [0:0]
-A OUTPUT -p udp -m udp --sport 40001 -m string --string \"facebook.com\" --algo bm -j ACCEPT
-A OUTPUT -p udp -m udp --sport 40001 -m string --string \"Kazaa\" --algo kmp --icase -j ACCEPT
-A OUTPUT -p udp -m udp --sport 40001 -m string --string \"edge\" --algo bm --from 30 --to 40 -j ACCEPT
-A OUTPUT -p udp -m udp --sport 40001 -m string --hex-string \"|0d0a|\" --algo kmp -j ACCEPT
-A OUTPUT -p udp -m udp --sport 40001 -m string ! --string \"q\" --algo kmp -m string --string \"zz\" --algo bm -j ACCEPT
-A OUTPUT -p udp -m udp --sport 40001 -m string --string \"hdr\" --algo kmp -m string --hex-string \"|9c41|\" --algo bm --from 20 --to 22 -j ACCEPT
-A OUTPUT -p udp -m udp --sport 40001 -m string --hex-string \"|e9|\" --algo bm --icase -j ACCEPT
-A OUTPUT -p udp -m udp --sport 40001 -j ACCEPT
COMMIT
";

/// The UDP payloads probed.
fn payloads() -> Vec<Vec<u8>> {
    [
        &b"hello facebook.com"[..],
        b"FaceBook.Com",
        b"-- kAzAa --",
        b"..edge",
        b"........edge",
        b".........edge",
        b".edge",
        b"line\r\n",
        b"zz",
        b"zzq",
        b"hdr",
        b"\xc9",
        b"\xe9",
        b"\xc1",
        b"",
    ]
    .iter()
    .map(|p| p.to_vec())
    .collect()
}

/// An IPv4 UDP datagram from 127.0.0.1:40001 to 127.0.0.1:9999.
fn datagram(payload: &[u8]) -> Vec<u8> {
    let len = 28 + payload.len() as u16;
    let mut d = vec![0x45, 0, 0, 0, 0, 1, 0, 0, 64, 17, 0, 0];
    d[2..4].copy_from_slice(&len.to_be_bytes());
    d.extend([127, 0, 0, 1, 127, 0, 0, 1]);
    let c = raw_out::checksum(&d);
    d[10..12].copy_from_slice(&c.to_be_bytes());
    d.extend(40001u16.to_be_bytes());
    d.extend(9999u16.to_be_bytes());
    d.extend((len - 20).to_be_bytes());
    d.extend([0, 0]);
    d.extend(payload);
    d
}

fn probes() -> Vec<Packet> {
    payloads()
        .iter()
        .map(|p| {
            let bytes = datagram(p);
            let mut pkt = Packet::new(Family::V4, 0x7f00_0001, 0x7f00_0001, 17, 40001, 9999);
            pkt.len = bytes.len() as u32;
            pkt.datagram = Some(bytes.into_boxed_slice());
            pkt
        })
        .collect()
}

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
    agree(RULES, "string", "filter/OUTPUT", &packets, &kernel, 8);
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
