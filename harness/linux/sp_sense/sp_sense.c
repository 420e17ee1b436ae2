// SPDX-License-Identifier: GPL-2.0
/*
 * sp_sense: the 2008 sense-buffer experiment (linux-scsi, "use dynamically allocated sense
 * buffer") on a stock kernel's own SLUB and mempool, for `cargo xtask bench linux --case sense`.
 *
 * The cache is made as the midlayer makes scsi_sense_cache (drivers/scsi/scsi_lib.c):
 * kmem_cache_create_usercopy(name, SCSI_SENSE_BUFFERSIZE = 96, 0, SLAB_HWCACHE_ALIGN, 0, 96,
 * NULL); a usercopy cache is never merged with another. Each window gets a fresh cache, so no
 * mode inherits another's slabs and the rotation order cannot change a count.
 *
 * A ring of `iodepth` commands per host: each step completes the oldest command (its buffer goes
 * back) and submits a new one in its slot (it takes a buffer), `n` steps per host per round.
 * With touch=zero every new buffer is zeroed (the 2.6.24 midlayer's scsi_init_cmd_errh); with
 * touch=error it is written only when a command fails, and these commands never fail, so the
 * loop never touches it. Modes:
 *   static          one buffer per tag, taken at set-up (2008's baseline; blk-mq's per-request
 *                   buffer since 3.17): the loop takes and gives back nothing
 *   slab            kmem_cache_alloc(GFP_ATOMIC) / kmem_cache_free per command
 *   slab+idle:K     slab, with K more objects allocated before the ring and held for the round
 *   mempool:N       mempool_create_slab_pool(N) per host, mempool_alloc(GFP_ATOMIC) /
 *                   mempool_free per command
 * hosts=H rings share the one cache, each with its own mempool; cpus=2 runs the same rings on
 * CPU 1 too, at the same time (a competing user of the same cache), each CPU's thread pinned.
 * fail=P fails a GFP_ATOMIC allocation attempt with probability P before it reaches
 * kmem_cache_alloc, as failslab's should_failslab would with its default ignore-gfp-wait=Y
 * (Debian's kernels have no fault injection): one draw per
 * attempt in every mode, the mempool's drawn in its pool->alloc, which mempool_alloc calls once
 * before it takes from the reserve (GFP_ATOMIC has no retry). A command whose allocation fails
 * retries at once (`retries`); with fail=0 the mempools use Linux's own mempool_alloc_slab.
 *
 * The timed part runs with interrupts off, between instruction-count markers of xtask's TCG
 * plugin (harness/plugin/insn_count.c: `nopl DISP(%rax,%rax,1)`, DISP = 0x5e450000 | op << 8 |
 * slot; a no-op without the plugin) on the mode's slot, and every window is published before its
 * line is printed, so the n-th line is the plugin's n-th publish. Odd rounds run `n_short`
 * commands, so two rounds' counts differ only by commands. One line per window:
 *
 *   sp_sense: round=R mode=M slot=S n=N hosts=H cpus=C iodepth=D touch=T fail_ppm=F
 *             ns=T0 cpu1_ns=T1 retries=X injected=Y ring_slabs=Z offslab_frees=F probe=P idle=I
 *
 * ns is CPU 0's window, cpu1_ns CPU 1's (0 with cpus=1); retries and injected are summed over
 * CPUs; ring_slabs is how many slab pages CPU 0's in-flight buffers sat in when its loop ended;
 * offslab_frees is how many of P more commands (an untimed probe after the window, on CPU 0)
 * gave back a buffer whose slab was not the one the CPU last allocated from: SLUB's active
 * slab, so those frees took __slab_free rather than the per-CPU fast path (do_slab_free's
 * `slab == c->slab` test), the allocator's own work that depends on where the in-flight
 * buffers sit against slab boundaries;
 * idle is the objects held outside the rings (idle objects, reserve elements, tag buffers).
 * The work happens at load time and the load then succeeds (busybox's insmod retries a failed
 * finit_module with init_module, which would run it twice); the init script unloads it.
 */
#include <linux/atomic.h>
#include <linux/completion.h>
#include <linux/cpumask.h>
#include <linux/irqflags.h>
#include <linux/kthread.h>
#include <linux/ktime.h>
#include <linux/mempool.h>
#include <linux/mm.h>
#include <linux/module.h>
#include <linux/slab.h>
#include <linux/string.h>

