//! The engine on the XDP links: after every change that can move a
//! ruleset across the line — an apply, an XDP attach, a restart that
//! adopted pinned links — the interface chain's decision list is given to
//! `Dataplane::set_xdp_engine`, which picks the walker or a generated
//! program and swaps it onto each link in place.

use std::sync::Arc;

use parapet_compile::Classifier;
use parapet_dataplane::{codegen::Choice, AttachPoint, PreparedXdpEngine};
use parapet_model::{flatten, DecisionList, Ruleset};
use serde_json::{json, Value};

use super::{kernel_chain, Kernel};
use crate::compiled::CompiledChain;

/// The interface chain flattened, and its classifier: the tree form is
/// generated from its image.
pub(crate) struct IfaceList {
    list: DecisionList,
    classifier: Arc<Classifier>,
}

impl IfaceList {
    fn with_image(&self) -> (&DecisionList, &parapet_compile::Image) {
        (&self.list, self.classifier.image())
    }
}

/// What the XDP links run and why.
#[derive(Default)]
pub(crate) struct XdpEngineState {
    /// The active ruleset's interface chain (`None`: no chain).
    list: Option<Arc<IfaceList>>,
    /// The last choice made while an XDP link existed.
    choice: Option<Choice>,
}

/// The decision list of `rs`'s interface chain and its classifier, when
/// it has one.
fn iface_list(
    cfg: &super::KernelConfig,
    rs: &Ruleset,
    compiled: &[CompiledChain],
) -> Option<Arc<IfaceList>> {
    let c = kernel_chain(cfg, rs, compiled).ok()?;
    let list = flatten(rs, c.chain).ok()?;
    Some(Arc::new(IfaceList {
        list,
        classifier: c.classifier.clone(),
    }))
}

/// An apply's XDP engine, prepared before its ruleset goes live
/// ([`Kernel::prepare_xdp`]).
pub(crate) struct PendingXdp {
    list: Option<Arc<IfaceList>>,
    prepared: Option<PreparedXdpEngine>,
}

impl Kernel {
    /// Keeps the decision list of `rs`'s interface chain for the next
    /// [`Kernel::sync_xdp_engine`].
    pub(crate) fn keep_iface_list(&mut self, rs: &Ruleset, compiled: &[CompiledChain]) {
        self.xdp.list = iface_list(&self.config, rs, compiled);
    }

    /// Before an apply's swap: the new ruleset's interface list and, while
    /// an XDP link exists, its engine chosen and loaded, so that after the
    /// swap [`Kernel::commit_xdp`] only updates the links.
    pub(crate) fn prepare_xdp(&self, rs: &Ruleset, compiled: &[CompiledChain]) -> PendingXdp {
        let list = iface_list(&self.config, rs, compiled);
        let xdp = self.attached.iter().any(|a| a.hook == AttachPoint::Xdp);
        let prepared = self.dp.as_ref().filter(|_| xdp).map(|dp| {
            let with_image = list.as_deref().map(IfaceList::with_image);
            dp.prepare_xdp_engine_with_image(with_image, self.config.xdp_engine)
        });
        PendingXdp { list, prepared }
    }

    /// After the apply's swap: the prepared engine onto the XDP links.
    pub(crate) fn commit_xdp(&mut self, pending: PendingXdp) {
        self.xdp.list = pending.list;
        match (self.dp.as_mut(), pending.prepared) {
            (Some(dp), Some(p)) => {
                let choice = dp.commit_xdp_engine(p);
                self.note_choice(choice);
            }
            _ => self.sync_xdp_engine(),
        }
    }

    /// Keeps `choice` for `stats`, logging a change.
    fn note_choice(&mut self, choice: Choice) {
        if self.xdp.choice.as_ref() != Some(&choice) {
            eprintln!(
                "parapetd: dataplane: XDP engine {} ({})",
                choice.engine.name(),
                choice.reason
            );
        }
        self.xdp.choice = Some(choice);
    }

    /// Puts the chosen engine on every XDP link (nothing without one).
    pub(crate) fn sync_xdp_engine(&mut self) {
        let xdp = self.attached.iter().any(|a| a.hook == AttachPoint::Xdp);
        let Some(dp) = self.dp.as_mut().filter(|_| xdp) else {
            self.xdp.choice = None;
            return;
        };
        let with_image = self.xdp.list.as_deref().map(IfaceList::with_image);
        let choice = dp.set_xdp_engine_with_image(with_image, self.config.xdp_engine);
        self.note_choice(choice);
    }

    /// The `xdp_engine` object of `stats`: asked for, chosen, why (no
    /// choice while nothing is attached at XDP).
    pub(crate) fn xdp_engine_json(&self) -> Value {
        let xdp = self.attached.iter().any(|a| a.hook == AttachPoint::Xdp);
        let choice = self.xdp.choice.as_ref().filter(|_| xdp);
        json!({
            "requested": self.config.xdp_engine.name(),
            "engine": choice.map(|c| c.engine.name()),
            "reason": choice.map(|c| c.reason.clone()),
        })
    }
}
