//! The conntrack entry's protocol and original destination port
//! (`--ctproto`, `--ctorigdstport`; nft `ct protocol`, `ct original
//! proto-dst`): what they mean for packets with and without an entry, both
//! syntaxes' round trips, and the refusals. The kernel's verdicts are
//! checked in `crates/parapet-cli/tests/netfilter_oracle_ctorig.rs`.

use parapet_model::*;
use parapet_parse::*;

fn decisions(rs: &Ruleset, packets: &[Packet]) -> Vec<(u32, Verdict)> {
    let e = LinearEngine::new(rs, rs.select_chain(None).unwrap()).unwrap();
    packets
        .iter()
        .map(|p| {
            let d = e.classify(p, &NoSets).unwrap();
            (d.rule_id, d.verdict)
        })
        .collect()
}

/// Packets in every conntrack state; those with an entry carry each
/// protocol and original destination port of interest.
fn packets() -> Vec<Packet> {
    let mut out = Vec::new();
    for ct in CtState::ALL {
        let tracked = !matches!(ct, CtState::Invalid | CtState::Untracked);
        for (ct_proto, ct_orig_dport) in
            [(6, 25), (17, 53), (6, 53), (17, 67), (1, 0x0800), (6, 1000)]
        {
            for dport in [25, 53, 999] {
                let mut p = Packet::new(Family::V4, 1, 2, ct_proto, 40000, dport);
                p.ct_state = ct;
                if tracked {
                    (p.ct_proto, p.ct_orig_dport) = (ct_proto, ct_orig_dport);
                }
                out.push(p);
            }
        }
    }
    out
}

const IPT: &str = "*filter\n:INPUT DROP [0:0]\n\
    -A INPUT -m conntrack --ctorigdstport 25 -j ACCEPT\n\
    -A INPUT -m conntrack --ctstate NEW --ctproto 17 --ctorigdstport 53 -j ACCEPT\n\
    -A INPUT -m conntrack ! --ctproto tcp -j DROP\n\
    -A INPUT -m conntrack ! --ctorigdstport 50:60 -j ACCEPT\n\
    -A INPUT -m conntrack --ctstate ESTABLISHED -m conntrack --ctproto 6 -j ACCEPT\n\
    COMMIT\n";

#[test]
fn a_packet_without_an_entry_never_matches() {
    let rs = parse(IPT, "c.ipt", Format::Auto).unwrap().ruleset;
    let want = decisions(&rs, &packets());
    let rule_ids: Vec<u32> = rs.rules().map(|r| r.id).collect();
    for (p, (id, v)) in packets().iter().zip(&want) {
        let tracked = !matches!(p.ct_state, CtState::Invalid | CtState::Untracked);
        if !tracked {
            // every rule reads the entry: the policy decides
            assert!(*v == Verdict::Drop && !rule_ids.contains(id), "{p}: {id}");
        }
    }
    let rule = |n: usize| rs.rules().nth(n).unwrap().clone();
    // no --ctstate: a tracked state is required
    assert_eq!(
        rule(0).matches.get(Field::CtState).unwrap().ranges(),
        [(1, 3)]
    );
    assert_eq!(
        rule(0).matches.get(Field::CtOrigDstPort).unwrap().ranges(),
        [(25, 25)]
    );
    // ! --ctproto tcp: every other protocol, of a tracked packet
    assert_eq!(
        rule(2).matches.get(Field::CtProto).unwrap().ranges(),
        [(0, 5), (7, 255)]
    );
    assert_eq!(
        rule(3).matches.get(Field::CtOrigDstPort).unwrap().ranges(),
        [(0, 49), (61, 65535)]
    );
    let deciding: std::collections::BTreeSet<u32> = want.iter().map(|d| d.0).collect();
    assert!(deciding.len() >= 5, "rules barely decide: {deciding:?}");
}