#define SP_SENSE_BUFFERSIZE 96 /* SCSI_SENSE_BUFFERSIZE, include/scsi/scsi_cmnd.h */
#define SP_MAX_MODES 16	       /* the plugin's slots */
#define SP_MAX_HOSTS 64
#define SP_MAX_IODEPTH 4096
#define SP_MAX_CPUS 2
#define SP_MAX_IDLE 1000000
/* Consecutive failed attempts after which a command gives up (a real shortage, not a draw). */
#define SP_MAX_RETRIES 1000000

static char *modes = "static,slab,mempool:1,mempool:2,slab+idle:1519,mempool:1519";
module_param(modes, charp, 0444);
MODULE_PARM_DESC(modes, "comma-separated: static, slab, slab+idle:K, mempool:N (at most 16)");
static char *touch = "zero";
module_param(touch, charp, 0444);
MODULE_PARM_DESC(touch, "zero (memset every new buffer) or error (never touched)");
static char *fail = "0";
module_param(fail, charp, 0444);
MODULE_PARM_DESC(fail, "probability an allocation attempt fails, 0 to 1, six decimals at most");
static unsigned int hosts = 1;
module_param(hosts, uint, 0444);
static unsigned int cpus = 1;
module_param(cpus, uint, 0444);
static unsigned int iodepth = 32;
module_param(iodepth, uint, 0444);
static unsigned long n = 1000000;
module_param(n, ulong, 0444);
MODULE_PARM_DESC(n, "commands per host and CPU in an even round");
static unsigned long n_short;
module_param(n_short, ulong, 0444);
MODULE_PARM_DESC(n_short, "commands per host and CPU in an odd round (default n/2)");
static unsigned int rounds = 6;
module_param(rounds, uint, 0444);
static unsigned long seed = 1;
module_param(seed, ulong, 0444);

enum sp_kind { SP_STATIC, SP_SLAB, SP_MEMPOOL };

struct sp_mode {
	enum sp_kind kind;
	unsigned long count; /* idle objects (slab) or reserve elements (mempool) */
	char name[32];
};

static struct sp_mode mode_list[SP_MAX_MODES];
static unsigned int nr_modes;
static u32 fail_ppm;
static bool touch_zero;

/* One host's ring on one CPU. */
struct sp_ring {
	struct kmem_cache *cache;
	void **slot;	/* the buffer each in-flight command holds (NULL: empty slot) */
	void **tag_buf; /* static: each tag's own buffer */
	mempool_t *pool;
	u64 rng;
	unsigned long retries, injected;
	unsigned int head;
};

/* One CPU's share of a window. */
struct sp_cpu {
	const struct sp_mode *mode;
	struct kmem_cache *cache;
	unsigned int index, slot;
	unsigned long len;
	atomic_t *ready;
	struct completion done;
	struct sp_ring rings[SP_MAX_HOSTS];
	u64 ns;
	unsigned long retries, injected, ring_slabs, offslab_frees, idle;
	int err;
};

/* ---- the instruction-count markers (the plugin decodes the slot from the displacement) ---- */
#define SP_MARK(op, s) asm volatile("nopl %c0(%%rax,%%rax,1)" ::"i"(0x5e450000u | ((op) << 8) | (s)) : "memory")
#define SP_SLOTS(op)                                                                    \
	switch (slot) {                                                                 \
	case 0: SP_MARK(op, 0); break; case 1: SP_MARK(op, 1); break;                   \
	case 2: SP_MARK(op, 2); break; case 3: SP_MARK(op, 3); break;                   \
	case 4: SP_MARK(op, 4); break; case 5: SP_MARK(op, 5); break;                   \
	case 6: SP_MARK(op, 6); break; case 7: SP_MARK(op, 7); break;                   \
	case 8: SP_MARK(op, 8); break; case 9: SP_MARK(op, 9); break;                   \
	case 10: SP_MARK(op, 10); break; case 11: SP_MARK(op, 11); break;               \
	case 12: SP_MARK(op, 12); break; case 13: SP_MARK(op, 13); break;               \
	case 14: SP_MARK(op, 14); break; case 15: SP_MARK(op, 15); break;               \
	}

static __always_inline void sp_window_begin(unsigned int slot) { SP_SLOTS(1) }
static __always_inline void sp_window_end(unsigned int slot) { SP_SLOTS(2) }
static noinline void sp_publish(void) { SP_MARK(3, 0); }

