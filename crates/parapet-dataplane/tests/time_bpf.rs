//! Time windows (`-m time`, image time rows) in the BPF walker
//! (BPF_PROG_TEST_RUN on the real program): the wall clock is injected (the
//! test clock plus a chosen boot → UTC offset, so "now" is a chosen
//! second), and at every boundary second of the windows (±1 s) and at
//! random times over four years, with sys_tz at UTC, UTC+1 and UTC−5, the
//! BPF walker, the Rust walker and the linear engine (the specification,
//! `xt_time`'s arithmetic) decide every packet alike.

mod common;

use common::lo::{dp_on_lo, run_on_lo};
use common::wire::{frame_of, wire_packet};
use common::Rng;
use parapet_compile::{compile, Backend, CompileOptions, ImageState, KeyWords, Walker};
use parapet_dataplane::stateful::{kernel_hz, WallClock};
use parapet_model::*;

/// One rule per destination port 1..=7, each with its own window; the
/// policy (rule 0) takes a packet whose window is closed.
const RULES: &str = "*filter
:INPUT DROP [0:0]
-A INPUT -p udp --dport 1 -m time --timestart 09:00 --timestop 17:00 --weekdays Mon,Tue,Wed,Thu,Fri -j ACCEPT
-A INPUT -p udp --dport 2 -m time --timestart 22:00 --timestop 02:00 --weekdays Fri --contiguous -j ACCEPT
-A INPUT -p udp --dport 3 -m time --datestart 2026-03-01T00:00:00 --datestop 2026-03-31T23:59:59 -j ACCEPT
-A INPUT -p udp --dport 4 -m time --monthdays 1,15,29,31 -j ACCEPT
-A INPUT -p udp --dport 5 -m time --timestart 22:00 --timestop 02:00 --weekdays Sat --kerneltz -j ACCEPT
-A INPUT -p udp --dport 6 -m time --timestart 12:00 --timestop 12:00 -j ACCEPT
-A INPUT -p udp --dport 7 -m time --timestart 23:30 --timestop 00:30 --monthdays 1 -j ACCEPT
COMMIT
";

/// Seconds since the epoch of a UTC date (`YYYY-MM-DD`) plus `secs`.
fn at(date: &str, secs: i64) -> i64 {
    parse_date(date).expect("a date") + secs
}

/// The seconds checked: each window's edges ±1 s on a fortnight of days
/// (every weekday twice, month ends and starts), the date window's edges,
/// a leap day, then random seconds from 2024 to 2027.
fn times() -> Vec<i64> {
    let mut edges: Vec<i64> = Vec::new();
    let daytimes = [
        0,
        2 * 3600,
        9 * 3600,
        12 * 3600,
        17 * 3600,
        22 * 3600,
        23 * 3600 + 1800,
        1800,
    ];
    let days = [
        at("2026-02-26", 0), // Thursday → through Sunday 2026-03-08
        at("2026-03-27", 0), // Friday, the date window's last days
        at("2026-04-13", 0), // mid-month
        at("2024-02-27", 0), // a leap day
        at("2025-12-29", 0), // a year end
    ];
    for day in days {
        for d in 0..10 {
            for t in daytimes {
                for delta in [-1, 0, 1] {
                    edges.push(day + d * 86_400 + t + delta);
                }
            }
        }
    }
    let mut rng = Rng::new(13);
    let (lo, hi) = (at("2024-01-01", 0), at("2028-01-01", 0));
    edges.extend((0..600).map(|_| lo + rng.below((hi - lo) as u64) as i64));
    edges
}

