//! Integration tests that build a real test bed. They need root and network
//! namespaces (`#[ignore = "needs root"]`); run without them, they fail.

use parapet_peers::bench::measure_once;
use parapet_peers::filters;
use parapet_peers::testbed::{self, BedOptions, Testbed};
use parapet_peers::{GeneratorKind, RuleKind, RuleSpec};
use std::time::Duration;

fn bed() -> Testbed {
    parapet_testbed::require_root();
    Testbed::create(BedOptions::default())
        .unwrap_or_else(|e| panic!("cannot build a test bed: {e}"))
}

fn ns_exists(name: &str) -> bool {
    std::path::Path::new(&format!("/run/netns/{name}")).exists()
}

#[test]
#[ignore = "needs root"]
fn bed_is_deleted_on_drop_and_traffic_arrives() {
    let bed = bed();
    let (g, f) = (
        bed.ns(testbed::Side::Gen).to_string(),
        bed.ns(testbed::Side::Filter).to_string(),
    );
    assert!(ns_exists(&g) && ns_exists(&f));
    let s = measure_once(
        &bed,
        GeneratorKind::PacketMmap,
        64,
        Duration::from_millis(50),
        Duration::from_millis(200),
    )
    .expect("measurement");
    assert!(s.offered_pps > 1000.0, "{s:?}");
    assert!(
        s.delivered_pps > 0.0 && s.delivered_pps <= s.rx_if_pps * 1.05,
        "{s:?}"
    );
    drop(bed);
    assert!(!ns_exists(&g) && !ns_exists(&f), "namespaces left behind");
}

#[test]
#[ignore = "needs root"]
fn bed_is_deleted_on_panic() {
    parapet_testbed::require_root();
    let names = std::sync::Mutex::new(None);
    let r = std::panic::catch_unwind(|| {
        let bed = Testbed::create(BedOptions::default()).expect("bed");
        *names.lock().unwrap() = Some(bed.ns(testbed::Side::Gen).to_string());
        panic!("boom");
    });
    assert!(r.is_err());
    let name = names.lock().unwrap().clone();
    if let Some(g) = name {
        assert!(!ns_exists(&g), "namespace survived a panic");
    }
}

#[test]
#[ignore = "needs root"]
fn worst_case_ruleset_drops_nothing_and_filters_load() {
    let bed = bed();
    for name in ["iptables-nft", "nft", "nft-set"] {
        let f = filters::by_name(name).unwrap();
        if let Err(reason) = f.available() {
            panic!("{name}: {reason} (`make deps` installs it)");
        }
        let spec = RuleSpec {
            rules: 50,
            kind: RuleKind::WorstCase,
        };
        f.load(&bed, &spec).expect("load");
        // The flow must pass all 49 failing rules and be accepted: the
        // sink sees traffic.
        let s = measure_once(
            &bed,
            GeneratorKind::Sendmmsg,
            128,
            Duration::from_millis(50),
            Duration::from_millis(200),
        )
        .expect("measurement");
        assert!(s.delivered_pps > 100.0, "{name}: {s:?}");
        f.clear(&bed).expect("clear");
    }
    // Only this test writes rule files; remove the scratch directory.
    parapet_peers::remove_workdir();
}
