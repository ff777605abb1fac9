//! nft set syntax: `set NAME { type …; flags …; timeout …; size …; elements = { … } }`.

use crate::key::{fmt_range, parse_dim, KeyPart, MAX_DIMS};
use crate::set::{Element, Set, SetDesc};
use crate::store::{LoadStats, SetStore, Staging};
use crate::Error;
use parapet_model::Policy;
use std::fmt::Write;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum T<'a> {
    Word(&'a str),
    Str(&'a str),
    LBrace,
    RBrace,
    Semi,
    Comma,
    Eq,
    Nl,
    Eof,
}

#[derive(Clone, Copy, Debug)]
struct Tok<'a> {
    t: T<'a>,
    line: usize,
    col: usize,
}

fn lex(text: &str) -> Result<Vec<Tok<'_>>, Error> {
    let b = text.as_bytes();
    let mut out = Vec::new();
    let (mut line, mut ls) = (1usize, 0usize);
    let mut i = 0;
    while i < b.len() {
        let c = b[i];
        let col = i - ls + 1;
        match c {
            b'\n' => {
                out.push(Tok {
                    t: T::Nl,
                    line,
                    col,
                });
                line += 1;
                ls = i + 1;
                i += 1;
            }
            b' ' | b'\t' | b'\r' => i += 1,
            b'#' => {
                while i < b.len() && b[i] != b'\n' {
                    i += 1;
                }
            }
            b'\\' if b.get(i + 1) == Some(&b'\n') => {
                i += 2;
                line += 1;
                ls = i;
            }
            b'{' | b'}' | b';' | b',' | b'=' => {
                let t = match c {
                    b'{' => T::LBrace,
                    b'}' => T::RBrace,
                    b';' => T::Semi,
                    b',' => T::Comma,
                    _ => T::Eq,
                };
                out.push(Tok { t, line, col });
                i += 1;
            }
            b'"' => {
                let s = i + 1;
                let mut j = s;
                while j < b.len() && b[j] != b'"' && b[j] != b'\n' {
                    if b[j] == b'\\' {
                        j += 1;
                    }
                    j += 1;
                }
                if j >= b.len() || b[j] != b'"' {
                    return Err(Error::new(
                        line,
                        col,
                        "unterminated string: expected a closing `\"`",
                    ));
                }
                out.push(Tok {
                    t: T::Str(&text[s..j]),
                    line,
                    col,
                });
                i = j + 1;
            }
            _ => {
                let s = i;
                while i < b.len()
                    && !matches!(
                        b[i],
                        b' ' | b'\t'
                            | b'\r'
                            | b'\n'
                            | b'{'
                            | b'}'
                            | b';'
                            | b','
                            | b'='
                            | b'"'
                            | b'#'
                    )
                {
                    i += 1;
                }
                out.push(Tok {
                    t: T::Word(&text[s..i]),
                    line,
                    col,
                });
            }
        }
    }
    out.push(Tok {
        t: T::Eof,
        line,
        col: b.len() - ls + 1,
    });
    Ok(out)
}

fn show(t: T) -> String {
    match t {
        T::Word(w) => format!("`{w}`"),
        T::Str(s) => format!("\"{s}\""),
        T::LBrace => "`{`".into(),
        T::RBrace => "`}`".into(),
        T::Semi => "`;`".into(),
        T::Comma => "`,`".into(),
        T::Eq => "`=`".into(),
        T::Nl => "end of line".into(),
        T::Eof => "end of input".into(),
    }
}

/// Parses an nft duration (`1d2h3m4s500ms`, or plain seconds) into ms.
pub fn parse_duration(s: &str) -> Option<u64> {
    if let Ok(n) = s.parse::<u64>() {
        return n.checked_mul(1000);
    }
    let b = s.as_bytes();
    let mut i = 0;
    let mut total: u64 = 0;
    if b.is_empty() {
        return None;
    }
    while i < b.len() {
        let st = i;
        while i < b.len() && b[i].is_ascii_digit() {
            i += 1;
        }
        if st == i {
            return None;
        }
        let n: u64 = s[st..i].parse().ok()?;
        let us = i;
        while i < b.len() && b[i].is_ascii_alphabetic() {
            i += 1;
        }
        let mul = match &s[us..i] {
            "ms" => 1,
            "s" => 1000,
            "m" => 60_000,
            "h" => 3_600_000,
            "d" => 86_400_000,
            "w" => 7 * 86_400_000,
            _ => return None,
        };
        total = total.checked_add(n.checked_mul(mul)?)?;
    }
    Some(total)
}

