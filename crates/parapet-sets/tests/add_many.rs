//! `Set::add_many` against `Set::add` of each element in turn: the same
//! set state whenever the batch succeeds (duplicates in the batch,
//! elements already stored, expired ones, per-element timeouts and
//! expiries), and, when the batch would overflow the set's bound, an error
//! that leaves the set exactly as it was. Both the batch without an undo
//! log (a growable hash with room) and the all-or-nothing one are reached.

use parapet_sets::*;
use proptest::prelude::*;

/// One element of a batch: a value out of a small space (so batches hold
/// duplicates and hit stored elements), its own timeout or expiry.
#[derive(Clone, Debug)]
struct Item {
    value: u8,
    timeout: Option<u8>,
    expires: Option<u8>,
}

fn item() -> impl Strategy<Value = Item> {
    (0u8..48, prop::option::of(0u8..6), prop::option::of(1u8..6)).prop_map(
        |(value, timeout, expires)| Item {
            value,
            timeout,
            expires,
        },
    )
}

fn element(it: &Item) -> Element {
    let mut e = Element::exact(&[0x0a00_0000 + it.value as u128]);
    e.timeout = it.timeout.map(|t| t as u64 * 10);
    e.expires = it.expires.map(|t| t as u64 * 7);
    e
}

fn new_set(kind: BackendKind, maxelem: usize) -> Set {
    let mut desc = SetDesc::new(&[KeyPart::Ipv4Addr])
        .timeouts(25)
        .maxelem(maxelem);
    if kind == BackendKind::HashFixed {
        desc = desc.size(64);
    }
    desc.backend = Some(kind);
    let s = Set::new("t", desc).unwrap();
    assert_eq!(s.backend(), kind, "{}", s.explain());
    s
}

/// What a lookup sees, now and later: every live element with its
/// remaining time, and membership of every value at a few instants.
fn state(s: &Set, now: u64) -> (Vec<StoredElement>, Vec<bool>) {
    let members = (0..64u128)
        .flat_map(|v| {
            let k = LookupKey::new().addr(Family::V4, 0x0a00_0000 + v);
            [0, 9, 21, 40, 70].map(|dt| s.contains(&k, now + dt))
        })
        .collect();
    (s.elements(now), members)
}

fn check(
    kind: BackendKind,
    maxelem: usize,
    before: &[Item],
    gap: u8,
    batch: &[Item],
) -> Result<(), TestCaseError> {
    let mut base = new_set(kind, maxelem);
    let t0 = 1_000;
    for it in before {
        let _ = base.add(&element(it), t0);
    }
    // some of what was stored has expired by the batch
    let now = t0 + gap as u64;
    let els: Vec<Element> = batch.iter().map(element).collect();

    let mut one_by_one = base.clone();
    let mut singles = Ok(0);
    for e in &els {
        match one_by_one.add(e, now) {
            Ok(n) => *singles.as_mut().unwrap() += n,
            Err(err) => {
                singles = Err(err);
                break;
            }
        }
    }
    let mut batched = base.clone();
    match batched.add_many(&els, now) {
        Ok(n) => {
            // An expired element not reaped yet counts as refreshed when
            // added again, and the two reap at different moments: the
            // counts agree when nothing stored had expired.
            if base.elements(now).len() == base.len() {
                prop_assert_eq!(singles.ok(), Some(n), "new elements counted alike");
            } else {
                prop_assert!(singles.is_ok());
            }
            prop_assert_eq!(state(&batched, now), state(&one_by_one, now));
        }
        Err(e) => {
            prop_assert!(matches!(e, SetError::Full { .. }), "{e}");
            prop_assert!(
                singles.is_err(),
                "the batch failed, adds one by one did not"
            );
            prop_assert_eq!(state(&batched, now), state(&base, now), "all or nothing");
        }
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(300))]

    #[test]
    fn add_many_is_adds_one_by_one(
        kind in prop_oneof![
            Just(BackendKind::HashGrowable),
            Just(BackendKind::HashFixed),
            Just(BackendKind::Interval),
        ],
        maxelem in prop_oneof![Just(8usize), Just(24), Just(1000)],
        before in prop::collection::vec(item(), 0..30),
        gap in 0u8..60,
        batch in prop::collection::vec(item(), 0..40),
    ) {
        check(kind, maxelem, &before, gap, &batch)?;
    }
}

/// The bound on the set's size, deterministically: a batch that fits only
/// because it repeats values or refreshes stored ones succeeds, one more
/// new value fails and changes nothing.
#[test]
fn add_many_keeps_the_bound() {
    let mut s = new_set(BackendKind::HashGrowable, 4);
    let el = |v: u8| {
        element(&Item {
            value: v,
            timeout: Some(0),
            expires: None,
        })
    };
    s.add_many(&[el(1), el(2)], 0).unwrap();
    // 1 and 2 stored: 2, 3, 3, 4, 1 adds two new ones and fits exactly
    assert_eq!(
        s.add_many(&[el(2), el(3), el(3), el(4), el(1)], 0).unwrap(),
        2
    );
    assert_eq!(s.len(), 4);
    let before = s.elements(0);
    assert!(matches!(
        s.add_many(&[el(5), el(1)], 0),
        Err(SetError::Full { maxelem: 4, .. })
    ));
    assert_eq!(s.elements(0), before);
}
