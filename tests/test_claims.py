"""Claims (autotune/store/claims.py) on SQLite and Postgres: one owner per (key, config), leases, takeover
of dead owners' claims, completion together with the trial."""

from __future__ import annotations

import subprocess
import sys
import threading
import time

from sqlalchemy import update

from autotune.store import ClaimState, Owner
from autotune.store.models import ClaimRow
from autotune.trial import TrialResult, TrialStatus
from tests.test_store import ensure


def test_one_owner_then_done(store):
    key = ensure(store)
    a, b = Owner(), Owner()
    assert store.claims.claim(key.id, "h1", a, lease_s=30).state is ClaimState.CLAIMED
    assert (
        store.claims.claim(key.id, "h1", a, lease_s=30).state is ClaimState.CLAIMED
    )  # idempotent for its owner
    assert store.claims.claim(key.id, "h1", b, lease_s=30).state is ClaimState.BUSY
    assert store.claims.running(key.id) == {"h1": a.id}
    assert store.history.key_states()[0].running == 1  # `autotune show` lists it
    res = TrialResult(TrialStatus.OK, {"x": 1}, time_s=1e-5)
    # the trial's own config hash is what record_trial completes
    from autotune.trial import config_hash

    h = config_hash(res.config)
    assert store.claims.claim(key.id, h, a, lease_s=30).state is ClaimState.CLAIMED
    trial_id = store.trials.record(key.id, res)
    claim = store.claims.claim(key.id, h, b, lease_s=30)
    assert claim.state is ClaimState.DONE and claim.trial_id == trial_id
    # another key is independent
    assert store.claims.claim(ensure(store, source="9" * 64).id, h, b, lease_s=30).state is ClaimState.CLAIMED


def test_expired_lease_is_taken_over_once(store):
    key = ensure(store)
    a, b, c = Owner(host="hostA"), Owner(host="hostB"), Owner(host="hostC")
    assert store.claims.claim(key.id, "h", a, lease_s=0.2).state is ClaimState.CLAIMED
    assert store.claims.claim(key.id, "h", b, lease_s=30).state is ClaimState.BUSY
    time.sleep(0.3)
    taken = store.claims.claim(key.id, "h", b, lease_s=30)
    assert taken.state is ClaimState.CLAIMED and taken.attempts == 2
    assert store.claims.claim(key.id, "h", c, lease_s=30).state is ClaimState.BUSY


def test_renew_keeps_a_claim_and_release_hands_it_back(store):
    key = ensure(store)
    a, b = Owner(host="hostA"), Owner(host="hostB")
    store.claims.claim(key.id, "h1", a, lease_s=0.5)
    store.claims.claim(key.id, "h2", a, lease_s=0.5)
    time.sleep(0.3)
    assert store.claims.renew(a, lease_s=30) == 2
    time.sleep(0.3)
    assert store.claims.claim(key.id, "h1", b, lease_s=30).state is ClaimState.BUSY  # renewed: still a's
    assert store.claims.release(a, ["h1"]) == 1
    assert store.claims.claim(key.id, "h1", b, lease_s=30).state is ClaimState.CLAIMED
    assert store.claims.release(a) == 1 and store.claims.running(key.id) == {"h1": b.id}


def test_dead_process_on_this_host_is_taken_over_at_once(store):
    key = ensure(store)
    dead = subprocess.run(
        [sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True
    )
    ghost = Owner(pid=int(dead.stdout))
    assert store.claims.claim(key.id, "h", ghost, lease_s=3600).state is ClaimState.CLAIMED
    me = Owner()
    assert (
        store.claims.claim(key.id, "h", me, lease_s=30).state is ClaimState.CLAIMED
    )  # no need to wait an hour


def test_racing_claimers_get_one_winner(db_url, store):
    key = ensure(store)
    owners = [Owner(host=f"h{i}") for i in range(8)]
    states: list[ClaimState] = []
    barrier = threading.Barrier(len(owners))

    def go(o):
        barrier.wait()
        states.append(store.claims.claim(key.id, "contested", o, lease_s=30).state)

    threads = [threading.Thread(target=go, args=(o,)) for o in owners]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert states.count(ClaimState.CLAIMED) == 1 and states.count(ClaimState.BUSY) == 7


def test_a_trial_stored_without_a_claim_still_blocks_remeasuring(store):
    key = ensure(store)
    res = TrialResult(TrialStatus.CRASHED, {"x": 2}, error="boom")
    store.trials.record(key.id, res)
    from autotune.trial import config_hash

    assert store.claims.claim(key.id, config_hash(res.config), Owner(), lease_s=30).state is ClaimState.DONE
    # invalid configs take no claim (they never run)
    bad = TrialResult(TrialStatus.INVALID, {"x": 3}, error="constraint")
    store.trials.record(key.id, bad)
    assert (
        store.claims.claim(key.id, config_hash(bad.config), Owner(), lease_s=30).state is ClaimState.CLAIMED
    )


def test_settled_trials(store):
    key = ensure(store)
    a = Owner()
    from autotune.trial import config_hash

    res = TrialResult(TrialStatus.OK, {"x": 4}, time_s=1e-5)
    store.claims.claim(key.id, config_hash(res.config), a, lease_s=30)
    tid = store.trials.record(key.id, res)
    assert tid not in store.claims.settled_trials(key.id, older_than_s=60)  # its (live) owner writes it
    assert tid in store.claims.settled_trials(key.id, older_than_s=0)
    with store.db.session(write=True) as s:  # its owner died on this host
        s.execute(update(ClaimRow).values(pid=2**22 + 12345))
    assert tid in store.claims.settled_trials(key.id, older_than_s=60)
