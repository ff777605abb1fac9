//! `-m recent`'s options: what each sets, the kernel's load-time checks
//! (`recent_mt_check`) as `FILE:LINE:COL` errors, parapet's own refusals,
//! and the iptables-save round trip.

use parapet_model::*;
use parapet_parse::*;

/// The rules of a filter table holding `rules` (one per line), or the
/// first error.
fn load(rules: &[&str], format: Format) -> Result<Vec<Rule>, String> {
    let body: String = rules.iter().map(|r| format!("-A INPUT {r}\n")).collect();
    let text = format!("*filter\n:INPUT ACCEPT [0:0]\n{body}COMMIT\n");
    parse(&text, "r.rules", format)
        .map(|p| p.ruleset.rules().cloned().collect())
        .map_err(|e| e[0].to_string())
}

fn recent(rule: &str) -> Recent {
    load(&[rule], Format::IptablesSave).unwrap()[0]
        .recent
        .clone()
        .unwrap()
}

fn refused(rule: &str) -> String {
    load(&[rule], Format::IptablesSave).unwrap_err()
}

#[test]
fn options_and_defaults() {
    let r = recent("-m recent --set");
    assert_eq!(r, Recent::new("DEFAULT", RecentCommand::Set));
    let r = recent("-m recent ! --update --seconds 60 --reap --hitcount 41 --name SSH --mask 255.255.0.0 --rdest -j DROP");
    assert_eq!(r.command, RecentCommand::Update);
    assert!(r.invert && r.reap && r.rdest);
    assert_eq!((r.seconds, r.hitcount), (60, 41));
    assert_eq!((r.name.as_str(), r.mask_v4), ("SSH", 0xffff_0000));
    assert!(!r.rttl);
    assert!(recent("-m recent --rcheck --rttl --name T -j DROP").rttl);
    let r = load(
        &["-m recent --rcheck --mask ffff:ffff:ffff:ff00:: -j DROP"],
        Format::Ip6tablesSave,
    )
    .unwrap()[0]
        .recent
        .clone()
        .unwrap();
    assert_eq!(r.mask_v6, 56);
}

#[test]
fn the_kernels_checks_and_parapets_refusals() {
    for (rule, want) in [
        (
            "-m recent -j DROP",
            "r.rules:3:13: -m recent needs one of --set",
        ),
        ("-m recent --set --rcheck", "takes one of --set, --rcheck"),
        (
            "-m recent --set --seconds 5",
            "--seconds only goes with --rcheck or --update, not --set",
        ),
        (
            "-m recent --remove --hitcount 2",
            "--hitcount only goes with",
        ),
        ("-m recent --rcheck --reap", "--reap needs --seconds"),
        (
            "-m recent --rcheck --hitcount 65536",
            "more than the kernel's 65535",
        ),
        (
            "-m recent --set --rttl",
            "--rttl only goes with --rcheck or --update, not --set",
        ),
        (
            "-m recent --remove --rttl",
            "--rttl only goes with --rcheck or --update, not --remove",
        ),
        ("-m recent --rcheck --name a/b", "no '/'"),
        ("-m recent --set ! --name x", "'!' cannot negate --name"),
        ("--seconds 5", "--seconds needs -m recent"),
        (
            "-m recent --set -m time --weekdays Mon",
            "-m time after -m recent is not supported",
        ),
        (
            "-p tcp -m recent --set -m multiport --ports 22",
            "--ports after a stateful match is not supported",
        ),
        (
            "-p udp -m recent --set -m udp --dport 53 -m limit",
            "-m limit after -m recent and another match is not supported",
        ),
    ] {
        let e = refused(rule);
        assert!(e.contains(want), "{rule}: {e}");
    }
    let e = load(
        &["-m recent --rcheck --mask ffff::ff:0 -j DROP"],
        Format::Ip6tablesSave,
    )
    .unwrap_err();
    assert!(e.contains("not a prefix"), "{e}");
    // The kernel keeps the first rule's mask for the table.
    let e = load(
        &[
            "-m recent --set --name T",
            "-m recent --rcheck --name T --mask 255.0.0.0 -j DROP",
        ],
        Format::IptablesSave,
    )
    .unwrap_err();
    assert!(
        e.starts_with("r.rules:4:") && e.contains("another --mask at line 3"),
        "{e}"
    );
}

#[test]
fn iptables_save_round_trip_and_no_nft_spelling() {
    let text = "*filter\n:INPUT ACCEPT [0:0]\n-A INPUT -p tcp -m tcp --dport 22 -m recent --set --name SSH --mask 255.255.255.255 --rsource\n-A INPUT -p tcp -m tcp --dport 22 -m recent ! --update --seconds 60 --reap --hitcount 4 --name SSH --mask 255.255.255.255 --rsource -j DROP\n-A INPUT -p tcp -m tcp --dport 23 -m recent --rcheck --seconds 5 --reap --hitcount 2 --rttl --name SSH --mask 255.255.255.255 --rsource -j DROP\nCOMMIT\n";
    let rs = parse(text, "r.rules", Format::IptablesSave)
        .unwrap()
        .ruleset;
    let listed = render::iptables_save(&rs).unwrap();
    assert!(listed.contains("-m recent ! --update --seconds 60 --reap --hitcount 4 --name SSH --mask 255.255.255.255 --rsource -j DROP"), "{listed}");
    // iptables-legacy-save's spelling of --rttl
    assert!(listed.contains("-m recent --rcheck --seconds 5 --reap --hitcount 2 --rttl --name SSH --mask 255.255.255.255 --rsource -j DROP"), "{listed}");
    let again = parse(&listed, "r.rules", Format::IptablesSave)
        .unwrap()
        .ruleset;
    let recents = |rs: &Ruleset| rs.rules().map(|r| r.recent.clone()).collect::<Vec<_>>();
    assert_eq!(recents(&again), recents(&rs));
    let e = render::nft(&rs).unwrap_err().to_string();
    assert!(e.contains("-m recent has no nft spelling"), "{e}");
}
