//! The parser of nft `set` blocks and their elements, over the tokens of
//! [`super::token`].

use super::parse_duration;
use super::token::{show, Tok, T};
use crate::desc::SetDesc;
use crate::element::Element;
use crate::key::{parse_dim, KeyPart, MAX_DIMS};
use crate::Error;
use parapet_model::Policy;

pub(super) struct RawElem<'a> {
    pub(super) parts: Vec<(&'a str, usize, usize)>,
    pub(super) timeout: Option<u64>,
    pub(super) expires: Option<u64>,
    pub(super) comment: Option<String>,
    pub(super) counters: Option<(u64, u64)>,
}

pub(super) struct P<'a> {
    pub(super) t: Vec<Tok<'a>>,
    pub(super) i: usize,
}

impl<'a> P<'a> {
    pub(super) fn peek(&self) -> Tok<'a> {
        self.t[self.i]
    }
    pub(super) fn next(&mut self) -> Tok<'a> {
        let t = self.t[self.i];
        if self.i + 1 < self.t.len() {
            self.i += 1;
        }
        t
    }
    pub(super) fn err(&self, tok: Tok, expected: &str) -> Error {
        Error::new(
            tok.line,
            tok.col,
            format!("expected {expected}, found {}", show(tok.t)),
        )
    }
    pub(super) fn skip_nl(&mut self) {
        while matches!(self.peek().t, T::Nl | T::Semi) {
            self.next();
        }
    }
    pub(super) fn skip_nl_only(&mut self) {
        while matches!(self.peek().t, T::Nl) {
            self.next();
        }
    }
    pub(super) fn word(&mut self, what: &str) -> Result<(&'a str, Tok<'a>), Error> {
        let t = self.next();
        match t.t {
            T::Word(w) => Ok((w, t)),
            T::Str(w) => Ok((w, t)),
            _ => Err(self.err(t, what)),
        }
    }
    pub(super) fn expect(&mut self, want: T, what: &str) -> Result<(), Error> {
        let t = self.next();
        if std::mem::discriminant(&t.t) == std::mem::discriminant(&want) {
            Ok(())
        } else {
            Err(self.err(t, what))
        }
    }
    pub(super) fn end_stmt(&mut self) -> Result<(), Error> {
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
    pub(super) fn skip_stmt(&mut self) -> Result<(), Error> {
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

pub(super) fn typeof_part(expr: &str) -> Option<KeyPart> {
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
        ["ether", "saddr" | "daddr"] => KeyPart::EtherAddr,
        ["meta", "mark"] | ["ct", "mark"] | ["mark"] => KeyPart::Mark,
        _ => return None,
    })
}

pub(super) struct SetDef<'a> {
    pub(super) name: &'a str,
    pub(super) name_tok: Tok<'a>,
    pub(super) desc: SetDesc,
    pub(super) elems: Vec<RawElem<'a>>,
}

impl<'a> P<'a> {
    /// Parses `{ elem, elem, … }`.
    pub(super) fn elements(&mut self) -> Result<Vec<RawElem<'a>>, Error> {
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
    pub(super) fn set_def(&mut self) -> Result<SetDef<'a>, Error> {
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

pub(super) fn build_elem(dims: &[KeyPart], r: &RawElem) -> Result<Element, Error> {
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
