//! Model-based random sequences for the SLUB-shaped cache, as `model.rs` runs them for the
//! magazine slab: two CPU fronts and the cache itself allocate and free at random (fast
//! frees, remote frees, frees by handle, bus and CPU address, double and foreign frees, a
//! guard's alloc, drop, `into_raw` and the raw frees it must refuse, flushes and shrinks),
//! checked against a reference model (the sets of raw and guarded live objects). After every
//! step the invariant walkers of the node and of both CPUs run, the counts agree with the
//! model and the backing, every live object still holds the tag written at allocation, and
//! the empty slabs obey `min_partial`.

use std::collections::HashMap;

use pools::host::{HostBacking, HostRawMutex};
use pools::slab::{RawObject, SlabConfig};
use pools::slub::{SlubCache, SlubCpu, SlubObject};
use pools::{DmaAddr, ElementAllocator, PoolError};
use proptest::prelude::*;

#[derive(Debug, Clone)]
enum Op {
    Alloc(bool),
    AllocGuard(bool),
    /// A raw free through CPU 0 or 1 (its fast path or a remote free), or through the cache.
    Free(usize, u8),
    FreeDma(usize),
    FreeCpu(usize),
    DoubleFree(usize),
    Misaligned(usize, u64),
    Foreign(u64),
    /// A guard's drop (a remote free) or its return through CPU 0 or 1.
    DropGuard(usize, u8),
    FreeGuarded(usize, u8),
    IntoRaw(usize),
    Flush(bool),
    Shrink,
}

