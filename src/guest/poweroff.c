/* Ending the VM from PID 1 (see poweroff.h). */
#include <sys/io.h>
#include <sys/reboot.h>
#include <unistd.h>

#include "guest/poweroff.h"
#include "proto/exit_port.h"

void guest_poweroff(int status)
{
	sync();
	if (ioperm(GANTRY_EXIT_PORT, 1, 1) == 0)
		outb((unsigned char)status, GANTRY_EXIT_PORT);
	/* Not under Gantry's VMM, or no port access: reset ends the VM too. */
	reboot(RB_AUTOBOOT);
	for (;;)
		pause();
}
