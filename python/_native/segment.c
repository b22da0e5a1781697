/* SPDX-License-Identifier: Apache-2.0 */
/* sharedseg._native.Segment: one sseg_t, its two phases without the GIL, and
 * the buffer protocol over its mapping.
 *
 * The mapping stays while anything can still reach it: close() only marks
 * the segment closed, and sseg_destroy runs once no buffer export and no
 * Pin is left. A Pin is what torch.frombuffer keeps (it drops the buffer
 * export at once and keeps a reference to the object instead), so every
 * tensor made from a Pin keeps the pages mapped. */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "native.h"

/* What complete's interrupt check needs: the library polls it (about every
 * 50 ms, and when a signal interrupts a wait) on the thread that waits in
 * sseg_complete, which released the GIL. */
struct waiting {
	PyObject *watch;     /* optional callable, asked at each poll */
	PyObject *type, *value, *tb; /* the exception that stopped the wait */
	int stop;
	int closing;	     /* close() asked populate_wait to stop: CLOSE_* */
};

/* The call that runs without the GIL, if any. complete changes the segment:
 * nothing else may touch it meanwhile. populate_wait only reads it, so the
 * other reads (info, populate_progress, views) go on beside it; close()
 * stops it (at its next poll, within about 20 ms) before releasing. */
enum running { RUN_NONE, RUN_COMPLETE, RUN_WAIT };
/* Who releases the pages once a stopped wait has returned: the closing
 * thread, or the waiting one where close() ran inside its wait (a signal
 * handler), which cannot wait for itself. */
enum { CLOSE_BY_CLOSER = 1, CLOSE_BY_WAITER };

struct segment_object {
	PyObject_HEAD
	sseg_t *seg;
	void *base;
	uint64_t size;
	int readonly;
	int completed;
	int closed;	      /* close() was asked for */
	enum running running; /* the call that runs without the GIL */
	pthread_t waiter;     /* the thread in populate_wait, while RUN_WAIT */
	Py_ssize_t exports;   /* live buffer exports of the Segment itself */
	Py_ssize_t pins;      /* live Pin objects */
	struct waiting *waiting; /* the library holds this pointer (opts.interrupt_ctx) */
	PyObject *quiesce;    /* called before sseg_destroy (device DMA rule) */
};

struct pin_object {
	PyObject_HEAD
	struct segment_object *segment;
};

PyTypeObject *sseg_py_segment_type;
PyTypeObject *sseg_py_pin_type;

/* Drops the reference held in *slot and puts value (a new one) there. */
static void replace_ref(PyObject **slot, PyObject *value)
{
	PyObject *old = *slot;

	*slot = value;
	Py_XDECREF(old);
}

/* A heap type's instance holds a reference to its type. */
static void free_instance(PyObject *obj)
{
	PyTypeObject *type = Py_TYPE(obj);

	PyObject_Free(obj);
	Py_DECREF(type);
}

/* The quiesce callable runs before the pages go: with host registration it
 * synchronises the device, so no DMA still runs when they are unregistered
 * and unmapped. Its failure is reported and the teardown goes on: a device
 * that cannot synchronise runs no DMA, and keeping the pages would leak
 * them. Called with the GIL held and no exception pending. */
static void quiesce(struct segment_object *self)
{
	PyObject *fn = self->quiesce, *r;

	if (!fn)
		return;
	self->quiesce = NULL;
	r = PyObject_CallObject(fn, NULL);
	if (!r)
		PyErr_WriteUnraisable(fn);
	Py_XDECREF(r);
	Py_DECREF(fn);
}

/* Destroys the segment when it was closed and nothing can reach it. */
static int release_if_unused(struct segment_object *self)
{
	int rc;

	if (!self->seg || !self->closed || self->running || self->exports || self->pins)
		return 0;
	quiesce(self);
	rc = sseg_destroy(self->seg);
	/* -EINPROGRESS: the library took the segment over and retries it. */
	if (!rc || rc == -EINPROGRESS) {
		self->seg = NULL;
		self->base = NULL;
		return 0;
	}
	return rc;
}