/// Formats ms as an nft duration (`1h30m`, `12s`, `500ms`; `0s` for 0).
pub fn format_duration(ms: u64) -> String {
    if ms == 0 {
        return "0s".into();
    }
    let mut out = String::new();
    let mut r = ms;
    for (u, m) in [
        ("d", 86_400_000u64),
        ("h", 3_600_000),
        ("m", 60_000),
        ("s", 1000),
        ("ms", 1),
    ] {
        if r >= m {
            let _ = write!(out, "{}{u}", r / m);
            r %= m;
        }
    }
    out
}

struct RawElem<'a> {
    parts: Vec<(&'a str, usize, usize)>,
    timeout: Option<u64>,
    expires: Option<u64>,
    comment: Option<String>,
    counters: Option<(u64, u64)>,
}

struct P<'a> {
    t: Vec<Tok<'a>>,
    i: usize,
}

impl<'a> P<'a> {
    fn peek(&self) -> Tok<'a> {
        self.t[self.i]
    }
    fn next(&mut self) -> Tok<'a> {
        let t = self.t[self.i];
        if self.i + 1 < self.t.len() {
            self.i += 1;
        }
        t
    }
    fn err(&self, tok: Tok, expected: &str) -> Error {
        Error::new(
            tok.line,
            tok.col,
            format!("expected {expected}, found {}", show(tok.t)),
        )
    }
    fn skip_nl(&mut self) {
        while matches!(self.peek().t, T::Nl | T::Semi) {
            self.next();
        }
    }
    fn skip_nl_only(&mut self) {
        while matches!(self.peek().t, T::Nl) {
            self.next();
        }
    }
    fn word(&mut self, what: &str) -> Result<(&'a str, Tok<'a>), Error> {
        let t = self.next();
        match t.t {
            T::Word(w) => Ok((w, t)),
            T::Str(w) => Ok((w, t)),
            _ => Err(self.err(t, what)),
        }
    }
    fn expect(&mut self, want: T, what: &str) -> Result<(), Error> {
        let t = self.next();
        if std::mem::discriminant(&t.t) == std::mem::discriminant(&want) {
            Ok(())
        } else {
            Err(self.err(t, what))
        }
    }
    fn end_stmt(&mut self) -> Result<(), Error> {
        let t = self.peek();
        match t.t {
            T::Nl | T::Semi => {
                self.next();
                Ok(())
            }
            T::RBrace | T::Eof => Ok(()),
            _ => Err(self.err(t, "end of statement (newline or `;`)")),
        }
    }
    /// Skips one statement, including nested `{ … }` blocks.
    fn skip_stmt(&mut self) -> Result<(), Error> {
        let mut depth = 0usize;
        loop {
            let t = self.peek();
            match t.t {
                T::Eof => {
                    if depth > 0 {
                        return Err(self.err(t, "`}`"));
                    }
                    return Ok(());
                }
                T::LBrace => depth += 1,
                T::RBrace => {
                    if depth == 0 {
                        return Ok(());
                    }
                    depth -= 1;
                    if depth == 0 {
                        self.next();
                        return Ok(());
                    }
                }
                T::Nl | T::Semi if depth == 0 => {
                    self.next();
                    return Ok(());
                }
                _ => {}
            }
            self.next();
        }
    }
}

fn typeof_part(expr: &str) -> Option<KeyPart> {
    let w: Vec<&str> = expr.split_whitespace().collect();
    Some(match w.as_slice() {
        ["ip", "saddr" | "daddr"] => KeyPart::Ipv4Addr,
        ["ip6", "saddr" | "daddr"] => KeyPart::Ipv6Addr,
        ["tcp" | "udp" | "th" | "sctp" | "udplite" | "dccp", "sport" | "dport"] => {
            KeyPart::InetService
        }
        ["meta", "l4proto"] | ["ip", "protocol"] | ["ip6", "nexthdr"] | ["meta", "protocol"] => {
            KeyPart::InetProto
        }
        ["meta", "iifname" | "oifname"] | ["iifname"] | ["oifname"] => KeyPart::IfName,
        _ => return None,
    })
}

