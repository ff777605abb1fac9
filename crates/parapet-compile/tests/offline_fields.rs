//! Fields the packet key has no word for yet (the socket owner, `-m
//! owner`; the conntrack entry's original source port, `--ctorigsrcport`):
//! compiling a rule on one is
//! refused with the rule and the field named, never built as if every
//! packet matched it.

use parapet_compile::{compile, CompileOptions};
use parapet_model::*;

#[test]
fn the_original_source_port_is_refused_by_the_compiler() {
    let mut m = Matches::any();
    m.constrain(Field::CtOrigSrcPort, IntervalSet::point(68));
    let rs = parapet_gen::one_chain(
        vec![Rule::new(1, m, Action::Verdict(Verdict::Accept))],
        Verdict::Drop,
    );
    let list = flatten(&rs, rs.select_chain(None).unwrap()).unwrap();
    let e = compile(&list, &CompileOptions::default()).unwrap_err();
    let msg = e.to_string();
    assert!(
        msg.contains("rule 1") && msg.contains("original source port"),
        "{msg}"
    );
}

#[test]
fn the_socket_owner_is_refused_by_the_compiler() {
    for f in [Field::SkUid, Field::SkGid] {
        let mut m = Matches::any();
        m.constrain(f, owner::xt_ids(1000, 1000, false));
        let rs = parapet_gen::one_chain(
            vec![Rule::new(1, m, Action::Verdict(Verdict::Drop))],
            Verdict::Accept,
        );
        let list = flatten(&rs, rs.select_chain(None).unwrap()).unwrap();
        let e = compile(&list, &CompileOptions::default()).unwrap_err();
        let msg = e.to_string();
        assert!(
            msg.contains("rule 1") && msg.contains("socket owner"),
            "{msg}"
        );
    }
}
