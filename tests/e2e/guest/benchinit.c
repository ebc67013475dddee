/* benchinit: PID 1 of the boot benchmark. It prints the marker the host
 * times to, as its very first act, and ends the VM. The kernel has opened
 * /dev/console as fds 0-2 because the initramfs holds dev/console. */
#include <termios.h>
#include <unistd.h>

#include "guest/poweroff.h"

static const char marker[] = "GANTRY-BENCH-MARKER\n";

int main(void)
{
	if (write(STDOUT_FILENO, marker, sizeof(marker) - 1) < 0)
		guest_poweroff(1);
	/* The marker must leave the UART before the VM ends. */
	tcdrain(STDOUT_FILENO);
	guest_poweroff(0);
}
