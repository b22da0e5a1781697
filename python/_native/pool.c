/* SPDX-License-Identifier: Apache-2.0 */
/* sharedseg._native.Pool: one sseg_pool_t. Every batch runs without the
 * GIL (the library's handle has its own lock). The Pool exports its chunks
 * as one buffer (chunks * chunk_size bytes); close() lets the handle's
 * pins and slot go at once, and unmaps once no export is left. */
#include <errno.h>
#include <string.h>

#include "native.h"

struct pool_object {
	PyObject_HEAD
	sseg_pool_t *pool;
	int closed;
	Py_ssize_t exports;
	uint64_t chunk_size, chunks;
	void *data;
};

PyTypeObject *sseg_py_pool_type;

static void unmap_if_unused(struct pool_object *self)
{
	if (self->pool && self->closed && !self->exports) {
		sseg_pool_close(self->pool);
		self->pool = NULL;
		sseg_py_log_drain();
	}
}

static int usable(struct pool_object *self, const char *what)
{
	if (self->pool && !self->closed)
		return 1;
	PyErr_Format(PyExc_ValueError, "%s: the pool is closed", what);
	return 0;
}

PyObject *sseg_py_pool_open(PyObject *module, PyObject *args, PyObject *kwargs)
{
	static char *kw[] = { "name", "meaning", "chunk_size", "chunks", "pages", "flags",
			      "timeout_ms", "keeper", NULL };
	const char *name, *meaning = NULL, *keeper = NULL;
	unsigned long long chunk_size = 0, chunks = 0;
	int pages = 0, timeout_ms = 0, rc;
	unsigned int flags = 0;
	struct pool_object *self;
	struct sseg_pool_info in = { .sz = sizeof(in) };
	sseg_pool_t *pool = NULL;

	(void)module;
	if (!PyArg_ParseTupleAndKeywords(args, kwargs, "s|zKKiIiz:pool_open", kw, &name, &meaning,
					 &chunk_size, &chunks, &pages, &flags, &timeout_ms,
					 &keeper))
		return NULL;
	{
		SSEG_POOL_OPTS(o, .name = name, .meaning = meaning, .chunk_size = chunk_size,
			       .chunks = chunks, .pages = (enum sseg_pages)pages, .flags = flags,
			       .timeout_ms = timeout_ms, .keeper = keeper);

		Py_BEGIN_ALLOW_THREADS
		rc = sseg_pool_open(&o, &pool);
		if (!rc)
			rc = sseg_pool_info(pool, &in);
		Py_END_ALLOW_THREADS
	}
	sseg_py_log_drain();
	if (rc) {
		sseg_pool_close(pool);
		return sseg_py_raise(sseg_py_error, rc);
	}
	self = PyObject_New(struct pool_object, sseg_py_pool_type);
	if (!self) {
		sseg_pool_close(pool);
		return NULL;
	}
	self->pool = pool;
	self->closed = 0;
	self->exports = 0;
	self->chunk_size = in.chunk_size;
	self->chunks = in.chunks;
	self->data = sseg_pool_chunk(pool, 0);
	return (PyObject *)self;
}

/* keys: a bytes-like object of n * SSEG_POOL_KEY_SIZE bytes. */
static int keys_of(PyObject *obj, Py_buffer *view, int *n)
{
	if (PyObject_GetBuffer(obj, view, PyBUF_SIMPLE) < 0)
		return -1;
	if (view->len % SSEG_POOL_KEY_SIZE || view->len / SSEG_POOL_KEY_SIZE > INT32_MAX) {
		PyErr_Format(PyExc_ValueError, "keys: %zd bytes is not a whole number of %u-byte keys",
			     view->len, SSEG_POOL_KEY_SIZE);
		PyBuffer_Release(view);
		return -1;
	}
	*n = (int)(view->len / SSEG_POOL_KEY_SIZE);
	return 0;
}

/* chunks[i] as a list: an int, or None for SSEG_POOL_NONE. */
static PyObject *chunk_list(const uint32_t *chunks, int n)
{
	PyObject *list = PyList_New(n);

	for (int i = 0; list && i < n; i++) {
		PyObject *v = chunks[i] == SSEG_POOL_NONE ? Py_None : PyLong_FromUnsignedLong(chunks[i]);

		if (!v) {
			Py_DECREF(list);
			return NULL;
		}
		if (v == Py_None)
			Py_INCREF(v);
		PyList_SetItem(list, i, v); /* steals v */
	}
	return list;
}

