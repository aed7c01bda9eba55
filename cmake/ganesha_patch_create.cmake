# Run as the ganesha ExternalProject's patch step, after the other
# ganesha_patch*.cmake (cmake -DSRC=<tree> -P): an exclusive create without
# an existence check before it, for a FSAL whose creates are atomic at its
# own server.
#
# Ganesha 4.3 answers an NFSv4 OPEN that creates by first looking the name
# up (nfs4_op_open.c, open4_ex), and MDCACHE looks it up once more before
# a GUARDED or EXCLUSIVE create reaches the FSAL (mdcache_file.c,
# mdc_open2_by_name). For nache each lookup of a new name is a LOOKUP
# across the WAN, answered NOENT: a round trip per file that a kernel
# client mounting the remote directly never sends (its OPEN creates at
# once, and the server says whether the name was taken). Issue 19 item 1:
# an untar through nache paid 150 of them for 150 files.
#
# A FSAL that sets the new static option atomic_exclusive_create
# (fso_atomic_exclusive_create) creates by name itself for GUARDED and
# EXCLUSIVE modes: its server answers EXIST for a name taken (GUARDED, or
# EXCLUSIVE with another verifier) and opens the file for a matching
# verifier (a replay). For such a FSAL both lookups are skipped in those
# modes; an UNCHECKED create, and every other FSAL, behave as before. The
# edits fail loudly when an anchor moved, and are made once (a marker in
# fsal_types.h).

set(_marker "/* nache: atomic exclusive create */")

include(${CMAKE_CURRENT_LIST_DIR}/ganesha_edit.cmake)

edit_once(include/fsal_types.h "${_marker}")

# The option and its static flag.
edit(include/fsal_types.h
"	fso_xattr_support,
} fsal_fsinfo_options_t;"
"	fso_xattr_support,
	${_marker}
	fso_atomic_exclusive_create,
} fsal_fsinfo_options_t;")
edit(include/fsal_types.h
"	bool xattr_support;	/*< fsal can support xattrs */"
"	bool xattr_support;	/*< fsal can support xattrs */
	/* nache: GUARDED and EXCLUSIVE creates by name are atomic at the
	 * FSAL's server: no existence check before them. */
	bool atomic_exclusive_create;")
edit(FSAL/fsal_config.c
"	case fso_xattr_support:
		return !!info->xattr_support;"
"	case fso_xattr_support:
		return !!info->xattr_support;
	case fso_atomic_exclusive_create:
		return !!info->atomic_exclusive_create;")

# NFSv4 OPEN: no lookup before such a create.
edit(Protocols/NFS/nfs4_op_open.c
"		status =
		    fsal_lookup(parent,
				arg->claim.open_claim4_u.file.utf8string_val,
				&file_obj,
				NULL);"
"		/* nache: the FSAL's server decides whether the name is taken */
		if (arg->openhow.opentype == OPEN4_CREATE &&
		    createmode >= FSAL_GUARDED &&
		    op_ctx->fsal_export->exp_ops.fs_supports(
			    op_ctx->fsal_export, fso_atomic_exclusive_create))
			status = fsalstat(ERR_FSAL_NOENT, 0);
		else
			status = fsal_lookup(
				parent,
				arg->claim.open_claim4_u.file.utf8string_val,
				&file_obj, NULL);")

# MDCACHE's open by name: no uncached lookup before such a create either.
edit(FSAL/Stackable_FSALs/FSAL_MDCACHE/mdcache_file.c
"	if (!name)
		return fsalstat(ERR_FSAL_INVAL, 0);

	status = mdc_lookup(mdc_parent, name, uncached, &entry, NULL);"
"	if (!name)
		return fsalstat(ERR_FSAL_INVAL, 0);

	/* nache: the FSAL's server decides whether the name is taken */
	if (uncached && op_ctx->fsal_export->exp_ops.fs_supports(
				op_ctx->fsal_export, fso_atomic_exclusive_create))
		return fsalstat(ERR_FSAL_NOENT, 0);

	status = mdc_lookup(mdc_parent, name, uncached, &entry, NULL);")
