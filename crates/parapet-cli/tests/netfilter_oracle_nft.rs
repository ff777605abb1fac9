//! nft rulesets the iptables twins cannot express, with `nft -f` as the
//! oracle: a router ruleset with only a `forward` chain (no input chain
//! for the interface hooks), and several base chains at one hook in two
//! tables of different families and priorities (`inet f` beside `ip g`),
//! which the kernel runs one after the other — a packet must be accepted
//! by each, a drop in any is final. The same text goes to `nft -f` in one
//! router bed and to parapetd (attached at the netfilter hooks) in a
//! twin; every probe, IPv4 and IPv6, must meet the same fate and be
//! counted by the same rules (each rule of the text carries a `counter`,
//! and each base chain ends with a counter-only rule). Needs root.

mod common;

use common::daemon::{ok, parapet, stat_counters, stats};
use common::router::{
    p, run_probes, start_daemon, start_daemon_pinned, start_daemon_with, topo, Addrs, Outcome,
    Probe, RemovePins, Side, V4, V6,
};
use parapet_testbed::require_root;
use std::collections::BTreeMap;
use std::io::Write;
use std::process::Stdio;

/// Where a rule is: (table, chain, n-th rule of the chain).
type Place = (String, String, usize);

/// The rules of an nft text written one per line (a chain's `type` line
/// apart), in file order: parapet's rule ids are their positions.
fn places(text: &str) -> Vec<Place> {
    let (mut table, mut chain, mut n) = (String::new(), String::new(), 0);
    let mut out = Vec::new();
    for l in text.lines().map(str::trim) {
        let w: Vec<&str> = l.split_whitespace().collect();
        match w.as_slice() {
            ["table", _, name, "{"] => table = name.to_string(),
            ["chain", name, "{"] => (chain, n) = (name.to_string(), 0),
            ["type", ..] | ["}"] | [] => {}
            _ => {
                n += 1;
                out.push((table.clone(), chain.clone(), n));
            }
        }
    }
    out
}

/// Rule ids of the text's ICMPv6 rules: neighbour discovery and MLD
/// land on them at any time, so they are left out of the comparison.
fn noise(text: &str) -> Vec<u32> {
    let rules = text.lines().map(str::trim).filter(|l| {
        let w: Vec<&str> = l.split_whitespace().collect();
        !matches!(
            w.as_slice(),
            ["table", _, _, "{"] | ["chain", _, "{"] | ["type", ..] | ["}"] | []
        )
    });
    rules
        .zip(1..)
        .filter(|(l, _)| l.contains("icmp"))
        .map(|(_, id)| id)
        .collect()
}

/// The nft twin's counters by place (`nft list ruleset`).
fn nft_counters(r: &parapet_testbed::Netns) -> BTreeMap<Place, u64> {
    let out = r.exec(&["nft", "list", "ruleset"]).unwrap();
    let (mut table, mut chain, mut n) = (String::new(), String::new(), 0);
    let mut m = BTreeMap::new();
    for l in out.lines().map(str::trim) {
        let w: Vec<&str> = l.split_whitespace().collect();
        match w.as_slice() {
            ["table", _, name, "{"] => table = name.to_string(),
            ["chain", name, "{"] => (chain, n) = (name.to_string(), 0),
            _ => {
                if let Some(at) = w.iter().position(|x| *x == "packets") {
                    n += 1;
                    let pk: u64 = w[at + 1].parse().unwrap();
                    if pk > 0 {
                        m.insert((table.clone(), chain.clone(), n), pk);
                    }
                }
            }
        }
    }
    m
}

fn nft_load(r: &parapet_testbed::Netns, text: &str) {
    let mut c = r
        .command("nft")
        .args(["-f", "-"])
        .stdin(Stdio::piped())
        .spawn()
        .unwrap();
    c.stdin.take().unwrap().write_all(text.as_bytes()).unwrap();
    assert!(c.wait().unwrap().success(), "nft -f:\n{text}");
}