/* Where no exception can be raised (deallocation, buffer release): these
 * run while another exception may be propagating (a frame that held the
 * last view unwinds), so that one is kept aside and put back. */
static void release_quietly(struct segment_object *self)
{
	PyObject *type, *value, *tb;
	int rc;

	PyErr_Fetch(&type, &value, &tb);
	rc = release_if_unused(self);
	if (rc) {
		sseg_py_raise(sseg_py_error, rc);
		PyErr_WriteUnraisable((PyObject *)self);
	}
	sseg_py_log_drain();
	PyErr_Restore(type, value, tb);
}

/* sseg_interrupt_fn: non-zero stops the wait in sseg_complete. Signals
 * (Ctrl-C) and the watch callable are asked with the GIL taken for that
 * moment; the exception they raise is kept for complete to raise. */
static int interrupt_check(void *ctx)
{
	struct waiting *w = ctx;
	PyGILState_STATE gil;

	if (w->stop)
		return 1;
	gil = PyGILState_Ensure();
	if (PyErr_CheckSignals() < 0) {
		w->stop = 1;
	} else if (w->closing) { /* asked now, or by a signal handler just run */
		PyErr_Format(sseg_py_error, "wait_populated: the segment was closed %s while it "
					    "waited", w->closing == CLOSE_BY_WAITER
					    ? "by a signal handler on this thread" : "on another thread");
		w->stop = 1;
	} else if (w->watch) {
		PyObject *r = PyObject_CallObject(w->watch, NULL);

		w->stop = r == NULL;
		Py_XDECREF(r);
	}
	if (w->stop)
		PyErr_Fetch(&w->type, &w->value, &w->tb);
	PyGILState_Release(gil);
	return w->stop;
}

static void waiting_free(struct waiting *w)
{
	if (!w)
		return;
	Py_XDECREF(w->watch);
	Py_XDECREF(w->type);
	Py_XDECREF(w->value);
	Py_XDECREF(w->tb);
	PyMem_Free(w);
}

static int usable(struct segment_object *self, const char *what)
{
	/* The watch callable of complete may be this thread: the reason says
	 * what runs, not where. */
	if (self->running == RUN_COMPLETE) {
		PyErr_Format(sseg_py_error, "%s: complete is still running on this segment", what);
		return 0;
	}
	if (self->closed || !self->seg) {
		PyErr_Format(sseg_py_error, "%s: the segment is closed", what);
		return 0;
	}
	return 1;
}

/* ---- phase 1 ---- */

struct create_args {
	const char *name;
	int world_size, rank, owner_rank;
	uint64_t size;
	PyObject *layout;
	int backend, pages, numa, numa_node, populate, populate_threads;
	int readonly_peers, host_register, timeout_ms, device;
	const char *keeper;
};

static int parse_create(PyObject *args, PyObject *kwargs, struct create_args *a)
{
	static char *keywords[] = { "name",	"world_size",	 "rank",	     "owner_rank",
				    "size",	"layout",	 "backend",	     "pages",
				    "numa",	"numa_node",	 "populate",	     "populate_threads",
				    "readonly_peers", "host_register", "timeout_ms", "device", "keeper",
				    NULL };

	memset(a, 0, sizeof(*a));
	a->layout = Py_None;
	a->numa_node = -1;
	return PyArg_ParseTupleAndKeywords(
		args, kwargs, "siii|$O&Oiiiiiippiiz:create", keywords, &a->name, &a->world_size,
		&a->rank, &a->owner_rank, sseg_py_u64, &a->size, &a->layout, &a->backend, &a->pages,
		&a->numa,
		&a->numa_node, &a->populate, &a->populate_threads, &a->readonly_peers,
		&a->host_register, &a->timeout_ms, &a->device, &a->keeper);
}

