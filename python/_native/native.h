/* sharedseg._native: the CPython face of libsharedseg. Shared declarations
 * of the extension's parts (module.c, segment.c, layout.c). */
#ifndef SSEG_PY_NATIVE_H
#define SSEG_PY_NATIVE_H

#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include "sharedseg.h"

/* sharedseg.SharedSegmentError (a RuntimeError with .errno and .failures). */
extern PyObject *sseg_py_error;

/* Raises exc with sseg_last_error()'s sentence (strerror when it is empty)
 * and .errno set to -rc; returns NULL. */
PyObject *sseg_py_raise(PyObject *exc, int rc);

/* The NUMA node numbers set in mask, as a list. */
PyObject *sseg_py_node_list(uint64_t mask);

/* The Layout type: wraps a struct sseg_layout. */
extern PyTypeObject sseg_py_layout_type;
/* The layout behind a Layout object, or NULL with TypeError set. */
const struct sseg_layout *sseg_py_layout_get(PyObject *obj);

/* The Segment type and the Pin type (a buffer that keeps it mapped). */
extern PyTypeObject sseg_py_segment_type;
extern PyTypeObject sseg_py_pin_type;
/* _native.create(...) */
PyObject *sseg_py_create(PyObject *module, PyObject *args, PyObject *kwargs);

#endif
