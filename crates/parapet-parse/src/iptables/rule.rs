//! One `-A CHAIN …` line: the option loop, negations, and the protocol
//! checks made once the rule is complete.

use crate::common::*;
use crate::error::Errors;
use parapet_model::string_match::StringAlgo;
use parapet_model::*;

/// Which protocol an option needs, checked when the rule is complete
/// (iptables wants `-p` before the match, but the error reads better
/// naming the option).
pub(super) struct Need {
    pub(super) col: u32,
    pub(super) what: String,
    pub(super) protos: &'static [u8],
}

/// `-m recent` as its options are read: the command may come last.
#[derive(Clone, Debug)]
pub(super) struct RecentDraft {
    pub(super) recent: Recent,
    /// The command and its column, once given.
    pub(super) command: Option<(RecentCommand, u32)>,
    /// Columns of `--seconds`, `--hitcount`, `--reap` when given.
    pub(super) modifiers: Vec<(&'static str, u32)>,
}

/// `-m statistic` as its options are read; checked when the rule is
/// complete (`check_statistic` in `iptables/statistic.rs`).
#[derive(Clone, Debug, Default)]
pub(super) struct StatisticDraft {
    /// Column of `-m statistic`.
    pub(super) col: u32,
    /// `--mode`: true for `nth`.
    pub(super) nth: Option<bool>,
    /// `--probability`, as the kernel stores it.
    pub(super) threshold: Option<u32>,
    /// `--every`, and its column.
    pub(super) every: Option<(u32, u32)>,
    /// `--packet`, and its column.
    pub(super) packet: Option<(u32, u32)>,
    /// `!` before `--every` or `--probability`.
    pub(super) invert: bool,
}

impl StatisticDraft {
    /// A draft for the `-m statistic` at column `col`.
    pub(super) fn new(col: u32) -> StatisticDraft {
        StatisticDraft {
            col,
            ..StatisticDraft::default()
        }
    }
}

/// `-m string` as its options are read; completed when the next `-m`
/// starts or the rule ends (`finish_string` in `iptables/string.rs`).
#[derive(Debug)]
pub(super) struct StringDraft {
    /// Column of `string` after its `-m`.
    pub(super) col: u32,
    /// The pattern, and whether `!` came before it.
    pub(super) pattern: Option<(Vec<u8>, bool)>,
    pub(super) algo: Option<StringAlgo>,
    pub(super) from: u16,
    pub(super) to: u16,
    pub(super) icase: bool,
}

/// `-m hashlimit` as its options are read.
#[derive(Clone, Debug)]
pub(super) struct HashlimitDraft {
    pub(super) h: Hashlimit,
    /// Column of `-m hashlimit`.
    pub(super) col: u32,
    /// `--hashlimit-upto`/`-above` given.
    pub(super) rate: bool,
    /// `--hashlimit-name` given.
    pub(super) name: bool,
    /// `--hashlimit-htable-expire` given (else the rate's unit, as
    /// iptables sets it once the rate is known).
    pub(super) expire: bool,
}

impl HashlimitDraft {
    pub(super) fn new(family: Family, col: u32) -> HashlimitDraft {
        HashlimitDraft {
            h: Hashlimit::new("", 1, TimeUnit::Second, family),
            col,
            rate: false,
            name: false,
            expire: false,
        }
    }
}

/// One rule as its options are read: the matches so far and what the
/// later options (`-j`, `--comment`, `--limit`) set.
pub(super) struct RuleParser<'a> {
    pub(super) family: Family,
    pub(super) line: u32,
    pub(super) errs: &'a mut Errors,
    pub(super) set_refs: &'a mut Vec<SetRef>,
    pub(super) matches: Matches,
    /// The `-p` value when positive.
    pub(super) proto: Option<u8>,
    pub(super) modules: Vec<String>,
    pub(super) needs: Vec<Need>,
    pub(super) comment: Option<String>,
    pub(super) limit: Option<Limit>,
    /// `-m recent`, and the column of its `-m recent`; the command is
    /// checked when the rule is complete.
    pub(super) recent: Option<(RecentDraft, u32)>,
    /// `-m hashlimit` as its options are read.
    pub(super) hashlimit: Option<HashlimitDraft>,
    /// `-m time` as its options are read.
    pub(super) time: Option<TimeWindow>,
    /// Column of the first `--ctproto`/`--ctorigdstport`, checked when the
    /// rule is complete (`iptables/ctorig.rs`).
    pub(super) ct_tuple: Option<u32>,
    /// `--ctstate` given: whether it admits a packet without a conntrack
    /// entry (INVALID, UNTRACKED).
    pub(super) ctstate_no_entry: Option<bool>,
    /// Column of a `-m owner` that has no option yet (`iptables/owner.rs`).
    pub(super) owner_pending: Option<u32>,
    /// `-m quota --quota N`, as nft's quota it equals (`quota_option`).
    pub(super) quota: Option<Quota>,
    /// `-m statistic` as its options are read (`iptables/statistic.rs`).
    pub(super) statistic: Option<StatisticDraft>,
    /// The checked `-m statistic`, once the rule is complete.
    pub(super) statistic_done: Option<Statistic>,
    /// The action, and for `-j/-g` to something that may be a chain, the
    /// name and column to resolve at COMMIT.
    pub(super) target: Option<(Action, Option<(String, u32)>)>,
    /// A target left to the kernel (`-j TCPMSS --clamp-mss-to-pmtu`), as
    /// written; the rule's action is then `Count`.
    pub(super) kernel_target: Option<String>,
    /// `-j MARK --set-xmark V/M` and its other forms (`targets.rs`); the
    /// rule's action is then `Count`.
    pub(super) set_mark: Option<MarkSet>,
    pub(super) end_col: u32,
    /// The chain the rule is appended to (`-i` has no meaning in OUTPUT,
    /// `-o` none in INPUT: iptables refuses them there).
    pub(super) chain: &'a str,
    /// Options since the last `-m` of a module that takes one option
    /// (`multiport`, `ttl`, `hl`, `length`, `dscp`).
    pub(super) module_options: u8,
    /// `-m multiport --ports P`: source OR destination port in P, which is
    /// two boxes; the rule becomes two model rules with its id (see
    /// `mod.rs`).
    pub(super) either_port: Option<(IntervalSet, u32)>,
    /// The rule's matches as they stood when a match came after its
    /// stateful one (`-m recent --set … -m udp --dport 123`): the kernel
    /// runs the stateful match on those packets, and `matches` goes on to
    /// the whole conjunction (`Rule::after_stateful`).
    pub(super) before_stateful: Option<Matches>,
    /// The stateful matches in their written order (`Rule::stateful_order`
    /// when more than one).
    pub(super) stateful_order: Vec<StatefulKind>,
    /// A protocol's match loaded implicitly (`-p tcp --dport 22` with no
    /// `-m tcp`) before any stateful match: its later options are its own.
    pub(super) implicit_l4: bool,
    /// The current `-m tcp` (or `-p tcp`'s implicit one) has its one
    /// `--tcp-option` (`tcp_option.rs`).
    pub(super) tcp_option_given: bool,
    /// `-m string` as its options are read (`iptables/string.rs`).
    pub(super) string: Option<StringDraft>,
}

