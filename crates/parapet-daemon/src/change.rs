//! The one description of a change to the daemon's state: [`Change`].
//!
//! Every change — from a client command, from `ban`, from the journal or
//! snapshot at start-up — is a `Change` applied by
//! `State::commit` (in `state.rs`), which updates the set store or the
//! active ruleset, appends the journal record (for a client's change) and
//! mirrors it into the kernel. The journal records exactly these
//! (`journal::encode`); snapshots are written as them too.

use crate::compiled::CompiledRuleset;
use parapet_dataplane::{AttachPoint, Mode};
use parapet_sets::parse_type;
use parapet_sets::{Element, KeyPart, Policy, SetDesc};
use serde::{Deserialize, Serialize};

/// Default ban set for IPv4 addresses.
pub const BAN4: &str = "parapet-ban4";
/// Default ban set for IPv6 addresses.
pub const BAN6: &str = "parapet-ban6";

/// How a set was created: the `set.create` request, kept so that it can be
/// journaled, snapshotted and listed exactly as the client asked.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct SetSpec {
    /// Type text (nft or ipset spelling).
    #[serde(rename = "type")]
    pub typ: String,
    /// Family for ipset types.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub family: Option<String>,
    /// `interval`, `timeout`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub flags: Vec<String>,
    /// Default timeout, seconds (implies the timeout flag).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timeout: Option<u64>,
    /// Maximum number of elements.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub size: Option<usize>,
    /// `performance` or `memory`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub policy: Option<String>,
}

impl SetSpec {
    /// The `parapet-sets` description of this spec.
    pub fn desc(&self) -> Result<(SetDesc, Vec<KeyPart>), String> {
        let (dims, mut interval) = parse_type(&self.typ, self.family.as_deref())?;
        let mut timeouts = self.timeout.is_some();
        for f in &self.flags {
            match f.as_str() {
                "interval" => interval = true,
                "timeout" => timeouts = true,
                // Replicated to the fleet (`parapetd --fleet`); no effect
                // on the set itself.
                "shared" => {}
                other => {
                    return Err(format!(
                        "unknown set flag `{other}` (expected interval, timeout, shared)"
                    ))
                }
            }
        }
        let mut d = SetDesc::new(&dims);
        if interval {
            d = d.interval();
        }
        if timeouts {
            d = d.timeouts(self.timeout.unwrap_or(0).saturating_mul(1000));
        }
        if let Some(n) = self.size {
            if n == 0 {
                return Err("size must be at least 1".into());
            }
            d = d.size(n).maxelem(n);
        }
        d = d.policy(match self.policy.as_deref() {
            None | Some("performance") => Policy::Performance,
            Some("memory") => Policy::Memory,
            Some(p) => {
                return Err(format!(
                    "unknown policy `{p}` (expected performance or memory)"
                ))
            }
        });
        Ok((d, dims))
    }
}

/// One change to the state.
pub enum Change {
    /// `set.create` (or `ban` creating its set).
    SetCreate {
        /// Set name.
        name: String,
        /// How the set was asked for.
        spec: SetSpec,
    },
    /// `set.destroy`.
    SetDestroy {
        /// Set name.
        name: String,
    },
    /// `set.add`, `ban`: parsed elements, each with its *absolute* expiry
    /// in Unix ms in `expires` (`None` = permanent). Expired ones are not
    /// added (a replayed record may hold some).
    SetAdd {
        /// Set name.
        name: String,
        /// Elements (keys already matched to the set's type).
        elems: Vec<Element>,
    },
    /// `set.del`, `unban`.
    SetDel {
        /// Set name.
        name: String,
        /// Elements.
        elems: Vec<Element>,
    },
    /// `set.flush`.
    SetFlush {
        /// Set name.
        name: String,
    },
    /// `apply`: a compiled ruleset and the text it came from.
    Apply {
        /// File name given at apply.
        name: String,
        /// Source text as applied (what the journal keeps).
        text: String,
        /// The compiled ruleset.
        compiled: CompiledRuleset,
    },
    /// `attach`: the eBPF program on an interface (mode as requested).
    Attach {
        /// Interface name.
        iface: String,
        /// Where the program runs (`--hook`).
        hook: AttachPoint,
        /// XDP mode.
        mode: Mode,
    },
    /// `detach` from one hook of an interface.
    Detach {
        /// Interface name.
        iface: String,
        /// Where the program runs (`--hook`).
        hook: AttachPoint,
    },
}

/// The spec `ban` gives a ban set it creates.
pub fn ban_spec(name: &str) -> SetSpec {
    SetSpec {
        typ: if name == BAN4 {
            "ipv4_addr"
        } else {
            "ipv6_addr"
        }
        .into(),
        family: None,
        flags: vec!["timeout".into()],
        timeout: None,
        size: None,
        policy: None,
    }
}
