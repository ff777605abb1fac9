//! parapetd owns the kernel dataplane, end to end: a real `parapetd`
//! started inside a fresh network namespace, a random ruleset (parapet-gen,
//! its addresses moved into the test bed's subnet) with a set and the ban
//! set, applied and attached through the real `parapet` CLI, UDP and TCP
//! SYNs sent from the peer namespace over many addresses and ports. Every
//! packet must be delivered iff the linear engine accepts it, and `stats`
//! and `list --counters` must count exactly what was sent. Then: an apply
//! the kernel cannot take changes nothing; a ban drops its source at once
//! and an unban lets it through again; `kill -9` and a restart re-attach
//! and keep enforcing. At XDP and at tc. Needs root (`#[ignore = "needs root"]`).

mod common;

use common::daemon::{ok, parapet, parapetd, start_parapetd_in, stat_counters, stats};
use common::{host, in_netns, require_root, testbed, Bed, B_ADDR};
use parapet_model::{
    Action, Dir, Field, IfName, IntervalSet, LinearEngine, Matches, Packet, Rule, Ruleset,
    SetKeySpec, SetLookup, SetRef, Verdict,
};
use std::collections::{BTreeSet, HashMap};
use std::net::{Ipv4Addr, SocketAddrV4, TcpListener, UdpSocket};
use std::path::Path;
use std::process::{Child, Command};
use std::time::{Duration, Instant};

/// Peer addresses the packets come from (the first is the bed's own).
const SRCS: [[u8; 4]; 8] = [
    [10, 203, 0, 1],
    [10, 203, 0, 5],
    [10, 203, 0, 6],
    [10, 203, 0, 7],
    [10, 203, 0, 9],
    [10, 203, 0, 33],
    [10, 203, 0, 100],
    [10, 203, 0, 129],
];
/// Banned before the ruleset is applied, so `parapet-ban4` exists.
const FILLER_BAN: &str = "10.203.0.250";
/// Elements of `set0`.
const SET0: [&str; 2] = ["10.203.0.4/30", "10.203.0.100"];
const ROUNDS: usize = 2;

fn v4(a: [u8; 4]) -> u128 {
    u32::from_be_bytes(a) as u128
}

/// Small deterministic generator (the test needs no rand dependency).
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
    fn pick<T: Clone>(&mut self, v: &[T]) -> T {
        v[(self.next() % v.len() as u64) as usize].clone()
    }
}

fn maybe_negate(rng: &mut Rng, s: IntervalSet) -> IntervalSet {
    let n = s.complement(0xffff_ffff);
    if !n.is_empty() && rng.next().is_multiple_of(10) {
        n
    } else {
        s
    }
}

/// A parapet-gen ruleset whose address matches are moved into the test
/// bed's subnet (so they matter for the packets sent), with a first rule
/// that drops `parapet-ban4` sources. Its ctstate matches stay: parapetd
/// turns the conntrack lookup on for them, and every flow's first packet
/// is NEW in the kernel as in the model.
fn ruleset(seed: u64) -> Ruleset {
    let mut rs = parapet_gen::random_ruleset(
        seed,
        &parapet_gen::RandomSpec {
            rules: 60,
            user_chains: 3,
            ipv6: false,
            set_refs: 1,
            control_flow: true,
        },
    );
    let mut rng = Rng(seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1);
    let n = |a: [u8; 4]| v4(a);
    let srcs: Vec<IntervalSet> = SRCS
        .iter()
        .map(|a| IntervalSet::prefix(n(*a), 32, 32))
        .chain([
            IntervalSet::prefix(n([10, 203, 0, 4]), 30, 32),
            IntervalSet::prefix(n([10, 203, 0, 0]), 27, 32),
            IntervalSet::prefix(n([10, 203, 0, 0]), 25, 32),
            IntervalSet::prefix(n([10, 203, 0, 128]), 25, 32),
            IntervalSet::prefix(n([10, 203, 0, 0]), 24, 32),
            IntervalSet::range(n([10, 203, 0, 6]), n([10, 203, 0, 40])),
        ])
        .collect();
    let dsts = [
        IntervalSet::prefix(n(B_ADDR), 32, 32),
        IntervalSet::prefix(n(B_ADDR), 31, 32),
        IntervalSet::prefix(n([10, 203, 0, 0]), 24, 32),
        IntervalSet::prefix(n([10, 203, 1, 0]), 24, 32),
        IntervalSet::range(n([10, 203, 0, 1]), n([10, 203, 0, 3])),
    ];
    for t in &mut rs.tables {
        for c in &mut t.chains {
            for r in &mut c.rules {
                let mut m = Matches::any();
                for (f, s) in r.matches.iter() {
                    match f {
                        Field::SrcAddr => {
                            let v = rng.pick(&srcs);
                            m.constrain(*f, maybe_negate(&mut rng, v))
                        }
                        Field::DstAddr => {
                            let v = rng.pick(&dsts);
                            m.constrain(*f, maybe_negate(&mut rng, v))
                        }
                        _ => m.constrain(*f, s.clone()),
                    }
                }
                r.matches = m;
            }
        }
    }
    let ban = rs.set_refs.len() as u16;
    rs.set_refs.push(SetRef {
        name: "parapet-ban4".into(),
        key: SetKeySpec::Flags(vec![Dir::Src]),
    });
    let mut m = Matches::any();
    m.constrain(Field::Family, IntervalSet::point(4));
    m.constrain(Field::Set(ban), IntervalSet::point(1));
    let input = &mut rs.tables[0].chains[0];
    input
        .rules
        .insert(0, Rule::new(0, m, Action::Verdict(Verdict::Drop)));
    rs.renumber();
    rs
}

