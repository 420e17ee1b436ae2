//! White-box tests of the midlayer's private steps.

use super::*;
use crate::clock::ManualClock;
use crate::sense_alloc::HeapSense;
use crate::target::{ScsiDebug, ScsiDebugParams};

/// `multi:2` on `mempool:2` with the slab failing: another holder has one of the two
/// reserved elements, so a command's take gets one and fails on the second. It must give
/// that one back: when the other holder frees its element the reserve is whole again and the
/// next command takes both. A take that kept its partial element would leave two commands
/// holding one element each and nothing in flight to free one, forever (seen failing with
/// the give-back removed from `take_elements`).
#[test]
fn a_partial_take_is_given_back_before_the_command_parks() {
    let target = ScsiDebug::try_new(ScsiDebugParams::default(), ManualClock::new(1000)).unwrap();
    let mut stack = Midlayer::new(
        target,
        HeapSense::new(),
        SenseMode::Mempool(2),
        ManualClock::new(1000),
    )
    .unwrap();
    stack.set_elements_per_command(2).unwrap();
    stack.sense.slab().set_failing(true);
    let other_holder = stack.sense.alloc().expect("a reserved element");
    assert!(
        !stack.take_elements(Tag(0)),
        "one element cannot make a step"
    );
    assert_eq!(stack.stats.partial_takes, 1);
    assert_eq!(stack.sense_stats().reserve_held, 1, "given back");
    stack.sense.free(other_holder);
    assert!(
        stack.take_elements(Tag(1)),
        "the whole reserve serves the next command"
    );
    assert_eq!(stack.slots[1].extra.len(), 1);
}
