/*
 * nache.h - the C API of nache's core, the only interface between the
 * Ganesha FSAL glue (fsal_cache/, C) and the core (proxy/, C++17).
 *
 * The core owns everything that does not need Ganesha's headers: the mapping
 * of local handle keys to remote filehandles (persistent), the upstream
 * NFSv4.0/4.1 client, the persistent cache and its write-back, delegations,
 * and the upstream open/lock state. The FSAL owns Ganesha objects, share
 * reservations among local clients, and status translation.
 *
 * Conventions:
 * - Every function returns an NFSv4 status (nfsstat4 numbering, 0 = NFS4_OK)
 *   as a uint32_t. Transport failures (upstream unreachable, timeout) come
 *   back as NFS4ERR_DELAY (10008) so clients retry; the FSAL maps statuses to
 *   fsal_status_t in one place (fsal_cache/nache_errors.c).
 * - Objects are named by a nache_key: a 64-bit local id, unique within one
 *   cache directory, stable across restarts. Wire handles carry it together
 *   with the store's 64-bit incarnation id (see nache_core_incarnation).
 * - Calls block the calling thread until the upstream answers; they take no
 *   lock the caller could be waiting on. All functions are thread-safe.
 */
#ifndef NACHE_NACHE_H
#define NACHE_NACHE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef uint64_t nache_key;

/* How durable a WRITE is (NFSv4's stable_how4, same values). */
enum nache_stable_how {
	NACHE_UNSTABLE = 0,  /* may be lost until a COMMIT */
	NACHE_DATA_SYNC = 1, /* data durable, metadata maybe not */
	NACHE_FILE_SYNC = 2, /* data and metadata durable */
};
struct nache_core; /* one per export: upstream client + handle map */
struct nache_open; /* one local open (a Ganesha state or the global fd) */

/* The defaults of the export's parameters (config/README.md): the FSAL's
 * config table and nache_config_defaults both take them from here. */
#define NACHE_DEFAULT_UPSTREAM_PORT 2049
#define NACHE_DEFAULT_UPSTREAM_PATH "/"
#define NACHE_DEFAULT_CONNECTIONS 2
#define NACHE_DEFAULT_UPSTREAM_TIMEOUT_MS 30000
#define NACHE_DEFAULT_MAX_IO_SIZE 1048576
#define NACHE_DEFAULT_STARTUP_WAIT_MS 10000
#define NACHE_DEFAULT_CACHE_SIZE "4G"
#define NACHE_DEFAULT_BLOCK_SIZE 262144
#define NACHE_DEFAULT_CACHE_OBJECTS 0
#define NACHE_DEFAULT_ATTR_TIMEOUT_S 3
#define NACHE_DEFAULT_READAHEAD_MAX 4194304
#define NACHE_DEFAULT_OPEN_LINGER_S 5
#define NACHE_DEFAULT_MINOR_VERSION 1
#define NACHE_DEFAULT_WRITE_BEHIND_MAX "64M"
#define NACHE_DEFAULT_WRITE_POLICY "write_through"
#define NACHE_DEFAULT_FLUSH_AGE_S 30
#define NACHE_DEFAULT_DIRTY_MAX "" /* Cache_Size / 4 */
#define NACHE_DEFAULT_OWNER_FORMAT "auto"
#define NACHE_DEFAULT_UPSTREAM_SEC "sys"
#define NACHE_DEFAULT_UPSTREAM_IDENTITY "machine"

/* Configuration of one export, from its FSAL { Name = NACHE; ... } block:
 * the FSAL's config table fills it directly (strings are the parser's
 * allocations, freed by the FSAL). */