static PyObject *wrap_segment(sseg_t *seg, struct waiting *waiting)
{
	struct sseg_info info = { .sz = sizeof(info) };
	struct segment_object *self;

	if (sseg_info(seg, &info))
		return sseg_py_raise(sseg_py_error, -EINVAL);
	self = PyObject_New(struct segment_object, sseg_py_segment_type);
	if (!self)
		return NULL;
	self->seg = seg;
	self->base = NULL;
	self->size = sseg_size(seg);
	self->readonly = info.readonly;
	self->completed = 0;
	self->closed = 0;
	self->running = RUN_NONE;
	self->exports = 0;
	self->pins = 0;
	self->waiting = waiting;
	self->quiesce = NULL;
	return (PyObject *)self;
}

PyObject *sseg_py_create(PyObject *module, PyObject *args, PyObject *kwargs)
{
	struct create_args a;
	char blob[SSEG_BLOB_SIZE], why[512];
	struct waiting *waiting;
	sseg_t *seg = NULL;
	PyObject *wrapped;
	int rc;

	if (!parse_create(args, kwargs, &a))
		return NULL;
	waiting = PyMem_Calloc(1, sizeof(*waiting));
	if (!waiting)
		return PyErr_NoMemory();
	SSEG_OPTS(opts, .name = a.name, .size = a.size, .world_size = a.world_size,
		  .rank = a.rank, .owner_rank = a.owner_rank, .backend = a.backend,
		  .pages = a.pages, .numa = a.numa, .numa_node = a.numa_node,
		  .populate = a.populate, .populate_threads = a.populate_threads,
		  .timeout_ms = a.timeout_ms, .device = a.device, .keeper = a.keeper,
		  .interrupt = interrupt_check,
		  .interrupt_ctx = waiting);
	if (a.layout != Py_None && !(opts.layout = sseg_py_layout_get(a.layout))) {
		waiting_free(waiting);
		return NULL;
	}
	opts.flags = (a.readonly_peers ? SSEG_F_READONLY_PEERS : 0) |
		     (a.host_register ? SSEG_F_HOST_REGISTER : 0);
	Py_BEGIN_ALLOW_THREADS
	rc = sseg_create(&opts, &seg, blob);
	Py_END_ALLOW_THREADS
	sseg_py_log_drain();
	if (rc) {
		waiting_free(waiting);
		snprintf(why, sizeof(why), "%s", sseg_last_error()[0] ? sseg_last_error()
								     : strerror(-rc));
		return Py_BuildValue("(Oy#is)", Py_None, blob, (Py_ssize_t)sizeof(blob), -rc, why);
	}
	wrapped = wrap_segment(seg, waiting);
	if (!wrapped) {
		sseg_destroy(seg);
		waiting_free(waiting);
		return NULL;
	}
	return Py_BuildValue("(Ny#is)", wrapped, blob, (Py_ssize_t)sizeof(blob), 0, "");
}

/* ---- phase 3 ---- */

/* Puts back the exception that stopped the wait; 1 when there was one. */
static int raise_stop(struct waiting *w)
{
	if (!w->stop)
		return 0;
	if (!w->type) /* stopped without an exception: cannot happen, but say so */
		PyErr_SetString(sseg_py_error, "complete: the wait was stopped");
	else
		PyErr_Restore(w->type, w->value, w->tb);
	w->type = w->value = w->tb = NULL;
	w->stop = 0;
	return 1;
}

