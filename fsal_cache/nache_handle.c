/*
 * nache_handle.c - object operations of FSAL NACHE.
 *
 * Each operation converts Ganesha's arguments, calls the core (nache.h) with
 * the caller's credentials, and converts the result. Share reservations
 * among local opens are kept here, under the object's obj_lock, as Ganesha
 * expects of a FSAL; the upstream open state lives in the core. No lock is
 * held across a call into the core (which may wait on the WAN).
 */
#include "fsal_convert.h"
#include "FSAL/fsal_commonlib.h"
#include "nfs_exports.h"
#include "sal_data.h"
#include "sal_functions.h"

#include "nache_int.h"

/* --- attributes ---------------------------------------------------------- */

static object_file_type_t nache_to_fsal_type(enum nache_type t)
{
	switch (t) {
	case NACHE_REG: return REGULAR_FILE;
	case NACHE_DIR: return DIRECTORY;
	case NACHE_BLK: return BLOCK_FILE;
	case NACHE_CHR: return CHARACTER_FILE;
	case NACHE_LNK: return SYMBOLIC_LINK;
	case NACHE_SOCK: return SOCKET_FILE;
	case NACHE_FIFO: return FIFO_FILE;
	default: return NO_FILE_TYPE;
	}
}

static enum nache_type fsal_to_nache_type(object_file_type_t t)
{
	switch (t) {
	case REGULAR_FILE: return NACHE_REG;
	case DIRECTORY: return NACHE_DIR;
	case BLOCK_FILE: return NACHE_BLK;
	case CHARACTER_FILE: return NACHE_CHR;
	case SYMBOLIC_LINK: return NACHE_LNK;
	case SOCKET_FILE: return NACHE_SOCK;
	case FIFO_FILE: return NACHE_FIFO;
	default: return NACHE_NONE;
	}
}

static struct timespec to_timespec(struct nache_time t)
{
	struct timespec ts = { .tv_sec = t.sec, .tv_nsec = t.nsec };

	return ts;
}

static struct nache_time from_timespec(struct timespec ts)
{
	struct nache_time t = { .sec = ts.tv_sec, .nsec = ts.tv_nsec };

	return t;
}

void nache_attrs_to_fsal(const struct nache_attrs *in,
			 struct fsal_attrlist *out)
{
	attrmask_t v = 0;

	if (in->mask & NACHE_ATTR_TYPE) {
		out->type = nache_to_fsal_type(in->type);
		v |= ATTR_TYPE;
	}
	if (in->mask & NACHE_ATTR_SIZE) {
		out->filesize = in->size;
		v |= ATTR_SIZE;
	}
	if (in->mask & NACHE_ATTR_FSID) {
		out->fsid.major = in->fsid_major;
		out->fsid.minor = in->fsid_minor;
		v |= ATTR_FSID;
	}
	if (in->mask & NACHE_ATTR_FILEID) {
		out->fileid = in->fileid;
		v |= ATTR_FILEID;
	}
	if (in->mask & NACHE_ATTR_MODE) {
		out->mode = in->mode & 07777;
		v |= ATTR_MODE;
	}
	if (in->mask & NACHE_ATTR_NLINK) {
		out->numlinks = in->nlink;
		v |= ATTR_NUMLINKS;
	}
	if (in->mask & NACHE_ATTR_OWNER) {
		out->owner = in->uid;
		v |= ATTR_OWNER;
	}
	if (in->mask & NACHE_ATTR_GROUP) {
		out->group = in->gid;
		v |= ATTR_GROUP;
	}
	if (in->mask & NACHE_ATTR_RAWDEV) {
		out->rawdev.major = in->rdev_major;
		out->rawdev.minor = in->rdev_minor;
		v |= ATTR_RAWDEV;
	}
	if (in->mask & NACHE_ATTR_SPACE_USED) {
		out->spaceused = in->space_used;
		v |= ATTR_SPACEUSED;
	}
	if (in->mask & NACHE_ATTR_ATIME) {
		out->atime = to_timespec(in->atime);
		v |= ATTR_ATIME;
	}
	if (in->mask & NACHE_ATTR_MTIME) {
		out->mtime = to_timespec(in->mtime);
		v |= ATTR_MTIME;
	}
	if (in->mask & NACHE_ATTR_CTIME) {
		out->ctime = to_timespec(in->ctime);
		v |= ATTR_CTIME;
	}
	if (in->mask & NACHE_ATTR_CHANGE) {
		out->change = in->change;
		v |= ATTR_CHANGE;
	}
	out->valid_mask = v;
	out->supported = ATTRS_POSIX;
}

/* The settable subset of Ganesha's attributes, as the core wants them. */
static void fsal_to_nache_set(const struct fsal_attrlist *in,
			      struct nache_attrs *out)
{
	memset(out, 0, sizeof(*out));
	if (FSAL_TEST_MASK(in->valid_mask, ATTR_SIZE)) {
		out->mask |= NACHE_ATTR_SIZE;
		out->size = in->filesize;
	}
	if (FSAL_TEST_MASK(in->valid_mask, ATTR_MODE)) {
		out->mask |= NACHE_ATTR_MODE;
		out->mode = in->mode & 07777;
	}
	if (FSAL_TEST_MASK(in->valid_mask, ATTR_OWNER)) {
		out->mask |= NACHE_ATTR_OWNER;
		out->uid = in->owner;
	}
	if (FSAL_TEST_MASK(in->valid_mask, ATTR_GROUP)) {
		out->mask |= NACHE_ATTR_GROUP;
		out->gid = in->group;
	}
	if (FSAL_TEST_MASK(in->valid_mask, ATTR_ATIME_SERVER)) {
		out->mask |= NACHE_ATTR_ATIME;
		out->atime_server = true;
	} else if (FSAL_TEST_MASK(in->valid_mask, ATTR_ATIME)) {
		out->mask |= NACHE_ATTR_ATIME;
		out->atime = from_timespec(in->atime);
	}
	if (FSAL_TEST_MASK(in->valid_mask, ATTR_MTIME_SERVER)) {
		out->mask |= NACHE_ATTR_MTIME;
		out->mtime_server = true;
	} else if (FSAL_TEST_MASK(in->valid_mask, ATTR_MTIME)) {
		out->mask |= NACHE_ATTR_MTIME;
		out->mtime = from_timespec(in->mtime);
	}
	if (FSAL_TEST_MASK(in->valid_mask, ATTR_RAWDEV)) {
		out->rdev_major = in->rawdev.major;
		out->rdev_minor = in->rawdev.minor;
	}
}

static struct nache_fsal_obj_handle *handle_of(struct fsal_obj_handle *obj)
{
	return container_of(obj, struct nache_fsal_obj_handle, obj_handle);
}

static nache_key key_of(struct fsal_obj_handle *obj)
{
	return handle_of(obj)->wire.key;
}

