//! nft dynamic sets: which sets rules fill, their declarations, and the
//! statements and lookups that use them — `add @s { KEY … }`, `update @s {
//! KEY timeout 60s }`, `delete @s { KEY }`, `meter NAME { KEY limit rate …
//! }` and `KEY @s` (semantics: `parapet_model`'s `dynset.rs`).
//!
//! A set is dynamic when some rule of the file writes it (found before the
//! tables are read, so a lookup written before the rule that fills the set
//! is one too); every other set stays a static set of `parapet-sets`.

use super::lexer::{word_text, Res, Tok, Token};
use super::matches::Selector;
use super::rule::RuleParser;
use parapet_model::*;

/// The names of the sets a rule writes (`add|update|delete @NAME {`).
pub(super) fn written_sets(toks: &[Token]) -> Vec<String> {
    let mut names: Vec<String> = toks
        .windows(3)
        .filter_map(|w| match (w[0].word(), w[1].word(), &w[2].tok) {
            (Some("add" | "update" | "delete"), Some(n), Tok::Open) => {
                n.strip_prefix('@').map(str::to_string)
            }
            _ => None,
        })
        .collect();
    names.sort();
    names.dedup();
    names
}

/// A `set NAME { … }` block's tokens (from `set` to its `}`) read as a
/// dynamic set of table `table`.
pub(super) fn declaration(toks: &[Token], table: &str) -> Res<DynsetDecl> {
    let name = toks.get(1).map(word_text).unwrap_or_default();
    let mut decl = DynsetDecl {
        name: name.clone(),
        table: table.to_string(),
        family: Family::V4,
        size: DYNSET_DEFAULT_SIZE,
        timeout_ms: 0,
        has_timeout: false,
        meter: false,
        service: false,
        elements: Vec::new(),
    };
    let mut typed = false;
    // Where `elements` stands: read once the type and timeout are known.
    let mut elements_at = None;
    let mut i = 3;
    let word = |i: usize| toks.get(i).and_then(|t| t.word());
    while i < toks.len() {
        let t = &toks[i];
        match t.word() {
            Some("type") => {
                let ty = toks.get(i + 1);
                // An address, or an address and a service.
                let service = word(i + 2) == Some(".") && word(i + 3) == Some("inet_service");
                let dims = if service { 4 } else { 2 };
                decl.family = match ty.and_then(|t| t.word()) {
                    Some("ipv4_addr") if word(i + dims) != Some(".") => Family::V4,
                    Some("ipv6_addr") if word(i + dims) != Some(".") => Family::V6,
                    Some("ipv4_addr" | "ipv6_addr") => {
                        return Err((t.line, t.col, format!("dynamic set '{name}': '.' is not supported in a set that rules fill beyond 'ipv4_addr . inet_service' (or ipv6_addr)")));
                    }
                    _ => {
                        let (l, c, shown) = ty.map_or((t.line, t.col, String::new()), |t| {
                            (t.line, t.col, t.show())
                        });
                        return Err((l, c, format!("dynamic set '{name}' of type '{shown}': only sets of one address (ipv4_addr, ipv6_addr), or of an address and a service, that rules fill are supported yet")));
                    }
                };
                decl.service = service;
                typed = true;
                i += dims;
            }
            Some("typeof") => {
                // `typeof ip saddr`, or `typeof ip saddr . tcp dport`.
                let service = word(i + 3) == Some(".")
                    && matches!(word(i + 4), Some(p) if PORT_PROTOCOL_WORDS.contains(&p))
                    && matches!(word(i + 5), Some("sport" | "dport"));
                let dims = if service { 6 } else { 3 };
                decl.family = match (word(i + 1), word(i + 2), word(i + dims)) {
                    (Some("ip"), Some("saddr" | "daddr"), w) if w != Some(".") => Family::V4,
                    (Some("ip6"), Some("saddr" | "daddr"), w) if w != Some(".") => Family::V6,
                    _ => return Err((t.line, t.col, format!("dynamic set '{name}': only 'typeof ip saddr' (or ip daddr, ip6 saddr, ip6 daddr), alone or '. tcp dport' (or sport, udp, sctp, udplite), is supported yet"))),
                };
                decl.service = service;
                typed = true;
                i += dims;
            }
            Some("size") => {
                let n = word(i + 1).and_then(|w| w.parse::<u32>().ok());
                decl.size = match n {
                    Some(n) if n > 0 => n,
                    _ => return Err((t.line, t.col, "expected a size like 'size 65535'".into())),
                };
                i += 2;
            }
            Some("timeout") => {
                let ms = word(i + 1).and_then(parapet_sets::parse_duration);
                decl.timeout_ms = ms.ok_or((
                    t.line,
                    t.col,
                    "expected a timeout like 'timeout 60s'".to_string(),
                ))?;
                decl.has_timeout = true;
                i += 2;
            }
            Some("flags") => {
                i += 1;
                while let Some(f) = word(i) {
                    match f {
                        "timeout" => decl.has_timeout = true,
                        "dynamic" | "constant" | "interval" => {}
                        other => {
                            let t = &toks[i];
                            return Err((
                                t.line,
                                t.col,
                                format!("dynamic set '{name}': flag '{other}' is not supported"),
                            ));
                        }
                    }
                    i += 1;
                    if matches!(toks.get(i).map(|t| &t.tok), Some(Tok::Comma)) {
                        i += 1;
                    }
                }
            }
            Some("elements") => {
                if word(i + 1) != Some("=")
                    || !matches!(toks.get(i + 2).map(|t| &t.tok), Some(Tok::Open))
                {
                    return Err((t.line, t.col, "expected 'elements = { … }'".into()));
                }
                elements_at = Some(i + 3);
                // Past the block's `}`.
                i += 3;
                while i < toks.len() && toks[i].tok != Tok::Close {
                    i += 1;
                }
                i += 1;
            }
            // Elements count packets and bytes (`nft list set` shows
            // them): accounting, which decides nothing.
            Some("counter") => i += 1,
            Some("policy" | "comment" | "gc-interval" | "auto-merge") => i += 2,
            Some(other) => {
                return Err((
                    t.line,
                    t.col,
                    format!(
                        "dynamic set '{name}': '{other}' is not supported in a set that rules fill"
                    ),
                ));
            }
            None => i += 1,
        }
    }
    if !typed {
        let (l, c) = toks.first().map_or((1, 1), |t| (t.line, t.col));
        return Err((l, c, format!("set '{name}' has no 'type'")));
    }
    if let Some(at) = elements_at {
        decl.elements = initial_elements(toks, at, &decl)?;
    }
    Ok(decl)
}

