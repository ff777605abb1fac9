//! The `parapet` binary, driven as users and outside checks drive it.

use parapet_model::{Family, LinearEngine, NoSets};
use std::path::Path;

mod common;
use common::offline::{
    assert_classified, assert_set_verdicts, assert_verdicts, decided, parapet, s, stdout, write,
    write_pcap,
};

#[test]
fn check_reports_file_line_col_and_exits_1() {
    let dir = tempfile::tempdir().unwrap();
    let good = write(
        dir.path(),
        "good.rules",
        "*filter\n:INPUT ACCEPT [0:0]\n-A INPUT -p tcp --dport 22 -j ACCEPT\nCOMMIT\n",
    );
    let bad = write(dir.path(), "bad.rules", "*filter\n:INPUT ACCEPT [0:0]\n-A INPUT -p tcp --dport 22 -j ACCEPT\n-A INPUT -p tcp --dport 99999 -j DROP\nCOMMIT\n");
    let ok = parapet(&["check", s(&good)]);
    assert!(ok.status.success());
    assert!(stdout(&ok).contains("1 rule"));
    let o = parapet(&["check", s(&bad)]);
    assert_eq!(o.status.code(), Some(1));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains(&format!("{}:4:", bad.display())), "{err}");
    // A bad file among good ones still fails the whole check.
    assert_eq!(
        parapet(&["check", s(&good), s(&bad)]).status.code(),
        Some(1)
    );
}

#[test]
fn unknown_jump_target_and_loops_fail_check() {
    let dir = tempfile::tempdir().unwrap();
    let looped = write(dir.path(), "loop.rules", "*filter\n:INPUT ACCEPT [0:0]\n:A - [0:0]\n:B - [0:0]\n-A INPUT -j A\n-A A -j B\n-A B -j A\nCOMMIT\n");
    assert_eq!(parapet(&["check", s(&looped)]).status.code(), Some(1));
}

/// Every engine, through the text path a user takes (model → iptables-save
/// → parse → engine), must give the linear engine's answer on the original
/// model, packet for packet.
#[test]
fn engines_agree_with_the_linear_engine_through_iptables_save() {
    let dir = tempfile::tempdir().unwrap();
    let mut packets_checked = 0;
    for seed in 0..25u64 {
        let spec = parapet_gen::RandomSpec {
            rules: 20 + seed as usize * 8,
            ipv6: false,
            ..Default::default()
        };
        let rs = parapet_gen::random_ruleset(seed, &spec);
        let text = parapet_parse::render::iptables_save(&rs).expect("render");
        let rules = write(dir.path(), &format!("r{seed}.rules"), &text);
        let pkts: Vec<_> = parapet_gen::packets_for(&rs, seed, 300)
            .into_iter()
            .filter(|p| p.family == Family::V4)
            .collect();
        let trace_text: String = pkts
            .iter()
            .map(|p| format!("{} {} {} {} {}\n", p.src, p.dst, p.sport, p.dport, p.proto))
            .collect();
        let trace = write(dir.path(), &format!("r{seed}.trace"), &trace_text);
        // The trace carries the 5-tuple only: compare on packets as read back.
        let read_back: Vec<_> = parapet_parse::trace::TraceReader::new(trace_text.as_bytes(), "t")
            .map(Result::unwrap)
            .collect();
        let linear = LinearEngine::new(&rs, rs.select_chain(None).unwrap()).unwrap();
        let want: String = read_back
            .iter()
            .map(|p| format!("{}\n", linear.classify(p, &NoSets).unwrap().rule_id))
            .collect();
        assert_classified(
            &format!("seed {seed}"),
            &rules,
            &trace,
            &[],
            &["linear", "flat", "scan", "tree", "auto"],
            &want,
        );
        packets_checked += read_back.len();
    }
    assert!(packets_checked > 5_000);
}