struct nache_fsal_obj_handle *nache_alloc_handle(struct nache_fsal_export *exp,
						 nache_key key,
						 const struct nache_attrs *a)
{
	struct nache_fsal_obj_handle *h = gsh_calloc(1, sizeof(*h));

	fsal_obj_handle_init(&h->obj_handle, &exp->export,
			     nache_to_fsal_type(a->type));
	h->obj_handle.fileid = a->fileid;
	h->obj_handle.fsid.major = a->fsid_major;
	h->obj_handle.fsid.minor = a->fsid_minor;
	h->obj_handle.obj_ops = &NacheModule.handle_ops;
	h->wire.incarnation = exp->incarnation;
	h->wire.key = key;
	return h;
}

/* Fills attrs_out, or marks it failed when the caller tolerates that. */
static fsal_status_t give_attrs(uint32_t st, const struct nache_attrs *a,
				struct fsal_attrlist *attrs_out)
{
	if (attrs_out == NULL)
		return nache_status(st);
	if (st == 0) {
		nache_attrs_to_fsal(a, attrs_out);
	} else if (attrs_out->request_mask & ATTR_RDATTR_ERR) {
		attrs_out->valid_mask = ATTR_RDATTR_ERR;
	}
	return nache_status(st);
}

/* --- object lifetime and identity --------------------------------------- */

static void op_release(struct fsal_obj_handle *obj)
{
	struct nache_fsal_obj_handle *h = handle_of(obj);

	if (h->global_fd.open != NULL)
		nache_close(nache_ctx_export()->core, h->global_fd.open);
	fsal_obj_handle_fini(obj);
	gsh_free(h);
}

static fsal_status_t op_handle_to_wire(const struct fsal_obj_handle *obj,
				       fsal_digesttype_t output_type,
				       struct gsh_buffdesc *fh_desc)
{
	const struct nache_fsal_obj_handle *h = container_of(
		obj, const struct nache_fsal_obj_handle, obj_handle);

	switch (output_type) {
	case FSAL_DIGEST_NFSV3:
	case FSAL_DIGEST_NFSV4:
		if (fh_desc->len < sizeof(h->wire))
			return fsalstat(ERR_FSAL_TOOSMALL, 0);
		memcpy(fh_desc->addr, &h->wire, sizeof(h->wire));
		fh_desc->len = sizeof(h->wire);
		return fsalstat(ERR_FSAL_NO_ERROR, 0);
	default: return fsalstat(ERR_FSAL_SERVERFAULT, 0);
	}
}

static void op_handle_to_key(struct fsal_obj_handle *obj,
			     struct gsh_buffdesc *fh_desc)
{
	struct nache_fsal_obj_handle *h = handle_of(obj);

	fh_desc->addr = &h->wire;
	fh_desc->len = sizeof(h->wire);
}

/* --- a name found absent, within one request ----------------------------- */

/*
 * Ganesha looks a name up twice while one OPEN (or NFSv3 CREATE) creates
 * it: nfs4_op_open checks whether it exists, then MDCACHE's open2 looks
 * again before calling ours. The second question, asked a few microseconds
 * later within the same request, would cost another round trip to the
 * remote for the answer it just gave; the OPEN that follows is what the
 * remote decides by (it answers EXIST, or opens the file, if the name has
 * appeared since). So the thread keeps the last name the remote said was
 * absent, with the request it was asked in (op_ctx and its start time), and
 * answers the same question again within that request only. Any operation
 * of this thread that adds, removes or moves a name forgets it.
 */
struct absent_name {
	const struct req_op_context *ctx; /* the request; NULL: nothing kept */
	struct timespec start;		  /* its start time */
	nache_key dir;
	char name[NAME_MAX + 1];
};

static __thread struct absent_name last_absent;

static bool same_request(const struct absent_name *n)
{
	return n->ctx == op_ctx &&
	       n->start.tv_sec == op_ctx->start_time.tv_sec &&
	       n->start.tv_nsec == op_ctx->start_time.tv_nsec;
}

static bool known_absent(nache_key dir, const char *name)
{
	return last_absent.ctx != NULL && same_request(&last_absent) &&
	       last_absent.dir == dir && strcmp(last_absent.name, name) == 0;
}

static void note_absent(nache_key dir, const char *name)
{
	if (strlen(name) > NAME_MAX) {
		last_absent.ctx = NULL;
		return;
	}
	last_absent.ctx = op_ctx;
	last_absent.start = op_ctx->start_time;
	last_absent.dir = dir;
	strcpy(last_absent.name, name);
}

static void forget_absent(void)
{
	last_absent.ctx = NULL;
}

/* --- metadata ------------------------------------------------------------ */

static fsal_status_t op_lookup(struct fsal_obj_handle *dir, const char *path,
			       struct fsal_obj_handle **handle,
			       struct fsal_attrlist *attrs_out)
{
	struct nache_fsal_export *exp = nache_ctx_export();
	struct nache_creds cr;
	struct nache_attrs a;
	nache_key key;
	uint32_t st;

	if (known_absent(key_of(dir), path))
		return fsalstat(ERR_FSAL_NOENT, 0);
	nache_caller_creds(&cr);
	st = nache_lookup(exp->core, &cr, key_of(dir), path, &key, &a);
	if (st != 0) {
		fsal_status_t s = nache_status(st);

		if (s.major == ERR_FSAL_NOENT)
			note_absent(key_of(dir), path);
		return s;
	}
	*handle = &nache_alloc_handle(exp, key, &a)->obj_handle;
	return give_attrs(0, &a, attrs_out);
}

struct readdir_ctx {
	struct nache_fsal_export *exp; /* the export */
	fsal_readdir_cb cb;	       /* Ganesha's callback */
	void *dir_state;	       /* its opaque state */
	attrmask_t attrmask;	       /* attributes it wants */
};

static bool readdir_entry(void *arg, const char *name, nache_key key,
			  const struct nache_attrs *a, uint64_t cookie)
{
	struct readdir_ctx *ctx = arg;
	struct nache_fsal_obj_handle *h = nache_alloc_handle(ctx->exp, key, a);
	struct fsal_attrlist attrs;
	enum fsal_dir_result rc;

	fsal_prepare_attrs(&attrs, ctx->attrmask);
	nache_attrs_to_fsal(a, &attrs);
	/* The callback takes over the handle. */
	rc = ctx->cb(name, &h->obj_handle, &attrs, ctx->dir_state, cookie);
	fsal_release_attrs(&attrs);
	return rc < DIR_TERMINATE;
}

static fsal_status_t op_readdir(struct fsal_obj_handle *dir,
				fsal_cookie_t *whence, void *dir_state,
				fsal_readdir_cb cb, attrmask_t attrmask,
				bool *eof)
{
	struct readdir_ctx ctx = { nache_ctx_export(), cb, dir_state,
				   attrmask };
	struct nache_creds cr;

	nache_caller_creds(&cr);
	return nache_status(nache_readdir(ctx.exp->core, &cr, key_of(dir),
					  whence ? *whence : 0, readdir_entry,
					  &ctx, eof));
}

