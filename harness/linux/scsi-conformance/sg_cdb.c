// SPDX-License-Identifier: MIT
/*
 * sg_cdb: sends raw CDBs to scsi_debug's logical units through SG_IO (the sg driver) and
 * prints what came back, one line per step, for `cargo xtask conformance scsi-debug`
 * (systest/src/conformance/), which sends the same CDBs to sensepool's scsi_debug and
 * compares the answers.
 *
 * Usage: sg_cdb SCRIPT. Each line of SCRIPT is a step (fields separated by one space):
 *   cmd ID LUN DIR LEN TIMEOUT_MS CDB_HEX SEED   DIR: n (none), i (data in), o (data out);
 *                                                the data-out buffer is pattern(SEED)
 *   sleep ID MS
 *   reset ID KIND LUN                            KIND: device, target, bus, host
 * and prints
 *   SGR ID status=SS host=HHHH driver=DDDD resid=N sense=HEX data=HEX|fnv1a64:X:LEN
 *   SGRESET ID rc=N
 *   SGSLEPT ID
 *   SGERR ID reason
 * The data are the bytes transferred (the buffer less the residual), in hex up to 4 KiB, else
 * their FNV-1a 64-bit hash and length. Logical units are found as target 0 of the only SCSI
 * host, through /sys/class/scsi_generic.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <scsi/sg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <time.h>
#include <unistd.h>

/* glibc's <scsi/sg.h> predates the target reset (Linux include/scsi/sg.h). */
#ifndef SG_SCSI_RESET_TARGET
#define SG_SCSI_RESET_TARGET 4
#endif

#define MAX_LUNS 16
/* The REPORT LUNS well-known LUN, scanned by hand; its path is kept after the others'. */
#define WLUN 49409
#define SENSE_LEN 96
#define HEX_DATA_MAX 4096

/* /dev/sgN of each LUN. Each command opens it afresh: sg copies data in through a buffer
 * reserved per open file and zeroed only when allocated, so bytes the device does not write
 * would otherwise read back as an earlier command's data. */
static char lun_path[MAX_LUNS + 1][300];

static int slot(unsigned lun)
{
	return lun == WLUN ? MAX_LUNS : lun < MAX_LUNS ? (int)lun : -1;
}

static int open_lun(unsigned lun)
{
	int at = slot(lun);

	return at >= 0 && lun_path[at][0] ? open(lun_path[at], O_RDWR) : -1;
}

/* The data-out pattern both sides build: zeros for seed 0, else a byte per position that
 * differs from block to block. */
static uint8_t pattern(unsigned seed, size_t i)
{
	if (!seed)
		return 0;
	return (uint8_t)(seed + i * 7 + (i >> 9));
}

/* Finds /dev/sgN of every LUN of target 0: its sysfs `device` link ends in "H:C:T:L". */
static void find_luns(void)
{
	DIR *dir = opendir("/sys/class/scsi_generic");
	struct dirent *entry;

	if (!dir)
		return;
	while ((entry = readdir(dir))) {
		char link[512], target[512];
		unsigned host, channel, id, lun;
		ssize_t len;
		const char *last;

		if (entry->d_name[0] == '.')
			continue;
		snprintf(link, sizeof(link), "/sys/class/scsi_generic/%s/device", entry->d_name);
		len = readlink(link, target, sizeof(target) - 1);
		if (len < 0)
			continue;
		target[len] = 0;
		last = strrchr(target, '/');
		last = last ? last + 1 : target;
		if (sscanf(last, "%u:%u:%u:%u", &host, &channel, &id, &lun) != 4)
			continue;
		if (id != 0 || slot(lun) < 0)
			continue;
		snprintf(lun_path[slot(lun)], sizeof(lun_path[0]), "/dev/%s", entry->d_name);
	}
	closedir(dir);
}

static void print_hex(const uint8_t *bytes, size_t len)
{
	for (size_t i = 0; i < len; i++)
		printf("%02x", bytes[i]);
}

static int unhex(const char *text, uint8_t *out, size_t max)
{
	size_t len = strlen(text);

	if (len % 2 || len / 2 > max)
		return -1;
	for (size_t i = 0; i < len / 2; i++) {
		unsigned byte;

		if (sscanf(text + 2 * i, "%2x", &byte) != 1)
			return -1;
		out[i] = (uint8_t)byte;
	}
	return (int)(len / 2);
}

