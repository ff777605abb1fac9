//! `-m recent`'s options (libxt_recent's spelling) and the checks
//! `xt_recent`'s `recent_mt_check` makes when the rule is loaded.

use super::option_arg::OptionArg;
use super::rule::RuleParser;
use parapet_model::*;

impl RuleParser<'_> {
    pub(super) fn recent_option(&mut self, arg: OptionArg<'_>) {
        let (opt, col, negated, v, vcol) = arg.parts();
        let family = self.family;
        let Some((draft, _)) = self.recent.as_mut() else {
            return self.err(col, format!("{opt} needs -m recent before it"));
        };
        let command = match opt {
            "--set" => Some(RecentCommand::Set),
            "--rcheck" => Some(RecentCommand::Rcheck),
            "--update" => Some(RecentCommand::Update),
            "--remove" => Some(RecentCommand::Remove),
            _ => None,
        };
        if let Some(c) = command {
            if let Some((prev, _)) = draft.command {
                return self.err(
                    col,
                    format!(
                        "-m recent takes one of --set, --rcheck, --update, --remove: {} was given already",
                        prev.option()
                    ),
                );
            }
            draft.command = Some((c, col));
            draft.recent.command = c;
            draft.recent.invert = negated.is_some();
            return;
        }
        if let Some(c) = negated {
            return self.err(
                c,
                format!("'!' cannot negate {opt} (negate the command: ! --rcheck)"),
            );
        }
        let r = &mut draft.recent;
        let result: Result<(), String> = match opt {
            "--rsource" => {
                r.rdest = false;
                Ok(())
            }
            "--rdest" => {
                r.rdest = true;
                Ok(())
            }
            "--reap" => {
                r.reap = true;
                draft.modifiers.push(("--reap", col));
                Ok(())
            }
            "--rttl" => {
                r.rttl = true;
                draft.modifiers.push(("--rttl", col));
                Ok(())
            }
            "--seconds" => match v.parse::<u32>() {
                Ok(s) => {
                    r.seconds = s;
                    draft.modifiers.push(("--seconds", col));
                    Ok(())
                }
                Err(_) => Err(format!("expected a number of seconds, found '{v}'")),
            },
            "--hitcount" => match v.parse::<u32>() {
                Ok(h) if h > RECENT_MAX_HITCOUNT => Err(format!(
                    "--hitcount {h} is more than the kernel's {RECENT_MAX_HITCOUNT} (xt_recent: hitcount is larger than allowed maximum)"
                )),
                Ok(h) => {
                    r.hitcount = h;
                    draft.modifiers.push(("--hitcount", col));
                    Ok(())
                }
                Err(_) => Err(format!("expected a hit count, found '{v}'")),
            },
            "--name" => {
                if v.is_empty() || v.len() >= 200 || v.contains('/') {
                    Err(format!(
                        "--name '{v}': a table name has 1 to 199 bytes and no '/' (it is a file in /proc/net/xt_recent)"
                    ))
                } else {
                    r.name = v.to_string();
                    Ok(())
                }
            }
            "--mask" => parse_mask(family, v).map(|(m4, m6)| {
                r.mask_v4 = m4;
                r.mask_v6 = m6;
            }),
            _ => Err(format!("unknown -m recent option '{opt}'")),
        };
        if let Err(e) = result {
            let c = if matches!(opt, "--seconds" | "--hitcount" | "--name" | "--mask") {
                vcol
            } else {
                col
            };
            self.err(c, e);
        }
    }

    /// `recent_mt_check`: exactly one command; `--seconds`, `--hitcount`,
    /// `--rttl` and `--reap` only with `--rcheck`/`--update`; `--reap` needs
    /// `--seconds`.
    pub(super) fn check_recent(&mut self) {
        let Some((draft, mcol)) = self.recent.clone() else {
            return;
        };
        let Some((command, _)) = draft.command else {
            return self.err(
                mcol,
                "-m recent needs one of --set, --rcheck, --update, --remove",
            );
        };
        if matches!(command, RecentCommand::Set | RecentCommand::Remove) {
            if let Some((what, col)) = draft.modifiers.first() {
                return self.err(
                    *col,
                    format!(
                        "{what} only goes with --rcheck or --update, not {}",
                        command.option()
                    ),
                );
            }
        }
        if draft.recent.reap && draft.recent.seconds == 0 {
            let col = draft
                .modifiers
                .iter()
                .find(|(w, _)| *w == "--reap")
                .map_or(mcol, |m| m.1);
            self.err(col, "--reap needs --seconds");
        }
    }
}

/// `--mask` of a rule of `family`: (IPv4 mask, IPv6 prefix length).
fn parse_mask(family: Family, v: &str) -> Result<(u32, u8), String> {
    match family {
        Family::V4 => v
            .parse::<std::net::Ipv4Addr>()
            .map(|a| (u32::from(a), 128))
            .map_err(|_| format!("expected an IPv4 mask like 255.255.255.0, found '{v}'")),
        Family::V6 => {
            let a: u128 = v
                .parse::<std::net::Ipv6Addr>()
                .map_err(|_| format!("expected an IPv6 mask like ffff:ffff::, found '{v}'"))?
                .into();
            let len = a.leading_ones();
            if len < 128 && a << len != 0 {
                return Err(format!(
                    "IPv6 --mask '{v}' is not a prefix: parapet supports contiguous IPv6 masks only"
                ));
            }
            Ok((u32::MAX, len as u8))
        }
    }
}
