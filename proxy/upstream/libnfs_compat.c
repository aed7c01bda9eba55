/*
 * libnfs 4.0.0 internals, confined (see libnfs_compat.h for why).
 *
 * What we rely on, checked against the 4.0.0 sources' include/libnfs-private.h
 * and lib/pdu.c and against the disassembly of Debian 12's libnfs.so.13
 * (4.0.0-1+deb12u1):
 *  - struct rpc_pdu starts { struct rpc_pdu *next; uint32_t xid; ZDR zdr; ...}
 *    so zdr sits at offset 16 on LP64 (rpc_queue_pdu passes pdu+0x10 to
 *    zdr_getpos; rpc_allocate_pdu2 to zdrmem_create).
 *  - rpc_allocate_pdu2(rpc, program, version, procedure, cb, private_data,
 *    decode_fn, decode_bufsize, size_t alloc_hint) mallocs 4096 + alloc_hint
 *    bytes, points pdu->zdr at them, skips 4 bytes for the TCP record marker
 *    and encodes the RPC call header (with the context's auth) into it.
 *  - rpc_queue_pdu() writes the record marker from zdr_getpos(&pdu->zdr) and
 *    appends the PDU to the output queue; rpc_free_pdu() frees an unqueued one.
 * nache_compat_selfcheck() verifies the layout at run time.
 */
#include "upstream/libnfs_compat.h"

#include <arpa/inet.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <nfsc/libnfs.h>
#include <nfsc/libnfs-raw.h>
#include <nfsc/libnfs-raw-nfs4.h>
#include <nfsc/libnfs-zdr.h>

/* Exported by libnfs 4.0.0 but declared only in its private header. */
struct rpc_pdu;
struct rpc_pdu *rpc_allocate_pdu2(struct rpc_context *rpc, int program,
				  int version, int procedure, rpc_cb cb,
				  void *private_data, zdrproc_t zdr_decode_fn,
				  int zdr_bufsize, size_t alloc_hint);
void rpc_free_pdu(struct rpc_context *rpc, struct rpc_pdu *pdu);
int rpc_queue_pdu(struct rpc_context *rpc, struct rpc_pdu *pdu);

/* The leading members of libnfs 4.0.0's struct rpc_pdu, as far as we use. */
struct nache_rpc_pdu_prefix {
	struct rpc_pdu *next; /* libnfs queue link */
	uint32_t xid;         /* RPC transaction id (host order) */
	ZDR zdr;              /* encode stream over the PDU's output buffer */
};

#if UINTPTR_MAX == 0xffffffffffffffffu
_Static_assert(offsetof(struct nache_rpc_pdu_prefix, zdr) == 16,
	       "libnfs 4.0.0 keeps rpc_pdu.zdr at offset 16 on LP64");
#endif

/* libnfs 4.0.0's ZDR_ENCODEBUF_MINSIZE: the buffer beyond alloc_hint. */
#define NACHE_LIBNFS_ENCODEBUF_MINSIZE 4096
/* Keeps 4096 + hint inside the int libnfs computes it in. */
#define NACHE_MAX_ARGS_HINT (64u << 20)

static ZDR *pdu_zdr(struct rpc_pdu *pdu)
{
	return &((struct nache_rpc_pdu_prefix *)pdu)->zdr;
}

static uint32_t pdu_xid(struct rpc_pdu *pdu)
{
	return ((struct nache_rpc_pdu_prefix *)pdu)->xid;
}

static struct rpc_pdu *allocate_compound_pdu(struct rpc_context *rpc,
					     rpc_cb cb, void *private_data,
					     size_t hint)
{
	return rpc_allocate_pdu2(rpc, NFS4_PROGRAM, NFS_V4, NFSPROC4_COMPOUND,
				 cb, private_data,
				 (zdrproc_t)zdr_COMPOUND4res,
				 sizeof(COMPOUND4res), hint);
}

static void ignore_reply(struct rpc_context *rpc, int status, void *data,
			 void *private_data)
{
	(void)rpc;
	(void)status;
	(void)data;
	(void)private_data;
}

static uint32_t be32_at(const char *p)
{
	uint32_t v;

	memcpy(&v, p, 4);
	return ntohl(v);
}

