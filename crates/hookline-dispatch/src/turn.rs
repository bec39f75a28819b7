//! One dispatcher turn: record what finished, claim what is due — one transaction.
//!
//! The dispatcher owns the turn. It begins the transaction through the store
//! (`Events::begin_turn`), has it write the finished attempts and read their
//! endpoints, asks `hookline_core::completion::plan` what the attempts do to
//! those and has the store execute it ([`record`]), reads its room, gives
//! back the leases that ended since its last turn (`Turn::recover_expired`),
//! leases due rows lane by lane as `hookline_core::claim::Lanes` says (then the
//! fair pass over endpoints the lanes' heads hid), asks
//! `hookline_core::claim::plan` what becomes of each leased row against the
//! room as it is then and counts what the plan sends (`Room::admit`, one lock),
//! has the store execute that plan and commits (a turn that fails gives the
//! count back). The store calls nothing back: every step is the dispatcher's.
//!
//! The claim's statements are sized by the room as it was when they began
//! (`Room::view`); publishes may hand deliveries off meanwhile, and the plan,
//! which sees those, sends the rows beyond the room back, due now.

use std::collections::{BTreeSet, HashMap};
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use hookline_core::breaker::BreakerPolicy;
use hookline_core::claim::{
    self, ClaimRules, Lanes, RoomView, Rooms, APP_PASS_APPS, FAIR_PASS_ENDPOINTS,
    NEWEST_SHARE_DIVISOR,
};
use hookline_core::completion::{self, BreakerChanges};
use hookline_core::ids::{AppId, EndpointId};
use hookline_core::retry::RetryPolicy;
use hookline_core::time::Timestamp;
use hookline_store::{AttemptRecord, Claim, Leased, Next, Result, Store, Turn, Written};

use crate::room::Room;

/// What a claim needs besides time and size, and the claiming dispatcher's state.
#[derive(Debug, Clone)]
pub struct ClaimPolicy {
    /// The deployment's retry policy: a delivery deferred past its max age is dead-lettered.
    pub retry: RetryPolicy,
    /// The claiming dispatcher's room per endpoint (`None`: no cap, a claim outside
    /// any dispatcher): an endpoint without room is skipped, and a claim sends no
    /// more than the room (leased rows beyond it go back, due now). What a claim
    /// sends is counted there before its commit.
    pub room: Option<Arc<Room>>,
    /// How long a half-open probe holds the right to be its endpoint's only request.
    pub probe_hold: Duration,
    /// How far ahead a rate-limited send slot may be handed out with its delivery.
    pub rate_lookahead: Duration,
    /// Claims under a backlog so far: one in [`NEWEST_SHARE_DIVISOR`] reads the
    /// newest first (`hookline_core::claim::Lanes`; shared by clones).
    pub backlog_claims: Arc<AtomicU32>,
    /// Where the fair pass over endpoints continues (shared by clones).
    pub fair_cursor: Arc<Mutex<Option<EndpointId>>>,
    /// Where the app pass continues (shared by clones; `claim::app_share`).
    pub app_cursor: Arc<Mutex<Option<AppId>>>,
    /// Where the next turn's look for expired leases begins.
    pub recovery: RecoveryMark,
}

impl Default for ClaimPolicy {
    fn default() -> Self {
        let rules = ClaimRules::default();
        Self {
            retry: RetryPolicy::default(),
            room: None,
            probe_hold: rules.probe_hold,
            rate_lookahead: rules.rate_lookahead,
            backlog_claims: Arc::default(),
            fair_cursor: Arc::default(),
            app_cursor: Arc::default(),
            recovery: RecoveryMark::default(),
        }
    }
}

impl ClaimPolicy {
    fn rules(&self) -> ClaimRules {
        ClaimRules {
            retry: self.retry,
            probe_hold: self.probe_hold,
            rate_lookahead: self.rate_lookahead,
        }
    }
}

