use std::sync::Arc;
use std::time::Duration;

use super::*;

fn owned(tag: &StrictTag, epoch: i64, hold: Duration) {
    tag.acquired(Ownership {
        epoch,
        deadline: boot_now() + hold,
        peer_key: "k".into(),
    });
}

fn lease(tag: &StrictTag, range: Range<i64>) {
    let Take::Lease(ticket) = tag.take(1) else {
        panic!("an owner with nothing held leases first");
    };
    tag.install(ticket, range).unwrap();
}

#[test]
fn nothing_is_served_by_a_server_that_does_not_own_the_tag() {
    let tag = StrictTag::new();
    assert_eq!(tag.take(5), Take::NotOwner);
    owned(&tag, 1, Duration::from_secs(5));
    lease(&tag, 1..11);
    tag.lost(1);
    assert_eq!(
        tag.take(1),
        Take::NotOwner,
        "a lost tag serves nothing held"
    );
}

#[test]
fn ids_are_handed_out_in_order_and_a_range_below_the_last_is_refused() {
    let tag = StrictTag::new();
    owned(&tag, 1, Duration::from_secs(5));
    lease(&tag, 1..4);
    let Take::Ids(ids, ahead) = tag.take(2) else {
        panic!("held ids are served");
    };
    assert_eq!(ids, [1, 2]);
    let ticket = ahead.expect("below 90% of the range: lease ahead");
    assert_eq!(
        tag.install(ticket, 2..5),
        Ok(()),
        "an overlapping range is trimmed"
    );
    let Take::Ids(ids, ahead) = tag.take(10) else {
        panic!("held ids are served");
    };
    assert_eq!(
        ids,
        [3, 4],
        "3 from the first range, 4 from the trimmed second"
    );
    let ticket = ahead.expect("nothing left: lease ahead");
    assert_eq!(tag.take(1), Take::WaitLease, "one lease at a time");
    assert_eq!(
        tag.install(ticket, 1..5),
        Err(Refused::Regressed {
            end: 5,
            leased_to: 5
        }),
        "a database that went back is not served from"
    );
}

#[test]
fn a_range_leased_before_a_loss_is_never_served_after_the_tag_is_taken_again() {
    let tag = StrictTag::new();
    owned(&tag, 1, Duration::from_secs(5));
    let Take::Lease(old) = tag.take(1) else {
        panic!("lease first");
    };
    // Lost while the lease was in flight, then taken over again at a later epoch (another
    // server served in between): the old range may lie below its ids.
    tag.lost(1);
    owned(&tag, 3, Duration::from_secs(5));
    assert_eq!(tag.install(old, 1..100), Err(Refused::Stale));
    lease(&tag, 500..600);
    let Take::Ids(ids, _) = tag.take(1) else {
        panic!("the fresh range serves");
    };
    assert_eq!(ids, [500]);
}

#[test]
fn ids_taken_past_the_deadline_are_dropped_and_a_renewal_resumes() {
    let tag = StrictTag::new();
    owned(&tag, 1, Duration::from_millis(30));
    lease(&tag, 1..100);
    std::thread::sleep(Duration::from_millis(40));
    assert_eq!(tag.take(3), Take::Expired(1));
    // The renewal was sent now: the hold runs from here.
    tag.renewed(1, boot_now(), Duration::from_secs(5));
    let Take::Ids(ids, _) = tag.take(1) else {
        panic!("renewed: served again");
    };
    assert_eq!(
        ids,
        [4],
        "the three taken past the deadline are a gap, never handed out"
    );
    // A renewal for another epoch moves nothing.
    tag.renewed(
        7,
        boot_now() + Duration::from_secs(100),
        Duration::from_secs(100),
    );
    assert!(tag.ownership().unwrap().deadline < boot_now() + Duration::from_secs(6));
}

#[test]
fn an_observed_row_keeps_its_first_instant_until_it_moves() {
    let tag = StrictTag::new();
    let row = |version| OwnerRow {
        owner: Some("a".into()),
        address: Some("http://x".into()),
        peer_key: Some("k".into()),
        epoch: 1,
        version,
        lease_ms: 2000,
    };
    let t0 = Duration::from_secs(10);
    assert_eq!(tag.observe(row(1), t0).since, t0);
    assert_eq!(
        tag.observe(row(1), t0 * 2).since,
        t0,
        "the same version: since unchanged"
    );
    assert_eq!(
        tag.observe(row(2), t0 * 3).since,
        t0 * 3,
        "a renewal restarts it"
    );
}

/// Four threads take ids while a fifth installs ranges, loses and regains the tag: every id is
/// handed out once, each thread's ids increase, and after a regain no id at or below one
/// handed out before is handed out (the stale ranges are dropped).
#[test]
fn threads_taking_while_the_tag_moves_never_repeat_or_go_back() {
    let tag = Arc::new(StrictTag::new());
    owned(&tag, 1, Duration::from_secs(60));
    let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let takers: Vec<_> = (0..4)
        .map(|_| {
            let (tag, stop) = (tag.clone(), stop.clone());
            std::thread::spawn(move || {
                let mut mine = Vec::new();
                // Relaxed: a stop flag, nothing is published with it.
                while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                    // The takers lease nothing: their tickets go back (the main thread
                    // leases).
                    match tag.take(3) {
                        Take::Ids(ids, ahead) => {
                            mine.extend(ids);
                            if let Some(t) = ahead {
                                tag.lease_failed(t);
                            }
                        }
                        Take::Lease(t) => tag.lease_failed(t),
                        _ => {}
                    }
                }
                mine
            })
        })
        .collect();
    let mut next = 1i64;
    let mut epoch = 1;
    for round in 0..2_000 {
        if let Take::Lease(ticket) = tag.take(0) {
            let _ = tag.install(ticket, next..next + 50);
            next += 50;
        }
        if round % 97 == 0 {
            tag.lost(epoch);
            epoch += 2;
            owned(&tag, epoch, Duration::from_secs(60));
            // A new owner leases above everything leased before.
            next += 1_000;
        }
        std::thread::yield_now();
    }
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    let mut all = Vec::new();
    for t in takers {
        let mine = t.join().unwrap();
        assert!(
            mine.windows(2).all(|w| w[0] < w[1]),
            "a thread's ids increase"
        );
        all.extend(mine);
    }
    let n = all.len();
    all.sort_unstable();
    all.dedup();
    assert_eq!(all.len(), n, "no id twice");
    assert!(n > 100, "the threads were served ({n} ids)");
}

/// A server with a short lease waits out an owner configured with a longer one (two servers
/// given different `segment.strict_lease_ms`): the row carries the owner's lease.
#[test]
fn a_shorter_lease_waits_out_an_owner_with_a_longer_one() {
    let short = super::super::StrictTiming::new(Duration::from_secs(1));
    assert_eq!(short.patience_for(0), Duration::from_millis(1100));
    assert_eq!(short.patience_for(10_000), Duration::from_millis(11_000));
    // The owner's hold (`L - m`) ends before the other's patience, whoever has which lease.
    let long = super::super::StrictTiming::new(Duration::from_secs(10));
    assert!(long.hold() < short.patience_for(10_000));
}