/* ---- failslab's draw, one per allocation attempt ---- */
static __always_inline bool sp_draw_fails(struct sp_ring *r)
{
	/* xorshift64: the ring's own stream, so CPUs never share a generator. */
	r->rng ^= r->rng << 13;
	r->rng ^= r->rng >> 7;
	r->rng ^= r->rng << 17;
	if ((u32)(r->rng % 1000000) >= fail_ppm)
		return false;
	r->injected++;
	return true;
}

/* pool->alloc with fail > 0: the draw, then what mempool_alloc_slab does. As failslab with its
 * default ignore-gfp-wait=Y, only allocations that may not sleep draw: mempool_create's
 * GFP_KERNEL prefill never fails by injection. */
static void *sp_pool_alloc(gfp_t gfp, void *data)
{
	struct sp_ring *r = data;

	if (!gfpflags_allow_blocking(gfp) && sp_draw_fails(r))
		return NULL;
	return kmem_cache_alloc(r->cache, gfp);
}

static void sp_pool_free(void *element, void *data)
{
	struct sp_ring *r = data;

	kmem_cache_free(r->cache, element);
}

/* ---- the per-command path, one copy per (mode kind, failing, touch) ---- */
static __always_inline void *sp_take(struct sp_ring *r, unsigned int tag, enum sp_kind kind,
				     bool failing)
{
	unsigned long tries;
	void *buf;

	if (kind == SP_STATIC)
		return r->tag_buf[tag];
	for (tries = 0; tries < SP_MAX_RETRIES; tries++) {
		if (kind == SP_SLAB) {
			buf = (failing && sp_draw_fails(r)) ? NULL :
							      kmem_cache_alloc(r->cache, GFP_ATOMIC);
		} else {
			buf = mempool_alloc(r->pool, GFP_ATOMIC);
		}
		if (likely(buf))
			return buf;
		r->retries++;
	}
	return NULL;
}

static __always_inline void sp_give(struct sp_ring *r, void *buf, enum sp_kind kind)
{
	if (kind == SP_SLAB)
		kmem_cache_free(r->cache, buf);
	else if (kind == SP_MEMPOOL)
		mempool_free(buf, r->pool);
}

/* `len` steps on every ring; false if a command could not get a buffer. */
static __always_inline bool sp_loop(struct sp_ring *rings, unsigned int nr_rings,
				    unsigned long len, enum sp_kind kind, bool failing, bool zero)
{
	unsigned long step;
	unsigned int h;

	for (step = 0; step < len; step++) {
		for (h = 0; h < nr_rings; h++) {
			struct sp_ring *r = &rings[h];
			void *old = r->slot[r->head];
			void *buf;

			if (old)
				sp_give(r, old, kind);
			buf = sp_take(r, r->head, kind, failing);
			if (unlikely(!buf))
				return false;
			if (zero)
				memset(buf, 0, SP_SENSE_BUFFERSIZE);
			r->slot[r->head] = buf;
			if (++r->head == iodepth)
				r->head = 0;
		}
	}
	return true;
}

#define SP_LOOP(kind) \
	(failing ? (zero ? sp_loop(rings, nr, len, kind, true, true) : \
			   sp_loop(rings, nr, len, kind, true, false)) : \
		   (zero ? sp_loop(rings, nr, len, kind, false, true) : \
			   sp_loop(rings, nr, len, kind, false, false)))

static noinline bool sp_run(struct sp_ring *rings, unsigned int nr, unsigned long len,
			    enum sp_kind kind)
{
	bool failing = fail_ppm != 0, zero = touch_zero;

	switch (kind) {
	case SP_STATIC:
		return SP_LOOP(SP_STATIC);
	case SP_SLAB:
		return SP_LOOP(SP_SLAB);
	default:
		return SP_LOOP(SP_MEMPOOL);
	}
}

/* Commands of the untimed probe after a window (SP_PROBE_STEPS steps per ring). */
#define SP_PROBE_STEPS 3200

/*
 * The probe: SP_PROBE_STEPS more steps of the same ring, outside the window, counting frees
 * whose buffer's slab is not the slab of the CPU's latest allocation (SLUB's active slab, whose
 * frees are the only ones the per-CPU fast path takes).
 */
static noinline unsigned long sp_probe(struct sp_ring *rings, unsigned int nr,
				       enum sp_kind kind)
{
	struct page *active = NULL;
	unsigned long offslab = 0, step;
	unsigned int h;