static fsal_status_t op_getattrs(struct fsal_obj_handle *obj,
				 struct fsal_attrlist *attrs_out)
{
	struct nache_creds cr;
	struct nache_attrs a;

	nache_caller_creds(&cr);
	return give_attrs(
		nache_getattr(nache_ctx_export()->core, &cr, key_of(obj), &a),
		&a, attrs_out);
}

/* The remote decides (nache_access.c): what ACCESS can answer is asked of
 * it, per caller, through the core's cache of its answers; the rest (ACE
 * bits on attributes, ACLs, ownership) is Ganesha's usual check. MDCACHE
 * calls this (cmake/ganesha_patch.cmake) before its own owner_skip test:
 * owner_skip (the caller's own file: NFSv3 READ/WRITE, reclaims) is ours
 * to judge, so that nobody (a squashed root) is never taken for the owner
 * of a file whose owner the remote named and nache could not map (shown
 * as nobody too). */
static fsal_status_t op_test_access(struct fsal_obj_handle *obj,
				    fsal_accessflags_t mask,
				    fsal_accessflags_t *allowed,
				    fsal_accessflags_t *denied, bool owner_skip)
{
	const bool dir = obj->type == DIRECTORY;
	fsal_accessflags_t rest = 0, ok = 0, rest_ok = 0, missing;
	struct nache_creds cr;
	uint32_t want, granted = 0, st;

	nache_caller_creds(&cr);
	if (owner_skip &&
	    nache_caller_owns(nache_ctx_export()->core, &cr, key_of(obj)))
		return fsalstat(ERR_FSAL_NO_ERROR, 0);
	want = nache_access4_wanted(mask, dir, &rest);
	if (want != 0) {
		st = nache_access(nache_ctx_export()->core, &cr, key_of(obj),
				  want, &granted);
		if (st != 0)
			return nache_status(st);
		ok = nache_access_allowed(granted, dir);
	}
	if (rest != 0) {
		/* (owner_skip was judged above.) */
		fsal_status_t s = fsal_test_access(
			obj,
			FSAL_ACE4_MASK_SET(rest) | (mask & FSAL_ACE4_REQ_FLAG),
			&rest_ok, NULL, false);

		if (FSAL_IS_ERROR(s) && s.major != ERR_FSAL_ACCESS)
			return s;
		ok |= rest_ok;
	}
	missing = nache_access_missing(mask, ok);
	if (allowed != NULL)
		*allowed = ok & mask;
	if (denied != NULL)
		*denied = missing;
	return fsalstat(missing ? ERR_FSAL_ACCESS : ERR_FSAL_NO_ERROR, 0);
}

/* The remote's change of a directory (slot 0: the directory of a create,
 * link, remove or open; 1: a rename's target), for Ganesha's NFSv4 reply
 * (op_ctx->fsal_dir_cinfo, ganesha_patch_cinfo.cmake). */
static void report_dir_change(int slot, const struct nache_dir_change *c)
{
	if (!c->set)
		return;
	op_ctx->fsal_dir_cinfo[slot].set = true;
	op_ctx->fsal_dir_cinfo[slot].atomic = c->atomic;
	op_ctx->fsal_dir_cinfo[slot].before = c->before;
	op_ctx->fsal_dir_cinfo[slot].after = c->after;
}

static fsal_status_t create_object(struct fsal_obj_handle *dir,
				   const char *name, enum nache_type type,
				   struct fsal_attrlist *attrs_in,
				   const char *link_text,
				   struct fsal_obj_handle **new_obj,
				   struct fsal_attrlist *attrs_out)
{
	struct nache_fsal_export *exp = nache_ctx_export();
	struct nache_creds cr;
	struct nache_attrs set, a;
	struct nache_dir_change change;
	nache_key key;
	uint32_t st;

	forget_absent();
	nache_caller_creds(&cr);
	fsal_to_nache_set(attrs_in, &set);
	set.type = type;
	st = nache_create(exp->core, &cr, key_of(dir), name, type, &set,
			  link_text, &key, &a, &change);
	if (st != 0)
		return nache_status(st);
	report_dir_change(0, &change);
	*new_obj = &nache_alloc_handle(exp, key, &a)->obj_handle;
	return give_attrs(0, &a, attrs_out);
}

static fsal_status_t op_mkdir(struct fsal_obj_handle *dir, const char *name,
			      struct fsal_attrlist *attrs_in,
			      struct fsal_obj_handle **new_obj,
			      struct fsal_attrlist *attrs_out)
{
	return create_object(dir, name, NACHE_DIR, attrs_in, NULL, new_obj,
			     attrs_out);
}

static fsal_status_t op_mknode(struct fsal_obj_handle *dir, const char *name,
			       object_file_type_t nodetype,
			       struct fsal_attrlist *attrs_in,
			       struct fsal_obj_handle **new_obj,
			       struct fsal_attrlist *attrs_out)
{
	return create_object(dir, name, fsal_to_nache_type(nodetype), attrs_in,
			     NULL, new_obj, attrs_out);
}

static fsal_status_t op_symlink(struct fsal_obj_handle *dir, const char *name,
				const char *link_path,
				struct fsal_attrlist *attrs_in,
				struct fsal_obj_handle **new_obj,
				struct fsal_attrlist *attrs_out)
{
	return create_object(dir, name, NACHE_LNK, attrs_in, link_path, new_obj,
			     attrs_out);
}

static fsal_status_t op_readlink(struct fsal_obj_handle *obj,
				 struct gsh_buffdesc *link_content,
				 bool refresh)
{
	struct nache_creds cr;
	char *buf = gsh_malloc(4096);
	uint32_t st;

	nache_caller_creds(&cr);
	st = nache_readlink(nache_ctx_export()->core, &cr, key_of(obj), buf,
			    4096);
	if (st != 0) {
		gsh_free(buf);
		link_content->addr = NULL;
		link_content->len = 0;
		return nache_status(st);
	}
	link_content->addr = buf;
	link_content->len = strlen(buf) + 1;
	return fsalstat(ERR_FSAL_NO_ERROR, 0);
}

static fsal_status_t op_link(struct fsal_obj_handle *obj,
			     struct fsal_obj_handle *destdir, const char *name)
{
	struct nache_creds cr;
	struct nache_dir_change change;
	uint32_t st;

	forget_absent();
	nache_caller_creds(&cr);
	st = nache_link(nache_ctx_export()->core, &cr, key_of(obj),
			key_of(destdir), name, &change);
	if (st == 0)
		report_dir_change(0, &change);
	return nache_status(st);
}

