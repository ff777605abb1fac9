//! `-m mac [!] --mac-source XX:XX:XX:XX:XX:XX` (xt_mac.c): the Ethernet
//! header's source address equals the given one, xor the `!`; no match at
//! all (negated or not) when the packet has no Ethernet header
//! (`parapet_model::mac`). The kernel registers the match for PREROUTING,
//! INPUT and FORWARD only, so iptables-restore refuses it in OUTPUT and
//! POSTROUTING.

use super::option_arg::OptionArg;
use super::rule::RuleParser;
use parapet_model::*;

/// The MAC match module.
pub(super) const MAC_MATCHES: &[&str] = &["mac"];

impl RuleParser<'_> {
    /// `--mac-source MAC` of the last `-m mac`.
    pub(super) fn mac_option(&mut self, arg: OptionArg<'_>) {
        let (_, col, negated, v, vcol) = arg.parts();
        let chain = self.chain;
        if matches!(chain, "OUTPUT" | "POSTROUTING") {
            return self.err(
                col,
                format!("iptables refuses -m mac in {chain} (xt_mac is valid only from PREROUTING, INPUT and FORWARD): a packet has no received Ethernet header there"),
            );
        }
        if self.matches.get(Field::MacSrc).is_some() {
            return self.err(col, "--mac-source given twice");
        }
        let Some(mac) = mac::parse(v) else {
            return self.err(
                vcol,
                format!("expected a MAC address XX:XX:XX:XX:XX:XX after --mac-source, found '{v}'"),
            );
        };
        self.matches
            .constrain(Field::MacSrc, mac::match_values(mac, negated.is_some()));
    }
}
