#!/bin/sh
# /init of the initramfs that lab.sh builds for its qemu guests (busybox sh).
#
# Owns: the step a UML guest does not need — the kernel under qemu has no
# hostfs, so this loads the 9p modules packed beside it (listed in load
# order in /modules.order), mounts the host's root read-only over 9p
# (virtio tag "hostroot") and hands over to guest_init.sh there, as PID 1.
# It must not write anything: the host's root is read-only from here on.
#
# The kernel passes these command-line arguments as environment variables:
#   lab_init  guest_init.sh's path on the host
#   lab_env   its env file (guest_init.sh reads it)

export PATH=/bin

fail() {
	echo "qemu_initramfs: FATAL: $*"
	# PID 1 exiting panics the kernel, and "panic=-1" ends qemu: the lab
	# sees the guest die and prints this console.
	exit 1
}

mount -t proc proc /proc
mount -t devtmpfs devtmpfs /dev
while read -r module; do
	insmod "/modules/$module" || fail "insmod $module"
done </modules.order
# msize: 9p moves at most this much per request; the default (128 KiB in
# 6.12) is fine, a larger one only helps big reads of host files.
mount -t 9p -o trans=virtio,version=9p2000.L,ro,cache=loose,msize=262144 \
	hostroot /newroot || fail "mount the host root (9p tag hostroot)"
# lab_init comes from the kernel command line (lab_init=PATH), which the
# kernel passes to init as an environment variable.
# shellcheck disable=SC2154
[ -x "/newroot$lab_init" ] || fail "no init at $lab_init on the host root"
mount --move /dev /newroot/dev
umount /proc
exec switch_root /newroot "$lab_init"
