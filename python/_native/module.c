/* SPDX-License-Identifier: Apache-2.0 */
/* sharedseg._native: module functions (names, parsing, host identity,
 * probe, supported, cli) and the error type. The segment and the layout types
 * live in segment.c and layout.c. */
#include <errno.h>
#include <string.h>
#include <stdlib.h>

#include "native.h"

PyObject *sseg_py_error;

#define TEXT_(x) #x
#define TEXT(x) TEXT_(x)
#define VERSION_TEXT \
	TEXT(SSEG_VERSION_MAJOR) "." TEXT(SSEG_VERSION_MINOR) "." TEXT(SSEG_VERSION_PATCH)

PyObject *sseg_py_raise(PyObject *exc, int rc)
{
	const char *why = sseg_last_error();
	PyObject *value, *num;

	/* errno is never 0: a caller that checks it must see a failure. */
	if (!rc)
		rc = -EIO;
	if (!why || !why[0])
		why = strerror(rc < 0 ? -rc : rc);
	value = PyObject_CallFunction(exc, "s", why);
	if (!value)
		return NULL;
	num = PyLong_FromLong(rc < 0 ? -rc : rc);
	if (!num || PyObject_SetAttrString(value, "errno", num) < 0) {
		Py_XDECREF(num);
		Py_DECREF(value);
		return NULL;
	}
	Py_DECREF(num);
	PyErr_SetObject(exc, value);
	Py_DECREF(value);
	return NULL;
}

int sseg_py_u64(PyObject *obj, void *out)
{
	PyObject *num = PyNumber_Index(obj);
	unsigned long long v;

	if (!num)
		return 0;
	v = PyLong_AsUnsignedLongLong(num);
	if (v == (unsigned long long)-1 && PyErr_Occurred()) {
		if (PyErr_ExceptionMatches(PyExc_OverflowError)) {
			PyErr_Clear();
			PyErr_Format(PyExc_ValueError, "%R is outside 0..2**64-1", num);
		}
		Py_DECREF(num);
		return 0;
	}
	Py_DECREF(num);
	*(uint64_t *)out = v;
	return 1;
}

/* ---- names and parsing: the C library's words, never a Python copy ---- */

static int parse_backend(const char *text, int *value)
{
	enum sseg_backend v = SSEG_BACKEND_AUTO;
	int rc = sseg_parse_backend(text, &v);

	*value = (int)v;
	return rc;
}

static int parse_pages(const char *text, int *value)
{
	enum sseg_pages v = SSEG_PAGES_AUTO;
	int rc = sseg_parse_pages(text, &v);

	*value = (int)v;
	return rc;
}

static int parse_populate(const char *text, int *value)
{
	enum sseg_populate v = SSEG_POPULATE_OWNER;
	int rc = sseg_parse_populate(text, &v);

	*value = (int)v;
	return rc;
}

static const char *name_backend(int v) { return sseg_backend_name((enum sseg_backend)v); }
static const char *name_pages(int v) { return sseg_pages_name((enum sseg_pages)v); }
static const char *name_numa(int v) { return sseg_numa_name((enum sseg_numa)v); }
static const char *name_populate(int v) { return sseg_populate_name((enum sseg_populate)v); }

struct word_kind {
	const char *kind;
	int (*parse)(const char *text, int *value);
	const char *(*name)(int value);
};

static const struct word_kind word_kinds[] = {
	{ "backend", parse_backend, name_backend },
	{ "pages", parse_pages, name_pages },
	{ "populate", parse_populate, name_populate },
	{ "numa", NULL, name_numa },
};

static const struct word_kind *find_kind(const char *kind)
{
	for (size_t i = 0; i < sizeof(word_kinds) / sizeof(word_kinds[0]); i++)
		if (!strcmp(word_kinds[i].kind, kind))
			return &word_kinds[i];
	PyErr_Format(PyExc_ValueError, "no option kind '%s'", kind);
	return NULL;
}

static PyObject *parse_numa_text(const char *text)
{
	enum sseg_numa numa = SSEG_NUMA_NONE;
	int node = -1, rc = sseg_parse_numa(text, &numa, &node);

	if (rc)
		return sseg_py_raise(PyExc_ValueError, rc);
	return Py_BuildValue("(ii)", (int)numa, node);
}

