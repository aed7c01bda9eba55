/*
 * nache_main.c - module registration, configuration (the daemon-wide
 * top-level NACHE { } block and each export's FSAL { Name = NACHE; ... }
 * block), and export creation.
 *
 * A bad or missing parameter refuses to start the daemon with a message that
 * names the parameter: a proxy silently serving nothing is worse than one
 * that does not start.
 */
#include <stdarg.h>

#include "config_parsing.h"
#include "fsal_convert.h"
#include "FSAL/fsal_init.h"
#include "FSAL/fsal_commonlib.h"
#include "nfs_exports.h"
#include "export_mgr.h"
#include "nfs_core.h"

#include "nache_int.h"

static const char nache_name[] = "NACHE";

struct nache_fsal_module
	NacheModule = { .fsal = {
				.fs_info = {
					.maxfilesize = INT64_MAX,
					.maxlink = 1024,
					.maxnamelen = 255,
					.maxpathlen = 4096,
					.no_trunc = true,
					.chown_restricted = true,
					.case_insensitive = false,
					.case_preserving = true,
					.link_support = true,
					.symlink_support = true,
					/* Locks go upstream through lock_op2. */
					.lock_support = true,
					.lock_support_async_block = false,
					/* Ganesha may delegate to local clients while we hold
			 * an upstream delegation (nache_up.c). */
					.delegations =
						FSAL_OPTION_FILE_DELEGATIONS,
					.named_attr = false,
					.unique_handles = true,
					.acl_support = 0,
					.cansettime = true,
					.homogenous = true,
					/* User extended attributes (NFSv4.2),
			 * forwarded: NOTSUPP unless the remote has them. */
					.xattr_support = true,
					.supported_attrs =
						ATTRS_POSIX | ATTR4_XATTR,
					.maxread = 1024 * 1024,
					.maxwrite = 1024 * 1024,
					.umask = 0,
					.auth_exportpath_xdev = false,
					.link_supports_permission_checks = true,
					.readdir_plus = true,
					/* GUARDED and EXCLUSIVE creates by name
			 * are the remote's OPEN, which says whether the
			 * name was taken: Ganesha looks nothing up first
			 * (cmake/ganesha_patch_create.cmake). */
					.atomic_exclusive_create = true,
					/* An open by handle is the remote's
			 * OPEN, sent with the caller's credentials, or
			 * judged by the core when none is sent: Ganesha
			 * neither checks nor reads attributes before it
			 * (cmake/ganesha_patch_open.cmake). */
					.open_judged_by_server = true,
					.expire_time_parent = -1,
				} } };

/* The core's levels are Ganesha's NIV_* order without NIV_NULL
 * (proxy/util/log.h): core level L is NIV level L + 1. */
static void nache_log_to_ganesha(int level, const char *component,
				 const char *message)
{
	log_levels_t niv = level + 1 < NIV_FULL_DEBUG
				   ? (log_levels_t)(level + 1)
				   : NIV_FULL_DEBUG;

	if (niv <= NIV_FATAL)
		niv = NIV_CRIT; /* the core never decides to kill the daemon */
	DisplayLogComponentLevel(COMPONENT_FSAL, __FILE__, __LINE__,
				 (char *)__func__, niv, "%s: %s", component,
				 message);
}

/* The export's FSAL block. Ganesha checks the types; ranges are left wide
 * so that nache_config_validate judges the values and names the parameter
 * in its message (Ganesha's range errors give only a line number). */