	if (kind == SP_STATIC)
		return 0;
	for (step = 0; step < SP_PROBE_STEPS; step++) {
		for (h = 0; h < nr; h++) {
			struct sp_ring *r = &rings[h];
			void *old = r->slot[r->head];
			void *buf;

			if (old) {
				offslab += active && virt_to_head_page(old) != active;
				sp_give(r, old, kind);
			}
			buf = fail_ppm ? sp_take(r, r->head, kind, true) :
					 sp_take(r, r->head, kind, false);
			r->slot[r->head] = buf;
			if (!buf)
				return offslab;
			active = virt_to_head_page(buf);
			if (++r->head == iodepth)
				r->head = 0;
		}
	}
	return offslab;
}

/* Slab pages the in-flight buffers of `rings` sit in. */
static unsigned long sp_ring_slabs(struct sp_ring *rings, unsigned int nr)
{
	unsigned long distinct = 0;
	unsigned int h, i, g, j;

	for (h = 0; h < nr; h++) {
		for (i = 0; i < iodepth; i++) {
			struct page *page = rings[h].slot[i] ? virt_to_head_page(rings[h].slot[i]) : NULL;
			bool seen = !page;

			for (g = 0; g <= h && !seen; g++)
				for (j = 0; j < (g == h ? i : iodepth) && !seen; j++)
					seen = rings[g].slot[j] && virt_to_head_page(rings[g].slot[j]) == page;
			distinct += !seen;
		}
	}
	return distinct;
}

/* ---- set-up and tear-down of one CPU's rings, on that CPU ---- */
static void sp_teardown(struct sp_cpu *c)
{
	unsigned int h, i;

	for (h = 0; h < hosts; h++) {
		struct sp_ring *r = &c->rings[h];

		for (i = 0; r->slot && i < iodepth; i++)
			if (r->slot[i] && c->mode->kind != SP_STATIC)
				sp_give(r, r->slot[i], c->mode->kind);
		for (i = 0; r->tag_buf && i < iodepth; i++)
			if (r->tag_buf[i])
				kmem_cache_free(c->cache, r->tag_buf[i]);
		if (r->pool)
			mempool_destroy(r->pool);
		kfree(r->slot);
		kfree(r->tag_buf);
		memset(r, 0, sizeof(*r));
	}
}

static int sp_setup(struct sp_cpu *c)
{
	const struct sp_mode *mode = c->mode;
	unsigned int h, i;

	for (h = 0; h < hosts; h++) {
		struct sp_ring *r = &c->rings[h];

		r->cache = c->cache;
		r->rng = seed * 0x9e3779b97f4a7c15ull + (u64)c->index * 1000 + h + 1;
		r->slot = kcalloc(iodepth, sizeof(void *), GFP_KERNEL);
		if (!r->slot)
			return -ENOMEM;
		if (mode->kind == SP_STATIC) {
			r->tag_buf = kcalloc(iodepth, sizeof(void *), GFP_KERNEL);
			if (!r->tag_buf)
				return -ENOMEM;
			for (i = 0; i < iodepth; i++) {
				r->tag_buf[i] = kmem_cache_alloc(c->cache, GFP_KERNEL);
				if (!r->tag_buf[i])
					return -ENOMEM;
			}
			c->idle += iodepth;
		} else if (mode->kind == SP_MEMPOOL) {
			r->pool = fail_ppm ? mempool_create(mode->count, sp_pool_alloc, sp_pool_free, r) :
					     mempool_create_slab_pool(mode->count, c->cache);
			if (!r->pool)
				return -ENOMEM;
			c->idle += mode->count;
		}
	}
	return 0;
}

static int sp_thread(void *data)
{
	struct sp_cpu *c = data;
	unsigned long flags;
	unsigned int h;
	u64 start;

	c->err = sp_setup(c);
	atomic_inc(c->ready);
	/* Interrupts stay on while waiting: the other CPU's set-up may need this one. */
	while (atomic_read(c->ready) < (int)cpus)
		cpu_relax();
	if (!c->err) {
		bool ok;

		local_irq_save(flags);
		start = ktime_get_ns();
		sp_window_begin(c->slot);
		ok = sp_run(c->rings, hosts, c->len, c->mode->kind);
		sp_window_end(c->slot);
		c->ns = ktime_get_ns() - start;
		local_irq_restore(flags);
		if (!ok)
			c->err = -ENOMEM;
		c->ring_slabs = sp_ring_slabs(c->rings, hosts);
	}
	for (h = 0; h < hosts; h++) {
		c->retries += c->rings[h].retries;
		c->injected += c->rings[h].injected;
	}
	/* After the window's counters are taken: the probe's draws are not the window's. */
	if (!c->err && c->index == 0)
		c->offslab_frees = sp_probe(c->rings, hosts, c->mode->kind);
	sp_teardown(c);
	kthread_complete_and_exit(&c->done, 0);
}

