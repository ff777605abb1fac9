//! Packet fields the kernel's netfilter changes in parts parapet leaves to
//! it, and the guard that keeps parapet from deciding on such a field.
//!
//! parapet does not change packets. Mangling is left where it is: nft
//! chains that only mangle (a `type filter` base chain whose rules set a
//! field — `ip dscp set`, `ip daddr set` — and decide nothing, left to the
//! kernel by `nft/kernel.rs`), iptables' `*mangle` table (`-j MARK`, `-j
//! DSCP`, …) and nft statements left to the kernel (`meta mark set`). The
//! kernel's filter chains then see the changed field, and parapet — at XDP
//! or tc before the mangling, or at a hook in another order — could see
//! the value from before: a parapet rule matching such a field could
//! decide otherwise than the kernel would. So such a rule is refused, with
//! the part that changes the field named.
//!
//! Fields are compared by their model name ([`Field::name`]): the guard
//! covers every field the model has, and a field added later (the packet
//! mark as `mark`, the connection mark as `ctmark`) is covered as soon as
//! the model names it so. NAT (`dnat to`, `*nat`) is not mangling here:
//! parapet's netfilter hooks see NAT's result as the kernel's filter
//! chains do (hooks.md).

use crate::error::Errors;
use parapet_model::Ruleset;

/// The fields the nft set statements among `words` change (`ip dscp set`,
/// `meta mark set`, nft's short `mark set`, `ct mark set`), each with the
/// words that say so.
fn nft_set_fields(words: &[&str]) -> Vec<(&'static str, String)> {
    let mut out = Vec::new();
    for k in (1..words.len()).filter(|&k| words[k] == "set") {
        let before = if k >= 2 { words[k - 2] } else { "" };
        let field = match (before, words[k - 1]) {
            ("ct", "mark") => "ctmark",
            (_, "mark") => "mark",
            ("ip" | "ip6", "saddr") => "saddr",
            ("ip" | "ip6", "daddr") => "daddr",
            ("ip" | "ip6", "dscp") => "dscp",
            ("ip", "ttl") | ("ip6", "hoplimit") => "ttl",
            ("tcp" | "udp" | "udplite" | "sctp" | "th", "sport") => "sport",
            ("tcp" | "udp" | "udplite" | "sctp" | "th", "dport") => "dport",
            _ => continue,
        };
        let what = if before == "ct" || before == "meta" || words[k - 1] != "mark" {
            format!("{before} {} set", words[k - 1])
        } else {
            "mark set".to_string()
        };
        out.push((field, what));
    }
    out
}

/// The model field an iptables target changes.
fn iptables_target_field(target: &str) -> Option<&'static str> {
    Some(match target {
        "MARK" => "mark",
        "CONNMARK" => "ctmark",
        "DSCP" | "TOS" => "dscp",
        "TTL" | "HL" => "ttl",
        _ => return None,
    })
}

/// The fields the parts of `rs` left to the kernel change, each with what
/// changes it (the first such part), as the message names it.
fn kernel_changes(rs: &Ruleset) -> Vec<(&'static str, String)> {
    let mut out: Vec<(&'static str, String)> = Vec::new();
    let mut add = |field: &'static str, by: String| {
        if !out.iter().any(|c| c.0 == field) {
            out.push((field, by));
        }
    };
    for l in &rs.left_to_kernel {
        let words: Vec<&str> = l.text.split_whitespace().collect();
        if l.nft {
            let chain = l.chains.first().map(|c| c.0.as_str()).unwrap_or("");
            for (f, what) in nft_set_fields(&words) {
                add(
                    f,
                    format!(
                        "'{what}' in chain '{chain}' of table {} {} (left to the kernel)",
                        l.family.nft_name(),
                        l.table
                    ),
                );
            }
        } else if l.table == "mangle" {
            for w in words.windows(2).filter(|w| w[0] == "-j") {
                if let Some(f) = iptables_target_field(w[1]) {
                    add(
                        f,
                        format!("'-j {}' in table 'mangle' (left to the kernel)", w[1]),
                    );
                }
            }
        }
    }
    for r in rs.rules() {
        for stmt in &r.kernel {
            let words: Vec<&str> = stmt.split_whitespace().collect();
            for (f, what) in nft_set_fields(&words) {
                add(f, format!("'{what}' of rule {} (left to the kernel)", r.id));
            }
        }
    }
    out
}

/// Refuses every rule parapet enforces that matches a field the kernel
/// changes in a part left to it.
pub(crate) fn refuse_matches_on_mangled_fields(rs: &Ruleset, errs: &mut Errors) {
    let changes = kernel_changes(rs);
    if changes.is_empty() {
        return;
    }
    for r in rs.rules() {
        for (field, by) in &changes {
            let masked = r
                .all_matches()
                .masked()
                .iter()
                .any(|m| m.field.name() == *field);
            if masked || r.all_matches().iter().any(|(f, _)| f.name() == *field) {
                errs.push(
                    r.origin.line,
                    1,
                    format!(
                        "this rule matches {field}, which {by} changes: parapet does not change packets and may see the value from before the change, so it could decide otherwise than the kernel; match it in the kernel's own chains, or leave the field unchanged"
                    ),
                );
            }
        }
    }
}