#[test]
fn classbench_first_match_is_at_or_before_the_generating_filter() {
    let data = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../../shared/data/classbench");
    if !data.exists() {
        eprintln!(
            "skipped: {} not found (ClassBench data lives beside the repository)",
            data.display()
        );
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    for set in ["acl1", "fw1", "ipc1"] {
        let rules = data.join(format!("{set}_10k.gz"));
        // The first 2,000 packets: enough to cover the set's shapes, few
        // enough for the reference engine in a debug build.
        let mut text = String::new();
        std::io::Read::read_to_string(
            &mut flate2::read::GzDecoder::new(
                std::fs::File::open(data.join(format!("{set}_10k_trace.gz"))).unwrap(),
            ),
            &mut text,
        )
        .unwrap();
        let head: String = text.lines().take(2000).map(|l| format!("{l}\n")).collect();
        let trace = write(dir.path(), &format!("{set}.trace"), &head);
        let linear = stdout(&parapet(&[
            "classify",
            s(&rules),
            s(&trace),
            "--engine",
            "linear",
        ]));
        let auto = stdout(&parapet(&["classify", s(&rules), s(&trace)]));
        assert_eq!(linear, auto, "{set}: auto differs from linear");
        // The generating filter (last trace column, 0-based) must match, so
        // the first match is at or before it (ids are 1-based).
        let mut n = 0;
        for (line, id) in head.lines().zip(linear.lines()) {
            let generating: u32 = line.split_whitespace().last().unwrap().parse().unwrap();
            let id: u32 = id.parse().unwrap();
            assert!(
                id >= 1 && id <= generating + 1,
                "{set}: packet '{line}' decided by {id}"
            );
            n += 1;
        }
        assert_eq!(n, 2000, "{set}");
    }
}

#[test]
fn sets_from_ipset_files_and_nft_blocks() {
    let dir = tempfile::tempdir().unwrap();
    // 10.1.0.1 -> 10.1.0.2: src in set; 10.2.0.1 -> 10.1.0.2: dst in set;
    // 10.2.0.1 -> 10.2.0.2: neither.
    let case = assert_set_verdicts(
        dir.path(),
        "s",
        [
            "create bl hash:net family inet\nadd bl 10.1.0.0/16\nadd bl 192.0.2.1\n",
            "*filter\n:INPUT ACCEPT [0:0]\n-A INPUT -m set --match-set bl src -j DROP\n-A INPUT -m set ! --match-set bl dst -j REJECT\nCOMMIT\n",
            "167837697 167837698 1 1 6\n167903233 167837698 1 1 6\n167903233 167903234 1 1 6\n",
        ],
        "1\tDROP\n0\tACCEPT\n2\tREJECT\n",
    );
    let (rules, trace) = (case.rules, case.trace);
    let missing = parapet(&["classify", s(&rules), s(&trace)]);
    assert_eq!(missing.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&missing.stderr).contains("set 'bl'"));
    let nft = write(
        dir.path(),
        "n.nft",
        "table ip filter {\n\tset bl {\n\t\ttype ipv4_addr\n\t\tflags interval\n\t\telements = { 10.1.0.0/16 }\n\t}\n\tchain input {\n\t\ttype filter hook input priority 0; policy accept;\n\t\tip saddr @bl drop\n\t}\n}\n",
    );
    let out = stdout(&parapet(&["classify", s(&nft), s(&trace)]));
    assert_eq!(out, "1\n0\n0\n");
}

#[test]
fn trace_explains_each_rule() {
    let dir = tempfile::tempdir().unwrap();
    let rules = write(dir.path(), "t.rules", "*filter\n:INPUT DROP [0:0]\n:sub - [0:0]\n-A INPUT -i lo -j ACCEPT\n-A INPUT -p tcp -j sub\n-A sub -p tcp --dport 22 -j ACCEPT\n-A sub -j RETURN\nCOMMIT\n");
    let out = stdout(&parapet(&[
        "trace",
        s(&rules),
        "--packet",
        "tcp 10.0.0.1:1000 > 10.0.0.2:80 iif eth0",
    ]));
    assert!(out.contains("rule    1"), "{out}");
    assert!(out.contains("iif eth0 not in lo"), "{out}");
    assert!(out.contains("dport 80 not in 22"), "{out}");
    assert!(out.contains("decided by the chain policy: DROP"), "{out}");
    assert!(
        out.contains("non-terminal rules matched on the way: 2, 4"),
        "{out}"
    );
    let bad = parapet(&["trace", s(&rules), "--packet", "tcp 10.0.0.1 <> 10.0.0.2"]);
    assert_eq!(bad.status.code(), Some(1));
}

