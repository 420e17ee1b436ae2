/*
 * sensepool's QEMU TCG plugin: guest instructions per vCPU, counted between markers.
 *
 * Built by `cargo xtask` with the system C compiler into target/plugin/ and loaded with
 * `-plugin insn_count.so[,breakdown=on] -d plugin -D LOG`. Everything it reports goes to LOG
 * through qemu_plugin_outs, one `sensepool-insns ...` line per fact; harness/src/insns/mod.rs parses
 * them.
 *
 * Counting. Every translated block gets an exec callback that adds the block's instruction
 * count to the counter of the vCPU running it (the vcpu_index QEMU passes), so counts are exact
 * with any number of vCPUs and multi-threaded TCG: each counter is written by one vCPU thread
 * only. (QEMU 7.2's inline counters are one shared location per block, racy across vCPUs.)
 *
 * Markers. The kernel marks windows with `nopl DISP(%rax,%rax,1)` (0f 1f 84 00 + disp32), a
 * multi-byte NOP whose displacement is MARKER_MAGIC | op << 8 | slot. Compilers pad with these
 * NOPs but only with displacement 0, so the magic never appears by accident. At translation the
 * plugin recognises a marker from the instruction's bytes (qemu_plugin_insn_data) and registers
 * an exec callback on it:
 *   op 1 BEGIN slot: this vCPU's window on `slot` opens after the marker;
 *   op 2 END slot:   it closes; its instructions are added to the slot's pending sum;
 *   op 3 PUBLISH:    prints and clears every slot's pending sum (over all vCPUs) as
 *                    `sensepool-insns publish=K slot=S windows=W insns=N vcpu_insns=a/b/..
 *                    waiting=N notifies=A notifies_waiting=B upper_half=U [mmio=.. mmio_waiting=..
 *                    pio=.. pio_waiting=..]`, K counting publishes from 0, in the order the guest
 *                    printed its results;
 *   op 4 POLL:       a poll of the device starts (inside a window);
 *   op 5 EMPTY:      the poll that started at the last POLL found nothing: from that POLL up
 *                    to the next POLL (or END) the window is waiting, not working;
 *   op 6 NOTIFY:     a doorbell write follows (a notification of the device).
 * A window's `insns` is all of it; `waiting` is the part spent in polls that found nothing and
 * in the waits after them (halts, interrupt handlers, the next empty pass), so `insns - waiting`
 * is the work the I/Os took, whatever the device's speed.
 * `upper_half` is the part of `insns` executed at addresses in the upper canonical half (bit 63
 * set): a stock Linux guest's kernel, whose user space (fio, the vDSO) runs in the lower half, so
 * `insns - upper_half` is its user part. A block never crosses a page, so a block is in one half.
 * sensepool's kernel runs identity-mapped in the lower half: its `upper_half` is 0.
 * The block callback runs at block entry and has already counted the whole block, so a marker
 * subtracts the instructions after it in its block: a window counts exactly the instructions
 * after BEGIN up to and including END (an exception in the middle of a block would overcount
 * the rest of that block; interrupts arrive only between blocks).
 *
 * Breakdown (breakdown=on): every block executed inside an open window counts its executions,
 * working (`execs`) or waiting (`wait_execs`; the blocks of a poll that turns out empty move there
 * when its EMPTY marker runs); at exit each block prints
 * `sensepool-insns tb vaddr=0x.. insns=n execs=c wait_execs=w` for xtask to map to the kernel's
 * functions.
 *
 * I/O accesses (io=on): every guest load and store to MMIO (qemu_plugin_hwaddr_is_io) and every
 * port instruction (in, out, ins, outs) inside a window is counted, working or waiting.
 *
 * TLB model (tlb=on): every guest load and store inside an open window goes through a model of
 * QEMU 7.2's softmmu data TLB for one MMU index (accel/tcg/cputlb.c): a direct-mapped table of
 * TLB_ENTRIES entries indexed by virtual page number (CPU_TLB_DYN_DEFAULT_BITS = 8; the table is
 * resized only on a flush, which this kernel does not do while it measures), backed by a fully
 * associative victim TLB of CPU_VTLB_SIZE = 8 entries filled round robin with the evicted
 * entries. A lookup that misses the table but hits the victim swaps the two (victim_tlb_hit); one
 * that misses both is a refill (tlb_fill: a guest page walk in QEMU). The publish line then adds
 * `mem=A tlb_misses=M tlb_fills=F`: what a collision of hot pages would cost, counted, not timed.
 * Accesses that straddle a page are counted on their first page.
 *
 * Cache model (cache=on): every guest load and store, inside a window or not, also goes through
 * a per-vCPU model of an L1D (32 KiB, 8-way) and an L2 (1 MiB, 16-way) with 64-byte lines and
 * LRU sets, indexed by guest physical address (MMIO left out): see cache_model.h. The publish
 * line then adds `mem=A l1d_misses=M l2_misses=N` for the slot's windows: the footprint of a
 * window, which TCG's timing does not model, counted exactly.
 *
 * QEMU 7.2 ships no qemu-plugin.h, so the few API declarations used are below, as in
 * include/qemu/qemu-plugin.h of QEMU 7.2 (plugin API version 1).
 */