static struct config_item nache_export_items[] = {
	CONF_ITEM_NOOP("name"),
	CONF_ITEM_STR("Upstream_Server", 0, 1024, NULL, nache_config,
		      upstream_server),
	CONF_ITEM_UI32("Upstream_Port", 0, UINT32_MAX,
		       NACHE_DEFAULT_UPSTREAM_PORT, nache_config,
		       upstream_port),
	CONF_ITEM_STR("Upstream_Path", 0, 4096, NACHE_DEFAULT_UPSTREAM_PATH,
		      nache_config, upstream_path),
	CONF_ITEM_UI32("Connections", 0, UINT32_MAX, NACHE_DEFAULT_CONNECTIONS,
		       nache_config, connections),
	CONF_ITEM_STR("Callback_Address", 0, 1024, NULL, nache_config,
		      callback_address),
	CONF_ITEM_UI32("Callback_Port", 0, UINT32_MAX, 0, nache_config,
		       callback_port),
	CONF_ITEM_STR("Cache_Dir", 0, 4096, NULL, nache_config, cache_dir),
	CONF_ITEM_UI32("Upstream_Timeout", 0, UINT32_MAX,
		       NACHE_DEFAULT_UPSTREAM_TIMEOUT_MS, nache_config,
		       call_timeout_ms),
	CONF_ITEM_UI32("Max_IO_Size", 0, UINT32_MAX, NACHE_DEFAULT_MAX_IO_SIZE,
		       nache_config, max_io_size),
	CONF_ITEM_UI32("Startup_Wait", 0, 600000, NACHE_DEFAULT_STARTUP_WAIT_MS,
		       nache_config, startup_wait_ms),
	CONF_ITEM_STR("Cache_Size", 0, 64, NACHE_DEFAULT_CACHE_SIZE,
		      nache_config, cache_size),
	CONF_ITEM_UI32("Block_Size", 0, UINT32_MAX, NACHE_DEFAULT_BLOCK_SIZE,
		       nache_config, block_size),
	CONF_ITEM_UI32("Cache_Objects", 0, UINT32_MAX,
		       NACHE_DEFAULT_CACHE_OBJECTS, nache_config,
		       cache_objects),
	CONF_ITEM_UI32("Attr_Timeout", 0, UINT32_MAX,
		       NACHE_DEFAULT_ATTR_TIMEOUT_S, nache_config,
		       attr_timeout_s),
	CONF_ITEM_UI32("Readahead_Max", 0, UINT32_MAX,
		       NACHE_DEFAULT_READAHEAD_MAX, nache_config,
		       readahead_max),
	CONF_ITEM_UI32("Open_Linger", 0, UINT32_MAX,
		       NACHE_DEFAULT_OPEN_LINGER_S, nache_config,
		       open_linger_s),
	CONF_ITEM_UI32("Upstream_Minor_Version", 0, UINT32_MAX,
		       NACHE_DEFAULT_MINOR_VERSION, nache_config,
		       minor_version),
	CONF_ITEM_STR("Write_Behind_Max", 0, 64, NACHE_DEFAULT_WRITE_BEHIND_MAX,
		      nache_config, write_behind_max),
	CONF_ITEM_STR("Write_Policy", 0, 64, NACHE_DEFAULT_WRITE_POLICY,
		      nache_config, write_policy),
	CONF_ITEM_BOOL("Single_Writer", false, nache_config, single_writer),
	CONF_ITEM_BOOL("Serve_Stale_On_Disconnect", false, nache_config,
		       serve_stale),
	CONF_ITEM_UI32("Flush_Age", 0, UINT32_MAX, NACHE_DEFAULT_FLUSH_AGE_S,
		       nache_config, flush_age_s),
	CONF_ITEM_STR("Dirty_Max", 0, 64, NACHE_DEFAULT_DIRTY_MAX, nache_config,
		      dirty_max),
	CONF_ITEM_BOOL("Cache_Reset_If_Corrupt", false, nache_config,
		       cache_reset_if_corrupt),
	CONF_ITEM_BOOL("Cache_Reset_On_Upstream_Change", false, nache_config,
		       cache_reset_on_upstream_change),
	CONF_ITEM_STR("Upstream_Owner_Format", 0, 64,
		      NACHE_DEFAULT_OWNER_FORMAT, nache_config,
		      upstream_owner_format),
	CONF_ITEM_STR("Upstream_Sec", 0, 16, NACHE_DEFAULT_UPSTREAM_SEC,
		      nache_config, upstream_sec),
	CONF_ITEM_STR("Upstream_Keytab", 0, 4096, NULL, nache_config,
		      upstream_keytab),
	CONF_ITEM_STR("Upstream_Principal", 0, 512, NULL, nache_config,
		      upstream_principal),
	CONF_ITEM_STR("Upstream_Client_Principal", 0, 512, NULL, nache_config,
		      upstream_client_principal),
	CONF_ITEM_STR("Upstream_Identity", 0, 16,
		      NACHE_DEFAULT_UPSTREAM_IDENTITY, nache_config,
		      upstream_identity),
	CONFIG_EOL
};

