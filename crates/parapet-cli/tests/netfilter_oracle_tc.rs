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

use common::daemon::{detach_all, ok, parapet, stats};
use common::nf_twins::{assert_kernel, disagreements, legacy_twin, load, parapet_counters, NAT4};
use common::router::{
    run_probes, start_daemon_pinned, topo, Fate, Outcome, ProbeOutcome, RemovePins,
};
use common::router_case4::{self, DNAT_PROBE, FILTER4, FORWARD_7001, INPUT_7000, OUTPUT_DROPS};
use std::collections::BTreeMap;

#[test]
#[ignore = "needs root"]
fn tc_placement_as_the_kernel_where_they_agree_and_the_documented_differences() {
    common::require_root();
    // the IPv4 case of the netfilter-link oracle; at tc, the DNAT'ed
    // probe is judged by INPUT with its pre-DNAT port and the OUTPUT drops
    // are silent (the differences, asserted below)
    let probes = router_case4::probes();
    let text = format!("{NAT4}{FILTER4}");
    let kernel = legacy_twin("nftck", false, &text, &probes, &[]);
    assert_kernel(&kernel, &router_case4::kernel_fates(), &[]);

    let t = topo("nftcp");
    let dir = tempfile::tempdir().unwrap();
    // the pins outlive the daemon (host bpffs): removed at the end, also
    // when an assertion fails
    let pins = RemovePins::of(&t.r, dir.path());
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
    assert!(o.status.success(), "attach: {said}");
    pins.assert_daemon_pins_here(&sock);
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

    let check = |ours: &Outcome, when: &str| {
        let expect = |i: usize, kp: &ProbeOutcome| {
            if i == DNAT_PROBE {
                // delivered in both, counted by INPUT's pre-DNAT rule
                assert_eq!(kp.1.get(&FORWARD_7001), Some(&1), "kernel: {kp:?}");
                (Fate::Delivered, BTreeMap::from([(INPUT_7000, 1)]))
            } else if OUTPUT_DROPS.contains(&i) {
                assert_eq!(kp.0, Fate::Refused, "kernel: {kp:?}");
                (Fate::Dropped, kp.1.clone())
            } else {
                kp.clone()
            }
        };
        let wrong = disagreements("tc placement", &probes, &kernel, ours, &expect);
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
    let fates = |o: &Outcome| o.iter().map(|(f, _)| *f).collect::<Vec<_>>();
    assert_eq!(fates(&again), fates(&ours), "after the restart: {again:?}");

    // a prerouting chain at priority 0 (after the kernel's conntrack and
    // DNAT: tc ingress sees other addresses) is refused, the running
    // ruleset stays
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
    detach_all(&sock);
}
