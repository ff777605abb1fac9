//! The NATS glue: connect (retrying forever: a node must start and keep
//! enforcing while the broker is away), make sure the log stream and this
//! node's durable consumer exist, then run two loops on a current-thread
//! tokio runtime of the fleet's own thread:
//!
//! - publish: outbox records from the acknowledged position, packed into
//!   batch messages (`batch.rs`: up to 4096 changes each; woken while
//!   changes are flowing it lingers 1 ms so that a burst shares
//!   messages, after a quiet spell it publishes at once), a
//!   bounded window (a round) at a time, each with `Nats-Msg-Id` = its
//!   origin and sequence range; the position advances round by round as
//!   the broker acknowledges them. While a full round more is waiting (a
//!   backlog), up to four rounds are in flight (no round trip's pause
//!   between them); otherwise the next round waits for the one in
//!   flight, and what arrives meanwhile shares its messages;
//! - consume: the durable pull consumer, what is ready up to a bounded
//!   number of changes, each message decoded strictly and each change
//!   decided by the [`Replica`]; the changes are applied (journaled and
//!   synced by the daemon) and only then acknowledged (`AckPolicy::All`:
//!   one ack per round). A crash between the two makes the broker
//!   deliver again, which is idempotent.
//!
//! [`Replica`]: crate::replica::Replica

use crate::wire::FleetMsg;
use crate::{batch, snapshot, Applier, Fleet};
use async_nats::jetstream::context::ConsumerInfoErrorKind;
use async_nats::jetstream::{self, consumer, stream};
use futures_util::StreamExt;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, SystemTime};

/// Records published per round (at most four full batch messages).
const PUBLISH_WINDOW: usize = 4 * batch::MAX_ENTRIES;
/// Rounds sent and not yet acknowledged (bounds the acks in flight, and
/// what the broker may have to refuse after an error: 64k changes).
const ROUNDS_IN_FLIGHT: usize = 4;
/// How long the publisher, woken while changes are flowing, waits for
/// more before packing: a burst of single bans shares messages at the
/// cost of 1 ms.
const LINGER: Duration = Duration::from_millis(1);
/// Changes are "flowing" when the last publish is this recent; a ban
/// after a quiet spell goes out at once (no linger: nothing to share a
/// message with).
const BUSY: Duration = Duration::from_millis(20);
/// Changes applied per round (bounds memory and the state lock's hold).
const APPLY_CHANGES: usize = 4 * batch::MAX_ENTRIES;
/// Batch messages the consumer may hold unacknowledged (with
/// [`batch::MAX_BYTES`], bounds what the broker pushes at us).
const MAX_ACK_PENDING: usize = 64;
/// Longest pause between two reconnection attempts: a broker back after
/// an outage is found within this (the bench's reconnection phase).
const RECONNECT_MAX_MS: u64 = 200;
/// Delay between retries after an error.
const RETRY: Duration = Duration::from_millis(250);

/// The fleet thread's body.
pub(crate) fn run(fleet: Arc<Fleet>, applier: Box<dyn Applier>) {
    let rt = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            fleet.stats.error(format!("runtime: {e}"));
            return;
        }
    };
    let applier: Arc<dyn Applier> = Arc::from(applier);
    rt.block_on(async move {
        let client = loop {
            match connect(&fleet).await {
                Ok(c) => break c,
                Err(e) => {
                    fleet.stats.error(format!("connect: {e}"));
                    if fleet.stopping() {
                        return;
                    }
                    tokio::time::sleep(RETRY * 4).await;
                }
            }
        };
        let js = jetstream::new(client.clone());
        let _ = fleet.client.set(client);
        let publish = publish_loop(fleet.clone(), js.clone());
        let snap = snapshot_loop(fleet.clone(), js.clone(), applier.clone());
        let consume = consume_loop(fleet.clone(), js, applier);
        // Stop at once when asked, even in the middle of a broker request
        // that would wait out its timeout (the broker may be gone): what
        // was not acknowledged goes again after the restart.
        let stop = async {
            while !fleet.stopping() {
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
        };
        tokio::select! {
            _ = async { tokio::join!(publish, consume, snap) } => {}
            _ = stop => {}
        }
    });
}

