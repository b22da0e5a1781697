/* SPDX-License-Identifier: Apache-2.0 */
/* The library's messages into Python's logging. The library calls
 * on_message on any thread, possibly under one of its locks, so it only
 * copies the line into a bounded ring (a mutex held for one copy; the GIL
 * is never taken there). sseg_py_log_drain hands what is queued to the sink
 * the package installed (logging.getLogger("sharedseg")), with the GIL
 * held, after each native call. A full ring drops the line and counts it.
 * A thread that runs a CLI command (cli.c) writes its own messages to
 * stderr as the C tool does; every other thread's still go to the sink. */
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "native.h"

#define LOG_SLOTS 256
#define LOG_LINE 640

struct log_line {
	int level;
	char text[LOG_LINE];
};

static struct log_line ring[LOG_SLOTS];
static unsigned ring_head;  /* oldest queued line */
static unsigned ring_count; /* queued lines */
static unsigned long ring_lost;
static pthread_mutex_t ring_lock = PTHREAD_MUTEX_INITIALIZER;
static PyObject *sink;      /* callable(level, text), or NULL: lines wait */
static __thread int in_command; /* this thread runs a CLI command */

void sseg_py_log_command(int on)
{
	in_command = on;
}

/* The line the library's default writer (src/log.c) prints, written as it
 * writes it: at once, whole, and dropped rather than block on a full pipe. */
static void to_stderr(enum sseg_log_level level, const char *message)
{
	static const char *const names[] = { "error", "warning", "info", "debug" };
	struct pollfd out = { .fd = STDERR_FILENO, .events = POLLOUT };
	char line[LOG_LINE + 64];
	int n = snprintf(line, sizeof(line), "sharedseg[%d]: %s: %s\n", (int)getpid(),
			 names[level > SSEG_LOG_DEBUG ? SSEG_LOG_DEBUG : level], message);

	if (n >= (int)sizeof(line)) {
		n = (int)sizeof(line) - 1;
		line[n - 1] = '\n';
	}
	if (poll(&out, 1, 0) == 1 && (out.revents & POLLOUT))
		n = (int)write(STDERR_FILENO, line, (size_t)n); /* failed: nowhere to say so */
}

static void on_message(enum sseg_log_level level, const char *message, void *ctx)
{
	struct log_line *slot;

	if (in_command && level >= SSEG_LOG_ERROR) {
		to_stderr(level, message);
		return;
	}
	pthread_mutex_lock(&ring_lock);
	if (ring_count == LOG_SLOTS) {
		ring_lost++;
	} else {
		slot = &ring[(ring_head + ring_count++) % LOG_SLOTS];
		slot->level = (int)level;
		snprintf(slot->text, sizeof(slot->text), "%s", message);
	}
	pthread_mutex_unlock(&ring_lock);
}

void sseg_py_log_install(void)
{
	sseg_set_log(on_message, NULL);
}

/* The oldest line into line; 0 when none is queued. *lost takes the count
 * of dropped lines (reset). */
static int pop(struct log_line *line, unsigned long *lost)
{
	int got = 0;

	pthread_mutex_lock(&ring_lock);
	*lost = ring_lost;
	ring_lost = 0;
	if (ring_count) {
		*line = ring[ring_head];
		ring_head = (ring_head + 1) % LOG_SLOTS;
		ring_count--;
		got = 1;
	}
	pthread_mutex_unlock(&ring_lock);
	return got;
}

static void deliver(int level, const char *text)
{
	PyObject *r = PyObject_CallFunction(sink, "is", level, text);

	if (!r)
		PyErr_WriteUnraisable(sink);
	Py_XDECREF(r);
}

void sseg_py_log_drain(void)
{
	PyObject *type, *value, *tb;
	struct log_line line;
	unsigned long lost = 0;
	char note[160];

	if (!sink)
		return;
	/* A call may end with its exception set: keep it for the caller. */
	PyErr_Fetch(&type, &value, &tb);
	for (;;) {
		int got = pop(&line, &lost);

		if (lost) {
			snprintf(note, sizeof(note),
				 "%lu library message(s) were dropped: more than %d were queued "
				 "between two calls into sharedseg",
				 lost, LOG_SLOTS);
			deliver(SSEG_LOG_WARN, note);
		}
		if (!got)
			break;
		deliver(line.level, line.text);
	}
	PyErr_Restore(type, value, tb);
}

PyObject *sseg_py_set_log_sink(PyObject *module, PyObject *fn)
{
	if (fn != Py_None && !PyCallable_Check(fn))
		return PyErr_Format(PyExc_TypeError, "the log sink must be callable or None");
	Py_XDECREF(sink);
	sink = fn == Py_None ? NULL : fn;
	Py_XINCREF(sink);
	sseg_py_log_drain();
	Py_RETURN_NONE;
}

PyObject *sseg_py_drain_log(PyObject *module, PyObject *unused)
{
	sseg_py_log_drain();
	Py_RETURN_NONE;
}

PyObject *sseg_py_set_log_level(PyObject *module, PyObject *arg)
{
	long level = PyLong_AsLong(arg);

	if (level == -1 && PyErr_Occurred())
		return NULL;
	if (level < SSEG_LOG_OFF || level > SSEG_LOG_DEBUG)
		return PyErr_Format(PyExc_ValueError, "log level %ld is outside %d..%d", level,
				    SSEG_LOG_OFF, SSEG_LOG_DEBUG);
	sseg_set_log_level((enum sseg_log_level)level);
	Py_RETURN_NONE;
}

PyObject *sseg_py_log_level(PyObject *module, PyObject *unused)
{
	return PyLong_FromLong((long)sseg_log_level());
}

/* Queues count lines through the library's own callback path: how a test
 * fills the ring past its bound without making the library talk. */
PyObject *sseg_py_queue_log(PyObject *module, PyObject *args)
{
	const char *text;
	int level, count;

	if (!PyArg_ParseTuple(args, "isi:_queue_log", &level, &text, &count))
		return NULL;
	for (int i = 0; i < count; i++)
		on_message((enum sseg_log_level)level, text, NULL);
	Py_RETURN_NONE;
}