/// Probes to R, through R both ways (with their replies) and from R, on
/// every port.
fn probes(a: &Addrs, ports: &[u16]) -> Vec<Probe> {
    use Side::*;
    let mut ps = Vec::new();
    let mut sport = 42000;
    for &port in ports {
        for (from, to, at) in [(L, a.rl, R), (L, a.h, H), (H, a.l, L), (R, a.h, H)] {
            ps.push(p(from, sport, to, port, at));
            sport += 7;
            if from != R {
                ps.push(Probe {
                    reply_of: Some(ps.len() - 1),
                    ..ps[ps.len() - 1]
                });
            }
        }
    }
    ps
}

/// Places as (table/chain#n) strings, for messages.
fn show(m: &BTreeMap<Place, u64>) -> String {
    m.iter()
        .map(|((t, c, n), k)| format!("{t}/{c}#{n}={k}"))
        .collect::<Vec<_>>()
        .join(" ")
}

/// Runs `text` through the nft twin and the parapetd twin, IPv4 and IPv6
/// probes on `ports`; asserts the same fate and counts probe by probe.
/// Returns the kernel's outcome per family and parapetd's stats.
fn twins(tag: &str, text: &str, ports: &[u16]) -> (Vec<Outcome>, serde_json::Value) {
    twins_with(tag, "", text, &|a| probes(a, ports))
}

/// [`twins`] with `nat` (an nft text, or "") loaded into both routers
/// with `nft -f` (left to the kernel in both) and the probes `probes`
/// makes for each family.
fn twins_with(
    tag: &str,
    nat: &str,
    text: &str,
    probes: &dyn Fn(&Addrs) -> Vec<Probe>,
) -> (Vec<Outcome>, serde_json::Value) {
    twins_at(false, tag, nat, text, probes)
}

/// parapetd's flags for the tc placement (this kernel has netfilter BPF
/// links: forced).
const TC_PLACEMENT: [&str; 2] = ["--hook-placement", "tc"];