async fn connect(fleet: &Arc<Fleet>) -> Result<async_nats::Client, String> {
    let c = &fleet.config;
    let f = fleet.clone();
    let mut o = async_nats::ConnectOptions::new()
        .name(format!("parapetd {}", c.node))
        .retry_on_initial_connect()
        .max_reconnects(None)
        // Short and capped: an outage ends with the broker's return, not
        // with an exponential back-off of ours.
        .reconnect_delay_callback(|n| Duration::from_millis((n as u64 * 50).min(RECONNECT_MAX_MS)))
        .connection_timeout(Duration::from_secs(2))
        // Connection failures (a refused TLS handshake, bad credentials)
        // happen inside the client's retries: surface them in `stats`.
        .event_callback(move |ev| {
            let f = f.clone();
            async move {
                use async_nats::Event;
                if matches!(
                    ev,
                    Event::ClientError(_) | Event::ServerError(_) | Event::Disconnected
                ) {
                    f.stats.error(format!("connection: {ev}"));
                }
            }
        });
    if let Some(p) = &c.creds {
        o = o
            .credentials_file(p)
            .await
            .map_err(|e| format!("{}: {e}", p.display()))?;
    }
    if let Some((u, p)) = &c.user_password {
        o = o.user_and_password(u.clone(), p.clone());
    }
    if c.tls {
        o = o.require_tls(true);
    }
    if let Some(ca) = &c.tls_ca {
        o = o.add_root_certificates(ca.clone());
    }
    if let Some((cert, key)) = &c.tls_cert {
        o = o.add_client_certificate(cert.clone(), key.clone());
    }
    o.connect(c.url.as_str()).await.map_err(|e| e.to_string())
}

fn stream_name(fleet: &Fleet) -> String {
    format!("{}_fleetlog", fleet.config.prefix)
}

async fn get_stream(fleet: &Fleet, js: &jetstream::Context) -> Result<stream::Stream, String> {
    let c = &fleet.config;
    js.get_or_create_stream(stream::Config {
        name: stream_name(fleet),
        subjects: vec![format!("{}.fleetlog.*", c.prefix)],
        // The log: every batch of every node, in the fleet's order; a new
        // node replays it from the start. Bounded by bytes, oldest
        // dropped first (docs/fleet.md, "stream limit reached").
        max_bytes: c.stream_bytes,
        max_message_size: batch::MAX_BYTES as i32,
        storage: stream::StorageType::File,
        discard: stream::DiscardPolicy::Old,
        duplicate_window: Duration::from_secs(120),
        ..Default::default()
    })
    .await
    .map_err(|e| format!("stream {}: {e}", stream_name(fleet)))
}

/// A round sent to the broker and not yet acknowledged: its acks, the
/// outbox offset just past its last record, and its record count.
struct Round {
    acks: Vec<jetstream::context::PublishAckFuture>,
    end: u64,
    records: u64,
}

async fn publish_loop(fleet: Arc<Fleet>, js: jetstream::Context) {
    let mut have_stream = false;
    let now = tokio::time::Instant::now();
    let mut last_publish = now.checked_sub(BUSY).unwrap_or(now);
    // Rounds in flight, oldest first, and the outbox offset the next one
    // is read from. The position advances round by round, in order, as
    // the broker acknowledges them; a backlog (after an outage) goes out
    // without a round trip's pause between rounds.
    let mut rounds: std::collections::VecDeque<Round> = std::collections::VecDeque::new();
    let mut next = 0;
    while !fleet.stopping() {
        // Publishing before the stream exists would fail (no responders)
        // and wait out a retry.
        if !have_stream {
            if let Err(e) = get_stream(&fleet, &js).await {
                fleet.stats.error(format!("publish: {e}"));
                tokio::time::sleep(RETRY).await;
                continue;
            }
            have_stream = true;
        }
        if rounds.len() < ROUNDS_IN_FLIGHT {
            let batch = {
                let ob = fleet.outbox.lock().unwrap();
                let sent: u64 = rounds.iter().map(|r| r.records).sum();
                if rounds.is_empty() {
                    next = ob.acked();
                    ob.read(next, PUBLISH_WINDOW)
                } else if ob.backlog().saturating_sub(sent) >= PUBLISH_WINDOW as u64 {
                    ob.read(next, PUBLISH_WINDOW)
                } else {
                    // Less than a full round waiting: it waits for the
                    // round in flight, and shares messages with what
                    // comes meanwhile (as few messages as possible
                    // under a steady load).
                    Vec::new()
                }
            };
            if !batch.is_empty() {
                last_publish = tokio::time::Instant::now();
                let end = batch.last().expect("non-empty").0;
                match send_round(&fleet, &js, &batch).await {
                    Ok(acks) => {
                        rounds.push_back(Round {
                            acks,
                            end,
                            records: batch.len() as u64,
                        });
                        next = end;
                        continue;
                    }
                    Err(e) => {
                        failed(&fleet, &mut rounds, &mut have_stream, e).await;
                        continue;
                    }
                }
            }
        }
        let Some(round) = rounds.pop_front() else {
            let _ = tokio::time::timeout(Duration::from_millis(200), fleet.wake.notified()).await;
            if last_publish.elapsed() < BUSY {
                tokio::time::sleep(LINGER).await;
            }
            continue;
        };
        let mut result = Ok(());
        for a in round.acks {
            if let Err(e) = a.await {
                result = Err(e.to_string());
                break;
            }
        }
        match result {
            Ok(()) => {
                let mut ob = fleet.outbox.lock().unwrap();
                if let Err(e) = ob.ack(round.end, round.records) {
                    fleet.stats.error(format!("outbox: {e}"));
                }
                fleet
                    .stats
                    .published
                    .fetch_add(round.records, Ordering::Relaxed);
            }
            Err(e) => failed(&fleet, &mut rounds, &mut have_stream, e).await,
        }
    }
}