static fsal_status_t op_rename(struct fsal_obj_handle *obj,
			       struct fsal_obj_handle *olddir,
			       const char *old_name,
			       struct fsal_obj_handle *newdir,
			       const char *new_name)
{
	struct nache_creds cr;
	struct nache_dir_change changes[2];
	uint32_t st;

	forget_absent();
	nache_caller_creds(&cr);
	st = nache_rename(nache_ctx_export()->core, &cr, key_of(obj),
			  key_of(olddir), old_name, key_of(newdir), new_name,
			  changes);
	if (st == 0) {
		report_dir_change(0, &changes[0]);
		report_dir_change(1, &changes[1]);
	}
	return nache_status(st);
}

static fsal_status_t op_unlink(struct fsal_obj_handle *dir,
			       struct fsal_obj_handle *obj, const char *name)
{
	struct nache_creds cr;
	struct nache_dir_change change;
	uint32_t st;

	forget_absent();
	nache_caller_creds(&cr);
	st = nache_remove(nache_ctx_export()->core, &cr, key_of(obj),
			  key_of(dir), name, &change);
	if (st == 0)
		report_dir_change(0, &change);
	return nache_status(st);
}

/* --- opens --------------------------------------------------------------- */

/* Share access/deny of an open, in NFSv4 terms: exactly what the client
 * asked for. A write-only open is judged (and sent upstream) as one: a
 * user the remote lets write a file but not read it may open it so. Reads
 * through such an open (a client filling a partial page) still go out:
 * NFSv4 servers allow READ under a write open unless the open denies
 * reading (RFC 7530, READ), and judge the caller's right to read. */
static uint32_t share_access(fsal_openflags_t f)
{
	uint32_t a = 0;

	if (f & FSAL_O_READ)
		a |= NACHE_SHARE_READ;
	if (f & FSAL_O_WRITE)
		a |= NACHE_SHARE_WRITE;
	return a ? a : NACHE_SHARE_READ;
}

static uint32_t share_deny(fsal_openflags_t f)
{
	uint32_t d = 0;

	if (f & FSAL_O_DENY_READ)
		d |= NACHE_SHARE_READ;
	if (f & (FSAL_O_DENY_WRITE | FSAL_O_DENY_WRITE_MAND))
		d |= NACHE_SHARE_WRITE;
	return d;
}

static enum nache_createmode create_mode(enum fsal_create_mode m)
{
	switch (m) {
	case FSAL_NO_CREATE: return NACHE_OPEN_NOCREATE;
	case FSAL_UNCHECKED: return NACHE_OPEN_UNCHECKED;
	case FSAL_GUARDED: return NACHE_OPEN_GUARDED;
	default: return NACHE_OPEN_EXCLUSIVE;
	}
}

static struct nache_fd *state_fd(struct state_t *state)
{
	return state ? (struct nache_fd *)(state + 1) : NULL;
}

/* Takes (or gives back) local share reservation counts. */
static fsal_status_t take_share(struct fsal_obj_handle *obj,
				fsal_openflags_t old, fsal_openflags_t new,
				bool check)
{
	struct nache_fsal_obj_handle *h = handle_of(obj);
	fsal_status_t s = fsalstat(ERR_FSAL_NO_ERROR, 0);

	PTHREAD_RWLOCK_wrlock(&obj->obj_lock);
	if (check)
		s = check_share_conflict(&h->share, new, false);
	if (!FSAL_IS_ERROR(s))
		update_share_counters(&h->share, old, new);
	PTHREAD_RWLOCK_unlock(&obj->obj_lock);
	return s;
}

/* Close-to-open, made cheap: MDCACHE above us trusts attributes for the
 * export's Attr_Expiration_Time, but an open must see the remote's current
 * attributes (a client may have changed the file outside the office). For an
 * open by handle MDCACHE drops the attributes our OPEN returned, so mark its
 * copy untrusted: the GETATTR in the client's OPEN compound then comes from
 * the remote, and other GETATTRs within the window stay local.
 * The up-call only clears flags on the cache entry and takes no lock our
 * caller holds, so it is safe from this worker thread. */
static void revalidate_on_open(struct nache_fsal_export *exp,
			       struct fsal_obj_handle *obj)
{
	struct gsh_buffdesc key;

	op_handle_to_key(obj, &key);
	exp->export.up_ops->invalidate(exp->export.up_ops, &key,
				       FSAL_UP_INVALIDATE_ATTRS);
}

static fsal_status_t
op_open2(struct fsal_obj_handle *obj, struct state_t *state,
	 fsal_openflags_t openflags, enum fsal_create_mode createmode,
	 const char *name, struct fsal_attrlist *attrs_in,
	 fsal_verifier_t verifier, struct fsal_obj_handle **new_obj,
	 struct fsal_attrlist *attrs_out, bool *caller_perm_check)
{
	struct nache_fsal_export *exp = nache_ctx_export();
	struct nache_fd *fd = state_fd(state);
	struct nache_creds cr;
	struct nache_attrs set, a;
	struct nache_open *open = NULL;
	struct nache_fsal_obj_handle *nh;
	struct nache_dir_change change;
	bool truncate = (openflags & FSAL_O_TRUNC) != 0;
	bool created = false;
	nache_key key;
	fsal_status_t s;
	uint32_t st;

	if (name != NULL)
		forget_absent();
	nache_caller_creds(&cr);
	openflags &= ~FSAL_O_TRUNC;

	if (name == NULL) {
		/* Open by handle. */
		/* An exclusive create of an existing file: only its own
		 * retry (the same verifier) opens it. */
		if (createmode >= FSAL_EXCLUSIVE) {
			st = nache_check_verifier(exp->core, &cr, key_of(obj),
						  (const uint8_t *)verifier);
			if (st != 0)
				return nache_status(st);
		}
		if (fd == NULL) {
			/* Stateless (NFSv3): I/O uses the anonymous stateid,
			 * no upstream open is needed. global_fd is guarded
			 * by obj_lock (nache_int.h), which Ganesha does not
			 * hold around open2. */
			PTHREAD_RWLOCK_wrlock(&obj->obj_lock);
			handle_of(obj)->global_fd.fsal_fd.openflags = openflags;
			PTHREAD_RWLOCK_unlock(&obj->obj_lock);
			if (truncate) {
				memset(&set, 0, sizeof(set));
				set.mask = NACHE_ATTR_SIZE;
				st = nache_setattr(exp->core, &cr, key_of(obj),
						   NULL, &set, &a);
			} else {
				st = nache_getattr(exp->core, &cr, key_of(obj),
						   &a);
			}
			if (st == 0)
				revalidate_on_open(exp, obj);
			return give_attrs(st, &a, attrs_out);
		}
		s = take_share(obj, FSAL_O_CLOSED, openflags, true);
		if (FSAL_IS_ERROR(s))
			return s;
		st = nache_open(exp->core, &cr, key_of(obj), NULL,
				share_access(openflags), share_deny(openflags),
				NACHE_OPEN_NOCREATE, NULL, NULL, truncate,
				&open, NULL, &a, &created, NULL);
		if (st != 0) {
			take_share(obj, openflags, FSAL_O_CLOSED, false);
			return nache_status(st);
		}
		fd->open = open;
		fd->fsal_fd.openflags = openflags;
		revalidate_on_open(exp, obj);
		return give_attrs(0, &a, attrs_out);
	}

