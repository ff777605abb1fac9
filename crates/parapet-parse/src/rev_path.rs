//! The reverse-path outcome ([`Field::RevPath`]) written back: nft's `fib
//! saddr [. iif] oif missing|exists`; iptables has no filter-table form
//! (`-m rpfilter` is valid only in the raw and mangle tables).

use parapet_model::*;

/// The nft expression for a rule's rev-path set.
pub(crate) fn nft(set: &IntervalSet) -> Result<String, String> {
    let all = IntervalSet::range(0, rev_path::MAX as u128);
    let set = set.intersect(&all);
    for iif in [true, false] {
        let missing = rev_path::missing(iif);
        let lookup = if iif {
            "fib saddr . iif oif"
        } else {
            "fib saddr oif"
        };
        if set == missing {
            return Ok(format!("{lookup} missing"));
        }
        if set == missing.complement(rev_path::MAX as u128) {
            return Ok(format!("{lookup} exists"));
        }
    }
    Err(format!(
        "no fib expression matches the reverse-path outcomes {{{}}} (only 'fib saddr [. iif] oif missing|exists')",
        format_set(Field::RevPath, &set, Family::V4)
    ))
}

/// The refusal of iptables-save for a rule matching the rev-path outcome.
pub(crate) fn iptables(r: &Rule) -> Result<String, String> {
    match r.matches.get(Field::RevPath) {
        None => Ok(String::new()),
        Some(_) => Err("fib saddr … oif (reverse path) has no filter-table iptables form: -m rpfilter is valid only in the raw and mangle tables' PREROUTING".into()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_spelling_round_trips() {
        for iif in [true, false] {
            let m = rev_path::missing(iif);
            let e = m.complement(rev_path::MAX as u128);
            for set in [m, e] {
                let text = nft(&set).unwrap();
                let back = if text.ends_with("missing") {
                    rev_path::missing(text.contains("iif"))
                } else {
                    rev_path::missing(text.contains("iif")).complement(rev_path::MAX as u128)
                };
                assert_eq!(back, set, "{text}");
            }
        }
        assert!(nft(&IntervalSet::point(rev_path::OTHER as u128)).is_err());
    }
}
