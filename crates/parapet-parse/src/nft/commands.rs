//! nft commands outside a table block, applied in file order as `nft -f`
//! does: `add|create table|chain|set|map|element`, `add|insert rule`, `flush ruleset|table|
//! chain`, `delete|destroy table|chain`.

use super::lexer::word_text;
use super::lexer::{Res, Tok};
use super::table::Parser;
use crate::error::FILE_LINE_BITS;
use crate::SetBlock;

impl Parser {
    /// After the command word `cmd` (already consumed).
    pub(super) fn command(&mut self, cmd: &str) -> Res<()> {
        let obj = self.expect_word("table, chain, rule or ruleset")?;
        match (cmd, obj.word().unwrap_or("")) {
            ("add" | "create", "table") => self.table(),
            ("add" | "create", "chain") => {
                let ti = self.existing_table()?;
                self.chain(ti)
            }
            ("add" | "insert", "rule") => {
                let ti = self.existing_table()?;
                let ci = self.existing_chain(ti)?;
                if let Some(w @ ("position" | "handle" | "index")) =
                    self.peek().and_then(|t| t.word())
                {
                    return self.fail(format!(
                        "'{cmd} rule … {w} N' is not supported (rules go at the end, or first with 'insert rule')"
                    ));
                }
                let from = self.pos;
                self.add_rule(ti, ci, cmd == "insert")?;
                if self.is_kernel_chain(ti, ci) {
                    self.note_command_rule(ti, ci, from, self.pos);
                }
                Ok(())
            }
            ("add" | "create", "set") => {
                let ti = self.existing_table()?;
                let name = word_text(&self.expect_word("a set name")?);
                let open = self.pos;
                self.expect(Tok::Open, "'{' after the set name")?;
                let close = self.skip_block();
                let body = self.block_text(open, open, close);
                self.sets.push(SetBlock {
                    table: self.rs.tables[ti].name.clone(),
                    name: name.clone(),
                    text: format!("set {name} {body}"),
                    line: self.toks[open].line & ((1 << FILE_LINE_BITS) - 1),
                    // `set NAME ` is written before the `{`.
                    col: self.toks[open].col.saturating_sub(name.chars().count() as u32 + 5),
                });
                Ok(())
            }
            ("add" | "create", "element") => {
                let ti = self.existing_table()?;
                let t = self.expect_word("a set name")?;
                let name = word_text(&t);
                let open = self.pos;
                self.expect(Tok::Open, "'{' after the set name")?;
                let close = self.skip_block();
                let elements = self.block_text(open, open, close);
                let table = self.rs.tables[ti].name.clone();
                let Some(set) = self
                    .sets
                    .iter_mut()
                    .find(|s| s.table == table && s.name == name)
                else {
                    let family = self.rs.tables[ti].family;
                    if let Some((_, d)) = self
                        .dynsets
                        .iter_mut()
                        .find(|(k, d)| *k == (family, table.clone()) && d.name == name)
                    {
                        // A set rules fill: its declared elements, in the
                        // declaration and every rule's copy of it.
                        d.elements = super::dynset::initial_elements(&self.toks, open + 1, d)?;
                        let d = d.clone();
                        let uses = self.rs.tables[ti]
                            .chains
                            .iter_mut()
                            .flat_map(|c| &mut c.rules)
                            .flat_map(|r| r.dynset.iter_mut().chain(&mut r.dynset_lookup));
                        for u in uses.filter(|u| u.set.id() == d.id() && !u.set.meter) {
                            u.set = d.clone();
                        }
                        return Ok(());
                    }
                    return Err((t.line, t.col, format!("no set '{name}' in table '{table}'")));
                };
                // A set block may say `elements = …` more than once; the
                // sets crate unites them.
                let Some(end) = set.text.rfind('}') else {
                    return Err((t.line, t.col, format!("set '{name}' has no body")));
                };
                set.text.insert_str(end, &format!("\n\telements = {elements}\n"));
                Ok(())
            }
            ("add" | "create", "map") => {
                let ti = self.existing_table()?;
                self.map_block(ti)
            }
            ("flush", "ruleset") => {
                self.flush_notes();
                self.rs.tables.clear();
                self.sets.clear();
                self.maps.clear();
                self.dormant.clear();
                Ok(())
            }
            ("flush", "table") => {
                let ti = self.existing_table()?;
                for c in &mut self.rs.tables[ti].chains {
                    c.rules.clear();
                }
                Ok(())
            }
            ("flush", "chain") => {
                let ti = self.existing_table()?;
                let ci = self.existing_chain(ti)?;
                self.rs.tables[ti].chains[ci].rules.clear();
                Ok(())
            }
            ("delete" | "destroy", "table") => {
                let (family, name) = self.table_ref()?;
                match self
                    .rs
                    .tables
                    .iter()
                    .position(|t| t.family == family && t.name == name)
                {
                    Some(ti) => {
                        self.rs.tables.remove(ti);
                        self.sets.retain(|s| s.table != name);
                        self.maps.retain(|m| m.table != (family, name.clone()));
                        self.dormant.retain(|d| *d != (family, name.clone()));
                        Ok(())
                    }
                    None if cmd == "destroy" => Ok(()),
                    None => Err((
                        obj.line,
                        obj.col,
                        format!(
                            "cannot delete table '{name}': no such table (nft -f fails here too where the table does not exist yet; to start from an empty table write 'table {f} {name}' before the 'delete', or 'destroy table {f} {name}', nft 1.0.8 and later)",
                            f = family.nft_name()
                        ),
                    )),
                }
            }
            ("delete" | "destroy", "chain") => {
                let ti = self.existing_table()?;
                let ci = self.existing_chain(ti)?;
                self.rs.tables[ti].chains.remove(ci);
                Ok(())
            }
            (_, other) => Err((
                obj.line,
                obj.col,
                format!(
                    "'{cmd} {other}' is not supported (supported: add/create table|chain|set|map|element, add/insert rule, flush ruleset|table|chain, delete/destroy table|chain)"
                ),
            )),
        }
    }

    /// `[FAMILY] NAME` naming a table that exists.
    fn existing_table(&mut self) -> Res<usize> {
        let at = self.peek().map_or((0, 0), |t| (t.line, t.col));
        let (family, name) = self.table_ref()?;
        self.rs
            .tables
            .iter()
            .position(|t| t.family == family && t.name == name)
            .ok_or((
                at.0,
                at.1,
                format!(
                    "no table '{} {name}' (declare it with 'table {} {name}' first)",
                    family.nft_name(),
                    family.nft_name()
                ),
            ))
    }

    /// A chain name in table `ti` that exists.
    fn existing_chain(&mut self, ti: usize) -> Res<usize> {
        let t = self.expect_word("a chain name")?;
        let name = word_text(&t);
        let _ = Tok::Open;
        self.rs.tables[ti]
            .chains
            .iter()
            .position(|c| c.name == name)
            .ok_or((
                t.line,
                t.col,
                format!("no chain '{name}' in table '{}'", self.rs.tables[ti].name),
            ))
    }
}