	/* Open (and maybe create) by name in directory obj. */
	memset(&set, 0, sizeof(set));
	if (attrs_in != NULL)
		fsal_to_nache_set(attrs_in, &set);
	st = nache_open(exp->core, &cr, key_of(obj), name,
			share_access(openflags), share_deny(openflags),
			create_mode(createmode), &set,
			(const uint8_t *)verifier, truncate, &open, &key, &a,
			&created, &change);
	if (st != 0)
		return nache_status(st);
	report_dir_change(0, &change);
	/* The creator may write a file whose new mode forbids it. */
	*caller_perm_check = !created;
	nh = nache_alloc_handle(exp, key, &a);
	*new_obj = &nh->obj_handle;
	/* An existing file MDCACHE may hold with older attributes (it keeps
	 * its own copy when it has one): as for an open by handle. */
	if (!created)
		revalidate_on_open(exp, &nh->obj_handle);
	if (fd == NULL) {
		/* Stateless create (NFSv3 CREATE): nothing stays open.
		 * (No obj_lock: nobody else sees nh yet.) */
		nache_close(exp->core, open);
		nh->global_fd.fsal_fd.openflags = openflags;
	} else {
		take_share(&nh->obj_handle, FSAL_O_CLOSED, openflags, false);
		fd->open = open;
		fd->fsal_fd.openflags = openflags;
	}
	return give_attrs(0, &a, attrs_out);
}

/* An exclusive create's verifier is kept in the file's times by the core
 * (nache_check_verifier); a retry of the create carries the same one. */
static bool op_check_verifier(struct fsal_obj_handle *obj,
			      fsal_verifier_t verifier)
{
	struct nache_creds cr;

	nache_caller_creds(&cr);
	return nache_check_verifier(nache_ctx_export()->core, &cr, key_of(obj),
				    (const uint8_t *)verifier) == 0;
}

/* MDCACHE found the object of a handle we just made (an open by name, a
 * lookup racing it) already cached: the share reservations the new handle
 * took move to the cached one, unless they conflict with its own opens
 * (then MDCACHE closes the new open: SHARE_DENIED). */
static fsal_status_t op_merge(struct fsal_obj_handle *orig,
			      struct fsal_obj_handle *dupe)
{
	if (orig->type != REGULAR_FILE || dupe->type != REGULAR_FILE)
		return fsalstat(ERR_FSAL_NO_ERROR, 0);
	return merge_share(orig, &handle_of(orig)->share,
			   &handle_of(dupe)->share);
}

static fsal_status_t op_reopen2(struct fsal_obj_handle *obj,
				struct state_t *state,
				fsal_openflags_t openflags)
{
	struct nache_fd *fd = state_fd(state);
	fsal_openflags_t old = fd->fsal_fd.openflags;
	bool truncate = (openflags & FSAL_O_TRUNC) != 0;
	struct nache_creds cr;
	struct nache_attrs set, a;
	fsal_status_t s;
	uint32_t st;

	openflags &= ~FSAL_O_TRUNC;
	/* Check the new modes against everyone but this open. */
	PTHREAD_RWLOCK_wrlock(&obj->obj_lock);
	update_share_counters(&handle_of(obj)->share, old, FSAL_O_CLOSED);
	s = check_share_conflict(&handle_of(obj)->share, openflags, false);
	update_share_counters(&handle_of(obj)->share, FSAL_O_CLOSED,
			      FSAL_IS_ERROR(s) ? old : openflags);
	PTHREAD_RWLOCK_unlock(&obj->obj_lock);
	if (FSAL_IS_ERROR(s))
		return s;

	nache_caller_creds(&cr);
	st = fd->open == NULL ? 0
			      : nache_reopen(nache_ctx_export()->core, &cr,
					     fd->open, share_access(openflags),
					     share_deny(openflags));
	if (st != 0) {
		take_share(obj, openflags, old, false);
		return nache_status(st);
	}
	fd->fsal_fd.openflags = openflags;
	if (truncate) {
		/* An UNCHECKED create (size 0) of a file its owner holds
		 * open: an open upgrade that truncates. */
		memset(&set, 0, sizeof(set));
		set.mask = NACHE_ATTR_SIZE;
		st = nache_setattr(nache_ctx_export()->core, &cr, key_of(obj),
				   fd->open, &set, &a);
		if (st != 0)
			return nache_status(st);
	}
	return fsalstat(ERR_FSAL_NO_ERROR, 0);
}

static fsal_status_t op_close2(struct fsal_obj_handle *obj,
			       struct state_t *state)
{
	struct nache_fd *fd = state_fd(state);
	uint32_t st = 0;

	if (state->state_type == STATE_TYPE_SHARE ||
	    state->state_type == STATE_TYPE_NLM_SHARE ||
	    state->state_type == STATE_TYPE_9P_FID)
		take_share(obj, fd->fsal_fd.openflags, FSAL_O_CLOSED, false);
	if (fd->open != NULL) {
		st = nache_close(nache_ctx_export()->core, fd->open);
		fd->open = NULL;
	}
	fd->fsal_fd.openflags = FSAL_O_CLOSED;
	return nache_status(st);
}

static fsal_status_t op_close(struct fsal_obj_handle *obj)
{
	struct nache_fsal_obj_handle *h = handle_of(obj);
	fsal_status_t s = fsalstat(ERR_FSAL_NO_ERROR, 0);

	PTHREAD_RWLOCK_wrlock(&obj->obj_lock);
	if (h->global_fd.fsal_fd.openflags == FSAL_O_CLOSED)
		s = fsalstat(ERR_FSAL_NOT_OPENED, 0);
	h->global_fd.fsal_fd.openflags = FSAL_O_CLOSED;
	PTHREAD_RWLOCK_unlock(&obj->obj_lock);
	return s;
}

/* --- data ---------------------------------------------------------------- */

/* The global fd needs no upstream open: stateless I/O uses the anonymous
 * stateid. These only track its flags for Ganesha's fsal_find_fd. */
static fsal_status_t global_open(struct fsal_obj_handle *obj,
				 fsal_openflags_t openflags, struct fsal_fd *fd)
{
	fd->openflags = openflags;
	return fsalstat(ERR_FSAL_NO_ERROR, 0);
}

static fsal_status_t global_close(struct fsal_obj_handle *obj,
				  struct fsal_fd *fd)
{
	fd->openflags = FSAL_O_CLOSED;
	return fsalstat(ERR_FSAL_NO_ERROR, 0);
}

