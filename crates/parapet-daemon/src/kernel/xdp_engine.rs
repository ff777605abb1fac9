//! The engine on the XDP links: after every change that can move a
//! ruleset across the line — an apply, an XDP attach, a restart that
//! adopted pinned links — the interface chain's decision list is given to
//! `Dataplane::choose_xdp_engine`, which picks the walker or a generated
//! program, swapped onto each link in place. The straight-line program
//! loads in milliseconds, within the change; the tree form takes up to
//! tens of seconds (the split form's verifier), so the change puts the
//! walker on the links (its image is the new ruleset's) and posts an
//! [`XdpJob`] to the loader thread (src/xdp_loader.rs), which loads it
//! without the state lock and swaps it in under the lock only if no later
//! change superseded it ([`Kernel::finish_xdp_job`]).

use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

use parapet_compile::Classifier;
use parapet_dataplane::{
    codegen::{Choice, XdpEngine},
    AttachPoint, PreparedXdpEngine, XdpEngineLoader,
};
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
    /// Counts the choices: a background load swaps its program in only
    /// while the count is the one it was posted with.
    generation: u64,
    /// The tree form being loaded in the background, for `stats`.
    loading: Option<Loading>,
    /// The loader thread's mailbox.
    mailbox: Arc<XdpMailbox>,
}

/// A tree form loading in the background.
struct Loading {
    engine: XdpEngine,
    entries: usize,
    since: Instant,
}

/// A tree form to load without the state lock: the choice, what it is
/// generated from, the maps it counts in, and the choice's generation.
pub(crate) struct XdpJob {
    generation: u64,
    choice: Choice,
    list: Arc<IfaceList>,
    loader: XdpEngineLoader,
    hold: Duration,
}

impl XdpJob {
    /// Generates and loads the program (the slow part: no lock held).
    pub(crate) fn load(self) -> (u64, PreparedXdpEngine) {
        let t0 = Instant::now();
        let (list, image) = self.list.with_image();
        let prepared = self.loader.load(self.choice, Some(list), Some(image));
        eprintln!(
            "parapetd: dataplane: XDP engine {} loaded in the background in {} ms",
            prepared.choice().engine.name(),
            t0.elapsed().as_millis()
        );
        std::thread::sleep(self.hold);
        (self.generation, prepared)
    }
}

/// The newest job for the loader thread: a later post replaces one not
/// yet taken, a change that needs no load withdraws it.
#[derive(Default)]
pub(crate) struct XdpMailbox {
    job: Mutex<Option<XdpJob>>,
    posted: Condvar,
}

impl XdpMailbox {
    fn post(&self, job: Option<XdpJob>) {
        *self.job.lock().unwrap() = job;
        self.posted.notify_all();
    }

    /// The next job, waiting at most `tick` for one.
    pub(crate) fn take(&self, tick: Duration) -> Option<XdpJob> {
        let mut job = self.job.lock().unwrap();
        if job.is_none() {
            job = self.posted.wait_timeout(job, tick).unwrap().0;
        }
        job.take()
    }
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
/// ([`Kernel::prepare_xdp`]): loaded, or the walker and the job that
/// loads the tree form in the background.
pub(crate) struct PendingXdp {
    list: Option<Arc<IfaceList>>,
    prepared: Option<(PreparedXdpEngine, Option<XdpJob>)>,
}

impl Kernel {
    /// Keeps the decision list of `rs`'s interface chain for the next
    /// [`Kernel::sync_xdp_engine`].
    pub(crate) fn keep_iface_list(&mut self, rs: &Ruleset, compiled: &[CompiledChain]) {
        self.xdp.list = iface_list(&self.config, rs, compiled);
    }

    /// Before an apply's swap: the new ruleset's interface list and, while
    /// an XDP link exists, its engine chosen and (but the tree form)
    /// loaded, so that after the swap [`Kernel::commit_xdp`] only updates
    /// the links.
    pub(crate) fn prepare_xdp(&self, rs: &Ruleset, compiled: &[CompiledChain]) -> PendingXdp {
        let list = iface_list(&self.config, rs, compiled);
        let prepared = self.xdp_attached().then(|| self.prepare_for(list.as_ref()));
        PendingXdp {
            list,
            prepared: prepared.flatten(),
        }
    }