/* A sequence of chunk numbers (None allowed) into a new array. */
static uint32_t *chunks_of(PyObject *seq, int *n)
{
	Py_ssize_t len = PySequence_Size(seq);
	uint32_t *out;

	if (len < 0 || len > INT32_MAX) {
		if (!PyErr_Occurred())
			PyErr_SetString(PyExc_ValueError, "chunks: too many");
		return NULL;
	}
	*n = (int)len;
	out = PyMem_Malloc(((size_t)len + 1) * sizeof(*out));
	if (!out)
		return (uint32_t *)PyErr_NoMemory();
	for (Py_ssize_t i = 0; i < len; i++) {
		PyObject *v = PySequence_GetItem(seq, i);
		unsigned long c = 0;

		if (v && v != Py_None)
			c = PyLong_AsUnsignedLong(v);
		if (!v || PyErr_Occurred() || c >= SSEG_POOL_NONE) {
			if (!PyErr_Occurred())
				PyErr_Format(PyExc_ValueError, "chunks: %lu is no chunk number", c);
			Py_XDECREF(v);
			PyMem_Free(out);
			return NULL;
		}
		out[i] = v == Py_None ? SSEG_POOL_NONE : (uint32_t)c;
		Py_DECREF(v);
	}
	return out;
}

enum keyed_op { OP_GET, OP_RESERVE };

static PyObject *keyed(struct pool_object *self, PyObject *keys_obj, uint32_t flags,
		       enum keyed_op op)
{
	Py_buffer keys;
	uint32_t *chunks;
	PyObject *r;
	int n, rc;

	if (!usable(self, op == OP_GET ? "get" : "reserve") || keys_of(keys_obj, &keys, &n))
		return NULL;
	chunks = PyMem_Malloc(((size_t)n + 1) * sizeof(*chunks));
	if (!chunks) {
		PyBuffer_Release(&keys);
		return PyErr_NoMemory();
	}
	Py_BEGIN_ALLOW_THREADS
	rc = op == OP_GET ? sseg_pool_get(self->pool, keys.buf, n, flags, chunks)
			  : sseg_pool_reserve(self->pool, keys.buf, n, chunks);
	Py_END_ALLOW_THREADS
	PyBuffer_Release(&keys);
	sseg_py_log_drain();
	r = rc < 0 ? sseg_py_raise(sseg_py_error, rc) : chunk_list(chunks, n);
	PyMem_Free(chunks);
	return r;
}

static PyObject *pool_get(PyObject *self, PyObject *args)
{
	PyObject *keys;
	int prefix = 0;

	if (!PyArg_ParseTuple(args, "O|p:get", &keys, &prefix))
		return NULL;
	return keyed((struct pool_object *)self, keys, prefix ? SSEG_POOL_PREFIX : 0, OP_GET);
}

static PyObject *pool_reserve(PyObject *self, PyObject *keys)
{
	return keyed((struct pool_object *)self, keys, 0, OP_RESERVE);
}

static PyObject *pool_contains(PyObject *self_obj, PyObject *args)
{
	struct pool_object *self = (struct pool_object *)self_obj;
	PyObject *keys_obj;
	Py_buffer keys;
	int prefix = 0, n, rc;

	if (!PyArg_ParseTuple(args, "O|p:contains", &keys_obj, &prefix))
		return NULL;
	if (!usable(self, "contains") || keys_of(keys_obj, &keys, &n))
		return NULL;
	Py_BEGIN_ALLOW_THREADS
	rc = sseg_pool_contains(self->pool, keys.buf, n, prefix ? SSEG_POOL_PREFIX : 0);
	Py_END_ALLOW_THREADS
	PyBuffer_Release(&keys);
	sseg_py_log_drain();
	return rc < 0 ? sseg_py_raise(sseg_py_error, rc) : PyLong_FromLong(rc);
}

static PyObject *pool_drop(PyObject *self_obj, PyObject *keys_obj)
{
	struct pool_object *self = (struct pool_object *)self_obj;
	Py_buffer keys;
	int n, rc;

	if (!usable(self, "drop") || keys_of(keys_obj, &keys, &n))
		return NULL;
	Py_BEGIN_ALLOW_THREADS
	rc = sseg_pool_drop(self->pool, keys.buf, n);
	Py_END_ALLOW_THREADS
	PyBuffer_Release(&keys);
	sseg_py_log_drain();
	return rc < 0 ? sseg_py_raise(sseg_py_error, rc) : PyLong_FromLong(rc);
}