/// [`twins_with`], parapetd attached at the netfilter hooks or, `tc`, in
/// the tc placement with pins: there the same probes then run while
/// parapetd is dead (`kill -9`: the pinned links and their stage map
/// judge alone) and after a restart that adopts the pins, and must meet
/// the same fates.
fn twins_at(
    tc: bool,
    tag: &str,
    nat: &str,
    text: &str,
    probes: &dyn Fn(&Addrs) -> Vec<Probe>,
) -> (Vec<Outcome>, serde_json::Value) {
    require_root();
    let at = places(text);
    let quiet = noise(text);
    let strip = |mut m: BTreeMap<u32, u64>| {
        m.retain(|id, k| *k > 0 && !quiet.contains(id));
        m
    };
    let fams = [V4, V6];

    let n = topo(&format!("{tag}n"));
    if !nat.is_empty() {
        nft_load(&n.r, nat);
    }
    nft_load(&n.r, text);
    let kernel: Vec<Outcome> = fams
        .iter()
        .map(|a| {
            let probes = probes(a);
            run_probes(&n, a.v6, &probes, &|| {
                strip(
                    nft_counters(&n.r)
                        .into_iter()
                        .map(|(place, k)| {
                            (at.iter().position(|x| *x == place).unwrap() as u32 + 1, k)
                        })
                        .collect(),
                )
            })
        })
        .collect();
    drop(n);

    let t = topo(&format!("{tag}p"));
    if !nat.is_empty() {
        nft_load(&t.r, nat);
    }
    let dir = tempfile::tempdir().unwrap();
    // the tc placement's pins outlive the daemon (host bpffs): removed at
    // the end, also when an assertion fails
    let pins = RemovePins::of(&t.r, dir.path());
    let sock = dir.path().join("parapetd.sock");
    let daemon = if tc {
        start_daemon_pinned(&t.r, dir.path(), &sock, &TC_PLACEMENT)
    } else {
        start_daemon(&t.r, dir.path(), &sock)
    };
    let file = dir.path().join("rules.nft");
    std::fs::write(&file, text).unwrap();
    ok(&sock, &["apply", file.to_str().unwrap(), "--format", "nft"]);
    let said = ok(&sock, &["attach"]);
    if tc {
        pins.assert_daemon_pins_here(&sock);
    }
    let placed = if tc {
        "attached in the tc placement"
    } else {
        "attached at the netfilter hooks: "
    };
    assert!(said.starts_with(placed), "{said}");
    let ours: Vec<Outcome> = fams
        .iter()
        .map(|a| {
            run_probes(&t, a.v6, &probes(a), &|| {
                let mut m: BTreeMap<u32, u64> = stat_counters(&stats(&sock)).into_iter().collect();
                // the policy (rule 0): nft keeps no count of it; the
                // counter-only rule closing each chain is compared instead
                m.remove(&0);
                strip(m)
            })
        })
        .collect();
    let s = stats(&sock);

    let mut wrong = Vec::new();
    for (a, (k, o)) in fams.iter().zip(kernel.iter().zip(&ours)) {
        let probes = probes(a);
        for (i, (kp, op)) in k.iter().zip(o).enumerate() {
            // a drop of this host's own packet after OUTPUT is silent at
            // tc egress (the kernel's is EPERM to the sender: documented)
            let silent = tc && kp.0 == common::router::Fate::Refused;
            let kp = &if silent {
                (common::router::Fate::Dropped, kp.1.clone())
            } else {
                kp.clone()
            };
            if kp != op {
                let by = |m: &BTreeMap<u32, u64>| {
                    show(
                        &m.iter()
                            .map(|(id, k)| (at[*id as usize - 1].clone(), *k))
                            .collect(),
                    )
                };
                wrong.push(format!(
                    "probe {i} {:?}: nft {:?} [{}], parapet {:?} [{}]",
                    probes[i],
                    kp.0,
                    by(&kp.1),
                    op.0,
                    by(&op.1)
                ));
            }
        }
    }
    assert!(
        wrong.is_empty(),
        "{tag}: the twins differ:\n{}\nruleset:\n{text}",
        wrong.join("\n")
    );
    if tc {
        let fates = |o: &[Outcome]| {
            o.iter()
                .map(|o| o.iter().map(|(f, _)| *f).collect::<Vec<_>>())
                .collect::<Vec<_>>()
        };
        let round = || -> Vec<Outcome> {
            fams.iter()
                .map(|a| run_probes(&t, a.v6, &probes(a), &BTreeMap::new))
                .collect()
        };
        drop(daemon);
        assert_eq!(
            fates(&round()),
            fates(&ours),
            "{tag}: while parapetd is dead"
        );
        let _d = start_daemon_pinned(&t.r, dir.path(), &sock, &TC_PLACEMENT);
        let note = stats(&sock)["dataplane"]["attachments"][0]["note"].clone();
        assert!(
            note.as_str().is_some_and(|n| n.contains("adopted")),
            "{tag}: the pinned links adopted: {note}"
        );
        assert_eq!(fates(&round()), fates(&ours), "{tag}: after a restart");
    }
    (kernel, s)
}

/// An nft router ruleset with only a forward chain.
const FORWARD_ONLY: &str = "table inet f {
	chain forward {
		type filter hook forward priority 0; policy drop;
		ct state established counter accept
		udp dport 6000 counter accept
		ip daddr 10.71.2.2 udp dport 6001 counter accept
		counter
	}
}
";

#[test]
#[ignore = "needs root"]
fn a_ruleset_with_only_a_forward_chain_runs_at_forward_as_in_the_kernel() {
    let (kernel, s) = twins("nfo", FORWARD_ONLY, &[6000, 6001, 7000]);
    // the oracle: forwarded probes are delivered and dropped; to R and
    // from R nothing is filtered
    use common::router::Fate::*;
    let fates: Vec<_> = kernel.iter().flatten().map(|(f, _)| *f).collect();
    assert!(
        fates.contains(&Delivered) && fates.contains(&Dropped),
        "{fates:?}"
    );
    let links = s["dataplane"]["attachments"][0]["links"]
        .as_array()
        .unwrap();
    assert_eq!(links.len(), 2, "FORWARD ipv4 and ipv6 only: {s}");
    assert!(links.iter().all(|l| l["chain"] == "FORWARD"), "{s}");
}

