//! A ruleset's INPUT chain as parapetd installs it: parsed from
//! iptables-save text, compiled to an image, and live at the interfaces
//! and at the INPUT hook (the per-feature BPF tests that hold the kernel
//! walk against the Rust walker and the linear engine share these).

use parapet_compile::{compile, CompileOptions};
use parapet_dataplane::ruleset::Install;
use parapet_dataplane::{Dataplane, KernelVerdict, NfHook};
use parapet_model::{flatten, Ruleset, Verdict};

/// The kernel's verdict for a model verdict.
pub fn kernel_verdict(v: &Verdict) -> KernelVerdict {
    match v {
        Verdict::Accept => KernelVerdict::Accept,
        Verdict::Drop => KernelVerdict::Drop,
        Verdict::Reject { .. } => KernelVerdict::Reject,
    }
}

/// `image` live at the interfaces and at INPUT, as an apply makes it.
pub fn install(dp: &mut Dataplane, rs: &Ruleset, policy: &Verdict, image: &[u8]) {
    dp.install_ruleset_hooks(
        &Install {
            ruleset: rs,
            policy,
            image,
            sets: None,
            log_rate: 1,
        },
        &[(NfHook::Input, image)],
    )
    .unwrap();
}

/// An iptables-save text's ruleset (the text in the panic when it is refused).
pub fn parse(text: &str) -> Ruleset {
    parapet_parse::parse(text, "test", parapet_parse::Format::IptablesSave)
        .unwrap_or_else(|e| panic!("{e:?}\n{text}"))
        .ruleset
}

/// The compiled image of `rs`'s INPUT chain.
pub fn image_of(rs: &Ruleset) -> Vec<u8> {
    let list = flatten(rs, rs.select_chain(Some("INPUT")).unwrap()).unwrap();
    compile(&list, &CompileOptions::default())
        .unwrap()
        .0
        .to_bytes()
}
