/* Ending the VM from PID 1 (see poweroff.h). */
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <sys/mman.h>
#include <sys/reboot.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <termios.h>
#include <unistd.h>

#include "guest/poweroff.h"
#include "proto/exit_port.h"

static int open_devmem(void)
{
	int fd = open("/dev/mem", O_RDWR | O_SYNC | O_CLOEXEC);

	/* An init that has not mounted devtmpfs: make the node. */
	if (fd < 0 && errno == ENOENT && mknod("/dev/mem", S_IFCHR | 0600, makedev(1, 1)) == 0)
		fd = open("/dev/mem", O_RDWR | O_SYNC | O_CLOEXEC);
	return fd;
}

static void write_status(int status)
{
	volatile uint32_t *reg;
	int fd = open_devmem();

	if (fd < 0)
		return;
	reg = mmap(NULL, GANTRY_STATUS_MMIO_SIZE, PROT_READ | PROT_WRITE, MAP_SHARED, fd,
		   GANTRY_STATUS_MMIO);
	close(fd);
	if (reg == MAP_FAILED)
		return;
	*reg = (uint32_t)status & 0xff;
	munmap((void *)reg, GANTRY_STATUS_MMIO_SIZE);
}

void guest_poweroff(int status)
{
	/* What is still in the console's transmit buffer would be cut. */
	tcdrain(STDOUT_FILENO);
	tcdrain(STDERR_FILENO);
	sync();
	write_status(status);
	/* The kernel resets through the i8042 (reboot=k): the VM ends. */
	reboot(RB_AUTOBOOT);
	for (;;)
		pause();
}