#[test]
#[ignore = "needs root"]
fn without_an_input_chain_attach_iface_is_refused_and_apply_keeps_it_so() {
    require_root();
    let t = topo("nfa");
    let dir = tempfile::tempdir().unwrap();
    let sock = dir.path().join("parapetd.sock");
    let _daemon = start_daemon(&t.r, dir.path(), &sock);
    let file = dir.path().join("rules.nft");
    std::fs::write(&file, FORWARD_ONLY).unwrap();
    // with an interface attached first, an input-less ruleset is refused
    let with_input = dir.path().join("input.nft");
    std::fs::write(
        &with_input,
        "table inet f {\n\tchain input {\n\t\ttype filter hook input priority 0; policy accept;\n\t}\n}\n",
    )
    .unwrap();
    ok(&sock, &["apply", with_input.to_str().unwrap()]);
    ok(&sock, &["attach", "rl", "--hook", "tc"]);
    let o = parapet(&sock, &["apply", file.to_str().unwrap()]);
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        !o.status.success() && err.contains("no chain for the interface hooks"),
        "{err}"
    );
    ok(&sock, &["detach", "rl"]);
    ok(&sock, &["apply", file.to_str().unwrap()]);
    for hook in ["xdp", "tc"] {
        let o = parapet(&sock, &["attach", "rl", "--hook", hook]);
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(
            !o.status.success()
                && err.contains("cannot attach to rl")
                && err.contains("no chain for the interface hooks")
                && err.contains("--chain"),
            "{hook}: {err}"
        );
    }
    ok(&sock, &["attach"]);
}

/// Two tables, two families, two base chains at each of INPUT and
/// FORWARD at different priorities. IPv4 meets `ip g`'s chain and `inet
/// f`'s in priority order; IPv6 only `inet f`'s.
const SHARED_HOOKS: &str = "table inet f {
	chain cf {
		type filter hook forward priority 0; policy accept;
		udp dport 6000 counter drop
		udp dport 6001 counter accept
		counter
	}
	chain ci {
		type filter hook input priority 0; policy drop;
		meta l4proto ipv6-icmp counter accept
		udp dport 6000 counter accept
		udp dport 6001 counter accept
		counter
	}
}
table ip g {
	chain cf {
		type filter hook forward priority -10; policy drop;
		ct state established counter accept
		udp dport 6000 counter accept
		udp dport 6001 counter accept
		udp dport 7000 counter drop
		counter
	}
	chain ci {
		type filter hook input priority 10; policy accept;
		udp dport 6001 counter drop
		counter
	}
}
";

#[test]
#[ignore = "needs root"]
fn several_base_chains_at_one_hook_run_in_priority_order_as_in_the_kernel() {
    let (kernel, s) = twins("nfs", SHARED_HOOKS, &[6000, 6001, 7000, 7001]);
    use common::router::Fate::*;
    let fates: Vec<_> = kernel.iter().flatten().map(|(f, _)| *f).collect();
    assert!(
        fates.contains(&Delivered) && fates.contains(&Dropped),
        "{fates:?}"
    );
    // the oracle itself: an IPv4 probe L -> H:6000 accepted by g/fwd and
    // then dropped by f/fwd, both rules counted
    let at = places(SHARED_HOOKS);
    let id = |t: &str, c: &str, n: usize| {
        at.iter()
            .position(|x| *x == (t.to_string(), c.to_string(), n))
            .unwrap() as u32
            + 1
    };
    let v4 = &kernel[0];
    let through = v4
        .iter()
        .find(|(_, m)| m.contains_key(&id("g", "cf", 2)) && m.contains_key(&id("f", "cf", 1)));
    assert!(
        matches!(through, Some((Dropped, _))),
        "an accept then a drop at FORWARD: {v4:?}"
    );
    // one link per family at FORWARD and INPUT, at the first priority each
    // family meets (or the nearest free one: the kernel refuses a BPF hook
    // beside another function at the same priority, docs/hooks.md)
    let mut links: Vec<(String, String, i64)> = s["dataplane"]["attachments"][0]["links"]
        .as_array()
        .unwrap()
        .iter()
        .map(|l| {
            (
                l["chain"].as_str().unwrap().to_string(),
                l["family"].as_str().unwrap().to_string(),
                l["priority"].as_i64().unwrap(),
            )
        })
        .collect();
    links.sort();
    let want = [
        ("FORWARD", "ipv4", -10),
        ("FORWARD", "ipv6", 0),
        ("INPUT", "ipv4", 0),
        ("INPUT", "ipv6", 0),
    ];
    assert_eq!(links.len(), want.len(), "{s}");
    for ((c, f, p), (wc, wf, wp)) in links.iter().zip(want) {
        assert!(c == wc && f == wf && (p - wp).abs() <= 2, "{links:?}: {s}");
    }
}

