# Run as the ganesha ExternalProject's patch step, after ganesha_patch.cmake
# (cmake -DSRC=<tree> -DADD=<our ganesha/ folder> -P): NFSv4.2's COPY for
# Ganesha 4.3, which answers it NFS4ERR_NOTSUPP itself, has no FSAL
# operation for it, and declares the arguments of an old draft that it
# never decodes (and encodes COPY's result as GETXATTR's). nache forwards a
# client's copy_file_range to the remote as a server-side COPY, so the data
# never crosses the WAN (issue 17). Our files, in ganesha/:
#   nache_copy_types.h, nache_copy_xdr.h  RFC 7862's COPY4args/COPY4res
#   nfs4_op_copy.c                        the operation (Protocols/NFS)
#   mdcache_copy.c                        MDCACHE's pass-through
# and, here, the anchored edits that wire them in: each fails loudly when
# its anchor moved, and they are made once (a marker in nfsv41.h).

set(_marker "/* nache: COPY */")

include(${CMAKE_CURRENT_LIST_DIR}/ganesha_edit.cmake)

# Our files are copied every time (the step runs again when one changes);
# the edits below once.
file(COPY "${ADD}/nache_copy_types.h" "${ADD}/nache_copy_xdr.h"
     DESTINATION "${SRC}/src/include")
file(COPY "${ADD}/nfs4_op_copy.c" DESTINATION "${SRC}/src/Protocols/NFS")
file(COPY "${ADD}/mdcache_copy.c"
     DESTINATION "${SRC}/src/FSAL/Stackable_FSALs/FSAL_MDCACHE")
edit_once(include/nfsv41.h "${_marker}")

# The types: RFC 7862's in place of the draft's.
edit(include/nfsv41.h
"struct COPY4args {
	stateid4        ca_src_stateid;
	stateid4        ca_dst_stateid;
	offset4         ca_src_offset;
	offset4         ca_dst_offset;
	length4         ca_count;
	netloc_type4        ca_type;
	union {
		utf8str_cis ca_name;
		utf8str_cis ca_url;
		netaddr4    ca_addr;
	};
};
typedef struct COPY4args COPY4args;

struct COPY4res {
	nfsstat4 cr_status;
	union {
		write_response4 cr_resok4;
		length4         cr_bytes_copied;
	} COPY4res_u;
};
typedef struct COPY4res COPY4res;
"
"${_marker}
#include \"nache_copy_types.h\"
")
# Their XDR, before the operation switches that use it.
edit(include/nfsv41.h
"static inline bool xdr_nfs_argop4(XDR *xdrs, nfs_argop4 *objp)
"
"#include \"nache_copy_xdr.h\"

static inline bool xdr_nfs_argop4(XDR *xdrs, nfs_argop4 *objp)
")
# Arguments: decoded (they were skipped, and the rest read as operations).
edit(include/nfsv41.h
"	case NFS4_OP_COPY:
	case NFS4_OP_COPY_NOTIFY:
	case NFS4_OP_OFFLOAD_CANCEL:
	case NFS4_OP_OFFLOAD_STATUS:
	case NFS4_OP_CLONE:
		break;
"
"	case NFS4_OP_COPY:
		if (!xdr_COPY4args(xdrs, &objp->nfs_argop4_u.opcopy))
			return false;
		break;
	case NFS4_OP_COPY_NOTIFY:
	case NFS4_OP_OFFLOAD_CANCEL:
	case NFS4_OP_OFFLOAD_STATUS:
	case NFS4_OP_CLONE:
		break;
")
# Results: COPY's own (it fell through to GETXATTR's).
edit(include/nfsv41.h
"	case NFS4_OP_COPY:
	case NFS4_OP_COPY_NOTIFY:
	case NFS4_OP_OFFLOAD_CANCEL:
	case NFS4_OP_OFFLOAD_STATUS:
	case NFS4_OP_CLONE:

	/* NFSv4.3 */
	case NFS4_OP_GETXATTR:
		if (!xdr_GETXATTR4res(xdrs"
"	case NFS4_OP_COPY:
		if (!xdr_COPY4res(xdrs, &objp->nfs_resop4_u.opcopy))
			return false;
		break;
	case NFS4_OP_COPY_NOTIFY:
	case NFS4_OP_OFFLOAD_CANCEL:
	case NFS4_OP_OFFLOAD_STATUS:
	case NFS4_OP_CLONE:

	/* NFSv4.3 */
	case NFS4_OP_GETXATTR:
		if (!xdr_GETXATTR4res(xdrs")

# The operation.
edit(Protocols/NFS/nfs4_Compound.c
"		.name = \"OP_COPY\",
		.funct = nfs4_op_notsupp,
		.resume = nfs4_default_resume,
		.free_res = nfs4_op_notsupp_Free,"
"		.name = \"OP_COPY\",
		.funct = nfs4_op_copy,
		.resume = nfs4_default_resume,
		.free_res = nfs4_op_copy_Free,")
edit(include/nfs_proto_functions.h
"void nfs4_op_seek_Free(nfs_resop4 *resp);
"
"void nfs4_op_seek_Free(nfs_resop4 *resp);

enum nfs_req_result nfs4_op_copy(struct nfs_argop4 *, compound_data_t *,
				 struct nfs_resop4 *);

void nfs4_op_copy_Free(nfs_resop4 *resp);
")
edit(Protocols/NFS/CMakeLists.txt
"   nfs4_op_allocate.c
"
"   nfs4_op_allocate.c
   nfs4_op_copy.c
")

# The FSAL operation, last in fsal_obj_ops (NULL: not supported).
edit(include/fsal_api.h
"	 bool (*is_referral)(struct fsal_obj_handle *obj_hdl,
			     struct fsal_attrlist *attrs,
			     bool cache_attrs);
"
"	 bool (*is_referral)(struct fsal_obj_handle *obj_hdl,
			     struct fsal_attrlist *attrs,
			     bool cache_attrs);

/**
 * @brief Copy a range of one file into another (NFSv4.2 COPY)
 *
 * nache's addition: count bytes of src from src_offset (0: to its end)
 * into dst at dst_offset, done and stable when it returns; *copied says
 * how many. Called on dst's handle; NULL when the FSAL has no copy.
 */
	 fsal_status_t (*copy)(struct fsal_obj_handle *src_hdl,
			       struct state_t *src_state,
			       uint64_t src_offset,
			       struct fsal_obj_handle *dst_hdl,
			       struct state_t *dst_state,
			       uint64_t dst_offset,
			       uint64_t count,
			       uint64_t *copied);
")

# MDCACHE passes it down.
edit(FSAL/Stackable_FSALs/FSAL_MDCACHE/CMakeLists.txt
"	mdcache_file.c
"
"	mdcache_file.c
	mdcache_copy.c
")
edit(FSAL/Stackable_FSALs/FSAL_MDCACHE/mdcache_int.h
"fsal_status_t mdcache_fallocate(struct fsal_obj_handle *obj_hdl,"
"fsal_status_t mdcache_copy(struct fsal_obj_handle *src_hdl,
			   struct state_t *src_state, uint64_t src_offset,
			   struct fsal_obj_handle *dst_hdl,
			   struct state_t *dst_state, uint64_t dst_offset,
			   uint64_t count, uint64_t *copied);
fsal_status_t mdcache_fallocate(struct fsal_obj_handle *obj_hdl,")
edit(FSAL/Stackable_FSALs/FSAL_MDCACHE/mdcache_handle.c
"	ops->fallocate = mdcache_fallocate;
"
"	ops->fallocate = mdcache_fallocate;
	ops->copy = mdcache_copy;
")
