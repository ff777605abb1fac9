//! The production [`Loader`]: `parapet-parse` frontends, then flatten and
//! `parapet-compile` for every base chain — all of it before the state lock
//! is taken, so a failing or slow compile changes nothing and blocks no one.

use crate::compiled::{CompiledChain, CompiledRuleset, Loader};
use parapet_compile::{compile_chain, compile_hook_chains, shared_hooks, BuildOptions};
use parapet_model::{ChainId, Ruleset};
use parapet_parse::{parse, render, Format};
use std::sync::Arc;

/// Parses iptables-save, ip6tables-save, nft, ClassBench or JSON (the
/// model's serde form), and compiles each base chain.
#[derive(Default)]
pub struct ParseLoader {
    /// Classifier build options.
    pub options: BuildOptions,
}

impl ParseLoader {
    /// Compiles every base chain of `rs`; errors name the file and chain.
    pub fn compile(&self, name: &str, rs: &Ruleset) -> Result<Vec<CompiledChain>, Vec<String>> {
        let mut out = Vec::new();
        let mut errs = Vec::new();
        for (ti, t) in rs.tables.iter().enumerate() {
            for (ci, c) in t.chains.iter().enumerate() {
                if c.base.is_none() {
                    continue;
                }
                let cname = format!("{}/{}", t.name, c.name);
                let line = c.rules.first().map_or(1, |r| r.origin.line.max(1));
                let id = ChainId {
                    table: ti,
                    chain: ci,
                };
                match compile_chain(rs, id, &self.options) {
                    Ok((cl, policy)) => out.push(CompiledChain {
                        name: cname,
                        chain: id,
                        policy,
                        classifier: Arc::new(cl),
                        joined: Vec::new(),
                    }),
                    Err(e) => errs.push(format!("{name}:{line}:1: chain {cname}: {e}")),
                }
            }
        }
        // base chains sharing a hook: one classifier runs them in the
        // kernel's order (src/hooks.rs places it)
        for (hook, ids) in shared_hooks(rs) {
            let names: Vec<String> = ids
                .iter()
                .map(|id| format!("{}/{}", rs.tables[id.table].name, rs.chain(*id).name))
                .collect();
            let cname = format!("{} ({})", hook.nft_name(), names.join(" then "));
            let line = rs
                .chain(ids[0])
                .rules
                .first()
                .map_or(1, |r| r.origin.line.max(1));
            match compile_hook_chains(rs, &ids, &self.options) {
                Ok((cl, policy)) => out.push(CompiledChain {
                    name: cname,
                    chain: ids[0],
                    policy,
                    classifier: Arc::new(cl),
                    joined: ids,
                }),
                Err(e) => errs.push(format!("{name}:{line}:1: the chains at {cname}: {e}")),
            }
        }
        if errs.is_empty() {
            Ok(out)
        } else {
            Err(errs)
        }
    }
}

impl Loader for ParseLoader {
    fn load(
        &self,
        name: &str,
        text: &str,
        format: Option<&str>,
    ) -> Result<CompiledRuleset, Vec<String>> {
        let (ruleset, format) = if format == Some("json") {
            let rs = serde_json::from_str::<Ruleset>(text)
                .map_err(|e| vec![format!("{name}:{}:{}: {e}", e.line(), e.column())])?;
            (rs, "json".to_string())
        } else {
            let f = match format {
                None => Format::Auto,
                Some(f) => f
                    .parse::<Format>()
                    .map_err(|e| vec![format!("{name}:1:1: {e}")])?,
            };
            let p = parse(text, name, f)
                .map_err(|errs| errs.iter().map(|e| e.to_string()).collect::<Vec<_>>())?;
            (p.ruleset, p.format.name().to_string())
        };
        let compiled = self.compile(name, &ruleset)?;
        Ok(CompiledRuleset {
            ruleset: Arc::new(ruleset),
            format,
            compiled,
        })
    }

    fn render(&self, ruleset: &Ruleset, format: &str) -> Option<Result<String, String>> {
        Some(match format {
            "json" => Ok(render::json(ruleset)),
            "iptables-save" | "ip6tables-save" | "iptables" => {
                render::iptables_save(ruleset).map_err(|e| e.to_string())
            }
            "nft" => render::nft(ruleset).map_err(|e| e.to_string()),
            _ => return None,
        })
    }
}

/// Loads rulesets serialized as JSON (`parapet_model::Ruleset` via serde)
/// and compiles nothing: for tests of the state that need no classifier.
/// [`ParseLoader`] reads `--format json` too, and compiles it.
pub struct JsonLoader;

impl Loader for JsonLoader {
    fn load(
        &self,
        name: &str,
        text: &str,
        format: Option<&str>,
    ) -> Result<CompiledRuleset, Vec<String>> {
        match format {
            None | Some("json") | Some("auto") => {}
            Some(f) => {
                return Err(vec![format!(
                    "{name}:1:1: format `{f}` is not supported by this daemon build (json only)"
                )])
            }
        }
        serde_json::from_str::<Ruleset>(text)
            .map(|ruleset| CompiledRuleset {
                ruleset: Arc::new(ruleset),
                format: "json".into(),
                compiled: Vec::new(),
            })
            .map_err(|e| vec![format!("{name}:{}:{}: {e}", e.line(), e.column())])
    }
}