/* The core's open behind a state used for I/O (*open), and whether the
 * file's share reservations let the I/O through. A share state serves its
 * own access; I/O it was not opened for (a READ through a write-only open,
 * which NFSv4 allows) and I/O without an open (special stateids, NFSv3)
 * must not meet another open's deny: SHARE_DENIED then, which Ganesha
 * answers as NFS4ERR_LOCKED. bypass (the all-ones stateid) passes a
 * DENY_READ. A lock state uses the open it hangs off (Ganesha's
 * fsal_find_fd, which checks the same). *open NULL means stateless I/O
 * (anonymous stateid). */
static fsal_status_t io_open(struct fsal_obj_handle *obj, struct state_t *state,
			     bool bypass, fsal_openflags_t openflags,
			     struct nache_open **open)
{
	struct nache_fsal_obj_handle *h = handle_of(obj);
	struct fsal_fd *out = NULL;
	bool has_lock = false, closefd = false, reusing = false;
	fsal_status_t s = fsalstat(ERR_FSAL_NO_ERROR, 0);

	*open = NULL;
	if (state != NULL && (state->state_type == STATE_TYPE_SHARE ||
			      state->state_type == STATE_TYPE_NLM_SHARE)) {
		struct nache_fd *fd = state_fd(state);

		if (openflags != FSAL_O_ANY &&
		    (fd->fsal_fd.openflags & openflags) != openflags) {
			PTHREAD_RWLOCK_rdlock(&obj->obj_lock);
			s = check_share_conflict(&h->share, openflags, false);
			PTHREAD_RWLOCK_unlock(&obj->obj_lock);
		}
		if (!FSAL_IS_ERROR(s))
			*open = fd->open;
		return s;
	}
	if (state == NULL || (state->state_type != STATE_TYPE_LOCK &&
			      state->state_type != STATE_TYPE_NLM_LOCK)) {
		/* No open of its own (a special stateid, NFSv3, a
		 * delegation's stateid): stateless I/O, if no deny is met. */
		if (openflags != FSAL_O_ANY) {
			PTHREAD_RWLOCK_rdlock(&obj->obj_lock);
			s = check_share_conflict(&h->share, openflags, bypass);
			PTHREAD_RWLOCK_unlock(&obj->obj_lock);
		}
		return s;
	}
	s = fsal_find_fd(&out, obj, &h->global_fd.fsal_fd, &h->share, bypass,
			 state, openflags, global_open, global_close, &has_lock,
			 &closefd, false, &reusing);
	if (has_lock)
		PTHREAD_RWLOCK_unlock(&obj->obj_lock);
	if (FSAL_IS_ERROR(s))
		return s;
	if (out != NULL && out != &h->global_fd.fsal_fd)
		*open = ((struct nache_fd *)out)->open;
	return s;
}

static void op_read2(struct fsal_obj_handle *obj, bool bypass,
		     fsal_async_cb done_cb, struct fsal_io_arg *arg,
		     void *caller_arg)
{
	struct nache_fsal_export *exp = nache_ctx_export();
	struct nache_creds cr;
	struct nache_open *open;
	uint64_t offset = arg->offset;
	uint32_t st = 0;
	bool eof = false;
	fsal_status_t s;
	int i;

	if (arg->info != NULL) { /* READ_PLUS */
		done_cb(obj, fsalstat(ERR_FSAL_NOTSUPP, 0), arg, caller_arg);
		return;
	}
	nache_caller_creds(&cr);
	arg->io_amount = 0;
	s = io_open(obj, arg->state, bypass, FSAL_O_READ, &open);
	if (FSAL_IS_ERROR(s)) {
		done_cb(obj, s, arg, caller_arg);
		return;
	}
	for (i = 0; i < arg->iov_count && !eof; i++) {
		size_t n = 0;

		st = nache_read(exp->core, &cr, key_of(obj), open, offset,
				arg->iov[i].iov_len, arg->iov[i].iov_base, &n,
				&eof);
		if (st != 0)
			break;
		arg->io_amount += n;
		offset += n;
		if (n < arg->iov[i].iov_len)
			break;
	}
	arg->end_of_file = eof;
	done_cb(obj, nache_status(st), arg, caller_arg);
}

static void op_write2(struct fsal_obj_handle *obj, bool bypass,
		      fsal_async_cb done_cb, struct fsal_io_arg *arg,
		      void *caller_arg)
{
	struct nache_fsal_export *exp = nache_ctx_export();
	struct nache_creds cr;
	struct nache_open *open;
	uint64_t offset = arg->offset;
	enum nache_stable_how stable =
		arg->fsal_stable ? NACHE_FILE_SYNC : NACHE_UNSTABLE;
	enum nache_stable_how committed = NACHE_FILE_SYNC;
	uint32_t st = 0;
	fsal_status_t s;
	int i;

	nache_caller_creds(&cr);
	arg->io_amount = 0;
	s = io_open(obj, arg->state, bypass, FSAL_O_WRITE, &open);
	if (FSAL_IS_ERROR(s)) {
		done_cb(obj, s, arg, caller_arg);
		return;
	}
	for (i = 0; i < arg->iov_count; i++) {
		size_t n = 0;
		enum nache_stable_how c = NACHE_UNSTABLE;

		st = nache_write(exp->core, &cr, key_of(obj), open, offset,
				 arg->iov[i].iov_len, arg->iov[i].iov_base,
				 stable, &n, &c);
		if (st != 0)
			break;
		arg->io_amount += n;
		offset += n;
		if (c < committed)
			committed = c;
	}
	arg->fsal_stable = committed != NACHE_UNSTABLE;
	done_cb(obj, nache_status(st), arg, caller_arg);
}

static fsal_status_t op_commit2(struct fsal_obj_handle *obj, off_t offset,
				size_t len)
{
	struct nache_creds cr;

	nache_caller_creds(&cr);
	return nache_status(nache_commit(nache_ctx_export()->core, &cr,
					 key_of(obj), offset, len));
}

/* --- NFSv4.2 --------------------------------------------------------------
 * Forwarded when the remote speaks NFSv4.2 (the core answers NOTSUPP
 * otherwise). ALLOCATE, DEALLOCATE and SEEK act on the remote's copy, under
 * the open's stateid like WRITE (with its share checks). */

static fsal_status_t op_fallocate(struct fsal_obj_handle *obj,
				  struct state_t *state, uint64_t offset,
				  uint64_t length, bool allocate)
{
	struct nache_creds cr;
	struct nache_open *open;
	fsal_status_t s;

	nache_caller_creds(&cr);
	s = io_open(obj, state, false, FSAL_O_WRITE, &open);
	if (FSAL_IS_ERROR(s))
		return s;
	return nache_status(nache_fallocate(nache_ctx_export()->core, &cr,
					    key_of(obj), open, offset, length,
					    allocate));
}

/* NFSv4.2 COPY (Ganesha patched by cmake/ganesha_patch_copy.cmake): a
 * server-side copy at the remote, each file through its own state's
 * open. */