/// A send or an acknowledgement failed: every round still in flight is
/// dropped and everything from the acknowledged position goes again (the
/// broker drops what it already has: same message ids).
async fn failed(
    fleet: &Fleet,
    rounds: &mut std::collections::VecDeque<Round>,
    have_stream: &mut bool,
    e: String,
) {
    fleet.stats.error(format!("publish: {e}"));
    rounds.clear();
    *have_stream = false;
    tokio::time::sleep(RETRY).await;
}

/// Sends one round's records as batch messages; returns their
/// acknowledgements (awaited by the caller, in order).
async fn send_round(
    fleet: &Fleet,
    js: &jetstream::Context,
    records: &[(u64, FleetMsg)],
) -> Result<Vec<jetstream::context::PublishAckFuture>, String> {
    let msgs: Vec<FleetMsg> = records.iter().map(|(_, m)| m.clone()).collect();
    let subject = batch::subject(&fleet.config.prefix, &fleet.config.node);
    let mut acks = Vec::new();
    let mut at = 0;
    let mut buf = Vec::new();
    while at < msgs.len() {
        let n = batch::pack(&msgs[at..], &mut buf);
        let p = jetstream::message::PublishMessage::build()
            .payload(bytes::Bytes::copy_from_slice(&buf))
            .message_id(batch::msg_id(&msgs[at..at + n]));
        let ack = js
            .send_publish(subject.clone(), p)
            .await
            .map_err(|e| e.to_string())?;
        acks.push(ack);
        at += n;
    }
    Ok(acks)
}

async fn snapshot_loop(fleet: Arc<Fleet>, js: jetstream::Context, applier: Arc<dyn Applier>) {
    let Some(every) = fleet.config.snapshot_every else {
        return;
    };
    let (mut slot, mut last) = (0u8, None);
    while !fleet.stopping() {
        tokio::time::sleep(every).await;
        let published = fleet.stats.published.load(Ordering::Relaxed);
        let applied = fleet.stats.applied_seq.load(Ordering::Relaxed);
        // Nothing new since the last one (or nothing consumed yet: the
        // position would not be known).
        if applied == 0 || last == Some((applied, published)) {
            continue;
        }
        let (a, f) = (applier.clone(), fleet.clone());
        let Ok((at, elems)) = tokio::task::spawn_blocking(move || a.snapshot(&f)).await else {
            continue;
        };
        match snapshot::write(&fleet, &js, slot, at, &elems).await {
            Ok(_) => {
                fleet.stats.snapshots.fetch_add(1, Ordering::Relaxed);
                slot ^= 1;
                last = Some((applied, published));
            }
            Err(e) => fleet.stats.error(format!("snapshot: {e}")),
        }
    }
}

async fn consume_loop(fleet: Arc<Fleet>, js: jetstream::Context, applier: Arc<dyn Applier>) {
    // Set when a delivered message skipped past a gone one: the next
    // round re-bootstraps.
    let mut gap = false;
    while !fleet.stopping() {
        if let Err(e) = consume(&fleet, &js, &applier, &mut gap).await {
            fleet.stats.error(format!("consume: {e}"));
            tokio::time::sleep(RETRY).await;
        }
    }
}

