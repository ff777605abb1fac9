//! Snapshots of the shared sets, so that a new node does not have to
//! replay the whole log (which keeps every change, churn included, and
//! loses its oldest ones at `--fleet-stream-mib`).
//!
//! Every `--fleet-snapshot-s` seconds a node writes what its shared sets
//! hold (live elements with their absolute expiries) as of log sequence
//! `at` — the last log message it had applied, read under the state lock
//! that applications hold, so the snapshot holds *at least* everything up
//! to `at` — to the stream `P_fleetsnap`, as batch messages (`batch.rs`)
//! on subject `P.fleetsnap.NODE.SLOT`, each with header
//! `Parapet-Snap: AT PART TOTAL`. The first part carries `Nats-Rollup:
//! sub`, so the broker drops the slot's previous snapshot; the slot
//! alternates 0/1, so the node's previous complete snapshot survives
//! while the next is written (or when its writer dies half-way).
//!
//! A node that has no durable consumer on the log yet (new, or its
//! consumer lost) reads the snapshot stream's headers only, picks the
//! complete snapshot (every part present) with the highest `at`, applies
//! its parts (fetched one at a time by stream sequence, committed about
//! 16k changes at a time: bounded memory),
//! then creates its consumer at log sequence `at + 1`. Replaying from
//! there converges: changes after `at` apply in log order on top, and a
//! change the snapshot already held is applied again in the same order.
//! Elements the snapshot holds from its writer's own changes not yet in
//! the log before `at` come later in the log anyway.

use crate::wire::FleetMsg;
use crate::{batch, Applier, Fleet};
use async_nats::jetstream::{self, consumer, stream};
use futures_util::StreamExt;
use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

/// Header of a snapshot part: `AT PART TOTAL`.
pub const HEADER: &str = "Parapet-Snap";
/// Most snapshot parts considered when choosing one (bounds memory
/// against a stream filled by a hostile publisher).
const MAX_PARTS: usize = 1 << 20;

fn stream_name(fleet: &Fleet) -> String {
    format!("{}_fleetsnap", fleet.config.prefix)
}

pub(crate) async fn get_stream(
    fleet: &Fleet,
    js: &jetstream::Context,
) -> Result<stream::Stream, String> {
    let c = &fleet.config;
    js.get_or_create_stream(stream::Config {
        name: stream_name(fleet),
        subjects: vec![format!("{}.fleetsnap.>", c.prefix)],
        allow_rollup: true,
        max_bytes: c.stream_bytes,
        max_message_size: batch::MAX_BYTES as i32,
        storage: stream::StorageType::File,
        discard: stream::DiscardPolicy::Old,
        ..Default::default()
    })
    .await
    .map_err(|e| format!("stream {}: {e}", stream_name(fleet)))
}

/// Writes one snapshot (`elems`: adds of this node with sequence numbers
/// 1, 2, ...) as of log sequence `at` into `slot`.
pub(crate) async fn write(
    fleet: &Fleet,
    js: &jetstream::Context,
    slot: u8,
    at: u64,
    elems: &[FleetMsg],
) -> Result<usize, String> {
    get_stream(fleet, js).await?;
    let c = &fleet.config;
    let subject = format!("{}.fleetsnap.{}.{slot}", c.prefix, c.node);
    let mut buf = Vec::new();
    // First pass counts the parts (every part names the total).
    let (mut total, mut i) = (0, 0);
    while i < elems.len() {
        i += batch::pack(&elems[i..], &mut buf);
        total += 1;
    }
    let total = total.max(1);
    let (mut part, mut i) = (0, 0);
    while part < total {
        let n = batch::pack(&elems[i..], &mut buf);
        let mut p = jetstream::message::PublishMessage::build()
            .payload(bytes::Bytes::copy_from_slice(&buf))
            .header(HEADER, format!("{at} {part} {total}").as_str());
        if part == 0 {
            p = p.header("Nats-Rollup", "sub");
        }
        js.send_publish(subject.clone(), p)
            .await
            .map_err(|e| e.to_string())?
            .await
            .map_err(|e| format!("snapshot: {e}"))?;
        i += n;
        part += 1;
    }
    Ok(total)
}

