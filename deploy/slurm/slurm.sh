#!/usr/bin/env bash
# The Slurm lane's cluster: one node of Debian's Slurm 22.05 on this machine, for tests
# (platform/slurmtest) and the Runtime's Slurm executor. See deploy/slurm/README.md.
#
#   deploy/slurm/slurm.sh up       install what is missing, start, or reuse the healthy cluster
#   deploy/slurm/slurm.sh down     stop every process, remove the test users and the database
#   deploy/slurm/slurm.sh status   exit 0 when up and healthy (prints what is not)
#
# Environment: METALLO_SLURM_DIR (state, default var/slurm under the repository),
# METALLO_SLURM_CPUS (the node's CPUs, default 8), METALLO_SLURM_MEMORY (the node's memory in MB,
# default 8192).
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(cd "$here/../.." && pwd)

state=${METALLO_SLURM_DIR:-$root/var/slurm}
mkdir -p "$state"
state=$(cd "$state" && pwd)
cpus=${METALLO_SLURM_CPUS:-8}
memory=${METALLO_SLURM_MEMORY:-8192}

# The ports are Slurm's defaults and fixed: one cluster per machine holds them, under the lock.
ctld_port=6817 slurmd_port=6818 dbd_port=6819 rest_port=6820
packages="slurmctld slurmd slurmdbd slurmrestd slurm-client slurm-wlm-jwt-plugin munge"
# The SlurmUser: the unprivileged system user Debian's packages create. slurmctld and slurmdbd
# drop to it; slurmd stays root (it starts jobs as their users); slurmrestd runs as nobody.
slurm_user=slurm
rest_user=nobody rest_group=nogroup
cluster=metallo
partition=batch
# Test users (platform/slurmtest) take uids in this range, each uid once in a cluster's life
# (the counter test-uid.next; see deploy/slurm/README.md, "Test users"); their GECOS field starts
# with the marker, then the hash of the state directory that made them and their creator's pid
# and start.
test_uid_min=70000 test_uid_max=79999
test_marker=metallo-slurmtest

machine_dir=/var/lib/metallo/slurm
lock=$machine_dir/lock
holder=$machine_dir/holder.json

etc=$state/etc conf=$state/etc/slurm.conf dbd_conf=$state/etc/slurmdbd.conf
mdir=$state/munge msock=$state/munge/munge.socket
run=$state/run logs=$state/log
token_file=$state/slurm-user.token
info=$state/slurm.json
dir_hash=$(printf '%s' "$state" | sha256sum | cut -c1-12)
db=metallo_slurm_$dir_hash

export SLURM_CONF=$conf

say() { echo "slurm: $*" >&2; }
die() {
	say "$*"
	exit 1
}
need_root() {
	[ "$(id -u)" = 0 ] || die "make slurm-$1 needs root: it installs packages, starts slurmd (which runs jobs as their users) and manages the test users"
}

# --- installation ---

apt_install() { # apt_install PACKAGE...: with the machine's apt lock, apt-get update on a miss
	command -v apt-get >/dev/null || die "Debian's $* are missing and there is no apt-get here"
	flock /var/lib/metallo-apt.lock env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "$@" >/dev/null 9>&- && return 0
	flock /var/lib/metallo-apt.lock apt-get update -qq >/dev/null 9>&-
	flock /var/lib/metallo-apt.lock env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "$@" >/dev/null 9>&- ||
		die "apt-get install $* failed"
}

