/*
 * nache_errors.c - the one mapping between NFSv4 statuses (what the core and
 * the upstream speak) and Ganesha's fsal_status_t, in both directions.
 */
#include "nache_int.h"

/* Statuses whose meaning is the same on both sides. */
static const struct {
	uint32_t nfs4;
	fsal_errors_t fsal;
} same_meaning[] = {
	{ 1, ERR_FSAL_PERM },
	{ 2, ERR_FSAL_NOENT },
	{ 5, ERR_FSAL_IO },
	{ 6, ERR_FSAL_NXIO },
	{ 13, ERR_FSAL_ACCESS },
	{ 17, ERR_FSAL_EXIST },
	{ 18, ERR_FSAL_XDEV },
	{ 20, ERR_FSAL_NOTDIR },
	{ 21, ERR_FSAL_ISDIR },
	{ 22, ERR_FSAL_INVAL },
	{ 27, ERR_FSAL_FBIG },
	{ 28, ERR_FSAL_NOSPC },
	{ 30, ERR_FSAL_ROFS },
	{ 31, ERR_FSAL_MLINK },
	{ 63, ERR_FSAL_NAMETOOLONG },
	{ 66, ERR_FSAL_NOTEMPTY },
	{ 69, ERR_FSAL_DQUOT },
	{ 70, ERR_FSAL_STALE },
	{ 10001, ERR_FSAL_BADHANDLE },
	{ 10003, ERR_FSAL_BADCOOKIE },
	{ 10004, ERR_FSAL_NOTSUPP },
	{ 10005, ERR_FSAL_TOOSMALL },
	{ 10006, ERR_FSAL_SERVERFAULT },
	{ 10007, ERR_FSAL_BADTYPE },
	{ 10008, ERR_FSAL_DELAY },
	{ 10010, ERR_FSAL_LOCKED },
	{ 10013, ERR_FSAL_IN_GRACE },
	{ 10014, ERR_FSAL_FHEXPIRED },
	{ 10015, ERR_FSAL_SHARE_DENIED },
	{ 10016, ERR_FSAL_SEC },
	{ 10029, ERR_FSAL_SYMLINK },
	{ 10032, ERR_FSAL_ATTRNOTSUPP },
	{ 10041, ERR_FSAL_BADNAME },
	{ 10042, ERR_FSAL_BAD_RANGE },
	{ 10045, ERR_FSAL_DEADLOCK },
	{ 10046, ERR_FSAL_FILE_OPEN },
	{ 10095, ERR_FSAL_NOXATTR },
	{ 10096, ERR_FSAL_XATTR2BIG },
};

fsal_status_t nache_status(uint32_t st)
{
	size_t i;

	if (st == 0)
		return fsalstat(ERR_FSAL_NO_ERROR, 0);
	for (i = 0; i < (sizeof(same_meaning) / sizeof(same_meaning[0])); i++)
		if (same_meaning[i].nfs4 == st)
			return fsalstat(same_meaning[i].fsal, 0);

	switch (st) {
	case 10011: /* EXPIRED */
	case 10022: /* STALE_CLIENTID */
	case 10023: /* STALE_STATEID */
	case 10024: /* OLD_STATEID */
	case 10025: /* BAD_STATEID */
	case 10026: /* BAD_SEQID */
	case 10018: /* RESOURCE */
		/* Our upstream state went away or got out of step; the core
		 * re-establishes it, so the client's retry will work. */
		return fsalstat(ERR_FSAL_DELAY, 0);
	case 10012: /* LOCKED: I/O against a lock */
		return fsalstat(ERR_FSAL_LOCKED, 0);
	case 10038: /* OPENMODE */ return fsalstat(ERR_FSAL_PERM, 0);
	case 10043: /* LOCK_NOTSUPP */ return fsalstat(ERR_FSAL_NOTSUPP, 0);
	default:
		LogInfo(COMPONENT_FSAL,
			"NACHE: upstream status %s mapped to EIO",
			nache_status_name(st));
		return fsalstat(ERR_FSAL_IO, 0);
	}
}

uint32_t nache_nfs4_status(fsal_errors_t err)
{
	size_t i;

	if (err == ERR_FSAL_NO_ERROR)
		return 0;
	for (i = 0; i < (sizeof(same_meaning) / sizeof(same_meaning[0])); i++)
		if (same_meaning[i].fsal == err)
			return same_meaning[i].nfs4;
	switch (err) {
	case ERR_FSAL_NOMEM:
	case ERR_FSAL_TIMEOUT:
	case ERR_FSAL_BLOCKED:
	case ERR_FSAL_INTERRUPT: return 10008;	  /* DELAY */
	case ERR_FSAL_STILL_IN_USE: return 10046; /* FILE_OPEN */
	default: return 10006;			  /* SERVERFAULT */
	}
}
