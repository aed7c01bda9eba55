# Builds NFS-Ganesha 4.3 (ganesha.nfsd, FSAL_VFS, FSAL_PROXY_V4) from Debian's
# pinned source tarball, with our changes (ganesha_patch*.cmake), and exposes
# its headers to our FSAL plugin.
#
# Why build the daemon instead of loading the plugin into Debian's binary: the
# FSAL ABI is a set of C structs whose layout depends on Ganesha's config.h
# (build options). Debian ships no -dev package, so no config.h matching its
# binary exists; building the daemon and the plugin from one tree with one
# config.h makes them agree on every structure by construction. It costs about
# 40 s of build time.

set(NACHE_GANESHA_SHA256
    d4efd020edf4dfe65abfd0f0f66eb4390613360f99dce4354467ab297e0e1c0f)
set(NACHE_GANESHA_TARBALL
    "${CMAKE_SOURCE_DIR}/.deps/nfs-ganesha_4.3.orig.tar.gz"
    CACHE FILEPATH "Debian's nfs-ganesha 4.3 orig tarball")

if(NOT EXISTS "${NACHE_GANESHA_TARBALL}")
  message(FATAL_ERROR
    "NACHE_GANESHA_TARBALL=${NACHE_GANESHA_TARBALL} does not exist; "
    "run deploy/install-deps.sh first (it fetches Debian's source package)")
endif()
file(SHA256 "${NACHE_GANESHA_TARBALL}" _nache_ganesha_sum)
if(NOT _nache_ganesha_sum STREQUAL NACHE_GANESHA_SHA256)
  message(FATAL_ERROR
    "NACHE_GANESHA_TARBALL has SHA-256 ${_nache_ganesha_sum}, "
    "expected ${NACHE_GANESHA_SHA256}")
endif()

# Everything the daemon and our FSAL share lands in one staging prefix:
#   stage/bin/ganesha.nfsd, stage/lib/libganesha_nfsd.so*, stage/lib/ganesha/
set(NACHE_STAGE "${CMAKE_BINARY_DIR}/stage")
set(NACHE_GANESHA_SRC "${CMAKE_BINARY_DIR}/ganesha/src/ganesha")
set(NACHE_GANESHA_BIN "${CMAKE_BINARY_DIR}/ganesha/src/ganesha-build")

