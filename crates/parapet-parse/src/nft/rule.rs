//! One nft rule read left to right: statements (`counter`, `log`, `limit`,
//! `comment`) and the verdict; match expressions are handed to `matches`.

use super::lexer::{JumpAt, Res, Tok, Token};
use super::vmap::{NamedMap, VmapEntry};
use crate::iptables::{parse_log_level, parse_rate};
use parapet_model::*;

/// One rule as its tokens are read left to right.
pub(super) struct RuleParser<'a> {
    pub(super) toks: &'a [Token],
    pub(super) i: usize,
    pub(super) family: TableFamily,
    pub(super) set_refs: &'a mut Vec<SetRef>,
    pub(super) matches: Matches,
    pub(super) rule: Rule,
    pub(super) action: Option<Action>,
    pub(super) jump: Option<JumpAt>,
    /// The table's named maps, for `vmap @NAME`.
    pub(super) maps: &'a [&'a NamedMap],
    /// Set by a verdict map: the rule becomes one rule per element.
    pub(super) vmap: Option<Vec<VmapEntry>>,
    /// The table's named limit objects, for `limit name "NAME"`.
    pub(super) limits: &'a [(String, Limit)],
    /// Where the rule first used `th` (checked once the rule is read).
    pub(super) th: Option<(u32, u32)>,
    /// The table's dynamic sets (those some rule writes).
    pub(super) dynsets: &'a [DynsetDecl],
    /// The table's name (a meter's set belongs to it).
    pub(super) table_name: &'a str,
}

