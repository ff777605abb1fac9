//! The filters under test, behind one trait so parapet's own dataplane can
//! be plugged in beside the kernel's.

use crate::cmd;
use crate::rules::{iptables_empty, RuleKind, RuleSpec};
use crate::testbed::{Side, Testbed, FLT_IF};
use crate::{Error, Result};
use std::time::Duration;

/// A packet filter that can be loaded into the bed's filter namespace.
pub trait Filter: Send + Sync {
    /// Name in reports and on the command line.
    fn name(&self) -> String;
    /// `Err(reason)` if the filter cannot run here (tool or kernel missing).
    fn available(&self) -> std::result::Result<(), String>;
    /// Replaces the filter's ruleset with `spec` in the bed; returns the wall
    /// time of the load command(s), process start-up included.
    fn load(&self, bed: &Testbed, spec: &RuleSpec) -> Result<Duration>;
    /// Removes every rule the filter installed.
    fn clear(&self, bed: &Testbed) -> Result<()>;
    /// Whether the ruleset kind can be expressed faithfully.
    fn supports(&self, kind: RuleKind) -> bool {
        let _ = kind;
        true
    }
}

/// No filter at all: the baseline.
pub struct NoFilter;

impl Filter for NoFilter {
    fn name(&self) -> String {
        "none".into()
    }
    fn available(&self) -> std::result::Result<(), String> {
        Ok(())
    }
    fn load(&self, _bed: &Testbed, _spec: &RuleSpec) -> Result<Duration> {
        Ok(Duration::ZERO)
    }
    fn clear(&self, _bed: &Testbed) -> Result<()> {
        Ok(())
    }
}

/// Which iptables binary family.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum IptVariant {
    /// x_tables (`iptables-legacy`).
    Legacy,
    /// nf_tables backend (`iptables-nft`).
    Nft,
}

/// iptables, loaded with `iptables-*-restore` from iptables-save text.
pub struct Iptables(pub IptVariant);

impl Iptables {
    fn restore_bin(&self) -> &'static str {
        match self.0 {
            IptVariant::Legacy => "iptables-legacy-restore",
            IptVariant::Nft => "iptables-nft-restore",
        }
    }
}

impl Filter for Iptables {
    fn name(&self) -> String {
        match self.0 {
            IptVariant::Legacy => "iptables-legacy".into(),
            IptVariant::Nft => "iptables-nft".into(),
        }
    }
    fn available(&self) -> std::result::Result<(), String> {
        if cmd::have(self.restore_bin()) {
            Ok(())
        } else {
            Err(format!("{} not installed", self.restore_bin()))
        }
    }
    fn load(&self, bed: &Testbed, spec: &RuleSpec) -> Result<Duration> {
        let text = spec.iptables_save();
        let bin = self.restore_bin();
        let done = bed.in_ns(Side::Filter, || cmd::run(bin, &[], Some(text.as_bytes())))??;
        Ok(done.elapsed)
    }
    fn clear(&self, bed: &Testbed) -> Result<()> {
        let bin = self.restore_bin();
        let text = iptables_empty();
        bed.in_ns(Side::Filter, || cmd::run(bin, &[], Some(text.as_bytes())))??;
        Ok(())
    }
}

/// How nftables expresses the ruleset.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NftMode {
    /// One rule per iptables rule.
    Linear,
    /// Failing rules folded into a concatenated set lookup.
    Set,
    /// Failing rules folded into a concatenated verdict map.
    Vmap,
}

/// nftables loaded with `nft -f`.
pub struct Nft(pub NftMode);

impl Filter for Nft {
    fn name(&self) -> String {
        match self.0 {
            NftMode::Linear => "nft".into(),
            NftMode::Set => "nft-set".into(),
            NftMode::Vmap => "nft-vmap".into(),
        }
    }
    fn available(&self) -> std::result::Result<(), String> {
        if cmd::have("nft") {
            Ok(())
        } else {
            Err("nft not installed".into())
        }
    }
    fn supports(&self, kind: RuleKind) -> bool {
        self.0 == NftMode::Linear || kind == RuleKind::WorstCase
    }
    fn load(&self, bed: &Testbed, spec: &RuleSpec) -> Result<Duration> {
        let text = match self.0 {
            NftMode::Linear => spec.nft_linear(),
            NftMode::Set => spec.nft_set(),
            NftMode::Vmap => spec.nft_vmap(),
        };
        let path = crate::workdir()?.join(format!("{}-{}.nft", self.name(), spec.rules));
        std::fs::write(&path, text)?;
        let p = path.to_string_lossy().into_owned();
        let done = bed.in_ns(Side::Filter, || cmd::run("nft", &["-f", &p], None))??;
        let _ = std::fs::remove_file(&path);
        Ok(done.elapsed)
    }
    fn clear(&self, bed: &Testbed) -> Result<()> {
        bed.in_ns(Side::Filter, || {
            cmd::run("nft", &["flush", "ruleset"], None)
        })??;
        Ok(())
    }
}

/// Where parapet's BPF program attaches.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ParapetHook {
    /// XDP on flt0.
    Xdp,
    /// tc ingress on flt0.
    Tc,
}