static PyObject *parse_size_text(const char *text)
{
	uint64_t bytes = 0;
	int rc = sseg_parse_size(text, &bytes);

	if (rc)
		return sseg_py_raise(PyExc_ValueError, rc);
	return PyLong_FromUnsignedLongLong(bytes);
}

PyDoc_STRVAR(parse_doc, "parse(kind, text) -> int\n\n"
			"kind: backend, pages, populate -> the enum value; numa -> (numa, node);\n"
			"size -> bytes. Raises ValueError with the library's sentence.");

static PyObject *py_parse(PyObject *self, PyObject *args)
{
	const struct word_kind *k;
	const char *kind, *text;
	int value = 0, rc;

	if (!PyArg_ParseTuple(args, "ss:parse", &kind, &text))
		return NULL;
	if (!strcmp(kind, "numa"))
		return parse_numa_text(text);
	if (!strcmp(kind, "size"))
		return parse_size_text(text);
	k = find_kind(kind);
	if (!k)
		return NULL;
	rc = k->parse(text, &value);
	if (rc)
		return sseg_py_raise(PyExc_ValueError, rc);
	return PyLong_FromLong(value);
}

PyDoc_STRVAR(name_doc, "name(kind, value) -> str: the canonical word for an enum value.");

static PyObject *py_name(PyObject *self, PyObject *args)
{
	const struct word_kind *k;
	const char *kind;
	int value;

	if (!PyArg_ParseTuple(args, "si:name", &kind, &value))
		return NULL;
	k = find_kind(kind);
	return k ? PyUnicode_FromString(k->name(value)) : NULL;
}

/* ---- groups spanning hosts ---- */

PyDoc_STRVAR(host_identity_doc,
	     "host_identity() -> bytes: HOST_ID_SIZE bytes naming this process's sharing domain.");

static PyObject *py_host_identity(PyObject *self, PyObject *unused)
{
	char id[SSEG_HOST_ID_SIZE];
	int rc = sseg_host_identity(id);

	if (rc)
		return sseg_py_raise(sseg_py_error, rc);
	return PyBytes_FromStringAndSize(id, sizeof(id));
}

PyDoc_STRVAR(host_owner_doc, "host_owner(ids, world_size, rank) -> int: the lowest rank whose\n"
			     "identity equals rank's (ids: world_size identities, joined).");

static PyObject *py_host_owner(PyObject *self, PyObject *args)
{
	Py_buffer ids;
	int world, rank, owner;

	if (!PyArg_ParseTuple(args, "y*ii:host_owner", &ids, &world, &rank))
		return NULL;
	if (world < 1 || (size_t)ids.len != (size_t)world * SSEG_HOST_ID_SIZE) {
		PyBuffer_Release(&ids);
		return PyErr_Format(PyExc_ValueError, "host_owner needs %d x %u bytes, got %zd",
				    world, SSEG_HOST_ID_SIZE, ids.len);
	}
	owner = sseg_host_owner(ids.buf, world, rank);
	PyBuffer_Release(&ids);
	if (owner < 0)
		return sseg_py_raise(PyExc_ValueError, owner);
	return PyLong_FromLong(owner);
}

/* ---- host facts ---- */

PyObject *sseg_py_node_list(uint64_t mask)
{
	PyObject *nodes = PyList_New(0);

	for (int n = 0; nodes && n < 64; n++) {
		PyObject *num;

		if (!(mask & (1ull << n)))
			continue;
		num = PyLong_FromLong(n);
		if (!num || PyList_Append(nodes, num) < 0)
			Py_CLEAR(nodes);
		Py_XDECREF(num);
	}
	return nodes;
}

PyDoc_STRVAR(probe_doc, "probe(size=0) -> dict: the document `sharedseg probe --json` prints\n"
			"(its schema); size is the segment size pages=auto is decided for\n"
			"(0: 1 GiB).");
PyDoc_STRVAR(list_segments_doc, "list_segments() -> dict: the document `sharedseg ls --json` prints:\n"
				"every segment live on this host that this user may see.");

PyDoc_STRVAR(supported_doc, "supported(backend, pages) -> (bool, reason): whether this system\n"
			    "can create segments of that backend and page kind (enum values).");

static PyObject *py_supported(PyObject *self, PyObject *args)
{
	int backend, pages, rc;

	if (!PyArg_ParseTuple(args, "ii:supported", &backend, &pages))
		return NULL;
	Py_BEGIN_ALLOW_THREADS
	rc = sseg_check_support((enum sseg_backend)backend, (enum sseg_pages)pages);
	Py_END_ALLOW_THREADS
	sseg_py_log_drain();
	return Py_BuildValue("(Os)", rc ? Py_False : Py_True, rc ? sseg_last_error() : "");
}

