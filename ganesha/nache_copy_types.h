/*
 * nache_copy_types.h - NFSv4.2's COPY arguments and results as RFC 7862
 * (section 15.2) has them, in place of the draft's that Ganesha 4.3's
 * nfsv41.h declares (and never decodes). Included by nfsv41.h where the
 * draft's were (cmake/ganesha_patch_copy.cmake).
 */
#ifndef NACHE_COPY_TYPES_H
#define NACHE_COPY_TYPES_H

struct COPY4args {
	stateid4 ca_src_stateid;
	stateid4 ca_dst_stateid;
	offset4 ca_src_offset;
	offset4 ca_dst_offset;
	length4 ca_count;
	bool_t ca_consecutive;
	bool_t ca_synchronous;
	/* Inter-server copies only; decoded as a count that must be 0. */
	u_int ca_source_server_len;
};
typedef struct COPY4args COPY4args;

struct copy_requirements4 {
	bool_t cr_consecutive;
	bool_t cr_synchronous;
};
typedef struct copy_requirements4 copy_requirements4;

struct COPY4resok {
	write_response4 cr_response;
	copy_requirements4 cr_requirements;
};
typedef struct COPY4resok COPY4resok;

struct COPY4res {
	nfsstat4 cr_status;
	union {
		COPY4resok cr_resok4;		    /* NFS4_OK */
		copy_requirements4 cr_requirements; /* OFFLOAD_NO_REQS */
	} COPY4res_u;
};
typedef struct COPY4res COPY4res;

#endif /* NACHE_COPY_TYPES_H */
