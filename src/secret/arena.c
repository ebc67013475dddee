/* The secret arena (see store.h): one mapping, blocks of ARENA_UNIT bytes
 * found first-fit in a bitmap. Small and simple: at most a few hundred
 * values live at once. */
#include <pthread.h>
#include <stdlib.h>
#include <stdbool.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "common/util.h"
#include "secret/store.h"

#define ARENA_SIZE  (4u << 20)
#define ARENA_UNIT  64u
#define ARENA_UNITS (ARENA_SIZE / ARENA_UNIT)
#define ARENA_GUARD 4096u

static pthread_mutex_t arena_lock = PTHREAD_MUTEX_INITIALIZER;
static uint8_t *arena; /* NULL until first use; MAP_FAILED when it cannot be made */
static bool arena_locked;
static uint64_t used[ARENA_UNITS / 64];

/* A forked child's arena reads as zeros: it starts empty. */
static void arena_child(void)
{
	memset(used, 0, sizeof(used));
	pthread_mutex_init(&arena_lock, NULL);
}

/* Locked: the mapping, made on first use. */
static bool arena_map(void)
{
	uint8_t *m;

	if (arena)
		return arena != MAP_FAILED;
	m = mmap(NULL, ARENA_SIZE + 2 * ARENA_GUARD, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (m == MAP_FAILED || mprotect(m + ARENA_GUARD, ARENA_SIZE, PROT_READ | PROT_WRITE) < 0 ||
	    madvise(m + ARENA_GUARD, ARENA_SIZE, MADV_DONTDUMP) < 0 ||
	    madvise(m + ARENA_GUARD, ARENA_SIZE, MADV_WIPEONFORK) < 0) {
		/* Never a value where a dump or a child could read it. */
		if (m != MAP_FAILED)
			munmap(m, ARENA_SIZE + 2 * ARENA_GUARD);
		arena = MAP_FAILED;
		return false;
	}
	arena = m + ARENA_GUARD;
	arena_locked = mlock(arena, ARENA_SIZE) == 0;
	pthread_atfork(NULL, NULL, arena_child);
	return true;
}

static bool unit_used(size_t i)
{
	return used[i / 64] >> (i % 64) & 1;
}

static void units_mark(size_t at, size_t n, bool on)
{
	for (size_t i = at; i < at + n; i++) {
		if (on)
			used[i / 64] |= 1ULL << (i % 64);
		else
			used[i / 64] &= ~(1ULL << (i % 64));
	}
}

void *secret_alloc(size_t len)
{
	size_t n = (len + ARENA_UNIT - 1) / ARENA_UNIT, run = 0;
	void *p = NULL;

	if (len == 0 || len > ARENA_SIZE)
		return NULL;
	pthread_mutex_lock(&arena_lock);
	if (arena_map()) {
		for (size_t i = 0; i < ARENA_UNITS; i++) {
			run = unit_used(i) ? 0 : run + 1;
			if (run == n) {
				units_mark(i + 1 - n, n, true);
				p = arena + (i + 1 - n) * ARENA_UNIT;
				break;
			}
		}
	}
	pthread_mutex_unlock(&arena_lock);
	return p;
}

void secret_free(void *p, size_t len)
{
	size_t at, n = (len + ARENA_UNIT - 1) / ARENA_UNIT;

	if (p == NULL)
		return;
	/* A block that is not one of ours is a bug that would zero, or mark
	 * free, another secret: stop here. */
	if (arena == NULL || arena == MAP_FAILED || (uint8_t *)p < arena ||
	    (size_t)((uint8_t *)p - arena) % ARENA_UNIT ||
	    (size_t)((uint8_t *)p - arena) / ARENA_UNIT + n > ARENA_UNITS)
		abort();
	at = (size_t)((uint8_t *)p - arena) / ARENA_UNIT;
	for (size_t i = at; i < at + n; i++)
		if (!unit_used(i))
			abort();
	explicit_bzero(p, n * ARENA_UNIT);
	pthread_mutex_lock(&arena_lock);
	units_mark(at, n, false);
	pthread_mutex_unlock(&arena_lock);
}

bool secret_arena_locked(void)
{
	bool r;

	pthread_mutex_lock(&arena_lock);
	r = arena_map() && arena_locked;
	pthread_mutex_unlock(&arena_lock);
	return r;
}
