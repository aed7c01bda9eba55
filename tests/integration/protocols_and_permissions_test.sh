#!/usr/bin/env bash
# NFSv3, v4.0, v4.1 and v4.2 kernel clients through nache (Ganesha
# translates v3 to the same FSAL), and the remote's permission decisions
# applied to the caller's forwarded AUTH_SYS identity.
set -uo pipefail
source "$(dirname "$0")/itest.sh"

lab_up lan 1 || { echo "lab did not start"; exit 1; }
R=$LAB_REMOTE_EXPORT_DIR

works_with() {  # works_with VERS
	local v=$1 m=/mnt/v$1 d=$R/v$1
	mount_nache 1 $m "vers=$v" &&
		on 1 "mkdir $m/v$v && echo data-$v > $m/v$v/f && mv $m/v$v/f $m/v$v/g && cat $m/v$v/g && ls $m/v$v" >"$LAB_DIR/out" &&
		expect_eq "client" "$(cat "$LAB_DIR/out")" "$(printf 'data-%s\ng' "$v")" &&
		expect_eq "server" "$(cat $d/g)" "data-$v" &&
		on 1 "rm $m/v$v/g && rmdir $m/v$v" && [ ! -e $d ] &&
		on 1 "grep ' $m ' /proc/mounts" | grep -q "vers=$v"
}

setup_private_files() {
	mkdir -p $R/priv
	echo secret >$R/priv/only1000
	chown 1000:1000 $R/priv/only1000
	chmod 600 $R/priv/only1000
	chown 1000:1000 $R/priv
	chmod 755 $R/priv
	mount_nache 1 /mnt/p vers=4.1
}

owner_reads_private_file() {
	expect_eq "uid 1000 reads" "$(lab_client_run_as 1 1000 1000 "cat /mnt/p/priv/only1000")" secret
}

other_uid_is_denied_read() {
	local out rc=0
	out=$(lab_client_run_as 1 2000 2000 "cat /mnt/p/priv/only1000" 2>&1) || rc=$?
	[ $rc != 0 ] && [[ $out == *"Permission denied"* ]] ||
		{ echo "uid 2000 read: rc=$rc out=$out" >&2; return 1; }
}

other_uid_is_denied_create() {
	local out rc=0
	out=$(lab_client_run_as 1 2000 2000 "echo x > /mnt/p/priv/intruder" 2>&1) || rc=$?
	[ $rc != 0 ] && [[ $out == *"Permission denied"* ]] && [ ! -e $R/priv/intruder ] ||
		{ echo "uid 2000 create: rc=$rc out=$out" >&2; return 1; }
}

created_file_belongs_to_caller() {
	lab_client_run_as 1 1000 1000 "echo mine > /mnt/p/priv/new" &&
		expect_eq "owner on server" "$(stat -c %u:%g $R/priv/new)" 1000:1000
}

supplementary_group_grants_access() {
	mkdir -p $R/grp && chown 0:4242 $R/grp && chmod 770 $R/grp &&
		lab_client_run "1" "setpriv --reuid 3000 --regid 3000 --groups 4242 sh -c 'echo g > /mnt/p/grp/f'" &&
		expect_eq "server" "$(cat $R/grp/f)" g &&
		! lab_client_run_as 1 3001 3001 "ls /mnt/p/grp" 2>/dev/null
}

check nfsv3_client_works works_with 3
check nfsv4.0_client_works works_with 4.0
check nfsv4.1_client_works works_with 4.1
check nfsv4.2_client_works works_with 4.2
check setup_private_files setup_private_files
check owner_reads_private_file owner_reads_private_file
check permission_denied_for_uid_the_remote_forbids other_uid_is_denied_read
check create_denied_for_uid_the_remote_forbids other_uid_is_denied_create
check created_file_belongs_to_caller created_file_belongs_to_caller
check supplementary_groups_are_forwarded supplementary_group_grants_access
itest_finish