/// Whether the log no longer holds the message after `acked`, the last
/// one this node's consumer acknowledged: the log's oldest is `first`.
fn horizon_passed(acked: u64, first: u64) -> bool {
    acked.saturating_add(1) < first
}

async fn consume(
    fleet: &Arc<Fleet>,
    js: &jetstream::Context,
    applier: &Arc<dyn Applier>,
    gap: &mut bool,
) -> Result<(), String> {
    let s = get_stream(fleet, js).await?;
    let node = fleet.config.node.clone();
    // No consumer of ours yet: a new node (or one whose consumer the
    // broker lost). Start from the newest snapshot when there is one,
    // then the log after it; otherwise the log from its beginning.
    let mut deliver = consumer::DeliverPolicy::All;
    // Only a consumer the broker says does not exist: after any other
    // error (a timeout) loading a snapshot onto a running node would
    // bring back what it has since consumed the removal of.
    let info = match s.consumer_info(&node).await {
        Ok(i) => Some(i),
        Err(e) if e.kind() == ConsumerInfoErrorKind::NotFound => None,
        Err(e) => return Err(format!("consumer {node}: {e}")),
    };
    let first = s.cached_info().state.first_sequence;
    // A node away longer than the log's horizon (or one that fell that
    // far behind): the next message it needs is gone. Re-bootstrap from
    // a snapshot while running (replica.rs: what it holds is stale until
    // the snapshot or the tail says otherwise).
    let resync = match &info {
        Some(i) if *gap || horizon_passed(i.ack_floor.stream_sequence, first) => {
            fleet.stats.error(format!(
                "log horizon passed: the last message acknowledged here is {}, the log's oldest {first}; re-bootstrapping from a snapshot",
                i.ack_floor.stream_sequence
            ));
            s.delete_consumer(&node)
                .await
                .map_err(|e| format!("deleting consumer {node}: {e}"))?;
            let (a, f) = (applier.clone(), fleet.clone());
            tokio::task::spawn_blocking(move || a.begin_resync(&f))
                .await
                .map_err(|e| e.to_string())?;
            fleet.stats.resyncs.fetch_add(1, Ordering::Relaxed);
            *gap = false;
            true
        }
        _ => false,
    };
    if info.is_none() || resync {
        if let Some((at, parts)) = snapshot::find(fleet, js).await? {
            if resync && at.saturating_add(1) < first {
                fleet.stats.error(format!(
                    "the newest snapshot (log position {at}) is older than the log's oldest message {first}: changes in between are lost"
                ));
            }
            // Before its elements show (a reader of `stats` that sees
            // them sees where they came from).
            fleet.stats.boot_snapshot_at.store(at, Ordering::Relaxed);
            snapshot::load(fleet, js, applier, &parts).await?;
            deliver = consumer::DeliverPolicy::ByStartSequence {
                start_sequence: at + 1,
            };
        }
    }
    let mut c: consumer::PullConsumer = s
        .get_or_create_consumer(
            &node,
            consumer::pull::Config {
                durable_name: Some(node.clone()),
                // Used only when the consumer is created (above).
                deliver_policy: deliver,
                ack_policy: consumer::AckPolicy::All,
                ack_wait: Duration::from_secs(30),
                max_ack_pending: MAX_ACK_PENDING as i64,
                ..Default::default()
            },
        )
        .await
        .map_err(|e| format!("consumer {node}: {e}"))?;
    // The highest stream sequence delivered to this consumer: the next
    // message must follow it (messages after it are never filtered out,
    // only dropped at the log's horizon). Unknown for a new consumer.
    let mut delivered = match &info {
        Some(i) if !resync => Some(i.delivered.stream_sequence),
        _ => None,
    };
    let caught_up = c
        .info()
        .await
        .is_ok_and(|i| i.num_pending == 0 && i.num_ack_pending == 0);
    if caught_up && fleet.resyncing() {
        end_resync(fleet, applier).await?;
    }
    let mut msgs = c
        .stream()
        .max_messages_per_batch(MAX_ACK_PENDING / 2)
        .heartbeat(Duration::from_secs(2))
        .messages()
        .await
        .map_err(|e| e.to_string())?;
    while !fleet.stopping() {
        // Wait for one message, then take whatever else is ready.
        let first = match tokio::time::timeout(Duration::from_millis(300), msgs.next()).await {
            Err(_) => continue,
            Ok(None) => return Err("consumer stream ended".into()),
            Ok(Some(m)) => m.map_err(|e| e.to_string())?,
        };
        // Changes counted from the batch headers (each message holds at
        // most MAX_ENTRIES, and at most MAX_BYTES): bounds a round
        // before anything is decoded.
        let mut changes = batch::claimed_count(&first.payload);
        let mut batch = vec![first];
        while changes < APPLY_CHANGES && batch.len() < MAX_ACK_PENDING / 2 {
            match futures_util::FutureExt::now_or_never(msgs.next()) {
                Some(Some(Ok(m))) => {
                    changes += batch::claimed_count(&m.payload);
                    batch.push(m)
                }
                Some(Some(Err(e))) => {
                    fleet.stats.error(format!("consume: {e}"));
                    break;
                }
                _ => break,
            }
        }
        for m in &batch {
            let Ok(i) = m.info() else { continue };
            if delivered.is_some_and(|d| i.stream_sequence > d + 1) {
                // Skipped past a message the log dropped: nothing of this
                // round is applied or acknowledged.
                *gap = true;
                return Err(format!(
                    "log horizon passed: message {} follows {} here",
                    i.stream_sequence,
                    delivered.unwrap_or(0)
                ));
            }
            delivered = Some(delivered.unwrap_or(0).max(i.stream_sequence));
        }
        apply_batch(fleet, applier, &batch).await?;
        let last = batch.last().expect("non-empty");
        last.ack().await.map_err(|e| format!("ack: {e}"))?;
        if fleet.resyncing() && last.info().is_ok_and(|i| i.pending == 0) {
            end_resync(fleet, applier).await?;
        }
    }
    Ok(())
}

