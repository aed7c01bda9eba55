# Run as the ganesha ExternalProject's patch step, after the other
# ganesha_patch*.cmake (cmake -DSRC=<tree> -P): an NFSv4 OPEN of a file by
# its handle, or an UNCHECKED create, costs a FSAL whose server judges
# opens one round trip, not two.
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
# behaves as before.
#
# An UNCHECKED create (an OPEN with O_CREAT, without O_EXCL: most
# programs' creates, every file Filebench makes) had Ganesha look its name
# up first: for nache a LOOKUP across the WAN, usually answered
# NFS4ERR_NOENT, and MDCACHE holds the directory's content lock for
# writing across it (mdc_lookup, mdc_lookup_uncached), so every other
# open in that directory waited the round trip. For such a FSAL an
# UNCHECKED create that truncates nothing goes to fsal_open2 by name
# instead (a truncating one keeps the look first: its truncation must not
# come before the checks below): MDCACHE opens a name it holds by handle,
# and gives one it lacks to the FSAL, whose server opens or creates it in
# one COMPOUND. What Ganesha checks before opening a file it has looked up
# (a delegation it granted that conflicts, an open of the same owner to
# upgrade instead of duplicating) is checked right after such an open:
# on either, the new open is closed again and the request takes Ganesha's
# usual way with the file now known (a conflict then answers
# NFS4ERR_DELAY, with the delegation recalled). The edits fail loudly
# when an anchor moved, and are made once (a marker in fsal_types.h).

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

# NFSv4 OPEN, an UNCHECKED create that truncates nothing: no lookup
# before, for such a FSAL (the anchor is ganesha_patch_create.cmake's edit
# of the lookup).
edit(Protocols/NFS/nfs4_op_open.c
"		/* nache: the FSAL's server decides whether the name is taken */
		if (arg->openhow.opentype == OPEN4_CREATE &&"
"		/* nache: a name an UNCHECKED create that truncates nothing
		 * opens or makes is given to the FSAL by name, unlooked */
		if (createmode == FSAL_UNCHECKED &&
		    !(FSAL_TEST_MASK(sattr.valid_mask, ATTR_SIZE) &&
		      sattr.filesize == 0) &&
		    op_ctx->fsal_export->exp_ops.fs_supports(
			    op_ctx->fsal_export, fso_open_judged_by_server))
			break;

		/* nache: the FSAL's server decides whether the name is taken */
		if (arg->openhow.opentype == OPEN4_CREATE &&")
edit(Protocols/NFS/nfs4_op_open.c
"	/* Check if file_obj a REGULAR_FILE */
	if (file_obj != NULL && file_obj->type != REGULAR_FILE) {"
"	/* nache: a file opened by name, with the open undone (below) */
 nache_known_file:
	/* Check if file_obj a REGULAR_FILE */
	if (file_obj != NULL && file_obj->type != REGULAR_FILE) {")
edit(Protocols/NFS/nfs4_op_open.c
"	if (file_obj == NULL) {
		/* We have a file object, take the state lock. */
		file_obj = out_obj;
		STATELOCK_lock(file_obj);
		st_lock_held = true;
	}"
"	if (file_obj == NULL) {
		/* We have a file object, take the state lock. */
		file_obj = out_obj;
		STATELOCK_lock(file_obj);
		st_lock_held = true;

		/* nache: opened by name with nothing looked up before, so
		 * what is checked before opening a known file is checked now:
		 * a conflicting delegation (recalled: NFS4ERR_DELAY), or this
		 * owner's open of it (upgraded instead: the file is taken as
		 * if looked up). On either, the new open is closed first. */
		if (op_ctx->fsal_export->exp_ops.fs_supports(
			    op_ctx->fsal_export, fso_open_judged_by_server)) {
			state_t *mine = nfs4_State_Get_Obj(file_obj, owner);
			bool conflict = state_deleg_conflict_impl(
				file_obj,
				(arg->share_access &
				 OPEN4_SHARE_ACCESS_WRITE) != 0);

			if (mine != NULL)
				dec_state_t_ref(mine);
			if (mine != NULL || conflict) {
				STATELOCK_unlock(file_obj);
				st_lock_held = false;
				status = file_obj->obj_ops->close2(
					file_obj, *file_state);
				if (FSAL_IS_ERROR(status))
					LogDebug(COMPONENT_STATE,
						 \"close2 of a by-name open undone: %s\",
						 fsal_err_txt(status));
				op_ctx->fsal_export->exp_ops.free_state(
					op_ctx->fsal_export, *file_state);
				*file_state = NULL;
				*new_state = false;
				/* The open's reference stands for a lookup's. */
				looked_up_file_obj = true;
				in_obj = file_obj;
				filename = NULL;
				out_obj = NULL;
				if (conflict) {
					res_OPEN4->status = NFS4ERR_DELAY;
					goto out;
				}
				goto nache_known_file;
			}
		}
	}")

