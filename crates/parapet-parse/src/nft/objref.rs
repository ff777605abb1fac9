//! `limit name KEY map { k : "OBJ", … }` (nft_objref.c's map form): the
//! packet's KEY picks the limit object whose bucket it takes; a packet
//! whose KEY is in no element breaks the rule (`NFT_BREAK`). Elements are
//! disjoint, so this is one rule per element, each with the element's KEY
//! and a `limit name "OBJ"` (sharing the object's one bucket, as every
//! rule naming it does): at most one of them can match a packet, as in
//! the kernel.

use super::lexer::{Res, Tok};
use super::rule::RuleParser;
use super::vmap::entries;
use parapet_model::*;

impl RuleParser<'_> {
    /// At KEY after `limit name`.
    pub(super) fn limit_map(&mut self) -> Res<()> {
        let mut sels = vec![self.selector()?];
        while self.peek_word() == Some(".") {
            self.i += 1;
            sels.push(self.selector()?);
        }
        let m = self.next_word("'map'")?;
        if m.word() != Some("map") {
            return Err((
                m.line,
                m.col,
                format!("expected 'map', found '{}'", m.show()),
            ));
        }
        if !matches!(self.peek().map(|t| &t.tok), Some(Tok::Open)) {
            return self.fail("'limit name KEY map @NAME' (a named object map) is not supported yet: write the map's elements in braces");
        }
        let elements = self.braced("'}' closing the map")?;
        // Each element's object name (after its ':'), and the elements
        // without it, read as a set's.
        let mut keys_only = Vec::new();
        let mut limits = Vec::new();
        for el in elements
            .split(|t| t.tok == Tok::Comma)
            .filter(|e| !e.is_empty())
        {
            let colon = el.iter().position(|t| t.word() == Some(":"));
            let (Some(c), [name]) = (colon, colon.map_or(&el[..0], |c| &el[c + 1..])) else {
                let f = &el[0];
                return Err((
                    f.line,
                    f.col,
                    "expected 'KEY : \"LIMIT\"' in the limit map".into(),
                ));
            };
            let obj = match &name.tok {
                Tok::Word(s) | Tok::Str(s) => s.clone(),
                _ => return Err((name.line, name.col, "expected a limit object's name".into())),
            };
            let Some((_, l)) = self.limits.iter().find(|(n, _)| *n == obj) else {
                return Err((name.line, name.col, format!("no limit object '{obj}' in this table (declare it with 'limit {obj} {{ rate … }}')")));
            };
            limits.push(Limit {
                object: Some(obj),
                ..l.clone()
            });
            if !keys_only.is_empty() {
                let mut comma = el[0].clone();
                comma.tok = Tok::Comma;
                keys_only.push(comma);
            }
            keys_only.extend_from_slice(&el[..c]);
        }
        for s in &sels {
            for (f, v) in &s.implied {
                self.matches.constrain(*f, v.clone());
            }
        }
        let keys: Vec<_> = sels.iter().map(|s| (s.field, s.kind)).collect();
        let mut alts = entries(&keys_only, &keys, false, |k, t| self.element(k, t))?;
        for (e, l) in alts.iter_mut().zip(limits) {
            e.limit = Some(l);
        }
        self.alternatives(alts)
    }
}