fn parse_header(m: &async_nats::HeaderMap) -> Option<(u64, usize, usize)> {
    let v = m.get(HEADER)?.as_str();
    let mut it = v.split(' ').map(|x| x.parse::<u64>().ok());
    let (at, part, total) = (it.next()??, it.next()??, it.next()??);
    (it.next().is_none() && part < total && total <= MAX_PARTS as u64).then_some((
        at,
        part as usize,
        total as usize,
    ))
}

/// The newest complete snapshot: its log position and the stream
/// sequences of its parts, in order.
pub(crate) async fn find(
    fleet: &Fleet,
    js: &jetstream::Context,
) -> Result<Option<(u64, Vec<u64>)>, String> {
    let mut s = get_stream(fleet, js).await?;
    let n = s.info().await.map_err(|e| e.to_string())?.state.messages;
    if n == 0 {
        return Ok(None);
    }
    let c: consumer::PullConsumer = s
        .create_consumer(consumer::pull::Config {
            deliver_policy: consumer::DeliverPolicy::All,
            ack_policy: consumer::AckPolicy::None,
            headers_only: true,
            inactive_threshold: Duration::from_secs(30),
            ..Default::default()
        })
        .await
        .map_err(|e| format!("snapshot consumer: {e}"))?;
    let mut msgs = c.messages().await.map_err(|e| e.to_string())?;
    // (subject, at, total) -> stream sequence of each part
    let mut found: HashMap<(String, u64, usize), Vec<Option<u64>>> = HashMap::new();
    let mut seen = 0usize;
    while (seen as u64) < n && seen < MAX_PARTS {
        let m = match tokio::time::timeout(Duration::from_secs(5), msgs.next()).await {
            Ok(Some(Ok(m))) => m,
            Ok(Some(Err(e))) => return Err(format!("snapshot: {e}")),
            Ok(None) | Err(_) => break,
        };
        seen += 1;
        let Ok(info) = m.info() else { continue };
        let (pending, seq) = (info.pending, info.stream_sequence);
        if let Some((at, part, total)) = m.headers.as_ref().and_then(parse_header) {
            let parts = found
                .entry((m.subject.to_string(), at, total))
                .or_insert_with(|| vec![None; total]);
            parts[part] = Some(seq);
        }
        if pending == 0 {
            break;
        }
    }
    let best = found
        .into_iter()
        .filter_map(|((_, at, _), parts)| {
            parts
                .into_iter()
                .collect::<Option<Vec<u64>>>()
                .map(|p| (at, p))
        })
        .max_by_key(|(at, _)| *at);
    Ok(best)
}

/// Changes applied per commit while loading a snapshot: parts are
/// fetched one at a time, and their changes committed (one journal sync)
/// per this many, not per part (a part holds at most 4096; one commit
/// each made a million-ban snapshot slower than replaying the log).
const LOAD_CHANGES: usize = 4 * batch::MAX_ENTRIES;

/// Applies the parts of a snapshot, a bounded run of changes at a time.
pub(crate) async fn load(
    fleet: &Arc<Fleet>,
    js: &jetstream::Context,
    applier: &Arc<dyn Applier>,
    parts: &[u64],
) -> Result<u64, String> {
    let s = get_stream(fleet, js).await?;
    let mut n = 0;
    let mut run: Vec<FleetMsg> = Vec::new();
    for (i, &seq) in parts.iter().enumerate() {
        let m = s
            .get_raw_message(seq)
            .await
            .map_err(|e| format!("snapshot part {seq}: {e}"))?;
        let msgs = batch::parse(&m.payload).map_err(|e| format!("snapshot part {seq}: {e}"))?;
        run.extend(msgs);
        if run.len() < LOAD_CHANGES && i + 1 < parts.len() {
            continue;
        }
        let (a, f) = (applier.clone(), fleet.clone());
        let todo = std::mem::take(&mut run);
        let r = tokio::task::spawn_blocking(move || a.apply_snapshot(&f, todo))
            .await
            .map_err(|e| e.to_string())??;
        n += r.applied;
        if let Some(e) = r.rejected.last() {
            fleet.stats.error(format!("snapshot: refused: {e}"));
        }
    }
    Ok(n)
}
