//! Mark changes and what `check` says `apply` will do with them: the
//! kernel dataplane does not write the mark, so a change some rule reads
//! is refused, and a change no rule reads leaves the mark to the host's
//! own rules while the rest is enforced (docs/syntax.md, "Mark changes").

mod common;
use common::offline::{parapet, s, stdout, write};

#[test]
fn check_says_which_mark_changes_apply_refuses() {
    let dir = tempfile::tempdir().unwrap();
    let read = write(
        dir.path(),
        "read.rules",
        "*filter\n:FORWARD DROP [0:0]\n\
         -A FORWARD -i ts0 -j MARK --set-xmark 0x40000/0xff0000\n\
         -A FORWARD -m mark --mark 0x40000/0xff0000 -j ACCEPT\nCOMMIT\n",
    );
    let out = stdout(&parapet(&["check", s(&read)]));
    assert!(
        out.contains("; mark changes (rule 1): a rule matches the mark: evaluated offline only, apply refuses them"),
        "{out}"
    );
    let unread = write(
        dir.path(),
        "unread.nft",
        "table inet t {\n  chain fwd {\n    type filter hook forward priority 0; policy drop;\n    \
         iifname \"ts0\" meta mark set 0x40000\n    iifname \"ts0\" accept\n  }\n}\n",
    );
    let out = stdout(&parapet(&["check", s(&unread)]));
    assert!(
        out.contains("; mark changes (rule 1): no rule matches the mark: apply enforces the rest"),
        "{out}"
    );
    let none = write(
        dir.path(),
        "none.rules",
        "*filter\n:INPUT ACCEPT [0:0]\n-A INPUT -m mark --mark 1 -j DROP\nCOMMIT\n",
    );
    let out = stdout(&parapet(&["check", s(&none)]));
    assert!(!out.contains("mark changes"), "{out}");
}
