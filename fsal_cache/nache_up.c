/*
 * nache_up.c - delegations to the office's clients, and the up-call that
 * recalls them.
 *
 * Ganesha decides whether to delegate a file to a local client (its NFSv4
 * Delegations option, the export's Delegations option, its own conflict
 * rules between local clients) and then asks us through lease_op2. We agree
 * only while the core holds an upstream delegation covering the file: then a
 * conflicting change at the remote must first recall nache's delegation,
 * and the core has Ganesha recall the local ones before it returns its own
 * (the hook below). Conflicts between two local clients never reach us:
 * Ganesha recalls among its clients by itself, with no upstream traffic.
 *
 * Must not: block. The recall hook runs on the core's recall thread, which a
 * Ganesha worker may be waiting on (the state lock delegrecall takes is held
 * by open2 callers), so it only queues the up-call on Ganesha's general
 * fridge.
 */
#include "config.h"

#include "fridgethr.h"
#include "fsal.h"
#include "fsal_up.h"

#include "nache_int.h"

/* lease_op2: a local delegation starts (FSAL_DELEG_RD / _WR) or ends
 * (FSAL_DELEG_NONE, on DELEGRETURN and on revoke). */
fsal_status_t nache_lease_op2(struct fsal_obj_handle *obj,
			      struct state_t *state, void *owner,
			      fsal_deleg_t deleg)
{
	struct nache_fsal_obj_handle *h =
		container_of(obj, struct nache_fsal_obj_handle, obj_handle);
	struct nache_core *core = nache_ctx_export()->core;

	(void)state;
	(void)owner;
	switch (deleg) {
	case FSAL_DELEG_NONE:
		nache_local_deleg_release(core, h->wire.key);
		return fsalstat(ERR_FSAL_NO_ERROR, 0);
	case FSAL_DELEG_RD:
	case FSAL_DELEG_WR:
		/* Any error only means "no delegation": the OPEN succeeds
		 * without one (SAL/state_deleg.c). Ganesha asks for a read
		 * delegation whatever the file's other opens: none while
		 * anyone has the file open for writing (the open asking is a
		 * read-only one, so any writer is somebody else), or the
		 * holder would cache what the writer changes. */
		if (deleg == FSAL_DELEG_RD) {
			bool writer;

			PTHREAD_RWLOCK_rdlock(&obj->obj_lock);
			writer = h->share.share_access_write > 0;
			PTHREAD_RWLOCK_unlock(&obj->obj_lock);
			if (writer)
				return fsalstat(ERR_FSAL_DELAY, 0);
		}
		if (nache_local_deleg_acquire(core, h->wire.key,
					      deleg == FSAL_DELEG_WR) != 0)
			return fsalstat(ERR_FSAL_DELAY, 0);
		return fsalstat(ERR_FSAL_NO_ERROR, 0);
	}
	return fsalstat(ERR_FSAL_INVAL, 0);
}

/* The core's recall hook: Ganesha sends CB_RECALL to every local client
 * delegated the file, asynchronously. */
static void nache_recall_local(void *arg, nache_key key)
{
	struct nache_fsal_export *exp = arg;
	struct nache_wire wire = { .incarnation = exp->incarnation,
				   .key = key };
	struct gsh_buffdesc handle = { .addr = &wire, .len = sizeof(wire) };
	fsal_status_t st;

	/* The handle bytes are copied before this returns. */
	st = up_async_delegrecall(general_fridge, exp->export.up_ops, &handle,
				  NULL, NULL);
	if (FSAL_IS_ERROR(st))
		LogMajor(COMPONENT_FSAL,
			 "NACHE: cannot queue the recall of local delegations "
			 "on %" PRIu64 ": %s",
			 key, msg_fsal_err(st.major));
}

/* The core gave back its upstream delegation on key: MDCACHE's copy of the
 * file's attributes is no longer vouched for (the remote may be about to
 * change them: a chmod recalls first), so the next GETATTR comes from the
 * core, which revalidates. The up-call only clears flags on the cache entry
 * (under its own op context) and takes no lock a caller of ours holds. */
static void nache_attrs_stale(void *arg, nache_key key)
{
	struct nache_fsal_export *exp = arg;
	struct nache_wire wire = { .incarnation = exp->incarnation,
				   .key = key };
	struct gsh_buffdesc handle = { .addr = &wire, .len = sizeof(wire) };
	fsal_status_t st;

	st = exp->export.up_ops->invalidate(exp->export.up_ops, &handle,
					    FSAL_UP_INVALIDATE_ATTRS);
	if (FSAL_IS_ERROR(st))
		LogMajor(COMPONENT_FSAL,
			 "NACHE: cannot invalidate the cached attributes of "
			 "%" PRIu64 ": %s",
			 key, msg_fsal_err(st.major));
}

void nache_up_init(struct nache_fsal_export *exp)
{
	nache_set_local_recall(exp->core, nache_recall_local, exp);
	nache_set_attrs_stale(exp->core, nache_attrs_stale, exp);
}
