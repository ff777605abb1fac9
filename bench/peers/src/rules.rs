//! Ruleset generator: one description, rendered as iptables-save text (which
//! parapet parses too) and as nft text (linear, set and verdict-map forms).
//!
//! Every ruleset has exactly `n` rules in INPUT: `n - 1` rules that the
//! test flow does NOT match, then one final ACCEPT that it does, with
//! policy ACCEPT. The flow is GEN_IP:SRC_PORT → FLT_IP:SINK_PORT over UDP.

use crate::testbed::{FLT_IF, FLT_IP, GEN_IP, SINK_PORT, SRC_PORT};
use std::fmt::Write;

/// Which failing rules fill the chain.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
pub enum RuleKind {
    /// Worst case for linear filters: each rule matches interface, source,
    /// destination, protocol and source port of the flow; only the last
    /// field checked — the destination port — differs (10000 + i).
    WorstCase,
    /// The ipfw FAQ's late-failing rule, `deny udp from any to any 55555`:
    /// protocol matches, the port comparison fails.
    IpfwLate,
    /// The ipfw FAQ's early-failing rule, `deny ip from 1.2.3.4 to 1.2.3.4`:
    /// the source address comparison fails first.
    IpfwEarly,
}

impl RuleKind {
    /// Name used on the command line and in reports.
    pub fn name(self) -> &'static str {
        match self {
            RuleKind::WorstCase => "worst",
            RuleKind::IpfwLate => "ipfw-late",
            RuleKind::IpfwEarly => "ipfw-early",
        }
    }

    /// Parses [`RuleKind::name`].
    pub fn parse(s: &str) -> Option<RuleKind> {
        [RuleKind::WorstCase, RuleKind::IpfwLate, RuleKind::IpfwEarly]
            .into_iter()
            .find(|k| k.name() == s)
    }
}

/// A ruleset to generate.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RuleSpec {
    /// Total rules in INPUT including the final accept (at least 1).
    pub rules: usize,
    /// Kind of the `rules - 1` failing rules.
    pub kind: RuleKind,
}

/// nft table name the bench uses.
pub const NFT_TABLE: &str = "parapet_bench";

/// First destination port of worst-case rules. Ports 10000.. never collide
/// with SINK_PORT (5001), for up to 55535 rules.
const BASE_PORT: usize = 10000;

impl RuleSpec {
    fn failing(&self) -> usize {
        self.rules.max(1) - 1
    }

    fn worst_port(i: usize) -> u16 {
        (BASE_PORT + i % (65535 - BASE_PORT)) as u16
    }

    /// iptables-save text of the `filter` table.
    pub fn iptables_save(&self) -> String {
        let mut s = String::with_capacity(self.rules * 100 + 200);
        s.push_str("# parapet-peers generated ruleset\n*filter\n");
        s.push_str(":INPUT ACCEPT [0:0]\n:FORWARD ACCEPT [0:0]\n:OUTPUT ACCEPT [0:0]\n");
        for i in 0..self.failing() {
            match self.kind {
                RuleKind::WorstCase => writeln!(
                    s,
                    "-A INPUT -s {GEN_IP}/32 -d {FLT_IP}/32 -i {FLT_IF} -p udp -m udp --sport {SRC_PORT} --dport {} -j DROP",
                    Self::worst_port(i)
                ),
                RuleKind::IpfwLate => {
                    writeln!(s, "-A INPUT -p udp -m udp --dport 55555 -j DROP")
                }
                RuleKind::IpfwEarly => {
                    writeln!(s, "-A INPUT -s 1.2.3.4/32 -d 1.2.3.4/32 -j DROP")
                }
            }
            .expect("writing to a String");
        }
        writeln!(s, "-A INPUT -p udp -m udp --dport {SINK_PORT} -j ACCEPT").expect("String");
        s.push_str("COMMIT\n");
        s
    }

    fn nft_header(s: &mut String) {
        // `flush ruleset` makes the load an atomic replace of everything.
        s.push_str("flush ruleset\n");
        writeln!(s, "table ip {NFT_TABLE} {{").expect("String");
    }

    /// nft text with one rule per iptables rule (linear evaluation).
    pub fn nft_linear(&self) -> String {
        let mut s = String::with_capacity(self.rules * 110 + 200);
        Self::nft_header(&mut s);
        s.push_str("  chain input {\n    type filter hook input priority filter; policy accept;\n");
        for i in 0..self.failing() {
            match self.kind {
                RuleKind::WorstCase => writeln!(
                    s,
                    "    iifname \"{FLT_IF}\" ip saddr {GEN_IP} ip daddr {FLT_IP} udp sport {SRC_PORT} udp dport {} drop",
                    Self::worst_port(i)
                ),
                RuleKind::IpfwLate => writeln!(s, "    udp dport 55555 drop"),
                RuleKind::IpfwEarly => writeln!(s, "    ip saddr 1.2.3.4 ip daddr 1.2.3.4 drop"),
            }
            .expect("String");
        }
        writeln!(s, "    udp dport {SINK_PORT} counter accept").expect("String");
        s.push_str("  }\n}\n");
        s
    }

