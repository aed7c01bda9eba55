/*
 * mdcache_copy.c - MDCACHE's pass-through of the FSAL operation copy
 * (nfs4_op_copy.c), written for nache and compiled into Ganesha's MDCACHE
 * by the patch step (cmake/ganesha_patch_copy.cmake): the FSAL below does
 * the copy, and the destination's cached attributes are no longer trusted
 * (its data and maybe its size changed).
 */
#include "config.h"
#include "fsal.h"
#include "FSAL/fsal_commonlib.h"
#include "mdcache_int.h"
#include "mdcache_lru.h"
#include "mdcache.h"

fsal_status_t mdcache_copy(struct fsal_obj_handle *src_hdl,
			   struct state_t *src_state, uint64_t src_offset,
			   struct fsal_obj_handle *dst_hdl,
			   struct state_t *dst_state, uint64_t dst_offset,
			   uint64_t count, uint64_t *copied)
{
	mdcache_entry_t *src =
		container_of(src_hdl, mdcache_entry_t, obj_handle);
	mdcache_entry_t *dst =
		container_of(dst_hdl, mdcache_entry_t, obj_handle);
	fsal_status_t status;

	if (dst->sub_handle->obj_ops->copy == NULL)
		return fsalstat(ERR_FSAL_NOTSUPP, 0);
	subcall(status = dst->sub_handle->obj_ops->copy(
			src->sub_handle, src_state, src_offset, dst->sub_handle,
			dst_state, dst_offset, count, copied););
	if (status.major == ERR_FSAL_STALE)
		mdcache_kill_entry(dst);
	else
		atomic_clear_uint32_t_bits(&dst->mde_flags,
					   MDCACHE_TRUST_ATTRS);
	return status;
}
