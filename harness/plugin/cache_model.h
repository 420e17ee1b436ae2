/*
 * The data-cache model of insn_count.c (`cache=on`): per vCPU an L1D of 32 KiB, 8-way, and an L2
 * of 1 MiB, 16-way, with 64-byte lines and true LRU in every set, as QEMU's
 * contrib/plugins/cache.c models a cache (its defaults differ: 16 KiB L1D, 2 MiB L2). Every
 * guest load and store looks its line up in L1; an L1 miss looks it up in L2; a level that
 * misses fills the line, evicting its least recently used one. The levels are neither inclusive
 * nor exclusive (contrib's model does the same), stores allocate like loads, and an access that
 * straddles two lines counts on its first line only. The plugin indexes by guest physical
 * address and leaves MMIO out.
 *
 * TCG's timing models no cache, so this is the ruler for footprint: how many distinct lines a
 * window touches and how often they collide, counted exactly and repeatably, not timed.
 * `cache_model_test.c` checks the model on patterns whose misses are known.
 */
#ifndef SENSEPOOL_CACHE_MODEL_H
#define SENSEPOOL_CACHE_MODEL_H

#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define CACHE_LINE_SHIFT 6
#define CACHE_L1D_BYTES (32u << 10)
#define CACHE_L1D_WAYS 8u
#define CACHE_L2_BYTES (1u << 20)
#define CACHE_L2_WAYS 16u
#define CACHE_NO_LINE UINT64_MAX

/* One level: `sets` sets of `ways` line numbers, each set ordered most recently used first. */
struct cache_level {
    uint32_t sets;
    uint32_t ways;
    uint64_t *lines;
};

/* One vCPU's caches and what they missed so far. */
struct cache_model {
    struct cache_level l1d;
    struct cache_level l2;
    uint64_t l1d_misses;
    uint64_t l2_misses;
};

/* Empty caches of `bytes` bytes and `ways` ways; false if out of memory or not a power of two
 * number of sets. */
static inline bool cache_level_init(struct cache_level *level, uint32_t bytes, uint32_t ways)
{
    uint32_t sets = bytes / (ways << CACHE_LINE_SHIFT);
    if (sets == 0 || (sets & (sets - 1)) != 0)
        return false;
    level->sets = sets;
    level->ways = ways;
    level->lines = malloc(sizeof(uint64_t) * sets * ways);
    if (!level->lines)
        return false;
    for (uint32_t i = 0; i < sets * ways; i++)
        level->lines[i] = CACHE_NO_LINE;
    return true;
}

/* Looks `line` up and makes it the most recently used of its set; true on a hit. A miss fills
 * it in place of the least recently used line. */
static inline bool cache_level_access(struct cache_level *level, uint64_t line)
{
    uint64_t *set = &level->lines[(line & (level->sets - 1)) * level->ways];
    uint32_t way = 0;
    while (way < level->ways && set[way] != line)
        way++;
    bool hit = way < level->ways;
    if (!hit)
        way = level->ways - 1;
    memmove(&set[1], &set[0], sizeof(uint64_t) * way);
    set[0] = line;
    return hit;
}

static inline bool cache_model_init(struct cache_model *model)
{
    memset(model, 0, sizeof *model);
    return cache_level_init(&model->l1d, CACHE_L1D_BYTES, CACHE_L1D_WAYS) &&
           cache_level_init(&model->l2, CACHE_L2_BYTES, CACHE_L2_WAYS);
}

/* One load or store at byte address `addr`. */
static inline void cache_model_access(struct cache_model *model, uint64_t addr)
{
    uint64_t line = addr >> CACHE_LINE_SHIFT;
    if (cache_level_access(&model->l1d, line))
        return;
    model->l1d_misses++;
    if (!cache_level_access(&model->l2, line))
        model->l2_misses++;
}

#endif
