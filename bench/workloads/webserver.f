# nache benchmark: Filebench "webserver" personality.
#
# Readers open, read whole and close ten files of a read-only file set per
# loop, then append to a log.  bench/driver/fbdriver.py rewrites the `set`
# lines with the chosen scale (bench/README.md) and drops `run`: on the
# server it adds "create files" (the file sets, made where no proxy sees
# them); in a client it marks the sets trusttree, creates them over a local
# shadow of the server's tree, points $dir (and $logdir, the log's own
# directory, so that clients sharing a set each keep their own log) at the
# mount, waits at the runner's barrier and runs for the duration.

set $dir=/tmp
set $logdir=/tmp
set $nfiles=1000
set $meandirwidth=20
set $meanfilesize=16k
set $nthreads=100
set $iosize=1m
set $meanappendsize=16k
set $logfiles=1
set $seed=1

# Which file each open reads: uniform over the set's indexes, drawn from a
# generator of this process's own, seeded per client (fbdriver.py --seed).
# A bare openfile draws from Filebench's one unseeded generator: every
# client would open the same files in the same order at the same time.
set $fileidx = randvar(min=0, round=1, seed=$seed, randtable = {{100, 0, 999}})

define fileset name=bigfileset,path=$dir,size=$meanfilesize,entries=$nfiles,dirwidth=$meandirwidth,prealloc=100,readonly,reuse
define fileset name=logfiles,path=$logdir,size=$meanfilesize,entries=$logfiles,dirwidth=$meandirwidth,prealloc,reuse

define process name=filereader,instances=1
{
  thread name=filereaderthread,memsize=1m,instances=$nthreads
  {
    flowop openfile name=openfile1,filesetname=bigfileset,indexed=$fileidx,fd=1
    flowop readwholefile name=readfile1,fd=1,iosize=$iosize
    flowop closefile name=closefile1,fd=1
    flowop openfile name=openfile2,filesetname=bigfileset,indexed=$fileidx,fd=1
    flowop readwholefile name=readfile2,fd=1,iosize=$iosize
    flowop closefile name=closefile2,fd=1
    flowop openfile name=openfile3,filesetname=bigfileset,indexed=$fileidx,fd=1
    flowop readwholefile name=readfile3,fd=1,iosize=$iosize
    flowop closefile name=closefile3,fd=1
    flowop openfile name=openfile4,filesetname=bigfileset,indexed=$fileidx,fd=1
    flowop readwholefile name=readfile4,fd=1,iosize=$iosize
    flowop closefile name=closefile4,fd=1
    flowop openfile name=openfile5,filesetname=bigfileset,indexed=$fileidx,fd=1
    flowop readwholefile name=readfile5,fd=1,iosize=$iosize
    flowop closefile name=closefile5,fd=1
    flowop openfile name=openfile6,filesetname=bigfileset,indexed=$fileidx,fd=1
    flowop readwholefile name=readfile6,fd=1,iosize=$iosize
    flowop closefile name=closefile6,fd=1
    flowop openfile name=openfile7,filesetname=bigfileset,indexed=$fileidx,fd=1
    flowop readwholefile name=readfile7,fd=1,iosize=$iosize
    flowop closefile name=closefile7,fd=1
    flowop openfile name=openfile8,filesetname=bigfileset,indexed=$fileidx,fd=1
    flowop readwholefile name=readfile8,fd=1,iosize=$iosize
    flowop closefile name=closefile8,fd=1
    flowop openfile name=openfile9,filesetname=bigfileset,indexed=$fileidx,fd=1
    flowop readwholefile name=readfile9,fd=1,iosize=$iosize
    flowop closefile name=closefile9,fd=1
    flowop openfile name=openfile10,filesetname=bigfileset,indexed=$fileidx,fd=1
    flowop readwholefile name=readfile10,fd=1,iosize=$iosize
    flowop closefile name=closefile10,fd=1
    flowop appendfilerand name=appendlog,filesetname=logfiles,iosize=$meanappendsize,fd=11
  }
}

echo "webserver personality (nache bench) loaded"
run 60
