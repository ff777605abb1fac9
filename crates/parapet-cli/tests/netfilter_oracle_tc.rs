//! The tc placement (kernels without netfilter BPF links; forced here with
//! parapetd `--hook-placement tc`, this kernel has them) against the
//! kernel: a router bed with the ruleset in `iptables-legacy` and a twin
//! with parapetd attached without an interface at tc ingress/egress of
//! every interface (INPUT or FORWARD by a FIB lookup, OUTPUT for packets
//! with a socket). Where both placements agree every probe has the same
//! fate and the same counted rule; the documented differences
//! (docs/hooks.md, *Without netfilter BPF links*) are asserted as such:
//! a DNAT'ed packet is judged by INPUT with its pre-DNAT port, and an
//! OUTPUT drop is silent (the kernel's is EPERM to the sender). Then
//! `kill -9` and a restart: the pinned tc links are adopted, not
//! re-attached, and the fates stay. Needs root.

mod common;

use common::daemon::{ok, parapet, stats};
use common::nf_twins::{legacy_counters, load, parapet_counters, rule_ids, NAT4};
use common::router::{p, run_probes, start_daemon_pinned, tcp, topo, Fate, Probe, Side, V4};
use std::collections::BTreeMap;

/// Rule 1 is the DNAT rule (the kernel's). Rule ids: 2.. INPUT, FORWARD,
/// OUTPUT in file order.
const FILTER4: &str = "*filter
:INPUT DROP [0:0]
:FORWARD DROP [0:0]
:OUTPUT ACCEPT [0:0]
-A INPUT -p udp -m udp --dport 6000 -j ACCEPT
-A INPUT -s 10.71.1.0/24 -p udp -m udp --dport 6001 -j DROP
-A INPUT -i rl -p udp -m udp --dport 6002 -j ACCEPT
-A INPUT -p udp -m udp --dport 7000 -j ACCEPT
-A FORWARD -m conntrack --ctstate RELATED,ESTABLISHED -j ACCEPT
-A FORWARD -d 10.71.2.2/32 -p udp -m udp --dport 7001 -j ACCEPT
-A FORWARD -i rl -o rh -p udp -m udp --dport 7100:7110 -j ACCEPT
-A FORWARD -o rh -p udp -m udp --dport 7111 -j DROP
-A FORWARD -p tcp -m tcp --dport 7500 -j REJECT --reject-with tcp-reset
-A FORWARD -p udp -m udp --dport 7501 -j REJECT --reject-with icmp-port-unreachable
-A OUTPUT -o rh -p udp -m udp --dport 7200 -j DROP
-A OUTPUT -p udp -m udp --dport 7201 -j DROP
COMMIT
";

/// The INPUT rule `--dport 7000 -j ACCEPT` and the FORWARD rule `-d
/// 10.71.2.2 --dport 7001 -j ACCEPT` (rule ids of NAT4 + FILTER4).
const INPUT_7000: u32 = 5;
const FORWARD_7001: u32 = 7;

/// Removes a daemon's pins (links, maps, programs) on drop.
struct RemovePins(Option<std::path::PathBuf>);

impl Drop for RemovePins {
    fn drop(&mut self) {
        if let Some(p) = &self.0 {
            let _ = parapet_dataplane::remove_pins(p);
        }
    }
}