static PyObject *segment_complete(PyObject *self_obj, PyObject *args)
{
	struct segment_object *self = (struct segment_object *)self_obj;
	struct waiting *w = self->waiting;
	PyObject *arg, *watch = Py_None;
	Py_buffer blobs;
	int rc;

	if (!PyArg_ParseTuple(args, "O|O:complete", &arg, &watch))
		return NULL;
	if (!usable(self, "complete"))
		return NULL;
	if (self->completed)
		return PyErr_Format(sseg_py_error, "complete: the segment is already complete");
	if (watch != Py_None && !PyCallable_Check(watch))
		return PyErr_Format(PyExc_TypeError, "complete: watch must be callable or None");
	if (PyObject_GetBuffer(arg, &blobs, PyBUF_SIMPLE) < 0)
		return NULL;
	if (blobs.len % SSEG_BLOB_SIZE || blobs.len == 0) {
		PyBuffer_Release(&blobs);
		return PyErr_Format(PyExc_ValueError,
				    "complete needs world_size blobs of %u bytes, joined; got %zd bytes",
				    SSEG_BLOB_SIZE, blobs.len);
	}
	replace_ref(&w->watch, watch == Py_None ? NULL : (Py_INCREF(watch), watch));
	self->running = RUN_COMPLETE;
	Py_BEGIN_ALLOW_THREADS
	rc = sseg_complete(self->seg, blobs.buf);
	Py_END_ALLOW_THREADS
	self->running = RUN_NONE;
	Py_CLEAR(w->watch);
	PyBuffer_Release(&blobs);
	sseg_py_log_drain();
	if (raise_stop(w))
		return NULL;
	if (rc)
		return sseg_py_raise(sseg_py_error, rc);
	self->completed = 1;
	self->base = sseg_base(self->seg);
	Py_RETURN_NONE;
}

/* ---- what the library reports ---- */

static PyObject *info_dict(const struct sseg_info *i)
{
	PyObject *nodes = sseg_py_node_list(i->numa_nodes), *out;

	if (!nodes)
		return NULL;
	out = Py_BuildValue("{s:s,s:s,s:K,s:O,s:K,s:K,s:K,s:K,s:i,s:i,s:i,s:O,s:O,s:s,s:i,s:O,"
			    "s:d,s:d,s:d,s:s,s:K,s:i,s:s,s:i,s:O,s:s,s:O}",
			    "backend", sseg_backend_name(i->backend), "pages",
			    sseg_pages_name(i->pages), "page_size", (unsigned long long)i->page_size,
			    "pages_verified", i->pages_verified ? Py_True : Py_False, "huge_bytes",
			    (unsigned long long)i->huge_bytes, "base",
			    (unsigned long long)(uintptr_t)i->base, "size",
			    (unsigned long long)i->size, "mapped_size",
			    (unsigned long long)i->mapped_size, "rank", i->rank, "world_size",
			    i->world_size, "owner_rank", i->owner_rank, "is_owner",
			    i->is_owner ? Py_True : Py_False, "readonly",
			    i->readonly ? Py_True : Py_False, "numa", sseg_numa_name(i->numa),
			    "numa_node", i->numa_node, "numa_nodes", nodes, "create_s", i->create_s,
			    "complete_s", i->complete_s, "populate_s", i->populate_s, "pages_reason",
			    i->pages_reason, "device_addr", (unsigned long long)i->device_addr,
			    "registered_chunks", i->registered_chunks, "handle_type", i->handle_type,
			    "device", i->device, "pinned", i->pinned ? Py_True : Py_False,
			    "memfd_name", i->memfd_name, "kept", i->kept ? Py_True : Py_False);
	Py_DECREF(nodes);
	return out;
}

static PyObject *segment_info(PyObject *self_obj, PyObject *unused)
{
	struct segment_object *self = (struct segment_object *)self_obj;
	struct sseg_info info;
	int rc;

	if (!usable(self, "info"))
		return NULL;
	memset(&info, 0, sizeof(info));
	info.sz = sizeof(info);
	rc = sseg_info(self->seg, &info);
	if (rc)
		return sseg_py_raise(sseg_py_error, rc);
	return info_dict(&info);
}

/* ---- population in the background ---- */

