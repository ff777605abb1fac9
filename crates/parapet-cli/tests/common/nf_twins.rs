//! The kernel as the oracle for the netfilter hooks: one ruleset enforced
//! in four twin router beds ([`super::router`]) — by `iptables-legacy`, by
//! `nft` (the same ruleset as `parapet list --format nft` writes it, with a
//! `counter` added to every rule), by parapetd from the iptables-save text
//! and by parapetd from the nft text — with the same `nat PREROUTING` left
//! to the kernel in each. Every probe must have the same fate and be
//! counted by the same rule (iptables-save rule ids, 0 = the policy) in
//! all four.

use super::daemon::{ok, stat_counters, stats};
use super::router::{
    applied_and_attached, run_probes, topo, AttachedDaemon, Daemon, Fate, Outcome, Probe,
    ProbeOutcome, Topo,
};
use parapet_testbed::{require_root, Netns};
use std::collections::BTreeMap;
use std::io::Write;
use std::path::Path;
use std::process::{Command, Stdio};

/// The ruleset of one oracle run.
pub struct Case<'a> {
    /// Names the namespaces (short: interface-name limits apply).
    pub tag: &'a str,
    pub v6: bool,
    /// iptables-save `*nat` table (or ""), left to the kernel everywhere.
    pub nat: &'a str,
    /// The same nat as an nft table (or ""), for the nft twins.
    pub nat_nft: &'a str,
    /// iptables-save `*filter` table: what is compared.
    pub filter: &'a str,
    pub probes: &'a [Probe],
    /// Rule ids left out of the comparison (ICMPv6 noise lands on them).
    pub noise: &'a [u32],
}

impl<'a> Case<'a> {
    /// An IPv4 case with the router bed's DNAT ([`NAT4`]) in the kernel.
    pub fn dnat4(tag: &'a str, filter: &'a str, probes: &'a [Probe]) -> Self {
        Case {
            tag,
            v6: false,
            nat: NAT4,
            nat_nft: NAT4_NFT,
            filter,
            probes,
            noise: &[],
        }
    }
}

/// The router bed's DNAT (R:7000 to H:7001), left to the kernel.
pub const NAT4: &str = "*nat
:PREROUTING ACCEPT [0:0]
:INPUT ACCEPT [0:0]
:OUTPUT ACCEPT [0:0]
:POSTROUTING ACCEPT [0:0]
-A PREROUTING -d 10.71.1.1/32 -p udp -m udp --dport 7000 -j DNAT --to-destination 10.71.2.2:7001
COMMIT
";

/// [`NAT4`] as an nft table.
pub const NAT4_NFT: &str = "table ip nat {
\tchain PREROUTING {
\t\ttype nat hook prerouting priority dstnat; policy accept;
\t\tip daddr 10.71.1.1 udp dport 7000 dnat to 10.71.2.2:7001
\t}
}
";

