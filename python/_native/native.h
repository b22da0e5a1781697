/* SPDX-License-Identifier: Apache-2.0 */
/* sharedseg._native: the CPython face of libsharedseg. Shared declarations
 * of the extension's parts (module.c, segment.c, layout.c, log.c, cli.c,
 * doc.c, settings.c, pool.c). */
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

/* A PyArg "O&" converter: an int in 0..2**64-1 into a uint64_t; anything
 * wider is a ValueError, never truncated. */
int sseg_py_u64(PyObject *obj, void *out);

/* The library's messages (log.c): install the callback at import; drain
 * what it queued into the Python sink after each native call (keeps a
 * pending exception). */
void sseg_py_log_install(void);
void sseg_py_log_drain(void);
/* While on, this thread's messages go to stderr as the C tool writes them
 * (a CLI command runs on it); the other threads' still go to the sink. */
void sseg_py_log_command(int on);
PyObject *sseg_py_set_log_sink(PyObject *module, PyObject *fn);
PyObject *sseg_py_drain_log(PyObject *module, PyObject *unused);
PyObject *sseg_py_set_log_level(PyObject *module, PyObject *arg);
PyObject *sseg_py_log_level(PyObject *module, PyObject *unused);
PyObject *sseg_py_queue_log(PyObject *module, PyObject *args);

/* The NUMA node numbers set in mask, as a list. */
PyObject *sseg_py_node_list(uint64_t mask);

/* The extension's types are heap types (PyType_FromSpec), made at import:
 * the same source builds on the limited API (abi3, 3.11+) and without it. */

/* The Layout type: wraps a struct sseg_layout. */
extern PyTypeObject *sseg_py_layout_type;
extern PyType_Spec sseg_py_layout_spec;
/* The layout behind a Layout object, or NULL with TypeError set. */
const struct sseg_layout *sseg_py_layout_get(PyObject *obj);

/* The Segment type and the Pin type (a buffer that keeps it mapped). */
extern PyTypeObject *sseg_py_segment_type;
extern PyTypeObject *sseg_py_pin_type;
extern PyType_Spec sseg_py_segment_spec;
extern PyType_Spec sseg_py_pin_spec;
/* _native.create(...) */
PyObject *sseg_py_create(PyObject *module, PyObject *args, PyObject *kwargs);
/* _native.lookup(addr, length): the registry's exact-range lookup. */
PyObject *sseg_py_lookup(PyObject *module, PyObject *args);

/* _native.setting_default, population_allowance_ms, status_record and
 * status_read (settings.c). */
PyObject *sseg_py_setting_default(PyObject *module, PyObject *args);
PyObject *sseg_py_population_allowance_ms(PyObject *module, PyObject *args);
PyObject *sseg_py_status_record(PyObject *module, PyObject *args);
PyObject *sseg_py_status_read(PyObject *module, PyObject *args);

/* _native.probe(size) and _native.list_segments(): the helper library's
 * documents as objects (doc.c). */
PyObject *sseg_py_probe(PyObject *module, PyObject *args);
PyObject *sseg_py_list_segments(PyObject *module, PyObject *unused);

/* The Pool type (pool.c) and _native.pool_open(...). */
extern PyTypeObject *sseg_py_pool_type;
extern PyType_Spec sseg_py_pool_spec;
PyObject *sseg_py_pool_open(PyObject *module, PyObject *args, PyObject *kwargs);

/* _native.cli(args) and _native.cli_c_tool_only(command) (cli.c). */
PyObject *sseg_py_cli(PyObject *module, PyObject *args);
PyObject *sseg_py_cli_c_tool_only(PyObject *module, PyObject *arg);

#endif
