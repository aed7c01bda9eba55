/*
 * nache_int.h - private structures of FSAL NACHE (the Ganesha glue).
 *
 * The FSAL owns Ganesha-side objects only: export and object handles, the
 * share reservations among local clients, and the translation of FSAL calls
 * into the core's C API (proxy/include/nache/nache.h). It holds no upstream
 * state of its own.
 */
#ifndef NACHE_INT_H
#define NACHE_INT_H

#include "fsal.h"
#include "fsal_api.h"
#include "fsal_types.h"

#include "nache/nache.h"

/* The module: one per daemon. */
struct nache_fsal_module {
	struct fsal_module fsal;	/* Ganesha's module, embedded */
	struct fsal_obj_ops handle_ops; /* object ops vector (immutable) */
};

extern struct nache_fsal_module NacheModule;

/* Values of the top-level NACHE { } block (daemon-wide), as parsed. */
struct nache_global_params {
	bool metrics;	       /* Metrics: serve Prometheus metrics */
	char *metrics_address; /* Metrics_Address (IPv4) */
	uint32_t metrics_port; /* Metrics_Port */
	char *idmapd_conf;     /* Idmapd_Conf (NULL: libnfsidmap's default) */
	char *admin_socket;    /* Admin_Socket (NULL: beside the pid file;
				   * "": none) */
};

/* The wire handle: which store and which object. Also the host handle and
 * the MDCACHE key (the same bytes, as the up-call API wants). */
struct nache_wire {
	uint64_t incarnation; /* the store's id: stale after a store change */
	uint64_t key;	      /* the object's key in the handle map */
} __attribute__((packed));

struct nache_fsal_export {
	struct fsal_export export;  /* Ganesha's export, embedded */
	struct nache_config params; /* parsed config (immutable) */
	struct nache_core *core;    /* the core (owned) */
	nache_key root_key;	    /* the export root's key */
	uint64_t incarnation;	    /* the store's id (immutable) */
};

/* Our part of an open: follows Ganesha's state_t in the same allocation
 * (see nache_alloc_state), or lives in the object as its global fd. */
struct nache_fd {
	struct fsal_fd fsal_fd;	 /* openflags; MUST be first */
	struct nache_open *open; /* the core's open, NULL when closed */
};

/* An NLM lock state's part (nache_handle.c, "locks"): its fd, and the
 * credentials of the request that made the state (its owner's first lock
 * on the file). Its upstream open is taken as that caller, also when
 * Ganesha grants a blocked lock later from another client's request or a
 * thread of its own. Immutable after nache_alloc_state but the fd. */
#define NACHE_NLM_GROUPS 16 /* AUTH_SYS carries at most 16 groups */
struct nache_nlm_fd {
	struct nache_fd fd; /* MUST be first: state_fd() finds it */
	uint32_t uid;	    /* the caller's uid, gid and groups */
	uint32_t gid;
	uint32_t ngroups;
	uint32_t groups[NACHE_NLM_GROUPS];
};

struct nache_fsal_obj_handle {
	struct fsal_obj_handle obj_handle; /* Ganesha's handle, embedded */
	struct nache_wire wire;		   /* wire/host handle (immutable) */
	/* Share reservations of local opens; guarded by obj_handle.obj_lock */
	struct fsal_share share;
	/* Stateless (NFSv3) opens; guarded by obj_handle.obj_lock */
	struct nache_fd global_fd;
};

/* nache_access.c */
/* The ACCESS4 bits that answer mask on a directory or other object; rest
 * gets the ACE bits ACCESS cannot express. */
uint32_t nache_access4_wanted(fsal_accessflags_t mask, bool dir,
			      fsal_accessflags_t *rest);
/* The mode and ACE bits that the ACCESS4 bits granted allow. */
fsal_accessflags_t nache_access_allowed(uint32_t granted, bool dir);
/* The permission bits of mask (mode and ACE) that allowed lacks. */
fsal_accessflags_t nache_access_missing(fsal_accessflags_t mask,
					fsal_accessflags_t allowed);

/* nache_errors.c */
fsal_status_t nache_status(uint32_t nfs4_status);
uint32_t nache_nfs4_status(fsal_errors_t err);

/* nache_export.c */
void nache_export_ops_init(struct export_ops *ops);
void nache_caller_creds(struct nache_creds *out);

/* nache_up.c */
fsal_status_t nache_lease_op2(struct fsal_obj_handle *obj,
			      struct state_t *state, void *owner,
			      fsal_deleg_t deleg);
void nache_up_init(struct nache_fsal_export *exp);

/* nache_handle.c */
void nache_handle_ops_init(struct fsal_obj_ops *ops);
struct nache_fsal_obj_handle *nache_alloc_handle(struct nache_fsal_export *exp,
						 nache_key key,
						 const struct nache_attrs *a);
void nache_attrs_to_fsal(const struct nache_attrs *in,
			 struct fsal_attrlist *out);

static inline struct nache_fsal_export *nache_export_of(struct fsal_export *exp)
{
	return container_of(exp, struct nache_fsal_export, export);
}

static inline struct nache_fsal_export *nache_ctx_export(void)
{
	return nache_export_of(op_ctx->fsal_export);
}

#endif /* NACHE_INT_H */
