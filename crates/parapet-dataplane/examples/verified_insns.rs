//! Prints how many instructions the kernel's verifier walked
//! (`bpf_prog_info.verified_insns`) for every program parapet loads, as
//! parapetd loads them: the interface programs (XDP, tc), the netfilter
//! program and the tc placement's ingress and egress programs, each with
//! the conntrack lookup linked in and without. Needs root; run by
//! `bench/dataplane/verified_insns.sh`. One line per program:
//! `conntrack=<off|on> <program> <verified instructions>`.

use parapet_dataplane::{Dataplane, Features, LoadOptions, SetSizing};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    for conntrack in [false, true] {
        let mut dp = Dataplane::load_with(
            &LoadOptions::default(),
            &SetSizing::default(),
            &Features {
                conntrack,
                ..Features::default()
            },
        )?;
        if conntrack && !dp.conntrack() {
            eprintln!(
                "conntrack lookup not linked in: {}",
                dp.conntrack_note().unwrap_or("no reason given")
            );
        }
        dp.load_tc_hook_programs()?;
        if let Some(why) = dp.netfilter_note() {
            eprintln!("no netfilter program: {why}");
        }
        let on = if dp.conntrack() { "on" } else { "off" };
        for (name, insns) in dp.verified_insns()? {
            println!("conntrack={on} {name} {insns}");
        }
    }
    Ok(())
}