/// Claims up to `limit` due deliveries — pending ones whose time has come and
/// in-flight ones whose lease expired — leasing them until `now + lease`, and
/// returns those admitted to be sent now.
pub async fn claim_due_deliveries(
    store: &Store,
    now: Timestamp,
    lease: Duration,
    limit: u32,
    policy: &ClaimPolicy,
) -> Result<Claim> {
    complete_and_claim(
        store,
        &[],
        &BreakerPolicy::default(),
        now,
        lease,
        limit,
        policy,
    )
    .await
}

/// One turn: records `records` (attempt rows, next states, breakers, released
/// partitions), then claims; the claim sees the breakers and partitions the
/// records just moved on, and the turn costs one commit.
pub async fn complete_and_claim(
    store: &Store,
    records: &[AttemptRecord],
    breaker_policy: &BreakerPolicy,
    now: Timestamp,
    lease: Duration,
    limit: u32,
    policy: &ClaimPolicy,
) -> Result<Claim> {
    prepare(store, records, breaker_policy, now, lease, limit, policy)
        .await?
        .commit()
        .await
}

/// Records finished attempts in `turn`: the store writes the attempt rows and
/// moves each delivery on (those whose lease the record still held), reads
/// their endpoints, and `hookline_core::completion::plan` says what the
/// attempts do to them — breakers, last errors, queue moves, disables, dead
/// counts, released partitions — which the store then executes.
///
/// On PostgreSQL the endpoints the plan changes are then locked (in id order),
/// read again and planned again: a batch of healthy answers locks no endpoint
/// row, so turns (of two dispatchers, or a dispatcher's next turn beside the
/// one that commits) do not queue on the same rows, and an endpoint the plan
/// leaves alone commutes with whatever another turn does to it meanwhile.
pub async fn record(
    turn: &mut Turn,
    records: &[AttemptRecord],
    breaker_policy: &BreakerPolicy,
    now: Timestamp,
) -> Result<BreakerChanges> {
    if records.is_empty() {
        return Ok(BreakerChanges::default());
    }
    let written = turn.write_attempts(records, now).await?;
    let finished = finished(records, &written, now);
    let ids: BTreeSet<&EndpointId> = records.iter().map(|r| &r.endpoint_id).collect();
    let ids: Vec<&EndpointId> = ids.into_iter().collect();
    let mut rows = turn.completion_endpoints(&ids).await?;
    let mut plan = completion::plan(&finished, &rows, breaker_policy, now);
    if !plan.endpoints.is_empty() {
        let changed: Vec<&EndpointId> = plan.endpoints.keys().collect();
        if let Some(locked) = turn.lock_completion_endpoints(&changed).await? {
            // An endpoint deleted since the first read is absent from the
            // second: nothing is left of it to plan for.
            for id in &changed {
                rows.remove(*id);
            }
            rows.extend(locked);
            plan = completion::plan(&finished, &rows, breaker_policy, now);
        }
    }
    turn.apply_completion(&plan, now).await?;
    Ok(plan.changes)
}

/// What the completion plan reads of each finished attempt: a partition's end
/// and a death count only for a delivery whose lease the record still held.
fn finished<'a>(
    records: &'a [AttemptRecord],
    written: &'a Written,
    now: Timestamp,
) -> Vec<completion::Finished<'a>> {
    records
        .iter()
        .map(|r| completion::Finished {
            app: &r.app_id,
            endpoint: &r.endpoint_id,
            signal: r.signal,
            gone: r.disable_endpoint,
            status_code: r.status_code,
            error: r
                .error
                .as_ref()
                .map(|(kind, message)| (*kind, message.as_str())),
            partition_end: match written.keyed.get(&r.delivery_id) {
                Some(key) if !matches!(r.next, Next::RetryAt(_)) => {
                    Some(completion::PartitionEnd {
                        app: &r.app_id,
                        key,
                        state: r.next.state(),
                        reason: r.next.dead_reason(),
                    })
                }
                _ => None,
            },
            dead: match r.next.dead_reason() {
                Some(reason) if written.moved.contains(&r.delivery_id) => Some(completion::Death {
                    reason,
                    delivery: r.delivery_id.as_str(),
                    event: r.event_id.as_str(),
                    at: now,
                }),
                _ => None,
            },
        })
        .collect()
}

