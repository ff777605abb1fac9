//! `parapet bench dataplane --stages`: the stage profile (issue 15). Beside
//! the whole program and the floor, the same ruleset in the stage-profile
//! programs that return "pass" after each stage (`parapet_dataplane::Stage`:
//! parse, decide, key, descent, merge), every one timed on the same packets
//! in the same runs. A stop's time above the floor is what the program
//! costs up to there; a stage's price is its stop minus the stop before it
//! (the floor before the first; the last stop before the whole program).

use crate::engine::EngineArgs;
use crate::run::load_dataplane_stopping;
use anyhow::Result;
use parapet_dataplane::{Dataplane, Stage};
use parapet_model::Ruleset;

/// One stop's program and its times over the runs.
struct Stop {
    stage: Stage,
    dp: Dataplane,
    /// ns of the run in progress, summed over its packets
    total: f64,
    /// per run: ns per packet above the floor
    above: Vec<f64>,
}

/// The stage-profile programs of one benchmark and their times.
pub(crate) struct Stages {
    stops: Vec<Stop>,
    /// per run: the whole program's ns per packet above the floor
    full_above: Vec<f64>,
}

/// Median, min and max of `v` (sorted in place; not empty).
fn spread(v: &mut [f64]) -> (f64, f64, f64) {
    v.sort_by(|a, b| a.total_cmp(b));
    (v[v.len() / 2], v[0], v[v.len() - 1])
}

impl Stages {
    /// No stage programs: `--stages` not given.
    pub(crate) fn none() -> Stages {
        Stages {
            stops: Vec::new(),
            full_above: Vec::new(),
        }
    }

    /// One program per stop, each with `rs`'s image live in it as
    /// `load_dataplane` makes it live for the whole program.
    pub(crate) fn load(
        rs: &Ruleset,
        opts: &EngineArgs,
        store: Option<&parapet_sets::SetStore>,
    ) -> Result<Stages> {
        let mut stops = Vec::with_capacity(Stage::ALL.len());
        for stage in Stage::ALL {
            let running = load_dataplane_stopping(rs, opts, 10, store, Some(stage))?;
            stops.push(Stop {
                stage,
                dp: running.dp,
                total: 0.0,
                above: Vec::new(),
            });
        }
        Ok(Stages {
            stops,
            full_above: Vec::new(),
        })
    }

    /// Time one packet in every stop's program: `run` is one test run of
    /// it, returning its kernel-timed ns.
    pub(crate) fn time_packet(
        &mut self,
        mut run: impl FnMut(&Dataplane) -> Result<f64>,
    ) -> Result<()> {
        for s in &mut self.stops {
            s.total += run(&s.dp)?;
        }
        Ok(())
    }

    /// The end of a run over `n` packets whose floor took `floor_total`
    /// ns and the whole program `full_total`.
    pub(crate) fn end_run(&mut self, floor_total: f64, full_total: f64, n: f64) {
        if self.stops.is_empty() {
            return;
        }
        for s in &mut self.stops {
            s.above.push((s.total - floor_total) / n);
            s.total = 0.0;
        }
        self.full_above.push((full_total - floor_total) / n);
    }

    /// Per stop and for the whole program ("full"): ns above the floor
    /// (median [min, max] over the runs) and the stage's price (median
    /// over the runs of this stop minus the one before it); `None`
    /// without `--stages`.
    pub(crate) fn json(&self) -> Option<serde_json::Value> {
        if self.stops.is_empty() {
            return None;
        }
        let mut rows = Vec::new();
        let runs = self.full_above.len();
        let mut prev = vec![0.0; runs];
        let named = self
            .stops
            .iter()
            .map(|s| (s.stage.name(), &s.above))
            .chain([("full", &self.full_above)]);
        for (name, above) in named {
            let mut a = above.clone();
            let mut price: Vec<f64> = above.iter().zip(&prev).map(|(x, p)| x - p).collect();
            let (m, lo, hi) = spread(&mut a);
            let (pm, plo, phi) = spread(&mut price);
            rows.push(serde_json::json!({"stage": name,
                "above_floor_ns": m, "above_floor_ns_min": lo, "above_floor_ns_max": hi,
                "price_ns": pm, "price_ns_min": plo, "price_ns_max": phi}));
            prev.clone_from(above);
        }
        Some(serde_json::Value::Array(rows))
    }

    /// The same as lines of text.
    pub(crate) fn print(&self) {
        let Some(serde_json::Value::Array(rows)) = self.json() else {
            return;
        };
        println!("stage profile, ns above the floor up to each stop (median [min-max]) and the stage's price:");
        for r in rows {
            println!(
                "  {:>8}: {:7.1} [{:.1}-{:.1}]  price {:6.1} [{:.1}-{:.1}]",
                r["stage"].as_str().unwrap_or("?"),
                r["above_floor_ns"].as_f64().unwrap_or(f64::NAN),
                r["above_floor_ns_min"].as_f64().unwrap_or(f64::NAN),
                r["above_floor_ns_max"].as_f64().unwrap_or(f64::NAN),
                r["price_ns"].as_f64().unwrap_or(f64::NAN),
                r["price_ns_min"].as_f64().unwrap_or(f64::NAN),
                r["price_ns_max"].as_f64().unwrap_or(f64::NAN),
            );
        }
    }
}
