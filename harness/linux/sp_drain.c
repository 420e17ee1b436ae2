// SPDX-License-Identifier: MIT
/*
 * sp_drain: waits until everything written to its standard output, the serial
 * console, has left the UART (tcdrain), so that a guest leaving through
 * isa-debug-exit right after its last line does not lose that line: a write to
 * a tty returns once the bytes are in the tty's transmit buffer, and QEMU ends
 * at the debug-exit write with whatever the guest's 8250 driver has not yet
 * handed to the UART.
 */
#include <stdio.h>
#include <termios.h>
#include <unistd.h>

int main(void)
{
	if (tcdrain(STDOUT_FILENO) != 0) {
		perror("sp_drain: tcdrain");
		return 1;
	}
	return 0;
}
