# nache benchmark: Filebench "webserver" personality with Zipf-distributed
# file popularity.
#
# As webserver.f, but each open picks its file by index from a tabular
# random variable whose power-of-two index ranges carry Zipf(1) weights
# (the table below is for 1000 files; bench/driver/fbdriver.py recomputes
# it for the scale's $nfiles and rewrites the file as described in
# webserver.f).  (No "type=tabular": with a randtable Filebench 22620e6
# logs that type as an error although it uses the table.)

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

set $fileidx = randvar(min=0, round=1, seed=$seed, randtable = {{15, 0, 0}, {11, 1, 2}, {10, 3, 6}, {10, 7, 14}, {9, 15, 30}, {9, 31, 62}, {9, 63, 126}, {9, 127, 254}, {9, 255, 510}, {9, 511, 999}})

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

echo "webserver-zipf personality (nache bench) loaded"
run 60