#[test]
#[ignore = "needs root"]
fn tc_placement_as_the_kernel_where_they_agree_and_the_documented_differences() {
    common::require_root();
    use Side::*;
    let (r, h) = (V4.rl, V4.h);
    let mut probes = vec![
        p(L, 40000, r, 6000, R),
        p(L, 40001, r, 6001, R),
        p(L, 40002, r, 6002, R),
        p(L, 40003, r, 6003, R),
        // DNAT'ed: the kernel's FORWARD sees 10.71.2.2:7001; the tc
        // placement's INPUT sees R:7000 (the difference, asserted below)
        Probe {
            at: H,
            at_port: 7001,
            ..p(L, 40004, r, 7000, H)
        },
        p(L, 40005, h, 7100, H),
        p(L, 40007, h, 7111, H),
        p(L, 40008, h, 7112, H),
        // OUTPUT drops: EPERM in the kernel, silent at tc egress
        p(R, 40011, h, 7200, H),
        p(R, 40012, h, 7201, H),
        p(R, 40013, h, 7202, H),
        p(H, 40014, V4.l, 7400, L),
        // REJECT at FORWARD: the sender in L gets the reset / ICMP error
        tcp(L, h, 7500, H),
        p(L, 40016, h, 7501, H),
    ];
    // the reply to the 7100 flow: ESTABLISHED at FORWARD
    probes.insert(
        6,
        Probe {
            reply_of: Some(5),
            ..p(H, 0, h, 0, L)
        },
    );
    let (dnat, out_drops) = (4usize, [9usize, 10]);
    let text = format!("{NAT4}{FILTER4}");
    let ids = rule_ids(&text);

    let k = topo("nftck");
    load(&k.r, &["iptables-legacy-restore"], &text);
    let kernel = run_probes(&k, false, &probes, &|| legacy_counters(&k.r, false, &ids));
    drop(k);

    let t = topo("nftcp");
    let dir = tempfile::tempdir().unwrap();
    let sock = dir.path().join("parapetd.sock");
    let flags = ["--hook-placement", "tc"];
    let daemon = start_daemon_pinned(&t.r, dir.path(), &sock, &flags);
    let file = dir.path().join("rules");
    std::fs::write(&file, &text).unwrap();
    ok(&sock, &["apply", file.to_str().unwrap()]);
    let o = parapet(&sock, &["attach"]);
    let said = format!(
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    );
    // the pins outlive the daemon (host bpffs): removed at the end, also
    // when an assertion fails
    let pin_dir = stats(&sock)["dataplane"]["pin_dir"]
        .as_str()
        .map(std::path::PathBuf::from);
    let _pins = RemovePins(pin_dir);
    assert!(o.status.success(), "attach: {said}");
    assert!(
        said.starts_with("attached in the tc placement") && said.contains("rl"),
        "attach names the placement: {said}"
    );
    assert!(said.contains("before DNAT"), "attach warns of DNAT: {said}");
    load(&t.r, &["iptables-legacy-restore"], NAT4);
    let again = ok(&sock, &["apply", file.to_str().unwrap()]);
    assert!(
        again.contains("# in the tc placement (INPUT, FORWARD, OUTPUT at tc ingress and egress): "),
        "apply names the placement: {again}"
    );
    let s = stats(&sock);
    let att = &s["dataplane"]["attachments"][0];
    assert_eq!(s["dataplane"]["netfilter"]["placement"], "tc", "{s}");
    assert_eq!(att["placement"], "tc", "{s}");
    assert_eq!(
        att["links"].as_array().map(Vec::len),
        Some(0),
        "no netfilter link: {s}"
    );
    let tc = att["tc_links"].as_array().cloned().unwrap_or_default();
    assert!(
        ["lo", "rl", "rh"].iter().all(|i| tc
            .iter()
            .any(|l| l["iface"] == *i && l["ingress"]["pinned"] == true)),
        "ingress and egress links on every interface, pinned: {s}"
    );
    let ours = run_probes(&t, false, &probes, &|| parapet_counters(&sock, &|id| id));
    let nf = &stats(&sock)["dataplane"]["netfilter"]["packets"];
    assert!(
        ["input", "forward", "output"]
            .iter()
            .all(|h| nf[h].as_u64().unwrap_or(0) > 0),
        "packets judged at every hook: {nf}"
    );

    let check = |ours: &common::router::Outcome, when: &str| {
        let mut wrong = Vec::new();
        for (i, (kp, op)) in kernel.iter().zip(ours).enumerate() {
            let expect = if i == dnat {
                // delivered in both, counted by INPUT's pre-DNAT rule
                assert_eq!(kp.1.get(&FORWARD_7001), Some(&1), "kernel: {kp:?}");
                (Fate::Delivered, BTreeMap::from([(INPUT_7000, 1)]))
            } else if out_drops.contains(&i) {
                assert_eq!(kp.0, Fate::Refused, "kernel: {kp:?}");
                (Fate::Dropped, kp.1.clone())
            } else {
                kp.clone()
            };
            if op != &expect {
                wrong.push(format!(
                    "probe {i} {:?}: expected {expect:?} (iptables-legacy {kp:?}), tc placement {op:?}",
                    probes[i]
                ));
            }
        }
        assert!(wrong.is_empty(), "{when}:\n{}", wrong.join("\n"));
    };
    check(&ours, "the tc placement");

    // kill -9 and a restart: the pinned links are taken over
    drop(daemon);
    let _d = start_daemon_pinned(&t.r, dir.path(), &sock, &flags);
    let s = stats(&sock);
    let att = &s["dataplane"]["attachments"][0];
    assert_eq!(att["placement"], "tc", "re-attached after a restart: {s}");
    assert!(
        att["note"].as_str().is_some_and(|n| n.contains("adopted")),
        "the pinned links adopted, not re-attached: {s}\n{}",
        std::fs::read_to_string(dir.path().join("parapetd.log")).unwrap_or_default()
    );
    // the flows of the first round are in conntrack now: only fates count
    let again = run_probes(&t, false, &probes, &|| parapet_counters(&sock, &|id| id));
    let fates = |o: &common::router::Outcome| o.iter().map(|(f, _)| *f).collect::<Vec<_>>();
    assert_eq!(fates(&again), fates(&ours), "after the restart: {again:?}");

    // the tc placement has no hook before or after routing: refused,
    // the running ruleset stays
    let pre = dir.path().join("pre.nft");
    std::fs::write(
        &pre,
        "table inet f {\n chain pre {\n  type filter hook prerouting priority 0; policy drop;\n }\n}\n",
    )
    .unwrap();
    let o = parapet(&sock, &["apply", pre.to_str().unwrap(), "--format", "nft"]);
    assert!(!o.status.success(), "a prerouting chain is refused at tc");
    assert!(
        String::from_utf8_lossy(&o.stderr).contains("PREROUTING"),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    ok(&sock, &["detach"]);
    let s = stats(&sock);
    assert_eq!(
        s["dataplane"]["attachments"].as_array().map(Vec::len),
        Some(0),
        "{s}"
    );
}
