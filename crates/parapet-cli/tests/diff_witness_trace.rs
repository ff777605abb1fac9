//! Every box `parapet diff A B --json` reports is confirmed by `parapet
//! trace`: its witness packet, traced on A and on B, is decided by the
//! rules and verdicts the box names, and the two sides differ (with
//! `--rules`: in deciding rule, verdict or a LOG/counter rule matched on one
//! side only). Pairs: iptables-save against nft, an edit, a reordering of a
//! mixed-verdict ruleset (ACCEPT/DROP/REJECT, ICMP, GRE, a user chain with
//! RETURN), a ClassBench set against a reordering. The checker is shown to
//! refuse wrong answers (a corrupted rule id, verdict or witness).

use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::Command;

/// A mixed-verdict iptables ruleset: every verdict, ICMP and GRE rules, a
/// user chain that RETURNs, a LOG and a counter-only rule.
const MIXED: &str = "*filter
:INPUT DROP [0:0]
:FORWARD DROP [0:0]
:OUTPUT ACCEPT [0:0]
:SVC - [0:0]
-A INPUT -p tcp -m tcp --dport 22 -j LOG --log-prefix ssh
-A INPUT -s 10.0.0.0/8 -p tcp -m tcp --dport 22 -j ACCEPT
-A INPUT -s 10.1.0.0/16 -p tcp -m tcp --dport 20:30 -j DROP
-A INPUT -p icmp -m icmp --icmp-type 8 -j ACCEPT
-A INPUT -s 192.0.2.0/24 -p icmp -j REJECT
-A INPUT -p gre -j ACCEPT
-A INPUT -p udp -j SVC
-A INPUT -s 172.16.0.0/12
-A INPUT -p tcp -m tcp --dport 80 -j ACCEPT
-A SVC -s 192.0.2.0/24 -j RETURN
-A SVC -p udp -m udp --dport 53 -j ACCEPT
-A SVC -p udp -m udp --dport 123 -j REJECT
-A SVC -j DROP
COMMIT
";

/// MIXED with rules 2 and 3 swapped, rule 4 (ICMP) rejecting and rule 5
/// (REJECT) before it, and the counter rule narrowed: a reordering and
/// verdict edits.
const MIXED_EDITED: &str = "*filter
:INPUT DROP [0:0]
:FORWARD DROP [0:0]
:OUTPUT ACCEPT [0:0]
:SVC - [0:0]
-A INPUT -p tcp -m tcp --dport 22 -j LOG --log-prefix ssh
-A INPUT -s 10.1.0.0/16 -p tcp -m tcp --dport 20:30 -j DROP
-A INPUT -s 10.0.0.0/8 -p tcp -m tcp --dport 22 -j ACCEPT
-A INPUT -s 192.0.2.0/24 -p icmp -j ACCEPT
-A INPUT -p icmp -m icmp --icmp-type 8 -j REJECT
-A INPUT -p gre -j ACCEPT
-A INPUT -p udp -j SVC
-A INPUT -s 172.16.0.0/16
-A INPUT -p tcp -m tcp --dport 80 -j ACCEPT
-A SVC -s 192.0.2.0/24 -j RETURN
-A SVC -p udp -m udp --dport 53 -j ACCEPT
-A SVC -p udp -m udp --dport 123 -j REJECT
-A SVC -j DROP
COMMIT
";

/// MIXED as nft, with three changes: GRE dropped, NTP accepted, and SSH
/// from 10.0.0.0/8 only from 10.0.0.0/9.
const MIXED_NFT: &str = "table inet filter {
	chain input {
		type filter hook input priority filter; policy drop;
		tcp dport 22 log prefix \"ssh\"
		ip saddr 10.0.0.0/9 tcp dport 22 accept
		ip saddr 10.1.0.0/16 tcp dport 20-30 drop
		icmp type echo-request accept
		ip saddr 192.0.2.0/24 ip protocol icmp reject
		ip protocol gre drop
		meta l4proto udp jump svc
		ip saddr 172.16.0.0/12 counter
		tcp dport 80 accept
	}
	chain svc {
		ip saddr 192.0.2.0/24 return
		udp dport 53 accept
		udp dport 123 accept
		drop
	}
}
";

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn parapet(args: &[&str]) -> (i32, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_parapet"))
        .args(args)
        .current_dir(root())
        .output()
        .unwrap();
    (
        out.status.code().unwrap(),
        format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        ),
    )
}

