//! The active ruleset into the loaded program: which chain goes to the
//! interface hooks (XDP, tc) and which to each netfilter hook, whether they
//! fit, and the one swap that makes them live.

use super::{dp_err, KernelConfig};
use crate::compiled::CompiledChain;
use crate::hooks::{self, NfWant};
use crate::proto::{code, ErrorReply};
use parapet_dataplane::ruleset::Install;
use parapet_dataplane::Dataplane;
use parapet_model::{DecisionList, Ruleset, Verdict};

/// The chain that runs on interfaces (XDP, tc): `--chain`, else the input
/// chain (filter/INPUT, or the one nft base chain at the input hook).
pub fn kernel_chain<'a>(
    cfg: &KernelConfig,
    rs: &Ruleset,
    compiled: &'a [CompiledChain],
) -> Result<&'a CompiledChain, String> {
    let id = rs.select_chain(cfg.chain.as_deref())?;
    compiled
        .iter()
        .find(|c| c.chain == id && c.joined.is_empty())
        .ok_or_else(|| "the chain for the kernel is not a compiled base chain".to_string())
}

/// The image for the interface hooks: the chain's, or — when no `--chain`
/// was named and the ruleset has no input chain (an nft router with only a
/// `forward` chain) — a placeholder that drops everything, with the reason
/// nothing may be attached to an interface while it is live.
pub(crate) struct IfaceImage<'a> {
    /// The chain placed on interfaces, if the ruleset has one.
    pub chain: Option<&'a CompiledChain>,
    /// Its image (or the placeholder's).
    pub image: Vec<u8>,
    /// Why there is no interface chain.
    pub missing: Option<String>,
}

impl IfaceImage<'_> {
    /// The fallback verdict the program's action table gets.
    pub fn policy(&self) -> Verdict {
        self.chain.map_or(Verdict::Drop, |c| c.policy.clone())
    }
}

/// An image with no rules and a DROP policy: what the interface slot holds
/// while the ruleset has no chain for it (never attached: fail closed if
/// it ever were).
fn placeholder_image() -> Result<Vec<u8>, ErrorReply> {
    let list = DecisionList {
        entries: Vec::new(),
        policy: Verdict::Drop,
        set_ref_count: 0,
    };
    parapet_compile::Classifier::build(&list, &Default::default())
        .map(|c| c.image().to_bytes())
        .map_err(|e| ErrorReply::new(code::APPLY, format!("the placeholder image: {e}")))
}

/// Where the ruleset runs, for [`install`].
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct Placed {
    /// Some interface is attached, so the ruleset must have a chain for it.
    pub on_iface: bool,
    /// The hook chains run in the tc placement, where ctstate is the
    /// conntrack lookup's (the netfilter hooks read the packet's own
    /// entry): the lookup is on when a hook chain matches it.
    pub tc_placed: bool,
}

/// What [`install`] made live beside the interface image.
#[derive(Default)]
pub(crate) struct Installed {
    /// The links the ruleset wants at the netfilter hooks.
    pub links: Vec<NfWant>,
    /// Its hook chains match ctstate.
    pub needs_ct: bool,
    /// Why it cannot go to the netfilter hooks at all (then no hook image
    /// was written: fine while it only runs on interfaces).
    pub refused: Option<String>,
    /// Why it has no chain for interfaces (then `attach IFACE` is refused).
    pub no_iface_chain: Option<String>,
    /// The hook chains' rules on the socket owner (`HookPlan::owner`).
    pub owner: Option<String>,
    /// The hook chains' rules with a reverse-path check
    /// (`HookPlan::rev_path`).
    pub rev_path: Option<String>,
}

/// Makes `rs` live in `dp`: all or nothing (see
/// [`Dataplane::install_ruleset`]), then zeroes the rule counters, because
/// the new ruleset's rule ids start again at 1.
///
/// Every netfilter hook's chain goes live in the same swap.
pub(crate) fn install(
    cfg: &KernelConfig,
    dp: &mut Dataplane,
    rs: &Ruleset,
    compiled: &[CompiledChain],
    sets: &parapet_sets::SetStore,
    reset_counters: bool,
    placed: Placed,
) -> Result<Installed, ErrorReply> {
    let Placed {
        on_iface,
        tc_placed,
    } = placed;
    if let Some(why) = parapet_dataplane::ruleset::mark_refusal(rs) {
        return Err(ErrorReply::new(code::APPLY, why));
    }
    let iface = fits(cfg, dp, rs, compiled)?;
    if let (Some(why), true) = (&iface.missing, on_iface) {
        return Err(ErrorReply::new(
            code::APPLY,
            format!("attached to an interface (xdp/tc): {why}; detach it first"),
        ));
    }
    let needs = needs_ct(cfg, dp, rs, compiled)?;
    let (plan, refused) = match hooks::hook_plan(rs, compiled) {
        Ok(p) => (p, None),
        Err(e) => (hooks::HookPlan::default(), Some(e)),
    };
    let needs = needs || (tc_placed && plan.needs_ct);
    // without hook images (--no-hook-images) nothing can be attached at
    // the hooks (attach_netfilter refuses): their chains are not written
    let images: Vec<(parapet_dataplane::NfHook, Vec<u8>)> = plan
        .chains
        .iter()
        .filter(|_| dp.hook_images())
        .map(|(h, c)| (*h, c.classifier.image().to_bytes()))
        .collect();
    for (_, img) in &images {
        check_fits(dp, rs, img.len())?;
    }
    let hook_images: Vec<(parapet_dataplane::NfHook, &[u8])> =
        images.iter().map(|(h, b)| (*h, &b[..])).collect();
    dp.install_ruleset_hooks_ct(
        &Install {
            ruleset: rs,
            policy: &iface.policy(),
            image: &iface.image,
            sets: (!rs.set_refs.is_empty()).then_some(sets),
            log_rate: cfg.log_rate,
        },
        &hook_images,
        needs,
    )
    .map_err(|e| {
        ErrorReply::new(
            code::APPLY,
            format!("the kernel dataplane refused the ruleset: {e}"),
        )
    })?;
    if reset_counters {
        dp.reset_counters()
            .map_err(|e| dp_err("resetting the kernel counters", e))?;
    }
    Ok(Installed {
        links: plan.links,
        needs_ct: plan.needs_ct,
        refused,
        no_iface_chain: iface.missing,
        owner: plan.owner,
        rev_path: plan.rev_path,
    })
}