static PyObject *segment_populate_progress(PyObject *self_obj, PyObject *unused)
{
	struct segment_object *self = (struct segment_object *)self_obj;
	uint64_t resident = 0, total = 0;
	int rc;

	if (!usable(self, "populate_progress"))
		return NULL;
	rc = sseg_populate_progress(self->seg, &resident, &total);
	if (rc)
		return sseg_py_raise(sseg_py_error, rc);
	return Py_BuildValue("(KK)", (unsigned long long)resident, (unsigned long long)total);
}

/* Without the GIL, Ctrl-C checked as in complete; TimeoutError when the
 * bound passed. */
static PyObject *segment_populate_wait(PyObject *self_obj, PyObject *args)
{
	struct segment_object *self = (struct segment_object *)self_obj;
	struct waiting *w = self->waiting;
	int timeout_ms, rc;

	if (!PyArg_ParseTuple(args, "i:populate_wait", &timeout_ms))
		return NULL;
	if (!usable(self, "wait_populated"))
		return NULL;
	if (!self->completed)
		return PyErr_Format(sseg_py_error, "wait_populated: the segment is not complete");
	/* One at a time: the stop and its exception are the segment's. */
	if (self->running == RUN_WAIT)
		return PyErr_Format(sseg_py_error, "wait_populated: another wait_populated is "
						   "running on this segment (one at a time)");
	self->running = RUN_WAIT;
	self->waiter = pthread_self();
	Py_BEGIN_ALLOW_THREADS
	rc = sseg_populate_wait(self->seg, timeout_ms);
	Py_END_ALLOW_THREADS
	self->running = RUN_NONE;
	if (w->closing == CLOSE_BY_WAITER)
		release_quietly(self);
	w->closing = 0;
	sseg_py_log_drain();
	if (raise_stop(w))
		return NULL;
	if (rc == -ETIMEDOUT)
		return sseg_py_raise(PyExc_TimeoutError, rc);
	if (rc)
		return sseg_py_raise(sseg_py_error, rc);
	Py_RETURN_NONE;
}

/* ---- lifetime ---- */

/* Asks the running wait to stop and waits until it has, within one of its
 * polls; 1 when the wait is this thread's own (close() in a signal handler
 * inside it): it stops once the handler returns, and releases then. */
static int stop_wait(struct segment_object *self)
{
	if (pthread_equal(self->waiter, pthread_self())) {
		self->waiting->closing = CLOSE_BY_WAITER;
		return 1;
	}
	self->waiting->closing = CLOSE_BY_CLOSER;
	while (self->running == RUN_WAIT) {
		Py_BEGIN_ALLOW_THREADS
		nanosleep(&(struct timespec){ .tv_nsec = 1000000L }, NULL);
		Py_END_ALLOW_THREADS
	}
	return 0;
}

static PyObject *segment_close(PyObject *self_obj, PyObject *unused)
{
	struct segment_object *self = (struct segment_object *)self_obj;
	int rc;

	if (self->running == RUN_COMPLETE)
		return PyErr_Format(sseg_py_error, "close: complete is still running on this segment");
	self->closed = 1;
	if (self->running == RUN_WAIT && stop_wait(self))
		Py_RETURN_FALSE; /* the wait releases the pages when it has stopped */
	rc = release_if_unused(self);
	if (rc)
		sseg_py_raise(sseg_py_error, rc);
	sseg_py_log_drain();
	if (rc)
		return NULL;
	/* True: unmapped now; False: a view still holds it, unmapped with the last. */
	return PyBool_FromLong(self->seg == NULL);
}

static PyObject *segment_set_quiesce(PyObject *self_obj, PyObject *fn)
{
	struct segment_object *self = (struct segment_object *)self_obj;

	if (fn != Py_None && !PyCallable_Check(fn))
		return PyErr_Format(PyExc_TypeError, "set_quiesce: fn must be callable or None");
	replace_ref(&self->quiesce, fn == Py_None ? NULL : (Py_INCREF(fn), fn));
	Py_RETURN_NONE;
}