/* ---- one window: a fresh cache, the idle objects, a thread per CPU, the line ---- */
static struct sp_cpu *sp_cpus;

static int sp_window(unsigned int round, unsigned int index)
{
	const struct sp_mode *mode = &mode_list[index];
	unsigned long len = (round & 1) ? n_short : n;
	unsigned long idle = 0, i;
	struct kmem_cache *cache;
	void **held = NULL;
	struct task_struct *tasks[SP_MAX_CPUS];
	atomic_t ready = ATOMIC_INIT(0);
	unsigned int k;
	int err = 0;

	cache = kmem_cache_create_usercopy("sp_sense_cache", SP_SENSE_BUFFERSIZE, 0,
					   SLAB_HWCACHE_ALIGN, 0, SP_SENSE_BUFFERSIZE, NULL);
	if (!cache)
		return -ENOMEM;
	/* Idle objects come first, from this CPU, as a driver's would at load time. */
	if (mode->kind == SP_SLAB && mode->count) {
		held = kvcalloc(mode->count, sizeof(void *), GFP_KERNEL);
		for (i = 0; held && i < mode->count; i++) {
			held[i] = kmem_cache_alloc(cache, GFP_KERNEL);
			if (!held[i])
				break;
		}
		idle = held ? i : 0;
		if (idle < mode->count)
			err = -ENOMEM;
	}
	memset(sp_cpus, 0, sizeof(*sp_cpus) * cpus);
	/* Every thread exists before any runs: a thread spinning for the others on the CPU that
	 * creates them would keep the creator off that CPU (no kernel preemption). */
	for (k = 0; k < cpus && !err; k++) {
		struct sp_cpu *c = &sp_cpus[k];

		c->mode = mode;
		c->cache = cache;
		c->index = k;
		c->slot = index;
		c->len = len;
		c->ready = &ready;
		init_completion(&c->done);
		tasks[k] = kthread_create(sp_thread, c, "sp_sense/%u", k);
		if (IS_ERR(tasks[k]))
			err = PTR_ERR(tasks[k]);
		else
			kthread_bind(tasks[k], k);
	}
	if (err) {
		/* A created thread that never ran is stopped, not woken. */
		while (k-- > 0)
			if (!IS_ERR(tasks[k]))
				kthread_stop(tasks[k]);
		k = 0;
	}
	/* CPU 0's last: the creator may be on CPU 0, and must not be preempted before it is done. */
	for (i = k; i-- > 0;)
		wake_up_process(tasks[i]);
	while (k--) {
		wait_for_completion(&sp_cpus[k].done);
		if (sp_cpus[k].err && !err)
			err = sp_cpus[k].err;
	}
	/* Every window of this slot has closed: hand the count to the plugin. */
	sp_publish();
	if (!err)
		pr_info("sp_sense: round=%u mode=%s slot=%u n=%lu hosts=%u cpus=%u iodepth=%u touch=%s fail_ppm=%u ns=%llu cpu1_ns=%llu retries=%lu injected=%lu ring_slabs=%lu offslab_frees=%lu probe=%lu idle=%lu\n",
			round, mode->name, index, len, hosts, cpus, iodepth, touch, fail_ppm,
			sp_cpus[0].ns, cpus > 1 ? sp_cpus[1].ns : 0,
			sp_cpus[0].retries + (cpus > 1 ? sp_cpus[1].retries : 0),
			sp_cpus[0].injected + (cpus > 1 ? sp_cpus[1].injected : 0),
			sp_cpus[0].ring_slabs, sp_cpus[0].offslab_frees,
			mode->kind == SP_STATIC ? 0UL : (unsigned long)SP_PROBE_STEPS * hosts,
			idle + sp_cpus[0].idle + (cpus > 1 ? sp_cpus[1].idle : 0));
	for (i = 0; i < idle; i++)
		kmem_cache_free(cache, held[i]);
	kvfree(held);
	kmem_cache_destroy(cache);
	return err;
}

