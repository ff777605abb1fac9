//! nft's reverse-path check (`fib saddr . iif oif missing`) through the
//! `parapet` binary: `check` says it is evaluated offline only, `trace`
//! decides by the packet's `rpath` and says what it assumed when the
//! packet does not say, `classify` notes its assumption, a compiled
//! engine decides as the linear one (key word 56), and the iptables-save
//! listing has no form for it.

mod common;
use common::offline::{parapet, s, stdout, write};

const RULES: &str = "table inet t {
\tchain pre {
\t\ttype filter hook prerouting priority -300; policy accept;
\t\tfib saddr oif missing counter drop
\t\tfib saddr . iif oif missing counter reject
\t}
}
";

#[test]
fn reverse_path_offline() {
    let dir = tempfile::tempdir().unwrap();
    let rules = write(dir.path(), "rpf.nft", RULES);
    let summary = stdout(&parapet(&["check", s(&rules)]));
    assert!(
        !summary.contains("evaluated offline only"),
        "the dataplane looks sources up (XDP, tc): {summary}"
    );
    let trace = |extra: &str| {
        let o = parapet(&[
            "trace",
            s(&rules),
            "--chain",
            "t/pre",
            "--packet",
            &format!("tcp 192.0.2.7:4000 > 10.0.0.1:22 iif eth0{extra}"),
        ]);
        assert!(o.status.success(), "{o:?}");
        stdout(&o)
    };
    for (extra, want) in [
        (" rpath none", "decided by rule 1: DROP"),
        (" rpath other", "decided by rule 2: REJECT"),
        (" rpath iif", "decided by the chain policy: ACCEPT"),
    ] {
        let out = trace(extra);
        assert!(out.contains(want), "{extra}: {out}");
        assert!(!out.contains("(assuming the route back"), "{out}");
    }
    let out = trace("");
    assert!(out.contains("decided by the chain policy: ACCEPT"), "{out}");
    assert!(
        out.contains(
            "(assuming the route back to the source leaves through the input interface: rpath iif"
        ),
        "{out}"
    );

    let packets = write(
        dir.path(),
        "p.trace",
        "3221225991\t167772161\t4000\t22\t6\n",
    );
    let o = parapet(&[
        "classify",
        s(&rules),
        s(&packets),
        "--chain",
        "t/pre",
        "--verdict",
    ]);
    assert!(o.status.success(), "{o:?}");
    assert_eq!(stdout(&o).trim(), "0\tACCEPT");
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains("rules with a reverse-path check (fib saddr … oif) (1, 2)"),
        "{err}"
    );

    let o = parapet(&[
        "classify",
        s(&rules),
        s(&packets),
        "--chain",
        "t/pre",
        "--engine",
        "tree",
    ]);
    assert!(o.status.success(), "{o:?}");
    assert_eq!(
        stdout(&o).trim(),
        "0",
        "the tree engine, every line rpath iif"
    );

    let o = parapet(&["list", s(&rules), "--format", "iptables-save"]);
    assert!(!o.status.success());
}
