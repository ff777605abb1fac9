//! ufw's rule files are fragments: `before.rules`, `user.rules` and
//! `after.rules` (and their `6` twins) jump to chains that ufw's own code
//! creates (`ufw-skip-to-policy-input`, `ufw-logging-deny`, …) and to each
//! other's chains, and ufw loads each of them with `iptables-restore -n`
//! into the table it has set up. A fragment on its own is refused, rightly
//! ("jump to unknown chain"); loaded as ufw loads it, it is a ruleset.
//!
//! [`as_ufw_loads`] puts a fragment into the frame ufw builds: every chain
//! ufw's code and the other fragments declare (those the fragment does not
//! declare itself), the jumps from the built-in chains, and the rules ufw's
//! code writes into its own chains for the default policies (incoming deny,
//! outgoing allow, logging low) — taken from a real ufw host's dump,
//! `iptables/diekmann_ufw_server2.rules`. The other fragments' rules are not
//! added: each fragment is judged on its own content.

/// The chains ufw declares, without the `ufw-`/`ufw6-` prefix.
const CHAINS: [&str; 32] = [
    "after-forward",
    "after-input",
    "after-logging-forward",
    "after-logging-input",
    "after-logging-output",
    "after-output",
    "before-forward",
    "before-input",
    "before-logging-forward",
    "before-logging-input",
    "before-logging-output",
    "before-output",
    "logging-allow",
    "logging-deny",
    "not-local",
    "reject-forward",
    "reject-input",
    "reject-output",
    "skip-to-policy-forward",
    "skip-to-policy-input",
    "skip-to-policy-output",
    "track-forward",
    "track-input",
    "track-output",
    "user-forward",
    "user-input",
    "user-limit",
    "user-limit-accept",
    "user-logging-forward",
    "user-logging-input",
    "user-logging-output",
    "user-output",
];

/// The rules ufw's code writes (`P` stands for the prefix).
const CODE_RULES: &str = "\
-A INPUT -j P-before-logging-input
-A INPUT -j P-before-input
-A INPUT -j P-after-input
-A INPUT -j P-after-logging-input
-A INPUT -j P-reject-input
-A INPUT -j P-track-input
-A FORWARD -j P-before-logging-forward
-A FORWARD -j P-before-forward
-A FORWARD -j P-after-forward
-A FORWARD -j P-after-logging-forward
-A FORWARD -j P-reject-forward
-A FORWARD -j P-track-forward
-A OUTPUT -j P-before-logging-output
-A OUTPUT -j P-before-output
-A OUTPUT -j P-after-output
-A OUTPUT -j P-after-logging-output
-A OUTPUT -j P-reject-output
-A OUTPUT -j P-track-output
-A P-before-input -j P-user-input
-A P-before-output -j P-user-output
-A P-before-forward -j P-user-forward
-A P-logging-allow -m limit --limit 3/min --limit-burst 10 -j LOG --log-prefix \"[UFW ALLOW] \"
-A P-logging-deny -m limit --limit 3/min --limit-burst 10 -j LOG --log-prefix \"[UFW BLOCK] \"
-A P-skip-to-policy-forward -j DROP
-A P-skip-to-policy-input -j DROP
-A P-skip-to-policy-output -j ACCEPT
-A P-track-output -p tcp -m conntrack --ctstate NEW -j ACCEPT
-A P-track-output -p udp -m conntrack --ctstate NEW -j ACCEPT
";

/// The corpus files that are ufw fragments.
pub fn is_fragment(file: &str) -> bool {
    [
        "iptables/ufw_before.rules",
        "iptables/ufw_user.rules",
        "iptables/ufw_after.rules",
        "iptables/ufw_before6.rules",
        "iptables/ufw_user6.rules",
        "iptables/ufw_after6.rules",
    ]
    .contains(&file)
}

/// The fragment inside ufw's frame: the chains after its `*filter` line,
/// ufw's rules before its `COMMIT` (so its line numbers move by the
/// frame's length; the outcome, not the position, is what the suite
/// records). `None` when it has no `*filter` … `COMMIT`.
pub fn as_ufw_loads(file: &str, text: &str) -> Option<String> {
    let prefix = if file.ends_with("6.rules") {
        "ufw6"
    } else {
        "ufw"
    };
    let declared = |chain: &str| {
        text.lines().any(|l| {
            l.trim_start()
                .strip_prefix(':')
                .and_then(|l| l.split_whitespace().next())
                == Some(chain)
        })
    };
    let mut chains = String::from(":INPUT DROP [0:0]\n:FORWARD DROP [0:0]\n:OUTPUT ACCEPT [0:0]\n");
    for c in CHAINS {
        let name = format!("{prefix}-{c}");
        if !declared(&name) {
            chains.push_str(&format!(":{name} - [0:0]\n"));
        }
    }
    let rules = CODE_RULES.replace("P-", &format!("{prefix}-"));
    let open = text.find("*filter\n")? + "*filter\n".len();
    let commit = open + text[open..].find("\nCOMMIT")? + 1;
    Some(format!(
        "{}{chains}{}{rules}{}",
        &text[..open],
        &text[open..commit],
        &text[commit..]
    ))
}