include(ExternalProject)
ExternalProject_Add(ganesha
  PREFIX "${CMAKE_BINARY_DIR}/ganesha"
  URL "${NACHE_GANESHA_TARBALL}"
  URL_HASH SHA256=${NACHE_GANESHA_SHA256}
  DOWNLOAD_EXTRACT_TIMESTAMP ON
  SOURCE_SUBDIR src
  # A change to MDCACHE (ganesha_patch.cmake), NFSv4.2's COPY with a
  # FSAL operation for it (ganesha_patch_copy.cmake, our files in ganesha/),
  # exclusive creates with no lookup before them for a FSAL that makes
  # them atomically (ganesha_patch_create.cmake), the change_info4 of a
  # directory as the FSAL's server reported it (ganesha_patch_cinfo.cmake),
  # and opens judged by the FSAL's server alone: by handle with no check
  # before, by name with no lookup before (ganesha_patch_open.cmake).
  PATCH_COMMAND ${CMAKE_COMMAND} -DSRC=<SOURCE_DIR>
    -P ${CMAKE_CURRENT_LIST_DIR}/ganesha_patch.cmake
  COMMAND ${CMAKE_COMMAND} -DSRC=<SOURCE_DIR>
    -DADD=${CMAKE_SOURCE_DIR}/ganesha
    -P ${CMAKE_CURRENT_LIST_DIR}/ganesha_patch_copy.cmake
  COMMAND ${CMAKE_COMMAND} -DSRC=<SOURCE_DIR>
    -P ${CMAKE_CURRENT_LIST_DIR}/ganesha_patch_create.cmake
  COMMAND ${CMAKE_COMMAND} -DSRC=<SOURCE_DIR>
    -P ${CMAKE_CURRENT_LIST_DIR}/ganesha_patch_cinfo.cmake
  COMMAND ${CMAKE_COMMAND} -DSRC=<SOURCE_DIR>
    -P ${CMAKE_CURRENT_LIST_DIR}/ganesha_patch_open.cmake
  CMAKE_GENERATOR Ninja
  CMAKE_ARGS
    -DCMAKE_BUILD_TYPE=RelWithDebInfo
    -DCMAKE_INSTALL_PREFIX=${NACHE_STAGE}
    -DUSE_SYSTEM_NTIRPC=ON
    # libc malloc: our plugin is dlopen'ed with RTLD_DEEPBIND and binds
    # malloc/free to libc; the daemon must use the same allocator.
    -DALLOCATOR=libc
    -DUSE_FSAL_VFS=ON -DUSE_FSAL_PROXY_V4=ON -DUSE_FSAL_MEM=OFF
    -DUSE_FSAL_PROXY_V3=OFF -DUSE_FSAL_LUSTRE=OFF -DUSE_FSAL_LIZARDFS=OFF
    -DUSE_FSAL_KVSFS=OFF -DUSE_FSAL_CEPH=OFF -DUSE_FSAL_GPFS=OFF
    -DUSE_FSAL_XFS=OFF -DUSE_FSAL_GLUSTER=OFF -DUSE_FSAL_NULL=OFF
    -DUSE_FSAL_RGW=OFF -DUSE_DBUS=OFF -DUSE_9P=OFF -DUSE_RADOS_RECOV=OFF
    -DRADOS_URLS=OFF -DUSE_GUI_ADMIN_TOOLS=OFF -DUSE_MAN_PAGE=OFF
    -DUSE_LTTNG=OFF -D_MSPAC_SUPPORT=OFF
    # libnfsidmap (Ganesha's default): Kerberos callers' principals map to
    # local users through it (principal2uid; without it every principal
    # is anonymous). Ganesha starts it at start from NFSv4's IdmapConf,
    # which is then the process's one configuration (config/README.md).
    -DUSE_NFSIDMAP=ON
    # Registration with rpcbind: NFSv3 clients find NFS, MOUNT and NLM
    # there (the kernel's lockd asks the box's rpcbind for NLM's port,
    # whatever the mount options). Ganesha exits at start when an NFSv3
    # registration fails, so a box serving NFSv3 runs rpcbind
    # (config/README.md; the lab runs one in each Ganesha's namespace).
    -DRPCBIND=ON
  # The daemon finds libganesha_nfsd beside it (../lib) wherever the stage
  # is copied (build/stage; /usr/lib/nache by install.sh or the package),
  # and no path of the build tree ends up in a binary. (A cache argument,
  # so that no shell or ninja sees the $.)
  CMAKE_CACHE_ARGS -DCMAKE_INSTALL_RPATH:STRING=$ORIGIN/../lib
  BUILD_BYPRODUCTS "${NACHE_STAGE}/bin/ganesha.nfsd"
)
ExternalProject_Add_StepDependencies(ganesha patch
  ${CMAKE_CURRENT_LIST_DIR}/ganesha_patch.cmake
  ${CMAKE_CURRENT_LIST_DIR}/ganesha_patch_copy.cmake
  ${CMAKE_CURRENT_LIST_DIR}/ganesha_patch_create.cmake
  ${CMAKE_CURRENT_LIST_DIR}/ganesha_patch_cinfo.cmake
  ${CMAKE_CURRENT_LIST_DIR}/ganesha_patch_open.cmake
  ${CMAKE_CURRENT_LIST_DIR}/ganesha_edit.cmake
  ${CMAKE_SOURCE_DIR}/ganesha/nache_copy_types.h
  ${CMAKE_SOURCE_DIR}/ganesha/nache_copy_xdr.h
  ${CMAKE_SOURCE_DIR}/ganesha/nfs4_op_copy.c
  ${CMAKE_SOURCE_DIR}/ganesha/mdcache_copy.c)
ExternalProject_Get_Property(ganesha SOURCE_DIR BINARY_DIR)
set(NACHE_GANESHA_INCLUDES
  "${BINARY_DIR}/include"
  "${SOURCE_DIR}/src/include"
  "${SOURCE_DIR}/src/include/os/linux"
  /usr/include/ntirpc)
