//! The netfilter program (src/netfilter.rs) through BPF_PROG_TEST_RUN: each
//! hook walks its own chain's image, all images switch with one swap, and
//! the program loads as BPF_PROG_TYPE_NETFILTER and links at every hook.

mod common;

use std::net::{Ipv4Addr, Ipv6Addr};

use common::load_dataplane;
use parapet_dataplane::frame::Frame;
use parapet_dataplane::{Dataplane, KernelVerdict, LoadOptions, NfFamily, NfHook, Stat};

const A: Ipv4Addr = Ipv4Addr::new(10, 1, 0, 2);
const B: Ipv4Addr = Ipv4Addr::new(10, 2, 0, 2);

/// Rule ids: file positions across the whole file (conventions).
const RULES: &str = "*filter
:INPUT DROP [0:0]
:FORWARD ACCEPT [0:0]
:OUTPUT ACCEPT [0:0]
-A INPUT -p tcp --dport 22 -j ACCEPT
-A INPUT -p udp --dport 53 -j ACCEPT
-A FORWARD -p tcp --dport 80 -j DROP
-A FORWARD -p tcp --dport 81 -j REJECT
-A OUTPUT -p udp --dport 9 -j DROP
COMMIT
";

/// nft filter chains before and after routing (rule ids 1 and 2).
const PRE_POST: &str = "table inet f {
  chain pre { type filter hook prerouting priority mangle; policy accept; tcp dport 7 drop; }
  chain post { type filter hook postrouting priority 300; policy drop; udp dport 8 accept; }
}
";

fn chain_image(text: &str, chain: &str) -> Vec<u8> {
    let format = if text.starts_with("table") {
        parapet_parse::Format::Nft
    } else {
        parapet_parse::Format::IptablesSave
    };
    let rs = parapet_parse::parse(text, "test", format)
        .expect("test ruleset parses")
        .ruleset;
    let list = parapet_model::flatten(&rs, rs.select_chain(Some(chain)).unwrap()).unwrap();
    let (image, _) =
        parapet_compile::compile(&list, &parapet_compile::CompileOptions::default()).unwrap();
    image.to_bytes()
}

fn loaded(test: &str) -> Dataplane {
    let mut dp = load_dataplane(
        test,
        &LoadOptions {
            max_rules: 15,
            slot_pages: 4,
            debug: true,
        },
    );
    assert_eq!(dp.netfilter_note(), None, "{test}: netfilter program");
    for hook in [NfHook::Input, NfHook::Forward, NfHook::Output] {
        dp.write_hook_image(hook, &chain_image(RULES, hook.chain()))
            .unwrap();
    }
    dp.write_hook_image(NfHook::Prerouting, &chain_image(PRE_POST, "pre"))
        .unwrap();
    dp.write_hook_image(NfHook::Postrouting, &chain_image(PRE_POST, "post"))
        .unwrap();
    dp.swap().unwrap();
    dp
}

/// (passed, deciding rule, by image)
fn run(dp: &Dataplane, hook: NfHook, family: NfFamily, frame: &[u8]) -> (bool, u32, bool) {
    let r = dp.test_run_netfilter(hook, family, frame, 1).unwrap();
    let d = dp.last_decision().unwrap().expect("a decision");
    assert_eq!(
        r.passed,
        d.verdict == KernelVerdict::Accept,
        "return code follows the verdict"
    );
    (r.passed, d.rule_id, d.by_image)
}

fn tcp4(dport: u16) -> Vec<u8> {
    Frame::ipv4(A, B).tcp(40000, dport, 0x02).build()
}

fn udp4(dport: u16) -> Vec<u8> {
    Frame::ipv4(A, B).udp(40000, dport).build()
}

