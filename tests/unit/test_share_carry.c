/* The share server's tables across a snapshot (share/carry.c): a new
 * server of the same exports takes the old one's table, and the ids and
 * handles the guest holds name the same files; what is gone, replaced or
 * forged is left out, and a table that is not one is refused whole. */
#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#pragma GCC diagnostic ignored "-Wunused-function" /* share_client.h is a kit */
#include "share_client.h"

#define TABLE_MAX (1u << 20)
#define HDR_LEN	  44 /* carry.c's header: 5 u32, 3 u64 */

/* The guest's view before the save: ids it was given, handles it holds. */
struct held {
	int64_t d, x, f, link;
	int64_t fh_f, fh_d, fh_ro;
};

static void hold(struct cl *c, struct held *h)
{
	int64_t rof;

	assert_int_equal(symlink("f", cl_path(c, "share/link")), 0);
	h->d = cl_lookup(c, c->rw, "d");
	h->x = cl_lookup(c, (uint64_t)h->d, "x");
	h->f = cl_lookup(c, c->rw, "f");
	h->link = cl_lookup(c, c->rw, "link");
	assert_true(h->d > 1 && h->x > 1 && h->f > 1 && h->link > 1);
	h->fh_f = cl_open(c, FUSE_OPEN, (uint64_t)h->f, O_RDWR);
	h->fh_d = cl_open(c, FUSE_OPENDIR, (uint64_t)h->d, O_RDONLY);
	rof = cl_lookup(c, c->ro, "f");
	h->fh_ro = cl_open(c, FUSE_OPEN, (uint64_t)rof, O_RDONLY);
	assert_true(h->fh_f > 0 && h->fh_d > 0 && h->fh_ro > 0);
}

/* hold(), then c's server's table into table: its length. */
static size_t hold_and_save(struct cl *c, struct held *h, uint8_t *table)
{
	hold(c, h);
	return fs_server_save(c->s, table, TABLE_MAX);
}

/* A server as the restored VM's: the same directories, exports added in
 * the order given (NULL ends it), past INIT as the save says. */
static struct fs_server *server_of(struct cl *c, const char *const *tags, size_t max_nodes)
{
	struct fs_export_opts rw = { 0 }, ro = { .ro = true };
	gantry_error_t err = NULL;
	struct fs_server *s;

	assert_int_equal(fs_server_new(&s, max_nodes, 0, &err), 0);
	for (size_t i = 0; tags[i]; i++) {
		const char *dir = strcmp(tags[i], "other") == 0 ? "other" : "share";
		int fd = open(cl_path(c, dir), O_PATH | O_DIRECTORY | O_CLOEXEC);

		assert_int_equal(fs_server_add_export(s, tags[i], fd,
						      strcmp(tags[i], "ro") == 0 ? &ro : &rw, &err),
				 0);
		close(fd);
	}
	fs_server_assume_init(s, 38);
	return s;
}

static struct fs_server *server_again(struct cl *c, const char *const *tags)
{
	return server_of(c, tags, 0);
}

/* The table of c's server, and c moved onto a new server that took it. */
static long restore(struct cl *c, const char *const *tags, uint8_t *table, size_t *len)
{
	long taken;

	*len = fs_server_save(c->s, table, TABLE_MAX);
	assert_true(*len > 0);
	fs_server_free(c->s);
	c->s = server_again(c, tags);
	taken = fs_server_load(c->s, table, *len);
	return taken;
}

static const char *const same_order[] = { "rw", "ro", "other", NULL };