/* ---- parameters ---- */
static int sp_parse_mode(const char *text, struct sp_mode *mode)
{
	const char *count = NULL;

	if (strscpy(mode->name, text, sizeof(mode->name)) < 0)
		return -EINVAL;
	if (!strcmp(text, "static")) {
		mode->kind = SP_STATIC;
	} else if (!strcmp(text, "slab")) {
		mode->kind = SP_SLAB;
	} else if (!strncmp(text, "slab+idle:", 10)) {
		mode->kind = SP_SLAB;
		count = text + 10;
	} else if (!strncmp(text, "mempool:", 8)) {
		mode->kind = SP_MEMPOOL;
		count = text + 8;
	} else {
		return -EINVAL;
	}
	mode->count = 0;
	if (count && (kstrtoul(count, 10, &mode->count) || mode->count > SP_MAX_IDLE))
		return -EINVAL;
	return 0;
}

/* "0", "1", "0.01", "0.000001": parts per million, or -EINVAL. */
static int sp_parse_fail(const char *text, u32 *ppm)
{
	u32 whole = 0, fraction = 0, scale = 100000;
	const char *p = text;

	if (*p < '0' || *p > '9')
		return -EINVAL;
	while (*p >= '0' && *p <= '9' && whole <= 1)
		whole = whole * 10 + (*p++ - '0');
	if (*p == '.')
		for (p++; *p >= '0' && *p <= '9'; p++, scale /= 10) {
			if (!scale)
				return -EINVAL;
			fraction += (*p - '0') * scale;
		}
	if (*p || whole > 1 || (whole == 1 && fraction))
		return -EINVAL;
	*ppm = whole * 1000000 + fraction;
	return 0;
}

static int sp_parse(void)
{
	char *list, *cursor, *word;
	int err = 0;

	if (hosts < 1 || hosts > SP_MAX_HOSTS || cpus < 1 || cpus > SP_MAX_CPUS ||
	    cpus > num_online_cpus() || iodepth < 1 || iodepth > SP_MAX_IODEPTH || !n ||
	    !rounds) {
		pr_info("sp_sense: error=params reason=hosts 1..%d, cpus 1..%d and online, iodepth 1..%d, n and rounds at least 1\n",
			SP_MAX_HOSTS, SP_MAX_CPUS, SP_MAX_IODEPTH);
		return -EINVAL;
	}
	if (!n_short)
		n_short = n / 2 ? n / 2 : 1;
	if (strcmp(touch, "zero") && strcmp(touch, "error")) {
		pr_info("sp_sense: error=params reason=touch must be zero or error, not %s\n", touch);
		return -EINVAL;
	}
	touch_zero = !strcmp(touch, "zero");
	if (sp_parse_fail(fail, &fail_ppm)) {
		pr_info("sp_sense: error=params reason=fail must be a probability 0..1 with at most six decimals, not %s\n",
			fail);
		return -EINVAL;
	}
	list = kstrdup(modes, GFP_KERNEL);
	if (!list)
		return -ENOMEM;
	cursor = list;
	nr_modes = 0;
	while ((word = strsep(&cursor, ",")) && !err) {
		if (nr_modes == SP_MAX_MODES || sp_parse_mode(word, &mode_list[nr_modes])) {
			pr_info("sp_sense: error=params reason=mode %s: at most %d of static, slab, slab+idle:K, mempool:N (K, N at most %d)\n",
				word, SP_MAX_MODES, SP_MAX_IDLE);
			err = -EINVAL;
		}
		nr_modes++;
	}
	kfree(list);
	return err;
}

static int __init sp_sense_init(void)
{
	unsigned int round, i;
	int err = sp_parse();

	if (err)
		return err;
	sp_cpus = kcalloc(cpus, sizeof(*sp_cpus), GFP_KERNEL);
	if (!sp_cpus)
		return -ENOMEM;
	/* Each round rotates the order, so every mode takes a turn early and late. */
	for (round = 0; round < rounds && !err; round++)
		for (i = 0; i < nr_modes && !err; i++) {
			unsigned int index = (i + round) % nr_modes;

			err = sp_window(round, index);
			if (err)
				pr_info("sp_sense: error=window round=%u mode=%s err=%d\n", round,
					mode_list[index].name, err);
		}
	kfree(sp_cpus);
	return 0;
}

static void __exit sp_sense_exit(void)
{
}

module_init(sp_sense_init);
module_exit(sp_sense_exit);
MODULE_LICENSE("GPL");
MODULE_DESCRIPTION("the 2008 sense-buffer experiment on SLUB and mempool, for sensepool's bench");