static fsal_status_t op_copy(struct fsal_obj_handle *src,
			     struct state_t *src_state, uint64_t src_offset,
			     struct fsal_obj_handle *dst,
			     struct state_t *dst_state, uint64_t dst_offset,
			     uint64_t count, uint64_t *copied)
{
	struct nache_creds cr;
	struct nache_open *src_open, *dst_open;
	fsal_status_t s;

	nache_caller_creds(&cr);
	s = io_open(src, src_state, false, FSAL_O_READ, &src_open);
	if (FSAL_IS_ERROR(s))
		return s;
	s = io_open(dst, dst_state, false, FSAL_O_WRITE, &dst_open);
	if (FSAL_IS_ERROR(s))
		return s;
	return nache_status(nache_copy(
		nache_ctx_export()->core, &cr, key_of(src), src_open,
		src_offset, key_of(dst), dst_open, dst_offset, count, copied));
}

static fsal_status_t op_seek2(struct fsal_obj_handle *obj,
			      struct state_t *state, struct io_info *info)
{
	struct nache_creds cr;
	struct nache_open *open;
	bool eof = false;
	uint64_t found = 0;
	fsal_status_t s;
	uint32_t st;

	if (info->io_content.what != NFS4_CONTENT_DATA &&
	    info->io_content.what != NFS4_CONTENT_HOLE)
		return fsalstat(ERR_FSAL_UNION_NOTSUPP, 0);
	nache_caller_creds(&cr);
	s = io_open(obj, state, false, FSAL_O_READ, &open);
	if (FSAL_IS_ERROR(s))
		return s;
	st = nache_seek(nache_ctx_export()->core, &cr, key_of(obj), open,
			info->io_content.hole.di_offset,
			info->io_content.what == NFS4_CONTENT_HOLE, &eof,
			&found);
	if (st != 0)
		return nache_status(st);
	info->io_eof = eof;
	info->io_content.hole.di_offset = found;
	return fsalstat(ERR_FSAL_NO_ERROR, 0);
}

/* Ganesha asks with its own buffer (utf8string_len bytes of room) and, when
 * that is too small (XATTR2BIG), again with none to learn the size, then
 * with room for it. */
static fsal_status_t op_getxattrs(struct fsal_obj_handle *obj, xattrkey4 *name,
				  xattrvalue4 *value)
{
	struct nache_creds cr;
	size_t len = value->utf8string_len;
	uint32_t st;

	nache_caller_creds(&cr);
	st = nache_getxattr(nache_ctx_export()->core, &cr, key_of(obj),
			    name->utf8string_val, name->utf8string_len,
			    value->utf8string_val, &len);
	if (st == 10096 /* XATTR2BIG */ && value->utf8string_len == 0) {
		value->utf8string_len = len; /* the size it takes */
		return fsalstat(ERR_FSAL_NO_ERROR, 0);
	}
	if (st == 0)
		value->utf8string_len = len;
	return nache_status(st);
}

static fsal_status_t op_setxattrs(struct fsal_obj_handle *obj,
				  setxattr_option4 option, xattrkey4 *name,
				  xattrvalue4 *value)
{
	struct nache_creds cr;

	nache_caller_creds(&cr);
	return nache_status(
		nache_setxattr(nache_ctx_export()->core, &cr, key_of(obj),
			       (enum nache_xattr_option)option,
			       name->utf8string_val, name->utf8string_len,
			       value->utf8string_val, value->utf8string_len));
}

static fsal_status_t op_removexattrs(struct fsal_obj_handle *obj,
				     xattrkey4 *name)
{
	struct nache_creds cr;

	nache_caller_creds(&cr);
	return nache_status(nache_removexattr(nache_ctx_export()->core, &cr,
					      key_of(obj), name->utf8string_val,
					      name->utf8string_len));
}

/* The names LISTXATTRS gathers, in the array Ganesha frees (gsh_free of
 * each name and of the array). */
struct xattr_names {
	xattrlist4 *list;
	uint32_t room;
};

static void add_xattr_name(void *arg, const char *name, size_t len)
{
	struct xattr_names *n = arg;
	component4 *e;

	if (n->list->xl4_count == n->room) {
		n->room = n->room ? 2 * n->room : 16;
		n->list->xl4_entries = gsh_realloc(
			n->list->xl4_entries, n->room * sizeof(component4));
	}
	e = &n->list->xl4_entries[n->list->xl4_count++];
	e->utf8string_len = len;
	e->utf8string_val = gsh_malloc(len + 1);
	memcpy(e->utf8string_val, name, len);
	e->utf8string_val[len] = '\0';
}

static fsal_status_t op_listxattrs(struct fsal_obj_handle *obj, count4 maxcount,
				   nfs_cookie4 *cookie, bool_t *eof,
				   xattrlist4 *names)
{
	struct nache_creds cr;
	struct xattr_names n = { names, 0 };
	uint64_t next = 0;
	bool end = false;
	uint32_t st, i;

	nache_caller_creds(&cr);
	names->xl4_count = 0;
	names->xl4_entries = NULL;
	st = nache_listxattrs(nache_ctx_export()->core, &cr, key_of(obj),
			      *cookie, maxcount, add_xattr_name, &n, &next,
			      &end);
	if (st != 0) {
		for (i = 0; i < names->xl4_count; i++)
			gsh_free(names->xl4_entries[i].utf8string_val);
		gsh_free(names->xl4_entries);
		names->xl4_count = 0;
		names->xl4_entries = NULL;
		return nache_status(st);
	}
	*cookie = next;
	*eof = end;
	return fsalstat(ERR_FSAL_NO_ERROR, 0);
}

static fsal_status_t op_setattr2(struct fsal_obj_handle *obj, bool bypass,
				 struct state_t *state,
				 struct fsal_attrlist *attrib_set)
{
	struct nache_creds cr;
	struct nache_attrs set, a;
	struct nache_open *open;
	uint32_t st;

	if (FSAL_TEST_MASK(attrib_set->valid_mask, ATTR_SIZE) &&
	    obj->type != REGULAR_FILE)
		return fsalstat(ERR_FSAL_INVAL, 0);
	fsal_to_nache_set(attrib_set, &set);
	if (set.mask == 0)
		return fsalstat(ERR_FSAL_NO_ERROR, 0);
	nache_caller_creds(&cr);
	if (FSAL_TEST_MASK(attrib_set->valid_mask, ATTR_SIZE)) {
		/* A size change is a write: it meets deny modes as one. */
		fsal_status_t s =
			io_open(obj, state, bypass, FSAL_O_WRITE, &open);

		if (FSAL_IS_ERROR(s))
			return s;
	} else {
		io_open(obj, state, true, FSAL_O_ANY, &open);
	}
	st = nache_setattr(nache_ctx_export()->core, &cr, key_of(obj), open,
			   &set, &a);
	return nache_status(st);
}

/* --- locks --------------------------------------------------------------- */

