/* SPDX-License-Identifier: Apache-2.0 */
/* sharedseg._native.Layout: named blocks of fixed-size entries, placed by
 * the C library (sseg_layout_*); Python only asks it for offsets. */
#include <errno.h>
#include <string.h>

#include "native.h"

struct layout_object {
	PyObject_HEAD
	struct sseg_layout *layout;
};

PyTypeObject *sseg_py_layout_type;

const struct sseg_layout *sseg_py_layout_get(PyObject *obj)
{
	if (!PyObject_TypeCheck(obj, sseg_py_layout_type)) {
		PyObject *type = PyObject_GetAttrString((PyObject *)Py_TYPE(obj), "__name__");

		if (type)
			PyErr_Format(PyExc_TypeError,
				     "layout must be a sharedseg._native.Layout, not %S", type);
		Py_XDECREF(type);
		return NULL;
	}
	return ((struct layout_object *)obj)->layout;
}

/* One (name, count, bytes, align, shape) tuple into desc; the strings stay
 * owned by item, which the caller keeps alive. A number wider than 64 bits
 * is a ValueError: truncated, 2**64+1 entries would be one. */
static int parse_block(PyObject *item, struct sseg_block_desc *desc)
{
	PyObject *shape = Py_None;

	if (!PyArg_ParseTuple(item, "sO&O&O&|O:Layout block", &desc->name, sseg_py_u64,
			      &desc->count, sseg_py_u64, &desc->bytes, sseg_py_u64, &desc->align,
			      &shape))
		return -1;
	desc->shape = NULL;
	if (shape != Py_None) {
		desc->shape = PyUnicode_AsUTF8AndSize(shape, NULL);
		if (!desc->shape)
			return -1;
	}
	return 0;
}

static struct sseg_block_desc *parse_blocks(PyObject *seq, Py_ssize_t *n)
{
	struct sseg_block_desc *descs;

	*n = PySequence_Size(seq);
	if (*n < 0)
		return NULL;
	if (*n < 1 || *n > 256) {
		PyErr_Format(PyExc_ValueError, "a layout has 1 to 256 blocks, not %zd", *n);
		return NULL;
	}
	descs = PyMem_Calloc((size_t)*n, sizeof(*descs));
	if (!descs)
		return (struct sseg_block_desc *)PyErr_NoMemory();
	for (Py_ssize_t i = 0; i < *n; i++) {
		/* Borrowed: seq (a list or a tuple) keeps the item and its strings. */
		PyObject *item = PyList_Check(seq) ? PyList_GetItem(seq, i) : PyTuple_GetItem(seq, i);

		if (!item || parse_block(item, &descs[i]) < 0) {
			PyMem_Free(descs);
			return NULL;
		}
	}
	return descs;
}

static int layout_init(PyObject *self_obj, PyObject *args, PyObject *kwargs)
{
	static char *keywords[] = { "blocks", "order", "align", NULL };
	struct layout_object *self = (struct layout_object *)self_obj;
	struct sseg_block_desc *descs;
	uint64_t align = 0;
	PyObject *blocks, *seq;
	Py_ssize_t n;
	int order = SSEG_LAYOUT_INTERLEAVED, rc;

	if (!PyArg_ParseTupleAndKeywords(args, kwargs, "O|iO&:Layout", keywords, &blocks, &order,
					 sseg_py_u64, &align))
		return -1;
	if (self->layout) {
		PyErr_SetString(PyExc_RuntimeError, "Layout is already initialised");
		return -1;
	}
	seq = PySequence_Fast(blocks, "blocks must be a sequence of (name, count, bytes, align, shape)");
	if (!seq)
		return -1;
	descs = parse_blocks(seq, &n);
	rc = descs ? sseg_layout_create(descs, (int)n, (enum sseg_layout_order)order, align,
					&self->layout)
		   : -1;
	PyMem_Free(descs);
	Py_DECREF(seq);
	if (!descs)
		return -1;
	if (rc) {
		sseg_py_raise(PyExc_ValueError, rc);
		sseg_py_log_drain();
		return -1;
	}
	sseg_py_log_drain();
	return 0;
}

static void layout_dealloc(PyObject *self_obj)
{
	struct layout_object *self = (struct layout_object *)self_obj;
	PyTypeObject *type = Py_TYPE(self_obj);
	freefunc tp_free = (freefunc)PyType_GetSlot(type, Py_tp_free);

	sseg_layout_destroy(self->layout);
	tp_free(self_obj);
	Py_DECREF(type); /* a heap type's instance holds a reference to it */
}

static struct sseg_layout *ready(PyObject *self_obj)
{
	struct sseg_layout *l = ((struct layout_object *)self_obj)->layout;

	if (!l)
		PyErr_SetString(PyExc_RuntimeError, "Layout was not initialised");
	return l;
}

