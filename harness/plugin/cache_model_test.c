/*
 * Tests of the plugin's data-cache model (cache_model.h) on access patterns whose misses are
 * known from the geometry alone (L1D: 64 sets x 8 ways, L2: 1024 sets x 16 ways, 64-byte lines).
 * Built and run by a host test of the harness (`insns::tests`, the cache model's geometry);
 * prints one line per check and exits 1 if any failed.
 */
#include <inttypes.h>
#include <stdio.h>

#include "cache_model.h"

static int failures;

static void expect(const char *what, uint64_t got, uint64_t want)
{
    printf("%s %s: %" PRIu64 " (want %" PRIu64 ")\n", got == want ? "ok" : "FAILED", what, got,
           want);
    failures += got != want;
}

static struct cache_model fresh(void)
{
    struct cache_model model;
    if (!cache_model_init(&model)) {
        fprintf(stderr, "cache model: out of memory\n");
        exit(2);
    }
    return model;
}

/* Touches `bytes` bytes from `base`, one access every `stride` bytes; returns the L1D and L2
 * misses of that sweep alone. */
static void sweep(struct cache_model *m, uint64_t base, uint64_t bytes, uint64_t stride,
                  uint64_t *l1d, uint64_t *l2)
{
    uint64_t l1d_before = m->l1d_misses, l2_before = m->l2_misses;
    for (uint64_t at = 0; at < bytes; at += stride)
        cache_model_access(m, base + at);
    *l1d = m->l1d_misses - l1d_before;
    *l2 = m->l2_misses - l2_before;
}

int main(void)
{
    uint64_t l1d, l2;

    /* Cold lines miss both levels once; bytes of one line share its miss. */
    struct cache_model m = fresh();
    sweep(&m, 0x100000, 4096, 8, &l1d, &l2);
    expect("4 KiB cold, every 8 bytes: L1D misses = lines", l1d, 64);
    expect("4 KiB cold: L2 misses = lines", l2, 64);
    sweep(&m, 0x100000, 4096, 8, &l1d, &l2);
    expect("4 KiB again: no L1D miss", l1d, 0);

    /* 32 KiB fills L1D exactly: a second sweep hits. One line more overflows only its own set
     * (nine lines cycling through eight ways all miss); 64 KiB in order overflows every set. */
    m = fresh();
    sweep(&m, 0, 32 << 10, 64, &l1d, &l2);
    sweep(&m, 0, 32 << 10, 64, &l1d, &l2);
    expect("32 KiB twice: no L1D miss the second time", l1d, 0);
    m = fresh();
    sweep(&m, 0, (32 << 10) + 64, 64, &l1d, &l2);
    sweep(&m, 0, (32 << 10) + 64, 64, &l1d, &l2);
    expect("32 KiB + 64 B twice: the nine lines of set 0 miss L1D again", l1d, 9);
    m = fresh();
    sweep(&m, 0, 64 << 10, 64, &l1d, &l2);
    sweep(&m, 0, 64 << 10, 64, &l1d, &l2);
    expect("64 KiB twice, in order: every line misses L1D again (LRU)", l1d, 1024);
    expect("... and hits L2", l2, 0);

    /* Nine lines of one L1D set (4 KiB apart) in a cycle: 8 ways hold eight of them. */
    m = fresh();
    sweep(&m, 0, 8 * 4096, 4096, &l1d, &l2);
    sweep(&m, 0, 8 * 4096, 4096, &l1d, &l2);
    expect("8 lines of one set, twice: no L1D miss the second time", l1d, 0);
    m = fresh();
    sweep(&m, 0, 9 * 4096, 4096, &l1d, &l2);
    sweep(&m, 0, 9 * 4096, 4096, &l1d, &l2);
    expect("9 lines of one set, twice: all 9 miss L1D again", l1d, 9);

    /* Least recently used, not first in: A..H, A again, then I evicts B, not A. */
    m = fresh();
    sweep(&m, 0, 8 * 4096, 4096, &l1d, &l2);
    cache_model_access(&m, 0);          /* A: a hit, now the most recent */
    cache_model_access(&m, 8 * 4096);   /* I: evicts B */
    uint64_t before = m.l1d_misses;
    cache_model_access(&m, 0);
    expect("A after I: still in L1D", m.l1d_misses - before, 0);
    cache_model_access(&m, 4096);
    expect("B after I: evicted", m.l1d_misses - before, 1);

    /* 1 MiB fills L2 exactly; 2 MiB in order thrashes it. */
    m = fresh();
    sweep(&m, 0, 1 << 20, 64, &l1d, &l2);
    sweep(&m, 0, 1 << 20, 64, &l1d, &l2);
    expect("1 MiB twice: every line misses L1D", l1d, 16384);
    expect("1 MiB twice: no L2 miss the second time", l2, 0);
    m = fresh();
    sweep(&m, 0, 2 << 20, 64, &l1d, &l2);
    sweep(&m, 0, 2 << 20, 64, &l1d, &l2);
    expect("2 MiB twice: every line misses L2 again", l2, 32768);

    /* An access counts on the line of its first byte. */
    m = fresh();
    cache_model_access(&m, 63);
    cache_model_access(&m, 0);
    expect("bytes 63 and 0 share a line", m.l1d_misses, 1);

    printf("%d failed\n", failures);
    return failures ? 1 : 0;
}
