/* The VMM worker: a sandbox's VM (KVM, its vCPUs, every device) in a
 * process of its own, the gantry binary executed afresh as
 * `gantry __vmm-worker`, confined (confine.h) before the guest runs one
 * instruction. The supervisor, or the CLI for a one-shot exec, opens
 * every file and socket the VM needs and hands them over; the worker opens
 * nothing by path and makes no socket.
 *
 * Its fds: 0 and 1 /dev/null, 2 the caller's stderr, 3 the channel (a
 * SOCK_SEQPACKET socket, one JSON message each way, with descriptors;
 * worker/worker.h). The share server is not in it: its virtio-fs device's
 * requests go to the share worker (share/worker.h) over the RPC sockets
 * the configuration brings, guest RAM a memfd it sends there first.
 *
 * The channel, in order:
 *   caller -> worker  {"op":"config",...,"devices":{KEY:V...}} with the
 *                     fds it lists: /dev/kvm, kernel, initrd, console,
 *                     terminal input, stop eventfd, guest profile, then
 *                     each device's in the device table's order
 *                     (machine/devices.h: the disks, the frame socket,
 *                     the vsock listener, the share worker's RPC sockets)
 *   worker -> caller  {"op":"ready","isolation":REPORT} once set up and
 *                     confined, or {"op":"error","error":LINE}
 *   worker -> caller  {"op":"connect","id":N,"port":P} when the guest
 *                     dials host port P; the answer {"op":"connected",
 *                     "id":N,"ok":B} carries the connected socket
 *   worker -> caller  {"op":"exit","rc":R,"status":S[,"error":LINE]} last. */
#ifndef GANTRY_MACHINE_WORKER_H
#define GANTRY_MACHINE_WORKER_H

#define VMM_WORKER_ROLE	  "__vmm-worker"
#define VMM_WORKER_NOFILE 4096 /* vsock streams and ours */

/* `gantry __vmm-worker`: the worker's side (worker_main.c); the caller's
 * is src/sandbox/vmmworker.c. */
int vmm_worker_main(int argc, char **argv);

#endif
