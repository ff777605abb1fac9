//! `-m tcp --tcp-option` and `-m string` through the `parapet` binary:
//! `check` notes them offline-only, `trace` (engine auto) evaluates them
//! with the linear engine on the packet's option area (`tcpopt HEX`) and
//! bytes (`datagram HEX`), and the compiled engines refuse them by name.

mod common;
use common::offline::{parapet, s, stdout, write};

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
    for note in [
        "; TCP options (rule 1): evaluated offline only, apply refuses them",
        "; -m string (rule 2): evaluated offline only, apply refuses them",
    ] {
        assert!(summary.contains(note), "{summary}");
    }
    // engine auto: the linear engine, which reads both
    let decided = |pkt: &str| -> String {
        let out = stdout(&parapet(&["trace", s(&rules), "--packet", pkt]));
        out.lines()
            .find(|l| l.starts_with("decided by"))
            .unwrap_or_default()
            .to_string()
    };
    let tcp = "tcp 10.0.0.1:1 > 10.0.0.2:22";
    assert!(decided(&format!("{tcp} tcpopt 01011e02")).starts_with("decided by rule 1"));
    // 30 is window scale's value byte there, not a kind
    assert!(decided(&format!("{tcp} tcpopt 03031e00")).starts_with("decided by the chain policy"));
    // 28 bytes of IPv4 and UDP header, then "xaby"
    let header = "4500002000010000401100000a0000010a0000020001003500080000";
    let udp = "udp 10.0.0.1:1 > 10.0.0.2:53";
    assert!(decided(&format!("{udp} datagram {header}78616279")).starts_with("decided by rule 2"));
    assert!(decided(&format!("{udp} datagram {header}78614279"))
        .starts_with("decided by the chain policy"));
    assert!(decided(udp).starts_with("decided by the chain policy"));
    // the compiled engines refuse each by name (the whole chain compiles)
    let string_only = write(
        dir.path(),
        "s.rules",
        "*filter\n:INPUT ACCEPT [0:0]\n-A INPUT -p udp -m string --string \"ab\" --algo kmp -j DROP\nCOMMIT\n",
    );
    for (file, pkt, says) in [
        (
            &rules,
            tcp,
            "rule 1 matches a TCP option (-m tcp --tcp-option 30)",
        ),
        (&string_only, udp, "rule 1 has a -m string match"),
    ] {
        let o = parapet(&["trace", s(file), "--packet", pkt, "--engine", "tree"]);
        assert!(!o.status.success());
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(err.contains(says), "{err}");
    }
    // trace says why the string rule did not match
    let out = stdout(&parapet(&["trace", s(&rules), "--packet", udp]));
    assert!(
        out.contains("no match, the packet's bytes fail string \"ab\""),
        "{out}"
    );
}
