//! `-j`/`-g` targets and their options (REJECT, LOG), and the names of
//! targets parapet knows but does not support.

use super::rule::RuleParser;
use crate::common::*;
use parapet_model::*;

/// Options of the targets parapet supports; a word after them that is not
/// one of these (with its value) is the rule's again: iptables-restore
/// reads `-j RETURN -d 10.0.0.0/8` like `-d 10.0.0.0/8 -j RETURN`.
fn target_option_arity(target: &str, opt: &str) -> Option<usize> {
    match (target, opt) {
        ("REJECT", "--reject-with") | ("LOG", "--log-prefix" | "--log-level") => Some(1),
        ("LOG", f) if LOG_OPTIONS.iter().any(|(o, _)| *o == f) => Some(0),
        ("TCPMSS", "--set-mss") => Some(1),
        ("TCPMSS", "--clamp-mss-to-pmtu") => Some(0),
        (
            "NFLOG",
            "--nflog-group" | "--nflog-prefix" | "--nflog-range" | "--nflog-size"
            | "--nflog-threshold",
        ) => Some(1),
        ("AUDIT", "--type") => Some(1),
        ("MARK", o) if MARK_OPTIONS.contains(&o) => Some(1),
        _ => None,
    }
}

/// Non-terminal targets whose work no later rule of the chain can see, so
/// parapet leaves them to the kernel's own table and goes on to the next
/// rule: TCPMSS rewrites the MSS option of SYNs (no match reads it), NFLOG
/// and AUDIT send a copy to a logging daemon. They are named in `check`'s
/// summary and written back by `list`. Targets that change what later
/// rules match (CONNMARK, TOS, DSCP, TTL, SET) stay refused; MARK is
/// modelled (`Rule::set_mark`, later rules read the new mark).
pub(super) const KERNEL_TARGETS: [&str; 3] = ["TCPMSS", "NFLOG", "AUDIT"];

pub(super) const SUPPORTED_TARGETS: &str =
    "ACCEPT, DROP, REJECT, LOG, MARK, RETURN, or a user chain";

/// The options of `-j MARK` (libxt_MARK; iptables-save writes every one
/// as `--set-xmark`).
const MARK_OPTIONS: [&str; 5] = [
    "--set-xmark",
    "--set-mark",
    "--and-mark",
    "--or-mark",
    "--xor-mark",
];

/// Targets of iptables extensions we recognize by name, to say "not
/// supported" instead of "unknown chain".
pub(super) const KNOWN_UNSUPPORTED_TARGETS: &[&str] = &[
    "MARK",
    "CONNMARK",
    "DNAT",
    "SNAT",
    "MASQUERADE",
    "REDIRECT",
    "NETMAP",
    "CT",
    "NOTRACK",
    "NFLOG",
    "NFQUEUE",
    "QUEUE",
    "TCPMSS",
    "TOS",
    "DSCP",
    "TTL",
    "HL",
    "TEE",
    "TPROXY",
    "CLASSIFY",
    "SET",
    "AUDIT",
    "CHECKSUM",
    "CONNSECMARK",
    "SECMARK",
    "TRACE",
    "ULOG",
    "LED",
    "IDLETIMER",
    "RATEEST",
    "SYNPROXY",
    "HMARK",
    "CLUSTERIP",
];

