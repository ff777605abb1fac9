//! The kernel is the oracle for the netfilter hooks: two twin topologies —
//! host L, a router R with forwarding on, host H — one with the ruleset in
//! `iptables-legacy` (`ip6tables-legacy`) in R, one with the same ruleset
//! applied to a real `parapetd` in R and attached without an interface
//! (INPUT, FORWARD and OUTPUT at their netfilter hooks). DNAT in
//! `nat PREROUTING` is left to the kernel in both. The same crafted UDP
//! packets — to R (INPUT), through R (FORWARD, also DNAT'ed and
//! conntrack replies), from R (OUTPUT) — must have the same fate
//! (delivered or dropped) and be counted by the same rules (rule ids: file
//! positions, 0 = the policy) in both twins. IPv4 and IPv6. Then parapetd
//! is killed with SIGKILL and restarted: it re-attaches at the hooks from its
//! journal and the packets meet the same fates again; `parapet detach`
//! without an interface removes the links. Needs root.

mod common;

use common::daemon::{ok, parapet, parapetd, stat_counters, stats};
use common::{in_netns, require_root};
use parapet_testbed::Netns;
use std::collections::BTreeMap;
use std::net::{IpAddr, SocketAddr, UdpSocket};
use std::path::Path;
use std::process::{Child, Stdio};
use std::time::{Duration, Instant};

/// How long a packet may take to arrive before it counts as dropped.
const WAIT: Duration = Duration::from_millis(300);

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Side {
    L,
    R,
    H,
}

/// The three namespaces of one twin.
struct Topo {
    l: Netns,
    r: Netns,
    h: Netns,
}

impl Topo {
    fn ns(&self, s: Side) -> &Netns {
        match s {
            Side::L => &self.l,
            Side::R => &self.r,
            Side::H => &self.h,
        }
    }
}

/// Addresses of one family: (L, R towards L, R towards H, H).
struct Addrs {
    l: &'static str,
    rl: &'static str,
    rh: &'static str,
    h: &'static str,
    len: u8,
    v6: bool,
}

const V4: Addrs = Addrs {
    l: "10.71.1.2",
    rl: "10.71.1.1",
    rh: "10.71.2.1",
    h: "10.71.2.2",
    len: 24,
    v6: false,
};
const V6: Addrs = Addrs {
    l: "fd71:1::2",
    rl: "fd71:1::1",
    rh: "fd71:2::1",
    h: "fd71:2::2",
    len: 64,
    v6: true,
};

fn sh(ns: &Netns, argv: &[&str]) {
    ns.exec(argv)
        .unwrap_or_else(|e| panic!("{} {argv:?}: {e}", ns.name()));
}

const MAC_L: &str = "02:71:00:00:00:01";
const MAC_RL: &str = "02:71:00:00:00:02";
const MAC_RH: &str = "02:71:00:00:00:03";
const MAC_H: &str = "02:71:00:00:00:04";

