/* The segment object and the stages it holds. */
#ifndef SSEG_SEGMENT_H
#define SSEG_SEGMENT_H

#include "blob.h"
#include "internal.h"
#include "os/os.h"

/* Resources a segment holds; a bit is set when the stage was taken and
 * cleared only after its release succeeded, so destroy resumes. */
enum sseg_stage {
	SSEG_HELD_WINDOW = 1u << 0,   /* the reserved address window (and what is mapped in it) */
	SSEG_HELD_MEMFD = 1u << 1,    /* the owner's memfd */
	SSEG_HELD_CHANNEL = 1u << 2,  /* the owner's listening fd channel */
	SSEG_HELD_PEERS = 1u << 3,    /* connections to local peers awaiting their ack */
	SSEG_HELD_BACKEND = 1u << 4,  /* backend-private resources (driver handles) */
	SSEG_HELD_HOSTREG = 1u << 5,  /* host registration chunks and their context */
};

struct sseg_backend_ops;
struct sseg_hostreg;

struct sseg {
	char name[SSEG_NAME_MAX + 1];
	struct sseg_opts opts;        /* copy; name and layout point into this object */
	struct sseg_layout *layout;   /* own copy, or NULL */
	const struct sseg_backend_ops *ops;
	enum sseg_backend backend;

	uint64_t size;                /* declared */
	uint64_t mapped_size;         /* rounded up to page_size */
	uint64_t window_size;         /* reserved address space */
	uint64_t page_size;           /* obtained */
	enum sseg_pages pages;        /* obtained */
	int pages_verified;
	uint64_t huge_bytes;
	char pages_reason[320];
	uint64_t numa_nodes;

	int is_owner;
	int completed;
	int readonly;
	void *window;
	int memfd;
	int channel_fd;
	int *peer_fds;                /* owner: connections awaiting acks, indexed by rank */
	char sock_name[SSEG_SOCK_NAME_MAX + 1];
	uint8_t token[SSEG_TOKEN_LEN];
	void *backend_state;
	struct sseg_hostreg *hostreg;

	uint8_t blob[SSEG_BLOB_SIZE]; /* what create gave the caller */
	int failed;                   /* complete failed: destroy is all that is left */
	uint32_t held;                /* enum sseg_stage bits */
	int pins;
	int destroy_failures;
	double create_s, complete_s, populate_s;
	struct os_host_id host;
	struct sseg *next;            /* registry list */
};

SSEG_HIDDEN int sseg_timeout_ms(const struct sseg *seg);

/* Page policy (pages.c): what the owner allocates for pages=req. */
struct sseg_page_choice {
	enum sseg_pages pages;
	uint64_t page_size;
	char reason[320];
};
SSEG_HIDDEN int sseg_pages_choose(enum sseg_pages req, uint64_t size,
				  struct sseg_page_choice *choice);
/* Measures what the mapping obtained and records it in the segment. */
SSEG_HIDDEN void sseg_pages_verify(struct sseg *seg);

/* Population and placement shared by backends that map host memory. */
SSEG_HIDDEN int sseg_place(struct sseg *seg);
SSEG_HIDDEN int sseg_populate_range(struct sseg *seg, uint64_t offset, uint64_t len, int threads);
SSEG_HIDDEN int sseg_populate_slice(struct sseg *seg, int slice, int nslices);

/* The fd channel (fdchannel.c): the owner hands an fd to its local peers
 * (fd < 0 / NULL: no fd, the channel is only the barrier). */
SSEG_HIDDEN int sseg_channel_listen(struct sseg *seg);
SSEG_HIDDEN int sseg_channel_serve(struct sseg *seg, const struct sseg_blob *blobs, int fd,
				   uint64_t mapped_size);
SSEG_HIDDEN int sseg_channel_collect_acks(struct sseg *seg, const struct sseg_blob *blobs);
SSEG_HIDDEN int sseg_channel_fetch(struct sseg *seg, const struct sseg_blob *owner, int *fd,
				   int *owner_sock);
SSEG_HIDDEN int sseg_channel_ack(int owner_sock, int status, int timeout_ms);
SSEG_HIDDEN int sseg_channel_release(struct sseg *seg);
/* The owner's handle section: obtained pages, sizes, socket name, token. */
SSEG_HIDDEN void sseg_channel_describe(const struct sseg *seg, struct sseg_blob_handle *h);
/* serve, then collect every local peer's ack. */
SSEG_HIDDEN int sseg_channel_hand_over(struct sseg *seg, const struct sseg_blob *blobs, int fd);

/* Verification (verify.c): every blob, before anything is mapped. */
SSEG_HIDDEN int sseg_verify_blobs(const struct sseg *seg, const void *raw,
				  struct sseg_blob *blobs);

/* Registry (registry.c). */
SSEG_HIDDEN void sseg_registry_add(struct sseg *seg);
/* Removes a segment from the live list unless pinned (-EBUSY). */
SSEG_HIDDEN int sseg_registry_remove(struct sseg *seg);
SSEG_HIDDEN void sseg_registry_defer(struct sseg *seg, int err, const char *stage);
SSEG_HIDDEN void sseg_registry_retry_pending(void);

/* Release every held stage in reverse order (segment.c). */
SSEG_HIDDEN int sseg_release(struct sseg *seg);

/* Test hook: a host identity override for this thread (tests simulate a
 * group spread over several hosts). boot NULL clears it. */
SSEG_HIDDEN void sseg_test_host(const char *boot);
SSEG_HIDDEN int sseg_host_id(struct os_host_id *id);

#endif