/// The tail after the snapshot is read: removes what stayed stale.
async fn end_resync(fleet: &Arc<Fleet>, applier: &Arc<dyn Applier>) -> Result<(), String> {
    let (a, f) = (applier.clone(), fleet.clone());
    let n = tokio::task::spawn_blocking(move || a.end_resync(&f))
        .await
        .map_err(|e| e.to_string())??;
    fleet.stats.resync_removed.fetch_add(n, Ordering::Relaxed);
    Ok(())
}

async fn apply_batch(
    fleet: &Arc<Fleet>,
    applier: &Arc<dyn Applier>,
    batch: &[jetstream::Message],
) -> Result<(), String> {
    let st = &fleet.stats;
    let mut todo = Vec::with_capacity(batch.len());
    let mut published_ms = 0;
    {
        for m in batch {
            if let Ok(info) = m.info() {
                st.lag.store(info.pending, Ordering::Relaxed);
                st.stream_seq.store(info.stream_sequence, Ordering::Relaxed);
                published_ms = (info.published.unix_timestamp_nanos() / 1_000_000) as u64;
            }
            match batch::parse(&m.payload) {
                Err(e) => {
                    st.rejected.fetch_add(1, Ordering::Relaxed);
                    st.error(format!("rejected message on {}: {e}", m.subject));
                }
                Ok(f)
                    if batch::subject(&fleet.config.prefix, &f[0].origin) != m.subject.as_str() =>
                {
                    st.rejected.fetch_add(1, Ordering::Relaxed);
                    st.error(format!(
                        "rejected message on {}: subject does not name its origin",
                        m.subject
                    ));
                }
                Ok(f) => todo.extend(f),
            }
        }
    }
    if !todo.is_empty() {
        let (a, f) = (applier.clone(), fleet.clone());
        let r = tokio::task::spawn_blocking(move || a.apply(&f, todo))
            .await
            .map_err(|e| e.to_string())
            .and_then(|r| r);
        let r = match r {
            Ok(r) => r,
            Err(e) => {
                // Not acknowledged: the broker delivers the batch again,
                // and the high-water marks must let it through then.
                fleet.replica.lock().unwrap().forget_origins();
                return Err(e);
            }
        };
        st.applied.fetch_add(r.applied, Ordering::Relaxed);
        if let Some(e) = r.rejected.last() {
            st.rejected
                .fetch_add(r.rejected.len() as u64, Ordering::Relaxed);
            st.error(format!("refused: {e}"));
        }
    }
    if let Some(info) = batch.last().and_then(|m| m.info().ok()) {
        st.applied_seq
            .store(info.stream_sequence, Ordering::Relaxed);
    }
    let now = SystemTime::now()
        .duration_since(SystemTime::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64);
    st.apply_delay_ms
        .store(now.saturating_sub(published_ms), Ordering::Relaxed);
    Ok(())
}