struct SetDef<'a> {
    name: &'a str,
    name_tok: Tok<'a>,
    desc: SetDesc,
    elems: Vec<RawElem<'a>>,
}

impl<'a> P<'a> {
    /// Parses `{ elem, elem, … }`.
    fn elements(&mut self) -> Result<Vec<RawElem<'a>>, Error> {
        self.skip_nl_only();
        self.expect(T::LBrace, "`{` opening the element list")?;
        let mut v = Vec::new();
        loop {
            self.skip_nl_only();
            let t = self.peek();
            if t.t == T::RBrace {
                self.next();
                return Ok(v);
            }
            // key parts
            let mut parts = Vec::new();
            loop {
                let (w, tk) = self.word("an element value")?;
                parts.push((w, tk.line, tk.col));
                match self.peek().t {
                    T::Word(".") => {
                        self.next();
                    }
                    _ => break,
                }
            }
            let mut e = RawElem {
                parts,
                timeout: None,
                expires: None,
                comment: None,
                counters: None,
            };
            loop {
                let t = self.peek();
                match t.t {
                    T::Word("timeout") | T::Word("expires") => {
                        self.next();
                        let (d, dt) = self.word("a duration")?;
                        let ms = parse_duration(d).ok_or_else(|| {
                            Error::new(
                                dt.line,
                                dt.col,
                                format!("expected a duration like 30s or 1h, found `{d}`"),
                            )
                        })?;
                        if t.t == T::Word("timeout") {
                            e.timeout = Some(ms);
                        } else {
                            e.expires = Some(ms);
                        }
                    }
                    T::Word("comment") => {
                        self.next();
                        let (c, _) = self.word("a quoted comment")?;
                        e.comment = Some(c.to_string());
                    }
                    T::Word("counter") => {
                        self.next();
                        let mut c = (0, 0);
                        for k in ["packets", "bytes"] {
                            if self.peek().t == T::Word(k) {
                                self.next();
                                let (n, nt) = self.word("a number")?;
                                let n: u64 = n.parse().map_err(|_| {
                                    Error::new(
                                        nt.line,
                                        nt.col,
                                        format!("expected a number, found `{n}`"),
                                    )
                                })?;
                                if k == "packets" {
                                    c.0 = n
                                } else {
                                    c.1 = n
                                }
                            }
                        }
                        e.counters = Some(c);
                    }
                    _ => break,
                }
            }
            v.push(e);
            self.skip_nl_only();
            let t = self.next();
            match t.t {
                T::Comma => continue,
                T::RBrace => return Ok(v),
                _ => return Err(self.err(t, "`,` or `}` after an element")),
            }
        }
    }

    /// After `set`: `NAME { … }`.
    fn set_def(&mut self) -> Result<SetDef<'a>, Error> {
        let (mut name, mut name_tok) = self.word("a set name")?;
        // `add set inet filter NAME {`: the last word before `{` is the name
        while let T::Word(w) | T::Str(w) = self.peek().t {
            name_tok = self.next();
            name = w;
        }
        self.expect(T::LBrace, "`{` after the set name")?;
        let mut desc: Option<SetDesc> = None;
        let mut flags = (false, false);
        let mut timeout = None;
        let mut size = None;
        let mut policy = Policy::Performance;
        let mut counters = false;
        let mut comment = None;
        let mut elems = Vec::new();
        let open = name_tok;
        loop {
            self.skip_nl();
            let t = self.next();
            let w = match t.t {
                T::RBrace => break,
                T::Word(w) => w,
                T::Eof => return Err(Error::new(t.line, t.col, format!("expected `}}` closing set `{name}` (opened at line {})", open.line))),
                _ => return Err(self.err(t, "a set statement (type, typeof, flags, timeout, size, policy, counter, comment, elements)")),
            };
            match w {
                "type" | "typeof" => {
                    let mut text = String::new();
                    while let T::Word(x) = self.peek().t {
                        self.next();
                        text.push_str(x);
                        text.push(' ');
                    }
                    let mut dims = Vec::new();
                    if w == "type" {
                        for p in text.split(|c: char| c == '.' || c.is_whitespace()).filter(|s| !s.is_empty()) {
                            dims.push(KeyPart::from_nft_name(p).ok_or_else(|| {
                                Error::new(t.line, t.col, format!("unsupported type `{p}`: expected ipv4_addr, ipv6_addr, inet_service, inet_proto or ifname"))
                            })?);
                        }
                    } else {
                        for p in text.split(" . ") {
                            dims.push(typeof_part(p).ok_or_else(|| Error::new(t.line, t.col, format!("unsupported typeof expression `{}`", p.trim())))?);
                        }
                    }
                    if dims.is_empty() || dims.len() > MAX_DIMS {
                        return Err(Error::new(t.line, t.col, format!("expected 1 to {MAX_DIMS} key types")));
                    }
                    desc = Some(SetDesc::new(&dims));
                    self.end_stmt()?;
                }
                "flags" => {
                    loop {
                        let (f, ft) = self.word("a flag")?;
                        match f {
                            "interval" => flags.0 = true,
                            "timeout" => flags.1 = true,
                            "constant" | "dynamic" | "eval" => {}
                            _ => return Err(Error::new(ft.line, ft.col, format!("expected a flag (interval, timeout, constant, dynamic), found `{f}`"))),
                        }
                        if self.peek().t == T::Comma {
                            self.next();
                        } else {
                            break;
                        }
                    }
                    self.end_stmt()?;
                }
                "timeout" | "gc-interval" => {
                    let (d, dt) = self.word("a duration")?;
                    let ms = parse_duration(d).ok_or_else(|| Error::new(dt.line, dt.col, format!("expected a duration like 30s or 1h, found `{d}`")))?;
                    if w == "timeout" {
                        timeout = Some(ms);
                    }
                    self.end_stmt()?;
                }
                "size" => {
                    let (n, nt) = self.word("a number")?;
                    let n: usize = n.parse().ok().filter(|&n| n > 0).ok_or_else(|| Error::new(nt.line, nt.col, format!("expected a positive size, found `{n}`")))?;
                    size = Some(n);
                    self.end_stmt()?;
                }
                "policy" => {
                    let (p, pt) = self.word("performance or memory")?;
                    policy = match p {
                        "performance" => Policy::Performance,
                        "memory" => Policy::Memory,
                        _ => return Err(Error::new(pt.line, pt.col, format!("expected performance or memory, found `{p}`"))),
                    };
                    self.end_stmt()?;
                }
                "counter" => {
                    counters = true;
                    self.end_stmt()?;
                }
                "auto-merge" => self.end_stmt()?,
                "comment" => {
                    let (c, _) = self.word("a quoted comment")?;
                    comment = Some(c.to_string());
                    self.end_stmt()?;
                }
                "elements" => {
                    self.expect(T::Eq, "`=` after `elements`")?;
                    elems.extend(self.elements()?);
                    self.end_stmt()?;
                }
                _ => return Err(Error::new(t.line, t.col, format!("expected a set statement (type, flags, timeout, size, policy, counter, comment, elements), found `{w}`"))),
            }
        }
        let mut desc = desc.ok_or_else(|| {
            Error::new(
                open.line,
                open.col,
                format!("set `{name}` has no `type` statement"),
            )
        })?;
        desc.interval = flags.0;
        desc.timeouts = flags.1 || timeout.is_some();
        desc.default_timeout = timeout.unwrap_or(0);
        desc.maxelem = size;
        desc.size = size;
        desc.policy = policy;
        desc.counters = counters;
        desc.comment = elems.iter().any(|e| e.comment.is_some());
        desc.set_comment = comment;
        Ok(SetDef {
            name,
            name_tok,
            desc,
            elems,
        })
    }
}