/// The set's elements and those of `elements = { … }` (or of `add
/// element … { … }`) from token `at` (just past `{`):
/// `ADDR [. SERVICE] [timeout T] [expires T] [counter …] [comment "…"]`,
/// separated by commas, checked as the kernel's `nft_add_set_elem` checks
/// them.
pub(super) fn initial_elements(
    toks: &[Token],
    at: usize,
    set: &DynsetDecl,
) -> Res<Vec<DynsetInitial>> {
    let name = &set.name;
    // After those it has (`add element` adds to them).
    let mut out: Vec<DynsetInitial> = set.elements.clone();
    let mut i = at;
    let word = |i: usize| toks.get(i).and_then(|t| t.word());
    let skip_newlines = |i: &mut usize| {
        while toks.get(*i).is_some_and(|t| t.tok == Tok::Newline) {
            *i += 1;
        }
    };
    loop {
        skip_newlines(&mut i);
        let Some(t) = toks.get(i) else {
            return Err((
                0,
                1,
                format!("set '{name}': expected '}}' closing its elements"),
            ));
        };
        if t.tok == Tok::Close {
            return Ok(out);
        }
        let fam = if set.family == Family::V4 {
            "IPv4"
        } else {
            "IPv6"
        };
        let addr = t
            .word()
            .and_then(|w| crate::common::parse_ip(w, Some(set.family)))
            .map(|(_, a)| a)
            .ok_or_else(|| {
                (
                    t.line,
                    t.col,
                    format!(
                        "set '{name}' holds {fam} addresses (type {}): '{}' is not one",
                        key_type(set),
                        t.show()
                    ),
                )
            })?;
        i += 1;
        let mut e = DynsetInitial {
            addr,
            port: 0,
            timeout_ms: 0,
            expires_ms: None,
        };
        if word(i) == Some(".") {
            if !set.service {
                let d = &toks[i];
                return Err((
                    d.line,
                    d.col,
                    format!(
                        "set '{name}' is of type {}: an element has one field",
                        key_type(set)
                    ),
                ));
            }
            let p = toks.get(i + 1).unwrap_or(&toks[i]);
            e.port = p
                .word()
                .and_then(|w| crate::common::parse_port(w).ok())
                .map(|p| p as u16)
                .ok_or((
                    p.line,
                    p.col,
                    format!(
                        "expected a port number or service name, found '{}'",
                        p.show()
                    ),
                ))?;
            i += 2;
        } else if set.service {
            return Err((
                t.line,
                t.col,
                format!(
                    "set '{name}' is of type {}: the element needs '. SERVICE'",
                    key_type(set)
                ),
            ));
        }
        while let Some(o) = toks.get(i) {
            let duration = |what: &str| {
                toks.get(i + 1)
                    .and_then(|v| v.word())
                    .and_then(parapet_sets::parse_duration)
                    .filter(|ms| *ms <= u32::MAX as u64)
                    .ok_or((
                        o.line,
                        o.col,
                        format!("expected '{what} T' like '{what} 60s'"),
                    ))
            };
            match (&o.tok, o.word()) {
                (Tok::Comma | Tok::Close | Tok::Newline, _) => break,
                (_, Some("timeout")) => {
                    if !set.has_timeout {
                        return Err((o.line, o.col, format!("set '{name}' has no 'flags timeout' (nor a timeout): its elements cannot expire")));
                    }
                    e.timeout_ms = duration("timeout")?;
                    i += 2;
                }
                // 0, as nft sends none: the whole timeout.
                (_, Some("expires")) => {
                    e.expires_ms = Some(duration("expires")?).filter(|ms| *ms != 0);
                    i += 2;
                }
                // Accounting, which decides nothing (as a rule's element
                // counter).
                (_, Some("counter")) => {
                    i += 1;
                    if word(i) == Some("packets") && word(i + 2) == Some("bytes") {
                        i += 4;
                    }
                }
                (_, Some("comment")) => i += 2,
                _ => {
                    return Err((o.line, o.col, format!("'{}' in an element of set '{name}' is not supported (timeout, expires, counter and comment are)", o.show())));
                }
            }
        }
        if e.expires_ms.is_some() && e.lifetime_ms(set).is_none() {
            return Err((
                t.line,
                t.col,
                format!("set '{name}': 'expires' needs a timeout (the element's or the set's)"),
            ));
        }
        let timeout = if e.timeout_ms != 0 {
            e.timeout_ms
        } else {
            set.timeout_ms
        };
        if e.expires_ms.is_some_and(|x| x > timeout) {
            return Err((
                t.line,
                t.col,
                format!(
                    "set '{name}': 'expires' beyond the element's timeout (the kernel's ERANGE)"
                ),
            ));
        }
        // nft -f adds the same element twice without complaint: the first
        // stays.
        if !out.iter().any(|o| (o.addr, o.port) == (e.addr, e.port)) {
            if out.len() >= set.size as usize {
                return Err((
                    t.line,
                    t.col,
                    format!(
                        "set '{name}' has size {}: more elements than that",
                        set.size
                    ),
                ));
            }
            out.push(e);
        }
        skip_newlines(&mut i);
        if toks.get(i).is_some_and(|t| t.tok == Tok::Comma) {
            i += 1;
        }
    }
}

