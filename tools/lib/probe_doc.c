/* SPDX-License-Identifier: Apache-2.0 */
/* The probe's facts (the library's structs) as one document, the schema of
 * `sharedseg probe --json` and of Python's sharedseg.probe(). Bump
 * PROBE_SCHEMA when a key changes meaning or goes away. */
#include <string.h>

#include "backend/backend.h"
#include "probe_doc.h"

#define PROBE_SCHEMA 1

static void host_facts(struct sseg_json *j, const struct sseg_probe *p)
{
	sseg_json_str(j, "kernel", p->kernel);
	sseg_json_bool(j, "memfd", p->memfd_ok);
	sseg_json_bool(j, "sealing", p->sealing_ok);
	sseg_json_bool(j, "memfd_hugetlb", p->memfd_hugetlb_ok);
	sseg_json_begin(j, "thp", '{');
	sseg_json_str(j, "shmem_enabled", p->thp_shmem_enabled);
	sseg_json_str(j, "shmem_2m_enabled", p->thp_shmem_2m_enabled);
	sseg_json_bool(j, "usable", p->thp_shmem_usable);
	sseg_json_end(j, '}');
	sseg_json_begin(j, "hugetlb_pools", '[');
	for (int i = 0; i < p->npools; i++) {
		sseg_json_begin(j, NULL, '{');
		sseg_json_u64(j, "page_size", p->pools[i].page_size);
		sseg_json_u64(j, "total", p->pools[i].total);
		sseg_json_u64(j, "free", p->pools[i].free);
		sseg_json_u64(j, "reserved", p->pools[i].reserved);
		sseg_json_end(j, '}');
	}
	sseg_json_end(j, ']');
	sseg_json_begin(j, "numa", '{');
	sseg_json_begin(j, "nodes", '[');
	for (int n = 0; n < 64; n++)
		if (p->node_mask & (1ull << n))
			sseg_json_int(j, NULL, n);
	sseg_json_end(j, ']');
	sseg_json_end(j, '}');
	sseg_json_begin(j, "memory", '{');
	sseg_json_u64(j, "available", p->mem_available);
	sseg_json_u64(j, "cgroup_limit", p->cgroup_limit);
	sseg_json_u64(j, "cgroup_usage", p->cgroup_usage);
	sseg_json_end(j, '}');
	sseg_json_begin(j, "auto", '{');
	sseg_json_u64(j, "size", p->auto_size);
	sseg_json_str(j, "pages", sseg_pages_name(p->auto_pages));
	sseg_json_str(j, "reason", p->auto_reason);
	sseg_json_end(j, '}');
}

static void device_facts(struct sseg_json *j, const struct sseg_probe_device *d)
{
	sseg_json_begin(j, NULL, '{');
	sseg_json_int(j, "ordinal", d->ordinal);
	sseg_json_str(j, "uuid", d->uuid);
	sseg_json_tristate(j, "vmm", d->vmm);
	sseg_json_tristate(j, "host_vmm", d->host_vmm);
	sseg_json_tristate(j, "host_vmm_works", d->host_vmm_works);
	sseg_json_tristate(j, "ipc_fd", d->ipc_fd);
	sseg_json_tristate(j, "fabric_claimed", d->fabric_claimed);
	sseg_json_tristate(j, "fabric_works", d->fabric_works);
	sseg_json_tristate(j, "host_register", d->host_register);
	sseg_json_tristate(j, "host_register_readonly", d->host_register_readonly);
	sseg_json_int(j, "host_numa_id", d->host_numa_id);
	sseg_json_end(j, '}');
}

static void backend_facts(struct sseg_json *j, const struct sseg_probe_backend *b)
{
	sseg_json_begin(j, b->name, '{');
	sseg_json_bool(j, "available", b->available);
	sseg_json_str(j, "reason", b->reason);
	sseg_json_str(j, "driver", b->driver);
	sseg_json_int(j, "driver_version", b->driver_version);
	sseg_json_bool(j, "pinned", b->pinned);
	sseg_json_bool(j, "crosses_hosts", b->crosses_hosts);
	sseg_json_tristate(j, "host_register", b->host_register);
	sseg_json_begin(j, "devices", '[');
	for (int i = 0; i < b->ndevices; i++) {
		struct sseg_probe_device d = { .sz = sizeof(d) };

		if (!sseg_probe_device(b->backend, i, &d))
			device_facts(j, &d);
	}
	sseg_json_end(j, ']');
	sseg_json_end(j, '}');
}

static void advice(struct sseg_json *j, const char *text)
{
	const char *at = text;

	sseg_json_begin(j, "advice", '[');
	while (*at) {
		const char *nl = strchr(at, '\n');
		size_t n = nl ? (size_t)(nl - at) : strlen(at);
		char line[sizeof(((struct sseg_probe *)0)->advice)];

		memcpy(line, at, n);
		line[n] = '\0';
		sseg_json_str(j, NULL, line);
		at += n + (nl ? 1 : 0);
	}
	sseg_json_end(j, ']');
}

static void document(struct sseg_json *j, const struct sseg_probe *p)
{
	sseg_json_begin(j, NULL, '{');
	sseg_json_int(j, "schema", PROBE_SCHEMA);
	host_facts(j, p);
	sseg_json_begin(j, "backends", '{');
	for (int i = 0; sseg_backend_nth(i); i++) {
		struct sseg_probe_backend facts = { .sz = sizeof(facts) };

		if (!sseg_probe_backend(sseg_backend_nth(i)->kind, &facts))
			backend_facts(j, &facts);
	}
	sseg_json_end(j, '}');
	advice(j, p->advice);
	sseg_json_end(j, '}');
}

int sseg_probe_document(struct sseg_json *j, uint64_t size)
{
	struct sseg_probe p = { .sz = sizeof(p) };
	int rc = sseg_probe(size, &p);

	if (rc)
		return rc;
	document(j, &p);
	sseg_err_clear();
	return 0;
}
