# Run as the ganesha ExternalProject's patch step, after the other
# ganesha_patch*.cmake (cmake -DSRC=<tree> -P): an NFSv4 OPEN of an existing
# file, by its handle or by its name, costs a FSAL whose server judges
# opens one round trip, not two or three.
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
# The same holds for an open by name (CLAIM_NULL) of an existing file,
# which Linux clients send for a path they have no fresh dentry for
# (Filebench opens every file by path): Ganesha looks the name up first,
# for nache a LOOKUP across the WAN whenever the file's attributes are
# older than Attr_Timeout, and then opens by handle; and for an UNCHECKED
# create (open with O_CREAT, without O_EXCL), a LOOKUP of a name that is
# usually not there. MDCACHE holds its directory's content lock for
# writing across such a lookup, so every other open in the directory
# waits a round trip for it. For such a FSAL an OPEN without create, or
# an UNCHECKED create that truncates nothing (a truncating one keeps the
# look first: the truncation must not come before the checks below), goes
# to fsal_open2 by name instead: MDCACHE opens a
# name it holds by handle as before, and gives one it lacks to the FSAL,
# whose server opens it in one COMPOUND. What Ganesha checks before opening
# a file it has looked up (a delegation it granted that conflicts, an open
# of the same owner to upgrade instead of duplicating) is checked right
# after such an open: on either, the new open is closed again and the
# request takes Ganesha's usual way with the file now known (a conflict
# then answers NFS4ERR_DELAY, with the delegation recalled). The search
# right to the directory, which Ganesha checks before any open by name, is
# checked after such an open without create (the FSAL's server answers it
# in the OPEN's COMPOUND, where a check before would ask it once more);
# refused, the open is closed again. A GUARDED or EXCLUSIVE create by name
# (tar's) is not checked by Ganesha at all: the FSAL's server judges the
# OPEN that makes the file, and the FSAL checks the right itself where it
# answers without one. Nor does Ganesha read the directory's
# change attribute before an open by name for the reply's change_info4:
# the FSAL reports the change its server gave (ganesha_patch_cinfo.cmake),
# and where it reports none (no OPEN sent) the change after the open stands
# for both, not atomic. Each of these two was a round trip across the WAN
# per file tar wrote into a directory last changed more than Attr_Timeout
# before. MDCACHE opens a name it holds by handle; an entry the
# server no longer knows (the file replaced there: NFS4ERR_STALE) is
# dropped and the name given to the FSAL by name. The edits fail loudly
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