/// Records finished attempts in a transaction of their own (the drain's last
/// writes, after the loop's turns have stopped): a turn that claims nothing.
pub async fn complete_attempts(
    store: &Store,
    records: &[AttemptRecord],
    breaker_policy: &BreakerPolicy,
    now: Timestamp,
) -> Result<BreakerChanges> {
    let claim = complete_and_claim(
        store,
        records,
        breaker_policy,
        now,
        Duration::ZERO,
        0,
        &ClaimPolicy::default(),
    )
    .await?;
    Ok(claim.breaker_changes)
}

/// A turn whose statements have run — its records written, its claim leased,
/// planned and counted in the room — waiting only for its commit.
///
/// A dispatcher may begin its next turn while this one commits (on PostgreSQL,
/// the wait for the flush): a turn that commits holds its locks but waits for
/// none, so the next, which may wait for them, never closes a cycle with it,
/// and the next turn's claim reads a room that already counts this one's.
pub struct Prepared {
    turn: Turn,
    claim: Claim,
    room: Option<Arc<Room>>,
    recovery: Recovery,
    /// Where this turn's look for expired leases ended, if it looked.
    recovered_until: Option<Timestamp>,
}

/// Runs a turn's statements: records `records`, then claims up to `limit`.
pub async fn prepare(
    store: &Store,
    records: &[AttemptRecord],
    breaker_policy: &BreakerPolicy,
    now: Timestamp,
    lease: Duration,
    limit: u32,
    policy: &ClaimPolicy,
) -> Result<Prepared> {
    let recovery = policy.recovery.begin();
    let recorded = async {
        let mut turn = store.events().begin_turn(!records.is_empty()).await?;
        let breaker_changes = record(&mut turn, records, breaker_policy, now).await?;
        Ok::<_, hookline_store::StoreError>((turn, breaker_changes))
    }
    .await;
    let (mut turn, breaker_changes) = match recorded {
        Ok(recorded) => recorded,
        Err(error) => {
            recovery.failed();
            return Err(error);
        }
    };
    if limit == 0 {
        return Ok(Prepared {
            turn,
            claim: Claim {
                breaker_changes,
                ..Claim::default()
            },
            room: None,
            recovery,
            recovered_until: None,
        });
    }
    let terms = Terms {
        now,
        lease,
        limit,
        policy,
        since: recovery.since,
    };
    let claimed = claim_in(&mut turn, records, breaker_changes, &terms).await;
    let (claim, recovered_until) = match claimed {
        Ok(claimed) => claimed,
        Err(error) => {
            recovery.failed();
            return Err(error);
        }
    };
    Ok(Prepared {
        turn,
        claim,
        room: policy.room.clone(),
        recovery,
        recovered_until,
    })
}

impl Prepared {
    /// Whether the next turn may run its statements while this one commits:
    /// not if this turn's records opened a breaker or disabled an endpoint.
    /// The next turn reads endpoints without a lock where their state lets
    /// anything through (a closed breaker), so it would not see that change
    /// before this commit and could send to an endpoint that must rest. (Where
    /// the state does hold work back — a probe, a send slot — it locks the
    /// endpoint and waits for this commit.)
    pub fn lets_next_overlap(&self) -> bool {
        let changes = &self.claim.breaker_changes;
        changes.opened == 0 && changes.disabled == 0
    }

    /// Commits the turn; a commit that fails gives back the room its claim counted.
    pub async fn commit(self) -> Result<Claim> {
        let Prepared {
            turn,
            claim,
            room,
            recovery,
            recovered_until,
        } = self;
        if let Err(error) = turn.commit().await {
            if let Some(room) = room {
                room.give_back(claim.deliveries.iter().map(|d| &d.endpoint_id));
            }
            recovery.failed();
            return Err(error);
        }
        if let Some(until) = recovered_until {
            recovery.committed(until);
        }
        Ok(claim)
    }
}