/// Rule ids of an iptables-save text: (table, chain, n-th rule of the
/// chain, 1-based) -> file position among all rules.
pub fn rule_ids(text: &str) -> BTreeMap<(String, String, usize), u32> {
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

/// The legacy twin's filter counters by rule id (policies as 0, summed).
pub fn legacy_counters(
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

/// Marks the policy counter rule appended to each nft base chain.
const POLICY: &str = "comment \"policy\"";

/// The nft text of an iptables-save filter table, as parapet writes it.
pub fn nft_of(filter: &str, v6: bool) -> String {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("filter");
    std::fs::write(&file, filter).unwrap();
    let fmt = if v6 {
        "ip6tables-save"
    } else {
        "iptables-save"
    };
    let o = Command::new(env!("CARGO_BIN_EXE_parapet"))
        .args(["list", file.to_str().unwrap(), "--format", "nft"])
        .args(["--input-format", fmt])
        .output()
        .unwrap();
    assert!(
        o.status.success(),
        "parapet list --format nft: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    String::from_utf8(o.stdout).unwrap()
}

/// `nft` twin's text: a `counter` before every rule's verdict, and a
/// verdict-less counter rule closing each base chain (the policy's count:
/// nft keeps none).
pub fn with_counters(nft: &str) -> String {
    let mut out = String::new();
    let (mut in_chain, mut base) = (false, false);
    for l in nft.lines() {
        let t = l.trim();
        if t.starts_with("chain ") {
            (in_chain, base) = (true, false);
        } else if in_chain && t.starts_with("type ") {
            base = true;
        } else if in_chain && t == "}" {
            if base {
                out.push_str(&format!("\t\tcounter {POLICY}\n"));
            }
            in_chain = false;
        } else if in_chain && !t.is_empty() {
            let w: Vec<&str> = t.split_whitespace().collect();
            let n = w.len();
            let cut = if let Some(at) = w.iter().position(|x| *x == "reject") {
                at
            } else if n >= 2 && matches!(w[n - 2], "jump" | "goto") {
                n - 2
            } else if matches!(w[n - 1], "accept" | "drop" | "return") {
                n - 1
            } else {
                n
            };
            let rule = format!("{} counter {}", w[..cut].join(" "), w[cut..].join(" "));
            out.push_str(&format!("\t\t{}\n", rule.trim_end()));
            continue;
        }
        out.push_str(l);
        out.push('\n');
    }
    out
}

/// The nft twin's counters by rule id: the n-th counted rule of the filter
/// table is the n-th filter rule of the iptables-save file.
pub fn nft_counters(ns: &Netns, v6: bool, filter_ids: &[u32]) -> BTreeMap<u32, u64> {
    let fam = if v6 { "ip6" } else { "ip" };
    let out = ns.exec(&["nft", "list", "table", fam, "filter"]).unwrap();
    let mut m = BTreeMap::new();
    let mut n = 0;
    for l in out.lines() {
        let w: Vec<&str> = l.split_whitespace().collect();
        let Some(at) = w.iter().position(|x| *x == "packets") else {
            continue;
        };
        let pk: u64 = w[at + 1].parse().unwrap();
        let id = if l.contains(POLICY) {
            0
        } else {
            n += 1;
            filter_ids[n - 1]
        };
        *m.entry(id).or_insert(0) += pk;
    }
    assert_eq!(n, filter_ids.len(), "every rule counted: {out}");
    m
}

/// The nft twin's packet counters of rules 1..=`n` (iptables-save ids),
/// in order: [`nft_counters`] of a file whose filter rules are those.
pub fn nft_rule_counts(ns: &Netns, v6: bool, n: u32) -> Vec<u64> {
    let ids: Vec<u32> = (1..=n).collect();
    let m = nft_counters(ns, v6, &ids);
    ids.iter().map(|i| m.get(i).copied().unwrap_or(0)).collect()
}

/// Feeds `text` to `argv` in `ns`.
pub fn load(ns: &Netns, argv: &[&str], text: &str) {
    let mut c = ns
        .command(argv[0])
        .args(&argv[1..])
        .stdin(Stdio::piped())
        .spawn()
        .unwrap();
    c.stdin.take().unwrap().write_all(text.as_bytes()).unwrap();
    assert!(c.wait().unwrap().success(), "{argv:?}:\n{text}");
}

/// A running parapetd twin, its ruleset applied and attached at the hooks.
pub struct ParapetTwin {
    pub topo: Topo,
    pub dir: tempfile::TempDir,
    pub sock: std::path::PathBuf,
    pub daemon: Option<Daemon>,
}

/// parapetd in a fresh twin's R, `rules` (in `format`) applied and
/// attached without an interface; the attachment checked.
pub fn parapet_twin(tag: &str, v6: bool, rules: &str, format: &str) -> ParapetTwin {
    let topo = topo(tag);
    let AttachedDaemon {
        daemon,
        sock,
        attached: said,
        dir,
    } = applied_and_attached(&topo.r, rules, Some(format), &[]);
    let file = dir.path().join("rules");
    // attach and every later apply say which chain runs at which hook
    let fam = if v6 { "ipv6" } else { "ipv4" };
    let at = |chain: &str| format!("{chain} {fam} (priority ");
    assert!(
        said.starts_with("attached at the netfilter hooks: ") && said.contains(&at("FORWARD")),
        "{said}"
    );
    let said = ok(
        &sock,
        &["apply", file.to_str().unwrap(), "--format", format],
    );
    assert!(
        ["INPUT", "FORWARD", "OUTPUT"]
            .iter()
            .all(|c| said.contains(&at(c)))
            && said.contains("# at the netfilter hooks: "),
        "{said}"
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
    assert!(
        listed.contains(&format!(
            "# attached at the netfilter hooks: INPUT {fam} (priority "
        )),
        "{listed}"
    );
    ParapetTwin {
        topo,
        dir,
        sock,
        daemon,
    }
}

/// parapetd's counters by rule id, `map` translating its ids.
pub fn parapet_counters(sock: &Path, map: &dyn Fn(u32) -> u32) -> BTreeMap<u32, u64> {
    let mut m = BTreeMap::new();
    for (id, n) in stat_counters(&stats(sock)) {
        *m.entry(map(id)).or_insert(0) += n;
    }
    m.retain(|_, n| *n > 0);
    m
}

/// What the oracle found: the legacy kernel's outcome, and the parapet
/// twin (from the iptables-save text) still running for more checks.
pub struct Verdicts {
    pub kernel: Outcome,
    pub parapet: ParapetTwin,
}

/// Runs the case's probes through the four twins and asserts they agree
/// with the legacy kernel, probe by probe.
pub fn oracle(c: &Case) -> Verdicts {
    require_root();
    let (v6, probes) = (c.v6, c.probes);
    let text = format!("{}{}", c.nat, c.filter);
    let filter_ids = filter_rule_ids(&text);
    let strip = |mut m: BTreeMap<u32, u64>| {
        m.retain(|id, n| !c.noise.contains(id) && *n > 0);
        m
    };
    let (restore, fam) = if v6 {
        ("ip6tables-legacy-restore", "ip6tables-save")
    } else {
        ("iptables-legacy-restore", "iptables-save")
    };
    let nft = nft_of(c.filter, v6);

    let kernel = legacy_twin(&format!("{}k", c.tag), v6, &text, probes, c.noise);

    let by_nft = nft_twin(&format!("{}n", c.tag), c, &nft, &filter_ids);

    // parapetd from the nft text (its rule ids: positions in that file)
    let pn = parapet_twin(&format!("{}q", c.tag), v6, &nft, "nft");
    if !c.nat_nft.is_empty() {
        load(&pn.topo.r, &["nft", "-f", "-"], c.nat_nft);
    }
    let from_nft = |id: u32| {
        if id == 0 {
            0
        } else {
            filter_ids[id as usize - 1]
        }
    };
    let by_pn = run_probes(&pn.topo, v6, probes, &|| {
        strip(parapet_counters(&pn.sock, &from_nft))
    });
    drop(pn);

    // parapetd from the iptables-save text
    let pp = parapet_twin(&format!("{}p", c.tag), v6, &text, fam);
    if !c.nat.is_empty() {
        load(&pp.topo.r, &[restore], c.nat);
    }
    let ours = run_probes(&pp.topo, v6, probes, &|| {
        strip(parapet_counters(&pp.sock, &|id| id))
    });
    let s = stats(&pp.sock);
    let nf = &s["dataplane"]["netfilter"]["packets"];
    assert!(
        nf["input"].as_u64().unwrap() > 0
            && nf["forward"].as_u64().unwrap() > 0
            && nf["output"].as_u64().unwrap() > 0,
        "packets seen at every hook: {s}"
    );

    let mut wrong = Vec::new();
    for (name, o) in [
        ("nft", &by_nft),
        ("parapet", &ours),
        ("parapet (nft)", &by_pn),
    ] {
        wrong.extend(disagreements(name, probes, &kernel, o, &|_, kp| kp.clone()));
    }
    assert!(
        wrong.is_empty(),
        "{}: the twins differ:\n{}\nfilter:\n{}\nnft:\n{nft}",
        c.tag,
        wrong.join("\n"),
        c.filter
    );
    Verdicts {
        kernel,
        parapet: pp,
    }
}

/// The nft twin: a fresh router bed named `tag` with the case's nft nat
/// and `nft` (the filter table as parapet lists it) with counters in R;
/// each probe's fate and the filter rules that counted it, by the
/// iptables-save ids `filter_ids` (the case's noise left out).
pub fn nft_twin(tag: &str, c: &Case, nft: &str, filter_ids: &[u32]) -> Outcome {
    let n = topo(tag);
    load(
        &n.r,
        &["nft", "-f", "-"],
        &format!("{}{}", c.nat_nft, with_counters(nft)),
    );
    run_probes(&n, c.v6, c.probes, &|| {
        let mut m = nft_counters(&n.r, c.v6, filter_ids);
        m.retain(|id, k| !c.noise.contains(id) && *k > 0);
        m
    })
}

/// The filter table's rule ids of an iptables-save text, in order.
pub fn filter_rule_ids(text: &str) -> Vec<u32> {
    rule_ids(text)
        .iter()
        .filter(|((t, _, _), _)| t == "filter")
        .map(|(_, id)| *id)
        .collect::<std::collections::BTreeSet<u32>>()
        .into_iter()
        .collect()
}

/// Whether every probe met the same fate in two runs.
pub fn same_fates(a: &Outcome, b: &Outcome) -> bool {
    let f = |o: &Outcome| o.iter().map(|(f, _)| *f).collect::<Vec<Fate>>();
    f(a) == f(b)
}

/// The iptables-legacy twin: a fresh router bed named `tag` with the
/// iptables-save `text` (nat and filter) in R; each probe's fate and the
/// filter rules that counted it (rule ids; `noise` left out).
pub fn legacy_twin(tag: &str, v6: bool, text: &str, probes: &[Probe], noise: &[u32]) -> Outcome {
    let restore = if v6 {
        "ip6tables-legacy-restore"
    } else {
        "iptables-legacy-restore"
    };
    let ids = rule_ids(text);
    let k = topo(tag);
    load(&k.r, &[restore], text);
    run_probes(&k, v6, probes, &|| {
        let mut m = legacy_counters(&k.r, v6, &ids);
        m.retain(|id, n| !noise.contains(id) && *n > 0);
        m
    })
}

/// Where a twin's outcome is not what the kernel's implies, probe by
/// probe: `expect` turns the kernel's outcome of probe i into the twin's
/// expected one (the identity where the twins must agree), each
/// difference a line naming the probe, the kernel's and `twin`'s outcome.
pub fn disagreements(
    twin: &str,
    probes: &[Probe],
    kernel: &Outcome,
    other: &Outcome,
    expect: &dyn Fn(usize, &ProbeOutcome) -> ProbeOutcome,
) -> Vec<String> {
    let mut wrong = Vec::new();
    for (i, (kp, op)) in kernel.iter().zip(other).enumerate() {
        let want = expect(i, kp);
        if op != &want {
            let differs = if &want == kp {
                String::new()
            } else {
                format!(" (expected here: {want:?})")
            };
            wrong.push(format!(
                "probe {i} {:?}: iptables-legacy {kp:?}{differs}, {twin} {op:?}",
                probes[i]
            ));
        }
    }
    wrong
}

/// Asserts what the kernel twin itself shows, so that the bed works and
/// the ruleset decides: every probe's fate, and for the probes named in
/// `counted_by` (probe index, rule id) a rule that counted it.
pub fn assert_kernel(kernel: &Outcome, fates: &[Fate], counted_by: &[(usize, u32)]) {
    let got: Vec<Fate> = kernel.iter().map(|(f, _)| *f).collect();
    assert_eq!(got, fates, "the kernel twin's fates: {kernel:?}");
    for &(i, rule) in counted_by {
        assert!(
            kernel[i].1.contains_key(&rule),
            "probe {i} by rule {rule}: {kernel:?}"
        );
    }
}

/// Asserts that every twin (its name, the rule that counted each probe)
/// agrees with the kernel's rules, probe by probe; `what(i)` names probe
/// i in the message, which lists every difference of every twin.
pub fn assert_rules_agree(
    kernel: &[u32],
    twins: &[(&str, Vec<u32>)],
    what: &dyn Fn(usize) -> String,
) {
    let mut differ = Vec::new();
    for (name, ours) in twins {
        assert_eq!(ours.len(), kernel.len(), "{name}: one rule per probe");
        for (i, (k, o)) in kernel.iter().zip(ours).enumerate() {
            if k != o {
                differ.push(format!("{}: kernel rule {k}, {name} rule {o}", what(i)));
            }
        }
    }
    assert!(differ.is_empty(), "{}", differ.join("\n"));
}
