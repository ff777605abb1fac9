//! Every program's deepest call chain keeps 32 bytes of the verifier's
//! 512-byte stack free (docs/dataplane.md, "Stack"): measured on the
//! object this crate embeds by `scripts/bpf_stack.py` (llvm-objdump).  A
//! chain at 512 still loads, but the next byte a change adds to any frame
//! on it does not, and the verifier says so only on a kernel at load time.

use std::path::Path;
use std::process::Command;

#[test]
fn deepest_call_chain_leaves_32_bytes_of_stack() {
    check(parapet_dataplane::BPF_OBJECT, "may_goto");
}

/// The object for kernels without may_goto: its iterators sit on the
/// partition walk's frame.
#[test]
fn the_iterator_object_leaves_32_bytes_too() {
    check(parapet_dataplane::BPF_OBJECT_ITER, "iter");
}

fn check(object: &[u8], name: &str) {
    let obj = std::env::temp_dir().join(format!("parapet-stack-{name}-{}.o", std::process::id()));
    std::fs::write(&obj, object).unwrap();
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../scripts/bpf_stack.py");
    let out = Command::new("python3")
        .arg(&script)
        .arg(&obj)
        .args(["--max", "480"])
        .output()
        .expect("python3 runs scripts/bpf_stack.py");
    std::fs::remove_file(&obj).unwrap();
    let said = String::from_utf8_lossy(&out.stdout);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{said}{err}");
    // one line per program: XDP, the tc ones and the netfilter one
    for section in ["xdp:", "classifier:", "parapet_tc_hooks_in:", "parapet_nf:"] {
        assert!(said.contains(section), "no {section} in\n{said}");
    }
    // the walker's chain is the deepest (parapet_decide, inlined into the
    // entries since session 14, calls the merge's global step)
    assert!(said.contains("parapet_merge_step"), "{said}");
}