static PyObject *segment_pin(PyObject *self_obj, PyObject *unused)
{
	struct segment_object *self = (struct segment_object *)self_obj;
	struct pin_object *pin;

	if (!usable(self, "pin"))
		return NULL;
	if (!self->completed)
		return PyErr_Format(sseg_py_error, "pin: the segment is not complete yet");
	pin = PyObject_New(struct pin_object, sseg_py_pin_type);
	if (!pin)
		return NULL;
	Py_INCREF(self_obj);
	pin->segment = self;
	self->pins++;
	return (PyObject *)pin;
}

static void segment_dealloc(PyObject *self_obj)
{
	struct segment_object *self = (struct segment_object *)self_obj;

	/* No export or Pin is left: each holds a reference to this object. */
	self->closed = 1;
	release_quietly(self);
	Py_CLEAR(self->quiesce);
	/* The library no longer holds the pointer once the segment is gone. */
	if (!self->seg)
		waiting_free(self->waiting);
	free_instance(self_obj);
}

/* ---- buffer protocol ---- */

static int fill_buffer(struct segment_object *seg, PyObject *exporter, Py_buffer *view, int flags)
{
	if (seg->closed || !seg->seg || !seg->completed) {
		PyErr_SetString(PyExc_BufferError, seg->completed ? "the segment is closed"
								  : "the segment is not complete yet");
		view->obj = NULL;
		return -1;
	}
	return PyBuffer_FillInfo(view, exporter, seg->base, (Py_ssize_t)seg->size, seg->readonly,
				 flags);
}

static int segment_getbuffer(PyObject *self_obj, Py_buffer *view, int flags)
{
	struct segment_object *self = (struct segment_object *)self_obj;
	int rc = fill_buffer(self, self_obj, view, flags);

	if (!rc)
		self->exports++;
	return rc;
}

static void segment_releasebuffer(PyObject *self_obj, Py_buffer *view)
{
	struct segment_object *self = (struct segment_object *)self_obj;

	self->exports--;
	release_quietly(self);
}

static PyObject *segment_base(PyObject *self_obj, void *closure)
{
	struct segment_object *self = (struct segment_object *)self_obj;

	return PyLong_FromUnsignedLongLong((unsigned long long)(uintptr_t)self->base);
}

static PyObject *segment_size(PyObject *self_obj, void *closure)
{
	return PyLong_FromUnsignedLongLong(((struct segment_object *)self_obj)->size);
}

static PyObject *segment_readonly(PyObject *self_obj, void *closure)
{
	return PyBool_FromLong(((struct segment_object *)self_obj)->readonly);
}

static PyObject *segment_closed(PyObject *self_obj, void *closure)
{
	return PyBool_FromLong(((struct segment_object *)self_obj)->closed);
}

static PyObject *segment_mapped(PyObject *self_obj, void *closure)
{
	struct segment_object *self = (struct segment_object *)self_obj;

	return PyBool_FromLong(self->seg != NULL && self->completed);
}

static PyMethodDef segment_methods[] = {
	{ "complete", segment_complete, METH_VARARGS,
	  "complete(blobs, watch=None): phase 3 (sseg_complete) without the GIL; blobs joined\n"
	  "in rank order. While it waits, signals are checked (Ctrl-C raises\n"
	  "KeyboardInterrupt) and watch() is called about every 50 ms: an exception from\n"
	  "it stops the wait and is raised. The segment is then left for close()." },
	{ "set_quiesce", segment_set_quiesce, METH_O,
	  "set_quiesce(fn): fn() runs once, just before the pages are released" },
	{ "info", segment_info, METH_NOARGS, "info() -> dict: sseg_info" },
	{ "populate_progress", segment_populate_progress, METH_NOARGS,
	  "populate_progress() -> (resident, total): sseg_populate_progress" },
	{ "populate_wait", segment_populate_wait, METH_VARARGS,
	  "populate_wait(timeout_ms): sseg_populate_wait without the GIL (negative: no\n"
	  "bound); Ctrl-C raises KeyboardInterrupt, the bound TimeoutError" },
	{ "close", segment_close, METH_NOARGS,
	  "close() -> bool: unmaps now (True) or with the last view (False)" },
	{ "pin", segment_pin, METH_NOARGS,
	  "pin() -> Pin: a buffer over the segment that keeps it mapped while alive" },
	{ NULL, NULL, 0, NULL },
};

