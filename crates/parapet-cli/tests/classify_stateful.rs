//! `parapet classify --stateful match|miss|replay`: offline, a ruleset
//! with stateful matches answers under a stated assumption, or replays the
//! trace's time column with the kernel's arithmetic (deterministic: the
//! same trace gives the same answers).

use std::process::Output;

mod common;
use common::offline::parapet;

fn files(tag: &str, rules: &str, trace: &str) -> (String, String) {
    let dir = std::env::temp_dir();
    let r = dir.join(format!("parapet-cs-{tag}-{}.v4", std::process::id()));
    let t = dir.join(format!("parapet-cs-{tag}-{}.trace", std::process::id()));
    std::fs::write(&r, rules).unwrap();
    std::fs::write(&t, trace).unwrap();
    (r.display().to_string(), t.display().to_string())
}

const RULES: &str = "*filter
:INPUT DROP [0:0]
-A INPUT -p udp -m udp --dport 53 -m hashlimit --hashlimit-upto 2/sec --hashlimit-burst 2 --hashlimit-mode srcip --hashlimit-name dns -j ACCEPT
-A INPUT -p udp -m udp --dport 123 -m limit --limit 1/sec --limit-burst 1 -j ACCEPT
-A INPUT -p tcp -m tcp --dport 22 -m recent --set --name ssh
-A INPUT -p tcp -m tcp --dport 22 -m recent --update --seconds 60 --hitcount 3 --name ssh -j DROP
-A INPUT -p tcp -m tcp --dport 22 -j ACCEPT
COMMIT
";

/// Source 10.0.0.1 (167772161) and 10.0.0.3, with times in column 6.
const TRACE: &str = "# src dst sport dport proto time
167772161 167772162 1000 53 17 0.0
167772161 167772162 1000 53 17 0.1
167772161 167772162 1000 53 17 0.2
167772163 167772162 1000 53 17 0.2
167772161 167772162 1000 53 17 0.8
167772161 167772162 1000 123 17 1.0
167772161 167772162 1000 123 17 1.5
167772161 167772162 1000 123 17 2.1
167772161 167772162 40000 22 6 3.0
167772161 167772162 40001 22 6 3.1
167772161 167772162 40002 22 6 3.2
167772161 167772162 40003 22 6 3.3
";

fn lines(out: &Output) -> Vec<String> {
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(str::to_string)
        .collect()
}

#[test]
fn match_miss_and_replay() {
    let (r, t) = files("mmr", RULES, TRACE);
    let matched = parapet(&["classify", &r, &t]);
    assert_eq!(
        lines(&matched),
        ["1", "1", "1", "1", "1", "2", "2", "2", "4", "4", "4", "4"]
    );
    assert!(String::from_utf8_lossy(&matched.stderr).contains("(1, 2, 3, 4), are assumed to match"));
    let missed = parapet(&["classify", &r, &t, "--stateful", "miss"]);
    assert_eq!(
        lines(&missed),
        ["0", "0", "0", "0", "0", "0", "0", "0", "5", "5", "5", "5"]
    );
    assert!(String::from_utf8_lossy(&missed.stderr).contains("are assumed not to match"));
    let replayed = parapet(&["classify", &r, &t, "--stateful", "replay", "--verdict"]);
    let want = [
        "1\tACCEPT", // burst
        "1\tACCEPT",
        "0\tDROP",   // empty
        "1\tACCEPT", // another source
        "1\tACCEPT", // refilled
        "2\tACCEPT", // limit: burst 1
        "0\tDROP",   // half a second: no token
        "2\tACCEPT", // 1.1 s since the last token
        "5\tACCEPT", // recent: first, second attempt
        "5\tACCEPT",
        "4\tDROP", // the third within a minute
        "4\tDROP",
    ];
    assert_eq!(lines(&replayed), want);
    // deterministic
    let again = parapet(&["classify", &r, &t, "--stateful", "replay", "--verdict"]);
    assert_eq!(lines(&again), want);
}

#[test]
fn replay_errors_name_the_place() {
    let (r, t) = files(
        "err",
        RULES,
        "167772161 167772162 1000 53 17 1.0\n167772161 167772162 1000 53 17 0.5\n",
    );
    let out = parapet(&["classify", &r, &t, "--stateful", "replay"]);
    assert!(!out.status.success());
    let e = String::from_utf8_lossy(&out.stderr);
    assert!(
        e.contains(":2:32: time 0.5 is before the previous packet's"),
        "{e}"
    );
    let out = parapet(&[
        "classify",
        &r,
        &t,
        "--stateful",
        "replay",
        "--time-column",
        "7",
    ]);
    let e = String::from_utf8_lossy(&out.stderr);
    assert!(
        e.contains(":1:35: expected a time in seconds in column 7"),
        "{e}"
    );
}