/// One side of a pair: its file and the chain `trace` evaluates.
struct Side<'a> {
    file: &'a str,
    chain: &'a str,
}

/// What `trace` says of a packet: the deciding rule (0: the policy), its
/// verdict and the non-terminal rules matched on the way.
#[derive(Debug, PartialEq)]
struct Traced {
    rule: u64,
    verdict: String,
    nonterminal: Vec<u64>,
}

fn trace(side: &Side, witness: &str) -> Result<Traced, String> {
    let (code, out) = parapet(&[
        "trace", side.file, "--chain", side.chain, "--packet", witness,
    ]);
    if code != 0 {
        return Err(format!("trace {} failed: {out}", side.file));
    }
    let decided = out
        .lines()
        .find_map(|l| l.strip_prefix("decided by "))
        .ok_or_else(|| format!("no decision in: {out}"))?;
    let (who, verdict) = decided.split_once(": ").ok_or("decision without verdict")?;
    let rule = match who.strip_prefix("rule ") {
        Some(n) => n.parse().map_err(|e| format!("{who}: {e}"))?,
        None => 0,
    };
    let nonterminal = out
        .lines()
        .find_map(|l| l.strip_prefix("non-terminal rules matched on the way: "))
        .map(|ids| ids.split(", ").map(|n| n.parse().unwrap()).collect())
        .unwrap_or_default();
    Ok(Traced {
        rule,
        verdict: verdict.trim().to_string(),
        nonterminal,
    })
}

/// Checks every difference of `json` (from `diff a b --json`, with
/// `--rules` when `by_rule`) against `trace` on both sides.
fn confirm(a: &Side, b: &Side, json: &Value, by_rule: bool) -> Result<(), String> {
    for d in json["differences"]
        .as_array()
        .ok_or("no differences list")?
    {
        let w = d["witness"].as_str().ok_or("no witness")?;
        let (ta, tb) = (trace(a, w)?, trace(b, w)?);
        let want = |side: &str, t: &Traced| -> Result<(), String> {
            let (rule, verdict) = (d[side].as_u64(), d[format!("{side}_verdict")].as_str());
            if (rule, verdict) != (Some(t.rule), Some(t.verdict.as_str())) {
                return Err(format!(
                    "{side} of {d}: trace of '{w}' says rule {} {}",
                    t.rule, t.verdict
                ));
            }
            Ok(())
        };
        want("a", &ta)?;
        want("b", &tb)?;
        let n = &d["nonterminal"];
        let differs = if n.is_null() {
            ta.verdict != tb.verdict || (by_rule && ta.rule != tb.rule)
        } else {
            // A LOG or counter rule that matches the witness in one ruleset
            // and not in the other.
            let rule = n["rule"].as_u64().ok_or("nonterminal without rule")?;
            let (on, off) = if n["in"] == "a" {
                (&ta, &tb)
            } else {
                (&tb, &ta)
            };
            by_rule && on.nonterminal.contains(&rule) && !off.nonterminal.contains(&rule)
        };
        if !differs {
            return Err(format!(
                "{d}: trace finds no difference at '{w}': {ta:?} {tb:?}"
            ));
        }
    }
    Ok(())
}

