/* What the guest's virtiofs driver and our device and share server agree
 * on beyond FUSE itself: the largest request. */
#ifndef GANTRY_PROTO_VIRTIOFS_H
#define GANTRY_PROTO_VIRTIOFS_H

/* A READ or WRITE: 1 MiB, Linux's most (FUSE_MAX_MAX_PAGES). The guest
 * takes it only if a chain can carry it beside the request's four header
 * descriptors, and a ring holds more than one such chain (virtio-fs: a
 * 1024-entry ring, chains up to VIRTQ_MAX_CHAIN, 260); fewer, larger
 * requests are what sequential I/O is made of. */
#define FS_MAX_PAGES 256

#endif
