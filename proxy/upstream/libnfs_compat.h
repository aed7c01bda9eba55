/*
 * The one place that reaches into libnfs 4.0.0 internals.
 *
 * libnfs 4.0.0's rpc_nfs4_compound_async() encodes into a fixed 4 KiB buffer,
 * so any COMPOUND above ~3.9 KiB (every large WRITE) fails to encode. 5.0.0
 * added an alloc_hint; on 4.0.0 we get the same effect from the exported but
 * undeclared rpc_allocate_pdu2() / rpc_queue_pdu() / rpc_free_pdu(), encoding
 * the arguments ourselves into the PDU's private ZDR stream (struct rpc_pdu's
 * `zdr` member, offset 16 on LP64). nache_compat_selfcheck() proves that
 * layout at run time before the first use and refuses to send otherwise.
 *
 * Everything here runs on the thread that owns the rpc_context (libnfs is not
 * thread-safe). Plain C so it can include libnfs' private expectations
 * without C++ in the way.
 */
#ifndef NACHE_UPSTREAM_LIBNFS_COMPAT_H
#define NACHE_UPSTREAM_LIBNFS_COMPAT_H

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

struct rpc_context;
struct COMPOUND4args;

/* libnfs' rpc_cb, spelled out to keep libnfs headers out of this one. */
typedef void (*nache_rpc_cb)(struct rpc_context *rpc, int status, void *data,
			     void *private_data);

enum nache_compat_result {
	NACHE_COMPAT_OK = 0,
	NACHE_COMPAT_ENOMEM = -1,  /* PDU allocation failed */
	NACHE_COMPAT_EENCODE = -2, /* the arguments did not encode */
	NACHE_COMPAT_EQUEUE = -3,  /* rpc_queue_pdu failed */
	NACHE_COMPAT_ELAYOUT = -4, /* libnfs' private layout is not 4.0.0's */
};

/*
 * Checks, once per process (later calls return the cached answer), that the
 * linked libnfs lays out struct rpc_pdu as 4.0.0 does: allocates a PDU on a
 * scratch context, checks the ZDR found at the expected offset holds the RPC
 * call header we asked for, encodes a small COMPOUND through it and compares
 * the bytes with an independent encoding. On failure returns
 * NACHE_COMPAT_ELAYOUT and, if err is not NULL, a reason in err.
 */
int nache_compat_selfcheck(char *err, size_t errlen);

/*
 * Allocates an NFSv4 COMPOUND PDU with room for args_size_hint bytes of
 * arguments (beyond the 4 KiB libnfs always reserves for the RPC header),
 * encodes args into it with the context's current auth, and queues it; the
 * bytes go out on the next POLLOUT service. cb gets a COMPOUND4res on
 * RPC_STATUS_SUCCESS. args is not referenced after the call returns.
 * Returns NACHE_COMPAT_OK or a negative nache_compat_result.
 */
int nache_compat_queue_compound(struct rpc_context *rpc, nache_rpc_cb cb,
				void *private_data, struct COMPOUND4args *args,
				size_t args_size_hint);

/*
 * For tests: encodes args as nache_compat_queue_compound would, without
 * queueing, and reports the RPC header length and the total record length
 * (record marker + header + arguments).
 */
int nache_compat_encode_size(struct rpc_context *rpc,
			     struct COMPOUND4args *args, size_t args_size_hint,
			     size_t *header_len, size_t *total_len);

#ifdef __cplusplus
}
#endif

#endif /* NACHE_UPSTREAM_LIBNFS_COMPAT_H */