static void command(unsigned id, unsigned lun, char dir, unsigned len, unsigned timeout_ms,
		    const char *cdb_hex, unsigned seed)
{
	uint8_t cdb[32], sense[SENSE_LEN];
	uint8_t *data = NULL;
	sg_io_hdr_t io;
	int cdb_len = unhex(cdb_hex, cdb, sizeof(cdb));
	size_t moved;
	int fd;

	if (cdb_len <= 0) {
		printf("SGERR %u bad CDB %s\n", id, cdb_hex);
		return;
	}
	fd = open_lun(lun);
	if (fd < 0) {
		printf("SGERR %u no sg device for LUN %u\n", id, lun);
		return;
	}
	if (len) {
		data = calloc(1, len);
		if (!data) {
			printf("SGERR %u cannot allocate %u bytes\n", id, len);
			close(fd);
			return;
		}
		if (dir == 'o')
			for (size_t i = 0; i < len; i++)
				data[i] = pattern(seed, i);
	}
	memset(&io, 0, sizeof(io));
	memset(sense, 0, sizeof(sense));
	io.interface_id = 'S';
	io.dxfer_direction = dir == 'i' ? SG_DXFER_FROM_DEV :
			     dir == 'o' ? SG_DXFER_TO_DEV : SG_DXFER_NONE;
	io.cmd_len = (unsigned char)cdb_len;
	io.cmdp = cdb;
	io.mx_sb_len = SENSE_LEN;
	io.sbp = sense;
	io.dxfer_len = len;
	io.dxferp = data;
	io.timeout = timeout_ms;
	if (ioctl(fd, SG_IO, &io) < 0) {
		printf("SGERR %u SG_IO: %s\n", id, strerror(errno));
		free(data);
		close(fd);
		return;
	}
	close(fd);
	printf("SGR %u status=%02x host=%04x driver=%04x resid=%d sense=", id, io.status,
	       io.host_status, io.driver_status, io.resid);
	print_hex(sense, io.sb_len_wr);
	printf(" data=");
	moved = dir == 'i' && io.resid >= 0 && (unsigned)io.resid <= len ? len - io.resid : 0;
	if (moved <= HEX_DATA_MAX) {
		print_hex(data, moved);
	} else {
		uint64_t hash = 0xcbf29ce484222325ull;

		for (size_t i = 0; i < moved; i++)
			hash = (hash ^ data[i]) * 0x100000001b3ull;
		printf("fnv1a64:%016llx:%zu", (unsigned long long)hash, moved);
	}
	printf("\n");
	free(data);
}

static void reset(unsigned id, const char *kind, unsigned lun)
{
	int value, fd;

	if (!strcmp(kind, "device"))
		value = SG_SCSI_RESET_DEVICE;
	else if (!strcmp(kind, "target"))
		value = SG_SCSI_RESET_TARGET;
	else if (!strcmp(kind, "bus"))
		value = SG_SCSI_RESET_BUS;
	else if (!strcmp(kind, "host"))
		value = SG_SCSI_RESET_HOST;
	else {
		printf("SGERR %u unknown reset %s\n", id, kind);
		return;
	}
	fd = open_lun(lun);
	if (fd < 0) {
		printf("SGERR %u no sg device for LUN %u\n", id, lun);
		return;
	}
	printf("SGRESET %u rc=%d\n", id, ioctl(fd, SG_SCSI_RESET, &value) < 0 ? errno : 0);
	close(fd);
}

int main(int argc, char **argv)
{
	char line[512];
	FILE *script;

	if (argc != 2 || !(script = fopen(argv[1], "r"))) {
		fprintf(stderr, "usage: sg_cdb SCRIPT\n");
		return 2;
	}
	setvbuf(stdout, NULL, _IOLBF, 0);
	find_luns();
	while (fgets(line, sizeof(line), script)) {
		char word[16], dir, cdb[80], kind[16];
		unsigned id, lun, len, timeout_ms, seed, ms;

		if (sscanf(line, "%15s", word) != 1 || word[0] == '#')
			continue;
		if (!strcmp(word, "cmd") &&
		    sscanf(line, "cmd %u %u %c %u %u %79s %u", &id, &lun, &dir, &len, &timeout_ms,
			   cdb, &seed) == 7) {
			command(id, lun, dir, len, timeout_ms, cdb, seed);
		} else if (!strcmp(word, "sleep") && sscanf(line, "sleep %u %u", &id, &ms) == 2) {
			struct timespec span = { ms / 1000, (long)(ms % 1000) * 1000000 };

			nanosleep(&span, NULL);
			printf("SGSLEPT %u\n", id);
		} else if (!strcmp(word, "reset") &&
			   sscanf(line, "reset %u %15s %u", &id, kind, &lun) == 3) {
			reset(id, kind, lun);
		} else {
			printf("SGERR - bad script line: %s", line);
		}
	}
	return 0;
}