static struct config_block nache_export_block = {
	.dbus_interface_name = "org.ganesha.nfsd.config.fsal.nache-export%d",
	.blk_desc.name = "FSAL",
	.blk_desc.type = CONFIG_BLOCK,
	.blk_desc.u.blk.init = noop_conf_init,
	.blk_desc.u.blk.params = nache_export_items,
	.blk_desc.u.blk.commit = noop_conf_commit
};

/* The strings the config parser allocated into p. */
static void nache_free_params(struct nache_config *p)
{
	gsh_free((char *)p->upstream_server);
	gsh_free((char *)p->upstream_path);
	gsh_free((char *)p->callback_address);
	gsh_free((char *)p->cache_dir);
	gsh_free((char *)p->cache_size);
	gsh_free((char *)p->write_behind_max);
	gsh_free((char *)p->write_policy);
	gsh_free((char *)p->dirty_max);
	gsh_free((char *)p->upstream_owner_format);
	gsh_free((char *)p->upstream_sec);
	gsh_free((char *)p->upstream_keytab);
	gsh_free((char *)p->upstream_principal);
	gsh_free((char *)p->upstream_client_principal);
	gsh_free((char *)p->upstream_identity);
}

/* Refuses to start: Ganesha's LogFatal exits the daemon. */
static void nache_refuse(const char *fmt, ...) __attribute__((noreturn));
static void nache_refuse(const char *fmt, ...)
{
	char msg[1024];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	LogFatal(COMPONENT_CONFIG, "NACHE: bad configuration: %s", msg);
	abort(); /* not reached */
}

/* The config parser's messages written since offset `from`, on one line. */
static void nache_config_diag(struct config_error_type *err_type, size_t from,
			      char *out, size_t outlen)
{
	size_t i, n = 0;

	out[0] = '\0';
	if (err_type->fp == NULL)
		return;
	fflush(err_type->fp);
	for (i = from; err_type->diag_buf != NULL &&
		       i < err_type->diag_buf_size && n + 3 < outlen;
	     i++) {
		char c = err_type->diag_buf[i];

		if (c == '\n') {
			if (i + 1 < err_type->diag_buf_size) {
				out[n++] = ';';
				out[n++] = ' ';
			}
		} else {
			out[n++] = c;
		}
	}
	out[n] = '\0';
	if (n == 0)
		snprintf(out, outlen, "invalid parameters");
}

/* Where the parser's error count and message buffer stand before a block,
 * so that what the block adds can be told apart. */
struct nache_config_mark {
	uint32_t errors; /* err_type->errors before the block */
	size_t diag;	 /* bytes in err_type's message buffer before */
};

static struct nache_config_mark
nache_config_mark(struct config_error_type *err_type)
{
	struct nache_config_mark m = { err_type->errors, 0 };

	if (err_type->fp != NULL) {
		fflush(err_type->fp);
		m.diag = err_type->diag_buf_size;
	}
	return m;
}

/* Whether parsing one block (load_config_* returned rc) went wrong since
 * mark; if so, the parser's messages are written to err. Unknown parameters
 * are only noted by the parser (a message, err_type->bogus); for nache they
 * are a typo that must not pass silently. Ganesha reports config errors only
 * after all exports are read; we stop before that, so the caller says here
 * what was wrong (unknown parameters, values out of range, ...). */