struct nache_config {
	const char *upstream_server;  /* host name or address (required) */
	uint32_t upstream_port;	      /* default 2049 */
	const char *upstream_path;    /* path on the remote, e.g. "/export" */
	uint32_t connections;	      /* upstream TCP connections, 1..64 */
	const char *callback_address; /* advertised callback addr, or NULL */
	uint32_t callback_port;	      /* callback port (0: none yet) */
	const char *cache_dir;	      /* directory of the persistent store */
	uint32_t call_timeout_ms;     /* upstream call timeout */
	uint32_t max_io_size;	      /* READ/WRITE size upstream (bytes) */
	uint32_t export_id;	 /* Ganesha export id (for the client id) */
	const char *cache_size;	 /* bound on cached data, e.g. "4G" */
	uint32_t block_size;	 /* cache block size (bytes) */
	uint32_t cache_objects;	 /* objects in memory (0: from cache_size) */
	uint32_t attr_timeout_s; /* attribute window (seconds) */
	uint32_t readahead_max;	 /* readahead window bound (bytes) */
	uint32_t open_linger_s;	 /* upstream CLOSE delay (seconds) */
	uint32_t minor_version;	 /* upstream NFSv4 minor version, 0, 1 or 2 */
	const char *write_behind_max; /* queued UNSTABLE data, "0" = off */
	const char *write_policy;     /* "write_through" or "write_back" */
	bool single_writer;	      /* nothing else changes the export */
	bool serve_stale;	      /* cached state while disconnected */
	uint32_t flush_age_s;	      /* write-back: flush after (seconds) */
	const char *dirty_max;	      /* write-back bound; "" = Cache_Size/4 */
	bool cache_reset_if_corrupt;  /* move a corrupt store aside */
	bool cache_reset_on_upstream_change; /* move another upstream's aside */
	const char *upstream_owner_format;   /* "auto", "numeric" or "names" */
	/* Security of the calls to the remote: "sys" (AUTH_SYS as each
	 * caller), "krb5", "krb5i" or "krb5p" (RPCSEC_GSS as nache's own
	 * principal, from upstream_keytab, to upstream_principal). */
	const char *upstream_sec;
	const char *upstream_keytab;	       /* absolute path (krb5*) */
	const char *upstream_principal;	       /* remote's; "": nfs@server */
	const char *upstream_client_principal; /* ours; "": keytab's first */
	/* Whom the remote sees under krb5*: "machine" (nache's principal on
	 * every call) or "user" (each caller's own principal, by constrained
	 * delegation; root's calls and nache's own stay the machine's). */
	const char *upstream_identity;
	uint32_t startup_wait_ms; /* FSAL: wait this long for the remote */
};

/* Fills cfg with the defaults above (upstream_server and cache_dir, which
 * have none, NULL; export_id 0). */
void nache_config_defaults(struct nache_config *cfg);

/* Parses a size with an optional K, M, G or T suffix (powers of 1024).
 * False when s is not such a size. */
bool nache_parse_size(const char *s, uint64_t *out);

/* Validates a configuration. On error writes "Parameter: reason" into err
 * and returns false. Pure: touches neither network nor disk. */
bool nache_config_validate(const struct nache_config *cfg, char *err,
			   size_t errlen);

/* Owner names (Idmapd_Conf in the top-level NACHE block): the idmapd.conf
 * libnfsidmap reads to map NFSv4 owner names ("alice@example.org") to local
 * ids and back, for every export (libnfsidmap has one configuration per
 * process). NULL or "": libnfsidmap's default (/etc/idmapd.conf when it
 * exists). Otherwise it must be an absolute path to a readable file. On
 * error writes "Idmapd_Conf: reason" into err and returns false. Call once,
 * before the first nache_core_open. */
bool nache_idmap_configure(const char *conf_path, char *err, size_t errlen);

/* Claims cache_dir for export export_id (export_path names it in
 * messages): two exports must never share a store. Fails, writing
 * "Cache_Dir: ..." naming both exports into err, when another export holds
 * the same directory. Claiming again for the same export id replaces its
 * claim. Thread-safe. */
bool nache_cache_dir_claim(uint32_t export_id, const char *export_path,
			   const char *cache_dir, char *err, size_t errlen);
/* Drops the claim of export_id (no-op without one). */
void nache_cache_dir_release(uint32_t export_id);