PyDoc_STRVAR(probe_backend_doc, "probe_backend(backend) -> (name, pinned, crosses_hosts, driver)\n"
				"or None: sseg_probe_backend for one backend (enum value), which loads\n"
				"that backend's driver only (driver: its path, \"\" where none loaded);\n"
				"None past the last backend.");

static PyObject *py_probe_backend(PyObject *self, PyObject *args)
{
	struct sseg_probe_backend f = { .sz = sizeof(f) };
	int backend, rc;

	if (!PyArg_ParseTuple(args, "i:probe_backend", &backend))
		return NULL;
	Py_BEGIN_ALLOW_THREADS
	rc = sseg_probe_backend((enum sseg_backend)backend, &f);
	Py_END_ALLOW_THREADS
	sseg_py_log_drain();
	if (rc)
		Py_RETURN_NONE;
	return Py_BuildValue("(sOOs)", f.name, f.pinned ? Py_True : Py_False,
			     f.crosses_hosts ? Py_True : Py_False, f.driver);
}

PyDoc_STRVAR(keeper_lend_doc, "keeper_lend(keeper, name) -> (fd, size): sseg_keeper_lend, the memfd\n"
				"of the segment that keeper holds by that name (the caller closes it) and\n"
				"its mapped size. SharedSegmentError (errno ENOENT: none of that name;\n"
				"ECONNREFUSED: no such keeper runs for this user) with the library's sentence.");

static PyObject *py_keeper_lend(PyObject *self, PyObject *args)
{
	const char *keeper, *name;
	uint64_t size = 0;
	int fd = -1, rc;

	if (!PyArg_ParseTuple(args, "ss:keeper_lend", &keeper, &name))
		return NULL;
	Py_BEGIN_ALLOW_THREADS
	rc = sseg_keeper_lend(keeper, name, &fd, &size);
	Py_END_ALLOW_THREADS
	sseg_py_log_drain();
	if (rc)
		return sseg_py_raise(sseg_py_error, rc);
	return Py_BuildValue("(iK)", fd, (unsigned long long)size);
}

PyDoc_STRVAR(keeper_in_use_doc, "keeper_in_use(fd) -> bool: sseg_keeper_in_use, whether a live group\n"
				  "maps the kept segment whose memfd is fd (one keeper_lend gave).\n"
				  "SharedSegmentError where the kernel cannot tell.");

static PyObject *py_keeper_in_use(PyObject *self, PyObject *args)
{
	int fd, rc;

	if (!PyArg_ParseTuple(args, "i:keeper_in_use", &fd))
		return NULL;
	rc = sseg_keeper_in_use(fd);
	sseg_py_log_drain();
	if (rc < 0)
		return sseg_py_raise(sseg_py_error, rc);
	return PyBool_FromLong(rc);
}

PyDoc_STRVAR(create_doc,
	     "create(name, world_size, rank, owner_rank, *, size=0, layout=None, backend=0,\n"
	     "       pages=0, numa=0, numa_node=-1, populate=0, populate_threads=0,\n"
	     "       readonly_peers=False, host_register=False, timeout_ms=0, device=0)\n"
	     "-> (Segment or None, blob, errno, message)\n\n"
	     "Phase 1 (sseg_create), without the GIL. On failure the segment is None and\n"
	     "blob is the failure blob carrying message: send it in the exchange anyway.\n"
	     "Sizes wider than 64 bits are a ValueError, never truncated.");

PyDoc_STRVAR(lookup_doc, "lookup(addr, length) -> str or None: when [addr, addr+length) is\n"
			 "exactly a live segment or one entry of its layout (sseg_lookup), the\n"
			 "segment's memfd name (\"\" for a segment without one); else None.");

PyDoc_STRVAR(set_log_sink_doc, "set_log_sink(fn): fn(level, text) receives the library's\n"
			       "messages after each native call (None: they wait in the queue).");
PyDoc_STRVAR(drain_log_doc, "drain_log(): hands the queued library messages to the sink now.");
PyDoc_STRVAR(set_log_level_doc, "set_log_level(level): the most verbose level the library\n"
				"delivers (LOG_OFF, LOG_ERROR, LOG_WARN, LOG_INFO, LOG_DEBUG).");
