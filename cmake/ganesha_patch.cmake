# Run as the ganesha ExternalProject's patch step (cmake -DSRC=<tree> -P):
# one change to Ganesha 4.3, made by text substitution so that it fails
# loudly when the anchor moves, and idempotent (the step may run again on
# an already patched tree).
#
# MDCACHE, stacked on every FSAL, answers test_access itself from the
# attributes it caches (mode bits, owner, an ACL attribute) and never calls
# the FSAL below it: "all FSALs use the default method ... This should be
# revisited if a FSAL wants to override test_access()" (its comment). nache
# does: the remote decides who may read what (its ACLs, its root squash,
# its identities), so MDCACHE must ask our FSAL when the FSAL has its own
# test_access. That includes MDCACHE's owner_skip shortcut ("the caller
# owns the file: allowed"): only the FSAL knows an owner the remote named
# and nache could not map, shown as nobody, whom a caller squashed to
# nobody must not be taken for. FSALs that keep the default keep today's
# behaviour.

set(_file "${SRC}/src/FSAL/Stackable_FSALs/FSAL_MDCACHE/mdcache_handle.c")
file(READ "${_file}" _text)
set(_marker "/* nache: a FSAL's own test_access decides, owner_skip too */")
string(FIND "${_text}" "${_marker}" _done)
if(NOT _done EQUAL -1)
  return()
endif()
# A tree patched by the earlier version of this step (the FSAL asked after
# the owner_skip shortcut): that block goes first.
set(_earlier
"	/* nache: a FSAL's own test_access decides */
	if (entry->sub_handle->obj_ops->test_access != fsal_test_access) {
		fsal_status_t status;

		subcall(status = entry->sub_handle->obj_ops->test_access(
				entry->sub_handle, access_type, allowed, denied,
				owner_skip));
		return status;
	}

")
string(REPLACE "${_earlier}" "" _text "${_text}")
set(_anchor
"	if (owner_skip && entry->attrs.owner == op_ctx->creds.caller_uid)
		return fsalstat(ERR_FSAL_NO_ERROR, 0);

	return fsal_test_access(obj_hdl, access_type, allowed, denied,
				owner_skip);
}")
string(FIND "${_text}" "${_anchor}" _at)
if(_at EQUAL -1)
  message(FATAL_ERROR "ganesha_patch: mdcache_test_access changed in ${_file}")
endif()
set(_new
"	${_marker}
	if (entry->sub_handle->obj_ops->test_access != fsal_test_access) {
		fsal_status_t status;

		subcall(status = entry->sub_handle->obj_ops->test_access(
				entry->sub_handle, access_type, allowed, denied,
				owner_skip));
		return status;
	}

${_anchor}")
string(REPLACE "${_anchor}" "${_new}" _text "${_text}")
file(WRITE "${_file}" "${_text}")
