//! Report output: JSON, Markdown and SVG plots.

use crate::bench::{Config, Record, Results};
use crate::stats::si;
use crate::{Error, Result};
use plotters::prelude::*;
use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write as _;
use std::path::Path;

/// Writes `{"machine":…, "command":…, "records":[…], "skipped":[…]}`.
pub fn write_json(path: &Path, res: &Results, machine: &Machine, command: &str) -> Result<()> {
    let v = serde_json::json!({
        "command": command,
        "machine": machine,
        "records": res.records,
        "skipped": res.skipped,
    });
    std::fs::write(path, serde_json::to_string_pretty(&v)?)?;
    Ok(())
}

/// Description of the machine a run happened on.
#[derive(Debug, Clone, serde::Serialize)]
pub struct Machine {
    /// `uname -srm`.
    pub kernel: String,
    /// CPU model name.
    pub cpu: String,
    /// Online CPUs.
    pub cpus: usize,
    /// Total memory in MiB.
    pub mem_mib: u64,
    /// Tool versions.
    pub tools: Vec<(String, String)>,
    /// `/proc/loadavg` when the run started: other work on the machine
    /// competes with the bench for the same cores.
    pub loadavg: String,
}

impl Machine {
    /// Probes the current machine.
    pub fn probe() -> Machine {
        let cpuinfo = std::fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
        let cpu = cpuinfo
            .lines()
            .find(|l| l.starts_with("model name"))
            .and_then(|l| l.split_once(':'))
            .map(|(_, v)| v.trim().to_string())
            .unwrap_or_else(|| "unknown".into());
        let mem_mib = std::fs::read_to_string("/proc/meminfo")
            .unwrap_or_default()
            .lines()
            .find(|l| l.starts_with("MemTotal:"))
            .and_then(|l| l.split_whitespace().nth(1))
            .and_then(|v| v.parse::<u64>().ok())
            .map_or(0, |kb| kb / 1024);
        let tools = [
            ("iptables-legacy", "-V"),
            ("iptables-nft", "-V"),
            ("nft", "-v"),
            ("ipset", "-v"),
            ("trafgen", "-v"),
        ]
        .iter()
        .map(|(t, a)| (t.to_string(), crate::cmd::version(t, a)))
        .collect();
        Machine {
            kernel: crate::cmd::version("uname", "-srm"),
            cpu,
            cpus: crate::testbed::online_cpus(),
            mem_mib,
            tools,
            loadavg: std::fs::read_to_string("/proc/loadavg")
                .unwrap_or_default()
                .trim()
                .to_string(),
        }
    }
}

/// A Markdown table with a row per rule count and a column per filter;
/// `cell(filter, rules)` gives each cell's text.
fn rules_table(
    w: &mut String,
    filters: &[String],
    sizes: &std::collections::BTreeSet<usize>,
    cell: impl Fn(&str, usize) -> String,
) -> Result<()> {
    let mut head = String::from("| rules |");
    let mut rule = String::from("|---:|");
    for f in filters {
        head.push_str(&format!(" {f} |"));
        rule.push_str("---:|");
    }
    writeln!(w, "{head}\n{rule}").map_err(md_err)?;
    for &n in sizes {
        let cells: String = filters
            .iter()
            .map(|f| format!(" {} |", cell(f, n)))
            .collect();
        writeln!(w, "| {n} |{cells}").map_err(md_err)?;
    }
    Ok(())
}

fn md_err(e: std::fmt::Error) -> Error {
    Error(format!("formatting report: {e}"))
}

fn plot_err(e: impl std::fmt::Display) -> Error {
    Error(format!("drawing plot: {e}"))
}

/// Records of one experiment.
fn of<'a>(res: &'a Results, exp: &'a str) -> impl Iterator<Item = &'a Record> + 'a {
    res.records.iter().filter(move |r| r.experiment == exp)
}

