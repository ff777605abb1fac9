//! `-m tcp --tcp-option` in the kernel dataplane (key words 44..=51,
//! bpf/lib/tcp_options.h): random rulesets testing boundary kinds (0, 1,
//! 2, 127, 128, 255, …, present and `!`) over random option areas
//! (well formed, NOP-padded, cut by End of Option List, lengths of 0, 1
//! and past the area, a kind in the last byte), installed as parapetd
//! installs them; the BPF program at XDP, at tc and at a netfilter hook
//! decides every frame as the Rust walker and the linear engine do.
//! Also: the install's option switch, an image that tests options with
//! the switch off (the walk is abandoned, never options read as absent),
//! and a data offset past the segment (dropped only while the images
//! test options). Needs root.

mod common;

use common::installed::{image_of, install, kernel_verdict as verdict, parse};
use common::lo::{dp_on_lo, LO};
use parapet_compile::{compile, Backend, CompileOptions, KeyWords, Walker};
use parapet_dataplane::frame::{frame_of_packet, Frame};
use parapet_dataplane::ruleset::reads_tcp_options;
use parapet_dataplane::{AttachPoint, Dataplane, KernelVerdict, NfFamily, NfHook, ParseStatus};
use parapet_gen::tcp_options::{tcp_option_packets, tcp_option_ruleset};
use parapet_model::{flatten, Family, Verdict};

#[test]
#[ignore = "needs root"]
fn bpf_reads_tcp_options_as_the_linear_engine() {
    let mut dp = dp_on_lo("bpf_reads_tcp_options_as_the_linear_engine");
    let (mut checked, mut by_rule, mut with_options) = (0, 0, 0);
    for seed in 0..10u64 {
        let rs = tcp_option_ruleset(seed, 4 + seed as usize * 3);
        let list = flatten(&rs, rs.select_chain(None).unwrap()).unwrap();
        let backend = if seed % 2 == 0 {
            Backend::Linear
        } else {
            Backend::Tree
        };
        let opts = CompileOptions {
            backend,
            ..CompileOptions::default()
        };
        let (image, _) = compile(&list, &opts).unwrap();
        install(&mut dp, &rs, &list.policy, &image.to_bytes());
        assert!(dp.reads_tcp_options().unwrap());
        let walker = Walker::new(image);
        for (i, p) in tcp_option_packets(seed, 120).into_iter().enumerate() {
            let want = list.classify(&p, &[]);
            assert_eq!(
                walker.decide(&KeyWords::new(&p, 0)),
                want,
                "Rust walker: {p}"
            );
            let frame = frame_of_packet(&p);
            let family = match p.family {
                Family::V4 => NfFamily::Ipv4,
                Family::V6 => NfFamily::Ipv6,
            };
            for at in ["xdp", "tc", "input"] {
                match at {
                    "xdp" => dp.test_run(AttachPoint::Xdp, &frame, LO, 1).map(drop),
                    "tc" => dp.test_run(AttachPoint::Tc, &frame, LO, 1).map(drop),
                    _ => dp
                        .test_run_netfilter(NfHook::Input, family, &frame, 1)
                        .map(drop),
                }
                .unwrap();
                let got = dp.last_decision().unwrap().unwrap();
                assert!(
                    got.by_image,
                    "seed {seed} packet {i} at {at}: walker error {} for {p}",
                    got.walk_err
                );
                assert_eq!(
                    (got.rule_id, got.verdict),
                    (want.rule_id, verdict(&want.verdict)),
                    "seed {seed} {backend:?} packet {i} at {at}: {p}"
                );
            }
            checked += 1;
            by_rule += usize::from(want.rule_id != 0);
            with_options += usize::from(p.tcp_options.is_some());
        }
    }
    assert!(
        by_rule > checked / 3,
        "{by_rule}/{checked} decided by a rule"
    );
    assert!(with_options > checked / 2, "{with_options}/{checked}");
}

const OPTION_RULES: &str = "*filter
:INPUT ACCEPT [0:0]
-A INPUT -p tcp -m tcp --tcp-option 30 -j DROP
COMMIT
";

const PLAIN_RULES: &str = "*filter
:INPUT ACCEPT [0:0]
-A INPUT -p udp -j DROP
COMMIT
";

fn tcp_frame(area: &[u8]) -> Frame {
    Frame::ipv4([10, 0, 0, 1].into(), [10, 0, 0, 2].into())
        .tcp(40000, 22, 0x02)
        .tcp_options(area)
}

/// An install whose ruleset tests options turns the copy on before its
/// image goes live and one without turns it off after; an image that
/// tests options while the switch is off (written without an install)
/// is abandoned for a packet with options, never walked as if it had
/// none; a data offset past the segment is dropped as truncated while
/// the images test options, and left to the rules otherwise.
#[test]
#[ignore = "needs root"]
fn the_option_switch_and_what_it_guards() {
    let mut dp = dp_on_lo("the_option_switch_and_what_it_guards");
    let (options, plain) = (parse(OPTION_RULES), parse(PLAIN_RULES));
    assert!(reads_tcp_options(&options) && !reads_tcp_options(&plain));
    let decide = |dp: &Dataplane, frame: &[u8]| {
        dp.test_run(AttachPoint::Xdp, frame, LO, 1).unwrap();
        dp.last_decision().unwrap().unwrap()
    };
    let window_scale_30 = tcp_frame(&[1, 30, 2, 0]).build();
    let value_byte_30 = tcp_frame(&[3, 3, 30, 0]).build();
    let past = tcp_frame(&[]).tcp_doff(15).build();

    install(&mut dp, &options, &Verdict::Accept, &image_of(&options));
    assert!(dp.reads_tcp_options().unwrap());
    let d = decide(&dp, &window_scale_30);
    assert!(d.by_image && d.rule_id == 1, "{d:?}");
    let d = decide(&dp, &value_byte_30);
    assert!(d.by_image && d.rule_id == 0, "{d:?}");
    let d = decide(&dp, &past);
    assert_eq!(
        (d.status, d.verdict),
        (ParseStatus::Truncated, KernelVerdict::Drop)
    );

    install(&mut dp, &plain, &Verdict::Accept, &image_of(&plain));
    assert!(!dp.reads_tcp_options().unwrap());
    let d = decide(&dp, &past);
    assert!(
        d.status == ParseStatus::Ok && d.by_image && d.rule_id == 0,
        "{d:?}"
    );

    // the option image without its switch: abandoned where it would read
    // an area nobody copied (walk error 20), walked where there is none
    dp.write_image(&image_of(&options)).unwrap();
    dp.swap().unwrap();
    let d = decide(&dp, &window_scale_30);
    assert!(!d.by_image && d.walk_err == 20, "{d:?}");
    let d = decide(&dp, &tcp_frame(&[]).build());
    assert!(d.by_image && d.rule_id == 0, "{d:?}");
}
