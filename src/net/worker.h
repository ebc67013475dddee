/* The network worker, `gantry __net-worker` (net.h has its command line
 * and control protocol): one thread, one poll() loop over the guest's
 * frame fd, the control socket, the DNS proxy and libslirp. */
#ifndef GANTRY_NET_WORKER_H
#define GANTRY_NET_WORKER_H

int net_worker_main(int argc, char **argv);

#endif