/// Where a dispatcher's next turn looks for expired leases: it gives back those
/// that ended after the mark (`None`: ever), and a turn that commits moves the
/// mark on to where its look ended (shared by clones of a [`ClaimPolicy`]).
///
/// Two turns of one dispatcher may be under way (the next begins while the last
/// commits), so the mark only moves forward; and a turn that fails sets it back
/// to where that turn began, and the mark of a turn begun before that failure
/// no longer counts: it may have skipped leases the failed turn held locked
/// and then gave back unrecovered.
#[derive(Debug, Clone, Default)]
pub struct RecoveryMark(Arc<Mutex<Mark>>);

#[derive(Debug, Default)]
struct Mark {
    until: Option<Timestamp>,
    /// Turns that failed so far.
    failures: u64,
}

/// One turn's view of the mark.
struct Recovery {
    mark: RecoveryMark,
    since: Option<Timestamp>,
    failures: u64,
}

impl RecoveryMark {
    fn begin(&self) -> Recovery {
        let mark = self.0.lock().expect("recovery mark poisoned");
        Recovery {
            mark: self.clone(),
            since: mark.until,
            failures: mark.failures,
        }
    }
}

impl Recovery {
    fn committed(self, until: Timestamp) {
        let mut mark = self.mark.0.lock().expect("recovery mark poisoned");
        if mark.failures == self.failures {
            mark.until = mark.until.max(Some(until));
        }
    }

    fn failed(self) {
        let mut mark = self.mark.0.lock().expect("recovery mark poisoned");
        mark.until = mark.until.min(self.since);
        mark.failures += 1;
    }
}

/// What a turn's claim is asked: up to `limit` rows, leased until `now +
/// lease`, by `policy` (its room, rules and shared state); the leases that
/// ended after `since` are given back first.
#[derive(Clone, Copy)]
struct Terms<'a> {
    now: Timestamp,
    lease: Duration,
    limit: u32,
    policy: &'a ClaimPolicy,
    since: Option<Timestamp>,
}