ensure_packages() {
	local missing=()
	for p in $packages; do
		dpkg-query -W -f '${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
	done
	if [ ${#missing[@]} -gt 0 ]; then
		say "installing Debian's ${missing[*]}"
		local t0=$SECONDS
		apt_install "${missing[@]}"
		say "installed in $((SECONDS - t0)) s"
	fi
	getent passwd "$slurm_user" >/dev/null || die "the SlurmUser $slurm_user does not exist (Debian's slurm packages create it)"
	getent passwd munge >/dev/null || die "the user munge does not exist (Debian's munge package creates it)"
}

mariadb_up() { mariadb-admin --connect-timeout=2 -u root ping >/dev/null 2>&1; }

ensure_mariadb() {
	if ! command -v mariadbd >/dev/null && ! [ -x /usr/sbin/mariadbd ]; then
		say "installing Debian's mariadb-server (slurmdbd's database)"
		apt_install mariadb-server
	fi
	if ! mariadb_up; then
		say "starting MariaDB"
		install -d -o mysql -g root -m 0755 /run/mysqld
		start-stop-daemon --start --oknodo --background --exec /usr/sbin/mariadbd >/dev/null 8>&- 9>&-
		local i
		for i in $(seq 1 60); do
			mariadb_up && break
			sleep 0.5
		done
		mariadb_up || die "MariaDB did not answer within 30 s after starting it (see its error log)"
	fi
	mariadb -u root -e 'SELECT 1' >/dev/null 2>&1 ||
		die "cannot log in to MariaDB as root over its socket (slurm-up creates slurmdbd's database and user there)"
}

sql() { mariadb -u root --batch --skip-column-names -e "$1"; }

# check_cgroup: jobs' memory is enforced with Slurm's cgroup/v1 plugin, which needs the memory
# controller mounted as cgroup v1 at /sys/fs/cgroup/memory (this machine's kind: the v1
# controllers, and a cgroup2 hierarchy without controllers, so cgroup/v2 could enforce nothing).
# A host with only cgroup v2 needs cgroup/v2 instead (deploy/slurm/README.md).
check_cgroup() {
	[ "$(stat -fc %T /sys/fs/cgroup/memory 2>/dev/null)" = cgroupfs ] && [ -e /sys/fs/cgroup/memory/memory.limit_in_bytes ] && return 0
	die "this host has no cgroup v1 memory controller at /sys/fs/cgroup/memory ($(stat -fc %T /sys/fs/cgroup 2>/dev/null) at /sys/fs/cgroup): the Slurm lane enforces jobs' memory with Slurm's cgroup/v1 plugin (see deploy/slurm/README.md, \"Memory enforcement\")"
}

# --- processes ---

daemons="munged slurmdbd slurmctld slurmd slurmrestd"

pid_of() { # pid_of NAME: the pid the script recorded, when that process still runs that program
	local f=$run/$1.pid pid
	[ -f "$f" ] || return 1
	pid=$(cat "$f")
	[ -n "$pid" ] && [ "$(cat "/proc/$pid/comm" 2>/dev/null)" = "$1" ] && alive "$pid" || return 1
	echo "$pid"
}

alive() { # alive PID: the process exists and is not a zombie (ended, not yet reaped by whoever inherited it)
	local st
	st=$(sed 's/.*) //' "/proc/$1/stat" 2>/dev/null | cut -d' ' -f1) || return 1
	[ -n "$st" ] && [ "$st" != Z ]
}

# start_daemon NAME COMMAND...: in the foreground of its own session, output to log/NAME.out,
# with no descriptor of the caller's but the lock (fd 9): a daemon holding the caller's pipe
# would keep `make slurm-up | tee` waiting for its end.
start_daemon() {
	local name=$1
	shift
	(
		for fd in /proc/$BASHPID/fd/*; do
			case ${fd##*/} in 0 | 1 | 2 | 9) ;; *) eval "exec ${fd##*/}>&-" 2>/dev/null || true ;; esac
		done
		exec setsid "$@" >>"$logs/$name.out" 2>&1 </dev/null
	) &
	echo $! >"$run/$name.pid"
}

