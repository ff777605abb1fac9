//! ipset's `list:set`: an ordered list of other sets' names
//! (`create L list:set size N [timeout T]`, `add L SET [before|after
//! OTHER] [timeout T]`), matched as the kernel does (ip_set_list_set.c):
//! the members are tried in list order and the first one that matches
//! decides. A member is skipped when it has more dimensions than the rule
//! gives direction flags, or when the packet is of another family
//! (`ip_set_test`'s own checks); an expired member is skipped too.
//!
//! A list holds plain sets only (the kernel refuses a list in a list), and
//! a set a list holds cannot be destroyed, renamed or swapped while it is
//! held (the kernel's "set is in use").

use crate::key::KeyPart;
use crate::reference::packet_key;
use crate::store::SetStore;
use parapet_model::{Packet, SetKeySpec, SetRef};

/// The kernel's default `size` of a list:set.
pub const DEFAULT_LIST_SIZE: usize = 8;

/// One member of a list: a set's name and, with timeouts, when it expires
/// (absolute ms; `None` is permanent).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ListMember {
    /// The member set's name.
    pub name: String,
    /// Expiry stamp in ms, `None` for never.
    pub expires: Option<u64>,
}

/// A `list:set`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ListSet {
    /// How many members it holds at most (`size`).
    pub size: usize,
    /// The default member timeout in ms when created with `timeout`
    /// (`Some(0)`: timeouts enabled, members permanent by default).
    pub timeout: Option<u64>,
    /// Members in match order.
    pub members: Vec<ListMember>,
}

/// Where `add` puts a member.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Placement<'a> {
    /// At the end.
    Last,
    /// Just before this member.
    Before(&'a str),
    /// Just after this member.
    After(&'a str),
}

impl ListSet {
    /// An empty list.
    pub fn new(size: usize, timeout: Option<u64>) -> ListSet {
        ListSet {
            size,
            timeout,
            members: Vec::new(),
        }
    }

    /// The members live at `now`, in match order.
    pub fn live(&self, now: u64) -> impl Iterator<Item = &ListMember> {
        self.members
            .iter()
            .filter(move |m| m.expires.is_none_or(|e| e > now))
    }

    /// Whether `name` is a live member at `now`.
    pub fn holds(&self, name: &str, now: u64) -> bool {
        self.live(now).any(|m| m.name == name)
    }

    /// Adds member `name` (a set the caller has checked exists and is not a
    /// list) with an optional timeout in ms, as `ipset add` does: expired
    /// members are dropped first; a member already in the list, a full
    /// list, a `before`/`after` member not in the list, and a timeout on a
    /// list created without `timeout` are errors.
    pub fn add(
        &mut self,
        name: &str,
        at: Placement<'_>,
        timeout_ms: Option<u64>,
        now: u64,
    ) -> Result<(), String> {
        self.members.retain(|m| m.expires.is_none_or(|e| e > now));
        if self.members.iter().any(|m| m.name == name) {
            return Err(format!("set `{name}` is already in the list"));
        }
        if timeout_ms.is_some() && self.timeout.is_none() {
            return Err(
                "a member timeout needs a list created with `timeout` (ipset: timeout extension not enabled)".into(),
            );
        }
        if self.members.len() >= self.size {
            return Err(format!(
                "the list is full (size {}): ipset refuses the add",
                self.size
            ));
        }
        let index = match at {
            Placement::Last => self.members.len(),
            Placement::Before(other) | Placement::After(other) => {
                let i = self
                    .members
                    .iter()
                    .position(|m| m.name == other)
                    .ok_or_else(|| format!("set `{other}` is not in the list"))?;
                if matches!(at, Placement::After(_)) {
                    i + 1
                } else {
                    i
                }
            }
        };
        let ttl = timeout_ms.or(self.timeout).unwrap_or(0);
        let expires = (ttl > 0).then(|| now.saturating_add(ttl));
        self.members.insert(
            index,
            ListMember {
                name: name.to_string(),
                expires,
            },
        );
        Ok(())
    }

    /// Deletes member `name`; an error when it is not a live member.
    pub fn del(&mut self, name: &str, now: u64) -> Result<(), String> {
        self.members.retain(|m| m.expires.is_none_or(|e| e > now));
        let i = self
            .members
            .iter()
            .position(|m| m.name == name)
            .ok_or_else(|| format!("set `{name}` is not in the list"))?;
        self.members.remove(i);
        Ok(())
    }
}

/// The kernel's dimension of a set type: its address, port, interface,
/// MAC and mark parts (the protocol rides with the port and takes no flag).
pub fn kernel_dimension(dims: &[KeyPart]) -> usize {
    dims.iter().filter(|d| **d != KeyPart::InetProto).count()
}

impl SetStore {
    /// Whether `pkt` matches the set reference `r` at time `now` (the
    /// reference's own `!` is the caller's): a plain set by its key, a
    /// list:set by its first matching member (see the module). `None` when
    /// there is no set or list of that name.
    pub fn ref_matches_at(&self, r: &SetRef, pkt: &Packet, now: u64) -> Option<bool> {
        if let Some(list) = self.list(&r.name) {
            // A list is an ipset type: only iptables' direction flags
            // reach it.
            let SetKeySpec::Flags(dirs) = &r.key else {
                return Some(false);
            };
            let found = list.live(now).any(|m| {
                self.get(&m.name).is_some_and(|set| {
                    kernel_dimension(set.key_dims()) <= dirs.len()
                        && packet_key(r, set.key_dims(), pkt).is_some_and(|k| set.contains(&k, now))
                })
            });
            return Some(found);
        }
        let set = self.get(&r.name)?;
        Some(packet_key(r, set.key_dims(), pkt).is_some_and(|k| set.contains(&k, now)))
    }

    /// [`ref_matches_at`](Self::ref_matches_at) on the store's clock.
    pub fn ref_matches(&self, r: &SetRef, pkt: &Packet) -> Option<bool> {
        self.ref_matches_at(r, pkt, self.now())
    }

    /// The list:set of that name.
    pub fn list(&self, name: &str) -> Option<&ListSet> {
        self.lists.get(name)
    }

    /// The list:set names, sorted.
    pub fn list_names(&self) -> Vec<&str> {
        let mut v: Vec<&str> = self.lists.keys().map(|s| s.as_str()).collect();
        v.sort_unstable();
        v
    }

    /// The list (if any) that holds set `name` at `now`.
    pub fn held_by(&self, name: &str, now: u64) -> Option<&str> {
        held_by(&self.lists, name, now)
    }
}

/// The first list (by name) in `lists` holding set `name` at `now`.
pub(crate) fn held_by<'a>(
    lists: &'a std::collections::HashMap<String, ListSet>,
    name: &str,
    now: u64,
) -> Option<&'a str> {
    let mut holders: Vec<&str> = lists
        .iter()
        .filter(|(_, l)| l.holds(name, now))
        .map(|(n, _)| n.as_str())
        .collect();
    holders.sort_unstable();
    holders.first().copied()
}