/// A turn's claim, after its records (`recorded`): gives back the leases that
/// ended since the last turn, leases due rows by lane (then the fair pass),
/// plans the claim and counts it in the room, and applies it. Returns the claim
/// and where its look for expired leases ended.
async fn claim_in(
    turn: &mut Turn,
    recorded: &[AttemptRecord],
    breaker_changes: BreakerChanges,
    terms: &Terms<'_>,
) -> Result<(Claim, Option<Timestamp>)> {
    let Terms {
        now,
        lease,
        limit,
        policy,
        since,
    } = *terms;
    // The room is read once the records are written (a turn's first statement
    // may wait for the previous turn's commit, which frees room meanwhile).
    let room = policy.room.as_deref();
    // Leases that ended since the last turn go back to their lane first, to be
    // claimed like any pending delivery (rooms, breakers and all).
    let ended = turn.recover_expired(since, now, limit).await?;
    // All of them, or the next turn goes on after the last given back (less a
    // millisecond: others may have ended at the same time).
    let recovered_until = match ended.iter().max() {
        Some(last) if ended.len() == limit as usize => *last - Duration::from_millis(1),
        _ => now,
    };

    let lease_until = now + lease;
    let view = match room {
        Some(room) => room.view(recorded),
        None => RoomView::unlimited(),
    };
    let mut rooms = Rooms::new(&view);
    let mut leased: Vec<Leased> = Vec::new();
    // Under a backlog, one claim in eight serves the tenants behind the lane's
    // head first (the app pass), then reads the lanes with the rest.
    let backlog = claim::backlog(turn.fresh_head().await?, now)
        && policy
            .backlog_claims
            .fetch_add(1, Ordering::Relaxed)
            .is_multiple_of(NEWEST_SHARE_DIVISOR);
    if backlog {
        let pass = app_pass(turn, policy, limit, &mut rooms, now, lease_until).await?;
        leased.extend(pass);
    }
    // When the app pass leased nothing, that claim reads the newest first.
    let newest_first = backlog && leased.is_empty();
    let mut lanes = Lanes::new(limit - leased.len() as u32, newest_first);
    let mut last = 0;
    while let Some((read, ask)) = lanes.next(last) {
        let rows = turn
            .lease_lane(
                read,
                ask,
                limit - leased.len() as u32,
                &mut rooms,
                now,
                lease_until,
            )
            .await?;
        last = rows.len() as u32;
        leased.extend(rows);
    }
    // The lanes' heads may all belong to endpoints at their cap: visit other
    // endpoints round-robin through their own index, so none starves.
    let saturated = rooms.saturated();
    if leased.len() < limit as usize && !saturated.is_empty() {
        for endpoint in fair_pass_endpoints(turn, &saturated, &policy.fair_cursor).await? {
            let ask = rooms.of(&endpoint).min(limit as usize - leased.len()) as u32;
            if ask == 0 {
                continue;
            }
            let rows = turn
                .lease_endpoint(&endpoint, ask, &mut rooms, now, lease_until)
                .await?;
            leased.extend(rows);
            if leased.len() >= limit as usize {
                break;
            }
        }
    }

    let mut endpoints = turn.endpoints(&leased).await?;
    let mut lock: Vec<EndpointId> = endpoints
        .iter()
        .filter(|(_, e)| e.gate.needs_lock(now))
        .map(|(id, _)| id.clone())
        .collect();
    lock.sort();
    turn.lock_endpoints(&mut endpoints, &lock).await?;
    let gates: HashMap<EndpointId, claim::EndpointGate> = endpoints
        .iter()
        .map(|(id, e)| (id.clone(), e.gate))
        .collect();
    let plan = {
        let candidates: Vec<claim::Candidate<'_>> = leased.iter().map(Leased::candidate).collect();
        let plan = |view: &RoomView| claim::plan(&candidates, &gates, view, &policy.rules(), now);
        match room {
            Some(room) => room.admit(
                recorded,
                leased.len() >= limit as usize,
                leased.iter().map(|row| {
                    let ceiling = gates.get(&row.endpoint_id).and_then(|g| g.max_in_flight);
                    (&row.endpoint_id, ceiling)
                }),
                plan,
                |plan| {
                    plan.send
                        .iter()
                        .map(|send| &leased[send.index].endpoint_id)
                        .collect()
                },
            ),
            None => plan(&view),
        }
    };
    if let Err(error) = turn.apply_claim(&plan, &leased, now).await {
        if let Some(room) = room {
            room.give_back(plan.send.iter().map(|send| &leased[send.index].endpoint_id));
        }
        return Err(error);
    }

    let rows = leased.len();
    let mut leased: Vec<Option<Leased>> = leased.into_iter().map(Some).collect();
    let deliveries = plan
        .send
        .iter()
        .map(|send| {
            let row = leased[send.index]
                .take()
                .expect("each row is sent at most once");
            let endpoint = &endpoints[&row.endpoint_id];
            row.into_claimed(endpoint, send)
        })
        .collect();
    let claim = Claim {
        deliveries,
        rows,
        breaker_changes,
    };
    Ok((claim, Some(recovered_until)))
}

