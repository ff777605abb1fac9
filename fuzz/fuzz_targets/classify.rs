//! Bytes → a small ruleset with chains, RETURNs, LOGs and sets, plus
//! packets; every compiled engine must agree with the decision list.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    parapet_compile::fuzzing::check_classify(data);
});