/* Credentials of the local caller, forwarded upstream as AUTH_SYS. */
struct nache_creds {
	uint32_t uid;
	uint32_t gid;
	uint32_t ngroups;
	const uint32_t *groups;
};

enum nache_type {
	NACHE_NONE = 0,
	NACHE_REG = 1,
	NACHE_DIR = 2,
	NACHE_BLK = 3,
	NACHE_CHR = 4,
	NACHE_LNK = 5,
	NACHE_SOCK = 6,
	NACHE_FIFO = 7,
};

/* Attribute mask bits of struct nache_attrs (same values as the core's
 * upstream::AttrBit). */
#define NACHE_ATTR_TYPE (1ull << 0)
#define NACHE_ATTR_CHANGE (1ull << 1)
#define NACHE_ATTR_SIZE (1ull << 2)
#define NACHE_ATTR_FSID (1ull << 3)
#define NACHE_ATTR_FILEID (1ull << 4)
#define NACHE_ATTR_MODE (1ull << 5)
#define NACHE_ATTR_NLINK (1ull << 6)
#define NACHE_ATTR_OWNER (1ull << 7)
#define NACHE_ATTR_GROUP (1ull << 8)
#define NACHE_ATTR_RAWDEV (1ull << 9)
#define NACHE_ATTR_SPACE_USED (1ull << 10)
#define NACHE_ATTR_ATIME (1ull << 11)
#define NACHE_ATTR_MTIME (1ull << 12)
#define NACHE_ATTR_CTIME (1ull << 13)

struct nache_time {
	int64_t sec;
	uint32_t nsec;
};

struct nache_attrs {
	uint64_t mask; /* NACHE_ATTR_* bits valid / to set */
	enum nache_type type;
	uint64_t change;
	uint64_t size;
	uint64_t fsid_major, fsid_minor;
	uint64_t fileid;
	uint32_t mode; /* permission bits (07777) */
	uint32_t nlink;
	uint32_t uid, gid;
	uint32_t rdev_major, rdev_minor;
	uint64_t space_used;
	struct nache_time atime, mtime, ctime;
	bool atime_server; /* setattr: set atime to the server's now */
	bool mtime_server; /* setattr: set mtime to the server's now */
	/* The remote named the owner (group) and nache could not map the
	 * name: uid (gid) is nobody's, 65534, for display only; no caller is
	 * its owner (a member of its group). Never set by the FSAL. */
	bool owner_unmapped, group_unmapped;
};

struct nache_statfs {
	uint64_t space_total, space_free, space_avail;
	uint64_t files_total, files_free, files_avail;
};

/* Opens the core of one export: the persistent store in cfg->cache_dir and
 * the upstream client (which connects in the background). Validates cfg
 * first (nache_config_validate: a bad value fails, naming its parameter in
 * err). Otherwise fails only on a local problem (store cannot be created);
 * an unreachable upstream is not an error here. */
uint32_t nache_core_open(const struct nache_config *cfg,
			 struct nache_core **out, char *err, size_t errlen);
/* nache_core_open for a cfg the caller has just validated (the FSAL
 * validates before it claims the cache directory): not validated again. */
uint32_t nache_core_open_validated(const struct nache_config *cfg,
				   struct nache_core **out, char *err,
				   size_t errlen);
void nache_core_close(struct nache_core *core);

/* Metrics (Prometheus), process-wide: every export's core counts into one
 * registry from nache_core_open on; nache_metrics_start serves it at
 * http://address:port/metrics. Configured by the top-level NACHE { } block
 * (Metrics, Metrics_Address, Metrics_Port), once per daemon. */

/* Validates the metrics parameters; on error writes "Parameter: reason"
 * into err and returns false. Pure. */
bool nache_metrics_validate(const char *address, uint32_t port, char *err,
			    size_t errlen);
/* Validates, then starts serving. False with "Parameter: reason" in err
 * when a value is bad or the address/port cannot be bound (in use). */
