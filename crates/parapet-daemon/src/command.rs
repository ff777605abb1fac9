//! The daemon's commands, typed: one [`Command`] variant per protocol
//! `cmd`, holding exactly the fields that command reads, already checked.
//!
//! A request line is parsed into the flat [`Request`] first (strict: a
//! field no command knows is a `parse` error; fields another command knows
//! are ignored) and then converted here, once. The conversion is the only
//! place that looks at the command's name, and it gives the protocol's
//! errors: `unknown_cmd` for a name no command has, `invalid` for a missing
//! or bad field.

use crate::change::SetSpec;
use crate::kernel::parse_hook_mode;
use crate::proto::{code, ErrorReply, Request, Str};
use parapet_dataplane::{AttachPoint, Mode};

/// One command, as the daemon executes it.
#[derive(Debug)]
pub enum Command<'a> {
    /// `ping`: protocol and daemon version.
    Ping,
    /// `stats`: the daemon's counters.
    Stats,
    /// `set.create`.
    SetCreate {
        /// Set name.
        set: String,
        /// Type, flags, sizing, as requested.
        spec: SetSpec,
        /// Succeed when an identical set exists.
        exist: bool,
    },
    /// `set.destroy`.
    SetDestroy {
        /// Set name.
        set: String,
    },
    /// `set.add`: at least one element.
    SetAdd {
        /// Set name.
        set: String,
        /// Element texts (borrowed from the request line).
        elems: Vec<Str<'a>>,
        /// Seconds; `None` = the set's default, 0 = permanent.
        timeout: Option<u64>,
    },
    /// `set.del`: at least one element.
    SetDel {
        /// Set name.
        set: String,
        /// Element texts.
        elems: Vec<Str<'a>>,
    },
    /// `set.flush`.
    SetFlush {
        /// Set name.
        set: String,
    },
    /// `set.list`: every set, or one set's elements.
    SetList {
        /// The set whose elements to list.
        set: Option<String>,
    },
    /// `set.test`: is one element covered?
    SetTest {
        /// Set name.
        set: String,
        /// Element text.
        elem: String,
    },
    /// `set.explain`: the backend chosen for a set, and why.
    SetExplain {
        /// Set name.
        set: String,
    },
    /// `ban`: addresses into the named set or the family's ban set.
    Ban {
        /// Target set; `None` = `parapet-ban4` / `parapet-ban6`.
        set: Option<String>,
        /// Addresses (at least one).
        elems: Vec<Str<'a>>,
        /// Seconds; `None` = the set's default.
        timeout: Option<u64>,
    },
    /// `unban`.
    Unban {
        /// Target set, as for `ban`.
        set: Option<String>,
        /// Addresses (at least one).
        elems: Vec<Str<'a>>,
    },
    /// `counters.reset`.
    CountersReset,
    /// `list`: the active ruleset.
    List {
        /// Output format; `None` = as applied.
        format: Option<String>,
        /// Include counters.
        counters: bool,
    },
    /// `apply`: compile a ruleset aside and swap it in.
    Apply {
        /// The ruleset text.
        rules: String,
        /// File name for messages.
        name: String,
        /// Input format; `None` = recognised from the content.
        format: Option<String>,
        /// Validate only.
        check: bool,
    },
    /// `attach`: the eBPF program on an interface.
    Attach {
        /// Interface name (checked).
        iface: String,
        /// `xdp` (default) or `tc`.
        hook: AttachPoint,
        /// XDP mode requested.
        mode: Mode,
    },
    /// `recent`: an xt_recent table (`set` = its name), listed, or one
    /// write in `/proc/net/xt_recent` syntax (`elems[0]`: `+ADDR`,
    /// `-ADDR`, `/`).
    Recent {
        /// Table name.
        name: String,
        /// The write, if any.
        write: Option<String>,
    },
    /// `detach`: from an interface, at one hook or all.
    Detach {
        /// Interface name (checked).
        iface: String,
        /// `None` = every hook.
        hook: Option<AttachPoint>,
    },
}

