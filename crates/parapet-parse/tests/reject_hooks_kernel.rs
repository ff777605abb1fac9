//! The kernel as the oracle for where REJECT may stand: each file goes to
//! `nft -f` or `iptables-legacy-restore` in a network namespace this test
//! creates, and parapet refuses exactly the files the kernel refuses (nft
//! `reject` reached from a postrouting chain; iptables REJECT outside the
//! filter table), with the error at the `reject` / `REJECT` word. nft
//! `reject` in prerouting is accepted by both (parapet answers it at the
//! PREROUTING hook, docs/hooks.md).

use parapet_parse::*;
use parapet_testbed::Netns;

fn nft_chain(hook: &str, body: &str, extra: &str) -> String {
    format!(
        "table inet t {{\n\tchain c {{\n\t\ttype filter hook {hook} priority 0; policy accept;\n{body}\t}}\n{extra}}}\n"
    )
}

/// (name, format, text, where parapet's error must point: line, column)
type Case = (&'static str, Format, String, Option<(u32, u32)>);

fn cases() -> Vec<Case> {
    let reject = "\t\ttcp dport 9 reject with tcp reset\n\t\tudp dport 9 reject\n";
    let jump = "\t\tjump r\n";
    let r_chain = "\tchain r {\n\t\tudp dport 9 reject\n\t}\n";
    let ipt = |table: &str, chain: &str| {
        format!("*{table}\n:{chain} ACCEPT [0:0]\n-A {chain} -p tcp -j REJECT\nCOMMIT\n")
    };
    vec![
        (
            "nft prerouting",
            Format::Nft,
            nft_chain("prerouting", reject, ""),
            None,
        ),
        (
            "nft input",
            Format::Nft,
            nft_chain("input", reject, ""),
            None,
        ),
        (
            "nft output",
            Format::Nft,
            nft_chain("output", reject, ""),
            None,
        ),
        (
            "nft postrouting",
            Format::Nft,
            nft_chain("postrouting", reject, ""),
            Some((4, 15)),
        ),
        (
            "nft postrouting by a jump",
            Format::Nft,
            nft_chain("postrouting", jump, r_chain),
            Some((7, 15)),
        ),
        (
            "nft forward by a jump",
            Format::Nft,
            nft_chain("forward", jump, r_chain),
            None,
        ),
        (
            "iptables filter",
            Format::IptablesSave,
            ipt("filter", "FORWARD"),
            None,
        ),
        (
            "iptables mangle",
            Format::IptablesSave,
            ipt("mangle", "PREROUTING"),
            Some((3, 25)),
        ),
        (
            "iptables raw",
            Format::IptablesSave,
            ipt("raw", "PREROUTING"),
            Some((3, 25)),
        ),
        (
            "iptables nat",
            Format::IptablesSave,
            ipt("nat", "POSTROUTING"),
            Some((3, 26)),
        ),
    ]
}

#[test]
#[ignore = "needs root"]
fn reject_is_refused_where_the_kernel_refuses_it() {
    parapet_testbed::require_root();
    let ns = Netns::create("rejhook").unwrap();
    let path = std::env::temp_dir().join(format!("parapet-rejhook-{}", std::process::id()));
    let mut wrong = Vec::new();
    for (name, format, text, at) in cases() {
        std::fs::write(&path, &text).unwrap();
        let p = path.to_str().unwrap();
        let kernel_ok = match format {
            Format::Nft => {
                let ok = ns.exec(&["nft", "-f", p]).is_ok();
                let _ = ns.exec(&["nft", "flush", "ruleset"]);
                ok
            }
            _ => {
                let ok = ns
                    .exec(&["sh", "-c", &format!("iptables-legacy-restore < {p}")])
                    .is_ok();
                for t in ["filter", "mangle", "raw", "nat"] {
                    let _ = ns.exec(&["iptables-legacy", "-t", t, "-F"]);
                }
                ok
            }
        };
        let ours = parapet_parse::check::check(&text, "f", format).map(|_| ());
        if ours.is_ok() != kernel_ok {
            wrong.push(format!(
                "{name}: kernel accepts: {kernel_ok}, parapet: {ours:?}"
            ));
            continue;
        }
        if let (Err(errs), Some((line, col))) = (&ours, at) {
            if !errs.iter().any(|e| e.line == line && e.column == col) {
                wrong.push(format!(
                    "{name}: expected an error at {line}:{col}: {errs:?}"
                ));
            }
        }
        if ours.is_ok() != at.is_none() {
            wrong.push(format!("{name}: the case's expectation is wrong: {ours:?}"));
        }
    }
    let _ = std::fs::remove_file(&path);
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}