fn build_elem(dims: &[KeyPart], r: &RawElem) -> Result<Element, Error> {
    if r.parts.len() != dims.len() {
        let (_, l, c) = r.parts[0];
        return Err(Error::new(
            l,
            c,
            format!(
                "expected {} value(s) joined by ` . ` for type {}, found {}",
                dims.len(),
                dims.iter()
                    .map(|d| d.nft_name())
                    .collect::<Vec<_>>()
                    .join(" . "),
                r.parts.len()
            ),
        ));
    }
    let mut ranges = [(0u128, 0u128); MAX_DIMS];
    for (i, &(text, l, c)) in r.parts.iter().enumerate() {
        ranges[i] = parse_dim(dims[i], text).map_err(|m| Error::new(l, c, m))?;
    }
    Ok(Element {
        ranges,
        dims: dims.len() as u8,
        timeout: r.timeout,
        expires: r.expires,
        comment: r.comment.clone(),
        counters: r.counters,
    })
}

pub(crate) fn load(store: &SetStore, text: &str, now: u64) -> Result<crate::ipset::Loaded, Error> {
    let toks = lex(text)?;
    let mut p = P { t: toks, i: 0 };
    let mut st = Staging::new(store);
    let mut stats = LoadStats::default();
    let mut depth_tables: Vec<Tok> = Vec::new();
    loop {
        p.skip_nl();
        let t = p.next();
        match t.t {
            T::Eof => {
                if let Some(o) = depth_tables.last() {
                    return Err(Error::new(
                        t.line,
                        t.col,
                        format!("expected `}}` closing the table opened at line {}", o.line),
                    ));
                }
                break;
            }
            T::RBrace if !depth_tables.is_empty() => {
                depth_tables.pop();
            }
            T::Word("table") if depth_tables.is_empty() => {
                // table [family] NAME {
                loop {
                    let n = p.next();
                    match n.t {
                        T::Word(_) => {}
                        T::LBrace => break,
                        _ => return Err(p.err(n, "`{` after the table name")),
                    }
                }
                depth_tables.push(t);
            }
            T::Word("set") => {
                let def = p.set_def()?;
                create(&mut st, def, now, &mut stats)?;
            }
            T::Word("add")
            | T::Word("create")
            | T::Word("delete")
            | T::Word("destroy")
            | T::Word("flush")
                if depth_tables.is_empty() =>
            {
                let (what, wt) = p.word("set, element or ruleset")?;
                match (t.t, what) {
                    (T::Word("add") | T::Word("create"), "set") => {
                        let def = p.set_def()?;
                        create(&mut st, def, now, &mut stats)?;
                    }
                    (
                        T::Word("add") | T::Word("create") | T::Word("delete") | T::Word("destroy"),
                        "element",
                    ) => {
                        let (mut name, mut nt) = p.word("a set name")?;
                        while let T::Word(w) = p.peek().t {
                            nt = p.next();
                            name = w;
                        }
                        let raws = p.elements()?;
                        p.end_stmt()?;
                        let set = st.get_mut(name).ok_or_else(|| {
                            Error::new(nt.line, nt.col, format!("set `{name}` does not exist"))
                        })?;
                        for r in &raws {
                            let el = build_elem(set.key_dims(), r)?;
                            let (l, c) = (r.parts[0].1, r.parts[0].2);
                            if matches!(t.t, T::Word("add") | T::Word("create")) {
                                stats.elements_added += set
                                    .add_staged(&el, now)
                                    .map_err(|e| Error::new(l, c, e.to_string()))?;
                            } else {
                                stats.elements_deleted +=
                                    set.del(&el).map_err(|e| Error::new(l, c, e.to_string()))?;
                            }
                        }
                    }
                    (T::Word("flush"), "set") | (T::Word("delete") | T::Word("destroy"), "set") => {
                        let (mut name, mut nt) = p.word("a set name")?;
                        while let T::Word(w) = p.peek().t {
                            nt = p.next();
                            name = w;
                        }
                        p.end_stmt()?;
                        if t.t == T::Word("flush") {
                            st.get_mut(name)
                                .ok_or_else(|| {
                                    Error::new(
                                        nt.line,
                                        nt.col,
                                        format!("set `{name}` does not exist"),
                                    )
                                })?
                                .flush();
                        } else if !st.destroy(name) {
                            return Err(Error::new(
                                nt.line,
                                nt.col,
                                format!("set `{name}` does not exist"),
                            ));
                        }
                    }
                    (T::Word("flush"), "ruleset") => {
                        p.end_stmt()?;
                        let names: Vec<String> = store
                            .names()
                            .iter()
                            .map(|s| s.to_string())
                            .chain(st.staged.keys().cloned())
                            .collect();
                        for n in names {
                            st.destroy(&n);
                        }
                    }
                    _ => {
                        return Err(Error::new(
                            wt.line,
                            wt.col,
                            format!(
                                "expected set or element after {}, found `{what}`",
                                show(t.t)
                            ),
                        ))
                    }
                }
            }
            T::Word(_) if !depth_tables.is_empty() => {
                // chain, map, flowtable, counter, … inside a table: skip
                p.i -= 1;
                p.skip_stmt()?;
            }
            _ => {
                let what = if depth_tables.is_empty() {
                    "table, set, add, delete or flush"
                } else {
                    "set, chain or `}`"
                };
                return Err(p.err(t, what));
            }
        }
    }
    let (staged, removed) = st.finish();
    Ok((staged, removed, stats))
}

