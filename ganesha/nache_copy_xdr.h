/*
 * nache_copy_xdr.h - XDR of NFSv4.2's COPY (RFC 7862 section 15.2), for
 * nfsv41.h's operation switches (cmake/ganesha_patch_copy.cmake). The
 * results' write_response4 is WRITE_SAME's (xdr_WRITE_SAME4resok).
 */
#ifndef NACHE_COPY_XDR_H
#define NACHE_COPY_XDR_H

static inline bool xdr_COPY4args(XDR *xdrs, COPY4args *objp)
{
	if (!xdr_stateid4(xdrs, &objp->ca_src_stateid))
		return false;
	if (!xdr_stateid4(xdrs, &objp->ca_dst_stateid))
		return false;
	if (!xdr_offset4(xdrs, &objp->ca_src_offset))
		return false;
	if (!xdr_offset4(xdrs, &objp->ca_dst_offset))
		return false;
	if (!xdr_length4(xdrs, &objp->ca_count))
		return false;
	if (!xdr_bool(xdrs, &objp->ca_consecutive))
		return false;
	if (!xdr_bool(xdrs, &objp->ca_synchronous))
		return false;
	/* netloc4 ca_source_server<>: an intra-server copy names none, and
	 * no other is served here. */
	if (!xdr_u_int(xdrs, &objp->ca_source_server_len))
		return false;
	return objp->ca_source_server_len == 0;
}

static inline bool xdr_copy_requirements4(XDR *xdrs, copy_requirements4 *objp)
{
	if (!xdr_bool(xdrs, &objp->cr_consecutive))
		return false;
	return xdr_bool(xdrs, &objp->cr_synchronous);
}

static inline bool xdr_COPY4res(XDR *xdrs, COPY4res *objp)
{
	if (!xdr_nfsstat4(xdrs, &objp->cr_status))
		return false;
	switch (objp->cr_status) {
	case NFS4_OK:
		if (!xdr_WRITE_SAME4resok(
			    xdrs, &objp->COPY4res_u.cr_resok4.cr_response))
			return false;
		return xdr_copy_requirements4(
			xdrs, &objp->COPY4res_u.cr_resok4.cr_requirements);
	case NFS4ERR_OFFLOAD_NO_REQS:
		return xdr_copy_requirements4(
			xdrs, &objp->COPY4res_u.cr_requirements);
	default: return true;
	}
}

#endif /* NACHE_COPY_XDR_H */
