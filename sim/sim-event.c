/*
 * sim-event.c - events: a record is a zero-length task; reaching it
 * stamps the event with its modelled time (device clock and monotonic).
 * A stream wait is an internal task that holds its stream's timeline
 * until the record it waits for has run, then starts at its time.  Host
 * waits return once the host clock passes the modelled time.
 */
#include <stdlib.h>

#include "sim.h"

static void
sim_event_destroy(struct sim_obj *obj)
{
	struct sim_event	*ev = (struct sim_event *)obj;

	pthread_mutex_destroy(&ev->lock);
	pthread_cond_destroy(&ev->cond);
	free(ev);
}

SIM_EXPORT aclError
aclrtCreateEvent(aclrtEvent *event)
{
	struct sim_event	*ev;

	sim_runtime_init();
	if (event == NULL)
		return (ACL_ERROR_INVALID_PARAM);
	if ((ev = calloc(1, sizeof *ev)) == NULL)
		return (ACL_ERROR_RT_NO_EVENT_RESOURCE);
	pthread_mutex_init(&ev->lock, NULL);
	pthread_cond_init(&ev->cond, NULL);
	sim_handle_add(&ev->obj, SIM_MAGIC_EVENT, sim_event_destroy);
	*event = ev;
	return (ACL_SUCCESS);
}

SIM_EXPORT aclError
aclrtDestroyEvent(aclrtEvent event)
{
	if (sim_handle_remove(event, SIM_MAGIC_EVENT) != 0) {
		sim_runtime_set_error(ACL_ERROR_RT_INVALID_HANDLE,
		    "event %p", event);
		return (ACL_ERROR_RT_INVALID_HANDLE);
	}
	return (ACL_SUCCESS);
}

SIM_EXPORT aclError
aclrtRecordEvent(aclrtEvent event, aclrtStream stream)
{
	struct sim_event	*ev;
	struct sim_stream	*s;
	struct sim_task		*t;
	aclError		 e;

	if ((ev = sim_handle_get(event, SIM_MAGIC_EVENT)) == NULL) {
		sim_runtime_set_error(ACL_ERROR_RT_INVALID_HANDLE,
		    "event %p", event);
		return (ACL_ERROR_RT_INVALID_HANDLE);
	}
	if ((e = sim_stream_resolve(stream, &s)) != ACL_SUCCESS) {
		sim_handle_put(&ev->obj);
		return (e);
	}
	if ((t = sim_stream_task(NPUSIM_TASK_EVENT, "EVENT_RECORD")) == NULL) {
		sim_handle_put(&s->obj);
		sim_handle_put(&ev->obj);
		return (ACL_ERROR_BAD_ALLOC);
	}
	/* The task keeps our reference to the event. */
	t->u.event.ev = ev;
	pthread_mutex_lock(&ev->lock);
	t->u.event.gen = ++ev->recorded;
	pthread_mutex_unlock(&ev->lock);
	if ((e = sim_stream_submit(s, t)) != ACL_SUCCESS)
		sim_stream_free_task(t);
	sim_handle_put(&s->obj);
	return (e);
}

SIM_EXPORT aclError
aclrtSynchronizeEvent(aclrtEvent event)
{
	struct sim_event	*ev;
	struct sim_device	*d;
	uint64_t		 target, when;

	if ((ev = sim_handle_get(event, SIM_MAGIC_EVENT)) == NULL) {
		sim_runtime_set_error(ACL_ERROR_RT_INVALID_HANDLE,
		    "event %p", event);
		return (ACL_ERROR_RT_INVALID_HANDLE);
	}
	pthread_mutex_lock(&ev->lock);
	target = ev->recorded;
	while (ev->completed < target)
		pthread_cond_wait(&ev->cond, &ev->lock);
	when = ev->mono_ns;
	d = ev->dev;
	pthread_mutex_unlock(&ev->lock);
	sim_handle_put(&ev->obj);
	sim_clock_wait_until(when);
	/* The records of the work waited for are due now. */
	if (d != NULL && sim_runtime_device(d->id) == d)
		sim_shm_busy_sweep(d, sim_clock_mono());
	return (ACL_SUCCESS);
}

SIM_EXPORT aclError
aclrtStreamWaitEvent(aclrtStream stream, aclrtEvent event)
{
	struct sim_event	*ev;
	struct sim_stream	*s;
	struct sim_task		*t;
	uint64_t		 gen;
	aclError		 e;

	if ((ev = sim_handle_get(event, SIM_MAGIC_EVENT)) == NULL) {
		sim_runtime_set_error(ACL_ERROR_RT_INVALID_HANDLE,
		    "event %p", event);
		return (ACL_ERROR_RT_INVALID_HANDLE);
	}
	if ((e = sim_stream_resolve(stream, &s)) != ACL_SUCCESS) {
		sim_handle_put(&ev->obj);
		return (e);
	}
	pthread_mutex_lock(&ev->lock);
	gen = ev->recorded;
	pthread_mutex_unlock(&ev->lock);
	if (gen == 0) {
		/* Never recorded: nothing to wait for. */
		sim_handle_put(&s->obj);
		sim_handle_put(&ev->obj);
		return (ACL_SUCCESS);
	}
	if ((t = sim_stream_task(SIM_TASK_WAIT, "EVENT_WAIT")) == NULL) {
		sim_handle_put(&s->obj);
		sim_handle_put(&ev->obj);
		return (ACL_ERROR_BAD_ALLOC);
	}
	t->u.event.ev = ev;	/* the task keeps our reference */
	t->u.event.gen = gen;
	if ((e = sim_stream_submit(s, t)) != ACL_SUCCESS)
		sim_stream_free_task(t);
	sim_handle_put(&s->obj);
	return (e);
}

/*
 * Device timestamp of a completed event; an error if it has none yet,
 * including while the host clock has not reached its modelled time.
 */
static aclError
sim_event_stamp(struct sim_event *ev, uint64_t *ts)
{
	aclError	e = ACL_SUCCESS;

	pthread_mutex_lock(&ev->lock);
	if (ev->recorded == 0)
		e = ACL_ERROR_RT_EVENT_TIMESTAMP_INVALID;
	else if (ev->completed < ev->recorded ||
	    sim_clock_mono() < ev->mono_ns)
		e = ACL_ERROR_RT_EVENT_NOT_COMPLETE;
	else
		*ts = ev->ts_ns;
	pthread_mutex_unlock(&ev->lock);
	return (e);
}

SIM_EXPORT aclError
aclrtEventElapsedTime(float *ms, aclrtEvent startEvent, aclrtEvent endEvent)
{
	struct sim_event	*a, *b;
	uint64_t		 ta = 0, tb = 0;
	aclError		 e;

	if (ms == NULL)
		return (ACL_ERROR_INVALID_PARAM);
	a = sim_handle_get(startEvent, SIM_MAGIC_EVENT);
	b = sim_handle_get(endEvent, SIM_MAGIC_EVENT);
	if (a == NULL || b == NULL) {
		e = ACL_ERROR_RT_INVALID_HANDLE;
		sim_runtime_set_error(e, "event %p or %p", startEvent,
		    endEvent);
	} else if ((e = sim_event_stamp(a, &ta)) == ACL_SUCCESS &&
	    (e = sim_event_stamp(b, &tb)) == ACL_SUCCESS)
		*ms = (float)(((double)tb - (double)ta) / 1e6);
	sim_handle_put(a ? &a->obj : NULL);
	sim_handle_put(b ? &b->obj : NULL);
	return (e);
}