impl RuleParser<'_> {
    pub(super) fn peek(&self) -> Option<&Token> {
        self.toks.get(self.i)
    }

    pub(super) fn peek_word(&self) -> Option<&str> {
        self.peek().and_then(|t| t.word())
    }

    fn at_end_pos(&self) -> (u32, u32) {
        match self.peek() {
            Some(t) => (t.line, t.col),
            None => self
                .toks
                .last()
                .map_or((0, 1), |t| (t.line, t.col + (t.end - t.start) as u32)),
        }
    }

    pub(super) fn fail<T>(&self, msg: impl Into<String>) -> Res<T> {
        let (l, c) = self.at_end_pos();
        Err((l, c, msg.into()))
    }

    pub(super) fn next_word(&mut self, what: &str) -> Res<Token> {
        match self.peek() {
            Some(t) if matches!(t.tok, Tok::Word(_) | Tok::Str(_)) => {
                let t = t.clone();
                self.i += 1;
                Ok(t)
            }
            Some(t) => self.fail(format!("expected {what}, found '{}'", t.show())),
            None => self.fail(format!("expected {what} at the end of the rule")),
        }
    }

    /// `accept` or `drop` right after a verdict map (`ip saddr vmap @m
    /// accept`, as nftables' tests write it).
    fn verdict_after_vmap(&self, t: &Token) -> Option<Verdict> {
        let mapped = self
            .vmap
            .as_ref()
            .is_some_and(|es| es.iter().all(|e| e.action.is_some()));
        if !mapped || self.action != Some(Action::Count) {
            return None;
        }
        match t.word() {
            Some("accept") => Some(Verdict::Accept),
            Some("drop") => Some(Verdict::Drop),
            _ => None,
        }
    }

    pub(super) fn parse(&mut self) -> Res<()> {
        while let Some(t) = self.peek().cloned() {
            if self.action.is_some() {
                if t.word() == Some("comment") {
                    self.i += 1;
                    self.comment()?;
                    continue;
                }
                if matches!(self.action, Some(Action::Log(_)))
                    && matches!(
                        t.word(),
                        Some("accept" | "drop" | "reject" | "jump" | "goto" | "return")
                    )
                {
                    // `log … drop`: the log rides on the rule; the verdict
                    // that follows becomes its action.
                    if let Some(Action::Log(spec)) = self.action.take() {
                        self.rule.log = Some(spec);
                    }
                    continue;
                }
                if let Some(v) = self.verdict_after_vmap(&t) {
                    // `KEY vmap … accept`: nft goes on to the next
                    // statement only after an element whose verdict is
                    // `continue`; a key in no element ends the rule (the
                    // lookup fails), any other verdict decides. So the
                    // verdict is the `continue` elements' own.
                    for e in self.vmap.iter_mut().flatten() {
                        if e.action == Some(Action::Count) {
                            e.action = Some(Action::Verdict(v.clone()));
                        }
                    }
                    self.action = Some(Action::Verdict(v));
                    self.i += 1;
                    continue;
                }
                if matches!(self.action, Some(Action::Log(_))) && t.word() == Some("limit") {
                    return self.fail("'log' before 'limit' is not supported (parapet logs the packets the rule matches, after its limit); write the limit first");
                }
                return Err((
                    t.line,
                    t.col,
                    format!(
                        "expected the end of the rule after the verdict, found '{}'",
                        t.show()
                    ),
                ));
            }
            let Some(w) = t.word() else {
                return Err((
                    t.line,
                    t.col,
                    format!(
                        "expected an expression or a statement, found '{}'",
                        t.show()
                    ),
                ));
            };
            match w {
                "counter" if self.toks.get(self.i + 1).and_then(|t| t.word()) == Some("name") => {
                    // A named counter object: counts, decides nothing.
                    self.i += 2;
                    // `counter name ip saddr map { … }`: the key is one or
                    // more words before `map`.
                    let per_packet = self.toks[self.i..]
                        .iter()
                        .take(4)
                        .take_while(|t| matches!(t.tok, Tok::Word(_)))
                        .any(|t| t.word() == Some("map"));
                    if per_packet {
                        return self.fail("'counter name KEY map { … }' (a counter chosen per packet) is not supported");
                    }
                    self.next_word("a counter name")?;
                }
                "counter" => {
                    self.i += 1;
                    if self.peek_word() == Some("packets") {
                        self.i += 1;
                        let p = self.number("a packet count")?;
                        let b = self.next_word("'bytes'")?;
                        if b.word() != Some("bytes") {
                            return Err((
                                b.line,
                                b.col,
                                format!("expected 'bytes', found '{}'", b.show()),
                            ));
                        }
                        let n = self.number("a byte count")?;
                        self.rule.counters = Counters {
                            packets: p,
                            bytes: n,
                        };
                    }
                }
                "log" => {
                    self.i += 1;
                    self.log()?;
                }
                "limit" => {
                    if self.rule.dynset.is_some() || self.rule.quota.is_some() {
                        return self.fail("a second stateful condition (limit, a dynamic set) in one rule is not supported");
                    }
                    if self.rule.limit.is_some() {
                        return self.fail("a second 'limit' in one rule is not supported");
                    }
                    if matches!(self.action, Some(Action::Log(_))) || self.rule.log.is_some() {
                        return self.fail("'log' before 'limit' is not supported (parapet logs the packets the rule matches, after its limit); write the limit first");
                    }
                    self.i += 1;
                    self.limit()?;
                }
                "comment" => {
                    self.i += 1;
                    self.comment()?;
                }
                "notrack" => {
                    self.i += 1;
                    self.rule.kernel.push("notrack".into());
                }
                "flow" => {
                    // `flow add @ft` / `flow offload @ft`: offload to a
                    // flowtable, the kernel's.
                    self.i += 1;
                    let op = self.next_word("'add' or 'offload'")?;
                    let ft = self.next_word("'@FLOWTABLE'")?;
                    if !matches!(op.word(), Some("add" | "offload"))
                        || !ft.word().is_some_and(|w| w.starts_with('@'))
                    {
                        return Err((op.line, op.col, "expected 'flow add @FLOWTABLE'".into()));
                    }
                    self.rule.kernel.push(format!("flow add {}", ft.show()));
                }
                "ct" if self.toks.get(self.i + 1).and_then(|t| t.word()) == Some("helper")
                    && self.toks.get(self.i + 2).and_then(|t| t.word()) != Some("set") =>
                {
                    self.trailing_ct_helper()?
                }
                _ if self.setter().is_some() => {
                    // Conntrack helpers, timeouts, zones, marks, labels and
                    // MSS clamping: they change what the kernel does next,
                    // decide nothing here, and stay the kernel's.
                    let head = self.setter().unwrap_or(0);
                    let from = self.i;
                    self.i += head;
                    while let Some(t) = self.peek() {
                        if matches!(t.tok, Tok::Semi)
                            || matches!(
                                t.word(),
                                Some(
                                    "comment"
                                        | "counter"
                                        | "log"
                                        | "limit"
                                        | "accept"
                                        | "drop"
                                        | "reject"
                                        | "return"
                                        | "jump"
                                        | "goto"
                                        | "continue"
                                        | "notrack"
                                        | "flow"
                                )
                            )
                        {
                            break;
                        }
                        self.i += 1;
                    }
                    if self.i == from + head {
                        return self.fail("expected a value after 'set'");
                    }
                    let text: Vec<String> =
                        self.toks[from..self.i].iter().map(Token::show).collect();
                    // `meta mark set` of a number or of the mark's own
                    // bits is parapet's (later rules read the new mark);
                    // other values (`ip dscp << 2`) stay the kernel's
                    let own = match text.first().map(String::as_str) {
                        Some("mark") => crate::mark_stmt::mark_set_value(&text[2..]),
                        Some("meta") if text.get(1).map(String::as_str) == Some("mark") => {
                            crate::mark_stmt::mark_set_value(&text[3..])
                        }
                        _ => None,
                    };
                    match own {
                        Some(change) => {
                            let before = self.rule.set_mark.unwrap_or_default();
                            self.rule.set_mark = Some(before.then(change));
                        }
                        None => self.rule.kernel.push(text.join(" ")),
                    }
                }
                "queue" => {
                    return self.fail("'queue' is not supported: it hands the packet to a user-space program (NFQUEUE) whose verdict parapet cannot know; keep the rule in nftables");
                }
                "add" | "update" | "delete" => {
                    self.i += 1;
                    self.dynset_statement(match w {
                        "add" => DynsetOp::Add,
                        "update" => DynsetOp::Update,
                        _ => DynsetOp::Delete,
                    })?;
                }
                "meter" => {
                    self.i += 1;
                    self.meter()?;
                }
                "numgen" => {
                    if self.rule.is_stateful() {
                        return self.fail("a second stateful condition (limit, quota, numgen, a dynamic set) in one rule is not supported");
                    }
                    self.i += 1;
                    self.numgen()?;
                }
                "quota" => {
                    if self.rule.is_stateful() {
                        return self.fail("a second stateful condition (limit, quota, a dynamic set) in one rule is not supported");
                    }
                    self.i += 1;
                    self.quota()?;
                }
                "accept" | "drop" | "return" => {
                    self.i += 1;
                    self.action = Some(match w {
                        "accept" => Action::Verdict(Verdict::Accept),
                        "drop" => Action::Verdict(Verdict::Drop),
                        _ => Action::Return,
                    });
                }
                "reject" => {
                    self.i += 1;
                    self.reject()?;
                }
                "jump" | "goto" => {
                    self.i += 1;
                    let target = self.next_word("a chain name")?;
                    let name = match &target.tok {
                        Tok::Word(s) | Tok::Str(s) => s.clone(),
                        _ => unreachable!(),
                    };
                    self.jump = Some((name.clone(), target.line, target.col));
                    self.action = Some(if w == "jump" {
                        Action::Jump(name)
                    } else {
                        Action::Goto(name)
                    });
                }
                _ => {
                    if self
                        .rule
                        .dynset
                        .as_ref()
                        .is_some_and(|d| d.op != DynsetOp::Lookup)
                    {
                        // The kernel would change the set for packets this
                        // match then refuses.
                        return self.fail(format!("a match after a dynamic set statement is not supported (parapet checks it after the rule's matches): write '{w} …' before it"));
                    }
                    if self.rule.statistic.is_some() {
                        return self.fail(format!("a match after 'numgen' is not supported (parapet counts it after the rule's matches): write '{w} …' before 'numgen'"));
                    }
                    if self.rule.set_mark.is_some() {
                        // nft would read the new mark; parapet matches
                        // first, then changes the mark
                        return self.fail(format!("a match after 'meta mark set' is not supported (parapet changes the mark after the rule's matches): write '{w} …' before it"));
                    }
                    if self.rule.quota.is_some() {
                        return self.fail(format!("a match after 'quota' is not supported (parapet counts the quota after the rule's matches): write '{w} …' before 'quota'"));
                    }
                    if self.rule.limit.is_some() {
                        // The kernel would spend a token on packets this
                        // match then refuses; parapet checks limit last.
                        return self.fail(format!("a match after 'limit' is not supported (parapet checks the limit after the rule's matches): write '{w} …' before 'limit'"));
                    }
                    let time = w == "meta"
                        && matches!(
                            self.toks.get(self.i + 1).and_then(|t| t.word()),
                            Some("time" | "hour" | "day")
                        );
                    if time {
                        self.time_expr()?
                    } else {
                        self.match_expr()?
                    }
                }
            }
        }
        Ok(())
    }

    /// At `ct helper "NAME"`, a match on the connection's helper, which
    /// parapet's packet key does not carry. nft runs a rule's expressions
    /// in order and a failed match only stops the ones after it, so a
    /// match with no statement after it (`udp dport 137 ct helper
    /// "netbios-ns"`, as nftables' tests write it) decides nothing: it is
    /// kept for the kernel's listing. Anywhere else it is refused.
    fn trailing_ct_helper(&mut self) -> Res<()> {
        let from = self.i;
        self.i += 2;
        self.next_word("a helper name")?;
        let rest = &self.toks[self.i..];
        let trailing = match rest.first().and_then(|t| t.word()) {
            None => rest.is_empty() || matches!(rest[0].tok, Tok::Semi),
            Some("comment") => rest.len() == 2,
            _ => false,
        };
        if !trailing {
            let t = &self.toks[from];
            return Err((t.line, t.col, "'ct helper \"NAME\"' as a match is supported only at the end of a rule, where it decides nothing (the packet key does not carry the connection's helper); to attach a helper write 'ct helper set \"NAME\"'".into()));
        }
        let text: Vec<String> = self.toks[from..self.i].iter().map(Token::show).collect();
        self.rule.kernel.push(text.join(" "));
        Ok(())
    }

    /// At `ct helper set`, `meta mark set`, `tcp option maxseg size set`
    /// and the like: the number of words up to and including `set`.
    fn setter(&self) -> Option<usize> {
        const HEADS: [&[&str]; 12] = [
            // `mark set 1`: nft's short form of `meta mark set 1`.
            &["mark", "set"],
            &["priority", "set"],
            &["ct", "helper", "set"],
            &["ct", "timeout", "set"],
            &["ct", "expectation", "set"],
            &["ct", "zone", "set"],
            &["ct", "mark", "set"],
            &["ct", "secmark", "set"],
            &["meta", "mark", "set"],
            &["meta", "secmark", "set"],
            &["meta", "priority", "set"],
            &["tcp", "option", "maxseg", "size", "set"],
        ];
        HEADS
            .iter()
            .find(|h| {
                h.iter()
                    .enumerate()
                    .all(|(k, w)| self.toks.get(self.i + k).and_then(|t| t.word()) == Some(*w))
            })
            .map(|h| h.len())
    }

    pub(super) fn number(&mut self, what: &str) -> Res<u64> {
        let t = self.next_word(what)?;
        t.word().and_then(|w| w.parse().ok()).ok_or((
            t.line,
            t.col,
            format!("expected {what}, found '{}'", t.show()),
        ))
    }

    fn string(&mut self, what: &str) -> Res<String> {
        let t = self.next_word(what)?;
        match t.tok {
            Tok::Str(s) | Tok::Word(s) => Ok(s),
            _ => unreachable!(),
        }
    }

    fn comment(&mut self) -> Res<()> {
        self.rule.comment = Some(self.string("a quoted comment")?);
        Ok(())
    }

    fn log(&mut self) -> Res<()> {
        let mut spec = LogSpec::default();
        // `log group N`: to nfnetlink_log (NFLOG), a logging daemon's
        // copy that decides nothing: left to the kernel like iptables'
        // `-j NFLOG` (`kernel_statement_notes`), the rule goes on.
        let from = self.i - 1;
        let mut group: Option<(u32, u32)> = None;
        while let Some(w) = self.peek_word() {
            match w {
                "prefix" => {
                    self.i += 1;
                    spec.prefix = Some(self.string("a quoted log prefix")?);
                }
                "level" => {
                    self.i += 1;
                    let t = self.next_word("a log level")?;
                    spec.level = Some(t.word().and_then(parse_log_level).ok_or((t.line, t.col, format!("expected a log level (emerg, alert, crit, err, warn, notice, info, debug), found '{}'", t.show())))?);
                }
                "flags" => {
                    // `flags tcp sequence,options`, `flags ip options`,
                    // `flags skuid`, `flags ether`, `flags all`.
                    self.i += 1;
                    let f = self.next_word("a log flag (tcp, ip, skuid, ether, all)")?;
                    let mut names: Vec<String> = Vec::new();
                    match f.word() {
                        Some(k @ ("tcp" | "ip")) => loop {
                            let n = self.next_word("sequence or options")?;
                            names.push(format!("{k} {}", n.show()));
                            if !matches!(self.peek().map(|t| &t.tok), Some(Tok::Comma)) {
                                break;
                            }
                            self.i += 1;
                        },
                        Some("all") => names.extend(LOG_OPTIONS.iter().map(|(_, n)| n.to_string())),
                        Some(w) => names.push(w.to_string()),
                        None => {}
                    }
                    for n in names {
                        let Some((o, _)) = LOG_OPTIONS.iter().find(|(_, x)| *x == n) else {
                            return Err((f.line, f.col, format!("unknown log flag '{n}' (supported: tcp sequence,options, ip options, skuid, ether, all)")));
                        };
                        if !spec.options.iter().any(|x| x == o) {
                            spec.options.push(o.to_string());
                        }
                    }
                    spec.options
                        .sort_by_key(|o| LOG_OPTIONS.iter().position(|(f, _)| f == o));
                }
                "group" | "snaplen" | "queue-threshold" => {
                    let w = w.to_string();
                    let (line, col) = self.peek().map_or((0, 0), |t| (t.line, t.col));
                    self.i += 1;
                    let t = self.next_word("a number")?;
                    if t.word().and_then(|n| n.parse::<u32>().ok()).is_none() {
                        return Err((
                            t.line,
                            t.col,
                            format!("expected a number after 'log {w}', found '{}'", t.show()),
                        ));
                    }
                    if w == "group" {
                        group = Some((line, col));
                    }
                }
                _ => break,
            }
        }
        if let Some((line, col)) = group {
            if spec.level.is_some() || !spec.options.is_empty() {
                return Err((
                    line,
                    col,
                    "'log group' takes no level or flags (nft refuses them: they are syslog's)"
                        .into(),
                ));
            }
            let text: Vec<String> = self.toks[from..self.i].iter().map(Token::show).collect();
            self.rule.kernel.push(text.join(" "));
            return Ok(());
        }
        if self.toks[from..self.i]
            .iter()
            .any(|t| matches!(t.word(), Some("snaplen" | "queue-threshold")))
        {
            return self.fail("'log snaplen' and 'log queue-threshold' need 'log group N'");
        }
        self.action = Some(Action::Log(spec));
        Ok(())
    }

    /// After `limit`: `rate [over] R/UNIT [burst B packets]`, or `name
    /// "NAME"` of a limit object of the table (sharing its bucket). Also
    /// reads a limit object's body (`rate …`).
    pub(super) fn limit(&mut self) -> Res<()> {
        if self.peek_word() == Some("name") {
            self.i += 1;
            let t = self.next_word("a limit object's name")?;
            let name = match &t.tok {
                Tok::Word(s) | Tok::Str(s) => s.clone(),
                _ => unreachable!(),
            };
            let Some((_, l)) = self.limits.iter().find(|(n, _)| *n == name) else {
                if self.toks[self.i..].iter().any(|t| t.word() == Some("map")) {
                    self.i -= 1;
                    return self.limit_map();
                }
                return Err((
                    t.line,
                    t.col,
                    format!("no limit object '{name}' in this table (declare it with 'limit {name} {{ rate … }}')"),
                ));
            };
            self.rule.limit = Some(Limit {
                object: Some(name),
                ..l.clone()
            });
            return Ok(());
        }
        let r = self.next_word("'rate' or 'name'")?;
        if r.word() != Some("rate") {
            return Err((
                r.line,
                r.col,
                format!("expected 'rate', found '{}'", r.show()),
            ));
        }
        let over = self.peek_word() == Some("over");
        if over {
            self.i += 1;
        }
        let v = self.next_word("a rate like 10/second")?;
        let (rate, per) = v
            .word()
            .filter(|w| w.contains('/'))
            .and_then(parse_rate)
            .ok_or((
                v.line,
                v.col,
                format!("expected a rate like 10/second, found '{}'", v.show()),
            ))?;
        if rate == 0 {
            return Err((v.line, v.col, "a limit rate of 0 is not valid".into()));
        }
        let mut burst = NFT_DEFAULT_BURST;
        if self.peek_word() == Some("burst") {
            self.i += 1;
            let n = self.number("a burst size")?;
            burst = match u32::try_from(n) {
                Ok(b) => b,
                Err(_) => return self.fail(format!("burst {n} is too large")),
            };
            if self.peek_word() == Some("packets") {
                self.i += 1;
            } else if self.peek_word() == Some("bytes") {
                return self.fail("byte-based limits are not supported yet");
            }
        }
        self.rule.limit = Some(Limit {
            rate,
            per,
            burst,
            flavor: LimitFlavor::Nft,
            over,
            object: None,
        });
        Ok(())
    }

    /// After `quota`: `[over] N [bytes|kbytes|mbytes|gbytes] [used U
    /// UNIT]`.
    pub(super) fn quota(&mut self) -> Res<()> {
        if self.peek_word() == Some("name") {
            return self.fail("a rule using a named quota object ('quota name \"NAME\"') is not supported yet: the object's count is shared by every rule naming it, which parapet does not keep yet; 'quota N bytes' in the rule is");
        }
        let over = self.peek_word() == Some("over");
        if over {
            self.i += 1;
        }
        let bytes = self.bytes("a quota like 25 mbytes")?;
        let mut used = 0;
        if self.peek_word() == Some("used") {
            self.i += 1;
            used = self.bytes("a byte count like 0 bytes")?;
        }
        self.rule.quota = Some(Quota { bytes, over, used });
        Ok(())
    }

    /// `N [bytes|kbytes|mbytes|gbytes]` (nft also writes `25mbytes`).
    fn bytes(&mut self, what: &str) -> Res<u64> {
        let t = self.next_word(what)?;
        let w = t.word().unwrap_or("");
        let split = w.find(|c: char| !c.is_ascii_digit()).unwrap_or(w.len());
        let (num, mut unit) = (w[..split].to_string(), w[split..].to_string());
        if unit.is_empty()
            && matches!(
                self.peek_word(),
                Some("bytes" | "kbytes" | "mbytes" | "gbytes")
            )
        {
            unit = self.peek_word().unwrap_or("").to_string();
            self.i += 1;
        }
        let scale: u64 = match unit.as_str() {
            "" | "bytes" => 1,
            "kbytes" => 1 << 10,
            "mbytes" => 1 << 20,
            "gbytes" => 1 << 30,
            _ => {
                return Err((
                    t.line,
                    t.col,
                    format!("expected {what}, found '{}'", t.show()),
                ))
            }
        };
        num.parse::<u64>()
            .ok()
            .and_then(|n| n.checked_mul(scale))
            .ok_or((
                t.line,
                t.col,
                format!("expected {what}, found '{}'", t.show()),
            ))
    }

    fn reject(&mut self) -> Res<()> {
        let mut with = None;
        if self.peek_word() == Some("with") {
            self.i += 1;
            let a = self.next_word("tcp, icmp, icmpv6 or icmpx")?;
            let b = self.next_word("'reset' or 'type'")?;
            with = Some(match (a.word(), b.word()) {
                (Some("tcp"), Some("reset")) => "tcp-reset".to_string(),
                // `with icmpx admin-prohibited`: nft lists it without `type`.
                (Some(k @ ("icmp" | "icmpv6" | "icmpx")), _) => {
                    let t = if b.word() == Some("type") {
                        self.next_word("a reject type")?
                    } else {
                        b.clone()
                    };
                    let t = t.word().unwrap_or("").to_string();
                    match k {
                        "icmp" => format!(
                            "icmp-{}",
                            if t == "prot-unreachable" {
                                "proto-unreachable"
                            } else {
                                &t
                            }
                        ),
                        "icmpv6" => format!(
                            "icmp6-{}",
                            if t == "admin-prohibited" {
                                "adm-prohibited"
                            } else {
                                &t
                            }
                        ),
                        _ => format!("icmpx-{t}"),
                    }
                }
                _ => {
                    return Err((
                        a.line,
                        a.col,
                        "expected 'with tcp reset' or 'with icmp|icmpv6|icmpx type TYPE'".into(),
                    ))
                }
            });
        }
        self.action = Some(Action::Verdict(Verdict::Reject { with }));
        Ok(())
    }
}