/// Runs `diff` (with `extra` arguments) and checks its answer; returns it.
fn diff_confirmed(a: &Side, b: &Side, extra: &[&str]) -> Value {
    let map = format!("A:{}=B:{}", a.chain, b.chain);
    let mut args = vec!["diff", a.file, b.file, "--chain", &map, "--json"];
    args.extend(extra);
    let (code, out) = parapet(&args);
    let json: Value = serde_json::from_str(&out).unwrap_or(Value::Null);
    // A ClassBench set has one verdict: its reordering differs by rule only.
    let want = if json["equivalent"] == Value::Bool(true) {
        0
    } else {
        1
    };
    assert_eq!(code, want, "{args:?}: {out}");
    assert_eq!(json["complete"].as_bool(), Some(true), "{out}");
    let by_rule = extra.contains(&"--rules");
    if let Err(e) = confirm(a, b, &json, by_rule) {
        panic!("{args:?}: {e}");
    }
    json
}

#[test]
fn every_diff_witness_is_confirmed_by_trace() {
    let dir = tempfile::tempdir().unwrap();
    let write = |name: &str, text: &str| {
        let p = dir.path().join(name);
        std::fs::write(&p, text).unwrap();
        p.to_str().unwrap().to_string()
    };
    let mixed = write("mixed.rules", MIXED);
    let edited = write("mixed_edited.rules", MIXED_EDITED);
    let nft = write("mixed.nft", MIXED_NFT);
    // A ClassBench set against a copy with rules 1-2, 5-6 and 10-11 swapped.
    let cb = std::fs::read_to_string(root().join("examples/synthetic_2k.cb")).unwrap();
    let mut lines: Vec<&str> = cb.lines().collect();
    for i in [0, 4, 9] {
        lines.swap(i, i + 1);
    }
    let cb_swapped = write("swapped.cb", &(lines.join("\n") + "\n"));

    let input = |file| Side {
        file,
        chain: "filter/INPUT",
    };
    let pairs = [
        (
            input(&mixed),
            Side {
                file: &nft,
                chain: "filter/input",
            },
        ),
        (
            input("examples/host.rules"),
            input("examples/host_edited.rules"),
        ),
        (input(&mixed), input(&edited)),
        (input("examples/synthetic_2k.cb"), input(&cb_swapped)),
    ];
    let mut boxes = 0;
    for (a, b) in &pairs {
        for extra in [&[][..], &["--rules"][..]] {
            let json = diff_confirmed(a, b, extra);
            boxes += json["differences"].as_array().unwrap().len();
        }
    }
    // Each pair differs in several ways (not a test that checks nothing).
    assert!(boxes >= 20, "only {boxes} boxes");

    // The checker refuses wrong answers: a wrong deciding rule, a wrong
    // verdict, and a witness both rulesets treat alike.
    let (a, b) = (input(&mixed), input(&edited));
    let json = diff_confirmed(&a, &b, &[]);
    let corrupt = |f: &dyn Fn(&mut Value)| {
        let mut j = json.clone();
        f(&mut j["differences"][0]);
        confirm(&a, &b, &j, false)
    };
    assert!(corrupt(&|d| d["a"] = (d["a"].as_u64().unwrap() + 1).into()).is_err());
    assert!(
        corrupt(&|d| d["b_verdict"] = "DROP".into()).is_err() || {
            // When b's verdict really is DROP, name another.
            corrupt(&|d| d["b_verdict"] = "ACCEPT".into()).is_err()
        }
    );
    let same = "tcp 198.51.100.1:1024 > 203.0.113.1:80 ct new flags SYN len 64";
    assert!(corrupt(&|d| {
        let (ta, tb) = (trace(&a, same).unwrap(), trace(&b, same).unwrap());
        assert_eq!(ta.verdict, tb.verdict);
        d["witness"] = same.into();
        d["a"] = ta.rule.into();
        d["b"] = tb.rule.into();
        d["a_verdict"] = ta.verdict.clone().into();
        d["b_verdict"] = tb.verdict.into();
    })
    .is_err());
}