bool nache_metrics_start(const char *address, uint32_t port, char *err,
			 size_t errlen);
/* Stops serving (joins the HTTP threads); no-op when not started. Must run
 * before the plugin is unloaded. */
void nache_metrics_stop(void);

/* The admin socket (nachectl, proxy/admin/), process-wide: a Unix socket
 * at socket_path, mode 0600, served by the core's own threads for every
 * export's core. Configured by Admin_Socket in the top-level NACHE { }
 * block, once per daemon. */

/* Starts serving. False with "Admin_Socket: reason" in err when the path
 * is not absolute, its directory is missing, another daemon serves it, or
 * something that is not a socket is in the way. */
bool nache_admin_start(const char *socket_path, char *err, size_t errlen);
/* Stops serving (joins its threads, removes the socket); no-op when not
 * started. Must run before the plugin is unloaded. */
void nache_admin_stop(void);

/* Random id of this store, part of every wire handle: a handle from another
 * (or a wiped) store is rejected as stale instead of naming the wrong file. */
uint64_t nache_core_incarnation(const struct nache_core *core);

/* Waits up to timeout_ms for the upstream to be ready; true when ready. */
bool nache_core_wait_ready(struct nache_core *core, int timeout_ms);

/* The export root (upstream_path), looked up on the remote. */
uint32_t nache_root(struct nache_core *core, const struct nache_creds *cr,
		    nache_key *key, struct nache_attrs *attrs);

/* Whether key is known to the handle map (for wire_to_host/create_handle). */
bool nache_key_known(struct nache_core *core, nache_key key);

uint32_t nache_lookup(struct nache_core *core, const struct nache_creds *cr,
		      nache_key dir, const char *name, nache_key *key,
		      struct nache_attrs *attrs);
/* The parent of a directory (LOOKUPP). */
uint32_t nache_lookup_parent(struct nache_core *core,
			     const struct nache_creds *cr, nache_key dir,
			     nache_key *key, struct nache_attrs *attrs);

uint32_t nache_getattr(struct nache_core *core, const struct nache_creds *cr,
		       nache_key key, struct nache_attrs *attrs);

/* SETATTR; a size change uses the open's stateid when open is not NULL. The
 * object's attributes after the change are returned in attrs_out. */
uint32_t nache_setattr(struct nache_core *core, const struct nache_creds *cr,
		       nache_key key, struct nache_open *open,
		       const struct nache_attrs *set,
		       struct nache_attrs *attrs_out);

/* Whether the caller owns key by the attributes nache knows (no upstream
 * call; false when none are known, and for an owner nache could not map,
 * so that nobody is never taken for the owner of such an object). For
 * Ganesha's owner_skip shortcut. */
bool nache_caller_owns(struct nache_core *core, const struct nache_creds *cr,
		       nache_key key);

/* ACCESS: the bits of want (NFS4 ACCESS4_* values) that the remote allows. */
uint32_t nache_access(struct nache_core *core, const struct nache_creds *cr,
		      nache_key key, uint32_t want, uint32_t *allowed);

/* One directory entry, handed to the readdir callback. Return false from the
 * callback to stop (the entry was not consumed). */
typedef bool (*nache_dirent_cb)(void *ctx, const char *name, nache_key key,
				const struct nache_attrs *attrs,
				uint64_t cookie);

/* Lists dir from cookie (0 = start). Cookies are the remote's; the cookie
 * verifier is kept by the core per directory. */
uint32_t nache_readdir(struct nache_core *core, const struct nache_creds *cr,
		       nache_key dir, uint64_t cookie, nache_dirent_cb cb,
		       void *ctx, bool *eof);

/* The change of a directory an operation made at the remote, as the remote
 * reported it (NFSv4's change_info4: the directory's change attribute just
 * before and just after, and whether nothing else changed it in between).
 * set is false when the remote reported none: the operation was answered
 * here (a write-back export's namespace), or failed. Ganesha puts it in its
 * NFSv4 reply, so that a client keeps its cached names and rights of a
 * directory only it changed. The dir_change parameters below may be
 * NULL. */