/// Filters in first-seen order.
fn filter_order<'a>(recs: impl Iterator<Item = &'a Record>) -> Vec<String> {
    let mut v: Vec<String> = Vec::new();
    for r in recs {
        if !v.contains(&r.filter) {
            v.push(r.filter.clone());
        }
    }
    v
}

fn extra_f(r: &Record, k: &str) -> f64 {
    r.extra.get(k).and_then(|v| v.as_f64()).unwrap_or(f64::NAN)
}

fn kpps(x: f64) -> String {
    format!("{:.1}", x / 1e3)
}

/// Writes `report.md` and the SVG plots into `dir`.
pub fn write_markdown(
    dir: &Path,
    res: &Results,
    machine: &Machine,
    command: &str,
    cfg: &Config,
) -> Result<()> {
    let mut m = String::new();
    let w = &mut m;
    writeln!(w, "# parapet-peers report\n").map_err(md_err)?;
    writeln!(w, "Command:\n\n```\n{command}\n```\n").map_err(md_err)?;
    writeln!(w, "## Machine\n").map_err(md_err)?;
    writeln!(w, "- kernel: {}", machine.kernel).map_err(md_err)?;
    writeln!(
        w,
        "- CPU: {} × {}; memory {} MiB",
        machine.cpus, machine.cpu, machine.mem_mib
    )
    .map_err(md_err)?;
    writeln!(w, "- load average at start: {}", machine.loadavg).map_err(md_err)?;
    for (t, v) in &machine.tools {
        writeln!(w, "- {t}: {v}").map_err(md_err)?;
    }
    writeln!(
        w,
        "\nGenerator: `{}` pinned to CPU {}; receive processing steered to CPU {} (RPS). \
         {} run(s) of {} ms per point after {} ms warm-up; tables show the median and \
         (min–max). Throughput counts datagrams that passed INPUT and reached the UDP \
         layer of the filter namespace. Frame sizes are nominal Ethernet sizes with FCS; \
         Mbit/s = pps × frame size × 8.\n",
        res.generator.unwrap_or(cfg.generator).name(),
        cfg.bed.gen_cpu,
        cfg.bed
            .filter_cpu
            .map_or("— (off)".to_string(), |c| c.to_string()),
        cfg.runs,
        cfg.window.as_millis(),
        cfg.warmup.as_millis()
    )
    .map_err(md_err)?;

    // Generators.
    let gens: Vec<&Record> = of(res, "generator").collect();
    if !gens.is_empty() {
        writeln!(w, "## Generators (no filter)\n").map_err(md_err)?;
        writeln!(
            w,
            "| generator | frame | offered kpps | delivered kpps (min–max) | Mbit/s |\n|---|---:|---:|---:|---:|"
        )
        .map_err(md_err)?;
        for r in gens {
            writeln!(
                w,
                "| {} | {} | {} | {} ({}–{}) | {:.0} |",
                r.filter,
                r.frame.unwrap_or(0),
                kpps(extra_f(r, "offered_pps_median")),
                kpps(r.median),
                kpps(r.min),
                kpps(r.max),
                extra_f(r, "mbps_median")
            )
            .map_err(md_err)?;
        }
        writeln!(w).map_err(md_err)?;
    }

    // Throughput.
    let tp: Vec<&Record> = of(res, "throughput").collect();
    if !tp.is_empty() {
        writeln!(w, "## Throughput vs rules (worst case)\n").map_err(md_err)?;
        let filters = filter_order(tp.iter().copied());
        let frames: BTreeSet<usize> = tp.iter().filter_map(|r| r.frame).collect();
        let sizes: BTreeSet<usize> = tp.iter().filter_map(|r| r.rules).collect();
        for &frame in &frames {
            writeln!(w, "### {frame}-byte frames, kpps\n").map_err(md_err)?;
            let name = format!("throughput-{frame}.svg");
            match plot_throughput(&dir.join(&name), &tp, &filters, frame) {
                Ok(()) => writeln!(w, "![throughput {frame} B]({name})\n").map_err(md_err)?,
                Err(e) => writeln!(w, "(plot failed: {e})\n").map_err(md_err)?,
            }
            let cell = |f: &str, n: usize| {
                tp.iter().copied().find(|r| {
                    r.filter == f
                        && r.frame == Some(frame)
                        && (r.rules == Some(n) || r.rules.is_none())
                })
            };
            rules_table(w, &filters, &sizes, |f, n| match cell(f, n) {
                Some(r) => format!("{} ({}–{})", kpps(r.median), kpps(r.min), kpps(r.max)),
                None => "–".into(),
            })?;
            writeln!(w, "\nMbit/s (median):\n").map_err(md_err)?;
            rules_table(w, &filters, &sizes, |f, n| match cell(f, n) {
                Some(r) => format!("{:.1}", extra_f(r, "mbps_median")),
                None => "–".into(),
            })?;
            writeln!(w).map_err(md_err)?;
        }
        writeln!(
            w,
            "`none` has no rules; its single measurement is repeated in every row.\n"
        )
        .map_err(md_err)?;
    }

    // Load times.
    let loads: Vec<&Record> = of(res, "load").collect();
    if !loads.is_empty() {
        writeln!(w, "## Ruleset load time (ms, process start-up included)\n").map_err(md_err)?;
        let filters = filter_order(loads.iter().copied());
        let sizes: BTreeSet<usize> = loads.iter().filter_map(|r| r.rules).collect();
        rules_table(w, &filters, &sizes, |f, n| {
            match loads.iter().find(|r| r.filter == f && r.rules == Some(n)) {
                Some(r) => format!("{:.1}", r.median),
                None => "–".into(),
            }
        })?;
        writeln!(w).map_err(md_err)?;
    }

    // ipfw.
    let base: Vec<&Record> = of(res, "ipfw-base").collect();
    if !base.is_empty() {
        writeln!(
            w,
            "## ipfw experiment: 1,000 rules failing late vs early (64 B)\n"
        )
        .map_err(md_err)?;
        writeln!(
            w,
            "Late: 999 × `-p udp --dport 55555 -j DROP`; early: 999 × `-s 1.2.3.4 -d 1.2.3.4 -j DROP`; \
             then the accept. Per-rule cost = (1/pps₁₀₀₀ − 1/pps₁) / 999, min–max from the extreme runs.\n"
        )
        .map_err(md_err)?;
        writeln!(
            w,
            "| filter | 1 rule kpps | late kpps | early kpps | late ns/rule | early ns/rule |\n|---|---:|---:|---:|---:|---:|"
        )
        .map_err(md_err)?;
        for b in base {
            let late = of(res, "ipfw-late").find(|r| r.filter == b.filter);
            let early = of(res, "ipfw-early").find(|r| r.filter == b.filter);
            let cell = |r: Option<&Record>| r.map_or("–".to_string(), |r| kpps(r.median));
            let per = |r: Option<&Record>| {
                r.map_or("–".to_string(), |r| {
                    format!(
                        "{:.1} ({:.1}–{:.1})",
                        extra_f(r, "ns_per_rule_median"),
                        extra_f(r, "ns_per_rule_min"),
                        extra_f(r, "ns_per_rule_max")
                    )
                })
            };
            writeln!(
                w,
                "| {} | {} | {} | {} | {} | {} |",
                b.filter,
                kpps(b.median),
                cell(late),
                cell(early),
                per(late),
                per(early)
            )
            .map_err(md_err)?;
        }
        writeln!(w).map_err(md_err)?;
    }

    // Bans.
    let bans: Vec<&Record> = of(res, "ban-insert").collect();
    if !bans.is_empty() {
        writeln!(w, "## Ban insertion\n").map_err(md_err)?;
        writeln!(
            w,
            "Each method inserts distinct addresses (10.0.0.1, 10.0.0.3, …) into a fresh \
             namespace, capped at {} s per method and size; *projected* rows did not finish \
             and are extrapolated linearly from the entries inserted within the cap (for \
             iptables rules this is optimistic: each insertion gets slower as the chain \
             grows).\n",
            cfg.ban_cap.as_secs()
        )
        .map_err(md_err)?;
        let counts: BTreeSet<usize> = bans.iter().filter_map(|r| r.rules).collect();
        for &c in &counts {
            let name = format!("bans-{c}.svg");
            let rows: Vec<&Record> = bans
                .iter()
                .copied()
                .filter(|r| r.rules == Some(c))
                .collect();
            match plot_bans(&dir.join(&name), &rows, c) {
                Ok(()) => writeln!(w, "![ban insertion {c}]({name})\n").map_err(md_err)?,
                Err(e) => writeln!(w, "(plot failed: {e})\n").map_err(md_err)?,
            }
        }
        writeln!(
            w,
            "| method | addresses | entries/s | inserted | seconds | total s |\n|---|---:|---:|---:|---:|---:|"
        )
        .map_err(md_err)?;
        for r in &bans {
            let projected = r.extra.get("extrapolated").and_then(|v| v.as_bool()) == Some(true);
            writeln!(
                w,
                "| {} | {} | {}| {} | {:.2} | {:.2}{} |",
                r.filter,
                r.rules.unwrap_or(0),
                si(r.median),
                r.extra
                    .get("inserted")
                    .and_then(|v| v.as_u64())
                    .unwrap_or(0),
                extra_f(r, "seconds"),
                extra_f(r, "total_seconds"),
                if projected { " (projected)" } else { "" }
            )
            .map_err(md_err)?;
        }
        writeln!(w).map_err(md_err)?;
    }

    // Latency.
    let idle: Vec<&Record> = of(res, "latency-idle").collect();
    if !idle.is_empty() {
        writeln!(w, "## Latency: TCP handshake RTT through the filter (µs)\n").map_err(md_err)?;
        writeln!(
            w,
            "Idle, and while the generator floods 64-byte frames. A SYN waits behind the \
             flood in the receive backlog, so under load the RTT grows with the per-packet \
             filter cost.\n"
        )
        .map_err(md_err)?;
        writeln!(
            w,
            "| filter | rules | idle median | idle p99 | load median | load p99 | lost under load |\n|---|---:|---:|---:|---:|---:|---:|"
        )
        .map_err(md_err)?;
        for r in idle {
            let l = of(res, "latency-load").find(|x| x.filter == r.filter && x.rules == r.rules);
            writeln!(
                w,
                "| {} | {} | {:.0} | {:.0} | {} | {} | {} |",
                r.filter,
                r.rules.map_or("–".into(), |n| n.to_string()),
                r.median,
                extra_f(r, "p99"),
                l.map_or("–".into(), |l| format!("{:.0}", l.median)),
                l.map_or("–".into(), |l| format!("{:.0}", extra_f(l, "p99"))),
                l.and_then(|l| l.extra.get("lost").and_then(|v| v.as_u64()))
                    .map_or("–".into(), |n| n.to_string()),
            )
            .map_err(md_err)?;
        }
        writeln!(w).map_err(md_err)?;
    }

    if !res.skipped.is_empty() {
        writeln!(w, "## Skipped\n").map_err(md_err)?;
        for s in &res.skipped {
            writeln!(w, "- {}: {}", s.what, s.reason.replace('\n', " ")).map_err(md_err)?;
        }
        writeln!(w).map_err(md_err)?;
    }
    std::fs::write(dir.join("report.md"), m)?;
    Ok(())
}

