/*
 * nache_export.c - export operations: the root, wire handles, dynamic fs
 * info, state allocation, write verifier.
 */
#include <byteswap.h>

#include "fsal_convert.h"
#include "FSAL/fsal_commonlib.h"
#include "nfs_exports.h"
#include "export_mgr.h"
#include "sal_data.h"

#include "nache_int.h"

void nache_release_export_params(struct nache_fsal_export *exp);

void nache_caller_creds(struct nache_creds *out)
{
	/* Background contexts (LRU, up-calls) have zeroed creds: root. */
	out->uid = op_ctx->creds.caller_uid;
	out->gid = op_ctx->creds.caller_gid;
	out->ngroups = op_ctx->creds.caller_glen;
	out->groups = (const uint32_t *)op_ctx->creds.caller_garray;
}

static void nache_export_release(struct fsal_export *exp_hdl)
{
	struct nache_fsal_export *exp = nache_export_of(exp_hdl);

	fsal_detach_export(exp_hdl->fsal, &exp_hdl->exports);
	free_export_ops(exp_hdl);
	nache_release_export_params(exp);
	gsh_free(exp);
}

static fsal_status_t nache_lookup_path(struct fsal_export *exp_hdl,
				       const char *path,
				       struct fsal_obj_handle **handle,
				       struct fsal_attrlist *attrs_out)
{
	struct nache_fsal_export *exp = nache_export_of(exp_hdl);
	struct nache_creds cr;
	struct nache_attrs a;
	nache_key key;
	uint32_t st;

	/* Only the export's own root is looked up by path (the pseudo fs
	 * lives in Ganesha). */
	nache_caller_creds(&cr);
	st = nache_root(exp->core, &cr, &key, &a);
	if (st != 0)
		return nache_status(st);
	exp->root_key = key;
	*handle = &nache_alloc_handle(exp, key, &a)->obj_handle;
	if (attrs_out != NULL)
		nache_attrs_to_fsal(&a, attrs_out);
	return fsalstat(ERR_FSAL_NO_ERROR, 0);
}

static fsal_status_t nache_wire_to_host(struct fsal_export *exp_hdl,
					fsal_digesttype_t in_type,
					struct gsh_buffdesc *fh_desc, int flags)
{
	struct nache_wire *w;

	if (fh_desc->len != sizeof(struct nache_wire)) {
		LogInfo(COMPONENT_FSAL, "NACHE: handle of %zu bytes, want %zu",
			fh_desc->len, sizeof(struct nache_wire));
		return fsalstat(ERR_FSAL_BADHANDLE, 0);
	}
	w = fh_desc->addr;
	/* Wire handles are little-endian (our hosts); swap for a peer that
	 * encoded them big-endian. */
	if (flags & FH_FSAL_BIG_ENDIAN) {
#if (BYTE_ORDER != BIG_ENDIAN)
		w->incarnation = bswap_64(w->incarnation);
		w->key = bswap_64(w->key);
#endif
	}
	return fsalstat(ERR_FSAL_NO_ERROR, 0);
}

static fsal_status_t nache_create_handle(struct fsal_export *exp_hdl,
					 struct gsh_buffdesc *fh_desc,
					 struct fsal_obj_handle **handle,
					 struct fsal_attrlist *attrs_out)
{
	struct nache_fsal_export *exp = nache_export_of(exp_hdl);
	struct nache_wire w;
	struct nache_creds cr;
	struct nache_attrs a;
	uint32_t st;

	if (fh_desc->len != sizeof(w))
		return fsalstat(ERR_FSAL_BADHANDLE, 0);
	memcpy(&w, fh_desc->addr, sizeof(w));
	/* A handle from another store (wiped cache, other box) would name
	 * the wrong object: it is stale. */
	if (w.incarnation != exp->incarnation ||
	    !nache_key_known(exp->core, w.key))
		return fsalstat(ERR_FSAL_STALE, 0);
	nache_caller_creds(&cr);
	st = nache_getattr(exp->core, &cr, w.key, &a);
	if (st != 0)
		return nache_status(st);
	*handle = &nache_alloc_handle(exp, w.key, &a)->obj_handle;
	if (attrs_out != NULL)
		nache_attrs_to_fsal(&a, attrs_out);
	return fsalstat(ERR_FSAL_NO_ERROR, 0);
}