#[test]
#[ignore = "needs root"]
fn each_hook_walks_its_own_chain() {
    let dp = loaded("each_hook_walks_its_own_chain");
    let v4 = NfFamily::Ipv4;
    // INPUT: rules 1, 2, policy DROP
    assert_eq!(run(&dp, NfHook::Input, v4, &tcp4(22)), (true, 1, true));
    assert_eq!(run(&dp, NfHook::Input, v4, &udp4(53)), (true, 2, true));
    assert_eq!(run(&dp, NfHook::Input, v4, &tcp4(80)), (false, 0, true));
    // FORWARD: rules 3, 4 (REJECT: a drop, answered by user space),
    // policy ACCEPT
    assert_eq!(run(&dp, NfHook::Forward, v4, &tcp4(80)), (false, 3, true));
    assert_eq!(run(&dp, NfHook::Forward, v4, &tcp4(81)), (false, 4, true));
    assert_eq!(run(&dp, NfHook::Forward, v4, &tcp4(22)), (true, 0, true));
    // OUTPUT: rule 5, policy ACCEPT
    assert_eq!(run(&dp, NfHook::Output, v4, &udp4(9)), (false, 5, true));
    assert_eq!(run(&dp, NfHook::Output, v4, &tcp4(80)), (true, 0, true));
    // REJECT at a netfilter hook is queued for user space to answer
    assert_eq!(dp.stats().unwrap().get(Stat::NfRejectQueued), 1);
    // IPv6 at INPUT: no IPv4 rule matches; the policy decides
    let v6 = Frame::ipv6(Ipv6Addr::LOCALHOST, Ipv6Addr::LOCALHOST)
        .tcp(1, 22, 0x02)
        .build();
    assert_eq!(
        run(&dp, NfHook::Input, NfFamily::Ipv6, &v6),
        (false, 0, true)
    );
    // counters: one array by rule id serves every hook
    assert_eq!(dp.counter(3).unwrap().packets, 1);
    assert_eq!(dp.counter(5).unwrap().packets, 1);
}

#[test]
#[ignore = "needs root"]
fn prerouting_and_postrouting_walk_their_own_images() {
    let dp = loaded("prerouting_and_postrouting_walk_their_own_images");
    let v4 = NfFamily::Ipv4;
    // PREROUTING: rule 1 of PRE_POST, policy ACCEPT
    assert_eq!(run(&dp, NfHook::Prerouting, v4, &tcp4(7)), (false, 1, true));
    assert_eq!(run(&dp, NfHook::Prerouting, v4, &tcp4(22)), (true, 0, true));
    // POSTROUTING: rule 2, policy DROP
    assert_eq!(run(&dp, NfHook::Postrouting, v4, &udp4(8)), (true, 2, true));
    assert_eq!(
        run(&dp, NfHook::Postrouting, v4, &tcp4(7)),
        (false, 0, true)
    );
    // INPUT still walks its own chain (policy DROP, not PREROUTING's)
    assert_eq!(run(&dp, NfHook::Input, v4, &udp4(53)), (true, 2, true));
    assert_eq!(run(&dp, NfHook::Input, v4, &tcp4(7)), (false, 0, true));
    let s = dp.stats().unwrap();
    assert_eq!(s.get(Stat::NfPrerouting), 2);
    assert_eq!(s.get(Stat::NfPostrouting), 2);
    assert_eq!(s.get(Stat::NfInput), 2);
}

#[test]
#[ignore = "needs root"]
fn one_swap_switches_every_hook_and_keeps_the_unwritten_ones() {
    let mut dp = loaded("one_swap_switches_every_hook_and_keeps_the_unwritten_ones");
    let v4 = NfFamily::Ipv4;
    let other = "*filter
:INPUT ACCEPT [0:0]
:FORWARD DROP [0:0]
:OUTPUT ACCEPT [0:0]
-A INPUT -p tcp --dport 22 -j DROP
COMMIT
";
    dp.write_hook_image(NfHook::Input, &chain_image(other, "INPUT"))
        .unwrap();
    dp.write_hook_image(NfHook::Forward, &chain_image(other, "FORWARD"))
        .unwrap();
    // before the swap: the old images decide
    assert_eq!(run(&dp, NfHook::Input, v4, &tcp4(22)), (true, 1, true));
    dp.swap().unwrap();
    assert_eq!(run(&dp, NfHook::Input, v4, &tcp4(22)), (false, 1, true));
    assert_eq!(run(&dp, NfHook::Forward, v4, &tcp4(22)), (false, 0, true));
    // OUTPUT was not rewritten: still the first ruleset's chain, across
    // two more swaps (each flips the slot it reads)
    assert_eq!(run(&dp, NfHook::Output, v4, &udp4(9)), (false, 5, true));
    for _ in 0..2 {
        dp.write_hook_image(NfHook::Input, &chain_image(other, "INPUT"))
            .unwrap();
        dp.swap().unwrap();
        assert_eq!(run(&dp, NfHook::Output, v4, &udp4(9)), (false, 5, true));
        assert_eq!(run(&dp, NfHook::Forward, v4, &tcp4(22)), (false, 0, true));
    }
}

