//! The nft frontend: the text `nft list ruleset` prints for `inet`, `ip`
//! and `ip6` tables, and `nft -f` scripts (includes, variables, commands).
//!
//! Structure (tables, chains, base chain `type … hook … priority …; policy
//! …;`) is parsed from tokens; each rule is one line (or `;`-separated
//! statement list) read left to right: selector expressions (`ip saddr`,
//! `tcp dport`, `ct state`, …) with an optional `!=`, a value, an anonymous
//! set `{ … }` or a named set `@NAME`; then statements (`counter`, `log`,
//! `limit`) and a verdict. Named `set` blocks are returned raw.

//!
//! One job a file: `lexer` (text → tokens with positions), `script`
//! (`include`, `define`, `$NAME`: one token stream), `table` (tables,
//! set and map blocks, jump resolution), `chain` (chain bodies, base chain
//! headers, rules added to their chain), `commands` (`add`/`insert`/
//! `flush`/`delete` applied in order), `rule` (one rule's statements and
//! verdict), `matches` (selector expressions), `values` (the values and
//! anonymous sets they compare with), `vmap` (verdict map elements → one
//! rule each).

mod binding;
mod chain;
mod commands;
mod ctaddr;
mod ctstatus;
mod dynset;
mod fib;
mod kernel;
mod lexer;
mod matches;
mod numgen;
mod objects;
mod objref;
mod reject_hooks;
mod rule;
mod script;
mod table;
mod time;
mod values;
mod vmap;

use crate::error::{Errors, ParseError};
use crate::SetBlock;
use parapet_model::*;
use table::Parser;

pub(crate) fn parse(
    text: &str,
    file: &str,
    include_dirs: &[std::path::PathBuf],
) -> Result<(Ruleset, Vec<SetBlock>), Vec<ParseError>> {
    let mut errs = Errors::new(file);
    let (toks, sources) = script::expand(text, file, include_dirs, &mut errs);
    let written = dynset::written_sets(&toks);
    let mut p = Parser {
        written,
        dynsets: Vec::new(),
        toks,
        pos: 0,
        errs,
        rs: Ruleset::default(),
        sets: Vec::new(),
        next_id: 1,
        sources,
        jumps: Vec::new(),
        dormant: Vec::new(),
        maps: Vec::new(),
        notes: Vec::new(),
        limits: Vec::new(),
    };
    p.file();
    let Parser { errs, rs, sets, .. } = p;
    errs.finish((rs, sets))
}
