//! The kernel as the oracle for time conditions (`-m time`, nft `meta
//! time|hour|day`): rulesets whose windows are built around the current
//! time — one that contains now and one that does not, for each of the
//! time of day, the weekday, the day of the month and the date — go into a
//! network namespace this test creates (`iptables-legacy-restore`, `nft
//! -f` with `TZ=UTC`), one UDP datagram per rule goes to 127.0.0.1, and
//! which arrive must equal, datagram by datagram, what the linear engine
//! decides at the same wall-clock time. The windows are hours wide around
//! now, so the answer does not depend on timing (except within a second of
//! midnight, when the test waits for the day to settle).

use parapet_model::*;
use parapet_parse::*;
use parapet_testbed::Netns;
use std::net::UdpSocket;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

fn now_secs() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_secs() as i64
}

/// The rules, one port each (9001…), from windows around `now`: each
/// drops its port while open.
fn iptables_rules(now: i64) -> (String, usize) {
    let day = 86_400;
    let tod = now.rem_euclid(day);
    let hm = |s: i64| format_daytime(s.rem_euclid(day) as u32);
    let days = now.div_euclid(day);
    let wd = ((days + 3).rem_euclid(7) + 1) as usize; // Monday = 1
    let (_, _, md) = civil_from(days);
    let windows = [
        format!(
            "--timestart {} --timestop {}",
            hm(tod - 3600),
            hm(tod + 3600)
        ),
        format!(
            "--timestart {} --timestop {}",
            hm(tod + 7200),
            hm(tod + 10_800)
        ),
        format!("--weekdays {}", WEEKDAY_NAMES[wd - 1]),
        format!("--weekdays {}", WEEKDAY_NAMES[wd % 7]),
        format!("! --weekdays {}", WEEKDAY_NAMES[wd - 1]),
        format!("--monthdays {md}"),
        format!("--monthdays {}", if md == 1 { 2 } else { 1 }),
        format!(
            "--datestart {} --datestop {}",
            format_date(now - day),
            format_date(now + day)
        ),
        format!("--datestop {}", format_date(now - day)),
        format!("--datestart {}", format_date(now + day)),
        // Past midnight: from an hour ago to an hour before that (wraps
        // through the whole day except two hours before now).
        format!(
            "--timestart {} --timestop {}",
            hm(tod - 3600),
            hm(tod - 7200)
        ),
    ];
    let mut text = String::from("*filter\n:INPUT ACCEPT [0:0]\n");
    for (i, w) in windows.iter().enumerate() {
        text.push_str(&format!(
            "-A INPUT -i lo -p udp -m udp --dport {} -m time {w} -j DROP\n",
            9001 + i
        ));
    }
    text.push_str("COMMIT\n");
    (text, windows.len())
}

fn nft_rules(now: i64) -> (String, usize) {
    let day = 86_400;
    let tod = now.rem_euclid(day);
    let hm = |s: i64| format_daytime(s.rem_euclid(day) as u32);
    let date = |s: i64| format_date(s).replacen('T', " ", 1);
    let days = now.div_euclid(day);
    let nft_day = (days + 4).rem_euclid(7) as usize; // Sunday = 0
    const DAYS: [&str; 7] = [
        "Sunday",
        "Monday",
        "Tuesday",
        "Wednesday",
        "Thursday",
        "Friday",
        "Saturday",
    ];
    // Hour ranges must not wrap in one nft rule: keep them inside the day.
    let (a, b) = if tod >= 3600 && tod < day - 3600 {
        (tod - 3600, tod + 3600)
    } else {
        (0, day - 1)
    };
    let (c, d) = if tod < day - 10_800 {
        (tod + 7200, tod + 10_800)
    } else {
        (0, 60)
    };
    let windows = [
        format!("meta hour \"{}\"-\"{}\"", hm(a), hm(b)),
        format!("meta hour \"{}\"-\"{}\"", hm(c), hm(d)),
        format!("meta day \"{}\"", DAYS[nft_day]),
        format!(
            "meta day {{ \"{}\", \"{}\" }}",
            DAYS[(nft_day + 1) % 7],
            DAYS[(nft_day + 2) % 7]
        ),
        format!("meta time \"{}\"-\"{}\"", date(now - day), date(now + day)),
        format!("meta time >= \"{}\"", date(now + day)),
        format!("meta time < \"{}\"", date(now - day)),
        format!("meta day \"{}\" meta hour >= \"{}\"", DAYS[nft_day], hm(a)),
    ];
    let mut text = String::from(
        "table inet t {\n\tchain input {\n\t\ttype filter hook input priority 0; policy accept;\n",
    );
    for (i, w) in windows.iter().enumerate() {
        text.push_str(&format!(
            "\t\tiifname \"lo\" udp dport {} {w} drop\n",
            9001 + i
        ));
    }
    text.push_str("\t}\n}\n");
    (text, windows.len())
}