#[test]
fn time_windows_replay_at_the_trace_start_plus_the_packet_time() {
    // 2024-03-10 (a Sunday) 12:00:00 UTC = 1710072000.
    let rules = "*filter\n:INPUT ACCEPT [0:0]\n-A INPUT -p tcp -m time --weekdays Sun --timestart 11:00 --timestop 13:00 -j DROP\n-A INPUT -p tcp -j REJECT\nCOMMIT\n";
    let trace = "167772161 167772162 1000 22 6 0\n167772161 167772162 1000 22 6 3600.5\n167772161 167772162 1000 22 6 3601\n167772161 167772162 1000 22 6 86400\n";
    let (r, t) = files("time", rules, trace);
    let replayed = parapet(&[
        "classify",
        &r,
        &t,
        "--stateful",
        "replay",
        "--trace-start",
        "1710072000",
    ]);
    // 13:00:00.5 is still the second 13:00:00, inside (inclusive); 13:00:01 not.
    assert_eq!(lines(&replayed), ["1", "1", "2", "2"]);
    let missed = parapet(&["classify", &r, &t, "--stateful", "miss"]);
    assert_eq!(lines(&missed), ["2", "2", "2", "2"]);
    // The compiled engines hold a time window (a time row) and assume it
    // open, as the linear engine does.
    let matched = parapet(&["classify", &r, &t]);
    assert_eq!(lines(&matched), ["1", "1", "1", "1"]);
    let compiled = parapet(&["classify", &r, &t, "--engine", "tree"]);
    assert_eq!(lines(&compiled), ["1", "1", "1", "1"]);
    assert!(!String::from_utf8_lossy(&matched.stderr).contains("except rules"));
    // `trace` names the assumption on the rule that matched.
    let traced = parapet(&["trace", &r, "--packet", "tcp 10.0.0.1:1000 > 10.0.0.2:22"]);
    let traced = lines(&traced).join("\n");
    assert!(
        traced.contains("matched (assuming its time window is open)"),
        "{traced}"
    );
    // `check` accepts the file, and apply will take it: no note.
    let checked = parapet(&["check", &r]);
    assert!(
        lines(&checked)[0].ends_with(" 0 set references"),
        "{:?}",
        lines(&checked)
    );
    // A window and a limit in one rule: the compiler refuses it (one row
    // per entry), classify answers with the linear engine, saying so, and
    // check says what apply will refuse.
    let both = rules.replace("-j DROP", "-m limit --limit 1/s -j DROP");
    let (r, t) = files("time_limit", &both, trace);
    let matched = parapet(&["classify", &r, &t]);
    assert_eq!(lines(&matched), ["1", "1", "1", "1"]);
    assert!(String::from_utf8_lossy(&matched.stderr).contains("except rules 1, whose time window"));
    let checked = parapet(&["check", &r]);
    assert!(
        lines(&checked)[0].ends_with(
            "; time windows with another stateful condition (rule 1): evaluated offline only, apply refuses them"
        ),
        "{:?}",
        lines(&checked)
    );
}

/// A rule with two stateful matches (`-m recent --update … -m limit …`,
/// the corpus's rmsgw): `trace` names both, in the order the kernel runs
/// them; `classify --stateful replay` spends the limit's tokens only on
/// the packets the recent table admitted (the third and fourth attempts:
/// a burst of 2 allows both).
#[test]
fn trace_and_replay_two_stateful_matches_in_order() {
    let rules = "*filter
:INPUT ACCEPT [0:0]
-A INPUT -p tcp -m tcp --dport 22 -m recent --set --name ssh
-A INPUT -p tcp -m tcp --dport 22 -m recent --update --seconds 60 --hitcount 3 --name ssh -m limit --limit 1/hour --limit-burst 2 -j DROP
COMMIT
";
    let trace: String = (0..5)
        .map(|i| format!("167772161 167772162 1000 22 6 {i}.0\n"))
        .collect();
    let (r, t) = files("pair", rules, &trace);
    let traced = parapet(&["trace", &r, "--packet", "tcp 10.0.0.1:1000 > 10.0.0.2:22"]);
    let traced = lines(&traced).join("\n");
    assert!(
        traced.contains("(assuming its stateful matches `--update on recent table ssh --seconds 60 --hitcount 3` and `limit 1/hour` answer yes, in this order)"),
        "{traced}"
    );
    let replayed = parapet(&["classify", &r, &t, "--stateful", "replay"]);
    // hits 1, 2: the update does not match; 3, 4: a token each; 5: none left
    assert_eq!(lines(&replayed), ["0", "0", "2", "2", "0"]);
}