static fsal_status_t nache_get_fs_dynamic_info(struct fsal_export *exp_hdl,
					       struct fsal_obj_handle *obj_hdl,
					       fsal_dynamicfsinfo_t *info)
{
	struct nache_fsal_export *exp = nache_export_of(exp_hdl);
	struct nache_fsal_obj_handle *h =
		container_of(obj_hdl, struct nache_fsal_obj_handle, obj_handle);
	struct nache_creds cr;
	struct nache_statfs s;
	uint32_t st;

	nache_caller_creds(&cr);
	st = nache_statfs(exp->core, &cr, h->wire.key, &s);
	if (st != 0)
		return nache_status(st);
	memset(info, 0, sizeof(*info));
	info->total_bytes = s.space_total;
	info->free_bytes = s.space_free;
	info->avail_bytes = s.space_avail;
	info->total_files = s.files_total;
	info->free_files = s.files_free;
	info->avail_files = s.files_avail;
	info->maxread = exp->params.max_io_size;
	info->maxwrite = exp->params.max_io_size;
	info->time_delta.tv_sec = 0;
	info->time_delta.tv_nsec = 1;
	return fsalstat(ERR_FSAL_NO_ERROR, 0);
}

/* Every state carries a nache_fd right after it (the default status2 and
 * our I/O paths find it at state + 1). */
static struct state_t *nache_alloc_state(struct fsal_export *exp_hdl,
					 enum state_type state_type,
					 struct state_t *related_state)
{
	struct state_t *state;
	struct nache_nlm_fd *nlm;
	uint32_t i;

	if (state_type != STATE_TYPE_NLM_LOCK)
		return init_state(
			gsh_calloc(1, sizeof(struct state_t) +
					      sizeof(struct nache_fd)),
			exp_hdl, state_type, related_state);
	/* Made by the NLM request of its owner's first lock on the file:
	 * keep that caller for the state's upstream open (nache_int.h). */
	state = gsh_calloc(1, sizeof(struct state_t) +
				      sizeof(struct nache_nlm_fd));
	nlm = (struct nache_nlm_fd *)(state + 1);
	nlm->uid = op_ctx->creds.caller_uid;
	nlm->gid = op_ctx->creds.caller_gid;
	nlm->ngroups = op_ctx->creds.caller_glen;
	if (nlm->ngroups > NACHE_NLM_GROUPS)
		nlm->ngroups = NACHE_NLM_GROUPS;
	for (i = 0; i < nlm->ngroups; i++)
		nlm->groups[i] = op_ctx->creds.caller_garray[i];
	return init_state(state, exp_hdl, state_type, related_state);
}

static void nache_free_state(struct fsal_export *exp_hdl, struct state_t *state)
{
	gsh_free(state);
}

static void nache_get_write_verifier(struct fsal_export *exp_hdl,
				     struct gsh_buffdesc *verf_desc)
{
	struct nache_fsal_export *exp = nache_export_of(exp_hdl);
	uint8_t v[8];

	/* The upstream's verifier: if the remote server reboots and loses
	 * unstable data, our clients see the change and resend. */
	nache_write_verifier(exp->core, v);
	memcpy(verf_desc->addr, v, MIN(verf_desc->len, sizeof(v)));
}

void nache_export_ops_init(struct export_ops *ops)
{
	ops->release = nache_export_release;
	ops->lookup_path = nache_lookup_path;
	ops->wire_to_host = nache_wire_to_host;
	ops->create_handle = nache_create_handle;
	ops->get_fs_dynamic_info = nache_get_fs_dynamic_info;
	ops->alloc_state = nache_alloc_state;
	ops->free_state = nache_free_state;
	ops->get_write_verifier = nache_get_write_verifier;
}