/* The self-check proper; returns 0 or -1 with a reason in why. */
static int check_layout(char *why, size_t whylen)
{
	const size_t hint = 512;
	struct rpc_context *rpc;
	struct rpc_pdu *pdu;
	nfs_argop4 ops[2];
	COMPOUND4args args;
	char tag[] = "nache-selfcheck";
	char ref[512];
	ZDR refz;
	ZDR *z;
	uint32_t hdr_end, end, ref_len;
	int rc = -1;

	memset(ops, 0, sizeof(ops));
	ops[0].argop = OP_PUTROOTFH;
	ops[1].argop = OP_GETFH;
	memset(&args, 0, sizeof(args));
	args.tag.utf8string_len = strlen(tag);
	args.tag.utf8string_val = tag;
	args.argarray.argarray_len = 2;
	args.argarray.argarray_val = ops;

	rpc = rpc_init_context();
	if (rpc == NULL) {
		snprintf(why, whylen, "rpc_init_context failed");
		return -1;
	}
	pdu = allocate_compound_pdu(rpc, ignore_reply, NULL, hint);
	if (pdu == NULL) {
		snprintf(why, whylen, "rpc_allocate_pdu2 failed: %s",
			 rpc_get_error(rpc));
		goto out_ctx;
	}
	z = pdu_zdr(pdu);
	if (z->x_op != ZDR_ENCODE || z->buf == NULL ||
	    z->size != (int)(NACHE_LIBNFS_ENCODEBUF_MINSIZE + hint)) {
		snprintf(why, whylen,
			 "no encode stream of %zu bytes at rpc_pdu+%zu "
			 "(x_op %d, size %d)",
			 NACHE_LIBNFS_ENCODEBUF_MINSIZE + hint,
			 offsetof(struct nache_rpc_pdu_prefix, zdr),
			 (int)z->x_op, z->size);
		goto out_pdu;
	}
	/* Record marker (4) + xid, CALL, rpcvers, prog, vers, proc + auth. */
	hdr_end = zdr_getpos(z);
	if (hdr_end < 4 + 6 * 4 + 16 || hdr_end > 4 + 1024) {
		snprintf(why, whylen, "implausible RPC header end %u", hdr_end);
		goto out_pdu;
	}
	if (be32_at(z->buf + 4) != pdu_xid(pdu) || be32_at(z->buf + 8) != 0 ||
	    be32_at(z->buf + 12) != 2 || be32_at(z->buf + 16) != NFS4_PROGRAM ||
	    be32_at(z->buf + 20) != NFS_V4 ||
	    be32_at(z->buf + 24) != NFSPROC4_COMPOUND) {
		snprintf(why, whylen,
			 "the PDU buffer does not start with our NFSv4 "
			 "COMPOUND call header");
		goto out_pdu;
	}
	if (!zdr_COMPOUND4args(z, &args)) {
		snprintf(why, whylen, "encoding into the PDU failed");
		goto out_pdu;
	}
	end = zdr_getpos(z);

	zdrmem_create(&refz, ref, sizeof(ref), ZDR_ENCODE);
	if (!zdr_COMPOUND4args(&refz, &args)) {
		snprintf(why, whylen, "reference encoding failed");
		zdr_destroy(&refz);
		goto out_pdu;
	}
	ref_len = zdr_getpos(&refz);
	zdr_destroy(&refz);
	if (end - hdr_end != ref_len ||
	    memcmp(z->buf + hdr_end, ref, ref_len) != 0) {
		snprintf(why, whylen,
			 "PDU encoding differs from the reference (%u vs %u "
			 "bytes)", end - hdr_end, ref_len);
		goto out_pdu;
	}
	rc = 0;
out_pdu:
	rpc_free_pdu(rpc, pdu);
out_ctx:
	rpc_destroy_context(rpc);
	return rc;
}

static pthread_once_t selfcheck_once = PTHREAD_ONCE_INIT;
static int selfcheck_result = NACHE_COMPAT_ELAYOUT;
static char selfcheck_reason[256];

static void run_selfcheck(void)
{
	if (check_layout(selfcheck_reason, sizeof(selfcheck_reason)) == 0) {
		selfcheck_result = NACHE_COMPAT_OK;
		snprintf(selfcheck_reason, sizeof(selfcheck_reason), "ok");
	} else {
		selfcheck_result = NACHE_COMPAT_ELAYOUT;
	}
}

int nache_compat_selfcheck(char *err, size_t errlen)
{
	pthread_once(&selfcheck_once, run_selfcheck);
	if (err != NULL && errlen > 0)
		snprintf(err, errlen, "%s", selfcheck_reason);
	return selfcheck_result;
}

/* Allocates and encodes; on success *out holds an unqueued PDU and
 * *args_start the offset where the arguments begin. */
static int encode_compound(struct rpc_context *rpc, rpc_cb cb,
			   void *private_data, COMPOUND4args *args,
			   size_t hint, struct rpc_pdu **out,
			   uint32_t *args_start)
{
	struct rpc_pdu *pdu;

	if (nache_compat_selfcheck(NULL, 0) != NACHE_COMPAT_OK)
		return NACHE_COMPAT_ELAYOUT;
	if (hint > NACHE_MAX_ARGS_HINT)
		return NACHE_COMPAT_EENCODE;
	pdu = allocate_compound_pdu(rpc, cb, private_data, hint);
	if (pdu == NULL)
		return NACHE_COMPAT_ENOMEM;
	*args_start = zdr_getpos(pdu_zdr(pdu));
	if (!zdr_COMPOUND4args(pdu_zdr(pdu), args)) {
		rpc_free_pdu(rpc, pdu);
		return NACHE_COMPAT_EENCODE;
	}
	*out = pdu;
	return NACHE_COMPAT_OK;
}

int nache_compat_queue_compound(struct rpc_context *rpc, nache_rpc_cb cb,
				void *private_data, struct COMPOUND4args *args,
				size_t args_size_hint)
{
	struct rpc_pdu *pdu = NULL;
	uint32_t args_start;
	int rc;

	rc = encode_compound(rpc, cb, private_data, args, args_size_hint,
			     &pdu, &args_start);
	if (rc != NACHE_COMPAT_OK)
		return rc;
	/* On TCP this only appends to the output queue; it frees the PDU
	 * itself on the (UDP-only) failure path. */
	if (rpc_queue_pdu(rpc, pdu) != 0)
		return NACHE_COMPAT_EQUEUE;
	return NACHE_COMPAT_OK;
}

int nache_compat_encode_size(struct rpc_context *rpc,
			     struct COMPOUND4args *args, size_t args_size_hint,
			     size_t *header_len, size_t *total_len)
{
	struct rpc_pdu *pdu = NULL;
	uint32_t args_start;
	int rc;

	rc = encode_compound(rpc, ignore_reply, NULL, args, args_size_hint,
			     &pdu, &args_start);
	if (rc != NACHE_COMPAT_OK)
		return rc;
	*header_len = args_start - 4; /* minus the record marker */
	*total_len = zdr_getpos(pdu_zdr(pdu));
	rpc_free_pdu(rpc, pdu);
	return NACHE_COMPAT_OK;
}