fn civil_from(days: i64) -> (i64, u32, u32) {
    // The model's calendar, through its date formatting.
    let s = format_date(days * 86_400);
    let y = s[0..4].parse().unwrap();
    let m = s[5..7].parse().unwrap();
    let d = s[8..10].parse().unwrap();
    (y, m, d)
}

/// Which of the datagrams to 9001.. arrive, and the wall-clock second
/// each was sent.
fn arrivals(ns: &Netns, n: usize) -> Vec<(bool, i64)> {
    ns.run_in(|| {
        let tx = UdpSocket::bind("127.0.0.1:40001").unwrap();
        (0..n)
            .map(|i| {
                let port = 9001 + i as u16;
                let rx = UdpSocket::bind(("127.0.0.1", port)).unwrap();
                rx.set_read_timeout(Some(Duration::from_millis(100)))
                    .unwrap();
                let at = now_secs();
                tx.send_to(&[i as u8], ("127.0.0.1", port)).unwrap();
                let mut buf = [0u8; 4];
                // Bounded: one datagram or the timeout.
                let got = matches!(rx.recv_from(&mut buf), Ok((1, _)) if buf[0] == i as u8);
                (got, at)
            })
            .collect()
    })
}

/// The linear engine's fate for each datagram at the second it was sent.
fn engine_fates(rs: &Ruleset, sent: &[(bool, i64)]) -> Vec<(bool, i64)> {
    let engine = LinearEngine::new(rs, rs.select_chain(None).unwrap()).unwrap();
    sent.iter()
        .enumerate()
        .map(|(i, (_, at))| {
            let mut state = StatefulState::new(Clock { ns: 0, hz: 250 });
            state.wall_start_secs = *at;
            let mut pkt = Packet::v4(0x7f00_0001, 0x7f00_0001, 17, 40001, 9001 + i as u16);
            pkt.iif = IfName::new("lo").unwrap();
            let d = engine.classify_with(&pkt, &NoSets, &mut state).unwrap();
            (d.verdict == Verdict::Accept, *at)
        })
        .collect()
}

/// Waits (bounded) while now is within 5 s of midnight UTC, so the rules
/// built from now and the packets sent after see the same day.
fn away_from_midnight() {
    for _ in 0..20 {
        let tod = now_secs().rem_euclid(86_400);
        if (5..86_395).contains(&tod) {
            return;
        }
        std::thread::sleep(Duration::from_millis(500));
    }
}

fn load(ns: &Netns, argv: &[&str], ext: &str, text: &str) {
    let file = std::env::temp_dir().join(format!("parapet-time-{}.{ext}", std::process::id()));
    std::fs::write(&file, text).unwrap();
    let mut argv = argv.to_vec();
    argv.push(file.to_str().unwrap());
    let loaded = ns.exec(&argv);
    let _ = std::fs::remove_file(&file);
    loaded.unwrap_or_else(|e| panic!("{argv:?}: {e}\n{text}"));
}

fn compare(name: &str, text: &str, kernel: Vec<(bool, i64)>, parapet: Vec<(bool, i64)>) {
    // Both kinds of window occur: the test can tell a window from none.
    assert!(
        kernel.iter().any(|k| k.0) && kernel.iter().any(|k| !k.0),
        "{name}: {kernel:?}"
    );
    assert_eq!(
        parapet, kernel,
        "{name}: parapet vs the kernel (arrived, second sent), rule by rule\n{text}"
    );
}

#[test]
#[ignore = "needs root"]
fn iptables_time_agrees_with_iptables_legacy() {
    parapet_testbed::require_root();
    away_from_midnight();
    let (text, n) = iptables_rules(now_secs());
    let ns = Netns::create("time-ipt").unwrap();
    load(&ns, &["iptables-legacy-restore"], "v4", &text);
    let rs = parse(&text, "time.v4", Format::IptablesSave)
        .unwrap()
        .ruleset;
    let kernel = arrivals(&ns, n);
    let parapet = engine_fates(&rs, &kernel);
    compare("iptables", &text, kernel, parapet);
}

#[test]
#[ignore = "needs root"]
fn nft_time_agrees_with_nft() {
    parapet_testbed::require_root();
    away_from_midnight();
    let (text, n) = nft_rules(now_secs());
    let ns = Netns::create("time-nft").unwrap();
    load(&ns, &["env", "TZ=UTC", "nft", "-f"], "nft", &text);
    let rs = parse(&text, "time.nft", Format::Nft).unwrap().ruleset;
    let kernel = arrivals(&ns, n);
    let parapet = engine_fates(&rs, &kernel);
    compare("nft", &text, kernel, parapet);
}
