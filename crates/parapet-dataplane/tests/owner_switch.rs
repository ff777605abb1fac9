//! The socket owner switch (`parapet_config[CFG_OWNER]`): an install whose
//! ruleset matches the owner turns it on before its image goes live, one
//! without turns it off only after its image is live, and a failed install
//! leaves it as it was, so no live image that reads the owner words ever
//! finds them unfilled ("no socket"). Needs root.

mod common;

use common::{iptables_image, load_dataplane};
use parapet_dataplane::ruleset::{reads_owner, Install};
use parapet_dataplane::{Dataplane, LoadOptions};
use parapet_model::{Ruleset, Verdict};

const OPTS: LoadOptions = LoadOptions {
    max_rules: 15,
    slot_pages: 16,
    debug: false,
};

fn parse(text: &str) -> Ruleset {
    parapet_parse::parse(text, "test", parapet_parse::Format::IptablesSave)
        .unwrap()
        .ruleset
}

fn install(dp: &mut Dataplane, rs: &Ruleset, image: &[u8]) -> parapet_dataplane::Result<u32> {
    dp.install_ruleset(&Install {
        ruleset: rs,
        policy: &Verdict::Accept,
        image,
        sets: None,
        log_rate: 1,
    })
}

#[test]
#[ignore = "needs root"]
fn installs_switch_the_owner_read() {
    let mut dp = load_dataplane("installs_switch_the_owner_read", &OPTS);
    let owner = parse(
        "*filter\n:INPUT ACCEPT [0:0]\n:OUTPUT ACCEPT [0:0]\n\
         -A OUTPUT -m owner --uid-owner 1000 -j DROP\nCOMMIT\n",
    );
    let plain = parse("*filter\n:INPUT ACCEPT [0:0]\n-A INPUT -p udp -j DROP\nCOMMIT\n");
    assert!(reads_owner(&owner) && !reads_owner(&plain));
    let img = iptables_image("*filter\n:INPUT ACCEPT [0:0]\n-A INPUT -p udp -j DROP\nCOMMIT\n");
    let huge = vec![0u8; dp.slot_capacity() + 1];
    assert!(!dp.reads_owner().unwrap());
    // too large for the slot: nothing changes
    assert!(install(&mut dp, &owner, &huge).is_err());
    assert!(!dp.reads_owner().unwrap());
    install(&mut dp, &owner, &img).unwrap();
    assert!(dp.reads_owner().unwrap());
    // a failed install of a ruleset without owner rules leaves it on
    assert!(install(&mut dp, &plain, &huge).is_err());
    assert!(dp.reads_owner().unwrap());
    install(&mut dp, &plain, &img).unwrap();
    assert!(!dp.reads_owner().unwrap());
}