/// The sets as the daemon holds them: `set0` and the ban set, by source.
struct Sets {
    banned: Vec<u128>,
}

impl SetLookup for Sets {
    fn contains(&self, r: &SetRef, p: &Packet) -> bool {
        match r.name.as_str() {
            "set0" => {
                let s = p.src;
                (v4([10, 203, 0, 4])..=v4([10, 203, 0, 7])).contains(&s)
                    || s == v4([10, 203, 0, 100])
            }
            "parapet-ban4" => self.banned.contains(&p.src),
            _ => false,
        }
    }
}

/// One kind of packet the test sends.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
struct Flow {
    src: [u8; 4],
    sport: u16,
    dport: u16,
    tcp: bool,
}

impl Flow {
    fn packet(&self, vb: &str) -> Packet {
        let mut p = Packet::v4(
            v4(self.src) as u32,
            v4(B_ADDR) as u32,
            if self.tcp { 6 } else { 17 },
            self.sport,
            self.dport,
        );
        if self.tcp {
            p.tcp_flags = 0x02;
        }
        p.iif = IfName::new(vb).unwrap();
        p
    }
}

/// Destination ports at the edges of the rules' port ranges, source ports
/// likewise (a few), all sendable.
fn ports(rs: &Ruleset) -> (Vec<u16>, Vec<u16>) {
    let edges = |field: Field| -> Vec<u16> {
        let mut v = BTreeSet::new();
        for r in rs.rules() {
            if let Some(s) = r.matches.get(field) {
                for &(lo, hi) in s.ranges() {
                    for x in [lo, hi, lo.wrapping_sub(1), hi + 1] {
                        if (1..=65535).contains(&x) {
                            v.insert(x as u16);
                        }
                    }
                }
            }
        }
        v.into_iter().collect()
    };
    let thin = |v: Vec<u16>, n: usize| -> Vec<u16> {
        if v.len() <= n {
            return v;
        }
        (0..n).map(|i| v[i * v.len() / n]).collect()
    };
    let mut d = thin(edges(Field::DstPort), 18);
    d.extend([5353u16, 8081]);
    d.sort_unstable();
    d.dedup();
    let mut s = thin(edges(Field::SrcPort), 3);
    s.push(40000);
    s.sort_unstable();
    s.dedup();
    (d, s)
}

/// `parapet attach IFACE --hook HOOK` (native mode at XDP). On failure
/// (also when the machine cannot load the program or its conntrack
/// lookup) it stops the daemon and panics.
fn attach(sock: &Path, iface: &str, hook: &str, daemon: &mut std::process::Child) {
    let mut attach = vec!["attach", iface, "--hook", hook];
    if hook == "xdp" {
        attach.extend(["--mode", "native"]);
    }
    let o = parapet(sock, &attach);
    if o.status.success() {
        return;
    }
    let said = String::from_utf8_lossy(&o.stderr).to_string();
    let _ = daemon.kill();
    let _ = daemon.wait();
    panic!("parapet attach: {said}");
}

