//! The pooling allocator's sizing, and giving freed heap back to the
//! system after plugins load.

use super::*;

/// The pooling allocator: every instance's memories, tables, stack and
/// metadata come from slots reserved once, so a call costs no `mmap` and a
/// memory starts as a copy-on-write view of the plugin's initial image.
///
/// A component has a handful of core instances (a Rust plugin three; an
/// interpreter built by componentize-py or ComponentizeJS a dozen, some
/// with their own memory), so the per-component totals are generous: the
/// slots are address space, committed only when used and released when an
/// instance ends.
pub(super) fn pool(settings: &RuntimeSettings, reset_in_place: bool) -> InstanceAllocationStrategy {
    const CORE_PER_COMPONENT: u32 = 16;
    const MEMORIES_PER_COMPONENT: u32 = 4;
    const TABLES_PER_COMPONENT: u32 = 16;
    let n = settings.pool_slots();
    let config = &settings.config;
    let largest = |f: fn(&Limits) -> usize| {
        config
            .plugins
            .keys()
            .map(|name| f(&config.limits_for(name)))
            .chain([f(&config.limits)])
            .max()
            .unwrap_or_default()
    };
    let memory_mb = largest(|l| usize::try_from(l.memory_mb).unwrap_or(usize::MAX));
    let mut pool = PoolingAllocationConfig::new();
    pool.total_component_instances(n)
        .total_core_instances(n.saturating_mul(CORE_PER_COMPONENT))
        .total_memories(n.saturating_mul(MEMORIES_PER_COMPONENT))
        .total_tables(n.saturating_mul(TABLES_PER_COMPONENT))
        .total_stacks(n)
        .max_memories_per_module(2)
        .max_tables_per_module(4)
        .table_elements(largest(|l| l.max_table_elements))
        // The store's limiter enforces each plugin's own cap; the slot only
        // has to hold the largest one.
        .max_memory_size(memory_mb.saturating_mul(1 << 20).min(4 << 30))
        .max_core_instance_size(4 << 20)
        .max_component_instance_size(4 << 20)
        // Idle slots keep little memory, so RSS goes back down after a
        // burst: the first pages of a stack are zeroed in place and the
        // rest released, and memories likewise (below). The part zeroed in
        // place is zeroed after every call, used or not: 16 KiB covers
        // what `test.ping` and `cmd.run` use (no more page faults per call
        // than with 64 KiB), and a deeper call pays a fault per page beyond.
        .async_stack_keep_resident(16 << 10)
        .max_unused_warm_slots(n.min(64));
    if reset_in_place {
        // Where the kernel can say which pages an instance wrote
        // (PAGEMAP_SCAN, Linux 6.7+), a slot is put back to its initial
        // image by rewriting just those pages, up to this much, instead of
        // unmapping them all and taking a page fault on each again in the
        // next call: that was half of what a call cost. A slot then keeps
        // what it wrote resident, which bounds how much an idle agent holds
        // at (warm slots × this).
        pool.pagemap_scan(Enabled::Yes)
            .linear_memory_keep_resident(512 << 10)
            .table_keep_resident(64 << 10);
    }
    InstanceAllocationStrategy::Pooling(pool)
}

/// Keep glibc from holding on to freed memory at the top of its heaps.
/// By default it raises its trim threshold with every large buffer freed
/// (up to 64 MiB), and `malloc_trim` does not shrink the heaps of the
/// threads that are not the main one: an agent that compiled its plugins
/// at start (every buffer freed, on the blocking threads that compiled)
/// kept ~30 MiB of them resident for good, 2.3 times the RSS of a warm
/// start. A fixed threshold gives back whatever over 128 KiB is free at
/// the top of a heap as it is freed (and keeps glibc's default for
/// mapping large buffers, which it no longer raises either). Set once,
/// when the first runtime is made.
pub(super) fn bound_free_heap() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    {
        static ONCE: std::sync::Once = std::sync::Once::new();
        // SAFETY: mallopt only changes glibc's own tunable; it takes the
        // allocator's lock and is safe to call from any thread.
        ONCE.call_once(|| unsafe {
            nix::libc::mallopt(nix::libc::M_TRIM_THRESHOLD, 128 << 10);
        });
    }
}

/// Give the memory malloc holds but no one uses back to the kernel.
/// Loading reads each `.wasm` and compiled artifact whole and copies the
/// code out of it; glibc keeps the freed buffers (and, after the first
/// large one, serves the next ones from its heaps instead of fresh
/// mappings), so an idle agent would hold ~0.5 MB of them for good.
pub(super) fn release_free_heap() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: malloc_trim only releases free memory of glibc's own heaps;
    // it takes their locks and is safe to call from any thread at any time.
    unsafe {
        nix::libc::malloc_trim(0);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_agent_gets_a_slot_per_job_and_one_for_loading() {
        assert_eq!(RuntimeSettings::instances_for(0), 1);
        assert_eq!(RuntimeSettings::instances_for(32), 33);
        assert_eq!(RuntimeSettings::instances_for(usize::MAX), u32::MAX);
    }
}
