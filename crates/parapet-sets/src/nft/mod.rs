//! nft set syntax: `set NAME { type …; flags …; timeout …; size …; elements = { … } }`.
//!
//! [`token`] makes tokens, [`parse`] reads `set` blocks, [`load`] stages them
//! into a store (all or nothing), [`save`] writes them back.

mod parse;
mod save;
mod token;

use parse::{build_elem, SetDef, P};
pub(crate) use save::save;
use token::{lex, show, Tok, T};

use crate::set::Set;
use crate::store::{LoadStats, Loaded, SetStore, Staging};
use crate::Error;
use std::fmt::Write;

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

pub(crate) fn load(store: &SetStore, text: &str, now: u64) -> Result<Loaded, Error> {
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
                        st.destroy_all();
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
    Ok((staged, removed, stats, store.lists.clone()))
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

/// The nft side of the store.
impl SetStore {
    /// Loads nft set definitions (`set NAME { … }`, optionally inside
    /// `table FAMILY NAME { … }`; other blocks are skipped) and
    /// `add element` / `delete element` / `flush set` commands. All or nothing.
    pub fn load_nft(&mut self, text: &str) -> Result<LoadStats, Error> {
        let now = self.now();
        let (staged, removed, stats, lists) = load(self, text, now)?;
        self.commit(staged, removed, lists);
        Ok(stats)
    }
    /// nft text of all sets (sorted by name), or of one set.
    pub fn save_nft(&self, only: Option<&str>) -> String {
        save(self, only, self.now())
    }
}