    /// nft text with the failing rules folded into one lookup in a named set
    /// of concatenations (saddr . daddr . sport . dport); the accept stays a
    /// rule. Exact for the worst-case kind; ipfw kinds collapse to one
    /// element, as nft would.
    pub fn nft_set(&self) -> String {
        let mut s = String::with_capacity(self.rules * 60 + 300);
        Self::nft_header(&mut s);
        s.push_str("  set drops {\n    type ipv4_addr . ipv4_addr . inet_service . inet_service\n");
        self.push_elements(&mut s, None);
        s.push_str("  }\n");
        s.push_str("  chain input {\n    type filter hook input priority filter; policy accept;\n");
        writeln!(
            s,
            "    iifname \"{FLT_IF}\" ip saddr . ip daddr . udp sport . udp dport @drops drop"
        )
        .expect("String");
        writeln!(s, "    udp dport {SINK_PORT} counter accept").expect("String");
        s.push_str("  }\n}\n");
        s
    }

    /// nft text with the failing rules as one verdict map keyed by the
    /// concatenation (`… vmap @verdicts`); the final accept stays a rule so
    /// every form ends the same way.
    pub fn nft_vmap(&self) -> String {
        let mut s = String::with_capacity(self.rules * 70 + 300);
        Self::nft_header(&mut s);
        s.push_str("  map verdicts {\n    type ipv4_addr . ipv4_addr . inet_service . inet_service : verdict\n");
        self.push_elements(&mut s, Some(" : drop"));
        s.push_str("  }\n");
        s.push_str("  chain input {\n    type filter hook input priority filter; policy accept;\n");
        writeln!(
            s,
            "    iifname \"{FLT_IF}\" ip saddr . ip daddr . udp sport . udp dport vmap @verdicts"
        )
        .expect("String");
        writeln!(s, "    udp dport {SINK_PORT} counter accept").expect("String");
        s.push_str("  }\n}\n");
        s
    }

    fn push_elements(&self, s: &mut String, verdict: Option<&str>) {
        let v = verdict.unwrap_or("");
        let elems: Vec<String> = match self.kind {
            RuleKind::WorstCase => (0..self.failing())
                .map(|i| {
                    format!(
                        "{GEN_IP} . {FLT_IP} . {SRC_PORT} . {}{v}",
                        Self::worst_port(i)
                    )
                })
                .collect(),
            // The ipfw rules wildcard fields a concatenation cannot, so the
            // set forms are only meaningful for the worst case; keep a
            // single never-matching element to stay loadable.
            _ => vec![format!("1.2.3.4 . 1.2.3.4 . 1 . 1{v}")],
        };
        if !elems.is_empty() {
            writeln!(s, "    elements = {{ {} }}", elems.join(",\n      ")).expect("String");
        }
    }
}

/// Empty iptables-save `filter` table, used to clear a filter.
pub fn iptables_empty() -> String {
    "*filter\n:INPUT ACCEPT [0:0]\n:FORWARD ACCEPT [0:0]\n:OUTPUT ACCEPT [0:0]\nCOMMIT\n".into()
}

/// Rule counts 25, 50, …, 25600 (doubling), as in the nf-HiPAC study.
pub fn doubling_sizes(from: usize, to: usize) -> Vec<usize> {
    let mut v = Vec::new();
    let mut n = from.max(1);
    while n <= to {
        v.push(n);
        n *= 2;
    }
    v
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn worst_case_counts_and_last_rule() {
        let r = RuleSpec {
            rules: 25,
            kind: RuleKind::WorstCase,
        };
        let t = r.iptables_save();
        assert_eq!(t.lines().filter(|l| l.starts_with("-A INPUT")).count(), 25);
        let last = t.lines().rfind(|l| l.starts_with("-A")).unwrap();
        assert!(last.ends_with("--dport 5001 -j ACCEPT"));
        assert!(!t.contains("--dport 5001 -j DROP"));
        let n = r.nft_linear();
        assert_eq!(n.matches(" drop\n").count(), 24);
        assert_eq!(n.matches("accept\n").count(), 1);
        assert_eq!(r.nft_set().matches("198.18.0.1 . ").count(), 24);
        assert_eq!(r.nft_vmap().matches(": drop").count(), 24);
    }

    #[test]
    fn ipfw_kinds() {
        let late = RuleSpec {
            rules: 1000,
            kind: RuleKind::IpfwLate,
        }
        .iptables_save();
        assert_eq!(late.matches("--dport 55555 -j DROP").count(), 999);
        let early = RuleSpec {
            rules: 1000,
            kind: RuleKind::IpfwEarly,
        }
        .nft_linear();
        assert_eq!(early.matches("ip saddr 1.2.3.4").count(), 999);
    }

    #[test]
    fn sizes() {
        let s = doubling_sizes(25, 25600);
        assert_eq!(s.len(), 11);
        assert_eq!(s[0], 25);
        assert_eq!(*s.last().unwrap(), 25600);
    }

    #[test]
    fn single_rule_is_only_accept() {
        let r = RuleSpec {
            rules: 1,
            kind: RuleKind::WorstCase,
        };
        assert_eq!(r.iptables_save().matches("-A INPUT").count(), 1);
        assert!(!r.nft_set().contains("elements"));
    }
}