fn invalid(msg: impl Into<String>) -> ErrorReply {
    ErrorReply::new(code::INVALID, msg)
}

fn need_set(set: Option<String>) -> Result<String, ErrorReply> {
    set.ok_or_else(|| invalid("missing field `set`"))
}

fn need_elems<'a>(elems: Vec<Str<'a>>, what: &str) -> Result<Vec<Str<'a>>, ErrorReply> {
    if elems.is_empty() {
        return Err(invalid(format!("missing field `elems`{what}")));
    }
    Ok(elems)
}

fn need_iface(iface: Option<String>) -> Result<String, ErrorReply> {
    iface
        .filter(|i| !i.is_empty() && i.len() < 16 && !i.contains(['/', ' ', '\0']))
        .ok_or_else(|| invalid("missing or bad field `iface` (an interface name)"))
}

impl<'a> TryFrom<Request<'a>> for Command<'a> {
    type Error = ErrorReply;

    fn try_from(r: Request<'a>) -> Result<Command<'a>, ErrorReply> {
        Ok(match &*r.cmd {
            "ping" => Command::Ping,
            "stats" => Command::Stats,
            "set.create" => {
                let set = need_set(r.set)?;
                let spec = SetSpec {
                    typ: r.typ.ok_or_else(|| invalid("missing field `type`"))?,
                    family: r.family,
                    flags: r.flags,
                    timeout: r.timeout,
                    size: r.size,
                    policy: r.policy,
                };
                Command::SetCreate {
                    set,
                    spec,
                    exist: r.exist,
                }
            }
            "set.destroy" => Command::SetDestroy {
                set: need_set(r.set)?,
            },
            "set.add" => Command::SetAdd {
                set: need_set(r.set)?,
                elems: need_elems(r.elems, "")?,
                timeout: r.timeout,
            },
            "set.del" => Command::SetDel {
                set: need_set(r.set)?,
                elems: need_elems(r.elems, "")?,
            },
            "set.flush" => Command::SetFlush {
                set: need_set(r.set)?,
            },
            "set.list" => Command::SetList { set: r.set },
            "set.test" => {
                let set = need_set(r.set)?;
                let elem = match r.elem {
                    Some(e) => e,
                    None => r
                        .elems
                        .into_iter()
                        .next()
                        .map(|s| s.0.into_owned())
                        .ok_or_else(|| invalid("missing field `elem`"))?,
                };
                Command::SetTest { set, elem }
            }
            "set.explain" => Command::SetExplain {
                set: need_set(r.set)?,
            },
            "ban" => Command::Ban {
                set: r.set,
                elems: need_elems(r.elems, " (addresses)")?,
                timeout: r.timeout,
            },
            "unban" => Command::Unban {
                set: r.set,
                elems: need_elems(r.elems, " (addresses)")?,
            },
            "counters.reset" => Command::CountersReset,
            "recent" => Command::Recent {
                name: need_set(r.set)?,
                write: r.elems.into_iter().next().map(|s| s.0.into_owned()),
            },
            "list" => Command::List {
                format: r.format,
                counters: r.counters,
            },
            "apply" => Command::Apply {
                rules: r.rules.ok_or_else(|| invalid("missing field `rules`"))?,
                name: r.name.unwrap_or_else(|| "<rules>".into()),
                format: r.format,
                check: r.check,
            },
            // Without an interface: the base chains at their netfilter
            // hooks (conventions); `hook` may then only say so.
            "attach" | "detach" if r.iface.is_none() => {
                if r.hook.as_deref().is_some_and(|h| h != "netfilter") {
                    return Err(invalid(
                        "missing field `iface` (xdp and tc need an interface)",
                    ));
                }
                let (hook, mode) = (AttachPoint::Netfilter, Mode::Native);
                if &*r.cmd == "attach" {
                    Command::Attach {
                        iface: String::new(),
                        hook,
                        mode,
                    }
                } else {
                    Command::Detach {
                        iface: String::new(),
                        hook: Some(hook),
                    }
                }
            }
            "attach" => {
                let iface = need_iface(r.iface)?;
                let (hook, mode) =
                    parse_hook_mode(r.hook.as_deref(), r.mode.as_deref()).map_err(invalid)?;
                if hook == AttachPoint::Netfilter {
                    return Err(invalid("the netfilter hooks take no interface"));
                }
                Command::Attach { iface, hook, mode }
            }
            "detach" => {
                let iface = need_iface(r.iface)?;
                let hook = match r.hook.as_deref() {
                    None => None,
                    Some(h) => Some(parse_hook_mode(Some(h), None).map_err(invalid)?.0),
                };
                Command::Detach { iface, hook }
            }
            other => {
                return Err(ErrorReply::new(
                    code::UNKNOWN_CMD,
                    format!("unknown command `{other}`"),
                ))
            }
        })
    }
}