#[test]
fn list_translates_between_syntaxes() {
    let dir = tempfile::tempdir().unwrap();
    let rules = write(dir.path(), "l.rules", "*filter\n:INPUT DROP [0:0]\n-A INPUT -s 10.0.0.0/8 -p tcp -m multiport --dports 22,80 -j ACCEPT\nCOMMIT\n");
    let nft = stdout(&parapet(&["list", s(&rules), "--format", "nft"]));
    let nft_file = write(dir.path(), "l.nft", &nft);
    let back = stdout(&parapet(&["list", s(&nft_file), "--format", "json"]));
    let orig = stdout(&parapet(&["list", s(&rules), "--format", "json"]));
    // Same rules, whatever the syntax they went through.
    let strip = |j: &str| -> serde_json::Value {
        let v: serde_json::Value = serde_json::from_str(j).unwrap();
        v["tables"][0]["chains"]
            .as_array()
            .unwrap()
            .iter()
            .flat_map(|c| {
                c["rules"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .map(|r| r["matches"].clone())
            })
            .collect()
    };
    assert_eq!(strip(&back), strip(&orig), "nft listing:\n{nft}");
}

/// A pcap capture classifies like the same packets written as a text trace;
/// frames the dataplane would not classify print `-`.
#[test]
fn pcap_captures_classify_like_traces() {
    use parapet_dataplane::frame::{Frame, L4};
    let dir = tempfile::tempdir().unwrap();
    let rules = write(dir.path(), "p.rules", "*filter\n:INPUT ACCEPT [0:0]\n-A INPUT -p udp -m udp --dport 53 -j DROP\n-A INPUT -s 10.0.0.0/8 -p tcp -m tcp --dport 22 -j REJECT\nCOMMIT\n");
    let frames = [
        Frame::ipv4("10.1.2.3".parse().unwrap(), "192.0.2.1".parse().unwrap())
            .l4(L4::Udp {
                sport: 1000,
                dport: 53,
            })
            .build(),
        Frame::ipv4("10.1.2.3".parse().unwrap(), "192.0.2.1".parse().unwrap())
            .l4(L4::Tcp {
                sport: 1000,
                dport: 22,
                flags: 0x02,
            })
            .build(),
        Frame::ipv4("11.1.2.3".parse().unwrap(), "192.0.2.1".parse().unwrap())
            .l4(L4::Tcp {
                sport: 1000,
                dport: 22,
                flags: 0x02,
            })
            .build(),
        Frame::non_ip(0x0806).build(),
    ];
    let cap = write_pcap(dir.path(), "c.pcap", &frames);
    assert_verdicts(
        &rules,
        &cap,
        &[],
        &["linear", "auto"],
        "1\tDROP\n2\tREJECT\n0\tACCEPT\n-\tACCEPT (not IP)\n",
    );
}

/// Issue 13 item 7: `check` reads nft set blocks (an error in one is the
/// file's, at its position), and `list --format nft` writes them back, so
/// the listing classifies as the file does; parts left to the kernel are
/// named in `check`'s summary.
#[test]
fn nft_set_blocks_are_checked_and_listed() {
    let dir = tempfile::tempdir().unwrap();
    let text = "table inet f {\n\tset s {\n\t\ttype ipv4_addr\n\t\telements = { 1.2.3.4 }\n\t}\n\tct helper ftp {\n\t\ttype \"ftp\" protocol tcp\n\t}\n\tchain input {\n\t\ttype filter hook input priority 0; policy accept;\n\t\tip saddr @s drop\n\t}\n}\n";
    let good = write(dir.path(), "good.nft", text);
    let o = parapet(&["check", s(&good)]);
    assert!(
        stdout(&o).contains("left to the kernel: inet f ct helper ftp"),
        "{}",
        stdout(&o)
    );
    let bad = write(
        dir.path(),
        "bad.nft",
        &text.replace("1.2.3.4 }", "1.2.3.4, 300.1.1.1 }"),
    );
    let o = parapet(&["check", s(&bad)]);
    assert_eq!(o.status.code(), Some(1));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains(&format!("{}:4:25: set 's'", bad.display())),
        "{err}"
    );
    let listed = stdout(&parapet(&["list", s(&good), "--format", "nft"]));
    assert!(listed.contains("set s {"), "{listed}");
    let relisted = write(dir.path(), "listed.nft", &listed);
    let trace = write(
        dir.path(),
        "t.txt",
        "16909060 84281096 1 80 6\n16909061 84281096 1 80 6\n",
    );
    for f in [&good, &relisted] {
        assert_eq!(
            stdout(&parapet(&["classify", s(f), s(&trace), "--verdict"])),
            "1\tDROP\n0\tACCEPT\n"
        );
    }
}

/// `-I DIR`: nft includes not next to the including file are looked for
/// there, as `nft -I` does.
#[test]
fn include_dirs_are_searched() {
    let dir = tempfile::tempdir().unwrap();
    let lib = dir.path().join("lib");
    std::fs::create_dir(&lib).unwrap();
    write(&lib, "defs.nft", "define ssh = 22\n");
    let main = write(
        dir.path(),
        "main.nft",
        "include \"defs.nft\"\ntable inet t {\n\tchain input {\n\t\ttype filter hook input priority 0; policy drop;\n\t\ttcp dport $ssh accept\n\t}\n}\n",
    );
    let o = parapet(&["check", s(&main)]);
    assert_eq!(o.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&o.stderr).contains("included file"));
    let out = stdout(&parapet(&["-I", s(&lib), "check", s(&main)]));
    assert!(out.contains("ok (nft): 1 table, 1 chain, 1 rule"), "{out}");
}