static void test_carried(void **state)
{
	FX();
	uint8_t *table = xzalloc(TABLE_MAX);
	struct held h;
	size_t len;
	int64_t fresh;

	hold(c, &h);
	assert_int_equal(restore(c, same_order, table, &len), 5); /* d, x, f, link; ro's f */
	/* The same ids are the same files. */
	assert_int_equal(cl_attr(c, (uint64_t)h.x)->size, 1);
	assert_int_equal(cl_attr(c, (uint64_t)h.f)->size, 5);
	assert_true(S_ISLNK(cl_attr(c, (uint64_t)h.link)->mode));
	assert_int_equal(cl_lookup(c, (uint64_t)h.d, "x"), h.x);
	assert_int_equal(cl_lookup(c, FUSE_ROOT_ID, "other"), (int64_t)c->other);
	/* The handles are open as they were. */
	assert_int_equal(cl_read(c, (uint64_t)h.f, (uint64_t)h.fh_f, 0, 100), 5);
	assert_memory_equal(c->rep, "hello", 5);
	assert_int_equal(cl_write(c, (uint64_t)h.f, (uint64_t)h.fh_f, 5, " again"), 0);
	assert_string_equal(cl_get(c, "share/f"), "hello again");
	{
		struct fuse_read_in in = { .fh = (uint64_t)h.fh_d, .size = 4096 };

		assert_int_equal(CALL(c, FUSE_READDIR, (uint64_t)h.d, ARG(in)), 0);
		assert_non_null(memmem(c->rep, c->rep_len, "x", 1));
	}
	assert_int_equal(cl_release(c, FUSE_RELEASE, (uint64_t)h.f, (uint64_t)h.fh_f), 0);
	assert_int_equal(cl_release(c, FUSE_RELEASEDIR, (uint64_t)h.d, (uint64_t)h.fh_d), 0);
	/* New ids and handles never take an old one's. */
	cl_put(c, "share/new", "n");
	fresh = cl_lookup(c, c->rw, "new");
	assert_true(fresh > h.link && fresh > h.x && fresh > h.f && fresh > (int64_t)c->other);
	assert_true(cl_open(c, FUSE_OPEN, (uint64_t)fresh, O_RDONLY) != h.fh_ro);
	/* The lookups the guest counted are forgotten as it counts them. */
	assert_int_equal(cl_forget(c, (uint64_t)h.x, 2), 1);
	assert_true(cl_lookup(c, (uint64_t)h.d, "x") > fresh);
	free(table);
	canary_same(f);
}

/* What changed on the host while the VM was saved is left out: the id of
 * a file removed, or replaced by another of its name, answers ESTALE. */
static void test_changed_meanwhile(void **state)
{
	FX();
	uint8_t *table = xzalloc(TABLE_MAX);
	struct fuse_getattr_in ga = { 0 };
	struct held h;
	size_t len;

	len = hold_and_save(c, &h, table);
	fs_server_free(c->s);
	assert_int_equal(unlink(cl_path(c, "share/d/x")), 0);
	assert_int_equal(unlink(cl_path(c, "share/f")), 0);
	cl_put(c, "share/f", "another file");
	c->s = server_again(c, same_order);
	/* All five kept; x and both f are not found when named. */
	assert_int_equal(fs_server_load(c->s, table, len), 5);
	assert_int_equal(CALL(c, FUSE_GETATTR, (uint64_t)h.x, ARG(ga)), -ESTALE);
	assert_int_equal(CALL(c, FUSE_GETATTR, (uint64_t)h.f, ARG(ga)), -ESTALE);
	assert_int_equal(cl_read(c, (uint64_t)h.f, (uint64_t)h.fh_f, 0, 10), -ESTALE);
	/* The new file gets an id of its own. */
	assert_true(cl_lookup(c, c->rw, "f") > h.link);
	free(table);
	canary_same(f);
}

/* The restored server's exports in another order, one more among them:
 * each carried root keeps its id, and the new one takes none the guest
 * holds. */
static void test_exports_reordered(void **state)
{
	FX();
	static const char *const order[] = { "new", "other", "ro", "rw", NULL };
	uint8_t *table = xzalloc(TABLE_MAX);
	uint64_t rw = c->rw, other = c->other;
	struct held h;
	size_t len;
	int64_t added;

	hold(c, &h);
	assert_int_equal(restore(c, order, table, &len), 5);
	assert_int_equal(cl_lookup(c, FUSE_ROOT_ID, "rw"), (int64_t)rw);
	assert_int_equal(cl_lookup(c, FUSE_ROOT_ID, "other"), (int64_t)other);
	added = cl_lookup(c, FUSE_ROOT_ID, "new");
	assert_true(added > h.link && added > h.x && added > h.f);
	assert_int_equal(cl_attr(c, (uint64_t)h.f)->size, 5);
	free(table);
	canary_same(f);
}