/// The kernel's NAT in both routers: DNAT of R:7000 and R:7002 (on `rl`)
/// to H:7001, masquerade of what leaves by `rh` to UDP ports 6003 and
/// 6004 (the source becomes R's address there).
const PRE_POST_NAT: &str = "table inet nat {
	chain pre {
		type nat hook prerouting priority dstnat; policy accept;
		ip daddr 10.71.1.1 udp dport { 7000, 7002 } dnat ip to 10.71.2.2:7001
		ip6 daddr fd71:1::1 udp dport { 7000, 7002 } dnat ip6 to [fd71:2::2]:7001
	}
	chain post {
		type nat hook postrouting priority srcnat; policy accept;
		oifname \"rh\" udp dport { 6003, 6004 } masquerade
	}
}
";

/// Filter chains before and after routing: `pre` at mangle priority
/// (-150) sees addresses before DNAT (-100), `post` at 300 sees sources
/// after masquerade (100). Each drop below matches only what the chain
/// sees at its own place: the DNAT'ed port 7000 (not 7001) at prerouting,
/// H:7001 only when addressed directly, the masqueraded source at
/// postrouting (not L's).
const PRE_POST: &str = "table inet f {
	chain pre {
		type filter hook prerouting priority mangle; policy accept;
		meta l4proto ipv6-icmp counter accept
		ct state established counter accept
		udp dport 7000 counter drop
		ip daddr 10.71.2.2 udp dport 7001 counter drop
		ip6 daddr fd71:2::2 udp dport 7001 counter drop
		iifname \"rl\" udp dport 6006 counter drop
		counter
	}
	chain post {
		type filter hook postrouting priority 300; policy accept;
		meta l4proto ipv6-icmp counter accept
		ip saddr 10.71.2.1 udp dport 6003 counter drop
		ip6 saddr fd71:2::1 udp dport 6003 counter drop
		ip saddr 10.71.1.2 udp dport 6004 counter drop
		ip6 saddr fd71:1::2 udp dport 6004 counter drop
		oifname \"rl\" udp dport 6005 counter drop
		counter
	}
}
";

/// Probes through the NAT of [`PRE_POST_NAT`], to R, through R and from
/// R, with the replies of the delivered ones.
fn pre_post_probes(a: &Addrs) -> Vec<Probe> {
    use Side::*;
    let dnat = |sport, port| Probe {
        at_port: 7001,
        ..p(L, sport, a.rl, port, H)
    };
    let mut ps = vec![
        dnat(42001, 7000),
        dnat(42002, 7002),
        p(L, 42003, a.h, 7001, H),
        p(L, 42004, a.h, 6003, H),
        p(L, 42005, a.h, 6004, H),
        p(H, 42006, a.l, 6004, L),
        p(H, 42007, a.l, 6005, L),
        p(R, 42008, a.l, 6005, L),
        p(R, 42009, a.h, 6003, H),
        p(R, 42010, a.h, 6004, H),
        p(L, 42011, a.rl, 6006, R),
        p(H, 42012, a.rh, 6006, R),
    ];
    for i in 0..ps.len() {
        if ps[i].from != R {
            ps.push(Probe {
                reply_of: Some(i),
                ..ps[i]
            });
        }
    }
    ps
}

