//! `-m tcp --tcp-option` and `-m string` through the `parapet` binary:
//! `trace` evaluates both on the packet's option area (`tcpopt HEX`) and
//! bytes (`datagram HEX`); the compiled engines evaluate TCP options (key
//! words 44..=51) and strings (the pattern hits, key words 52..=55) as the
//! linear engine does, and `auto` compiles both (session 18: strings too).

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
    // engine auto (a scan of two compiled entries), checked by trace
    // against the linear engine, which explains
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

/// `-m string` under `--engine auto`: a chain of strings compiles (the
/// pattern hits) and decides a capture's datagrams as the linear engine
/// does; a chain with more distinct searches than the image's pattern
/// table holds (128) is left to the linear engine by `auto`, and refused
/// by the compiled engines asked for by name.
#[test]
fn auto_compiles_strings_and_leaves_too_many_to_the_linear_engine() {
    use parapet_dataplane::frame::Frame;
    let dir = tempfile::tempdir().unwrap();
    let mut text = String::from("*filter\n:INPUT ACCEPT [0:0]\n");
    text.push_str("-A INPUT -p udp -m string --string \"ab\" --algo kmp -j DROP\n");
    for port in 1..=4 {
        text.push_str(&format!("-A INPUT -p tcp --dport {port} -j DROP\n"));
    }
    text.push_str("COMMIT\n");
    let rules = write(dir.path(), "s.rules", &text);
    let explained = stdout(&parapet(&["explain", s(&rules)]));
    assert!(explained.contains("engine: tree"), "{explained}");
    let udp = |tail: &[u8; 4]| {
        let mut f = Frame::ipv4("10.0.0.1".parse().unwrap(), "10.0.0.2".parse().unwrap())
            .udp(40000, 53)
            .payload(4)
            .build();
        let n = f.len();
        f[n - 4..].copy_from_slice(tail);
        f
    };
    let frames = [udp(b"xaby"), udp(b"xaBy"), udp(b"abab")];
    let cap = write_pcap(dir.path(), "s.pcap", &frames);
    assert_verdicts(
        &rules,
        &cap,
        &[],
        &["linear", "tree", "scan", "auto"],
        "1\tDROP\n0\tACCEPT\n1\tDROP\n",
    );

    let mut many = String::from("*filter\n:INPUT ACCEPT [0:0]\n");
    for i in 0..129 {
        many.push_str(&format!(
            "-A INPUT -p udp -m string --string \"p{i:03}\" --algo kmp -j DROP\n"
        ));
    }
    many.push_str("-A INPUT -p udp -m string --string \"ab\" --algo bm -j DROP\nCOMMIT\n");
    let many = write(dir.path(), "many.rules", &many);
    let explained = stdout(&parapet(&["explain", s(&many)]));
    assert!(explained.contains("engine: linear"), "{explained}");
    assert_verdicts(
        &many,
        &cap,
        &[],
        &["linear", "auto"],
        "130\tDROP\n0\tACCEPT\n130\tDROP\n",
    );
    let refused = parapet(&["explain", s(&many), "--engine", "tree"]);
    assert!(!refused.status.success());
    let said = String::from_utf8_lossy(&refused.stderr);
    assert!(said.contains("128 distinct searches"), "{said}");
}
