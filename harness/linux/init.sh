#!/bin/busybox sh
# /init of the stock-Linux guest of `cargo xtask bench linux` (busybox sh).
#
# The host passes the cases on the kernel command line, `sp_cases=C1,C2,...`:
#   fio:TARGET:BS:NUMJOBS:ENGINE[:IODEPTH]
#                                  fio randread, iodepth IODEPTH (default 32), on the first sd
#                                  disk of TARGET (scsi_debug: fake_rw=1 delay=0; virtio:
#                                  virtio-scsi disk)
#   dmapool:N                      the sp_dmapool module (mpt3sas chain pool, N blocks)
#   sense[:K=V/K=V...]             the sp_sense module (sense buffers on SLUB and mempool), with
#                                  the command line's `sp_sense.K=V` words as its parameters and
#                                  then the case's own (`sense:touch=error/modes=static;slab`: `/`
#                                  between words, `;` for the commas a list needs)
# and `sp_runtime=SECONDS`, or `sp_number_ios=N` to run exactly N I/Os instead (for instruction
# counts: two boots that differ only in N), with `sp_count=1` fio runs pinned to CPU 0 inside a
# counted window (sp_marker begin/end/publish; one publish per fio case, in the cases' order).
# Every result is one line (xtask parses them):
#   SPLINUX-INFO kernel=... fio=... cpus=...
#   SPLINUX case=fio target=... bs=... iodepth=... numjobs=... ioengine=... json=<fio JSON>
#   SPLINUX case=dmapool rep=... n=... size=... align=... alloc_ns=... free_ns=...
#   SPLINUX case=sense round=... mode=... slot=... n=... ns=... (one per window, sp_sense.c)
#   SPLINUX-ERROR case=... reason=...   (then SPLINUX-STDERR lines: fio's stderr)
#   SPLINUX-DONE
# and the guest leaves through isa-debug-exit: 0x10 (QEMU exits 33) when every case produced
# its line, 0x11 (35) otherwise.

/bin/busybox mkdir -p /proc /sys /dev /tmp
/bin/busybox mount -t proc proc /proc
/bin/busybox --install -s /bin
mount -t sysfs sysfs /sys
mount -t devtmpfs devtmpfs /dev
# Only our lines on the console.
echo 1 > /proc/sys/kernel/printk

failed=0
arg() {
	for word in $(cat /proc/cmdline); do
		case "$word" in "$1"=*) echo "${word#*=}" ;; esac
	done
}

leave() {
	echo "SPLINUX-DONE failed=$failed"
	code='\020'
	[ "$failed" = 0 ] || code='\021'
	# One byte to port 0xf4 (isa-debug-exit); poweroff if the port is not there.
	# The last lines may still be in the tty's buffer: QEMU ends at the port write.
	sp_drain
	printf "$code" | dd of=/dev/port bs=1 seek=244 count=1 2>/dev/null
	poweroff -f
}

error() {
	failed=1
	echo "SPLINUX-ERROR case=$1 reason=$2"
}

# Loads the modules listed in /etc/sp/$1.modules (dependencies first), skipping loaded ones.
load() {
	list=/etc/sp/$1.modules
	[ -f "$list" ] || { error "$1" "no module list $list in the initramfs"; return 1; }
	for file in $(cat "$list"); do
		name=${file%.ko}
		[ -d "/sys/module/$name" ] && continue
		shift_args=""
		[ "$name" = scsi_debug ] && shift_args="fake_rw=1 delay=0 submit_queues=$(nproc)"
		out=$(insmod "/lib/modules/$file" $shift_args 2>&1) || {
			error "$1" "insmod $file: $out"
			return 1
		}
	done
}

# The first sd disk, waiting up to 20 s for the (asynchronous) scan. Whole seconds: each poll
# starts a process, and the instruction counts of two boots must not differ by how many polls
# a loaded host needed.
disk() {
	for _ in $(seq 1 20); do
		for dev in /sys/block/sd*; do
			[ -e "$dev" ] && { echo "/dev/${dev##*/}"; return 0; }
		done
		sleep 1
	done
	return 1
}