/// Starts parapetd in namespace `ns` and waits for its socket.
fn start_daemon(ns: &str, exe: &Path, sock: &Path, state: &Path, log: &Path) -> Child {
    start_parapetd_in(ns, exe, sock, state, log, &["--max-rules", "300"])
}

/// Sends every flow `rounds` times and returns how many of each arrived.
/// UDP: receivers on every destination port. TCP: a connect() that
/// completes means the SYN passed (the answer is not filtered).
fn exchange(bed: &Bed, flows: &[Flow], rounds: usize) -> HashMap<Flow, usize> {
    let udp: Vec<Flow> = flows.iter().copied().filter(|f| !f.tcp).collect();
    let tcp: Vec<Flow> = flows.iter().copied().filter(|f| f.tcp).collect();
    let dports: BTreeSet<u16> = udp.iter().map(|f| f.dport).collect();
    let tports: BTreeSet<u16> = tcp.iter().map(|f| f.dport).collect();
    let (receivers, listeners) = in_netns(&bed.b, move || {
        let r: Vec<UdpSocket> = dports
            .iter()
            .map(|p| {
                let s = UdpSocket::bind(("0.0.0.0", *p)).unwrap();
                s.set_nonblocking(true).unwrap();
                s
            })
            .collect();
        let l: Vec<TcpListener> = tports
            .iter()
            .map(|p| TcpListener::bind(("0.0.0.0", *p)).unwrap())
            .collect();
        (r, l)
    });
    let mut got: HashMap<Flow, usize> = HashMap::new();
    let tcp_got = in_netns(&bed.a, move || {
        let mut socks: HashMap<([u8; 4], u16), UdpSocket> = HashMap::new();
        for f in &udp {
            socks.entry((f.src, f.sport)).or_insert_with(|| {
                UdpSocket::bind(SocketAddrV4::new(Ipv4Addr::from(f.src), f.sport)).unwrap()
            });
        }
        for _ in 0..rounds {
            for (i, f) in udp.iter().enumerate() {
                socks[&(f.src, f.sport)]
                    .send_to(b"parapetd e2e", (Ipv4Addr::from(B_ADDR), f.dport))
                    .unwrap();
                if i % 8 == 7 {
                    std::thread::sleep(Duration::from_millis(1));
                }
            }
        }
        syn_all(&tcp)
    });
    // Everything sent has arrived or been dropped by now (the SYNs took
    // at least their 600 ms); a short grace for the last datagrams.
    std::thread::sleep(Duration::from_millis(100));
    let mut buf = [0u8; 64];
    for s in &receivers {
        let dport = s.local_addr().unwrap().port();
        while let Ok((_, from)) = s.recv_from(&mut buf) {
            let std::net::SocketAddr::V4(from) = from else {
                continue;
            };
            let f = Flow {
                src: from.ip().octets(),
                sport: from.port(),
                dport,
                tcp: false,
            };
            *got.entry(f).or_default() += 1;
        }
    }
    for f in tcp_got {
        *got.entry(f).or_default() += 1;
    }
    drop(listeners);
    got
}

