// SPDX-License-Identifier: MIT
/*
 * sp_marker: executes one instruction-count marker of sensepool's TCG plugin
 * (harness/plugin/insn_count.c) from user space, so the stock-Linux guest can
 * open and close a counted window around fio as sensepool's kernel does
 * around its timed loop (kernel/src/arch/insn_marker.rs). A marker is
 * `nopl DISP(%rax,%rax,1)` with DISP = 0x5e450000 | op << 8 | slot: a no-op
 * without the plugin.
 *
 *   sp_marker begin   opens this vCPU's window on slot 0
 *   sp_marker end     closes it
 *   sp_marker publish prints every slot's sum to the plugin's log
 *
 * The window is per vCPU: run it, and what it measures, pinned to one CPU.
 */
#include <stdio.h>
#include <string.h>

int main(int argc, char **argv)
{
	const char *op = argc > 1 ? argv[1] : "";

	if (!strcmp(op, "begin"))
		__asm__ volatile("nopl 0x5e450100(%%rax,%%rax,1)" ::: "memory");
	else if (!strcmp(op, "end"))
		__asm__ volatile("nopl 0x5e450200(%%rax,%%rax,1)" ::: "memory");
	else if (!strcmp(op, "publish"))
		__asm__ volatile("nopl 0x5e450300(%%rax,%%rax,1)" ::: "memory");
	else {
		fprintf(stderr, "usage: sp_marker begin|end|publish\n");
		return 2;
	}
	return 0;
}
