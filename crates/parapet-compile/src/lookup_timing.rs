//! The engine timing behind `parapet bench classify`: the lookup rate of a
//! compiled [`Classifier`] over a batch of keys, and the thread CPU clock
//! every parapet benchmark reads (one home for it: the CLI and the
//! micro-benchmarks under `bench/micro` import [`thread_cpu_seconds`]).

use crate::meta::Classifier;
use parapet_image::KeyWords;
use std::hint::black_box;
use std::time::Instant;

/// The result of [`time_lookups`]; [`LookupTiming::to_json`] prints the
/// object `parapet bench classify --json` promises.
#[derive(Clone, Debug, PartialEq)]
pub struct LookupTiming {
    /// Engine name.
    pub engine: String,
    /// Entries of the classified list.
    pub rules: usize,
    /// Build time of the classifier.
    pub build_ms: f64,
    /// Memory the lookups read: image plus the user-space fast path.
    pub memory_bytes: usize,
    /// Median over runs.
    pub lookups_per_sec: f64,
    /// Slowest run.
    pub min_lookups_per_sec: f64,
    /// Fastest run.
    pub max_lookups_per_sec: f64,
    /// 1e9 / median.
    pub ns_per_lookup: f64,
    /// Median over runs, per second of this thread's CPU time: on a busy
    /// machine the wall-clock rate counts time the thread was not running.
    pub cpu_lookups_per_sec: f64,
    /// Runs measured.
    pub runs: usize,
    /// Lookups per run.
    pub lookups_per_run: usize,
}

impl LookupTiming {
    /// One JSON object, keys as conventions.md lists them plus extras.
    pub fn to_json(&self) -> String {
        format!(
            "{{\"engine\":\"{}\",\"rules\":{},\"build_ms\":{:.3},\"memory_bytes\":{},\"lookups_per_sec\":{:.0},\"min_lookups_per_sec\":{:.0},\"max_lookups_per_sec\":{:.0},\"ns_per_lookup\":{:.2},\"cpu_lookups_per_sec\":{:.0},\"runs\":{},\"lookups_per_run\":{}}}",
            self.engine.replace('"', "'"),
            self.rules,
            self.build_ms,
            self.memory_bytes,
            self.lookups_per_sec,
            self.min_lookups_per_sec,
            self.max_lookups_per_sec,
            self.ns_per_lookup,
            self.cpu_lookups_per_sec,
            self.runs,
            self.lookups_per_run
        )
    }
}

/// Measures batch lookups of `keys` through `classifier`: `runs` runs (at
/// least 5), each classifying the keys as many times as needed to last
/// ~`min_run_ms` milliseconds. Uses the batch id path
/// ([`Classifier::classify_batch_ids`]), the one a dataplane would use.
pub fn time_lookups(classifier: &Classifier, keys: &[KeyWords], runs: usize) -> LookupTiming {
    time_lookups_for(classifier, keys, runs, 100)
}

/// As [`time_lookups`], with an explicit minimum run length.
pub fn time_lookups_for(
    classifier: &Classifier,
    keys: &[KeyWords],
    runs: usize,
    min_run_ms: u64,
) -> LookupTiming {
    let runs = runs.max(5);
    let mut out = vec![0u32; keys.len()];
    // Warm up and size the repetitions of one run.
    let t = Instant::now();
    classifier.classify_batch_ids(keys, &mut out);
    let once = t.elapsed().as_secs_f64().max(1e-7);
    let reps = ((min_run_ms as f64 / 1e3) / once).ceil().max(1.0) as usize;
    let mut cpu_rates = Vec::with_capacity(runs);
    let mut rates: Vec<f64> = (0..runs)
        .map(|_| {
            let t = Instant::now();
            let c = thread_cpu_seconds();
            for _ in 0..reps {
                classifier.classify_batch_ids(black_box(keys), &mut out);
                black_box(&out);
            }
            let lookups = (reps * keys.len()) as f64;
            cpu_rates.push(lookups / (thread_cpu_seconds() - c).max(1e-9));
            lookups / t.elapsed().as_secs_f64()
        })
        .collect();
    rates.sort_by(|a, b| a.total_cmp(b));
    cpu_rates.sort_by(|a, b| a.total_cmp(b));
    let median = rates[rates.len() / 2];
    LookupTiming {
        engine: classifier.engine().name().into(),
        rules: classifier.entries(),
        build_ms: classifier.stats().build_ms,
        memory_bytes: classifier.lookup_memory_bytes(),
        lookups_per_sec: median,
        min_lookups_per_sec: rates[0],
        max_lookups_per_sec: rates[rates.len() - 1],
        ns_per_lookup: 1e9 / median,
        cpu_lookups_per_sec: cpu_rates[cpu_rates.len() / 2],
        runs,
        lookups_per_run: reps * keys.len(),
    }
}

/// CPU time this thread has used, in seconds (0 when the clock cannot be
/// read). On a shared machine it leaves out the time the thread was not
/// running, which wall-clock rates count.
pub fn thread_cpu_seconds() -> f64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: clock_gettime writes one timespec through a valid pointer.
    let rc = unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
    if rc != 0 {
        return 0.0;
    }
    ts.tv_sec as f64 + ts.tv_nsec as f64 * 1e-9
}