struct nache_dir_change {
	bool set;
	bool atomic;
	uint64_t before;
	uint64_t after;
};

/* CREATE of a non-regular object (directory, symlink, device, fifo, socket).
 * attrs_in: mode/owner/group to set (mask), rawdev for devices. */
uint32_t nache_create(struct nache_core *core, const struct nache_creds *cr,
		      nache_key dir, const char *name, enum nache_type type,
		      const struct nache_attrs *attrs_in, const char *link_text,
		      nache_key *key, struct nache_attrs *attrs_out,
		      struct nache_dir_change *dir_change);

/* READLINK: copies up to len-1 bytes and a NUL into buf. */
uint32_t nache_readlink(struct nache_core *core, const struct nache_creds *cr,
			nache_key key, char *buf, size_t len);

uint32_t nache_link(struct nache_core *core, const struct nache_creds *cr,
		    nache_key key, nache_key dir, const char *name,
		    struct nache_dir_change *dir_change);
/* Renames oldname in olddir (the object obj, as the caller looked it up;
 * 0 when not known) to newname in newdir. dir_changes: [0] olddir's, [1]
 * newdir's (NULL: not wanted). */
uint32_t nache_rename(struct nache_core *core, const struct nache_creds *cr,
		      nache_key obj, nache_key olddir, const char *oldname,
		      nache_key newdir, const char *newname,
		      struct nache_dir_change dir_changes[2]);
/* Removes name in dir (the object obj, as the caller looked it up; 0 when
 * not known). */
uint32_t nache_remove(struct nache_core *core, const struct nache_creds *cr,
		      nache_key obj, nache_key dir, const char *name,
		      struct nache_dir_change *dir_change);

uint32_t nache_statfs(struct nache_core *core, const struct nache_creds *cr,
		      nache_key key, struct nache_statfs *out);

/* Access and deny bits of an open (NFS4 OPEN4_SHARE_*). */
#define NACHE_SHARE_READ 1u
#define NACHE_SHARE_WRITE 2u

enum nache_createmode {
	NACHE_OPEN_NOCREATE = 0,
	NACHE_OPEN_UNCHECKED = 1, /* create or open existing */
	NACHE_OPEN_GUARDED = 2,	  /* create; NFS4ERR_EXIST if it exists */
	NACHE_OPEN_EXCLUSIVE = 3, /* create with verifier (8 bytes) */
};

/* Opens (and creates) a regular file upstream for a local open.
 * - by handle: name == NULL, key = the file;
 * - by name:   key = the directory, name = the file; *new_key receives the
 *   file's key.
 * access/deny: NACHE_SHARE_* bits. truncate: set size 0 after opening.
 * The core collapses opens: one upstream open per file, whose access is the
 * union of all local opens; it is closed when the last local open closes.
 * *created tells whether the file was created by this call; dir_change:
 * the directory's change, by name only. */
uint32_t nache_open(struct nache_core *core, const struct nache_creds *cr,
		    nache_key key, const char *name, uint32_t access,
		    uint32_t deny, enum nache_createmode mode,
		    const struct nache_attrs *create_attrs,
		    const uint8_t *verifier, bool truncate,
		    struct nache_open **open, nache_key *new_key,
		    struct nache_attrs *attrs_out, bool *created,
		    struct nache_dir_change *dir_change);

/* Exclusive creates (NACHE_OPEN_EXCLUSIVE) keep the client's 8-byte
 * verifier in the new file's atime and mtime, as servers do; an exclusive
 * create of an existing file succeeds only when it carries the same one (a
 * retry whose reply was lost). 0 when key carries verifier, NFS4ERR_EXIST
 * when not, another status when its attributes cannot be had. */
uint32_t nache_check_verifier(struct nache_core *core,
			      const struct nache_creds *cr, nache_key key,
			      const uint8_t *verifier);

