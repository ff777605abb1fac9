//! What a rule does: its [`Action`] — a [`Verdict`], a LOG ([`LogSpec`]),
//! a count, or a jump/goto/return.

use serde::{Deserialize, Serialize};
use std::fmt;

/// What a terminal rule or a chain policy does with a packet.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum Verdict {
    /// Let the packet through.
    Accept,
    /// Discard silently.
    Drop,
    /// Discard and tell the sender: `with` is iptables' `--reject-with` type
    /// (`icmp-port-unreachable`, `tcp-reset`, …); `None` means the default
    /// for the family.
    Reject {
        /// The `--reject-with` type, as written.
        with: Option<String>,
    },
}

impl Verdict {
    /// Upper-case name as iptables writes it.
    pub fn name(&self) -> &'static str {
        match self {
            Verdict::Accept => "ACCEPT",
            Verdict::Drop => "DROP",
            Verdict::Reject { .. } => "REJECT",
        }
    }

    /// True for verdicts that let the packet pass.
    pub fn passes(&self) -> bool {
        matches!(self, Verdict::Accept)
    }
}

impl fmt::Display for Verdict {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// Parameters of a LOG rule.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct LogSpec {
    /// `--log-prefix`.
    pub prefix: Option<String>,
    /// `--log-level`, syslog 0-7.
    pub level: Option<u8>,
    /// What else the log line carries, as iptables names it, in
    /// [`LOG_OPTIONS`] order: `--log-tcp-sequence`, `--log-tcp-options`,
    /// `--log-ip-options`, `--log-uid`, `--log-macdecode` (nft `log flags
    /// tcp sequence,options`, `ip options`, `skuid`, `ether`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub options: Vec<String>,
}

/// iptables' LOG flags with nft's `log flags` spelling of each, in the order
/// both print them.
pub const LOG_OPTIONS: [(&str, &str); 5] = [
    ("--log-tcp-sequence", "tcp sequence"),
    ("--log-tcp-options", "tcp options"),
    ("--log-ip-options", "ip options"),
    ("--log-uid", "skuid"),
    ("--log-macdecode", "ether"),
];

/// What a rule does when it matches.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum Action {
    /// Decide and stop.
    Verdict(Verdict),
    /// Log and go on (non-terminal).
    Log(LogSpec),
    /// No target: count and go on (non-terminal).
    Count,
    /// Leave the current chain; in a base chain, the policy decides.
    Return,
    /// Evaluate the named chain, then come back (unless it decides).
    Jump(String),
    /// Continue in the named chain without coming back here: when it ends,
    /// evaluation resumes after the rule that jumped to the current chain.
    Goto(String),
}

impl Action {
    /// True for actions that end evaluation when they match.
    pub fn is_terminal(&self) -> bool {
        matches!(self, Action::Verdict(_))
    }
}
