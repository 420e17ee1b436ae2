#!/bin/busybox sh
# /init of a by-hand check (docs/nbd.md, "Linux 6.12 nbd.ko with 32 MiB requests"): Debian's
# Linux 6.12 with busybox, its failover/net_failover/virtio_net/nbd modules in /lib/modules and
# nbdc (nbdc.c, static) in /bin. Connects /dev/nbd0 to the sensepool NBD server at
# 10.0.2.2:$NBDPORT (default 40809, `cargo xtask run --profile nbd` on the host), raises
# max_sectors_kb to 32768, writes 64 MiB of random data in 32 MiB direct writes, reads it back
# in 32 MiB direct reads and compares. Every result line starts with NBDKO.
/bin/busybox mkdir -p /proc /sys /dev /tmp
/bin/busybox mount -t proc proc /proc
/bin/busybox --install -s /bin
mount -t sysfs sysfs /sys
mount -t devtmpfs devtmpfs /dev
echo 1 > /proc/sys/kernel/printk
for m in failover net_failover virtio_net nbd; do insmod /lib/modules/$m.ko || echo "NBDKO insmod $m failed"; done
ip link set lo up
ip link set eth0 up
ip addr add 10.0.2.15/24 dev eth0
ip route add default via 10.0.2.2
echo "NBDKO kernel $(uname -r)"
nbdc 10.0.2.2 ${NBDPORT:-40809} /dev/nbd0 &
for i in $(seq 1 60); do [ "$(cat /sys/block/nbd0/size)" != 0 ] && break; sleep 1; done
echo "NBDKO nbd0 size $(cat /sys/block/nbd0/size) sectors; max_hw_sectors_kb $(cat /sys/block/nbd0/queue/max_hw_sectors_kb)"
echo 32768 > /sys/block/nbd0/queue/max_sectors_kb || echo "NBDKO could not set max_sectors_kb"
echo "NBDKO max_sectors_kb $(cat /sys/block/nbd0/queue/max_sectors_kb)"
dd if=/dev/urandom of=/tmp/src bs=1M count=64 2>/dev/null
echo "NBDKO src $(sha256sum /tmp/src)"
start=$(cat /proc/uptime)
dd if=/tmp/src of=/dev/nbd0 bs=32M oflag=direct 2>&1 | tail -1 | sed 's/^/NBDKO write: /'
sync
echo "NBDKO stat after write: $(cat /sys/block/nbd0/stat)"
echo 3 > /proc/sys/vm/drop_caches
dd if=/dev/nbd0 of=/tmp/back bs=32M iflag=direct 2>&1 | tail -1 | sed 's/^/NBDKO read: /'
echo "NBDKO stat after read: $(cat /sys/block/nbd0/stat)"
echo "NBDKO back $(sha256sum /tmp/back)"
if cmp /tmp/src /tmp/back; then echo "NBDKO RESULT equal"; else echo "NBDKO RESULT DIFFER"; fi
dmesg | grep -i nbd | tail -5 | sed 's/^/NBDKO dmesg: /'
printf '\020' | dd of=/dev/port bs=1 seek=244 count=1 2>/dev/null
poweroff -f