/// parapet's own dataplane, driven through its command line.
///
/// By default the program is loaded and attached with
/// `parapet run {rules} --iface {iface} --hook {hook} --background {pidfile}`
/// (it returns once attached) and detached with `parapet stop {pidfile}`, so
/// no daemon is needed. Both are templates, overridable through
/// `PARAPET_LOAD` and `PARAPET_UNLOAD`, with `{rules}` an iptables-save file,
/// `{hook}` `xdp`/`tc`, `{iface}` the filter-side interface and `{pidfile}`
/// a file in the bench's work directory. They run inside the filter
/// namespace; the `parapet` binary is taken from `PARAPET_BIN`, else from
/// the PATH.
pub struct Parapet(pub ParapetHook);

const LOAD_DEFAULT: &str = "{bin} run {rules} --iface {iface} --hook {hook} --background {pidfile}";
const UNLOAD_DEFAULT: &str = "{bin} stop {pidfile}";

impl Parapet {
    fn hook(&self) -> &'static str {
        match self.0 {
            ParapetHook::Xdp => "xdp",
            ParapetHook::Tc => "tc",
        }
    }

    fn bin() -> String {
        std::env::var("PARAPET_BIN").unwrap_or_else(|_| "parapet".to_string())
    }

    fn template(var: &str, default: &str) -> String {
        std::env::var(var).unwrap_or_else(|_| default.to_string())
    }

    fn pidfile(&self) -> Result<String> {
        Ok(crate::workdir()?
            .join(format!("parapet-{}.pid", self.hook()))
            .to_string_lossy()
            .into_owned())
    }

    fn expand(&self, tpl: &str, rules: &str, pidfile: &str) -> Vec<String> {
        tpl.split_whitespace()
            .map(|w| {
                w.replace("{bin}", &Self::bin())
                    .replace("{rules}", rules)
                    .replace("{hook}", self.hook())
                    .replace("{iface}", FLT_IF)
                    .replace("{pidfile}", pidfile)
            })
            .collect()
    }

    fn run_tpl(&self, bed: &Testbed, var: &str, default: &str, rules: &str) -> Result<Duration> {
        let argv = self.expand(&Self::template(var, default), rules, &self.pidfile()?);
        let (prog, args) = argv
            .split_first()
            .ok_or_else(|| Error(format!("{var} is empty")))?;
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        let done = bed.in_ns(Side::Filter, || cmd::run(prog, &args, None))??;
        Ok(done.elapsed)
    }
}

impl Filter for Parapet {
    fn name(&self) -> String {
        format!("parapet-{}", self.hook())
    }
    fn available(&self) -> std::result::Result<(), String> {
        let prog = Self::bin();
        if !cmd::have(&prog) {
            return Err(format!("{prog} not on PATH (build it: cargo build --release -p parapet, or set PARAPET_BIN)"));
        }
        let ok = std::process::Command::new(&prog)
            .args(["run", "--help"])
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .status()
            .map(|s| s.success())
            .unwrap_or(false);
        if ok {
            Ok(())
        } else {
            Err(format!("`{prog} run` is not available"))
        }
    }
    fn load(&self, bed: &Testbed, spec: &RuleSpec) -> Result<Duration> {
        let path = crate::workdir()?.join(format!("parapet-{}.rules", spec.rules));
        std::fs::write(&path, spec.iptables_save())?;
        let p = path.to_string_lossy().into_owned();
        self.run_tpl(bed, "PARAPET_LOAD", LOAD_DEFAULT, &p)
    }
    fn clear(&self, bed: &Testbed) -> Result<()> {
        // Nothing to detach when nothing was loaded.
        if std::path::Path::new(&self.pidfile()?).exists() {
            self.run_tpl(bed, "PARAPET_UNLOAD", UNLOAD_DEFAULT, "")?;
        }
        Ok(())
    }
}

/// Every filter name [`by_name`] knows, default set first.
pub const ALL_FILTERS: [&str; 8] = [
    "none",
    "iptables-legacy",
    "iptables-nft",
    "nft",
    "nft-set",
    "parapet-xdp",
    "parapet-tc",
    "nft-vmap",
];

/// Filters run when none are named.
pub const DEFAULT_FILTERS: [&str; 7] = [
    "none",
    "iptables-legacy",
    "iptables-nft",
    "nft",
    "nft-set",
    "parapet-xdp",
    "parapet-tc",
];

/// Looks a filter up by name.
pub fn by_name(name: &str) -> Option<Box<dyn Filter>> {
    Some(match name {
        "none" => Box::new(NoFilter),
        "iptables-legacy" => Box::new(Iptables(IptVariant::Legacy)),
        "iptables-nft" => Box::new(Iptables(IptVariant::Nft)),
        "nft" => Box::new(Nft(NftMode::Linear)),
        "nft-set" => Box::new(Nft(NftMode::Set)),
        "nft-vmap" => Box::new(Nft(NftMode::Vmap)),
        "parapet-xdp" => Box::new(Parapet(ParapetHook::Xdp)),
        "parapet-tc" => Box::new(Parapet(ParapetHook::Tc)),
        _ => return None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip() {
        for n in ALL_FILTERS {
            assert_eq!(by_name(n).unwrap().name(), n);
        }
        assert!(by_name("pf").is_none());
    }

    #[test]
    fn parapet_template_expansion() {
        let p = Parapet(ParapetHook::Tc);
        assert_eq!(
            p.expand(
                "parapet run {rules} --iface {iface} --hook {hook} --background {pidfile}",
                "/x",
                "/p"
            ),
            vec![
                "parapet",
                "run",
                "/x",
                "--iface",
                "flt0",
                "--hook",
                "tc",
                "--background",
                "/p"
            ]
        );
    }
}
