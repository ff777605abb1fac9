//! Bytes → the image loader; whatever it accepts must walk without panics.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    parapet_compile::fuzzing::check_image(data);
});