impl RuleParser<'_> {
    /// `-j|-g NAME` and the words after it: reads the target's own options
    /// and returns how many words they took, the rule's options following
    /// (`None`: the target took them all, as an unsupported target does —
    /// the target is the error).
    pub(super) fn target_with_options(
        &mut self,
        opt: &str,
        name: &Word,
        rest: &[Word],
    ) -> Option<usize> {
        let t = name.text.as_str();
        if KNOWN_UNSUPPORTED_TARGETS.contains(&t) && !KERNEL_TARGETS.contains(&t) && t != "MARK" {
            self.target(opt, name, rest);
            return None;
        }
        let mut k = 0;
        while let Some(n) = rest.get(k).and_then(|o| target_option_arity(t, &o.text)) {
            k += 1 + n;
        }
        let k = k.min(rest.len());
        self.target(opt, name, &rest[..k]);
        Some(k)
    }

    pub(super) fn target(&mut self, opt: &str, name: &Word, rest: &[Word]) {
        let t = name.text.as_str();
        let goto = opt == "-g" || opt == "--goto";
        let mut opts: Vec<(&Word, Option<&Word>)> = Vec::new();
        let mut k = 0;
        while k < rest.len() {
            let o = &rest[k];
            let flag = LOG_OPTIONS.iter().any(|(f, _)| *f == o.text);
            if flag {
                opts.push((o, None));
                k += 1;
            } else {
                opts.push((o, rest.get(k + 1)));
                k += 2;
            }
        }
        let action = match t {
            _ if goto => {
                if let Some((o, _)) = opts.first() {
                    return self.err(o.col, format!("-g takes no options, found '{}'", o.text));
                }
                self.target = Some((Action::Goto(t.to_string()), Some((t.to_string(), name.col))));
                return;
            }
            "ACCEPT" | "DROP" | "RETURN" => {
                if let Some((o, _)) = opts.first() {
                    return self.err(o.col, format!("{t} takes no options, found '{}'", o.text));
                }
                match t {
                    "ACCEPT" => Action::Verdict(Verdict::Accept),
                    "DROP" => Action::Verdict(Verdict::Drop),
                    _ => Action::Return,
                }
            }
            "REJECT" => {
                let mut with = None;
                for (o, v) in opts {
                    match (o.text.as_str(), v) {
                        ("--reject-with", Some(v)) => with = Some(v.text.clone()),
                        ("--reject-with", None) => {
                            return self.err(
                                o.col,
                                "expected a type after --reject-with (like icmp-port-unreachable)",
                            )
                        }
                        (other, _) => {
                            return self.err(
                                o.col,
                                format!(
                                    "unknown REJECT option '{other}' (supported: --reject-with)"
                                ),
                            )
                        }
                    }
                }
                Action::Verdict(Verdict::Reject { with })
            }
            "LOG" => {
                let mut spec = LogSpec::default();
                for (o, v) in opts {
                    match (o.text.as_str(), v) {
                        ("--log-prefix", Some(v)) => spec.prefix = Some(v.text.clone()),
                        ("--log-level", Some(v)) => match parse_log_level(&v.text) {
                            Some(l) => spec.level = Some(l),
                            None => {
                                return self.err(v.col, format!("expected a log level 0-7 or a syslog name (warning, info, …), found '{}'", v.text))
                            }
                        },
                        (f, None) if LOG_OPTIONS.iter().any(|(o, _)| *o == f) => {
                            if !spec.options.iter().any(|o| o == f) {
                                spec.options.push(f.to_string());
                            }
                        }
                        (other, _) => {
                            return self.err(
                                o.col,
                                format!("LOG option '{other}' is not supported (supported: --log-prefix TEXT, --log-level LEVEL, --log-tcp-sequence, --log-tcp-options, --log-ip-options, --log-uid, --log-macdecode)"),
                            )
                        }
                    }
                }
                // One order, whatever the file's, so a listing reads back equal.
                spec.options
                    .sort_by_key(|o| LOG_OPTIONS.iter().position(|(f, _)| f == o));
                Action::Log(spec)
            }
            _ if KERNEL_TARGETS.contains(&t) && !goto => {
                let mut text = format!("-j {t}");
                for (o, v) in &opts {
                    if target_option_arity(t, &o.text).is_none() {
                        return self.err(o.col, format!("unknown {t} option '{}'", o.text));
                    }
                    text.push(' ');
                    text.push_str(&o.text);
                    if let Some(v) = v {
                        text.push(' ');
                        text.push_str(&shell_quote(&v.text));
                    }
                }
                if t == "TCPMSS" && opts.len() != 1 {
                    return self.err(
                        name.col,
                        "TCPMSS needs one of --set-mss N or --clamp-mss-to-pmtu",
                    );
                }
                self.kernel_target = Some(text);
                Action::Count
            }
            "MARK" if !goto => {
                let Some(change) = self.mark_target(name, &opts) else {
                    return;
                };
                self.set_mark = Some(change);
                Action::Count
            }
            "CONNMARK" => {
                return self.err(
                    name.col,
                    format!("target '{t}' is not supported: it changes the connection's mark, which later rules (-m connmark) read, and parapet does not change connections; keep the rule in iptables' mangle table"),
                );
            }
            _ => {
                if let Some((o, _)) = opts.first() {
                    let msg = if KNOWN_UNSUPPORTED_TARGETS.contains(&t) {
                        format!("target '{t}' is not supported (supported: {SUPPORTED_TARGETS})")
                    } else {
                        format!("a jump to chain '{t}' takes no options, found '{}'", o.text)
                    };
                    return self.err(
                        if KNOWN_UNSUPPORTED_TARGETS.contains(&t) {
                            name.col
                        } else {
                            o.col
                        },
                        msg,
                    );
                }
                self.target = Some((Action::Jump(t.to_string()), Some((t.to_string(), name.col))));
                return;
            }
        };
        self.target = Some((action, None));
    }
}