#[test]
fn both_syntaxes_round_trip() {
    // nft types `ct original proto-dst` by a protocol written before it
    // (`ct protocol P` or the packet's `meta l4proto P`)
    let ipt = "*filter\n:INPUT DROP [0:0]\n\
        -A INPUT -m conntrack --ctproto 6 --ctorigdstport 25 -j ACCEPT\n\
        -A INPUT -m conntrack --ctstate NEW --ctproto 17 --ctorigdstport 53 -j ACCEPT\n\
        -A INPUT -m conntrack ! --ctproto tcp -j DROP\n\
        -A INPUT -p tcp -m conntrack ! --ctorigdstport 50:60 -j ACCEPT\n\
        COMMIT\n";
    let nft =
        "table ip filter {\n\tchain INPUT {\n\t\ttype filter hook input priority 0; policy drop;\n\
               \t\tct protocol tcp ct original proto-dst 25 accept\n\
               \t\tct state new ct protocol udp ct original proto-dst 53 accept\n\
               \t\tct protocol != 6 drop\n\
               \t\tmeta l4proto tcp ct original proto-dst != 50-60 accept\n\
               \t}\n}\n";
    let packets = packets();
    let from_ipt = parse(ipt, "c.ipt", Format::Auto).unwrap().ruleset;
    let from_nft = parse(nft, "c.nft", Format::Auto).unwrap().ruleset;
    let want = decisions(&from_ipt, &packets);
    assert_eq!(decisions(&from_nft, &packets), want);
    for rs in [&from_ipt, &from_nft] {
        for listing in [render::iptables_save(rs).unwrap(), render::nft(rs).unwrap()] {
            let again = parse(&listing, "again", Format::Auto)
                .unwrap_or_else(|e| panic!("{e:?}\n{listing}"))
                .ruleset;
            assert_eq!(decisions(&again, &packets), want, "{listing}");
        }
    }
    let listing = render::iptables_save(&from_ipt).unwrap();
    assert!(
        listing.contains("--ctproto 17 --ctorigdstport 53"),
        "{listing}"
    );
    assert!(listing.contains("! --ctorigdstport 50:60"), "{listing}");
    let listing = render::nft(&from_ipt).unwrap();
    assert!(
        listing.contains("ct protocol 6 ct original proto-dst 25"),
        "{listing}"
    );
    assert!(
        listing.contains("meta l4proto 6 ct original proto-dst != 50-60"),
        "{listing}"
    );
    // without a protocol nft cannot type the port: listing as nft refuses
    let e = render::nft(&parse(IPT, "c.ipt", Format::Auto).unwrap().ruleset).unwrap_err();
    assert!(e.message.contains("types 'ct original proto-dst'"), "{e}");
}

#[test]
fn refusals_name_the_construct() {
    for (rule, want) in [
        (
            "-m conntrack --ctstate INVALID,NEW --ctproto 6 -j DROP",
            "admitting INVALID or UNTRACKED",
        ),
        (
            "-m conntrack ! --ctstate NEW --ctorigdstport 25 -j DROP",
            "admitting INVALID or UNTRACKED",
        ),
        ("-m conntrack ! --ctproto 0 -j DROP", "'! --ctproto 0'"),
        (
            "-m conntrack --ctproto nosuch -j DROP",
            "expected a protocol",
        ),
        ("-m conntrack --ctorigdstport 9:8 -j DROP", "is empty"),
        (
            "-m conntrack --ctreplsrcport 53 -j DROP",
            "--ctreplsrcport is not supported",
        ),
        (
            "-m conntrack --ctdir REPLY -j DROP",
            "--ctdir is not supported",
        ),
        ("--ctproto 6 -j DROP", "needs -m conntrack"),
    ] {
        let text = format!("*filter\n:INPUT ACCEPT [0:0]\n-A INPUT {rule}\nCOMMIT\n");
        let e = match parse(&text, "t", Format::IptablesSave) {
            Ok(_) => panic!("{rule} parsed"),
            Err(e) => e[0].to_string(),
        };
        assert!(e.contains(want), "{rule}: {e}");
        assert!(e.starts_with("t:3:"), "{e}");
    }
    let nft = "table ip filter {\n\tchain c {\n\t\ttype filter hook input priority 0;\n\t\tct reply proto-src 53 drop\n\t}\n}\n";
    let e = parse(nft, "n", Format::Nft).unwrap_err()[0].to_string();
    assert!(e.contains("'ct reply proto-src' is not supported"), "{e}");
}