/// `create NAME list:set [size N] [timeout T] [counters] [comment]` from
/// the create options (name, column, value) as the ipset reader splits
/// them; `lno` and the columns place errors.
pub(crate) fn create_list(
    opts: &[(&str, usize, Option<(&str, usize)>)],
    lno: usize,
) -> Result<ListSet, crate::Error> {
    let mut list = ListSet::new(DEFAULT_LIST_SIZE, None);
    for &(o, oc, arg) in opts {
        let (a, ac) = arg.unwrap_or(("", oc));
        let n = || {
            a.parse::<u64>().map_err(|_| {
                crate::Error::new(
                    lno,
                    ac,
                    format!("expected a number after `{o}`, found `{a}`"),
                )
            })
        };
        match o {
            "size" => match n()? {
                0 => return Err(crate::Error::new(lno, ac, "size must be at least 1")),
                v => list.size = v as usize,
            },
            "timeout" => list.timeout = Some(n()?.saturating_mul(1000)),
            // Counters and comments on members do not change what matches.
            "counters" | "comment" => {}
            _ => {
                return Err(crate::Error::new(
                    lno,
                    oc,
                    format!("option `{o}` does not apply to list:set: expected size, timeout, counters or comment"),
                ))
            }
        }
    }
    Ok(list)
}

/// The options after `add|del LIST MEMBER`: `before OTHER`, `after OTHER`,
/// `timeout T`, and counters/comment (read and ignored). Returns the
/// placement and the timeout in ms.
pub(crate) fn member_options<'a>(
    toks: &[(&'a str, usize)],
    lno: usize,
    eol: usize,
) -> Result<(Placement<'a>, Option<u64>), crate::Error> {
    let mut at = Placement::Last;
    let mut timeout = None;
    let mut i = 0;
    while i < toks.len() {
        let (o, oc) = toks[i];
        let (v, vc) = *toks.get(i + 1).ok_or_else(|| {
            crate::Error::new(
                lno,
                eol,
                format!("expected a value after `{o}`, found end of line"),
            )
        })?;
        match o {
            "before" | "after" if at != Placement::Last => {
                return Err(crate::Error::new(lno, oc, "only one of before/after"))
            }
            "before" => at = Placement::Before(v),
            "after" => at = Placement::After(v),
            "timeout" => {
                let secs: u64 = v.parse().map_err(|_| {
                    crate::Error::new(lno, vc, format!("expected a timeout in seconds, found `{v}`"))
                })?;
                timeout = Some(secs.saturating_mul(1000));
            }
            "packets" | "bytes" | "comment" => {}
            _ => {
                return Err(crate::Error::new(
                    lno,
                    oc,
                    format!("unknown list:set element option `{o}`: expected before, after, timeout, packets, bytes or comment"),
                ))
            }
        }
        i += 2;
    }
    Ok((at, timeout))
}

/// `ipset save` text of one list: its `create` line, then its live
/// members in order (with the seconds left when it has timeouts).
pub(crate) fn save_list(name: &str, list: &ListSet, now: u64) -> String {
    let mut out = format!("create {name} list:set size {}", list.size);
    if let Some(t) = list.timeout {
        out.push_str(&format!(" timeout {}", t / 1000));
    }
    out.push('\n');
    for m in list.live(now) {
        out.push_str(&format!("add {name} {}", m.name));
        if list.timeout.is_some() {
            let left = m.expires.map_or(0, |e| (e - now).div_ceil(1000));
            out.push_str(&format!(" timeout {left}"));
        }
        out.push('\n');
    }
    out
}