impl RuleParser<'_> {
    /// `-j MARK` with its one option: the change it makes, as xt_MARK's
    /// `(mark & ~mask) ^ value` (libxt_MARK's parse of each form).
    fn mark_target(&mut self, name: &Word, opts: &[(&Word, Option<&Word>)]) -> Option<MarkSet> {
        let [(o, v)] = opts else {
            self.err(
                name.col,
                "MARK needs one of --set-xmark, --set-mark, --and-mark, --or-mark, --xor-mark",
            );
            return None;
        };
        let Some(v) = v else {
            self.err(o.col, format!("{} needs a value", o.text));
            return None;
        };
        let num = |s: &str| super::header::parse_number(s, u32::MAX);
        let masked = matches!(o.text.as_str(), "--set-xmark" | "--set-mark");
        let (value, mask) = match v.text.split_once('/') {
            Some((a, b)) if masked => (num(a), num(b)),
            None if masked => (num(&v.text), Some(u32::MAX)),
            Some(_) => (None, None),
            None => (num(&v.text), Some(0)),
        };
        let (Some(value), Some(mask)) = (value, mask) else {
            let form = if masked { "VALUE[/MASK]" } else { "VALUE" };
            self.err(
                v.col,
                format!(
                    "{} takes {form} (numbers up to 0xffffffff), found '{}'",
                    o.text, v.text
                ),
            );
            return None;
        };
        Some(match o.text.as_str() {
            "--set-xmark" => MarkSet::xmark(value, mask),
            "--set-mark" => MarkSet::set(value, mask),
            "--and-mark" => MarkSet::and(value),
            "--or-mark" => MarkSet::or(value),
            "--xor-mark" => MarkSet::xor(value),
            other => {
                self.err(o.col, format!("unknown MARK option '{other}'"));
                return None;
            }
        })
    }
}

/// Syslog levels by number or name.
pub(crate) const LOG_LEVELS: [&str; 8] = [
    "emerg", "alert", "crit", "err", "warning", "notice", "info", "debug",
];

pub(crate) fn parse_log_level(s: &str) -> Option<u8> {
    if let Ok(n) = s.parse::<u8>() {
        return (n <= 7).then_some(n);
    }
    let s = s.to_ascii_lowercase();
    let s = match s.as_str() {
        "error" => "err",
        "warn" => "warning",
        "panic" => "emerg",
        other => other,
    };
    LOG_LEVELS.iter().position(|l| *l == s).map(|p| p as u8)
}
