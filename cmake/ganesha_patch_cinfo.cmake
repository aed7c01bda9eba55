# Run as the ganesha ExternalProject's patch step, after the other
# ganesha_patch*.cmake (cmake -DSRC=<tree> -P): the change_info4 of an
# NFSv4 CREATE, OPEN that creates, REMOVE, RENAME or LINK as the FSAL's
# server reported it.
#
# Ganesha 4.3 fills a directory's change_info4 from its own attribute
# lookups before and after the FSAL call and always says "not atomic". A
# Linux client takes a non-atomic change of a directory as someone else's:
# it drops every cached name of the directory (negative ones too) and its
# access answers, and looks them up again. Through nache every create made
# the client of a build or an untar ask again for names and rights that a
# client mounting the remote directly keeps (knfsd's change_info4 is
# atomic). Issue 19 item 1.
#
# A FSAL may now report, during the request, the change of the directory
# (op_ctx->fsal_dir_cinfo[0]: the directory of a CREATE, OPEN, REMOVE or
# LINK, the source of a RENAME; [1]: a RENAME's target) as its server gave
# it; the reply then carries that instead. A FSAL that reports nothing
# (every other one) answers as before. The edits fail loudly when an anchor
# moved, and are made once (a marker in fsal_api.h).

set(_marker "/* nache: change_info4 from the FSAL */")

include(${CMAKE_CURRENT_LIST_DIR}/ganesha_edit.cmake)

edit_once(include/fsal_api.h "${_marker}")

# What the FSAL reports, and the two helpers the operations use.
edit(include/fsal_api.h
"	struct fsal_pnfs_ds *ctx_pnfs_ds;	/*< current pNFS DS */
};"
"	struct fsal_pnfs_ds *ctx_pnfs_ds;	/*< current pNFS DS */
	${_marker}
	struct fsal_dir_cinfo {
		bool set;	/*< reported during this request */
		bool atomic;
		uint64_t before;
		uint64_t after;
	} fsal_dir_cinfo[2];
};

/* nache: forgets what a FSAL reported (before its call). */
#define FSAL_DIR_CINFO_CLEAR() memset(op_ctx->fsal_dir_cinfo, 0, sizeof(op_ctx->fsal_dir_cinfo))

/* nache: a change_info4's fields become what the FSAL reported in c, if
 * it did. */
static inline void fsal_dir_cinfo_use(const struct fsal_dir_cinfo *c,
				      int *atomic, uint64_t *before,
				      uint64_t *after)
{
	if (!c->set)
		return;
	*atomic = c->atomic;
	*before = c->before;
	*after = c->after;
}

/* nache: the change_info4 *ci becomes the one the FSAL reported in slot i. */
#define FSAL_DIR_CINFO(i, ci) fsal_dir_cinfo_use(&op_ctx->fsal_dir_cinfo[i], &(ci)->atomic, &(ci)->before, &(ci)->after)")

# OPEN (a create reports; an open of an existing file does not).
edit(Protocols/NFS/nfs4_op_open.c
"	res_OPEN4->OPEN4res_u.resok4.cinfo.before =
		fsal_get_changeid4(obj_change);
"
"	res_OPEN4->OPEN4res_u.resok4.cinfo.before =
		fsal_get_changeid4(obj_change);
	FSAL_DIR_CINFO_CLEAR();
")
edit(Protocols/NFS/nfs4_op_open.c
"	res_OPEN4->OPEN4res_u.resok4.cinfo.atomic = FALSE;
"
"	res_OPEN4->OPEN4res_u.resok4.cinfo.atomic = FALSE;
	FSAL_DIR_CINFO(0, &res_OPEN4->OPEN4res_u.resok4.cinfo);
")

# CREATE.
edit(Protocols/NFS/nfs4_op_create.c
"	res_CREATE4->CREATE4res_u.resok4.cinfo.before =
		fsal_get_changeid4(obj_parent);
"
"	res_CREATE4->CREATE4res_u.resok4.cinfo.before =
		fsal_get_changeid4(obj_parent);
	FSAL_DIR_CINFO_CLEAR();
")
edit(Protocols/NFS/nfs4_op_create.c
"	res_CREATE4->CREATE4res_u.resok4.cinfo.atomic = FALSE;
"
"	res_CREATE4->CREATE4res_u.resok4.cinfo.atomic = FALSE;
	FSAL_DIR_CINFO(0, &res_CREATE4->CREATE4res_u.resok4.cinfo);
")

# REMOVE.
edit(Protocols/NFS/nfs4_op_remove.c
"	fsal_status = fsal_remove(parent_obj,"
"	FSAL_DIR_CINFO_CLEAR();
	fsal_status = fsal_remove(parent_obj,")
edit(Protocols/NFS/nfs4_op_remove.c
"	res_REMOVE4->REMOVE4res_u.resok4.cinfo.atomic = FALSE;
"
"	res_REMOVE4->REMOVE4res_u.resok4.cinfo.atomic = FALSE;
	FSAL_DIR_CINFO(0, &res_REMOVE4->REMOVE4res_u.resok4.cinfo);
")

# RENAME: [0] the source directory, [1] the target.
edit(Protocols/NFS/nfs4_op_rename.c
"	res_RENAME4->status = nfs4_Errno_status(
		fsal_rename("
"	FSAL_DIR_CINFO_CLEAR();
	res_RENAME4->status = nfs4_Errno_status(
		fsal_rename(")
edit(Protocols/NFS/nfs4_op_rename.c
"		res_RENAME4->RENAME4res_u.resok4.source_cinfo.atomic = FALSE;
"
"		res_RENAME4->RENAME4res_u.resok4.source_cinfo.atomic = FALSE;
		FSAL_DIR_CINFO(0, &res_RENAME4->RENAME4res_u.resok4.source_cinfo);
		FSAL_DIR_CINFO(1, &res_RENAME4->RENAME4res_u.resok4.target_cinfo);
")

# LINK.
edit(Protocols/NFS/nfs4_op_link.c
"	status = fsal_link(file_obj, dir_obj,"
"	FSAL_DIR_CINFO_CLEAR();
	status = fsal_link(file_obj, dir_obj,")
edit(Protocols/NFS/nfs4_op_link.c
"	res_LINK4->LINK4res_u.resok4.cinfo.atomic = FALSE;
"
"	res_LINK4->LINK4res_u.resok4.cinfo.atomic = FALSE;
	FSAL_DIR_CINFO(0, &res_LINK4->LINK4res_u.resok4.cinfo);
")