fn create(st: &mut Staging, def: SetDef, now: u64, stats: &mut LoadStats) -> Result<(), Error> {
    if st.exists(def.name) {
        return Err(Error::new(
            def.name_tok.line,
            def.name_tok.col,
            format!("set `{}` already exists", def.name),
        ));
    }
    let mut set = Set::new(def.name, def.desc)
        .map_err(|e| Error::new(def.name_tok.line, def.name_tok.col, e.to_string()))?;
    set.begin_bulk();
    let dims = set.key_dims().to_vec();
    for r in &def.elems {
        let el = build_elem(&dims, r)?;
        let (l, c) = (r.parts[0].1, r.parts[0].2);
        stats.elements_added += set
            .add_staged(&el, now)
            .map_err(|e| Error::new(l, c, e.to_string()))?;
    }
    st.create(set);
    stats.sets_created += 1;
    Ok(())
}

pub(crate) fn save(store: &SetStore, only: Option<&str>, now: u64) -> String {
    let mut out = String::new();
    let names: Vec<&str> = match only {
        Some(n) => vec![n],
        None => store.names(),
    };
    for name in names {
        let Some(set) = store.get(name) else { continue };
        let d = set.desc();
        let _ = writeln!(out, "set {name} {{");
        let _ = writeln!(out, "\ttype {}", d.type_name());
        let mut flags = Vec::new();
        if d.interval {
            flags.push("interval");
        }
        if d.timeouts {
            flags.push("timeout");
        }
        if !flags.is_empty() {
            let _ = writeln!(out, "\tflags {}", flags.join(","));
        }
        if d.timeouts && d.default_timeout > 0 {
            let _ = writeln!(out, "\ttimeout {}", format_duration(d.default_timeout));
        }
        if let Some(m) = d.maxelem {
            let _ = writeln!(out, "\tsize {m}");
        }
        if d.policy == Policy::Memory {
            let _ = writeln!(out, "\tpolicy memory");
        }
        if d.counters {
            let _ = writeln!(out, "\tcounter");
        }
        if let Some(c) = &d.set_comment {
            let _ = writeln!(out, "\tcomment \"{c}\"");
        }
        let mut els = set.elements(now);
        // bitmap/hash-stored interval sets: merge runs of points back into ranges
        if d.interval
            && d.dims.len() == 1
            && matches!(
                set.backend(),
                crate::BackendKind::Bitmap
                    | crate::BackendKind::HashFixed
                    | crate::BackendKind::HashGrowable
            )
        {
            let mut merged: Vec<crate::StoredElement> = Vec::with_capacity(els.len());
            for e in els {
                if let Some(last) = merged.last_mut() {
                    let (a, b) = (&last.element, &e.element);
                    if a.ranges[0].1.checked_add(1) == Some(b.ranges[0].0)
                        && last.remaining == e.remaining
                        && a.comment == b.comment
                        && a.counters.is_none()
                        && b.counters.is_none()
                    {
                        last.element.ranges[0].1 = b.ranges[0].1;
                        continue;
                    }
                }
                merged.push(e);
            }
            els = merged;
        }
        if !els.is_empty() {
            out.push_str("\telements = { ");
            for (i, se) in els.iter().enumerate() {
                let el = &se.element;
                if i > 0 {
                    out.push_str(",\n\t\t     ");
                }
                let key: Vec<String> = el
                    .ranges()
                    .iter()
                    .zip(&d.dims)
                    .map(|(&(l, h), &k)| fmt_range(k, l, h))
                    .collect();
                out.push_str(&key.join(" . "));
                if let Some(t) = el.timeout {
                    let _ = write!(out, " timeout {}", format_duration(t));
                }
                if let Some(r) = se.remaining {
                    let _ = write!(out, " expires {}", format_duration(r));
                }
                if let Some(c) = &el.comment {
                    let _ = write!(out, " comment \"{c}\"");
                }
                if d.counters {
                    let (p, b) = el.counters.unwrap_or((0, 0));
                    let _ = write!(out, " counter packets {p} bytes {b}");
                }
            }
            out.push_str(" }\n");
        }
        out.push_str("}\n");
    }
    out
}