/// One SYN per flow, all at once (a dropped SYN is retransmitted only
/// after a second; this gives up after 600 ms): the flows whose
/// handshake was answered. Each socket is closed with an RST (SO_LINGER 0).
fn syn_all(flows: &[Flow]) -> Vec<Flow> {
    let addr = |a: [u8; 4], p: u16| libc::sockaddr_in {
        sin_family: libc::AF_INET as u16,
        sin_port: p.to_be(),
        sin_addr: libc::in_addr {
            s_addr: u32::from_ne_bytes(a),
        },
        sin_zero: [0; 8],
    };
    let len = std::mem::size_of::<libc::sockaddr_in>() as u32;
    let one: libc::c_int = 1;
    let mut fds = Vec::new();
    for (i, f) in flows.iter().enumerate() {
        // SAFETY: plain socket calls on descriptors this function owns;
        // the pointers are to live locals of the right sizes.
        unsafe {
            let fd = libc::socket(libc::AF_INET, libc::SOCK_STREAM | libc::SOCK_NONBLOCK, 0);
            assert!(fd >= 0);
            libc::setsockopt(
                fd,
                libc::SOL_SOCKET,
                libc::SO_REUSEADDR,
                &one as *const _ as *const libc::c_void,
                4,
            );
            let local = addr(f.src, f.sport);
            assert_eq!(
                libc::bind(fd, &local as *const _ as *const libc::sockaddr, len),
                0,
                "bind {f:?}: {}",
                std::io::Error::last_os_error()
            );
            let remote = addr(B_ADDR, f.dport);
            libc::connect(fd, &remote as *const _ as *const libc::sockaddr, len);
            fds.push(fd);
        }
        if i % 8 == 7 {
            std::thread::sleep(Duration::from_millis(1));
        }
    }
    std::thread::sleep(Duration::from_millis(600));
    let mut ok = Vec::new();
    for (f, fd) in flows.iter().zip(fds) {
        // SAFETY: as above.
        unsafe {
            let mut pfd = libc::pollfd {
                fd,
                events: libc::POLLOUT,
                revents: 0,
            };
            let n = libc::poll(&mut pfd, 1, 0);
            let mut err: libc::c_int = 0;
            let mut elen = 4u32;
            libc::getsockopt(
                fd,
                libc::SOL_SOCKET,
                libc::SO_ERROR,
                &mut err as *mut _ as *mut libc::c_void,
                &mut elen,
            );
            if n == 1 && err == 0 {
                ok.push(*f);
            }
            let linger = libc::linger {
                l_onoff: 1,
                l_linger: 0,
            };
            libc::setsockopt(
                fd,
                libc::SOL_SOCKET,
                libc::SO_LINGER,
                &linger as *const _ as *const libc::c_void,
                std::mem::size_of::<libc::linger>() as u32,
            );
            libc::close(fd);
        }
    }
    ok
}

fn expect(
    rs: &Ruleset,
    vb: &str,
    flows: &[Flow],
    banned: &[u128],
) -> HashMap<Flow, parapet_model::Decision> {
    let linear = LinearEngine::new(rs, rs.select_chain(None).unwrap()).unwrap();
    let sets = Sets {
        banned: banned.to_vec(),
    };
    flows
        .iter()
        .map(|f| (*f, linear.classify(&f.packet(vb), &sets).unwrap()))
        .collect()
}

/// Delivered exactly when the linear engine accepts.
fn check_delivery(
    what: &str,
    want: &HashMap<Flow, parapet_model::Decision>,
    got: &HashMap<Flow, usize>,
    flows: &[Flow],
    rounds: usize,
) {
    let mut wrong = Vec::new();
    for f in flows {
        let d = &want[f];
        let n = got.get(f).copied().unwrap_or(0);
        let per = if f.tcp { 1 } else { rounds };
        let should = if d.verdict == Verdict::Accept { per } else { 0 };
        if n != should {
            wrong.push(format!(
                "{f:?}: rule {} {:?}, delivered {n} of {per}",
                d.rule_id, d.verdict
            ));
        }
    }
    assert!(
        wrong.is_empty(),
        "{what}: {} of {} flows wrong:\n{}",
        wrong.len(),
        flows.len(),
        wrong.join("\n")
    );
}

/// What each rule's counter must read after the UDP flows went `rounds`
/// times and every TCP flow once: the deciding rule and every non-terminal
/// rule on the way count each packet.
fn want_counters(
    want: &HashMap<Flow, parapet_model::Decision>,
    rounds: usize,
) -> HashMap<u32, u64> {
    let mut c: HashMap<u32, u64> = HashMap::new();
    for (f, d) in want {
        let k = if f.tcp { 1 } else { rounds as u64 };
        *c.entry(d.rule_id).or_default() += k;
        for r in &d.nonterminal {
            *c.entry(*r).or_default() += k;
        }
    }
    c.retain(|_, v| *v > 0);
    c
}

