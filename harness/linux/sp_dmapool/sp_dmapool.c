// SPDX-License-Identifier: GPL-2.0
/*
 * sp_dmapool: the mpt3sas chain-pool pattern on a stock kernel's dmapool, for
 * `cargo xtask bench linux`. The same loops as sensepool's dmapool bench
 * (workloads::dmapool_bench::fill_drain): create a pool of `size`-byte blocks aligned to
 * `align`, allocate `n` blocks, free them in allocation order, destroy; each
 * loop timed with ktime_get_ns. One line per repetition:
 *
 *   sp_dmapool: rep=R n=N size=S align=A alloc_ns=T free_ns=T pages=P
 *
 * pages is the number of distinct PAGE_SIZE pages the blocks came from, counted
 * (untimed) between the two loops: a fresh pool hands out a page's blocks
 * before it allocates the next page, in both the pre-6.4 and the 6.4+ pool, so
 * the changes of page along the allocation order count the pages.
 *
 * The pool needs a device that can do DMA: a platform device with a 64-bit
 * mask (dma-direct on x86 without an IOMMU, as mpt3sas gets on such a guest).
 * The work happens at load time and the load then succeeds (busybox's insmod
 * retries a failed finit_module with init_module, which would run it twice);
 * the init script unloads the module afterwards.
 */
#include <linux/dma-mapping.h>
#include <linux/dmapool.h>
#include <linux/ktime.h>
#include <linux/mm.h>
#include <linux/module.h>
#include <linux/platform_device.h>
#include <linux/sched.h>
#include <linux/slab.h>

static unsigned long n = 373959;
module_param(n, ulong, 0444);
MODULE_PARM_DESC(n, "blocks live at once (mpt3sas chain pool: 373959)");
static unsigned int size = 128;
module_param(size, uint, 0444);
static unsigned int align = 16;
module_param(align, uint, 0444);
static unsigned int reps = 1;
module_param(reps, uint, 0444);

struct sp_block {
	void *cpu;
	dma_addr_t dma;
};

/* One create, fill, drain, destroy; 0 or -ENOMEM. */
static int sp_fill_drain(struct device *dev, struct sp_block *blocks,
			 unsigned int rep)
{
	struct dma_pool *pool;
	u64 start, filled, free_start, drained;
	unsigned long i, pages;

	pool = dma_pool_create("sp_chain", dev, size, align, 0);
	if (!pool)
		return -ENOMEM;
	start = ktime_get_ns();
	for (i = 0; i < n; i++) {
		blocks[i].cpu = dma_pool_alloc(pool, GFP_KERNEL, &blocks[i].dma);
		if (!blocks[i].cpu)
			break;
		/* Long loops must let the scheduler in (a soft lockup otherwise). */
		if ((i & 1023) == 0)
			cond_resched();
	}
	filled = ktime_get_ns();
	if (i < n) {
		pr_info("sp_dmapool: error=alloc_failed at=%lu n=%lu\n", i, n);
		n = i;
	}
	pages = 0;
	for (i = 0; i < n; i++)
		if (i == 0 || (blocks[i].dma >> PAGE_SHIFT) !=
				      (blocks[i - 1].dma >> PAGE_SHIFT))
			pages++;
	free_start = ktime_get_ns();
	for (i = 0; i < n; i++) {
		dma_pool_free(pool, blocks[i].cpu, blocks[i].dma);
		if ((i & 1023) == 0)
			cond_resched();
	}
	drained = ktime_get_ns();
	dma_pool_destroy(pool);
	pr_info("sp_dmapool: rep=%u n=%lu size=%u align=%u alloc_ns=%llu free_ns=%llu pages=%lu\n",
		rep, n, size, align, filled - start, drained - free_start, pages);
	return 0;
}

static int __init sp_dmapool_init(void)
{
	struct platform_device *pdev;
	struct sp_block *blocks;
	unsigned int rep;
	int err;

	pdev = platform_device_register_simple("sp_dmapool", -1, NULL, 0);
	if (IS_ERR(pdev))
		return PTR_ERR(pdev);
	err = dma_coerce_mask_and_coherent(&pdev->dev, DMA_BIT_MASK(64));
	blocks = err ? NULL : kvmalloc_array(n, sizeof(*blocks), GFP_KERNEL);
	if (!blocks) {
		pr_info("sp_dmapool: error=setup err=%d\n", err);
		platform_device_unregister(pdev);
		return err ? err : -ENOMEM;
	}
	for (rep = 0; rep < reps && !err; rep++)
		err = sp_fill_drain(&pdev->dev, blocks, rep);
	if (err)
		pr_info("sp_dmapool: error=pool_create err=%d\n", err);
	kvfree(blocks);
	platform_device_unregister(pdev);
	return err;
}

static void __exit sp_dmapool_exit(void)
{
}

module_init(sp_dmapool_init);
module_exit(sp_dmapool_exit);
MODULE_LICENSE("GPL");
MODULE_DESCRIPTION("mpt3sas chain-pool pattern on dmapool, for sensepool's bench");
