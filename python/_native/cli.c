/* SPDX-License-Identifier: Apache-2.0 */
/* sharedseg._native.cli: the C tool's command line (tools/cli_main.c) run
 * in this process, so `python -m sharedseg` and the C tool print the same
 * text from the same code. */
#define _GNU_SOURCE /* fopencookie */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli_main.h"
#include "native.h"

static void free_argv(char **argv, int argc)
{
	for (int i = 0; i < argc; i++)
		free(argv[i]);
	free(argv);
}

/* An argument's bytes (a str as UTF-8; bytes as they are, which is how
 * os.fsencode gives back an argv that is not UTF-8), or NULL with an
 * exception: a NUL inside would cut it short. */
static const char *arg_text(PyObject *arg)
{
	Py_ssize_t len = 0;
	char *bytes = NULL;
	const char *s = NULL;

	if (arg && PyBytes_Check(arg))
		s = PyBytes_AsStringAndSize(arg, &bytes, &len) < 0 ? NULL : bytes;
	else if (arg)
		s = PyUnicode_AsUTF8AndSize(arg, &len);
	if (s && strlen(s) != (size_t)len) {
		PyErr_SetString(PyExc_ValueError, "cli: an argument holds a NUL character");
		return NULL;
	}
	return s;
}

/* "sharedseg" and a copy of each argument: the list may change while the
 * command runs without the GIL. */
static char **copy_argv(PyObject *args, int *argc)
{
	Py_ssize_t n = PyList_Size(args);
	char **argv;

	if (n < 0)
		return NULL;
	if (n > 4096) {
		PyErr_Format(PyExc_ValueError, "cli: %zd arguments is too many", n);
		return NULL;
	}
	argv = calloc((size_t)n + 2, sizeof(*argv));
	if (!argv || !(argv[0] = strdup("sharedseg"))) {
		free(argv);
		PyErr_NoMemory();
		return NULL;
	}
	for (Py_ssize_t i = 0; i < n; i++) {
		const char *text = arg_text(PyList_GetItem(args, i));

		argv[i + 1] = text ? strdup(text) : NULL;
		if (!argv[i + 1]) {
			if (text)
				PyErr_NoMemory();
			free_argv(argv, (int)i + 1);
			return NULL;
		}
	}
	*argc = (int)n + 1;
	return argv;
}

/* The command's stdout: fd 1 as the C tool's stdout is, buffered (by the
 * line on a terminal), so that a write error (a full disk, a closed fd 1)
 * keeps its errno until the tool's final check, which fails the command
 * with it. Python may have made C's stdout unbuffered (-u,
 * PYTHONUNBUFFERED), where a failed write's errno would be gone by then,
 * and an earlier command's error may be left in its flag. */
static ssize_t write_fd1(void *cookie, const char *buf, size_t len)
{
	size_t done = 0;

	while (done < len) {
		ssize_t n = write(STDOUT_FILENO, buf + done, len - done);

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return (ssize_t)done; /* short: stdio marks the error, errno stays */
		done += (size_t)n;
	}
	return (ssize_t)done;
}

static FILE *command_stdout(void)
{
	FILE *out = fopencookie(NULL, "w", (cookie_io_functions_t){ .write = write_fd1 });

	if (out && isatty(STDOUT_FILENO))
		setvbuf(out, NULL, _IOLBF, BUFSIZ);
	return out;
}

/* One command at a time: stdout is the process's. */
static pthread_mutex_t command_lock = PTHREAD_MUTEX_INITIALIZER;

/* The command's messages are the C tool's, "sharedseg[PID]: warning: ..."
 * on stderr, those of this thread only: the process's other threads keep
 * the Python sink. */
static int run_command(int argc, char **argv)
{
	FILE *python_stdout = stdout, *out;
	int rc;

	pthread_mutex_lock(&command_lock);
	fflush(NULL);
	out = command_stdout();
	if (out)
		stdout = out;
	else
		clearerr(stdout);
	sseg_py_log_command(1);
	rc = sseg_cli_main(argc, argv);
	sseg_py_log_command(0);
	fflush(stderr);
	stdout = python_stdout;
	if (out)
		fclose(out); /* flushed and checked by the tool already */
	pthread_mutex_unlock(&command_lock);
	return rc;
}

PyObject *sseg_py_cli(PyObject *module, PyObject *args)
{
	char **argv;
	int argc = 0, rc;

	if (!PyList_Check(args))
		return PyErr_Format(PyExc_TypeError, "cli: args must be a list of str or bytes");
	argv = copy_argv(args, &argc);
	if (!argv)
		return NULL;
	if (argc > 1 && sseg_cli_c_tool_only(argv[1])) {
		PyErr_Format(PyExc_ValueError,
			     "cli: '%s' runs only in the C tool, not inside an interpreter (it forks "
			     "processes that run the library, or runs until a signal stops it)",
			     argv[1]);
		free_argv(argv, argc);
		return NULL;
	}
	Py_BEGIN_ALLOW_THREADS
	rc = run_command(argc, argv);
	Py_END_ALLOW_THREADS
	free_argv(argv, argc);
	return PyLong_FromLong(rc);
}

PyObject *sseg_py_cli_c_tool_only(PyObject *module, PyObject *arg)
{
	const char *command = arg_text(arg);

	if (!command)
		return NULL;
	return PyBool_FromLong(sseg_cli_c_tool_only(command));
}