/* Changes the access/deny of a local open (reopen2). */
uint32_t nache_reopen(struct nache_core *core, const struct nache_creds *cr,
		      struct nache_open *open, uint32_t access, uint32_t deny);

/* Ends a local open; the upstream open closes when it was the last. */
uint32_t nache_close(struct nache_core *core, struct nache_open *open);

/* READ into buf: *nread bytes, *eof at end of file. open may be NULL
 * (stateless NFSv3 I/O: the anonymous stateid is used). */
uint32_t nache_read(struct nache_core *core, const struct nache_creds *cr,
		    nache_key key, struct nache_open *open, uint64_t offset,
		    size_t len, void *buf, size_t *nread, bool *eof);

/* WRITE from buf with the stability asked for; *committed: the stability
 * given (at least the one asked for, except for NACHE_UNSTABLE). */
uint32_t nache_write(struct nache_core *core, const struct nache_creds *cr,
		     nache_key key, struct nache_open *open, uint64_t offset,
		     size_t len, const void *buf, enum nache_stable_how stable,
		     size_t *nwritten, enum nache_stable_how *committed);

uint32_t nache_commit(struct nache_core *core, const struct nache_creds *cr,
		      nache_key key, uint64_t offset, uint64_t len);

/* NFSv4.2, forwarded when the remote speaks it (Upstream_Minor_Version =
 * 2), else NFS4ERR_NOTSUPP. The file's unflushed data reaches the remote
 * first. ALLOCATE (allocate) or DEALLOCATE of [offset, offset + length). */
uint32_t nache_fallocate(struct nache_core *core, const struct nache_creds *cr,
			 nache_key key, struct nache_open *open,
			 uint64_t offset, uint64_t length, bool allocate);
/* COPY at the remote, a server-side copy (no byte crosses the WAN): count
 * bytes (0: to the end of src) of src from src_offset into dst at
 * dst_offset, done and stable on return; *copied says how many. Each
 * open may be NULL (the anonymous stateid). NFS4ERR_NOTSUPP without an
 * NFSv4.2 upstream, or when the remote would copy asynchronously (the
 * client then copies by reading and writing). */
uint32_t nache_copy(struct nache_core *core, const struct nache_creds *cr,
		    nache_key src, struct nache_open *src_open,
		    uint64_t src_offset, nache_key dst,
		    struct nache_open *dst_open, uint64_t dst_offset,
		    uint64_t count, uint64_t *copied);
/* SEEK: where the first data (hole: the first hole) at or after offset
 * starts (*found), and whether that is the end of the file (*eof). */
uint32_t nache_seek(struct nache_core *core, const struct nache_creds *cr,
		    nache_key key, struct nache_open *open, uint64_t offset,
		    bool hole, bool *eof, uint64_t *found);

/* Extended attributes of the user namespace (RFC 8276), by name without
 * the "user." prefix. nache_getxattr copies the value into buf (*len
 * bytes of room) and sets *len to its size; a value larger than the room
 * is NFS4ERR_XATTR2BIG with *len its size. */
enum nache_xattr_option {
	NACHE_XATTR_EITHER = 0,	 /* create or replace */
	NACHE_XATTR_CREATE = 1,	 /* NFS4ERR_EXIST if it exists */
	NACHE_XATTR_REPLACE = 2, /* NFS4ERR_NOXATTR if it does not */
};
uint32_t nache_getxattr(struct nache_core *core, const struct nache_creds *cr,
			nache_key key, const char *name, size_t name_len,
			void *buf, size_t *len);
uint32_t nache_setxattr(struct nache_core *core, const struct nache_creds *cr,
			nache_key key, enum nache_xattr_option option,
			const char *name, size_t name_len, const void *value,
			size_t value_len);
uint32_t nache_removexattr(struct nache_core *core,
			   const struct nache_creds *cr, nache_key key,
			   const char *name, size_t name_len);
/* Names from cookie on, each given to cb (not NUL-terminated); maxcount
 * bounds the reply. *next_cookie goes on where this one stopped. */