PyDoc_STRVAR(log_level_doc, "log_level() -> int: the library's current level.");
PyDoc_STRVAR(queue_log_doc, "_queue_log(level, text, count): queues count lines as the\n"
			    "library would (tests of the queue's bound).");

PyDoc_STRVAR(cli_doc, "cli(args: list[str | bytes]) -> int: the C tool's command line (sharedseg\n"
		       "ARGS...) in this process, without the GIL; prints to file descriptors\n"
		       "1 and 2 (flush sys.stdout first) and returns the exit status. The\n"
		       "commands only the C tool runs (cli_c_tool_only) are a ValueError.");
PyDoc_STRVAR(cli_c_tool_only_doc, "cli_c_tool_only(command) -> bool: the command runs only in the C\n"
				  "tool: it forks processes that run the library (demo, bench) or\n"
				  "runs until a signal stops it (keep).");

PyDoc_STRVAR(setting_default_doc,
	     "setting_default(setting) -> (text, source): sseg_setting_default, the operators'\n"
	     "default for pages, numa or populate: SHAREDSEG_<SETTING>'s text, else the\n"
	     "library's; source is the variable's name or \"default\".");
PyDoc_STRVAR(population_allowance_ms_doc,
	     "population_allowance_ms(size, pages, populate) -> int: sseg_population_allowance_ms,\n"
	     "the milliseconds the owner's population of size bytes may take (pages and populate\n"
	     "as parse() returns them).");
PyDoc_STRVAR(status_record_doc,
	     "status_record(size, errno, arg, aux, body) -> bytes: a rank's status, size bytes,\n"
	     "in the library's frame (kind STATUS): errno 0 for a rank that got through.");
PyDoc_STRVAR(status_read_doc,
	     "status_read(record) -> (errno, arg, aux, body): what status_record wrote;\n"
	     "SharedSegmentError with the library's sentence for bytes that are none.");

PyDoc_STRVAR(pool_open_doc,
	     "pool_open(name, meaning=None, chunk_size=0, chunks=0, pages=0, flags=0,\n"
	     "timeout_ms=0, keeper=None) -> Pool: sseg_pool_open.");

static PyMethodDef module_methods[] = {
	{ "setting_default", sseg_py_setting_default, METH_VARARGS, setting_default_doc },
	{ "population_allowance_ms", sseg_py_population_allowance_ms, METH_VARARGS,
	  population_allowance_ms_doc },
	{ "status_record", sseg_py_status_record, METH_VARARGS, status_record_doc },
	{ "status_read", sseg_py_status_read, METH_VARARGS, status_read_doc },
	{ "parse", py_parse, METH_VARARGS, parse_doc },
	{ "name", py_name, METH_VARARGS, name_doc },
	{ "host_identity", py_host_identity, METH_NOARGS, host_identity_doc },
	{ "host_owner", py_host_owner, METH_VARARGS, host_owner_doc },
	{ "probe", sseg_py_probe, METH_VARARGS, probe_doc },
	{ "list_segments", sseg_py_list_segments, METH_NOARGS, list_segments_doc },
	{ "supported", py_supported, METH_VARARGS, supported_doc },
	{ "probe_backend", py_probe_backend, METH_VARARGS, probe_backend_doc },
	{ "keeper_lend", py_keeper_lend, METH_VARARGS, keeper_lend_doc },
	{ "keeper_in_use", py_keeper_in_use, METH_VARARGS, keeper_in_use_doc },
	{ "create", (PyCFunction)(void (*)(void))sseg_py_create, METH_VARARGS | METH_KEYWORDS,
	  create_doc },
	{ "lookup", sseg_py_lookup, METH_VARARGS, lookup_doc },
	{ "pool_open", (PyCFunction)(void (*)(void))sseg_py_pool_open,
	  METH_VARARGS | METH_KEYWORDS, pool_open_doc },
	{ "set_log_sink", sseg_py_set_log_sink, METH_O, set_log_sink_doc },
	{ "drain_log", sseg_py_drain_log, METH_NOARGS, drain_log_doc },
	{ "set_log_level", sseg_py_set_log_level, METH_O, set_log_level_doc },
	{ "log_level", sseg_py_log_level, METH_NOARGS, log_level_doc },
	{ "_queue_log", sseg_py_queue_log, METH_VARARGS, queue_log_doc },
	{ "cli", sseg_py_cli, METH_O, cli_doc },
	{ "cli_c_tool_only", sseg_py_cli_c_tool_only, METH_O, cli_c_tool_only_doc },
	{ NULL, NULL, 0, NULL },
};