/// `--ctorigsrcport` / `ct original proto-src` (the corpus's
/// `diekmann_typical_home_user.rules`: DHCP, 68 → 67): the original
/// tuple's source port, not the packet's; evaluated by the linear engine
/// (the compiled engines refuse it: no key word yet).
#[test]
fn the_original_source_port_is_the_entrys() {
    let ipt = "*filter\n:INPUT DROP [0:0]\n\
        -A INPUT -m conntrack --ctstate NEW --ctproto 17 --ctorigsrcport 68 --ctorigdstport 67 -j ACCEPT\n\
        -A INPUT -p udp -m conntrack ! --ctorigsrcport 1000:2000 -j REJECT\n\
        COMMIT\n";
    let nft =
        "table ip filter {\n\tchain INPUT {\n\t\ttype filter hook input priority 0; policy drop;\n\
               \t\tct state new ct protocol udp ct original proto-src 68 ct original proto-dst 67 accept\n\
               \t\tmeta l4proto udp ct original proto-src != 1000-2000 reject\n\
               \t}\n}\n";
    let mut packets = Vec::new();
    for ct in [CtState::New, CtState::Established, CtState::Invalid] {
        for (sport, orig_sport) in [(68, 68), (68, 1500), (5000, 68), (5000, 1500), (5000, 7)] {
            let mut p = Packet::new(Family::V4, 1, 2, 17, sport, 67);
            p.ct_state = ct;
            if ct != CtState::Invalid {
                (p.ct_proto, p.ct_orig_dport, p.ct_orig_sport) = (17, 67, orig_sport);
            }
            packets.push(p);
        }
    }
    let from_ipt = parse(ipt, "c.ipt", Format::Auto).unwrap().ruleset;
    let from_nft = parse(nft, "c.nft", Format::Auto).unwrap().ruleset;
    let want = decisions(&from_ipt, &packets);
    // NEW with original source port 68 accepted whatever the packet's
    // port; 1500 is in the refused range; without an entry: the policy.
    let accepted: Vec<bool> = want.iter().map(|d| d.0 == 1).collect();
    assert_eq!(
        accepted,
        [
            true, false, true, false, false, false, false, false, false, false, false, false,
            false, false, false
        ]
    );
    let rejected: Vec<bool> = want.iter().map(|d| d.0 == 2).collect();
    assert_eq!(
        rejected,
        [
            false, false, false, false, true, true, false, true, false, true, false, false, false,
            false, false
        ]
    );
    assert_eq!(decisions(&from_nft, &packets), want);
    for rs in [&from_ipt, &from_nft] {
        for listing in [render::iptables_save(rs).unwrap(), render::nft(rs).unwrap()] {
            let again = parse(&listing, "again", Format::Auto)
                .unwrap_or_else(|e| panic!("{e:?}\n{listing}"))
                .ruleset;
            assert_eq!(decisions(&again, &packets), want, "{listing}");
        }
    }
    let listing = render::iptables_save(&from_ipt).unwrap();
    assert!(
        listing.contains("--ctproto 17 --ctorigsrcport 68 --ctorigdstport 67"),
        "{listing}"
    );
    let listing = render::nft(&from_ipt).unwrap();
    assert!(
        listing.contains("ct protocol 17 ct original proto-src 68 ct original proto-dst 67"),
        "{listing}"
    );
}