#[test]
#[ignore = "needs root"]
fn prerouting_and_postrouting_chains_see_addresses_around_nat_as_in_the_kernel() {
    let (kernel, s) = twins_with("nfp", PRE_POST_NAT, PRE_POST, &pre_post_probes);
    // the oracle itself: prerouting sees the port before DNAT (R:7000
    // dropped, R:7002 delivered to H:7001 although H:7001 addressed
    // directly is dropped), postrouting the source after masquerade
    use common::router::Fate::*;
    for (fam, k) in ["ipv4", "ipv6"].iter().zip(&kernel) {
        let f: Vec<_> = k.iter().map(|(f, _)| *f).collect();
        assert_eq!(
            &f[..5],
            &[Dropped, Delivered, Dropped, Dropped, Delivered],
            "{fam}: {k:?}"
        );
        assert_eq!(f[6], Dropped, "{fam}: H -> L:6005 at postrouting: {k:?}");
        assert_eq!(f[10], Dropped, "{fam}: L -> R:6006 at prerouting: {k:?}");
        assert_eq!(f[11], Delivered, "{fam}: H -> R:6006 (other iif): {k:?}");
    }
    let mut links: Vec<(String, String)> = s["dataplane"]["attachments"][0]["links"]
        .as_array()
        .unwrap()
        .iter()
        .map(|l| {
            (
                l["chain"].as_str().unwrap().to_string(),
                l["family"].as_str().unwrap().to_string(),
            )
        })
        .collect();
    links.sort();
    let want: Vec<(String, String)> = [
        ("POSTROUTING", "ipv4"),
        ("POSTROUTING", "ipv6"),
        ("PREROUTING", "ipv4"),
        ("PREROUTING", "ipv6"),
    ]
    .iter()
    .map(|(c, f)| (c.to_string(), f.to_string()))
    .collect();
    assert_eq!(links, want, "{s}");
    let pk = &s["dataplane"]["netfilter"]["packets"];
    assert!(
        pk["prerouting"].as_u64() > Some(0) && pk["postrouting"].as_u64() > Some(0),
        "{s}"
    );
}

/// [`PRE_POST`] where the tc placement can enforce it: `pre` below
/// conntrack (raw, -300: the kernel's chain sees no conntrack entry, so
/// `ct state established` never matches there) and `post` above SNAT
/// (300), as they are at tc ingress and egress.
fn pre_post_raw() -> String {
    PRE_POST.replace("priority mangle", "priority raw")
}

#[test]
#[ignore = "needs root"]
fn prerouting_and_postrouting_chains_in_the_tc_placement_as_in_the_kernel() {
    let text = pre_post_raw();
    let (kernel, s) = twins_at(true, "nftpp", PRE_POST_NAT, &text, &pre_post_probes);
    // the oracle: the same fates as at mangle priority (the drops match
    // addresses before DNAT and after masquerade)
    use common::router::Fate::*;
    for (fam, k) in ["ipv4", "ipv6"].iter().zip(&kernel) {
        let f: Vec<_> = k.iter().map(|(f, _)| *f).collect();
        assert_eq!(
            &f[..5],
            &[Dropped, Delivered, Dropped, Dropped, Delivered],
            "{fam}: {k:?}"
        );
        assert_eq!(f[6], Dropped, "{fam}: H -> L:6005 at postrouting: {k:?}");
        assert_eq!(f[10], Dropped, "{fam}: L -> R:6006 at prerouting: {k:?}");
    }
    assert_eq!(s["dataplane"]["netfilter"]["placement"], "tc", "{s}");
    let pk = &s["dataplane"]["netfilter"]["packets"];
    assert!(
        pk["prerouting"].as_u64() > Some(0) && pk["postrouting"].as_u64() > Some(0),
        "{s}"
    );
}