fn op() -> impl Strategy<Value = Op> {
    let i = any::<usize>;
    prop_oneof![
        8 => any::<bool>().prop_map(Op::Alloc),
        3 => (i(), 0u8..3).prop_map(|(i, how)| Op::Free(i, how)),
        1 => i().prop_map(Op::FreeDma),
        1 => i().prop_map(Op::FreeCpu),
        1 => i().prop_map(Op::DoubleFree),
        1 => (i(), 1u64..16).prop_map(|(i, d)| Op::Misaligned(i, d)),
        1 => any::<u64>().prop_map(Op::Foreign),
        3 => any::<bool>().prop_map(Op::AllocGuard),
        2 => (i(), 0u8..3).prop_map(|(i, how)| Op::DropGuard(i, how)),
        2 => (i(), 0u8..3).prop_map(|(i, how)| Op::FreeGuarded(i, how)),
        1 => i().prop_map(Op::IntoRaw),
        1 => any::<bool>().prop_map(Op::Flush),
        1 => Just(Op::Shrink),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    #[test]
    fn slub_matches_model(
        size in 1usize..600,
        align_log in 0u32..8,
        per_slab in prop_oneof![Just(0usize), 1usize..5],
        ops in prop::collection::vec(op(), 1..300),
    ) {
        // Small slabs (1-4 objects) make many slabs, so the list rules get exercised.
        let align = 1usize << align_log;
        let slab_bytes = size.next_multiple_of(align) * per_slab;
        let config = SlabConfig::new("model", size).align(align).slab_bytes(slab_bytes);
        run(config, ops)?;
    }
}

fn tag_object(object: &RawObject, len: usize, value: u64) {
    let bytes = value.to_ne_bytes();
    // SAFETY: a live object of `len` bytes owned by the test; writes at most `len` bytes.
    unsafe { std::ptr::copy_nonoverlapping(bytes.as_ptr(), object.cpu_ptr().as_ptr(), len.min(8)) }
}

fn object_tag(object: &RawObject, len: usize) -> u64 {
    let mut bytes = [0u8; 8];
    // SAFETY: as in `tag_object`.
    unsafe {
        std::ptr::copy_nonoverlapping(object.cpu_ptr().as_ptr(), bytes.as_mut_ptr(), len.min(8))
    };
    u64::from_ne_bytes(bytes)
}

type Cache<'b> = SlubCache<&'b HostBacking, HostRawMutex>;
type Guard<'c, 'b> = SlubObject<'c, &'b HostBacking, HostRawMutex>;

struct Model<'c, 'b> {
    len: usize,
    mask: u64,
    live: HashMap<u64, (RawObject, u64)>,
    guards: Vec<(Guard<'c, 'b>, u64)>,
    /// Every raw handle ever handed out, by bus address: stale copies name later objects.
    handles: HashMap<u64, RawObject>,
    freed: Vec<RawObject>,
    next_tag: u64,
}

fn run(config: SlabConfig, ops: Vec<Op>) -> Result<(), TestCaseError> {
    let backing = HostBacking::new();
    let len = config.object_size;
    let cache = Cache::create(config.clone(), &backing).unwrap();
    let cpus = [cache.cpu(), cache.cpu()];
    let mut m = Model {
        len,
        mask: if len >= 8 {
            u64::MAX
        } else {
            (1u64 << (8 * len)) - 1
        },
        live: HashMap::new(),
        guards: Vec::new(),
        handles: HashMap::new(),
        freed: Vec::new(),
        next_tag: 1,
    };
    for op in ops {
        step(&cache, &cpus, &mut m, op, config.align)?;
        check(&cache, &cpus, &m, &backing)?;
    }
    let had_live = !m.live.is_empty() || !m.guards.is_empty();
    for (guard, _) in m.guards.drain(..) {
        guard.into_raw();
    }
    drop(m);
    drop(cpus);
    prop_assert_eq!(cache.destroy().is_err(), had_live);
    if !had_live {
        prop_assert_eq!(backing.outstanding(), 0);
    }
    Ok(())
}

fn step<'c, 'b>(
    cache: &'c Cache<'b>,
    cpus: &[SlubCpu<'c, &'b HostBacking, HostRawMutex>; 2],
    m: &mut Model<'c, 'b>,
    op: Op,
    align: usize,
) -> Result<(), TestCaseError> {
    let mut keys: Vec<u64> = m.live.keys().copied().collect();
    keys.sort_unstable();
    match op {
        Op::Alloc(c) => {
            let object = cpus[usize::from(c)].alloc_raw().unwrap();
            prop_assert!(object.cpu_ptr().as_ptr() as usize % align.max(1) == 0);
            prop_assert!(!m.live.contains_key(&object.dma_addr().0));
            tag_object(&object, m.len, m.next_tag);
            m.live
                .insert(object.dma_addr().0, (object, m.next_tag & m.mask));
            m.handles.insert(object.dma_addr().0, object);
            m.freed.retain(|f| f.dma_addr() != object.dma_addr());
            m.next_tag += 1;
        }
        Op::AllocGuard(c) => {
            let mut guard = cpus[usize::from(c)].alloc().unwrap();
            let dma = guard.dma_addr();
            prop_assert!(!m.live.contains_key(&dma.0));
            prop_assert!(m.guards.iter().all(|(g, _)| g.dma_addr() != dma));
            prop_assert!(guard.write_at(0, &m.next_tag.to_ne_bytes()[..m.len.min(8)]));
            m.guards.push((guard, m.next_tag & m.mask));
            m.freed.retain(|f| f.dma_addr() != dma);
            m.next_tag += 1;
        }
        Op::DropGuard(i, how) if !m.guards.is_empty() => {
            let (guard, _) = m.guards.swap_remove(i % m.guards.len());
            if let Some(&stale) = m.handles.get(&guard.dma_addr().0) {
                m.freed.push(stale);
            }
            match how {
                0 | 1 => cpus[usize::from(how)].free(guard),
                _ => drop(guard),
            }
        }
        Op::FreeGuarded(i, how) if !m.guards.is_empty() => {
            let (guard, _) = &m.guards[i % m.guards.len()];
            let (cpu, dma) = (guard.cpu_ptr().as_ptr(), guard.dma_addr());
            let held = PoolError::HeldByGuard {
                cpu: cpu as usize,
                dma,
            };
            match (how, m.handles.get(&dma.0)) {
                (0, Some(&stale)) => {
                    let result = cpus[0].free_raw(stale);
                    prop_assert!(
                        result == Err(held.clone())
                            || matches!(result, Err(PoolError::ForeignHandle { .. })),
                        "{:?}",
                        result
                    );
                }
                (1, _) => prop_assert_eq!(cache.free_dma(dma), Err(held)),
                _ => prop_assert_eq!(cache.free_cpu(cpu), Err(held)),
            }
        }
        Op::IntoRaw(i) if !m.guards.is_empty() => {
            let (guard, t) = m.guards.swap_remove(i % m.guards.len());
            let object = guard.into_raw();
            m.handles.insert(object.dma_addr().0, object);
            m.live.insert(object.dma_addr().0, (object, t));
        }
        Op::Free(i, _) | Op::FreeDma(i) | Op::FreeCpu(i) if !keys.is_empty() => {
            let (object, _) = m.live.remove(&keys[i % keys.len()]).unwrap();
            let result = match op {
                Op::Free(_, how @ 0..=1) => cpus[usize::from(how)].free_raw(object),
                Op::Free(..) => cache.free_raw(object),
                Op::FreeDma(_) => cache.free_dma(object.dma_addr()),
                _ => cache.free_cpu(object.cpu_ptr().as_ptr()),
            };
            prop_assert_eq!(result, Ok(()));
            m.freed.push(object);
        }
        Op::DoubleFree(i) if !m.freed.is_empty() => {
            let object = m.freed[i % m.freed.len()];
            for result in [cpus[i % 2].free_raw(object), cache.free_raw(object)] {
                // A discarded slab may be gone, making the handle foreign instead.
                prop_assert!(
                    matches!(
                        result,
                        Err(PoolError::DoubleFree { .. } | PoolError::ForeignHandle { .. })
                    ),
                    "{:?}",
                    result
                );
            }
        }
        // Inside the object's own stride: past it, the address may lie beyond the slab's last
        // object (a one-object slab of stride 2, say), where `ForeignDma` is the right answer.
        Op::Misaligned(i, delta) if !keys.is_empty() && delta < cache.stats().stride as u64 => {
            let (object, _) = m.live[&keys[i % keys.len()]];
            let result = cache.free_dma(object.dma_addr().offset(delta));
            prop_assert!(
                matches!(result, Err(PoolError::Misaligned { .. })),
                "{:?}",
                result
            );
        }
        Op::Foreign(addr) => {
            let dma = DmaAddr(addr % (1 << 52));
            prop_assert_eq!(cache.free_dma(dma), Err(PoolError::ForeignDma { dma }));
        }
        Op::Flush(c) => {
            cpus[usize::from(c)].flush();
            prop_assert_eq!(cpus[usize::from(c)].slabs_held(), (0, 0));
        }
        Op::Shrink => {
            let before = cache.stats();
            let shrunk = cache.shrink();
            let after = cache.stats();
            prop_assert_eq!(after.slabs, before.slabs - shrunk);
            prop_assert!(after.node_partial_slabs + shrunk == before.node_partial_slabs);
        }
        _ => {}
    }
    Ok(())
}

fn check(
    cache: &Cache<'_>,
    cpus: &[SlubCpu<'_, &HostBacking, HostRawMutex>; 2],
    m: &Model<'_, '_>,
    backing: &HostBacking,
) -> Result<(), TestCaseError> {
    cache.check_invariants().map_err(TestCaseError::fail)?;
    for cpu in cpus {
        cpu.check_invariants().map_err(TestCaseError::fail)?;
    }
    let s = cache.stats();
    prop_assert_eq!(s.objects_in_use, m.live.len() + m.guards.len());
    prop_assert_eq!(s.slabs, backing.outstanding());
    prop_assert_eq!(
        s.cpu_slabs + s.cpu_partial_slabs + s.node_partial_slabs + s.full_slabs,
        s.slabs
    );
    let held: usize = cpus
        .iter()
        .map(|c| c.slabs_held().0 + c.slabs_held().1)
        .sum();
    prop_assert_eq!(held, s.cpu_slabs + s.cpu_partial_slabs);
    prop_assert!(s.cpu_partial_slabs <= 2 * s.cpu_partial_slabs_max);
    // An empty slab joins the node's list only while it holds fewer than `min_partial`
    // partial slabs, so at most `min_partial` empty ones are ever there.
    let empty_on_node = s.empty_slabs - s.empty_cpu_partial_slabs;
    prop_assert!(
        empty_on_node <= s.min_partial,
        "{} empty slabs on the node: {:?}",
        empty_on_node,
        s
    );
    for (object, t) in m.live.values() {
        prop_assert_eq!(object_tag(object, m.len), *t);
    }
    for (guard, t) in &m.guards {
        let mut bytes = [0u8; 8];
        prop_assert!(guard.read_at(0, &mut bytes[..m.len.min(8)]));
        prop_assert_eq!(u64::from_ne_bytes(bytes), *t);
    }
    Ok(())
}
