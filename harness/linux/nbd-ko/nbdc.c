/* Minimal NBD client for a test: fixed-newstyle handshake with NBD_OPT_EXPORT_NAME "",
 * then hands the socket to the kernel's nbd driver (ioctl interface) and runs NBD_DO_IT. */
#include <arpa/inet.h>
#include <fcntl.h>
#include <linux/nbd.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <unistd.h>

static void die(const char *what) { perror(what); exit(1); }
static void rd(int fd, void *buf, size_t n) {
    size_t got = 0;
    while (got < n) { ssize_t r = read(fd, (char *)buf + got, n - got); if (r <= 0) die("read"); got += r; }
}
static void wr(int fd, const void *buf, size_t n) { if (write(fd, buf, n) != (ssize_t)n) die("write"); }
static uint64_t be64(const unsigned char *p) { uint64_t v = 0; for (int i = 0; i < 8; i++) v = v << 8 | p[i]; return v; }

int main(int argc, char **argv) {
    if (argc != 4) { fprintf(stderr, "usage: nbdc IP PORT /dev/nbdN\n"); return 2; }
    int s = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = htons(atoi(argv[2])) };
    inet_pton(AF_INET, argv[1], &a.sin_addr);
    if (connect(s, (struct sockaddr *)&a, sizeof a)) die("connect");
    int one = 1; setsockopt(s, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    unsigned char hello[18];
    rd(s, hello, 18);
    if (memcmp(hello, "NBDMAGICIHAVEOPT", 16)) { fprintf(stderr, "not a newstyle server\n"); return 1; }
    uint32_t cflags = htonl(3); /* FIXED_NEWSTYLE | NO_ZEROES */
    wr(s, &cflags, 4);
    unsigned char opt[16] = "IHAVEOPT";
    uint32_t code = htonl(1), len = htonl(0); /* NBD_OPT_EXPORT_NAME, "" */
    memcpy(opt + 8, &code, 4); memcpy(opt + 12, &len, 4);
    wr(s, opt, 16);
    unsigned char rep[10];
    rd(s, rep, 10);
    uint64_t size = be64(rep);
    unsigned flags = rep[8] << 8 | rep[9];
    printf("NBDC size=%llu flags=%#x\n", (unsigned long long)size, flags);
    fflush(stdout);
    int nbd = open(argv[3], O_RDWR);
    if (nbd < 0) die("open nbd");
    if (ioctl(nbd, NBD_SET_BLKSIZE, 4096UL)) die("NBD_SET_BLKSIZE");
    if (ioctl(nbd, NBD_SET_SIZE_BLOCKS, (unsigned long)(size / 4096))) die("NBD_SET_SIZE_BLOCKS");
    if (ioctl(nbd, NBD_SET_FLAGS, (unsigned long)flags)) die("NBD_SET_FLAGS");
    if (ioctl(nbd, NBD_SET_TIMEOUT, 120UL)) die("NBD_SET_TIMEOUT");
    if (ioctl(nbd, NBD_SET_SOCK, (unsigned long)s)) die("NBD_SET_SOCK");
    printf("NBDC connected, running NBD_DO_IT\n");
    fflush(stdout);
    if (ioctl(nbd, NBD_DO_IT)) perror("NBD_DO_IT");
    printf("NBDC NBD_DO_IT returned\n");
    return 0;
}