#[test]
#[ignore = "needs root"]
fn bpf_time_windows_agree_with_rust_and_linear_at_their_edges() {
    let mut dp = dp_on_lo("bpf_time_windows_agree_with_rust_and_linear_at_their_edges");
    let hz = kernel_hz().expect("the kernel's HZ must be known");
    let rs = parapet_parse::parse(RULES, "time", parapet_parse::Format::IptablesSave)
        .unwrap_or_else(|e| panic!("{e:?}"))
        .ruleset;
    let start = rs.select_chain(None).unwrap();
    let linear = LinearEngine::new(&rs, start).unwrap();
    let list = flatten(&rs, start).unwrap();
    let pkts: Vec<Packet> = (1..=7u16)
        .map(|port| wire_packet(Packet::v4(0x0a00_0001, 0x0a00_0002, 17, 4000, port)))
        .collect();
    // The boot clock the test sets: whole seconds, so the offset that
    // makes `t` now is whole seconds too (the linear engine's clock).
    let boot_ns = 7_000_000_000u64;
    let (mut checked, mut open) = (0usize, [0usize; 8]);
    let times = times();
    for backend in [Backend::Linear, Backend::Tree] {
        let opts = CompileOptions {
            backend,
            ..CompileOptions::default()
        };
        let (image, _) = compile(&list, &opts).unwrap();
        dp.set_test_clock(boot_ns).unwrap();
        dp.write_image(&image.to_bytes()).unwrap();
        dp.swap().unwrap();
        let walker = Walker::new(image.clone());
        let clock = Clock { ns: boot_ns, hz };
        for minutes_west in [0, -60, 300] {
            for &t in &times {
                let wall = WallClock {
                    boot_to_utc_ns: t * 1_000_000_000 - boot_ns as i64,
                    minutes_west,
                };
                dp.set_wall_clock(wall).unwrap();
                let mut spec = StatefulState::new(clock);
                spec.wall_start_secs = t - (boot_ns / 1_000_000_000) as i64;
                spec.minutes_west = minutes_west;
                let mut image_state = ImageState::new(&image, clock);
                image_state.wall_offset_ns = wall.boot_to_utc_ns;
                image_state.minutes_west = minutes_west;
                for p in &pkts {
                    let want = linear.classify_with(p, &NoSets, &mut spec).unwrap();
                    let rust = walker.decide_stateful(&KeyWords::new(p, 0), &mut image_state);
                    let when = format_date(t);
                    assert_eq!(
                        rust, want,
                        "{when} west {minutes_west} {backend:?}: Rust walker, port {}",
                        p.dport
                    );
                    let got = run_on_lo(&dp, &frame_of(p));
                    assert_eq!(
                        got,
                        (want.rule_id, want.nonterminal.clone()),
                        "{when} west {minutes_west} {backend:?}: BPF walker, port {}",
                        p.dport
                    );
                    open[want.rule_id as usize] += 1;
                    checked += 1;
                }
            }
        }
    }
    dp.set_test_clock(0).unwrap();
    assert_eq!(checked, 2 * 3 * times.len() * 7);
    // Every window was seen open and closed (a test that cannot fail
    // otherwise: a walker that never opens one agrees with nothing here).
    // Rule 6's start equals its stop: xt_time takes that for the whole
    // day (its "start < stop" test fails, the wrapped test never closes).
    let every = 2 * 3 * times.len();
    for (rule, n) in open.iter().enumerate().skip(1) {
        assert!(*n > 0, "rule {rule}'s window never open");
        assert!(
            (*n < every) != (rule == 6),
            "rule {rule}'s window open {n} times of {every}"
        );
    }
}

#[test]
#[ignore = "needs root"]
fn a_window_follows_the_loaders_wall_clock_and_stays_closed_without_one() {
    // On the kernel's own clocks (no test clock): a window open all day is
    // open with the offset the loader wrote, and closed once it is 0 (the
    // clock never written), and a window that closed yesterday is closed.
    let mut dp = dp_on_lo("a_window_follows_the_loaders_wall_clock_and_stays_closed_without_one");
    dp.set_test_clock(0).unwrap();
    let rules = "*filter
:INPUT DROP [0:0]
-A INPUT -p udp --dport 1 -m time --timestart 00:00 --timestop 23:59:59 -j ACCEPT
-A INPUT -p udp --dport 2 -m time --datestop 2020-01-01 -j ACCEPT
COMMIT
";
    let image = common::iptables_image(rules);
    dp.write_image(&image).unwrap();
    dp.swap().unwrap();
    let frame = |port| {
        frame_of(&wire_packet(Packet::v4(
            0x0a00_0001,
            0x0a00_0002,
            17,
            4000,
            port,
        )))
    };
    assert_eq!(
        run_on_lo(&dp, &frame(1)).0,
        1,
        "open all day with the loader's clock"
    );
    assert_eq!(run_on_lo(&dp, &frame(2)).0, 0, "closed since 2020");
    dp.set_wall_clock(WallClock::now()).unwrap();
    assert_eq!(run_on_lo(&dp, &frame(1)).0, 1, "open after a refresh");
    dp.set_wall_clock(WallClock {
        boot_to_utc_ns: 0,
        minutes_west: 0,
    })
    .unwrap();
    assert_eq!(
        run_on_lo(&dp, &frame(1)).0,
        0,
        "closed without a wall clock"
    );
}
