/* SPDX-License-Identifier: Apache-2.0 */
/* The helper library's documents as Python objects: its JSON writer's calls
 * (tools/lib/json.h) go to a sink that builds dicts, lists and values, so
 * `sharedseg.probe()` and `sharedseg.list_segments()` are the documents
 * `sharedseg probe --json` and `ls --json` print, written once, never text
 * parsed back. Strings read as the JSON text holds them (each byte of an
 * ill-formed UTF-8 sequence as U+FFFD). */
#include <stdlib.h>

#include "list_doc.h"
#include "native.h"
#include "probe_doc.h"

/* The containers being filled, outermost first; err once a step failed
 * (the rest of the document is then ignored). */
struct builder {
	PyObject *stack[SSEG_JSON_MAX_DEPTH + 1];
	int depth;
	PyObject *top;
	bool err;
};

/* Puts v (a new reference, or NULL after a failure) where it belongs: into
 * the container being filled under key, or as the document itself. */
static void place(struct builder *b, const char *key, PyObject *v)
{
	PyObject *into = b->depth ? b->stack[b->depth - 1] : NULL;

	if (!v || b->err) {
		b->err = true;
		Py_XDECREF(v);
		return;
	}
	if (!into) {
		Py_XDECREF(b->top);
		b->top = v;
		Py_INCREF(v);
	} else if (PyDict_Check(into) ? PyDict_SetItemString(into, key ? key : "", v) < 0
				      : PyList_Append(into, v) < 0) {
		b->err = true;
	}
	Py_DECREF(v);
}

static void on_begin(void *ctx, const char *key, char bracket)
{
	struct builder *b = ctx;
	PyObject *c = bracket == '{' ? PyDict_New() : PyList_New(0);

	if (!c || b->err || b->depth > SSEG_JSON_MAX_DEPTH) {
		b->err = true;
		Py_XDECREF(c);
		return;
	}
	Py_INCREF(c);
	place(b, key, c);
	b->stack[b->depth++] = c;
}

static void on_end(void *ctx, char bracket)
{
	struct builder *b = ctx;

	(void)bracket;
	if (b->depth > 0)
		Py_DECREF(b->stack[--b->depth]);
}

static PyObject *text(const char *s)
{
	size_t n = sseg_json_utf8(s, NULL, 0);
	char *clean = malloc(n + 1);
	PyObject *v;

	if (!clean)
		return PyErr_NoMemory();
	sseg_json_utf8(s, clean, n + 1);
	v = PyUnicode_DecodeUTF8(clean, (Py_ssize_t)n, "strict");
	free(clean);
	return v;
}

static void on_value(void *ctx, const char *key, const struct sseg_json_value *v)
{
	PyObject *o = NULL;

	switch (v->kind) {
	case SSEG_JSON_NULL:
		o = Py_None;
		Py_INCREF(o);
		break;
	case SSEG_JSON_BOOL:
		o = PyBool_FromLong(v->b);
		break;
	case SSEG_JSON_INT:
		o = PyLong_FromLongLong(v->i);
		break;
	case SSEG_JSON_U64:
		o = PyLong_FromUnsignedLongLong(v->u);
		break;
	case SSEG_JSON_DOUBLE:
		o = PyFloat_FromDouble(v->d);
		break;
	case SSEG_JSON_STRING:
		o = text(v->s);
		break;
	}
	place(ctx, key, o);
}

/* The document write(j, ctx) writes, as an object; NULL with an exception. */
static PyObject *built(struct builder *b)
{
	while (b->depth > 0)
		Py_DECREF(b->stack[--b->depth]);
	if (b->err || !b->top) {
		Py_CLEAR(b->top);
		if (!PyErr_Occurred())
			PyErr_SetString(PyExc_RuntimeError, "the document could not be built");
	}
	return b->top;
}

PyObject *sseg_py_probe(PyObject *module, PyObject *args)
{
	struct builder b = { .depth = 0 };
	struct sseg_json_sink sink = { on_begin, on_end, on_value, &b };
	struct sseg_json j;
	uint64_t size = 0;
	int rc;

	(void)module;
	if (!PyArg_ParseTuple(args, "|O&:probe", sseg_py_u64, &size))
		return NULL;
	sseg_json_init_sink(&j, &sink);
	rc = sseg_probe_document(&j, size);
	sseg_py_log_drain();
	if (rc) {
		Py_XDECREF(built(&b));
		PyErr_Clear();
		return sseg_py_raise(sseg_py_error, rc);
	}
	return built(&b);
}

PyObject *sseg_py_list_segments(PyObject *module, PyObject *unused)
{
	struct builder b = { .depth = 0 };
	struct sseg_json_sink sink = { on_begin, on_end, on_value, &b };
	struct sseg_json j;
	struct sseg_list l;
	int rc;

	(void)module;
	(void)unused;
	Py_BEGIN_ALLOW_THREADS
	rc = sseg_list_scan(&l);
	Py_END_ALLOW_THREADS
	sseg_py_log_drain();
	if (rc)
		return sseg_py_raise(sseg_py_error, rc);
	sseg_json_init_sink(&j, &sink);
	sseg_list_document(&j, &l);
	sseg_list_free(&l);
	return built(&b);
}