/// L -- R -- H, both families addressed, forwarding on in R. Static
/// neighbours and no duplicate address detection: no neighbour discovery
/// delays a probe (what ICMPv6 remains lands on rules the test ignores).
fn topo(tag: &str) -> Topo {
    let t = Topo {
        l: Netns::create(&format!("{tag}l")).unwrap(),
        r: Netns::create(&format!("{tag}r")).unwrap(),
        h: Netns::create(&format!("{tag}h")).unwrap(),
    };
    for ns in [&t.l, &t.r, &t.h] {
        sh(ns, &["sysctl", "-qw", "net.ipv6.conf.default.accept_dad=0"]);
        sh(ns, &["sysctl", "-qw", "net.ipv6.conf.all.accept_dad=0"]);
    }
    t.l.ip(&[
        "link",
        "add",
        "lv",
        "address",
        MAC_L,
        "type",
        "veth",
        "peer",
        "name",
        "rl",
        "address",
        MAC_RL,
        "netns",
        t.r.name(),
    ])
    .unwrap();
    t.h.ip(&[
        "link",
        "add",
        "hv",
        "address",
        MAC_H,
        "type",
        "veth",
        "peer",
        "name",
        "rh",
        "address",
        MAC_RH,
        "netns",
        t.r.name(),
    ])
    .unwrap();
    for a in [&V4, &V6] {
        let fam = if a.v6 { "-6" } else { "-4" };
        let with = |x: &str| format!("{x}/{}", a.len);
        let dad: &[&str] = if a.v6 { &["nodad"] } else { &[] };
        for (ns, dev, addr) in [
            (&t.l, "lv", a.l),
            (&t.r, "rl", a.rl),
            (&t.r, "rh", a.rh),
            (&t.h, "hv", a.h),
        ] {
            let cidr = with(addr);
            let mut args = vec![fam, "addr", "add", &cidr, "dev", dev];
            args.extend_from_slice(dad);
            ns.ip(&args).unwrap();
        }
    }
    for (ns, dev) in [(&t.l, "lv"), (&t.r, "rl"), (&t.r, "rh"), (&t.h, "hv")] {
        ns.ip(&["link", "set", dev, "up"]).unwrap();
    }
    for a in [&V4, &V6] {
        let fam = if a.v6 { "-6" } else { "-4" };
        t.l.ip(&[fam, "route", "add", "default", "via", a.rl])
            .unwrap();
        t.h.ip(&[fam, "route", "add", "default", "via", a.rh])
            .unwrap();
        for (ns, addr, mac, dev) in [
            (&t.l, a.rl, MAC_RL, "lv"),
            (&t.r, a.l, MAC_L, "rl"),
            (&t.r, a.h, MAC_H, "rh"),
            (&t.h, a.rh, MAC_RH, "hv"),
        ] {
            ns.ip(&[
                fam,
                "neigh",
                "replace",
                addr,
                "lladdr",
                mac,
                "dev",
                dev,
                "nud",
                "permanent",
            ])
            .unwrap();
        }
    }
    sh(&t.r, &["sysctl", "-qw", "net.ipv4.ip_forward=1"]);
    sh(&t.r, &["sysctl", "-qw", "net.ipv6.conf.all.forwarding=1"]);
    t
}

/// One crafted packet: UDP from `from` (source port `sport`) to `to:port`,
/// expected (if delivered) at `at` on `at_port` (differs under DNAT).
/// `reply_of`: instead, the receiver of that earlier probe answers its
/// sender (a conntrack reply).
#[derive(Clone, Copy, Debug)]
struct Probe {
    from: Side,
    sport: u16,
    to: &'static str,
    port: u16,
    at: Side,
    at_port: u16,
    reply_of: Option<usize>,
}

const fn p(from: Side, sport: u16, to: &'static str, port: u16, at: Side) -> Probe {
    Probe {
        from,
        sport,
        to,
        port,
        at,
        at_port: port,
        reply_of: None,
    }
}

/// Rule ids of an iptables-save text: (table, chain, n-th rule of the
/// chain, 1-based) -> file position among all rules.
fn rule_ids(text: &str) -> BTreeMap<(String, String, usize), u32> {
    let mut out = BTreeMap::new();
    let mut table = String::new();
    let mut per: BTreeMap<(String, String), usize> = BTreeMap::new();
    let mut id = 0;
    for l in text.lines() {
        if let Some(t) = l.strip_prefix('*') {
            table = t.trim().to_string();
        } else if let Some(rest) = l.strip_prefix("-A ") {
            id += 1;
            let chain = rest.split_whitespace().next().unwrap().to_string();
            let n = per.entry((table.clone(), chain.clone())).or_insert(0);
            *n += 1;
            out.insert((table.clone(), chain, *n), id);
        }
    }
    out
}

