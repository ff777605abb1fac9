//! `-m owner [!] --uid-owner U[-U] [!] --gid-owner G[-G] [!]
//! --socket-exists` (xt_owner.c, revision 1): the credentials of the file
//! behind the socket of a packet this host sends, packed with whether
//! there is a socket (`parapet_model::owner`). The kernel registers the
//! match for OUTPUT and POSTROUTING only, so iptables-restore refuses it in
//! INPUT, FORWARD and PREROUTING. `--suppl-groups` (the socket owner's
//! supplementary groups) is refused: the packed value holds one gid.

use super::option_arg::OptionArg;
use super::rule::RuleParser;
use crate::owner_ids::{xt_range, OwnerKind};
use parapet_model::*;

/// The owner match module.
pub(super) const OWNER_MATCHES: &[&str] = &["owner"];
/// Its options.
pub(super) const OWNER_OPTIONS: &[&str] = &[
    "--uid-owner",
    "--gid-owner",
    "--socket-exists",
    "--suppl-groups",
];

impl RuleParser<'_> {
    /// `-m owner` at column `col`: checks the chain and the previous
    /// `-m owner`'s options.
    pub(super) fn owner_module(&mut self, col: u32) {
        let chain = self.chain;
        if matches!(chain, "INPUT" | "FORWARD" | "PREROUTING") {
            return self.err(
                col,
                format!("iptables refuses -m owner in {chain} (xt_owner is valid only from OUTPUT and POSTROUTING): only a packet this host sends has a socket"),
            );
        }
        self.check_owner();
        self.owner_pending = Some(col);
    }

    /// One option of the last `-m owner`.
    pub(super) fn owner_option(&mut self, arg: OptionArg<'_>) {
        let (opt, col, negated, v, vcol) = arg.parts();
        self.owner_pending = None;
        let neg = negated.is_some();
        match opt {
            "--socket-exists" => self
                .matches
                .constrain(Field::SkUid, owner::xt_socket_exists(neg)),
            "--suppl-groups" => self.err(
                col,
                "--suppl-groups is not supported: parapet's packet holds the socket owner's group, not its supplementary groups",
            ),
            _ => {
                let (kind, field) = if opt == "--uid-owner" {
                    (OwnerKind::User, Field::SkUid)
                } else {
                    (OwnerKind::Group, Field::SkGid)
                };
                match xt_range(kind, v) {
                    Ok((lo, hi)) if lo > owner::MAX_ID || hi > owner::MAX_ID => self.err(
                        vcol,
                        format!("{opt} {v}: ids above {} are not supported", owner::MAX_ID),
                    ),
                    Ok((lo, hi)) if lo > hi => {
                        // loads, and no id is in it
                        let none = if neg {
                            IntervalSet::range(0, u32::MAX as u128)
                        } else {
                            IntervalSet::empty()
                        };
                        self.matches.constrain(field, none)
                    }
                    Ok((lo, hi)) => self.matches.constrain(field, owner::xt_ids(lo, hi, neg)),
                    Err(e) => self.err(vcol, e),
                }
            }
        }
    }

    /// A `-m owner` without options: libxt_owner's error.
    pub(super) fn check_owner(&mut self) {
        if let Some(col) = self.owner_pending.take() {
            self.err(
                col,
                "-m owner needs at least one of --uid-owner, --gid-owner or --socket-exists",
            );
        }
    }
}