# stop_daemons NAME...: SIGTERM to each at once, then SIGKILL to those still running after 20 s.
stop_daemons() {
	local n pid pids=()
	for n in "$@"; do
		if pid=$(pid_of "$n"); then
			kill -TERM "$pid" 2>/dev/null || true
			pids+=("$pid")
		fi
		rm -f "$run/$n.pid"
	done
	[ ${#pids[@]} -gt 0 ] || return 0
	if ! gone_within 200 alive "${pids[@]}"; then
		for pid in "${pids[@]}"; do
			if alive "$pid"; then
				say "$(cat "/proc/$pid/comm" 2>/dev/null) (pid $pid) did not stop within 20 s of SIGTERM: killing it"
				kill -KILL "$pid" 2>/dev/null || true
			fi
		done
		gone_within 50 alive "${pids[@]}" || true
	fi
	# The daemons' parent is whoever inherited them (init, which here reaps every few seconds):
	# wait a little for their process table entries to go too, so that down leaves not even those.
	gone_within 100 exists "${pids[@]}" || true
}

exists() { [ -d "/proc/$1" ]; } # exists PID: in the process table, a zombie included

gone_within() { # gone_within TENTHS PREDICATE PID...: exit 0 once PREDICATE holds for none of them
	local tenths=$1 pred=$2 i pid left
	shift 2
	for i in $(seq 1 "$tenths"); do
		left=0
		for pid in "$@"; do "$pred" "$pid" && left=1; done
		[ $left = 0 ] && return 0
		sleep 0.1
	done
	return 1
}

# job_pids lists the processes in the cluster's job cgroups (proctrack/cgroup puts every
# process of every job there): what a stopped slurmd leaves of jobs it could not end.
job_pids() {
	local d
	for d in /sys/fs/cgroup/freezer/slurm /sys/fs/cgroup/memory/slurm; do
		[ -d "$d" ] || continue
		find "$d" -name cgroup.procs -exec cat {} + 2>/dev/null
	done | sort -u
}

wait_for() { # wait_for SECONDS WHAT COMMAND...: until COMMAND succeeds, or die naming WHAT and the log
	local secs=$1 what=$2 log=$3 deadline
	shift 3
	deadline=$((SECONDS + secs))
	until "$@" >/dev/null 2>&1; do
		if [ $SECONDS -ge $deadline ]; then
			say "$what within $secs s; the last lines of $log:"
			tail -n 20 "$log" >&2 2>/dev/null || true
			exit 1
		fi
		sleep 0.2
	done
}

# --- the machine-wide lock of the ports ---

holder_dir() { sed -n 's/.*"dir": *"\([^"]*\)".*/\1/p' "$holder" 2>/dev/null; }

held_message() {
	local h since
	h=$(holder_dir)
	since=$(sed -n 's/.*"since": *"\([^"]*\)".*/\1/p' "$holder" 2>/dev/null)
	if [ -z "$h" ]; then
		echo "Slurm's ports $ctld_port-$rest_port are held on this machine by a process that left no record in $holder: $(lock_holders)"
	else
		echo "Slurm's ports $ctld_port-$rest_port are held by the Slurm cluster in $h (since $since): stop it there (make slurm-down in that worktree, or METALLO_SLURM_DIR=$h bash deploy/slurm/slurm.sh down) before starting this one"
	fi
}

lock_holders() { # the processes that have the lock file open
	local p out=""
	for p in /proc/[0-9]*; do
		if ls -l "$p/fd" 2>/dev/null | grep -q " $lock\$"; then
			out+="pid ${p#/proc/} ($(tr '\0' ' ' <"$p/cmdline" 2>/dev/null)); "
		fi
	done
	echo "${out:-none}"
}

# take_lock opens the lock as fd 9 and takes it, or dies naming the holder. The daemons inherit
# fd 9 (flock locks belong to the open file); munged, slurmdbd and slurmrestd keep it (slurmctld
# and slurmd close what they inherit), so the kernel releases the lock when the last of those
# ends, however it ends. ports_free covers a slurmctld or slurmd that outlives them.
take_lock() {
	install -d -m 0755 "$machine_dir"
	exec 9>>"$lock"
	if ! flock -n 9; then
		exec 9>&-
		die "$(held_message)"
	fi
	printf '{\n  "dir": "%s",\n  "pid": %d,\n  "since": "%s"\n}\n' "$state" $$ "$(date -u +%Y-%m-%dT%H:%M:%SZ)" >"$holder.tmp"
	mv "$holder.tmp" "$holder"
}

lock_free() { # exit 0 when no process holds the lock
	[ -e "$lock" ] || return 0
	flock -n "$lock" true
}

ports_free() {
	local busy
	busy=$(ss -Hltnp "( sport >= :$ctld_port and sport <= :$rest_port )" 2>/dev/null || true)
	[ -z "$busy" ] && return 0
	die "Slurm's ports $ctld_port-$rest_port are free of the lock but in use: $busy"
}

# --- configuration ---

write_config() {
	local host
	host=$(hostname -s)
	install -d -m 0755 "$etc" "$run" "$logs" "$state/spool/slurmd" "$state/work"
	install -d -m 0700 -o "$slurm_user" -g "$slurm_user" "$state/ctld"
	chown "$slurm_user:$slurm_user" "$logs"
	install -d -m 0755 -o munge -g munge "$mdir"
	[ -f "$state/go.mod" ] || printf 'module metallo.invalid/slurm-state\n' >"$state/go.mod"

	# munge: a key of its own (never /etc/munge's), its own socket, pid, seed and log.
	if [ ! -s "$mdir/munge.key" ]; then
		head -c 1024 /dev/urandom >"$mdir/munge.key.tmp"
		mv "$mdir/munge.key.tmp" "$mdir/munge.key"
	fi
	chown munge:munge "$mdir/munge.key"
	chmod 0400 "$mdir/munge.key"

	# The JWT key slurmctld and slurmdbd sign and verify tokens with (HS256).
	if [ ! -s "$etc/jwt_hs256.key" ]; then
		head -c 32 /dev/urandom >"$etc/jwt_hs256.key.tmp"
		mv "$etc/jwt_hs256.key.tmp" "$etc/jwt_hs256.key"
	fi
	chown "$slurm_user:$slurm_user" "$etc/jwt_hs256.key"
	chmod 0600 "$etc/jwt_hs256.key"

	# slurmdbd's MariaDB password (its user is the database's name, granted only that database).
	if [ ! -s "$etc/db.pass" ]; then
		(umask 077 && head -c 24 /dev/urandom | base64 | tr -dc 'A-Za-z0-9' >"$etc/db.pass")
	fi
	local dbpass
	dbpass=$(cat "$etc/db.pass")

	cat >"$conf.tmp" <<EOF
# Written by deploy/slurm/slurm.sh for the cluster in $state; regenerated at every start.
# Why each setting: deploy/slurm/README.md and docs/testing.md#the-slurm-lane.
ClusterName=$cluster
SlurmctldHost=$host(127.0.0.1)
SlurmctldPort=$ctld_port
SlurmdPort=$slurmd_port
CommunicationParameters=NoInAddrAny
SlurmUser=$slurm_user
SlurmdUser=root
AuthType=auth/munge
AuthInfo=socket=$msock
CredType=cred/munge
AuthAltTypes=auth/jwt
AuthAltParameters=jwt_key=$etc/jwt_hs256.key
StateSaveLocation=$state/ctld
SlurmdSpoolDir=$state/spool/slurmd
SlurmctldPidFile=$run/slurmctld.own.pid
SlurmdPidFile=$run/slurmd.own.pid
SlurmctldLogFile=$logs/slurmctld.log
SlurmdLogFile=$logs/slurmd.log
SlurmctldDebug=info
SlurmdDebug=info
# Members see only their own jobs; root never runs a job; a job is never requeued on its own.
PrivateData=jobs
DisableRootJobs=YES
JobRequeue=0
ReturnToService=2
MpiDefault=none
MailProg=/bin/true
# Memory is enforced in the job's cgroup (cgroup.conf): a job over its memory ends OUT_OF_MEMORY.
ProctrackType=proctrack/cgroup
TaskPlugin=task/cgroup
JobAcctGatherType=jobacct_gather/cgroup
JobAcctGatherFrequency=30
SelectType=select/cons_tres
SelectTypeParameters=CR_Core_Memory
DefMemPerCPU=256
SlurmdParameters=config_overrides
SchedulerType=sched/backfill
PriorityType=priority/basic
# Accounting in slurmdbd: limits and associations enforced, the job's comment stored, and
# neither its environment nor its script (AccountingStoreFlags has no job_env or job_script).
AccountingStorageType=accounting_storage/slurmdbd
AccountingStorageHost=localhost
AccountingStoragePort=$dbd_port
AccountingStoragePass=$msock
AccountingStorageEnforce=limits,associations
AccountingStoreFlags=job_comment
NodeName=$host NodeAddr=127.0.0.1 CPUs=$cpus RealMemory=$memory State=UNKNOWN
PartitionName=$partition Nodes=$host Default=YES MaxTime=INFINITE State=UP
EOF
	mv "$conf.tmp" "$conf"
	chmod 0644 "$conf"

	cat >"$etc/cgroup.conf.tmp" <<EOF
# cgroup v1: this machine mounts the v1 controllers (memory among them) and an empty cgroup2
# hierarchy; see deploy/slurm/README.md, "Memory enforcement".
CgroupPlugin=cgroup/v1
ConstrainRAMSpace=yes
ConstrainSwapSpace=yes
AllowedSwapSpace=0
ConstrainCores=no
ConstrainDevices=no
EOF
	mv "$etc/cgroup.conf.tmp" "$etc/cgroup.conf"
	chmod 0644 "$etc/cgroup.conf"

	(umask 077 && cat >"$dbd_conf.tmp" <<EOF
# Written by deploy/slurm/slurm.sh for the cluster in $state; regenerated at every start.
AuthType=auth/munge
AuthInfo=socket=$msock
AuthAltTypes=auth/jwt
AuthAltParameters=jwt_key=$etc/jwt_hs256.key
DbdHost=localhost
DbdAddr=127.0.0.1
DbdPort=$dbd_port
SlurmUser=$slurm_user
PidFile=$run/slurmdbd.own.pid
LogFile=$logs/slurmdbd.log
DebugLevel=info
PrivateData=jobs
StorageType=accounting_storage/mysql
StorageHost=127.0.0.1
StoragePort=3306
StorageUser=$db
StoragePass=$dbpass
StorageLoc=$db
EOF
	)
	mv "$dbd_conf.tmp" "$dbd_conf"
	chown "$slurm_user:$slurm_user" "$dbd_conf"
	chmod 0600 "$dbd_conf"
}

fresh_database() { # the worktree's own database and user on the machine's MariaDB, empty
	local pass
	pass=$(cat "$etc/db.pass")
	sql "DROP DATABASE IF EXISTS $db; CREATE DATABASE $db;
		CREATE OR REPLACE USER '$db'@'localhost' IDENTIFIED BY '$pass';
		CREATE OR REPLACE USER '$db'@'127.0.0.1' IDENTIFIED BY '$pass';
		GRANT ALL ON $db.* TO '$db'@'localhost'; GRANT ALL ON $db.* TO '$db'@'127.0.0.1';" ||
		die "cannot create slurmdbd's database $db on MariaDB"
}

drop_database() {
	mariadb_up || return 0
	sql "DROP DATABASE IF EXISTS $db; DROP USER IF EXISTS '$db'@'localhost'; DROP USER IF EXISTS '$db'@'127.0.0.1';" ||
		say "could not drop the database $db (left on MariaDB)"
}

# --- health ---

ctl() { timeout "${2:-10}" bash -c "$1" 2>/dev/null; }

node_ready() { # the node answers and takes work
	local s
	s=$(ctl "sinfo -h -N -o %T" 5) || return 1
	case "$s" in idle* | mixed* | allocated* | completing*) return 0 ;; esac
	return 1
}

rest_ready() { # with a token of a minute, so that an expired token file never reads as a sick cluster
	local token code
	token=$(ctl "scontrol token username=$slurm_user lifespan=60" 5) || return 1
	token=${token#SLURM_JWT=}
	code=$(curl -s -o /dev/null -w '%{http_code}' --max-time 5 \
		-H "X-SLURM-USER-NAME: $slurm_user" -H "X-SLURM-USER-TOKEN: $token" \
		"http://127.0.0.1:$rest_port/slurm/v0.0.38/ping") || return 1
	[ "$code" = 200 ]
}

health() { # prints what is wrong; exit 0 when nothing
	local bad=() d
	for d in munged slurmdbd slurmctld slurmd slurmrestd; do
		pid_of "$d" >/dev/null || bad+=("$d is not running")
	done
	if [ ${#bad[@]} -eq 0 ]; then
		ctl "scontrol ping" 5 | grep -q 'is UP' || bad+=("slurmctld does not answer scontrol ping")
		node_ready || bad+=("the node is not idle, mixed or allocated: $(ctl 'sinfo -h -N -o "%T %E"' 5 || echo 'no answer')")
		ctl "sacctmgr -n -P show cluster format=cluster" 10 | grep -qx "$cluster" || bad+=("slurmdbd does not list the cluster $cluster")
		rest_ready || bad+=("slurmrestd does not answer /slurm/v0.0.38/ping on 127.0.0.1:$rest_port with the SlurmUser's token")
	fi
	if [ ${#bad[@]} -gt 0 ]; then
		printf '%s\n' "${bad[@]}"
		return 1
	fi
}

port_listens() { [ -n "$(ss -Hltn "sport = :$1" 2>/dev/null)" ]; }

any_running() {
	local d
	for d in $daemons; do pid_of "$d" >/dev/null && return 0; done
	return 1
}

# --- token and record ---

write_token() {
	local out tok
	out=$(ctl "scontrol token username=$slurm_user lifespan=604800" 10) || die "scontrol token for $slurm_user failed"
	tok=${out#SLURM_JWT=}
	[ -n "$tok" ] && [ "$tok" != "$out" ] || die "scontrol token printed no token: $out"
	(umask 077 && printf '%s\n' "$tok" >"$token_file.tmp")
	chmod 0600 "$token_file.tmp"
	mv "$token_file.tmp" "$token_file"
}

write_info() {
	cat >"$info.tmp" <<EOF
{
  "dir": "$state",
  "conf": "$conf",
  "rest_url": "http://127.0.0.1:$rest_port",
  "slurm_user": "$slurm_user",
  "token_file": "$token_file",
  "cluster": "$cluster",
  "partition": "$partition",
  "node": "$(hostname -s)",
  "work_dir": "$state/work",
  "database": "$db",
  "dir_hash": "$dir_hash",
  "test_uid_min": $test_uid_min,
  "test_uid_max": $test_uid_max,
  "test_marker": "$test_marker"
}
EOF
	mv "$info.tmp" "$info"
}

# --- test users ---

# owner_alive PID START: the process that made a test user still runs
owner_alive() {
	[ -r "/proc/$1/stat" ] || return 1
	[ "$(sed 's/.*) //' "/proc/$1/stat" | cut -d' ' -f20)" = "$2" ]
}

remove_test_users() { # this state directory's, and any whose creator is gone
	local name uid gecos hash pid start
	while IFS=: read -r name _ uid _ gecos _; do
		[ "$uid" -ge $test_uid_min ] && [ "$uid" -le $test_uid_max ] || continue
		case "$gecos" in "$test_marker "*) ;; *) continue ;; esac
		read -r _ hash pid start _ <<<"$gecos"
		if [ "$hash" = "$dir_hash" ] || ! owner_alive "$pid" "$start"; then
			userdel "$name" 2>/dev/null || say "could not remove the test user $name (uid $uid)"
			getent group "$name" >/dev/null && groupdel "$name" 2>/dev/null || true
		fi
	done < <(getent passwd)
	rm -rf "${state:?}/work/"*
}

# --- commands ---

down() {
	local pids p i
	if pid_of slurmctld >/dev/null; then
		# Every job ends first, so no job's processes outlive the cluster.
		ctl "scancel --partition=$partition" 10 >/dev/null || true
		for i in $(seq 1 100); do
			[ -z "$(ctl 'squeue -h -o %i' 5)" ] && break
			sleep 0.2
		done
	fi
	# slurmctld saves its state and reports to slurmdbd as it stops, through munged: those two last.
	stop_daemons slurmrestd slurmd slurmctld
	stop_daemons slurmdbd munged
	pids=$(job_pids)
	if [ -n "$pids" ]; then
		say "ending the processes jobs left in Slurm's cgroups: $(echo $pids)"
		kill -KILL $pids 2>/dev/null || true
	fi
	remove_test_users
	drop_database
	rm -f "$info" "$token_file" "$state/test-uid.next"
	# The record is ours to remove only when no process holds the lock any more.
	if [ "$(holder_dir)" = "$state" ] && lock_free; then rm -f "$holder"; fi
}

all_running() {
	local d
	for d in $daemons; do pid_of "$d" >/dev/null || return 1; done
}

# serialize: one up or down of this state directory at a time (a second make slurm-up waits,
# then reuses what the first started). The daemons do not inherit fd 8.
serialize() {
	exec 8>>"$state/.updown.lock"
	flock 8
}

up() {
	need_root up
	serialize
	ensure_packages
	ensure_mariadb
	if any_running; then
		# Every process alive: a check can fail for seconds on a loaded machine, and a restart
		# would take the cluster from the tests using it, so it must fail for a minute first.
		local deadline=$((SECONDS + 60))
		while all_running && ! health >/dev/null && [ $SECONDS -lt $deadline ]; do sleep 2; done
		if health >/dev/null; then
			write_token
			write_info
			say "reusing the healthy cluster in $state"
			return 0
		fi
		say "the cluster in $state runs but is not healthy ($(health | paste -sd';')): restarting it"
		down
	fi
	local t0=$SECONDS
	check_cgroup
	take_lock
	ports_free
	# A fresh cluster every start: empty controller state, spool and database.
	rm -rf "${state:?}/ctld" "${state:?}/spool" "$run" "$info" "$token_file" "$state/test-uid.next"
	write_config
	fresh_database
	: >"$logs/slurmctld.log"
	: >"$logs/slurmd.log"
	: >"$logs/slurmdbd.log"

	start_daemon munged setpriv --reuid munge --regid munge --init-groups \
		/usr/sbin/munged --foreground --key-file="$mdir/munge.key" --socket="$msock" \
		--pid-file="$mdir/munged.pid" --seed-file="$mdir/munged.seed" --log-file="$mdir/munged.log"
	wait_for 15 "munged did not answer" "$mdir/munged.log" bash -c "munge -n -S '$msock' | unmunge -S '$msock'"

	# slurmdbd reads slurmdbd.conf beside $SLURM_CONF.
	start_daemon slurmdbd /usr/sbin/slurmdbd -D
	wait_for 60 "slurmdbd did not listen on 127.0.0.1:$dbd_port" "$logs/slurmdbd.log" port_listens $dbd_port

	start_daemon slurmctld /usr/sbin/slurmctld -D -f "$conf"
	wait_for 60 "slurmctld did not answer scontrol ping" "$logs/slurmctld.log" bash -c "timeout 5 scontrol ping | grep -q 'is UP'"
	wait_for 30 "slurmdbd did not list the cluster $cluster" "$logs/slurmctld.log" bash -c \
		"timeout 5 sacctmgr -n -P show cluster format=cluster | grep -qx $cluster"

	start_daemon slurmd /usr/sbin/slurmd -D -f "$conf"
	wait_for 60 "the node did not become idle" "$logs/slurmd.log" node_ready

	write_token
	start_daemon slurmrestd env SLURM_JWT=daemon /usr/sbin/slurmrestd -f "$conf" -a rest_auth/jwt \
		-u "$rest_user" -g "$rest_group" "127.0.0.1:$rest_port"
	wait_for 30 "slurmrestd did not answer" "$logs/slurmrestd.out" rest_ready
	exec 9>&-
	write_info
	say "up in $((SECONDS - t0)) s: SLURM_CONF=$conf, REST on http://127.0.0.1:$rest_port, the SlurmUser's token in $token_file"
}

cmd=${1:-}
case "$cmd" in
up) up ;;
down)
	t0=$SECONDS
	need_root down
	serialize
	down
	say "down in $((SECONDS - t0)) s"
	;;
status)
	if out=$(health); then
		echo "up: $state (SLURM_CONF=$conf, REST http://127.0.0.1:$rest_port)"
	else
		if ! any_running && ! lock_free && [ "$(holder_dir)" != "$state" ]; then
			echo "down: $(held_message)"
		else
			echo "down: $(echo "$out" | paste -sd';')"
		fi
		exit 1
	fi
	;;
*)
	echo "usage: $0 up|down|status" >&2
	exit 2
	;;
esac