/// The app pass (`claim::app_share`): up to [`APP_PASS_APPS`] apps with
/// `fanout` rows no claim holds, but for the lane head's (the lanes serve it),
/// and no more than the claim can give one target each, from the cursor to the
/// end, then (wrapping) from the start; each leases its share of the claim,
/// its oldest due first, up to a row's more (an event is leased whole), never
/// past the claim. The cursor moves to the last app reached — to the first
/// when every such app was reached, so that each goes first in turn.
async fn app_pass(
    turn: &mut hookline_store::Turn,
    policy: &ClaimPolicy,
    limit: u32,
    rooms: &mut Rooms<'_>,
    now: Timestamp,
    lease_until: Timestamp,
) -> Result<Vec<Leased>> {
    let head = turn.fresh_head_app().await?;
    let want = APP_PASS_APPS.min(limit);
    let after = policy
        .app_cursor
        .lock()
        .expect("app cursor poisoned")
        .clone();
    let mut apps: Vec<AppId> = Vec::new();
    for start in [after.as_ref(), None] {
        // One more than wanted: the head's app may be among them.
        let count = want + 1 - apps.len() as u32;
        for app in turn.apps_with_fanout(start, count).await? {
            if Some(&app) != head.as_ref() && !apps.contains(&app) {
                apps.push(app);
            }
        }
        if apps.len() >= want as usize || after.is_none() {
            break;
        }
    }
    let everyone = apps.len() < want as usize;
    apps.truncate(want as usize);
    // The head's tenant counts for a share.
    let share = claim::app_share(limit, apps.len() + 1);
    let mut leased = Vec::new();
    let mut reached = 0;
    for app in &apps {
        let most = limit - leased.len() as u32;
        if most == 0 {
            break;
        }
        reached += 1;
        leased.extend(
            turn.lease_app(app, share, most, rooms, now, lease_until)
                .await?,
        );
    }
    let next = match everyone && reached == apps.len() {
        true => apps.first(),
        false => apps[..reached].last(),
    };
    if let Some(next) = next {
        *policy.app_cursor.lock().expect("app cursor poisoned") = Some(next.clone());
    }
    Ok(leased)
}

/// The next few enabled endpoints after the last fair pass's, skipping saturated
/// ones: from the cursor to the end, then (wrapping) from the start.
async fn fair_pass_endpoints(
    turn: &mut hookline_store::Turn,
    saturated: &[EndpointId],
    cursor: &Mutex<Option<EndpointId>>,
) -> Result<Vec<EndpointId>> {
    let after = cursor.lock().expect("fair cursor poisoned").clone();
    let mut visit: Vec<EndpointId> = Vec::new();
    for start in [after.as_ref(), None] {
        let count = FAIR_PASS_ENDPOINTS - visit.len() as u32;
        for endpoint in turn.endpoints_after(start, saturated, count).await? {
            if !visit.contains(&endpoint) {
                visit.push(endpoint);
            }
        }
        if visit.len() >= FAIR_PASS_ENDPOINTS as usize || after.is_none() {
            break;
        }
    }
    *cursor.lock().expect("fair cursor poisoned") = visit.last().cloned();
    Ok(visit)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(ms: i64) -> Timestamp {
        Timestamp::from_millis(ms)
    }

    #[test]
    fn the_recovery_mark_only_moves_on_and_a_failed_turn_sets_it_back() {
        let mark = RecoveryMark::default();
        let first = mark.begin();
        assert_eq!(first.since, None, "the first turn looks at every lease");
        first.committed(at(10));
        // Two turns under way commit out of order: the mark keeps the later end.
        let (a, b) = (mark.begin(), mark.begin());
        assert_eq!(a.since, Some(at(10)));
        b.committed(at(30));
        a.committed(at(20));
        assert_eq!(mark.begin().since, Some(at(30)));
        // A turn fails while another is under way: the mark goes back to where
        // the failed one began, and the other's end no longer counts (it may have
        // skipped leases the failed turn held and gave back).
        let (failing, beside) = (mark.begin(), mark.begin());
        let later = mark.begin();
        later.committed(at(40));
        failing.failed();
        assert_eq!(mark.begin().since, Some(at(30)));
        beside.committed(at(50));
        assert_eq!(mark.begin().since, Some(at(30)));
        // Turns begun after the failure move it on again.
        mark.begin().committed(at(60));
        assert_eq!(mark.begin().since, Some(at(60)));
    }
}