impl Command<'_> {
    /// Whether the command changes the state (and so writes the journal).
    /// After a journal write failure the daemon refuses these: a change
    /// that cannot be made durable must not be visible either.
    pub fn mutates(&self) -> bool {
        match self {
            Command::SetCreate { .. }
            | Command::SetDestroy { .. }
            | Command::SetAdd { .. }
            | Command::SetDel { .. }
            | Command::SetFlush { .. }
            | Command::Ban { .. }
            | Command::Unban { .. }
            | Command::Attach { .. }
            | Command::Detach { .. } => true,
            Command::Apply { check, .. } => !check,
            Command::Ping
            | Command::Stats
            | Command::SetList { .. }
            | Command::SetTest { .. }
            | Command::SetExplain { .. }
            | Command::CountersReset
            | Command::Recent { .. }
            | Command::List { .. } => false,
        }
    }

    /// How many elements the command carries (bounded per request).
    pub fn elem_count(&self) -> usize {
        match self {
            Command::SetAdd { elems, .. }
            | Command::SetDel { elems, .. }
            | Command::Ban { elems, .. }
            | Command::Unban { elems, .. } => elems.len(),
            _ => 0,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::proto::parse_request;

    fn cmd(line: &str) -> Result<Command<'_>, ErrorReply> {
        Command::try_from(parse_request(line.as_bytes()).unwrap())
    }

    #[test]
    fn names_map_to_variants_and_fields_are_checked() {
        assert!(matches!(cmd(r#"{"cmd":"ping"}"#), Ok(Command::Ping)));
        assert!(matches!(
            cmd(r#"{"cmd":"set.add","set":"s","elems":["1.2.3.4"],"timeout":5}"#),
            Ok(Command::SetAdd {
                timeout: Some(5),
                ..
            })
        ));
        assert_eq!(
            cmd(r#"{"cmd":"nope"}"#).unwrap_err().code,
            code::UNKNOWN_CMD
        );
        assert_eq!(
            cmd(r#"{"cmd":"set.add","set":"s"}"#).unwrap_err().msg,
            "missing field `elems`"
        );
        assert_eq!(
            cmd(r#"{"cmd":"attach","iface":"a/b"}"#).unwrap_err().code,
            code::INVALID
        );
        // A field another command reads is ignored.
        assert!(matches!(
            cmd(r#"{"cmd":"ping","set":"x"}"#),
            Ok(Command::Ping)
        ));
    }

    #[test]
    fn mutating_commands() {
        assert!(cmd(r#"{"cmd":"ban","elems":["1.2.3.4"]}"#)
            .unwrap()
            .mutates());
        assert!(cmd(r#"{"cmd":"apply","rules":""}"#).unwrap().mutates());
        assert!(!cmd(r#"{"cmd":"apply","rules":"","check":true}"#)
            .unwrap()
            .mutates());
        assert!(!cmd(r#"{"cmd":"set.list"}"#).unwrap().mutates());
    }
}