run_fio() {
	target=$1 bs=$2 numjobs=$3 engine=$4 iodepth=${5:-32}
	case_name="fio:$target:$bs:$numjobs:$engine:$iodepth"
	load "$target" || return
	dev=$(disk) || { error "$case_name" "no sd disk appeared after loading $target"; return; }
	runtime=$(arg sp_runtime)
	number_ios=$(arg sp_number_ios)
	if [ -n "$number_ios" ]; then
		span="--io_size=1T --number_ios=$number_ios"
	else
		span="--time_based --runtime=${runtime:-2}"
	fi
	set -- --name=randread --filename="$dev" --rw=randread --bs="$bs" --iodepth="$iodepth" \
		--numjobs="$numjobs" --cpus_allowed=0-$(($(nproc) - 1)) --cpus_allowed_policy=split \
		--direct=1 --ioengine="$engine" --norandommap --randrepeat=0 \
		$span --group_reporting --output-format=json --output=/tmp/fio.json
	if [ "$(arg sp_count)" = 1 ]; then
		# fio's first getrandom() blocks until the kernel's CRNG is ready, and early in a boot
		# the kernel then runs its jitter-entropy loop (try_to_generate_entropy): hundreds of
		# millions of instructions that vary with the host's timing. Reading /dev/random waits
		# the same way, here, before the window opens.
		head -c 1 /dev/random > /dev/null
		# The plugin's window is per vCPU: fio and the markers all on CPU 0.
		taskset 1 sh -c 'sp_marker begin; fio "$@" 2>/tmp/fio.err; rc=$?; sp_marker end
			sp_marker publish; exit $rc' sh "$@"
		rc=$?
		# Which CPU took the device's interrupts (the window is CPU 0's): for the bench's log.
		grep virtio /proc/interrupts | while IFS= read -r line; do echo "SPLINUX-IRQ $line"; done
		(exit $rc)
	else
		fio "$@" 2>/tmp/fio.err
	fi
	rc=$?
	if [ "$rc" != 0 ] || ! grep -q '"jobs"' /tmp/fio.json; then
		error "$case_name" "fio exited with status $rc"
		while IFS= read -r line; do echo "SPLINUX-STDERR $line"; done < /tmp/fio.err
		return
	fi
	echo "SPLINUX case=fio target=$target bs=$bs iodepth=$iodepth numjobs=$numjobs ioengine=$engine json=$(tr -d '\n\t' < /tmp/fio.json)"
}

run_dmapool() {
	n=$1
	[ -f /lib/modules/sp_dmapool.ko ] || {
		error "dmapool:$n" "$(cat /etc/sp/dmapool.missing 2>/dev/null || echo 'sp_dmapool.ko not built')"
		return
	}
	dmesg -c > /dev/null
	out=$(insmod /lib/modules/sp_dmapool.ko n="$n" reps=1 2>&1) || {
		error "dmapool:$n" "insmod sp_dmapool.ko: $out $(dmesg | grep 'sp_dmapool: error=')"
		return
	}
	rmmod sp_dmapool
	lines=$(dmesg | grep -E 'sp_dmapool: (rep|error)=')
	echo "$lines" | grep -q 'error=' && { error "dmapool:$n" "$(echo "$lines" | grep error=)"; return; }
	echo "$lines" | grep -q 'alloc_ns=' || { error "dmapool:$n" "the module printed no result"; return; }
	echo "$lines" | sed -n 's/.*sp_dmapool: /SPLINUX case=dmapool /p'
}

run_sense() {
	case_name=$1
	[ -f /lib/modules/sp_sense.ko ] || {
		error "$case_name" "$(cat /etc/sp/sense.missing 2>/dev/null || echo 'sp_sense.ko not built')"
		return
	}
	params=""
	for word in $(cat /proc/cmdline); do
		case "$word" in sp_sense.*=*) params="$params ${word#sp_sense.}" ;; esac
	done
	params="$params $(echo "${2#:}" | tr '/;' ' ,')"
	dmesg -c > /dev/null
	# The module's first thread runs on CPU 0, the plugin's windows are per vCPU: insmod there too.
	out=$(taskset 1 insmod /lib/modules/sp_sense.ko $params 2>&1) || {
		error "$case_name" "insmod sp_sense.ko$params: $out $(dmesg | grep 'sp_sense: error=')"
		return
	}
	rmmod sp_sense
	lines=$(dmesg | grep -E 'sp_sense: (round|error)=')
	echo "$lines" | grep -q 'error=' && { error "$case_name" "$(echo "$lines" | grep error= | head -1)"; return; }
	echo "$lines" | grep -q 'ns=' || { error "$case_name" "the module printed no result"; return; }
	echo "$lines" | sed -n 's/.*sp_sense: /SPLINUX case=sense /p'
}

echo "SPLINUX-INFO kernel=$(uname -r) fio=$(fio --version) cpus=$(nproc)"
for case in $(arg sp_cases | tr ',' ' '); do
	IFS=: read -r kind a b c d e <<EOF
$case
EOF
	case "$kind" in
	fio) run_fio "$a" "$b" "$c" "$d" "$e" ;;
	dmapool) run_dmapool "$a" ;;
	sense) run_sense "$case" "${case#sense}" ;;
	*) error "$case" "unknown case kind" ;;
	esac
done
leave