/* A handle a read-only export cannot give is not opened again, whatever
 * the table says. */
static void test_handles_as_open_would(void **state)
{
	FX();
	uint8_t *table = xzalloc(TABLE_MAX);
	struct held h;
	size_t len;

	len = hold_and_save(c, &h, table);
	/* Make the read-only export's handle a read-write one: its flags are
	 * the last four bytes of the table, the last handle saved. */
	{
		int32_t fl;

		memcpy(&fl, table + len - 4, 4);
		if ((fl & O_ACCMODE) == O_RDONLY) {
			fl |= O_RDWR;
			memcpy(table + len - 4, &fl, 4);
		}
	}
	fs_server_free(c->s);
	c->s = server_again(c, same_order);
	assert_true(fs_server_load(c->s, table, len) > 0);
	{
		struct fs_stats st;

		fs_server_stats(c->s, &st);
		assert_int_equal(st.handles, 2);
	}
	free(table);
	canary_same(f);
}

/* Hostile tables: cut short, grown, bytes flipped, paths out of the
 * export, ids of another route. Refused whole, or only what holds taken;
 * never a file outside the export. */
static void test_hostile_tables(void **state)
{
	FX();
	uint8_t *table = xzalloc(TABLE_MAX), *bad = xzalloc(TABLE_MAX);
	static const char *const rogue[] = { "../canary/secret", "d/../../canary/secret",
					     "link/x", "/etc/passwd", "./f" };
	struct held h;
	size_t len;

	len = hold_and_save(c, &h, table);
	fs_server_free(c->s);
	c->s = server_again(c, same_order);
	/* Cut short at every length, and one byte too many. */
	for (size_t n = 0; n < len; n++)
		assert_int_equal(fs_server_load(c->s, table, n), -1);
	memcpy(bad, table, len);
	assert_int_equal(fs_server_load(c->s, bad, len + 1), -1);
	/* Every byte flipped in turn: never a crash, never the canary. */
	for (size_t i = 0; i < len; i++) {
		memcpy(bad, table, len);
		bad[i] ^= 0xa5;
		fs_server_free(c->s);
		c->s = server_again(c, same_order);
		(void)fs_server_load(c->s, bad, len);
	}
	/* A node whose path leaves the export, as the only node. */
	for (size_t k = 0; k < ARRAY_SIZE(rogue); k++) {
		uint32_t hdr[5] = { 0x4e534647u, 1, 1, 1, 0 };
		uint64_t hub = 0, ev[2] = { c->rw, 1 }, nv[6] = { c->rw + 100, 1, 0, 0, 0, 0 };
		uint32_t type = S_IFREG;
		uint8_t tl = 2, ex = 0;
		uint16_t pl = (uint16_t)strlen(rogue[k]);
		size_t n = 0;
		struct stat st;

		assert_int_equal(stat(cl_path(c, "canary/secret"), &st), 0);
		nv[2] = st.st_dev;
		nv[3] = st.st_ino;
#define APPEND(p, l) (memcpy(bad + n, (p), (l)), n += (l))
		APPEND(hdr, sizeof(hdr));
		APPEND(&hub, 8);
		APPEND(&hub, 8); /* no next id: the table's */
		APPEND(&hub, 8); /* nor generation */
		APPEND(ev, sizeof(ev));
		APPEND(&tl, 1);
		APPEND("rw", 2);
		APPEND(nv, sizeof(nv));
		APPEND(&type, 4);
		APPEND(&ex, 1);
		APPEND(&pl, 2);
		APPEND(rogue[k], pl);
#undef APPEND
		fs_server_free(c->s);
		c->s = server_again(c, same_order);
		/* Kept, and not found when named: the walk stays beneath. */
		assert_int_equal(fs_server_load(c->s, bad, n), 1);
		assert_int_equal(cl_read(c, c->rw + 100, 1, 0, 10), -ESTALE);
		{
			struct fuse_getattr_in ga = { 0 };

			assert_int_equal(CALL(c, FUSE_GETATTR, c->rw + 100, ARG(ga)), -ESTALE);
		}
	}
	/* Ids of another route are not this server's to give. */
	{
		uint64_t id;

		memcpy(&id, table + HDR_LEN, 8); /* the first export's root */
		memcpy(bad, table, len);
		id |= 1ull << FS_ROUTE_SHIFT;
		memcpy(bad + HDR_LEN, &id, 8);
		fs_server_free(c->s);
		c->s = server_again(c, same_order);
		assert_true(fs_server_load(c->s, bad, len) >= 0);
		assert_true(cl_lookup(c, FUSE_ROOT_ID, "rw") != (int64_t)id);
	}
	free(table);
	free(bad);
	canary_same(f);
}