fn scenario(hook: &str) {
    require_root();
    let extra: Vec<[u8; 4]> = SRCS[1..].to_vec();
    let bed = testbed(&format!("d{}", &hook[..1]), &extra);
    let dir = tempfile::tempdir().unwrap();
    let (sock, state, log) = (
        dir.path().join("s"),
        dir.path().join("state"),
        dir.path().join("parapetd.log"),
    );
    // A seed whose ruleset both passes and drops the test's traffic ...
    let (seed, rs, text, flows) = (1u64..)
        .take(50)
        .find_map(|seed| {
            let model = ruleset(seed + if hook == "tc" { 100 } else { 0 });
            let text = parapet_parse::render::iptables_save(&model)
                .map_err(|e| eprintln!("render: {e}"))
                .ok()?;
            let rs = parapet_parse::parse(&text, "gen.rules", parapet_parse::Format::Auto)
                .map_err(|e| eprintln!("parse: {e:?}"))
                .ok()?
                .ruleset;
            let (dports, sports) = ports(&rs);
            let mut flows = Vec::new();
            for src in SRCS {
                for &sport in &sports {
                    for &dport in &dports {
                        for tcp in [false, true] {
                            // TCP for a third of the flows keeps the test short.
                            if !tcp
                                || (dport as usize + sport as usize + src[3] as usize)
                                    .is_multiple_of(3)
                            {
                                flows.push(Flow {
                                    src,
                                    sport,
                                    dport,
                                    tcp,
                                });
                            }
                        }
                    }
                }
            }
            let w = expect(&rs, &bed.vb, &flows, &[]);
            let pass = w.values().filter(|d| d.verdict == Verdict::Accept).count();
            // ... and reads ctstate, so the kernel's conntrack lookup decides too
            let ct = parapet_dataplane::ruleset::needs_conntrack(&rs, rs.select_chain(None).ok()?);
            (ct && pass > flows.len() / 5 && pass < flows.len() * 4 / 5)
                .then_some((seed, rs, text, flows))
        })
        .expect("some seed passes and drops");
    eprintln!(
        "{hook}: seed {seed}, {} rules, {} flows ({} TCP)",
        rs.rule_count(),
        flows.len(),
        flows.iter().filter(|f| f.tcp).count()
    );
    let rules = dir.path().join("gen.rules");
    std::fs::write(&rules, &text).unwrap();
    let exe = parapetd(dir.path());
    let mut daemon = start_daemon(&bed.b, &exe, &sock, &state, &log);
    let rules_s = rules.to_str().unwrap();
    ok(&sock, &["set", "create", "set0", "hash:net"]);
    let mut add = vec!["set", "add", "set0"];
    add.extend(SET0);
    ok(&sock, &add);
    ok(&sock, &["ban", FILLER_BAN]);
    ok(&sock, &["apply", rules_s]);
    attach(&sock, &bed.vb, hook, &mut daemon);
    let banned0 = [v4([10, 203, 0, 250])];

    // 1. Exactly what the linear engine accepts is delivered, and counted.
    let want = expect(&rs, &bed.vb, &flows, &banned0);
    let got = exchange(&bed, &flows, ROUNDS);
    check_delivery(&format!("{hook}: applied"), &want, &got, &flows, ROUNDS);
    let s = stats(&sock);
    let sent = flows
        .iter()
        .map(|f| if f.tcp { 1 } else { ROUNDS as u64 })
        .sum::<u64>();
    let k = &s["dataplane"]["kernel"];
    let accepted_tcp = got.iter().filter(|(f, _)| f.tcp).count() as u64;
    let handshakes: Vec<Flow> = got.keys().copied().filter(|f| f.tcp).collect();
    // Each completed handshake adds the peer's ACK and its RST.
    assert_eq!(
        k["packets"].as_u64().unwrap(),
        sent + 2 * accepted_tcp,
        "{hook}: kernel packet count: {s}"
    );
    assert_eq!(k["image_errors"], 0, "{s}");
    assert_eq!(k["by_image"], k["packets"], "{s}");
    // Counters: every flow's decision, plus the ACK and RST of each
    // completed handshake, classified like any packet of an ESTABLISHED
    // connection (the conntrack lookup is on when the ruleset reads it).
    let ct_on = s["dataplane"]["conntrack"]["lookup"] == true;
    assert_eq!(
        ct_on,
        parapet_dataplane::ruleset::needs_conntrack(&rs, rs.select_chain(None).unwrap()),
        "{hook}: the lookup is on exactly when the ruleset reads ctstate: {s}"
    );
    assert_eq!(
        s["dataplane"]["conntrack"]["table"].is_string(),
        ct_on,
        "{hook}: the conntrack table exists exactly when the lookup is on: {s}"
    );
    let linear = LinearEngine::new(&rs, rs.select_chain(None).unwrap()).unwrap();
    let sets = Sets {
        banned: banned0.to_vec(),
    };
    let mut counted = want_counters(&want, ROUNDS);
    for f in got.keys().filter(|f| f.tcp) {
        for flags in [0x10u8, 0x04] {
            let mut p = f.packet(&bed.vb);
            p.tcp_flags = flags;
            if ct_on {
                p.ct_state = parapet_model::CtState::Established;
            }
            let d = linear.classify(&p, &sets).unwrap();
            *counted.entry(d.rule_id).or_default() += 1;
            for r in &d.nonterminal {
                *counted.entry(*r).or_default() += 1;
            }
        }
    }
    if k["nonterm_truncated"] == 0 {
        assert_eq!(stat_counters(&s), counted, "{hook}: per-rule counters");
    }
    // `list --counters` reads the same kernel counters.
    let listed = ok(&sock, &["list", "--counters"]);
    assert!(
        listed.contains(&format!("# attached to {} at {hook}", bed.vb)),
        "{listed}"
    );
    for line in listed.lines().filter(|l| l.starts_with("# rule ")) {
        let w: Vec<&str> = line.split_whitespace().collect();
        let (id, packets): (u32, u64) = (w[2].parse().unwrap(), w[4].parse().unwrap());
        assert_eq!(
            packets,
            counted.get(&id).copied().unwrap_or(0),
            "{hook}: list --counters rule {id}"
        );
    }
    let gen0 = s["dataplane"]["generation"].clone();

    // 2. A ruleset the kernel cannot take (rule ids beyond --max-rules)
    // changes nothing: not the kernel, not the daemon.
    let mut big = String::from("*filter\n:INPUT ACCEPT [0:0]\n");
    for p in 0..320 {
        big.push_str(&format!(
            "-A INPUT -p udp -m udp --dport {} -j ACCEPT\n",
            60000 + p
        ));
    }
    big.push_str("-A INPUT -j DROP\nCOMMIT\n");
    let big_path = dir.path().join("big.rules");
    std::fs::write(&big_path, big).unwrap();
    let o = parapet(&sock, &["apply", big_path.to_str().unwrap()]);
    let said = String::from_utf8_lossy(&o.stderr).to_string();
    assert!(
        !o.status.success(),
        "{hook}: an apply beyond --max-rules succeeded"
    );
    assert!(said.contains("--max-rules"), "{hook}: {said}");
    let o = parapet(&sock, &["apply", "--check", big_path.to_str().unwrap()]);
    assert!(
        !o.status.success(),
        "{hook}: apply --check ignores the kernel's size"
    );
    let broken = dir.path().join("broken.rules");
    std::fs::write(&broken, "*filter\n-A INPUT -j DROP\n-A\nCOMMIT\n").unwrap();
    assert!(!parapet(&sock, &["apply", broken.to_str().unwrap()])
        .status
        .success());
    let s = stats(&sock);
    assert_eq!(
        s["dataplane"]["generation"], gen0,
        "{hook}: kernel image changed"
    );
    assert_eq!(s["ruleset"], serde_json::Value::from(rules_s));
    let udp: Vec<Flow> = flows.iter().copied().filter(|f| !f.tcp).collect();
    let got = exchange(&bed, &udp, 1);
    check_delivery(
        &format!("{hook}: after refused applies"),
        &want,
        &got,
        &udp,
        1,
    );

    // 3. A ban drops its source from the acknowledgement on; an unban
    // lets it through again.
    let victim = *SRCS
        .iter()
        .max_by_key(|s| {
            udp.iter()
                .filter(|f| f.src == **s && want[f].verdict == Verdict::Accept)
                .count()
        })
        .unwrap();
    let vflows: Vec<Flow> = udp.iter().copied().filter(|f| f.src == victim).collect();
    let vs = Ipv4Addr::from(victim).to_string();
    ok(&sock, &["ban", &vs]);
    let banned1 = [banned0[0], v4(victim)];
    let want_b = expect(&rs, &bed.vb, &vflows, &banned1);
    assert!(want_b.values().all(|d| d.verdict != Verdict::Accept));
    let got = exchange(&bed, &vflows, 1);
    check_delivery(&format!("{hook}: banned {vs}"), &want_b, &got, &vflows, 1);
    ok(&sock, &["unban", &vs]);
    let got = exchange(&bed, &vflows, 1);
    check_delivery(&format!("{hook}: unbanned {vs}"), &want, &got, &vflows, 1);
    assert!(
        vflows.iter().any(|f| want[f].verdict == Verdict::Accept),
        "the victim has accepted flows"
    );
    // A ban with a timeout: enforced, then lifted by its expiry, and its
    // kernel entry freed by the reaper.
    let ban_elements = |s: &serde_json::Value| -> u64 {
        s["dataplane"]["sets"]
            .as_array()
            .unwrap()
            .iter()
            .find(|x| x["set"] == "parapet-ban4")
            .map_or(0, |x| x["elements"].as_u64().unwrap())
    };
    ok(&sock, &["ban", &vs, "--timeout", "2"]);
    let t_ban = Instant::now();
    assert_eq!(ban_elements(&stats(&sock)), 2, "{hook}: filler and victim");
    let got = exchange(&bed, &vflows, 1);
    if t_ban.elapsed() < Duration::from_millis(1900) {
        check_delivery(
            &format!("{hook}: banned {vs} for 2 s"),
            &want_b,
            &got,
            &vflows,
            1,
        );
    }
    std::thread::sleep(Duration::from_millis(2100).saturating_sub(t_ban.elapsed()));
    let got = exchange(&bed, &vflows, 1);
    check_delivery(
        &format!("{hook}: ban of {vs} expired"),
        &want,
        &got,
        &vflows,
        1,
    );
    let t0 = Instant::now();
    while ban_elements(&stats(&sock)) != 1 {
        assert!(
            t0.elapsed() < Duration::from_secs(10),
            "{hook}: the expired ban's kernel entry was not reaped"
        );
        std::thread::sleep(Duration::from_millis(100));
    }

    // 4. kill -9, restart: the program is loaded and attached again, and
    // enforces the same ruleset with the same sets.
    let _ = Command::new("kill")
        .args(["-9", &daemon.id().to_string()])
        .status();
    let _ = daemon.wait();
    // `ip netns exec` exec()s the daemon, so the child is parapetd itself.
    let mut daemon = start_daemon(&bed.b, &exe, &sock, &state, &log);
    let s = stats(&sock);
    let atts = s["dataplane"]["attachments"].as_array().unwrap();
    assert_eq!(atts.len(), 1, "{hook}: re-attached after restart: {s}");
    assert_eq!(atts[0]["iface"], serde_json::Value::from(bed.vb.clone()));
    assert_eq!(atts[0]["hook"], serde_json::Value::from(hook));
    // The TCP flows reuse step 1's tuples. A connection whose closing RST
    // reached the kernel is over, and a new SYN re-opens it (NEW); one
    // whose RST the ruleset dropped is still in the conntrack table, and
    // its new SYN is ESTABLISHED there, as in the kernel's own conntrack.
    let mut want4 = want.clone();
    if ct_on {
        for f in &handshakes {
            let mut rst = f.packet(&bed.vb);
            rst.tcp_flags = 0x04;
            rst.ct_state = parapet_model::CtState::Established;
            if linear.classify(&rst, &sets).unwrap().verdict != Verdict::Accept {
                let mut syn = f.packet(&bed.vb);
                syn.ct_state = parapet_model::CtState::Established;
                want4.insert(*f, linear.classify(&syn, &sets).unwrap());
            }
        }
    }
    let got = exchange(&bed, &flows, ROUNDS);
    check_delivery(
        &format!("{hook}: after kill -9 and restart"),
        &want4,
        &got,
        &flows,
        ROUNDS,
    );
    let said = std::fs::read_to_string(&log).unwrap_or_default();
    assert!(said.contains("re-attached to"), "{said}");

    // Detach: everything passes again.
    ok(&sock, &["detach", &bed.vb]);
    let s = stats(&sock);
    assert!(s["dataplane"]["attachments"].as_array().unwrap().is_empty());
    let got = exchange(&bed, &udp, 1);
    assert!(
        udp.iter().all(|f| got.get(f) == Some(&1)),
        "{hook}: after detach"
    );
    let _ = Command::new("kill").arg(daemon.id().to_string()).status();
    let _ = daemon.wait();
}

