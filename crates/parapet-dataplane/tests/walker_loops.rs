//! Two objects from one source (`build.rs`): the walker's budget loops as
//! `may_goto` loops and as iterator loops. `make test` runs this file, the
//! walker's differential tests and the verifier check a second time with
//! `PARAPET_WALKER_LOOPS=iter`, so the object for 6.6–6.8 kernels is
//! verified and compared with the reference on this kernel too; this test
//! makes sure that second run really loads the iterator object.

use parapet_dataplane::{bpf_object_for_this_kernel, BPF_OBJECT, BPF_OBJECT_ITER};

#[test]
fn the_environment_picks_the_iterator_object() {
    assert_ne!(
        BPF_OBJECT, BPF_OBJECT_ITER,
        "the two builds differ in their loops"
    );
    if std::env::var_os("PARAPET_WALKER_LOOPS").is_some_and(|v| v == "iter") {
        assert!(std::ptr::eq(bpf_object_for_this_kernel(), BPF_OBJECT_ITER));
    }
}