static struct PyModuleDef native_module = {
	PyModuleDef_HEAD_INIT,
	.m_name = "sharedseg._native",
	.m_doc = "The CPython extension over libsharedseg (compiled in).",
	.m_size = -1,
	.m_methods = module_methods,
};

static int add_error_type(PyObject *m)
{
	PyObject *attrs = Py_BuildValue("{s:i,s:O}", "errno", 0, "failures", Py_None);

	if (!attrs)
		return -1;
	sseg_py_error = PyErr_NewExceptionWithDoc(
		"sharedseg.SharedSegmentError",
		"A segment could not be created, completed or used. str() is the library's\n"
		"sentence; .errno the errno; .failures {rank: (phase, message)} when the\n"
		"ranks agreed on a failure.",
		PyExc_RuntimeError, attrs);
	Py_DECREF(attrs);
	if (!sseg_py_error)
		return -1;
	Py_INCREF(sseg_py_error);
	return PyModule_AddObject(m, "SharedSegmentError", sseg_py_error);
}

/* type (a new reference, kept by the extension's global too) as m.name. */
/* The type made from its spec, kept in *global for the C code's checks
 * and added to the module under name. */
static int add_type(PyObject *m, const char *name, PyType_Spec *spec, PyTypeObject **global)
{
	PyObject *type = PyType_FromSpec(spec);

	if (!type)
		return -1;
	*global = (PyTypeObject *)type;
	Py_INCREF(type);
	if (PyModule_AddObject(m, name, type) < 0) {
		Py_DECREF(type);
		return -1;
	}
	return 0;
}

static int add_constants(PyObject *m)
{
	return PyModule_AddIntConstant(m, "BLOB_SIZE", SSEG_BLOB_SIZE) ||
	       PyModule_AddIntConstant(m, "HOST_ID_SIZE", SSEG_HOST_ID_SIZE) ||
	       PyModule_AddIntConstant(m, "NAME_MAX", SSEG_NAME_MAX) ||
	       PyModule_AddIntConstant(m, "POOL_KEY_SIZE", SSEG_POOL_KEY_SIZE) ||
	       PyModule_AddIntConstant(m, "POOL_SLOTS", SSEG_POOL_SLOTS) ||
	       PyModule_AddIntConstant(m, "POOL_MAP_ONLY", SSEG_POOL_MAP_ONLY) ||
	       PyModule_AddIntConstant(m, "POOL_EXISTING", SSEG_POOL_EXISTING) ||
	       PyModule_AddIntConstant(m, "LAYOUT_INTERLEAVED", SSEG_LAYOUT_INTERLEAVED) ||
	       PyModule_AddIntConstant(m, "LAYOUT_GROUPED", SSEG_LAYOUT_GROUPED) ||
	       PyModule_AddIntConstant(m, "LOG_OFF", SSEG_LOG_OFF) ||
	       PyModule_AddIntConstant(m, "LOG_ERROR", SSEG_LOG_ERROR) ||
	       PyModule_AddIntConstant(m, "LOG_WARN", SSEG_LOG_WARN) ||
	       PyModule_AddIntConstant(m, "LOG_INFO", SSEG_LOG_INFO) ||
	       PyModule_AddIntConstant(m, "LOG_DEBUG", SSEG_LOG_DEBUG) ||
	       PyModule_AddStringConstant(m, "LIBRARY_VERSION", VERSION_TEXT);
}

PyMODINIT_FUNC PyInit__native(void)
{
	PyObject *m = PyModule_Create(&native_module);

	if (!m)
		return NULL;
	if (add_error_type(m) < 0 ||
	    add_type(m, "Layout", &sseg_py_layout_spec, &sseg_py_layout_type) < 0 ||
	    add_type(m, "Segment", &sseg_py_segment_spec, &sseg_py_segment_type) < 0 ||
	    add_type(m, "Pin", &sseg_py_pin_spec, &sseg_py_pin_type) < 0 ||
	    add_type(m, "Pool", &sseg_py_pool_spec, &sseg_py_pool_type) < 0 || add_constants(m) < 0) {
		Py_DECREF(m);
		return NULL;
	}
	sseg_py_log_install();
	return m;
}