/// The kernel twin's filter counters by rule id (policies as 0, summed).
fn kernel_counters(
    ns: &Netns,
    v6: bool,
    ids: &BTreeMap<(String, String, usize), u32>,
) -> BTreeMap<u32, u64> {
    let cmd = if v6 {
        "ip6tables-legacy"
    } else {
        "iptables-legacy"
    };
    let out = ns
        .exec(&[
            cmd,
            "-t",
            "filter",
            "-L",
            "-v",
            "-x",
            "-n",
            "--line-numbers",
        ])
        .unwrap();
    let mut m = BTreeMap::new();
    let mut chain = String::new();
    for l in out.lines() {
        let w: Vec<&str> = l.split_whitespace().collect();
        if w.first() == Some(&"Chain") {
            chain = w[1].to_string();
            // "Chain INPUT (policy DROP 3 packets, 180 bytes)"
            if w.get(2) == Some(&"(policy") {
                *m.entry(0).or_insert(0) += w[4].parse::<u64>().unwrap();
            }
        } else if let (Some(n), Some(pk)) = (
            w.first().and_then(|x| x.parse::<usize>().ok()),
            w.get(1).and_then(|x| x.parse::<u64>().ok()),
        ) {
            let id = ids[&("filter".to_string(), chain.clone(), n)];
            *m.entry(id).or_insert(0) += pk;
        }
    }
    m
}

fn parapet_counters(sock: &Path) -> BTreeMap<u32, u64> {
    stat_counters(&stats(sock)).into_iter().collect()
}

/// parapetd in `ns`, killed on drop.
struct Daemon(Child);