typedef void (*nache_xattr_name_cb)(void *arg, const char *name, size_t len);
uint32_t nache_listxattrs(struct nache_core *core, const struct nache_creds *cr,
			  nache_key key, uint64_t cookie, uint32_t maxcount,
			  nache_xattr_name_cb cb, void *arg,
			  uint64_t *next_cookie, bool *eof);

/* The write verifier of the last WRITE/COMMIT reply (8 bytes). */
void nache_write_verifier(struct nache_core *core, uint8_t verf[8]);

enum nache_lock_op {
	NACHE_LOCK_TEST = 0,
	NACHE_LOCK = 1,
	NACHE_UNLOCK = 2,
};

struct nache_lock_conflict {
	uint64_t offset, length;
	bool write;
};

/* Byte-range lock on behalf of a local lock owner. owner/owner_len name the
 * local owner uniquely (the FSAL builds it from Ganesha's owner); open is the
 * local open the lock hangs off. Returns NFS4ERR_DENIED with *conflict
 * filled when another owner (local or remote) holds a conflicting lock.
 * length 0 means to the end of the file. */
uint32_t nache_lock(struct nache_core *core, const struct nache_creds *cr,
		    nache_key key, struct nache_open *open, const void *owner,
		    size_t owner_len, enum nache_lock_op op, bool write,
		    uint64_t offset, uint64_t length, bool reclaim,
		    struct nache_lock_conflict *conflict);

/* Delegations to local clients. Ganesha may delegate a file to one of the
 * office's clients only while nache holds an upstream delegation covering
 * it (so that a conflicting change at the remote is recalled to nache, and
 * by nache to its clients). nache_local_deleg_acquire asks for one (write:
 * a write delegation) and counts it: 0 when granted, NFS4ERR_DELAY when not
 * now. nache_local_deleg_release ends one (returned or revoked). */
uint32_t nache_local_deleg_acquire(struct nache_core *core, nache_key key,
				   bool write);
void nache_local_deleg_release(struct nache_core *core, nache_key key);
/* Before nache returns an upstream delegation on key while local ones
 * exist, it calls fn(arg, key) to have them recalled (the FSAL queues
 * Ganesha's delegrecall up-call; fn must not block), then waits, on its own
 * recall thread, until they are released or half the upstream lease has
 * passed. Set once after nache_core_open. */
typedef void (*nache_local_recall_fn)(void *arg, nache_key key);
void nache_set_local_recall(struct nache_core *core, nache_local_recall_fn fn,
			    void *arg);
/* Once nache has given back an upstream delegation on key (recalled by the
 * remote, or returned before an operation of its own), it calls fn(arg,
 * key): what the caller keeps of the file's attributes (Ganesha's MDCACHE)
 * must come from nache again, which revalidates it at the remote (a server
 * recalls a delegation before it lets the file change). Called on nache's
 * recall thread or a worker thread; fn must not block. Set after
 * nache_core_open; fn NULL stops the calls (before nache_core_close, whose
 * recall thread still returns the delegations recalled meanwhile). */
typedef void (*nache_attrs_stale_fn)(void *arg, nache_key key);
void nache_set_attrs_stale(struct nache_core *core, nache_attrs_stale_fn fn,
			   void *arg);

/* Human-readable name of an NFSv4 status, for logs. */
const char *nache_status_name(uint32_t status);

/* Logging: the core logs through this sink (default: stderr). The FSAL
 * points it at Ganesha's log. level: 0 fatal, 1 major, 2 crit, 3 warn,
 * 4 event, 5 info, 6 debug, 7 full debug (Ganesha's NIV_* order). */
typedef void (*nache_log_sink)(int level, const char *component,
			       const char *message);
void nache_set_log_sink(nache_log_sink sink);
/* Drops messages above level (default 4, event). */
void nache_set_log_level(int level);

#ifdef __cplusplus
}
#endif

#endif /* NACHE_NACHE_H */