static PyObject *segment_waiting(PyObject *self_obj, void *closure)
{
	return PyBool_FromLong(((struct segment_object *)self_obj)->running == RUN_WAIT);
}

static PyGetSetDef segment_getset[] = {
	{ "base", segment_base, NULL, "the mapping's address (0 before complete)", NULL },
	{ "size", segment_size, NULL, "declared bytes", NULL },
	{ "readonly", segment_readonly, NULL, "this rank maps the segment read-only", NULL },
	{ "closed", segment_closed, NULL, "close() was called", NULL },
	{ "mapped", segment_mapped, NULL, "the pages are still mapped here", NULL },
	{ "waiting", segment_waiting, NULL, "a thread is in populate_wait", NULL },
	{ NULL, NULL, NULL, NULL, NULL },
};

/* Not made from Python: create() makes them. */
#define NATIVE_ONLY (Py_TPFLAGS_DEFAULT | Py_TPFLAGS_DISALLOW_INSTANTIATION)

static PyType_Slot segment_slots[] = {
	{ Py_tp_doc, (void *)"One segment (sseg_t); made by create()." },
	{ Py_tp_dealloc, (void *)segment_dealloc },
	{ Py_tp_methods, segment_methods },
	{ Py_tp_getset, segment_getset },
	{ Py_bf_getbuffer, (void *)segment_getbuffer },
	{ Py_bf_releasebuffer, (void *)segment_releasebuffer },
	{ 0, NULL },
};

PyType_Spec sseg_py_segment_spec = {
	.name = "sharedseg._native.Segment",
	.basicsize = sizeof(struct segment_object),
	.flags = NATIVE_ONLY,
	.slots = segment_slots,
};

/* ---- Pin ---- */

static void pin_dealloc(PyObject *self_obj)
{
	struct pin_object *pin = (struct pin_object *)self_obj;
	struct segment_object *seg = pin->segment;

	seg->pins--;
	release_quietly(seg);
	Py_DECREF(seg);
	free_instance(self_obj);
}

static int pin_getbuffer(PyObject *self_obj, Py_buffer *view, int flags)
{
	/* The view's object is the Pin: it stays alive, so the pages stay mapped. */
	return fill_buffer(((struct pin_object *)self_obj)->segment, self_obj, view, flags);
}

static PyType_Slot pin_slots[] = {
	{ Py_tp_doc, (void *)"A buffer over a segment that keeps it mapped while it lives." },
	{ Py_tp_dealloc, (void *)pin_dealloc },
	{ Py_bf_getbuffer, (void *)pin_getbuffer },
	{ 0, NULL },
};

PyType_Spec sseg_py_pin_spec = {
	.name = "sharedseg._native.Pin",
	.basicsize = sizeof(struct pin_object),
	.flags = NATIVE_ONLY,
	.slots = pin_slots,
};

/* ---- the registry ---- */

PyObject *sseg_py_lookup(PyObject *module, PyObject *args)
{
	struct sseg_lookup_result res;
	struct sseg_info info = { .sz = sizeof(info) };
	uint64_t addr, len;

	if (!PyArg_ParseTuple(args, "O&O&:lookup", sseg_py_u64, &addr, sseg_py_u64, &len))
		return NULL;
	/* Segments are destroyed with the GIL held: res.seg stays valid here. */
	if (sseg_lookup((const void *)(uintptr_t)addr, (size_t)len, &res) ||
	    sseg_info(res.seg, &info))
		Py_RETURN_NONE;
	return PyUnicode_FromString(info.memfd_name);
}
