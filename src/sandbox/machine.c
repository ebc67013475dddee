/* A sandbox's guest VM (see machine.h). */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include "common/assets.h"
#include "common/util.h"
#include "sandbox/machine.h"
#include "sandbox/state.h"

#define MACHINE_APPEND_BASE "root=/dev/vda rootfstype=erofs ro init=/sbin/gantry-init"

int machine_config(struct machine *m, const struct sandbox *sb, const char *dir, int console_fd,
		   gantry_error_t *err)
{
	bool timing = vmm_timing_requested();
	int n;

	*m = (struct machine){ .done_fd = -1, .cfg.stop_fd = -1 };
	if (assets_path(ASSET_KERNEL, &m->kernel, err) < 0 ||
	    assets_path(ASSET_SYSROOT, &m->sysroot, err) < 0)
		return -1;
	/* With timing, gantry-init logs its milestones on the console too. */
	if (sb->transient)
		n = snprintf(m->append, sizeof(m->append), "%s%s", MACHINE_APPEND_BASE,
			     timing ? " gantry.debug=1" : "");
	else
		n = snprintf(m->append, sizeof(m->append),
			     "%s gantry.persist=1 gantry.hostname=%s %s%s", MACHINE_APPEND_BASE,
			     sb->name, sb->writable ? "gantry.rw=1" : "gantry.readonly=1",
			     timing ? " gantry.debug=1" : "");
	if (n < 0 || (size_t)n >= sizeof(m->append))
		return gantry_error(err, 0, "kernel command line too long");
	m->cfg = (struct vmm_config){
		.kernel = m->kernel,
		.append = m->append,
		.vsock_dir = dir,
		.cpus = (unsigned int)sb->cpus,
		.mem_mib = sb->mem_mib,
		.timing = timing,
		.stop_fd = -1,
	};
	if (console_fd >= 0) {
		m->cfg.console_fd = console_fd;
	} else {
		xasprintf((char **)&m->cfg.console, "%s/%s", dir, SANDBOX_CONSOLE);
	}
	m->cfg.disks[m->cfg.nr_disks++] = (struct vmm_disk){ m->sysroot, true };
	m->cfg.disks[m->cfg.nr_disks++] = (struct vmm_disk){ sb->image_path, true };
	if (sb->writable)
		m->cfg.disks[m->cfg.nr_disks++] = (struct vmm_disk){ sb->rwlayer, false };
	return 0;
}

static void *machine_thread(void *arg)
{
	struct machine *m = arg;
	uint64_t one = 1;

	m->rc = vmm_run(&m->cfg, &m->status, &m->err);
	atomic_store(&m->ended, true);
	/* The guest is gone: whatever waits on it must stop waiting. */
	agent_cancel(m->agent);
	(void)!write(m->done_fd, &one, sizeof(one));
	return NULL;
}

int machine_start(struct machine *m, gantry_error_t *err)
{
	if (vmm_validate(&m->cfg, err) < 0)
		return -1;
	m->cfg.stop_fd = eventfd(0, EFD_CLOEXEC);
	m->done_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	if (m->cfg.stop_fd < 0 || m->done_fd < 0)
		return gantry_error_errno(err, "eventfd");
	/* Before the guest boots, so its first dial lands. */
	if (agent_listen(m->cfg.vsock_dir, &m->agent, err) < 0)
		return -1;
	if (pthread_create(&m->thread, NULL, machine_thread, m) != 0)
		return gantry_error(err, 0, "cannot start the VM thread");
	m->started = true;
	return 0;
}

int machine_wait_ready(struct machine *m, int timeout_ms, gantry_error_t *err)
{
	if (agent_wait_ready(m->agent, timeout_ms, NULL, err) == 0)
		return 0;
	if (atomic_load(&m->ended)) {
		machine_join(m);
		if (m->rc < 0) {
			gantry_error_free(err);
			return gantry_error(err, 0, "%s", gantry_error_str(m->err));
		}
	}
	return -1;
}

void machine_kill(struct machine *m)
{
	uint64_t one = 1;

	if (m->cfg.stop_fd >= 0)
		(void)!write(m->cfg.stop_fd, &one, sizeof(one));
}

void machine_join(struct machine *m)
{
	if (!m->started)
		return;
	pthread_join(m->thread, NULL);
	m->started = false;
}

void machine_free(struct machine *m)
{
	if (m->started) {
		machine_kill(m);
		machine_join(m);
	}
	if (m->agent)
		agent_free(m->agent);
	if (m->cfg.stop_fd >= 0)
		close(m->cfg.stop_fd);
	if (m->done_fd >= 0)
		close(m->done_fd);
	gantry_error_free(&m->err);
	free((char *)m->cfg.console);
	free(m->kernel);
	free(m->sysroot);
	*m = (struct machine){ .done_fd = -1, .cfg.stop_fd = -1 };
}