typedef int (*chunk_op)(sseg_pool_t *, const uint32_t *, int);

static PyObject *by_chunks(PyObject *self_obj, PyObject *seq, chunk_op op, const char *what)
{
	struct pool_object *self = (struct pool_object *)self_obj;
	uint32_t *chunks;
	int n, rc;

	if (!usable(self, what))
		return NULL;
	chunks = chunks_of(seq, &n);
	if (!chunks)
		return NULL;
	Py_BEGIN_ALLOW_THREADS
	rc = op(self->pool, chunks, n);
	Py_END_ALLOW_THREADS
	PyMem_Free(chunks);
	sseg_py_log_drain();
	return rc < 0 ? sseg_py_raise(sseg_py_error, rc) : PyLong_FromLong(rc);
}

static PyObject *pool_unpin(PyObject *self, PyObject *seq)
{
	return by_chunks(self, seq, sseg_pool_unpin, "unpin");
}

static PyObject *pool_publish(PyObject *self, PyObject *seq)
{
	return by_chunks(self, seq, sseg_pool_publish, "publish");
}

static PyObject *pool_abandon(PyObject *self, PyObject *seq)
{
	return by_chunks(self, seq, sseg_pool_abandon, "abandon");
}

static PyObject *pool_check(PyObject *self_obj, PyObject *unused)
{
	struct pool_object *self = (struct pool_object *)self_obj;
	int rc;

	(void)unused;
	if (!usable(self, "check"))
		return NULL;
	Py_BEGIN_ALLOW_THREADS
	rc = sseg_pool_check(self->pool);
	Py_END_ALLOW_THREADS
	sseg_py_log_drain();
	if (rc)
		return sseg_py_raise(sseg_py_error, rc);
	Py_RETURN_NONE;
}

static PyObject *pool_info(PyObject *self_obj, PyObject *unused)
{
	struct pool_object *self = (struct pool_object *)self_obj;
	struct sseg_pool_info in = { .sz = sizeof(in) };
	int pids[SSEG_POOL_SLOTS], rc;
	PyObject *attached, *d;

	(void)unused;
	if (!usable(self, "info"))
		return NULL;
	Py_BEGIN_ALLOW_THREADS
	rc = sseg_pool_info(self->pool, &in);
	if (!rc)
		rc = sseg_pool_attached(self->pool, pids);
	Py_END_ALLOW_THREADS
	if (rc)
		return sseg_py_raise(sseg_py_error, rc);
	attached = PyList_New(0);
	for (int s = 0; attached && s < (int)SSEG_POOL_SLOTS; s++) {
		PyObject *pid = pids[s] ? PyLong_FromLong(pids[s]) : NULL;

		if (pids[s] && (!pid || PyList_Append(attached, pid) < 0))
			Py_CLEAR(attached);
		Py_XDECREF(pid);
	}
	if (!attached)
		return NULL;
	d = Py_BuildValue(
		"{s:s,s:s,s:K,s:K,s:K,s:K,s:s,s:K,s:i,s:O,s:O,s:K,s:K,s:K,s:K,s:N,s:K,s:K,s:K,s:K,"
		"s:K,s:K,s:K,s:s}",
		"name", in.name, "meaning", in.meaning, "inode", (unsigned long long)in.inode,
		"chunk_size",
		(unsigned long long)in.chunk_size, "chunks", (unsigned long long)in.chunks, "size",
		(unsigned long long)in.size, "pages", sseg_pages_name(in.pages), "page_size",
		(unsigned long long)in.page_size, "slot", in.slot, "created",
		in.created ? Py_True : Py_False, "kept", in.kept ? Py_True : Py_False, "used",
		(unsigned long long)in.used, "filling", (unsigned long long)in.filling, "free",
		(unsigned long long)in.free, "pinned", (unsigned long long)in.pinned, "attached",
		attached, "hits", (unsigned long long)in.hits, "misses",
		(unsigned long long)in.misses, "stores", (unsigned long long)in.stores, "evictions",
		(unsigned long long)in.evictions, "reclaims", (unsigned long long)in.reclaims,
		"duplicates", (unsigned long long)in.duplicates, "resets",
		(unsigned long long)in.resets, "last_reset", in.last_reset);
	return d;
}

