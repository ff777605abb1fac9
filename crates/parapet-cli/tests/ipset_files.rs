//! Issue 13 item 6: `parapet check` and `parapet list` read `ipset save`
//! files as they read rulesets (the same function the corpus suite calls).

mod common;
use common::offline::{assert_set_verdicts, parapet, s, stdout, write};

#[test]
fn check_reads_an_ipset_file_and_reports_errors_at_their_position() {
    let dir = tempfile::tempdir().unwrap();
    let good = write(
        dir.path(),
        "bl.ipset",
        "create bl hash:net family inet\nadd bl 192.0.2.0/24\nadd bl 198.51.100.7\n",
    );
    let out = stdout(&parapet(&["check", s(&good)]));
    assert_eq!(
        out,
        format!("{}: ok (ipset): 1 set, 2 elements\n", good.display())
    );
    let bad = write(
        dir.path(),
        "bad.ipset",
        "create bl hash:net family inet\nadd bl 192.0.2.300\n",
    );
    let o = parapet(&["check", s(&bad)]);
    assert_eq!(o.status.code(), Some(1));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.starts_with(&format!("{}:2:8: ", bad.display())),
        "{err}"
    );
}

#[test]
fn list_prints_an_ipset_file_in_ipset_and_nft_syntax() {
    let dir = tempfile::tempdir().unwrap();
    let f = write(
        dir.path(),
        "bl.ipset",
        "create bl hash:ip family inet timeout 600\nadd bl 192.0.2.1 timeout 300\n",
    );
    let ipset = stdout(&parapet(&["list", s(&f)]));
    assert!(ipset.starts_with("create bl hash:ip"), "{ipset}");
    assert!(ipset.contains("add bl 192.0.2.1 timeout "), "{ipset}");
    let nft = stdout(&parapet(&["list", s(&f), "--format", "nft"]));
    assert!(nft.starts_with("set bl {\n\ttype ipv4_addr\n"), "{nft}");
    assert!(nft.contains("elements = { 192.0.2.1 expires "), "{nft}");
    // Both listings load back as the same one set.
    let again = write(dir.path(), "again.ipset", &ipset);
    assert!(stdout(&parapet(&["check", s(&again)])).contains("1 set, 1 element"));
    let o = parapet(&["list", s(&f), "--format", "json"]);
    assert_eq!(o.status.code(), Some(1));
}

#[test]
fn classify_matches_a_list_set_by_its_first_matching_member() {
    let dir = tempfile::tempdir().unwrap();
    // `pair` has two dimensions: under `src` alone the kernel skips it.
    // 10.1.0.1 -> x: in `a`; 10.2.0.1 -> x:1 tcp: only `pair`, under
    // src,dst; 10.3.0.1: neither.
    let case = assert_set_verdicts(
        dir.path(),
        "l",
        [
            "create a hash:ip family inet\nadd a 10.1.0.1\ncreate pair hash:ip,port family inet\nadd pair 10.2.0.1,tcp:1\ncreate l list:set\nadd l pair\nadd l a\n",
            "*filter\n:INPUT ACCEPT [0:0]\n-A INPUT -m set --match-set l src -j DROP\n-A INPUT -m set --match-set l src,dst -j REJECT\nCOMMIT\n",
            "167837697 167837698 1 1 6\n167903233 167837698 1 1 6\n168034305 167837698 1 1 6\n",
        ],
        "1\tDROP\n2\tREJECT\n0\tACCEPT\n",
    );
    let out = stdout(&parapet(&["check", s(&case.ipset)]));
    assert!(out.contains("ok (ipset)"), "{out}");
}