#[test]
#[ignore = "needs root"]
fn links_attach_at_every_hook_and_family_and_detach() {
    let mut dp = loaded("links_attach_at_every_hook_and_family_and_detach");
    let ns = parapet_testbed::Netns::create("nf-link").unwrap();
    let mut ids = Vec::new();
    ns.run_in(|| {
        for hook in NfHook::ALL {
            for family in NfFamily::ALL {
                let a = dp.attach_netfilter(hook, family, 0).unwrap();
                assert_eq!((a.hook, a.family), (hook, family));
                assert!(dp.netfilter_link(a.id).is_some());
                ids.push(a.id);
            }
        }
    });
    assert_eq!(ids.len(), 10);
    for id in ids {
        dp.detach(id).unwrap();
    }
}

/// The BPF walker at the netfilter hooks against the linear reference
/// engine (through the flattened chain) on random rulesets and the packets
/// parapet-gen aims at their rules: same deciding rule, verdict and
/// non-terminal rules. Test-run packets come in on loopback and have no
/// conntrack entry (INVALID), as the kernel's test run makes them.
#[test]
#[ignore = "needs root"]
fn netfilter_walker_agrees_with_the_linear_engine() {
    use parapet_compile::{compile, CompileOptions};
    use parapet_gen::{packets_for, random_ruleset, RandomSpec};

    let mut dp = load_dataplane(
        "netfilter_walker_agrees_with_the_linear_engine",
        &LoadOptions {
            debug: true,
            slot_pages: 64,
            max_rules: 4095,
        },
    );
    dp.set_ifname(1, "lo").unwrap();
    let (mut checked, mut by_rule, mut dropped) = (0, 0, 0);
    let mut saw_oif = false;
    for seed in 0..8u64 {
        let spec = RandomSpec {
            rules: 20 + (seed as usize * 41) % 160,
            ipv6: seed % 2 == 1,
            ..RandomSpec::default()
        };
        let rs = random_ruleset(seed, &spec);
        let list = parapet_model::flatten(&rs, rs.select_chain(None).unwrap()).unwrap();
        let (image, _) = compile(&list, &CompileOptions::default()).unwrap();
        let hook = NfHook::ALL[seed as usize % 3];
        dp.write_hook_image(hook, &image.to_bytes()).unwrap();
        dp.swap().unwrap();
        for (i, p) in packets_for(&rs, seed, 100).into_iter().enumerate() {
            let mut p = common::wire::wire_packet(p);
            p.ct_state = parapet_model::CtState::Invalid;
            let frame = common::wire::frame_of(&p);
            let family = match p.family {
                parapet_model::Family::V4 => NfFamily::Ipv4,
                parapet_model::Family::V6 => NfFamily::Ipv6,
            };
            let r = dp.test_run_netfilter(hook, family, &frame, 1).unwrap();
            let got = dp.last_decision().unwrap().unwrap();
            // The kernel's test run makes loopback the input or the output
            // interface by a rule of its own (not by the hook asked for):
            // the model packet takes the interfaces the program was given.
            let lo = |ifindex: u32| {
                if ifindex == 1 {
                    parapet_model::IfName::new("lo").unwrap()
                } else {
                    parapet_model::IfName(0)
                }
            };
            p.iif = lo(got.key.ifindex);
            p.oif = lo(got.key.oifindex);
            saw_oif |= got.key.oifindex != 0;
            let want = list.classify(&p, &[]);
            assert!(
                got.by_image,
                "seed {seed} packet {i} at {hook}: walker error {}",
                got.walk_err
            );
            let want_v = match want.verdict {
                parapet_model::Verdict::Accept => KernelVerdict::Accept,
                parapet_model::Verdict::Drop => KernelVerdict::Drop,
                parapet_model::Verdict::Reject { .. } => KernelVerdict::Reject,
            };
            let mut nonterm = want.nonterminal.clone();
            nonterm.truncate(16);
            assert_eq!(
                (got.rule_id, got.verdict, got.nonterminal),
                (want.rule_id, want_v, nonterm),
                "seed {seed} packet {i} at {hook}: {p:?}"
            );
            assert_eq!(
                r.passed,
                want_v == KernelVerdict::Accept,
                "only ACCEPT passes"
            );
            checked += 1;
            by_rule += usize::from(want.rule_id != 0);
            dropped += usize::from(!r.passed);
        }
    }
    assert!(
        by_rule > checked / 5,
        "{by_rule}/{checked} decided by a rule"
    );
    assert!(
        dropped > 0 && dropped < checked,
        "{dropped}/{checked} dropped"
    );
    assert!(saw_oif, "an output interface reached the walker");
}

