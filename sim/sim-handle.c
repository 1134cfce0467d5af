/*
 * sim-handle.c - registry of live handles.
 *
 * Handles given to callers are object pointers, but we never dereference
 * one before finding it in this table, so a stale or random pointer is an
 * error code, not a crash.  Lookups take a reference; the memory is freed
 * when the last reference goes (a queued task may outlive a destroy).
 * The lock guards the table; reference counts are atomic, so letting go
 * of a reference takes no lock (the table's own reference keeps a
 * findable object alive, so a lookup never revives a dying one).
 */
#include <pthread.h>
#include <stdint.h>

#include "sim.h"

#define SIM_HANDLE_BUCKETS 1024

static pthread_mutex_t	 sim_handle_lock = PTHREAD_MUTEX_INITIALIZER;
static struct sim_obj	*sim_handle_table[SIM_HANDLE_BUCKETS];

static unsigned
sim_handle_hash(const void *p)
{
	uintptr_t	v = (uintptr_t)p;

	return ((unsigned)((v >> 4) ^ (v >> 14)) % SIM_HANDLE_BUCKETS);
}

/* Publish obj with one reference owned by the table. */
void
sim_handle_add(struct sim_obj *obj, uint32_t magic,
    void (*destroy)(struct sim_obj *))
{
	unsigned	h = sim_handle_hash(obj);

	obj->magic = magic;
	obj->refs = 1;
	obj->destroy = destroy;
	pthread_mutex_lock(&sim_handle_lock);
	obj->next = sim_handle_table[h];
	sim_handle_table[h] = obj;
	pthread_mutex_unlock(&sim_handle_lock);
}

static struct sim_obj **
sim_handle_find(const void *p, uint32_t magic)
{
	struct sim_obj	**pp;

	for (pp = &sim_handle_table[sim_handle_hash(p)]; *pp != NULL;
	    pp = &(*pp)->next) {
		if ((const void *)*pp == p)
			return ((*pp)->magic == magic ? pp : NULL);
	}
	return (NULL);
}

/* A referenced live object of the given kind, or NULL.  Caller puts it. */
void *
sim_handle_get(const void *p, uint32_t magic)
{
	struct sim_obj	**pp;
	struct sim_obj	 *obj = NULL;

	if (p == NULL)
		return (NULL);
	pthread_mutex_lock(&sim_handle_lock);
	if ((pp = sim_handle_find(p, magic)) != NULL) {
		obj = *pp;
		__atomic_fetch_add(&obj->refs, 1, __ATOMIC_RELAXED);
	}
	pthread_mutex_unlock(&sim_handle_lock);
	return (obj);
}

void
sim_handle_ref(struct sim_obj *obj)
{
	__atomic_fetch_add(&obj->refs, 1, __ATOMIC_RELAXED);
}

void
sim_handle_put(struct sim_obj *obj)
{
	int	last;

	if (obj == NULL)
		return;
	last = __atomic_sub_fetch(&obj->refs, 1, __ATOMIC_ACQ_REL) == 0;
	if (last) {
		obj->magic = 0;
		obj->destroy(obj);
	}
}

/* Unpublish a handle and drop the table's reference; -1 if not live. */
int
sim_handle_remove(const void *p, uint32_t magic)
{
	struct sim_obj	**pp, *obj;

	if (p == NULL)
		return (-1);
	pthread_mutex_lock(&sim_handle_lock);
	if ((pp = sim_handle_find(p, magic)) == NULL) {
		pthread_mutex_unlock(&sim_handle_lock);
		return (-1);
	}
	obj = *pp;
	*pp = obj->next;
	pthread_mutex_unlock(&sim_handle_lock);
	sim_handle_put(obj);
	return (0);
}
