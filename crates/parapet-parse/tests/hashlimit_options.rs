//! `-m hashlimit`'s options: what each sets, iptables' and the kernel's
//! load-time checks as `FILE:LINE:COL` errors, parapet's own refusals, and
//! the iptables-save round trip (through the kernel's own iptables-save
//! when root).

#[path = "common/save_text.rs"]
mod save_text;

use parapet_model::*;
use parapet_parse::*;
use save_text::listed_back;

/// The rules of a filter table holding `rules` (one per line), or the
/// first error.
fn load(rules: &[&str], format: Format) -> Result<Vec<Rule>, String> {
    let body: String = rules.iter().map(|r| format!("-A INPUT {r}\n")).collect();
    let text = format!("*filter\n:INPUT ACCEPT [0:0]\n{body}COMMIT\n");
    parse(&text, "r.rules", format)
        .map(|p| p.ruleset.rules().cloned().collect())
        .map_err(|e| e[0].to_string())
}

fn hashlimit(rule: &str, format: Format) -> Hashlimit {
    load(&[rule], format).unwrap()[0].hashlimit.clone().unwrap()
}

#[test]
fn options_and_defaults() {
    let h = hashlimit(
        "-m hashlimit --hashlimit-upto 3/min --hashlimit-name t",
        Format::IptablesSave,
    );
    assert_eq!(h, Hashlimit::new("t", 3, TimeUnit::Minute, Family::V4));
    // iptables' defaults: burst 5, expire = the rate's unit, gc 1 s
    assert_eq!(
        (h.burst, h.expire, h.gcinterval, h.mode),
        (5, 60_000, 1000, 0)
    );
    let h = hashlimit(
        "-p udp -m hashlimit ! --hashlimit-upto 10/s --hashlimit-burst 7 --hashlimit-mode dstport,srcip --hashlimit-srcmask 16 --hashlimit-name x --hashlimit-htable-size 64 --hashlimit-htable-max 128 --hashlimit-htable-gcinterval 500 --hashlimit-htable-expire 2000 -j DROP",
        Format::IptablesSave,
    );
    assert!(h.above, "! --hashlimit-upto is --hashlimit-above");
    assert_eq!((h.rate, h.per, h.burst), (10, TimeUnit::Second, 7));
    assert_eq!(h.mode, HASHLIMIT_SRCIP | HASHLIMIT_DSTPORT);
    assert_eq!((h.srcmask, h.dstmask), (16, 32));
    assert_eq!(
        (h.size, h.max, h.gcinterval, h.expire),
        (64, 128, 500, 2000)
    );
    assert_eq!(h.capacity(), 128);
    let h6 = hashlimit(
        "-m hashlimit --hashlimit-above 1/hour --hashlimit-mode dstip --hashlimit-dstmask 64 --hashlimit-name v6",
        Format::Ip6tablesSave,
    );
    assert_eq!((h6.srcmask, h6.dstmask, h6.above), (128, 64, true));
}

