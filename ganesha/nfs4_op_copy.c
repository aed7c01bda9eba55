/*
 * nfs4_op_copy.c - NFSv4.2's COPY (RFC 7862 section 15.2) for Ganesha 4.3,
 * which answers it NFS4ERR_NOTSUPP itself and gives a FSAL no operation
 * for it. Written for nache and compiled into Ganesha by the patch step
 * (cmake/ganesha_patch_copy.cmake), with a FSAL operation, copy, that a
 * FSAL may provide (MDCACHE passes it down; a FSAL without it gets
 * NOTSUPP, as before).
 *
 * Served: copies within this server (no source server named), done
 * synchronously: the reply says how many bytes were copied, FILE_SYNC,
 * and that the copy was consecutive and synchronous; no CB_OFFLOAD ever
 * follows. The saved filehandle is the source, the current one the
 * destination; each stateid is checked as READ's and WRITE's are (an open
 * stateid with the access, a lock stateid through its open, a delegation
 * stateid, or a special one, which meets other clients' delegations).
 * A count of 0 means "to the end of the source" (the FSAL resolves it).
 */
#include "config.h"
#include "log.h"
#include "fsal.h"
#include "nfs_core.h"
#include "sal_functions.h"
#include "nfs_proto_functions.h"
#include "nfs_proto_tools.h"
#include "nfs_convert.h"
#include "export_mgr.h"

/* The state the FSAL is given for obj's stateid sid, checked for the
 * access (OPEN4_SHARE_ACCESS_READ or _WRITE) the copy needs of it: an
 * open's own state, a lock's open, or NULL for a delegation or special
 * stateid. A reference is held on *state when it is not NULL. */
static nfsstat4 copy_state(compound_data_t *data, struct fsal_obj_handle *obj,
			   stateid4 *sid, uint32_t access,
			   struct state_t **state)
{
	struct state_t *s = NULL, *open;
	nfsstat4 st;

	*state = NULL;
	st = nfs4_Check_Stateid(sid, obj, &s, data, STATEID_SPECIAL_ANY, 0,
				false, "COPY");
	if (st != NFS4_OK)
		return st;
	if (s == NULL) {
		/* All-zeros or all-ones: no delegation of another client may
		 * stand in the way. */
		if (state_deleg_conflict(obj,
					 access == OPEN4_SHARE_ACCESS_WRITE))
			return NFS4ERR_DELAY;
		return NFS4_OK;
	}
	switch (s->state_type) {
	case STATE_TYPE_SHARE: break;
	case STATE_TYPE_LOCK:
		open = nfs4_State_Get_Pointer(s->state_data.lock.openstate_key);
		dec_state_t_ref(s);
		if (open == NULL)
			return NFS4ERR_BAD_STATEID;
		s = open;
		break;
	case STATE_TYPE_DELEG:
		if (access == OPEN4_SHARE_ACCESS_WRITE &&
		    !(s->state_data.deleg.sd_type & OPEN_DELEGATE_WRITE)) {
			dec_state_t_ref(s);
			return NFS4ERR_BAD_STATEID;
		}
		dec_state_t_ref(s);
		return NFS4_OK;
	default: dec_state_t_ref(s); return NFS4ERR_BAD_STATEID;
	}
	if ((s->state_data.share.share_access & access) == 0) {
		dec_state_t_ref(s);
		return NFS4ERR_OPENMODE;
	}
	*state = s;
	return NFS4_OK;
}

enum nfs_req_result nfs4_op_copy(struct nfs_argop4 *op, compound_data_t *data,
				 struct nfs_resop4 *resp)
{
	COPY4args *const arg = &op->nfs_argop4_u.opcopy;
	COPY4res *const res = &resp->nfs_resop4_u.opcopy;
	struct state_t *src_state = NULL, *dst_state = NULL;
	struct fsal_obj_handle *src, *dst;
	COPY4resok *ok = &res->COPY4res_u.cr_resok4;
	uint64_t copied = 0;
	fsal_status_t fs;
	nfsstat4 st;

	resp->resop = NFS4_OP_COPY;
	memset(res, 0, sizeof(*res));
	if (data->minorversion < 2) {
		res->cr_status = NFS4ERR_NOTSUPP;
		return NFS_REQ_ERROR;
	}
	st = nfs4_sanity_check_FH(data, REGULAR_FILE, false);
	if (st == NFS4_OK)
		st = nfs4_sanity_check_saved_FH(data, REGULAR_FILE, false);
	if (st != NFS4_OK)
		goto out;
	src = data->saved_obj;
	dst = data->current_obj;
	if (dst->obj_ops->copy == NULL ||
	    op_ctx->ctx_export != data->saved_export) {
		/* No copy here, or across exports (another FSAL). */
		st = op_ctx->ctx_export != data->saved_export ? NFS4ERR_XDEV
							      : NFS4ERR_NOTSUPP;
		goto out;
	}
	st = copy_state(data, src, &arg->ca_src_stateid,
			OPEN4_SHARE_ACCESS_READ, &src_state);
	if (st == NFS4_OK)
		st = copy_state(data, dst, &arg->ca_dst_stateid,
				OPEN4_SHARE_ACCESS_WRITE, &dst_state);
	if (st != NFS4_OK)
		goto out;
	fs = src->obj_ops->test_access(src, FSAL_READ_ACCESS, NULL, NULL, true);
	if (!FSAL_IS_ERROR(fs))
		fs = dst->obj_ops->test_access(dst, FSAL_WRITE_ACCESS, NULL,
					       NULL, true);
	if (!FSAL_IS_ERROR(fs))
		fs = dst->obj_ops->copy(src, src_state, arg->ca_src_offset, dst,
					dst_state, arg->ca_dst_offset,
					arg->ca_count, &copied);
	if (FSAL_IS_ERROR(fs)) {
		st = nfs4_Errno_status(fs);
		goto out;
	}
	LogFullDebug(COMPONENT_NFS_V4, "COPY of %" PRIu64 " bytes", copied);
	ok->cr_response.wr_ids = 0;
	ok->cr_response.wr_count = copied;
	ok->cr_response.wr_committed = FILE_SYNC4;
	memcpy(ok->cr_response.wr_writeverf, NFS4_write_verifier,
	       NFS4_VERIFIER_SIZE);
	ok->cr_requirements.cr_consecutive = true;
	ok->cr_requirements.cr_synchronous = true;
out:
	if (src_state != NULL)
		dec_state_t_ref(src_state);
	if (dst_state != NULL)
		dec_state_t_ref(dst_state);
	res->cr_status = st;
	return nfsstat4_to_nfs_req_result(st);
}

void nfs4_op_copy_Free(nfs_resop4 *resp)
{
	/* Nothing allocated. */
}