const PALETTE: [RGBColor; 8] = [
    RGBColor(0, 0, 0),
    RGBColor(31, 119, 180),
    RGBColor(255, 127, 14),
    RGBColor(44, 160, 44),
    RGBColor(214, 39, 40),
    RGBColor(148, 103, 189),
    RGBColor(140, 86, 75),
    RGBColor(227, 119, 194),
];

/// Throughput (pps, log) vs rules (log), one line per filter; `none` is a
/// horizontal line.
fn plot_throughput(path: &Path, tp: &[&Record], filters: &[String], frame: usize) -> Result<()> {
    let pts: Vec<&&Record> = tp.iter().filter(|r| r.frame == Some(frame)).collect();
    let sizes: Vec<usize> = pts.iter().filter_map(|r| r.rules).collect();
    let (xmin, xmax) = match (sizes.iter().min(), sizes.iter().max()) {
        (Some(&a), Some(&b)) => (a as f64, b as f64),
        _ => (25.0, 25600.0),
    };
    let (xmin, xmax) = (xmin / 1.2, xmax * 1.2);
    let ymax = pts.iter().map(|r| r.max).fold(1.0, f64::max) * 2.0;
    let ymin = pts
        .iter()
        .map(|r| r.min)
        .filter(|&v| v > 0.0)
        .fold(f64::INFINITY, f64::min)
        .min(ymax / 10.0)
        / 2.0;
    let root = SVGBackend::new(path, (900, 560)).into_drawing_area();
    root.fill(&WHITE).map_err(plot_err)?;
    let mut chart = ChartBuilder::on(&root)
        .caption(
            format!("Throughput vs rules, {frame}-byte frames (worst case)"),
            ("sans-serif", 22),
        )
        .margin(12)
        .x_label_area_size(45)
        .y_label_area_size(80)
        .build_cartesian_2d((xmin..xmax).log_scale(), (ymin..ymax).log_scale())
        .map_err(plot_err)?;
    chart
        .configure_mesh()
        .x_desc("rules in INPUT")
        .y_desc("packets/s delivered")
        .x_label_formatter(&|x| format!("{x:.0}"))
        .y_label_formatter(&|y| si(*y))
        .draw()
        .map_err(plot_err)?;
    for (i, f) in filters.iter().enumerate() {
        let color = PALETTE[i % PALETTE.len()];
        let mut line: Vec<(f64, f64)> = pts
            .iter()
            .filter(|r| &r.filter == f)
            .map(|r| (r.rules.map_or(f64::NAN, |n| n as f64), r.median))
            .collect();
        if line.len() == 1 && line[0].0.is_nan() {
            let y = line[0].1;
            line = vec![(xmin, y), (xmax, y)];
        }
        line.retain(|p| p.0.is_finite() && p.1 > 0.0);
        line.sort_by(|a, b| a.0.total_cmp(&b.0));
        if line.is_empty() {
            continue;
        }
        chart
            .draw_series(LineSeries::new(line.clone(), color.stroke_width(2)))
            .map_err(plot_err)?
            .label(f.clone())
            .legend(move |(x, y)| {
                PathElement::new(vec![(x, y), (x + 18, y)], color.stroke_width(2))
            });
        chart
            .draw_series(line.iter().map(|&p| Circle::new(p, 3, color.filled())))
            .map_err(plot_err)?;
    }
    chart
        .configure_series_labels()
        .background_style(WHITE.mix(0.85))
        .border_style(BLACK)
        .position(SeriesLabelPosition::LowerLeft)
        .draw()
        .map_err(plot_err)?;
    root.present().map_err(plot_err)?;
    Ok(())
}

