//! Lookup-rate measurement, shared by the crate's bench and the CLI's
//! `parapet bench classify`.

use crate::meta::Classifier;
use crate::walk::Key;
use std::hint::black_box;
use std::time::Instant;

/// The result of [`bench_lookups`]; [`BenchReport::to_json`] prints the
/// object `parapet bench classify --json` promises.
#[derive(Clone, Debug, PartialEq)]
pub struct BenchReport {
    /// Engine name.
    pub engine: String,
    /// Entries of the classified list.
    pub rules: usize,
    /// Build time of the classifier.
    pub build_ms: f64,
    /// Image size.
    pub memory_bytes: usize,
    /// Median over runs.
    pub lookups_per_sec: f64,
    /// Slowest run.
    pub min_lookups_per_sec: f64,
    /// Fastest run.
    pub max_lookups_per_sec: f64,
    /// 1e9 / median.
    pub ns_per_lookup: f64,
    /// Runs measured.
    pub runs: usize,
    /// Lookups per run.
    pub lookups_per_run: usize,
}

impl BenchReport {
    /// One JSON object, keys as conventions.md lists them plus extras.
    pub fn to_json(&self) -> String {
        format!(
            "{{\"engine\":\"{}\",\"rules\":{},\"build_ms\":{:.3},\"memory_bytes\":{},\"lookups_per_sec\":{:.0},\"min_lookups_per_sec\":{:.0},\"max_lookups_per_sec\":{:.0},\"ns_per_lookup\":{:.2},\"runs\":{},\"lookups_per_run\":{}}}",
            self.engine.replace('"', "'"),
            self.rules,
            self.build_ms,
            self.memory_bytes,
            self.lookups_per_sec,
            self.min_lookups_per_sec,
            self.max_lookups_per_sec,
            self.ns_per_lookup,
            self.runs,
            self.lookups_per_run
        )
    }
}

/// Measures batch lookups of `keys` through `classifier`: `runs` runs (at
/// least 5), each classifying the keys as many times as needed to last
/// ~`min_run_ms` milliseconds. Uses the batch id path
/// ([`Classifier::classify_batch_ids`]), the one a dataplane would use.
pub fn bench_lookups(classifier: &Classifier, keys: &[Key], runs: usize) -> BenchReport {
    bench_lookups_for(classifier, keys, runs, 100)
}

/// As [`bench_lookups`], with an explicit minimum run length.
pub fn bench_lookups_for(
    classifier: &Classifier,
    keys: &[Key],
    runs: usize,
    min_run_ms: u64,
) -> BenchReport {
    let runs = runs.max(5);
    let mut out = vec![0u32; keys.len()];
    // Warm up and size the repetitions of one run.
    let t = Instant::now();
    classifier.classify_batch_ids(keys, &mut out);
    let once = t.elapsed().as_secs_f64().max(1e-7);
    let reps = ((min_run_ms as f64 / 1e3) / once).ceil().max(1.0) as usize;
    let mut rates: Vec<f64> = (0..runs)
        .map(|_| {
            let t = Instant::now();
            for _ in 0..reps {
                classifier.classify_batch_ids(black_box(keys), &mut out);
                black_box(&out);
            }
            (reps * keys.len()) as f64 / t.elapsed().as_secs_f64()
        })
        .collect();
    rates.sort_by(|a, b| a.total_cmp(b));
    let median = rates[rates.len() / 2];
    BenchReport {
        engine: classifier.engine().name().into(),
        rules: classifier.entries(),
        build_ms: classifier.stats().build_ms,
        memory_bytes: classifier.memory_bytes(),
        lookups_per_sec: median,
        min_lookups_per_sec: rates[0],
        max_lookups_per_sec: rates[rates.len() - 1],
        ns_per_lookup: 1e9 / median,
        runs,
        lookups_per_run: reps * keys.len(),
    }
}
