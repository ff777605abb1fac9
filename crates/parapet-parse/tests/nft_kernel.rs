//! The kernel as the oracle for verdict maps: the same nft script is loaded
//! with `nft -f` into a network namespace this test creates, UDP datagrams
//! go to 127.0.0.1 on each port, and whether one arrives (accepted) or not
//! (dropped) must equal the linear engine's verdict for that packet.

use parapet_model::*;
use parapet_parse::*;
use parapet_testbed::Netns;
use std::net::UdpSocket;
use std::time::Duration;

const RULES: &str = "define web = 1005
table inet t {
\tmap m {
\t\ttype inet_service : verdict
\t\telements = { 1000 : jump j, 1001 : drop, $web : accept, 1006 : continue, 1007 : return }
\t}
\tchain j {
\t\tudp sport 40000 drop
\t}
\tchain input {
\t\ttype filter hook input priority 0; policy accept;
\t\tiifname \"lo\" udp dport vmap @m
\t\tiifname \"lo\" udp dport vmap { 1008 : drop, 1009 : goto j, 1002-1004 : accept }
\t\tiifname \"lo\" udp dport 1006-1007 drop
\t}
}
";

#[test]
#[ignore = "needs root"]
fn verdict_maps_agree_with_the_kernel() {
    parapet_testbed::require_root();
    let rs = parse(RULES, "vmap.nft", Format::Nft).unwrap().ruleset;
    let engine = LinearEngine::new(&rs, rs.select_chain(None).unwrap()).unwrap();
    let dir = std::env::temp_dir().join(format!("parapet-vmap-{}.nft", std::process::id()));
    std::fs::write(&dir, RULES).unwrap();
    let ns = Netns::create("vmap").unwrap();
    ns.exec(&["nft", "-f", dir.to_str().unwrap()]).unwrap();
    let ports: Vec<u16> = (999..=1010).collect();
    let arrived: Vec<bool> = ns.run_in(|| {
        ports
            .iter()
            .map(|&p| {
                let rx = UdpSocket::bind(("127.0.0.1", p)).unwrap();
                rx.set_read_timeout(Some(Duration::from_millis(200)))
                    .unwrap();
                let tx = UdpSocket::bind("127.0.0.1:40000").unwrap();
                tx.send_to(b"x", ("127.0.0.1", p)).unwrap();
                let mut buf = [0u8; 8];
                rx.recv_from(&mut buf).is_ok()
            })
            .collect()
    });
    let _ = std::fs::remove_file(&dir);
    for (p, kernel) in ports.iter().zip(arrived) {
        let mut pkt = Packet::v4(0x7f00_0001, 0x7f00_0001, 17, 40000, *p);
        pkt.iif = IfName::new("lo").unwrap();
        let d = engine.classify(&pkt, &NoSets).unwrap();
        assert_eq!(
            d.verdict == Verdict::Accept,
            kernel,
            "port {p}: parapet says {:?} (rule {}), the kernel {}",
            d.verdict,
            d.rule_id,
            if kernel { "accepted" } else { "dropped" }
        );
    }
}