/// Horizontal bars of entries/s (log) per method for one list size.
fn plot_bans(path: &Path, rows: &[&Record], count: usize) -> Result<()> {
    let n = rows.len().max(1);
    let xmax = rows.iter().map(|r| r.median).fold(10.0, f64::max) * 3.0;
    let xmin = rows
        .iter()
        .map(|r| r.median)
        .filter(|&v| v > 0.0)
        .fold(f64::INFINITY, f64::min)
        .min(xmax / 100.0)
        / 3.0;
    let names: Vec<String> = rows
        .iter()
        .map(|r| {
            let projected = r.extra.get("extrapolated").and_then(|v| v.as_bool()) == Some(true);
            format!("{}{}", r.filter, if projected { " *" } else { "" })
        })
        .collect();
    let root = SVGBackend::new(path, (900, (90 + 34 * n as u32).max(300))).into_drawing_area();
    root.fill(&WHITE).map_err(plot_err)?;
    let mut chart = ChartBuilder::on(&root)
        .caption(
            format!("Ban insertion rate, {count} addresses (* = projected)"),
            ("sans-serif", 20),
        )
        .margin(12)
        .x_label_area_size(40)
        .y_label_area_size(280)
        // A segmented 0..k range has k + 1 segments (but 0..0 has none).
        .build_cartesian_2d(
            (xmin..xmax).log_scale(),
            (if n > 1 { 0..n - 1 } else { 0..1 }).into_segmented(),
        )
        .map_err(plot_err)?;
    let by_idx: BTreeMap<usize, String> = names.iter().cloned().enumerate().collect();
    chart
        .configure_mesh()
        .disable_y_mesh()
        .x_desc("entries/s")
        .x_label_formatter(&|x| si(*x))
        .y_labels(n)
        .y_label_formatter(&|v| match v {
            SegmentValue::CenterOf(i) => by_idx.get(i).cloned().unwrap_or_default(),
            _ => String::new(),
        })
        .draw()
        .map_err(plot_err)?;
    chart
        .draw_series(rows.iter().enumerate().map(|(i, r)| {
            let color = PALETTE[1 + i % (PALETTE.len() - 1)];
            Rectangle::new(
                [
                    (xmin, SegmentValue::Exact(i)),
                    (r.median.max(xmin), SegmentValue::Exact(i + 1)),
                ],
                color.mix(0.8).filled(),
            )
        }))
        .map_err(plot_err)?;
    root.present().map_err(plot_err)?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bench::Skipped;
    use crate::stats::Summary;

    fn rec(exp: &str, f: &str, rules: Option<usize>, frame: Option<usize>, v: f64) -> Record {
        Record::new(exp, f, rules, frame, "pps", Summary::one(v))
            .with("mbps_median", v * 64.0 * 8.0 / 1e6)
            .with("offered_pps_median", v)
    }

    #[test]
    fn writes_markdown_and_svgs() {
        let mut res = Results::default();
        res.records
            .push(rec("throughput", "none", None, Some(64), 600e3));
        for (n, v) in [(25, 300e3), (400, 60e3), (6400, 5e3)] {
            res.records
                .push(rec("throughput", "nft", Some(n), Some(64), v));
            res.records.push(Record::new(
                "load",
                "nft",
                Some(n),
                None,
                "ms",
                Summary::one(n as f64 / 10.0),
            ));
        }
        res.records.push(
            Record::new(
                "ban-insert",
                "ipset-restore",
                Some(7990),
                None,
                "entries/s",
                Summary::one(5e5),
            )
            .with("extrapolated", false)
            .with("inserted", 7990)
            .with("seconds", 0.016)
            .with("total_seconds", 0.016),
        );
        res.skipped.push(Skipped {
            what: "filter parapet-xdp".into(),
            reason: "not built".into(),
        });
        let dir = std::env::temp_dir().join(format!("pp-report-test-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let m = Machine::probe();
        write_markdown(&dir, &res, &m, "parapet-peers --quick", &Config::quick()).unwrap();
        let md = std::fs::read_to_string(dir.join("report.md")).unwrap();
        assert!(
            md.contains("| 400 | 600.0 (600.0–600.0) | 60.0 (60.0–60.0) |"),
            "{md}"
        );
        assert!(md.contains("parapet-xdp: not built"));
        let svg = std::fs::read_to_string(dir.join("throughput-64.svg")).unwrap();
        assert!(svg.starts_with("<svg") && svg.contains("nft"));
        assert!(dir.join("bans-7990.svg").exists());
        let j = dir.join("p.json");
        write_json(&j, &res, &m, "x").unwrap();
        let v: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(&j).unwrap()).unwrap();
        assert_eq!(v["records"].as_array().unwrap().len(), res.records.len());
        if std::env::var_os("KEEP_REPORT").is_none() {
            let _ = std::fs::remove_dir_all(&dir);
        }
    }
}
