//! `-m tcp --tcp-option` and `-m string` through the `parapet` binary:
//! `trace` (engine auto) evaluates both with the linear engine on the
//! packet's option area (`tcpopt HEX`) and bytes (`datagram HEX`); the
//! compiled engines evaluate TCP options (key words 44..=51) and strings
//! (the pattern hits, key words 52..=55) alike.

mod common;
use common::offline::{assert_verdicts, decided, parapet, s, stdout, write, write_pcap};

const RULES: &str = "*filter
:INPUT ACCEPT [0:0]
-A INPUT -p tcp -m tcp --tcp-option 30 -j DROP
-A INPUT -p udp -m string --string \"ab\" --algo kmp -j DROP
COMMIT
";

#[test]
fn tcp_options_and_strings_are_evaluated_offline() {
    let dir = tempfile::tempdir().unwrap();
    let rules = write(dir.path(), "p.rules", RULES);
    let summary = stdout(&parapet(&["check", s(&rules)]));
    // enforced everywhere since image version 12: no offline-only note
    assert!(!summary.contains("-m string"), "{summary}");
    assert!(!summary.contains("TCP options"), "{summary}");
    // engine auto: the linear engine, which reads both
    let decided_by = |pkt: &str| decided(&rules, pkt, &[]);
    let tcp = "tcp 10.0.0.1:1 > 10.0.0.2:22";
    assert!(decided_by(&format!("{tcp} tcpopt 01011e02")).starts_with("decided by rule 1"));
    // 30 is window scale's value byte there, not a kind
    assert!(
        decided_by(&format!("{tcp} tcpopt 03031e00")).starts_with("decided by the chain policy")
    );
    // 28 bytes of IPv4 and UDP header, then "xaby"
    let header = "4500002000010000401100000a0000010a0000020001003500080000";
    let udp = "udp 10.0.0.1:1 > 10.0.0.2:53";
    assert!(
        decided_by(&format!("{udp} datagram {header}78616279")).starts_with("decided by rule 2")
    );
    assert!(decided_by(&format!("{udp} datagram {header}78614279"))
        .starts_with("decided by the chain policy"));
    assert!(decided_by(udp).starts_with("decided by the chain policy"));
    // the compiled engines read the option area's kinds
    let options_only = write(
        dir.path(),
        "o.rules",
        "*filter\n:INPUT ACCEPT [0:0]\n-A INPUT -p tcp -m tcp --tcp-option 30 -j DROP\nCOMMIT\n",
    );
    let tree = |pkt: &str| decided(&options_only, pkt, &["--engine", "tree"]);
    assert!(tree(&format!("{tcp} tcpopt 01011e02")).starts_with("decided by rule 1"));
    assert!(tree(&format!("{tcp} tcpopt 03031e00")).starts_with("decided by the chain policy"));
    // and the packet's bytes (the pattern hits, image version 12): trace
    // fails when the engine disagrees with the linear engine
    let string_only = write(
        dir.path(),
        "s.rules",
        "*filter\n:INPUT ACCEPT [0:0]\n-A INPUT -p udp -m string --string \"ab\" --algo kmp -j DROP\nCOMMIT\n",
    );
    let tree_s = |pkt: &str| -> String {
        let out = stdout(&parapet(&[
            "trace",
            s(&string_only),
            "--packet",
            pkt,
            "--engine",
            "tree",
        ]));
        out.lines()
            .find(|l| l.starts_with("decided by"))
            .unwrap_or_default()
            .to_string()
    };
    assert!(tree_s(&format!("{udp} datagram {header}78616279")).starts_with("decided by rule 1"));
    assert!(tree_s(&format!("{udp} datagram {header}78614279"))
        .starts_with("decided by the chain policy"));
    assert!(tree_s(udp).starts_with("decided by the chain policy"));
    // trace says why the string rule did not match
    let out = stdout(&parapet(&["trace", s(&rules), "--packet", udp]));
    assert!(
        out.contains("no match, the packet's bytes fail string \"ab\""),
        "{out}"
    );
}

/// A capture's TCP option areas reach every engine: `classify` on a pcap
/// of three SYNs (kind 30 read as a kind; 30 as window scale's value byte;
/// no options) against `--tcp-option 30 -j DROP` decides each as the
/// linear engine does, in the linear and the compiled engines.
#[test]
fn pcap_option_areas_are_classified() {
    use parapet_dataplane::frame::Frame;
    let dir = tempfile::tempdir().unwrap();
    let rules = write(
        dir.path(),
        "o.rules",
        "*filter\n:INPUT ACCEPT [0:0]\n-A INPUT -p tcp -m tcp --tcp-option 30 -j DROP\nCOMMIT\n",
    );
    let syn = |area: &[u8]| {
        Frame::ipv4("10.0.0.1".parse().unwrap(), "10.0.0.2".parse().unwrap())
            .tcp(40000, 22, 0x02)
            .tcp_options(area)
            .build()
    };
    let frames = [syn(&[1, 30, 2, 0]), syn(&[3, 3, 30, 0]), syn(&[])];
    let cap = write_pcap(dir.path(), "o.pcap", &frames);
    assert_verdicts(
        &rules,
        &cap,
        &[],
        &["linear", "tree", "auto"],
        "1\tDROP\n0\tACCEPT\n0\tACCEPT\n",
    );
}