/// Image maps of this process by their number of 4 KiB pages
/// (`/proc/self/fdinfo`: the kernel's own account of each map).
fn image_map_pages() -> Vec<u64> {
    let mut out = Vec::new();
    for e in std::fs::read_dir("/proc/self/fdinfo").unwrap().flatten() {
        let Ok(info) = std::fs::read_to_string(e.path()) else {
            continue;
        };
        let field = |name: &str| {
            info.lines()
                .find_map(|l| l.strip_prefix(name))
                .and_then(|v| v.trim().parse::<u64>().ok())
        };
        if field("map_type:") == Some(2) && field("value_size:") == Some(4096) {
            out.extend(field("max_entries:"));
        }
    }
    out
}

/// `Features::interface_only`: the image map holds the interface image's
/// two slots only, the netfilter program is not loaded (the hooks say
/// why), hook images and links are refused, XDP/tc's image still works.
#[test]
#[ignore = "needs root"]
fn interface_only_leaves_the_hook_images_out() {
    use parapet_dataplane::{Features, SetSizing, INTERFACE_ONLY_NOTE};
    parapet_testbed::require_root();
    // 3 pages a slot: no other test of this process sizes an image map so
    let opts = LoadOptions {
        max_rules: 15,
        slot_pages: 3,
        debug: true,
    };
    let features = Features {
        interface_only: true,
        ..Features::default()
    };
    let mut dp = Dataplane::load_with(&opts, &SetSizing::default(), &features).unwrap();
    assert!(!dp.hook_images());
    assert_eq!(dp.netfilter_note(), Some(INTERFACE_ONLY_NOTE));
    let pages = image_map_pages();
    assert!(pages.contains(&(2 * 3)), "{pages:?}");
    assert!(!pages.contains(&(2 * 6 * 3)), "{pages:?}");
    assert!(dp
        .write_hook_image(NfHook::Input, &chain_image(RULES, "INPUT"))
        .is_err());
    assert!(dp
        .attach_netfilter(NfHook::Input, NfFamily::Ipv4, 0)
        .is_err());
    dp.write_image(&chain_image(RULES, "INPUT")).unwrap();
    dp.swap().unwrap();
    // the interface image decides at XDP: INPUT's rule 1 accepts tcp/22
    let r = dp
        .test_run(parapet_dataplane::AttachPoint::Xdp, &tcp4(22), 0, 1)
        .unwrap();
    assert!(r.passed);
    assert_eq!(dp.last_decision().unwrap().map(|d| d.rule_id), Some(1));
    drop(dp);
    // and without the switch all six images are there
    let dp = Dataplane::load_with(&opts, &SetSizing::default(), &Features::default()).unwrap();
    assert!(dp.hook_images());
    assert!(image_map_pages().contains(&(2 * 6 * 3)));
}