#include <inttypes.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cache_model.h"

/* ---- QEMU 7.2 plugin API (version 1), only what this file uses ---- */
#define QEMU_PLUGIN_EXPORT __attribute__((visibility("default")))
#define SENSEPOOL_PLUGIN_API 1

typedef uint64_t qemu_plugin_id_t;
typedef struct qemu_info_t {
    const char *target_name;
    struct {
        int min;
        int cur;
    } version;
    bool system_emulation;
    union {
        struct {
            int smp_vcpus;
            int max_vcpus;
        } system;
    };
} qemu_info_t;
struct qemu_plugin_tb;
struct qemu_plugin_insn;
enum qemu_plugin_cb_flags { QEMU_PLUGIN_CB_NO_REGS = 0 };
typedef void (*qemu_plugin_udata_cb_t)(qemu_plugin_id_t id, void *userdata);
typedef void (*qemu_plugin_vcpu_udata_cb_t)(unsigned int vcpu_index, void *userdata);
typedef void (*qemu_plugin_vcpu_tb_trans_cb_t)(qemu_plugin_id_t id, struct qemu_plugin_tb *tb);
typedef uint32_t qemu_plugin_meminfo_t;
enum qemu_plugin_mem_rw { QEMU_PLUGIN_MEM_R = 1, QEMU_PLUGIN_MEM_W, QEMU_PLUGIN_MEM_RW };
typedef void (*qemu_plugin_vcpu_mem_cb_t)(unsigned int vcpu_index, qemu_plugin_meminfo_t info,
                                          uint64_t vaddr, void *userdata);
struct qemu_plugin_hwaddr;

void qemu_plugin_register_vcpu_tb_trans_cb(qemu_plugin_id_t id, qemu_plugin_vcpu_tb_trans_cb_t cb);
void qemu_plugin_register_vcpu_tb_exec_cb(struct qemu_plugin_tb *tb, qemu_plugin_vcpu_udata_cb_t cb,
                                          enum qemu_plugin_cb_flags flags, void *userdata);
void qemu_plugin_register_vcpu_insn_exec_cb(struct qemu_plugin_insn *insn,
                                            qemu_plugin_vcpu_udata_cb_t cb,
                                            enum qemu_plugin_cb_flags flags, void *userdata);
void qemu_plugin_register_vcpu_mem_cb(struct qemu_plugin_insn *insn, qemu_plugin_vcpu_mem_cb_t cb,
                                      enum qemu_plugin_cb_flags flags, enum qemu_plugin_mem_rw rw,
                                      void *userdata);