/// nft `reject` in a prerouting chain (the kernel allows it there, not
/// at postrouting: that file is refused, `parapet-parse`'s
/// `reject_hooks_kernel.rs`): a TCP reset and an ICMP error, for packets
/// to R and through R.
const PRE_REJECT: &str = "table inet f {
	chain pre {
		type filter hook prerouting priority 0; policy accept;
		meta l4proto ipv6-icmp counter accept
		tcp dport 7500 counter reject with tcp reset
		udp dport 7501 counter reject
		counter
	}
}
";

#[test]
#[ignore = "needs root"]
fn reject_at_prerouting_answers_as_the_kernel_at_the_hooks_and_at_tc() {
    use common::router::tcp;
    use Side::*;
    let probes = |a: &Addrs| {
        vec![
            tcp(L, a.rl, 7500, R),
            tcp(L, a.h, 7500, H),
            p(L, 42101, a.rl, 7501, R),
            p(L, 42102, a.h, 7501, H),
            p(L, 42103, a.h, 7502, H),
        ]
    };
    let (kernel, s) = twins_with("nfrj", "", PRE_REJECT, &probes);
    // the tc placement answers in place (below conntrack: raw priority)
    let raw = PRE_REJECT.replace("priority 0", "priority raw");
    let (at_tc, _) = twins_at(true, "nfrjt", "", &raw, &probes);
    assert_eq!(at_tc, kernel, "the kernel at raw priority as at 0");
    // the oracle itself: every probe to 7500/7501 is refused to L by the
    // reset or the ICMP error, 7502 passes
    use common::router::Fate::*;
    for (fam, k) in ["ipv4", "ipv6"].iter().zip(&kernel) {
        let f: Vec<_> = k.iter().map(|(f, _)| *f).collect();
        assert_eq!(
            f,
            vec![Rejected, Rejected, Rejected, Rejected, Delivered],
            "{fam}: {k:?}"
        );
    }
    let sent = s["dataplane"]["netfilter"]["reject"]["sent"].as_u64();
    assert!(sent >= Some(8), "parapetd answered every REJECT: {s}");
}

/// `--no-hook-images`: no netfilter hook images, so `attach` without an
/// interface is refused with the reason (and `stats` says it), while the
/// interface hooks work as before.
#[test]
#[ignore = "needs root"]
fn without_hook_images_attach_at_the_hooks_is_refused_and_xdp_works() {
    require_root();
    let t = topo("nfi");
    let dir = tempfile::tempdir().unwrap();
    let sock = dir.path().join("parapetd.sock");
    let _daemon = start_daemon_with(&t.r, dir.path(), &sock, &["--no-hook-images"]);
    let file = dir.path().join("rules.nft");
    std::fs::write(&file, PRE_POST).unwrap();
    let with_input = dir.path().join("input.nft");
    std::fs::write(
        &with_input,
        "table inet f {\n\tchain input {\n\t\ttype filter hook input priority 0; policy accept;\n\t\tudp dport 9 drop\n\t}\n}\n",
    )
    .unwrap();
    ok(&sock, &["apply", with_input.to_str().unwrap()]);
    let o = parapet(&sock, &["attach"]);
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        !o.status.success() && err.contains("--no-hook-images"),
        "{err}"
    );
    ok(&sock, &["attach", "rl", "--hook", "xdp"]);
    let s = stats(&sock);
    let note = s["dataplane"]["netfilter"]["note"].as_str().unwrap_or("");
    assert!(
        s["dataplane"]["netfilter"]["available"] == false && note.contains("left out"),
        "{s}"
    );
    // a ruleset with chains only at the netfilter hooks' places still
    // applies (nothing is attached there); the interface chain is kept
    ok(&sock, &["apply", with_input.to_str().unwrap()]);
    let o = parapet(&sock, &["apply", file.to_str().unwrap()]);
    assert!(!o.status.success(), "no input chain while xdp is attached");
    ok(&sock, &["detach", "rl"]);
    ok(&sock, &["apply", file.to_str().unwrap()]);
}
