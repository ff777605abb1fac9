//! The fuzz targets' checks, on stable, with pseudo-random inputs.

use parapet_compile::fuzzing::{check_classify, check_image};
use parapet_compile::*;
use parapet_image as image;
use parapet_model::*;

fn xorshift(mut x: u64) -> impl FnMut() -> u64 {
    move || {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x
    }
}

#[test]
fn random_bytes_classify_like_the_list() {
    let mut rnd = xorshift(0x1234_5678_9abc_def1);
    for len in (0..1500).map(|i| 16 + i % 700) {
        let data: Vec<u8> = (0..len).map(|_| rnd() as u8).collect();
        check_classify(&data);
    }
}

#[test]
fn mutated_images_load_or_fail_cleanly() {
    let mut rnd = xorshift(42);
    let mut images = Vec::new();
    for seed in 0..20u64 {
        let rs = parapet_gen::random_ruleset(
            seed,
            &parapet_gen::RandomSpec {
                rules: 40,
                set_refs: 2,
                ..Default::default()
            },
        );
        let list = flatten(&rs, rs.select_chain(None).unwrap()).unwrap();
        for engine in [Engine::Linear, Engine::Tree] {
            let c = Classifier::build(
                &list,
                &BuildOptions {
                    engine,
                    leaf_size: Some(1),
                    ..Default::default()
                },
            )
            .unwrap();
            images.push(c.image().to_bytes());
        }
    }
    let mut loaded = 0;
    for round in 0..4000 {
        let mut bytes = images[round % images.len()].clone();
        // Overwrite a few words with small or random values: small values
        // get past more checks than random ones.
        for _ in 0..1 + rnd() % 3 {
            let at = (rnd() as usize % (bytes.len() / 4)) * 4;
            let v = if rnd().is_multiple_of(2) {
                rnd() as u32 % 64
            } else {
                rnd() as u32
            };
            bytes[at..at + 4].copy_from_slice(&v.to_le_bytes());
        }
        if rnd().is_multiple_of(10) {
            let cut = rnd() as usize % bytes.len();
            bytes.truncate(cut);
        }
        check_image(&bytes);
        let mut words: Vec<u32> = bytes
            .chunks_exact(4)
            .map(|c| u32::from_le_bytes([c[0], c[1], c[2], c[3]]))
            .collect();
        if words.len() > 5 {
            words[5] = image::checksum(&words);
            loaded += Image::from_words(words).is_ok() as usize;
        }
    }
    // Some mutations (in reserved words, cut values, verdict choices) are
    // valid images; the walk over them must simply not panic.
    assert!(loaded > 0);
}