void qemu_plugin_register_atexit_cb(qemu_plugin_id_t id, qemu_plugin_udata_cb_t cb, void *userdata);
size_t qemu_plugin_tb_n_insns(const struct qemu_plugin_tb *tb);
uint64_t qemu_plugin_tb_vaddr(const struct qemu_plugin_tb *tb);
struct qemu_plugin_insn *qemu_plugin_tb_get_insn(const struct qemu_plugin_tb *tb, size_t idx);
const void *qemu_plugin_insn_data(const struct qemu_plugin_insn *insn);
size_t qemu_plugin_insn_size(const struct qemu_plugin_insn *insn);
void qemu_plugin_outs(const char *string);
struct qemu_plugin_hwaddr *qemu_plugin_get_hwaddr(qemu_plugin_meminfo_t info, uint64_t vaddr);
bool qemu_plugin_hwaddr_is_io(const struct qemu_plugin_hwaddr *haddr);
bool qemu_plugin_mem_is_store(qemu_plugin_meminfo_t info);
uint64_t qemu_plugin_hwaddr_phys_addr(const struct qemu_plugin_hwaddr *haddr);

QEMU_PLUGIN_EXPORT int qemu_plugin_version = SENSEPOOL_PLUGIN_API;

/* ---- the marker contract with kernel/src/arch/insn_marker.rs ---- */
#define MARKER_MAGIC 0x5e450000u
#define MARKER_BEGIN 1
#define MARKER_END 2
#define MARKER_PUBLISH 3
#define MARKER_POLL 4
#define MARKER_EMPTY 5
#define MARKER_NOTIFY 6
#define SLOTS 16

/* What a window counts besides instructions, working ([0]) or waiting ([1]). */
enum io_kind { IO_NOTIFIES, IO_MMIO, IO_PIO, IO_KINDS };
/* Blocks a poll may run before its EMPTY marker, remembered for the breakdown. */
#define POLL_BLOCKS 4096

/* ---- the softmmu TLB model (tlb=on) ---- */
#define TLB_BITS 8
#define TLB_ENTRIES (1u << TLB_BITS)
#define VTLB_ENTRIES 8
#define PAGE_SHIFT 12
#define NO_PAGE UINT64_MAX

/* One vCPU's state; only its own vCPU thread writes it (PUBLISH reads the others' sums while
 * they sit outside any window), padded so two vCPUs never share a cache line. */
struct vcpu {
    uint64_t insns;            /* every instruction this vCPU executed */
    uint64_t upper;            /* of those, the ones in the upper half of the address space */
    uint64_t window_upper_start; /* `upper` just after the open window's BEGIN */
    uint64_t pending_upper[SLOTS];
    uint64_t window_start;     /* `insns` just after the open window's BEGIN */
    int open_slot;             /* -1 when no window is open */
    bool waiting;              /* the open window is waiting (after an EMPTY) */
    uint64_t wait_start;       /* `insns` where the waiting began (the empty poll's POLL) */
    uint64_t poll_start;       /* `insns` at the last POLL (or BEGIN) */
    uint64_t window_waiting;   /* the open window's waiting instructions so far */
    uint64_t io[2][IO_KINDS];  /* the open window's I/O counts, working and waiting */
    uint64_t pending_waiting[SLOTS];
    uint64_t pending_io[SLOTS][2][IO_KINDS];
    /* breakdown=on: blocks run since the last POLL, moved to waiting by an EMPTY */
    struct block *poll_blocks[POLL_BLOCKS];
    unsigned int n_poll_blocks;
    uint64_t pending[SLOTS];   /* closed windows' instructions, not yet published */
    uint64_t windows[SLOTS];   /* closed windows, not yet published */
    /* tlb=on: the model's state and the open window's counts, then per slot as above */
    uint64_t tlb[TLB_ENTRIES];
    uint64_t vtlb[VTLB_ENTRIES];
    unsigned int vtlb_next;
    uint64_t mem, tlb_misses, tlb_fills;
    uint64_t mem_start, misses_start, fills_start;
    uint64_t pending_mem[SLOTS], pending_misses[SLOTS], pending_fills[SLOTS];
    /* cache=on: the model, the open window's starting counts, then per slot */
    struct cache_model *cache;
    uint64_t l1d_start, l2_start;
    uint64_t pending_l1d[SLOTS], pending_l2[SLOTS];
} __attribute__((aligned(64)));

struct block {
    uint64_t vaddr;
    uint64_t n_insns;
    uint64_t upper_insns; /* n_insns if the block is in the upper half, else 0 */
    uint64_t execs;      /* working executions inside a window, all vCPUs (atomic) */
    uint64_t wait_execs; /* waiting executions inside a window (atomic) */
    struct block *next;
};