/* The new server's masks hold whatever the table says: beneath a
 * protected directory a file is read-only, beneath a hidden one nothing
 * is taken. */
static void test_masks_hold(void **state)
{
	FX();
	uint8_t *table = xzalloc(TABLE_MAX);
	struct held h;
	size_t len;
	int64_t fh_x;

	hold(c, &h);
	fh_x = cl_open(c, FUSE_OPEN, (uint64_t)h.x, O_RDWR);
	assert_true(fh_x > 0);
	len = fs_server_save(c->s, table, TABLE_MAX);
	for (int hide = 0; hide <= 1; hide++) {
		struct fs_export_opts o = { 0 };
		gantry_error_t err = NULL;
		struct fs_stats st;
		int fd = open(cl_path(c, "share"), O_PATH | O_DIRECTORY | O_CLOEXEC);

		assert_int_equal(fs_export_mask(&o, fd, "d", hide, &err), 0);
		fs_server_free(c->s);
		assert_int_equal(fs_server_new(&c->s, 0, 0, &err), 0);
		assert_int_equal(fs_server_add_export(c->s, "rw", fd, &o, &err), 0);
		close(fd);
		fs_server_assume_init(c->s, 38);
		/* d, f, link and x kept (ro's f has no export here); x is
		 * not found where d is hidden. */
		assert_int_equal(fs_server_load(c->s, table, len), 4);
		fs_server_stats(c->s, &st);
		/* f's handle; d's directory handle only where d is not hidden;
		 * x's read-write one never. */
		assert_int_equal(st.handles, hide ? 1 : 2);
		assert_int_equal(cl_read(c, (uint64_t)h.x, (uint64_t)fh_x, 0, 1),
				 hide ? -ESTALE : -EBADF);
	}
	free(table);
	canary_same(f);
}

/* The nodes are walked to as the guest names them, not before: a node
 * forgotten before it is named is never walked to, and one not yet named
 * goes into the next save as it came. */
static void test_taken_as_named(void **state)
{
	FX();
	uint8_t *table = xzalloc(TABLE_MAX), *again = xzalloc(TABLE_MAX);
	struct fs_stats before, after;
	struct fuse_getattr_in ga = { 0 };
	struct held h;
	size_t len;

	len = hold_and_save(c, &h, table);
	fs_server_free(c->s);
	c->s = server_again(c, same_order);
	assert_int_equal(fs_server_load(c->s, table, len), 5);
	fs_server_stats(c->s, &before);
	/* Three roots, and the nodes of the three open handles: f, d, ro's f. */
	assert_int_equal(before.nodes, 3 + 3);
	assert_int_equal(cl_attr(c, (uint64_t)h.x)->size, 1);
	fs_server_stats(c->s, &after);
	assert_int_equal(after.nodes, before.nodes + 1);
	/* link forgotten unnamed: gone, though it is still on the host. */
	assert_int_equal(cl_forget(c, (uint64_t)h.link, 1), 1);
	assert_int_equal(CALL(c, FUSE_GETATTR, (uint64_t)h.link, ARG(ga)), -ESTALE);
	/* Saved again with x named and link forgotten: a third server has
	 * x, f and d, and not link. */
	len = fs_server_save(c->s, again, TABLE_MAX);
	fs_server_free(c->s);
	c->s = server_again(c, same_order);
	assert_int_equal(fs_server_load(c->s, again, len), 4);
	assert_int_equal(cl_attr(c, (uint64_t)h.x)->size, 1);
	assert_int_equal(cl_attr(c, (uint64_t)h.d)->mode & S_IFMT, S_IFDIR);
	assert_int_equal(CALL(c, FUSE_GETATTR, (uint64_t)h.link, ARG(ga)), -ESTALE);
	assert_int_equal(cl_read(c, (uint64_t)h.f, (uint64_t)h.fh_f, 0, 5), 5);
	free(table);
	free(again);
	canary_same(f);
}