impl Drop for Daemon {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn start_daemon(ns: &Netns, dir: &Path, sock: &Path) -> Daemon {
    let log = std::fs::File::create(dir.join("parapetd.log")).unwrap();
    let child = ns
        .command(parapetd(dir))
        .arg("--socket")
        .arg(sock)
        .arg("--state-dir")
        .arg(dir.join("state"))
        .args(["--no-fsync", "--max-rules", "100"])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(log)
        .spawn()
        .unwrap();
    let d = Daemon(child);
    let t0 = Instant::now();
    while !parapet(sock, &["stats", "--json"]).status.success() {
        assert!(
            t0.elapsed() < Duration::from_secs(30),
            "parapetd did not come up: {}",
            std::fs::read_to_string(dir.join("parapetd.log")).unwrap_or_default()
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    d
}

fn bind(ns: &Netns, v6: bool, port: u16) -> UdpSocket {
    let any: IpAddr = if v6 {
        "::".parse().unwrap()
    } else {
        "0.0.0.0".parse().unwrap()
    };
    let s = in_netns(ns.name(), || UdpSocket::bind(SocketAddr::new(any, port)))
        .unwrap_or_else(|e| panic!("bind {port} in {}: {e}", ns.name()));
    s.set_read_timeout(Some(WAIT)).unwrap();
    s
}

/// Whether `s` receives `tag` within [`WAIT`] (other datagrams are
/// skipped); returns the sender.
fn received(s: &UdpSocket, tag: &[u8]) -> Option<SocketAddr> {
    let t0 = Instant::now();
    let mut buf = [0u8; 64];
    while t0.elapsed() < WAIT {
        match s.recv_from(&mut buf) {
            Ok((n, from)) if &buf[..n] == tag => return Some(from),
            Ok(_) => continue,
            Err(_) => return None,
        }
    }
    None
}

/// What became of a probe.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Fate {
    Delivered,
    Dropped,
    /// The sender's own OUTPUT hook dropped it: sendto() says EPERM.
    Refused,
}

/// (fate, counter deltas) per probe.
type Outcome = Vec<(Fate, BTreeMap<u32, u64>)>;

/// Sends every probe in order; `counters` reads the twin's counters.
fn run_probes(
    t: &Topo,
    v6: bool,
    probes: &[Probe],
    counters: &dyn Fn() -> BTreeMap<u32, u64>,
) -> Outcome {
    let mut out: Outcome = Vec::new();
    // per probe: sender socket, receiver socket, the sender as received
    let mut socks: Vec<(UdpSocket, UdpSocket, Option<SocketAddr>)> = Vec::new();
    let mut before = counters();
    for (i, pr) in probes.iter().enumerate() {
        let tag = format!("probe {i}");
        let delivered = if let Some(j) = pr.reply_of {
            // the receiver of probe j answers where the probe came from
            let (tx, rx, peer) = &socks[j];
            let peer = peer.unwrap_or_else(|| {
                panic!("probe {i} answers probe {j}, which was not delivered: {out:?}")
            });
            let fate = match rx.send_to(tag.as_bytes(), peer) {
                Err(_) => Fate::Refused,
                Ok(_) if received(tx, tag.as_bytes()).is_some() => Fate::Delivered,
                Ok(_) => Fate::Dropped,
            };
            socks.push((bind(t.ns(pr.from), v6, 0), bind(t.ns(pr.at), v6, 0), None));
            fate
        } else {
            let tx = bind(t.ns(pr.from), v6, pr.sport);
            let rx = bind(t.ns(pr.at), v6, pr.at_port);
            let to: SocketAddr = SocketAddr::new(pr.to.parse().unwrap(), pr.port);
            let sent = tx.send_to(tag.as_bytes(), to);
            let got = sent
                .as_ref()
                .ok()
                .and_then(|_| received(&rx, tag.as_bytes()));
            socks.push((tx, rx, got));
            match (sent, got) {
                (Err(e), _) => {
                    // EPERM: netfilter dropped it at the sender's OUTPUT
                    assert_eq!(e.raw_os_error(), Some(1), "probe {i}: {e}");
                    Fate::Refused
                }
                (Ok(_), Some(_)) => Fate::Delivered,
                (Ok(_), None) => Fate::Dropped,
            }
        };
        let after = counters();
        let delta: BTreeMap<u32, u64> = after
            .iter()
            .filter_map(|(id, n)| {
                let d = n - before.get(id).copied().unwrap_or(0);
                (d > 0).then_some((*id, d))
            })
            .collect();
        before = after;
        out.push((delivered, delta));
        // a late arrival would be counted with the next probe
        std::thread::sleep(Duration::from_millis(20));
    }
    out
}

/// Runs `probes` against the kernel twin and the parapet twin of `rules`
/// (`filter` is what parapet enforces; `nat` is loaded into the kernel in
/// both) and compares every probe; `noise` are rule ids excluded from the
/// comparison (ICMPv6 neighbour discovery lands on them at any time).
fn oracle(
    tag: &str,
    v6: bool,
    nat: &str,
    filter: &str,
    probes: &[Probe],
    noise: &[u32],
) -> Outcome {
    require_root();
    let restore = if v6 {
        "ip6tables-legacy-restore"
    } else {
        "iptables-legacy-restore"
    };
    let text = format!("{nat}{filter}");
    let ids = rule_ids(&text);
    let strip = |mut m: BTreeMap<u32, u64>| {
        m.retain(|id, _| !noise.contains(id));
        m
    };

    // the kernel twin
    let k = topo(&format!("{tag}k"));
    let mut c = k.r.command(restore).stdin(Stdio::piped()).spawn().unwrap();
    use std::io::Write;
    c.stdin.take().unwrap().write_all(text.as_bytes()).unwrap();
    assert!(c.wait().unwrap().success(), "{restore} of the kernel twin");
    let kernel = run_probes(&k, v6, probes, &|| strip(kernel_counters(&k.r, v6, &ids)));
    drop(k);

    // the parapet twin: nat in the kernel, filter in parapetd
    let p = topo(&format!("{tag}p"));
    if !nat.is_empty() {
        let mut c = p.r.command(restore).stdin(Stdio::piped()).spawn().unwrap();
        c.stdin.take().unwrap().write_all(nat.as_bytes()).unwrap();
        assert!(c.wait().unwrap().success(), "{restore} of the nat table");
    }
    let dir = tempfile::tempdir().unwrap();
    let sock = dir.path().join("parapetd.sock");
    let d = start_daemon(&p.r, dir.path(), &sock);
    let file = dir.path().join("rules");
    std::fs::write(&file, &text).unwrap();
    let mut apply = vec!["apply", file.to_str().unwrap()];
    if v6 {
        apply.extend(["--format", "ip6tables-save"]);
    }
    ok(&sock, &apply);
    let o = parapet(&sock, &["attach"]);
    assert!(
        o.status.success(),
        "parapet attach: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    let s = stats(&sock);
    let att = &s["dataplane"]["attachments"][0];
    assert_eq!(att["hook"], "netfilter", "{s}");
    assert_eq!(
        att["links"].as_array().map(Vec::len),
        Some(3),
        "one link per chain of the file's family: {s}"
    );
    let listed = ok(&sock, &["list", "--counters"]);
    let fam = if v6 { "ipv6" } else { "ipv4" };
    assert!(
        listed.contains(&format!(
            "# attached at the netfilter hooks: INPUT {fam} (priority "
        )),
        "{listed}"
    );
    let ours = run_probes(&p, v6, probes, &|| strip(parapet_counters(&sock)));
    let s = stats(&sock);
    let nf = &s["dataplane"]["netfilter"]["packets"];
    assert!(
        nf["input"].as_u64().unwrap() > 0
            && nf["forward"].as_u64().unwrap() > 0
            && nf["output"].as_u64().unwrap() > 0,
        "packets seen at every hook: {s}"
    );

    let mut wrong = Vec::new();
    for (i, (kp, pp)) in kernel.iter().zip(&ours).enumerate() {
        if kp != pp {
            wrong.push(format!(
                "probe {i} {:?}: kernel {kp:?}, parapet {pp:?}",
                probes[i]
            ));
        }
    }
    assert!(
        wrong.is_empty(),
        "{tag}: parapet differs from the kernel:\n{}",
        wrong.join("\n")
    );

    // kill -9 and a restart: the journal brings the attachment back, links
    // and all, and the same packets meet the same fate (the counting rules
    // may differ now: the first round's flows are in conntrack).
    drop(d);
    let _d = start_daemon(&p.r, dir.path(), &sock);
    let s = stats(&sock);
    let att = &s["dataplane"]["attachments"][0];
    assert_eq!(att["hook"], "netfilter", "re-attached after a restart: {s}");
    assert_eq!(att["links"].as_array().map(Vec::len), Some(3), "{s}");
    let again = run_probes(&p, v6, probes, &|| strip(parapet_counters(&sock)));
    let fates = |o: &Outcome| o.iter().map(|(f, _)| *f).collect::<Vec<_>>();
    assert_eq!(fates(&again), fates(&kernel), "{tag}: after a restart");

    // detach without an interface: the links go, nothing is filtered
    ok(&sock, &["detach"]);
    let s = stats(&sock);
    assert_eq!(
        s["dataplane"]["attachments"].as_array().map(Vec::len),
        Some(0),
        "{s}"
    );
    // probe 1 (to R, dropped by INPUT) now gets through, uncounted
    let open = run_probes(&p, v6, &probes[1..2], &|| strip(parapet_counters(&sock)));
    assert_eq!(kernel[1].0, Fate::Dropped);
    assert_eq!(
        open[0],
        (Fate::Delivered, BTreeMap::new()),
        "after the detach"
    );
    kernel
}

const NAT4: &str = "*nat
:PREROUTING ACCEPT [0:0]
:INPUT ACCEPT [0:0]
:OUTPUT ACCEPT [0:0]
:POSTROUTING ACCEPT [0:0]
-A PREROUTING -d 10.71.1.1/32 -p udp -m udp --dport 7000 -j DNAT --to-destination 10.71.2.2:7001
COMMIT
";

/// Rule 1 is the DNAT rule (the kernel's).
const FILTER4: &str = "*filter
:INPUT DROP [0:0]
:FORWARD DROP [0:0]
:OUTPUT ACCEPT [0:0]
:fwd_udp - [0:0]
-A INPUT -p udp -m udp --dport 6000 -j ACCEPT
-A INPUT -s 10.71.1.0/24 -p udp -m udp --dport 6001 -j DROP
-A INPUT -i rl -p udp -m udp --dport 6002 -j ACCEPT
-A INPUT -p udp -m udp --dport 7000 -j ACCEPT
-A FORWARD -m conntrack --ctstate RELATED,ESTABLISHED -j ACCEPT
-A FORWARD -d 10.71.2.2/32 -p udp -m udp --dport 7001 -j ACCEPT
-A FORWARD -i rl -o rh -p udp -m udp --dport 7100:7110 -j ACCEPT
-A FORWARD -o rh -p udp -m udp --dport 7111 -j DROP
-A FORWARD -p udp -j fwd_udp
-A OUTPUT -o rh -p udp -m udp --dport 7200 -j DROP
-A OUTPUT -p udp -m udp --dport 7201 -j DROP
-A fwd_udp -p udp -m udp --dport 7300 -j ACCEPT
-A fwd_udp -p udp -m udp --dport 7301 -j RETURN
COMMIT
";

#[test]
#[ignore = "needs root"]
fn ipv4_input_forward_output_as_the_kernel_with_dnat() {
    use Side::*;
    let (r, h) = (V4.rl, V4.h);
    let mut probes = vec![
        p(L, 40000, r, 6000, R),
        p(L, 40001, r, 6001, R),
        p(L, 40002, r, 6002, R),
        p(L, 40003, r, 6003, R),
        // DNAT'ed: judged by FORWARD as 10.71.2.2:7001, never by INPUT
        Probe {
            at: H,
            at_port: 7001,
            ..p(L, 40004, r, 7000, H)
        },
        p(L, 40005, h, 7100, H),
        p(L, 40007, h, 7111, H),
        p(L, 40008, h, 7300, H),
        p(L, 40009, h, 7301, H),
        p(L, 40010, h, 7302, H),
        p(R, 40011, h, 7200, H),
        p(R, 40012, h, 7201, H),
        p(R, 40013, h, 7202, H),
        p(H, 40014, V4.l, 7400, L),
    ];
    // the reply to the 7100 flow: ESTABLISHED at FORWARD
    probes.insert(
        6,
        Probe {
            reply_of: Some(5),
            ..p(H, 0, h, 0, L)
        },
    );
    let k = oracle("nfo4", false, NAT4, FILTER4, &probes, &[]);
    // the oracle itself: the bed works and the ruleset decides
    use Fate::{Delivered as D, Dropped as X, Refused as E};
    let fates: Vec<Fate> = k.iter().map(|(d, _)| *d).collect();
    assert_eq!(
        fates,
        vec![D, X, D, X, D, D, D, X, D, X, X, E, E, D, X],
        "the kernel twin's fates: {k:?}"
    );
    assert!(
        k.iter().all(|(_, c)| !c.contains_key(&5)),
        "INPUT never sees the pre-DNAT port"
    );
}

const FILTER6: &str = "*filter
:INPUT DROP [0:0]
:FORWARD DROP [0:0]
:OUTPUT ACCEPT [0:0]
-A INPUT -p ipv6-icmp -j ACCEPT
-A INPUT -p udp -m udp --dport 6000 -j ACCEPT
-A INPUT -s fd71:1::/64 -p udp -m udp --dport 6001 -j DROP
-A FORWARD -p ipv6-icmp -j ACCEPT
-A FORWARD -m conntrack --ctstate ESTABLISHED -j ACCEPT
-A FORWARD -i rl -o rh -p udp -m udp --dport 7100 -j ACCEPT
-A FORWARD -o rh -p udp -m udp --dport 7111 -j DROP
-A OUTPUT -p ipv6-icmp -j ACCEPT
-A OUTPUT -o rh -p udp -m udp --dport 7200 -j DROP
COMMIT
";

#[test]
#[ignore = "needs root"]
fn ipv6_input_forward_output_as_the_kernel() {
    use Side::*;
    let (r, h) = (V6.rl, V6.h);
    let probes = vec![
        p(L, 41000, r, 6000, R),
        p(L, 41001, r, 6001, R),
        p(L, 41002, r, 6002, R),
        p(L, 41003, h, 7100, H),
        Probe {
            reply_of: Some(3),
            ..p(H, 0, h, 0, L)
        },
        p(L, 41005, h, 7111, H),
        p(L, 41006, h, 7112, H),
        p(R, 41007, h, 7200, H),
        p(R, 41008, h, 7201, H),
        p(H, 41009, V6.l, 7400, L),
    ];
    let k = oracle("nfo6", true, "", FILTER6, &probes, &[1, 4, 8]);
    use Fate::{Delivered as D, Dropped as X, Refused as E};
    let fates: Vec<Fate> = k.iter().map(|(d, _)| *d).collect();
    assert_eq!(
        fates,
        vec![D, X, X, D, D, X, X, E, D, X],
        "the kernel twin's fates: {k:?}"
    );
}