struct marker {
    int op;
    int slot;
    uint64_t after; /* instructions after the marker in its block */
    uint64_t after_upper; /* `after` if the block is in the upper half, else 0 */
};

static struct vcpu *vcpus;
static int n_vcpus;
static bool breakdown;
static bool tlb_model;
static bool cache_model;
static bool io_count;
static uint64_t publishes;
static uint64_t anomalies;
static struct block *blocks; /* every translated block, in breakdown mode (atomic push) */

static void outf(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void outf(const char *fmt, ...)
{
    char line[1024];
    va_list args;
    va_start(args, fmt);
    vsnprintf(line, sizeof line, fmt, args);
    va_end(args);
    qemu_plugin_outs(line);
}

static struct vcpu *vcpu_of(unsigned int index)
{
    return index < (unsigned int)n_vcpus ? &vcpus[index] : NULL;
}

static void anomaly(unsigned int vcpu_index, const char *what)
{
    __atomic_fetch_add(&anomalies, 1, __ATOMIC_RELAXED);
    outf("sensepool-insns anomaly vcpu=%u %s\n", vcpu_index, what);
}

static void block_exec(unsigned int vcpu_index, void *userdata)
{
    struct block *block = userdata;
    struct vcpu *v = vcpu_of(vcpu_index);
    if (!v)
        return;
    v->insns += block->n_insns;
    v->upper += block->upper_insns;
    if (!breakdown || v->open_slot < 0)
        return;
    if (v->waiting) {
        __atomic_fetch_add(&block->wait_execs, 1, __ATOMIC_RELAXED);
        return;
    }
    __atomic_fetch_add(&block->execs, 1, __ATOMIC_RELAXED);
    if (v->n_poll_blocks < POLL_BLOCKS)
        v->poll_blocks[v->n_poll_blocks] = block;
    v->n_poll_blocks++;
}

static void publish(unsigned int vcpu_index)
{
    uint64_t k = __atomic_fetch_add(&publishes, 1, __ATOMIC_SEQ_CST);
    for (int i = 0; i < n_vcpus; i++) {
        if (vcpus[i].open_slot >= 0)
            anomaly(vcpu_index, "publish while another vCPU's window is open");
    }
    for (int slot = 0; slot < SLOTS; slot++) {
        uint64_t total = 0, windows = 0, mem = 0, misses = 0, fills = 0, l1d = 0, l2 = 0;
        uint64_t waiting = 0, upper = 0, io[2][IO_KINDS] = {{0}};
        char per_vcpu[256] = "";
        size_t used = 0;
        for (int i = 0; i < n_vcpus; i++) {
            uint64_t n = __atomic_exchange_n(&vcpus[i].pending[slot], 0, __ATOMIC_SEQ_CST);
            windows += __atomic_exchange_n(&vcpus[i].windows[slot], 0, __ATOMIC_SEQ_CST);
            total += n;
            mem += __atomic_exchange_n(&vcpus[i].pending_mem[slot], 0, __ATOMIC_SEQ_CST);
            misses += __atomic_exchange_n(&vcpus[i].pending_misses[slot], 0, __ATOMIC_SEQ_CST);
            fills += __atomic_exchange_n(&vcpus[i].pending_fills[slot], 0, __ATOMIC_SEQ_CST);
            l1d += __atomic_exchange_n(&vcpus[i].pending_l1d[slot], 0, __ATOMIC_SEQ_CST);
            l2 += __atomic_exchange_n(&vcpus[i].pending_l2[slot], 0, __ATOMIC_SEQ_CST);
            waiting += __atomic_exchange_n(&vcpus[i].pending_waiting[slot], 0, __ATOMIC_SEQ_CST);
            upper += __atomic_exchange_n(&vcpus[i].pending_upper[slot], 0, __ATOMIC_SEQ_CST);
            for (int w = 0; w < 2; w++)
                for (int kind = 0; kind < IO_KINDS; kind++)
                    io[w][kind] += __atomic_exchange_n(&vcpus[i].pending_io[slot][w][kind], 0,
                                                       __ATOMIC_SEQ_CST);
            if (used < sizeof per_vcpu)
                used += snprintf(per_vcpu + used, sizeof per_vcpu - used, "%s%" PRIu64,
                                 i ? "/" : "", n);
        }
        char models[512] = "";
        size_t at = 0;
        at += snprintf(models + at, sizeof models - at,
                       " waiting=%" PRIu64 " notifies=%" PRIu64 " notifies_waiting=%" PRIu64
                       " upper_half=%" PRIu64,
                       waiting, io[0][IO_NOTIFIES], io[1][IO_NOTIFIES], upper);
        if (io_count)
            at += snprintf(models + at, sizeof models - at,
                           " mmio=%" PRIu64 " mmio_waiting=%" PRIu64 " pio=%" PRIu64
                           " pio_waiting=%" PRIu64,
                           io[0][IO_MMIO], io[1][IO_MMIO], io[0][IO_PIO], io[1][IO_PIO]);
        if (tlb_model || cache_model)
            at += snprintf(models + at, sizeof models - at, " mem=%" PRIu64, mem);
        if (tlb_model)
            at += snprintf(models + at, sizeof models - at,
                           " tlb_misses=%" PRIu64 " tlb_fills=%" PRIu64, misses, fills);
        if (cache_model)
            snprintf(models + at, sizeof models - at, " l1d_misses=%" PRIu64 " l2_misses=%" PRIu64,
                     l1d, l2);
        if (windows)
            outf("sensepool-insns publish=%" PRIu64 " slot=%d windows=%" PRIu64
                 " insns=%" PRIu64 " vcpu_insns=%s%s\n",
                 k, slot, windows, total, per_vcpu, models);
    }
    outf("sensepool-insns published=%" PRIu64 "\n", k);
}

static void empty_poll_blocks(unsigned int vcpu_index, struct vcpu *v);

static void marker_exec(unsigned int vcpu_index, void *userdata)
{
    const struct marker *m = userdata;
    struct vcpu *v = vcpu_of(vcpu_index);
    if (!v)
        return;
    uint64_t now = v->insns - m->after;
    uint64_t now_upper = v->upper - m->after_upper;
    switch (m->op) {
    case MARKER_BEGIN:
        if (v->open_slot >= 0)
            anomaly(vcpu_index, "BEGIN inside an open window");
        v->open_slot = m->slot;
        v->window_start = now;
        v->window_upper_start = now_upper;
        v->waiting = false;
        v->poll_start = now;
        v->window_waiting = 0;
        v->n_poll_blocks = 0;
        memset(v->io, 0, sizeof v->io);
        v->mem_start = v->mem;
        v->misses_start = v->tlb_misses;
        v->fills_start = v->tlb_fills;
        if (v->cache) {
            v->l1d_start = v->cache->l1d_misses;
            v->l2_start = v->cache->l2_misses;
        }
        break;
    case MARKER_END:
        if (v->open_slot != m->slot) {
            anomaly(vcpu_index, "END without a matching BEGIN");
            v->open_slot = -1;
            break;
        }
        if (v->waiting)
            v->window_waiting += now - v->wait_start;
        v->waiting = false;
        __atomic_fetch_add(&v->pending[m->slot], now - v->window_start, __ATOMIC_SEQ_CST);
        __atomic_fetch_add(&v->pending_upper[m->slot], now_upper - v->window_upper_start,
                           __ATOMIC_SEQ_CST);
        __atomic_fetch_add(&v->pending_waiting[m->slot], v->window_waiting, __ATOMIC_SEQ_CST);
        for (int w = 0; w < 2; w++)
            for (int kind = 0; kind < IO_KINDS; kind++)
                __atomic_fetch_add(&v->pending_io[m->slot][w][kind], v->io[w][kind],
                                   __ATOMIC_SEQ_CST);
        __atomic_fetch_add(&v->windows[m->slot], 1, __ATOMIC_SEQ_CST);
        __atomic_fetch_add(&v->pending_mem[m->slot], v->mem - v->mem_start, __ATOMIC_SEQ_CST);
        __atomic_fetch_add(&v->pending_misses[m->slot], v->tlb_misses - v->misses_start,
                           __ATOMIC_SEQ_CST);
        __atomic_fetch_add(&v->pending_fills[m->slot], v->tlb_fills - v->fills_start,
                           __ATOMIC_SEQ_CST);
        if (v->cache) {
            __atomic_fetch_add(&v->pending_l1d[m->slot], v->cache->l1d_misses - v->l1d_start,
                               __ATOMIC_SEQ_CST);
            __atomic_fetch_add(&v->pending_l2[m->slot], v->cache->l2_misses - v->l2_start,
                               __ATOMIC_SEQ_CST);
        }
        v->open_slot = -1;
        break;
    case MARKER_PUBLISH:
        publish(vcpu_index);
        break;
    case MARKER_POLL:
        if (v->open_slot < 0)
            break;
        if (v->waiting)
            v->window_waiting += now - v->wait_start;
        v->waiting = false;
        v->poll_start = now;
        v->n_poll_blocks = 0;
        break;
    case MARKER_EMPTY:
        if (v->open_slot < 0 || v->waiting)
            break;
        v->waiting = true;
        v->wait_start = v->poll_start;
        empty_poll_blocks(vcpu_index, v);
        break;
    case MARKER_NOTIFY:
        if (v->open_slot >= 0)
            v->io[v->waiting][IO_NOTIFIES]++;
        break;
    }
}

/* breakdown=on: the blocks the poll ran before its EMPTY marker were counted as working; they
 * were waiting. (The block holding POLL counted whole, the one holding EMPTY too: block
 * granularity, as everywhere in the breakdown.) */
static void empty_poll_blocks(unsigned int vcpu_index, struct vcpu *v)
{
    if (!breakdown)
        return;
    if (v->n_poll_blocks > POLL_BLOCKS)
        anomaly(vcpu_index, "an empty poll ran more blocks than the breakdown remembers");
    unsigned int n = v->n_poll_blocks < POLL_BLOCKS ? v->n_poll_blocks : POLL_BLOCKS;
    for (unsigned int i = 0; i < n; i++) {
        __atomic_fetch_sub(&v->poll_blocks[i]->execs, 1, __ATOMIC_RELAXED);
        __atomic_fetch_add(&v->poll_blocks[i]->wait_execs, 1, __ATOMIC_RELAXED);
    }
    v->n_poll_blocks = 0;
}

/* One access through the softmmu TLB model. */
static void tlb_access(struct vcpu *v, uint64_t vaddr)
{
    uint64_t page = vaddr >> PAGE_SHIFT;
    uint64_t *entry = &v->tlb[page & (TLB_ENTRIES - 1)];
    if (*entry == page)
        return;
    v->tlb_misses++;
    for (unsigned int i = 0; i < VTLB_ENTRIES; i++) {
        if (v->vtlb[i] == page) {
            v->vtlb[i] = *entry;
            *entry = page;
            return;
        }
    }
    v->tlb_fills++;
    v->vtlb[v->vtlb_next++ % VTLB_ENTRIES] = *entry;
    *entry = page;
}

/* One guest load or store through the models (see the comment at the top). They run outside
 * windows too, so a window starts with the TLB and caches the code before it left. */
static void mem_access(unsigned int vcpu_index, qemu_plugin_meminfo_t info, uint64_t vaddr,
                       void *userdata)
{
    (void)userdata;
    struct vcpu *v = vcpu_of(vcpu_index);
    if (!v)
        return;
    v->mem++;
    if (v->cache || io_count) {
        struct qemu_plugin_hwaddr *hw = qemu_plugin_get_hwaddr(info, vaddr);
        bool is_io = hw && qemu_plugin_hwaddr_is_io(hw);
        if (is_io && io_count && v->open_slot >= 0)
            v->io[v->waiting][IO_MMIO]++;
        if (!is_io && v->cache)
            cache_model_access(v->cache, hw ? qemu_plugin_hwaddr_phys_addr(hw) : vaddr);
    }
    if (tlb_model)
        tlb_access(v, vaddr);
}

/* A port instruction (io=on) ran. */
static void port_exec(unsigned int vcpu_index, void *userdata)
{
    (void)userdata;
    struct vcpu *v = vcpu_of(vcpu_index);
    if (v && v->open_slot >= 0)
        v->io[v->waiting][IO_PIO]++;
}

/* Whether an instruction is an x86 port access: in/out (e4-e7, ec-ef) or ins/outs (6c-6f),
 * after any legacy prefixes and a REX prefix. */
static bool is_port_insn(const uint8_t *bytes, size_t len)
{
    size_t i = 0;
    while (i < len && (bytes[i] == 0x66 || bytes[i] == 0x67 || bytes[i] == 0xf2 ||
                       bytes[i] == 0xf3 || bytes[i] == 0xf0 || bytes[i] == 0x2e ||
                       bytes[i] == 0x36 || bytes[i] == 0x3e || bytes[i] == 0x26 ||
                       bytes[i] == 0x64 || bytes[i] == 0x65))
        i++;
    if (i < len && (bytes[i] & 0xf0) == 0x40)
        i++;
    if (i >= len)
        return false;
    uint8_t op = bytes[i];
    return (op >= 0xe4 && op <= 0xe7) || (op >= 0xec && op <= 0xef) || (op >= 0x6c && op <= 0x6f);
}

/* The marker an instruction is, or 0: `0f 1f 84 00` + little-endian MARKER_MAGIC | op << 8 | slot. */
static int decode_marker(const uint8_t *bytes, size_t len, int *slot)
{
    static const uint8_t nopl[4] = {0x0f, 0x1f, 0x84, 0x00};
    if (len != 8 || memcmp(bytes, nopl, 4) != 0)
        return 0;
    uint32_t disp = (uint32_t)bytes[4] | (uint32_t)bytes[5] << 8 | (uint32_t)bytes[6] << 16 |
                    (uint32_t)bytes[7] << 24;
    if ((disp & 0xffff0000u) != MARKER_MAGIC)
        return 0;
    int op = (int)(disp >> 8 & 0xff);
    *slot = (int)(disp & 0xff);
    if (op < MARKER_BEGIN || op > MARKER_NOTIFY || *slot >= SLOTS)
        return 0;
    return op;
}

static void tb_trans(qemu_plugin_id_t id, struct qemu_plugin_tb *tb)
{
    (void)id;
    size_t n = qemu_plugin_tb_n_insns(tb);
    struct block *block = calloc(1, sizeof *block);
    if (!block)
        return;
    block->vaddr = qemu_plugin_tb_vaddr(tb);
    block->n_insns = n;
    bool upper = block->vaddr >> 63;
    block->upper_insns = upper ? n : 0;
    if (breakdown) {
        block->next = __atomic_load_n(&blocks, __ATOMIC_SEQ_CST);
        while (!__atomic_compare_exchange_n(&blocks, &block->next, block, false,
                                            __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST))
            ;
    }
    /* Blocks are never freed: QEMU may run a translation until exit. */
    qemu_plugin_register_vcpu_tb_exec_cb(tb, block_exec, QEMU_PLUGIN_CB_NO_REGS, block);
    for (size_t i = 0; i < n; i++) {
        struct qemu_plugin_insn *insn = qemu_plugin_tb_get_insn(tb, i);
        if (tlb_model || cache_model || io_count)
            qemu_plugin_register_vcpu_mem_cb(insn, mem_access, QEMU_PLUGIN_CB_NO_REGS,
                                             QEMU_PLUGIN_MEM_RW, NULL);
        const uint8_t *bytes = qemu_plugin_insn_data(insn);
        size_t size = qemu_plugin_insn_size(insn);
        if (io_count && is_port_insn(bytes, size))
            qemu_plugin_register_vcpu_insn_exec_cb(insn, port_exec, QEMU_PLUGIN_CB_NO_REGS, NULL);
        int slot = 0;
        int op = decode_marker(bytes, size, &slot);
        if (!op)
            continue;
        struct marker *m = calloc(1, sizeof *m);
        if (!m)
            continue;
        m->op = op;
        m->slot = slot;
        m->after = n - i - 1;
        m->after_upper = upper ? m->after : 0;
        qemu_plugin_register_vcpu_insn_exec_cb(insn, marker_exec, QEMU_PLUGIN_CB_NO_REGS, m);
    }
}

static void at_exit(qemu_plugin_id_t id, void *userdata)
{
    (void)id;
    (void)userdata;
    if (breakdown) {
        for (struct block *b = blocks; b; b = b->next) {
            if (b->execs || b->wait_execs)
                outf("sensepool-insns tb vaddr=0x%" PRIx64 " insns=%" PRIu64 " execs=%" PRIu64
                     " wait_execs=%" PRIu64 "\n",
                     b->vaddr, b->n_insns, b->execs, b->wait_execs);
        }
    }
    uint64_t total = 0;
    for (int i = 0; i < n_vcpus; i++)
        total += vcpus[i].insns;
    outf("sensepool-insns exit total=%" PRIu64 " publishes=%" PRIu64 " anomalies=%" PRIu64 "\n",
         total, publishes, anomalies);
}

QEMU_PLUGIN_EXPORT int qemu_plugin_install(qemu_plugin_id_t id, const qemu_info_t *info, int argc,
                                           char **argv)
{
    if (info->version.cur < SENSEPOOL_PLUGIN_API || info->version.min > SENSEPOOL_PLUGIN_API) {
        fprintf(stderr,
                "sensepool insn_count: built for QEMU plugin API %d, QEMU offers %d..%d\n",
                SENSEPOOL_PLUGIN_API, info->version.min, info->version.cur);
        return -1;
    }
    if (!info->system_emulation) {
        fprintf(stderr, "sensepool insn_count: needs system emulation\n");
        return -1;
    }
    for (int i = 0; i < argc; i++) {
        if (strcmp(argv[i], "breakdown=on") == 0) {
            breakdown = true;
        } else if (strcmp(argv[i], "tlb=on") == 0) {
            tlb_model = true;
        } else if (strcmp(argv[i], "cache=on") == 0) {
            cache_model = true;
        } else if (strcmp(argv[i], "io=on") == 0) {
            io_count = true;
        } else if (strcmp(argv[i], "breakdown=off") != 0 && strcmp(argv[i], "tlb=off") != 0 &&
                   strcmp(argv[i], "cache=off") != 0 && strcmp(argv[i], "io=off") != 0) {
            fprintf(stderr,
                    "sensepool insn_count: unknown argument '%s' (breakdown=on|off, tlb=on|off, "
                    "cache=on|off, io=on|off)\n",
                    argv[i]);
            return -1;
        }
    }
    n_vcpus = info->system.max_vcpus > 0 ? info->system.max_vcpus : 1;
    vcpus = aligned_alloc(64, sizeof *vcpus * (size_t)n_vcpus);
    if (!vcpus)
        return -1;
    memset(vcpus, 0, sizeof *vcpus * (size_t)n_vcpus);
    for (int i = 0; i < n_vcpus; i++) {
        vcpus[i].open_slot = -1;
        for (unsigned int e = 0; e < TLB_ENTRIES; e++)
            vcpus[i].tlb[e] = NO_PAGE;
        for (unsigned int e = 0; e < VTLB_ENTRIES; e++)
            vcpus[i].vtlb[e] = NO_PAGE;
        if (cache_model) {
            vcpus[i].cache = malloc(sizeof *vcpus[i].cache);
            if (!vcpus[i].cache || !cache_model_init(vcpus[i].cache)) {
                fprintf(stderr, "sensepool insn_count: no memory for the cache model\n");
                return -1;
            }
        }
    }
    outf("sensepool-insns start api=%d vcpus=%d breakdown=%s tlb=%s cache=%s io=%s\n",
         info->version.cur, n_vcpus, breakdown ? "on" : "off", tlb_model ? "on" : "off",
         cache_model ? "on" : "off", io_count ? "on" : "off");
    qemu_plugin_register_vcpu_tb_trans_cb(id, tb_trans);
    qemu_plugin_register_atexit_cb(id, at_exit, NULL);
    return 0;
}