/* NFSv3 clients lock through NLM, which has no OPEN: Ganesha hands us an
 * NLM lock state of its own (STATE_TYPE_NLM_LOCK, one per NLM owner and
 * file) with no open state behind it, while the remote hangs every lock
 * off an open. So that state gets an upstream open of its own (deny
 * none), taken by its first lock that reaches us, with the access the
 * lock needs (NFSv4 servers refuse a write lock through an open without
 * write access, and a read lock without read access), widened when a
 * later lock of the state needs more. It goes upstream as the state's
 * caller (nache_nlm_fd), not the current request's: Ganesha may grant a
 * blocked lock from another client's unlock or from a thread of its own.
 * The core collapses this open with the file's others. Ganesha keeps the
 * state while it holds locks (each lock entry holds a reference) and calls
 * close2 on it when the last one goes, which ends the open. No share
 * reservation is taken: an NLM lock is no open among the office's
 * clients. Ganesha calls lock_op2 under the file's state lock
 * (STATELOCK), so no two threads change one state's fd at once. */
static void nlm_state_creds(struct state_t *state, struct nache_creds *cr)
{
	struct nache_nlm_fd *nlm = (struct nache_nlm_fd *)state_fd(state);

	cr->uid = nlm->uid;
	cr->gid = nlm->gid;
	cr->ngroups = nlm->ngroups;
	cr->groups = nlm->groups;
}

static fsal_status_t nlm_state_open(struct fsal_obj_handle *obj,
				    struct state_t *state, bool write,
				    struct nache_open **open)
{
	struct nache_core *core = nache_ctx_export()->core;
	struct nache_fd *fd = state_fd(state);
	fsal_openflags_t want = write ? FSAL_O_WRITE : FSAL_O_READ;
	fsal_openflags_t have = fd->fsal_fd.openflags & FSAL_O_RDWR;
	struct nache_creds cr;
	struct nache_attrs a;
	bool created = false;
	uint32_t st;

	nlm_state_creds(state, &cr);
	if (fd->open == NULL) {
		st = nache_open(core, &cr, key_of(obj), NULL,
				share_access(want), 0, NACHE_OPEN_NOCREATE,
				NULL, NULL, false, &fd->open, NULL, &a,
				&created, NULL);
		if (st != 0) {
			fd->open = NULL;
			return nache_status(st);
		}
		fd->fsal_fd.openflags = want;
	} else if ((have & want) != want) {
		st = nache_reopen(core, &cr, fd->open,
				  share_access(have | want), 0);
		if (st != 0)
			return nache_status(st);
		fd->fsal_fd.openflags = have | want;
	}
	*open = fd->open;
	return fsalstat(ERR_FSAL_NO_ERROR, 0);
}

static fsal_status_t op_lock_op2(struct fsal_obj_handle *obj,
				 struct state_t *state, void *owner,
				 fsal_lock_op_t lock_op, fsal_lock_param_t *req,
				 fsal_lock_param_t *conflicting)
{
	struct nache_creds cr;
	struct nache_lock_conflict c = { 0 };
	struct nache_open *open;
	enum nache_lock_op op;
	uint32_t st;

	switch (lock_op) {
	case FSAL_OP_LOCKT: op = NACHE_LOCK_TEST; break;
	case FSAL_OP_LOCK:
	case FSAL_OP_LOCKB: op = NACHE_LOCK; break;
	case FSAL_OP_UNLOCK: op = NACHE_UNLOCK; break;
	case FSAL_OP_CANCEL:
		/* Nothing blocks upstream (no LOCKB), so nothing to cancel. */
		return fsalstat(ERR_FSAL_NO_ERROR, 0);
	default: return fsalstat(ERR_FSAL_NOTSUPP, 0);
	}
	if (req->lock_sle_type != FSAL_POSIX_LOCK)
		return fsalstat(ERR_FSAL_NOTSUPP, 0);

	if (state != NULL && state->state_type == STATE_TYPE_NLM_LOCK) {
		/* An unlock needs no open of the state's own: the core finds
		 * the owner's locks on the file's upstream open. */
		nlm_state_creds(state, &cr);
		open = state_fd(state)->open;
		if (op == NACHE_LOCK) {
			fsal_status_t s = nlm_state_open(
				obj, state, req->lock_type == FSAL_LOCK_W,
				&open);

			if (FSAL_IS_ERROR(s))
				return s;
		}
	} else {
		nache_caller_creds(&cr);
		io_open(obj, state, false, FSAL_O_ANY, &open);
	}
	/* The owner's address names it uniquely while it holds locks (an
	 * NFSv4 lock-owner, or an NLM owner: one per client host, svid and
	 * owner handle). */
	st = nache_lock(nache_ctx_export()->core, &cr, key_of(obj), open,
			&owner, sizeof(owner), op,
			req->lock_type == FSAL_LOCK_W, req->lock_start,
			req->lock_length, req->lock_reclaim, &c);

	if (conflicting != NULL) {
		conflicting->lock_type = FSAL_NO_LOCK;
		conflicting->lock_start = 0;
		conflicting->lock_length = 0;
	}
	if (st == 10010 /* NFS4ERR_DENIED */) {
		if (conflicting != NULL) {
			conflicting->lock_type =
				c.write ? FSAL_LOCK_W : FSAL_LOCK_R;
			conflicting->lock_start = c.offset;
			conflicting->lock_length = c.length;
		}
		/* Ganesha's SAL reads ERR_FSAL_DELAY from lock_op2 as "lock
		 * conflict" (state_error_convert), for LOCK and LOCKT alike. */
		return fsalstat(ERR_FSAL_DELAY, 0);
	}
	return nache_status(st);
}

void nache_handle_ops_init(struct fsal_obj_ops *ops)
{
	fsal_default_obj_ops_init(ops);

	ops->release = op_release;
	ops->handle_to_wire = op_handle_to_wire;
	ops->handle_to_key = op_handle_to_key;
	ops->lookup = op_lookup;
	ops->readdir = op_readdir;
	ops->getattrs = op_getattrs;
	ops->test_access = op_test_access;
	ops->setattr2 = op_setattr2;
	ops->mkdir = op_mkdir;
	ops->mknode = op_mknode;
	ops->symlink = op_symlink;
	ops->readlink = op_readlink;
	ops->link = op_link;
	ops->rename = op_rename;
	ops->unlink = op_unlink;
	ops->open2 = op_open2;
	ops->check_verifier = op_check_verifier;
	ops->merge = op_merge;
	ops->reopen2 = op_reopen2;
	ops->close2 = op_close2;
	ops->close = op_close;
	ops->read2 = op_read2;
	ops->write2 = op_write2;
	ops->commit2 = op_commit2;
	ops->lock_op2 = op_lock_op2;
	ops->fallocate = op_fallocate;
	ops->seek2 = op_seek2;
	ops->copy = op_copy;
	ops->getxattrs = op_getxattrs;
	ops->setxattrs = op_setxattrs;
	ops->removexattrs = op_removexattrs;
	ops->listxattrs = op_listxattrs;
	ops->lease_op2 = nache_lease_op2;
}