/* Every node kept is an open file's: all are taken up with the handles,
 * and what the server kept of the table goes with the last. */
static void test_all_taken_with_handles(void **state)
{
	FX();
	uint8_t *table = xzalloc(TABLE_MAX);
	int64_t n = cl_lookup(c, c->rw, "f"), fh = cl_open(c, FUSE_OPEN, (uint64_t)n, O_RDONLY);
	size_t len = fs_server_save(c->s, table, TABLE_MAX);

	assert_true(n > 1 && fh > 0);
	fs_server_free(c->s);
	c->s = server_again(c, same_order);
	assert_int_equal(fs_server_load(c->s, table, len), 1);
	assert_int_equal(cl_read(c, (uint64_t)n, (uint64_t)fh, 0, 5), 5);
	assert_memory_equal(c->rep, "hello", 5);
	free(table);
	canary_same(f);
}

/* The guest looks a kept node's name up again before it names the node's
 * id (its dentry's timeout ran out): the same id, not a second one, and
 * the id works after. */
static void test_looked_up_before_named(void **state)
{
	FX();
	uint8_t *table = xzalloc(TABLE_MAX);
	struct held h;
	size_t len = hold_and_save(c, &h, table);

	fs_server_free(c->s);
	c->s = server_again(c, same_order);
	assert_int_equal(fs_server_load(c->s, table, len), 5);
	assert_int_equal(cl_lookup(c, (uint64_t)h.d, "x"), h.x);
	assert_int_equal(cl_lookup(c, c->rw, "link"), h.link);
	assert_int_equal(cl_attr(c, (uint64_t)h.x)->size, 1);
	/* Its lookups are the table's and this one: two FORGETs of the
	 * table's count leave it, the third's lookup ends it. */
	assert_int_equal(cl_forget(c, (uint64_t)h.link, 1), 1);
	assert_true(S_ISLNK(cl_attr(c, (uint64_t)h.link)->mode));
	assert_int_equal(cl_forget(c, (uint64_t)h.link, 1), 1);
	{
		struct fuse_getattr_in ga = { 0 };

		assert_int_equal(CALL(c, FUSE_GETATTR, (uint64_t)h.link, ARG(ga)), -ESTALE);
	}
	free(table);
	canary_same(f);
}

/* Ids the guest holds that the table lacks (a node moved out of the share
 * before the save) are never given again; nor are the roots' ids, with a
 * table of no nodes at all. */