static bool nache_config_failed(struct config_error_type *err_type, int rc,
				struct nache_config_mark mark, char *err,
				size_t errlen)
{
	if (err_type->fp != NULL)
		fflush(err_type->fp);
	if (rc >= 0 && err_type->errors == mark.errors &&
	    (err_type->fp == NULL || err_type->diag_buf_size <= mark.diag))
		return false;
	nache_config_diag(err_type, mark.diag, err, errlen);
	return true;
}

/* The top-level NACHE { } block: daemon-wide settings. Optional; absent
 * parameters take their defaults. Written once by nache_init_config on
 * Ganesha's main thread, read-only afterwards. */
static struct nache_global_params nache_global;

static struct config_item nache_global_items[] = {
	CONF_ITEM_BOOL("Metrics", true, nache_global_params, metrics),
	CONF_ITEM_STR("Metrics_Address", 0, 1024, "0.0.0.0",
		      nache_global_params, metrics_address),
	/* Range judged by nache_metrics_validate, which names the parameter. */
	CONF_ITEM_UI32("Metrics_Port", 0, UINT32_MAX, 9464, nache_global_params,
		       metrics_port),
	/* Unset (NULL) is libnfsidmap's default; a path set must be
	 * readable (nache_idmap_configure). */
	CONF_ITEM_STR("Idmapd_Conf", 0, 4096, NULL, nache_global_params,
		      idmapd_conf),
	/* Unset (NULL): nache.sock beside Ganesha's pid file (the run
	 * directory); "": no admin socket. */
	CONF_ITEM_STR("Admin_Socket", 0, 4096, NULL, nache_global_params,
		      admin_socket),
	CONFIG_EOL
};

static struct config_block nache_global_block = {
	.dbus_interface_name = "org.ganesha.nfsd.config.fsal.nache",
	.blk_desc.name = "NACHE",
	.blk_desc.type = CONFIG_BLOCK,
	.blk_desc.u.blk.init = noop_conf_init,
	.blk_desc.u.blk.params = nache_global_items,
	.blk_desc.u.blk.commit = noop_conf_commit
};

/* Where nachectl finds the daemon: Admin_Socket, or nache.sock in the
 * directory of Ganesha's pid file (-p; /run/nache with the shipped unit),
 * the run directory an admin looks in. NULL: no admin socket. */
static const char *nache_admin_socket_path(char *buf, size_t len)
{
	const char *pid = nfs_pidfile_path;
	const char *slash;

	if (nache_global.admin_socket != NULL)
		return nache_global.admin_socket[0] != '\0'
			       ? nache_global.admin_socket
			       : NULL;
	slash = pid != NULL ? strrchr(pid, '/') : NULL;
	if (pid == NULL || pid[0] != '/' || slash == NULL)
		return NULL; /* no absolute run directory to go by */
	snprintf(buf, len, "%.*s/nache.sock", (int)(slash - pid), pid);
	return buf;
}

/* Whether nache's Idmapd_Conf (PATH, NULL when unset) is the file
 * libnfsidmap runs from. Ganesha started libnfsidmap at its own start from
 * NFSv4's IdmapConf (Kerberos principals map to users through it), and
 * libnfsidmap keeps the first configuration it was given for the whole
 * process: another file here would be silently ignored. */
static bool nache_idmapd_conf_is_ganeshas(const char *path)
{
#ifdef USE_NFSIDMAP
	if (path != NULL && !nfs_param.nfsv4_param.use_getpwnam)
		return strcmp(path, nfs_param.nfsv4_param.idmapconf) == 0;
#endif
	return true;
}

/* Runs once per daemon, when the first export names FSAL NACHE (before any
 * nache export is created). */
static fsal_status_t nache_init_config(struct fsal_module *fsal_hdl,
				       config_file_t config_struct,
				       struct config_error_type *err_type)
{
	struct nache_config_mark mark;
	char err[512];
	char admin_path[4200];
	const char *admin;
	int rc;

	nache_set_log_sink(nache_log_to_ganesha);
	/* Let through what Ganesha would print for COMPONENT_FSAL. */
	nache_set_log_level(component_log_level[COMPONENT_FSAL] - 1);

