//! `-m tcp [!] --tcp-option N` (`Field::TcpOption`) in the listings:
//! iptables writes it; nft has no spelling that agrees on every segment.

use super::spelling::{rerr, RenderError};
use parapet_model::{Field, Rule};
use std::fmt::Write;

/// Writes the rule's first option test into `proto_opts` (the options of
/// its `-m tcp`) and returns the others, each in a `-m tcp` of its own
/// (libxt_tcp takes one `--tcp-option` per match).
pub(super) fn iptables(
    proto_opts: &mut String,
    r: &Rule,
    port_mod: Option<&str>,
) -> Result<String, RenderError> {
    let mut more = String::new();
    let mut first = true;
    for (field, set) in r.matches.iter() {
        let Field::TcpOption(kind) = field else {
            continue;
        };
        if port_mod != Some("tcp") {
            return Err(rerr(
                r.id,
                "--tcp-option needs the rule to be restricted to tcp (iptables needs -p tcp)",
            ));
        }
        let not = if set.ranges() == [(0, 0)] { "! " } else { "" };
        let out = if first { &mut *proto_opts } else { &mut more };
        let _ = write!(
            out,
            "{} {not}--tcp-option {kind}",
            if first { "" } else { " -m tcp" }
        );
        first = false;
    }
    Ok(more)
}

/// nft's `tcp option N exists` (nft_exthdr) walks the options another way
/// than xt_tcpudp: it never reads the last byte as a kind, and an option
/// whose length runs past the header is missing, where the iptables walk
/// finds both. A rule testing an option is refused rather than written
/// with another meaning.
pub(super) fn nft_refusal(r: &Rule) -> Result<(), RenderError> {
    if r.matches
        .iter()
        .any(|(f, _)| matches!(f, Field::TcpOption(_)))
    {
        return Err(rerr(
            r.id,
            "-m tcp --tcp-option has no nft spelling that agrees on every segment (nft's tcp option N exists never reads the last option byte as a kind and misses an option whose length runs past the header; xt_tcpudp finds both): list it as iptables",
        ));
    }
    Ok(())
}
