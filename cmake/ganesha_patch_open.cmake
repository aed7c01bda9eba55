# Run as the ganesha ExternalProject's patch step, after the other
# ganesha_patch*.cmake (cmake -DSRC=<tree> -P): an NFSv4 OPEN of a file by
# its handle costs a FSAL whose server judges opens one round trip, not two.
#
# Ganesha 4.3 does two things before it hands an open by handle (CLAIM_FH,
# what a Linux NFSv4.1 client sends for a file it has looked up) to the
# FSAL: it reads the file's change attribute for the reply's change_info4
# (nfs4_op_open.c), and it checks the caller's rights to the file
# (fsal_helper.c, fsal_open2). For nache each needs the file's current
# attributes, and once they are older than Attr_Timeout that is a GETATTR
# across the WAN; then nache's OPEN goes across the WAN anyway, with the
# attributes and the caller's rights in its COMPOUND. A client mounting the
# remote directly sends the OPEN alone. Issue 19: varmail's and webproxy's
# opens took 230 to 410 ms through nache against 90 to 100 ms direct.
#
# A FSAL that sets the new static option open_judged_by_server
# (fso_open_judged_by_server) judges the caller of an open by handle
# itself: its server does, in the OPEN sent with the caller's credentials,
# and the FSAL checks the rights itself when no such OPEN is sent. For it,
# Ganesha skips its check before an open by handle that neither creates
# exclusively nor reclaims (those keep the owner's exemption Ganesha
# grants), and a CLAIM_FH open's change_info4, which names no directory,
# is the file's change after the open, before and after. Every other FSAL
# behaves as before. The edits fail loudly when an anchor moved, and are
# made once (a marker in fsal_types.h).

set(_marker "/* nache: the FSAL's server judges opens */")

include(${CMAKE_CURRENT_LIST_DIR}/ganesha_edit.cmake)

edit_once(include/fsal_types.h "${_marker}")

# The option and its static flag (after ganesha_patch_create.cmake's).
edit(include/fsal_types.h
"	fso_atomic_exclusive_create,
} fsal_fsinfo_options_t;"
"	fso_atomic_exclusive_create,
	${_marker}
	fso_open_judged_by_server,
} fsal_fsinfo_options_t;")
edit(include/fsal_types.h
"	bool atomic_exclusive_create;"
"	bool atomic_exclusive_create;
	/* nache: an open by handle is judged by the FSAL (its server), not
	 * by Ganesha's check of the caller's rights before it. */
	bool open_judged_by_server;")
edit(FSAL/fsal_config.c
"	case fso_atomic_exclusive_create:
		return !!info->atomic_exclusive_create;"
"	case fso_atomic_exclusive_create:
		return !!info->atomic_exclusive_create;
	case fso_open_judged_by_server:
		return !!info->open_judged_by_server;")

# fsal_open2 by handle: no check before, for such a FSAL.
edit(FSAL/fsal_helper.c
"	/* Do a permission check on the file before opening. */
	status = check_open_permission(in_obj, openflags,
				       createmode >= FSAL_EXCLUSIVE, &reason);

	if (FSAL_IS_ERROR(status)) {"
"	/* Do a permission check on the file before opening. */
	/* nache: unless the FSAL's server judges the open */
	if (createmode < FSAL_EXCLUSIVE &&
	    !(openflags & FSAL_O_RECLAIM) &&
	    op_ctx->fsal_export->exp_ops.fs_supports(
		    op_ctx->fsal_export, fso_open_judged_by_server))
		status = fsalstat(ERR_FSAL_NO_ERROR, 0);
	else
		status = check_open_permission(in_obj, openflags,
					       createmode >= FSAL_EXCLUSIVE,
					       &reason);

	if (FSAL_IS_ERROR(status)) {")

# NFSv4 OPEN: a CLAIM_FH open's change_info4 without a look before.
edit(Protocols/NFS/nfs4_op_open.c
"	res_OPEN4->OPEN4res_u.resok4.cinfo.before =
		fsal_get_changeid4(obj_change);"
"	/* nache: an open by handle names no directory; for a FSAL whose
	 * server judges opens, the file's change after the open stands for
	 * both (below) instead of a look at its attributes now. */
	if (claim != CLAIM_FH ||
	    !op_ctx->fsal_export->exp_ops.fs_supports(
		    op_ctx->fsal_export, fso_open_judged_by_server))
		res_OPEN4->OPEN4res_u.resok4.cinfo.before =
			fsal_get_changeid4(obj_change);")
edit(Protocols/NFS/nfs4_op_open.c
"	res_OPEN4->OPEN4res_u.resok4.cinfo.after =
		fsal_get_changeid4(obj_change);"
"	res_OPEN4->OPEN4res_u.resok4.cinfo.after =
		fsal_get_changeid4(obj_change);
	if (claim == CLAIM_FH &&
	    op_ctx->fsal_export->exp_ops.fs_supports(
		    op_ctx->fsal_export, fso_open_judged_by_server))
		res_OPEN4->OPEN4res_u.resok4.cinfo.before =
			res_OPEN4->OPEN4res_u.resok4.cinfo.after;")