	mark = nache_config_mark(err_type);
	rc = load_config_from_parse(config_struct, &nache_global_block,
				    &nache_global, true, err_type);
	if (nache_config_failed(err_type, rc, mark, err, sizeof(err)))
		nache_refuse("NACHE block: %s", err);
	if (!nache_metrics_validate(nache_global.metrics_address,
				    nache_global.metrics_port, err,
				    sizeof(err)))
		nache_refuse("NACHE block: %s", err);
	if (!nache_idmap_configure(nache_global.idmapd_conf, err, sizeof(err)))
		nache_refuse("NACHE block: %s", err);
	if (!nache_idmapd_conf_is_ganeshas(nache_global.idmapd_conf))
		nache_refuse("NACHE block: Idmapd_Conf: %s is not NFSv4's "
			     "IdmapConf (%s): libnfsidmap has one "
			     "configuration per process, which Ganesha "
			     "started from IdmapConf; name the same file in "
			     "both",
			     nache_global.idmapd_conf,
			     nfs_param.nfsv4_param.idmapconf);
	/* A metrics port we cannot bind is refused like a bad value: the
	 * operator asked for metrics and would silently get none. */
	if (nache_global.metrics &&
	    !nache_metrics_start(nache_global.metrics_address,
				 nache_global.metrics_port, err, sizeof(err)))
		nache_refuse("NACHE block: %s", err);
	/* An Admin_Socket asked for is refused like the metrics port when it
	 * cannot be served; the default only costs a warning (a daemon run by
	 * hand with an unusual pid file still serves its clients). */
	admin = nache_admin_socket_path(admin_path, sizeof(admin_path));
	if (admin != NULL && !nache_admin_start(admin, err, sizeof(err))) {
		if (nache_global.admin_socket != NULL)
			nache_refuse("NACHE block: %s", err);
		LogWarn(COMPONENT_FSAL, "NACHE: no admin socket (nachectl): %s",
			err);
	} else if (admin == NULL && nache_global.admin_socket == NULL) {
		LogWarn(COMPONENT_FSAL,
			"NACHE: no admin socket (nachectl): the pid file path "
			"is not absolute; set Admin_Socket");
	}
	display_fsinfo(fsal_hdl);
	return fsalstat(ERR_FSAL_NO_ERROR, 0);
}

/* The export being created, for messages: its Path and Pseudo as
 * configured (either may not be parsed yet). */
static const char *nache_export_name(void)
{
	static __thread char name[600];
	struct gsh_export *e = op_ctx->ctx_export;

	snprintf(name, sizeof(name), "Path %s, Pseudo %s",
		 e->cfg_fullpath != NULL ? e->cfg_fullpath : "(unset)",
		 e->cfg_pseudopath != NULL ? e->cfg_pseudopath : "(unset)");
	return name;
}