#[test]
fn the_kernels_checks_and_parapets_refusals() {
    for (rule, want) in [
        (
            "-m hashlimit --hashlimit-name a -j DROP",
            "r.rules:3:13: -m hashlimit needs --hashlimit-upto or --hashlimit-above",
        ),
        (
            "-m hashlimit --hashlimit-upto 5/s",
            "needs --hashlimit-name",
        ),
        (
            "-m hashlimit --hashlimit-upto 1kb/s --hashlimit-name b",
            "r.rules:3:40: '1kb/s': hashlimit's byte mode is not supported yet",
        ),
        (
            "-m hashlimit --hashlimit-upto 2000000/s --hashlimit-name b",
            "too fast",
        ),
        (
            "-m hashlimit --hashlimit-upto 5/s --hashlimit-mode srcaddr --hashlimit-name b",
            "unknown --hashlimit-mode 'srcaddr'",
        ),
        (
            "-m hashlimit --hashlimit-upto 5/s --hashlimit-srcmask 33 --hashlimit-name b",
            "prefix length of 0 to 32",
        ),
        (
            "-m hashlimit --hashlimit-upto 5/s --hashlimit-burst 0 --hashlimit-name b",
            "--hashlimit-burst takes 1 to 1000000",
        ),
        (
            // iptables-restore: "out of range (1-1000000)".
            "-m hashlimit --hashlimit-upto 5/s --hashlimit-burst 1000001 --hashlimit-name b",
            "--hashlimit-burst takes 1 to 1000000",
        ),
        (
            "-m hashlimit --hashlimit-upto 5/s --hashlimit-htable-expire 0 --hashlimit-name b",
            "must be at least 1",
        ),
        (
            "-m hashlimit --hashlimit-upto 1/day --hashlimit-name b",
            "overflows the kernel's credits",
        ),
        (
            "-m hashlimit --hashlimit-upto 5/s --hashlimit-rate-match --hashlimit-name b",
            "rate-match mode",
        ),
        (
            "-m hashlimit --hashlimit-upto 5/s ! --hashlimit-name b",
            "'!' cannot negate --hashlimit-name",
        ),
        ("--hashlimit-upto 5/s", "needs -m hashlimit"),
        (
            "-p tcp -m hashlimit --hashlimit-upto 5/s --hashlimit-name b -m tcp --dport 22 -m recent --set",
            "-m recent after -m hashlimit and another match is not supported",
        ),
    ] {
        let e = load(&[rule], Format::IptablesSave).unwrap_err();
        assert!(e.contains(want), "{rule}: {e}");
    }
    // The kernel configures a table from its first rule: a later rule of
    // one chain shares the table's rate, burst and mode and keeps its own
    // upto/above (hashlimit_kernel.rs checks it against the kernel).
    let rules = load(
        &[
            "-m hashlimit --hashlimit-upto 5/s --hashlimit-name T",
            "-m hashlimit --hashlimit-above 5/s --hashlimit-name T -j DROP",
            "-m hashlimit --hashlimit-above 6/s --hashlimit-burst 9 --hashlimit-name T -j DROP",
        ],
        Format::IptablesSave,
    )
    .unwrap();
    let first = rules[0].hashlimit.clone().unwrap();
    let third = rules[2].hashlimit.clone().unwrap();
    assert_eq!(
        third,
        Hashlimit {
            above: true,
            ..first
        }
    );
    // In another chain, or inserted with -I, which rule the kernel checks
    // first is iptables' chain layout: refused, at the option.
    for (second, col) in [("-A OTHER", 13), ("-I INPUT", 13)] {
        let text = format!(
            "*filter\n:INPUT ACCEPT [0:0]\n:OTHER - [0:0]\n-A INPUT -m hashlimit --hashlimit-upto 5/s --hashlimit-name T\n{second} -m hashlimit --hashlimit-above 6/s --hashlimit-name T -j DROP\nCOMMIT\n"
        );
        let e = parse(&text, "r.rules", Format::IptablesSave).unwrap_err()[0].to_string();
        assert!(
            e.starts_with(&format!("r.rules:5:{col}:")) && e.contains("other settings at line 4"),
            "{second}: {e}"
        );
    }
}

const TEXT: &str = "*filter
:INPUT ACCEPT [0:0]
-A INPUT -p udp -m hashlimit --hashlimit-upto 3/sec --hashlimit-burst 4 --hashlimit-mode srcip,dstport --hashlimit-name foo -j ACCEPT
-A INPUT -p udp -m hashlimit --hashlimit-above 10/min --hashlimit-burst 5 --hashlimit-mode srcip --hashlimit-name bar --hashlimit-htable-size 100 --hashlimit-htable-max 50 --hashlimit-htable-gcinterval 300 --hashlimit-htable-expire 5000 --hashlimit-srcmask 24 -j DROP
-A INPUT -p udp -m hashlimit --hashlimit-upto 100/sec --hashlimit-burst 5 --hashlimit-mode srcport,dstip --hashlimit-name q --hashlimit-dstmask 16 -j ACCEPT
COMMIT
";

fn hashlimits(rs: &Ruleset) -> Vec<Option<Hashlimit>> {
    rs.rules().map(|r| r.hashlimit.clone()).collect()
}

#[test]
fn iptables_save_round_trip_and_no_nft_spelling() {
    let (rs, _, again) = listed_back(TEXT, "r.rules");
    assert_eq!(hashlimits(&again), hashlimits(&rs));
    let e = render::nft(&rs).unwrap_err().to_string();
    assert!(e.contains("-m hashlimit has no nft spelling"), "{e}");
}

/// parapet's listing loads into the kernel, and iptables-save's text of
/// it reads back to the same matches.
#[test]
#[ignore = "needs root"]
fn the_listing_round_trips_through_iptables_legacy() {
    parapet_testbed::require_root();
    let rs = parse(TEXT, "r.rules", Format::IptablesSave)
        .unwrap()
        .ruleset;
    let listed = render::iptables_save(&rs).unwrap();
    let ns = parapet_testbed::Netns::create("hashlimit-save").unwrap();
    let file = std::env::temp_dir().join(format!("parapet-hl-save-{}.v4", std::process::id()));
    std::fs::write(&file, &listed).unwrap();
    let loaded = ns.exec(&["iptables-legacy-restore", file.to_str().unwrap()]);
    let _ = std::fs::remove_file(&file);
    loaded.unwrap();
    let saved = ns.exec(&["iptables-legacy-save"]).unwrap();
    let back = parse(&saved, "saved", Format::IptablesSave)
        .unwrap()
        .ruleset;
    assert_eq!(hashlimits(&back), hashlimits(&rs), "{saved}");
}
