#!/bin/busybox sh
# /init of the stock-Linux guest of `cargo xtask conformance scsi-debug` (busybox sh).
#
# Loads scsi_mod (with the `dev_flags` in /etc/sgc/scsi_mod.params, BLIST_NO_RSOC for
# scsi_debug so that the scan sends no REPORT SUPPORTED OPERATION CODES, which would take the
# power-on unit attention), sg and scsi_debug's other dependencies, then for each scenario in
# /etc/sgc/scenarios:
#   - insmod scsi_debug with /etc/sgc/NAME.insmod (always no_uld=1: no sd, so nothing but our
#     script sends commands after the scan) and wait for NAME.luns sg devices (and, when
#     NAME.wlun exists, scan the well-known LUN 49409 = C101h and wait for its device too);
#   - write every KEY VALUE line of NAME.sysfs to /sys/bus/pseudo/drivers/scsi_debug/KEY
#     (opts, then every_nth: writing every_nth restarts its count after the scan);
#   - run `sg_cdb NAME.script`, turn injection off and rmmod scsi_debug (retried while the
#     module is busy after an aborted command).
# Lines for the host:
#   SGC-INFO kernel=...
#   SGC-SCENARIO NAME, SGC-HOST hostN (each SCSI host present), sg_cdb's SGR/SGRESET/SGSLEPT/SGERR
#   lines, SGC-ERROR NAME reason, SGC-END NAME
#   SGC-DONE failed=N
# and leaves through isa-debug-exit: 0x10 (QEMU exits 33) when every scenario ran, 0x11 (35)
# otherwise.

/bin/busybox mkdir -p /proc /sys /dev /tmp
/bin/busybox mount -t proc proc /proc
/bin/busybox --install -s /bin
mount -t sysfs sysfs /sys
mount -t devtmpfs devtmpfs /dev
echo 1 > /proc/sys/kernel/printk

failed=0
error() {
	failed=1
	echo "SGC-ERROR $1 $2"
}

leave() {
	echo "SGC-DONE failed=$failed"
	code='\020'
	[ "$failed" = 0 ] || code='\021'
	# The last lines may still be in the tty's buffer: QEMU ends at the port write.
	sp_drain
	printf "$code" | dd of=/dev/port bs=1 seek=244 count=1 2>/dev/null
	poweroff -f
}

echo "SGC-INFO kernel=$(uname -r)"
for file in $(cat /etc/sgc/modules); do
	name=${file%.ko}
	[ -d "/sys/module/$name" ] && continue
	args=""
	[ "$name" = scsi_mod ] && args=$(cat /etc/sgc/scsi_mod.params)
	out=$(insmod "/lib/modules/$file" $args 2>&1) || { error setup "insmod $file: $out"; leave; }
done

driver=/sys/bus/pseudo/drivers/scsi_debug
for scenario in $(cat /etc/sgc/scenarios); do
	echo "SGC-SCENARIO $scenario"
	out=$(insmod /lib/modules/scsi_debug.ko $(cat "/etc/sgc/$scenario.insmod") 2>&1) || {
		error "$scenario" "insmod scsi_debug: $out"
		continue
	}
	want=$(cat "/etc/sgc/$scenario.luns")
	found=0
	for _ in $(seq 1 300); do
		found=$(ls /sys/class/scsi_generic 2>/dev/null | wc -l)
		[ "$found" -ge "$want" ] && break
		sleep 0.1
	done
	if [ -f "/etc/sgc/$scenario.wlun" ]; then
		# The REPORT LUNS well-known LUN gets a device only when asked for.
		echo "- - 49409" > /sys/class/scsi_host/host0/scan
		want=$((want + 1))
		for _ in $(seq 1 300); do
			found=$(ls /sys/class/scsi_generic 2>/dev/null | wc -l)
			[ "$found" -ge "$want" ] && break
			sleep 0.1
		done
	fi
	[ "$found" -ge "$want" ] || error "$scenario" "$found of $want sg devices after 30 s"
	for host in /sys/class/scsi_host/host*; do
		[ -e "$host" ] && echo "SGC-HOST ${host##*/}"
	done
	while read -r key value; do
		[ -n "$key" ] || continue
		echo "$value" > "$driver/$key" || error "$scenario" "cannot write $value to $driver/$key"
	done < "/etc/sgc/$scenario.sysfs"
	sg_cdb "/etc/sgc/$scenario.script" || error "$scenario" "sg_cdb exited with $?"
	echo "SGC-END $scenario"
	# Injection off first; the module is busy for a while after an aborted command.
	echo 0 > "$driver/every_nth"
	echo 0 > "$driver/opts"
	removed=0
	for _ in $(seq 1 100); do
		rmmod scsi_debug 2>/dev/null && { removed=1; break; }
		sleep 0.2
	done
	[ "$removed" = 1 ] || { error "$scenario" "rmmod scsi_debug failed for 20 s"; leave; }
	for _ in $(seq 1 100); do
		[ -e /sys/class/scsi_host/host0 ] || break
		sleep 0.1
	done
done
leave
