//! Metrics of the ban sources beside the control socket: fleet replication
//! (`--fleet`) and the CrowdSec Local API (`--crowdsec`). Both read the
//! sources' own atomics through their `stats` objects, never the state
//! lock, so they add nothing to what a scrape holds the lock for.

use crate::shared::Shared;
use serde_json::Value;

/// One unlabelled sample per row: (name, type, help, field of the stats
/// object, scale applied to the field).
type Row = (&'static str, &'static str, &'static str, &'static str, f64);

const FLEET: [Row; 10] = [
    (
        "parapet_fleet_connected",
        "gauge",
        "1 while connected to the NATS server.",
        "connected",
        1.0,
    ),
    (
        "parapet_fleet_published_total",
        "counter",
        "Local changes of shared sets the broker acknowledged.",
        "published",
        1.0,
    ),
    (
        "parapet_fleet_backlog_messages",
        "gauge",
        "Local changes waiting in the outbox to be published.",
        "backlog",
        1.0,
    ),
    (
        "parapet_fleet_outbox_bytes",
        "gauge",
        "Size of the outbox file.",
        "outbox_bytes",
        1.0,
    ),
    (
        "parapet_fleet_dropped_total",
        "counter",
        "Local changes not published because the outbox was full (kept locally).",
        "dropped",
        1.0,
    ),
    (
        "parapet_fleet_applied_total",
        "counter",
        "Other nodes' changes applied here.",
        "applied",
        1.0,
    ),
    (
        "parapet_fleet_skipped_total",
        "counter",
        "Other nodes' changes skipped (duplicates, own changes coming back).",
        "skipped",
        1.0,
    ),
    (
        "parapet_fleet_rejected_total",
        "counter",
        "Stream messages rejected as malformed or hostile.",
        "rejected",
        1.0,
    ),
    (
        "parapet_fleet_lag_messages",
        "gauge",
        "Stream messages still to consume behind the last delivered.",
        "lag",
        1.0,
    ),
    (
        "parapet_fleet_apply_delay_seconds",
        "gauge",
        "From the broker storing the last applied message to its application here.",
        "apply_delay_ms",
        0.001,
    ),
];

const CROWDSEC: [Row; 8] = [
    (
        "parapet_crowdsec_connected",
        "gauge",
        "1 while the last poll of the Local API succeeded.",
        "connected",
        1.0,
    ),
    (
        "parapet_crowdsec_polls_total",
        "counter",
        "Polls of the Local API's decision stream.",
        "polls",
        1.0,
    ),
    (
        "parapet_crowdsec_errors_total",
        "counter",
        "Failed polls.",
        "errors",
        1.0,
    ),
    (
        "parapet_crowdsec_decisions",
        "gauge",
        "CrowdSec decisions enforced now.",
        "decisions",
        1.0,
    ),
    (
        "parapet_crowdsec_added_total",
        "counter",
        "Set elements added from decisions.",
        "added",
        1.0,
    ),
    (
        "parapet_crowdsec_deleted_total",
        "counter",
        "Set elements removed for deleted decisions.",
        "deleted",
        1.0,
    ),
    (
        "parapet_crowdsec_ignored_total",
        "counter",
        "Decisions not enforced (not a ban, or an unknown scope).",
        "ignored",
        1.0,
    ),
    (
        "parapet_crowdsec_bad_decisions_total",
        "counter",
        "Decisions rejected as malformed.",
        "bad_decisions",
        1.0,
    ),
];

/// The rows of every source that is on, as (name, type, help, value).
pub(crate) fn source_rows(shared: &Shared) -> Vec<(&'static str, &'static str, &'static str, f64)> {
    let mut out = Vec::new();
    let sources = [
        (crate::fleet::stats(shared), &FLEET[..]),
        (crate::crowdsec::stats(shared), &CROWDSEC[..]),
    ];
    for (stats, rows) in sources {
        if stats.is_null() {
            continue;
        }
        for &(name, typ, help, field, scale) in rows {
            let v = match &stats[field] {
                Value::Bool(b) => f64::from(u8::from(*b)),
                v => v.as_f64().unwrap_or(0.0) * scale,
            };
            out.push((name, typ, help, v));
        }
    }
    out
}