static void test_ids_never_given_again(void **state)
{
	FX();
	uint8_t *table = xzalloc(TABLE_MAX);
	int64_t z, fresh;
	size_t len;

	cl_put(c, "share/z", "z");
	z = cl_lookup(c, c->rw, "z");
	assert_true(z > 1);
	assert_int_equal(rename(cl_path(c, "share/z"), cl_path(c, "z-outside")), 0);
	len = fs_server_save(c->s, table, TABLE_MAX);
	fs_server_free(c->s);
	c->s = server_again(c, same_order);
	assert_int_equal(fs_server_load(c->s, table, len), 0);
	cl_put(c, "share/new", "n");
	fresh = cl_lookup(c, c->rw, "new");
	assert_true(fresh > z);
	unlink(cl_path(c, "z-outside"));
	/* A table of nothing: each root an id of its own, past the hub's. */
	{
		uint8_t empty[HDR_LEN] = { 0 };
		uint32_t magic = 0x4e534647u, version = 1;
		int64_t root;

		memcpy(empty, &magic, 4);
		memcpy(empty + 4, &version, 4);
		fs_server_free(c->s);
		c->s = server_again(c, same_order);
		assert_int_equal(fs_server_load(c->s, empty, sizeof(empty)), 0);
		root = cl_lookup(c, FUSE_ROOT_ID, "rw");
		assert_true(root > 1);
		assert_true(cl_lookup(c, (uint64_t)root, "f") > root);
	}
	free(table);
	canary_same(f);
}

/* A node the table has no room for when first named is kept, and taken
 * up once there is room. */
static void test_no_room_yet(void **state)
{
	FX();
	struct fuse_getattr_in ga = { 0 };
	uint8_t *table = xzalloc(TABLE_MAX);
	int64_t g, x, d;
	size_t len;

	d = cl_lookup(c, c->rw, "d");
	x = cl_lookup(c, (uint64_t)d, "x");
	g = cl_lookup(c, c->other, "g");
	len = fs_server_save(c->s, table, TABLE_MAX);
	fs_server_free(c->s);
	/* Three roots and one node at most. */
	c->s = server_of(c, same_order, 4);
	assert_int_equal(fs_server_load(c->s, table, len), 3);
	assert_int_equal(cl_attr(c, (uint64_t)g)->size, 1);
	assert_int_equal(CALL(c, FUSE_GETATTR, (uint64_t)x, ARG(ga)), -ESTALE);
	/* g forgotten: room for x, still kept. */
	assert_int_equal(cl_forget(c, (uint64_t)g, 1), 1);
	assert_int_equal(cl_attr(c, (uint64_t)x)->size, 1);
	free(table);
	canary_same(f);
}

/* Only a server that has answered nothing takes a table. */
static void test_only_a_new_server(void **state)
{
	FX();
	uint8_t *table = xzalloc(TABLE_MAX);
	struct held h;
	size_t len;

	len = hold_and_save(c, &h, table);
	assert_int_equal(fs_server_load(c->s, table, len), -1);
	/* A buffer too small for the whole table keeps what fits, and is a
	 * table still. */
	{
		size_t small = fs_server_save(c->s, table, 120);

		assert_true(small > 0 && small <= 120);
		fs_server_free(c->s);
		c->s = server_again(c, same_order);
		assert_true(fs_server_load(c->s, table, small) >= 0);
		/* One that only looked an export up in the hub: the guest
		 * holds that root's id, which a table would renumber. */
		fs_server_free(c->s);
		c->s = server_again(c, same_order);
		assert_true(cl_lookup(c, FUSE_ROOT_ID, "rw") > 1);
		assert_int_equal(fs_server_load(c->s, table, small), -1);
	}
	free(table);
	canary_same(f);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_carried, setup, teardown),
		cmocka_unit_test_setup_teardown(test_changed_meanwhile, setup, teardown),
		cmocka_unit_test_setup_teardown(test_exports_reordered, setup, teardown),
		cmocka_unit_test_setup_teardown(test_handles_as_open_would, setup, teardown),
		cmocka_unit_test_setup_teardown(test_hostile_tables, setup, teardown),
		cmocka_unit_test_setup_teardown(test_masks_hold, setup, teardown),
		cmocka_unit_test_setup_teardown(test_taken_as_named, setup, teardown),
		cmocka_unit_test_setup_teardown(test_all_taken_with_handles, setup, teardown),
		cmocka_unit_test_setup_teardown(test_looked_up_before_named, setup, teardown),
		cmocka_unit_test_setup_teardown(test_ids_never_given_again, setup, teardown),
		cmocka_unit_test_setup_teardown(test_no_room_yet, setup, teardown),
		cmocka_unit_test_setup_teardown(test_only_a_new_server, setup, teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