    /// The engine for `list` chosen and, when it loads in milliseconds,
    /// loaded; the tree form is the walker now and a job for the loader
    /// thread (`None` without a dataplane).
    fn prepare_for(
        &self,
        list: Option<&Arc<IfaceList>>,
    ) -> Option<(PreparedXdpEngine, Option<XdpJob>)> {
        let dp = self.dp.as_ref()?;
        let with_image = list.map(|l| l.with_image());
        let want = self.config.xdp_engine;
        let choice = dp.choose_xdp_engine(with_image.map(|l| l.0), with_image.map(|l| l.1), want);
        let background = match (choice.engine, list) {
            (XdpEngine::GeneratedTree, Some(l)) => Some(l),
            _ => None,
        };
        let Some(list) = background else {
            let (l, i) = (with_image.map(|l| l.0), with_image.map(|l| l.1));
            return Some((dp.load_xdp_engine(choice, l, i), None));
        };
        let loader = match dp.xdp_engine_loader() {
            Ok(l) => l,
            Err(e) => {
                let why = format!("{}; its loader: {e}", choice.reason);
                return Some((PreparedXdpEngine::walker(why), None));
            }
        };
        let loader = match self.config.test_tree_budget {
            Some(b) => loader.with_tree_budget(b),
            None => loader,
        };
        let walker = PreparedXdpEngine::walker(format!(
            "{}; loading in the background, the walker meanwhile",
            choice.reason
        ));
        let job = XdpJob {
            generation: 0,
            choice,
            list: list.clone(),
            loader,
            hold: self.config.test_xdp_load_hold,
        };
        Some((walker, Some(job)))
    }

    /// After the apply's swap: the prepared engine onto the XDP links,
    /// and the tree form's job posted.
    pub(crate) fn commit_xdp(&mut self, pending: PendingXdp) {
        self.xdp.list = pending.list;
        match pending.prepared {
            Some((p, job)) => self.commit_prepared(p, job),
            None => self.sync_xdp_engine(),
        }
    }

    /// `prepared` onto the links; a new generation, so that a load in
    /// flight is stale; `job` (stamped with it) to the loader thread, or
    /// none: a job not yet taken is withdrawn.
    fn commit_prepared(&mut self, prepared: PreparedXdpEngine, job: Option<XdpJob>) {
        let Some(dp) = self.dp.as_mut() else { return };
        let choice = dp.commit_xdp_engine(prepared);
        self.note_choice(choice);
        self.xdp.generation += 1;
        self.xdp.loading = job.as_ref().map(|j| Loading {
            engine: j.choice.engine,
            entries: j.list.list.entries.len(),
            since: Instant::now(),
        });
        let job = job.map(|j| XdpJob {
            generation: self.xdp.generation,
            ..j
        });
        self.xdp.mailbox.post(job);
    }

    /// A background load done (the state lock held again): its program
    /// onto the links when no change came after the one that posted it;
    /// dropped (unloaded) otherwise.
    pub(crate) fn finish_xdp_job(&mut self, generation: u64, prepared: PreparedXdpEngine) {
        if generation != self.xdp.generation || !self.xdp_attached() {
            eprintln!(
                "parapetd: dataplane: a background XDP load was superseded by a later change; \
                 dropped"
            );
            return;
        }
        self.xdp.loading = None;
        let Some(dp) = self.dp.as_mut() else { return };
        let choice = dp.commit_xdp_engine(prepared);
        self.note_choice(choice);
    }

    /// The loader thread's mailbox.
    pub(crate) fn xdp_mailbox(&self) -> Arc<XdpMailbox> {
        self.xdp.mailbox.clone()
    }

    fn xdp_attached(&self) -> bool {
        self.attached.iter().any(|a| a.hook == AttachPoint::Xdp)
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

    /// Puts the chosen engine on every XDP link (nothing without one; the
    /// tree form through the loader thread, the walker meanwhile).
    pub(crate) fn sync_xdp_engine(&mut self) {
        if !self.xdp_attached() {
            self.xdp.choice = None;
            self.xdp.loading = None;
            self.xdp.generation += 1;
            self.xdp.mailbox.post(None);
            return;
        }
        let list = self.xdp.list.clone();
        if let Some((p, job)) = self.prepare_for(list.as_ref()) {
            self.commit_prepared(p, job);
        }
    }

    /// The `xdp_engine` object of `stats`: asked for, chosen, why (no
    /// choice while nothing is attached at XDP).
    pub(crate) fn xdp_engine_json(&self) -> Value {
        let xdp = self.xdp_attached();
        let choice = self.xdp.choice.as_ref().filter(|_| xdp);
        let loading = self.xdp.loading.as_ref().filter(|_| xdp).map(|l| {
            json!({
                "engine": l.engine.name(),
                "entries": l.entries,
                "ms": l.since.elapsed().as_millis() as u64,
            })
        });
        json!({
            "requested": self.config.xdp_engine.name(),
            "engine": choice.map(|c| c.engine.name()),
            "reason": choice.map(|c| c.reason.clone()),
            "loading": loading,
        })
    }
}