# NFSv4 OPEN: its change_info4 without a look before.
edit(Protocols/NFS/nfs4_op_open.c
"	res_OPEN4->OPEN4res_u.resok4.cinfo.before =
		fsal_get_changeid4(obj_change);"
"	/* nache: for a FSAL whose server judges opens, no look at the
	 * attributes now: an open by handle names no directory, and the
	 * change of an open by name's directory is the one its server
	 * reported (FSAL_DIR_CINFO, below); where it reported none, the
	 * change after the open stands for both (not atomic). */
	if (!op_ctx->fsal_export->exp_ops.fs_supports(
		    op_ctx->fsal_export, fso_open_judged_by_server))
		res_OPEN4->OPEN4res_u.resok4.cinfo.before =
			fsal_get_changeid4(obj_change);")
edit(Protocols/NFS/nfs4_op_open.c
"	res_OPEN4->OPEN4res_u.resok4.cinfo.after =
		fsal_get_changeid4(obj_change);"
"	res_OPEN4->OPEN4res_u.resok4.cinfo.after =
		fsal_get_changeid4(obj_change);
	if (op_ctx->fsal_export->exp_ops.fs_supports(
		    op_ctx->fsal_export, fso_open_judged_by_server))
		res_OPEN4->OPEN4res_u.resok4.cinfo.before =
			res_OPEN4->OPEN4res_u.resok4.cinfo.after;")

# NFSv4 OPEN without create, by name: no lookup before, for such a FSAL
# (the anchor is ganesha_patch_create.cmake's edit of the lookup).
edit(Protocols/NFS/nfs4_op_open.c
"		/* nache: the FSAL's server decides whether the name is taken */
		if (arg->openhow.opentype == OPEN4_CREATE &&"
"		/* nache: an existing file is opened by name, in one call, and
		 * so is a name an UNCHECKED create (one that truncates
		 * nothing) opens or makes */
		if ((arg->openhow.opentype == OPEN4_NOCREATE ||
		     (createmode == FSAL_UNCHECKED &&
		      !(FSAL_TEST_MASK(sattr.valid_mask, ATTR_SIZE) &&
			sattr.filesize == 0))) &&
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

# fsal_open2 by name, for such a FSAL: the directory's search right is not
# checked before the open. Without create it is checked after the open
# (the server's answer comes back with its OPEN, where a look before would
# ask it once more; refused, the open is closed again). A GUARDED or
# EXCLUSIVE create, which MDCACHE gives to such a FSAL by name whatever it
# holds (atomic_exclusive_create), is judged by the FSAL: its server judges
# the OPEN that makes the file, and the FSAL checks the right itself where
# it answers a create without one (a name it knows is taken, a create it
# logs). An UNCHECKED create keeps the check before: MDCACHE opens a name
# it holds by handle.
edit(FSAL/fsal_helper.c
"	/* Check directory permission for LOOKUP */
	status = fsal_access(in_obj, FSAL_EXECUTE_ACCESS);
	if (FSAL_IS_ERROR(status))
		return status;

	status = in_obj->obj_ops->open2(in_obj,"
"	/* Check directory permission for LOOKUP */
	/* nache: after the open, or by the FSAL, for a FSAL whose server
	 * judges opens */
	if (!op_ctx->fsal_export->exp_ops.fs_supports(
		    op_ctx->fsal_export, fso_open_judged_by_server) ||
	    createmode == FSAL_UNCHECKED ||
	    (createmode >= FSAL_GUARDED &&
	     !op_ctx->fsal_export->exp_ops.fs_supports(
		     op_ctx->fsal_export, fso_atomic_exclusive_create))) {
		status = fsal_access(in_obj, FSAL_EXECUTE_ACCESS);
		if (FSAL_IS_ERROR(status))
			return status;
	}

	status = in_obj->obj_ops->open2(in_obj,")
edit(FSAL/fsal_helper.c
"		     *obj, (*obj)->fsal->name, name);

	if (!caller_perm_check)
		return status;"
"		     *obj, (*obj)->fsal->name, name);

	/* nache: the directory's search right, checked after the open */
	if (createmode == FSAL_NO_CREATE &&
	    op_ctx->fsal_export->exp_ops.fs_supports(
		    op_ctx->fsal_export, fso_open_judged_by_server)) {
		status = fsal_access(in_obj, FSAL_EXECUTE_ACCESS);
		if (FSAL_IS_ERROR(status)) {
			if (state != NULL)
				close_status = (*obj)->obj_ops->close2(*obj,
								       state);
			else
				close_status = fsal_close(*obj);
			if (FSAL_IS_ERROR(close_status))
				LogDebug(COMPONENT_FSAL,
					 \"close2 after a refused search: %s\",
					 fsal_err_txt(close_status));
			(*obj)->obj_ops->put_ref(*obj);
			*obj = NULL;
			return status;
		}
	}

	if (!caller_perm_check)
		return status;")

# MDCACHE's open by name of a name it holds opens the entry by handle; for
# such a FSAL an entry the FSAL's server no longer knows (a file replaced
# there: NFS4ERR_STALE) is dropped, and the name goes to the FSAL by name,
# which opens what the name holds now. Else the client's retry of the
# open would meet the same dead entry, and its user ESTALE.
edit(FSAL/Stackable_FSALs/FSAL_MDCACHE/mdcache_file.c
"		LogFullDebug(COMPONENT_CACHE_INODE,
			     \"Open failed %s\",
			     msg_fsal_err(status.major));
		mdcache_put(entry);
		return status;"
"		LogFullDebug(COMPONENT_CACHE_INODE,
			     \"Open failed %s\",
			     msg_fsal_err(status.major));
		/* nache: a dead entry, for a FSAL whose server judges opens */
		if (status.major == ERR_FSAL_STALE &&
		    op_ctx->fsal_export->exp_ops.fs_supports(
			    op_ctx->fsal_export, fso_open_judged_by_server)) {
			mdcache_kill_entry(entry);
			mdcache_put(entry);
			return fsalstat(ERR_FSAL_NOENT, 0);
		}
		mdcache_put(entry);
		return status;")