/// Whether the interface chain of `rs` matches ctstate (false without
/// one); an error when it does and the loaded program cannot look
/// connections up (the kernel would see every packet as UNTRACKED: never
/// silently wrong).
pub(crate) fn needs_ct(
    cfg: &KernelConfig,
    dp: &Dataplane,
    rs: &Ruleset,
    compiled: &[CompiledChain],
) -> Result<bool, ErrorReply> {
    let Some(chain) = iface_chain(cfg, rs, compiled)? else {
        return Ok(false);
    };
    dp.needs_conntrack(
        rs,
        chain.chain,
        &format!("the kernel chain {}", chain.name),
        "it failed to load with the lookup; see parapetd's log",
    )
    .map_err(|e| ErrorReply::new(code::APPLY, e))
}

/// The interface chain: an error when `--chain` names none; `None` (with
/// the reason in [`IfaceImage::missing`]) when no `--chain` was named and
/// the ruleset has no input chain.
fn iface_chain<'a>(
    cfg: &KernelConfig,
    rs: &Ruleset,
    compiled: &'a [CompiledChain],
) -> Result<Option<&'a CompiledChain>, ErrorReply> {
    match kernel_chain(cfg, rs, compiled) {
        Ok(c) => Ok(Some(c)),
        Err(_) if cfg.chain.is_none() => Ok(None),
        Err(e) => Err(ErrorReply::new(
            code::APPLY,
            format!("the kernel dataplane: {e}"),
        )),
    }
}

/// The interface image of `rs`, when it and the ruleset fit the loaded
/// program; the error names the flag to raise.
pub(crate) fn fits<'a>(
    cfg: &KernelConfig,
    dp: &Dataplane,
    rs: &Ruleset,
    compiled: &'a [CompiledChain],
) -> Result<IfaceImage<'a>, ErrorReply> {
    let iface = match iface_chain(cfg, rs, compiled)? {
        Some(chain) => IfaceImage {
            chain: Some(chain),
            image: chain.classifier.image().to_bytes(),
            // the socket owner is read at the netfilter hooks only: a
            // chain with owner rules has no meaning at an interface
            missing: crate::hooks::owner_rules(rs, chain).map(|rules| {
                format!(
                    "{rules} match the socket owner (-m owner, meta skuid|skgid), which an \
                     interface hook (xdp, tc) does not have: parapet reads it only at the \
                     netfilter OUTPUT and POSTROUTING hooks (`parapet attach` without an \
                     interface)"
                )
            }),
        },
        None => IfaceImage {
            chain: None,
            image: placeholder_image()?,
            missing: Some(format!(
                "the ruleset has no chain for the interface hooks ({}); name one with \
                 parapetd's --chain",
                kernel_chain(cfg, rs, compiled)
                    .err()
                    .unwrap_or_default()
                    .trim_end_matches("; name one with --chain")
            )),
        },
    };
    check_fits(dp, rs, iface.image.len())?;
    Ok(iface)
}

/// The dataplane's own fit check; the messages name the flag to raise.
fn check_fits(dp: &Dataplane, rs: &Ruleset, image_len: usize) -> Result<(), ErrorReply> {
    dp.check_fits(rs, image_len).map_err(|e| {
        let msg = match e {
            parapet_dataplane::Error::RuleOutOfRange { rule, max } => format!(
                "rule id {rule} exceeds the kernel's {max} counter slots; restart parapetd with a larger --max-rules"
            ),
            parapet_dataplane::Error::ImageTooLarge { len, cap } => format!(
                "the classifier image ({len} bytes) does not fit the kernel's image slot ({cap} bytes); restart parapetd with a larger --image-mib"
            ),
            other => other.to_string(),
        };
        ErrorReply::new(code::APPLY, msg)
    })
}