static PyObject *pool_close(PyObject *self_obj, PyObject *unused)
{
	struct pool_object *self = (struct pool_object *)self_obj;

	(void)unused;
	self->closed = 1;
	unmap_if_unused(self);
	Py_RETURN_NONE;
}

static PyObject *pool_get_closed(PyObject *self, void *unused)
{
	(void)unused;
	return PyBool_FromLong(((struct pool_object *)self)->closed);
}

static PyObject *pool_get_chunk_size(PyObject *self, void *unused)
{
	(void)unused;
	return PyLong_FromUnsignedLongLong(((struct pool_object *)self)->chunk_size);
}

static PyObject *pool_get_chunks(PyObject *self, void *unused)
{
	(void)unused;
	return PyLong_FromUnsignedLongLong(((struct pool_object *)self)->chunks);
}

static int pool_getbuffer(PyObject *self_obj, Py_buffer *view, int flags)
{
	struct pool_object *self = (struct pool_object *)self_obj;

	if (!usable(self, "buffer"))
		return -1;
	if (PyBuffer_FillInfo(view, self_obj, self->data,
			      (Py_ssize_t)(self->chunks * self->chunk_size), 0, flags) < 0)
		return -1;
	self->exports++;
	return 0;
}

static void pool_releasebuffer(PyObject *self_obj, Py_buffer *view)
{
	struct pool_object *self = (struct pool_object *)self_obj;

	(void)view;
	self->exports--;
	unmap_if_unused(self);
}

static void pool_dealloc(PyObject *self_obj)
{
	struct pool_object *self = (struct pool_object *)self_obj;
	PyTypeObject *type = Py_TYPE(self_obj);

	self->closed = 1;
	self->exports = 0;
	unmap_if_unused(self);
	PyObject_Free(self_obj);
	Py_DECREF(type);
}

static PyMethodDef pool_methods[] = {
	{ "get", pool_get, METH_VARARGS,
	  "get(keys, prefix=False) -> [chunk or None]: look up and pin (sseg_pool_get)" },
	{ "contains", pool_contains, METH_VARARGS,
	  "contains(keys, prefix=False) -> int: hits, nothing pinned" },
	{ "unpin", pool_unpin, METH_O, "unpin(chunks) -> 0" },
	{ "reserve", pool_reserve, METH_O,
	  "reserve(keys) -> [chunk or None]: chunks to fill (sseg_pool_reserve)" },
	{ "publish", pool_publish, METH_O, "publish(chunks) -> int: how many were published" },
	{ "abandon", pool_abandon, METH_O, "abandon(chunks) -> 0" },
	{ "drop", pool_drop, METH_O, "drop(keys) -> int: how many were dropped" },
	{ "info", pool_info, METH_NOARGS, "info() -> dict: sseg_pool_info and the attached pids" },
	{ "check", pool_check, METH_NOARGS, "check(): sseg_pool_check" },
	{ "close", pool_close, METH_NOARGS,
	  "close(): pins and slot go now; unmapped once no buffer is left" },
	{ NULL, NULL, 0, NULL },
};

static PyGetSetDef pool_getset[] = {
	{ "closed", pool_get_closed, NULL, "close() was called", NULL },
	{ "chunk_size", pool_get_chunk_size, NULL, "bytes a chunk", NULL },
	{ "chunks", pool_get_chunks, NULL, "chunks in the pool", NULL },
	{ NULL, NULL, NULL, NULL, NULL },
};

static PyType_Slot pool_slots[] = {
	{ Py_tp_doc, (void *)"One host pool handle (sseg_pool_t); made by pool_open()." },
	{ Py_tp_dealloc, (void *)pool_dealloc },
	{ Py_tp_methods, pool_methods },
	{ Py_tp_getset, pool_getset },
	{ Py_bf_getbuffer, (void *)pool_getbuffer },
	{ Py_bf_releasebuffer, (void *)pool_releasebuffer },
	{ 0, NULL },
};

PyType_Spec sseg_py_pool_spec = {
	.name = "sharedseg._native.Pool",
	.basicsize = sizeof(struct pool_object),
	.flags = Py_TPFLAGS_DEFAULT,
	.slots = pool_slots,
};
