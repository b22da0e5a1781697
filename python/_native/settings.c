/* SPDX-License-Identifier: Apache-2.0 */
/* What the library resolves once for every caller, for the Python package:
 * the operators' defaults, the population's allowance (settings.c), and a
 * rank's status record in the one frame (src/frame.h), written and read
 * by the library's code, not again in Python. */
#include <errno.h>
#include <string.h>

#include "frame.h"
#include "native.h"

PyObject *sseg_py_setting_default(PyObject *module, PyObject *args)
{
	const char *setting, *source = NULL;
	char buf[256];
	int rc;

	(void)module;
	if (!PyArg_ParseTuple(args, "s:setting_default", &setting))
		return NULL;
	rc = sseg_setting_default(setting, buf, sizeof(buf), &source);
	if (rc)
		return sseg_py_raise(PyExc_ValueError, rc);
	return Py_BuildValue("(ss)", buf, source);
}

PyObject *sseg_py_population_allowance_ms(PyObject *module, PyObject *args)
{
	uint64_t size;
	int pages, populate;

	(void)module;
	if (!PyArg_ParseTuple(args, "O&ii:population_allowance_ms", sseg_py_u64, &size, &pages,
			      &populate))
		return NULL;
	return PyLong_FromUnsignedLongLong(sseg_population_allowance_ms(
		size, (enum sseg_pages)pages, (enum sseg_populate)populate));
}

/* The smallest record that holds a head, and the most one may be. */
#define RECORD_MIN SSEG_FRAME_HEAD
#define RECORD_MAX (SSEG_FRAME_HEAD + 4096)

PyObject *sseg_py_status_record(PyObject *module, PyObject *args)
{
	struct sseg_frame f = { .kind = SSEG_FRAME_STATUS };
	Py_ssize_t size;
	Py_buffer body;
	PyObject *out;
	uint8_t *rec;
	int err;

	(void)module;
	if (!PyArg_ParseTuple(args, "niIIy*:status_record", &size, &err, &f.arg, &f.aux, &body))
		return NULL;
	if (size < RECORD_MIN || size > RECORD_MAX || err < 0 || err > 4095) {
		PyBuffer_Release(&body);
		return PyErr_Format(PyExc_ValueError,
				    "status_record: size %zd (%d..%d) or errno %d (0..4095) out of "
				    "range", size, RECORD_MIN, RECORD_MAX, err);
	}
	f.code = -err;
	f.len = (uint32_t)(body.len < size - RECORD_MIN ? body.len : size - RECORD_MIN);
	rec = PyMem_Malloc((size_t)size);
	if (!rec) {
		PyBuffer_Release(&body);
		return PyErr_NoMemory();
	}
	sseg_frame_record(rec, (size_t)size, &f, body.buf);
	PyBuffer_Release(&body);
	out = PyBytes_FromStringAndSize((const char *)rec, size);
	PyMem_Free(rec);
	return out;
}

PyObject *sseg_py_status_read(PyObject *module, PyObject *args)
{
	const uint8_t *body;
	struct sseg_frame f;
	Py_buffer rec;
	PyObject *out;
	int rc;

	(void)module;
	if (!PyArg_ParseTuple(args, "y*:status_read", &rec))
		return NULL;
	if (rec.len < RECORD_MIN || rec.len > RECORD_MAX) {
		PyBuffer_Release(&rec);
		return PyErr_Format(sseg_py_error, "a status record of %zd bytes: it holds %d to %d",
				    rec.len, RECORD_MIN, RECORD_MAX);
	}
	rc = sseg_frame_from_record(rec.buf, (size_t)rec.len, SSEG_FRAME_STATUS, &f, &body);
	if (rc) {
		PyBuffer_Release(&rec);
		return sseg_py_raise(sseg_py_error, rc);
	}
	out = Py_BuildValue("(iIIy#)", -f.code, f.arg, f.aux, (const char *)body,
			    (Py_ssize_t)f.len);
	PyBuffer_Release(&rec);
	return out;
}