/* A block given by index or by name. */
static int block_index(struct sseg_layout *l, PyObject *block)
{
	int b;

	if (PyUnicode_Check(block)) {
		const char *name = PyUnicode_AsUTF8AndSize(block, NULL);

		if (!name)
			return -1;
		b = sseg_layout_find(l, name);
		if (b < 0) {
			sseg_py_raise(PyExc_KeyError, b);
			return -1;
		}
		return b;
	}
	b = (int)PyLong_AsLong(block);
	if (b == -1 && PyErr_Occurred())
		return -1;
	if (b < 0 || b >= sseg_layout_nblocks(l)) {
		PyErr_Format(PyExc_IndexError, "layout block %d does not exist (the layout has %d)",
			     b, sseg_layout_nblocks(l));
		return -1;
	}
	return b;
}

static PyObject *layout_block(PyObject *self, PyObject *block)
{
	struct sseg_layout *l = ready(self);
	struct sseg_block_desc d;
	int b = l ? block_index(l, block) : -1;

	if (b < 0)
		return NULL;
	sseg_layout_block(l, b, &d);
	return Py_BuildValue("(sKKKz)", d.name, (unsigned long long)d.count,
			     (unsigned long long)d.bytes, (unsigned long long)d.align, d.shape);
}

static PyObject *layout_offset(PyObject *self, PyObject *args)
{
	struct sseg_layout *l = ready(self);
	uint64_t index, offset;
	PyObject *block;
	int b, rc;

	if (!l || !PyArg_ParseTuple(args, "OO&:offset", &block, sseg_py_u64, &index))
		return NULL;
	b = block_index(l, block);
	if (b < 0)
		return NULL;
	rc = sseg_layout_offset(l, b, index, &offset);
	if (rc)
		return sseg_py_raise(PyExc_IndexError, rc);
	return PyLong_FromUnsignedLongLong(offset);
}

/* Every entry's offset of one block, in index order. */
static PyObject *layout_offsets(PyObject *self, PyObject *block)
{
	struct sseg_layout *l = ready(self);
	struct sseg_block_desc d;
	PyObject *list;
	int b = l ? block_index(l, block) : -1;

	if (b < 0)
		return NULL;
	sseg_layout_block(l, b, &d);
	if (d.count > (uint64_t)PY_SSIZE_T_MAX)
		return PyErr_Format(PyExc_ValueError, "block '%s' has %llu entries: more than a list holds",
				    d.name, (unsigned long long)d.count);
	list = PyList_New((Py_ssize_t)d.count);
	for (uint64_t i = 0; list && i < d.count; i++) {
		uint64_t offset = 0;
		int rc = sseg_layout_offset(l, b, i, &offset);
		PyObject *num = rc ? sseg_py_raise(PyExc_IndexError, rc)
				   : PyLong_FromUnsignedLongLong(offset);

		if (!num) {
			Py_CLEAR(list);
			break;
		}
		if (PyList_SetItem(list, (Py_ssize_t)i, num) < 0) /* steals num */
			Py_CLEAR(list);
	}
	return list;
}

static PyObject *layout_size(PyObject *self, void *closure)
{
	struct sseg_layout *l = ready(self);

	return l ? PyLong_FromUnsignedLongLong(sseg_layout_size(l)) : NULL;
}

static PyObject *layout_nblocks(PyObject *self, void *closure)
{
	struct sseg_layout *l = ready(self);

	return l ? PyLong_FromLong(sseg_layout_nblocks(l)) : NULL;
}

static PyObject *layout_hash(PyObject *self, void *closure)
{
	struct sseg_layout *l = ready(self);

	return l ? PyLong_FromUnsignedLongLong(sseg_layout_hash(l)) : NULL;
}

static PyObject *layout_describe(PyObject *self, PyObject *unused)
{
	struct sseg_layout *l = ready(self);

	return l ? PyUnicode_FromString(sseg_layout_describe(l)) : NULL;
}

static PyMethodDef layout_methods[] = {
	{ "block", layout_block, METH_O,
	  "block(name_or_index) -> (name, count, bytes, align, shape)" },
	{ "offset", layout_offset, METH_VARARGS, "offset(block, index) -> byte offset" },
	{ "offsets", layout_offsets, METH_O, "offsets(block) -> every entry's byte offset" },
	{ "describe", layout_describe, METH_NOARGS, "the canonical description that is hashed" },
	{ NULL, NULL, 0, NULL },
};

static PyGetSetDef layout_getset[] = {
	{ "size", layout_size, NULL, "bytes the layout spans", NULL },
	{ "nblocks", layout_nblocks, NULL, "number of blocks", NULL },
	{ "hash", layout_hash, NULL, "the hash that enters the fingerprint", NULL },
	{ NULL, NULL, NULL, NULL, NULL },
};

static PyType_Slot layout_slots[] = {
	{ Py_tp_doc, (void *)"Layout(blocks, order=LAYOUT_INTERLEAVED, align=0): blocks are\n"
			     "(name, count, bytes, align, shape) tuples; align 0 means 4096." },
	{ Py_tp_new, (void *)PyType_GenericNew },
	{ Py_tp_init, (void *)layout_init },
	{ Py_tp_dealloc, (void *)layout_dealloc },
	{ Py_tp_methods, layout_methods },
	{ Py_tp_getset, layout_getset },
	{ 0, NULL },
};

PyType_Spec sseg_py_layout_spec = {
	.name = "sharedseg._native.Layout",
	.basicsize = sizeof(struct layout_object),
	.flags = Py_TPFLAGS_DEFAULT,
	.slots = layout_slots,
};
