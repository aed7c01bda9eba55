/*
 * nache_access.c - Ganesha's access masks in NFSv4 ACCESS terms and back.
 *
 * Ganesha asks "may the caller do this" with a mask that carries mode bits
 * (FSAL_R_OK, FSAL_W_OK, FSAL_X_OK) and NFSv4 ACE bits side by side. The
 * remote answers ACCESS4 bits (RFC 7530 section 16.1). What ACCESS can
 * answer is asked of the remote (through the core, which caches the answer
 * per object and caller); the ACE bits it cannot express (attributes,
 * ACLs, ownership, the DELETE of an object itself) are left to Ganesha's
 * own check, as before.
 */
#include "nache_int.h"

/* ACCESS4 bits (RFC 7530). */
enum {
	A4_READ = 0x01,
	A4_LOOKUP = 0x02,
	A4_MODIFY = 0x04,
	A4_EXTEND = 0x08,
	A4_DELETE = 0x10,
	A4_EXECUTE = 0x20,
};

/* The ACE bits ACCESS answers (LIST_DIR = READ_DATA, ADD_FILE = WRITE_DATA,
 * ADD_SUBDIRECTORY = APPEND_DATA share values). */
#define ANSWERABLE_ACE                                        \
	(FSAL_ACE_PERM_READ_DATA | FSAL_ACE_PERM_WRITE_DATA | \
	 FSAL_ACE_PERM_APPEND_DATA | FSAL_ACE_PERM_EXECUTE |  \
	 FSAL_ACE_PERM_DELETE_CHILD)

/* Write in mode terms: every ACCESS4 bit a write needs on that type. */
static uint32_t write_bits(bool dir)
{
	return dir ? A4_MODIFY | A4_EXTEND | A4_DELETE : A4_MODIFY | A4_EXTEND;
}

static fsal_accessflags_t ace_bits(fsal_accessflags_t mask)
{
	/* Only permission bits: not the flags that share FSAL_ACE4_BIT_MASK. */
	if (!IS_FSAL_ACE4_MASK_VALID(mask))
		return 0;
	return FSAL_ACE4_MASK(mask) &
	       ~(fsal_accessflags_t)(FSAL_ACE4_PERM_CONTINUE |
				     FSAL_ACE4_REQ_FLAG);
}

uint32_t nache_access4_wanted(fsal_accessflags_t mask, bool dir,
			      fsal_accessflags_t *rest)
{
	fsal_accessflags_t mode = FSAL_MODE_MASK(mask), ace = ace_bits(mask);
	uint32_t want = 0;

	if ((mode & FSAL_R_OK) || (ace & FSAL_ACE_PERM_READ_DATA))
		want |= A4_READ;
	if (mode & FSAL_W_OK)
		want |= write_bits(dir);
	if ((mode & FSAL_X_OK) || (ace & FSAL_ACE_PERM_EXECUTE))
		want |= dir ? A4_LOOKUP : A4_EXECUTE;
	if (ace & FSAL_ACE_PERM_WRITE_DATA)
		want |= dir ? A4_EXTEND : A4_MODIFY; /* ADD_FILE on a dir */
	if (ace & FSAL_ACE_PERM_APPEND_DATA)
		want |= A4_EXTEND; /* ADD_SUBDIRECTORY on a dir */
	if (ace & FSAL_ACE_PERM_DELETE_CHILD)
		want |= dir ? A4_DELETE | A4_MODIFY : 0;
	*rest = ace & ~(fsal_accessflags_t)ANSWERABLE_ACE;
	/* DELETE_CHILD means nothing on a file: Ganesha judges it. */
	if (!dir && (ace & FSAL_ACE_PERM_DELETE_CHILD))
		*rest |= FSAL_ACE_PERM_DELETE_CHILD;
	return want;
}

fsal_accessflags_t nache_access_allowed(uint32_t granted, bool dir)
{
	fsal_accessflags_t a = 0;
	uint32_t w = write_bits(dir);

	if (granted & A4_READ)
		a |= FSAL_R_OK | FSAL_ACE_PERM_READ_DATA;
	if ((granted & w) == w)
		a |= FSAL_W_OK;
	if (granted & (dir ? A4_LOOKUP : A4_EXECUTE))
		a |= FSAL_X_OK | FSAL_ACE_PERM_EXECUTE;
	if (dir) {
		if (granted & A4_EXTEND)
			a |= FSAL_ACE_PERM_ADD_FILE |
			     FSAL_ACE_PERM_ADD_SUBDIRECTORY;
		if ((granted & (A4_DELETE | A4_MODIFY)) ==
		    (A4_DELETE | A4_MODIFY))
			a |= FSAL_ACE_PERM_DELETE_CHILD;
	} else {
		if (granted & A4_MODIFY)
			a |= FSAL_ACE_PERM_WRITE_DATA;
		if (granted & A4_EXTEND)
			a |= FSAL_ACE_PERM_APPEND_DATA;
	}
	return a;
}

fsal_accessflags_t nache_access_missing(fsal_accessflags_t mask,
					fsal_accessflags_t allowed)
{
	return (FSAL_MODE_MASK(mask) | ace_bits(mask)) & ~allowed;
}