/// The protocols whose ports a service key reads (nft's `tcp dport`, …):
/// each implies its protocol, so no packet without ports reaches the key.
const PORT_PROTOCOL_WORDS: [&str; 4] = ["tcp", "udp", "sctp", "udplite"];

/// Which address a key's first field is (`Some(true)`: the destination).
fn address_of(s: &Selector) -> Option<bool> {
    match s.field {
        Field::SrcAddr => Some(false),
        Field::DstAddr => Some(true),
        _ => None,
    }
}

/// The packet's port a service field is; `None` for any other field and
/// for `th` (which implies no protocol).
fn port_of(s: &Selector) -> Option<DynsetPort> {
    if !s.implied.iter().any(|(f, _)| *f == Field::Proto) {
        return None;
    }
    match s.field {
        Field::SrcPort => Some(DynsetPort::Src),
        Field::DstPort => Some(DynsetPort::Dst),
        _ => None,
    }
}

/// A lookup's key: (the destination address?, the port) for a set of
/// addresses (`[ip saddr]`) or of an address and a service (`[ip saddr,
/// tcp dport]`).
fn key_of(sels: &[Selector], service: bool) -> Option<(bool, Option<DynsetPort>)> {
    match sels {
        [a] if !service => Some((address_of(a)?, None)),
        [a, p] if service => Some((address_of(a)?, Some(port_of(p)?))),
        _ => None,
    }
}