impl RuleParser<'_> {
    pub(super) fn err(&mut self, col: u32, msg: impl Into<String>) {
        self.errs.push(self.line, col, msg);
    }

    /// Parses the words after `-A CHAIN`. False when an error was reported.
    pub(super) fn parse(&mut self, w: &[Word]) -> bool {
        let before = self.errs.list.len();
        let mut i = 0;
        let mut neg: Option<u32> = None;
        while i < w.len() {
            let word = &w[i];
            let opt = word.text.as_str();
            if opt == "!" && !word.quoted {
                if neg.is_some() {
                    self.err(word.col, "expected an option after '!', found another '!'");
                    return false;
                }
                neg = Some(word.col);
                i += 1;
                continue;
            }
            if !opt.starts_with('-') || word.quoted {
                self.err(
                    word.col,
                    format!("expected an option (like -s, -p, -m, -j), found '{opt}'"),
                );
                return false;
            }
            // Number of values the option takes.
            let arity = match opt {
                "-f" | "--fragment" | "--syn" => 0,
                "--set"
                | "--rcheck"
                | "--update"
                | "--remove"
                | "--rsource"
                | "--rdest"
                | "--reap"
                | "--rttl"
                | "--hashlimit-rate-match" => 0,
                "--socket-exists" | "--suppl-groups" => 0,
                "--rt-0-res" | "--rt-0-not-strict" => 0,
                // -m time's flags (iptables/time.rs).
                "--kerneltz" | "--localtz" | "--utc" | "--contiguous" => 0,
                "--icase" => 0,
                "--limit-iface-in" | "--limit-iface-out" => 0,
                "--tcp-flags" | "--match-set" => 2,
                _ => 1,
            };
            // The old `-s ! ADDR` form puts the negation after the option.
            let mut j = i + 1;
            if arity > 0 && w.get(j).is_some_and(|x| x.text == "!" && !x.quoted) {
                if neg.is_some() {
                    self.err(w[j].col, "'!' given twice");
                    return false;
                }
                neg = Some(w[j].col);
                j += 1;
            }
            let vals: Vec<&Word> = w[j.min(w.len())..].iter().take(arity).collect();
            if vals.len() < arity {
                let col = w
                    .last()
                    .map_or(self.end_col, |l| l.col + l.text.chars().count() as u32 + 1);
                self.err(
                    col,
                    format!(
                        "expected a value after {opt}{}",
                        if arity == 2 { " (two values)" } else { "" }
                    ),
                );
                return false;
            }
            let negated = neg.take();
            match opt {
                "-j" | "--jump" | "-g" | "--goto" => {
                    if let Some(c) = negated {
                        self.err(c, format!("'!' cannot negate {opt}"));
                    }
                    if self.target.is_some() {
                        self.err(word.col, format!("{opt}: the rule has a target already"));
                        return false;
                    }
                    // The target's options, then (usually) the rule's again.
                    match self.target_with_options(opt, vals[0], &w[j + 1..]) {
                        _ if self.errs.list.len() > before => return false,
                        Some(k) => i = j + 1 + k,
                        None => break,
                    }
                    continue;
                }
                "-m" | "--match" => {
                    if let Some(c) = negated {
                        self.err(c, "'!' cannot negate -m; put it before the match's option");
                    }
                    self.module(vals[0]);
                }
                _ => self.option(opt, word.col, negated, &vals),
            }
            // One error per rule: later options often fail only because of
            // the first problem.
            if self.errs.list.len() > before {
                return false;
            }
            i = j + arity;
        }
        if let Some(c) = neg {
            self.err(c, "expected an option after '!'");
        }
        if self.errs.list.len() == before {
            self.finish_string();
        }
        self.check_needs();
        if self.errs.list.len() == before {
            self.check_recent();
            self.check_hashlimit();
            self.check_time(1);
            self.check_ct_tuple();
            self.check_owner();
            self.statistic_done = self.check_statistic();
        }
        self.errs.list.len() == before
    }

    fn check_needs(&mut self) {
        let needs = std::mem::take(&mut self.needs);
        for n in needs {
            if !self.proto.is_some_and(|p| n.protos.contains(&p)) {
                let names: Vec<String> = n
                    .protos
                    .iter()
                    .map(|p| match p {
                        58 => "ipv6-icmp".to_string(),
                        136 => "udplite".to_string(),
                        p => protocol_name(*p).map_or(p.to_string(), str::to_string),
                    })
                    .collect();
                self.err(
                    n.col,
                    format!("{} needs -p {} before it", n.what, names.join("|")),
                );
            }
        }
    }
}