/// Address and packet types offline: `--local-addr` types the host's
/// addresses (and, with /LEN, the subnet's broadcast address), and every
/// engine evaluates them; an IPv6 type set beyond the host's local table
/// (`unreachable`: no route in the whole table) is evaluated by the linear
/// engine and refused by a compiled one rather than matched as if every
/// address were unicast.
#[test]
fn address_types_come_from_local_addr_and_compile() {
    let dir = tempfile::tempdir().unwrap();
    let rules = write(
        dir.path(),
        "types.rules",
        "*filter\n:INPUT DROP [0:0]\n\
         -A INPUT -m addrtype --dst-type BROADCAST -j DROP\n\
         -A INPUT -m pkttype --pkt-type multicast -j DROP\n\
         -A INPUT -p tcp --dport 22 -m addrtype --dst-type LOCAL -j ACCEPT\n\
         -A INPUT -p udp -j ACCEPT\nCOMMIT\n",
    );
    let decided = |extra: &[&str], pkt: &str| decided(&rules, pkt, extra);
    let ssh = "tcp 10.0.0.1:1 > 10.0.0.2:22";
    // Not the host's address: UNICAST, so only the policy.
    assert!(
        decided(&[], ssh).starts_with("decided by the chain policy"),
        "{}",
        decided(&[], ssh)
    );
    let local = ["--local-addr", "10.0.0.2/24"];
    assert!(decided(&local, ssh).starts_with("decided by rule 3"));
    let bcast = "udp 10.0.0.1:1 > 10.0.0.255:53";
    assert!(decided(&local, bcast).starts_with("decided by rule 1"));
    assert!(decided(&[], bcast).starts_with("decided by rule 4"));
    // By prefix: 224/4 is multicast, so is its packet type.
    assert!(decided(&[], "udp 10.0.0.1:1 > 224.0.0.251:5353").starts_with("decided by rule 2"));
    assert!(decided(&[], &format!("{ssh} dtype local")).starts_with("decided by rule 3"));
    let summary = stdout(&parapet(&["check", s(&rules)]));
    assert!(!summary.contains("address types"), "{summary}");
    let tree = |pkt: &str| decided(&["--engine", "tree"], pkt);
    assert!(tree(&format!("{ssh} dtype local")).starts_with("decided by rule 3"));
    assert!(tree(ssh).starts_with("decided by the chain policy"));
    let unreachable = write(
        dir.path(),
        "unreachable.nft",
        "table ip6 t {\n  chain c {\n    type filter hook input priority 0; policy accept;\n    fib daddr type unreachable drop\n  }\n}\n",
    );
    let summary = stdout(&parapet(&["check", s(&unreachable)]));
    assert!(
        summary.contains(
            "; address types beyond the local table (rule 1): evaluated offline only, apply refuses them"
        ),
        "{summary}"
    );
    let o = parapet(&[
        "trace",
        s(&unreachable),
        "--packet",
        "udp [2001:db8::1]:1 > [2001:db8::2]:53",
        "--engine",
        "tree",
    ]);
    assert!(!o.status.success());
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains("rule 1 matches the IPv6 destination address type"),
        "{err}"
    );
    // The packet type alone compiles: every hook fills its key word.
    let pkttype = write(
        dir.path(),
        "pkttype.rules",
        "*filter\n:INPUT ACCEPT [0:0]\n\
         -A INPUT -m pkttype --pkt-type broadcast -j DROP\nCOMMIT\n",
    );
    let out = stdout(&parapet(&[
        "trace",
        s(&pkttype),
        "--packet",
        "udp 10.0.0.1:1 > 10.0.0.255:53 pkttype broadcast",
        "--engine",
        "tree",
    ]));
    assert!(out.contains("decided by rule 1"), "{out}");
}

/// `parapet lint … | head`: the reader closes the pipe before parapet has
/// written everything; parapet ends as a program killed by SIGPIPE would
/// (status 141), without a panic or a backtrace on stderr.
#[test]
fn a_reader_closing_stdout_early_ends_it_quietly() {
    use std::process::{Command, Stdio};
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    // the built-in ClassBench set's --explain report is megabytes: far
    // more than a pipe holds, so the write past the closed end is certain
    let mut child = Command::new(env!("CARGO_BIN_EXE_parapet"))
        .args(["lint", "--explain", "--correlations", "0"])
        .arg(root.join("examples/synthetic_2k.cb"))
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    drop(child.stdout.take());
    let out = child.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(141), "stderr: {stderr}");
    assert!(!stderr.contains("panicked"), "stderr: {stderr}");
}