/// The name of a set's key type, for messages.
fn key_type(set: &DynsetDecl) -> &'static str {
    match (set.family, set.service) {
        (Family::V4, false) => "ipv4_addr",
        (Family::V6, false) => "ipv6_addr",
        (Family::V4, true) => "ipv4_addr . inet_service",
        (Family::V6, true) => "ipv6_addr . inet_service",
    }
}

impl RuleParser<'_> {
    /// As [`Self::no_other_stateful`], a lookup before the statement
    /// aside.
    fn no_other_stateful_but_a_lookup(&self) -> Res<()> {
        let mut rule = self.rule.clone();
        rule.dynset_lookup = None;
        if rule.is_stateful() {
            return self.fail(
                "a second stateful condition (limit, a dynamic set) in one rule is not supported (a dynamic set's lookup before its statement is)",
            );
        }
        Ok(())
    }

    fn no_other_stateful(&self) -> Res<()> {
        if self.rule.is_stateful() {
            return self.fail(
                "a second stateful condition (limit, a dynamic set) in one rule is not supported",
            );
        }
        Ok(())
    }

    /// After `add`/`update`/`delete`: `@SET { KEY [timeout T] [limit rate
    /// …] }`.
    pub(super) fn dynset_statement(&mut self, op: DynsetOp) -> Res<()> {
        // A lookup before the statement (port knocking's `ip saddr . tcp
        // dport @s add @s { … }`) is checked first, as nft runs it.
        if self
            .rule
            .dynset
            .as_ref()
            .is_some_and(|d| d.op == DynsetOp::Lookup)
            && self.rule.dynset_lookup.is_none()
        {
            self.rule.dynset_lookup = self.rule.dynset.take();
        }
        self.no_other_stateful_but_a_lookup()?;
        let t = self.next_word("'@SET'")?;
        let Some(name) = t.word().and_then(|w| w.strip_prefix('@')) else {
            return Err((
                t.line,
                t.col,
                format!("expected '@SET', found '{}'", t.show()),
            ));
        };
        let Some(decl) = self.dynsets.iter().find(|d| d.name == name).cloned() else {
            let what = if self.maps.iter().any(|m| m.name == name) {
                format!("map '{name}': a map that rules fill (a key and a value) is not supported yet; sets are")
            } else {
                format!("no set '{name}' in this table")
            };
            return Err((t.line, t.col, what));
        };
        self.dynset_body(decl, op)
    }

    /// After `meter`: `NAME [size N] { KEY [timeout T] [limit rate …] }`,
    /// an `update` of the meter's own set.
    pub(super) fn meter(&mut self) -> Res<()> {
        self.no_other_stateful()?;
        let t = self.next_word("a meter name")?;
        let mut decl = DynsetDecl {
            name: word_text(&t),
            table: self.table_name.to_string(),
            family: Family::V4,
            size: DYNSET_DEFAULT_SIZE,
            timeout_ms: 0,
            has_timeout: false,
            meter: true,
            service: false,
            elements: Vec::new(),
        };
        if self.peek_word() == Some("size") {
            self.i += 1;
            let n = self.next_word("a size")?;
            decl.size = n
                .word()
                .and_then(|w| w.parse().ok())
                .filter(|n| *n > 0)
                .ok_or((
                    n.line,
                    n.col,
                    format!("expected a size, found '{}'", n.show()),
                ))?;
        }
        // The meter's key decides its family.
        if let Some(Tok::Word(w)) = self.toks.get(self.i + 1).map(|t| &t.tok) {
            decl.family = if w == "ip6" { Family::V6 } else { Family::V4 };
        }
        self.dynset_body(decl, DynsetOp::Update)
    }

    /// After `KEY .` in a set element: the service, a port number or the
    /// packet's port (`tcp dport`, …; its protocol becomes a match).
    fn service_of_key(&mut self, set: &DynsetDecl) -> Res<DynsetPort> {
        if let Some(n) = self.peek_word().and_then(|w| w.parse::<u16>().ok()) {
            self.i += 1;
            return Ok(DynsetPort::Const(n));
        }
        let (l, c) = self.peek().map_or((0, 1), |t| (t.line, t.col));
        let sel = self.selector()?;
        let Some(port) = port_of(&sel) else {
            return Err((l, c, format!("the service of a key of set '{}' is a port number or 'tcp dport' (or sport, udp, sctp, udplite)", set.name)));
        };
        for (f, v) in &sel.implied {
            self.matches.constrain(*f, v.clone());
        }
        Ok(port)
    }

    fn dynset_body(&mut self, set: DynsetDecl, op: DynsetOp) -> Res<()> {
        match self.peek() {
            Some(t) if t.tok == Tok::Open => self.i += 1,
            _ => return self.fail(format!("expected '{{' after '@{}'", set.name)),
        }
        let (l, c) = self.peek().map_or((0, 1), |t| (t.line, t.col));
        let fam = match self.peek_word() {
            Some("ip") => Family::V4,
            Some("ip6") => Family::V6,
            _ => return self.fail(format!("only a set keyed by one address (ip saddr, ip daddr, ip6 saddr, ip6 daddr) is supported yet in '@{}'", set.name)),
        };
        let sel = self.selector()?;
        let Some(daddr) = address_of(&sel) else {
            return Err((l, c, format!("only a set keyed by one address (ip saddr, ip daddr, ip6 saddr, ip6 daddr), or an address and a service, is supported yet in '@{}'", set.name)));
        };
        let port = if self.peek_word() == Some(".") {
            self.i += 1;
            if !set.service {
                return Err((
                    l,
                    c,
                    format!(
                        "set '{}' is of type {}: the key has one field",
                        set.name,
                        key_type(&set)
                    ),
                ));
            }
            Some(self.service_of_key(&set)?)
        } else if set.service {
            return Err((
                l,
                c,
                format!(
                    "set '{}' is of type {}: the key needs '. SERVICE'",
                    set.name,
                    key_type(&set)
                ),
            ));
        } else {
            None
        };
        if fam != set.family {
            return Err((
                l,
                c,
                format!(
                    "set '{}' holds {} addresses",
                    set.name,
                    if set.family == Family::V4 {
                        "IPv4"
                    } else {
                        "IPv6"
                    }
                ),
            ));
        }
        for (f, v) in &sel.implied {
            self.matches.constrain(*f, v.clone());
        }
        self.matches
            .constrain(Field::Family, IntervalSet::point(fam.value()));
        let mut d = Dynset {
            set,
            op,
            daddr,
            invert: false,
            timeout_ms: 0,
            limit: None,
            port,
        };
        loop {
            let Some(t) = self.peek().cloned() else {
                return self.fail("expected '}' closing the set element");
            };
            match (&t.tok, t.word()) {
                (Tok::Close, _) => {
                    self.i += 1;
                    break;
                }
                (_, Some("timeout")) => {
                    self.i += 1;
                    let v = self.next_word("a timeout like 60s")?;
                    d.timeout_ms = v
                        .word()
                        .and_then(parapet_sets::parse_duration)
                        .filter(|ms| *ms > 0 && *ms <= u32::MAX as u64)
                        .ok_or((
                            v.line,
                            v.col,
                            format!("expected a timeout like 60s, found '{}'", v.show()),
                        ))?;
                }
                (_, Some("counter")) => {
                    // The element's counter: accounting, which never
                    // fails the statement (`nft_counter_eval`), whatever
                    // its place among the element's expressions.
                    self.i += 1;
                    if self.peek_word() == Some("packets") {
                        self.i += 1;
                        self.number("a packet count")?;
                        let b = self.next_word("'bytes'")?;
                        if b.word() != Some("bytes") {
                            return Err((
                                b.line,
                                b.col,
                                format!("expected 'bytes', found '{}'", b.show()),
                            ));
                        }
                        self.number("a byte count")?;
                    }
                }
                (_, Some("ct"))
                    if self.toks.get(self.i + 1).and_then(|t| t.word()) == Some("count") =>
                {
                    return Err((t.line, t.col, "'ct count' inside a set element is not supported: it counts conntrack's connections per key (nft_connlimit), which parapet's dataplane does not keep".into()));
                }
                (_, Some("limit")) if op != DynsetOp::Delete => {
                    self.i += 1;
                    if self.peek_word() == Some("name") {
                        return self
                            .fail("a named limit object inside a set element is not supported");
                    }
                    self.limit()?;
                    let l = self
                        .rule
                        .limit
                        .take()
                        .expect("limit() sets the rule's limit");
                    if l.rate > DYNSET_MAX_LIMIT_RATE || l.nft_burst() > DYNSET_MAX_LIMIT_BURST {
                        return Err((t.line, t.col, format!("a limit inside a set element is supported up to rate {DYNSET_MAX_LIMIT_RATE} and burst {DYNSET_MAX_LIMIT_BURST}")));
                    }
                    d.limit = Some(ElementRate {
                        rate: l.rate,
                        per: l.per,
                        burst: l.nft_burst(),
                        over: l.over,
                    });
                }
                _ => {
                    return Err((t.line, t.col, format!("'{}' inside a set element is not supported yet (timeout, limit rate and counter are)", t.show())));
                }
            }
        }
        if d.limit.is_some() && !d.set.elements.is_empty() {
            // A declared element has no limit of its own, which the BPF
            // map's element (a bucket always) cannot say.
            return Err((l, c, format!("a limit inside a set element of set '{}', which declares elements, is not supported yet", d.set.name)));
        }
        if d.op == DynsetOp::Delete && d.timeout_ms != 0 {
            return Err((l, c, "'delete' takes no timeout".into()));
        }
        self.rule.dynset = Some(d);
        Ok(())
    }

    /// `KEY @SET` (or `KEY != @SET`) on a dynamic set: membership, checked
    /// as a stateful condition.
    pub(super) fn dynset_lookup(
        &mut self,
        set: DynsetDecl,
        sels: &[Selector],
        neg: bool,
    ) -> Res<()> {
        let family = set.family;
        let Some((daddr, port)) = key_of(sels, set.service) else {
            return self.fail(format!("set '{}' of type {} is filled by rules: only 'ip saddr @{0}' (or daddr, ip6), or 'ip saddr . tcp dport @{0}' (or sport, udp, sctp, udplite) for a set of an address and a service, is supported yet", set.name, key_type(&set)));
        };
        self.no_other_stateful()?;
        self.matches
            .constrain(Field::Family, IntervalSet::point(family.value()));
        self.rule.dynset = Some(Dynset {
            set,
            op: DynsetOp::Lookup,
            daddr,
            invert: neg,
            timeout_ms: 0,
            limit: None,
            port,
        });
        Ok(())
    }
}
