//! Device interrupt vectors ([`os::arch::irq`]): a vector's stub counts and acknowledges, a
//! waiter wakes on it, the allocator hands each vector out once.

use alloc::format;
use alloc::string::String;
use alloc::vec::Vec;

use os::arch::{apic, irq, time};

/// How long a wait for a self-IPI may take before the test calls the vector dead. Generous:
/// the interrupt is already pending when the wait starts.
const WAIT_NS: u64 = 1_000_000_000;

/// A self-IPI on an allocated vector is counted by its stub and ends the waiter's halt.
pub fn vector_counts() -> Result<(), String> {
    let vector = irq::allocate_here().map_err(|err| format!("{err}"))?;
    for round in 1..=3u64 {
        let seen = vector.count();
        apic::send_fixed(vector.apic_id(), vector.vector()).map_err(|err| format!("{err}"))?;
        let start = time::now_ns();
        let (now, woke_ns) = vector.wait(seen, start + WAIT_NS);
        // The time it hands back is the halt's end (or a read after the count moved), never
        // one from before the wait.
        if woke_ns < start || woke_ns > time::now_ns() {
            return Err(format!(
                "round {round}: the wait returned {woke_ns} ns, outside {start}..now"
            ));
        }
        if now != seen + 1 {
            return Err(format!(
                "round {round}: vector {:#x} counted {} interrupts for one IPI (waited {} ns)",
                vector.vector(),
                now - seen,
                time::now_ns() - start
            ));
        }
    }
    // An unrelated vector's count did not move.
    let other = irq::allocate_here().map_err(|err| format!("{err}"))?;
    let before = other.count();
    let seen = vector.count();
    apic::send_fixed(vector.apic_id(), vector.vector()).map_err(|err| format!("{err}"))?;
    vector.wait(seen, time::now_ns() + WAIT_NS);
    if other.count() != before {
        return Err(format!(
            "vector {:#x} counted another vector's IPI",
            other.vector()
        ));
    }
    Ok(())
}

/// Every vector is handed out once; the next allocation is an error; a dropped vector is free.
pub fn vector_allocator() -> Result<(), String> {
    let mut held = Vec::new();
    while let Ok(vector) = irq::allocate_here() {
        if held.len() > irq::COUNT {
            return Err(format!("more than {} vectors handed out", irq::COUNT));
        }
        held.push(vector);
    }
    if held.len() != irq::COUNT {
        return Err(format!(
            "{} of {} vectors handed out",
            held.len(),
            irq::COUNT
        ));
    }
    let mut numbers: Vec<u8> = held.iter().map(|v| v.vector()).collect();
    numbers.sort_unstable();
    numbers.dedup();
    if numbers.len() != irq::COUNT {
        return Err(String::from("a vector was handed out twice"));
    }
    // Every vector's stub counts its own interrupts (a stub table misindexed by one would
    // count another vector's).
    for vector in &held {
        let before: Vec<u64> = held.iter().map(|v| v.count()).collect();
        apic::send_fixed(vector.apic_id(), vector.vector()).map_err(|err| format!("{err}"))?;
        vector.wait(vector.count(), time::now_ns() + WAIT_NS);
        for (other, before) in held.iter().zip(before) {
            let expected = before + u64::from(other.vector() == vector.vector());
            if other.count() != expected {
                return Err(format!(
                    "IPI on {:#x}: vector {:#x} counted {} (expected {expected})",
                    vector.vector(),
                    other.vector(),
                    other.count()
                ));
            }
        }
    }
    let freed = held.swap_remove(7).vector();
    let again = irq::allocate_here().map_err(|err| format!("after a free: {err}"))?;
    if again.vector() != freed {
        return Err(format!("freed {freed:#x}, got {:#x}", again.vector()));
    }
    Ok(())
}