#[test]
#[ignore = "needs root"]
fn parapetd_at_xdp_enforces_exactly_what_the_linear_engine_accepts() {
    scenario("xdp");
}

#[test]
#[ignore = "needs root"]
fn parapetd_at_tc_enforces_exactly_what_the_linear_engine_accepts() {
    scenario("tc");
}

/// A host firewall through parapetd (`common::host`): policy DROP,
/// replies to the host's own connections accepted by `--ctstate
/// ESTABLISHED,RELATED`, one TCP and one UDP port rejected, probed with
/// real connections both ways; then the REJECT and conntrack statistics,
/// the conntrack table's life, and the lookup following the ruleset.
fn host_scenario(hook: &str) {
    require_root();
    let bed = testbed(&format!("h{}", &hook[..1]), &[]);
    let dir = tempfile::tempdir().unwrap();
    let (sock, state, log) = (
        dir.path().join("s"),
        dir.path().join("state"),
        dir.path().join("parapetd.log"),
    );
    let rules = dir.path().join("host.rules");
    std::fs::write(&rules, host::rules()).unwrap();
    let _peer = host::xdp_peer(&bed, dir.path(), hook)
        .unwrap_or_else(|e| panic!("cannot run XDP on the peer: {e}"));
    let exe = parapetd(dir.path());
    let mut daemon = start_daemon(&bed.b, &exe, &sock, &state, &log);
    ok(&sock, &["apply", rules.to_str().unwrap()]);
    attach(&sock, &bed.vb, hook, &mut daemon);
    let s = stats(&sock);
    assert_eq!(s["dataplane"]["conntrack"]["lookup"], true, "{s}");
    assert_eq!(
        s["dataplane"]["conntrack"]["table"], "inet parapetd_ct",
        "{s}"
    );
    assert!(host::nft_tables(&bed.b).contains("inet parapetd_ct"));

    host::probe(&bed, hook);
    let s = stats(&sock);
    let k = &s["dataplane"]["kernel"];
    assert_eq!(k["reject_sent"], 2, "{hook}: {s}");
    assert!(k["ct_found"].as_u64().unwrap() >= 4, "{hook}: {s}");
    let human = ok(&sock, &["stats"]);
    assert!(human.contains("\"reject_sent\":2"), "{human}");

    // Detached, the lookup's table goes; the lookup itself follows the
    // ruleset: one without ctstate switches it off.
    ok(&sock, &["detach", &bed.vb]);
    let s = stats(&sock);
    assert!(s["dataplane"]["conntrack"]["table"].is_null(), "{s}");
    assert!(!host::nft_tables(&bed.b).contains("parapetd_ct"));
    let plain = dir.path().join("plain.rules");
    std::fs::write(&plain, "*filter\n:INPUT ACCEPT [0:0]\nCOMMIT\n").unwrap();
    ok(&sock, &["apply", plain.to_str().unwrap()]);
    assert_eq!(stats(&sock)["dataplane"]["conntrack"]["lookup"], false);
    // A stopping parapetd leaves its pinned attachment enforcing, and the
    // table it reads with it; `parapetd --remove-pinned` deletes both.
    ok(&sock, &["apply", rules.to_str().unwrap()]);
    attach(&sock, &bed.vb, hook, &mut daemon);
    assert!(host::nft_tables(&bed.b).contains("inet parapetd_ct"));
    let _ = Command::new("kill").arg(daemon.id().to_string()).status();
    let _ = daemon.wait();
    assert!(
        host::nft_tables(&bed.b).contains("parapetd_ct"),
        "{hook}: the conntrack table went with parapetd while its program stays"
    );
    let o = Command::new("ip")
        .args(["netns", "exec", &bed.b])
        .arg(&exe)
        .arg("--state-dir")
        .arg(&state)
        .arg("--remove-pinned")
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert!(
        !host::nft_tables(&bed.b).contains("parapetd_ct"),
        "{hook}: --remove-pinned left the conntrack table"
    );
}

#[test]
#[ignore = "needs root"]
fn parapetd_host_firewall_at_xdp_tracks_and_rejects() {
    host_scenario("xdp");
}

#[test]
#[ignore = "needs root"]
fn parapetd_host_firewall_at_tc_tracks_and_rejects() {
    host_scenario("tc");
}