static fsal_status_t nache_create_export(struct fsal_module *fsal_hdl,
					 void *parse_node,
					 struct config_error_type *err_type,
					 const struct fsal_up_vector *up_ops)
{
	struct nache_fsal_export *exp;
	const struct nache_config *cfg;
	struct nache_creds root = { 0 };
	struct nache_attrs attrs;
	char err[1024];
	struct nache_config_mark mark;
	uint32_t st;
	int rc;

	exp = gsh_calloc(1, sizeof(*exp));
	fsal_export_init(&exp->export);
	nache_export_ops_init(&exp->export.exp_ops);

	mark = nache_config_mark(err_type);
	rc = load_config_from_node(parse_node, &nache_export_block,
				   &exp->params, true, err_type);
	/* load_config_from_node returns 0 on success. */
	if (nache_config_failed(err_type, rc != 0 ? -1 : 0, mark, err,
				sizeof(err)))
		nache_refuse("export %d: FSAL block: %s",
			     op_ctx->ctx_export->export_id, err);

	exp->params.export_id = op_ctx->ctx_export->export_id;
	cfg = &exp->params;
	if (!nache_config_validate(cfg, err, sizeof(err)))
		nache_refuse("export %d: %s", cfg->export_id, err);
	/* Two exports on one store would each move the other's data, or one
	 * would fail on the other's lock: refused by name before either
	 * opens it. */
	if (!nache_cache_dir_claim(cfg->export_id, nache_export_name(),
				   cfg->cache_dir, err, sizeof(err)))
		nache_refuse("export %d: %s", cfg->export_id, err);

	st = nache_core_open_validated(cfg, &exp->core, err, sizeof(err));
	if (st != 0)
		nache_refuse("export %d: %s", cfg->export_id, err);
	exp->incarnation = nache_core_incarnation(exp->core);

	rc = fsal_attach_export(fsal_hdl, &exp->export.exports);
	if (rc != 0) {
		LogMajor(COMPONENT_FSAL, "NACHE: could not attach export");
		nache_core_close(exp->core);
		nache_cache_dir_release(exp->export.export_id);
		nache_free_params(&exp->params);
		free_export_ops(&exp->export);
		gsh_free(exp);
		return posix2fsal_status(rc);
	}
	exp->export.fsal = fsal_hdl;
	exp->export.up_ops = up_ops;
	op_ctx->fsal_export = &exp->export;
	nache_up_init(exp);

	/* The root is resolved when Ganesha first asks (lookup_path), so an
	 * upstream that is down at start delays clients instead of failing
	 * the daemon. Give it a moment to come up so the first mount works. */
	if (!nache_core_wait_ready(exp->core, exp->params.startup_wait_ms)) {
		LogWarn(COMPONENT_FSAL,
			"NACHE: upstream %s:%u not reachable yet; clients get "
			"NFS4ERR_DELAY until it is",
			cfg->upstream_server, cfg->upstream_port);
	} else if (nache_root(exp->core, &root, &exp->root_key, &attrs) != 0) {
		LogWarn(COMPONENT_FSAL,
			"NACHE: upstream path %s not resolvable yet on %s",
			cfg->upstream_path, cfg->upstream_server);
	}
	LogEvent(COMPONENT_FSAL,
		 "NACHE: export %d -> %s:%u%s, cache %s, %u connection(s)",
		 cfg->export_id, cfg->upstream_server, cfg->upstream_port,
		 cfg->upstream_path, cfg->cache_dir, cfg->connections);
	return fsalstat(ERR_FSAL_NO_ERROR, 0);
}

void nache_release_export_params(struct nache_fsal_export *exp)
{
	/* Returns made while the core shuts down need no MDCACHE up-call:
	 * the export above us is going away. */
	if (exp->core != NULL)
		nache_set_attrs_stale(exp->core, NULL, NULL);
	nache_core_close(exp->core);
	exp->core = NULL;
	nache_cache_dir_release(exp->export.export_id);
	nache_free_params(&exp->params);
}

MODULE_INIT void nache_init(void)
{
	struct fsal_module *myself = &NacheModule.fsal;

	if (register_fsal(myself, nache_name, FSAL_MAJOR_VERSION,
			  FSAL_MINOR_VERSION, FSAL_ID_NO_PNFS) != 0) {
		LogCrit(COMPONENT_FSAL, "NACHE module failed to register");
		return;
	}
	myself->m_ops.create_export = nache_create_export;
	myself->m_ops.init_config = nache_init_config;
	nache_handle_ops_init(&NacheModule.handle_ops);
}

MODULE_FINI void nache_fini(void)
{
	/* Ganesha dlcloses the plugin at shutdown: the HTTP threads must not
	 * outlive the code they run. */
	nache_metrics_stop();
	nache_admin_stop();
	gsh_free(nache_global.admin_socket);
	nache_global.admin_socket = NULL;
	gsh_free(nache_global.metrics_address);
	nache_global.metrics_address = NULL;
	gsh_free(nache_global.idmapd_conf);
	nache_global.idmapd_conf = NULL;
	if (unregister_fsal(&NacheModule.fsal) != 0)
		LogCrit(COMPONENT_FSAL, "NACHE module failed to unregister");
}
